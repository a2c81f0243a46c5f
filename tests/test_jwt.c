/* test_jwt.c - `--auth jwt` over HTTP with tokens made by an independent
 * tool (tests/jwt/jwt_tool.py: the openssl command line signs, Python's
 * standard library encodes): RS256, ES256 and EdDSA accepted with the key
 * their kid names (or, without a kid, any key of their type); expired, not
 * yet valid, issued in the future, wrong audience or issuer, unknown kid,
 * another key, a tampered payload or signature, alg none, HS256 keyed with
 * the RSA public key, an alg that does not fit the key, no exp and a
 * non-numeric subject all refused with 401; the subject maps to the buyer
 * (an integer and its decimal string are the same user: the second buy
 * hits the per-user limit); lifetimes over --jwt-max-ttl-s (a year-9999
 * exp, one at the end of int64_t) refused; both S forms of an ES256
 * signature accepted as the same buyer; SIGHUP reloads the key file. */
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "core/clock.h"
#include "support/harness.h"
#include "support/http_client.h"

/* The tool's path in the source tree. */
static const char *tool(void)
{
    static char path[600];
    snprintf(path, sizeof path, "%s/tests/jwt/jwt_tool.py", sk_th_source_root());
    return path;
}

static void run(const char *cmd)
{
    int rc = system(cmd);
    CHECK_MSG(rc == 0, "%s: exit %d", cmd, rc);
}

/* Tokens for specs (a JSON object name -> spec), as a JSON object. */
static json_t *tokens(const char *dir, const char *specs)
{
    char file[400], cmd[2000];
    snprintf(file, sizeof file, "%s/specs.json", dir);
    FILE *f = fopen(file, "w");
    CHECK(f != NULL);
    fputs(specs, f);
    fclose(f);
    snprintf(cmd, sizeof cmd, "python3 %s tokens %s @%s", tool(), dir, file);
    FILE *p = popen(cmd, "r");
    CHECK(p != NULL);
    static char out[1 << 16];
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = 0;
    CHECK_MSG(pclose(p) == 0, "%s failed", cmd);
    json_error_t e;
    json_t *o = json_loads(out, 0, &e);
    CHECK_MSG(json_is_object(o), "not JSON: %s", out);
    return o;
}

static int buy(int port, uint64_t aid, const char *token, struct sk_th_resp *r)
{
    struct sk_th_http h;
    char path[96], hdr[8300];
    snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64 "/purchase", aid);
    snprintf(hdr, sizeof hdr, "Authorization: Bearer %s\r\n", token);
    sk_th_http_open(&h, port);
    int st = sk_th_http_req(&h, "POST", path, hdr, NULL, r);
    sk_th_http_close(&h);
    return st;
}

static int admin_post(int port, const char *path, const char *body)
{
    struct sk_th_http h;
    struct sk_th_resp r;
    sk_th_http_open(&h, port);
    int st = sk_th_http_req(&h, "POST", path, "Authorization: Bearer " SK_TH_ADMIN_TOKEN "\r\n",
                            body, &r);
    sk_th_http_close(&h);
    return st;
}

/* A fresh activity, created, preheated and opened: stock 100, one each. */
static uint64_t open_sale(int port)
{
    uint64_t aid = sk_th_unique_id();
    char body[400], path[96];
    snprintf(body, sizeof body,
             "{\"id\":%" PRIu64 ",\"name\":\"jwt\",\"stock\":100,\"per_user_limit\":1,"
             "\"start\":\"2020-01-01T00:00:00Z\",\"end\":\"2099-01-01T00:00:00Z\"}",
             aid);
    CHECK_EQ(admin_post(port, "/api/v1/activities", body), 201);
    snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64 "/preheat", aid);
    CHECK_EQ(admin_post(port, path, "{}"), 200);
    snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64 "/open", aid);
    CHECK_EQ(admin_post(port, path, NULL), 200);
    return aid;
}

static void wait_log(const char *path, const char *needle)
{
    int64_t deadline = sk_mono_ms() + 15000;
    static char buf[1 << 18];
    for (;;) {
        FILE *f = fopen(path, "r");
        size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
        buf[n] = 0;
        if (f) fclose(f);
        if (strstr(buf, needle)) return;
        CHECK_MSG(sk_mono_ms() < deadline, "no \"%s\" in the log:\n%s", needle, buf);
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

#define GOOD "\"iss\":\"https://id.test\",\"aud\":\"seckill\",\"exp\":\"now+300\",\"iat\":\"now-5\""

static const char *const SPECS =
    "{"
    "\"rs256\":{\"key\":\"rsa\",\"alg\":\"RS256\",\"kid\":\"rsa-1\",\"claims\":{\"sub\":"
    "\"1001\"," GOOD "}},"
    "\"rs256_same_user_int\":{\"key\":\"rsa\",\"alg\":\"RS256\",\"kid\":\"rsa-1\",\"claims\":{"
    "\"sub\":1001," GOOD "}},"
    "\"es256\":{\"key\":\"ec\",\"alg\":\"ES256\",\"kid\":\"ec-1\",\"claims\":{\"sub\":"
    "\"1002\"," GOOD "}},"
    "\"eddsa\":{\"key\":\"ed\",\"alg\":\"EdDSA\",\"kid\":\"ed-1\",\"claims\":{\"sub\":"
    "\"18446744073709551615\"," GOOD "}},"
    "\"no_kid\":{\"key\":\"ec\",\"alg\":\"ES256\",\"claims\":{\"sub\":\"1003\"," GOOD "}},"
    "\"aud_list\":{\"key\":\"ed\",\"alg\":\"EdDSA\",\"kid\":\"ed-1\",\"claims\":{\"sub\":\"1004\","
    "\"iss\":\"https://id.test\",\"aud\":[\"other\",\"seckill\"],\"exp\":\"now+60\"}},"
    "\"in_leeway\":{\"key\":\"rsa\",\"alg\":\"RS256\",\"kid\":\"rsa-1\",\"claims\":{\"sub\":"
    "\"1005\",\"iss\":\"https://id.test\",\"aud\":\"seckill\",\"exp\":\"now-10\"}},"
    "\"expired\":{\"key\":\"rsa\",\"alg\":\"RS256\",\"kid\":\"rsa-1\",\"claims\":{\"sub\":\"2001\","
    "\"iss\":\"https://id.test\",\"aud\":\"seckill\",\"exp\":\"now-120\"}},"
    "\"not_yet\":{\"key\":\"ec\",\"alg\":\"ES256\",\"kid\":\"ec-1\",\"claims\":{\"sub\":\"2002\","
    "\"nbf\":\"now+120\"," GOOD "}},"
    "\"future_iat\":{\"key\":\"ec\",\"alg\":\"ES256\",\"kid\":\"ec-1\",\"claims\":{\"sub\":"
    "\"2003\",\"iss\":\"https://"
    "id.test\",\"aud\":\"seckill\",\"exp\":\"now+300\",\"iat\":\"now+120\"}},"
    "\"wrong_aud\":{\"key\":\"rsa\",\"alg\":\"RS256\",\"kid\":\"rsa-1\",\"claims\":{\"sub\":"
    "\"2004\",\"iss\":\"https://id.test\",\"aud\":\"billing\",\"exp\":\"now+300\"}},"
    "\"wrong_iss\":{\"key\":\"rsa\",\"alg\":\"RS256\",\"kid\":\"rsa-1\",\"claims\":{\"sub\":"
    "\"2005\",\"iss\":\"https://evil.test\",\"aud\":\"seckill\",\"exp\":\"now+300\"}},"
    "\"unknown_kid\":{\"key\":\"rsa\",\"alg\":\"RS256\",\"kid\":\"rsa-9\",\"claims\":{\"sub\":"
    "\"2006\"," GOOD "}},"
    "\"other_key\":{\"key\":\"rsa2\",\"alg\":\"RS256\",\"kid\":\"rsa-1\",\"claims\":{\"sub\":"
    "\"2007\"," GOOD "}},"
    "\"tampered_payload\":{\"key\":\"rsa\",\"alg\":\"RS256\",\"kid\":\"rsa-1\",\"tamper\":"
    "\"payload\",\"claims\":{\"sub\":\"2008\"," GOOD "}},"
    "\"tampered_sig\":{\"key\":\"ed\",\"alg\":\"EdDSA\",\"kid\":\"ed-1\",\"tamper\":\"signature\","
    "\"claims\":{\"sub\":\"2009\"," GOOD "}},"
    "\"tampered_es\":{\"key\":\"ec\",\"alg\":\"ES256\",\"kid\":\"ec-1\",\"tamper\":\"signature\","
    "\"claims\":{\"sub\":\"2010\"," GOOD "}},"
    "\"alg_none\":{\"alg\":\"none\",\"kid\":\"rsa-1\",\"claims\":{\"sub\":\"2011\"," GOOD "}},"
    "\"hs_with_rsa_pub\":{\"key\":\"rsa\",\"alg\":\"HS256\",\"kid\":\"rsa-1\",\"claims\":{\"sub\":"
    "\"2012\"," GOOD "}},"
    "\"alg_not_key\":{\"key\":\"ec\",\"alg\":\"ES256\",\"kid\":\"rsa-1\",\"claims\":{\"sub\":"
    "\"2013\"," GOOD "}},"
    "\"no_exp\":{\"key\":\"rsa\",\"alg\":\"RS256\",\"kid\":\"rsa-1\",\"claims\":{\"sub\":\"2014\","
    "\"iss\":\"https://id.test\",\"aud\":\"seckill\"}},"
    "\"name_sub\":{\"key\":\"rsa\",\"alg\":\"RS256\",\"kid\":\"rsa-1\",\"claims\":{\"sub\":"
    "\"alice\"," GOOD "}},"
    "\"zero_sub\":{\"key\":\"rsa\",\"alg\":\"RS256\",\"kid\":\"rsa-1\",\"claims\":{\"sub\":0," GOOD
    "}},"
    "\"rsa2_new_kid\":{\"key\":\"rsa2\",\"alg\":\"RS256\",\"kid\":\"rsa-2\",\"claims\":{\"sub\":"
    "\"3001\"," GOOD "}},"
    /* lifetimes: a day passes, more does not, with or without iat; a
     * year-9999 exp, and one at the end of int64_t (no overflow) */
    "\"day_ttl\":{\"key\":\"rsa\",\"alg\":\"RS256\",\"kid\":\"rsa-1\",\"claims\":{\"sub\":"
    "\"1006\",\"iss\":\"https://id.test\",\"aud\":\"seckill\",\"exp\":\"now+86000\",\"iat\":"
    "\"now-5\"}},"
    "\"long_ttl\":{\"key\":\"rsa\",\"alg\":\"RS256\",\"kid\":\"rsa-1\",\"claims\":{\"sub\":"
    "\"2015\",\"iss\":\"https://id.test\",\"aud\":\"seckill\",\"exp\":\"now+86400\",\"iat\":"
    "\"now-600\"}},"
    "\"long_ttl_no_iat\":{\"key\":\"ec\",\"alg\":\"ES256\",\"kid\":\"ec-1\",\"claims\":{\"sub\":"
    "\"2016\",\"iss\":\"https://id.test\",\"aud\":\"seckill\",\"exp\":\"now+90000\"}},"
    "\"year_9999\":{\"key\":\"ed\",\"alg\":\"EdDSA\",\"kid\":\"ed-1\",\"claims\":{\"sub\":"
    "\"2017\",\"iss\":\"https://id.test\",\"aud\":\"seckill\",\"exp\":253402300799,"
    "\"iat\":\"now-5\"}},"
    "\"exp_int64_max\":{\"key\":\"rsa\",\"alg\":\"RS256\",\"kid\":\"rsa-1\",\"claims\":{\"sub\":"
    "\"2018\",\"iss\":\"https://id.test\",\"aud\":\"seckill\",\"exp\":9223372036854775807}},"
    /* ES256 with both S forms of one signature: the same buyer */
    "\"es_twin\":{\"key\":\"ec\",\"alg\":\"ES256\",\"kid\":\"ec-1\",\"twin\":true,"
    "\"claims\":{\"sub\":\"1007\"," GOOD "}}"
    "}";

SK_TEST_T(jwt_tokens_from_an_independent_tool_accepted_and_refused_and_keys_reloaded, 180)
{
    char dir[320], cmd[2000], jwks[400];
    snprintf(dir, sizeof dir, "%s", sk_th_tmpdir()); /* its buffer is reused */
    snprintf(cmd, sizeof cmd, "python3 %s keys %s", tool(), dir);
    run(cmd);
    snprintf(jwks, sizeof jwks, "%s/jwks.json", dir);
    json_t *t = tokens(dir, SPECS);
    struct sk_th_serve s;
    const char *extra[] = {
        "--auth",         "jwt",     "--jwks-file", jwks, "--jwt-issuer", "https://id.test",
        "--jwt-audience", "seckill", NULL};
    sk_th_serve_start(&s, sk_th_redis_url(), extra);
    uint64_t aid = open_sale(s.port);

    static const struct {
        const char *name;
        int status;
    } cases[] = {
        {"rs256", 200},
        {"es256", 200},
        {"eddsa", 200},
        {"no_kid", 200},
        {"aud_list", 200},
        {"in_leeway", 200},
        {"rs256_same_user_int", 409}, /* the same buyer as rs256: its limit is 1 */
        {"expired", 401},
        {"not_yet", 401},
        {"future_iat", 401},
        {"wrong_aud", 401},
        {"wrong_iss", 401},
        {"unknown_kid", 401},
        {"other_key", 401},
        {"tampered_payload", 401},
        {"tampered_sig", 401},
        {"tampered_es", 401},
        {"alg_none", 401},
        {"hs_with_rsa_pub", 401},
        {"alg_not_key", 401},
        {"no_exp", 401},
        {"name_sub", 401},
        {"zero_sub", 401},
        {"rsa2_new_kid", 401}, /* not in the key set yet */
        {"day_ttl", 200},
        {"long_ttl", 401},
        {"long_ttl_no_iat", 401},
        {"year_9999", 401},
        {"exp_int64_max", 401},
        /* high or low S, whichever the signer made first: accepted; its
         * twin is the same buyer, whose limit is spent (auth_jwt.h) */
        {"es_twin", 200},
        {"es_twin_twin", 409},
    };
    struct sk_th_resp r;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *tok = json_string_value(json_object_get(t, cases[i].name));
        CHECK_MSG(tok != NULL, "no token %s", cases[i].name);
        int st = buy(s.port, aid, tok, &r);
        CHECK_MSG(st == cases[i].status, "%s: %d, want %d: %s", cases[i].name, st, cases[i].status,
                  r.body);
        if (st == 409) CHECK(strstr(r.body, "limit_exceeded") != NULL);
        if (st == 401) CHECK(strstr(r.body, "\"error\":\"unauthorized\"") != NULL);
    }
    /* the key set is re-read on SIGHUP: only rsa-2 now */
    snprintf(cmd, sizeof cmd, "python3 %s jwks %s %s rsa2:rsa-2", tool(), dir, jwks);
    run(cmd);
    CHECK_EQ(kill(s.pid, SIGHUP), 0);
    wait_log(s.log, "reload: every process runs the new settings");
    CHECK_EQ(buy(s.port, aid, json_string_value(json_object_get(t, "rsa2_new_kid")), &r), 200);
    CHECK_EQ(buy(s.port, aid, json_string_value(json_object_get(t, "es256")), &r), 401);
    /* a broken key file is refused; the keys in use stay */
    FILE *f = fopen(jwks, "w");
    CHECK(f != NULL);
    fputs("{\"keys\":[{\"kty\":\"oct\",\"k\":\"c2VjcmV0\"}]}", f);
    fclose(f);
    CHECK_EQ(kill(s.pid, SIGHUP), 0);
    wait_log(s.log, "reload: the new configuration was refused");
    CHECK_EQ(buy(s.port, aid, json_string_value(json_object_get(t, "rsa2_new_kid")), &r), 409);
    json_decref(t);
    CHECK_EQ(sk_th_serve_stop(&s, SIGTERM), 0);
}

/* `seckill serve --auth jwt` on listen with db and the key set jwks, then
 * the flags of more (NULL-terminated); its exit code, its output in out. */
static int jwt_start_exit(char *out, size_t cap, const char *listen, const char *db,
                          const char *jwks, const char *const *more)
{
    const char *args[24] = {"serve", "--listen", listen, "--db",        db,   "--role",
                            "api",   "--auth",   "jwt",  "--jwks-file", jwks, NULL};
    size_t n = 11;
    for (size_t i = 0; more[i] && n < 23; i++)
        args[n++] = more[i];
    args[n] = NULL;
    return sk_th_run_seckill(out, cap, NULL, args);
}

/* The audience is required (a token the identity provider made for another
 * application would buy here); '*' says "any" out loud, and the start
 * warns about it and about a missing issuer, never with the trusted-header
 * warning (a JWT node does not believe X-User-Id). --jwt-max-ttl-s moves
 * the lifetime bound. */
SK_TEST_T(jwt_needs_an_audience_warns_about_a_wide_policy_and_bounds_lifetimes, 120)
{
    char dir[320], cmd[2000], jwks[400], out[8192], any[64], db[400];
    snprintf(dir, sizeof dir, "%s", sk_th_tmpdir());
    snprintf(cmd, sizeof cmd, "python3 %s keys %s", tool(), dir);
    run(cmd);
    snprintf(jwks, sizeof jwks, "%s/jwks.json", dir);
    snprintf(any, sizeof any, "0.0.0.0:%d", sk_th_free_port());
    snprintf(db, sizeof db, "sqlite:%s/x.db", dir);
    static const char *const no_aud[] = {NULL};
    CHECK_EQ(jwt_start_exit(out, sizeof out, any, db, jwks, no_aud), 2);
    CHECK_MSG(strstr(out, "auth=jwt needs jwt_audience"), "%s", out);
    /* on every address, '*' and no issuer: both said, and only those (a
     * store that cannot open ends the run right after the warnings) */
    static const char dead[] = "sqlite:/nonexistent-dir/x.db";
    static const char *const wide[] = {"--jwt-audience", "*", NULL};
    CHECK_EQ(jwt_start_exit(out, sizeof out, any, dead, jwks, wide), 1);
    CHECK_MSG(strstr(out, "--jwt-audience '*'") && strstr(out, "no --jwt-issuer") &&
                  !strstr(out, "anyone who can connect"),
              "%s", out);
    static const char *const narrow[] = {"--jwt-audience", "seckill", "--jwt-issuer",
                                         "https://id.test", NULL};
    CHECK_EQ(jwt_start_exit(out, sizeof out, any, dead, jwks, narrow), 1);
    CHECK_MSG(!strstr(out, "--jwt-audience '*'") && !strstr(out, "no --jwt-issuer") &&
                  !strstr(out, "anyone who can connect"),
              "%s", out);

    json_t *t = tokens(
        dir,
        "{\"other_app\":{\"key\":\"rsa\",\"alg\":\"RS256\",\"kid\":\"rsa-1\",\"claims\":{"
        "\"sub\":\"4001\",\"iss\":\"https://id.test\",\"aud\":\"billing\",\"exp\":\"now+300\"}},"
        "\"two_days\":{\"key\":\"ec\",\"alg\":\"ES256\",\"kid\":\"ec-1\",\"claims\":{\"sub\":"
        "\"4002\",\"iss\":\"https://id.test\",\"aud\":\"seckill\",\"exp\":\"now+172000\","
        "\"iat\":\"now-5\"}},"
        "\"three_days\":{\"key\":\"ec\",\"alg\":\"ES256\",\"kid\":\"ec-1\",\"claims\":{\"sub\":"
        "\"4003\",\"iss\":\"https://id.test\",\"aud\":\"seckill\",\"exp\":\"now+259200\"}}}");
    struct sk_th_serve s;
    const char *extra[] = {"--auth",
                           "jwt",
                           "--jwks-file",
                           jwks,
                           "--jwt-issuer",
                           "https://id.test",
                           "--jwt-audience",
                           "*",
                           "--jwt-max-ttl-s",
                           "172800",
                           NULL};
    sk_th_serve_start(&s, sk_th_redis_url(), extra);
    uint64_t aid = open_sale(s.port);
    struct sk_th_resp r;
    CHECK_EQ(buy(s.port, aid, json_string_value(json_object_get(t, "other_app")), &r), 200);
    CHECK_EQ(buy(s.port, aid, json_string_value(json_object_get(t, "two_days")), &r), 200);
    CHECK_EQ(buy(s.port, aid, json_string_value(json_object_get(t, "three_days")), &r), 401);
    json_decref(t);
    CHECK_EQ(sk_th_serve_stop(&s, SIGTERM), 0);
}
