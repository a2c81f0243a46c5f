/* test_seg_preheat.c - the segmented preheat walk (engine/seg_preheat.h)
 * and the settle walk it starts with (engine/seg_settle.h), fed the
 * replies a transport would hand them, parsed from RESP bytes (no
 * server): the commands each step sends and where each answer leads. The
 * same walks run in serve (api_admin.c, async) and on the blocking client
 * (sk_seg_preheat, sk_seg_settle), which test_segments.c drives against
 * real Redis. */
#include <stdio.h>
#include <string.h>

#include <hiredis.h>

#include "core/codes.h"
#include "engine/seg_preheat.h"
#include "engine/seg_settle.h"
#include "support/harness.h"
#include "support/resp_bytes.h"

static enum sk_seg_settle_step settle_feed(struct sk_seg_settle *s, const char *bytes)
{
    redisReply *r = sk_th_resp(bytes);
    enum sk_seg_settle_step st = sk_seg_settle_feed(s, r);
    freeReplyObject(r);
    return st;
}

static enum sk_seg_preheat_step preheat_feed(struct sk_seg_preheat *p, const char *bytes)
{
    redisReply *r = sk_th_resp(bytes);
    enum sk_seg_preheat_step st = sk_seg_preheat_feed(p, r);
    freeReplyObject(r);
    return st;
}

/* state.lua's answer: exists, open, held (other figures 0, no fence). */
static const char *state(char *b, size_t cap, int exists, int open, int held, const char *fence)
{
    int v[18] = {exists, open, 10, 0, 0, 1, 1, 0, 0, 0, held, 0, -1, 0, 0, 0, 0, 0};
    size_t n = (size_t)snprintf(b, cap, "*25\r\n");
    for (int i = 0; i < 18; i++)
        n += (size_t)snprintf(b + n, cap - n, ":%d\r\n", v[i]);
    snprintf(b + n, cap - n, "$%zu\r\n%s\r\n:0\r\n$0\r\n\r\n:0\r\n:0\r\n:0\r\n:0\r\n",
             strlen(fence), fence);
    return b;
}

SK_TEST(seg_settle_applies_each_transfer_in_transit_once_and_forgets_it)
{
    struct sk_seg_settle s;
    sk_seg_settle_init(&s, 1001, 2, 0);
    struct sk_seg_cmd c;
    sk_seg_settle_cmd(&s, &c);
    CHECK_EQ(c.script, SK_SEG_CMD_PLAIN);
    CHECK_EQ(c.argc, 2);
    CHECK_STR(c.argv[0], "HGETALL");
    CHECK_STR(c.argv[1], "sk:{a1001.s0}:xout");
    /* one entry to segment 1, one whose receiver is out of range (kept) */
    CHECK_EQ(settle_feed(&s, "*4\r\n$3\r\n0-7\r\n$7\r\n1:3:100\r\n$3\r\n0-8\r\n$3\r\n9:3\r\n"),
             SK_SETTLE_APPLY);
    sk_seg_settle_cmd(&s, &c);
    CHECK_EQ(c.script, SK_SCRIPT_XFER_IN);
    CHECK_EQ(c.nkeys, 3);
    CHECK_EQ(c.nargs, 2);
    CHECK_STR(c.argv[0], "sk:{a1001.s1}:meta");
    CHECK_STR(c.argv[2], "sk:{a1001.s1}:xin");
    CHECK_STR(c.argv[3], "0-7");
    CHECK_STR(c.argv[4], "3");
    char ok[32];
    snprintf(ok, sizeof ok, "*2\r\n:%d\r\n:1\r\n", SK_RC_TRANSFERRED);
    CHECK_EQ(settle_feed(&s, ok), SK_SETTLE_FORGET);
    sk_seg_settle_cmd(&s, &c);
    CHECK_STR(c.argv[0], "HDEL");
    CHECK_STR(c.argv[1], "sk:{a1001.s0}:xout");
    CHECK_STR(c.argv[2], "0-7");
    CHECK_EQ(settle_feed(&s, ":1\r\n"), SK_SETTLE_LIST); /* segment 1 next */
    sk_seg_settle_cmd(&s, &c);
    CHECK_STR(c.argv[1], "sk:{a1001.s1}:xout");
    /* applied before (0): forgotten, not counted */
    CHECK_EQ(settle_feed(&s, "*2\r\n$3\r\n1-2\r\n$3\r\n0:5\r\n"), SK_SETTLE_APPLY);
    snprintf(ok, sizeof ok, "*2\r\n:%d\r\n:0\r\n", SK_RC_TRANSFERRED);
    CHECK_EQ(settle_feed(&s, ok), SK_SETTLE_FORGET);
    CHECK_EQ(settle_feed(&s, ":1\r\n"), SK_SETTLE_DONE);
    CHECK_EQ(s.units, 3);
    sk_seg_settle_free(&s);
}

SK_TEST(seg_settle_leaves_a_fenced_receiver_in_transit_and_fails_on_nonsense)
{
    struct sk_seg_settle s;
    sk_seg_settle_init(&s, 5, 2, 0);
    CHECK_EQ(settle_feed(&s, "*2\r\n$3\r\n0-1\r\n$3\r\n1:2\r\n"), SK_SETTLE_APPLY);
    char fenced[32];
    snprintf(fenced, sizeof fenced, "*2\r\n:%d\r\n:0\r\n", SK_RC_RECOVERING);
    /* no HDEL: the recovery of that segment settles it */
    CHECK_EQ(settle_feed(&s, fenced), SK_SETTLE_LIST);
    CHECK_EQ(s.units, 0);
    sk_seg_settle_free(&s);

    sk_seg_settle_init(&s, 5, 2, 1);
    CHECK_EQ(settle_feed(&s, "*2\r\n$3\r\n0-1\r\n$3\r\n1:2\r\n"), SK_SETTLE_APPLY);
    struct sk_seg_cmd c;
    sk_seg_settle_cmd(&s, &c);
    CHECK_EQ(c.nargs, 3); /* recovering lets it into the fenced segment */
    CHECK_STR(c.argv[5], "recover");
    char closed[32];
    snprintf(closed, sizeof closed, "*2\r\n:%d\r\n:0\r\n", SK_RC_CLOSED);
    CHECK_EQ(settle_feed(&s, closed), SK_SETTLE_FAILED);
    sk_seg_settle_free(&s);

    sk_seg_settle_init(&s, 5, 2, 0);
    CHECK_EQ(settle_feed(&s, "*1\r\n$3\r\n0-1\r\n"), SK_SETTLE_FAILED); /* not a hash */
    sk_seg_settle_free(&s);
    sk_seg_settle_init(&s, 5, 2, 0);
    CHECK_EQ(sk_seg_settle_feed(&s, NULL), SK_SETTLE_FAILED);
    sk_seg_settle_free(&s);
}

static struct sk_stock_def def(int segments, int64_t initial)
{
    struct sk_stock_def d = {.id = 77,
                             .initial = initial,
                             .per_user_limit = 1,
                             .max_per_order = 1,
                             .start_ms = 1,
                             .end_ms = 2,
                             .segments = segments};
    return d;
}

/* The base meta's reply to HMGET segments store_id: neither there. */
#define NONE "*2\r\n$-1\r\n$-1\r\n"

SK_TEST(seg_preheat_forced_settles_then_keeps_what_buyers_hold_and_shares_the_rest)
{
    struct sk_stock_def d = def(2, 10);
    struct sk_seg_preheat p;
    sk_seg_preheat_init(&p, &d, 1);
    struct sk_seg_cmd c;
    sk_seg_preheat_cmd(&p, &c);
    CHECK_STR(c.argv[0], "HMGET");
    CHECK_STR(c.argv[1], "sk:{a77}:meta");
    CHECK_STR(c.argv[3], "store_id");
    CHECK_EQ(preheat_feed(&p, "*2\r\n$1\r\n2\r\n$-1\r\n"), SK_SPH_SETTLE);
    CHECK_EQ(preheat_feed(&p, "*0\r\n"), SK_SPH_SETTLE);
    CHECK_EQ(preheat_feed(&p, "*0\r\n"), SK_SPH_STATE);
    sk_seg_preheat_cmd(&p, &c);
    CHECK_EQ(c.script, SK_SCRIPT_STATE);
    CHECK_STR(c.argv[0], "sk:{a77.s0}:meta");
    char b[512];
    CHECK_EQ(preheat_feed(&p, state(b, sizeof b, 1, 0, 3, "")), SK_SPH_STATE);
    CHECK_EQ(preheat_feed(&p, state(b, sizeof b, 1, 0, 1, "")), SK_SPH_WRITE);
    sk_seg_preheat_cmd(&p, &c);
    CHECK_EQ(c.script, SK_SCRIPT_PREHEAT);
    CHECK_STR(c.argv[0], "sk:{a77.s0}:meta");
    CHECK_STR(c.argv[SK_PREHEAT_NKEYS + 1], "6"); /* 3 held + half of the 6 left */
    CHECK_STR(c.argv[SK_PREHEAT_NKEYS + 9], "0");
    CHECK_STR(c.argv[SK_PREHEAT_NKEYS + 10], "2");
    char pre[32];
    snprintf(pre, sizeof pre, "*2\r\n:%d\r\n:3\r\n", SK_RC_PREHEATED);
    CHECK_EQ(preheat_feed(&p, pre), SK_SPH_WRITE);
    sk_seg_preheat_cmd(&p, &c);
    CHECK_STR(c.argv[0], "sk:{a77.s1}:meta");
    CHECK_STR(c.argv[SK_PREHEAT_NKEYS + 1], "4");
    CHECK_EQ(preheat_feed(&p, pre), SK_SPH_BASE);
    sk_seg_preheat_cmd(&p, &c);
    CHECK_STR(c.argv[0], "HSET");
    CHECK_STR(c.argv[1], "sk:{a77}:meta");
    CHECK_STR(c.argv[4], "segments");
    CHECK_STR(c.argv[5], "2");
    CHECK_EQ(preheat_feed(&p, ":0\r\n"), SK_SPH_BASE_WR);
    sk_seg_preheat_cmd(&p, &c);
    CHECK_STR(c.argv[0], "HDEL"); /* no waiting room */
    CHECK_EQ(preheat_feed(&p, ":0\r\n"), SK_SPH_DONE);
    CHECK_EQ(p.rc, SK_RC_PREHEATED);
    CHECK_EQ(p.stock, 6);
    sk_seg_preheat_free(&p);
}

SK_TEST(seg_preheat_refuses_before_writing_anything)
{
    char b[512];
    struct sk_seg_preheat p;
    struct sk_stock_def d = def(2, 1); /* fewer units than segments */
    sk_seg_preheat_init(&p, &d, 0);
    CHECK_EQ(p.step, SK_SPH_DONE);
    CHECK_EQ(p.rc, SK_RC_BAD_ARGUMENT);
    CHECK(!p.has_stock);

    d = def(2, 10);
    sk_seg_preheat_init(&p, &d, 0);
    CHECK_EQ(preheat_feed(&p, "*2\r\n$1\r\n4\r\n$-1\r\n"), SK_SPH_DONE); /* a changed count */
    CHECK_EQ(p.rc, SK_RC_BAD_ARGUMENT);

    sk_seg_preheat_init(&p, &d, 0);
    CHECK_EQ(preheat_feed(&p, NONE), SK_SPH_STATE); /* new: nothing to settle */
    CHECK_EQ(preheat_feed(&p, state(b, sizeof b, 1, 0, 0, "rollback")), SK_SPH_DONE);
    CHECK_EQ(p.rc, SK_RC_RECOVERING);

    sk_seg_preheat_init(&p, &d, 1);
    CHECK_EQ(preheat_feed(&p, NONE), SK_SPH_STATE);
    CHECK_EQ(preheat_feed(&p, state(b, sizeof b, 1, 1, 0, "")), SK_SPH_DONE);
    CHECK_EQ(p.rc, SK_RC_IS_OPEN);

    sk_seg_preheat_init(&p, &d, 1);
    CHECK_EQ(preheat_feed(&p, NONE), SK_SPH_STATE);
    CHECK_EQ(preheat_feed(&p, state(b, sizeof b, 1, 0, 8, "")), SK_SPH_STATE);
    CHECK_EQ(preheat_feed(&p, state(b, sizeof b, 1, 0, 3, "")), SK_SPH_DONE);
    CHECK_EQ(p.rc, SK_RC_BELOW_SOLD);

    sk_seg_preheat_init(&p, &d, 0);
    CHECK_EQ(preheat_feed(&p, "-ERR no\r\n"), SK_SPH_FAILED);
    sk_seg_preheat_init(&p, &d, 0);
    CHECK_EQ(sk_seg_preheat_feed(&p, NULL), SK_SPH_FAILED);
    sk_seg_preheat_free(&p);
}

/* The store's identity (docs/design.md): every segment's preheat carries
 * it, the base meta gets it with the segment count, another store's key
 * set is refused before anything is read, and live stock everywhere (a
 * preheat from before identities) gets it stamped on the base. */
SK_TEST(seg_preheat_stamps_the_store_identity_and_refuses_another_stores)
{
    char b[512], pre[32];
    struct sk_stock_def d = def(2, 10);
    snprintf(d.store_id, sizeof d.store_id, "0123456789abcdef");
    struct sk_seg_preheat p;
    struct sk_seg_cmd c;
    sk_seg_preheat_init(&p, &d, 0);
    CHECK_EQ(preheat_feed(&p, "*2\r\n$-1\r\n$16\r\nfedcba9876543210\r\n"), SK_SPH_DONE);
    CHECK_EQ(p.rc, SK_RC_OTHER_STORE);

    sk_seg_preheat_init(&p, &d, 0);
    CHECK_EQ(preheat_feed(&p, "*2\r\n$-1\r\n$16\r\n0123456789abcdef\r\n"), SK_SPH_STATE);
    CHECK_EQ(preheat_feed(&p, state(b, sizeof b, 0, 0, 0, "")), SK_SPH_STATE);
    CHECK_EQ(preheat_feed(&p, state(b, sizeof b, 0, 0, 0, "")), SK_SPH_WRITE);
    sk_seg_preheat_cmd(&p, &c);
    CHECK_STR(c.argv[SK_PREHEAT_NKEYS + 15], "0123456789abcdef");
    snprintf(pre, sizeof pre, "*2\r\n:%d\r\n:5\r\n", SK_RC_PREHEATED);
    CHECK_EQ(preheat_feed(&p, pre), SK_SPH_WRITE);
    CHECK_EQ(preheat_feed(&p, pre), SK_SPH_BASE);
    sk_seg_preheat_cmd(&p, &c);
    CHECK_STR(c.argv[c.argc - 2], "store_id");
    CHECK_STR(c.argv[c.argc - 1], "0123456789abcdef");

    sk_seg_preheat_init(&p, &d, 0);
    CHECK_EQ(preheat_feed(&p, NONE), SK_SPH_STATE);
    CHECK_EQ(preheat_feed(&p, state(b, sizeof b, 1, 0, 0, "")), SK_SPH_STATE);
    CHECK_EQ(preheat_feed(&p, state(b, sizeof b, 1, 0, 0, "")), SK_SPH_WRITE);
    snprintf(pre, sizeof pre, "*2\r\n:%d\r\n:5\r\n", SK_RC_STOCK_LIVE);
    CHECK_EQ(preheat_feed(&p, pre), SK_SPH_WRITE);
    CHECK_EQ(preheat_feed(&p, pre), SK_SPH_STAMP);
    sk_seg_preheat_cmd(&p, &c);
    CHECK_STR(c.argv[0], "HSETNX");
    CHECK_STR(c.argv[1], "sk:{a77}:meta");
    CHECK_STR(c.argv[3], "0123456789abcdef");
    CHECK_EQ(preheat_feed(&p, ":1\r\n"), SK_SPH_DONE);
    CHECK_EQ(p.rc, SK_RC_STOCK_LIVE);
    CHECK_EQ(p.stock, 10);
    sk_seg_preheat_free(&p);
}
