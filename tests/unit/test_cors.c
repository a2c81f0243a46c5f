/* test_cors.c - the CORS policy (http/cors.h) and the cors_origins key,
 * fed strings; the exported page's builder (http/sale_page.h). */
#include <stdlib.h>
#include <string.h>

#include "http/config.h"
#include "http/cors.h"
#include "http/router.h"
#include "http/sale_page.h"
#include "support/harness.h"

static int allowed(const char *list, const char *origin)
{
    return sk_cors_allowed(list, origin, strlen(origin));
}

SK_TEST(cors_list_is_normalised_and_matches_exact_origins_only)
{
    char out[SK_CORS_LIST_MAX], err[200];
    CHECK_EQ(sk_cors_parse_list(" https://Shop.Example ,http://127.0.0.1:8000,,http://[::1]:9 ",
                                out, sizeof out, err, sizeof err),
             0);
    CHECK_STR(out, "https://shop.example,http://127.0.0.1:8000,http://[::1]:9");
    CHECK(allowed(out, "https://shop.example") && allowed(out, "HTTPS://SHOP.EXAMPLE"));
    CHECK(allowed(out, "http://127.0.0.1:8000") && allowed(out, "http://[::1]:9"));
    CHECK(!allowed(out, "https://shop.example:443") && !allowed(out, "http://shop.example"));
    CHECK(!allowed(out, "https://shop.exampl") && !allowed(out, "https://shop.example.evil"));
    CHECK(!allowed(out, "null") && !allowed(out, "") && !allowed(out, "http://127.0.0.1:800"));
    CHECK(!sk_cors_allowed(out, NULL, 0));
    CHECK_EQ(sk_cors_parse_list("off", out, sizeof out, err, sizeof err), 0);
    CHECK_STR(out, "");
    CHECK(!allowed(out, "https://shop.example"));
    const char *bad[] = {"*",
                         "https://a.example/",
                         "https://a.example/x",
                         "ftp://a",
                         "https://",
                         "https://a.example:0",
                         "https://a.example:65536",
                         "https://a_b.example",
                         "http://[zz]:1",
                         "https://a.example:8x",
                         "http://[]"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK_MSG(sk_cors_parse_list(bad[i], out, sizeof out, err, sizeof err) < 0 && err[0],
                  "%s accepted", bad[i]);
    /* at most 16 */
    char many[2048] = "";
    for (int i = 0; i < 17; i++)
        snprintf(many + strlen(many), sizeof many - strlen(many), "https://h%d.example,", i);
    CHECK(sk_cors_parse_list(many, out, sizeof out, err, sizeof err) < 0 && strstr(err, "16"));
}

static size_t len_of(const char *s)
{
    return s ? strlen(s) : 0;
}

SK_TEST(cors_preflight_verdicts)
{
    const char *list = "https://shop.example";
#define PF(o, m, h) sk_cors_preflight(list, o, len_of(o), m, len_of(m), h, len_of(h))
    CHECK_EQ(PF("https://shop.example", "POST", "Content-Type, Idempotency-Key,x-queue-pass"),
             SK_CORS_OK);
    CHECK_EQ(PF("https://shop.example", "GET", NULL), SK_CORS_OK);
    CHECK_EQ(PF("https://shop.example", "GET", "authorization,X-User-Id"), SK_CORS_OK);
    CHECK_EQ(PF("https://evil.example", "POST", NULL), SK_CORS_BAD_ORIGIN);
    CHECK_EQ(PF(NULL, "POST", NULL), SK_CORS_BAD_ORIGIN);
    CHECK_EQ(PF("https://shop.example", NULL, NULL), SK_CORS_BAD_METHOD);
    CHECK_EQ(PF("https://shop.example", "DELETE", NULL), SK_CORS_BAD_METHOD);
    CHECK_EQ(PF("https://shop.example", "post", NULL), SK_CORS_BAD_METHOD);
    CHECK_EQ(PF("https://shop.example", "POST", "content-type, cookie"), SK_CORS_BAD_HEADERS);
#undef PF
}

SK_TEST(cors_origins_config_key_flag_and_env)
{
    struct sk_config c;
    char err[200];
    sk_config_defaults(&c);
    CHECK_STR(c.cors_origins, "");
    CHECK_EQ(sk_config_set_flag(&c, "cors-origins", "https://A.example", err, sizeof err), 0);
    CHECK_STR(c.cors_origins, "https://a.example");
    CHECK(sk_config_set(&c, "cors_origins", "*", err, sizeof err) < 0);
    CHECK_STR(c.cors_origins, "https://a.example"); /* a failed set keeps the value */
    char *envp[] = {"SECKILL_CORS_ORIGINS=http://localhost:3000", NULL};
    CHECK_EQ(sk_config_apply_env(&c, envp, err, sizeof err), 0);
    CHECK_STR(c.cors_origins, "http://localhost:3000");
    const char file[] = "cors_origins = \"https://x.example, https://y.example\"\n";
    CHECK_EQ(sk_config_parse_file(&c, file, sizeof file - 1, err, sizeof err), 0);
    CHECK_STR(c.cors_origins, "https://x.example,https://y.example");
}

SK_TEST(sale_page_export_writes_config_and_policy)
{
    char *page, err[200];
    size_t len;
    CHECK_EQ(sk_sale_page_build(12, "https://api.example/v/", &page, &len, err, sizeof err), 0);
    CHECK_EQ(strlen(page), len);
    CHECK(strstr(page, "{\"activity\":12,\"api_base\":\"https://api.example/v\"}") != NULL);
    CHECK(strstr(page, "connect-src https://api.example;") != NULL);
    free(page);
    CHECK(sk_sale_page_build(0, NULL, &page, &len, err, sizeof err) < 0);
    CHECK(sk_sale_page_build(1, "https://a.example/</script>", &page, &len, err, sizeof err) < 0);
    CHECK(sk_sale_page_build(1, "//a.example", &page, &len, err, sizeof err) < 0);
    CHECK(sk_sale_page_build(1, "https://a.example?x=1'", &page, &len, err, sizeof err) < 0);
}

SK_TEST(router_maps_the_buyers_page_routes)
{
    struct sk_route_match m;
    sk_router_match("GET", 3, "/sale/42", 8, &m);
    CHECK_EQ(m.status, 200);
    CHECK_EQ(m.route, SK_ROUTE_sale_page);
    CHECK_EQ(m.id, 42);
    sk_router_match("GET", 3, "/api/v1/activities/7/live", 25, &m);
    CHECK_EQ(m.route, SK_ROUTE_sale_live);
    CHECK_EQ(m.id, 7);
    sk_router_match("GET", 3, "/api/v1/time", 12, &m);
    CHECK_EQ(m.route, SK_ROUTE_sale_time);
    sk_router_match("POST", 4, "/api/v1/time", 12, &m);
    CHECK_EQ(m.status, 405);
}
