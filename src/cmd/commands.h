/* commands.h - the sub-commands of the seckill binary that live in src/cmd/
 * (main.c dispatches to them; `seckill load` is load/load.h; the benchmarks
 * are a binary of their own, seckill-bench: bench/bench.h). Each takes
 * argc/argv from its own name on and returns an exit code (core/cli.h: 0,
 * 1 runtime failure, 2 usage). */
#ifndef SK_COMMANDS_H
#define SK_COMMANDS_H

int sk_cli_activity(int argc, char **argv);  /* cli_activity.c */
int sk_cli_serve(int argc, char **argv);     /* serve.c */
int sk_cli_demo(int argc, char **argv);      /* demo.c */
int sk_cli_worker(int argc, char **argv);    /* cli_worker.c */
int sk_cli_reconcile(int argc, char **argv); /* cli_reconcile.c */
int sk_cli_events(int argc, char **argv);    /* cli_events.c */
int sk_cli_config(int argc, char **argv);    /* cli_config.c */

/* The release this binary is (the VERSION file, version.c). */
const char *sk_version(void);

#endif
