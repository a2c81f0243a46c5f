/* draw_sync.h - the draw the database recorded, written into Redis
 * (docs/fairness.md): by `seckill activity draw` once it recorded it, and
 * by the recovery (recover.h) when a key set lost it with the rest, so the
 * same places, seed and wave are back without anyone running the draw
 * again. */
#ifndef SK_DRAW_SYNC_H
#define SK_DRAW_SYNC_H
#include <stddef.h>

#include "engine/activity.h"
#include "engine/registration.h"
#include "redis/redis_conn.h"
#include "store/store.h"

/* Writes activity a's recorded draw (a->drawn_ms > 0) into Redis
 * (draw_put.lua): every registrant at its recorded place, the seed, and
 * the wave the store recorded (none: the first, from the sale's start);
 * Redis keeps a draw it already holds. Then the store records the wave
 * Redis answered. *after: Redis's draw state (after->rc is SK_RC_OK, or
 * Redis's refusal, e.g. RECOVERING on a fenced key set: nothing written).
 * 0 when both answered (check after->rc), or a negative SK_E* code with
 * err (cap bytes) saying why. */
int sk_draw_sync(sk_store *st, sk_redis *r, const struct sk_activity *a,
                 struct sk_draw_redis *after, char *err, size_t cap);

#endif
