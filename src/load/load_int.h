/* load_int.h - what the files of `seckill load` share (src/load only):
 * the accepted-order records, the error and violation writers, the checks
 * and the usage text. The public API is load.h. */
#ifndef SK_LOAD_INT_H
#define SK_LOAD_INT_H
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "load/load.h"

/* One accepted order: its user, its units and where its id lies in the
 * records' arena. */
struct sk_load_rec {
    uint64_t uid;
    int64_t qty;
    size_t oid_off;
    uint32_t oid_len;
};

/* Accepted orders: records plus an arena of their order id bytes. Both
 * arrays belong to the struct (sk_load_rec_free). */
struct sk_load_records {
    struct sk_load_rec *v;
    size_t n, cap;
    char *arena;
    size_t alen, acap;
};

/* load_records.c: appends one order (its id bytes copied into the arena);
 * 0 or SK_ENOMEM. */
int sk_load_rec_add(struct sk_load_records *rs, uint64_t uid, int64_t qty, const char *oid,
                    size_t oid_len);
/* Appends every record of src to dst; 0 or SK_ENOMEM. */
int sk_load_rec_merge(struct sk_load_records *dst, const struct sk_load_records *src);
/* Frees both arrays and zeroes rs (rs itself stays the caller's; NULL is
 * fine). */
void sk_load_rec_free(struct sk_load_records *rs);

/* load_opts.c: formats a message into err (cap bytes; either may be 0). */
void sk_load_set_err(char *err, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The --help text on f; returns the exit status (0 on stdout, 2 else). */
int sk_load_usage(FILE *f);

/* o->path with "{id}" replaced by o->activity, into out (cap bytes). */
void sk_load_path(const struct sk_load_opts *o, char *out, size_t cap);

/* load_verify.c: records a failed check (r->ok becomes 0; the first
 * SK_LOAD_MAX_VIOLATIONS messages are kept). */
void sk_load_violation(struct sk_load_result *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* The checks after a run (load.h): statuses, transport errors, order ids,
 * per-user limit, stock. contending: fresh users answered 200 or
 * sold_out (the demand). Sorts r->rec in place. */
void sk_load_verify(const struct sk_load_opts *o, struct sk_load_result *r, uint64_t contending);

#endif
