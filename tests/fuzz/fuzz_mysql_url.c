/* fuzz_mysql_url.c - the MySQL / MariaDB store URL (store/mysql_url.h) on
 * any bytes: accepted URLs are whole (a database, a host or a socket, a
 * bounded timeout), refusals say why and never repeat the password. */
#include <string.h>

#include "core/error.h"
#include "fuzz.h"
#include "store/mysql_url.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf = fuzz_copy(data, size);
    struct sk_mysql_url u;
    char err[200];
    int rc = sk_mysql_url_parse(&u, buf, size, err, sizeof err);
    FUZZ_CHECK(rc == 0 || (rc == SK_EINVAL && err[0]));
    if (rc == 0) {
        FUZZ_CHECK(u.dbname[0] && (u.host[0] || u.socket[0]));
        FUZZ_CHECK(u.port >= 1 && u.port <= 65535);
        FUZZ_CHECK(u.timeout_s >= 1 && u.timeout_s <= 3600);
        FUZZ_CHECK(u.ssl_mode >= SK_MYSQL_SSL_DISABLED &&
                   u.ssl_mode <= SK_MYSQL_SSL_VERIFY_IDENTITY);
        FUZZ_CHECK(u.socket[0] == 0 || u.socket[0] == '/');
        FUZZ_CHECK(memchr(u.password, 0, sizeof u.password) && memchr(u.user, 0, sizeof u.user));
        /* where never depends on the password: the same text with another
         * password (a substring test would trip on a password that is also
         * the port's digits) */
        char where[192], where2[192];
        struct sk_mysql_url other = u;
        memset(other.password, 'x', sizeof other.password - 1);
        other.password[sizeof other.password - 1] = 0;
        sk_mysql_url_where(&u, where, sizeof where);
        sk_mysql_url_where(&other, where2, sizeof where2);
        FUZZ_CHECK(strcmp(where, where2) == 0);
    } else {
        /* a refusal never repeats the user info (the password is in it),
         * unless the same text is also a parameter's name, which is named */
        char *str = fuzz_string(data, size);
        const char *sep = strstr(str, "://");
        const char *slash = sep ? strchr(sep + 3, '/') : NULL;
        const char *at = NULL;
        for (const char *q = sep ? sep + 3 : str; slash && q < slash; q++)
            if (*q == '@') at = q;
        /* user:password with a password, in a URL of the right scheme (the
         * fixed texts of the messages hold no ':' but in "mysql://") */
        const char *colon = at ? memchr(sep + 3, ':', (size_t)(at - (sep + 3))) : NULL;
        if (sk_mysql_url_is(str) && colon && colon + 1 < at && colon[1] != ' ' &&
            at - (sep + 3) >= 4) {
            char info[256];
            size_t n = (size_t)(at - (sep + 3));
            if (n < sizeof info) {
                memcpy(info, sep + 3, n);
                info[n] = 0;
                /* the same bytes with the password's characters changed:
                 * a refusal that does not take them in says the same (a
                 * parameter's name may hold the password's text and, with
                 * the quote the message closes it with, all of the user
                 * info: found by the fuzzer, not a leak) */
                char *alt = fuzz_copy(data, size);
                for (size_t i = (size_t)(colon + 1 - str); i < (size_t)(at - str); i++)
                    alt[i] = 'x';
                struct sk_mysql_url u2;
                char err2[200];
                int same = sk_mysql_url_parse(&u2, alt, size, err2, sizeof err2) == rc &&
                           strcmp(err, err2) == 0;
                free(alt);
                const char *qm = strchr(at, '?');
                if (!same && (!qm || !strstr(qm, info))) FUZZ_CHECK(strstr(err, info) == NULL);
            }
        }
        free(str);
    }
    free(buf);
    return 0;
}
