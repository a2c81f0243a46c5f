/* test_webhook_lag.c - the webhook lag an operator alerts on must not read
 * "caught up" while the dispatcher cannot read the outbox: a real serve
 * (HTTP, worker, dispatcher) on a private PostgreSQL, a receiver of the
 * tests' own, the server stopped for real and started again. */
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "support/buyer_http.h"
#include "support/fixtures.h"
#include "support/harness.h"
#include "support/http_client.h"
#include "support/pg_harness.h"
#include "support/webhook_rx.h"

#define SECRET "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

/* The endpoint erp's figure `name` on serve's /metrics; -1 when absent. */
static double erp_metric(int port, const char *name)
{
    static char met[1 << 20];
    char key[120];
    if (sk_th_http_get_big(port, "/metrics", met, sizeof met) != 200) return -1;
    snprintf(key, sizeof key, "\n%s{endpoint=\"erp\"} ", name);
    const char *p = strstr(met, key);
    return p ? strtod(p + strlen(key), NULL) : -1;
}

/* Polls erp's lag until ok(lag) or the deadline; the last value read. */
static double lag_until(int port, int (*ok)(double), int64_t within_ms)
{
    int64_t deadline = sk_mono_ms() + within_ms;
    double v;
    while (!ok(v = erp_metric(port, "seckill_webhook_lag_seconds")) && sk_mono_ms() < deadline)
        poll(NULL, 0, 50);
    return v;
}

static int caught_up(double v)
{
    return v == 0;
}
static int behind(double v)
{
    return v >= 2.0;
}

/* Delivered, then the store stopped: the lag grows with the outage (it
 * read 0 before, and an alert on it never fired); the store back, the
 * dispatcher catches up and the lag is 0 again with every event in. */
SK_TEST_T(webhook_lag_grows_while_the_dispatcher_cannot_read_the_store, 120)
{
    struct sk_th_pg pg;
    sk_th_pg_start(&pg);
    char db[300], conf[400], text[200], url[100];
    sk_th_pg_create_db(&pg, "lag", db, sizeof db);
    const char *secrets[] = {SECRET, NULL};
    struct sk_th_rx *rx = sk_th_rx_start(41, secrets, 0);
    snprintf(conf, sizeof conf, "%s/lag.conf", sk_th_tmpdir());
    snprintf(text, sizeof text,
             "webhook_name = erp\nwebhook_secret = %s\nwebhook_settle_ms = 1000\n", SECRET);
    sk_th_write_file(conf, text);
    snprintf(url, sizeof url, "http://127.0.0.1:%d/hook", sk_th_rx_port(rx));
    const char *extra[] = {"--db", db, "--config", conf, "--webhook-url", url, NULL};
    struct sk_th_serve sv;
    sk_th_serve_start(&sv, sk_th_redis_url(), extra);
    struct sk_th_http c;
    sk_th_http_open(&c, sv.port);
    struct sk_th_resp r;
    uint64_t aid = sk_th_http_activity(&c, "lag", 10, 600);
    char oid[64];
    for (uint64_t u = 1; u <= 3; u++)
        CHECK_EQ(sk_th_buy_one(&c, aid, u, oid, sizeof oid), 200);
    sk_th_order_wait(&c, oid, 3, "created", 15000, &r);
    /* activity.opened and three order.created, delivered: caught up */
    int64_t deadline = sk_mono_ms() + 30000;
    while (erp_metric(sv.port, "seckill_webhook_delivered_total") < 4 && sk_mono_ms() < deadline)
        poll(NULL, 0, 50);
    CHECK(erp_metric(sv.port, "seckill_webhook_delivered_total") >= 4);
    double v = lag_until(sv.port, caught_up, 15000);
    CHECK_MSG(v == 0, "lag %g s with every event delivered", v);

    sk_th_pg_stop(&pg);
    v = lag_until(sv.port, behind, 20000);
    CHECK_MSG(v >= 2.0, "lag %g s while the store has been down for 20 s", v);

    sk_th_pg_restart(&pg);
    CHECK_EQ(sk_th_buy_one(&c, aid, 4, oid, sizeof oid), 200);
    deadline = sk_mono_ms() + 60000;
    while (erp_metric(sv.port, "seckill_webhook_delivered_total") < 5 && sk_mono_ms() < deadline)
        poll(NULL, 0, 50);
    CHECK(erp_metric(sv.port, "seckill_webhook_delivered_total") >= 5);
    v = lag_until(sv.port, caught_up, 30000);
    CHECK_MSG(v == 0, "lag %g s after the store came back and every event went out", v);

    sk_th_http_close(&c);
    CHECK_EQ(sk_th_serve_stop(&sv, SIGTERM), 0);
    sk_th_rx_stop(rx);
    sk_th_pg_stop(&pg);
}
