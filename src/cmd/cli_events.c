/* cli_events.c - `seckill events list`: the outbox (store.h, migration 12)
 * as JSON lines, oldest first, for an operator or a script that feeds an
 * order system (docs/integration.md), read only; `seckill events replay`:
 * a webhook endpoint's cursor set back, so the worker's dispatcher
 * delivers again what was written since a time. Both read their store
 * through the one config loader (settings.h). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cmd/commands.h"
#include "cmd/db_file.h"
#include "cmd/settings.h"
#include "core/cli.h"
#include "core/clock.h"
#include "core/error.h"
#include "engine/activity.h"
#include "http/http_body.h"
#include "orders/webhooks.h"
#include "store/store.h"

#define PAGE 256

static int usage(FILE *f)
{
    fprintf(f, "usage: seckill events list [--config FILE] [--db SPEC] [--after ID] [--since T]\n"
               "                           [--type TYPE] [--limit N]\n"
               "       seckill events replay --since T --endpoint E [--config FILE] [--db SPEC]\n"
               "  list: the outbox's events, one JSON object a line, oldest first.\n"
               "    --after ID   only events whose row id is above ID (paging)\n"
               "    --since T    only events written at or after T\n"
               "    --type TYPE  only events of this type (order.paid, activity.sold_out, ...)\n"
               "    --limit N    at most N events (default all)\n"
               "  replay: the webhook endpoint E delivers again every event written at or after\n"
               "    T (receivers drop the ones they had by webhook-id). E is the configured\n"
               "    endpoint's name (webhook_name) or ACTIVITY/NAME for one the admin API added.\n"
               "    The worker's dispatcher takes it up within a second.\n"
               "  T: an RFC 3339 time (2026-12-06T20:00:00Z) or milliseconds since the epoch.\n"
               "  --config FILE  the config file (default $SECKILL_CONFIG, else\n"
               "                 /etc/seckill/seckill.conf when it exists); its db and log_level\n"
               "                 keys are read\n"
               "  --db SPEC      the store (" SK_STORE_SPECS "; default sqlite:seckill.db)\n"
               "Flags win over SECKILL_DB, which wins over the config file.\n"
               "exit: 0 done, 1 failure (the database), 2 bad usage (nothing was changed)\n");
    return f == stdout ? SK_EXIT_OK : SK_EXIT_USAGE;
}

/* One event as a JSON line: its stable id, its columns, its payload. */
static int print_event(const struct sk_event *e)
{
    json_error_t jerr;
    json_t *data = json_loads(e->payload, 0, &jerr);
    char id[SK_STORE_SUBJECT_MAX + 24];
    snprintf(id, sizeof id, "%s:%" PRId64, e->subject, e->seq);
    json_t *o =
        json_pack("{s:I, s:s, s:s, s:s, s:I, s:I, s:I, s:o}", "row", (json_int_t)e->id, "id", id,
                  "type", e->type, "subject", e->subject, "seq", (json_int_t)e->seq, "activity_id",
                  (json_int_t)e->activity_id, "created_ms", (json_int_t)e->created_ms, "data",
                  data ? data : json_string(e->payload));
    if (!o) return -1;
    if (e->order_id[0]) json_object_set_new(o, "order_id", json_string(e->order_id));
    char *s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(o);
    if (!s) return -1;
    puts(s);
    free(s);
    return 0;
}

enum { F_AFTER, F_SINCE, F_TYPE, F_LIMIT, F_ENDPOINT };
static const struct sk_flag flags[] = {
    [F_AFTER] = {"--after", 1}, [F_SINCE] = {"--since", 1},       [F_TYPE] = {"--type", 1},
    [F_LIMIT] = {"--limit", 1}, [F_ENDPOINT] = {"--endpoint", 1},
};
#define LIST_FLAGS ((1u << F_AFTER) | (1u << F_SINCE) | (1u << F_TYPE) | (1u << F_LIMIT))
#define REPLAY_FLAGS ((1u << F_SINCE) | (1u << F_ENDPOINT))

/* T: an RFC 3339 time or ms since the epoch; 0 or SK_EINVAL. */
static int parse_time(const char *v, int64_t *ms)
{
    if (v[0] >= '0' && v[0] <= '9' && strspn(v, "0123456789") == strlen(v))
        return sk_cli_parse_i64(v, 0, SK_TIME_MAX_MS, ms) ? SK_EINVAL : 0;
    return sk_time_parse_rfc3339(v, strlen(v), ms) < 0 || *ms < 0 ? SK_EINVAL : 0;
}

/* The store of s's db key, opened for a read or a change of what is
 * there (a mistyped SQLite path is named, never created): 0 or the exit
 * code. */
static int open_store(const struct sk_settings *s, sk_store **st)
{
    char err[512];
    if (sk_db_file_check(s->cfg.db, 0, err, sizeof err) < 0)
        return sk_cli_runtime_error("%s: %s", s->cmd, err);
    int rc = sk_store_open(st, s->cfg.db, err, sizeof err);
    if (rc == SK_EINVAL) return sk_cli_usage_error("%s: --db: %s", s->cmd, err);
    if (rc < 0) return sk_cli_runtime_error("%s: database: %s", s->cmd, err);
    return 0;
}

static int list(const struct sk_settings *s)
{
    const char *type = s->val[F_TYPE], *v;
    int64_t after = 0, since = INT64_MIN, limit = INT64_MAX;
    if ((v = s->val[F_AFTER]) && sk_cli_parse_i64(v, 0, INT64_MAX, &after))
        return sk_cli_usage_error("events list: --after: expected a number >= 0, got \"%.40s\"", v);
    if ((v = s->val[F_LIMIT]) && sk_cli_parse_i64(v, 1, INT64_MAX, &limit))
        return sk_cli_usage_error("events list: --limit: expected a number >= 1, got \"%.40s\"", v);
    if ((v = s->val[F_SINCE]) && parse_time(v, &since))
        return sk_cli_usage_error("events list: --since: expected an RFC 3339 time or "
                                  "milliseconds since the epoch, got \"%.40s\"",
                                  v);
    sk_store *st;
    int rc = open_store(s, &st);
    if (rc) return rc;
    struct sk_event *page = malloc(PAGE * sizeof *page);
    if (!page) {
        sk_store_close(st);
        return sk_cli_runtime_error("events list: out of memory");
    }
    int64_t shown = 0;
    int32_t sub = SK_EVENT_ROW_END; /* --after: a row; then within a batch row */
    for (;;) {
        size_t n = 0;
        if ((rc = sk_store_events_list_at(st, after, sub, PAGE, page, &n)) != 0) break;
        for (size_t i = 0; i < n && shown < limit; i++) {
            after = page[i].id;
            sub = page[i].sub;
            if (page[i].created_ms < since || (type && strcmp(type, page[i].type))) continue;
            if (print_event(&page[i]) < 0) {
                rc = SK_ENOMEM;
                break;
            }
            shown++;
        }
        if (rc || n < PAGE || shown >= limit) break;
    }
    free(page);
    int code =
        rc ? sk_cli_runtime_error("events list: database: %s", sk_store_errstr(st)) : SK_EXIT_OK;
    sk_store_close(st);
    return code;
}

/* E: a configured name, or ACTIVITY/NAME; the cursor's key into key. */
static int endpoint_key(const char *e, char key[SK_STORE_WH_KEY_MAX], uint64_t *aid,
                        char name[SK_STORE_WH_NAME_MAX])
{
    const char *slash = strchr(e, '/');
    *aid = 0;
    if (!slash) {
        if (!sk_wh_name_ok(e)) return SK_EINVAL;
        snprintf(key, SK_STORE_WH_KEY_MAX, "%s", e);
        return 0;
    }
    char num[24];
    size_t nl = (size_t)(slash - e);
    if (nl == 0 || nl >= sizeof num) return SK_EINVAL;
    memcpy(num, e, nl);
    num[nl] = 0;
    const char *nm = slash + 1;
    size_t len = strlen(nm);
    if (sk_cli_parse_u64(num, aid) || *aid < 1 || *aid > SK_ACTIVITY_ID_MAX ||
        !sk_body_wh_name_ok(nm, len))
        return SK_EINVAL;
    snprintf(name, SK_STORE_WH_NAME_MAX, "%s", nm);
    sk_store_webhook_key(key, *aid, name);
    return 0;
}

static int replay(const struct sk_settings *s)
{
    const char *v = s->val[F_SINCE], *e = s->val[F_ENDPOINT];
    int64_t since;
    char key[SK_STORE_WH_KEY_MAX], name[SK_STORE_WH_NAME_MAX] = "";
    uint64_t aid;
    if (!v || !e) return sk_cli_usage_error("events replay: needs --since T and --endpoint E");
    if (parse_time(v, &since))
        return sk_cli_usage_error("events replay: --since: expected an RFC 3339 time or "
                                  "milliseconds since the epoch, got \"%.40s\"",
                                  v);
    if (endpoint_key(e, key, &aid, name))
        return sk_cli_usage_error("events replay: --endpoint: expected a configured endpoint's "
                                  "name or ACTIVITY/NAME, got \"%.80s\"",
                                  e);
    sk_store *st;
    int rc = open_store(s, &st);
    if (rc) return rc;
    struct sk_store_webhook w;
    int64_t row = 0, n = 0;
    rc = aid ? sk_store_webhook_get(st, aid, name, &w) : 0;
    if (rc == 0) rc = sk_store_webhook_rewind(st, key, since, sk_wall_ms(), &row, &n);
    int code = SK_EXIT_OK;
    if (rc == SK_ENOTFOUND)
        code = sk_cli_usage_error("events replay: %s: no such webhook endpoint (or it never "
                                  "delivered anything yet)",
                                  key);
    else if (rc)
        code = sk_cli_runtime_error("events replay: database: %s", sk_store_errstr(st));
    else
        printf("endpoint %s: %" PRId64 " event(s) will be delivered again (cursor at row %" PRId64
               ")\n",
               key, n, row);
    sk_store_close(st);
    return code;
}

int sk_cli_events(int argc, char **argv)
{
    if (argc < 2) return usage(stderr);
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) return usage(stdout);
    int is_list = !strcmp(argv[1], "list");
    if (!is_list && strcmp(argv[1], "replay"))
        return sk_cli_usage_error("events: unknown sub-command \"%.40s\" (list, replay)", argv[1]);
    struct sk_settings *s =
        sk_settings_new(is_list ? "events list" : "events replay", SK_USE_RECONCILE, flags,
                        sizeof flags / sizeof flags[0], is_list ? LIST_FLAGS : REPLAY_FLAGS);
    if (!s) return sk_cli_runtime_error("events: out of memory");
    int rc = sk_settings_load(s, argc - 1, argv + 1);
    if (rc == 0 && s->help)
        rc = usage(stdout);
    else if (rc == 0)
        rc = is_list ? list(s) : replay(s);
    sk_settings_free(s);
    return rc;
}
