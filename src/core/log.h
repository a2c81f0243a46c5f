/* log.h - one-line logs to stderr: "2026-11-29T10:00:00.123Z seckill[pid] LEVEL msg". */
#ifndef SK_LOG_H
#define SK_LOG_H

enum sk_log_level { SK_LOG_DEBUG, SK_LOG_INFO, SK_LOG_WARN, SK_LOG_ERROR };

/* Messages below this level are dropped (default INFO). */
void sk_log_set_level(enum sk_log_level l);
/* Parses "debug|info|warn|error": 0 or SK_EINVAL. */
int sk_log_parse_level(const char *s, enum sk_log_level *out);
void sk_log(enum sk_log_level l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
