/* reload.h - SIGHUP: the settings `seckill serve` changes while it runs,
 * without a restart and without dropping a connection.
 *
 * Who reads what: the supervisor (or, in a lone process, a thread of its
 * own) re-reads the config file and the files it names (secrets, the JWT
 * key set) and publishes the result in a reload area: shared memory made
 * before the fork, a generation number, the new configuration and the key
 * set's text. Every process checks the generation once per loop pass (one
 * atomic load), copies what changed and applies the live settings listed
 * in sk_reload_fields: no file is read and nothing waits on an event loop.
 * A process then stores the generation it applied in its acknowledgement
 * slot, so the supervisor knows when the whole node runs the new
 * settings.
 *
 * Live (applied at once): log_level, the rate limits, trusted_proxies,
 * admin_token, the HMAC secrets and key ids and their TTL bound, the JWT
 * key set, issuer, audience, user claim and leeway, max_connections (open
 * connections stay even above a lower cap), db_poll_wait_ms, poll_rate_max,
 * batches_in_flight. Every other
 * setting needs a restart: the log line of a reload names each one that
 * changed. */
#ifndef SK_RELOAD_H
#define SK_RELOAD_H
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "http/auth_jwt.h"
#include "http/config.h"

/* What a live setting needs beyond the copy into the running config. */
enum sk_reload_hook { SK_RELOAD_COPY, SK_RELOAD_LOG_LEVEL, SK_RELOAD_CONNS, SK_RELOAD_JWKS };

/* One setting of struct sk_config: its key, its bytes, and whether it is
 * applied live. Every field of the struct is in the table (a unit test
 * checks it covers the struct), so a new option is live only when it says
 * so here. */
struct sk_reload_field {
    const char *key;
    size_t off, len;
    int live;
    enum sk_reload_hook hook;
};
extern const struct sk_reload_field sk_reload_fields[];
extern const size_t sk_reload_nfields;

#define SK_RELOAD_SLOTS 258 /* HTTP slots (at most 256), the worker's, a lone process */

struct sk_reload_area {
    _Atomic uint64_t gen; /* bumped after each publish; 0: nothing published */
    /* process-shared: the publisher and the readers of one publication
     * (a reader takes it once per reload, never per loop pass) */
    pthread_mutex_t lock;
    struct sk_config cfg;
    size_t jwks_len;
    char jwks[SK_JWKS_MAX];
    _Atomic uint64_t applied[SK_RELOAD_SLOTS]; /* the generation each process applied */
};

/* Maps an area shared with the children forked later (it lives as long
 * as the process). 0, or SK_EIO. */
int sk_reload_area_new(struct sk_reload_area **out);

/* The area of this process (set once, before the fork; NULL: no reload). */
void sk_reload_set_area(struct sk_reload_area *a);
struct sk_reload_area *sk_reload_area_get(void);

/* Publishes a configuration and a key set text (jwks_len bytes, may be 0).
 * One writer: the supervisor or the lone process's reload thread. */
void sk_reload_publish(struct sk_reload_area *a, const struct sk_config *cfg, const char *jwks,
                       size_t jwks_len);

/* Copies the last publication (a consistent one) into cfg and jwks
 * (SK_JWKS_MAX bytes); returns its generation (0: none). */
uint64_t sk_reload_read(struct sk_reload_area *a, struct sk_config *cfg, char *jwks,
                        size_t *jwks_len);

/* Names of the settings that differ between old and new, comma-separated
 * into live and fixed (each cap bytes, terminated): live ones apply now,
 * fixed ones need a restart. key_set_changed: the key set's text changed
 * too (listed as jwks_file). Returns the number of differences. */
int sk_reload_diff(const struct sk_config *old, const struct sk_config *new_cfg,
                   int key_set_changed, char *live, char *fixed, size_t cap);

/* Copies the live settings of src into dst (fixed ones stay). */
void sk_reload_copy_live(struct sk_config *dst, const struct sk_config *src);

/* Applies the live settings of src to the running configuration dst:
 * copies them and runs their hooks: the log level, and, when not NULL,
 * the connection cap of conns when it changed. */
struct sk_conns;
void sk_reload_apply(struct sk_config *dst, const struct sk_config *src, struct sk_conns *conns);

/* Once per loop pass of an HTTP process (and once before it accepts,
 * started 0: no connection cap yet): applies a new publication, parses its
 * key set when auth = jwt, acknowledges it. 0, or -1 when a key set could
 * not be parsed (the previous one stays). */
struct sk_app;
int sk_reload_tick_app(struct sk_app *app, int started);

#endif
