/* mysql_url.h - parse the MySQL / MariaDB store URL (bytes in, no I/O):
 *
 *   mysql://[USER[:PASSWORD]@]HOST[:PORT]/DBNAME[?PARAM=VALUE&...]
 *   mariadb://...                       the same
 *
 * HOST is a name, an IPv4 address or [IPv6]; PORT defaults to 3306.
 * USER, PASSWORD, DBNAME and parameter values are percent-decoded.
 * Parameters:
 *   socket=/path          a unix socket instead of TCP (HOST is then
 *                         ignored and may be empty: mysql://u:p@/db?socket=...)
 *   connect_timeout=S     1..3600 s (default 5): bounds connecting and
 *                         every wait for an answer (read, write)
 *   ssl-mode=MODE         disabled (default) | preferred | required |
 *                         verify_identity (server certificate and name
 *                         checked against ssl-ca, or the system's CAs)
 *   ssl-ca=/path          CA file for verify_identity
 * An unknown parameter is refused (by name: a typo must not pass silently).
 * Error text never repeats the URL or any part of it but parameter names. */
#ifndef SK_MYSQL_URL_H
#define SK_MYSQL_URL_H
#include <stddef.h>

#define SK_MYSQL_URL_MAX 4096
#define SK_MYSQL_PORT_DEFAULT 3306
#define SK_MYSQL_TIMEOUT_DEFAULT_S 5

enum sk_mysql_ssl {
    SK_MYSQL_SSL_DISABLED = 0,
    SK_MYSQL_SSL_PREFERRED,
    SK_MYSQL_SSL_REQUIRED,
    SK_MYSQL_SSL_VERIFY_IDENTITY,
};

struct sk_mysql_url {
    char user[81];      /* "" : the client library's default (the login name) */
    char password[256]; /* "" : none */
    char host[256];     /* "" only with socket */
    int port;
    char socket[108]; /* "" : TCP (sun_path holds 108 bytes) */
    char dbname[65];  /* never "" */
    int timeout_s;    /* connect_timeout, default SK_MYSQL_TIMEOUT_DEFAULT_S */
    int ssl_mode;     /* enum sk_mysql_ssl */
    char ssl_ca[256]; /* "" : none */
};

/* Parses len bytes of s (mysql:// or mariadb://) into *u (the caller's).
 * Returns 0, or SK_EINVAL with a reason in err (errcap bytes) that holds
 * no part of the URL. */
int sk_mysql_url_parse(struct sk_mysql_url *u, const char *s, size_t len, char *err, size_t errcap);

/* 1 when spec names this backend (starts with mysql:// or mariadb://). */
int sk_mysql_url_is(const char *spec);

/* "host:port/db" or "socket/db" (never the user or password) into out
 * (cap bytes). Returns out. */
const char *sk_mysql_url_where(const struct sk_mysql_url *u, char *out, size_t cap);

#endif
