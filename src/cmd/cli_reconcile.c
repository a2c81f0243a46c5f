/* cli_reconcile.c - `seckill reconcile`: the drift report of every activity
 * (or one), optionally repaired (reconcile.h, docs/reconcile.md).
 *
 * Exit codes: 0 consistent (after the repair, when --repair), 1 drift left
 * or a runtime failure (Redis or the database unreachable), 2 bad usage
 * (unknown flag, bad value, unknown activity: nothing was changed). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cmd/commands.h"
#include "cmd/db_file.h"
#include "cmd/settings.h"
#include "core/cli.h"
#include "core/error.h"
#include "engine/activity.h"
#include "engine/live_acts.h"
#include "orders/reconcile.h"
#include "redis/redis_conn.h"
#include "store/store.h"

static int usage(FILE *f)
{
    fprintf(f, "usage: seckill reconcile [--config FILE] [options]\n"
               "  Compares each activity's live state in Redis (stock, buyers, ledger, stream\n"
               "  backlog, dead letters) with the database (orders by status, DB stock) and\n"
               "  reports every drift. A segmented activity is checked segment by segment,\n"
               "  with its stock transfers between segments. See docs/reconcile.md.\n"
               "  It opens an existing database only (a SQLite file that is not there is an\n"
               "  error, never a new empty one).\n\n"
               "  --config FILE     the config file (default $SECKILL_CONFIG, else\n"
               "                    /etc/seckill/seckill.conf when it exists); its redis, db\n"
               "                    and log_level keys are read, the others ignored\n"
               "  --redis URL       default redis://127.0.0.1:6379 (also redis+unix://,\n"
               "                    redis+sentinel://, redis+cluster://)\n"
               "  --db SPEC         sqlite:PATH, postgres://... or mysql://... (default\n"
               "                    sqlite:seckill.db)\n"
               "  --log-level LEVEL debug, info (default), warn or error\n"
               "  --activity ID     only this activity (default: every activity in the database,\n"
               "                    and every activity Redis holds: one live in Redis that\n"
               "                    the database does not hold is drift)\n"
               "  --repair          fix what is provably safe, one audit row per change (and\n"
               "                    roll forward stock transfers never applied), then check\n"
               "                    again\n"
               "  --json            the report as JSON on stdout\n"
               "  --max-lines N     drift lines shown per kind (default 20)\n"
               "  --stale-after S   an admitted order still not in the database S seconds after\n"
               "                    its admission is drift (stale: the order pipeline is stuck);\n"
               "                    default 60, 0 = not checked\n"
               "Flags win over SECKILL_REDIS, SECKILL_DB, SECKILL_LOG_LEVEL, which win over the\n"
               "config file (docs/configuration.md).\n"
               "exit: 0 consistent, 1 drift (left after --repair) or failure, 2 bad usage\n");
    return f == stdout ? SK_EXIT_OK : SK_EXIT_USAGE;
}

/* The activities Redis holds that the database does not list, added to
 * ids[0..*n) (every master's keys walked: engine/live_acts.h): live in
 * Redis and unknown here is drift too (db_missing, its fix named). */
static int add_live_only(sk_redis *r, uint64_t **ids, size_t *n)
{
    struct sk_live_act *live;
    size_t nlive;
    int rc = sk_live_acts(r, &live, &nlive);
    if (rc) return rc;
    size_t known = *n;
    for (size_t i = 0; i < nlive && rc == 0; i++) {
        int listed = 0;
        for (size_t j = 0; j < known && !listed; j++)
            listed = (*ids)[j] == live[i].id;
        if (listed) continue;
        uint64_t *grown = realloc(*ids, (*n + 1) * sizeof **ids);
        if (!grown) {
            rc = SK_ENOMEM;
            break;
        }
        *ids = grown;
        (*ids)[(*n)++] = live[i].id;
    }
    free(live);
    return rc;
}

/* Checks (and with repair, repairs) one activity or every one. */
static int run(const char *redis_url, const char *db, uint64_t only, int repair, int json,
               int64_t max_lines, int64_t stale_s)
{
    char err[512];
    sk_redis *r;
    int rc = sk_redis_new(&r, redis_url, 2000, 10000, err, sizeof err);
    if (rc == SK_EINVAL) return sk_cli_usage_error("reconcile: --redis: %s", err);
    if (rc) return sk_cli_runtime_error("reconcile: redis: %s", err);
    sk_store *st;
    rc = sk_store_open(&st, db, err, sizeof err);
    if (rc) {
        sk_redis_free(r);
        if (rc == SK_EINVAL) return sk_cli_usage_error("reconcile: --db: %s", err);
        return sk_cli_runtime_error("reconcile: database: %s", err);
    }
    uint64_t *ids = NULL;
    size_t n = 0;
    if (only) {
        ids = malloc(sizeof *ids);
        if (ids) {
            ids[0] = only;
            n = 1;
        } else {
            rc = SK_ENOMEM;
        }
    } else {
        rc = sk_store_activity_ids(st, &ids, &n);
    }
    int ret = SK_EXIT_OK, lrc = rc || only ? 0 : add_live_only(r, &ids, &n);
    if (lrc) {
        ret = sk_cli_runtime_error("reconcile: redis: %s",
                                   lrc == SK_ENOMEM ? "out of memory" : r->errstr);
        n = 0;
    } else if (rc) {
        ret = sk_cli_runtime_error("reconcile: database: %s",
                                   rc == SK_ENOMEM ? "out of memory" : sk_store_errstr(st));
        n = 0;
    }
    struct sk_reconcile_opts o;
    sk_reconcile_opts_init(&o);
    o.repair = repair;
    o.stale_after_ms = stale_s * 1000;
    json_t *out = json ? json_object() : NULL, *arr = json ? json_array() : NULL;
    size_t drifted = 0, checked = 0;
    for (size_t i = 0; i < n; i++) {
        struct sk_reconcile_report rep;
        rc = sk_reconcile_activity(st, r, ids[i], &o, &rep);
        if (rc == SK_ENOTFOUND) {
            sk_reconcile_report_free(&rep);
            ret = sk_cli_usage_error(
                "reconcile: activity %" PRIu64 " is neither in the database nor in Redis", ids[i]);
            break;
        }
        if (rc) {
            const char *why = rc == SK_EDB || rc == SK_ETIMEDOUT ? sk_store_errstr(st)
                              : rc == SK_ENOMEM                  ? "out of memory"
                                                                 : r->errstr;
            sk_reconcile_report_free(&rep);
            ret = sk_cli_runtime_error("reconcile: activity %" PRIu64 ": %s", ids[i], why);
            break;
        }
        checked++;
        if (!rep.consistent) drifted++;
        /* drift that is news goes to the outbox (reconcile.drift); a
         * database that refuses the write does not change the verdict */
        if (rep.total && sk_reconcile_drift_event(st, &rep, 0, 0) < 0)
            fprintf(stderr,
                    "reconcile: activity %" PRIu64 ": reconcile.drift event not written: %s\n",
                    ids[i], sk_store_errstr(st));
        if (json)
            json_array_append_new(arr, sk_reconcile_json(&rep, (size_t)max_lines));
        else
            sk_reconcile_print(stdout, &rep, (size_t)max_lines);
        sk_reconcile_report_free(&rep);
    }
    if (ret == SK_EXIT_OK && drifted) ret = SK_EXIT_FAIL;
    if (json) {
        json_object_set_new(out, "consistent", json_boolean(ret == SK_EXIT_OK));
        json_object_set_new(out, "checked", json_integer((json_int_t)checked));
        json_object_set_new(out, "drifted", json_integer((json_int_t)drifted));
        json_object_set_new(out, "activities", arr);
        if (ret != SK_EXIT_USAGE) {
            char *text = json_dumps(out, JSON_INDENT(2));
            if (text) puts(text);
            free(text);
        }
        json_decref(out);
    } else if (ret != SK_EXIT_USAGE && (checked || n == 0)) {
        if (drifted)
            printf("reconcile: drift in %zu of %zu activit%s\n", drifted, checked,
                   checked == 1 ? "y" : "ies");
        else if (ret == SK_EXIT_OK)
            printf("reconcile: %zu activit%s consistent\n", checked, checked == 1 ? "y" : "ies");
    }
    free(ids);
    sk_store_close(st);
    sk_redis_free(r);
    return ret;
}

enum { F_ACTIVITY, F_REPAIR, F_JSON, F_MAX_LINES, F_STALE };
static const struct sk_flag flags[] = {
    [F_ACTIVITY] = {"--activity", 1},   [F_REPAIR] = {"--repair", 0},     [F_JSON] = {"--json", 0},
    [F_MAX_LINES] = {"--max-lines", 1}, [F_STALE] = {"--stale-after", 1},
};

/* Its own flags' values; 0 or an exit code. */
static int reconcile_flags(const struct sk_settings *s, uint64_t *only, int64_t *max_lines,
                           int64_t *stale_s)
{
    const char *v = s->val[F_ACTIVITY];
    if (v && (sk_cli_parse_u64(v, only) || *only < 1 || *only > SK_ACTIVITY_ID_MAX))
        return sk_cli_usage_error("reconcile: --activity must be a whole number between "
                                  "1 and %llu, got '%s'",
                                  (unsigned long long)SK_ACTIVITY_ID_MAX, v);
    if ((v = s->val[F_STALE]) && sk_cli_parse_i64(v, 0, 31536000, stale_s))
        return sk_cli_usage_error("reconcile: --stale-after: expected seconds between 0 "
                                  "and 31536000, got '%s'",
                                  v);
    if ((v = s->val[F_MAX_LINES]) && sk_cli_parse_i64(v, 1, 1000000000, max_lines))
        return sk_cli_usage_error("reconcile: --max-lines: expected a number >= 1, got '%s'", v);
    return 0;
}

int sk_cli_reconcile(int argc, char **argv)
{
    struct sk_settings *s =
        sk_settings_new("reconcile", SK_USE_RECONCILE, flags, sizeof flags / sizeof flags[0], 0);
    if (!s) return sk_cli_runtime_error("reconcile: out of memory");
    uint64_t only = 0;
    int64_t max_lines = 20;
    int64_t stale_s = SK_RECONCILE_STALE_AFTER_MS / 1000;
    char err[512];
    int rc = sk_settings_load(s, argc, argv);
    if (rc == 0 && s->help)
        rc = usage(stdout);
    else if (rc == 0)
        rc = reconcile_flags(s, &only, &max_lines, &stale_s);
    if (rc == 0 && !s->help && sk_db_file_check(s->cfg.db, 0, err, sizeof err) < 0)
        rc = sk_cli_runtime_error("reconcile: %s", err);
    if (rc || s->help) {
        sk_settings_free(s);
        return rc;
    }
    rc = run(s->cfg.redis, s->cfg.db, only, s->val[F_REPAIR] != NULL, s->val[F_JSON] != NULL,
             max_lines, stale_s);
    sk_settings_free(s);
    return rc;
}
