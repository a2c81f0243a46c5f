/* test_redis_resolve.c - the async client and host names: a Cluster whose
 * nodes announce themselves by name ("localhost", as CLUSTER SLOTS then
 * says) is served through those names, and the event loop keeps answering
 * while a name is being resolved (core/resolve.c: a name goes to a thread
 * of its own, a numeric address never reaches the resolver).
 *
 * A slow resolution for real, without a network: the test runs a DNS
 * server of its own on a loopback address (UDP, in a thread) that holds
 * every question until told to answer, and points this process's resolver
 * at it through a mount namespace of its own (/etc/resolv.conf and
 * /etc/nsswitch.conf bind-mounted over, private to this test's process: the
 * machine's files are untouched and the mounts end with the process). On
 * a machine where that cannot be set up (no CAP_SYS_ADMIN, no loopback
 * address free) the test says so and checks nothing. */
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <unistd.h>

#include <h2o.h>

#include "core/clock.h"
#include "redis/redis_async.h"
#include "redis/redis_cluster.h"
#include "spawn/redis_spawn.h"
#include "support/fixtures.h"
#include "support/harness.h"
#include "tests/support/spawn/cluster_spawn.h"

static void pass(h2o_loop_t *loop, sk_aredis *const *ars, int n)
{
    h2o_evloop_run(loop, 10);
    for (int i = 0; i < n; i++) {
        sk_aredis_flush(ars[i]);
        sk_aredis_tick(ars[i]);
    }
}

/* One command on ar, its answer awaited on the loop (bounded). */
static void call(h2o_loop_t *loop, sk_aredis *const *ars, int n, sk_aredis *ar,
                 struct sk_th_answers *a, int argc, const char *const *argv)
{
    int before = a->n;
    CHECK_EQ(sk_aredis_command(ar, sk_th_on_reply, a, argc, argv, NULL), 0);
    int64_t by = sk_mono_ms() + 5000;
    while (a->n == before && sk_mono_ms() < by)
        pass(loop, ars, n);
    CHECK_MSG(a->n == before + 1, "no answer: %s", sk_aredis_errstr(ar));
}

/* Whether every master entry of node port's CLUSTER SLOTS names host. */
static int slots_name(int port, const char *host)
{
    redisReply *r = sk_redis_spawn_cmd(port, 2000, "CLUSTER SLOTS");
    int ok = r && r->type == REDIS_REPLY_ARRAY && r->elements > 0;
    for (size_t i = 0; ok && i < r->elements; i++) {
        const redisReply *m = r->element[i]->elements >= 3 ? r->element[i]->element[2] : NULL;
        ok = m && m->elements >= 2 && m->element[0]->type == REDIS_REPLY_STRING &&
             !strcmp(m->element[0]->str, host);
    }
    if (r) freeReplyObject(r);
    return ok;
}

SK_TEST(async_cluster_client_serves_masters_named_by_host_name)
{
    struct sk_cluster_spawn cs = {0};
    const char *extra[] = {"--cluster-announce-hostname", "localhost",
                           "--cluster-preferred-endpoint-type", "hostname", NULL};
    CHECK_MSG(sk_cluster_spawn_start(&cs, 3, extra) == 0, "%s", cs.errstr);
    /* every node's map names its masters "localhost" once the names went
     * round the cluster bus */
    int named = 0;
    for (int64_t by = sk_mono_ms() + 20000; !named && sk_mono_ms() < by;) {
        named = 1;
        for (int i = 0; i < cs.n; i++)
            named &= slots_name(cs.port[i], "localhost");
        if (!named) usleep(20000);
    }
    CHECK_MSG(named, "CLUSTER SLOTS does not name the masters localhost");
    char url[128];
    snprintf(url, sizeof url, "redis+cluster://localhost:%d", cs.port[1]);
    h2o_loop_t *loop = h2o_evloop_create();
    sk_aredis *ar;
    char err[128];
    CHECK_MSG(sk_aredis_new(&ar, loop, url, 1000, err, sizeof err) == 0, "%s", err);
    int64_t by = sk_mono_ms() + 10000;
    while (!sk_aredis_ready(ar) && sk_mono_ms() < by)
        pass(loop, &ar, 1);
    CHECK_MSG(sk_aredis_ready(ar), "not ready: %s", sk_aredis_errstr(ar));
    /* every master's slots are served through its name: a key of each */
    int served[3] = {0};
    struct sk_th_answers a = {0};
    for (int k = 0; k < 200 && !(served[0] && served[1] && served[2]); k++) {
        char key[32];
        snprintf(key, sizeof key, "resolve:%d", k);
        int m = sk_cluster_key_slot(key, strlen(key)) * cs.n / SK_CLUSTER_SLOTS;
        if (served[m]) continue;
        by = sk_mono_ms() + 5000;
        while (sk_aredis_unserved(ar, NULL, 0) && sk_mono_ms() < by)
            pass(loop, &ar, 1); /* the masters' clients resolve and connect */
        call(loop, &ar, 1, ar, &a, 3, (const char *const[]){"SET", key, "v"});
        CHECK_STR(a.last, "OK");
        call(loop, &ar, 1, ar, &a, 2, (const char *const[]){"GET", key});
        CHECK_STR(a.last, "v");
        served[m] = 1;
    }
    CHECK(served[0] && served[1] && served[2]);
    CHECK_EQ(a.nulls, 0);
    CHECK_EQ(sk_aredis_unserved(ar, NULL, 0), 0);
    CHECK_EQ(sk_aredis_redirects(SK_AREDIS_MOVED), 0); /* routed by the map read through names */
    sk_aredis_free(ar);
    h2o_evloop_destroy(loop);
    sk_cluster_spawn_stop(&cs);
}

/* The DNS server: holds every question until release, then answers A
 * with 127.0.0.1 and any other type with no records. */
struct dns {
    int fd;
    atomic_int release, stop, asked, answered;
};

static void dns_answer(struct dns *d, const unsigned char *q, size_t n, struct sockaddr_in *from)
{
    size_t i = 12;
    while (i < n && q[i])
        i += q[i] + 1u;
    if (n < 12 || i + 5 > n) return;
    size_t qend = i + 5;
    int type = q[i + 1] << 8 | q[i + 2];
    unsigned char out[600];
    memcpy(out, q, qend);
    out[2] = 0x81; /* a response, recursion desired */
    out[3] = 0x80; /* recursion available, no error */
    out[4] = 0, out[5] = 1;
    out[6] = 0, out[7] = type == 1;
    memset(out + 8, 0, 4);
    size_t len = qend;
    if (type == 1) {
        static const unsigned char a[] = {0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 127, 0, 0, 1};
        memcpy(out + len, a, sizeof a);
        len += sizeof a;
    }
    if (sendto(d->fd, out, len, 0, (struct sockaddr *)from, sizeof *from) == (ssize_t)len)
        atomic_fetch_add(&d->answered, 1);
}

static void *dns_main(void *arg)
{
    struct dns *d = arg;
    struct {
        unsigned char q[512];
        size_t n;
        struct sockaddr_in from;
    } held[16];
    int nheld = 0;
    while (!atomic_load(&d->stop)) {
        if (atomic_load(&d->release)) {
            for (int i = 0; i < nheld; i++)
                dns_answer(d, held[i].q, held[i].n, &held[i].from);
            nheld = 0;
        }
        struct pollfd p = {d->fd, POLLIN, 0};
        if (poll(&p, 1, 10) <= 0) continue;
        if (nheld == 16) nheld = 15; /* a flood: the oldest question is dropped */
        socklen_t fl = sizeof held[nheld].from;
        ssize_t n = recvfrom(d->fd, held[nheld].q, sizeof held[nheld].q, 0,
                             (struct sockaddr *)&held[nheld].from, &fl);
        if (n <= 0) continue;
        held[nheld++].n = (size_t)n;
        atomic_fetch_add(&d->asked, 1);
    }
    return NULL;
}

static int write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    int ok = fputs(text, f) >= 0;
    return fclose(f) == 0 && ok ? 0 : -1;
}

SK_TEST(async_client_loop_answers_while_a_host_name_resolves)
{
    struct sk_th_redis srv;
    sk_th_redis_start(&srv, NULL);
    /* a loopback address of its own for the DNS server (port 53) */
    struct dns d = {.fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0)};
    CHECK(d.fd >= 0);
    struct sockaddr_in ns = {.sin_family = AF_INET, .sin_port = htons(53)};
    char ns_ip[32] = "";
    for (int t = 0; t < 20 && !ns_ip[0]; t++) {
        unsigned x = ((unsigned)getpid() * 7919u + (unsigned)t * 104729u) % 250u + 2u;
        unsigned y = ((unsigned)getpid() / 250u + (unsigned)t) % 250u + 2u;
        ns.sin_addr.s_addr = htonl(0x7f000000u | 53u << 16 | x << 8 | y);
        if (bind(d.fd, (struct sockaddr *)&ns, sizeof ns) == 0)
            snprintf(ns_ip, sizeof ns_ip, "127.53.%u.%u", x, y);
    }
    if (!ns_ip[0]) {
        printf("    # skipped: no loopback address free for a DNS server (%s)\n", strerror(errno));
        close(d.fd);
        sk_th_redis_stop(&srv, 1);
        return;
    }
    char resolv[320], nss[320], text[128];
    snprintf(resolv, sizeof resolv, "%s/resolv.conf", sk_th_tmpdir());
    snprintf(nss, sizeof nss, "%s/nsswitch.conf", sk_th_tmpdir());
    snprintf(text, sizeof text, "nameserver %s\noptions timeout:10 attempts:1\n", ns_ip);
    CHECK_EQ(write_file(resolv, text), 0);
    CHECK_EQ(write_file(nss, "hosts: dns\n"), 0);
    /* this thread's mounts apart from the machine's before anything is
     * mounted; the resolver threads it starts share them */
    if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0) {
        printf("    # skipped: no mount namespace of its own (%s)\n", strerror(errno));
        close(d.fd);
        sk_th_redis_stop(&srv, 1);
        return;
    }
    CHECK_MSG(mount(resolv, "/etc/resolv.conf", NULL, MS_BIND, NULL) == 0, "%s", strerror(errno));
    CHECK_MSG(mount(nss, "/etc/nsswitch.conf", NULL, MS_BIND, NULL) == 0, "%s", strerror(errno));
    pthread_t th;
    CHECK_EQ(pthread_create(&th, NULL, dns_main, &d), 0);

    h2o_loop_t *loop = h2o_evloop_create();
    char url[128], err[128];
    sk_aredis *ars[2];
    /* the numeric one never asks the DNS server; the name waits on it */
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", srv.port);
    CHECK_MSG(sk_aredis_new(&ars[0], loop, url, 1000, err, sizeof err) == 0, "%s", err);
    snprintf(url, sizeof url, "redis://sk-slow-name.test:%d", srv.port);
    int64_t t0 = sk_mono_ms();
    CHECK_MSG(sk_aredis_new(&ars[1], loop, url, 1000, err, sizeof err) == 0, "%s", err);
    int64_t made_ms = sk_mono_ms() - t0;
    int64_t by = sk_mono_ms() + 10000;
    while ((!sk_aredis_ready(ars[0]) || !atomic_load(&d.asked)) && sk_mono_ms() < by)
        pass(loop, ars, 2);
    CHECK_MSG(sk_aredis_ready(ars[0]), "numeric client not ready: %s", sk_aredis_errstr(ars[0]));
    CHECK_MSG(atomic_load(&d.asked) > 0, "the name was never asked of the DNS server");
    /* while the question is held, the loop goes on answering the other
     * client: 200 round trips, one after the other */
    struct sk_th_answers a = {0};
    for (int i = 0; i < 200; i++) {
        call(loop, ars, 2, ars[0], &a, 1, (const char *const[]){"PING"});
        CHECK_STR(a.last, "PONG");
    }
    CHECK(!sk_aredis_ready(ars[1]));
    CHECK_MSG(!strncmp(sk_aredis_errstr(ars[1]), "resolving", 9), "%s", sk_aredis_errstr(ars[1]));
    CHECK_EQ(atomic_load(&d.answered), 0);
    printf("    # client made in %lld ms; 200 PINGs answered while the name waited on DNS\n",
           (long long)made_ms);
    /* answered: the named client connects and works */
    atomic_store(&d.release, 1);
    by = sk_mono_ms() + 10000;
    while (!sk_aredis_ready(ars[1]) && sk_mono_ms() < by)
        pass(loop, ars, 2);
    CHECK_MSG(sk_aredis_ready(ars[1]), "named client not ready: %s", sk_aredis_errstr(ars[1]));
    CHECK(atomic_load(&d.answered) > 0);
    call(loop, ars, 2, ars[1], &a, 1, (const char *const[]){"PING"});
    CHECK_STR(a.last, "PONG");
    CHECK_EQ(a.nulls, 0);
    sk_aredis_free(ars[0]);
    sk_aredis_free(ars[1]);
    h2o_evloop_destroy(loop);
    atomic_store(&d.stop, 1);
    pthread_join(th, NULL);
    close(d.fd);
    sk_th_redis_stop(&srv, 1);
}
