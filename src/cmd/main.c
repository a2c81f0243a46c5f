/* main.c - the seckill binary: dispatches to sub-commands. The benchmarks
 * are a binary of their own, seckill-bench (bench/main.c). */
#include <stdio.h>
#include <string.h>

#include "cmd/commands.h"
#include "core/cli.h"
#include "core/crash.h"
#include "load/load.h"

static const struct {
    const char *name;
    int (*fn)(int, char **);
    const char *help;
} commands[] = {
    {"serve", sk_cli_serve,
     "the HTTP service: purchases, orders, the admin API, the ops routes, and\n"
     "             the order worker (serve --check: is everything it needs there?)"},
    {"worker", sk_cli_worker, "persist admitted orders from the Redis streams into the database"},
    {"activity", sk_cli_activity,
     "an activity's life: create, preheat, open, close, show, list, delete,\n"
     "             recover (rebuild Redis from the orders), page (the buyer's page)"},
    {"reconcile", sk_cli_reconcile,
     "compare Redis with the database, report drift, --repair what is safe"},
    {"config", sk_cli_config, "print the settings that apply and where each comes from"},
    {"load", sk_cli_load,
     "HTTP load generator that verifies the answers (no oversell, unique orders)"},
    {"demo", sk_cli_demo, "a complete flash sale on this machine (private Redis, SQLite, HTTP)"},
    {"events", sk_cli_events, "list the outbox's events (orders and sales) as JSON lines"},
};

static int usage(FILE *f)
{
    fprintf(f, "usage: seckill <command> [options]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].help);
    fprintf(f, "\nstores:  sqlite:PATH, postgres://... (PostgreSQL), mysql://... or mariadb://...\n"
               "         (MariaDB, MySQL)\n"
               "redis:   redis://, redis+unix://, redis+sentinel:// (Sentinel), redis+cluster://\n"
               "config:  flags > SECKILL_* variables > --config FILE (else\n"
               "         /etc/seckill/seckill.conf) > defaults; `seckill config` shows them\n"
               "\n`seckill <command> --help` for a command's flags; `seckill --version`;\n"
               "man seckill, man seckill.conf.\n");
    return f == stdout ? SK_EXIT_OK : SK_EXIT_USAGE;
}

int main(int argc, char **argv)
{
    if (argc < 2) return usage(stderr);
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help"))
        return usage(stdout);
    if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "version")) {
        printf("seckill %s\n", sk_version());
        return SK_EXIT_OK;
    }
    sk_crash_trace_install(); /* a fault's stack goes to the log first */
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name)) return commands[i].fn(argc - 1, argv + 1);
    /* the benchmarks left this binary: say where they went */
    if (!strcmp(argv[1], "bench"))
        return sk_cli_usage_error(
            "the benchmarks are a binary of their own: run `seckill-bench%s%s` "
            "(built beside seckill, installed with it)",
            argc > 2 ? " " : "", argc > 2 ? argv[2] : "");
    const char *names[sizeof commands / sizeof commands[0]];
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        names[i] = commands[i].name;
    const char *near = sk_cli_closest(argv[1], names, sizeof names / sizeof names[0]);
    if (near)
        fprintf(stderr, "seckill: unknown command '%s'; did you mean %s?\n", argv[1], near);
    else
        fprintf(stderr, "seckill: unknown command '%s'\n", argv[1]);
    return usage(stderr);
}
