/* activity.c - activity definition rules, live state name, and the time
 * parsers/formatters used by the operator commands. Pure functions. */
#include "engine/activity.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "engine/stock.h"

static const char *const states[] = {"created", "preheated", "open", "closed"};

void sk_activity_init(struct sk_activity *a)
{
    memset(a, 0, sizeof *a);
    a->max_per_order = SK_ACTIVITY_UNSET;
    a->pay_timeout_s = SK_ACTIVITY_UNSET;
    a->segments = SK_ACTIVITY_UNSET;
    a->wr_pass_ttl_s = SK_ACTIVITY_UNSET;
    snprintf(a->state, sizeof a->state, "created");
}

void sk_activity_apply_defaults(struct sk_activity *a)
{
    if (a->max_per_order == SK_ACTIVITY_UNSET) a->max_per_order = a->per_user_limit;
    if (a->pay_timeout_s == SK_ACTIVITY_UNSET) a->pay_timeout_s = SK_ACTIVITY_PAY_TIMEOUT_DEFAULT;
    if (a->segments == SK_ACTIVITY_UNSET) a->segments = SK_ACTIVITY_SEGMENTS_DEFAULT;
    if (a->wr_pass_ttl_s == SK_ACTIVITY_UNSET)
        a->wr_pass_ttl_s = a->wr_passes_per_s > 0 ? SK_ACTIVITY_PASS_TTL_DEFAULT : 0;
    if (a->ch_pow_min > 0 && a->ch_pow_max == 0) a->ch_pow_max = a->ch_pow_min;
    if (a->ch_pow_max > a->ch_pow_min && a->ch_pow_step == 0) a->ch_pow_step = SK_CH_STEP_DEFAULT;
    if (a->ch_pow_max <= a->ch_pow_min) a->ch_pow_step = 0;
}

static const char *const captchas[] = {"turnstile", "hcaptcha", "recaptcha"};

int sk_activity_captcha_valid(const char *s)
{
    for (size_t i = 0; i < sizeof captchas / sizeof captchas[0]; i++)
        if (!strcmp(s, captchas[i])) return 1;
    return 0;
}

int sk_activity_has_challenge(const struct sk_activity *a)
{
    return a->ch_pow_min > 0 || a->ch_captcha[0] != 0;
}

/* The challenge's fields: bits 1..SK_CH_BITS_MAX, min <= max, a step only
 * when the bits may rise, a known CAPTCHA provider. */
static int validate_challenge(const struct sk_activity *a, char *err, size_t cap)
{
    if (a->ch_pow_min < 0 || a->ch_pow_min > SK_CH_BITS_MAX)
        return sk_einval(err, cap, "proof-of-work bits must be between 1 and %d (got %lld)",
                         SK_CH_BITS_MAX, (long long)a->ch_pow_min);
    if (a->ch_pow_min == 0 && (a->ch_pow_max != 0 || a->ch_pow_step != 0))
        return sk_einval(err, cap, "a proof-of-work maximum or load step needs its minimum bits");
    if (a->ch_pow_min > 0 && (a->ch_pow_max < a->ch_pow_min || a->ch_pow_max > SK_CH_BITS_MAX))
        return sk_einval(err, cap,
                         "proof-of-work maximum bits must be between the minimum (%lld) and %d "
                         "(got %lld)",
                         (long long)a->ch_pow_min, SK_CH_BITS_MAX, (long long)a->ch_pow_max);
    if (a->ch_pow_step < 0 || a->ch_pow_step > SK_CH_STEP_MAX ||
        (a->ch_pow_step > 0) != (a->ch_pow_max > a->ch_pow_min))
        return sk_einval(err, cap,
                         "the proof-of-work load step must be between 1 and %d, and is only for "
                         "bits that may rise (maximum above minimum)",
                         SK_CH_STEP_MAX);
    if (!memchr(a->ch_captcha, 0, sizeof a->ch_captcha) ||
        (a->ch_captcha[0] && !sk_activity_captcha_valid(a->ch_captcha)))
        return sk_einval(err, cap, "captcha must be turnstile, hcaptcha or recaptcha");
    return 0;
}

int sk_activity_seed_valid(const char *s, size_t len)
{
    if (len < SK_ACTIVITY_SEED_MIN || len > SK_ACTIVITY_SEED_MAX) return 0;
    for (size_t i = 0; i < len; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return 0;
    return 1;
}

int sk_activity_draw_seed_valid(const char *s, size_t len)
{
    return len == SK_ACTIVITY_DRAW_SEED_HEX && sk_activity_seed_valid(s, len);
}

/* The waiting room's fields: all set (rate, TTL, seed) or all empty; a
 * draw keeps its passes' key in the seed without a rate. */
static int validate_waiting_room(const struct sk_activity *a, char *err, size_t cap)
{
    size_t sl = strnlen(a->wr_seed, sizeof a->wr_seed);
    if (a->wr_passes_per_s < 0 || a->wr_passes_per_s > SK_ACTIVITY_PASS_RATE_MAX)
        return sk_einval(err, cap, "passes per second must be between 1 and %d (got %lld)",
                         SK_ACTIVITY_PASS_RATE_MAX, (long long)a->wr_passes_per_s);
    if (a->wr_control < 0 || a->wr_control > (SK_WR_PAUSE | SK_WR_QUEUE_ALL | SK_WR_NO_JOINS))
        return sk_einval(err, cap, "the waiting room's controls are out of range");
    if (a->wr_passes_per_s == 0) {
        if (a->wr_pass_ttl_s != 0 || (sl != 0 && a->draw_box_s == 0))
            return sk_einval(err, cap, "a pass TTL or a queue seed needs passes per second");
        if (a->wr_control != 0) return sk_einval(err, cap, "controls need a waiting room");
        if (sl != 0 && (sl >= sizeof a->wr_seed || !sk_activity_seed_valid(a->wr_seed, sl)))
            return sk_einval(err, cap, "the passes' key must be %d to %d lowercase hex digits",
                             SK_ACTIVITY_SEED_MIN, SK_ACTIVITY_SEED_MAX);
        return 0;
    }
    if (a->wr_pass_ttl_s < 1 || a->wr_pass_ttl_s > SK_ACTIVITY_PASS_TTL_MAX)
        return sk_einval(err, cap, "pass TTL must be between 1 and %d seconds (got %lld)",
                         SK_ACTIVITY_PASS_TTL_MAX, (long long)a->wr_pass_ttl_s);
    if (sl >= sizeof a->wr_seed || !sk_activity_seed_valid(a->wr_seed, sl))
        return sk_einval(err, cap, "queue seed must be %d to %d lowercase hex digits",
                         SK_ACTIVITY_SEED_MIN, SK_ACTIVITY_SEED_MAX);
    return 0;
}

/* Pre-registration and the draw: a window closing by the start, on one
 * key set (its registrants are checked in the admission call's slot); a
 * draw needs registration and no waiting room (the draw is its line), a
 * box, a seed and a key for its passes. */
static int validate_fairness(const struct sk_activity *a, char *err, size_t cap)
{
    int reg = a->reg_start_ms != 0 || a->reg_end_ms != 0;
    if (reg) {
        if (a->reg_start_ms < 0 || a->reg_end_ms <= a->reg_start_ms)
            return sk_einval(err, cap, "registration must end after it starts");
        if (a->reg_end_ms > a->start_ms)
            return sk_einval(err, cap, "registration must end by the sale's start");
        if (a->segments > 1)
            return sk_einval(err, cap,
                             "registration needs an activity of one segment (its "
                             "registrants are checked where purchases are decided)");
    }
    size_t dl = strnlen(a->draw_seed, sizeof a->draw_seed);
    if (a->draw_box_s == 0) {
        if (dl != 0) return sk_einval(err, cap, "a draw seed needs allocation draw");
        return 0;
    }
    if (a->draw_box_s < 1 || a->draw_box_s > SK_ACTIVITY_BOX_MAX)
        return sk_einval(err, cap,
                         "a winner's time box must be between 1 and %d seconds (got %lld)",
                         SK_ACTIVITY_BOX_MAX, (long long)a->draw_box_s);
    if (!reg) return sk_einval(err, cap, "allocation draw needs registration");
    if (a->wr_passes_per_s > 0)
        return sk_einval(err, cap,
                         "allocation draw and a waiting room do not go together: the "
                         "draw is the line");
    if (dl >= sizeof a->draw_seed || !sk_activity_draw_seed_valid(a->draw_seed, dl))
        return sk_einval(err, cap, "the draw seed must be %d lowercase hex digits",
                         SK_ACTIVITY_DRAW_SEED_HEX);
    if (!a->wr_seed[0]) return sk_einval(err, cap, "a draw needs a key for its passes");
    return 0;
}

int sk_activity_state_valid(const char *s)
{
    for (size_t i = 0; i < sizeof states / sizeof states[0]; i++)
        if (!strcmp(s, states[i])) return 1;
    return 0;
}

/* Valid UTF-8 without control characters (C0, DEL, C1): a name ends up in
 * terminals, JSON and logs, where those would be trouble. */
static int printable_utf8(const unsigned char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        uint32_t cp;
        size_t len;
        if (c < 0x80) {
            if (c < 0x20 || c == 0x7f) return 0;
            i++;
            continue;
        }
        if (c >= 0xc2 && c <= 0xdf)
            len = 2, cp = c & 0x1f;
        else if (c >= 0xe0 && c <= 0xef)
            len = 3, cp = c & 0x0f;
        else if (c >= 0xf0 && c <= 0xf4)
            len = 4, cp = c & 0x07;
        else
            return 0;
        if (i + len > n) return 0;
        for (size_t k = 1; k < len; k++) {
            if ((s[i + k] & 0xc0) != 0x80) return 0;
            cp = cp << 6 | (s[i + k] & 0x3f);
        }
        if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
            (cp >= 0xd800 && cp <= 0xdfff) || cp <= 0x9f)
            return 0;
        i += len;
    }
    return 1;
}

int sk_activity_validate(const struct sk_activity *a, char *err, size_t cap)
{
    if (a->id < 1 || a->id > SK_ACTIVITY_ID_MAX)
        return sk_einval(err, cap, "id must be between 1 and %llu",
                         (unsigned long long)SK_ACTIVITY_ID_MAX);
    size_t nl = strnlen(a->name, sizeof a->name);
    if (nl == 0) return sk_einval(err, cap, "name must not be empty");
    if (nl >= sizeof a->name)
        return sk_einval(err, cap, "name is longer than %d bytes", SK_ACTIVITY_NAME_MAX - 1);
    if (!printable_utf8((const unsigned char *)a->name, nl))
        return sk_einval(err, cap, "name must be UTF-8 text without control characters");
    if (a->stock < 1 || a->stock > SK_ACTIVITY_STOCK_MAX)
        return sk_einval(err, cap, "stock must be between 1 and %lld (got %lld)",
                         (long long)SK_ACTIVITY_STOCK_MAX, (long long)a->stock);
    if (a->per_user_limit < 1 || a->per_user_limit > SK_ACTIVITY_STOCK_MAX)
        return sk_einval(err, cap, "per-user limit must be between 1 and %lld (got %lld)",
                         (long long)SK_ACTIVITY_STOCK_MAX, (long long)a->per_user_limit);
    if (a->max_per_order == SK_ACTIVITY_UNSET)
        return sk_einval(err, cap, "max per order is not set");
    if (a->max_per_order < 1 || a->max_per_order > SK_ACTIVITY_STOCK_MAX)
        return sk_einval(err, cap, "max per order must be between 1 and %lld (got %lld)",
                         (long long)SK_ACTIVITY_STOCK_MAX, (long long)a->max_per_order);
    if (a->start_ms < 0 || a->start_ms > SK_TIME_MAX_MS)
        return sk_einval(err, cap, "start must be between 1970 and 9999");
    if (a->end_ms < 0 || a->end_ms > SK_TIME_MAX_MS)
        return sk_einval(err, cap, "end must be between 1970 and 9999");
    if (a->end_ms <= a->start_ms) return sk_einval(err, cap, "end must be after start");
    if (a->pay_timeout_s == SK_ACTIVITY_UNSET) return sk_einval(err, cap, "pay timeout is not set");
    if (a->pay_timeout_s < 1 || a->pay_timeout_s > SK_ACTIVITY_PAY_TIMEOUT_MAX)
        return sk_einval(err, cap, "pay timeout must be between 1 and %d seconds (got %lld)",
                         SK_ACTIVITY_PAY_TIMEOUT_MAX, (long long)a->pay_timeout_s);
    if (a->rl_per_user_per_s < 0 || a->rl_per_user_per_s > SK_ACTIVITY_RATE_MAX)
        return sk_einval(err, cap, "rate limit per user must be between 1 and %d per second",
                         SK_ACTIVITY_RATE_MAX);
    if (a->rl_burst < 0 || a->rl_burst > SK_ACTIVITY_RATE_MAX)
        return sk_einval(err, cap, "rate limit burst must be between 1 and %d",
                         SK_ACTIVITY_RATE_MAX);
    if (a->rl_burst > 0 && a->rl_per_user_per_s == 0)
        return sk_einval(err, cap, "a rate limit burst needs a rate limit per user");
    if (a->segments == SK_ACTIVITY_UNSET) return sk_einval(err, cap, "segments is not set");
    if (a->segments < 1 || a->segments > SK_ACTIVITY_SEGMENTS_MAX)
        return sk_einval(err, cap, "segments must be between 1 and %d (got %lld)",
                         SK_ACTIVITY_SEGMENTS_MAX, (long long)a->segments);
    /* Each segment starts with at least one unit of the stock. */
    if (a->segments > a->stock)
        return sk_einval(err, cap,
                         "segments (%lld) must not exceed the stock (%lld): each segment needs "
                         "at least one unit",
                         (long long)a->segments, (long long)a->stock);
    if (validate_waiting_room(a, err, cap) < 0) return SK_EINVAL;
    if (validate_challenge(a, err, cap) < 0) return SK_EINVAL;
    if (validate_fairness(a, err, cap) < 0) return SK_EINVAL;
    if (!memchr(a->state, 0, sizeof a->state) || !sk_activity_state_valid(a->state))
        return sk_einval(err, cap, "state must be created, preheated, open or closed");
    return 0;
}

int sk_activity_control_action(const char *word)
{
    static const struct {
        const char *word;
        int action;
    } w[] = {{"pause", SK_QC_PAUSE},
             {"queue_all", SK_QC_QUEUE_ALL},
             {"refuse_joins", SK_QC_REFUSE_JOINS},
             {"resume", SK_QC_RESUME}};
    for (size_t i = 0; word && i < sizeof w / sizeof w[0]; i++)
        if (!strcmp(word, w[i].word)) return w[i].action;
    return SK_EINVAL;
}

void sk_activity_stock_def(const struct sk_activity *a, struct sk_stock_def *d)
{
    memset(d, 0, sizeof *d);
    d->id = a->id;
    d->initial = a->stock;
    d->per_user_limit = a->per_user_limit;
    d->max_per_order = a->max_per_order;
    d->start_ms = a->start_ms;
    d->end_ms = a->end_ms;
    d->rl_per_user_per_s = a->rl_per_user_per_s;
    d->rl_burst = a->rl_burst;
    d->segments = a->segments;
    if (a->wr_passes_per_s > 0) {
        d->wr_rate = a->wr_passes_per_s;
        d->wr_ttl_s = a->wr_pass_ttl_s;
        d->wr_control = a->wr_control;
    }
    /* a draw's passes are signed with the same field, without a pace */
    if (a->wr_passes_per_s > 0 || a->draw_box_s > 0)
        snprintf(d->wr_seed, sizeof d->wr_seed, "%s", a->wr_seed);
    d->reg_start_ms = a->reg_start_ms;
    d->reg_end_ms = a->reg_end_ms;
    d->dr_box_ms = a->draw_box_s * 1000;
    sk_activity_ch_spec(a, d->ch, sizeof d->ch);
}

void sk_activity_ch_spec(const struct sk_activity *a, char *out, size_t cap)
{
    if (!sk_activity_has_challenge(a))
        snprintf(out, cap, "%s", "");
    else
        snprintf(out, cap, "%lld:%d", (long long)a->ch_pow_min, a->ch_captcha[0] != 0);
}

const char *sk_activity_live_state(int preheated, int switch_open, int64_t start_ms, int64_t end_ms,
                                   int64_t now_ms)
{
    /* Same order of checks as the purchase script, except that "ended" wins:
     * once the window is over nothing can ever sell again. */
    if (now_ms >= end_ms) return "ended";
    if (!preheated || !switch_open) return "closed";
    if (now_ms < start_ms) return "scheduled";
    return "open";
}

/* ---- time ---- */

static int is_leap(int64_t y)
{
    return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

static int days_in_month(int64_t y, int m)
{
    static const int d[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    return m == 2 && is_leap(y) ? 29 : d[m - 1];
}

/* Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's
 * algorithm: exact for every year, no libc time zone involved). */
static int64_t days_from_civil(int64_t y, int m, int d)
{
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

static void civil_from_days(int64_t z, int64_t *y, int *m, int *d)
{
    z += 719468;
    int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    int64_t doe = z - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153;
    *d = (int)(doy - (153 * mp + 2) / 5 + 1);
    *m = (int)(mp < 10 ? mp + 3 : mp - 9);
    *y = yoe + era * 400 + (*m <= 2);
}

/* n decimal digits at s; -1 when any byte is not a digit. */
static int digits(const char *s, int n)
{
    int v = 0;
    for (int i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return -1;
        v = v * 10 + (s[i] - '0');
    }
    return v;
}

int sk_time_parse_rfc3339(const char *s, size_t len, int64_t *ms)
{
    /* YYYY-MM-DDTHH:MM:SS is 19 bytes, the shortest zone "Z" one more. */
    if (!s || len < 20) return SK_EINVAL;
    if (s[4] != '-' || s[7] != '-' || (s[10] != 'T' && s[10] != 't') || s[13] != ':' ||
        s[16] != ':')
        return SK_EINVAL;
    int y = digits(s, 4), mo = digits(s + 5, 2), d = digits(s + 8, 2);
    int h = digits(s + 11, 2), mi = digits(s + 14, 2), sec = digits(s + 17, 2);
    if (y < 0 || mo < 1 || mo > 12 || d < 1 || d > days_in_month(y, mo) || h < 0 || h > 23 ||
        mi < 0 || mi > 59 || sec < 0 || sec > 59)
        return SK_EINVAL;
    size_t i = 19;
    int64_t frac = 0;
    if (s[i] == '.') {
        size_t first = ++i;
        int kept = 0;
        while (i < len && s[i] >= '0' && s[i] <= '9') {
            if (kept < 3) frac = frac * 10 + (s[i] - '0'), kept++;
            i++;
        }
        if (i == first) return SK_EINVAL;
        while (kept < 3)
            frac *= 10, kept++;
    }
    int64_t off_s = 0;
    if (i < len && (s[i] == 'Z' || s[i] == 'z')) {
        i++;
    } else if (i + 6 == len && (s[i] == '+' || s[i] == '-') && s[i + 3] == ':') {
        int oh = digits(s + i + 1, 2), om = digits(s + i + 4, 2);
        if (oh < 0 || oh > 23 || om < 0 || om > 59) return SK_EINVAL;
        off_s = (int64_t)(oh * 3600 + om * 60) * (s[i] == '-' ? -1 : 1);
        i += 6;
    } else {
        return SK_EINVAL;
    }
    if (i != len) return SK_EINVAL;
    int64_t secs = days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + sec - off_s;
    *ms = secs * 1000 + frac;
    return 0;
}

int sk_time_format_rfc3339(int64_t ms, char *buf, size_t cap)
{
    if (cap) buf[0] = 0;
    /* Floor division, so times before 1970 format correctly too. */
    int64_t secs = ms / 1000, rem = ms % 1000;
    if (rem < 0) rem += 1000, secs--;
    int64_t days = secs / 86400, sod = secs % 86400;
    if (sod < 0) sod += 86400, days--;
    int64_t y;
    int m, d;
    civil_from_days(days, &y, &m, &d);
    if (y < 0 || y > 9999) return SK_EINVAL;
    int n;
    if (rem)
        n = snprintf(buf, cap, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", (int)y, m, d,
                     (int)(sod / 3600), (int)(sod / 60 % 60), (int)(sod % 60), (int)rem);
    else
        n = snprintf(buf, cap, "%04d-%02d-%02dT%02d:%02d:%02dZ", (int)y, m, d, (int)(sod / 3600),
                     (int)(sod / 60 % 60), (int)(sod % 60));
    if (n < 0 || (size_t)n >= cap) {
        if (cap) buf[0] = 0;
        return SK_EINVAL;
    }
    return 0;
}

int sk_time_parse_arg(const char *s, size_t len, int64_t now_ms, int64_t base_ms, int64_t *ms)
{
    if (!s) return SK_EINVAL;
    if (len == 3 && !memcmp(s, "now", 3)) {
        *ms = now_ms;
        return 0;
    }
    if (len >= 3 && s[0] == '+') {
        /* At most 9 digits: the largest offset (1e9 days in ms) fits int64. */
        size_t nd = len - 2;
        if (nd > 9) return SK_EINVAL;
        int64_t n = 0;
        for (size_t i = 1; i <= nd; i++) {
            if (s[i] < '0' || s[i] > '9') return SK_EINVAL;
            n = n * 10 + (s[i] - '0');
        }
        int64_t unit;
        switch (s[len - 1]) {
        case 's': unit = 1000; break;
        case 'm': unit = 60 * 1000; break;
        case 'h': unit = 3600 * 1000; break;
        case 'd': unit = 86400 * 1000; break;
        default: return SK_EINVAL;
        }
        if (base_ms > INT64_MAX - n * unit) return SK_EINVAL;
        *ms = base_ms + n * unit;
        return 0;
    }
    return sk_time_parse_rfc3339(s, len, ms);
}
