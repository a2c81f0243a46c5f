/* load_report.c - the result of a load run as a readable summary or as
 * one JSON object (load.h). */
#include <inttypes.h>
#include <string.h>

#include "load/load_int.h"

static void fmt_us(uint64_t us, char *out, size_t cap)
{
    if (us < 1000)
        snprintf(out, cap, "%" PRIu64 " us", us);
    else if (us < 1000000)
        snprintf(out, cap, "%.2f ms", (double)us / 1e3);
    else
        snprintf(out, cap, "%.2f s", (double)us / 1e6);
}

void sk_load_print(FILE *f, const struct sk_load_opts *o, const struct sk_load_result *r)
{
    char path[600];
    sk_load_path(o, path, sizeof path);
    fprintf(f, "seckill load: %s %s%s, %" PRId64 " connections, %" PRId64 " thread%s", o->method,
            o->url, path, o->connections, o->threads, o->threads == 1 ? "" : "s");
    if (o->rate > 0)
        fprintf(f, ", open loop at %.0f req/s\n", o->rate);
    else
        fprintf(f, ", closed loop\n");
    fprintf(f,
            "  requests      %" PRIu64 " sent, %" PRIu64
            " answered in %.3f s: %.0f req/s (stopped by %s)\n",
            r->sent, r->completed, r->elapsed_s, r->rps, r->stopped_by);
    fprintf(f, "  statuses     ");
    for (int s = 0; s < 600; s++)
        if (r->status[s]) fprintf(f, " %d: %" PRIu64, s, r->status[s]);
    if (r->status_other) fprintf(f, " other: %" PRIu64, r->status_other);
    if (!r->completed) fprintf(f, " (none)");
    fputc('\n', f);
    if (r->n_refusals || r->refusals_other) {
        fprintf(f, "  refusals     ");
        for (size_t i = 0; i < r->n_refusals; i++)
            fprintf(f, " %s: %" PRIu64, r->refusals[i].code, r->refusals[i].n);
        if (r->refusals_other) fprintf(f, " (no code): %" PRIu64, r->refusals_other);
        fputc('\n', f);
    }
    fprintf(f,
            "  accepted      %" PRIu64 " requests, %" PRIu64 " units; %" PRIu64
            " distinct users answered\n",
            r->accepted, r->accepted_units, r->distinct_users);
    char p[6][24];
    const double ps[] = {50, 90, 99, 99.9};
    for (int i = 0; i < 4; i++)
        fmt_us(sk_hist_percentile(&r->latency, ps[i]), p[i], sizeof p[i]);
    fmt_us(r->latency.total ? r->latency.max : 0, p[4], sizeof p[4]);
    fmt_us((uint64_t)sk_hist_mean(&r->latency), p[5], sizeof p[5]);
    fprintf(f, "  latency       p50 %s  p90 %s  p99 %s  p99.9 %s  max %s  (mean %s%s)\n", p[0],
            p[1], p[2], p[3], p[4], p[5], o->rate > 0 ? ", from intended send times" : "");
    fprintf(f,
            "  errors        connect %" PRIu64 ", closed %" PRIu64 ", timeout %" PRIu64
            ", protocol %" PRIu64 "; reconnects %" PRIu64 "\n",
            r->err_connect, r->err_closed, r->err_timeout, r->err_protocol, r->reconnects);
    if (r->backlog_at_end)
        fprintf(f, "  backlog       %" PRIu64 " due requests never found a free connection\n",
                r->backlog_at_end);
    if (r->ok) {
        fprintf(f, "  verification  OK:");
        if (r->order_check)
            fprintf(f, " %" PRIu64 " unique order ids, at most %" PRId64 " units per user%s;",
                    r->unique_orders, r->max_units_one_user,
                    o->limit >= 0 ? " (limit respected)" : "");
        if (o->expect_stock >= 0)
            fprintf(f, " %" PRIu64 " of stock %" PRId64 " accepted%s;", r->accepted_units,
                    o->expect_stock,
                    r->demand_units >= (uint64_t)o->expect_stock ? " (sold out)" : "");
        if (r->db_checked)
            fprintf(f, " all %" PRIu64 " accepted orders in the DB with their user and quantity;",
                    r->db_found);
        fprintf(f, " no 5xx, no transport errors\n");
    } else {
        fprintf(f, "  verification  FAILED\n");
        for (int i = 0; i < r->n_violations; i++)
            fprintf(f, "    violation: %s\n", r->violations[i]);
    }
}

/* key/value pairs packed (json_pack's fmt) added to obj in their order. */
#define ADD(obj, ...) json_object_update_new((obj), json_pack(__VA_ARGS__))
#define JI(v) ((json_int_t)(v))

json_t *sk_load_json(const struct sk_load_opts *o, const struct sk_load_result *r)
{
    json_t *j = json_pack("{s:s,s:s}", "url", o->url, "method", o->method);
    json_t *st = json_object(), *ref = json_object(), *vl = json_array();
    json_t *ver = json_pack("{s:b,s:b}", "ok", r->ok, "order_check", r->order_check);
    if (!j || !st || !ref || !vl || !ver) {
        json_decref(j);
        json_decref(st);
        json_decref(ref);
        json_decref(vl);
        json_decref(ver);
        return NULL;
    }
    json_object_set_new(j, "path", json_string(o->path));
    if (o->activity) json_object_set_new(j, "activity", json_integer(JI(o->activity)));
    json_object_set_new(j, "mode", json_string(o->rate > 0 ? "open" : "closed"));
    if (o->rate > 0) json_object_set_new(j, "rate", json_real(o->rate));
    ADD(j, "{s:I,s:I,s:I,s:I,s:f,s:f,s:s}", "connections", JI(o->connections), "threads",
        JI(o->threads), "sent", JI(r->sent), "completed", JI(r->completed), "duration_s",
        r->elapsed_s, "rps", r->rps, "stopped_by", r->stopped_by);
    for (int s = 0; s < 600; s++)
        if (r->status[s]) {
            char k[16];
            snprintf(k, sizeof k, "%d", s);
            json_object_set_new(st, k, json_integer(JI(r->status[s])));
        }
    if (r->status_other) json_object_set_new(st, "other", json_integer(JI(r->status_other)));
    for (size_t i = 0; i < r->n_refusals; i++)
        json_object_set_new(ref, r->refusals[i].code, json_integer(JI(r->refusals[i].n)));
    if (r->refusals_other) json_object_set_new(ref, "(none)", json_integer(JI(r->refusals_other)));
    const struct sk_hist *h = &r->latency;
    ADD(j, "{s:o,s:o,s:I,s:I,s:I,s:{s:I,s:I,s:I,s:I,s:I,s:f},s:{s:I,s:I,s:I,s:I},s:I}", "statuses",
        st, "refusals", ref, "accepted", JI(r->accepted), "accepted_units", JI(r->accepted_units),
        "distinct_users", JI(r->distinct_users), "latency_us", "p50", JI(sk_hist_percentile(h, 50)),
        "p90", JI(sk_hist_percentile(h, 90)), "p99", JI(sk_hist_percentile(h, 99)), "p999",
        JI(sk_hist_percentile(h, 99.9)), "max", JI(h->total ? h->max : 0), "mean", sk_hist_mean(h),
        "transport_errors", "connect", JI(r->err_connect), "closed", JI(r->err_closed), "timeout",
        JI(r->err_timeout), "protocol", JI(r->err_protocol), "reconnects", JI(r->reconnects));
    if (o->rate > 0) json_object_set_new(j, "backlog_at_end", json_integer(JI(r->backlog_at_end)));
    if (r->order_check)
        ADD(ver, "{s:I,s:I,s:I,s:I,s:I}", "unique_orders", JI(r->unique_orders), "duplicate_orders",
            JI(r->duplicate_orders), "missing_orders", JI(r->missing_orders), "max_units_one_user",
            JI(r->max_units_one_user), "users_over_limit", JI(r->users_over_limit));
    if (o->limit >= 0) json_object_set_new(ver, "limit", json_integer(o->limit));
    if (o->expect_stock >= 0)
        json_object_set_new(ver, "expect_stock", json_integer(o->expect_stock));
    json_object_set_new(ver, "demand_units", json_integer(JI(r->demand_units)));
    if (r->db_checked)
        ADD(ver, "{s:I,s:I,s:I}", "db_found", JI(r->db_found), "db_missing", JI(r->db_missing),
            "db_mismatched", JI(r->db_mismatched));
    for (int i = 0; i < r->n_violations; i++)
        json_array_append_new(vl, json_string(r->violations[i]));
    json_object_set_new(ver, "violations", vl);
    json_object_set_new(j, "verification", ver);
    return j;
}
#undef ADD
#undef JI
