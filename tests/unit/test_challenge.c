/* test_challenge.c - the challenge's pure parts (docs/challenges.md): a
 * challenge made and checked (forged, altered, another buyer's, another
 * activity's, expired, unsolved, solved), the header's shape, the bits
 * under load, the ticket, the spent key and the script arguments that
 * carry it, the definition's rules and the create body, the CAPTCHA
 * providers' request and the verdict on their answers, and the page's
 * policy widened for a provider. No server. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "core/codes.h"
#include "core/error.h"
#include "engine/activity.h"
#include "engine/challenge.h"
#include "engine/keys.h"
#include "engine/queue.h"
#include "engine/stock.h"
#include "http/captcha.h"
#include "http/http_body.h"
#include "http/sale_page.h"
#include "support/harness.h"

static const char KEY[] = "a-test-secret-of-32-bytes-000000";
#define NOW 1796000000000LL

/* A challenge of buyer uid for activity aid, expiring at exp, bits. */
static void make(uint64_t aid, uint64_t uid, int64_t exp, int bits, int captcha, uint64_t salt,
                 char *out, size_t cap)
{
    struct sk_ch_issue in = {.activity_id = aid,
                             .user_id = uid,
                             .exp_ms = exp,
                             .bits = bits,
                             .captcha = captcha,
                             .salt = salt};
    CHECK(sk_challenge_make(KEY, strlen(KEY), &in, out, cap) > 0);
}

/* "<text>.<nonce>" of text solved at bits, into hdr (cap bytes). */
static void solved(const char *text, int bits, char *hdr, size_t cap)
{
    char nonce[32];
    CHECK(sk_challenge_solve(text, strlen(text), bits, 0, 1u << 26, nonce, sizeof nonce, NULL) > 0);
    snprintf(hdr, cap, "%s.%s", text, nonce);
}

/* The check of header hdr by buyer uid for aid at now. */
static int check(const char *hdr, uint64_t aid, uint64_t uid, int64_t now, struct sk_ch_ok *ok)
{
    struct sk_ch_parsed p;
    CHECK_MSG(sk_challenge_parse(hdr, strlen(hdr), &p) == 0, "not parsed: %s", hdr);
    return sk_challenge_check(KEY, strlen(KEY), &p, aid, uid, now, ok);
}

SK_TEST(challenge_made_solved_and_checked)
{
    char text[SK_CH_TEXT_MAX], hdr[SK_CH_HEADER_MAX];
    make(1001, 42, NOW + 60000, 12, 0, 7, text, sizeof text);
    CHECK(strncmp(text, "1001.1796000060000.12.0.0000000000000007.", 41) == 0);
    solved(text, 12, hdr, sizeof hdr);
    struct sk_ch_ok ok;
    CHECK_EQ(check(hdr, 1001, 42, NOW, &ok), SK_RC_OK);
    CHECK_EQ(ok.bits, 12);
    CHECK_EQ(ok.captcha, 0);
    CHECK_EQ(ok.exp_ms, NOW + 60000);
    CHECK_EQ(strlen(ok.id), SK_CH_ID_HEX);
    CHECK_EQ(ok.made_ms, 0);
    /* the time it was made rides in the salt's high bits, signed with it */
    {
        struct sk_ch_issue in = {.activity_id = 1001,
                                 .user_id = 42,
                                 .exp_ms = NOW + 60000,
                                 .bits = 4,
                                 .salt = 0xfffff5,
                                 .made_ms = NOW};
        char t2[SK_CH_TEXT_MAX], h2[SK_CH_HEADER_MAX];
        CHECK(sk_challenge_make(KEY, strlen(KEY), &in, t2, sizeof t2) > 0);
        /* NOW << 20 | (salt & 0xfffff) */
        CHECK_MSG(strstr(t2, ".1a229f12800ffff5."), "%s", t2);
        solved(t2, 4, h2, sizeof h2);
        struct sk_ch_ok o2;
        CHECK_EQ(check(h2, 1001, 42, NOW, &o2), SK_RC_OK);
        CHECK_EQ(o2.made_ms, NOW);
        in.made_ms = (int64_t)1 << 44;
        CHECK_EQ(sk_challenge_make(KEY, strlen(KEY), &in, t2, sizeof t2), SK_EINVAL);
        in.made_ms = -1;
        CHECK_EQ(sk_challenge_make(KEY, strlen(KEY), &in, t2, sizeof t2), SK_EINVAL);
    }
    /* the id is the mac: the last field of the challenge */
    CHECK(strstr(text, ok.id) == text + strlen(text) - SK_CH_ID_HEX);
    /* the hash really has the bits: computed here by OpenSSL, independently */
    unsigned char md[32];
    unsigned int mdl;
    CHECK(EVP_Digest(hdr, strlen(text), md, &mdl, EVP_sha256(), NULL)); /* the text alone */
    char both[SK_CH_HEADER_MAX];
    size_t tl = strlen(text);
    memcpy(both, text, tl);
    strcpy(both + tl, hdr + tl + 1); /* text || nonce, no dot */
    CHECK(EVP_Digest(both, strlen(both), md, &mdl, EVP_sha256(), NULL));
    CHECK(md[0] == 0 && (md[1] & 0xf0) == 0);
    /* two challenges of one buyer never share an id (the salt) */
    char text2[SK_CH_TEXT_MAX], hdr2[SK_CH_HEADER_MAX];
    make(1001, 42, NOW + 60000, 12, 0, 8, text2, sizeof text2);
    solved(text2, 12, hdr2, sizeof hdr2);
    struct sk_ch_ok ok2;
    CHECK_EQ(check(hdr2, 1001, 42, NOW, &ok2), SK_RC_OK);
    CHECK(strcmp(ok.id, ok2.id) != 0);
}

SK_TEST(challenge_forged_altered_foreign_expired_and_unsolved_are_refused)
{
    char text[SK_CH_TEXT_MAX], hdr[SK_CH_HEADER_MAX], bad[SK_CH_HEADER_MAX];
    struct sk_ch_ok ok;
    make(1001, 42, NOW + 60000, 10, 0, 1, text, sizeof text);
    solved(text, 10, hdr, sizeof hdr);
    /* another buyer's: the mac names buyer 42 */
    CHECK_EQ(check(hdr, 1001, 43, NOW, &ok), SK_RC_CHALLENGE_INVALID);
    /* another activity's: a real one of 1001, sent to 1002 */
    CHECK_EQ(check(hdr, 1002, 42, NOW, &ok), SK_RC_CHALLENGE_FOREIGN);
    /* expired: at and after its expiry */
    CHECK_EQ(check(hdr, 1001, 42, NOW + 60000, &ok), SK_RC_CHALLENGE_EXPIRED);
    /* altered: fewer bits, a later expiry, another activity, the captcha
     * flag dropped, one digit of the mac: each breaks the mac */
    const char *edits[][2] = {
        {".10.", ".1."}, {"1796000060000", "1796000099999"}, {"1001.", "1002."}};
    for (size_t i = 0; i < sizeof edits / sizeof edits[0]; i++) {
        const char *at = strstr(hdr, edits[i][0]);
        CHECK(at);
        snprintf(bad, sizeof bad, "%.*s%s%s", (int)(at - hdr), hdr, edits[i][1],
                 at + strlen(edits[i][0]));
        int rc = check(bad, i == 2 ? 1002 : 1001, 42, NOW, &ok);
        CHECK_MSG(rc == SK_RC_CHALLENGE_INVALID, "%s: %s", bad, sk_rc_name(rc));
    }
    snprintf(bad, sizeof bad, "%s", hdr);
    char *mac = bad + strlen(text) - 1;
    *mac = *mac == '0' ? '1' : '0';
    CHECK_EQ(check(bad, 1001, 42, NOW, &ok), SK_RC_CHALLENGE_INVALID);
    /* made with another key: forged */
    struct sk_ch_issue in = {.activity_id = 1001, .user_id = 42, .exp_ms = NOW + 60000, .bits = 0};
    char forged[SK_CH_TEXT_MAX];
    CHECK(sk_challenge_make("another-key-another-key", 23, &in, forged, sizeof forged) > 0);
    snprintf(bad, sizeof bad, "%s.0", forged);
    CHECK_EQ(check(bad, 1001, 42, NOW, &ok), SK_RC_CHALLENGE_INVALID);
    /* too few bits: a nonce that does not solve it */
    for (int n = 0; n < 64; n++) {
        snprintf(bad, sizeof bad, "%s.x%d", text, n);
        struct sk_ch_parsed p;
        CHECK_EQ(sk_challenge_parse(bad, strlen(bad), &p), 0);
        int zb = sk_challenge_zero_bits(p.text, p.text_len, p.nonce, p.nonce_len);
        CHECK_EQ(check(bad, 1001, 42, NOW, &ok), zb >= 10 ? SK_RC_OK : SK_RC_CHALLENGE_UNSOLVED);
    }
    /* a short key makes nothing */
    CHECK_EQ(sk_challenge_make("short", 5, &in, forged, sizeof forged), SK_EINVAL);
    in.bits = SK_CH_BITS_MAX + 1;
    CHECK_EQ(sk_challenge_make(KEY, strlen(KEY), &in, forged, sizeof forged), SK_EINVAL);
}

SK_TEST(challenge_header_shape)
{
    char text[SK_CH_TEXT_MAX], h[400];
    make(7, 1, NOW, 3, 1, 99, text, sizeof text);
    struct sk_ch_parsed p;
    snprintf(h, sizeof h, "%s.Ab_-9", text);
    CHECK_EQ(sk_challenge_parse(h, strlen(h), &p), 0);
    CHECK_EQ(p.activity_id, 7);
    CHECK_EQ(p.bits, 3);
    CHECK_EQ(p.captcha, 1);
    CHECK_EQ(p.text_len, strlen(text));
    CHECK(p.nonce_len == 5 && !memcmp(p.nonce, "Ab_-9", 5));
    const char *bad[] = {
        "",
        ".",
        "7.1.3.1.0000000000000063.00000000000000000000000000000000",     /* no nonce */
        "7.1.3.1.0000000000000063.00000000000000000000000000000000.",    /* empty nonce */
        "7.1.3.1.0000000000000063.00000000000000000000000000000000.a.b", /* eight fields */
        "07.1.3.1.0000000000000063.00000000000000000000000000000000.a",  /* leading zero */
        "0.1.3.1.0000000000000063.00000000000000000000000000000000.a",   /* activity 0 */
        "7.1.31.1.0000000000000063.00000000000000000000000000000000.a",  /* bits > 30 */
        "7.1.3.2.0000000000000063.00000000000000000000000000000000.a",   /* captcha 2 */
        "7.1.3.1.000000000000063.00000000000000000000000000000000.a",    /* short salt */
        "7.1.3.1.000000000000006G.00000000000000000000000000000000.a",   /* not hex */
        "7.1.3.1.0000000000000063.0000000000000000000000000000000A.a",   /* upper case */
        "7.1.3.1.0000000000000063.00000000000000000000000000000000.a b", /* space */
        "7.1.3.1.0000000000000063.00000000000000000000000000000000."
        "123456789012345678901234567890123",
        "1234567890123456.1.3.1.0000000000000063.00000000000000000000000000000000.a",
        "7.-1.3.1.0000000000000063.00000000000000000000000000000000.a",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK_MSG(sk_challenge_parse(bad[i], strlen(bad[i]), &p) == SK_EINVAL, "took %s", bad[i]);
    /* a NUL inside, and bytes past len, are not read as the header */
    snprintf(h, sizeof h, "%s.abc", text);
    h[10] = 0;
    CHECK_EQ(sk_challenge_parse(h, strlen(text) + 4, &p), SK_EINVAL);
    CHECK_EQ(sk_challenge_parse(NULL, 0, &p), SK_EINVAL);
}

SK_TEST(challenge_bits_rise_with_the_load_within_bounds)
{
    CHECK_EQ(sk_challenge_bits(18, 18, 0, 1000000), 18); /* fixed */
    CHECK_EQ(sk_challenge_bits(16, 22, 1000, 0), 16);
    CHECK_EQ(sk_challenge_bits(16, 22, 1000, 999), 16);
    CHECK_EQ(sk_challenge_bits(16, 22, 1000, 1000), 17);
    CHECK_EQ(sk_challenge_bits(16, 22, 1000, 2999), 17);
    CHECK_EQ(sk_challenge_bits(16, 22, 1000, 3000), 18);
    CHECK_EQ(sk_challenge_bits(16, 22, 1000, 7000), 19);
    CHECK_EQ(sk_challenge_bits(16, 22, 1000, 63000), 22);
    CHECK_EQ(sk_challenge_bits(16, 22, 1000, INT64_MAX), 22); /* never past the maximum */
    CHECK_EQ(sk_challenge_bits(16, 22, 1, INT64_MAX), 22);
    CHECK_EQ(sk_challenge_bits(5, 40, 1, INT64_MAX), SK_CH_BITS_MAX);
    CHECK_EQ(sk_challenge_bits(-3, 2, 1, 0), 0);
}

SK_TEST(challenge_ticket_key_and_script_arguments)
{
    struct sk_ch_ok ok = {.bits = 20, .captcha = 1, .exp_ms = NOW, .made_ms = NOW - 120000};
    snprintf(ok.id, sizeof ok.id, "%s", "0123456789abcdef0123456789abcdef");
    char t[SK_CH_TICKET_MAX];
    CHECK_EQ(sk_challenge_ticket(&ok, 1, t, sizeof t), 32);
    CHECK_STR(t, "20:1:1796000000000:1795999880000");
    CHECK(sk_challenge_ticket(&ok, 0, t, sizeof t) > 0);
    CHECK_STR(t, "20:0:1796000000000:1795999880000");
    CHECK_EQ(sk_challenge_ticket(&ok, 0, t, 8), SK_ENOMEM);
    CHECK(sk_challenge_ticket(&ok, 0, t, sizeof t) > 0);
    /* the spent key, in the key set's tag */
    struct sk_keys k;
    sk_keys_seg(&k, 1001, 3);
    char key[SK_KEYS_CH_MAX];
    CHECK(sk_keys_ch(&k, ok.id, key, sizeof key) > 0);
    CHECK_STR(key, "sk:{a1001.s3}:ch:0123456789abcdef0123456789abcdef");
    CHECK(sk_keys_ch(&k, NULL, key, sizeof key) > 0);
    CHECK_STR(key, "sk:{a1001.s3}:ch:");
    /* a purchase batch: the challenge keys only when a ticket comes */
    struct sk_purchase p[2] = {{.user_id = 5, .quantity = 1}, {.user_id = 6, .quantity = 1}};
    char kb[SK_BATCH_KEY_BYTES(2)];
    const char *keys[SK_BATCH_KEYC(2)];
    sk_keys_for(&k, 9);
    CHECK_EQ(sk_stock_batch_keys(&k, NULL, p, 2, kb, sizeof kb, keys), SK_PURCHASE_NKEYS + 2);
    p[1].ch = t;
    p[1].ch_id = ok.id;
    CHECK_EQ(sk_stock_batch_keys(&k, NULL, p, 2, kb, sizeof kb, keys), SK_PURCHASE_NKEYS + 4);
    CHECK_STR(keys[SK_PURCHASE_NKEYS + 2], "sk:{a9}:ch:");
    CHECK_STR(keys[SK_PURCHASE_NKEYS + 3], "sk:{a9}:ch:0123456789abcdef0123456789abcdef");
    char ab[SK_BATCH_ARG_BYTES(2)];
    const char *args[SK_BATCH_ARGC(2)];
    size_t lens[SK_BATCH_ARGC(2)];
    struct sk_batch_head h = {.label = k.label};
    CHECK_EQ(sk_stock_batch_args_head(&h, p, 2, ab, sizeof ab, args, lens), 0);
    CHECK_STR(args[SK_BATCH_ARGC(0) + 5], ""); /* after the call's head */
    CHECK_STR(args[SK_BATCH_ARGC(1) + 5], "20:0:1796000000000:1795999880000");
    /* the queue: a ticket per buyer, keys with any */
    const char *tickets[2] = {NULL, t}, *ids[2] = {NULL, ok.id};
    uint64_t users[2] = {5, 6};
    char qb[SK_QUEUE_ARG_BYTES(2) + SK_QUEUE_KEY_BYTES(2)];
    const char *qa[SK_QUEUE_ARGC(2)], *qk[SK_QUEUE_KEYC(2)];
    size_t ql[SK_QUEUE_ARGC(2)];
    CHECK_EQ(sk_queue_args_ch(9, "jj", users, tickets, 2, qb, SK_QUEUE_ARG_BYTES(2), qa, ql), 0);
    CHECK_STR(qa[3], "");
    CHECK_STR(qa[6], "20:0:1796000000000:1795999880000");
    CHECK_EQ(sk_queue_keys(&k, ids, 2, qb, SK_QUEUE_KEY_BYTES(2), qk), SK_QUEUE_NKEYS + 2);
    CHECK_STR(qk[SK_QUEUE_NKEYS + 1], "sk:{a9}:ch:0123456789abcdef0123456789abcdef");
    CHECK_EQ(sk_queue_keys(&k, NULL, 2, qb, SK_QUEUE_KEY_BYTES(2), qk), SK_QUEUE_NKEYS);
}

/* A created activity with the challenge fields given. */
static int validate(int64_t min, int64_t max, int64_t step, const char *captcha, char *err,
                    size_t cap)
{
    struct sk_activity a;
    sk_activity_init(&a);
    a.id = 1;
    snprintf(a.name, sizeof a.name, "x");
    a.stock = 10;
    a.per_user_limit = 1;
    a.start_ms = 0;
    a.end_ms = 1000;
    a.ch_pow_min = min;
    a.ch_pow_max = max;
    a.ch_pow_step = step;
    snprintf(a.ch_captcha, sizeof a.ch_captcha, "%s", captcha);
    sk_activity_apply_defaults(&a);
    return sk_activity_validate(&a, err, cap);
}

SK_TEST(challenge_definition_rules_and_spec)
{
    char err[200];
    CHECK_EQ(validate(0, 0, 0, "", err, sizeof err), 0);
    CHECK_EQ(validate(20, 0, 0, "", err, sizeof err), 0);  /* max defaults to min */
    CHECK_EQ(validate(16, 22, 0, "", err, sizeof err), 0); /* step defaults */
    CHECK_EQ(validate(0, 0, 0, "turnstile", err, sizeof err), 0);
    CHECK_EQ(validate(31, 0, 0, "", err, sizeof err), SK_EINVAL);
    CHECK(strstr(err, "between 1 and 30"));
    CHECK_EQ(validate(20, 19, 0, "", err, sizeof err), SK_EINVAL);
    CHECK_EQ(validate(20, 31, 0, "", err, sizeof err), SK_EINVAL);
    CHECK_EQ(validate(0, 5, 0, "", err, sizeof err), SK_EINVAL);
    CHECK_EQ(validate(16, 22, -1, "", err, sizeof err), SK_EINVAL);
    CHECK_EQ(validate(0, 0, 0, "recaptcha-v3", err, sizeof err), SK_EINVAL);
    CHECK(strstr(err, "turnstile, hcaptcha or recaptcha"));
    struct sk_activity a;
    sk_activity_init(&a);
    char spec[SK_CH_SPEC_MAX];
    sk_activity_ch_spec(&a, spec, sizeof spec);
    CHECK_STR(spec, "");
    a.ch_pow_min = 18;
    sk_activity_ch_spec(&a, spec, sizeof spec);
    CHECK_STR(spec, "18:0");
    snprintf(a.ch_captcha, sizeof a.ch_captcha, "hcaptcha");
    sk_activity_ch_spec(&a, spec, sizeof spec);
    CHECK_STR(spec, "18:1");
    a.ch_pow_min = 0;
    sk_activity_ch_spec(&a, spec, sizeof spec);
    CHECK_STR(spec, "0:1");
}

/* The create body with challenge (JSON text) and nothing else odd. */
static int body(const char *challenge, struct sk_activity *b, char *err, size_t cap)
{
    char j[600];
    snprintf(j, sizeof j,
             "{\"id\":1,\"name\":\"n\",\"stock\":5,\"per_user_limit\":1,"
             "\"start\":\"2026-01-01T00:00:00Z\",\"end\":\"2026-01-02T00:00:00Z\","
             "\"challenge\":%s}",
             challenge);
    return sk_body_activity_create(j, strlen(j), b, err, cap);
}

SK_TEST(challenge_create_body)
{
    struct sk_activity b;
    char err[256];
    CHECK_EQ(body("{\"pow_bits\":18}", &b, err, sizeof err), 0);
    CHECK(b.ch_pow_min == 18 && b.ch_pow_max == 18 && b.ch_pow_step == 0 && !b.ch_captcha[0]);
    CHECK_EQ(body("{\"pow_bits_min\":16,\"pow_bits_max\":22}", &b, err, sizeof err), 0);
    CHECK(b.ch_pow_min == 16 && b.ch_pow_max == 22 && b.ch_pow_step == SK_CH_STEP_DEFAULT);
    CHECK_EQ(body("{\"pow_bits_min\":16,\"pow_bits_max\":22,\"pow_load_step\":50,"
                  "\"captcha\":\"turnstile\"}",
                  &b, err, sizeof err),
             0);
    CHECK(b.ch_pow_step == 50 && !strcmp(b.ch_captcha, "turnstile"));
    CHECK_EQ(body("{\"captcha\":\"recaptcha\"}", &b, err, sizeof err), 0);
    CHECK(b.ch_pow_min == 0 && !strcmp(b.ch_captcha, "recaptcha"));
    static const char *const bad[][2] = {
        {"{}", "give pow_bits"},
        {"[]", "must be an object"},
        {"{\"pow_bits\":0}", "between 1 and 30"},
        {"{\"pow_bits\":31}", "between 1 and 30"},
        {"{\"pow_bits\":\"20\"}", "integer"},
        {"{\"pow_bits\":20,\"pow_bits_max\":22}", "exclude each other"},
        {"{\"pow_bits_max\":22}", "need pow_bits_min"},
        {"{\"pow_bits_min\":20,\"pow_bits_max\":19}", "not be below"},
        {"{\"pow_bits_min\":20,\"pow_load_step\":5}", "needs pow_bits_max above"},
        {"{\"captcha\":\"geetest\"}", "captcha must be"},
        {"{\"captcha\":7}", "captcha must be"},
        {"{\"pow_bits\":null}", "integer"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK_MSG(body(bad[i][0], &b, err, sizeof err) == SK_EINVAL, "took %s", bad[i][0]);
        CHECK_MSG(strstr(err, bad[i][1]) && strstr(err, "challenge"), "%s: %s", bad[i][0], err);
        CHECK(b.ch_pow_min == 0 && b.id == 0); /* nothing is left of a refused body */
    }
}

SK_TEST(captcha_providers_request_and_verdict)
{
    CHECK(sk_captcha_find("turnstile") && sk_captcha_find("hcaptcha") &&
          sk_captcha_find("recaptcha"));
    CHECK(sk_captcha_find("") == NULL && sk_captcha_find(NULL) == NULL);
    /* every provider an activity may name has its table entry */
    const char *names[] = {"turnstile", "hcaptcha", "recaptcha"};
    for (int i = 0; i < 3; i++) {
        const struct sk_captcha_provider *p = sk_captcha_find(names[i]);
        CHECK(sk_activity_captcha_valid(names[i]) && p);
        CHECK(!strncmp(p->verify_url, "https://", 8) && !strncmp(p->script_url, "https://", 8));
        CHECK(strstr(p->csp, "script-src https://") && strstr(p->csp, "frame-src https://"));
    }
    const struct sk_captcha_provider *ts = sk_captcha_find("turnstile"),
                                     *hc = sk_captcha_find("hcaptcha");
    char f[512];
    CHECK(sk_captcha_form(ts, "s3c&r=t", "tok.+/=", 7, "10.0.0.1", "site", f, sizeof f) > 0);
    CHECK_STR(f, "secret=s3c%26r%3Dt&response=tok.%2B%2F%3D&remoteip=10.0.0.1");
    CHECK(sk_captcha_form(hc, "k", "t", 1, NULL, "site-1", f, sizeof f) > 0);
    CHECK_STR(f, "secret=k&response=t&sitekey=site-1");
    CHECK_EQ(sk_captcha_form(hc, "k", "t", 1, NULL, "site-1", f, 10), SK_ENOMEM);
    CHECK(sk_captcha_token_ok("0.AbC_d-e:f*g+h/i=", 18));
    CHECK(!sk_captcha_token_ok("a b", 3) && !sk_captcha_token_ok("a\0b", 3) &&
          !sk_captcha_token_ok("", 0) && !sk_captcha_token_ok("<x>", 3));

    struct sk_captcha_expect e = {.hostname = "shop.example", .action = "join"};
    char why[160];
    static const struct {
        int status;
        const char *body;
        enum sk_captcha_verdict v;
        const char *why;
    } cases[] = {
        {200, "{\"success\":true,\"hostname\":\"shop.example\",\"action\":\"join\"}",
         SK_CAPTCHA_PASS, "passed"},
        {200, "{\"success\":true,\"hostname\":\"SHOP.example\"}", SK_CAPTCHA_PASS, "passed"},
        {200, "{\"success\":false,\"error-codes\":[\"invalid-input-response\"]}",
         SK_CAPTCHA_REFUSED, "invalid-input-response"},
        {200, "{\"success\":false,\"error-codes\":[\"timeout-or-duplicate\"]}", SK_CAPTCHA_REFUSED,
         "timeout-or-duplicate"},
        {200, "{\"success\":false}", SK_CAPTCHA_REFUSED, "no error code"},
        {200, "{\"success\":true,\"hostname\":\"evil.example\"}", SK_CAPTCHA_REFUSED,
         "another host"},
        {200, "{\"success\":true}", SK_CAPTCHA_REFUSED, "another host"},
        {200, "{\"success\":true,\"hostname\":\"shop.example\",\"action\":\"purchase\"}",
         SK_CAPTCHA_REFUSED, "another action"},
        {200, "{\"success\":false,\"error-codes\":[\"invalid-input-secret\"]}", SK_CAPTCHA_ERROR,
         "siteverify failed"},
        {200, "{\"success\":false,\"error-codes\":[\"internal-error\"]}", SK_CAPTCHA_ERROR,
         "internal-error"},
        {500, "{\"success\":true}", SK_CAPTCHA_ERROR, "HTTP 500"},
        {200, "<html>bad gateway</html>", SK_CAPTCHA_ERROR, "not the documented"},
        {200, "{\"success\":\"yes\"}", SK_CAPTCHA_ERROR, "not the documented"},
        {200, "{\"success\":true,\"success\":true}", SK_CAPTCHA_ERROR, "not the documented"},
        {200, "", SK_CAPTCHA_ERROR, "not the documented"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        enum sk_captcha_verdict v = sk_captcha_verdict(cases[i].status, cases[i].body,
                                                       strlen(cases[i].body), &e, why, sizeof why);
        CHECK_MSG(v == cases[i].v && strstr(why, cases[i].why), "%s: %d (%s)", cases[i].body, v,
                  why);
    }
    /* nothing expected: any host, any action */
    struct sk_captcha_expect any = {0};
    const char *any_ok = "{\"success\":true,\"action\":\"x\"}";
    CHECK_EQ(sk_captcha_verdict(200, any_ok, strlen(any_ok), &any, why, sizeof why),
             SK_CAPTCHA_PASS);
}

SK_TEST(challenge_page_policy_widened_for_a_provider)
{
    char out[512];
    const char *csp = "default-src 'none'; script-src 'unsafe-inline'; connect-src 'self'";
    CHECK(sk_csp_widen(csp, strlen(csp),
                       "script-src https://a.example; frame-src https://a.example", out,
                       sizeof out) > 0);
    CHECK_STR(out, "default-src 'none'; script-src 'unsafe-inline' https://a.example; connect-src "
                   "'self'; frame-src https://a.example");
    CHECK(sk_csp_widen(csp, strlen(csp), NULL, out, sizeof out) > 0);
    CHECK_STR(out, csp);
    CHECK_EQ(sk_csp_widen(csp, strlen(csp), "frame-src", out, sizeof out), SK_EINVAL);
    CHECK_EQ(sk_csp_widen(csp, strlen(csp), "frame-src x", out, 20), SK_ENOMEM);
    /* the page this server sends: the policy allows the provider's origins
     * (and the proof of work's workers), nothing else changed */
    char *page;
    size_t len;
    CHECK_EQ(sk_sale_page_served(sk_captcha_find("turnstile")->csp, &page, &len), 0);
    CHECK(strstr(page, "script-src 'unsafe-inline' https://challenges.cloudflare.com;"));
    CHECK(strstr(page, "frame-src https://challenges.cloudflare.com\""));
    CHECK(strstr(page, "worker-src blob:;"));
    CHECK(strstr(page, "<script type=\"application/json\" id=\"sk-config\">{}</script>"));
    free(page);
    char err[128];
    CHECK_EQ(sk_sale_page_build_csp(5, NULL, sk_captcha_find("hcaptcha")->csp, &page, &len, err,
                                    sizeof err),
             0);
    CHECK(strstr(page, "connect-src 'self' https://hcaptcha.com https://*.hcaptcha.com;"));
    CHECK(strstr(page, "{\"activity\":5,"));
    free(page);
}

/* A widget script of the operator's (captcha_script_url): the page loads
 * it, and its policy names that origin in the provider's directives and
 * no origin of the provider's; a URL the policy or JSON could be broken
 * by, or plain http:// off loopback, is refused. */
SK_TEST(captcha_widget_script_of_the_operators_own)
{
    const struct sk_captcha_provider *ts = sk_captcha_find("turnstile"),
                                     *hc = sk_captcha_find("hcaptcha");
    const char *script = NULL;
    char csp[SK_CAPTCHA_CSP_MAX];
    /* none set: the provider's script and documented origins */
    CHECK(sk_captcha_widget(ts, "", &script, csp, sizeof csp) > 0);
    CHECK_STR(script, ts->script_url);
    CHECK_STR(csp, ts->csp);
    CHECK(sk_captcha_widget(ts, NULL, &script, csp, sizeof csp) > 0);
    CHECK_STR(script, ts->script_url);
    /* a stand-in on loopback: its origin alone, in each directive */
    const char *mine = "http://127.0.0.1:8123/turnstile/api.js?render=explicit";
    CHECK(sk_captcha_widget(ts, mine, &script, csp, sizeof csp) > 0);
    CHECK_STR(script, mine);
    CHECK_STR(csp, "script-src http://127.0.0.1:8123; frame-src http://127.0.0.1:8123");
    CHECK(sk_captcha_widget(hc, "https://cdn.shop.example/h/api.js", &script, csp, sizeof csp) > 0);
    CHECK_STR(csp, "script-src https://cdn.shop.example; frame-src https://cdn.shop.example; "
                   "style-src https://cdn.shop.example; connect-src https://cdn.shop.example");
    CHECK(!strstr(csp, "hcaptcha.com"));
    char origin[128], why[96];
    CHECK_EQ(
        sk_captcha_script_check("https://[::1]:9/a.js", origin, sizeof origin, why, sizeof why), 0);
    CHECK_STR(origin, "https://[::1]:9");
    CHECK_EQ(
        sk_captcha_script_check("http://localhost/a.js", origin, sizeof origin, why, sizeof why),
        0);
    CHECK_STR(origin, "http://localhost");
    const char *bad[] = {"http://shop.example/a.js",
                         "http://127.0.0.1.shop.example/a.js",
                         "https://a.example/x y",
                         "https://a.example/';script-src *",
                         "javascript:alert(1)",
                         "https://",
                         "https://a.example#x",
                         "https://a.example:/a.js",
                         ""};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK_MSG(sk_captcha_script_check(bad[i], origin, sizeof origin, why, sizeof why) ==
                          SK_EINVAL &&
                      why[0],
                  "took %s", bad[i]);
        CHECK_EQ(sk_captcha_widget(ts, bad[i][0] ? bad[i] : "x", &script, csp, sizeof csp),
                 SK_EINVAL);
    }
    CHECK_EQ(sk_captcha_widget(ts, mine, &script, csp, 10), SK_ENOMEM);
    /* at most SK_CAPTCHA_SCRIPT_MAX - 1 bytes: the live read's JSON has room */
    char big[SK_CAPTCHA_SCRIPT_MAX + 8];
    int n = snprintf(big, sizeof big, "https://cdn.shop.example/");
    memset(big + n, 'a', sizeof big - 1 - (size_t)n);
    big[sizeof big - 1] = 0;
    CHECK_EQ(sk_captcha_script_check(big, origin, sizeof origin, why, sizeof why), SK_EINVAL);
    big[SK_CAPTCHA_SCRIPT_MAX - 1] = 0;
    CHECK_EQ(sk_captcha_script_check(big, origin, sizeof origin, why, sizeof why), 0);
}
