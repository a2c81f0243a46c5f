/* store.c - the store's handle and the engine's statement runner
 * (store_int.h): picking the driver from the spec, opening (migrations
 * here, or owed to the first call that connects), the error text, the
 * start of every call, running a statement of store_sql.c by id (one
 * row of parameters, or many rows cut into the statements the driver
 * takes), and transactions.
 *
 * "sqlite:PATH" -> store_sqlite.c, "postgres://..." or "postgresql://..."
 * -> store_pg.c, "mysql://..." or "mariadb://..." -> store_mysql.c. The
 * spec is echoed in messages only when it cannot hold a password (a
 * server URL may). */
#include "store/store_int.h"

#include <inttypes.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/vec.h"
#include "store/mysql_url.h"

/* The driver of spec and the part of it the driver takes; NULL when no
 * driver takes it. */
static const struct sk_store_driver *driver_of(const char *spec, const char **rest)
{
    *rest = spec;
    if (!strncmp(spec, "postgres://", 11) || !strncmp(spec, "postgresql://", 13))
        return &sk_store_pg;
    if (sk_mysql_url_is(spec)) return &sk_store_mysql;
    if (!strncmp(spec, "sqlite:", 7)) {
        *rest = spec + 7;
        return &sk_store_sqlite;
    }
    return NULL;
}

int sk_store_open_mode(sk_store **out, const char *spec, int waiting, char *err, size_t cap)
{
    *out = NULL;
    if (err && cap) err[0] = 0;
    const char *rest;
    const struct sk_store_driver *drv = spec && *spec ? driver_of(spec, &rest) : NULL;
    if (!drv) {
        /* the scheme only: an unknown URL may still carry a password */
        if (!spec || !*spec)
            sk_einval(err, cap, "empty database spec (expected " SK_STORE_SPECS ")");
        else
            sk_einval(err, cap, "unknown database spec '%.*s...' (expected " SK_STORE_SPECS ")",
                      (int)strcspn(spec, ":/@?"), spec);
        return SK_EINVAL;
    }
    sk_store *st = calloc(1, sizeof *st);
    if (!st) return sk_errf(err, cap, SK_ENOMEM, "out of memory");
    st->drv = drv;
    int rc = drv->open(st, rest, waiting);
    if (rc == SK_EDB && waiting != SK_STORE_CONNECT && drv->dialect != SK_SQLITE) {
        st->broken = 1; /* unconnected: the next call connects */
        st->owe_migrations = 1;
        if (err) snprintf(err, cap, "%s", st->errstr);
        st->errstr[0] = 0;
        *out = st;
        return 0;
    }
    if (rc == 0) rc = sk_store_migrate(st);
    if (rc) {
        if (err) snprintf(err, cap, "%s", st->errstr);
        sk_store_close(st);
        return rc;
    }
    *out = st;
    return 0;
}

int sk_store_open(sk_store **out, const char *spec, char *err, size_t cap)
{
    return sk_store_open_mode(out, spec, SK_STORE_CONNECT, err, cap);
}

int sk_store_open_waiting(sk_store **out, const char *spec, char *err, size_t cap)
{
    return sk_store_open_mode(out, spec, SK_STORE_TRY, err, cap);
}

void sk_store_close(sk_store *st)
{
    if (!st) return;
    st->drv->close(st);
    free(st);
}

const char *sk_store_errstr(const sk_store *st)
{
    return st ? st->errstr : "no store";
}

int sk_store_fail(sk_store *st, int code, const char *what, const char *fmt, ...)
{
    char detail[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    return sk_store_set_err(st, code, "%s %s: %s: %s", st->drv->name, st->where, what, detail);
}

int sk_store_no_activity(sk_store *st, uint64_t id)
{
    return sk_store_set_err(st, SK_ENOTFOUND, "activity %" PRIu64 " not found", id);
}

int sk_store_no_order(sk_store *st, const char *order_id)
{
    return sk_store_set_err(st, SK_ENOTFOUND, "order %.80s not found", order_id);
}

int sk_store_id_beyond_sql(uint64_t id)
{
    return id > (uint64_t)INT64_MAX;
}

int sk_store_status_from_text(const char *t)
{
    for (int i = 0; i < SK_ORDER_NSTATUS; i++)
        if (!strcmp(t, sk_order_status_name(i))) return i;
    return -1; /* value: no such status */
}

int sk_store_enter(sk_store *st)
{
    st->errstr[0] = 0;
    int rc = st->drv->enter(st);
    if (rc || !st->owe_migrations) return rc;
    st->owe_migrations = 0; /* the migrations' own calls must not run them again */
    rc = sk_store_migrate(st);
    if (rc) st->owe_migrations = 1; /* the next call that connects tries again */
    return rc;
}

int sk_text_room(struct sk_text *b, size_t n)
{
    if (!b->oom && SK_VEC_RESERVE(b->p, b->cap, b->len + n + 1, 1024)) b->oom = 1;
    return b->oom ? -1 : 0;
}

void sk_text_add(struct sk_text *b, const char *s, size_t n)
{
    if (sk_text_room(b, n) < 0) return;
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = 0;
}

/* ---- statements ---- */

/* Statement q prepared for one row, v[0..n) bound. */
static int prepare_args(sk_store *st, int q, const struct sk_val *v, int n, sk_stmt **s)
{
    size_t got;
    int rc = st->drv->prepare(st, q, 1, &got, s);
    for (int i = 0; rc == 0 && i < n; i++)
        st->drv->bind(*s, i, v[i]);
    return rc;
}

/* Statement q with its arguments, read (when not NULL) called on each row,
 * or on the first only (one); the rows it changed into *changes. */
static int q_exec(sk_store *st, int q, const struct sk_val *v, int n, sk_store_reader *read,
                  void *out, int one, int64_t *changes)
{
    sk_stmt *s;
    int rc = prepare_args(st, q, v, n, &s);
    if (rc) return rc == SK_STORE_NONE ? 0 : rc;
    while ((rc = st->drv->step(s)) == 1) {
        if (read) read(st, s, out);
        if (one) break;
    }
    if (rc == 0 && changes) *changes = st->drv->changes(s);
    st->drv->finish(s);
    return rc;
}

int sk_q_run(sk_store *st, int q, const struct sk_val *v, int n, int64_t *changes)
{
    return q_exec(st, q, v, n, NULL, NULL, 0, changes);
}

int sk_q_one(sk_store *st, int q, const struct sk_val *v, int n, sk_store_reader *read, void *out)
{
    return q_exec(st, q, v, n, read, out, 1, NULL);
}

int sk_q_each(sk_store *st, int q, const struct sk_val *v, int n, sk_store_reader *read, void *out)
{
    return q_exec(st, q, v, n, read, out, 0, NULL);
}

int sk_q_fill(sk_store *st, int q, const struct sk_val *v, int n, sk_store_reader *read,
              size_t size, void *out, size_t limit, size_t *got)
{
    *got = 0;
    sk_stmt *s;
    int rc = prepare_args(st, q, v, n, &s);
    if (rc) return rc == SK_STORE_NONE ? 0 : rc;
    while (*got < limit && (rc = st->drv->step(s)) == 1)
        read(st, s, (char *)out + (*got)++ * size);
    st->drv->finish(s);
    return rc < 0 ? rc : 0;
}

int sk_q_all(sk_store *st, int q, const struct sk_val *v, int n, sk_store_reader *read, size_t size,
             void **out, size_t *got)
{
    *out = NULL;
    *got = 0;
    sk_stmt *s;
    int rc = prepare_args(st, q, v, n, &s);
    if (rc) return rc == SK_STORE_NONE ? 0 : rc;
    char *arr = NULL;
    size_t len = 0, cap = 0;
    while ((rc = st->drv->step(s)) == 1) {
        if (sk_vec_reserve(&arr, &cap, len + 1, size, 16)) {
            rc = sk_store_set_err(st, SK_ENOMEM, "out of memory: %s", sk_sql_what(q));
            break;
        }
        memset(arr + len * size, 0, size);
        read(st, s, arr + len++ * size);
    }
    st->drv->finish(s);
    if (rc < 0 || len == 0) {
        free(arr);
        return rc < 0 ? rc : 0;
    }
    *out = arr;
    *got = len;
    return 0;
}

int sk_store_all(sk_store *st, int q, const struct sk_val *v, int n, sk_store_reader *read,
                 size_t size, void **out, size_t *got)
{
    *out = NULL;
    *got = 0;
    int rc = sk_store_enter(st);
    return rc ? rc : sk_q_all(st, q, v, n, read, size, out, got);
}

int sk_q_rows(sk_store *st, int q, size_t nrows,
              void (*bind)(void *ctx, size_t row, struct sk_val *vals),
              void (*row)(sk_store *st, sk_stmt *s, void *ctx), void *ctx, int64_t *changes)
{
    int nc = (int)strlen(sk_sql_types(q));
    struct sk_val vals[16];
    int rc = 0;
    for (size_t from = 0; from < nrows && rc == 0;) {
        size_t got;
        sk_stmt *s;
        if ((rc = st->drv->prepare(st, q, nrows - from, &got, &s)) != 0) break;
        for (size_t r = 0; r < got; r++) {
            bind(ctx, from + r, vals);
            for (int c = 0; c < nc; c++)
                st->drv->bind(s, (int)r * nc + c, vals[c]);
        }
        while ((rc = st->drv->step(s)) == 1)
            if (row) row(st, s, ctx);
        if (rc == 0 && changes) *changes += st->drv->changes(s);
        st->drv->finish(s);
        from += got;
    }
    return rc < 0 ? rc : 0;
}

/* ---- transactions ---- */

int sk_tx_begin(sk_store *st)
{
    int rc = st->drv->begin ? st->drv->exec(st, st->drv->begin, "begin") : 0;
    st->in_tx = rc == 0;
    st->tx_begin = rc == 0 && !st->drv->begin; /* sent with the first statement */
    return rc;
}

int sk_tx_end(sk_store *st, int rc)
{
    st->in_tx = 0;
    if (rc == 0 && (!st->tx_begin || st->deferred)) rc = st->drv->end(st, 1);
    int sent = !st->tx_begin; /* a BEGIN still waiting: nothing to end */
    if (st->drv->drop) st->drv->drop(st);
    st->tx_begin = 0;
    st->deferred = 0;
    if (rc && sent && !st->broken) { /* a broken session rolled back on the server by itself */
        char keep[sizeof st->errstr];
        memcpy(keep, st->errstr, sizeof keep);
        st->drv->end(st, 0);
        memcpy(st->errstr, keep, sizeof keep);
    }
    return rc;
}

int sk_tx(sk_store *st, int (*body)(sk_store *st, void *ctx), void *ctx)
{
    int rc = sk_store_enter(st);
    if (rc == 0) rc = sk_tx_begin(st);
    if (rc) return rc;
    return sk_tx_end(st, body(st, ctx));
}

/* ---- what the server drivers share ---- */

int sk_srv_prepare(sk_store *st, char **text, int q, size_t rows, size_t max_rows, size_t size,
                   size_t *got, sk_stmt **out)
{
    if (!text[q]) {
        int none;
        text[q] = sk_sql_text(st, q, 1, &none);
        if (!text[q]) return none ? SK_STORE_NONE : SK_ENOMEM;
    }
    const char *types = sk_sql_types(q);
    *got = !types ? 1 : rows < max_rows ? rows : max_rows;
    struct sk_srv_stmt *s = calloc(1, size);
    size_t nv = types ? *got * strlen(types) : SK_SRV_PARAMS;
    if (s) s->vals = calloc(nv, sizeof *s->vals);
    if (!s || !s->vals) {
        free(s);
        return sk_store_set_err(st, SK_ENOMEM, "out of memory preparing %s", sk_sql_what(q));
    }
    s->st = st;
    s->q = q;
    s->ncols = types ? (int)strlen(types) : 0;
    s->rows = *got;
    s->nvals = nv;
    *out = (sk_stmt *)s;
    return 0;
}

void sk_srv_bind(sk_stmt *stmt, int i, struct sk_val v)
{
    struct sk_srv_stmt *s = (struct sk_srv_stmt *)stmt;
    if (i >= 0 && (size_t)i < s->nvals) s->vals[i] = v;
}

int64_t sk_srv_changes(sk_stmt *s)
{
    return ((struct sk_srv_stmt *)s)->changes;
}

void sk_srv_free(sk_stmt *s)
{
    free(((struct sk_srv_stmt *)s)->vals);
    free(s);
}

int sk_srv_lost(sk_store *st, const char *what)
{
    return sk_store_fail(st, SK_EDB, what, "connection lost");
}

int sk_srv_fail_line(sk_store *st, int code, const char *what, const char *msg, int max, int lost)
{
    int n = msg ? (int)strcspn(msg, "\n") : 0;
    if (n == 0 && lost) return sk_store_fail(st, code, what, "connection lost");
    return sk_store_fail(st, code, what, "%.*s", n < max ? n : max, n ? msg : "");
}

int sk_srv_idle_closed(int fd)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    return fd < 0 || poll(&p, 1, 0) != 0;
}
