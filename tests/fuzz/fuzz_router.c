/* fuzz_router.c - method and path to a route (http/router.h): the input
 * is "METHOD PATH", split at the first space. */
#include <string.h>

#include "fuzz.h"
#include "http/router.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *sp = memchr(data, ' ', size);
    size_t ml = sp ? (size_t)(sp - data) : 0;
    size_t pl = sp ? size - ml - 1 : size;
    char *method = fuzz_copy(data, ml), *path = fuzz_copy(sp ? sp + 1 : data, pl);
    struct sk_route_match m;
    sk_router_match(method, ml, path, pl, &m);
    FUZZ_CHECK(m.status == 200 || m.status == 400 || m.status == 404 || m.status == 405);
    if (m.status != 404) FUZZ_CHECK(m.route < SK_ROUTE_COUNT && sk_route_name(m.route));
    if (m.status == 200 && m.param)
        FUZZ_CHECK(m.param >= path && m.param + m.param_len <= path + pl);
    if (m.status == 405) FUZZ_CHECK(m.allow != NULL);
    if (m.status == 200 && strstr(sk_route_name(m.route), "activit")) FUZZ_CHECK(m.id >= 1);
    free(method);
    free(path);
    return 0;
}
