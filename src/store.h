/* store.h - the durable store of activity definitions (and, later, orders).
 *
 * One interface, several backends chosen by the spec string: "sqlite:PATH"
 * today (store_sqlite.c); "postgres://..." is refused with SK_EINVAL until
 * its backend exists. The handle is opaque so a backend can be added
 * without changing callers.
 *
 * Calls return 0 or a negative SK_E* code; the detail of the last failure
 * is sk_store_errstr(st). A handle is used by one thread at a time. */
#ifndef SK_STORE_H
#define SK_STORE_H
#include <stddef.h>
#include <stdint.h>

#include "activity.h"

typedef struct sk_store sk_store;

/* Opens (creating when needed) the store named by spec and brings its schema
 * up to date (migrations run here, each in its own transaction). On failure
 * *out is NULL and err (cap bytes) says why: SK_EINVAL for a spec that is
 * malformed or not supported, SK_EDB when the database cannot be opened or
 * migrated (including a schema newer than this binary), SK_ENOMEM.
 * The caller owns *out and releases it with sk_store_close. */
int sk_store_open(sk_store **out, const char *spec, char *err, size_t cap);
/* Closes and frees; NULL is fine. */
void sk_store_close(sk_store *st);

/* Text of the last failure on st ("" after success). Owned by st, valid
 * until the next call on st. */
const char *sk_store_errstr(const sk_store *st);

/* Schema version now in the database (the number of migrations applied). */
int sk_store_schema_version(sk_store *st, int *version);

/* Inserts a validated definition (sk_activity_validate runs again here).
 * DB stock starts equal to a->stock; a->stock_db is ignored. An empty
 * a->state means "created". SK_EEXIST when the id is taken (nothing
 * written), SK_EINVAL when a is invalid, SK_EDB otherwise. */
int sk_store_activity_insert(sk_store *st, const struct sk_activity *a);

/* Reads one activity into *out (caller's memory). SK_ENOTFOUND if absent. */
int sk_store_activity_get(sk_store *st, uint64_t id, struct sk_activity *out);

/* Every activity, ordered by id, as an array of *n entries allocated here:
 * the caller frees *out with free() (it is NULL when *n is 0). */
int sk_store_activity_list(sk_store *st, struct sk_activity **out, size_t *n);

/* Sets the stored state ("created"|"preheated"|"open"|"closed").
 * SK_EINVAL for another word, SK_ENOTFOUND when the id is absent. */
int sk_store_activity_set_state(sk_store *st, uint64_t id, const char *state);

/* Deletes one activity. SK_ENOTFOUND when the id is absent. */
int sk_store_activity_delete(sk_store *st, uint64_t id);

#endif
