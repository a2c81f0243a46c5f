/* fuzz_redis_url.c - Redis URLs (redis/redis_url.h) and the redaction of
 * secrets in logged URLs (core/redact.h) on any bytes. */
#include <string.h>

#include "core/error.h"
#include "core/redact.h"
#include "fuzz.h"
#include "redis/redis_url.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf = fuzz_copy(data, size);
    struct sk_redis_url u;
    char err[160];
    int rc = sk_redis_url_parse(&u, buf, size, err, sizeof err);
    FUZZ_CHECK(rc == 0 || (rc == SK_EINVAL && err[0]));
    if (rc == 0) {
        /* a unix socket's host is its path and its port 0 */
        FUZZ_CHECK(u.host[0] && (u.unix_sock ? u.port == 0 : u.port >= 1 && u.port <= 65535));
        FUZZ_CHECK(u.nseeds >= 1 && u.nseeds <= SK_REDIS_URL_MAX_SEEDS);
        FUZZ_CHECK(u.cluster + u.sentinel + u.unix_sock <= 1);
        FUZZ_CHECK(u.sentinel ? u.master_name[0] != 0 : u.master_name[0] == 0);
        for (int i = 0; i < u.nseeds; i++)
            FUZZ_CHECK(u.unix_sock ||
                       (u.seeds[i].host[0] && u.seeds[i].port >= 1 && u.seeds[i].port <= 65535));
        FUZZ_CHECK(memchr(u.pass, 0, sizeof u.pass) && memchr(u.user, 0, sizeof u.user));
        FUZZ_CHECK(u.cluster ? u.db == 0 : u.db >= 0);
    }
    char *str = fuzz_string(data, size);
    char out[300];
    const char *r = sk_redact_url(str, out, sizeof out);
    FUZZ_CHECK(r == out && memchr(out, 0, sizeof out) != NULL);
    /* the user info of the redacted URL (between "://" and the last '@')
     * never holds the password parsed from the URL (one of 4 bytes or
     * more, not made of the separators themselves, not the user name) */
    if (rc == 0 && strlen(u.pass) >= 4 && !strpbrk(u.pass, ":/*@") && !strchr(str, '%') &&
        size < sizeof out && !strstr(u.user, u.pass)) {
        const char *from = strstr(out, "://"), *to = strrchr(out, '@');
        if (from && to && to > from) {
            char info[300];
            size_t n = (size_t)(to - from);
            memcpy(info, from, n);
            info[n] = 0;
            FUZZ_CHECK(strstr(info, u.pass) == NULL);
        }
    }
    free(str);
    free(buf);
    return 0;
}
