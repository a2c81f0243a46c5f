/* test_order_id.c - order ids (engine/order_id.h): the three shapes parse
 * into their parts and format back to the same bytes; everything else is
 * refused. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "engine/keys.h"
#include "engine/order_id.h"
#include "support/harness.h"

SK_TEST(order_ids_of_the_three_shapes_parse_into_their_parts_and_format_back)
{
    static const struct {
        const char *id;
        uint64_t aid;
        int seg;
        uint64_t ms, seq;
        const char *branch;
        int index;
    } ok[] = {
        {"7-1700000000000-0", 7, SK_SEG_NONE, 1700000000000ULL, 0, "", SK_OID_NO_INDEX},
        {"7-1700000000000-3-0123abcd", 7, SK_SEG_NONE, 1700000000000ULL, 3, "0123abcd",
         SK_OID_NO_INDEX},
        {"7-1700000000000-3-0123abcd-0", 7, SK_SEG_NONE, 1700000000000ULL, 3, "0123abcd", 0},
        {"7.5-1-2-ffffffff-1023", 7, 5, 1, 2, "ffffffff", 1023},
        {"1001-1796169985648-12-b1aa3890-17", 1001, SK_SEG_NONE, 1796169985648ULL, 12, "b1aa3890",
         17},
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        struct sk_oid id;
        CHECK_MSG(sk_oid_parse(ok[i].id, strlen(ok[i].id), &id) == 0, "refused %s", ok[i].id);
        CHECK_EQ(id.activity_id, ok[i].aid);
        CHECK_EQ(id.seg, ok[i].seg);
        CHECK(id.sid.ms == ok[i].ms && id.sid.seq == ok[i].seq);
        CHECK_STR(id.branch, ok[i].branch);
        CHECK_EQ(id.index, ok[i].index);
        char label[SK_LABEL_MAX], sid[48], again[96];
        snprintf(label, sizeof label, "%.*s", (int)id.label_len, ok[i].id);
        int n = snprintf(sid, sizeof sid, "%" PRIu64 "-%" PRIu64, id.sid.ms, id.sid.seq);
        CHECK_EQ(sk_oid_format(again, sizeof again, label, sid, (size_t)n, id.branch,
                               strlen(id.branch), id.index),
                 0);
        CHECK_STR(again, ok[i].id);
    }
    static const char *const bad[] = {
        "7-1-2-0123abcd-",      /* an empty index */
        "7-1-2-0123abcd-01",    /* a leading zero */
        "7-1-2-0123abcd-1024",  /* beyond an entry */
        "7-1-2-0123abcd-99999", /* too long */
        "7-1-2-0123abcd--1",    /* a sign */
        "7-1-2-0123abcd-1-2",   /* a sixth part */
        "7-1-2-0123ABCD-1",     /* an upper-case branch */
        "7-1-2-0123abc-1",      /* a short branch */
        "7-1-2-1",              /* an index without a branch */
        "7-1-2-0123abcd-x",     /* not a number */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct sk_oid id;
        CHECK_MSG(sk_oid_parse(bad[i], strlen(bad[i]), &id) == SK_EINVAL, "accepted %s", bad[i]);
    }
    char out[96];
    /* an index needs a branch, and must be a place in an entry */
    CHECK_EQ(sk_oid_format(out, sizeof out, "7", "1-2", 3, NULL, 0, 0), SK_EINVAL);
    CHECK_EQ(sk_oid_format(out, sizeof out, "7", "1-2", 3, "0123abcd", 8, SK_OID_INDEX_MAX),
             SK_EINVAL);
    CHECK_EQ(sk_oid_format(out, 16, "7", "1-2", 3, "0123abcd", 8, 5), SK_EINVAL); /* no room */
}
