/* test_router.c - route table matching, fed strings. */
#include <string.h>

#include "http/router.h"
#include "support/harness.h"

static struct sk_route_match match(const char *method, const char *path)
{
    struct sk_route_match m;
    sk_router_match(method, strlen(method), path, strlen(path), &m);
    return m;
}

SK_TEST(router_maps_every_contract_path_and_captures_ids)
{
    struct sk_route_match m = match("POST", "/api/v1/activities/1001/purchase");
    CHECK_EQ(m.status, 200);
    CHECK_EQ(m.route, SK_ROUTE_purchase);
    CHECK_EQ(m.id, 1001);
    m = match("GET", "/api/v1/activities/18446744073709551615");
    CHECK_EQ(m.route, SK_ROUTE_activity);
    CHECK(m.id == UINT64_MAX);
    m = match("POST", "/api/v1/activities");
    CHECK_EQ(m.route, SK_ROUTE_admin_create);
    m = match("GET", "/api/v1/orders/1001-1700000000000-0?x=1");
    CHECK_EQ(m.status, 200);
    CHECK_EQ(m.route, SK_ROUTE_order_get);
    CHECK_EQ(m.param_len, strlen("1001-1700000000000-0"));
    CHECK(memcmp(m.param, "1001-1700000000000-0", m.param_len) == 0);
    CHECK_EQ(match("POST", "/api/v1/orders/x/pay").route, SK_ROUTE_order_pay);
    CHECK_EQ(match("GET", "/metrics").route, SK_ROUTE_metrics);
    CHECK_EQ(match("GET", "/").route, SK_ROUTE_dashboard);
    CHECK_EQ(match("GET", "/api/v1/activities/7/stats").route, SK_ROUTE_admin_stats);
}

SK_TEST(router_rejects_bad_ids_wrong_methods_and_unknown_paths)
{
    /* bad ids: 400; unknown paths: 404; a known path, another method: 405 */
    static const struct {
        const char *method, *path;
        int status;
    } refused[] = {
        {"POST", "/api/v1/activities/0/purchase", 400},
        {"POST", "/api/v1/activities/-1/purchase", 400},
        /* one spelling per id: a gateway rule on "/activities/1001/" holds */
        {"POST", "/api/v1/activities/01001/purchase", 400},
        {"POST", "/api/v1/activities/001001/purchase", 400},
        {"POST", "/api/v1/activities/+1001/purchase", 400},
        {"GET", "/api/v1/activities/00", 400},
        {"GET", "/sale/0042", 400},
        {"POST", "/api/v1/activities/abc/purchase", 400},
        {"POST", "/api/v1/activities/1.5/purchase", 400},
        {"POST", "/api/v1/activities/18446744073709551616/purchase", 400},
        {"POST", "/api/v1/activities/99999999999999999999999/purchase", 400},
        {"DELETE", "/healthz", 405},
        {"GET", "", 404},
        {"GET", "/api", 404},
        {"GET", "/api/v1/activities/1/purchase/", 404},
        {"GET", "/api/v1/activities//purchase", 404},
        {"GET", "/api/v1/orders/", 404},
        {"GET", "/healthz/x", 404},
        {"GET", "//", 404},
        {"GET", "/api/v1/activities/1/buy", 404},
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++)
        CHECK_MSG(match(refused[i].method, refused[i].path).status == refused[i].status,
                  "%s \"%s\": not %d", refused[i].method, refused[i].path, refused[i].status);
    struct sk_route_match m = match("GET", "/api/v1/activities/1/purchase");
    CHECK_EQ(m.status, 405);
    CHECK_STR(m.allow, "POST");
}
