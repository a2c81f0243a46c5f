/* ops_history.c - the dashboard's ring of the last minutes (ops_history.h). */
#include "http/ops_history.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/shm.h"
#include "http/metrics_int.h"

struct hist_act {
    uint64_t id; /* 0: unused */
    uint64_t admitted_units, handed_out;
    uint64_t refusals[SK_MMAX_REASONS];
};

struct hist_sample {
    int64_t t_ms; /* 0: never written */
    uint64_t admissions, refusals;
    struct hist_act acts[SK_METRICS_ACTS];
};

struct sk_ops_history {
    /* process-shared: held by the writer for one sample's copy (~12 KB, once
     * a second) and by a reader for the whole ring (a page's first poll) */
    pthread_mutex_t lock;
    uint64_t written; /* samples ever written: the next goes to written % N */
    const char *reason_name[SK_MMAX_REASONS]; /* static strings of the binary */
    int n_reasons;
    struct hist_sample s[SK_HIST_SAMPLES];
};

int sk_ops_history_new(sk_ops_history **out)
{
    *out = sk_shm_alloc_locked(sizeof **out, offsetof(sk_ops_history, lock));
    return *out ? 0 : SK_EIO;
}

static sk_ops_history *the_ring;

void sk_ops_history_set(sk_ops_history *h)
{
    the_ring = h;
}

sk_ops_history *sk_ops_history_get(void)
{
    return the_ring;
}

void sk_ops_history_record(sk_ops_history *h, sk_node *node, int64_t now_ms)
{
    sk_metrics *m = sk_metrics_node_sum(node);
    if (!m) return;
    pthread_mutex_lock(&h->lock);
    uint64_t w = h->written;
    struct hist_sample *s = &h->s[w % SK_HIST_SAMPLES];
    s->t_ms = now_ms;
    s->admissions = m->admissions;
    s->refusals = 0;
    for (int r = 0; r < m->n_reasons; r++)
        s->refusals += m->refusals[r];
    for (int i = 0; i < SK_METRICS_ACTS; i++) {
        const struct sk_metrics_act *a = &m->acts[i];
        struct hist_act *o = &s->acts[i];
        o->id = a->id;
        o->admitted_units = a->admitted_units;
        o->handed_out = a->passes[0];
        memcpy(o->refusals, a->refusals, sizeof o->refusals);
    }
    if (!h->n_reasons) {
        memcpy(h->reason_name, m->reason_name, sizeof h->reason_name);
        h->n_reasons = m->n_reasons;
    }
    h->written = w + 1;
    pthread_mutex_unlock(&h->lock);
    sk_metrics_free(m);
}

/* The value of a counter of activity id in sample s, or -1 when s has no
 * row for it; *row caches where it was found last. */
static long long act_value(const struct hist_sample *s, uint64_t id, int what, int *row)
{
    if (*row < 0 || s->acts[*row].id != id) {
        *row = -1;
        for (int i = 0; i < SK_METRICS_ACTS && *row < 0; i++)
            if (s->acts[i].id == id) *row = i;
        if (*row < 0) return -1;
    }
    const struct hist_act *a = &s->acts[*row];
    return what == -1   ? (long long)a->admitted_units
           : what == -2 ? (long long)a->handed_out
                        : (long long)a->refusals[what];
}

/* One series of activity id over the n samples (null where absent), or
 * NULL when it never changed (nothing to draw but a flat line). */
static json_t *series(const struct hist_sample *v, size_t n, uint64_t id, int what, int always)
{
    json_t *arr = json_array();
    long long lo = -1, hi = -1;
    int row = -1;
    for (size_t k = 0; k < n; k++) {
        long long x = act_value(&v[k], id, what, &row);
        json_array_append_new(arr, x < 0 ? json_null() : json_integer(x));
        if (x >= 0) {
            if (lo < 0) lo = x;
            hi = x;
        }
    }
    if (!always && lo == hi) {
        json_decref(arr);
        return NULL;
    }
    return arr;
}

json_t *sk_ops_history_json(sk_ops_history *h)
{
    json_t *t = json_array(), *adm = json_array(), *ref = json_array(), *acts = json_array();
    /* large: static, touched only when a page asks (one loop per process) */
    static struct hist_sample v[SK_HIST_SAMPLES];
    size_t n = 0;
    int nr = 0;
    const char *names[SK_MMAX_REASONS];
    if (h) {
        pthread_mutex_lock(&h->lock);
        nr = h->n_reasons;
        memcpy(names, h->reason_name, sizeof names);
        uint64_t w = h->written, first = w > SK_HIST_SAMPLES ? w - SK_HIST_SAMPLES : 0;
        for (uint64_t k = first; k < w; k++)
            v[n++] = h->s[k % SK_HIST_SAMPLES];
        pthread_mutex_unlock(&h->lock);
    }
    for (size_t k = 0; k < n; k++) {
        json_array_append_new(t, json_integer(v[k].t_ms));
        json_array_append_new(adm, json_integer((json_int_t)v[k].admissions));
        json_array_append_new(ref, json_integer((json_int_t)v[k].refusals));
    }
    /* the activities of the newest sample, then any older ones */
    uint64_t ids[SK_METRICS_ACTS * 2];
    size_t nid = 0;
    for (size_t k = n; k-- > 0 && nid < SK_METRICS_ACTS;)
        for (int i = 0; i < SK_METRICS_ACTS && nid < SK_METRICS_ACTS; i++) {
            uint64_t id = v[k].acts[i].id;
            int seen = !id;
            for (size_t j = 0; j < nid && !seen; j++)
                seen = ids[j] == id;
            if (!seen) ids[nid++] = id;
        }
    for (size_t j = 0; j < nid; j++) {
        json_t *rf = json_object();
        for (int r = 0; r < nr; r++) {
            json_t *x = series(v, n, ids[j], r, 0);
            if (x) json_object_set_new(rf, names[r], x);
        }
        /* handed_out_total: null when it never changed */
        json_array_append_new(acts, json_pack("{s:I, s:o, s:o?, s:o}", "id", (json_int_t)ids[j],
                                              "admitted_units_total", series(v, n, ids[j], -1, 1),
                                              "handed_out_total", series(v, n, ids[j], -2, 0),
                                              "refusals", rf));
    }
    return json_pack("{s:I, s:o, s:o, s:o, s:o}", "every_ms", (json_int_t)SK_HIST_EVERY_MS, "t_ms",
                     t, "admissions", adm, "refusals", ref, "activities", acts);
}
