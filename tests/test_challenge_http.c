/* test_challenge_http.c - challenges through a real `seckill serve` over
 * real sockets (docs/challenges.md): a purchase (no waiting room) or a
 * queue join (with one) refused without a solved challenge, with a forged,
 * unsolved, another buyer's or another activity's, admitted with a valid
 * one, refused when it comes again; and the CAPTCHA hook against a
 * siteverify server of this test's own.
 *
 * The stand-in siteverify: the real providers cannot be reached from the
 * test machine, so a thread (support/captcha_standin.c, shared with the
 * browser test in test_buyer_page.c) listens on 127.0.0.1 and answers POSTs
 * the way Turnstile's documented siteverify API does (JSON "success",
 * "error-codes", "hostname", "action"), or never answers at all (the
 * timeout). seckill talks to it with the libcurl client it uses for the
 * real provider (captcha_verify_url points it there). Every refusal is
 * checked to change nothing (the admin stats: stock, admitted, buyers). */
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "core/clock.h"
#include "engine/challenge.h"
#include "engine/keys.h"
#include "engine/stock.h"
#include "redis/redis_conn.h"
#include "store/store.h"
#include "support/buyer_http.h"
#include "support/captcha_standin.h"
#include "support/fixtures.h"
#include "support/http_api.h"
#include "support/sale_env.h"

static const char SECRET[] = "challenge-test-secret-0123456789";

/* Creates an activity of stock units, one per buyer, open now, with
 * challenge (JSON) and, when rate > 0, a waiting room of rate passes/s;
 * preheated and opened. */
static void ch_ready_lim(struct srv *v, uint64_t id, long long stock, int limit,
                         const char *challenge, int rate);
static void ch_ready(struct srv *v, uint64_t id, long long stock, const char *challenge, int rate)
{
    ch_ready_lim(v, id, stock, 1, challenge, rate);
}

/* The same, limit units per buyer. */
static void ch_ready_lim(struct srv *v, uint64_t id, long long stock, int limit,
                         const char *challenge, int rate)
{
    char s[40], e[40], wr[96] = "", body[800];
    struct sk_th_resp r;
    int64_t now = sk_wall_ms();
    rfc3339(now - 1000, s, sizeof s);
    rfc3339(now + HOUR_MS, e, sizeof e);
    if (rate > 0)
        snprintf(wr, sizeof wr, ",\"waiting_room\":{\"passes_per_s\":%d,\"pass_ttl_s\":2}", rate);
    snprintf(body, sizeof body,
             "{\"id\":%" PRIu64 ",\"name\":\"challenge %" PRIu64 "\",\"stock\":%lld,"
             "\"per_user_limit\":%d,\"start\":\"%s\",\"end\":\"%s\",\"challenge\":%s%s}",
             id, id, stock, limit, s, e, challenge, wr);
    EXPECT_STATUS(admin(v, "POST", "/api/v1/activities", body, &r), &r, 201);
    EXPECT_STATUS(admin_op(v, id, "preheat", NULL, &r), &r, 200);
    EXPECT_STATUS(admin_op(v, id, "open", NULL, &r), &r, 200);
}

/* A challenge for uid on aid, solved: "<challenge>.<nonce>" into hdr. */
static void solved_for(struct srv *v, uint64_t aid, uint64_t uid, char *hdr, size_t cap)
{
    char path[128], text[SK_CH_TEXT_MAX], nonce[32];
    struct sk_th_resp r;
    snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64 "/challenge", aid);
    EXPECT_STATUS(sk_th_as_user(&v->c, "GET", path, uid, NULL, &r), &r, 200);
    JSTR(&r, "challenge", text);
    int bits = (int)JINT(&r, "bits");
    CHECK(sk_challenge_solve(text, strlen(text), bits, 0, 1u << 28, nonce, sizeof nonce, NULL) > 0);
    snprintf(hdr, cap, "%s.%s", text, nonce);
}

/* POST to aid's purchase (route "purchase") or queue ("queue") as uid,
 * with X-Challenge ch and X-Captcha-Token tok when not NULL. */
static int send_ch(struct srv *v, const char *route, uint64_t aid, uint64_t uid, const char *ch,
                   const char *tok, struct sk_th_resp *r)
{
    char path[128], h[1024];
    snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64 "/%s", aid, route);
    int n = snprintf(h, sizeof h, "X-User-Id: %" PRIu64 "\r\n", uid);
    if (ch) n += snprintf(h + n, sizeof h - (size_t)n, "X-Challenge: %s\r\n", ch);
    if (tok) snprintf(h + n, sizeof h - (size_t)n, "X-Captcha-Token: %s\r\n", tok);
    return sk_th_http_req(&v->c, "POST", path, h, NULL, r);
}

/* Every way a proof of work can be wrong, on route, changes nothing; a
 * valid one goes through once. Returns after the admitted call. */
static void pow_refusals_then_one(struct srv *v, const char *route, uint64_t aid, uint64_t other)
{
    struct sk_th_resp r;
    char hdr[SK_CH_HEADER_MAX], bad[SK_CH_HEADER_MAX + 8], foreign[SK_CH_HEADER_MAX];
    /* none */
    EXPECT_ERROR(send_ch(v, route, aid, 41, NULL, NULL, &r), &r, 403, "challenge_required");
    /* another buyer's: 42's solution sent by 41 */
    solved_for(v, aid, 42, hdr, sizeof hdr);
    EXPECT_ERROR(send_ch(v, route, aid, 41, hdr, NULL, &r), &r, 403, "challenge_invalid");
    /* another activity's */
    solved_for(v, other, 41, foreign, sizeof foreign);
    EXPECT_ERROR(send_ch(v, route, aid, 41, foreign, NULL, &r), &r, 403, "challenge_invalid");
    /* 41's own, altered (bits lowered: the mac no longer fits), and unsolved */
    solved_for(v, aid, 41, hdr, sizeof hdr);
    char *b = strchr(strchr(strchr(hdr, '.') + 1, '.') + 1, '.'); /* ".<bits>." */
    snprintf(bad, sizeof bad, "%.*s.1%s", (int)(b - hdr), hdr, strchr(b + 1, '.'));
    EXPECT_ERROR(send_ch(v, route, aid, 41, bad, NULL, &r), &r, 403, "challenge_invalid");
    const char *dot = strrchr(hdr, '.');
    int found = 0;
    for (int k = 0; k < 1000 && !found; k++) {
        /* a nonce that does not solve it (most do not at 12 bits) */
        snprintf(bad, sizeof bad, "%.*s.z%d", (int)(dot - hdr), hdr, k);
        struct sk_ch_parsed p;
        CHECK_EQ(sk_challenge_parse(bad, strlen(bad), &p), 0);
        found = sk_challenge_zero_bits(p.text, p.text_len, p.nonce, p.nonce_len) < p.bits;
    }
    CHECK(found);
    EXPECT_ERROR(send_ch(v, route, aid, 41, bad, NULL, &r), &r, 403, "challenge_unsolved");
    /* a header that is no challenge at all */
    EXPECT_ERROR(send_ch(v, route, aid, 41, "not-a-challenge", NULL, &r), &r, 400, "bad_request");
    expect_stats(v, aid, 10, 0, 0);
    /* the valid one: through once, then spent */
    EXPECT_STATUS(send_ch(v, route, aid, 41, hdr, NULL, &r), &r, 200);
    if (!strcmp(route, "queue")) {
        /* a join of a buyer already in the queue is a poll: the same
         * place, no second one, nothing spent. Its pass left to expire
         * (2 s), the buyer must enter again: the spent solution no more */
        CHECK_EQ(JINT(&r, "place"), 1);
        EXPECT_STATUS(send_ch(v, route, aid, 41, hdr, NULL, &r), &r, 200);
        CHECK_EQ(JINT(&r, "place"), 1);
        char path[128], st[32] = "";
        snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64 "/queue", aid);
        int64_t deadline = sk_mono_ms() + 10000;
        while (strcmp(st, "expired") != 0) {
            CHECK_MSG(sk_mono_ms() < deadline, "the pass did not expire: %s", r.body);
            sk_th_nap_ms(50);
            EXPECT_STATUS(sk_th_as_user(&v->c, "GET", path, 41, NULL, &r), &r, 200);
            JSTR(&r, "state", st);
        }
        EXPECT_ERROR(send_ch(v, route, aid, 41, hdr, NULL, &r), &r, 403, "challenge_replayed");
        /* a fresh one enters it again */
        solved_for(v, aid, 41, hdr, sizeof hdr);
        EXPECT_STATUS(send_ch(v, route, aid, 41, hdr, NULL, &r), &r, 200);
        JSTR(&r, "state", st);
        CHECK_MSG(!strcmp(st, "admitted") || !strcmp(st, "waiting"), "%s", r.body);
        return;
    }
    if (!strcmp(route, "register")) {
        /* registered; again (a registrant) needs no challenge and adds nobody */
        CHECK_MSG(strstr(r.body, "\"registered\":true") && JINT(&r, "registrants") == 1, "%s",
                  r.body);
        EXPECT_STATUS(send_ch(v, route, aid, 41, hdr, NULL, &r), &r, 200);
        EXPECT_STATUS(send_ch(v, route, aid, 41, NULL, NULL, &r), &r, 200);
        CHECK_EQ(JINT(&r, "registrants"), 1);
        return;
    }
    EXPECT_ERROR(send_ch(v, route, aid, 41, hdr, NULL, &r), &r, 403, "challenge_replayed");
}

SK_TEST(challenge_http_purchase_and_join_need_the_buyers_own_fresh_solution)
{
    const char *extra[] = {"--challenge-secret", SECRET, "--challenge-ttl-s", "10", NULL};
    struct srv v;
    srv_start(&v, extra);
    uint64_t aid = sk_th_unique_id(), other = sk_th_unique_id(), wr = sk_th_unique_id();
    ch_ready(&v, aid, 10, "{\"pow_bits\":12}", 0);
    ch_ready(&v, other, 10, "{\"pow_bits\":12}", 0);
    struct sk_th_resp r;
    /* the public read says what the page must solve */
    EXPECT_STATUS(get_activity(&v, aid, &r), &r, 200);
    CHECK_MSG(strstr(r.body, "\"challenge\":{\"pow_bits_min\":12,\"pow_bits_max\":12"), "%s",
              r.body);
    /* a sale without a waiting room: the purchase carries it */
    pow_refusals_then_one(&v, "purchase", aid, other);
    expect_stats(&v, aid, 9, 1, 1);
    /* the same solution at the other activity is foreign there too */
    char hdr[SK_CH_HEADER_MAX];
    solved_for(&v, aid, 43, hdr, sizeof hdr);
    EXPECT_ERROR(send_ch(&v, "purchase", other, 43, hdr, NULL, &r), &r, 403, "challenge_invalid");
    expect_stats(&v, other, 10, 0, 0);
    /* a solution outlives neither its ttl: 10 s here, so a forged later
     * expiry is what would let it; the mac refuses that (unit tests), and
     * the route hands out exactly ttl */
    char path[128];
    snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64 "/challenge", aid);
    EXPECT_STATUS(sk_th_as_user(&v.c, "GET", path, 44, NULL, &r), &r, 200);
    CHECK_EQ(JINT(&r, "expires_in_ms"), 10000);
    CHECK_MSG(strstr(r.body, "\"for\":\"purchase\"") && strstr(r.body, "\"captcha\":null"), "%s",
              r.body);
    CHECK_MSG(strstr(r.headers, "no-store"), "%s", r.headers);
    /* a sale with a waiting room: the join carries it, the purchase not */
    ch_ready(&v, wr, 10, "{\"pow_bits\":12}", 1000);
    pow_refusals_then_one(&v, "queue", wr, other);
    EXPECT_STATUS(get_activity(&v, wr, &r), &r, 200);
    /* an activity without a challenge hands none out */
    uint64_t plain = sk_th_unique_id();
    ready_act(&v, plain, 10, 1, 1, W_NOW);
    snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64 "/challenge", plain);
    EXPECT_ERROR(sk_th_as_user(&v.c, "GET", path, 41, NULL, &r), &r, 404, "no_challenge");
    EXPECT_STATUS(buy(&v, plain, 41, NULL, &r), &r, 200);
    srv_stop(&v);
}

/* Registration takes the sale's challenge as the purchase does: every
 * wrong solution refused with the same codes and nobody registered, a
 * valid one registers once; the solution it spent is refused at the
 * purchase once the sale opens (one spent key for both). */
SK_TEST_T(challenge_http_registration_needs_the_buyers_own_fresh_solution, 60)
{
    const char *extra[] = {"--challenge-secret", SECRET, "--challenge-ttl-s", "30", NULL};
    struct srv v;
    srv_start(&v, extra);
    uint64_t aid = sk_th_unique_id(), other = sk_th_unique_id();
    ch_ready(&v, other, 10, "{\"pow_bits\":12}", 0);
    char rs[40], re[40], s[40], e[40], body[900];
    struct sk_th_resp r;
    int64_t now = sk_wall_ms(), start = now + 6000;
    rfc3339(now - 1000, rs, sizeof rs);
    rfc3339(start, re, sizeof re);
    rfc3339(start, s, sizeof s);
    rfc3339(start + HOUR_MS, e, sizeof e);
    snprintf(body, sizeof body,
             "{\"id\":%" PRIu64 ",\"name\":\"reg challenge\",\"stock\":10,"
             "\"per_user_limit\":1,\"start\":\"%s\",\"end\":\"%s\",\"challenge\":"
             "{\"pow_bits\":12},\"registration\":{\"start\":\"%s\",\"end\":\"%s\"}}",
             aid, s, e, rs, re);
    EXPECT_STATUS(admin(&v, "POST", "/api/v1/activities", body, &r), &r, 201);
    EXPECT_STATUS(admin_op(&v, aid, "preheat", NULL, &r), &r, 200);
    EXPECT_STATUS(admin_op(&v, aid, "open", NULL, &r), &r, 200);
    /* during the registration window the challenge is for registering */
    char path[128], hdr[SK_CH_HEADER_MAX];
    snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64 "/challenge", aid);
    EXPECT_STATUS(sk_th_as_user(&v.c, "GET", path, 41, NULL, &r), &r, 200);
    CHECK_MSG(strstr(r.body, "\"for\":\"register\""), "%s", r.body);
    pow_refusals_then_one(&v, "register", aid, other);
    /* 42 registers with a solution; the refusals registered nobody */
    solved_for(&v, aid, 42, hdr, sizeof hdr);
    EXPECT_STATUS(send_ch(&v, "register", aid, 42, hdr, NULL, &r), &r, 200);
    CHECK_EQ(JINT(&r, "registrants"), 2);
    /* 42's spent solution is no good for the purchase (one spent key) */
    int rc = 0;
    int64_t deadline = sk_mono_ms() + 20000;
    while (strstr(r.body, "challenge_replayed") == NULL) {
        CHECK_MSG(sk_mono_ms() < deadline, "the spent solution: %s", r.body);
        rc = send_ch(&v, "purchase", aid, 42, hdr, NULL, &r);
        if (strstr(r.body, "not_started")) sk_th_nap_ms(100);
    }
    EXPECT_ERROR(rc, &r, 403, "challenge_replayed");
    expect_stats(&v, aid, 10, 0, 0);
    /* from the start a fresh one buys (fetched anew: one refused before the
     * start is not spent, but a fresh one is as cheap) */
    do {
        CHECK_MSG(sk_mono_ms() < deadline, "the sale did not open: %s", r.body);
        if (strstr(r.body, "not_started")) sk_th_nap_ms(100);
        solved_for(&v, aid, 42, hdr, sizeof hdr);
        rc = send_ch(&v, "purchase", aid, 42, hdr, NULL, &r);
    } while (strstr(r.body, "not_started"));
    EXPECT_STATUS(rc, &r, 200);
    expect_stats(&v, aid, 9, 1, 1);
    srv_stop(&v);
}

/* Two processes of one node share the drawn key: a challenge handed out by
 * either is good at the other (no challenge_secret configured). */
SK_TEST(challenge_http_processes_of_a_node_share_the_drawn_key)
{
    const char *extra[] = {"--processes", "2", NULL};
    struct srv v;
    srv_start(&v, extra);
    uint64_t aid = sk_th_unique_id();
    ch_ready(&v, aid, 10, "{\"pow_bits\":4}", 0);
    struct sk_th_resp r;
    /* each new connection lands on either process (SO_REUSEPORT): enough
     * buyers that both hand out and both check */
    for (uint64_t u = 100; u < 110; u++) {
        char hdr[SK_CH_HEADER_MAX];
        solved_for(&v, aid, u, hdr, sizeof hdr);
        sk_th_http_close(&v.c);
        sk_th_http_open(&v.c, v.s.port);
        EXPECT_STATUS(send_ch(&v, "purchase", aid, u, hdr, NULL, &r), &r, 200);
    }
    expect_stats(&v, aid, 0, 10, 10);
    srv_stop(&v);
}

/* ---- the stand-in siteverify (support/captcha_standin.h) ------------------ */

/* A serve with a Turnstile CAPTCHA checked at s, failing open or closed. */
static void captcha_srv(struct srv *v, struct sk_th_captcha *s, const char *fail, char *url,
                        size_t cap)
{
    snprintf(url, cap, "http://127.0.0.1:%d/siteverify", s->port);
    const char *extra[] = {"--challenge-secret",
                           SECRET,
                           "--captcha-provider",
                           "turnstile",
                           "--captcha-site-key",
                           "0x4AAAAAAAtest",
                           "--captcha-secret",
                           "captcha-secret-&-more",
                           "--captcha-verify-url",
                           url,
                           "--captcha-timeout-ms",
                           "300",
                           "--captcha-fail",
                           fail,
                           "--captcha-hostname",
                           "shop.example",
                           NULL};
    srv_start(v, extra);
}

/* The token passes, is refused, or is never answered (closed: 503 in
 * about the timeout; nothing sold) - against the stand-in siteverify. */
SK_TEST(challenge_http_captcha_against_a_stand_in_siteverify_fail_closed)
{
    struct sk_th_captcha s;
    sk_th_captcha_start(&s);
    struct srv v;
    char url[96], hdr[SK_CH_HEADER_MAX];
    captcha_srv(&v, &s, "closed", url, sizeof url);
    uint64_t aid = sk_th_unique_id();
    ch_ready(&v, aid, 10, "{\"pow_bits\":8,\"captcha\":\"turnstile\"}", 0);
    struct sk_th_resp r;
    /* the read hands the page the widget's public parts, never the secret */
    EXPECT_STATUS(get_activity(&v, aid, &r), &r, 200);
    CHECK_MSG(strstr(r.body, "\"site_key\":\"0x4AAAAAAAtest\"") &&
                  strstr(r.body, "https://challenges.cloudflare.com/") &&
                  !strstr(r.body, "captcha-secret"),
              "%s", r.body);
    /* a solved proof of work but no token: refused before any siteverify */
    solved_for(&v, aid, 41, hdr, sizeof hdr);
    EXPECT_ERROR(send_ch(&v, "purchase", aid, 41, hdr, NULL, &r), &r, 403, "captcha_required");
    /* a token that is no token: 400, no siteverify */
    EXPECT_ERROR(send_ch(&v, "purchase", aid, 41, hdr, "a<b", &r), &r, 400, "bad_request");
    CHECK_EQ(atomic_load(&s.requests), 0);
    /* the provider refuses it: 403 captcha_failed, after one siteverify
     * that carried the secret and the token, form-encoded */
    atomic_store(&s.mode, SK_TH_SV_REFUSE);
    EXPECT_ERROR(send_ch(&v, "purchase", aid, 41, hdr, "tok-refused", &r), &r, 403,
                 "captcha_failed");
    CHECK_EQ(atomic_load(&s.requests), 1);
    pthread_mutex_lock(&s.mu);
    CHECK_MSG(strstr(s.last, "secret=captcha-secret-%26-more") &&
                  strstr(s.last, "response=tok-refused"),
              "%s", s.last);
    pthread_mutex_unlock(&s.mu);
    expect_stats(&v, aid, 10, 0, 0);
    /* the provider never answers: fail closed is a 503 with Retry-After
     * after about the timeout (300 ms), nothing sold */
    atomic_store(&s.mode, SK_TH_SV_HANG);
    int64_t t0 = sk_mono_ms();
    EXPECT_ERROR(send_ch(&v, "purchase", aid, 41, hdr, "tok-hang", &r), &r, 503,
                 "captcha_unavailable");
    int64_t took = sk_mono_ms() - t0;
    CHECK_MSG(took >= 250 && took < 3000, "answered in %" PRId64 " ms", took);
    CHECK_MSG(strcasestr(r.headers, "retry-after: 1"), "%s", r.headers);
    /* while one hangs, the loop goes on answering others */
    EXPECT_STATUS(get_activity(&v, aid, &r), &r, 200);
    expect_stats(&v, aid, 10, 0, 0);
    /* the provider says yes: bought; the spent challenge again is refused
     * even with a new token that passes */
    atomic_store(&s.mode, SK_TH_SV_PASS);
    EXPECT_STATUS(send_ch(&v, "purchase", aid, 41, hdr, "tok-good", &r), &r, 200);
    EXPECT_ERROR(send_ch(&v, "purchase", aid, 41, hdr, "tok-good-2", &r), &r, 403,
                 "challenge_replayed");
    expect_stats(&v, aid, 9, 1, 1);
    srv_stop(&v);
    sk_th_captcha_stop(&s);
}

/* The same provider never answering, with captcha_fail open: the token is
 * let through after the timeout (the proof of work still spent once). */
SK_TEST(challenge_http_captcha_timeout_fails_open_when_configured)
{
    struct sk_th_captcha s;
    sk_th_captcha_start(&s);
    atomic_store(&s.mode, SK_TH_SV_HANG);
    struct srv v;
    char url[96], hdr[SK_CH_HEADER_MAX];
    captcha_srv(&v, &s, "open", url, sizeof url);
    uint64_t aid = sk_th_unique_id();
    ch_ready(&v, aid, 10, "{\"pow_bits\":8,\"captcha\":\"turnstile\"}", 0);
    struct sk_th_resp r;
    solved_for(&v, aid, 41, hdr, sizeof hdr);
    int64_t t0 = sk_mono_ms();
    EXPECT_STATUS(send_ch(&v, "purchase", aid, 41, hdr, "tok-hang", &r), &r, 200);
    CHECK_MSG(sk_mono_ms() - t0 >= 250, "let through before the timeout");
    EXPECT_ERROR(send_ch(&v, "purchase", aid, 41, hdr, "tok-hang-2", &r), &r, 403,
                 "challenge_replayed");
    /* open is for a provider that cannot be asked, not for a refusal */
    atomic_store(&s.mode, SK_TH_SV_REFUSE);
    solved_for(&v, aid, 42, hdr, sizeof hdr);
    EXPECT_ERROR(send_ch(&v, "purchase", aid, 42, hdr, "tok-no", &r), &r, 403, "captcha_failed");
    expect_stats(&v, aid, 9, 1, 1);
    srv_stop(&v);
    sk_th_captcha_stop(&s);
}

/* ---- a key set lost, the spent challenges with it ------------------------- */

/* A solution spent before a Redis fault is forgotten with the key set (its
 * spent key lived there): every key of the sale deleted for real (as a
 * restart without persistence leaves it), serve's own order worker
 * rebuilds it, and then the solution spent before is refused
 * challenge_stale, not bought with a second time; one made before and never
 * spent is refused the same way (the page solves a new one), a new one
 * buys. SPEC section 7 holds afterwards in the database. */
SK_TEST_T(challenge_http_a_solution_spent_before_the_keys_vanished_is_not_spent_again, 120)
{
    struct srv v;
    const char *extra[] = {"--challenge-secret", SECRET, NULL};
    srv_start(&v, extra);
    uint64_t aid = sk_th_unique_id();
    ch_ready_lim(&v, aid, 10, 3, "{\"pow_bits\":8}", 0);
    char spent[SK_CH_HEADER_MAX], unspent[SK_CH_HEADER_MAX], hdr[SK_CH_HEADER_MAX];
    struct sk_th_resp r;
    solved_for(&v, aid, 41, spent, sizeof spent);
    solved_for(&v, aid, 42, unspent, sizeof unspent);
    EXPECT_STATUS(send_ch(&v, "purchase", aid, 41, spent, NULL, &r), &r, 200);
    EXPECT_ERROR(send_ch(&v, "purchase", aid, 41, spent, NULL, &r), &r, 403, "challenge_replayed");
    sk_redis *rd;
    char err[256];
    CHECK_MSG(sk_redis_new(&rd, sk_th_redis_url(), 2000, 5000, err, sizeof err) == 0, "%s", err);
    sale_wait_drained(rd, aid, 20000); /* the order is in the database */

    /* the fault: every key of the sale's slot vanishes (as a restart
     * without persistence leaves it), the spent challenge's key with them */
    char match[64], spent_key[SK_KEYS_CH_MAX];
    struct sk_keys k;
    sk_keys_for(&k, aid);
    struct sk_ch_parsed sp;
    CHECK_EQ(sk_challenge_parse(spent, strlen(spent), &sp), 0);
    char id[SK_CH_ID_HEX + 1];
    snprintf(id, sizeof id, "%.*s", SK_CH_ID_HEX, sp.mac);
    CHECK(sk_keys_ch(&k, id, spent_key, sizeof spent_key) > 0);
    redisReply *rep;
    CHECK_EQ(sk_redis_cmd(rd, &rep, "EXISTS %s", spent_key), 0);
    CHECK_EQ(rep->integer, 1);
    freeReplyObject(rep);
    snprintf(match, sizeof match, "sk:{a%" PRIu64 "}:*", aid);
    int gone = 0;
    CHECK_EQ(sk_redis_cmd(rd, &rep, "KEYS %s", match), 0);
    for (size_t i = 0; i < rep->elements; i++) {
        redisReply *d;
        CHECK_EQ(sk_redis_cmd(rd, &d, "DEL %s", rep->element[i]->str), 0);
        gone += (int)d->integer;
        freeReplyObject(d);
    }
    freeReplyObject(rep);
    CHECK_MSG(gone >= 5, "only %d keys deleted", gone);
    CHECK_EQ(sk_redis_cmd(rd, &rep, "EXISTS %s", spent_key), 0);
    CHECK_EQ(rep->integer, 0);
    freeReplyObject(rep);
    /* serve's worker rebuilds it; meanwhile purchases are refused (a
     * fresh challenge each time: a refusal spends none, but one made
     * before the rebuild is stale after it) */
    int64_t deadline = sk_mono_ms() + 30000;
    int st = 0;
    for (;;) {
        CHECK_MSG(sk_mono_ms() < deadline, "the sale never came back: %d %s", st, r.body);
        solved_for(&v, aid, 43, hdr, sizeof hdr);
        st = send_ch(&v, "purchase", aid, 43, hdr, NULL, &r);
        if (st == 200) break;
        CHECK_MSG(st == 503 || st == 404 || (st == 403 && strstr(r.body, "challenge_stale")),
                  "while rebuilding: %d %s", st, r.body);
        sk_th_nap_ms(100);
    }
    /* spent before the fault: refused, not bought with again */
    EXPECT_ERROR(send_ch(&v, "purchase", aid, 41, spent, NULL, &r), &r, 403, "challenge_stale");
    /* made before, never spent: refused the same way */
    EXPECT_ERROR(send_ch(&v, "purchase", aid, 42, unspent, NULL, &r), &r, 403, "challenge_stale");
    /* a new one buys (the limit is 3) */
    solved_for(&v, aid, 41, hdr, sizeof hdr);
    EXPECT_STATUS(send_ch(&v, "purchase", aid, 41, hdr, NULL, &r), &r, 200);
    expect_stats(&v, aid, 7, 3, 2);
    sale_wait_drained(rd, aid, 20000);
    sk_store *st_db;
    CHECK_MSG(sk_store_open(&st_db, v.s.db, err, sizeof err) == 0, "%s", err);
    CHECK_EQ(sale_check_invariants(st_db, rd, sk_th_redis_url(), v.s.db, aid, 10, 3), 3);
    CHECK(sale_audit_count(st_db, aid, "recover_rebuild") >= 1);
    sk_store_close(st_db);
    sk_redis_free(rd);
    srv_stop(&v);
}
