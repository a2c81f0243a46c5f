/* cli.h - helpers shared by the sub-commands of the seckill binary (the
 * commands themselves: cmd/commands.h).
 *
 * Exit codes: 0 success, 1 runtime failure (server unreachable, drift
 * found), 2 bad usage or bad arguments (nothing was changed). */
#ifndef SK_CLI_H
#define SK_CLI_H
#include <stddef.h>
#include <stdint.h>

#define SK_EXIT_OK 0
#define SK_EXIT_FAIL 1
#define SK_EXIT_USAGE 2

/* Prints "seckill: <msg>" and a newline to stderr and returns code. */
int sk_cli_error(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* sk_cli_error for bad usage: returns SK_EXIT_USAGE. */
#define sk_cli_usage_error(...) sk_cli_error(SK_EXIT_USAGE, __VA_ARGS__)
/* sk_cli_error for a runtime failure such as an unreachable server, as
 * opposed to bad usage: returns SK_EXIT_FAIL. */
#define sk_cli_runtime_error(...) sk_cli_error(SK_EXIT_FAIL, __VA_ARGS__)

/* Strict number parsers for flags: the whole string must be a decimal in
 * [lo, hi]. Return 0 or SK_EINVAL. */
int sk_cli_parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out);
int sk_cli_parse_u64(const char *s, uint64_t *out);

/* The closest of n candidate flags to an unknown one (both "--name"),
 * close enough to be a typo (a few letters changed, missing, added or
 * swapped), or NULL. */
const char *sk_cli_closest(const char *flag, const char *const *cands, size_t n);

/* The one wording of an unknown flag in every command: prints
 * "seckill: CMD: unknown flag FLAG; did you mean CLOSEST?" (or "...; see
 * seckill CMD --help" without one) and returns SK_EXIT_USAGE. */
int sk_cli_unknown_flag(const char *cmd, const char *flag, const char *closest);

#endif
