/* store_reg.c - pre-registration and the draw in the store (store.h,
 * docs/fairness-registration.md): written once over every backend with
 * the one transaction primitive exec_tx (store_int.h), in SQL the three
 * speak alike, numbers as literals (every value here is a number or
 * digits and colons, never a caller's text). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "store/store_int.h"

/* Rows one statement writes. */
#define CHUNK 500
/* Longest row text: "(<20 digits>,<20 digits>,<20 digits>)," or
 * " WHEN <20> THEN <20>". */
#define ROW_MAX 72

static int no_exec(sk_store *st)
{
    if (st->ops->exec_tx) return 0;
    return sk_store_set_err(st, SK_EINVAL, "%s store: transactions are not supported",
                            st->ops->name);
}

/* SQL has no unsigned 64-bit type: a user id is stored as the int64 with
 * the same bits (store.h). */
static long long sql_user(uint64_t u)
{
    return (long long)(int64_t)u;
}

/* Statements of n rows, CHUNK a statement: head, then each row by row(i),
 * joined by sep, then tail; into a new array of *ns strings (the caller
 * frees each and the array). */
static int chunked(sk_store *st, size_t n, const char *head, const char *sep, const char *tail,
                   void (*row)(char *out, size_t cap, size_t i, const void *arg), const void *arg,
                   char ***out, size_t *ns)
{
    size_t k = (n + CHUNK - 1) / CHUNK;
    char **sql = calloc(k ? k : 1, sizeof *sql);
    if (!sql) return sk_store_set_err(st, SK_ENOMEM, "out of memory");
    for (size_t c = 0; c < k; c++) {
        size_t from = c * CHUNK, to = from + CHUNK < n ? from + CHUNK : n;
        size_t cap = strlen(head) + strlen(tail) + (to - from) * (ROW_MAX + strlen(sep)) + 1;
        char *s = malloc(cap);
        if (!s) {
            for (size_t j = 0; j < c; j++)
                free(sql[j]);
            free(sql);
            return sk_store_set_err(st, SK_ENOMEM, "out of memory");
        }
        size_t o = (size_t)snprintf(s, cap, "%s", head);
        for (size_t i = from; i < to; i++) {
            if (i > from) o += (size_t)snprintf(s + o, cap - o, "%s", sep);
            row(s + o, cap - o, i, arg);
            o += strlen(s + o);
        }
        snprintf(s + o, cap - o, "%s", tail);
        sql[c] = s;
    }
    *out = sql;
    *ns = k;
    return 0;
}

static void free_all(char **sql, size_t n)
{
    for (size_t i = 0; sql && i < n; i++)
        free(sql[i]);
    free(sql);
}

struct reg_rows {
    uint64_t id;
    const uint64_t *users;
    int64_t at_ms;
};

static void reg_row(char *out, size_t cap, size_t i, const void *arg)
{
    const struct reg_rows *r = arg;
    snprintf(out, cap, "(%" PRIu64 ",%lld,%" PRId64 ")", r->id, sql_user(r->users[i]), r->at_ms);
}

int sk_store_registrations_add(sk_store *st, uint64_t id, const uint64_t *users, size_t n,
                               int64_t at_ms, size_t *added)
{
    st->errstr[0] = 0;
    if (added) *added = 0;
    if (n == 0) return 0;
    if (no_exec(st)) return SK_EINVAL;
    if (id < 1 || id > SK_ACTIVITY_ID_MAX)
        return sk_store_set_err(st, SK_EINVAL, "activity id %" PRIu64 " out of range", id);
    int my = !strcmp(st->ops->name, "mysql");
    struct reg_rows rr = {id, users, at_ms};
    char **sql;
    size_t ns;
    int rc = chunked(st, n,
                     my ? "INSERT IGNORE INTO registrations (activity_id, user_id, created_ms) VALUES "
                        : "INSERT INTO registrations (activity_id, user_id, created_ms) VALUES ",
                     ",", my ? "" : " ON CONFLICT DO NOTHING", reg_row, &rr, &sql, &ns);
    if (rc) return rc;
    int64_t *aff = calloc(ns, sizeof *aff);
    rc = aff ? st->ops->exec_tx(st, (const char *const *)sql, ns, NULL, aff)
             : sk_store_set_err(st, SK_ENOMEM, "out of memory");
    size_t got = 0;
    for (size_t i = 0; rc == 0 && i < ns; i++)
        got += aff[i] > 0 ? (size_t)aff[i] : 0;
    if (rc == 0 && added) *added = got;
    free_all(sql, ns);
    free(aff);
    return rc;
}

int sk_store_registrations_count(sk_store *st, uint64_t id, int64_t *count)
{
    static const struct sk_store_rows q = {"count registrations",
                                           "SELECT COUNT(*) FROM registrations", "1",
                                           sizeof(uint64_t), sk_store_read_id};
    *count = 0;
    st->errstr[0] = 0;
    if (id < 1 || id > SK_ACTIVITY_ID_MAX) return 0;
    void *arr = NULL;
    size_t n = 0;
    int rc = st->ops->activity_rows(st, &q, id, &arr, &n);
    if (rc == 0 && n == 1) *count = (int64_t)((uint64_t *)arr)[0];
    free(arr);
    return rc;
}

static int cmp_reg(const void *a, const void *b)
{
    uint64_t x = ((const struct sk_registration *)a)->user_id,
             y = ((const struct sk_registration *)b)->user_id;
    return (x > y) - (x < y);
}

int sk_store_registrations_list(sk_store *st, uint64_t id, struct sk_registration **out, size_t *n)
{
    static const struct sk_store_rows q = {
        "list registrations", "SELECT user_id, draw_rank, created_ms FROM registrations",
        "user_id", sizeof(struct sk_registration), sk_store_read_registration};
    *out = NULL;
    *n = 0;
    st->errstr[0] = 0;
    if (id < 1 || id > SK_ACTIVITY_ID_MAX) return 0;
    void *arr = NULL;
    int rc = st->ops->activity_rows(st, &q, id, &arr, n);
    if (rc) return rc;
    /* by user id as unsigned: ids above 2^63 read back negative in SQL */
    if (*n) qsort(arr, *n, sizeof(struct sk_registration), cmp_reg);
    *out = arr;
    return 0;
}

static void rank_case(char *out, size_t cap, size_t i, const void *arg)
{
    const uint64_t *order = arg;
    snprintf(out, cap, " WHEN %lld THEN %zu", sql_user(order[i]), i + 1);
}

static void rank_in(char *out, size_t cap, size_t i, const void *arg)
{
    const uint64_t *order = arg;
    snprintf(out, cap, "%lld", sql_user(order[i]));
}

/* The statement giving order[from .. from + m) their places:
 * UPDATE ... SET draw_rank = CASE user_id WHEN u THEN p ... END WHERE
 * activity_id = id AND user_id IN (...); NULL when out of memory. */
static char *rank_stmt(sk_store *st, uint64_t id, const uint64_t *order, size_t from, size_t m)
{
    char **cases = NULL, **ins = NULL;
    size_t nc = 0, ni = 0;
    char *s = NULL;
    if (chunked(st, m, "", "", "", rank_case, order + from, &cases, &nc) == 0 &&
        chunked(st, m, "", ",", "", rank_in, order + from, &ins, &ni) == 0) {
        size_t cap = strlen(cases[0]) + strlen(ins[0]) + 256;
        if ((s = malloc(cap)) != NULL)
            snprintf(s, cap,
                     "UPDATE registrations SET draw_rank = %zu + CASE user_id%s END"
                     " WHERE activity_id = %" PRIu64 " AND user_id IN (%s)",
                     from, cases[0], id, ins[0]);
        else
            sk_store_set_err(st, SK_ENOMEM, "out of memory");
    }
    free_all(cases, nc);
    free_all(ins, ni);
    return s;
}

int sk_store_draw_record(sk_store *st, uint64_t id, const uint64_t *order, size_t n,
                         int64_t drawn_ms)
{
    st->errstr[0] = 0;
    if (no_exec(st)) return SK_EINVAL;
    if (id < 1 || id > SK_ACTIVITY_ID_MAX) return sk_store_no_activity(st, id);
    size_t k = (n + CHUNK - 1) / CHUNK;
    char **sql = calloc(k + 1, sizeof *sql);
    int64_t *aff = calloc(k + 1, sizeof *aff), *want = calloc(k + 1, sizeof *want);
    int rc = sql && aff && want ? 0 : sk_store_set_err(st, SK_ENOMEM, "out of memory");
    /* first the activity, once: a second draw matches no row */
    char head[256];
    snprintf(head, sizeof head,
             "UPDATE activities SET drawn_ms = %" PRId64 ", draw_n = %zu WHERE id = %" PRIu64
             " AND drawn_ms = 0",
             drawn_ms > 0 ? drawn_ms : 1, n, id);
    if (rc == 0) want[0] = 1;
    /* then every registrant's place: each must be one */
    for (size_t c = 0; rc == 0 && c < k; c++) {
        size_t from = c * CHUNK, m = n - from < CHUNK ? n - from : CHUNK;
        if ((sql[1 + c] = rank_stmt(st, id, order, from, m)) == NULL) rc = SK_ENOMEM;
        want[1 + c] = (int64_t)m;
    }
    if (rc == 0) {
        sql[0] = head;
        rc = st->ops->exec_tx(st, (const char *const *)sql, k + 1, want, aff);
        sql[0] = NULL;
    }
    if (rc == SK_ESTATE && aff[0] == 0) {
        struct sk_activity a;
        rc = st->ops->activity_get(st, id, &a);
        if (rc == 0)
            rc = sk_store_set_err(st, SK_EEXIST, "activity %" PRIu64 " was drawn before", id);
    } else if (rc == SK_ESTATE) {
        sk_store_set_err(st, SK_ESTATE, "activity %" PRIu64 ": the order holds users who did not"
                                        " register",
                         id);
    }
    free_all(sql, k + 1);
    free(aff);
    free(want);
    return rc;
}

int sk_store_activity_set_fair(sk_store *st, uint64_t id, int64_t wr_control,
                               const char *draw_state)
{
    st->errstr[0] = 0;
    if (no_exec(st)) return SK_EINVAL;
    if (wr_control < 0 || wr_control > (SK_WR_PAUSE | SK_WR_QUEUE_ALL | SK_WR_NO_JOINS) ||
        !draw_state || strlen(draw_state) >= SK_ACTIVITY_DRAW_STATE_MAX ||
        draw_state[strspn(draw_state, "0123456789:")] != 0)
        return sk_store_set_err(st, SK_EINVAL, "activity %" PRIu64 ": controls or draw state out"
                                               " of shape",
                                id);
    if (id < 1 || id > SK_ACTIVITY_ID_MAX) return sk_store_no_activity(st, id);
    char sql[256];
    snprintf(sql, sizeof sql,
             "UPDATE activities SET wr_control = %" PRId64 ", draw_state = '%s' WHERE id = %" PRIu64,
             wr_control, draw_state, id);
    const char *one[] = {sql};
    const int64_t want[] = {1};
    int64_t aff[1];
    int rc = st->ops->exec_tx(st, one, 1, want, aff);
    return rc == SK_ESTATE ? sk_store_no_activity(st, id) : rc;
}
