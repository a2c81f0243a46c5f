/* store.h - the durable store: activity definitions, orders, audit rows.
 *
 * One interface, several databases chosen by the spec string:
 * "sqlite:PATH", "postgres://..." / "postgresql://..." (libpq) and
 * "mysql://..." / "mariadb://..." (MariaDB Connector/C; the URL:
 * store/mysql_url.h). The handle is opaque: every function is written
 * once, in the store's engine, over a driver per database (store_int.h);
 * a new function here needs its statement in store_sql.c and its code in
 * the engine, no driver change.
 *
 * Calls return 0 or a negative SK_E* code; the detail of the last failure
 * is sk_store_errstr(st). A handle is used by one thread at a time. */
#ifndef SK_STORE_H
#define SK_STORE_H
#include <stddef.h>
#include <stdint.h>

#include "engine/activity.h"

typedef struct sk_store sk_store;

/* The spec forms, for usage and error text. */
#define SK_STORE_SPECS "sqlite:PATH, postgres://... or mysql://..."

/* Opens (creating when needed) the store named by spec and brings its schema
 * up to date (migrations run here, each in its own transaction). On failure
 * *out is NULL and err (cap bytes) says why: SK_EINVAL for a spec that is
 * malformed or not supported, SK_EDB when the database cannot be opened or
 * migrated (including a schema newer than this binary), SK_ENOMEM.
 * The caller owns *out and releases it with sk_store_close. */
int sk_store_open(sk_store **out, const char *spec, char *err, size_t cap);

/* As sk_store_open, except that a server store (PostgreSQL, MariaDB /
 * MySQL) that cannot be connected to now is opened anyway, unconnected:
 * every call then fails as after a lost connection (SK_EDB) and tries to
 * connect again, and the first one that connects brings the schema up to
 * date before it does its own work. For a process that must start while
 * its database is down (serve: purchases need Redis only). Returns 0 with
 * err empty when connected, 0 with err saying why when not (yet), or a
 * code as sk_store_open for what waiting cannot cure (a malformed spec, a
 * SQLite file that cannot be opened, a failed migration). Ownership as
 * sk_store_open. */
int sk_store_open_waiting(sk_store **out, const char *spec, char *err, size_t cap);
/* Closes and frees; NULL is fine. */
void sk_store_close(sk_store *st);

/* Text of the last failure on st ("" after success). Owned by st, valid
 * until the next call on st. */
const char *sk_store_errstr(const sk_store *st);

/* Schema version now in the database (the number of migrations applied). */
int sk_store_schema_version(sk_store *st, int *version);

/* The store's identity: SK_STORE_IDENTITY_LEN lowercase hex digits drawn at
 * random once per database (migration 9) and never changed; a copy of the
 * database (a backup restored) keeps it. Preheat stamps it into an
 * activity's Redis state and the nodes of another store refuse that
 * activity (docs/design.md, "The store's identity"). Into buf (cap bytes,
 * at least SK_STORE_IDENTITY_MAX). Read from the database once per handle,
 * then from the handle: cheap to call again. 0; SK_EINVAL when cap is too
 * small; SK_EDB when it cannot be read (the database unreachable). */
#define SK_STORE_IDENTITY_LEN 16
#define SK_STORE_IDENTITY_MAX (SK_STORE_IDENTITY_LEN + 1)
int sk_store_identity(sk_store *st, char *buf, size_t cap);

/* Inserts a validated definition (sk_activity_validate runs again here).
 * DB stock starts equal to a->stock; a->stock_db is ignored. An empty
 * a->state means "created". SK_EEXIST when the id is taken, or was
 * taken by a sale deleted whose orders are still in the database (nothing
 * written; the errstr says which), SK_EINVAL when a is invalid, SK_EDB
 * otherwise. */
int sk_store_activity_insert(sk_store *st, const struct sk_activity *a);

/* Reads one activity into *out (caller's memory). SK_ENOTFOUND if absent. */
int sk_store_activity_get(sk_store *st, uint64_t id, struct sk_activity *out);

/* Every activity, ordered by id, as an array of *n entries allocated here:
 * the caller frees *out with free() (it is NULL when *n is 0). */
int sk_store_activity_list(sk_store *st, struct sk_activity **out, size_t *n);

/* Sets the stored state ("created"|"preheated"|"open"|"closed").
 * SK_EINVAL for another word, SK_ENOTFOUND when the id is absent. */
int sk_store_activity_set_state(sk_store *st, uint64_t id, const char *state);

/* Deletes one activity, and its marks (sk_store_marks_list). SK_ENOTFOUND
 * when the id is absent. */
int sk_store_activity_delete(sk_store *st, uint64_t id);

/* ---- Orders --------------------------------------------------------
 *
 * An order row is the durable copy of one admitted purchase (one entry of
 * the activity's Redis stream). Its id is the admission's order id
 * "<activity>-<stream entry id>", the primary key: persisting a re-delivered
 * stream entry again is a counted no-op, never a second row.
 *
 * Status moves only created -> paid or created -> cancelled, each by a
 * conditional update, so of a racing pay and cancel exactly one wins. */

#define SK_STORE_ORDER_ID_MAX 64  /* == SK_ORDER_ID_MAX of stock.h */
#define SK_STORE_STREAM_ID_MAX 48 /* "<ms>-<seq>", two 20-digit numbers */
#define SK_STORE_AUDIT_KIND_MAX 64
#define SK_STORE_AUDIT_DETAIL_MAX 512
#define SK_STORE_IDEM_KEY_MAX 65 /* an Idempotency-Key: 1..64 visible ASCII bytes */

enum sk_order_status {
    SK_ORDER_CREATED = 0,
    SK_ORDER_PAID = 1,
    SK_ORDER_CANCELLED = 2,
    SK_ORDER_NSTATUS = 3
};

/* "created" | "paid" | "cancelled" (static), "?" for another value. */
static inline const char *sk_order_status_name(int status)
{
    return status == SK_ORDER_CREATED     ? "created"
           : status == SK_ORDER_PAID      ? "paid"
           : status == SK_ORDER_CANCELLED ? "cancelled"
                                          : "?";
}

struct sk_order {
    char order_id[SK_STORE_ORDER_ID_MAX]; /* engine/order_id.h: "<label>-<stream id>[-<branch>]" */
    char stream_id[SK_STORE_STREAM_ID_MAX]; /* the Redis stream entry id */
    uint64_t activity_id;
    uint64_t user_id;        /* 1..UINT64_MAX; SQL has no unsigned 64-bit type, so
                                backends store the int64 with the same bits */
    int64_t quantity;        /* >= 1 */
    int status;              /* enum sk_order_status */
    int64_t created_ms;      /* admission time (the stream id's ms part) */
    int64_t pay_deadline_ms; /* created_ms + the activity's pay_timeout_s */
    int64_t paid_ms;         /* 0 until paid */
    int64_t cancelled_ms;    /* 0 until cancelled */
    int64_t released_ms;     /* 0 until the Redis release of a cancelled order is done */
    int64_t adm_seq;         /* the admission's number in its key set (the stream entry's
                                field n, docs/recovery.md); 0: none. Persisting keeps the
                                highest per key set (sk_store_marks_list); not stored per
                                order, reads give 0 */
    char idem_key[SK_STORE_IDEM_KEY_MAX]; /* the purchase's Idempotency-Key, "" none
                                             (migration 8): a recovery puts its record
                                             back with the order (docs/recovery.md) */
};

/* What one sk_store_orders_persist call did. */
struct sk_persist_result {
    size_t inserted;         /* new order rows */
    size_t duplicates;       /* already present (re-delivery): nothing written */
    size_t stock_failures;   /* inserted orders whose conditional DB stock
                                update matched no row (DB stock < quantity, or
                                the activity is not in the DB) */
    int64_t units;           /* units of the inserted orders */
    int64_t units_unstocked; /* units of the stock_failures orders */
    size_t conflicts;        /* order ids already present for another activity, user or
                                quantity: a different admission under the same id (two
                                histories that diverged); not inserted, recorded in
                                order_conflicts (migration 8), never a silent duplicate */
};

/* Persists n orders (n may be 0) in ONE transaction. Reads order_id,
 * stream_id, activity_id, user_id, quantity, created_ms, adm_seq and
 * idem_key of each;
 * status, deadlines and the other times are set here (status created,
 * pay_deadline_ms = created_ms + pay_timeout_s * 1000 of the activity, or
 * of SK_ACTIVITY_PAY_TIMEOUT_DEFAULT when the activity is not in the DB).
 *
 * For each order: INSERT (an existing order_id is a duplicate: skipped and
 * counted, unless the row holds another activity, user or quantity: then a
 * conflict, counted and recorded in the same transaction); for each newly
 * inserted one:
 *   UPDATE activities SET stock = stock - q WHERE id = ? AND stock >= q.
 * When that condition fails the order row IS still inserted - Redis, the
 * authority on admission, accepted it and the buyer holds an order id - the
 * failure is counted in *res, logged (warn), and recorded in the store
 * (stock_failures, see sk_store_orders_count) in the same transaction, so
 * reconcile surfaces the DB stock drift. Then COMMIT.
 *
 * All or nothing: on any error the transaction is rolled back and nothing
 * of the batch is stored. Returns 0; SK_EINVAL when an order is malformed
 * (empty/too long id, quantity < 1, activity 0) - nothing written;
 * SK_ETIMEDOUT when the database stayed locked past the busy timeout
 * (retry later); SK_EDB otherwise. res may be NULL. */
int sk_store_orders_persist(sk_store *st, const struct sk_order *orders, size_t n,
                            struct sk_persist_result *res);

/* Reads one order into *out (caller's memory). SK_ENOTFOUND if absent. */
int sk_store_order_get(sk_store *st, const char *order_id, struct sk_order *out);

/* Marks a created order paid at now_ms (conditional on status created).
 * Returns 0 when the order is paid (now, or already before: idempotent,
 * paid_ms keeps the first payment time); SK_ESTATE when it is cancelled
 * (the payment is refused); SK_ENOTFOUND. *status_out (may be NULL) is the
 * status after the call. */
int sk_store_order_pay(sk_store *st, const char *order_id, int64_t now_ms, int *status_out);
/* As sk_store_order_pay, with the payment provider's reference of this
 * payment (NULL or "": none; printable ASCII, at most
 * SK_STORE_PAY_REF_MAX-1 bytes, else SK_EINVAL), kept in the order.paid
 * event. Refused (SK_ESTATE, one order.payment_refused event per order
 * and reference: the shop refunds it): a payment of a cancelled order,
 * and a payment whose reference differs from the one that paid the order
 * (*status_out paid). The same reference again is the same payment: 0. */
int sk_store_order_pay_ref(sk_store *st, const char *order_id, int64_t now_ms, const char *pay_ref,
                           int *status_out);

/* Cancels a created order at now_ms (conditional on status created). In
 * the same transaction the order's units go back to its activity's DB
 * stock (capped at the initial stock): DB stock stays
 * stock_initial - units of the orders that are not cancelled, and is never
 * below what Redis may sell again once the units are released there (a
 * resold unit must find its DB stock, or its conditional update fails).
 * The Redis release follows the DB cancel (sweeper.h); migration 3's
 * released_ms records that it happened.
 * *prev_status (may be NULL) is the status the order had:
 *   created   -> returns 0: THIS call cancelled it (the caller, and only
 *                it, may release the units in Redis);
 *   cancelled -> returns 0: already cancelled before, nothing changed;
 *   paid      -> returns SK_ESTATE: a payment won, nothing changed.
 * SK_ENOTFOUND when absent. Of a racing pay and cancel exactly one wins. */
int sk_store_order_cancel(sk_store *st, const char *order_id, int64_t now_ms, int *prev_status);

/* Up to limit orders still created whose pay_deadline_ms < now_ms, oldest
 * deadline first, into out (caller's array of limit entries); *n is the
 * number written. */
int sk_store_orders_expired(sk_store *st, int64_t now_ms, size_t limit, struct sk_order *out,
                            size_t *n);

/* In the same transaction as the orders, the highest adm_seq of each key
 * set label ("<activity>" or "<activity>.<segment>", the order id's
 * prefix) and branch (its suffix, "" for an id without one) is kept in the
 * marks (migrations 6 and 8): a Redis whose admission count is below it, or
 * whose ledger lacks the mark's order, has gone back in time or followed
 * another history (docs/recovery.md). */

/* Orders of one activity, ordered by order_id, starting after `after`
 * (NULL or "" = from the start), up to limit, into out (caller's array);
 * *n written. For reconcile (page until *n < limit). */
int sk_store_orders_list(sk_store *st, uint64_t activity_id, const char *after, size_t limit,
                         struct sk_order *out, size_t *n);

struct sk_order_counts {
    int64_t orders[SK_ORDER_NSTATUS]; /* rows by status */
    int64_t units[SK_ORDER_NSTATUS];  /* sum of quantity by status */
    int64_t stock_failures;           /* recorded failed conditional stock updates */
    int64_t stock_failure_units;      /* their units */
    int64_t conflicts;                /* recorded order id conflicts (sk_persist_result) */
};

/* Counts of one activity (all zero when it has no orders). */
int sk_store_orders_count(sk_store *st, uint64_t activity_id, struct sk_order_counts *out);

/* Appends one audit row (reconcile repairs, operator actions). kind: a short
 * word ("repair_db_stock", ...), at most SK_STORE_AUDIT_KIND_MAX-1 bytes;
 * detail: free text, truncated to SK_STORE_AUDIT_DETAIL_MAX-1 bytes. */
int sk_store_audit_add(sk_store *st, int64_t at_ms, uint64_t activity_id, const char *kind,
                       const char *detail);

struct sk_audit {
    int64_t id, at_ms;
    uint64_t activity_id;
    char kind[SK_STORE_AUDIT_KIND_MAX];
    char detail[SK_STORE_AUDIT_DETAIL_MAX];
};

/* Audit rows of one activity (activity_id 0: all), ordered by id, as an
 * array of *n entries allocated here: the caller frees *out with free()
 * (NULL when *n is 0). */
int sk_store_audit_list(sk_store *st, uint64_t activity_id, struct sk_audit **out, size_t *n);

/* Sets the DB stock of an activity (reconcile repair). SK_EINVAL when
 * stock < 0 or above the initial stock, SK_ENOTFOUND when absent. */
int sk_store_activity_set_db_stock(sk_store *st, uint64_t id, int64_t stock);

/* Sets the waiting room's pace (passes per second, 1..
 * SK_ACTIVITY_PASS_RATE_MAX) of an activity that has one
 * (docs/waiting-room.md). SK_EINVAL out of range, SK_ENOTFOUND when the id
 * is absent or the activity has no waiting room. */
int sk_store_activity_set_pass_rate(sk_store *st, uint64_t id, int64_t rate);

/* Every activity id, ascending, as an array of *n ids allocated here: the
 * caller frees *out with free() (NULL when *n is 0). */
int sk_store_activity_ids(sk_store *st, uint64_t **out, size_t *n);

/* ---- Pre-registration and the draw (docs/fairness.md,
 * migration 10) ------------------------------------------------------------
 *
 * Redis is the live record of who registered (the admission checks it);
 * the store is its durable copy: the register route writes each buyer
 * here before it answers, the order worker copies what only Redis holds
 * and puts back what Redis lost. */

struct sk_registration {
    uint64_t user_id;
    int64_t draw_place; /* place in the draw's order, 1 = first; 0 before the draw */
    int64_t created_ms;
};

/* Registers users[0..n) (n may be 0) for activity id at at_ms, in one
 * transaction; the ones already registered are left as they are. *added
 * (may be NULL): how many were new. */
int sk_store_registrations_add(sk_store *st, uint64_t id, const uint64_t *users, size_t n,
                               int64_t at_ms, size_t *added);
/* How many registered for activity id (0 when none, or no such activity). */
int sk_store_registrations_count(sk_store *st, uint64_t id, int64_t *count);
/* The registrations of activity id, by user id ascending (as unsigned), as
 * an array of *n allocated here: the caller frees *out with free() (NULL
 * when *n is 0). */
int sk_store_registrations_list(sk_store *st, uint64_t id, struct sk_registration **out, size_t *n);
/* Records the draw of activity id made at drawn_ms: order[i] (a registrant)
 * has place i + 1; the activity's drawn_ms and draw_n are set. One
 * transaction, once: SK_EEXIST when the activity was drawn before (nothing
 * written), SK_ESTATE when an id of order is not a registrant (nothing
 * written), SK_ENOTFOUND when the activity is absent. */
int sk_store_draw_record(sk_store *st, uint64_t id, const uint64_t *order, size_t n,
                         int64_t drawn_ms);
/* Sets what changes of the fairness definition while a sale runs: the
 * waiting room's emergency controls (SK_WR_* bits) and the draw's waves
 * ("wave:from:to:box_start_ms:box_end_ms", "" none: sk_activity.draw_state).
 * SK_EINVAL for values of another shape, SK_ENOTFOUND. */
int sk_store_activity_set_fair(sk_store *st, uint64_t id, int64_t wr_control,
                               const char *draw_state);

/* ---- Payment timeout and reconciliation (sweeper.h, reconcile.h) ------
 *
 * A cancelled order owes one Redis release (release.lua). The release runs
 * after the DB cancel commits, so a crash in between leaves a cancelled
 * order whose units are still held in Redis. released_ms (migration 3,
 * NULL until set) records that the release is known to be done; the orders
 * still owing one are found through a partial index that holds only them,
 * not by scanning every cancelled order. */

/* Records that the Redis release of a cancelled order is done (at now_ms;
 * an earlier mark is kept). 0 when marked (now or before); SK_ESTATE when
 * the order is not cancelled; SK_ENOTFOUND. */
int sk_store_order_mark_released(sk_store *st, const char *order_id, int64_t now_ms);

/* Up to limit cancelled orders whose release is not marked, of every
 * activity, ordered by order_id, starting after `after` (NULL or "" = from
 * the start), into out (caller's array); *n written. */
int sk_store_orders_unreleased(sk_store *st, const char *after, size_t limit, struct sk_order *out,
                               size_t *n);

/* One consistent read of the DB stock of an activity and what it should be:
 *   *expected = stock_initial - sum(quantity of its orders not cancelled)
 * (may be negative: the DB holds more units than the initial stock).
 * SK_ENOTFOUND when the activity is absent. */
int sk_store_db_stock_check(sk_store *st, uint64_t id, int64_t *stock, int64_t *expected);

/* Sets the DB stock to the expected value above, computed and written in
 * one transaction (concurrent persists and cancels wait for it or see its
 * result), with one audit row "repair_db_stock" (before/after) when it
 * changed. *before / *after: the stock before and after (equal when
 * nothing changed). SK_ESTATE when expected is below 0 or above the
 * initial stock (nothing written), SK_ENOTFOUND. */
int sk_store_db_stock_repair(sk_store *st, uint64_t id, int64_t now_ms, int64_t *before,
                             int64_t *after);

/* Re-inserts an order Redis admitted that the DB lost (reconcile repair):
 * o's order_id, stream_id, activity_id, user_id, quantity, created_ms and
 * status (SK_ORDER_CREATED, or SK_ORDER_CANCELLED for an order already
 * released in Redis: then cancelled_ms and released_ms are now_ms) are
 * stored; pay_deadline_ms as sk_store_orders_persist sets it. The DB stock
 * is NOT touched (the caller recomputes it with sk_store_db_stock_repair).
 * In the same transaction one audit row "repair_restore_order" with
 * audit_detail. SK_EEXIST when the order exists (nothing written),
 * SK_EINVAL for a malformed order. */
int sk_store_order_restore(sk_store *st, const struct sk_order *o, int64_t now_ms,
                           const char *audit_detail);

/* ---- The outbox (migration 11, docs/integration.md) -------------------
 *
 * Every change of an order or a sale writes its event in the same
 * transaction as the change: a change that commits has its event, one
 * that does not has none. An event's subject is its order id, or
 * "activity-<id>" for a sale's own events; seq counts the subject's
 * events from 1 (a subject's events in the order they happened), and the
 * pair is the event's stable id, "<subject>:<seq>". Types:
 *   order.created           persisted (seq 1)
 *   order.paid              created -> paid
 *   order.cancelled         created -> cancelled before its pay deadline
 *   order.released          created -> cancelled at or past its deadline
 *   order.payment_refused   a payment of a cancelled order (refund it);
 *                           once per order and payment reference
 *   activity.opened / activity.closed   the sale's state set so
 *   activity.sold_out       a persist took the DB stock to 0
 *   reconcile.drift         reconcile found drift that is news
 *                           (orders/reconcile.h: sk_reconcile_drift_event) */

#define SK_STORE_EVENT_TYPE_MAX 32
#define SK_STORE_SUBJECT_MAX 64
#define SK_STORE_PAY_REF_MAX 128
#define SK_STORE_PAYLOAD_MAX 1024
#define SK_EVENT_SCHEMA 1 /* the payload's "v" */

/* The order.created events of a persist are one outbox row per batch
 * and activity (up to SK_STORE_BATCH_ROW_MAX orders: its `batch` column
 * lists their ids, docs/integration.md), read back as one event per
 * order: a position in the outbox is (row, sub), sub the event's place
 * in its row (0 for a row of one event). */
#define SK_STORE_BATCH_ROW_MAX 128
#define SK_EVENT_ROW_END INT32_MAX /* a position's sub: the row's every event */

struct sk_event {
    int64_t id;  /* the outbox row: increasing in insert order (not commit order) */
    int32_t sub; /* its place in the row (a batch row's order), from 0 */
    int last;    /* the row's last event: a cursor may pass the row */
    char subject[SK_STORE_SUBJECT_MAX];
    int64_t seq;
    char type[SK_STORE_EVENT_TYPE_MAX];
    uint64_t activity_id;
    char order_id[SK_STORE_ORDER_ID_MAX]; /* "" for a sale's event */
    int64_t created_ms;
    char payload[SK_STORE_PAYLOAD_MAX]; /* JSON object, "v": SK_EVENT_SCHEMA */
};

/* Up to limit events after position (after_id, after_sub), oldest
 * first, into out (the caller's array); *n written (fewer than limit:
 * the outbox's end was reached). after_sub SK_EVENT_ROW_END: every
 * event of row after_id is behind; k: its events up to sub k. */
int sk_store_events_list_at(sk_store *st, int64_t after_id, int32_t after_sub, size_t limit,
                            struct sk_event *out, size_t *n);
/* The same after every event of row after_id. */
int sk_store_events_list(sk_store *st, int64_t after_id, size_t limit, struct sk_event *out,
                         size_t *n);

/* The highest row id of the outbox now (0: empty): every row below it
 * was inserted before this call (orders/webhook_settle.h). */
int sk_store_events_max(sk_store *st, int64_t *max_row);

/* A sale's event written only when it is news (reconcile.drift): in one
 * transaction, with the activity's row locked (when the database holds
 * it: two writers take turns), due(arg, last, last_ms) is asked with the
 * payload of the activity's latest event of this type (NULL: none) and
 * when it was written; when it answers 1 the event is written with
 * payload (a JSON object, < SK_STORE_PAYLOAD_MAX bytes) and *written is
 * 1. 0, or the store's code (nothing written). */
typedef int sk_store_event_due(void *arg, const char *last, int64_t last_ms);
int sk_store_event_if(sk_store *st, const char *type, uint64_t aid, int64_t now_ms,
                      const char *payload, sk_store_event_due *due, void *arg, int *written);

/* The webhook dispatcher's state (orders/webhooks.h): endpoint's cursor,
 * the row id up to which every event was delivered or dead-lettered
 * (created at 0 when new), with its epoch (the count of its rewinds;
 * epoch may be NULL); moving it forward (never back), within the epoch
 * read: a rewind that came between wins, the move does nothing; a dead
 * letter (after attempts, the last HTTP status or 0), which moves it too. */
int sk_store_webhook_cursor(sk_store *st, const char *endpoint, int64_t now_ms, int64_t *row,
                            int64_t *epoch);
int sk_store_webhook_advance(sk_store *st, const char *endpoint, int64_t row, int64_t epoch,
                             int64_t now_ms);
/* The dead letter of event e; the cursor moves past its row when e is
 * the row's last (else the dispatcher's own position goes on within it). */
int sk_store_webhook_dead(sk_store *st, const char *endpoint, const struct sk_event *e,
                          int64_t epoch, int64_t now_ms, int64_t attempts, int last_status);
/* The cursor of an endpoint of the admin API (made by its add): 0, or
 * SK_ENOTFOUND once it was removed (never made again here). */
int sk_store_webhook_cursor_find(sk_store *st, const char *endpoint, int64_t *row, int64_t *epoch);
/* Replay: endpoint's cursor set back before the first event written at
 * or after since_ms (never forward), its epoch bumped. *row the cursor
 * after, *events how many events it will deliver again (0: nothing was
 * behind it). SK_ENOTFOUND when the endpoint has no cursor (it never
 * ran, or no such endpoint). */
int sk_store_webhook_rewind(sk_store *st, const char *endpoint, int64_t since_ms, int64_t now_ms,
                            int64_t *row, int64_t *events);

/* ---- Webhook endpoints per activity (migration 13) ---------------------
 *
 * Added by the admin API (docs/integration.md); the dispatcher
 * (orders/webhooks.h) delivers each the events of its activity that pass
 * its filter, from its cursor "<activity>/<name>", made at the outbox's
 * end when the endpoint is added and dropped with it. */

#define SK_STORE_WH_NAME_MAX 33    /* 1..32 of [A-Za-z0-9_.-] */
#define SK_STORE_WH_URL_MAX 512    /* http:// or https:// */
#define SK_STORE_WH_EVENTS_MAX 256 /* comma-separated types or prefixes; "" all */
#define SK_STORE_WH_SECRET_MAX 100 /* whsec_... */
#define SK_STORE_WH_PER_ACTIVITY 8 /* endpoints an activity may have */
#define SK_STORE_WH_KEY_MAX 64     /* "<activity>/<name>" */

struct sk_store_webhook {
    int64_t id; /* the row: a removed endpoint added again is another one */
    uint64_t activity_id;
    char name[SK_STORE_WH_NAME_MAX];
    char url[SK_STORE_WH_URL_MAX];
    char events[SK_STORE_WH_EVENTS_MAX];
    char secret[SK_STORE_WH_SECRET_MAX];
    char secret_prev[SK_STORE_WH_SECRET_MAX]; /* "" none */
    int64_t prev_until_ms;                    /* secret_prev signs until then */
    int paused;
    int64_t created_ms, updated_ms;
};

/* The cursor key of endpoint name of activity aid into out. */
void sk_store_webhook_key(char out[SK_STORE_WH_KEY_MAX], uint64_t aid, const char *name);
/* Adds w (id, created/updated set from now_ms) with its cursor at the
 * outbox's end: 0, SK_ENOTFOUND (no such activity), SK_EEXIST (the
 * activity has an endpoint of that name), SK_ESTATE (it has
 * SK_STORE_WH_PER_ACTIVITY already). Nothing changed on a failure. */
int sk_store_webhook_add(sk_store *st, struct sk_store_webhook *w, int64_t now_ms);
/* Every endpoint of activity aid (0: of every activity), by activity and
 * name, into a new array *out the caller frees (NULL when none). */
int sk_store_webhook_list(sk_store *st, uint64_t aid, struct sk_store_webhook **out, size_t *n);
/* One endpoint by activity and name: 0 or SK_ENOTFOUND. */
int sk_store_webhook_get(sk_store *st, uint64_t aid, const char *name,
                         struct sk_store_webhook *out);
/* Removes it and its cursor: 0 or SK_ENOTFOUND. */
int sk_store_webhook_remove(sk_store *st, uint64_t aid, const char *name);
/* A rotation: secret becomes the new one, the old one signs too until
 * prev_until_ms. 0 or SK_ENOTFOUND. */
int sk_store_webhook_rotate(sk_store *st, uint64_t aid, const char *name, const char *secret,
                            int64_t prev_until_ms, int64_t now_ms);
/* Paused (1) or resumed (0): 0 or SK_ENOTFOUND. */
int sk_store_webhook_pause(sk_store *st, uint64_t aid, const char *name, int paused,
                           int64_t now_ms);

/* ---- The rollback guard's watermark (docs/recovery.md, migrations 6, 8) --
 *
 * Per key set label and branch (engine/order_id.h), the highest admission
 * number (stream entry field n) of a persisted order, kept by
 * sk_store_orders_persist. Admission numbers of two branches that diverged
 * overlap, so each branch has its own mark: a Redis must hold the mark's
 * order of every branch, or it lacks persisted orders. */

#define SK_STORE_LABEL_MAX 32  /* == SK_LABEL_MAX of engine/keys.h */
#define SK_STORE_BRANCH_MAX 16 /* > SK_OID_BRANCH_LEN of engine/order_id.h */

struct sk_mark {
    char label[SK_STORE_LABEL_MAX];   /* "<activity>" or "<activity>.<segment>" */
    char branch[SK_STORE_BRANCH_MAX]; /* the orders' branch, "" for ids without one */
    uint64_t activity_id;
    int64_t adm;                          /* highest admission number persisted */
    int64_t updated_ms;                   /* when it last grew */
    char order_id[SK_STORE_ORDER_ID_MAX]; /* the order of that number: a Redis whose
                                             ledger lacks it lost persisted orders */
};

/* The marks of one activity (activity_id 0: all), ordered by label and
 * branch (one row per pair), as an
 * array of *n entries allocated here: the caller frees *out with free()
 * (NULL when *n is 0). */
int sk_store_marks_list(sk_store *st, uint64_t activity_id, struct sk_mark **out, size_t *n);

#endif
