/* resp.c - a Redis command's bytes (resp.h). */
#include "redis/resp.h"

#include <stdint.h>
#include <string.h>

#include "core/num.h"

static size_t digits(size_t v)
{
    size_t n = 1;
    while (v >= 10) {
        v /= 10;
        n++;
    }
    return n;
}

static size_t arg_len(const char *const *argv, const size_t *lens, int i)
{
    return lens ? lens[i] : strlen(argv[i]);
}

size_t sk_resp_cmd_len(int argc, const char *const *argv, const size_t *lens)
{
    size_t n = 1 + digits((size_t)argc) + 2; /* *<argc>\r\n */
    for (int i = 0; i < argc; i++) {
        size_t l = arg_len(argv, lens, i);
        n += 1 + digits(l) + 2 + l + 2; /* $<len>\r\n<bytes>\r\n */
    }
    return n;
}

char *sk_resp_cmd_put(char *p, int argc, const char *const *argv, const size_t *lens)
{
    *p++ = '*';
    p = sk_num_u64_put(p, (uint64_t)argc);
    *p++ = '\r';
    *p++ = '\n';
    for (int i = 0; i < argc; i++) {
        size_t l = arg_len(argv, lens, i);
        *p++ = '$';
        p = sk_num_u64_put(p, l);
        *p++ = '\r';
        *p++ = '\n';
        if (l) memcpy(p, argv[i], l);
        p += l;
        *p++ = '\r';
        *p++ = '\n';
    }
    return p;
}
