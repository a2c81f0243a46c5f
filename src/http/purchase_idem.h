/* purchase_idem.h - the idempotency probe of the purchase route.
 *
 * A purchase with an Idempotency-Key on an activity sold out here. Only a
 * key that Redis accepted before may get another answer than sold_out
 * (its first answer, which the admission call replays), and the buyer's
 * home key set records every accepted key (idem: "user:key"). One HGET
 * tells: no entry, sold out, answered here; an entry, the admission call
 * as usual. A batch holding a key cannot take the admission script's
 * one-GET sold-out exit, so without this every random key would cost a
 * full admission (BENCHMARKS.md, "Keyed purchases after the sell-out").
 *
 * The buyer's home key set (seg) is asked; the probe takes p (answers it,
 * or hands it to this pass's batch). */
#ifndef SK_PURCHASE_IDEM_H
#define SK_PURCHASE_IDEM_H
#include <stdint.h>

#include "http/app.h"
#include "http/purchase_answer.h"

void sk_purchase_idem_probe(struct sk_app *app, uint64_t activity_id, int seg,
                            struct sk_pending *p);

#endif
