/* test_seg_borrow.c - the segment borrow protocol (engine/seg_borrow.h)
 * fed the replies a transport would hand it, parsed from RESP bytes (no
 * server): which step follows which answer, what each command carries,
 * and when the refusals stand. The same code runs in serve
 * (http/purchase_borrow.c), which test_segments.c drives over HTTP against
 * real Redis. */
#include <stdio.h>
#include <string.h>

#include <hiredis.h>

#include "core/codes.h"
#include "core/error.h"
#include "engine/seg_borrow.h"
#include "support/harness.h"
#include "support/resp_bytes.h"

/* transfer.lua's answer: rc, units taken, transfer id, left at the lender. */
static redisReply *transfer(int rc, int taken, const char *id, int left)
{
    char b[256];
    snprintf(b, sizeof b, "*4\r\n:%d\r\n:%d\r\n$%zu\r\n%s\r\n:%d\r\n", rc, taken, strlen(id), id,
             left);
    return sk_th_resp(b);
}

/* Feeds one GET answer per segment ("nil" for a missing key). */
static void scan_answers(struct sk_borrow *b, const char *const *answers)
{
    for (int s = 0; s < b->segments; s++) {
        char buf[64];
        if (strcmp(answers[s], "nil") == 0)
            snprintf(buf, sizeof buf, "$-1\r\n");
        else
            snprintf(buf, sizeof buf, "$%zu\r\n%s\r\n", strlen(answers[s]), answers[s]);
        redisReply *r = sk_th_resp(buf);
        sk_seg_stocks_reply(&b->stocks, s, r);
        freeReplyObject(r);
    }
    sk_borrow_scanned(b);
}

/* Three purchases of home 1 over 4 segments: two refused for stock, one
 * refused for the per-user limit (final). */
static void start(struct sk_borrow *b)
{
    int64_t qty[3] = {2, 1, 5};
    struct sk_admission res[3] = {
        {.rc = SK_RC_SOLD_OUT}, {.rc = SK_RC_LIMIT_EXCEEDED}, {.rc = SK_RC_INSUFFICIENT}};
    CHECK_EQ(sk_borrow_init(b, 1001, 4, 1, 3, qty, res, NULL), 0);
    CHECK_EQ(b->step, SK_BORROW_SCAN);
}

SK_TEST(seg_borrow_scans_lends_from_the_fullest_and_readmits_the_open_purchases)
{
    struct sk_borrow b;
    start(&b);
    struct sk_keys k;
    const char *argv[2];
    sk_seg_stocks_argv(1001, 3, &k, argv);
    CHECK_STR(argv[0], "GET");
    CHECK_STR(argv[1], "sk:{a1001.s3}:stock");
    const char *stocks[] = {"4", "0", "9", "nil"};
    scan_answers(&b, stocks);
    CHECK_EQ(b.step, SK_BORROW_LEND);
    CHECK_EQ(b.lender, 2); /* the fullest other than home */
    /* want: the open purchases only (2 + 5), for home 1, with the memory */
    struct sk_seg_lend_cmd c;
    sk_borrow_lend_cmd(&b, 77, 5, &c);
    CHECK_STR(c.keys[0], "sk:{a1001.s2}:meta");
    CHECK_STR(c.keys[2], "sk:{a1001.s2}:xout");
    CHECK_EQ(c.nargs, 4);
    CHECK_STR(c.args[0], "1");
    CHECK_STR(c.args[1], "7");
    CHECK_STR(c.args[2], "77");
    CHECK_STR(c.args[3], "5");
    sk_borrow_lend_cmd(&b, 0, 0, &c);
    CHECK_EQ(c.nargs, 2); /* nothing known of the lender: nothing checked */

    redisReply *t = transfer(SK_RC_TRANSFERRED, 7, "2-41", 2);
    CHECK_EQ(sk_borrow_lent(&b, t, 1), SK_BORROW_READMIT);
    freeReplyObject(t);
    CHECK_STR(b.xfer_id, "2-41");
    CHECK_EQ(b.xfer_qty, 7);
    size_t idx[3];
    CHECK_EQ(sk_borrow_open(&b, idx), 2);
    CHECK_EQ(idx[0], 0);
    CHECK_EQ(idx[1], 2);
    /* the first is admitted, the second still short: another round */
    struct sk_admission got[2] = {{.rc = SK_RC_OK, .quantity = 2}, {.rc = SK_RC_INSUFFICIENT}};
    CHECK_EQ(sk_borrow_readmitted(&b, idx, 2, got, 0), SK_BORROW_SCAN);
    CHECK_EQ(b.res[0].rc, SK_RC_OK);
    CHECK_EQ(b.res[1].rc, SK_RC_LIMIT_EXCEEDED); /* a final answer is never touched */
    CHECK_EQ(sk_borrow_want(&b), 5);
    /* every segment empty now: the refusal stands, and it is a sold-out verdict */
    const char *empty[] = {"0", "0", "0", "0"};
    scan_answers(&b, empty);
    CHECK_EQ(b.step, SK_BORROW_DONE);
    CHECK_EQ(b.res[2].rc, SK_RC_INSUFFICIENT);
    CHECK(sk_borrow_sold_out(&b));
    sk_borrow_free(&b);
}

SK_TEST(seg_borrow_final_refusal_of_the_lender_answers_the_open_purchases)
{
    struct sk_borrow b;
    start(&b);
    const char *stocks[] = {"4", "0", "9", "1"};
    scan_answers(&b, stocks);
    redisReply *t = transfer(SK_RC_CLOSED, 0, "", 0);
    CHECK_EQ(sk_borrow_lent(&b, t, 1), SK_BORROW_DONE);
    freeReplyObject(t);
    CHECK_EQ(b.res[0].rc, SK_RC_CLOSED);
    CHECK_EQ(b.res[1].rc, SK_RC_LIMIT_EXCEEDED);
    CHECK_EQ(b.res[2].rc, SK_RC_CLOSED);
    CHECK_EQ(b.final_rc, SK_RC_CLOSED);
    CHECK(!sk_borrow_sold_out(&b)); /* closed is no sold-out verdict */
    sk_borrow_free(&b);

    start(&b);
    scan_answers(&b, stocks);
    t = transfer(SK_RC_RECOVERING, 0, "", 0);
    CHECK_EQ(sk_borrow_lent(&b, t, 1), SK_BORROW_DONE);
    freeReplyObject(t);
    CHECK_EQ(b.final_rc, SK_RC_RECOVERING); /* the driver forgets the lender */
    CHECK_EQ(b.res[0].rc, SK_RC_RECOVERING);
    sk_borrow_free(&b);
}

SK_TEST(seg_borrow_drained_lenders_end_after_one_round_per_segment)
{
    struct sk_borrow b;
    start(&b);
    const char *stocks[] = {"4", "0", "9", "1"};
    for (int round = 0; round < 4; round++) {
        CHECK_EQ(b.step, SK_BORROW_SCAN);
        scan_answers(&b, stocks);
        CHECK_EQ(b.step, SK_BORROW_LEND);
        redisReply *t = transfer(SK_RC_SOLD_OUT, 0, "", 0); /* drained meanwhile */
        sk_borrow_lent(&b, t, 1);
        freeReplyObject(t);
    }
    CHECK_EQ(b.step, SK_BORROW_DONE);
    CHECK_EQ(b.res[0].rc, SK_RC_SOLD_OUT);
    CHECK(!sk_borrow_sold_out(&b)); /* the last read saw stock */
    sk_borrow_free(&b);
}

SK_TEST(seg_borrow_fails_on_no_answer_a_strange_one_or_unconfirmed_units)
{
    struct sk_borrow b;
    start(&b);
    const char *stocks[] = {"4", "0", "9", "1"};
    scan_answers(&b, stocks);
    CHECK_EQ(sk_borrow_lent(&b, NULL, 1), SK_BORROW_FAILED);
    CHECK(!b.unconfirmed);
    sk_borrow_free(&b);

    start(&b);
    scan_answers(&b, stocks);
    redisReply *t = transfer(SK_RC_TRANSFERRED, 3, "2-1", 6);
    CHECK_EQ(sk_borrow_lent(&b, t, 0), SK_BORROW_FAILED);
    freeReplyObject(t);
    CHECK(b.unconfirmed);
    sk_borrow_free(&b);

    start(&b);
    redisReply *e = sk_th_resp("-ERR boom\r\n");
    for (int s = 0; s < 4; s++)
        sk_seg_stocks_reply(&b.stocks, s, s == 2 ? e : NULL);
    freeReplyObject(e);
    CHECK_EQ(sk_borrow_scanned(&b), SK_BORROW_FAILED);
    sk_borrow_free(&b);
}

SK_TEST(seg_borrow_with_a_fresh_read_starts_at_the_lender_or_ends_at_once)
{
    int64_t qty[1] = {1};
    struct sk_admission res[1] = {{.rc = SK_RC_SOLD_OUT}};
    struct sk_seg_stocks st;
    sk_seg_stocks_reset(&st, 3);
    st.v[0] = 5, st.v[1] = 0, st.v[2] = 0;
    struct sk_borrow b;
    CHECK_EQ(sk_borrow_init(&b, 7, 3, 1, 1, qty, res, &st), 0);
    CHECK_EQ(b.step, SK_BORROW_LEND);
    CHECK_EQ(b.lender, 0);
    sk_borrow_free(&b);
    st.v[0] = 0;
    CHECK_EQ(sk_borrow_init(&b, 7, 3, 1, 1, qty, res, &st), 0);
    CHECK_EQ(b.step, SK_BORROW_DONE);
    CHECK(sk_borrow_sold_out(&b));
    sk_borrow_free(&b);
    /* nothing refused for stock: nothing to borrow for */
    res[0].rc = SK_RC_OK;
    CHECK_EQ(sk_borrow_init(&b, 7, 3, 1, 1, qty, res, NULL), 0);
    CHECK_EQ(b.step, SK_BORROW_DONE);
    sk_borrow_free(&b);
    /* bad shapes are refused */
    CHECK_EQ(sk_borrow_init(&b, 7, 1, 0, 1, qty, res, NULL), SK_EINVAL);
    CHECK_EQ(sk_borrow_init(&b, 7, 3, 3, 1, qty, res, NULL), SK_EINVAL);
    CHECK_EQ(sk_borrow_init(&b, 7, 3, 1, 0, qty, res, NULL), SK_EINVAL);
}
