/* keys.c - key naming (SPEC section 5). */
#include "keys.h"

#include <inttypes.h>
#include <stdio.h>

void sk_keys_for(struct sk_keys *k, uint64_t id)
{
    snprintf(k->meta, sizeof k->meta, "sk:{a%" PRIu64 "}:meta", id);
    snprintf(k->stock, sizeof k->stock, "sk:{a%" PRIu64 "}:stock", id);
    snprintf(k->buyers, sizeof k->buyers, "sk:{a%" PRIu64 "}:buyers", id);
    snprintf(k->orders, sizeof k->orders, "sk:{a%" PRIu64 "}:orders", id);
    snprintf(k->released, sizeof k->released, "sk:{a%" PRIu64 "}:released", id);
    snprintf(k->idem, sizeof k->idem, "sk:{a%" PRIu64 "}:idem", id);
    snprintf(k->ledger, sizeof k->ledger, "sk:{a%" PRIu64 "}:ledger", id);
}
