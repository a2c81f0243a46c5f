/* fixtures.h - the small pieces many test files set up the same way: a
 * Redis connection and a store that fail the test when they cannot open,
 * a fixed activity, a short pause for polling loops, a seeded xorshift, a
 * numeric INFO field, an HTTP readiness probe for the spawner, and running
 * a worker to the end of its input. */
#ifndef SK_TEST_FIXTURES_H
#define SK_TEST_FIXTURES_H
#include <hiredis.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/activity.h"
#include "engine/stock.h"
#include "orders/order_worker.h"
#include "redis/redis_conn.h"
#include "store/store.h"

/* A blocking client of url with these timeouts (not yet connected); fails
 * the test when the URL is refused. The caller frees it (sk_redis_free). */
sk_redis *sk_th_redis_new(const char *url, int connect_ms, int cmd_ms);

/* The store of spec, opened; fails the test when it cannot open. The
 * caller closes it (sk_store_close). */
sk_store *sk_th_store_open(const char *spec);

/* Calls each(arg, o) for every order of one stream entry e (an XRANGE
 * item) of key set label, read as the order worker reads it
 * (orders/order_event.h; o is valid during the call); returns how many.
 * Fails the test on an entry the worker would refuse. */
long long sk_th_entry_orders(const redisReply *e, const char *label,
                             void (*each)(void *arg, const struct sk_order *o), void *arg);

/* Calls each(arg, o) for every order the order stream of key set label
 * ("<ID>" or "<ID>.<seg>") at key holds, in stream order; returns how
 * many, and the number of entries into *entries when not NULL. each may be
 * NULL. Fails the test on a Redis error or an entry the worker would
 * refuse. */
long long sk_th_stream_orders(sk_redis *r, const char *key, const char *label,
                              void (*each)(void *arg, const struct sk_order *o), void *arg,
                              long long *entries);

/* A valid activity with fixed times (starts 2026-11-29T10:00:00Z, one
 * hour long), named "<name> <id>", with defaults applied. */
void sk_th_activity_fixed(struct sk_activity *a, uint64_t id, const char *name, int64_t stock,
                          int64_t per_user_limit);
/* The same as "flash sale <id>" with stock 100, two per buyer. */
void sk_th_activity_valid(struct sk_activity *a, uint64_t id);

/* Runs `seckill [cmd] args... --redis redis --db db` (cmd may be NULL,
 * args NULL-terminated, at most 32) as sk_th_run_seckill does: the output
 * into out, the exit code returned. */
int sk_th_run_with_db(char *out, size_t cap, const char *cmd, const char *const *args,
                      const char *redis, const char *db);

/* Preheats d (answer: preheated) and opens it (answer: ok) on r; fails
 * the test otherwise. */
void sk_th_stock_open(sk_redis *r, const struct sk_stock_def *d);

/* A fresh activity id named name, running since started_ago_ms for two
 * hours, one unit per buyer, of stock units in segments (0: the default);
 * defaults not yet applied, so the caller may add fields. */
void sk_th_activity_live(struct sk_activity *a, const char *name, int64_t stock, int segments,
                         int64_t started_ago_ms);
/* Applies a's defaults, stores it in st, preheats and opens it on r
 * (sk_th_stock_open) and marks it open in st. */
void sk_th_activity_open_in(sk_store *st, sk_redis *r, struct sk_activity *a);

/* Stock id on r: initial units (limit per buyer, maxq per order, in
 * segments, 0: one), on sale since started_ago_ms for an hour more;
 * preheated (answer preheated, initial left) and opened (answer ok). */
void sk_th_stock_new_open(sk_redis *r, uint64_t id, int64_t initial, int64_t limit, int64_t maxq,
                          int segments, int64_t started_ago_ms);

/* Sleeps ms milliseconds: the pause of a loop that polls for a state. */
void sk_th_nap_ms(long ms);

/* xorshift64*: a deterministic stream from *state, so a failing random
 * input reproduces. */
uint64_t sk_th_xorshift(uint64_t *state);

/* A mutation of fuzz input buf (n bytes, cap of room): a byte of
 * alphabet (alen bytes) drawn from *state inserted at at, when there is
 * room (nothing drawn otherwise). Returns the new length. */
size_t sk_th_insert_drawn(char *buf, size_t n, size_t cap, size_t at, const char *alphabet,
                          size_t alen, uint64_t *state);

/* The numeric field of an INFO reply ("\nfield:N"), -1 when absent or when
 * r is not a string; frees r (may be NULL). */
long long sk_th_info_num(redisReply *r, const char *field);

/* Whether GET path on 127.0.0.1:port answers 200 (a readiness probe). */
int sk_th_http_200(int port, const char *path);

struct sk_th_http;
/* The JSON of a new activity that started a minute ago and ends in an
 * hour, one unit per buyer: id, name, stock, pay_timeout_s, and segments
 * when segments > 0; into buf (cap bytes). */
void sk_th_activity_json(char *buf, size_t cap, uint64_t id, const char *name, int stock,
                         int pay_timeout_s, int segments);
/* Creates the activity of body (JSON with its id) over c as the admin,
 * then preheats and opens it; fails the test on any other answer. */
void sk_th_http_activity_open(struct sk_th_http *c, uint64_t id, const char *body);
/* Both: a fresh activity of sk_th_activity_json (no segments), open;
 * returns its id. */
uint64_t sk_th_http_activity(struct sk_th_http *c, const char *name, int stock, int pay_timeout_s);

/* A worker of o; fails the test when it cannot be made. The caller frees
 * it (sk_worker_free). */
sk_worker *sk_th_worker_new(const struct sk_worker_opts *o);

/* Runs a worker of o (o->once set by the caller) to its end on this
 * thread and frees it; fails the test when it ends with an error. Returns
 * its counters. */
struct sk_worker_stats sk_th_worker_run(const struct sk_worker_opts *o);

/* A worker of o running on a new thread *t, as serve embeds it. The
 * caller stops it (sk_worker_stop), joins *t and frees it. */
sk_worker *sk_th_worker_thread(const struct sk_worker_opts *o, pthread_t *t);

/* What replies an async command callback saw: how many, how many were
 * NULL (no answer) or errors, the last integer, and the text of the last
 * non-NULL reply ("" when it had none). */
struct sk_th_answers {
    int n, nulls, errors;
    long long last_int;
    char last[64];
};
/* An sk_aredis callback that records into data (a struct sk_th_answers). */
void sk_th_on_reply(void *data, redisReply *rep);

/* A listening socket on 127.0.0.1 that never accepts: the kernel
 * completes a client's handshake into its backlog and nothing answers,
 * as from a server whose process hangs or a host behind a firewall.
 * *port is its port; the caller closes the returned fd. */
int sk_th_blackhole(int *port);

/* One buyer's purchase of qty units of activity aid through
 * sk_th_stock_buy (serve_buy.h: the purchase_batch call serve makes, or
 * for a segmented activity serve itself over HTTP; no Idempotency-Key, no
 * global rate limit); the answer in *res, the stock after in *remaining
 * (may be NULL). Returns sk_th_stock_buy's code. */
int sk_th_buy(sk_redis *r, uint64_t aid, uint64_t user_id, int64_t qty, struct sk_admission *res,
              int64_t *remaining);

#endif
