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
    snprintf(k->dlq, sizeof k->dlq, "sk:{a%" PRIu64 "}:dlq", id);
}

void sk_keys_purchase(const struct sk_keys *k, const char *keys[SK_PURCHASE_NKEYS])
{
    keys[0] = k->meta;
    keys[1] = k->stock;
    keys[2] = k->buyers;
    keys[3] = k->orders;
    keys[4] = k->idem;
    keys[5] = k->ledger;
}
