/* test_stock.c - the admission scripts one behaviour at a time, against the
 * run's real redis-server: switch, window, quantity, per-user limit, batch
 * isolation, release, preheat, NOSCRIPT recovery and Redis faults. */
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/codes.h"
#include "core/error.h"
#include "engine/keys.h"
#include "engine/order_id.h"
#include "engine/stock.h"
#include "redis/script.h"
#include "support/fixtures.h"
#include "support/harness.h"
#include "support/preheat_rc.h"

#define P(u, q) ((struct sk_purchase){.user_id = (u), .quantity = (q)})

/* A preheated activity; window [now+start_off, now+end_off) in ms. */
static uint64_t make_activity(sk_redis *r, int64_t stock, int64_t limit, int64_t maxq,
                              int64_t start_off, int64_t end_off, int open)
{
    int64_t now = sk_wall_ms();
    struct sk_stock_def d = {sk_th_unique_id(),
                             stock,
                             limit,
                             maxq,
                             now + start_off,
                             now + end_off,
                             0,
                             0,
                             1,
                             0,
                             0,
                             0,
                             "",
                             "",
                             0,
                             0,
                             0,
                             0,
                             ""};
    int rc;
    int64_t left;
    CHECK_EQ(sk_th_preheat_rc(r, &d, 0, &left), SK_RC_PREHEATED);
    CHECK_EQ(left, stock);
    if (open) {
        CHECK_EQ(sk_stock_set_open(r, d.id, 1, &rc), 0);
        CHECK_EQ(rc, SK_RC_OK);
    }
    return d.id;
}

static uint64_t open_activity(sk_redis *r, int64_t stock, int64_t limit, int64_t maxq)
{
    return make_activity(r, stock, limit, maxq, -1000, 3600 * 1000, 1);
}

static int buy(sk_redis *r, uint64_t aid, uint64_t uid, int64_t q, struct sk_admission *a)
{
    struct sk_admission tmp;
    if (!a) a = &tmp;
    int rc = sk_th_buy(r, aid, uid, q, a, NULL);
    CHECK_MSG(rc == 0, "purchase failed: %s (%s)", sk_strerror(rc), r->errstr);
    return a->rc;
}

/* A purchase that must be admitted; its admission. */
static struct sk_admission bought(sk_redis *r, uint64_t aid, uint64_t uid, int64_t q)
{
    struct sk_admission a;
    CHECK_EQ(buy(r, aid, uid, q, &a), SK_RC_OK);
    return a;
}

/* Releases qty units of order_id held by user; the script's answer (the
 * units given back into *given when given is not NULL). */
static int release(sk_redis *r, uint64_t aid, const char *order_id, uint64_t user, int64_t qty,
                   int64_t *given)
{
    int rc;
    int64_t tmp;
    CHECK_EQ(sk_stock_release(r, aid, order_id, user, qty, &rc, given ? given : &tmp), 0);
    return rc;
}

static struct sk_stock_state state_of(sk_redis *r, uint64_t aid)
{
    struct sk_stock_state st;
    CHECK_EQ(sk_stock_state(r, aid, &st), 0);
    return st;
}

/* The activity's live stock, the units its buyers hold and its order
 * events (orders in its stream: an admission call writes one entry for
 * all the orders it admits). */
static void check_counts(sk_redis *r, uint64_t aid, int64_t remaining, int64_t held, int64_t orders)
{
    struct sk_stock_state st = state_of(r, aid);
    CHECK_EQ(st.remaining, remaining);
    CHECK_EQ(st.held, held);
    struct sk_keys k;
    sk_keys_for(&k, aid);
    long long entries;
    CHECK_EQ(sk_th_stream_orders(r, k.orders, k.label, NULL, NULL, &entries), orders);
    CHECK_EQ(st.stream_len, entries);
}

static void check_untouched(sk_redis *r, uint64_t aid, int64_t stock)
{
    check_counts(r, aid, stock, 0, 0);
    CHECK_EQ(state_of(r, aid).buyers, 0);
}

/* One purchase of a sequence and the answer it must get. */
struct buy_step {
    uint64_t user;
    int64_t qty;
    int want;
};

/* The purchases of steps, one at a time and in order, get their answers. */
static void buys_answer(sk_redis *r, uint64_t aid, const struct buy_step *steps, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        int got = buy(r, aid, steps[i].user, steps[i].qty, NULL);
        CHECK_MSG(got == steps[i].want, "step %zu (user %" PRIu64 ", qty %lld): %s, want %s", i,
                  steps[i].user, (long long)steps[i].qty, sk_rc_name(got),
                  sk_rc_name(steps[i].want));
    }
}
#define BUYS(r, aid, ...)                                                                          \
    buys_answer(r, aid, (const struct buy_step[]){__VA_ARGS__},                                    \
                sizeof((const struct buy_step[]){__VA_ARGS__}) / sizeof(struct buy_step))

SK_TEST(purchase_admits_and_writes_one_order_event_with_the_buyer)
{
    sk_redis *r = sk_th_redis_new(sk_th_redis_url(), 1000, 1000);
    uint64_t aid = open_activity(r, 10, 2, 2);
    struct sk_admission a;
    int64_t left = -1;
    CHECK_EQ(sk_th_buy(r, aid, 42, 2, &a, &left), 0);
    CHECK_EQ(a.rc, SK_RC_OK);
    CHECK_EQ(left, 8);
    char prefix[32];
    snprintf(prefix, sizeof prefix, "%" PRIu64 "-", aid);
    CHECK_MSG(strncmp(a.order_id, prefix, strlen(prefix)) == 0, "order id %s", a.order_id);

    struct sk_keys k;
    sk_keys_for(&k, aid);
    redisReply *rep;
    char entry[64];
    sk_th_order_sid(a.order_id, entry, sizeof entry);
    CHECK_EQ(sk_redis_cmd(r, &rep, "XRANGE %s %s %s", k.orders, entry, entry), 0);
    CHECK(rep->type == REDIS_REPLY_ARRAY && rep->elements == 1);
    redisReply *f = rep->element[0]->element[1];
    CHECK_EQ(f->elements, 10);
    CHECK_STR(f->element[3]->str, "42");
    CHECK_STR(f->element[5]->str, "2");
    /* the admission's number in the key set (docs/recovery.md): the first */
    CHECK_STR(f->element[6]->str, "n");
    CHECK_STR(f->element[7]->str, "1");
    /* the admitting server's branch, the order id's end (order_id.h) */
    CHECK_STR(f->element[8]->str, "b");
    CHECK_EQ(strlen(f->element[9]->str), 8);
    CHECK_MSG(strstr(a.order_id, f->element[9]->str), "%s", a.order_id);
    freeReplyObject(rep);
    check_counts(r, aid, 8, 2, 1);
    CHECK_EQ(state_of(r, aid).buyers, 1);
    sk_redis_free(r);
}

SK_TEST(nothing_is_sold_while_the_switch_is_closed)
{
    sk_redis *r = sk_th_redis_new(sk_th_redis_url(), 1000, 1000);
    uint64_t aid = make_activity(r, 5, 1, 1, -1000, 3600000, 0);
    CHECK_EQ(buy(r, aid, 1, 1, NULL), SK_RC_CLOSED);
    int rc;
    CHECK_EQ(sk_stock_set_open(r, aid, 1, &rc), 0);
    CHECK_EQ(buy(r, aid, 1, 1, NULL), SK_RC_OK);
    CHECK_EQ(sk_stock_set_open(r, aid, 0, &rc), 0);
    CHECK_EQ(buy(r, aid, 2, 1, NULL), SK_RC_CLOSED);
    CHECK_EQ(state_of(r, aid).remaining, 4);
    sk_redis_free(r);
}

SK_TEST(nothing_is_sold_before_start_or_after_end)
{
    sk_redis *r = sk_th_redis_new(sk_th_redis_url(), 1000, 1000);
    uint64_t early = make_activity(r, 5, 1, 1, 3600000, 7200000, 1);
    uint64_t late = make_activity(r, 5, 1, 1, -7200000, -1, 1);
    CHECK_EQ(buy(r, early, 1, 1, NULL), SK_RC_NOT_STARTED);
    CHECK_EQ(buy(r, late, 1, 1, NULL), SK_RC_ENDED);
    struct sk_purchase p[2] = {P(1, 1), P(2, 1)};
    struct sk_admission res[2];
    CHECK_EQ(sk_stock_buy(r, early, NULL, p, 2, res, NULL), 0);
    CHECK_EQ(res[0].rc, SK_RC_NOT_STARTED);
    CHECK_EQ(res[1].rc, SK_RC_NOT_STARTED);
    CHECK_EQ(sk_stock_buy(r, late, NULL, p, 2, res, NULL), 0);
    CHECK_EQ(res[1].rc, SK_RC_ENDED);
    check_untouched(r, early, 5);
    check_untouched(r, late, 5);
    sk_redis_free(r);
}

SK_TEST(unknown_activity_is_refused_without_creating_keys)
{
    sk_redis *r = sk_th_redis_new(sk_th_redis_url(), 1000, 1000);
    uint64_t aid = sk_th_unique_id();
    CHECK_EQ(buy(r, aid, 1, 1, NULL), SK_RC_UNKNOWN_ACTIVITY);
    int rc;
    CHECK_EQ(sk_stock_set_open(r, aid, 1, &rc), 0);
    CHECK_EQ(rc, SK_RC_UNKNOWN_ACTIVITY);
    struct sk_keys k;
    sk_keys_for(&k, aid);
    redisReply *rep;
    CHECK_EQ(sk_redis_cmd(r, &rep, "EXISTS %s %s %s %s", k.meta, k.stock, k.buyers, k.orders), 0);
    CHECK_EQ(rep->integer, 0);
    freeReplyObject(rep);
    sk_redis_free(r);
}

SK_TEST(quantity_outside_one_to_max_per_order_is_refused_without_state_change)
{
    sk_redis *r = sk_th_redis_new(sk_th_redis_url(), 1000, 1000);
    uint64_t aid = open_activity(r, 10, 5, 3);
    BUYS(r, aid, {1, 0, SK_RC_BAD_QUANTITY}, {1, -1, SK_RC_BAD_QUANTITY},
         {1, 4, SK_RC_BAD_QUANTITY}, {1, INT64_MAX, SK_RC_BAD_QUANTITY});
    check_untouched(r, aid, 10);
    CHECK_EQ(buy(r, aid, 1, 3, NULL), SK_RC_OK);
    sk_redis_free(r);
}

SK_TEST(per_user_limit_counts_units_across_orders)
{
    sk_redis *r = sk_th_redis_new(sk_th_redis_url(), 1000, 1000);
    uint64_t aid = open_activity(r, 100, 3, 2);
    BUYS(r, aid, {7, 2, SK_RC_OK}, {7, 2, SK_RC_LIMIT_EXCEEDED}, {7, 1, SK_RC_OK},
         {7, 1, SK_RC_LIMIT_EXCEEDED}, {8, 1, SK_RC_OK});
    check_counts(r, aid, 96, 4, 3);
    sk_redis_free(r);
}

SK_TEST(last_units_refuse_a_larger_quantity_then_sell_out_exactly)
{
    sk_redis *r = sk_th_redis_new(sk_th_redis_url(), 1000, 1000);
    uint64_t aid = open_activity(r, 3, 3, 3);
    BUYS(r, aid, {1, 2, SK_RC_OK}, {2, 2, SK_RC_INSUFFICIENT}, {2, 1, SK_RC_OK},
         {3, 1, SK_RC_SOLD_OUT});
    CHECK_EQ(state_of(r, aid).remaining, 0);
    sk_redis_free(r);
}

SK_TEST(batch_answers_each_purchase_in_order_and_one_bad_entry_fails_only_itself)
{
    sk_redis *r = sk_th_redis_new(sk_th_redis_url(), 1000, 1000);
    uint64_t aid = open_activity(r, 4, 1, 1);
    struct sk_purchase p[] = {P(1, 1), P(2, 0), P(1, 1), P(3, 5),
                              P(4, 1), P(5, 1), P(6, 1), P(7, 1)};
    size_t n = sizeof p / sizeof p[0];
    struct sk_admission res[8];
    int64_t left = -1;
    CHECK_EQ(sk_stock_buy(r, aid, NULL, p, n, res, &left), 0);
    int want[] = {SK_RC_OK, SK_RC_BAD_QUANTITY, SK_RC_LIMIT_EXCEEDED, SK_RC_BAD_QUANTITY, SK_RC_OK,
                  SK_RC_OK, SK_RC_OK,           SK_RC_SOLD_OUT};
    for (size_t i = 0; i < n; i++) {
        CHECK_MSG(res[i].rc == want[i], "entry %zu: %s, want %s", i, sk_rc_name(res[i].rc),
                  sk_rc_name(want[i]));
        CHECK_EQ(res[i].order_id[0] != 0, want[i] == SK_RC_OK);
    }
    CHECK_EQ(left, 0);
    check_counts(r, aid, 0, 4, 4);
    sk_redis_free(r);
}

/* A stream entry's field list f holds each of want[0..n) (name, value). */
static void check_fields(const redisReply *f, const char *const want[][2], size_t n)
{
    for (size_t w = 0; w < n; w++) {
        const char *v = NULL;
        for (size_t j = 0; j + 1 < f->elements; j += 2)
            if (!strcmp(f->element[j]->str, want[w][0])) v = f->element[j + 1]->str;
        CHECK_MSG(v && !strcmp(v, want[w][1]), "field %s: %s", want[w][0], v ? v : "none");
    }
}

/* The orders one call admits share one stream entry: ids
 * "<aid>-<entry>-<branch>-<i>" numbered in admission order (refused
 * purchases take no number), the entry holding c, the users and the
 * quantities in that order and the first admission number; one order of
 * the entry is released alone, once, and a made-up index is no order. */
SK_TEST(batch_orders_share_one_entry_numbered_in_admission_order)
{
    sk_redis *r = sk_th_redis_new(sk_th_redis_url(), 1000, 1000);
    uint64_t aid = open_activity(r, 10, 2, 2);
    BUYS(r, aid, {9, 1, SK_RC_OK}); /* a call of one: an entry of one, no index */
    struct sk_purchase p[] = {P(1, 2), P(2, 3), P(3, 1), P(1, 1), P(4, 2)};
    struct sk_admission res[5];
    CHECK_EQ(sk_stock_buy(r, aid, NULL, p, 5, res, NULL), 0);
    int want[] = {SK_RC_OK, SK_RC_BAD_QUANTITY, SK_RC_OK, SK_RC_LIMIT_EXCEEDED, SK_RC_OK};
    int index[] = {0, -1, 1, -1, 2};
    struct sk_oid first = {0};
    for (int i = 0; i < 5; i++) {
        CHECK_MSG(res[i].rc == want[i], "purchase %d: %s", i, sk_rc_name(res[i].rc));
        if (want[i] != SK_RC_OK) continue;
        struct sk_oid id;
        CHECK_MSG(sk_oid_parse(res[i].order_id, strlen(res[i].order_id), &id) == 0, "%s",
                  res[i].order_id);
        CHECK_EQ(id.index, index[i]);
        if (i == 0) first = id;
        CHECK(id.sid.ms == first.sid.ms && id.sid.seq == first.sid.seq);
    }
    struct sk_keys k;
    sk_keys_for(&k, aid);
    redisReply *rep;
    CHECK_EQ(sk_redis_cmd(r, &rep, "XRANGE %s - +", k.orders), 0);
    CHECK(rep->type == REDIS_REPLY_ARRAY && rep->elements == 2);
    const redisReply *f = rep->element[1]->element[1];
    const char *want_f[][2] = {{"c", "3"}, {"uid", "1 3 4"}, {"qty", "2 1 2"}, {"n", "2"}};
    check_fields(f, want_f, 4);
    freeReplyObject(rep);
    check_counts(r, aid, 4, 6, 4);
    /* the middle order alone goes back */
    CHECK_EQ(release(r, aid, res[2].order_id, 3, 1, NULL), SK_RC_RELEASED);
    CHECK_EQ(release(r, aid, res[2].order_id, 3, 1, NULL), SK_RC_ALREADY_RELEASED);
    char fake[96];
    snprintf(fake, sizeof fake, "%s", res[4].order_id);
    fake[strlen(fake) - 1] = '7'; /* "-2" -> "-7": never issued */
    CHECK_EQ(release(r, aid, fake, 4, 2, NULL), SK_RC_UNKNOWN_ORDER);
    check_counts(r, aid, 5, 5, 4);
    /* a call of single units only (the common case, built apart) */
    struct sk_purchase ones[] = {P(21, 1), P(22, 1), P(23, 1)};
    CHECK_EQ(sk_stock_buy(r, aid, NULL, ones, 3, res, NULL), 0);
    CHECK_EQ(sk_redis_cmd(r, &rep, "XREVRANGE %s + - COUNT 1", k.orders), 0);
    CHECK(rep->type == REDIS_REPLY_ARRAY && rep->elements == 1);
    f = rep->element[0]->element[1];
    const char *want_1[][2] = {{"c", "3"}, {"uid", "21 22 23"}, {"qty", "1 1 1"}, {"n", "5"}};
    check_fields(f, want_1, 4);
    freeReplyObject(rep);
    check_counts(r, aid, 2, 8, 7);
    sk_redis_free(r);
}

SK_TEST(release_gives_units_back_once_and_they_sell_again)
{
    sk_redis *r = sk_th_redis_new(sk_th_redis_url(), 1000, 1000);
    uint64_t aid = open_activity(r, 2, 2, 2);
    struct sk_admission a = bought(r, aid, 10, 2);
    CHECK_EQ(buy(r, aid, 11, 1, NULL), SK_RC_SOLD_OUT);
    int64_t given;
    CHECK_EQ(release(r, aid, a.order_id, 10, 2, &given), SK_RC_RELEASED);
    CHECK_EQ(given, 2);
    CHECK_EQ(release(r, aid, a.order_id, 10, 2, NULL), SK_RC_ALREADY_RELEASED);
    check_counts(r, aid, 2, 0, 1);
    CHECK_EQ(state_of(r, aid).released, 2);
    /* the buyer's count went down too: they may buy again */
    BUYS(r, aid, {10, 1, SK_RC_OK}, {11, 1, SK_RC_OK});
    check_counts(r, aid, 0, 2, 3);
    sk_redis_free(r);
}

SK_TEST(release_refuses_units_the_buyer_does_not_hold_and_bad_ids)
{
    sk_redis *r = sk_th_redis_new(sk_th_redis_url(), 1000, 1000);
    uint64_t aid = open_activity(r, 5, 1, 1);
    struct sk_admission a = bought(r, aid, 10, 1);
    /* wrong user, too many units, malformed or foreign order ids */
    CHECK_EQ(release(r, aid, a.order_id, 11, 1, NULL), SK_RC_UNKNOWN_ORDER);
    CHECK_EQ(release(r, aid, a.order_id, 10, 2, NULL), SK_RC_UNKNOWN_ORDER);
    CHECK_EQ(release(r, aid, "garbage", 10, 1, NULL), SK_RC_BAD_ARGUMENT);
    CHECK_EQ(release(r, aid, "1-2-3", 10, 1, NULL), SK_RC_BAD_ARGUMENT);
    CHECK_EQ(release(r, aid, a.order_id, 10, 0, NULL), SK_RC_BAD_ARGUMENT);
    /* well-formed but never issued */
    char fake[64];
    snprintf(fake, sizeof fake, "%" PRIu64 "-1-1", aid);
    CHECK_EQ(release(r, aid, fake, 10, 1, NULL), SK_RC_UNKNOWN_ORDER);
    check_counts(r, aid, 4, 1, 1);
    CHECK_EQ(state_of(r, aid).released, 0);
    sk_redis_free(r);
}

SK_TEST(release_never_raises_stock_above_initial)
{
    sk_redis *r = sk_th_redis_new(sk_th_redis_url(), 1000, 1000);
    uint64_t aid = open_activity(r, 5, 1, 1);
    struct sk_admission a = bought(r, aid, 10, 1);
    /* Someone pushed stock back up by hand (drift): the cap still holds. */
    struct sk_keys k;
    sk_keys_for(&k, aid);
    redisReply *rep;
    CHECK_EQ(sk_redis_cmd(r, &rep, "SET %s 5", k.stock), 0);
    freeReplyObject(rep);
    int64_t given = -1;
    CHECK_EQ(release(r, aid, a.order_id, 10, 1, &given), SK_RC_RELEASED);
    CHECK_EQ(given, 0);
    check_counts(r, aid, 5, 0, 1);
    sk_redis_free(r);
}

SK_TEST(preheat_leaves_live_stock_alone_unless_forced_while_closed)
{
    sk_redis *r = sk_th_redis_new(sk_th_redis_url(), 1000, 1000);
    uint64_t aid = open_activity(r, 10, 2, 2);
    CHECK_EQ(buy(r, aid, 1, 2, NULL), SK_RC_OK);
    int64_t now = sk_wall_ms();
    struct sk_stock_def d = {aid, 50, 2, 2, now - 1000, now + 3600000, 0, 0, 1, 0, 0, 0, "", "",
                             0,   0,  0, 0, ""};
    int rc;
    int64_t stock;
    CHECK_EQ(sk_th_preheat_rc(r, &d, 0, &stock), SK_RC_STOCK_LIVE);
    CHECK_EQ(stock, 8);
    CHECK_EQ(sk_th_preheat_rc(r, &d, 1, &stock), SK_RC_IS_OPEN);
    CHECK_EQ(state_of(r, aid).remaining, 8);
    CHECK_EQ(sk_stock_set_open(r, aid, 0, &rc), 0);
    /* forced: the 2 units already held stay sold */
    CHECK_EQ(sk_th_preheat_rc(r, &d, 1, &stock), SK_RC_PREHEATED);
    CHECK_EQ(stock, 48);
    d.initial = 1;
    CHECK_EQ(sk_th_preheat_rc(r, &d, 1, &stock), SK_RC_BELOW_SOLD);
    struct sk_stock_state st = state_of(r, aid);
    CHECK_EQ(st.remaining, 48);
    CHECK_EQ(st.initial, 50);
    CHECK_EQ(st.open, 0);
    sk_redis_free(r);
}

SK_TEST(preheat_rejects_bad_definitions)
{
    sk_redis *r = sk_th_redis_new(sk_th_redis_url(), 1000, 1000);
    int64_t now = sk_wall_ms();
    struct sk_stock_def bad[] = {
        {sk_th_unique_id(), -5, 1, 1, now, now + 1000, 0, 0, 1, 0, 0, 0, "", "", 0, 0, 0, 0, ""},
        {sk_th_unique_id(), 5, 0, 1, now, now + 1000, 0, 0, 1, 0, 0, 0, "", "", 0, 0, 0, 0, ""},
        {sk_th_unique_id(), 5, 1, 0, now, now + 1000, 0, 0, 1, 0, 0, 0, "", "", 0, 0, 0, 0, ""},
        {sk_th_unique_id(), 5, 1, 1, now, now, 0, 0, 1, 0, 0, 0, "", "", 0, 0, 0, 0, ""},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc;
        CHECK_EQ(sk_stock_preheat(r, &bad[i], 0, &rc, NULL), 0);
        CHECK_EQ(rc, SK_RC_BAD_ARGUMENT);
        CHECK_EQ(state_of(r, bad[i].id).exists, 0);
    }
    sk_redis_free(r);
}

/* SCRIPT FLUSH (or FUNCTION FLUSH) from a second connection while
 * purchases run: every purchase must still get a proper answer (the
 * registry resends a missing script as EVAL and loads it again). */
struct flusher {
    const char *url;
    const char *cmd;
    atomic_int stop; /* set by the test, read by the flusher thread */
    int flushes;
};

static void *flush_loop(void *arg)
{
    struct flusher *f = arg;
    sk_redis *r = sk_th_redis_new(f->url, 1000, 1000);
    while (!atomic_load(&f->stop)) {
        redisReply *rep;
        CHECK_EQ(sk_redis_cmd(r, &rep, f->cmd), 0);
        freeReplyObject(rep);
        f->flushes++;
    }
    sk_redis_free(r);
    return NULL;
}

/* fn: how the buyer calls the scripts (SK_FN_OFF: EVALSHA, else FCALL). */
static void flush_mid_run(const char *cmd, int fn)
{
    struct sk_th_redis srv;
    sk_th_redis_start(&srv, NULL);
    sk_redis *r = sk_th_redis_new(srv.url, 1000, 1000);
    r->fn = fn;
    uint64_t aid = open_activity(r, 3000, 1, 1);
    struct flusher f = {srv.url, cmd, 0, 0};
    pthread_t t;
    pthread_create(&t, NULL, flush_loop, &f);
    int accepted = 0;
    for (int i = 0; i < 3000; i++) {
        if (i % 2) {
            accepted += buy(r, aid, (uint64_t)i + 1, 1, NULL) == SK_RC_OK;
        } else {
            struct sk_purchase p = P((uint64_t)i + 1, 1);
            struct sk_admission a;
            int rc = sk_stock_buy(r, aid, NULL, &p, 1, &a, NULL);
            CHECK_MSG(rc == 0, "batch failed: %s", r->errstr);
            accepted += a.rc == SK_RC_OK;
        }
    }
    atomic_store(&f.stop, 1);
    pthread_join(t, NULL);
    CHECK_EQ(accepted, 3000);
    CHECK_MSG(f.flushes > 10, "only %d flushes happened", f.flushes);
    CHECK_EQ(state_of(r, aid).remaining, 0);
    /* the calls went the way asked (a flush must not turn FCALL off) */
    const char *want = fn == SK_FN_OFF ? "\ncmdstat_evalsha:calls=" : "\ncmdstat_fcall:calls=";
    redisReply *info;
    CHECK_EQ(sk_redis_cmd(r, &info, "INFO commandstats"), 0);
    const char *calls = info->str ? strstr(info->str, want) : NULL;
    CHECK_MSG(calls && strtoll(calls + strlen(want), NULL, 10) > 1000, "%s: %s", want, info->str);
    freeReplyObject(info);
    if (fn != SK_FN_OFF) CHECK_EQ(r->fn, SK_FN_ON);
    sk_redis_free(r);
    sk_th_redis_stop(&srv, 0);
}

SK_TEST(script_flush_mid_run_is_recovered_without_a_failed_purchase)
{
    flush_mid_run("SCRIPT FLUSH", SK_FN_OFF);
}

SK_TEST(function_flush_mid_run_is_recovered_without_a_failed_purchase)
{
    flush_mid_run("FUNCTION FLUSH", SK_FN_AUTO);
}

SK_TEST(unreachable_redis_is_a_clear_error_within_the_timeout)
{
    char url[64];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", sk_th_free_port());
    sk_redis *r = sk_th_redis_new(url, 1000, 1000);
    struct sk_admission a;
    int64_t t0 = sk_mono_ms();
    int rc = sk_th_buy(r, 1, 1, 1, &a, NULL);
    CHECK_EQ(rc, SK_EIO);
    CHECK_MSG(strstr(r->errstr, "cannot connect") != NULL, "errstr: %s", r->errstr);
    /* inside the backoff window the next call fails fast, no new connect */
    rc = sk_th_buy(r, 1, 1, 1, &a, NULL);
    CHECK_EQ(rc, SK_EIO);
    CHECK_MSG(sk_mono_ms() - t0 < 1500, "took %lld ms", (long long)(sk_mono_ms() - t0));
    sk_redis_free(r);
}

SK_TEST(stopped_redis_times_out_then_the_connection_recovers)
{
    struct sk_th_redis srv;
    sk_th_redis_start(&srv, NULL);
    sk_redis *r = sk_th_redis_new(srv.url, 500, 300);
    uint64_t aid = open_activity(r, 10, 1, 1);
    CHECK_EQ(buy(r, aid, 1, 1, NULL), SK_RC_OK);
    kill(srv.pid, SIGSTOP);
    struct sk_admission a;
    int64_t t0 = sk_mono_ms();
    int rc = sk_th_buy(r, aid, 2, 1, &a, NULL);
    int64_t took = sk_mono_ms() - t0;
    CHECK_MSG(rc == SK_ETIMEDOUT || rc == SK_EIO, "rc %d", rc);
    CHECK_MSG(took < 2000, "a stopped server held the caller for %lld ms", (long long)took);
    kill(srv.pid, SIGCONT);
    /* The timed-out purchase may have run (it is never resent): user 2 is
     * either admitted once or not at all. Reconnect after the backoff. */
    int64_t deadline = sk_mono_ms() + 5000;
    while ((rc = sk_th_buy(r, aid, 3, 1, &a, NULL)) != 0) {
        CHECK_MSG(sk_mono_ms() < deadline, "no recovery: %s", r->errstr);
        usleep(20000); /* waiting out the reconnect backoff, not timing a result */
    }
    CHECK_EQ(a.rc, SK_RC_OK);
    struct sk_stock_state st = state_of(r, aid);
    CHECK_MSG(st.held == 2 || st.held == 3, "held %lld", (long long)st.held);
    CHECK_EQ(st.remaining + st.held, 10);
    CHECK_MSG(r->connects >= 2, "connects %u", r->connects);
    sk_redis_free(r);
    sk_th_redis_stop(&srv, 1);
}

SK_TEST(auth_and_select_from_the_url_are_applied)
{
    struct sk_th_redis srv;
    const char *extra[] = {"--requirepass", "s3cr%t", NULL};
    sk_th_redis_start(&srv, extra);
    char url[128];
    /* percent-encoded password, database 3 */
    snprintf(url, sizeof url, "redis://:s3cr%%25t@127.0.0.1:%d/3", srv.port);
    sk_redis *r = sk_th_redis_new(url, 1000, 1000);
    uint64_t aid = open_activity(r, 1, 1, 1);
    CHECK_EQ(buy(r, aid, 1, 1, NULL), SK_RC_OK);
    redisReply *rep;
    CHECK_EQ(sk_redis_cmd(r, &rep, "CLIENT INFO"), 0);
    CHECK_MSG(strstr(rep->str, " db=3 ") != NULL, "%s", rep->str);
    freeReplyObject(rep);
    sk_redis_free(r);
    snprintf(url, sizeof url, "redis://:wrong@127.0.0.1:%d", srv.port);
    r = sk_th_redis_new(url, 1000, 1000);
    struct sk_admission a;
    CHECK_EQ(sk_th_buy(r, aid, 1, 1, &a, NULL), SK_EAUTH);
    CHECK_MSG(!strstr(r->errstr, "wrong"), "the password echoed: %s", r->errstr);
    sk_redis_free(r);
    /* no password at all: said so, not as a failed script load */
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", srv.port);
    r = sk_th_redis_new(url, 1000, 1000);
    CHECK_EQ(sk_th_buy(r, aid, 1, 1, &a, NULL), SK_EAUTH);
    CHECK_MSG(strstr(r->errstr, "NOAUTH") != NULL, "errstr: %s", r->errstr);
    sk_redis_free(r);
    sk_th_redis_stop(&srv, 0);
}

SK_TEST(idempotency_key_retry_returns_the_first_answer_and_buys_once)
{
    sk_redis *r = sk_th_redis_new(sk_th_redis_url(), 1000, 1000);
    uint64_t aid = open_activity(r, 2, 2, 2);
    struct sk_purchase p = {.user_id = 5, .quantity = 2, .idem = "k-1", .idem_len = 3};
    struct sk_admission first, again;
    CHECK_EQ(sk_stock_buy(r, aid, NULL, &p, 1, &first, NULL), 0);
    CHECK_EQ(first.rc, SK_RC_OK);
    CHECK_EQ(first.quantity, 2);
    /* same key, even with another quantity and after the sale sold out */
    p.quantity = 1;
    CHECK_EQ(sk_stock_buy(r, aid, NULL, &p, 1, &again, NULL), 0);
    CHECK_EQ(again.rc, SK_RC_OK);
    CHECK_EQ(again.quantity, 2);
    CHECK_STR(again.order_id, first.order_id);
    struct sk_admission b[2];
    struct sk_purchase pb[2] = {p, P(6, 1)};
    CHECK_EQ(sk_stock_buy(r, aid, NULL, pb, 2, b, NULL), 0);
    CHECK_EQ(b[0].rc, SK_RC_OK);
    CHECK_STR(b[0].order_id, first.order_id);
    CHECK_EQ(b[1].rc, SK_RC_SOLD_OUT);
    /* also once the switch is closed */
    int rc;
    CHECK_EQ(sk_stock_set_open(r, aid, 0, &rc), 0);
    CHECK_EQ(sk_stock_buy(r, aid, NULL, &p, 1, &again, NULL), 0);
    CHECK_EQ(again.rc, SK_RC_OK);
    CHECK_STR(again.order_id, first.order_id);
    /* the same key from another user is another purchase */
    p.user_id = 7;
    CHECK_EQ(sk_stock_buy(r, aid, NULL, &p, 1, &again, NULL), 0);
    CHECK_EQ(again.rc, SK_RC_CLOSED);
    check_counts(r, aid, 0, 2, 1);
    sk_redis_free(r);
}

SK_TEST(refused_purchase_with_an_idempotency_key_can_be_retried)
{
    sk_redis *r = sk_th_redis_new(sk_th_redis_url(), 1000, 1000);
    uint64_t aid = make_activity(r, 3, 1, 1, -1000, 3600000, 0);
    struct sk_purchase p = {.user_id = 9, .quantity = 1, .idem = "abc", .idem_len = 3};
    struct sk_admission a;
    CHECK_EQ(sk_stock_buy(r, aid, NULL, &p, 1, &a, NULL), 0);
    CHECK_EQ(a.rc, SK_RC_CLOSED);
    int rc;
    CHECK_EQ(sk_stock_set_open(r, aid, 1, &rc), 0);
    CHECK_EQ(sk_stock_buy(r, aid, NULL, &p, 1, &a, NULL), 0);
    CHECK_EQ(a.rc, SK_RC_OK);
    CHECK_EQ(state_of(r, aid).remaining, 2);
    sk_redis_free(r);
}

SK_TEST(same_idempotency_key_twice_in_one_batch_buys_once)
{
    sk_redis *r = sk_th_redis_new(sk_th_redis_url(), 1000, 1000);
    uint64_t aid = open_activity(r, 10, 2, 2);
    struct sk_purchase p = {.user_id = 3, .quantity = 1, .idem = "dup", .idem_len = 3};
    struct sk_purchase pb[3] = {p, p, P(3, 1)};
    struct sk_admission b[3];
    int64_t left;
    CHECK_EQ(sk_stock_buy(r, aid, NULL, pb, 3, b, &left), 0);
    CHECK_EQ(b[0].rc, SK_RC_OK);
    CHECK_EQ(b[1].rc, SK_RC_OK);
    CHECK_STR(b[1].order_id, b[0].order_id);
    /* the third entry, without a key, is a second real purchase (limit 2) */
    CHECK_EQ(b[2].rc, SK_RC_OK);
    CHECK(strcmp(b[2].order_id, b[0].order_id) != 0);
    CHECK_EQ(left, 8);
    check_counts(r, aid, 8, 2, 2);
    sk_redis_free(r);
}

SK_TEST(sold_out_batch_still_replays_an_idempotent_retry)
{
    sk_redis *r = sk_th_redis_new(sk_th_redis_url(), 1000, 1000);
    uint64_t aid = open_activity(r, 1, 1, 1);
    struct sk_purchase p = {.user_id = 4, .quantity = 1, .idem = "x", .idem_len = 1};
    struct sk_admission a, b[2];
    CHECK_EQ(sk_stock_buy(r, aid, NULL, &p, 1, &a, NULL), 0);
    CHECK_EQ(a.rc, SK_RC_OK);
    struct sk_purchase pb[2] = {P(5, 1), p};
    CHECK_EQ(sk_stock_buy(r, aid, NULL, pb, 2, b, NULL), 0);
    CHECK_EQ(b[0].rc, SK_RC_SOLD_OUT);
    CHECK_EQ(b[1].rc, SK_RC_OK);
    CHECK_STR(b[1].order_id, a.order_id);
    sk_redis_free(r);
}
