/* fuzz_cors.c - the CORS policy (http/cors.h): the input is four fields
 * separated by newlines: an allowed-origins list, an Origin, a requested
 * method and requested headers. */
#include <string.h>

#include "fuzz.h"
#include "http/cors.h"

/* The next field of [*p, end): up to a newline. */
static const uint8_t *field(const uint8_t **p, const uint8_t *end, size_t *n)
{
    const uint8_t *s = *p, *nl = s < end ? memchr(s, '\n', (size_t)(end - s)) : NULL;
    *n = nl ? (size_t)(nl - s) : (size_t)(end - s);
    *p = nl ? nl + 1 : end;
    return s;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *p = data, *end = data + size;
    size_t ln, on, mn, hn;
    const uint8_t *l = field(&p, end, &ln), *o = field(&p, end, &on), *m = field(&p, end, &mn),
                  *h = field(&p, end, &hn);
    char *list = fuzz_string(l, ln), *origin = fuzz_copy(o, on), *method = fuzz_copy(m, mn),
         *hdrs = fuzz_copy(h, hn);
    char norm[SK_CORS_LIST_MAX], again[SK_CORS_LIST_MAX], err[200];
    int rc = sk_cors_parse_list(list, norm, sizeof norm, err, sizeof err);
    FUZZ_CHECK(rc == 0 || rc == -1);
    if (rc == 0) {
        /* the normal form is a fixed point, and each entry is allowed */
        FUZZ_CHECK(sk_cors_parse_list(norm, again, sizeof again, err, sizeof err) == 0);
        FUZZ_CHECK(strcmp(norm, again) == 0);
        FUZZ_CHECK(strchr(norm, '*') == NULL && strchr(norm, ' ') == NULL);
        for (char *s = again, *tok; (tok = strtok(s, ",")) != NULL; s = NULL)
            FUZZ_CHECK(sk_cors_allowed(norm, tok, strlen(tok)));
        int ok = sk_cors_allowed(norm, origin, on);
        enum sk_cors_verdict v = sk_cors_preflight(norm, origin, on, method, mn, hdrs, hn);
        FUZZ_CHECK(v >= SK_CORS_OK && v <= SK_CORS_BAD_HEADERS);
        FUZZ_CHECK(ok == (v != SK_CORS_BAD_ORIGIN));
        FUZZ_CHECK(sk_cors_verdict_text(v) != NULL);
        if (!norm[0]) FUZZ_CHECK(!ok);
    }
    free(list);
    free(origin);
    free(method);
    free(hdrs);
    return 0;
}
