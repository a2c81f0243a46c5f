/* fuzz_http_body.c - the request bodies of the HTTP API and JSON escaping
 * (http/http_body.h) on any bytes. */
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "core/error.h"
#include "fuzz.h"
#include "http/http_body.h"
#include "orders/webhook_filter.h"
#include "orders/webhook_sign.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf = fuzz_copy(data, size);
    char err[160];
    int64_t q = -7;
    int rc = sk_body_purchase(buf, size, &q, err, sizeof err);
    FUZZ_CHECK(rc == 0 || rc == SK_EINVAL || rc == SK_ENOMEM);
    FUZZ_CHECK(memchr(err, 0, sizeof err) != NULL);
    if (rc == 0) FUZZ_CHECK(q >= 1 && q <= SK_BODY_QUANTITY_MAX);
    if (rc == SK_EINVAL) FUZZ_CHECK(q == -7 && err[0]);

    struct sk_activity a;
    rc = sk_body_activity_create(buf, size, &a, err, sizeof err);
    FUZZ_CHECK(rc == 0 || rc == SK_EINVAL || rc == SK_ENOMEM);
    if (rc == 0) {
        FUZZ_CHECK(a.id >= 1 && a.id <= (uint64_t)SK_BODY_ID_MAX);
        FUZZ_CHECK(a.stock >= 1 && a.per_user_limit >= 1);
        FUZZ_CHECK(a.max_per_order >= 1 && a.max_per_order <= a.per_user_limit);
        FUZZ_CHECK(a.start_ms < a.end_ms && memchr(a.name, 0, sizeof a.name));
    }

    /* the webhook endpoints' bodies: a name, URL, filter and secret that
     * passed are ones the dispatcher takes */
    struct sk_body_webhook wb;
    rc = sk_body_webhook_add(buf, size, &wb, err, sizeof err);
    FUZZ_CHECK(rc == 0 || rc == SK_EINVAL || rc == SK_ENOMEM);
    if (rc == 0) {
        FUZZ_CHECK(sk_body_wh_name_ok(wb.name, strlen(wb.name)));
        FUZZ_CHECK(!strncmp(wb.url, "http://", 7) || !strncmp(wb.url, "https://", 8));
        FUZZ_CHECK(sk_wh_filter_check(wb.events, err, sizeof err) == 0);
        struct sk_wh_key k;
        FUZZ_CHECK(!wb.secret[0] || sk_wh_key_parse(wb.secret, &k, err, sizeof err) == 0);
    } else {
        FUZZ_CHECK(!wb.name[0] && !wb.secret[0] && err[0]);
    }
    char secret[100];
    int64_t keep = -1, since = -1;
    rc = sk_body_webhook_rotate(buf, size, secret, sizeof secret, &keep, err, sizeof err);
    FUZZ_CHECK(rc == 0 || rc == SK_EINVAL || rc == SK_ENOMEM);
    if (rc == 0) FUZZ_CHECK(keep >= 0 && keep <= SK_BODY_WH_KEEP_MAX);
    rc = sk_body_webhook_replay(buf, size, &since, err, sizeof err);
    FUZZ_CHECK(rc == 0 || rc == SK_EINVAL || rc == SK_ENOMEM);
    if (rc == 0) FUZZ_CHECK(since >= 0);

    /* escaping: always valid JSON text between quotes, and the same bytes
     * back through a JSON parser when the input was valid UTF-8 */
    size_t cap = 6 * size + 1;
    char *esc = malloc(cap + 2);
    if (!esc) abort();
    esc[0] = '"';
    int n = sk_body_json_escape(buf, size, esc + 1, cap);
    FUZZ_CHECK(n >= 0 && (size_t)n < cap);
    esc[n + 1] = '"';
    json_error_t je;
    json_t *j = json_loadb(esc, (size_t)n + 2, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
    FUZZ_CHECK(j != NULL && json_is_string(j));
    json_decref(j);
    free(esc);
    /* no room at all: nothing written (ASan watches the byte past zero) */
    char *none = malloc(1);
    if (!none) abort();
    FUZZ_CHECK(sk_body_json_escape(buf, size, none + 1, 0) == SK_ENOMEM);
    free(none);

    char *str = fuzz_string(data, size);
    char out[512];
    rc = sk_body_error_json("bad_request", str, out, sizeof out);
    FUZZ_CHECK(rc == SK_ENOMEM || (rc > 0 && (size_t)rc < sizeof out && out[rc] == 0));
    free(str);
    free(buf);
    return 0;
}
