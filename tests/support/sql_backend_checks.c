/* sql_backend_checks.c - the steps the SQL backends' test files share
 * (sql_backend_checks.h). */
#include "support/sql_backend_checks.h"

#include <stdio.h>
#include <string.h>

#include "core/clock.h"
#include "core/error.h"
#include "support/fixtures.h"
#include "support/harness.h"

void sk_th_open_unreachable(const char *url, const char *secret)
{
    sk_store *st = (sk_store *)1;
    char err[512];
    int64_t t0 = sk_mono_ms();
    CHECK_EQ(sk_store_open(&st, url, err, sizeof err), SK_EDB);
    CHECK(sk_mono_ms() - t0 < 3000);
    CHECK(st == NULL);
    CHECK_MSG(strstr(err, "cannot connect") != NULL, "reason: %s", err);
    CHECK_MSG(!strstr(err, secret), "password echoed: %s", err);
}

int sk_th_db_cli(const char *db, const char *cmd, char *out, size_t cap, const char *const *args)
{
    return sk_th_run_with_db(out, cap, cmd, args, sk_th_redis_url(), db);
}

struct sk_mark *sk_th_marks_n(sk_store *st, uint64_t activity_id, size_t n)
{
    struct sk_mark *m;
    size_t got;
    CHECK_EQ(sk_store_marks_list(st, activity_id, &m, &got), 0);
    CHECK_EQ(got, n);
    return m;
}

void sk_th_store_fault_on(const struct sk_th_db_server *d,
                          void (*create_db)(void *srv, const char *name, char *url, size_t cap),
                          int fault)
{
    char base[200], url[256], err[512];
    create_db(d->srv, "fault", base, sizeof base);
    /* connect_timeout=2: every wait for the server is bounded by 2 s. */
    snprintf(url, sizeof url, "%s?connect_timeout=2", base);
    sk_store *st;
    CHECK_MSG(sk_store_open(&st, url, err, sizeof err) == 0, "open %s: %s", url, err);
    struct sk_activity a;
    sk_th_activity_valid(&a, 1);
    a.stock = 1000;
    CHECK_MSG(sk_store_activity_insert(st, &a) == 0, "insert: %s", sk_store_errstr(st));
    if (fault == 2)
        sk_th_store_fault_frozen(st, d);
    else
        sk_th_store_fault_stopped(st, d, fault);
    sk_store_close(st);
}
