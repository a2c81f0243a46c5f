/* json_field.h - the tiny JSON reader of `seckill load`: one top-level
 * field of an object text, found without parsing the rest into a tree and
 * without allocating (the answers' order_id, quantity and error). */
#ifndef SK_LOAD_JSON_FIELD_H
#define SK_LOAD_JSON_FIELD_H
#include <stddef.h>

/* Value of a top-level key of a JSON object text (no allocation): for a
 * string the bytes between the quotes (escapes left as they are), for
 * anything else its raw text. Returns 0, SK_ENOTFOUND, or SK_EPROTO when
 * the text is not a JSON object. *is_str tells which (may be NULL). *v
 * points into s. */
int sk_load_json_field(const char *s, size_t n, const char *key, const char **v, size_t *vlen,
                       int *is_str);

#endif
