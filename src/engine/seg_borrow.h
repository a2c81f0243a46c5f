/* seg_borrow.h - the segment borrow protocol (docs/segments.md), written
 * once as code that says which commands to send and reads their replies,
 * without I/O (like redis/redis_cluster.h). One driver runs it, serve's
 * on the async client (http/purchase_borrow.c); tests/unit/test_seg_borrow.c
 * feeds it RESP bytes.
 *
 * The purchases a home segment refused for want of stock ("open" ones)
 * borrow in rounds, at most one per segment:
 *   SCAN     read every segment's stock (one GET each, in parallel);
 *   LEND     transfer.lua at the fullest other segment (the lender);
 *   READMIT  purchase_batch at home for the open purchases, the transfer
 *            applied first (once per transfer id);
 * until none is open, no other segment has stock, the lender's refusal is
 * final (closed, gone, fenced), or the rounds run out. The driver sends
 * what b->step asks for and hands the replies back; the answers are in
 * b->res when the step is DONE. */
#ifndef SK_SEG_BORROW_H
#define SK_SEG_BORROW_H
#include <stddef.h>
#include <stdint.h>

#include <hiredis.h>

#include "engine/keys.h"
#include "engine/stock.h"

#define SK_SEG_MAX 256

/* 1 for a refusal a borrow may turn around (sold out or insufficient at
 * home); anything else a home answers is final. */
int sk_seg_refused_by_stock(int rc);

/* ---- every segment's stock at once -------------------------------------- */

struct sk_seg_stocks {
    int segments;
    int failed;            /* a GET got no answer, or a strange one */
    int64_t v[SK_SEG_MAX]; /* units left; -1: no stock key, or not read */
};

void sk_seg_stocks_reset(struct sk_seg_stocks *s, int segments);
/* The GET of segment seg's stock (argv points into *k). */
void sk_seg_stocks_argv(uint64_t activity_id, int seg, struct sk_keys *k, const char *argv[2]);
/* Its reply (NULL: none came) into s->v[seg], or s->failed. */
void sk_seg_stocks_reply(struct sk_seg_stocks *s, int seg, const redisReply *rep);
/* 1 when the read succeeded and saw every segment at 0. */
int sk_seg_stocks_empty(const struct sk_seg_stocks *s);

/* The fullest segment other than skip by stocks[] (-1 entries are
 * unknown), or -1 when none has stock. */
int sk_seg_pick_lender(const int64_t *stocks, int segments, int skip);

/* ---- the lending half ---------------------------------------------------- */

/* transfer.lua at segment from, for segment to: want units; epoch/adm what
 * the caller saw last of the lender (docs/recovery.md; epoch 0: nothing). */
struct sk_seg_lend_cmd {
    struct sk_keys k;
    const char *keys[SK_K_TRANSFER_N];
    char buf[SK_A_TRANSFER_N][24];
    const char *args[SK_A_TRANSFER_N];
    int nargs;
};
void sk_seg_lend_cmd(struct sk_seg_lend_cmd *c, uint64_t activity_id, int from, int to,
                     int64_t want, int64_t epoch, int64_t adm);
/* 1 when a lender's refusal answers the borrowing purchases (the sale is
 * closed, or gone, or the lender is fenced while its stock is rebuilt),
 * 0 when it only means "look elsewhere" (sold out). */
int sk_seg_lend_refusal_final(int rc);
/* A transfer.lua reply -> rc, units taken, id (cap SK_XFER_ID_MAX), stock
 * left at the lender. Returns 0 or SK_EPROTO. */
int sk_seg_transfer_parse(const redisReply *rep, int *rc, int64_t *taken, char *id, int64_t *left);

/* ---- the borrow ---------------------------------------------------------- */

enum sk_borrow_step {
    SK_BORROW_SCAN,    /* sk_seg_stocks_argv for every segment, replies to
                          sk_seg_stocks_reply(&b->stocks, ...), then sk_borrow_scanned */
    SK_BORROW_LEND,    /* sk_borrow_lend_cmd, its reply to sk_borrow_lent */
    SK_BORROW_READMIT, /* purchase_batch at home of the purchases sk_borrow_open lists,
                          the head carrying b->xfer_id/xfer_qty; answers to
                          sk_borrow_readmitted */
    SK_BORROW_DONE,    /* b->res answers every purchase */
    SK_BORROW_FAILED,  /* Redis did not answer, or strangely: b->errstr */
};

struct sk_borrow {
    uint64_t aid;
    int segments, home, round;
    enum sk_borrow_step step;
    size_t n;
    int64_t *qty;             /* n: the purchases' quantities */
    struct sk_admission *res; /* n: their answers so far */
    struct sk_seg_stocks stocks;
    int lender; /* the segment asked last */
    char xfer_id[SK_XFER_ID_MAX];
    int64_t xfer_qty;
    int final_rc;    /* the lender's final refusal (RECOVERING: the lender is fenced), 0 none */
    int unconfirmed; /* FAILED: stock was lent on a master whose replicas did not confirm */
    char errstr[96];
};

/* Takes over n (1..SK_BATCH_MAX) purchases of segment home with their
 * quantities and answers (copied into b->qty and b->res, heap, freed by
 * sk_borrow_free). stocks: a fresh read of every segment (then the first
 * step is LEND or DONE), or NULL (SCAN first). Returns 0, SK_EINVAL or
 * SK_ENOMEM. */
int sk_borrow_init(struct sk_borrow *b, uint64_t activity_id, int segments, int home, size_t n,
                   const int64_t *qty, const struct sk_admission *res,
                   const struct sk_seg_stocks *stocks);
void sk_borrow_free(struct sk_borrow *b);

/* After a SCAN: the next step. */
enum sk_borrow_step sk_borrow_scanned(struct sk_borrow *b);
/* The LEND call; epoch/adm: what the caller saw last of b->lender. */
void sk_borrow_lend_cmd(const struct sk_borrow *b, int64_t epoch, int64_t adm,
                        struct sk_seg_lend_cmd *c);
/* Its reply (NULL: none came); confirmed 0: fewer replicas acknowledged
 * the transfer than the caller requires, so its units are not used (a
 * failover could give them back; reconcile rolls a surviving one forward). */
enum sk_borrow_step sk_borrow_lent(struct sk_borrow *b, const redisReply *rep, int confirmed);
/* The open purchases, in order, as indexes into b->res (idx holds b->n).
 * Returns their count. */
size_t sk_borrow_open(const struct sk_borrow *b, size_t *idx);
/* The units the open purchases want. */
int64_t sk_borrow_want(const struct sk_borrow *b);
/* The READMIT answers: got[j] answers purchase idx[j]; home_left the
 * home's stock after (the call's remaining). */
enum sk_borrow_step sk_borrow_readmitted(struct sk_borrow *b, const size_t *idx, size_t m,
                                         const struct sk_admission *got, int64_t home_left);
/* DONE with every segment seen empty by the last read: the sale is sold
 * out (a final refusal of the lender is no such verdict). */
int sk_borrow_sold_out(const struct sk_borrow *b);

#endif
