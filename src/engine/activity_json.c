/* activity_json.c - an activity as JSON in each of its views
 * (activity_json.h): one sequence of keys, each view taking its own. */
#include "engine/activity_json.h"

#include <inttypes.h>
#include <stdio.h>

#include "engine/draw.h"

static json_t *time_json(int64_t ms)
{
    char t[SK_TIME_RFC3339_MAX];
    if (sk_time_format_rfc3339(ms, t, sizeof t) < 0) snprintf(t, sizeof t, "%" PRId64 "ms", ms);
    return json_string(t);
}

static json_t *int_or_null(int present, int64_t v)
{
    return present ? json_integer(v) : json_null();
}

/* The buyer's view of the rate limit, the waiting room (its seed stays
 * out: it would tell a buyer the draw, docs/waiting-room.md), the
 * challenge, and registration and the draw (docs/fairness.md): the seed's
 * commitment, the seed itself only once the draw is made (anyone can then
 * recompute it). */
static void public_parts(json_t *o, const struct sk_activity *a, json_t *ch)
{
    if (a->rl_per_user_per_s > 0)
        json_object_set_new(
            o, "rate_limit",
            json_pack("{s:I, s:I}", "per_user_per_s", (json_int_t)a->rl_per_user_per_s, "burst",
                      (json_int_t)(a->rl_burst > 0 ? a->rl_burst : a->rl_per_user_per_s)));
    if (a->wr_passes_per_s > 0)
        json_object_set_new(o, "waiting_room",
                            json_pack("{s:I, s:I}", "passes_per_s", (json_int_t)a->wr_passes_per_s,
                                      "pass_ttl_s", (json_int_t)a->wr_pass_ttl_s));
    if (ch) json_object_set_new(o, "challenge", ch);
    if (a->reg_end_ms > 0)
        json_object_set_new(o, "registration",
                            json_pack("{s:o, s:o}", "start", time_json(a->reg_start_ms), "end",
                                      time_json(a->reg_end_ms)));
    if (a->wr_control)
        json_object_set_new(o, "controls",
                            json_pack("{s:b, s:b, s:b}", "paused",
                                      (a->wr_control & SK_WR_PAUSE) != 0, "queue_all",
                                      (a->wr_control & SK_WR_QUEUE_ALL) != 0, "refuse_joins",
                                      (a->wr_control & SK_WR_NO_JOINS) != 0));
    if (a->draw_box_s <= 0) return;
    char commit[SK_DRAW_HEX] = "";
    if (sk_draw_commit(a->draw_seed, commit) < 0) commit[0] = 0;
    json_t *d = json_pack("{s:I, s:s, s:b, s:I}", "box_s", (json_int_t)a->draw_box_s, "commitment",
                          commit, "drawn", a->drawn_ms > 0, "registrants", (json_int_t)a->draw_n);
    if (d && a->drawn_ms > 0) json_object_set_new(d, "seed", json_string(a->draw_seed));
    json_object_set_new(o, "allocation", json_string("draw"));
    json_object_set_new(o, "draw", d);
}

/* The operator's view of the waiting room (the seed reproduces the
 * queue's draw) and the challenge. */
static void operator_parts(json_t *o, const struct sk_activity *a)
{
    if (a->wr_passes_per_s > 0) {
        json_object_set_new(o, "passes_per_s", json_integer(a->wr_passes_per_s));
        json_object_set_new(o, "pass_ttl_s", json_integer(a->wr_pass_ttl_s));
        json_object_set_new(o, "queue_seed", json_string(a->wr_seed));
    }
    if (sk_activity_has_challenge(a))
        json_object_set_new(o, "challenge",
                            json_pack("{s:I, s:I, s:I, s:o}", "pow_bits_min",
                                      (json_int_t)a->ch_pow_min, "pow_bits_max",
                                      (json_int_t)a->ch_pow_max, "pow_load_step",
                                      (json_int_t)a->ch_pow_step, "captcha",
                                      a->ch_captcha[0] ? json_string(a->ch_captcha) : json_null()));
}

/* The operator's live figures. Not preheated: none rather than misleading
 * zeros. */
static void operator_live(json_t *o, const struct sk_activity *a, const struct sk_stock_state *s)
{
    int e = s->exists;
    json_object_set_new(o, "stock_remaining", int_or_null(e, s->remaining));
    /* Units admitted over the sale's life, each order once (invariant 2
     * of docs/design.md: remaining + admitted - released = initial): the
     * figure of the dashboard and /metrics too */
    json_object_set_new(o, "admitted", int_or_null(e, sk_stock_admitted(s)));
    json_object_set_new(o, "held", int_or_null(e, s->held));
    json_object_set_new(o, "released", int_or_null(e, s->released));
    json_object_set_new(o, "buyers", int_or_null(e, s->buyers));
    json_object_set_new(o, "stream_length", int_or_null(e, s->stream_len));
    if (e && s->initial != a->stock)
        json_object_set_new(o, "redis_stock_initial", json_integer(s->initial));
    /* the rollback guard (docs/recovery.md): shown even when only the
     * fence is left of the live state */
    json_object_set_new(o, "fence", s->fence[0] ? json_string(s->fence) : json_null());
    json_object_set_new(o, "fence_why", s->fence[0] ? json_string(s->fence_why) : json_null());
    json_object_set_new(o, "lost", json_integer(s->lost));
    json_object_set_new(o, "oversold", json_integer(s->oversold));
}

json_t *sk_activity_json(const struct sk_activity *a, const struct sk_stock_state *live,
                         int64_t now, enum sk_activity_view v, json_t *ch)
{
    int op = v == SK_AV_OPERATOR, e = live && live->exists;
    json_t *o = json_object();
    if (!o) {
        json_decref(ch);
        return NULL;
    }
    json_object_set_new(o, "id", json_integer((json_int_t)a->id));
    json_object_set_new(o, "name", json_string(a->name));
    if (live)
        json_object_set_new(
            o, "state",
            json_string(sk_activity_live_state(e, live->open, a->start_ms, a->end_ms, now)));
    if (live && op) {
        json_object_set_new(o, "switch", json_string(live->open ? "open" : "closed"));
        json_object_set_new(o, "preheated", json_boolean(e));
    }
    if (v != SK_AV_PUBLIC) json_object_set_new(o, "stored_state", json_string(a->state));
    json_object_set_new(o, "start", time_json(a->start_ms));
    json_object_set_new(o, "end", time_json(a->end_ms));
    if (v == SK_AV_LISTED) json_object_set_new(o, "preheated", json_boolean(e));
    if (op) {
        json_object_set_new(o, "start_ms", json_integer(a->start_ms));
        json_object_set_new(o, "end_ms", json_integer(a->end_ms));
    }
    json_object_set_new(o, "stock_initial", json_integer(a->stock));
    /* the buyer's and the list's: the whole stock before a preheat */
    if (!op)
        json_object_set_new(o, "stock_remaining", json_integer(e ? live->remaining : a->stock));
    if (v == SK_AV_LISTED)
        json_object_set_new(o, "admitted", json_integer(sk_stock_admitted(live)));
    json_object_set_new(o, "per_user_limit", json_integer(a->per_user_limit));
    json_object_set_new(o, "max_per_order", json_integer(a->max_per_order));
    json_object_set_new(o, "pay_timeout_s", json_integer(a->pay_timeout_s));
    json_object_set_new(o, "segments", json_integer(a->segments));
    if (v == SK_AV_PUBLIC) public_parts(o, a, ch);
    if (op) operator_parts(o, a);
    if (v != SK_AV_PUBLIC) json_object_set_new(o, "db_stock", json_integer(a->stock_db));
    if (op) json_object_set_new(o, "created_at", time_json(a->created_ms));
    if (v == SK_AV_LISTED) json_object_set_new(o, "released", json_integer(e ? live->released : 0));
    if (live && op) operator_live(o, a, live);
    return o;
}
