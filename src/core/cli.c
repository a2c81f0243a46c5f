/* cli.c - helpers shared by the sub-commands. */
#include "core/cli.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
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

const char *sk_cli_redis_url(const char *flag)
{
    const char *e = getenv("SECKILL_REDIS");
    return flag ? flag : (e && *e ? e : "redis://127.0.0.1:6379");
}

const char *sk_cli_db_spec(const char *flag)
{
    const char *e = getenv("SECKILL_DB");
    return flag ? flag : (e && *e ? e : "sqlite:seckill.db");
}
