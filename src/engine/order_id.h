/* order_id.h - the order ids the admission script hands out, built and
 * parsed in one place (bytes in, no I/O):
 *
 *   <label>-<ms>-<seq>-<branch>-<i>  an order of a stream entry of several
 *   <label>-<ms>-<seq>-<branch>      an order alone in its entry
 *   <label>-<ms>-<seq>               before branches; still read everywhere
 *
 * <label> is the key set's ("<ID>" or "<ID>.<seg>", keys.h), <ms>-<seq>
 * the order's stream entry id, <branch> the first SK_OID_BRANCH_LEN hex
 * digits of the replication id of the Redis that admitted it, <i> the
 * order's place in its entry (0..SK_OID_INDEX_MAX-1, canonical decimal):
 * an admission call that admits several orders writes them as one entry
 * (lua/lib/admit.lua, docs/architecture.md "Order events"). Two masters
 * that both admit after a split (a promoted replica and the old master cut
 * off from the Sentinels) start from the same stream id on close clocks
 * and hand out the same entry ids; their replication ids differ (a
 * promotion draws a new one), so their order ids do not. */
#ifndef SK_ORDER_ID_H
#define SK_ORDER_ID_H
#include <stddef.h>
#include <stdint.h>

#include "redis/stream_id.h"

#define SK_OID_BRANCH_LEN 8
#define SK_OID_INDEX_MAX 1024 /* orders in one stream entry: SK_BATCH_MAX (stock.h) */
#define SK_OID_NO_INDEX (-1)  /* the order is alone in its entry */

struct sk_oid {
    uint64_t activity_id;
    int seg;          /* SK_SEG_NONE or the segment */
    size_t label_len; /* bytes of "<label>" */
    struct sk_sid sid;
    char branch[SK_OID_BRANCH_LEN + 1]; /* "" for an id made before branches */
    int index;                          /* the order's place in its entry, or SK_OID_NO_INDEX */
};

/* Parses exactly [s, s+len): 0, or SK_EINVAL (out untouched) for anything
 * but the three shapes above (canonical decimals, a lowercase-hex branch,
 * an index only after a branch). */
int sk_oid_parse(const char *s, size_t len, struct sk_oid *out);

/* 1 when [b, b+len) is a branch: SK_OID_BRANCH_LEN lowercase hex digits. */
int sk_oid_branch_ok(const char *b, size_t len);

/* "<label>-<sid>[-<branch>[-<index>]]" into out (cap bytes); branch NULL
 * or blen 0: none; index SK_OID_NO_INDEX: none. 0, or SK_EINVAL when it
 * does not fit, the branch is malformed, or an index comes without a
 * branch or out of 0..SK_OID_INDEX_MAX-1. */
int sk_oid_format(char *out, size_t cap, const char *label, const char *sid, size_t sidlen,
                  const char *branch, size_t blen, int index);

#endif
