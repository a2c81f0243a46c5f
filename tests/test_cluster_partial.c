/* test_cluster_partial.c - one Redis Cluster master in trouble costs only
 * its own slots, in one `seckill serve` process (docs/cluster.md): while a
 * master is stopped (SIGSTOP), while a node of the map accepts connections
 * and never answers, and while a killed master (SIGKILL) is failed over,
 * the purchases of the other masters' activities go on from the same
 * process with answers fast and without gaps, /readyz says which slots are
 * unserved, and the invariants hold on the database afterwards.
 *
 * Each test has a private cluster (3 masters): the faults here stop, kill
 * or re-address nodes, which the runner's shared cluster must not suffer.
 * The bounds (p99 of the answers under 50 ms, no gap over 200 ms between
 * 200s) are far above what a healthy sale shows on a loaded 2-core box and
 * far below what one blocking map read costs (up to a second per node). */
#include <arpa/inet.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "engine/keys.h"
#include "redis/redis_cluster.h"
#include "redis/redis_conn.h"
#include "store/store.h"
#include "support/harness.h"
#include "support/http_client.h"
#include "support/sale_env.h"
#include "tools/spawn/cluster_spawn.h"
#include "tools/spawn/redis_spawn.h"

#define MASTERS 3
#define STOCK 1000000
#define LIMIT 5
#define USERS 150000
#define P99_MS 50
#define GAP_MS 200

static void nap_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* The master (0..MASTERS-1) the spawner gave slot to. */
static int spawn_master_of(int slot)
{
    for (int i = 0; i < MASTERS; i++)
        if (slot < SK_CLUSTER_SLOTS * (i + 1) / MASTERS) return i;
    return MASTERS - 1;
}

static int activity_slot(uint64_t aid)
{
    struct sk_keys k;
    sk_keys_for(&k, aid);
    return sk_cluster_key_slot(k.meta, strlen(k.meta));
}

/* A fresh activity id whose keys live on master m. */
static uint64_t id_on_master(int m)
{
    for (;;) {
        uint64_t id = sk_th_unique_id();
        if (spawn_master_of(activity_slot(id)) == m) return id;
    }
}

/* A private cluster of 3 masters (replicas each), where a master down does
 * not take the others with it (cluster-require-full-coverage no: with the
 * default, every node answers CLUSTERDOWN for every slot from the moment a
 * master is marked failed until its replica is promoted). */
static void cluster_start(struct sk_cluster_spawn *cl, int replicas, int node_timeout_ms)
{
    static const char *const extra[] = {"--cluster-require-full-coverage", "no", NULL};
    struct sk_cluster_spawn_opts o = {.masters = MASTERS,
                                      .replicas = replicas,
                                      .node_timeout_ms = node_timeout_ms,
                                      .extra_args = extra};
    CHECK_MSG(sk_cluster_spawn_start_opts(cl, &o) == 0, "cluster: %s", cl->errstr);
}

/* One serve process (so the purchases measured share its event loop). */
static void serve_start(struct sk_th_serve *v, const char *url)
{
    const char *extra[] = {"--role", "all", "--processes", "1", NULL};
    setenv("LSAN_OPTIONS", "exitcode=0", 1);
    sk_th_serve_start(v, url, extra);
    sale_wait_ready(v->port);
}

/* GET /readyz: the status, the body into out. */
static int readyz(int port, char *out, size_t cap)
{
    struct sk_th_http c;
    struct sk_th_resp *rp = malloc(sizeof *rp);
    CHECK(rp);
    int st = 0;
    if (sk_th_http_try_open(&c, port) == 0) {
        st = sk_th_http_req(&c, "GET", "/readyz", NULL, NULL, rp);
        size_t l = st ? strnlen(rp->body, cap - 1) : 0;
        memcpy(out, rp->body, l);
        out[l] = 0;
        sk_th_http_close(&c);
    }
    free(rp);
    return st;
}

/* What the buyers of the healthy masters' activities saw in a window. */
static void check_window(struct sale *s, int n, long unavailable_before[], const char *what)
{
    long timed = 0, slow = 0, slowest = 0, gap = 0;
    for (int i = 0; i < n; i++) {
        sale_time_stop(&s[i]);
        /* the time from the last 200 to the window's end counts too */
        long tail = (long)sk_mono_ms() - atomic_load(&s[i].last_ok_ms);
        long g = atomic_load(&s[i].max_gap_ms);
        if (tail > g) g = tail;
        if (g > gap) gap = g;
        timed += atomic_load(&s[i].timed);
        slow += atomic_load(&s[i].slow);
        if (atomic_load(&s[i].slowest_us) > slowest) slowest = atomic_load(&s[i].slowest_us);
        CHECK_MSG(atomic_load(&s[i].unavailable) == unavailable_before[i],
                  "%s: activity %" PRIu64 " on a healthy master answered 503 %ld times", what,
                  s[i].aid, atomic_load(&s[i].unavailable) - unavailable_before[i]);
    }
    printf("    %s: %ld answers on the healthy masters, %ld over %d ms (p99 bound: %ld), "
           "slowest %.1f ms, longest gap between 200s %ld ms\n",
           what, timed, slow, P99_MS, timed / 100, slowest / 1000.0, gap);
    CHECK_MSG(timed >= 100, "%s: only %ld answers in the window", what, timed);
    /* p99 under P99_MS: at most 1% of the answers slower */
    CHECK_MSG(slow * 100 <= timed, "%s: %ld of %ld answers over %d ms (slowest %.1f ms)", what,
              slow, timed, P99_MS, slowest / 1000.0);
    CHECK_MSG(gap <= GAP_MS, "%s: %ld ms without a 200", what, gap);
}

static void check_all(struct sale *s, int n, sk_store *st, sk_redis *r, const char *url,
                      const char *db)
{
    for (int i = 0; i < n; i++) {
        sale_wait_drained(r, s[i].aid, 60000);
        sale_check_invariants(st, r, url, db, s[i].aid, STOCK, LIMIT);
    }
}

static void open_clients(const struct sk_cluster_spawn *cl, const struct sk_th_serve *v,
                         sk_redis **r, sk_store **st)
{
    char err[256];
    CHECK_MSG(sk_redis_new(r, cl->url, 2000, 5000, err, sizeof err) == 0, "%s", err);
    CHECK_MSG(sk_store_open(st, v->db, err, sizeof err) == 0, "%s", err);
}

/* A continued node answers again; a stopped one must not outlive the
 * test whatever happens (the cluster's nodes die with the runner's thread,
 * but a stopped process ignores the SIGTERM of sk_cluster_spawn_stop). */
static pid_t stopped_pid;
static void continue_stopped(void)
{
    if (stopped_pid > 0) kill(stopped_pid, SIGCONT);
}

SK_TEST_T(cluster_serve_sells_other_masters_slots_while_a_master_is_stopped, 240)
{
    struct sk_cluster_spawn cl;
    /* no replicas, node timeout 5 s: the stop (2.5 s) is no failover, only
     * a master that answers nothing */
    cluster_start(&cl, 0, 5000);
    struct sk_th_serve v;
    serve_start(&v, cl.url);
    sale_log_on_failure(v.log, v.port);
    sk_redis *r;
    sk_store *st;
    open_clients(&cl, &v, &r, &st);
    /* the stopped master is the first of the map: the one a blocking
     * re-read would ask first */
    const int victim = spawn_master_of(0);
    static struct sale s[MASTERS];
    long unav[MASTERS - 1];
    int n = 0;
    for (int m = 0; m < MASTERS; m++) {
        if (m == victim) continue;
        uint64_t aid = sale_activity(v.port, id_on_master(m), STOCK, LIMIT, 1);
        sale_start(&s[n++], v.port, aid, USERS, LIMIT, 2);
    }
    /* its own buyer makes serve meet the stopped node (timeouts, a lost
     * connection, the map read again) */
    uint64_t vaid = sale_activity(v.port, id_on_master(victim), STOCK, LIMIT, 1);
    sale_start_recording(&s[n], v.port, vaid, USERS, LIMIT, 1, 0, 20);
    for (int i = 0; i <= n; i++) {
        struct sale_ok_want w = {&s[i], 200};
        sale_wait(sale_ok_above, &w, 30000, "200s on every master before the stop");
    }
    for (int i = 0; i < n; i++) {
        unav[i] = atomic_load(&s[i].unavailable);
        sale_time_from(&s[i], P99_MS);
    }
    stopped_pid = cl.pid[victim];
    atexit(continue_stopped);
    CHECK_EQ(kill(cl.pid[victim], SIGSTOP), 0);
    int64_t until = sk_mono_ms() + 2500;
    char body[2048];
    int saw_partial = 0;
    while (sk_mono_ms() < until) {
        /* /readyz: the stopped master's slots, the rest served */
        if (!saw_partial && readyz(v.port, body, sizeof body) == 200 && strstr(body, "partial")) {
            char port[16];
            snprintf(port, sizeof port, ":%d", cl.port[victim]);
            CHECK_MSG(strstr(body, port), "readyz names other slots: %s", body);
            saw_partial = 1;
        }
        nap_ms(20);
    }
    check_window(s, n, unav, "master stopped");
    CHECK_EQ(kill(cl.pid[victim], SIGCONT), 0);
    stopped_pid = 0;
    CHECK_MSG(saw_partial, "/readyz never said which slots were unserved (last: %s)", body);
    /* the continued master sells again */
    struct sale_ok_want w = {&s[n], atomic_load(&s[n].ok) + 50};
    sale_wait(sale_ok_above, &w, 30000, "200s on the continued master");
    for (int i = 0; i <= n; i++)
        sale_stop(&s[i]);
    CHECK(atomic_load(&s[n].unavailable) + atomic_load(&s[n].lost) > 0); /* it was felt */
    check_all(s, n + 1, st, r, cl.url, v.db);
    CHECK_EQ(sk_th_serve_stop(&v, SIGTERM), 0);
    sk_store_close(st);
    sk_redis_free(r);
    sk_cluster_spawn_stop(&cl);
    sale_log_passed();
}

/* A listening socket that accepts (the kernel completes the handshake into
 * its backlog) and never answers: a node whose process hangs. */
static int blackhole(int *port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    CHECK_EQ(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    CHECK_EQ(listen(fd, 128), 0);
    socklen_t l = sizeof a;
    CHECK_EQ(getsockname(fd, (struct sockaddr *)&a, &l), 0);
    *port = ntohs(a.sin_port);
    return fd;
}

/* 1 when every node's CLUSTER SLOTS names port as the owner of slot. */
struct announced {
    const struct sk_cluster_spawn *cl;
    int slot, port;
};
static int everyone_sees(void *arg)
{
    struct announced *a = arg;
    for (int i = 0; i < a->cl->nodes; i++) {
        redisReply *rep = sk_redis_spawn_cmd(a->cl->port[i], 2000, "CLUSTER SLOTS");
        int ok = 0;
        for (size_t j = 0; rep && rep->type == REDIS_REPLY_ARRAY && j < rep->elements; j++) {
            redisReply *e = rep->element[j];
            if (e->elements >= 3 && a->slot >= e->element[0]->integer &&
                a->slot <= e->element[1]->integer)
                ok = e->element[2]->element[1]->integer == a->port;
        }
        if (rep) freeReplyObject(rep);
        if (!ok) return 0;
    }
    return 1;
}

SK_TEST_T(cluster_serve_sells_other_masters_slots_while_a_node_in_the_map_never_answers, 240)
{
    struct sk_cluster_spawn cl;
    cluster_start(&cl, 0, 5000);
    /* the first master of the map is announced at a port that accepts and
     * never answers: every node's map names it there */
    int hport, hfd = blackhole(&hport);
    const int victim = spawn_master_of(0);
    redisReply *rep =
        sk_redis_spawn_cmd(cl.port[victim], 2000, "CONFIG SET cluster-announce-port %d", hport);
    CHECK_MSG(rep && rep->type == REDIS_REPLY_STATUS, "CONFIG SET: %s",
              rep && rep->str ? rep->str : "no reply");
    freeReplyObject(rep);
    struct announced an = {&cl, 0, hport};
    sale_wait(everyone_sees, &an, 30000, "the blackhole in every node's map");
    /* serve comes up on that map: the other masters' slots are served */
    struct sk_th_serve v;
    serve_start(&v, cl.url);
    sale_log_on_failure(v.log, v.port);
    char body[2048];
    CHECK_EQ(readyz(v.port, body, sizeof body), 200);
    char hp[16];
    snprintf(hp, sizeof hp, ":%d", hport);
    CHECK_MSG(strstr(body, "partial") && strstr(body, hp), "readyz: %s", body);
    sk_redis *r;
    sk_store *st;
    open_clients(&cl, &v, &r, &st);
    static struct sale s[MASTERS - 1];
    long unav[MASTERS - 1];
    int n = 0;
    for (int m = 0; m < MASTERS; m++) {
        if (m == victim) continue;
        uint64_t aid = sale_activity(v.port, id_on_master(m), STOCK, LIMIT, 1);
        sale_start(&s[n++], v.port, aid, USERS, LIMIT, 2);
    }
    for (int i = 0; i < n; i++) {
        struct sale_ok_want w = {&s[i], 200};
        sale_wait(sale_ok_above, &w, 30000, "200s on the healthy masters");
    }
    /* meanwhile serve keeps connecting to the silent node (each attempt
     * times out) and reading the map again: none of it may hold the loop */
    for (int i = 0; i < n; i++) {
        unav[i] = atomic_load(&s[i].unavailable);
        sale_time_from(&s[i], P99_MS);
    }
    nap_ms(3000);
    check_window(s, n, unav, "node never answers");
    for (int i = 0; i < n; i++)
        sale_stop(&s[i]);
    check_all(s, n, st, r, cl.url, v.db);
    CHECK_EQ(sk_th_serve_stop(&v, SIGTERM), 0);
    close(hfd);
    sk_store_close(st);
    sk_redis_free(r);
    sk_cluster_spawn_stop(&cl);
    sale_log_passed();
}

/* The master of slot in the view of the node at port is port2. */
struct owner_want {
    const struct sk_cluster_spawn *cl;
    int slot, dead;
};
static int failed_over(void *arg)
{
    struct owner_want *o = arg;
    for (int i = 0; i < o->cl->nodes; i++) {
        if (i == o->dead) continue;
        redisReply *rep = sk_redis_spawn_cmd(o->cl->port[i], 2000, "CLUSTER SLOTS");
        int ok = 0;
        for (size_t j = 0; rep && rep->type == REDIS_REPLY_ARRAY && j < rep->elements; j++) {
            redisReply *e = rep->element[j];
            if (e->elements >= 3 && o->slot >= e->element[0]->integer &&
                o->slot <= e->element[1]->integer)
                ok = e->element[2]->element[1]->integer != o->cl->port[o->dead];
        }
        if (rep) freeReplyObject(rep);
        if (!ok) return 0;
    }
    return 1;
}

SK_TEST_T(cluster_serve_keeps_admitting_other_masters_slots_while_a_killed_master_fails_over, 300)
{
    struct sk_cluster_spawn cl;
    cluster_start(&cl, 1, 3000);
    struct sk_th_serve v;
    serve_start(&v, cl.url);
    sale_log_on_failure(v.log, v.port);
    sk_redis *r;
    sk_store *st;
    open_clients(&cl, &v, &r, &st);
    const int victim = spawn_master_of(0);
    static struct sale s[MASTERS];
    long unav[MASTERS - 1];
    int n = 0;
    for (int m = 0; m < MASTERS; m++) {
        if (m == victim) continue;
        uint64_t aid = sale_activity(v.port, id_on_master(m), STOCK, LIMIT, 1);
        sale_start(&s[n++], v.port, aid, USERS, LIMIT, 2);
    }
    uint64_t vaid = sale_activity(v.port, id_on_master(victim), STOCK, LIMIT, 1);
    sale_start_recording(&s[n], v.port, vaid, USERS, LIMIT, 1, 0, 20);
    for (int i = 0; i <= n; i++) {
        struct sale_ok_want w = {&s[i], 200};
        sale_wait(sale_ok_above, &w, 30000, "200s on every master before the kill");
    }
    for (int i = 0; i < n; i++) {
        unav[i] = atomic_load(&s[i].unavailable);
        sale_time_from(&s[i], P99_MS);
    }
    long victim_ok = atomic_load(&s[n].ok);
    CHECK_EQ(kill(cl.pid[victim], SIGKILL), 0);
    int64_t t_kill = sk_mono_ms();
    /* the failover window: until every live node names the replica */
    char body[2048];
    int saw_partial = 0;
    struct owner_want o = {&cl, activity_slot(vaid), victim};
    int64_t by = t_kill + 60000;
    while (!failed_over(&o)) {
        CHECK_MSG(sk_mono_ms() < by, "no failover of %d within 60 s", cl.port[victim]);
        if (!saw_partial && readyz(v.port, body, sizeof body) == 200 && strstr(body, "partial")) {
            char port[16];
            snprintf(port, sizeof port, ":%d", cl.port[victim]);
            CHECK_MSG(strstr(body, port), "readyz names other slots: %s", body);
            saw_partial = 1;
        }
        nap_ms(20);
    }
    int64_t window = sk_mono_ms() - t_kill;
    check_window(s, n, unav, "master killed, failing over");
    printf("    failover window %" PRId64 " ms\n", window);
    CHECK_MSG(saw_partial, "/readyz never said which slots were unserved (last: %s)", body);
    /* the promoted replica sells the killed master's activity again */
    struct sale_ok_want w = {&s[n], victim_ok};
    sale_wait(sale_ok_above, &w, 60000, "a 200 on the promoted replica");
    w.n = atomic_load(&s[n].ok) + 100;
    sale_wait(sale_ok_above, &w, 60000, "100 more 200s on the promoted replica");
    for (int i = 0; i <= n; i++)
        sale_stop(&s[i]);
    check_all(s, n + 1, st, r, cl.url, v.db);
    CHECK_EQ(readyz(v.port, body, sizeof body), 200);
    CHECK_MSG(strstr(body, "\"ready\""), "readyz after the failover: %s", body);
    CHECK_EQ(sk_th_serve_stop(&v, SIGTERM), 0);
    sk_store_close(st);
    sk_redis_free(r);
    sk_cluster_spawn_stop(&cl);
    sale_log_passed();
}
