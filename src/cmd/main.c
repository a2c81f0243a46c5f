/* main.c - the seckill binary: dispatches to sub-commands. The benchmarks
 * are a binary of their own, seckill-bench (bench/main.c). */
#ifndef SK_VERSION
#define SK_VERSION "unknown" /* the Makefile passes the VERSION file's */
#endif
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
    {"activity", sk_cli_activity, "create|preheat|open|close|show|list|delete an activity"},
    {"demo", sk_cli_demo, "a complete flash sale on this machine (private Redis, SQLite, HTTP)"},
    {"serve", sk_cli_serve, "the HTTP service (purchase, activity, admin and ops routes)"},
    {"load", sk_cli_load,
     "HTTP load generator that verifies the answers (no oversell, unique orders)"},
    {"worker", sk_cli_worker, "persist admitted orders from Redis streams into the database"},
    {"reconcile", sk_cli_reconcile,
     "compare Redis with the database, report drift, --repair what is safe"},
    {"events", sk_cli_events, "list the outbox's events (orders and sales) as JSON lines"},
};

static int usage(FILE *f)
{
    fprintf(f, "usage: seckill <command> [options]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].help);
    fprintf(f, "\n`seckill <command> --help` for a command's options; `seckill --version`.\n");
    return f == stdout ? SK_EXIT_OK : SK_EXIT_USAGE;
}

int main(int argc, char **argv)
{
    if (argc < 2) return usage(stderr);
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help"))
        return usage(stdout);
    if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "version")) {
        printf("seckill %s\n", SK_VERSION);
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
    fprintf(stderr, "seckill: unknown command '%s'\n", argv[1]);
    return usage(stderr);
}
