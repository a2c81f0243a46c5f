/* test_cluster.c - Redis Cluster support: CRC16 key slots (the spec's
 * examples), command routing, redis+cluster:// URLs, and the purchase
 * invariants against a real local cluster (3 masters + 3 replicas), with
 * activities on different masters, through a master failover and a slot
 * migration during the sale, and through `seckill serve` over HTTP. */
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"
#include "core/codes.h"
#include "core/error.h"
#include "engine/keys.h"
#include "engine/live_acts.h"
#include "engine/stock.h"
#include "redis/redis_cluster.h"
#include "redis/redis_conn.h"
#include "redis/redis_url.h"
#include "redis/script.h"
#include "spawn/redis_spawn.h"
#include "support/cluster_harness.h"
#include "support/fixtures.h"
#include "support/harness.h"
#include "support/http_api.h"
#include "support/http_client.h"
#include "support/http_load_env.h"
#include "tests/support/spawn/cluster_spawn.h"

SK_TH_CLUSTER_USED

/* ---- no server ---------------------------------------------------------- */

SK_TEST(cluster_crc16_and_key_slots_follow_the_redis_spec)
{
    CHECK_EQ(sk_cluster_crc16("123456789", 9), 0x31C3);
    CHECK_EQ(sk_cluster_key_slot("123456789", 9), 0x31C3 & 16383);
    CHECK_EQ(sk_cluster_key_slot("123456789", 9), 12739);
    const char *a = "{user1000}.following", *b = "{user1000}.followers";
    CHECK_EQ(sk_cluster_key_slot(a, strlen(a)), sk_cluster_key_slot(b, strlen(b)));
    CHECK_EQ(sk_cluster_key_slot(a, strlen(a)), sk_cluster_key_slot("user1000", 8));
    /* empty tag: the whole key is hashed */
    CHECK_EQ(sk_cluster_key_slot("foo{}{bar}", 10), sk_cluster_crc16("foo{}{bar}", 10) & 16383);
    /* only the first tag counts */
    CHECK_EQ(sk_cluster_key_slot("foo{{bar}}zap", 13), sk_cluster_key_slot("{bar", 4));
    CHECK_EQ(sk_cluster_key_slot("foo{bar}{zap}", 13), sk_cluster_key_slot("bar", 3));
    /* no closing brace: whole key */
    CHECK_EQ(sk_cluster_key_slot("foo{bar", 7), sk_cluster_crc16("foo{bar", 7) & 16383);
    /* every key of an activity is in one slot */
    struct sk_keys k;
    sk_keys_for(&k, 1001);
    int s = sk_cluster_key_slot(k.meta, strlen(k.meta));
    CHECK_EQ(sk_cluster_key_slot(k.stock, strlen(k.stock)), s);
    CHECK_EQ(sk_cluster_key_slot(k.orders, strlen(k.orders)), s);
    CHECK_EQ(sk_cluster_key_slot(k.dlq, strlen(k.dlq)), s);
    CHECK_EQ(s, sk_cluster_key_slot("a1001", 5));
}

SK_TEST(cluster_routing_finds_the_key_of_a_command)
{
    const char *get[] = {"GET", "k"};
    CHECK_EQ(sk_cluster_first_key(2, get, NULL), 1);
    const char *ping[] = {"PING"};
    CHECK_EQ(sk_cluster_first_key(1, ping, NULL), -1);
    const char *sl[] = {"SCRIPT", "LOAD", "return 1"};
    CHECK_EQ(sk_cluster_first_key(3, sl, NULL), -1);
    const char *ev[] = {"EVALSHA", "abc", "2", "{x}a", "{x}b", "arg"};
    CHECK_EQ(sk_cluster_first_key(6, ev, NULL), 3);
    const char *ev0[] = {"EVAL", "return 1", "0", "arg"};
    CHECK_EQ(sk_cluster_first_key(4, ev0, NULL), -1);
    const char *xr[] = {"XREADGROUP", "GROUP", "g",  "c", "COUNT", "10",
                        "STREAMS",    "s1",    "s2", ">", ">"};
    CHECK_EQ(sk_cluster_first_key(11, xr, NULL), 7);
    int first, count;
    CHECK(sk_cluster_streams(11, xr, NULL, &first, &count));
    CHECK_EQ(first, 7);
    CHECK_EQ(count, 2);
    const char *ml[] = {"multi"};
    CHECK_EQ(sk_cluster_first_key(1, ml, NULL), -1);
    const char *xg[] = {"XGROUP", "CREATE", "s1", "g", "$"}, *xi[] = {"xinfo", "GROUPS", "s1"};
    CHECK_EQ(sk_cluster_first_key(5, xg, NULL), 2);
    CHECK_EQ(sk_cluster_first_key(3, xi, NULL), 2);
    int slot, port;
    char host[64];
    CHECK_EQ(
        sk_cluster_parse_redirect("MOVED 3999 127.0.0.1:6381", &slot, host, sizeof host, &port),
        SK_CLUSTER_MOVED);
    CHECK_EQ(slot, 3999);
    CHECK_STR(host, "127.0.0.1");
    CHECK_EQ(port, 6381);
    CHECK_EQ(sk_cluster_parse_redirect("ASK 12 ::1:7000", &slot, host, sizeof host, &port),
             SK_CLUSTER_ASK);
    CHECK_STR(host, "::1");
    CHECK_EQ(port, 7000);
    CHECK_EQ(sk_cluster_parse_redirect("ERR wrong", &slot, host, sizeof host, &port), 0);
    CHECK(sk_cluster_is_transient("TRYAGAIN Multiple keys request during rehashing of slot"));
    CHECK(sk_cluster_is_transient("CLUSTERDOWN The cluster is down"));
}

SK_TEST(cluster_urls_list_seed_nodes_and_redis_urls_are_unchanged)
{
    struct sk_redis_url u;
    char err[128] = "";
    const char *s = "redis+cluster://:pw@10.0.0.1:7000,10.0.0.2,[::1]:7002";
    CHECK_MSG(sk_redis_url_parse(&u, s, strlen(s), err, sizeof err) == 0, "%s", err);
    CHECK(u.cluster);
    CHECK_EQ(u.nseeds, 3);
    CHECK_STR(u.seeds[0].host, "10.0.0.1");
    CHECK_EQ(u.seeds[0].port, 7000);
    CHECK_STR(u.seeds[1].host, "10.0.0.2");
    CHECK_EQ(u.seeds[1].port, 6379);
    CHECK_STR(u.seeds[2].host, "::1");
    CHECK_EQ(u.seeds[2].port, 7002);
    CHECK_STR(u.host, "10.0.0.1");
    CHECK_STR(u.pass, "pw");
    s = "redis://h:1,h:2";
    CHECK_EQ(sk_redis_url_parse(&u, s, strlen(s), err, sizeof err), SK_EINVAL);
    s = "redis+cluster://h:1/3";
    CHECK_EQ(sk_redis_url_parse(&u, s, strlen(s), err, sizeof err), SK_EINVAL);
    s = "redis+cluster://h:1,";
    CHECK_EQ(sk_redis_url_parse(&u, s, strlen(s), err, sizeof err), SK_EINVAL);
    s = "redis://h:5/2";
    CHECK_EQ(sk_redis_url_parse(&u, s, strlen(s), err, sizeof err), 0);
    CHECK(!u.cluster);
    CHECK_EQ(u.nseeds, 1);
    CHECK_EQ(u.db, 2);
}

/* ---- against the cluster ------------------------------------------------ */

static sk_redis *connect_cluster(void)
{
    sk_redis *r = sk_th_redis_new(sk_th_cluster_url(), 2000, 5000);
    CHECK_MSG(sk_redis_connect(r) == 0, "connect: %s", r->errstr);
    return r;
}

/* Activity ids whose slots are served by n different masters. */
static void ids_on_masters(sk_redis *r, uint64_t *ids, int n)
{
    const struct sk_cluster_map *m = sk_redis_cluster_map(r);
    int owners[8], got = 0;
    while (got < n) {
        uint64_t id = sk_th_unique_id();
        char tag[32];
        int tl = snprintf(tag, sizeof tag, "a%llu", (unsigned long long)id);
        int o = sk_cluster_map_owner(m, sk_cluster_key_slot(tag, (size_t)tl));
        int dup = o < 0;
        for (int i = 0; i < got; i++)
            dup |= owners[i] == o;
        if (dup) continue;
        owners[got] = o;
        ids[got++] = id;
    }
}

static int activity_slot(uint64_t id)
{
    char tag[32];
    int tl = snprintf(tag, sizeof tag, "a%llu", (unsigned long long)id);
    return sk_cluster_key_slot(tag, (size_t)tl);
}

SK_TEST(cluster_blocking_client_routes_keys_scripts_pipelines_and_split_reads)
{
    sk_redis *r = connect_cluster();
    const struct sk_cluster_map *m = sk_redis_cluster_map(r);
    int masters = 0;
    for (int i = 0; i < m->nnodes; i++)
        masters += sk_cluster_map_is_master(m, i);
    CHECK_EQ(masters, 3);
    CHECK_EQ(r->fn, SK_FN_ON); /* the handshake loaded the library (on each master) */
    redisReply *rep;
    /* keys on every master, plain and pipelined */
    char key[64];
    for (int i = 0; i < 30; i++) {
        snprintf(key, sizeof key, "t:plain:%d", i);
        CHECK_EQ(sk_redis_cmd(r, &rep, "SET %s %d", key, i), 0);
        CHECK_MSG(rep->type == REDIS_REPLY_STATUS, "SET: %s", rep->str);
        freeReplyObject(rep);
    }
    for (int i = 0; i < 30; i++) {
        snprintf(key, sizeof key, "t:plain:%d", i);
        const char *a[] = {"GET", key};
        CHECK_EQ(sk_redis_append(r, 2, a, NULL), 0);
    }
    for (int i = 0; i < 30; i++) {
        CHECK_EQ(sk_redis_read(r, &rep), 0);
        CHECK_EQ(atoi(rep->str), i);
        freeReplyObject(rep);
    }
    /* a MULTI...EXEC run in a pipeline reaches one node as a unit */
    const char *multi[] = {"MULTI"}, *exec[] = {"EXEC"};
    const char *inc[] = {"INCR", "{t:tx}a"}, *inc2[] = {"INCRBY", "{t:tx}b", "5"};
    CHECK_EQ(sk_redis_append(r, 1, multi, NULL), 0);
    CHECK_EQ(sk_redis_append(r, 2, inc, NULL), 0);
    CHECK_EQ(sk_redis_append(r, 3, inc2, NULL), 0);
    CHECK_EQ(sk_redis_append(r, 1, exec, NULL), 0);
    for (int i = 0; i < 4; i++) {
        CHECK_EQ(sk_redis_read(r, &rep), 0);
        if (i == 3) {
            CHECK_EQ(rep->type, REDIS_REPLY_ARRAY);
            CHECK_EQ(rep->elements, 2);
        }
        freeReplyObject(rep);
    }
    /* scripts on two masters, EVALSHA routed by KEYS */
    uint64_t ids[3];
    ids_on_masters(r, ids, 3);
    for (int i = 0; i < 3; i++) {
        open_activity(r, ids[i], 5, 1, 1);
        struct sk_admission a;
        int64_t left;
        CHECK_EQ(sk_th_buy(r, ids[i], 7, 1, &a, &left), 0);
        CHECK_EQ(a.rc, SK_RC_OK);
        CHECK_EQ(left, 4);
    }
    /* XREADGROUP over streams on three masters: split per node, merged */
    const char *argv[16] = {"XREADGROUP", "GROUP", "g", "c", "COUNT", "10", "STREAMS"};
    struct sk_keys k[3];
    for (int i = 0; i < 3; i++) {
        sk_keys_for(&k[i], ids[i]);
        CHECK_EQ(sk_redis_cmd(r, &rep, "XGROUP CREATE %s g 0", k[i].orders), 0);
        freeReplyObject(rep);
        argv[7 + i] = k[i].orders;
        argv[10 + i] = ">";
    }
    CHECK_EQ(sk_redis_command(r, &rep, 13, argv, NULL), 0);
    CHECK_MSG(rep->type == REDIS_REPLY_ARRAY, "XREADGROUP: %s", rep->str ? rep->str : "?");
    CHECK_EQ(rep->elements, 3);
    freeReplyObject(rep);
    CHECK_EQ(sk_redis_command(r, &rep, 13, argv, NULL), 0);
    CHECK_EQ(rep->type, REDIS_REPLY_NIL);
    freeReplyObject(rep);
    for (int i = 0; i < 3; i++)
        sk_stock_drop(r, ids[i]);
    sk_redis_free(r);
}

/* ---- the sale ----------------------------------------------------------- */

#define SALE_ACTIVITIES 3
#define SALE_THREADS 12
#define SALE_LIMIT 2
#define SALE_USERS 20000

struct sale {
    int64_t stock; /* per activity */
    uint64_t ids[SALE_ACTIVITIES];
    atomic_llong moved, ask, retries, refreshes; /* the buyers' cluster counters */
    atomic_int rerouted; /* buyers told MOVED, or whose map was read again after the first */
    atomic_int done;
    atomic_int ready;                      /* buyers that made their first call (their map read) */
    atomic_long accepted[SALE_ACTIVITIES]; /* units */
    atomic_long unknown;                   /* purchases that failed in transport (may have run) */
    /* answers that were no admission (SK_EPROTO): a MOVED or ASK handed to
     * the buyer instead of followed would be one */
    atomic_long not_admission;
    atomic_long refused_sold_out, refused_limit, other;
    atomic_long per_user[SALE_ACTIVITIES][SALE_USERS]; /* units accepted */
    atomic_long over_limit;
    char err[256];
    sk_redis *r; /* the test's own client */
    pthread_t th[SALE_THREADS];
};

static void *buyer(void *arg)
{
    struct sale *s = arg;
    sk_redis *r;
    char err[128];
    if (sk_redis_new(&r, sk_th_cluster_url(), 2000, 5000, err, sizeof err) < 0) return NULL;
    unsigned seed = (unsigned)(uintptr_t)&r ^ (unsigned)sk_mono_us();
    int64_t deadline = sk_mono_ms() + 60000;
    int sold_out[SALE_ACTIVITIES] = {0}, left = SALE_ACTIVITIES, first_done = 0;
    while (left && sk_mono_ms() < deadline && !atomic_load(&s->done)) {
        int a = (int)(rand_r(&seed) % SALE_ACTIVITIES);
        if (sold_out[a]) continue;
        int u = (int)(rand_r(&seed) % SALE_USERS);
        struct sk_admission ad;
        int64_t rem;
        int rc = sk_th_buy(r, s->ids[a], (uint64_t)u + 1, 1, &ad, &rem);
        if (!first_done) {
            first_done = 1;
            atomic_fetch_add(&s->ready, 1);
        }
        if (rc < 0) {
            atomic_fetch_add(rc == SK_EPROTO ? &s->not_admission : &s->unknown, 1);
            continue;
        }
        if (ad.rc == SK_RC_OK) {
            atomic_fetch_add(&s->accepted[a], 1);
            if (atomic_fetch_add(&s->per_user[a][u], 1) + 1 > SALE_LIMIT)
                atomic_fetch_add(&s->over_limit, 1);
        } else if (ad.rc == SK_RC_SOLD_OUT) {
            sold_out[a] = 1;
            left--;
        } else if (ad.rc == SK_RC_LIMIT_EXCEEDED) {
            atomic_fetch_add(&s->refused_limit, 1);
        } else {
            atomic_fetch_add(&s->other, 1);
        }
    }
    struct sk_cluster_stats cs;
    if (sk_redis_cluster_stats(r, &cs) == 0) {
        atomic_fetch_add(&s->moved, (long long)cs.moved);
        atomic_fetch_add(&s->ask, (long long)cs.ask);
        atomic_fetch_add(&s->retries, (long long)cs.retries);
        atomic_fetch_add(&s->refreshes, (long long)cs.refreshes);
        if (cs.moved >= 1 || cs.refreshes >= 2) atomic_fetch_add(&s->rerouted, 1);
    }
    sk_redis_free(r);
    return NULL;
}

/* Connects a client for the test and opens SALE_ACTIVITIES activities of
 * `stock` units, one on each master (ids). Ownership: the client is the
 * caller's (sk_redis_free). */
static sk_redis *open_sale_on_masters(uint64_t *ids, int64_t stock)
{
    sk_redis *r = connect_cluster();
    ids_on_masters(r, ids, SALE_ACTIVITIES);
    for (int i = 0; i < SALE_ACTIVITIES; i++)
        open_activity(r, ids[i], stock, SALE_LIMIT, SALE_LIMIT);
    return r;
}

/* Opens the sale (open_sale_on_masters, the client into s->r) and starts
 * the buyers. */
static void sale_start(struct sale *s, int64_t stock)
{
    memset(s, 0, sizeof *s);
    s->stock = stock;
    s->r = open_sale_on_masters(s->ids, stock);
    for (int i = 0; i < SALE_THREADS; i++)
        CHECK_EQ(pthread_create(&s->th[i], NULL, buyer, s), 0);
    /* every buyer has its map before the caller disturbs the cluster: on
     * a loaded machine a buyer starting late would read the map already
     * moved, and meet no failover at all */
    int64_t until = sk_mono_ms() + 30000;
    while (atomic_load(&s->ready) < SALE_THREADS) {
        CHECK_MSG(sk_mono_ms() < until, "only %d of %d buyers started in 30 s",
                  atomic_load(&s->ready), SALE_THREADS);
        sk_th_nap_ms(5);
    }
}

/* Fails the test when the buyers have sold every unit already: the
 * disturbance (`what`) must happen while the sale runs. */
static void sale_still_running(struct sale *s, const char *what)
{
    long sold = 0;
    for (int a = 0; a < SALE_ACTIVITIES; a++)
        sold += atomic_load(&s->accepted[a]);
    CHECK_MSG(sold < SALE_ACTIVITIES * s->stock, "the sale ended before the %s did: make it longer",
              what);
}

/* Waits for the buyers and checks the invariants (docs/design.md) against what Redis holds:
 * sold out exactly, stock + sum(buyers) == initial, nobody over the limit,
 * and every unit the buyers saw accepted is in Redis. Then closes s->r. */
static void sale_check(struct sale *s)
{
    sk_redis *r = s->r;
    for (int i = 0; i < SALE_THREADS; i++)
        pthread_join(s->th[i], NULL);
    CHECK_EQ(atomic_load(&s->over_limit), 0);
    CHECK_EQ(atomic_load(&s->other), 0);
    CHECK_EQ(atomic_load(&s->not_admission), 0);
    for (int a = 0; a < SALE_ACTIVITIES; a++) {
        struct sk_stock_state st;
        CHECK_MSG(sk_stock_state(r, s->ids[a], &st) == 0, "state: %s", r->errstr);
        CHECK_EQ(st.remaining, 0);
        CHECK_EQ(st.held, s->stock);
        CHECK_EQ(st.remaining + st.held, st.initial);
        /* accepted answers <= units held <= accepted + lost answers */
        CHECK(atomic_load(&s->accepted[a]) <= st.held);
        CHECK(st.held <= atomic_load(&s->accepted[a]) + atomic_load(&s->unknown));
        struct sk_keys k;
        sk_keys_for(&k, s->ids[a]);
        redisReply *rep;
        CHECK_EQ(sk_redis_cmd(r, &rep, "HVALS %s", k.buyers), 0);
        for (size_t i = 0; i < rep->elements; i++)
            CHECK(atoi(rep->element[i]->str) <= SALE_LIMIT);
        freeReplyObject(rep);
        CHECK_EQ(sk_redis_cmd(r, &rep, "XLEN %s", k.orders), 0);
        CHECK_EQ(rep->integer, s->stock); /* one unit per order here */
        freeReplyObject(rep);
    }
    sk_redis_free(r);
    s->r = NULL;
}

SK_TEST(cluster_sale_sells_out_exactly_across_three_masters)
{
    static struct sale s;
    sale_start(&s, 1000);
    sale_check(&s);
    CHECK_EQ(atomic_load(&s.unknown), 0);
}

SK_TEST(cluster_sale_survives_a_master_failover)
{
    static struct sale s;
    sale_start(&s, 12000);
    /* fail over the master of the first activity while buyers run */
    int old = sk_th_cluster_master_of(activity_slot(s.ids[0]));
    int now_master = sk_th_cluster_failover(activity_slot(s.ids[0]));
    CHECK(now_master != old);
    sale_still_running(&s, "failover");
    sale_check(&s);
    /* No buyer saw a MOVED as its answer (sale_check: not_admission), and
     * the buyers' map moved to the new master: through a MOVED, or through
     * the map read again when the old master's connection dropped, which
     * may come first (then no MOVED is ever met). */
    CHECK_MSG(atomic_load(&s.rerouted) >= 1,
              "no buyer's slot map was read again after the failover");
    printf("    failover %d -> %d; answers lost in transport: %ld, MOVED %lld, map reads %lld, "
           "retries %lld\n",
           old, now_master, (long)atomic_load(&s.unknown), (long long)atomic_load(&s.moved),
           (long long)atomic_load(&s.refreshes), (long long)atomic_load(&s.retries));
}

static void between_moves(void *arg)
{
    (void)arg; /* the buyers hit ASK/TRYAGAIN now; a short, bounded window */
    int64_t until = sk_mono_ms() + 300;
    while (sk_mono_ms() < until) {
        redisReply *r = sk_th_cluster_cmd(sk_th_cluster_port(0), "PING");
        if (r) freeReplyObject(r);
    }
}

SK_TEST(cluster_sale_survives_a_slot_migration_and_redirections_are_counted)
{
    static struct sale s;
    sale_start(&s, 12000);
    int slot = activity_slot(s.ids[1]);
    int from = sk_th_cluster_master_of(slot);
    int to = sk_th_cluster_migrate_slot(slot, between_moves, NULL);
    CHECK(to != from);
    /* this client routed to the old owner: it must be told MOVED once */
    struct sk_stock_state st;
    CHECK_EQ(sk_stock_state(s.r, s.ids[1], &st), 0);
    struct sk_cluster_stats cs;
    CHECK_EQ(sk_redis_cluster_stats(s.r, &cs), 0);
    CHECK_MSG(cs.moved >= 1, "moved=%llu", (unsigned long long)cs.moved);
    sale_still_running(&s, "migration");
    sale_check(&s);
    /* buyers met the migration (ASK/TRYAGAIN while it ran; MOVED when
     * their map was older than the hand-over) */
    CHECK_MSG(atomic_load(&s.moved) + atomic_load(&s.ask) >= 1,
              "buyers: MOVED %lld, ASK %lld, retries %lld", (long long)atomic_load(&s.moved),
              (long long)atomic_load(&s.ask), (long long)atomic_load(&s.retries));
    printf("    slot %d moved %d -> %d; buyers saw MOVED %lld, ASK %lld, retries %lld\n", slot,
           from, to, (long long)atomic_load(&s.moved), (long long)atomic_load(&s.ask),
           (long long)atomic_load(&s.retries));
}

/* ---- `seckill serve` on the cluster (the async client) ------------------ */

#define HS_THREADS 8
#define HS_USERS 4000

/* An HTTP sale: buyers are threads with one keep-alive connection each. */
struct hsale {
    int port;
    uint64_t ids[SALE_ACTIVITIES];
    atomic_int stop;
    atomic_long ok[SALE_ACTIVITIES];
    atomic_long per_user[SALE_ACTIVITIES][HS_USERS];
    atomic_long over_limit, n503, lost, other, limit;
    atomic_int other_status;
    char other_body[256];
    int64_t stock;        /* per activity */
    sk_redis *r;          /* the test's own blocking client */
    struct sk_th_serve v; /* the node the buyers call */
    pthread_t th[HS_THREADS];
};

static void *http_buyer(void *arg)
{
    struct hsale *s = arg;
    struct sk_th_http c;
    int open = sk_th_http_try_open(&c, s->port) == 0;
    unsigned seed = (unsigned)(uintptr_t)&c ^ (unsigned)sk_mono_us();
    int sold_out[SALE_ACTIVITIES] = {0}, left = SALE_ACTIVITIES;
    int64_t deadline = sk_mono_ms() + 90000;
    struct sk_th_resp *rp = malloc(sizeof *rp); /* 10 KB: off the thread's stack */
    while (rp && left && !atomic_load(&s->stop) && sk_mono_ms() < deadline) {
        if (!open) {
            open = sk_th_http_try_open(&c, s->port) == 0;
            if (!open) continue;
        }
        int a = (int)(rand_r(&seed) % SALE_ACTIVITIES);
        if (sold_out[a]) continue;
        int u = (int)(rand_r(&seed) % HS_USERS);
        char path[128], h[64];
        snprintf(path, sizeof path, "/api/v1/activities/%llu/purchase",
                 (unsigned long long)s->ids[a]);
        snprintf(h, sizeof h, "X-User-Id: %d\r\n", u + 1);
        int st = sk_th_http_req(&c, "POST", path, h, NULL, rp);
        if (st == 200) {
            atomic_fetch_add(&s->ok[a], 1);
            if (atomic_fetch_add(&s->per_user[a][u], 1) + 1 > SALE_LIMIT)
                atomic_fetch_add(&s->over_limit, 1);
        } else if (st == 409 && strstr(rp->body, "sold_out")) {
            sold_out[a] = 1;
            left--;
        } else if (st == 409 && strstr(rp->body, "limit_exceeded")) {
            atomic_fetch_add(&s->limit, 1);
        } else if (st == 503) {
            atomic_fetch_add(&s->n503, 1); /* may have run (a lost answer) */
        } else if (st == 0) {
            atomic_fetch_add(&s->lost, 1);
            sk_th_http_close(&c);
            open = 0;
        } else {
            int zero = 0;
            if (atomic_compare_exchange_strong(&s->other_status, &zero, st))
                snprintf(s->other_body, sizeof s->other_body, "%.200s", rp->body);
            atomic_fetch_add(&s->other, 1);
        }
    }
    if (open) sk_th_http_close(&c);
    free(rp);
    return NULL;
}

/* Opens the sale (open_sale_on_masters, the client into s->r), starts
 * serve on the cluster (s->v) and the buyers once it is ready. */
static void hsale_start(struct hsale *s, int64_t stock)
{
    memset(s, 0, sizeof *s);
    s->stock = stock;
    s->r = open_sale_on_masters(s->ids, stock);
    struct sk_th_serve *v = &s->v;
    setenv("LSAN_OPTIONS", "exitcode=0", 1);
    const char *extra[] = {"--role", "api", NULL};
    sk_th_serve_start(v, sk_th_cluster_url(), extra);
    /* serve answers /healthz before Redis is ready: wait for /readyz */
    struct sk_th_http c;
    sk_th_http_open(&c, v->port);
    struct sk_th_resp *rp = malloc(sizeof *rp);
    int64_t by = sk_mono_ms() + 10000;
    while (sk_th_http_req(&c, "GET", "/readyz", NULL, NULL, rp) != 200) {
        CHECK_MSG(sk_mono_ms() < by, "/readyz: %d %s", rp->status, rp->body);
        struct timespec ts = {0, 5 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    free(rp);
    sk_th_http_close(&c);
    s->port = v->port;
    for (int i = 0; i < HS_THREADS; i++)
        CHECK_EQ(pthread_create(&s->th[i], NULL, http_buyer, s), 0);
}

/* The invariants (docs/design.md) on what Redis holds (read with the blocking cluster client):
 * sold out, stock + sum(buyers) == initial, nobody over the limit, one
 * stream entry per unit, every 200 is a unit held. */
static void hsale_check(struct hsale *s)
{
    sk_redis *r = s->r;
    int64_t stock = s->stock;
    for (int i = 0; i < HS_THREADS; i++)
        pthread_join(s->th[i], NULL);
    CHECK_MSG(atomic_load(&s->other) == 0, "%ld unexpected answers, first %d %s",
              (long)atomic_load(&s->other), atomic_load(&s->other_status), s->other_body);
    CHECK_EQ(atomic_load(&s->over_limit), 0);
    for (int a = 0; a < SALE_ACTIVITIES; a++) {
        struct sk_stock_state st;
        CHECK_MSG(sk_stock_state(r, s->ids[a], &st) == 0, "state: %s", r->errstr);
        CHECK_EQ(st.remaining, 0);
        CHECK_EQ(st.held, stock);
        CHECK_EQ(st.remaining + st.held, st.initial);
        CHECK(atomic_load(&s->ok[a]) <= st.held);
        CHECK(st.held <= atomic_load(&s->ok[a]) + atomic_load(&s->n503) + atomic_load(&s->lost));
        struct sk_keys k;
        sk_keys_for(&k, s->ids[a]);
        redisReply *rep;
        CHECK_EQ(sk_redis_cmd(r, &rep, "HVALS %s", k.buyers), 0);
        long sum = 0;
        for (size_t i = 0; i < rep->elements; i++) {
            CHECK(atoi(rep->element[i]->str) <= SALE_LIMIT);
            sum += atoi(rep->element[i]->str);
        }
        freeReplyObject(rep);
        CHECK_EQ(sum + st.remaining, st.initial);
        /* one unit per order here */
        CHECK_EQ(sk_th_stream_orders(r, k.orders, k.label, NULL, NULL, NULL), stock);
    }
}

/* serve's log holds no sanitizer report (LSan's exit code is 0 here). */
static void check_serve_log(const struct sk_th_serve *v)
{
    FILE *f = fopen(v->log, "r");
    CHECK(f);
    char line[1024];
    while (fgets(line, sizeof line, f))
        CHECK_MSG(!strstr(line, "Sanitizer") && !strstr(line, "runtime error"), "serve: %s", line);
    fclose(f);
}

/* serve stops cleanly on SIGTERM and its log holds no sanitizer report;
 * the test's client is closed. */
static void hsale_stop(struct hsale *s)
{
    CHECK_EQ(sk_th_serve_stop(&s->v, SIGTERM), 0);
    check_serve_log(&s->v);
    sk_redis_free(s->r);
    s->r = NULL;
}

/* Waits (up to 10 s) until the first activity has sold 50: the sale is
 * under way before the fault. */
static void hsale_wait_first(struct hsale *s)
{
    int64_t by = sk_mono_ms() + 10000;
    while (atomic_load(&s->ok[0]) < 50 && sk_mono_ms() < by) {
        struct timespec ts = {0, 2 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

/* After a fault (`what`) moved the first activity's slot from master
 * `from` to `to` while the sale was still going: the sale ends with the
 * invariants held and purchases accepted again on the new owner. */
static void hsale_after_fault(struct hsale *s, int from, int to, const char *what)
{
    CHECK(to != from);
    long before = atomic_load(&s->ok[0]);
    CHECK_MSG(before < s->stock, "the sale ended before the %s did: make it longer", what);
    hsale_check(s);
    CHECK_MSG(atomic_load(&s->ok[0]) > before, "no 200 after the %s", what);
}

SK_TEST(cluster_serve_sells_out_exactly_over_http_across_three_masters)
{
    static struct hsale s;
    hsale_start(&s, 400);
    hsale_check(&s);
    for (int a = 0; a < SALE_ACTIVITIES; a++)
        CHECK_EQ(atomic_load(&s.ok[a]), 400);
    CHECK_EQ(atomic_load(&s.n503), 0);
    hsale_stop(&s);
}

SK_TEST(cluster_serve_survives_a_master_failover_during_an_http_sale)
{
    static struct hsale s;
    hsale_start(&s, 3000);
    hsale_wait_first(&s);
    int slot = activity_slot(s.ids[0]);
    int old = sk_th_cluster_master_of(slot);
    int now_master = sk_th_cluster_failover(slot);
    hsale_after_fault(&s, old, now_master, "failover");
    hsale_stop(&s);
    printf("    failover %d -> %d; 503s %ld, lost %ld\n", old, now_master,
           (long)atomic_load(&s.n503), (long)atomic_load(&s.lost));
}

/* A sample of serve's /metrics (one process), -1 when absent. Read raw:
 * the text can exceed the client's body buffer. */
static long long serve_metric(int port, const char *series)
{
    static char out[262144];
    static const char req[] = "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    if (!sk_th_http_raw(port, req, sizeof req - 1, out, sizeof out, 5000)) return -1;
    char pat[160];
    snprintf(pat, sizeof pat, "\n%s ", series);
    const char *p = strstr(out, pat);
    return p ? strtoll(p + strlen(pat), NULL, 10) : -1;
}

#define REDIR(kind) "seckill_redis_cluster_redirections_total{kind=\"" kind "\"}"

/* No line of serve's log contains s. */
static void check_serve_log_lacks(const struct sk_th_serve *v, const char *s)
{
    FILE *f = fopen(v->log, "r");
    CHECK(f);
    char line[1024];
    while (fgets(line, sizeof line, f))
        CHECK_MSG(!strstr(line, s), "serve: %s", line);
    fclose(f);
}

static void between_http_moves(void *arg)
{
    /* Keys moved, slot not handed over: serve's client is told ASK now, and
     * TRYAGAIN by the target when a key of the purchase script exists on
     * neither node (the idempotency hash: no Idempotency-Key here), so it
     * waits and asks again. Open for 1 s and until
     * serve has met an ASK: longer than five ASK-wait rounds (~0.3 s), well
     * inside the client's budget of waits (~3.5 s). */
    int port = *(const int *)arg;
    int64_t t0 = sk_mono_ms();
    for (;;) {
        int64_t t = sk_mono_ms() - t0;
        if (t >= 2000 || (t >= 1000 && serve_metric(port, REDIR("ask")) > 0)) break;
        struct timespec ts = {0, 2 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

SK_TEST(cluster_serve_survives_a_slot_migration_during_an_http_sale)
{
    static struct hsale s;
    hsale_start(&s, 3000);
    hsale_wait_first(&s);
    /* a cluster client shows its redirections, none yet */
    CHECK_EQ(serve_metric(s.v.port, REDIR("ask")), 0);
    int slot = activity_slot(s.ids[0]);
    int from = sk_th_cluster_master_of(slot);
    int to = sk_th_cluster_migrate_slot(slot, between_http_moves, &s.v.port);
    hsale_after_fault(&s, from, to, "migration");
    long long moved = serve_metric(s.v.port, REDIR("moved")),
              ask = serve_metric(s.v.port, REDIR("ask"));
    long long tryagain = serve_metric(s.v.port, REDIR("tryagain"));
    /* the async client met the migration: ASK in the window (every key of
     * the slot on the target, the slot not handed over) */
    CHECK_MSG(ask >= 1, "serve saw MOVED %lld, ASK %lld, TRYAGAIN %lld", moved, ask, tryagain);
    hsale_stop(&s);
    /* no redirection reached a caller as its answer (purchase_batch logs
     * an unexpected reply, and the buyer gets a 503) */
    check_serve_log_lacks(&s.v, "ASK ");
    check_serve_log_lacks(&s.v, "MOVED ");
    check_serve_log_lacks(&s.v, "TRYAGAIN");
    printf("    slot %d moved %d -> %d; serve saw MOVED %lld, ASK %lld, TRYAGAIN %lld; 503s %ld, "
           "lost %ld\n",
           slot, from, to, moved, ask, tryagain, (long)atomic_load(&s.n503),
           (long)atomic_load(&s.lost));
}

/* ---- a map with a slot nobody serves ---- */

static int buy_status(struct srv *v, uint64_t aid, uint64_t uid, struct sk_th_resp *r)
{
    return buy(v, aid, uid, NULL, r);
}

/* A view read mid-failover can give the activity's slot no master (the
 * old one's slots dropped, the new one not yet known). Made for real on a
 * one-master cluster of its own: CLUSTER DELSLOTS takes the slot away,
 * serve must name the slot unserved on /readyz, and once the slot is served
 * again (ADDSLOTS) it must sell again by itself: no command is ever sent
 * for a slot without a master, so nothing but serve's own re-reading can
 * bring it back. Found by the Cluster rollback test, whose serve answered
 * 503 for a minute after a failover while /readyz said ready. */
SK_TEST_T(cluster_serve_sells_again_after_a_slot_had_no_master_in_its_map, 120)
{
    struct sk_cluster_spawn cl;
    struct sk_cluster_spawn_opts o = {.masters = 1, .replicas = 0};
    CHECK_MSG(sk_cluster_spawn_start_opts(&cl, &o) == 0, "cluster: %s", cl.errstr);
    sanitizer_exit_code_0();
    struct srv v;
    const char *extra[] = {"--role", "api", "--processes", "1", NULL};
    sk_th_serve_start(&v.s, cl.url, extra);
    sk_th_http_open(&v.c, v.s.port);
    uint64_t aid = sk_th_unique_id();
    ready_act(&v, aid, 1000, 1000, 1, W_NOW);
    struct sk_th_resp r;
    uint64_t uid = 1;
    long ok = 0;
    EXPECT_STATUS(buy_status(&v, aid, uid++, &r), &r, 200);
    ok++;

    struct sk_keys k;
    sk_keys_for(&k, aid);
    int slot = sk_cluster_key_slot(k.meta, strlen(k.meta));
    redisReply *rep = sk_redis_spawn_cmd(cl.port[0], 2000, "CLUSTER DELSLOTS %d", slot);
    CHECK_MSG(rep && rep->type == REDIS_REPLY_STATUS, "DELSLOTS: %s",
              rep && rep->str ? rep->str : "no reply");
    freeReplyObject(rep);
    /* purchases fail (the cluster is down without the slot) until serve
     * has read the map with the gap: then /readyz names the slot (the
     * node is up, partly: other slots would be served) */
    int64_t by = sk_mono_ms() + 20000;
    int ready_st = 200;
    char want[48];
    snprintf(want, sizeof want, "%d (no master)", slot);
    while (ready_st != 200 || !strstr(r.body, "partial") || !strstr(r.body, want)) {
        CHECK_MSG(sk_mono_ms() < by, "readyz still %d '%s' with slot %d unserved", ready_st, r.body,
                  slot);
        int st = buy_status(&v, aid, uid++, &r);
        CHECK_MSG(st == 503 || st == 200, "purchase answered %d: %s", st, r.body);
        ok += st == 200;
        ready_st = req(&v, "GET", "/readyz", NULL, NULL, &r);
    }

    rep = sk_redis_spawn_cmd(cl.port[0], 2000, "CLUSTER ADDSLOTS %d", slot);
    CHECK_MSG(rep && rep->type == REDIS_REPLY_STATUS, "ADDSLOTS: %s",
              rep && rep->str ? rep->str : "no reply");
    freeReplyObject(rep);
    /* nothing else happens: serve must find the slot served by itself */
    by = sk_mono_ms() + 30000;
    int st;
    while ((st = buy_status(&v, aid, uid++, &r)) != 200) {
        CHECK_MSG(st == 503, "purchase answered %d: %s", st, r.body);
        CHECK_MSG(sk_mono_ms() < by, "no 200 within 30 s of the slot being served again: %s",
                  r.body);
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    ok++;
    EXPECT_STATUS(req(&v, "GET", "/readyz", NULL, NULL, &r), &r, 200);
    /* every 200 took a unit, and nothing else did */
    CHECK_EQ(remaining(&v, aid), 1000 - ok);
    srv_stop(&v);
    sk_cluster_spawn_stop(&cl);
}

/* A MULTI...EXEC run queued whole on a client whose map went stale (its
 * slot handed to another master since): the old master refuses the
 * queued command (MOVED, then EXECABORT), the front sends the whole unit
 * again to the new master, and the caller sees one transaction that ran
 * once. */
SK_TEST(cluster_blocking_multi_unit_moved_by_a_migration_runs_once_on_its_new_master)
{
    sk_redis *r = connect_cluster();
    char key[64];
    snprintf(key, sizeof key, "{t:unit:%llu}n", (unsigned long long)sk_th_unique_id());
    int slot = sk_cluster_key_slot(key, strlen(key));
    redisReply *rep;
    CHECK_EQ(sk_redis_cmd(r, &rep, "SET %s 10", key), 0);
    freeReplyObject(rep);
    struct sk_cluster_stats before;
    CHECK_EQ(sk_redis_cluster_stats(r, &before), 0);
    int from = sk_th_cluster_master_of(slot);
    int to = sk_th_cluster_migrate_slot(slot, NULL, NULL);
    CHECK(to != from);
    const char *multi[] = {"MULTI"}, *incr[] = {"INCR", key}, *exec[] = {"EXEC"};
    CHECK_EQ(sk_redis_append(r, 1, multi, NULL), 0);
    CHECK_EQ(sk_redis_append(r, 2, incr, NULL), 0);
    CHECK_EQ(sk_redis_append(r, 1, exec, NULL), 0);
    redisReply *reps[3];
    for (int i = 0; i < 3; i++)
        CHECK_MSG(sk_redis_read(r, &reps[i]) == 0, "read %d: %s", i, r->errstr);
    CHECK_EQ(reps[0]->type, REDIS_REPLY_STATUS);
    CHECK_MSG(reps[1]->type == REDIS_REPLY_STATUS, "INCR queued: %s",
              reps[1]->str ? reps[1]->str : "?");
    CHECK_MSG(reps[2]->type == REDIS_REPLY_ARRAY && reps[2]->elements == 1, "EXEC: %s",
              reps[2]->str ? reps[2]->str : "?");
    CHECK_EQ(reps[2]->element[0]->integer, 11);
    for (int i = 0; i < 3; i++)
        freeReplyObject(reps[i]);
    struct sk_cluster_stats after;
    CHECK_EQ(sk_redis_cluster_stats(r, &after), 0);
    CHECK_MSG(after.moved > before.moved, "no MOVED met: the map was not stale");
    /* once: read on the new master directly */
    rep = sk_th_cluster_cmd(to, "GET %s", key);
    CHECK_MSG(rep && rep->type == REDIS_REPLY_STRING, "GET on %d", to);
    CHECK_STR(rep->str, "11");
    freeReplyObject(rep);
    sk_redis_free(r);
}

/* The activities Redis holds, walked on every master of the cluster
 * (SCAN is one node's: engine/live_acts.h), and a plain `seckill
 * reconcile` naming those its database does not hold, whichever master
 * they live on (docs/reconcile.md, "Activities only Redis holds"). */
SK_TEST(cluster_reconcile_finds_redis_only_activities_on_every_master)
{
    sk_redis *r = sk_th_redis_new(sk_th_cluster_url(), 2000, 5000);
    uint64_t ids[3];
    int masters[3], found = 0;
    /* one activity on each master */
    for (uint64_t id = sk_th_unique_id(); found < 3; id++) {
        struct sk_keys k;
        sk_keys_for(&k, id);
        int m = sk_th_cluster_master_of(sk_cluster_key_slot(k.meta, strlen(k.meta)));
        int seen = 0;
        for (int i = 0; i < found; i++)
            seen |= masters[i] == m;
        if (m < 0 || seen) continue;
        masters[found] = m;
        ids[found++] = id;
        struct sk_stock_def d = {.id = id,
                                 .initial = 5,
                                 .per_user_limit = 1,
                                 .max_per_order = 1,
                                 .start_ms = sk_wall_ms() - 1000,
                                 .end_ms = sk_wall_ms() + 3600000};
        snprintf(d.store_id, sizeof d.store_id, "00000000000000c%c", '0' + found);
        int rc;
        CHECK_MSG(sk_stock_preheat(r, &d, 0, &rc, NULL) == 0, "%s", r->errstr);
        CHECK_EQ(rc, SK_RC_PREHEATED);
    }
    struct sk_live_act *live;
    size_t n;
    CHECK_MSG(sk_live_acts(r, &live, &n) == 0, "%s", r->errstr);
    for (int i = 0; i < 3; i++) {
        const struct sk_live_act *a = sk_live_acts_find(live, n, ids[i]);
        CHECK_MSG(a != NULL, "activity %" PRIu64 " on master %d not walked", ids[i], masters[i]);
        char want[24];
        snprintf(want, sizeof want, "00000000000000c%c", '0' + i + 1);
        CHECK_STR(a->store_id, want);
    }
    free(live);
    char spec[400], line[96];
    static char out[1 << 18];
    snprintf(spec, sizeof spec, "sqlite:%s/none.db", sk_th_tmpdir());
    sk_store_close(sk_th_store_open(spec)); /* empty: reconcile opens a store, never makes one */
    CHECK_EQ(sk_th_run_with_db(out, sizeof out, "reconcile", (const char *const[]){NULL},
                               sk_th_cluster_url(), spec),
             1);
    for (int i = 0; i < 3; i++) {
        snprintf(line, sizeof line, "activity %" PRIu64 ": DRIFT db_missing", ids[i]);
        CHECK_MSG(strstr(out, line), "%s missing\n%s", line, out);
        CHECK_EQ(sk_stock_drop(r, ids[i]), 0);
    }
    sk_redis_free(r);
}
