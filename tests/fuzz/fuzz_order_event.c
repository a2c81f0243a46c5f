/* fuzz_order_event.c - order events (orders/order_event.h) on any bytes:
 * the input, split at '\n', is an entry id and then field names and
 * values. What parses holds 1..SK_EVENT_ORDERS_MAX orders, each with an id
 * that parses back to this entry and its place, a user, a quantity and a
 * visible key; and the orders written back as the admission script would
 * write them (lua/lib/admit.lua) parse to the same orders. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "engine/keys.h"
#include "engine/order_id.h"
#include "fuzz.h"
#include "orders/order_event.h"

#define MAX_FIELDS 16

static struct sk_order first[SK_EVENT_ORDERS_MAX], again[SK_EVENT_ORDERS_MAX];

/* Appends s (len bytes) to buf at *at, a separator before all but the first. */
static void put(char *buf, size_t cap, size_t *at, const char *s, size_t len, int first_item)
{
    if (!first_item && *at < cap) buf[(*at)++] = ' ';
    for (size_t i = 0; i < len && *at < cap; i++)
        buf[(*at)++] = s[i];
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf = fuzz_copy(data, size);
    const char *parts[1 + 2 * MAX_FIELDS];
    size_t lens[1 + 2 * MAX_FIELDS], np = 0;
    const char *p = buf, *end = buf + size;
    while (np < 1 + 2 * MAX_FIELDS) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        parts[np] = p;
        lens[np++] = (size_t)((nl ? nl : end) - p);
        if (!nl) break;
        p = nl + 1;
    }
    struct sk_event_field f[MAX_FIELDS];
    size_t nf = 0;
    for (size_t i = 1; i + 1 < np; i += 2)
        f[nf++] = (struct sk_event_field){parts[i], lens[i], parts[i + 1], lens[i + 1]};
    size_t n = 99;
    char why[200];
    int rc = sk_order_event_parse("7", 7, parts[0], lens[0], f, nf, first, &n, why, sizeof why);
    FUZZ_CHECK(rc == 0 || rc == SK_EINVAL);
    if (rc != 0) {
        FUZZ_CHECK(n == 0 && strlen(why) > 0);
        free(buf);
        return 0;
    }
    FUZZ_CHECK(n >= 1 && n <= SK_EVENT_ORDERS_MAX);
    int several = 0;
    for (size_t i = 0; i < n; i++) {
        const struct sk_order *o = &first[i];
        struct sk_oid id;
        FUZZ_CHECK(sk_oid_parse(o->order_id, strlen(o->order_id), &id) == 0);
        FUZZ_CHECK(id.activity_id == 7 && id.seg == SK_SEG_NONE);
        FUZZ_CHECK(strlen(o->stream_id) == lens[0] && !memcmp(o->stream_id, parts[0], lens[0]));
        FUZZ_CHECK(id.index == SK_OID_NO_INDEX || id.index == (int)i);
        if (i == 0) several = id.index != SK_OID_NO_INDEX;
        FUZZ_CHECK(several == (id.index != SK_OID_NO_INDEX));
        FUZZ_CHECK(o->user_id >= 1 && o->quantity >= 1 && o->activity_id == 7);
        for (const char *k = o->idem_key; *k; k++)
            FUZZ_CHECK(*k > 0x20 && *k < 0x7f);
    }
    FUZZ_CHECK(several || n == 1);
    /* written back as the admission script writes them */
    struct sk_oid id0;
    FUZZ_CHECK(sk_oid_parse(first[0].order_id, strlen(first[0].order_id), &id0) == 0);
    const char *branch = id0.branch;
    static char uids[SK_EVENT_ORDERS_MAX * 21], qtys[SK_EVENT_ORDERS_MAX * 21],
        keys[SK_EVENT_ORDERS_MAX * 72];
    size_t ul = 0, ql = 0, kl = 0;
    for (size_t i = 0; i < n; i++) {
        char num[24], key[96];
        int w = snprintf(num, sizeof num, "%" PRIu64, first[i].user_id);
        put(uids, sizeof uids, &ul, num, (size_t)w, i == 0);
        w = snprintf(num, sizeof num, "%" PRId64, first[i].quantity);
        put(qtys, sizeof qtys, &ql, num, (size_t)w, i == 0);
        if (first[i].idem_key[0]) {
            w = several ? snprintf(key, sizeof key, "%zu:%s", i, first[i].idem_key)
                        : snprintf(key, sizeof key, "%s", first[i].idem_key);
            put(keys, sizeof keys, &kl, key, (size_t)w, kl == 0);
        }
    }
    char cnt[24], adm[24];
    snprintf(cnt, sizeof cnt, "%zu", n);
    snprintf(adm, sizeof adm, "%" PRId64, first[0].adm_seq);
    struct sk_event_field g[7];
    size_t ng = 0;
    g[ng++] = (struct sk_event_field){"aid", 3, "7", 1};
    g[ng++] = (struct sk_event_field){"uid", 3, uids, ul};
    g[ng++] = (struct sk_event_field){"qty", 3, qtys, ql};
    if (first[0].adm_seq > 0) g[ng++] = (struct sk_event_field){"n", 1, adm, strlen(adm)};
    if (branch[0]) g[ng++] = (struct sk_event_field){"b", 1, branch, strlen(branch)};
    if (several) g[ng++] = (struct sk_event_field){"c", 1, cnt, strlen(cnt)};
    if (kl) g[ng++] = (struct sk_event_field){"k", 1, keys, kl};
    size_t m = 0;
    FUZZ_CHECK(sk_order_event_parse("7", 7, parts[0], lens[0], g, ng, again, &m, why, sizeof why) ==
               0);
    FUZZ_CHECK(m == n);
    for (size_t i = 0; i < n; i++) {
        FUZZ_CHECK(!strcmp(first[i].order_id, again[i].order_id));
        FUZZ_CHECK(first[i].user_id == again[i].user_id);
        FUZZ_CHECK(first[i].quantity == again[i].quantity);
        FUZZ_CHECK(first[i].adm_seq == again[i].adm_seq);
        FUZZ_CHECK(first[i].created_ms == again[i].created_ms);
        FUZZ_CHECK(!strcmp(first[i].idem_key, again[i].idem_key));
    }
    free(buf);
    return 0;
}
