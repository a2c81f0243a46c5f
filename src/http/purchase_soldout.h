/* purchase_soldout.h - the local sold-out verdict of `seckill serve`: an
 * activity Redis said is empty (every segment, for a segmented one) is
 * refused here without a round trip, and its stock re-read every 250 ms so
 * released units sell again. */
#ifndef SK_PURCHASE_SOLDOUT_H
#define SK_PURCHASE_SOLDOUT_H
#include <stdint.h>

#include "http/app.h"

/* Marks an activity sold out in this process (the tick re-checks it). */
void sk_purchase_mark_sold_out(struct sk_app *app, uint64_t activity_id);
/* A segmented activity a borrow saw empty everywhere: sold out once a
 * stock read made SUSPECT_CONFIRM_MS later agrees (the units of a transfer
 * between another process's lend and its re-admission are in no segment's
 * stock; a verdict from that moment stranded them unsold). */
void sk_purchase_suspect_sold_out(struct sk_app *app, uint64_t activity_id);
/* Periodic: re-check sold-out activities so released stock sells again. */
void sk_purchase_tick(struct sk_app *app);

#endif
