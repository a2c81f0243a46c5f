/* fuzz_order_id.c - order ids (engine/order_id.h) on any bytes: what parses
 * is one of the three shapes, formats back to the same bytes, and names its
 * key set's label. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "engine/keys.h"
#include "engine/order_id.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf = fuzz_copy(data, size);
    struct sk_oid id;
    memset(&id, 0x5a, sizeof id);
    int rc = sk_oid_parse(buf, size, &id);
    FUZZ_CHECK(rc == 0 || rc == SK_EINVAL);
    if (rc == 0) {
        FUZZ_CHECK(id.activity_id >= 1 && id.label_len >= 1 && id.label_len < size);
        FUZZ_CHECK(id.seg == SK_SEG_NONE || id.seg >= 0);
        size_t bl = strnlen(id.branch, sizeof id.branch);
        FUZZ_CHECK(bl == 0 || sk_oid_branch_ok(id.branch, bl));
        FUZZ_CHECK(id.index == SK_OID_NO_INDEX ||
                   (bl > 0 && id.index >= 0 && id.index < SK_OID_INDEX_MAX));
        /* the label, the stream id, the branch and the index give the bytes back */
        char label[SK_LABEL_MAX], sid[48], again[256];
        FUZZ_CHECK(id.label_len < sizeof label);
        memcpy(label, buf, id.label_len);
        label[id.label_len] = 0;
        int n = snprintf(sid, sizeof sid, "%" PRIu64 "-%" PRIu64, id.sid.ms, id.sid.seq);
        FUZZ_CHECK(n > 0 && (size_t)n < sizeof sid);
        FUZZ_CHECK(sk_oid_format(again, sizeof again, label, sid, (size_t)n, id.branch, bl,
                                 id.index) == 0);
        FUZZ_CHECK(strlen(again) == size && memcmp(again, buf, size) == 0);
        uint64_t aid;
        int seg;
        FUZZ_CHECK(sk_keys_parse_label(buf, size, &aid, &seg) == (int)id.label_len);
        FUZZ_CHECK(aid == id.activity_id && seg == id.seg);
    }
    free(buf);
    return 0;
}
