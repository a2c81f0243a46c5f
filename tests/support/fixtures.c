/* fixtures.c - the small shared set-ups of fixtures.h. */
#include "support/fixtures.h"

#include <arpa/inet.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "core/clock.h"
#include "core/codes.h"
#include "engine/keys.h"
#include "orders/order_event.h"
#include "support/harness.h"
#include "support/http_client.h"
#include "support/serve_buy.h"

sk_redis *sk_th_redis_new(const char *url, int connect_ms, int cmd_ms)
{
    sk_redis *r;
    char err[256];
    CHECK_MSG(sk_redis_new(&r, url, connect_ms, cmd_ms, err, sizeof err) == 0, "url: %s", err);
    return r;
}

sk_store *sk_th_store_open(const char *spec)
{
    sk_store *st;
    char err[512];
    CHECK_MSG(sk_store_open(&st, spec, err, sizeof err) == 0, "%s", err);
    return st;
}

void sk_th_activity_fixed(struct sk_activity *a, uint64_t id, const char *name, int64_t stock,
                          int64_t per_user_limit)
{
    sk_activity_init(a);
    a->id = id;
    snprintf(a->name, sizeof a->name, "%s %" PRIu64, name, id);
    a->stock = stock;
    a->per_user_limit = per_user_limit;
    a->start_ms = 1795946400000; /* 2026-11-29T10:00:00Z */
    a->end_ms = a->start_ms + 3600 * 1000;
    a->created_ms = 1795940000000;
    sk_activity_apply_defaults(a);
}

void sk_th_activity_valid(struct sk_activity *a, uint64_t id)
{
    sk_th_activity_fixed(a, id, "flash sale", 100, 2);
}

int sk_th_run_with_db(char *out, size_t cap, const char *cmd, const char *const *args,
                      const char *redis, const char *db)
{
    const char *argv[40];
    int n = 0;
    if (cmd) argv[n++] = cmd;
    for (int i = 0; args[i] && n < 34; i++)
        argv[n++] = args[i];
    argv[n++] = "--redis";
    argv[n++] = redis;
    argv[n++] = "--db";
    argv[n++] = db;
    argv[n] = NULL;
    return sk_th_run_seckill(out, cap, NULL, argv);
}

void sk_th_stock_open(sk_redis *r, const struct sk_stock_def *d)
{
    int rc;
    CHECK_EQ(sk_stock_preheat(r, d, 0, &rc, NULL), 0);
    CHECK_EQ(rc, SK_RC_PREHEATED);
    CHECK_EQ(sk_stock_set_open(r, d->id, 1, &rc), 0);
    CHECK_EQ(rc, SK_RC_OK);
}

void sk_th_activity_live(struct sk_activity *a, const char *name, int64_t stock, int segments,
                         int64_t started_ago_ms)
{
    sk_activity_init(a);
    a->id = sk_th_unique_id();
    snprintf(a->name, sizeof a->name, "%s", name);
    a->stock = stock;
    a->per_user_limit = 1;
    a->start_ms = sk_wall_ms() - started_ago_ms;
    a->end_ms = a->start_ms + 7200000;
    a->created_ms = sk_wall_ms();
    a->segments = segments;
}

void sk_th_activity_open_in(sk_store *st, sk_redis *r, struct sk_activity *a)
{
    sk_activity_apply_defaults(a);
    CHECK_EQ(sk_store_activity_insert(st, a), 0);
    struct sk_stock_def d;
    sk_activity_stock_def(a, &d);
    sk_th_stock_open(r, &d);
    CHECK_EQ(sk_store_activity_set_state(st, a->id, "open"), 0);
}

void sk_th_stock_new_open(sk_redis *r, uint64_t id, int64_t initial, int64_t limit, int64_t maxq,
                          int segments, int64_t started_ago_ms)
{
    int64_t now = sk_wall_ms();
    struct sk_stock_def d = {.id = id,
                             .initial = initial,
                             .per_user_limit = limit,
                             .max_per_order = maxq,
                             .start_ms = now - started_ago_ms,
                             .end_ms = now + 3600000,
                             .segments = segments};
    int rc;
    int64_t left;
    CHECK_MSG(sk_stock_preheat(r, &d, 0, &rc, &left) == 0, "preheat: %s", r->errstr);
    CHECK_EQ(rc, SK_RC_PREHEATED);
    CHECK_EQ(left, initial);
    CHECK_MSG(sk_stock_set_open(r, id, 1, &rc) == 0, "open: %s", r->errstr);
    CHECK_EQ(rc, SK_RC_OK);
}

void sk_th_nap_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

uint64_t sk_th_xorshift(uint64_t *state)
{
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    return *state * 2685821657736338717ULL;
}

size_t sk_th_insert_drawn(char *buf, size_t n, size_t cap, size_t at, const char *alphabet,
                          size_t alen, uint64_t *state)
{
    if (n >= cap - 1) return n;
    memmove(buf + at + 1, buf + at, n - at);
    buf[at] = alphabet[sk_th_xorshift(state) % alen];
    return n + 1;
}

long long sk_th_info_num(redisReply *r, const char *field)
{
    long long v = -1;
    if (r && r->type == REDIS_REPLY_STRING) {
        char pat[64];
        snprintf(pat, sizeof pat, "\n%s:", field);
        const char *p = strstr(r->str, pat);
        if (p) v = strtoll(p + strlen(pat), NULL, 10);
    }
    if (r) freeReplyObject(r);
    return v;
}

int sk_th_http_200(int port, const char *path)
{
    struct sk_th_http h;
    struct sk_th_resp r;
    if (sk_th_http_try_open(&h, port) < 0) return 0;
    int ok = sk_th_http_req(&h, "GET", path, NULL, NULL, &r) == 200;
    sk_th_http_close(&h);
    return ok;
}

void sk_th_activity_json(char *buf, size_t cap, uint64_t id, const char *name, int stock,
                         int pay_timeout_s, int segments)
{
    char start[SK_TIME_RFC3339_MAX], end[SK_TIME_RFC3339_MAX], segs[32] = "";
    sk_time_format_rfc3339((sk_wall_ms() / 1000 - 60) * 1000, start, sizeof start);
    sk_time_format_rfc3339((sk_wall_ms() / 1000 + 3600) * 1000, end, sizeof end);
    if (segments > 0) snprintf(segs, sizeof segs, ",\"segments\":%d", segments);
    snprintf(buf, cap,
             "{\"id\":%" PRIu64 ",\"name\":\"%s\",\"stock\":%d,\"per_user_limit\":1,"
             "\"start\":\"%s\",\"end\":\"%s\",\"pay_timeout_s\":%d%s}",
             id, name, stock, start, end, pay_timeout_s, segs);
}

void sk_th_http_activity_open(struct sk_th_http *c, uint64_t id, const char *body)
{
    static const char admin[] = "Authorization: Bearer " SK_TH_ADMIN_TOKEN "\r\n";
    struct sk_th_resp r;
    char path[96];
    int st = sk_th_http_req(c, "POST", "/api/v1/activities", admin, body, &r);
    CHECK_MSG(st == 201, "create: %d %s", st, r.body);
    snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64 "/preheat", id);
    st = sk_th_http_req(c, "POST", path, admin, NULL, &r);
    CHECK_MSG(st == 200, "preheat: %d %s", st, r.body);
    snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64 "/open", id);
    st = sk_th_http_req(c, "POST", path, admin, NULL, &r);
    CHECK_MSG(st == 200, "open: %d %s", st, r.body);
}

uint64_t sk_th_http_activity(struct sk_th_http *c, const char *name, int stock, int pay_timeout_s)
{
    uint64_t id = sk_th_unique_id();
    char body[512];
    sk_th_activity_json(body, sizeof body, id, name, stock, pay_timeout_s, 0);
    sk_th_http_activity_open(c, id, body);
    return id;
}

sk_worker *sk_th_worker_new(const struct sk_worker_opts *o)
{
    sk_worker *w;
    char err[512];
    CHECK_MSG(sk_worker_new(&w, o, err, sizeof err) == 0, "worker: %s", err);
    return w;
}

struct sk_worker_stats sk_th_worker_run(const struct sk_worker_opts *o)
{
    sk_worker *w = sk_th_worker_new(o);
    CHECK_MSG(sk_worker_run(w) == 0, "worker run: %s", sk_worker_errstr(w));
    struct sk_worker_stats s;
    sk_worker_stats(w, &s);
    sk_worker_free(w);
    return s;
}

static void *worker_loop(void *w)
{
    sk_worker_run(w);
    return NULL;
}

sk_worker *sk_th_worker_thread(const struct sk_worker_opts *o, pthread_t *t)
{
    sk_worker *w = sk_th_worker_new(o);
    CHECK_EQ(pthread_create(t, NULL, worker_loop, w), 0);
    return w;
}

void sk_th_on_reply(void *data, redisReply *rep)
{
    struct sk_th_answers *a = data;
    a->n++;
    if (!rep) {
        a->nulls++;
        return;
    }
    if (rep->type == REDIS_REPLY_ERROR) a->errors++;
    if (rep->type == REDIS_REPLY_INTEGER) a->last_int = rep->integer;
    snprintf(a->last, sizeof a->last, "%s", rep->str ? rep->str : "");
}

long long sk_th_entry_orders(const redisReply *e, const char *label,
                             void (*each)(void *arg, const struct sk_order *o), void *arg)
{
    CHECK(e->type == REDIS_REPLY_ARRAY && e->elements == 2 &&
          e->element[0]->type == REDIS_REPLY_STRING && e->element[1]->type == REDIS_REPLY_ARRAY);
    const redisReply *id = e->element[0], *f = e->element[1];
    struct sk_event_field fields[32];
    size_t nf = f->elements / 2;
    CHECK_MSG(nf <= 32, "entry %s has %zu fields", id->str, nf);
    for (size_t i = 0; i < nf; i++)
        fields[i] = (struct sk_event_field){f->element[2 * i]->str, f->element[2 * i]->len,
                                            f->element[2 * i + 1]->str, f->element[2 * i + 1]->len};
    uint64_t aid;
    int seg;
    char head[64]; /* the label as an order id starts with it */
    snprintf(head, sizeof head, "%s-", label);
    CHECK(sk_keys_parse_label(head, strlen(head), &aid, &seg) > 0);
    static struct sk_order orders[SK_EVENT_ORDERS_MAX];
    size_t n;
    char why[200];
    CHECK_MSG(sk_order_event_parse(label, aid, id->str, id->len, fields, nf, orders, &n, why,
                                   sizeof why) == 0,
              "entry %s is not an order event: %s", id->str, why);
    for (size_t i = 0; each && i < n; i++)
        each(arg, &orders[i]);
    return (long long)n;
}

long long sk_th_stream_orders(sk_redis *r, const char *key, const char *label,
                              void (*each)(void *arg, const struct sk_order *o), void *arg,
                              long long *entries)
{
    long long orders = 0, n = 0;
    char from[64] = "-";
    for (;;) {
        redisReply *rep;
        CHECK_MSG(sk_redis_cmd(r, &rep, "XRANGE %s %s + COUNT 1000", key, from) == 0, "XRANGE: %s",
                  r->errstr);
        CHECK_MSG(rep->type == REDIS_REPLY_ARRAY, "XRANGE %s: not an array", key);
        size_t got = rep->elements;
        for (size_t i = 0; i < got; i++) {
            orders += sk_th_entry_orders(rep->element[i], label, each, arg);
            n++;
            snprintf(from, sizeof from, "(%s", rep->element[i]->element[0]->str);
        }
        freeReplyObject(rep);
        if (got < 1000) break;
    }
    if (entries) *entries = n;
    return orders;
}

int sk_th_blackhole(int *port)
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

int sk_th_buy(sk_redis *r, uint64_t aid, uint64_t user_id, int64_t qty, struct sk_admission *res,
              int64_t *remaining)
{
    struct sk_purchase p = {.user_id = user_id, .quantity = qty};
    return sk_th_stock_buy(r, aid, NULL, &p, 1, res, remaining);
}
