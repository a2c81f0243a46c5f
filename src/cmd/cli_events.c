/* cli_events.c - `seckill events list`: the outbox (store.h, migration 11)
 * as JSON lines, oldest first, for an operator or a script that feeds an
 * order system (docs/integration.md). Read only. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cmd/commands.h"
#include "cmd/db_file.h"
#include "core/cli.h"
#include "core/error.h"
#include "store/store.h"

#define PAGE 256

static int usage(FILE *f)
{
    fprintf(f, "usage: seckill events list [--db SPEC] [--after ID] [--since MS] [--type TYPE]\n"
               "                           [--limit N]\n"
               "  The outbox's events, one JSON object a line, oldest first.\n"
               "  --db SPEC    the store (" SK_STORE_SPECS "; default $SECKILL_DB)\n"
               "  --after ID   only events whose row id is above ID (paging)\n"
               "  --since MS   only events written at or after MS (ms since the epoch)\n"
               "  --type TYPE  only events of this type (order.paid, activity.sold_out, ...)\n"
               "  --limit N    at most N events (default all)\n");
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

static int list(int argc, char **argv)
{
    const char *db = NULL, *type = NULL;
    int64_t after = 0, since = INT64_MIN, limit = INT64_MAX;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) return usage(stdout);
        if (i + 1 >= argc)
            return sk_cli_usage_error("events list: unknown flag or missing value: %s", a);
        const char *v = argv[++i];
        if (!strcmp(a, "--db"))
            db = v;
        else if (!strcmp(a, "--type"))
            type = v;
        else if (!strcmp(a, "--after") || !strcmp(a, "--since") || !strcmp(a, "--limit")) {
            int64_t *to = a[2] == 'a' ? &after : a[2] == 's' ? &since : &limit;
            if (sk_cli_parse_i64(v, a[2] == 'l' ? 1 : 0, INT64_MAX, to) < 0)
                return sk_cli_usage_error("events list: %s: expected a number%s, got \"%.40s\"", a,
                                          a[2] == 'l' ? " >= 1" : " >= 0", v);
        } else {
            return sk_cli_usage_error("events list: unknown flag: %s", a);
        }
    }
    if (!db || !*db) db = getenv("SECKILL_DB");
    if (!db || !*db)
        return sk_cli_usage_error("events list: name the store with --db or SECKILL_DB");
    sk_store *st;
    char err[512];
    /* a read: a mistyped SQLite path must not become an empty store */
    if (sk_db_file_check(db, 0, err, sizeof err) < 0)
        return sk_cli_runtime_error("events list: %s", err);
    int rc = sk_store_open(&st, db, err, sizeof err);
    if (rc == SK_EINVAL) return sk_cli_usage_error("events list: --db: %s", err);
    if (rc < 0) return sk_cli_runtime_error("events list: database: %s", err);
    struct sk_event *page = malloc(PAGE * sizeof *page);
    if (!page) {
        sk_store_close(st);
        return sk_cli_runtime_error("events list: out of memory");
    }
    int64_t shown = 0;
    for (;;) {
        size_t n = 0;
        if ((rc = sk_store_events_list(st, after, PAGE, page, &n)) != 0) break;
        for (size_t i = 0; i < n && shown < limit; i++) {
            after = page[i].id;
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

int sk_cli_events(int argc, char **argv)
{
    if (argc < 2) return usage(stderr);
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) return usage(stdout);
    if (!strcmp(argv[1], "list")) return list(argc - 2, argv + 2);
    return sk_cli_usage_error("events: unknown sub-command \"%.40s\" (list)", argv[1]);
}
