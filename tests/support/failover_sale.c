/* failover_sale.c - a flash sale over HTTP through a failover (see
 * failover_sale.h), on the load machinery of http_load_env.h. */
#include "support/failover_sale.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/clock.h"
#include "support/harness.h"
#include "support/http_load_env.h"

/* When the first 200 was answered among requests sent after t_us, or -1. */
static int64_t first_200_after(const struct load *L, int64_t t_us)
{
    size_t n = atomic_load(&L->next);
    if (n > L->n) n = L->n;
    int64_t best = -1;
    for (size_t i = 0; i < n; i++) {
        const struct rec *q = &L->recs[i];
        if (q->outcome == OUT_ANSWERED && q->status == 200 && q->t_send_us >= t_us &&
            (best < 0 || q->t_done_us < best))
            best = q->t_done_us;
    }
    return best;
}

/* Every 200 looked up in the ledger (lost: missing, or for someone else),
 * and the users who got more 200s than the limit. */
static void count_losses(const struct load *L, size_t n, const struct view *v,
                         struct fo_sale_result *res)
{
    int *per_user = calloc(MAX_USER + 1, sizeof *per_user);
    CHECK(per_user);
    for (size_t i = 0; i < n; i++) {
        const struct rec *q = &L->recs[i];
        if (q->outcome != OUT_ANSWERED || q->status != 200) continue;
        const struct lentry *e = ledger_find(v, q->oid);
        if (!e || e->user != q->user || e->qty != q->qty) res->lost++;
        if (++per_user[q->user] == FO_SALE_LIMIT + 1) res->over_limit++;
    }
    free(per_user);
}

/* With sync: every 200 is an order of this master, and an order no 200
 * announced belongs to a user answered 503 at least once ("maybe"). */
static void check_no_loss(const struct load *L, size_t n, const struct view *v,
                          const struct fo_sale_result *res)
{
    const struct lentry **ex;
    size_t nex = check_accepted_in_redis(L, n, v, &ex);
    for (size_t i = 0; i < nex; i++) {
        int seen_503 = 0;
        for (size_t j = 0; j < n && !seen_503; j++)
            seen_503 = L->recs[j].user == ex[i]->user && L->recs[j].status == 503;
        CHECK_MSG(seen_503, "order %s of user %" PRIu32 " was never announced", ex[i]->oid,
                  ex[i]->user);
    }
    free(ex);
    CHECK_EQ(res->lost, 0);
    CHECK_EQ(res->over_limit, 0);
}

void fo_sale(const char *url, uint64_t aid, int sync, void (*fault)(void *arg), void *arg,
             struct fo_sale_result *res)
{
    alarm(TEST_ALARM_S);
    memset(res, 0, sizeof *res);
    sk_redis *r = redis_to(url);
    if (!aid) aid = sk_th_unique_id();
    open_activity(r, aid, FO_SALE_STOCK, FO_SALE_LIMIT, 1);
    const char *with_sync[] = {"--sync-replicas", "1", "--redis-timeout-ms", "500", NULL};
    const char *without[] = {"--redis-timeout-ms", "500", NULL};
    struct sk_th_serve s;
    serve_start(&s, url, sync ? with_sync : without);

    struct load *L = load_new(s.port, aid);
    L->n = MAX_RECS;
    for (size_t i = 0; i < L->n; i++)
        L->recs[i] = (struct rec){.user = 1 + (uint32_t)(i / FO_SALE_TRIES), .qty = 1};
    L->think_us = 2000; /* 503s come back at once: bounded records over the failover */
    pid_t pids[2];
    load_start(L, 2, 4, pids);
    CHECK_MSG(POLL_UNTIL(atomic_load(&L->accepted) >= 300, 15000), "no load (log %s)", s.log);

    int64_t t_fault = sk_mono_us();
    fault(arg);
    int64_t t_back = sk_mono_us();
    int base = atomic_load(&L->accepted);
    CHECK_MSG(POLL_UNTIL(atomic_load(&L->accepted) >= base + 300, 30000),
              "serve did not admit again after the failover (log %s)", s.log);
    atomic_store(&L->stop, 1);
    load_wait(L, 2, pids);
    /* nothing waited RECV_TIMEOUT_S: purchases in flight at the switch
     * were answered, none hung */
    check_no_client_failures(L);
    CHECK_MSG(alive(s.pid), "the server died (log %s)", s.log);
    res->fault_ms = (t_back - t_fault) / 1000;
    int64_t again = first_200_after(L, t_back);
    res->fault_to_200_ms = again > 0 ? (again - t_fault) / 1000 : -1;

    size_t n = atomic_load(&L->next);
    if (n > L->n) n = L->n;
    struct tally t;
    tally_load(L, n, &t);
    print_tally(sync ? "sale through a failover, --sync-replicas 1"
                     : "sale through a failover, no --sync-replicas",
                &t);
    res->ok = t.ok;
    res->unconfirmed = t.unconfirmed;
    res->s503 = t.s503;
    res->max_lat_ms = t.max_lat_us / 1000;
    CHECK_MSG(t.other == 0 && t.bad_body == 0, "unexpected answer: %s", t.other_example);
    CHECK_EQ(t.timeouts + t.bad, 0);
    CHECK_MSG(t.max_lat_us < 5000000, "a purchase waited %" PRId64 " ms", t.max_lat_us / 1000);
    CHECK_MSG(sync || t.unconfirmed == 0, "503 unconfirmed without --sync-replicas");

    /* what the master holds now (a fresh connect: the client finds it) */
    CHECK_MSG(sk_redis_connect(r) == 0, "redis after the failover: %s", r->errstr);
    res->master_port = r->url.sentinel ? r->sn_port : 0;
    struct view v;
    view_load(r, aid, &v);
    check_invariants(&v, FO_SALE_STOCK, FO_SALE_LIMIT);
    count_losses(L, n, &v, res);
    if (sync) check_no_loss(L, n, &v, res);
    view_free(&v);
    stop_server(&s);
    load_free(L);
    sk_redis_free(r);
}

void fo_sale_print(const char *what, const struct fo_sale_result *res)
{
    printf("    # %s: %d answered 200, %d of them LOST by the failover (not in the master "
           "afterwards); %d users got more 200s than the limit; 503 unconfirmed %d, 503 "
           "unavailable %d; fault -> replacement serving %" PRId64 " ms, fault -> first 200 "
           "after it %" PRId64 " ms; slowest answer %" PRId64 " ms\n",
           what, res->ok, res->lost, res->over_limit, res->unconfirmed, res->s503, res->fault_ms,
           res->fault_to_200_ms, res->max_lat_ms);
    fflush(stdout);
}
