/* redact.h - URLs with their secrets replaced, for logs and error text
 * (pure: no I/O, no allocation).
 *
 * A Redis or PostgreSQL URL may carry a password: in the user info
 * ("redis://:pw@host", "postgres://user:pw@host/db") or as a parameter
 * ("postgres://host/db?password=pw", also sslpassword=, or "password=pw"
 * in a key=value string). Whatever the process logs about a URL goes
 * through sk_redact_url first. */
#ifndef SK_REDACT_H
#define SK_REDACT_H
#include <stddef.h>

/* The text that replaces a secret. */
#define SK_REDACTED "***"

/* Copies url into out (cap bytes, always terminated when cap > 0, cut if
 * longer) with the password of the user info (after the first ':' up to
 * the last '@': parsers disagree on what a password may hold unencoded,
 * so this hides the most) and the value of every parameter whose name
 * contains "pass" (any case) replaced by SK_REDACTED. NULL url gives "".
 * Returns out. */
const char *sk_redact_url(const char *url, char *out, size_t cap);

#endif
