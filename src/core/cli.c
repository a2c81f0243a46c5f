/* cli.c - helpers shared by the sub-commands. */
#include "core/cli.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "core/num.h"

int sk_cli_error(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("seckill: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return code;
}

int sk_cli_parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out)
{
    return s ? sk_num_i64_range(s, strlen(s), lo, hi, out) : SK_EINVAL;
}

int sk_cli_parse_u64(const char *s, uint64_t *out)
{
    return s ? sk_num_u64(s, strlen(s), out) : SK_EINVAL;
}

/* Optimal string alignment distance of a and b (at most 63 bytes each;
 * longer: far). */
static size_t distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 63 || lb > 63) return 64;
    size_t d[64][64];
    for (size_t i = 0; i <= la; i++)
        d[i][0] = i;
    for (size_t j = 0; j <= lb; j++)
        d[0][j] = j;
    for (size_t i = 1; i <= la; i++)
        for (size_t j = 1; j <= lb; j++) {
            size_t cost = a[i - 1] != b[j - 1];
            size_t best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best) best = d[i][j - 1] + 1;
            if (d[i - 1][j - 1] + cost < best) best = d[i - 1][j - 1] + cost;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                d[i - 2][j - 2] + 1 < best)
                best = d[i - 2][j - 2] + 1;
            d[i][j] = best;
        }
    return d[la][lb];
}

const char *sk_cli_closest(const char *flag, const char *const *cands, size_t n)
{
    size_t len = strlen(flag);
    /* a typo, not another word: 1 edit in a short name, 2 or 3 in longer */
    size_t limit = len < 7 ? 1 : len < 13 ? 2 : 3;
    const char *best = NULL;
    size_t best_d = limit + 1;
    for (size_t i = 0; i < n; i++) {
        size_t d = distance(flag, cands[i]);
        if (d < best_d) {
            best = cands[i];
            best_d = d;
        }
    }
    return best;
}

int sk_cli_unknown_flag(const char *cmd, const char *flag, const char *closest)
{
    if (closest)
        return sk_cli_usage_error("%s: unknown flag %s; did you mean %s?", cmd, flag, closest);
    return sk_cli_usage_error("%s: unknown flag %s; see seckill %s --help", cmd, flag, cmd);
}
