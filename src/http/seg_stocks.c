/* seg_stocks.c - every segment's stock at once, async (seg_stocks.h). */
#include "http/seg_stocks.h"

static void on_get(void *data, redisReply *rep)
{
    struct sk_seg_read_slot *sl = data;
    sk_seg_stocks_reply(sl->rd->st, sl->seg, rep);
    sk_fanout_answered(&sl->rd->f);
}

static void on_done(struct sk_fanout *f)
{
    struct sk_seg_read *rd = (struct sk_seg_read *)f;
    if (f->failed) rd->st->failed = 1; /* a GET that could not be sent */
    rd->done(rd->data);
}

void sk_seg_read_start(struct sk_seg_read *rd, sk_aredis *ar, uint64_t aid,
                       struct sk_seg_stocks *st, void (*done)(void *data), void *data)
{
    sk_seg_stocks_reset(st, st->segments);
    rd->st = st;
    rd->done = done;
    rd->data = data;
    sk_fanout_begin(&rd->f, on_done);
    for (int i = 0; i < st->segments; i++) {
        struct sk_keys k;
        const char *argv[2];
        sk_seg_stocks_argv(aid, i, &k, argv);
        rd->slot[i] = (struct sk_seg_read_slot){rd, i};
        sk_fanout_sent(&rd->f, sk_aredis_command(ar, on_get, &rd->slot[i], 2, argv, NULL));
    }
    sk_fanout_end(&rd->f);
}
