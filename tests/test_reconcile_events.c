/* test_reconcile_events.c - the reconcile.drift event (orders/reconcile.h,
 * docs/integration.md): drift made for real (a DB row deleted, a buyer's
 * count altered in Redis) and found by the worker's periodic passes and
 * by `seckill reconcile` is written to the outbox once when it appears or
 * changes, never for a clean pass and never again while it lasts; the
 * outbox is read back from the database. Real Redis, real SQLite /
 * PostgreSQL / MariaDB. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "core/clock.h"
#include "core/error.h"
#include "engine/keys.h"
#include "orders/reconcile.h"
#include "support/backend_env.h"
#include "support/harness.h"
#include "support/mysql_harness.h"
#include "support/pg_harness.h"
#include "support/reconcile_env.h"

SK_TH_PG_USED
SK_TH_MY_USED

#define BACKEND_TEST(name) SK_BACKEND_TEST(recev, "recev.db", name)

#define EV_MAX 512

/* The reconcile.drift events of aid in the outbox, oldest first, into ev
 * (EV_MAX); their count. Each one's subject is the activity's and its
 * seq above the previous one's. */
static size_t drift_events(struct sk_th_env *e, uint64_t aid, struct sk_event *ev)
{
    static struct sk_event all[EV_MAX];
    size_t n = 0, k = 0;
    CHECK_EQ(sk_store_events_list(e->st, 0, EV_MAX, all, &n), 0);
    CHECK(n < EV_MAX);
    char subject[40];
    snprintf(subject, sizeof subject, "activity-%" PRIu64, aid);
    for (size_t i = 0; i < n; i++) {
        if (strcmp(all[i].type, "reconcile.drift") || all[i].activity_id != aid) continue;
        CHECK_STR(all[i].subject, subject);
        CHECK_STR(all[i].order_id, "");
        if (k) CHECK(all[i].seq > ev[k - 1].seq);
        ev[k++] = all[i];
    }
    return k;
}

/* The event's payload says what rep found: schema 1, the activity, the
 * check, the total and exactly the kinds found with their counts. */
static void payload_is(const struct sk_event *ev, const struct sk_reconcile_report *rep)
{
    json_t *j = json_loads(ev->payload, 0, NULL);
    CHECK_MSG(j != NULL, "payload %s", ev->payload);
    CHECK_EQ(json_integer_value(json_object_get(j, "v")), 1);
    CHECK_EQ((uint64_t)json_integer_value(json_object_get(j, "activity_id")), rep->activity_id);
    CHECK_STR(json_string_value(json_object_get(j, "check")),
              rep->incremental ? "incremental" : "full");
    CHECK_EQ((size_t)json_integer_value(json_object_get(j, "total")), rep->total);
    json_t *d = json_object_get(j, "drift");
    CHECK(json_is_object(d));
    size_t kinds = 0;
    for (int k = 0; k < SK_DRIFT_NKINDS; k++) {
        json_t *v = json_object_get(d, sk_drift_name(k));
        CHECK_MSG((size_t)json_integer_value(v) == rep->found[k], "%s: payload %s, found %zu",
                  sk_drift_name(k), ev->payload, rep->found[k]);
        kinds += rep->found[k] > 0;
    }
    CHECK_EQ(json_object_size(d), kinds);
    json_decref(j);
}

/* A sale of n users, persisted; their orders into b. */
static uint64_t sale(struct sk_th_env *e, size_t n, struct sk_th_bought *b)
{
    uint64_t aid = sk_th_env_activity(e, (int64_t)n * 2, 2, 2, 3600);
    CHECK_EQ(sk_th_env_buy_users(e, aid, 1, n, 2, 50, b), n);
    sk_th_env_persist(e, "w1", -1);
    return aid;
}

/* Polls (2 s at most) until the wall clock is past ms. */
static void clock_past(int64_t ms)
{
    int64_t deadline = sk_mono_ms() + 2000;
    while (sk_wall_ms() <= ms && sk_mono_ms() < deadline) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    CHECK(sk_wall_ms() > ms);
}

static void buyers_add(struct sk_th_env *e, uint64_t aid, uint64_t uid, const char *by)
{
    struct sk_keys k;
    sk_keys_for(&k, aid);
    char user[24];
    snprintf(user, sizeof user, "%" PRIu64, uid);
    sk_th_redis_do(e, "HINCRBY %s %s %s", k.buyers, user, by);
}

/* One periodic pass that must run; what it wrote is in rep->event. */
static void pass(struct sk_reconcile_periodic *p, struct sk_th_env *e, uint64_t aid,
                 struct sk_reconcile_report *rep)
{
    CHECK_EQ(sk_reconcile_periodic_run(p, e->st, e->r, aid, rep), 0);
    CHECK_MSG(rep->event >= 0, "event: %s", sk_store_errstr(e->st));
}

/* The worker's passes (full every 2nd, incremental between): a clean
 * pass writes nothing; drift writes one event when it appears; the same
 * drift pass after pass writes none, and so does an incremental pass
 * that sees less of it than the last full one (no flapping between the
 * two kinds of pass); more drift writes one; drift fixed, seen clean by a
 * full pass and back the same is news again. */
BACKEND_TEST(periodic_passes_write_drift_once_when_it_appears_or_changes)
{
    enum { N = 60 };
    struct sk_th_bought b[N];
    uint64_t aid = sale(e, N, b);
    struct sk_reconcile_periodic p;
    sk_reconcile_periodic_init(&p);
    p.full_every = 2;
    p.overlap_ms = 0;
    static struct sk_event ev[EV_MAX];
    struct sk_reconcile_report rep;

    /* 1 full, clean: nothing */
    pass(&p, e, aid, &rep);
    CHECK(rep.consistent && !rep.incremental);
    CHECK_EQ(rep.event, 0);
    sk_reconcile_report_free(&rep);
    CHECK_EQ(drift_events(e, aid, ev), 0);

    /* a buyer's count raised in Redis: user_count (full passes only) and
     * redis_invariant (every pass) */
    buyers_add(e, aid, b[5].uid, "1");
    pass(&p, e, aid, &rep); /* 2 incremental: the invariant */
    CHECK(rep.incremental && !rep.consistent);
    CHECK_EQ(rep.found[SK_DRIFT_REDIS_INVARIANT], 1);
    CHECK_EQ(rep.event, 1);
    CHECK_EQ(drift_events(e, aid, ev), 1);
    payload_is(&ev[0], &rep);
    sk_reconcile_report_free(&rep);

    pass(&p, e, aid, &rep); /* 3 full: and the user's count: changed */
    CHECK(!rep.incremental);
    CHECK_EQ(rep.found[SK_DRIFT_USER_COUNT], 1);
    CHECK_EQ(rep.found[SK_DRIFT_REDIS_INVARIANT], 1);
    CHECK_EQ(rep.event, 1);
    CHECK_EQ(drift_events(e, aid, ev), 2);
    payload_is(&ev[1], &rep);
    sk_reconcile_report_free(&rep);

    for (int i = 0; i < 4; i++) { /* 4-7: the same drift, seen whole or in part */
        pass(&p, e, aid, &rep);
        CHECK(!rep.consistent);
        CHECK_EQ(rep.event, 0);
        sk_reconcile_report_free(&rep);
    }
    CHECK_EQ(drift_events(e, aid, ev), 2);

    /* a row deleted: lost_order and db_stock too (the pass turns full) */
    char sql[256];
    snprintf(sql, sizeof sql, "DELETE FROM orders WHERE order_id = '%s'", b[3].oid);
    sk_th_be_sql(e, sql);
    pass(&p, e, aid, &rep); /* 8 */
    CHECK(!rep.incremental);
    CHECK_EQ(rep.found[SK_DRIFT_LOST_ORDER], 1);
    CHECK_EQ(rep.event, 1);
    CHECK_EQ(drift_events(e, aid, ev), 3);
    payload_is(&ev[2], &rep);
    sk_reconcile_report_free(&rep);

    /* repaired (the row back from the ledger, the stock) and the count
     * put back: clean passes write nothing */
    struct sk_reconcile_opts o;
    sk_reconcile_opts_init(&o);
    o.repair = 1;
    buyers_add(e, aid, b[5].uid, "-1");
    CHECK_EQ(sk_reconcile_activity(e->st, e->r, aid, &o, &rep), 0);
    CHECK(rep.consistent);
    sk_reconcile_report_free(&rep);
    clock_past(ev[2].created_ms);
    for (int i = 0; i < 2; i++) { /* 9-10: one of them full */
        pass(&p, e, aid, &rep);
        CHECK(rep.consistent);
        CHECK_EQ(rep.event, 0);
        sk_reconcile_report_free(&rep);
    }
    CHECK(p.m[0].clean_ms > ev[2].created_ms);
    CHECK_EQ(drift_events(e, aid, ev), 3);

    /* the first drift back, the same as an earlier event: news */
    buyers_add(e, aid, b[5].uid, "1");
    pass(&p, e, aid, &rep); /* 11 */
    CHECK(!rep.consistent);
    CHECK_EQ(rep.event, 1);
    CHECK_EQ(drift_events(e, aid, ev), 4);
    payload_is(&ev[3], &rep);
    sk_reconcile_report_free(&rep);
    sk_reconcile_periodic_free(&p);
}

/* `seckill reconcile` writes the event the worker would (a full check):
 * once for drift it finds twice (--json says which run wrote it), again
 * when the drift changes; a clean run writes nothing. */
BACKEND_TEST(the_reconcile_command_writes_drift_once_and_nothing_when_clean)
{
    enum { N = 30 };
    struct sk_th_bought b[N];
    uint64_t aid = sale(e, N, b);
    static struct sk_event ev[EV_MAX];
    static char out[1 << 16];
    const char *json[] = {"--json", NULL};
    sk_th_reconcile_clean(e, aid, out, sizeof out);
    CHECK_EQ(drift_events(e, aid, ev), 0);

    char sql[256];
    snprintf(sql, sizeof sql, "DELETE FROM orders WHERE order_id = '%s'", b[7].oid);
    sk_th_be_sql(e, sql);
    CHECK_EQ(sk_th_reconcile(e, aid, out, sizeof out, json), 1);
    HAS(out, "\"drift_event\": true");
    CHECK_EQ(sk_th_reconcile(e, aid, out, sizeof out, json), 1);
    HAS(out, "\"drift_event\": false");
    CHECK_EQ(drift_events(e, aid, ev), 1);
    struct sk_reconcile_report rep;
    CHECK_EQ(sk_reconcile_activity(e->st, e->r, aid, NULL, &rep), 0);
    payload_is(&ev[0], &rep);
    CHECK_EQ(rep.found[SK_DRIFT_LOST_ORDER], 1);
    sk_reconcile_report_free(&rep);

    snprintf(sql, sizeof sql, "DELETE FROM orders WHERE order_id = '%s'", b[8].oid);
    sk_th_be_sql(e, sql);
    CHECK_EQ(sk_th_reconcile(e, aid, out, sizeof out, NULL), 1);
    CHECK_EQ(drift_events(e, aid, ev), 2);
    json_t *j = json_loads(ev[1].payload, 0, NULL);
    CHECK(j != NULL);
    CHECK_EQ(json_integer_value(json_object_get(json_object_get(j, "drift"), "lost_order")), 2);
    json_decref(j);

    /* repaired: the event of the repairing run (nothing new found) is not
     * written again; a clean run after it writes nothing */
    const char *repair[] = {"--repair", NULL};
    CHECK_EQ(sk_th_reconcile(e, aid, out, sizeof out, repair), 0);
    sk_th_reconcile_clean(e, aid, out, sizeof out);
    CHECK_EQ(drift_events(e, aid, ev), 2);
}

/* The decision alone: what is news, against which latest event. */
SK_TEST(reconcile_drift_news_against_the_latest_event)
{
    struct sk_reconcile_report rep;
    memset(&rep, 0, sizeof rep);
    rep.activity_id = 9;
    CHECK_EQ(sk_reconcile_drift_news(&rep, NULL, 0, 0), 0); /* clean */
    rep.found[SK_DRIFT_LOST_ORDER] = 2;
    rep.found[SK_DRIFT_DB_STOCK] = 1;
    rep.total = 3;
    char p[SK_STORE_PAYLOAD_MAX];
    CHECK(sk_reconcile_drift_payload(&rep, p, sizeof p) > 0);
    CHECK_STR(p, "{\"v\":1,\"activity_id\":9,\"check\":\"full\",\"total\":3,"
                 "\"drift\":{\"lost_order\":2,\"db_stock\":1}}");
    CHECK_EQ(sk_reconcile_drift_news(&rep, NULL, 0, 0), 1);  /* none yet */
    CHECK_EQ(sk_reconcile_drift_news(&rep, p, 100, 50), 0);  /* the same */
    CHECK_EQ(sk_reconcile_drift_news(&rep, p, 100, 100), 0); /* clean not after it */
    CHECK_EQ(sk_reconcile_drift_news(&rep, p, 100, 101), 1); /* clean since */
    CHECK_EQ(sk_reconcile_drift_news(&rep, "junk", 100, 0), 1);
    rep.incremental = 1; /* less seen: not news; more: news */
    rep.found[SK_DRIFT_LOST_ORDER] = 1;
    rep.total = 2;
    CHECK_EQ(sk_reconcile_drift_news(&rep, p, 100, 0), 0);
    rep.found[SK_DRIFT_STALE] = 1;
    rep.total = 3;
    CHECK_EQ(sk_reconcile_drift_news(&rep, p, 100, 0), 1);
    rep.incremental = 0; /* a full pass: any change */
    rep.found[SK_DRIFT_STALE] = 0;
    CHECK_EQ(sk_reconcile_drift_news(&rep, p, 100, 0), 1);
    rep.repair = 1;
    rep.remaining[SK_DRIFT_DB_STOCK] = 1;
    rep.remaining_total = 1;
    CHECK(sk_reconcile_drift_payload(&rep, p, sizeof p) > 0);
    CHECK_MSG(strstr(p, ",\"remaining_total\":1,\"remaining\":{\"db_stock\":1}}") != NULL, "%s", p);
    CHECK_EQ(sk_reconcile_drift_payload(&rep, p, 20), SK_EINVAL);
}
