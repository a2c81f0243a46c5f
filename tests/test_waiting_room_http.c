/* test_waiting_room_http.c - the waiting room through real `seckill serve`
 * processes over real sockets, on Redis's real clock (docs/waiting-room.md):
 * passes handed out in place order at the pace by two processes together
 * (and at a new pace after the admin route changes it), purchases that need
 * the buyer's own valid pass, sold out reaching waiting buyers at their
 * next poll, the sale's invariants under concurrent buyers, the pace held
 * when 30 % of the waiters close their tabs, and bad input.
 * The scripts one rule at a time are in test_waiting_room.c. */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>
#include <sqlite3.h>

#include "core/clock.h"
#include "engine/activity.h"
#include "store/store.h"
#include "support/buyer_http.h"
#include "support/fixtures.h"
#include "support/http_api.h"

/* Creates (on v) an activity with a waiting room: window [start, end) in
 * ms, rate passes/s living ttl s; seed NULL: drawn by the server. Then
 * preheats and opens it. */
static void wr_ready(struct srv *v, uint64_t id, long long stock, long long limit, int64_t start,
                     int64_t end, int rate, int ttl, int segments)
{
    char s[40], e[40], body[700];
    struct sk_th_resp r;
    CHECK(sk_time_format_rfc3339(start, s, sizeof s) == 0);
    CHECK(sk_time_format_rfc3339(end, e, sizeof e) == 0);
    snprintf(body, sizeof body,
             "{\"id\":%" PRIu64 ",\"name\":\"queue %" PRIu64 "\",\"stock\":%lld,"
             "\"per_user_limit\":%lld,\"start\":\"%s\",\"end\":\"%s\",\"segments\":%d,"
             "\"waiting_room\":{\"passes_per_s\":%d,\"pass_ttl_s\":%d}}",
             id, id, stock, limit, s, e, segments, rate, ttl);
    EXPECT_STATUS(admin(v, "POST", "/api/v1/activities", body, &r), &r, 201);
    EXPECT_STATUS(admin_op(v, id, "preheat", NULL, &r), &r, 200);
    EXPECT_STATUS(admin_op(v, id, "open", NULL, &r), &r, 200);
}

/* A join (POST) or poll (GET) of uid on connection c. */
static int queue_req(struct sk_th_http *c, const char *method, uint64_t aid, uint64_t uid,
                     struct sk_th_resp *r)
{
    char path[128];
    snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64 "/queue", aid);
    return sk_th_as_user(c, method, path, uid, NULL, r);
}

/* A purchase of one unit by uid with pass (NULL: none). */
static int buy_pass(struct sk_th_http *c, uint64_t aid, uint64_t uid, const char *pass,
                    const char *idem, struct sk_th_resp *r)
{
    char path[128], h[256];
    snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64 "/purchase", aid);
    int n = snprintf(h, sizeof h, "X-User-Id: %" PRIu64 "\r\n", uid);
    if (pass) n += snprintf(h + n, sizeof h - (size_t)n, "X-Queue-Pass: %s\r\n", pass);
    if (idem) snprintf(h + n, sizeof h - (size_t)n, "Idempotency-Key: %s\r\n", idem);
    return sk_th_http_req(c, "POST", path, h, NULL, r);
}

/* The fields of a 200 queue answer. */
struct qa {
    char state[32];
    char pass[80];
    long long position, place, poll_after_ms; /* -1: null or absent */
};

static struct qa qa_of(const struct sk_th_resp *r)
{
    struct qa q = {.position = -1, .place = -1, .poll_after_ms = -1};
    json_t *j = body_obj(__FILE__, __LINE__, r);
    json_t *f = json_object_get(j, "state");
    CHECK_MSG(json_is_string(f), "no state in %s", r->body);
    snprintf(q.state, sizeof q.state, "%s", json_string_value(f));
    if (json_is_string(f = json_object_get(j, "pass")))
        snprintf(q.pass, sizeof q.pass, "%s", json_string_value(f));
    if (json_is_integer(f = json_object_get(j, "position"))) q.position = json_integer_value(f);
    if (json_is_integer(f = json_object_get(j, "place"))) q.place = json_integer_value(f);
    if (json_is_integer(f = json_object_get(j, "poll_after_ms")))
        q.poll_after_ms = json_integer_value(f);
    json_decref(j);
    return q;
}

/* uid joins on c and polls until its pass comes (bounded). */
static struct qa pass_of(struct sk_th_http *c, uint64_t aid, uint64_t uid)
{
    struct sk_th_resp r;
    int64_t deadline = sk_mono_ms() + 10000;
    EXPECT_STATUS(queue_req(c, "POST", aid, uid, &r), &r, 200);
    struct qa q = qa_of(&r);
    while (strcmp(q.state, "admitted") != 0) {
        CHECK_MSG(strcmp(q.state, "waiting") == 0, "user %" PRIu64 ": %s", uid, r.body);
        CHECK_MSG(sk_mono_ms() < deadline, "user %" PRIu64 " got no pass within 10 s", uid);
        sk_th_nap_ms(5);
        EXPECT_STATUS(queue_req(c, "GET", aid, uid, &r), &r, 200);
        q = qa_of(&r);
    }
    return q;
}

/* A counter line of /metrics ("name{labels}"), 0 when absent. */
static long long metric(struct srv *v, const char *series)
{
    /* the node's text outgrows the client's body buffer: read it raw */
    static char raw[1 << 18];
    static const char mreq[] = "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    size_t got = sk_th_http_raw(v->s.port, mreq, sizeof mreq - 1, raw, sizeof raw, 5000);
    CHECK_MSG(got > 12 && strncmp(raw, "HTTP/1.1 200", 12) == 0, "/metrics: %.60s", raw);
    raw[got < sizeof raw ? got : sizeof raw - 1] = 0;
    size_t n = strlen(series);
    for (const char *p = raw; (p = strstr(p, series)) != NULL; p++)
        if (p > raw && p[-1] == '\n' && p[n] == ' ') return atoll(p + n + 1);
    return 0;
}

/* ---- pacing across two processes ---------------------------------------- */

#define PACE_BUYERS 1000
#define PACE_THREADS 4
#define RATE1 50
#define RATE2 150

/* One answer a poller saw. */
struct ev {
    int32_t place, n_issued; /* n_issued: place - position of a waiting answer, else -1 */
    int admitted;
    int64_t sent_ms, got_ms; /* wall clock */
};

/* Two nodes (v[0], v[1], one database) and a new activity of `stock` units, one per
 * buyer, open for an hour from from_now_ms after they are up (negative:
 * already begun), with a waiting room of `rate` passes/s living ttl s
 * (wr_ready). *start (may be NULL) gets the start; returns the id. */
static uint64_t open_on_two(struct srv v[2], long long stock, int64_t from_now_ms, int rate,
                            int ttl, int segments, int64_t *start)
{
    srv_start(&v[0], NULL);
    /* two nodes of one sale: one database (a node of another database is
     * refused its purchases: docs/design.md, "The store's identity") */
    srv_start(&v[1], (const char *const[]){"--db", v[0].s.db, NULL});
    uint64_t aid = sk_th_unique_id();
    int64_t at = sk_wall_ms() + from_now_ms;
    wr_ready(&v[0], aid, stock, 1, at, at + HOUR_MS, rate, ttl, segments);
    if (start) *start = at;
    return aid;
}

/* One connection to each of the two processes. */
static void open_both(struct sk_th_http c[2], const int port[2])
{
    sk_th_http_open(&c[0], port[0]);
    sk_th_http_open(&c[1], port[1]);
}
static void close_both(struct sk_th_http c[2])
{
    sk_th_http_close(&c[0]);
    sk_th_http_close(&c[1]);
}

/* A thread of buyers: what the test gives it (the two processes' ports,
 * the activity, the thread's index) and its own connection to each
 * process and response buffer (thread_open .. thread_close). */
struct wr_thread {
    int port[2];
    uint64_t aid;
    int index;
    struct sk_th_http c[2];
    struct sk_th_resp *r;
};

static void thread_open(struct wr_thread *t)
{
    open_both(t->c, t->port);
    t->r = sk_th_resp_new();
}

static void thread_close(struct wr_thread *t)
{
    free(t->r);
    t->r = NULL;
    close_both(t->c);
}

struct poller {
    struct wr_thread t;
    uint64_t first_user;
    int64_t until_ms; /* wall */
    struct ev *ev;
    size_t n, cap;
};

static void *poll_loop(void *arg)
{
    struct poller *p = arg;
    thread_open(&p->t);
    struct sk_th_resp *r = p->t.r;
    unsigned k = 0;
    while (sk_wall_ms() < p->until_ms && p->n < p->cap) {
        /* my buyers, round robin, alternating the two processes */
        uint64_t uid = p->first_user + (uint64_t)p->t.index +
                       PACE_THREADS * (k % (PACE_BUYERS / PACE_THREADS));
        struct ev e = {.sent_ms = sk_wall_ms(), .n_issued = -1};
        int st = queue_req(&p->t.c[k & 1], "GET", p->t.aid, uid, r);
        e.got_ms = sk_wall_ms();
        CHECK_MSG(st == 200, "poll: %d %s", st, r->body);
        struct qa q = qa_of(r);
        e.place = (int32_t)q.place;
        e.admitted = strcmp(q.state, "admitted") == 0;
        CHECK_MSG(e.admitted || strcmp(q.state, "waiting") == 0, "poll: %s", r->body);
        if (!e.admitted) e.n_issued = (int32_t)(q.place - q.position);
        p->ev[p->n++] = e;
        k++;
    }
    thread_close(&p->t);
    return NULL;
}

static int by_got(const void *a, const void *b)
{
    const struct ev *x = a, *y = b;
    return x->got_ms < y->got_ms ? -1 : x->got_ms > y->got_ms;
}

static int by_sent(const void *a, const void *b)
{
    const struct ev *x = a, *y = b;
    return (x->sent_ms > y->sent_ms) - (x->sent_ms < y->sent_ms);
}

/* Passes issued by the answers (place - position of the waiting ones)
 * received in [from, to): the pace between the first and the last, in
 * passes per second. */
static double pace_between(const struct ev *ev, size_t n, int64_t from, int64_t to)
{
    const struct ev *first = NULL, *last = NULL;
    for (size_t i = 0; i < n; i++) {
        if (ev[i].n_issued < 0 || ev[i].got_ms < from || ev[i].got_ms >= to) continue;
        if (!first) first = &ev[i];
        last = &ev[i];
    }
    CHECK_MSG(first && last && last->got_ms - first->got_ms >= 500,
              "too few waiting answers between %" PRId64 " and %" PRId64, from, to);
    return (double)(last->n_issued - first->n_issued) * 1000.0 /
           (double)(last->got_ms - first->got_ms);
}

/* Buyers who joined before the start poll through two serve processes;
 * passes go out in place order (nobody ever sees a pass while someone ahead
 * of them is still waiting) at the pace, 50/s and after the admin route
 * changes it 150/s, within 15%, and never ahead of what the pace allows
 * since the start - with both processes handing them out. */
SK_TEST_T(wr_http_two_processes_hand_out_passes_in_place_order_at_the_pace, 120)
{
    struct srv v[2];
    int64_t start;
    /* 4 s: room for the joins on a loaded machine */
    uint64_t aid = open_on_two(v, 1000000, 4000, RATE1, 600, 1, &start);
    const uint64_t first = 10000;
    struct sk_th_resp r;
    for (uint64_t u = first; u < first + PACE_BUYERS; u++)
        EXPECT_STATUS(queue_req(&v[u & 1].c, "POST", aid, u, &r), &r, 200);
    CHECK_MSG(sk_wall_ms() < start, "the joins took past the start");
    static struct poller p[PACE_THREADS];
    pthread_t th[PACE_THREADS];
    int64_t change_at = start + 2500, until = change_at + 2000;
    while (sk_wall_ms() < start)
        sk_th_nap_ms(5);
    for (int i = 0; i < PACE_THREADS; i++) {
        p[i] = (struct poller){.t = {.port = {v[0].s.port, v[1].s.port}, .aid = aid, .index = i},
                               .first_user = first,
                               .until_ms = until,
                               .cap = 200000};
        p[i].ev = malloc(p[i].cap * sizeof *p[i].ev);
        CHECK(p[i].ev != NULL);
        CHECK_EQ(pthread_create(&th[i], NULL, poll_loop, &p[i]), 0);
    }
    while (sk_wall_ms() < change_at)
        sk_th_nap_ms(5);
    char path[128], body[64];
    snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64 "/queue/pace", aid);
    snprintf(body, sizeof body, "{\"passes_per_s\":%d}", RATE2);
    int64_t change_sent = sk_wall_ms();
    EXPECT_STATUS(admin(&v[0], "POST", path, body, &r), &r, 200);
    int64_t change_got = sk_wall_ms();
    CHECK_EQ(JINT(&r, "passes_per_s"), RATE2);
    for (int i = 0; i < PACE_THREADS; i++)
        CHECK_EQ(pthread_join(th[i], NULL), 0);
    size_t n = 0;
    for (int i = 0; i < PACE_THREADS; i++)
        n += p[i].n;
    struct ev *ev = malloc(n * sizeof *ev);
    CHECK(ev != NULL);
    n = 0;
    for (int i = 0; i < PACE_THREADS; i++) {
        memcpy(ev + n, p[i].ev, p[i].n * sizeof *ev);
        n += p[i].n;
        free(p[i].ev);
    }
    CHECK_MSG(n > 2000, "only %zu answers", n);
    qsort(ev, n, sizeof *ev, by_got);
    /* in place order: a waiting answer sent after an admitted answer was
     * received must be for a place behind it (the waiting answers taken in
     * the order they were sent, the admitted ones in the order received: a
     * slow answer sent early is judged by what was known when it was sent) */
    struct ev *sent = malloc(n * sizeof *sent);
    CHECK(sent != NULL);
    memcpy(sent, ev, n * sizeof *ev);
    qsort(sent, n, sizeof *sent, by_sent);
    size_t admitted_seen = 0, j = 0;
    int32_t max_admitted = 0;
    for (size_t i = 0; i < n; i++) {
        const struct ev *w = &sent[i];
        if (w->admitted) {
            admitted_seen++;
            continue;
        }
        /* every admitted answer received before w was sent */
        while (j < n && ev[j].got_ms < w->sent_ms) {
            if (ev[j].admitted && ev[j].place > max_admitted) max_admitted = ev[j].place;
            j++;
        }
        CHECK_MSG(max_admitted < w->place,
                  "place %d had a pass while place %d still waited after it", max_admitted,
                  w->place);
    }
    free(sent);
    CHECK_MSG(admitted_seen > 100, "only %zu admitted answers", admitted_seen);
    /* never ahead of the pace since the start (2 passes of slack: the
     * answer's Redis time lies between the send and the receipt) */
    for (size_t i = 0; i < n; i++) {
        if (ev[i].n_issued < 0) continue;
        double allowed = RATE1 * (double)(ev[i].got_ms - start) / 1000.0;
        if (ev[i].got_ms > change_sent)
            allowed = RATE1 * (double)(change_got - start) / 1000.0 +
                      RATE2 * (double)(ev[i].got_ms - change_sent) / 1000.0;
        CHECK_MSG(ev[i].n_issued <= allowed + 2, "%d passes issued %" PRId64 " ms after the start",
                  ev[i].n_issued, ev[i].got_ms - start);
    }
    /* the pace, before and after the change */
    double p1 = pace_between(ev, n, start + 300, change_sent - 100);
    double p2 = pace_between(ev, n, change_got + 200, until);
    CHECK_MSG(p1 > RATE1 * 0.85 && p1 < RATE1 * 1.15, "pace %.1f/s, want %d/s", p1, RATE1);
    CHECK_MSG(p2 > RATE2 * 0.85 && p2 < RATE2 * 1.15, "pace %.1f/s, want %d/s", p2, RATE2);
    free(ev);
    /* both processes handed passes out; together exactly what Redis counts */
    long long i0 = metric(&v[0], "seckill_queue_passes_total{event=\"issued\"}");
    long long i1 = metric(&v[1], "seckill_queue_passes_total{event=\"issued\"}");
    CHECK_MSG(i0 > 0 && i1 > 0, "passes handed out: %lld and %lld", i0, i1);
    EXPECT_STATUS(admin(&v[0], "GET", path, NULL, &r), &r, 200);
    CHECK_EQ(JINT(&r, "passes_handed_out"), i0 + i1);
    CHECK_EQ(JINT(&r, "queue_length"), PACE_BUYERS);
    srv_stop(&v[0]);
    srv_stop(&v[1]);
}

/* ---- purchases need the buyer's own valid pass -------------------------- */

SK_TEST(wr_http_purchase_needs_the_buyers_own_valid_pass_and_refusals_change_nothing)
{
    struct srv v;
    srv_start(&v, NULL);
    uint64_t aid = sk_th_unique_id();
    int64_t now = sk_wall_ms();
    wr_ready(&v, aid, 10, 2, now - 1000, now + HOUR_MS, 1000, 2, 1);
    struct sk_th_resp r;
    /* the buyer's view of the activity names the waiting room, not its seed */
    EXPECT_STATUS(get_activity(&v, aid, &r), &r, 200);
    CHECK_MSG(strstr(r.body, "\"waiting_room\":{\"passes_per_s\":1000,\"pass_ttl_s\":2}") &&
                  !strstr(r.body, "seed"),
              "activity: %s", r.body);
    struct qa a = pass_of(&v.c, aid, 41), b = pass_of(&v.c, aid, 42);
    const char *refused[] = {NULL, b.pass};
    for (int i = 0; i < 2; i++)
        EXPECT_ERROR(buy_pass(&v.c, aid, 41, refused[i], NULL, &r), &r, 403, "no_pass");
    /* a header that is no pass at all is a 400 */
    EXPECT_ERROR(buy_pass(&v.c, aid, 41, "not a pass", NULL, &r), &r, 400, "bad_request");
    expect_stats(&v, aid, 10, 0, 0);
    /* its own: accepted once; the spent pass buys nothing more, but the
     * retry of the accepted purchase gets its first answer */
    char oid[64], oid2[64];
    EXPECT_STATUS(buy_pass(&v.c, aid, 41, a.pass, "k1", &r), &r, 200);
    JSTR(&r, "order_id", oid);
    EXPECT_ERROR(buy_pass(&v.c, aid, 41, a.pass, NULL, &r), &r, 403, "no_pass");
    EXPECT_STATUS(buy_pass(&v.c, aid, 41, a.pass, "k1", &r), &r, 200);
    JSTR(&r, "order_id", oid2);
    CHECK_STR(oid2, oid);
    expect_stats(&v, aid, 9, 1, 1);
    /* the buyer's next poll says the pass was used */
    EXPECT_STATUS(queue_req(&v.c, "GET", aid, 41, &r), &r, 200);
    CHECK_STR(qa_of(&r).state, "used");
    CHECK_EQ(metric(&v, "seckill_queue_passes_total{event=\"spent\"}"), 1);
    /* b's pass lives 2 s: once the queue says it expired, it buys nothing */
    int64_t deadline = sk_mono_ms() + 10000;
    for (;;) {
        EXPECT_STATUS(queue_req(&v.c, "GET", aid, 42, &r), &r, 200);
        if (!strcmp(qa_of(&r).state, "expired")) break;
        CHECK_STR(qa_of(&r).state, "admitted");
        CHECK_MSG(sk_mono_ms() < deadline, "the pass did not expire");
        sk_th_nap_ms(50);
    }
    EXPECT_ERROR(buy_pass(&v.c, aid, 42, b.pass, NULL, &r), &r, 403, "no_pass");
    expect_stats(&v, aid, 9, 1, 1);
    CHECK_EQ(metric(&v, "seckill_queue_passes_total{event=\"expired\"}"), 1);
    /* joining again: a place at the back and, the queue being short, a new
     * pass that buys */
    struct qa b2 = pass_of(&v.c, aid, 42);
    CHECK(strcmp(b2.pass, b.pass) != 0);
    CHECK_EQ(b2.place, 2);
    EXPECT_STATUS(buy_pass(&v.c, aid, 42, b2.pass, NULL, &r), &r, 200);
    expect_stats(&v, aid, 8, 2, 2);
    srv_stop(&v);
}

/* ---- sold out reaches the waiting buyers -------------------------------- */

static void sold_out_reaches_waiting_buyers(int segments)
{
    struct srv v[2];
    /* 2 passes a second and a queue of 30: the stock of 4 goes to the first
     * four while the rest wait */
    uint64_t aid = open_on_two(v, 4, -1000, 2, 600, segments, NULL);
    struct sk_th_resp r;
    for (uint64_t u = 1; u <= 30; u++)
        EXPECT_STATUS(queue_req(&v[u & 1].c, "POST", aid, u, &r), &r, 200);
    for (uint64_t u = 1; u <= 4; u++) {
        struct qa q = pass_of(&v[0].c, aid, u);
        EXPECT_STATUS(buy_pass(&v[0].c, aid, u, q.pass, NULL, &r), &r, 200);
    }
    /* waiting buyers ask either process: without segments the stock key
     * is in the queue's slot and the next poll says it; a segmented
     * activity's stock is read every 250 ms by both (not a wrong answer in
     * between: still waiting) */
    for (uint64_t u = 10; u <= 30; u++) {
        int64_t deadline = sk_mono_ms() + (segments > 1 ? 2000 : 0);
        for (;;) {
            EXPECT_STATUS(queue_req(&v[u & 1].c, "GET", aid, u, &r), &r, 200);
            struct qa q = qa_of(&r);
            if (!strcmp(q.state, "sold_out")) break;
            CHECK_MSG(segments > 1 && !strcmp(q.state, "waiting") && sk_mono_ms() < deadline,
                      "user %" PRIu64 " after the sell-out: %s", u, r.body);
            sk_th_nap_ms(20);
        }
    }
    /* and a join is refused as a purchase is */
    EXPECT_ERROR(queue_req(&v[1].c, "POST", aid, 99, &r), &r, 409, "sold_out");
    expect_stats(&v[0], aid, 0, 4, 4);
    srv_stop(&v[0]);
    srv_stop(&v[1]);
}

SK_TEST(wr_http_sold_out_reaches_waiting_buyers_at_their_next_poll)
{
    sold_out_reaches_waiting_buyers(1);
}

SK_TEST(wr_http_sold_out_reaches_waiting_buyers_of_a_segmented_sale)
{
    sold_out_reaches_waiting_buyers(2);
}

/* ---- invariants under concurrent buyers --------------------------------- */

#define INV_BUYERS 300
#define INV_THREADS 8
#define INV_STOCK 100

struct buyer_run {
    struct wr_thread t;
    int accepted[INV_BUYERS / INV_THREADS + 1]; /* 200s per buyer of this thread */
    char orders[INV_BUYERS / INV_THREADS + 1][64];
    int no_pass_refused, sold_out;
};

/* Each buyer of this thread: a purchase without a pass (refused), join on
 * one process, poll until a pass or sold out (as fast as allowed), then the
 * pass spent twice, once on each process. */
static void *buyer_loop(void *arg)
{
    struct buyer_run *b = arg;
    thread_open(&b->t);
    struct sk_th_http *c = b->t.c;
    struct sk_th_resp *r = b->t.r;
    int k = 0;
    for (uint64_t u = 1 + (uint64_t)b->t.index; u <= INV_BUYERS; u += INV_THREADS, k++) {
        int st = buy_pass(&c[u & 1], b->t.aid, u, NULL, NULL, r);
        CHECK_MSG(st == 403 || st == 409, "a purchase without a pass: %d %s", st, r->body);
        b->no_pass_refused += st == 403;
        st = queue_req(&c[u & 1], "POST", b->t.aid, u, r);
        struct qa q;
        memset(&q, 0, sizeof q);
        int64_t deadline = sk_mono_ms() + 20000;
        for (;;) {
            if (st == 409) { /* joined after the sell-out */
                strcpy(q.state, "sold_out");
                break;
            }
            CHECK_MSG(st == 200, "queue: %d %s", st, r->body);
            q = qa_of(r);
            if (strcmp(q.state, "waiting") != 0) break;
            CHECK_MSG(sk_mono_ms() < deadline, "user %" PRIu64 " waited 20 s", u);
            sk_th_nap_ms(q.poll_after_ms < 20 ? q.poll_after_ms : 20);
            st = queue_req(&c[(u + 1) & 1], "GET", b->t.aid, u, r);
        }
        if (!strcmp(q.state, "sold_out")) {
            b->sold_out++;
            continue;
        }
        CHECK_MSG(!strcmp(q.state, "admitted"), "user %" PRIu64 ": %s", u, q.state);
        for (int i = 0; i < 2; i++) {
            st = buy_pass(&c[i], b->t.aid, u, q.pass, NULL, r);
            CHECK_MSG(st == 200 || st == 403 || st == 409, "purchase: %d %s", st, r->body);
            if (st == 200) {
                b->accepted[k]++;
                j_str(__FILE__, __LINE__, r, "order_id", b->orders[k], sizeof b->orders[k]);
            }
        }
    }
    thread_close(&b->t);
    return NULL;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* 300 buyers for 100 units through two processes, every one trying to
 * spend its pass twice: exactly the stock is sold, one unit per buyer, one
 * order id each, nothing without a pass, and the buyers still waiting when
 * it is gone hear sold_out. */
static void invariants(int segments)
{
    struct srv v[2];
    uint64_t aid = open_on_two(v, INV_STOCK, -1000, 400, 60, segments, NULL);
    static struct buyer_run b[INV_THREADS];
    pthread_t th[INV_THREADS];
    for (int i = 0; i < INV_THREADS; i++) {
        memset(&b[i], 0, sizeof b[i]);
        b[i] =
            (struct buyer_run){.t = {.port = {v[0].s.port, v[1].s.port}, .aid = aid, .index = i}};
        CHECK_EQ(pthread_create(&th[i], NULL, buyer_loop, &b[i]), 0);
    }
    for (int i = 0; i < INV_THREADS; i++)
        CHECK_EQ(pthread_join(th[i], NULL), 0);
    int accepted = 0, sold_out = 0;
    const char *oids[INV_BUYERS];
    for (int i = 0; i < INV_THREADS; i++) {
        sold_out += b[i].sold_out;
        for (int k = 0; k < INV_BUYERS / INV_THREADS + 1; k++) {
            CHECK_MSG(b[i].accepted[k] <= 1, "a buyer was admitted %d times", b[i].accepted[k]);
            if (b[i].accepted[k]) oids[accepted++] = b[i].orders[k];
        }
    }
    CHECK_EQ(accepted, INV_STOCK);
    CHECK_MSG(sold_out > 0, "nobody heard sold_out");
    qsort(oids, (size_t)accepted, sizeof oids[0], cmp_str);
    for (int i = 1; i < accepted; i++)
        CHECK_MSG(strcmp(oids[i - 1], oids[i]) != 0, "order id %s twice", oids[i]);
    expect_stats(&v[0], aid, 0, INV_STOCK, INV_STOCK);
    char path[128];
    struct sk_th_resp r;
    snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64 "/queue/pace", aid);
    EXPECT_STATUS(admin(&v[0], "GET", path, NULL, &r), &r, 200);
    CHECK_EQ(JINT(&r, "passes_spent"), INV_STOCK);
    srv_stop(&v[0]);
    srv_stop(&v[1]);
}

SK_TEST_T(wr_http_invariants_hold_with_concurrent_buyers_and_their_passes, 120)
{
    invariants(1);
}

SK_TEST_T(wr_http_invariants_hold_with_concurrent_buyers_of_a_segmented_sale, 120)
{
    invariants(3);
}

/* ---- the node's figures ------------------------------------------------- */

/* The waiting room's part of /dashboard.json for activity aid: 1 when the
 * worker's sample lists it with a waiting room whose queue_length and
 * handed_out_total are as given. */
static int dashboard_shows(int port, uint64_t aid, long long length, long long handed)
{
    static char raw[1 << 20];
    static const char dreq[] =
        "GET /dashboard.json HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    size_t got = sk_th_http_raw(port, dreq, sizeof dreq - 1, raw, sizeof raw, 5000);
    const char *b = got > 12 ? strstr(raw, "\r\n\r\n") : NULL;
    if (!b || strncmp(raw, "HTTP/1.1 200", 12) != 0) return 0;
    json_error_t e;
    json_t *d = json_loads(b + 4, 0, &e), *acts = json_object_get(d, "activities");
    int ok = 0;
    for (size_t i = 0; i < json_array_size(acts); i++) {
        json_t *a = json_array_get(acts, i);
        if ((uint64_t)json_integer_value(json_object_get(a, "id")) != aid) continue;
        json_t *w = json_object_get(a, "waiting_room");
        ok = json_is_object(w) &&
             json_integer_value(json_object_get(w, "queue_length")) == length &&
             json_integer_value(json_object_get(w, "handed_out_total")) == handed &&
             json_integer_value(json_object_get(w, "passes_per_s")) == 100000;
    }
    json_decref(d);
    return ok;
}

#define NODE_BUYERS 200
#define NODE_CONNS 8

/* One node of two HTTP processes: buyers join over connections the kernel
 * spreads over both, and whichever process answers the scrape, /metrics
 * and /dashboard.json report every pass the node handed out (the counters
 * summed over the processes) and the queue's length as Redis last told any
 * of them (a gauge: the newest figure, not a sum). */
SK_TEST_T(wr_http_node_figures_count_every_process_passes, 120)
{
    struct srv v;
    const char *extra[] = {"--processes", "2", NULL};
    srv_start(&v, extra);
    uint64_t aid = sk_th_unique_id();
    int64_t now = sk_wall_ms();
    wr_ready(&v, aid, 10, 1, now - 1000, now + HOUR_MS, 100000, 60, 1);
    for (int c = 0; c < NODE_CONNS; c++) {
        struct sk_th_http h;
        sk_th_http_open(&h, v.s.port);
        for (int i = c; i < NODE_BUYERS; i += NODE_CONNS)
            pass_of(&h, aid, 5000 + (uint64_t)i);
        sk_th_http_close(&h);
    }
    char path[128];
    snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64 "/queue/pace", aid);
    struct sk_th_resp r;
    EXPECT_STATUS(admin(&v, "GET", path, NULL, &r), &r, 200);
    CHECK_EQ(JINT(&r, "passes_handed_out"), NODE_BUYERS);
    char series[128];
    snprintf(series, sizeof series,
             "seckill_activity_queue_passes_total{activity=\"%" PRIu64 "\",event=\"issued\"}", aid);
    int64_t deadline = sk_mono_ms() + 15000;
    for (int i = 0; i < 4; i++) { /* fresh connections: either process answers */
        CHECK_EQ(metric(&v, "seckill_queue_passes_total{event=\"issued\"}"), NODE_BUYERS);
        CHECK_EQ(metric(&v, series), NODE_BUYERS);
    }
    /* the gauge: the newest Redis figure any process saw (a later reply
     * than the last join's may take a millisecond to be the newest) */
    snprintf(series, sizeof series, "seckill_queue_length{activity=\"%" PRIu64 "\"}", aid);
    while (metric(&v, series) != NODE_BUYERS) {
        CHECK_MSG(sk_mono_ms() < deadline, "queue length never %d", NODE_BUYERS);
        EXPECT_STATUS(admin(&v, "GET", path, NULL, &r), &r, 200);
        sk_th_nap_ms(5);
    }
    /* the dashboard: the worker's sample lists the activity within a second */
    while (!dashboard_shows(v.s.port, aid, NODE_BUYERS, NODE_BUYERS)) {
        CHECK_MSG(sk_mono_ms() < deadline, "dashboard.json never showed the waiting room");
        sk_th_nap_ms(50);
    }
    srv_stop(&v);
}

/* ---- bad input ----------------------------------------------------------- */

SK_TEST(wr_http_bad_input_is_a_clear_4xx_and_changes_nothing)
{
    struct srv v;
    srv_start(&v, NULL);
    uint64_t aid = sk_th_unique_id(), plain = sk_th_unique_id(), created = sk_th_unique_id();
    int64_t now = sk_wall_ms();
    wr_ready(&v, aid, 10, 1, now - 1000, now + HOUR_MS, 5, 60, 1);
    ready_act(&v, plain, 10, 1, 1, W_NOW);
    create_act(&v, created, 10, 1, 1, W_NOW);
    struct sk_th_resp r;
    char path[160];
    snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64 "/queue", aid);
    EXPECT_ERROR(req(&v, "POST", path, NULL, NULL, &r), &r, 401, "unauthorized");
    EXPECT_ERROR(req(&v, "GET", path, "X-User-Id: abc\r\n", NULL, &r), &r, 401, "unauthorized");
    EXPECT_ERROR(req(&v, "PUT", path, "X-User-Id: 1\r\n", NULL, &r), &r, 405, NULL);
    EXPECT_ERROR(queue_req(&v.c, "GET", aid, 5, &r), &r, 404, "not_in_queue");
    EXPECT_ERROR(queue_req(&v.c, "POST", plain, 5, &r), &r, 404, "no_waiting_room");
    EXPECT_ERROR(queue_req(&v.c, "POST", sk_th_unique_id(), 5, &r), &r, 404, "unknown_activity");
    EXPECT_ERROR(queue_req(&v.c, "POST", created, 5, &r), &r, 403, "closed");
    /* the pace routes are the operator's */
    snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64 "/queue/pace", aid);
    EXPECT_ERROR(req(&v, "GET", path, NULL, NULL, &r), &r, 401, "unauthorized");
    const char *bad[] = {"",
                         "{}",
                         "{\"passes_per_s\":0}",
                         "{\"passes_per_s\":1000001}",
                         "{\"passes_per_s\":\"5\"}",
                         "{\"passes_per_s\":2.5}",
                         "[5]",
                         "{\"passes_per_s\":5,\"passes_per_s\":6}"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        EXPECT_ERROR(admin(&v, "POST", path, bad[i], &r), &r, 400, "bad_request");
    EXPECT_STATUS(admin(&v, "GET", path, NULL, &r), &r, 200);
    CHECK_EQ(JINT(&r, "passes_per_s"), 5);
    CHECK_EQ(JINT(&r, "queue_length"), 0);
    snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64 "/queue/pace", plain);
    EXPECT_ERROR(admin(&v, "POST", path, "{\"passes_per_s\":5}", &r), &r, 404, "no_waiting_room");
    snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64 "/queue/pace", sk_th_unique_id());
    EXPECT_ERROR(admin(&v, "GET", path, NULL, &r), &r, 404, "unknown_activity");
    /* a new pace is live and stored */
    snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64 "/queue/pace", aid);
    EXPECT_STATUS(admin(&v, "POST", path, "{\"passes_per_s\":7}", &r), &r, 200);
    CHECK_EQ(JINT(&r, "passes_per_s"), 7);
    EXPECT_STATUS(get_activity(&v, aid, &r), &r, 200);
    CHECK_MSG(strstr(r.body, "\"passes_per_s\":7"), "activity: %s", r.body);
    /* create bodies with a bad waiting room */
    const char *bad_wr[] = {
        "\"waiting_room\":5",
        "\"waiting_room\":{}",
        "\"waiting_room\":{\"passes_per_s\":0}",
        "\"waiting_room\":{\"passes_per_s\":5,\"pass_ttl_s\":0}",
        "\"waiting_room\":{\"passes_per_s\":5,\"pass_ttl_s\":86401}",
        "\"waiting_room\":{\"passes_per_s\":5,\"seed\":\"00ff\"}",
        "\"waiting_room\":{\"passes_per_s\":5,\"seed\":\"zz112233445566778899aabbccddeeff\"}",
        "\"waiting_room\":{\"passes_per_s\":5,\"seed\":7}",
        "\"waiting_room\":{\"passes_per_s\":null}",
    };
    uint64_t nid = sk_th_unique_id();
    for (size_t i = 0; i < sizeof bad_wr / sizeof bad_wr[0]; i++) {
        char body[600];
        snprintf(body, sizeof body,
                 "{\"id\":%" PRIu64 ",\"name\":\"x\",\"stock\":5,\"per_user_limit\":1,"
                 "\"start\":\"2030-01-01T00:00:00Z\",\"end\":\"2030-01-02T00:00:00Z\",%s}",
                 nid, bad_wr[i]);
        EXPECT_ERROR(admin(&v, "POST", "/api/v1/activities", body, &r), &r, 400, "bad_request");
        CHECK_MSG(strstr(r.body, "waiting_room"), "message does not name the field: %s", r.body);
    }
    EXPECT_ERROR(get_activity(&v, nid, &r), &r, 404, "unknown_activity");
    /* the same seed in upper case is the same seed */
    char body[600];
    snprintf(body, sizeof body,
             "{\"id\":%" PRIu64 ",\"name\":\"x\",\"stock\":5,\"per_user_limit\":1,"
             "\"start\":\"2030-01-01T00:00:00Z\",\"end\":\"2030-01-02T00:00:00Z\","
             "\"waiting_room\":{\"passes_per_s\":5,\"seed\":\"00112233445566778899AABBCCDDEEFF\"}}",
             nid);
    EXPECT_STATUS(admin(&v, "POST", "/api/v1/activities", body, &r), &r, 201);
    sk_store *st;
    char err[256];
    CHECK_MSG(sk_store_open(&st, v.s.db, err, sizeof err) == 0, "store: %s", err);
    struct sk_activity a;
    CHECK_EQ(sk_store_activity_get(st, nid, &a), 0);
    CHECK_STR(a.wr_seed, "00112233445566778899aabbccddeeff");
    CHECK_EQ(a.wr_pass_ttl_s, 300);
    sk_store_close(st);
    srv_stop(&v);
}

/* ---- closed tabs --------------------------------------------------------- */

#define TAB_WAITERS 100
#define TAB_RATE 5

/* Orders of aid in v's SQLite database, by admission time: their buyers
 * and created_ms into uid[] / at[] (at most cap); the count. */
static int orders_by_time(struct srv *v, uint64_t aid, uint64_t *uid, int64_t *at, int cap)
{
    sqlite3 *db;
    CHECK(sqlite3_open_v2(v->s.db + strlen("sqlite:"), &db, SQLITE_OPEN_READONLY, NULL) ==
          SQLITE_OK);
    sqlite3_busy_timeout(db, 5000);
    sqlite3_stmt *q;
    CHECK(sqlite3_prepare_v2(db,
                             "SELECT user_id, created_ms FROM orders WHERE activity_id = ? "
                             "ORDER BY created_ms",
                             -1, &q, NULL) == SQLITE_OK);
    sqlite3_bind_int64(q, 1, (sqlite3_int64)aid);
    int n = 0;
    while (sqlite3_step(q) == SQLITE_ROW && n < cap) {
        uid[n] = (uint64_t)sqlite3_column_int64(q, 0);
        at[n++] = sqlite3_column_int64(q, 1);
    }
    sqlite3_finalize(q);
    sqlite3_close(db);
    return n;
}

/* 100 buyers in line at 5 passes/s, passes living 2 s; 30 % of them close
 * their tabs right after joining (never poll again). The others poll and
 * buy as soon as their pass comes. Their purchases, as the database
 * records them, come at the configured pace: the seats of the passes
 * nobody fetched go back to the pace at their deadline. Were they lost,
 * the live buyers would get 70 % of it (3.5/s). */
SK_TEST_T(wr_http_closed_tabs_cost_the_room_no_pace, 120)
{
    struct srv v;
    srv_start(&v, NULL);
    uint64_t aid = sk_th_unique_id(), first = 70000;
    int64_t now = sk_wall_ms();
    wr_ready(&v, aid, 1000, 1, now - 1000, now + 3600 * 1000, TAB_RATE, 2, 1);
    int dead[TAB_WAITERS], bought[TAB_WAITERS] = {0}, live = 0;
    struct sk_th_resp r;
    for (int i = 0; i < TAB_WAITERS; i++) {
        dead[i] = i % 10 == 2 || i % 10 == 5 || i % 10 == 8;
        live += !dead[i];
        EXPECT_STATUS(queue_req(&v.c, "POST", aid, first + (uint64_t)i, &r), &r, 200);
        struct qa q = qa_of(&r);
        CHECK_EQ(q.place, i + 1);
    }
    /* the open tabs poll every 50 ms, the next dozen in line each time, and
     * buy at once */
    int got = 0;
    int64_t deadline = sk_mono_ms() + 60000;
    while (got < live) {
        CHECK_MSG(sk_mono_ms() < deadline, "%d of %d live buyers bought within 60 s", got, live);
        for (int i = 0, polled = 0; i < TAB_WAITERS && polled < 12; i++) {
            if (dead[i] || bought[i]) continue;
            polled++;
            uint64_t u = first + (uint64_t)i;
            EXPECT_STATUS(queue_req(&v.c, "GET", aid, u, &r), &r, 200);
            struct qa q = qa_of(&r);
            if (!strcmp(q.state, "waiting")) continue;
            CHECK_MSG(!strcmp(q.state, "admitted"), "user %" PRIu64 ": %s", u, r.body);
            EXPECT_STATUS(buy_pass(&v.c, aid, u, q.pass, NULL, &r), &r, 200);
            bought[i] = 1;
            got++;
        }
        sk_th_nap_ms(50);
    }
    /* the database: one order per open tab, none for a closed one */
    uint64_t uid[TAB_WAITERS];
    int64_t at[TAB_WAITERS];
    int n;
    deadline = sk_mono_ms() + 15000;
    while ((n = orders_by_time(&v, aid, uid, at, TAB_WAITERS)) < live && sk_mono_ms() < deadline)
        sk_th_nap_ms(100);
    CHECK_EQ(n, live);
    int seen[TAB_WAITERS] = {0};
    for (int k = 0; k < n; k++) {
        CHECK_MSG(uid[k] >= first && uid[k] < first + TAB_WAITERS, "order of user %" PRIu64,
                  uid[k]);
        int i = (int)(uid[k] - first);
        CHECK_MSG(!dead[i] && !seen[i], "user %" PRIu64 ": closed tab or twice", uid[k]);
        seen[i] = 1;
    }
    /* the rate between the 10th and the 60th purchase (the line still
     * holds closed tabs ahead then): the pace, not 70 % of it */
    double rate = 50.0 * 1000.0 / (double)(at[59] - at[9]);
    printf("# %d open tabs of %d bought at %.2f/s (pace %d/s)\n", live, TAB_WAITERS, rate,
           TAB_RATE);
    CHECK_MSG(rate >= 0.85 * TAB_RATE && rate <= 1.2 * TAB_RATE,
              "open tabs bought at %.2f/s, the pace is %d/s", rate, TAB_RATE);
    char path[128];
    snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64 "/queue/pace", aid);
    EXPECT_STATUS(admin(&v, "GET", path, NULL, &r), &r, 200);
    CHECK_EQ(JINT(&r, "passes_spent"), live);
    srv_stop(&v);
}
