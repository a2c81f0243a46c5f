/* order_id.h - the order ids the admission script hands out, built and
 * parsed in one place (bytes in, no I/O):
 *
 *   <label>-<ms>-<seq>-<branch>     since branches (docs/failover.md)
 *   <label>-<ms>-<seq>              before them; still read everywhere
 *
 * <label> is the key set's ("<ID>" or "<ID>.<seg>", keys.h), <ms>-<seq>
 * the order's stream entry id, <branch> the first SK_OID_BRANCH_LEN hex
 * digits of the replication id of the Redis that admitted it. Two masters
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

struct sk_oid {
    uint64_t activity_id;
    int seg;          /* SK_SEG_NONE or the segment */
    size_t label_len; /* bytes of "<label>" */
    struct sk_sid sid;
    char branch[SK_OID_BRANCH_LEN + 1]; /* "" for an id made before branches */
};

/* Parses exactly [s, s+len): 0, or SK_EINVAL (out untouched) for anything
 * but the two shapes above (canonical decimals, a lowercase-hex branch). */
int sk_oid_parse(const char *s, size_t len, struct sk_oid *out);

/* 1 when [b, b+len) is a branch: SK_OID_BRANCH_LEN lowercase hex digits. */
int sk_oid_branch_ok(const char *b, size_t len);

/* "<label>-<sid>[-<branch>]" into out (cap bytes); branch NULL or blen 0:
 * none. 0, or SK_EINVAL when it does not fit or the branch is malformed. */
int sk_oid_format(char *out, size_t cap, const char *label, const char *sid, size_t sidlen,
                  const char *branch, size_t blen);

#endif
