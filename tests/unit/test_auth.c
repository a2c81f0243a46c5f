/* test_auth.c - X-User-Id, HMAC buyer tokens, Bearer extraction and the
 * constant-time admin comparison, fed bytes (no server). Inputs are copied
 * into exactly sized heap buffers so ASan (make SANITIZE=1) catches any
 * read past len. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "http/auth.h"
#include "support/fixtures.h"
#include "support/harness.h"

/* Exactly n bytes on the heap, no terminator. Caller frees. */
static char *exact(const char *s, size_t n)
{
    char *p = malloc(n ? n : 1);
    CHECK(p != NULL);
    if (n) memcpy(p, s, n);
    return p;
}

static int uid_of(const char *s, uint64_t *u)
{
    size_t n = strlen(s);
    char *p = exact(s, n);
    int rc = sk_auth_parse_user_id(p, n, u);
    free(p);
    return rc;
}

static int verify(const char *secret, const char *tok, int64_t now, uint64_t *u)
{
    size_t n = strlen(tok);
    char *p = exact(tok, n);
    int rc = sk_auth_verify_token(secret, strlen(secret), p, n, now, u);
    free(p);
    return rc;
}

/* deterministic, so a failure reproduces */
/* A token for uid expiring at exp, signed with the terminated secret sec,
 * into tok; its length (the test fails when it cannot be made). */
static int signed_token(const char *sec, uint64_t uid, int64_t exp, char tok[SK_AUTH_TOKEN_MAX + 1])
{
    int n = sk_auth_make_token(sec, strlen(sec), uid, exp, tok, SK_AUTH_TOKEN_MAX + 1);
    CHECK_MSG(n > 0, "no token for user %llu: %d", (unsigned long long)uid, n);
    return n;
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;
#define rnd() sk_th_xorshift(&rng_state)

SK_TEST(user_id_accepts_canonical_decimals_up_to_uint64_max)
{
    uint64_t u = 0;
    CHECK_EQ(uid_of("1", &u), 0);
    CHECK(u == 1);
    CHECK_EQ(uid_of("42", &u), 0);
    CHECK(u == 42);
    CHECK_EQ(uid_of("18446744073709551615", &u), 0);
    CHECK(u == UINT64_MAX);
    CHECK_EQ(uid_of("10000000000000000000", &u), 0);
    CHECK(u == 10000000000000000000ULL);
    /* only len bytes count: "123" of "123abc" */
    CHECK_EQ(sk_auth_parse_user_id("123abc", 3, &u), 0);
    CHECK(u == 123);
}

SK_TEST(user_id_rejects_zero_sign_spaces_exponents_leading_zeros_and_overflow)
{
    const char *bad[] = {"0",
                         "",
                         "-1",
                         "+1",
                         "1e3",
                         " 1",
                         "1 ",
                         "01",
                         "00",
                         "1.0",
                         "0x1",
                         "abc",
                         "1_0",
                         "١",
                         "1\t",
                         "\n1",
                         "1,2",
                         "18446744073709551616",
                         "99999999999999999999",
                         "184467440737095516150",
                         "000000000000000000001"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        uint64_t u = 7;
        CHECK_MSG(uid_of(bad[i], &u) == SK_EINVAL, "accepted \"%s\"", bad[i]);
        CHECK_MSG(u == 7, "wrote uid for \"%s\"", bad[i]);
    }
    uint64_t u;
    CHECK_EQ(sk_auth_parse_user_id("1\0002", 3, &u), SK_EINVAL); /* NUL inside */
    CHECK_EQ(sk_auth_parse_user_id(NULL, 0, &u), SK_EINVAL);
}

/* Expected MACs computed independently at development time with the OpenSSL
 * command line, e.g.:
 *   printf '%s' '42.1900000000' | openssl dgst -sha256 -hmac 'k3y-for-tests'
 *   printf '%s' '18446744073709551615.4102444800' | openssl dgst -sha256 -hmac 'another secret'
 * (the same tool gives RFC 4231 case 2: key "Jefe" -> 5bdcc146...ec3843). */
SK_TEST(hmac_token_matches_vectors_computed_with_the_openssl_cli)
{
    char tok[SK_AUTH_TOKEN_MAX + 1];
    const char *s1 = "k3y-for-tests";
    int n = sk_auth_make_token(s1, strlen(s1), 42, 1900000000, tok, sizeof tok);
    CHECK_STR(tok, "42.1900000000."
                   "6ca739a6c7449b56742e0e7cb71e9f64ce8a7444b29fb19ee9d3c3b5fa6c25da");
    CHECK_EQ(n, (long long)strlen(tok));
    const char *s2 = "another secret";
    n = sk_auth_make_token(s2, strlen(s2), UINT64_MAX, 4102444800LL, tok, sizeof tok);
    CHECK_STR(tok, "18446744073709551615.4102444800."
                   "6d16d614660e45084a1f0cd06af853db7f3b8d178d15a9d9f83accac686b6e55");
    CHECK_EQ(n, (long long)strlen(tok));
    uint64_t u = 0;
    CHECK_EQ(verify(s2, tok, 4102444799LL, &u), 0);
    CHECK(u == UINT64_MAX);
}

SK_TEST(hmac_token_round_trips_and_yields_the_user_id)
{
    const char *sec = "s3cret";
    char tok[SK_AUTH_TOKEN_MAX + 1];
    for (uint64_t uid = 1; uid < 2000000000000ULL; uid = uid * 7 + 3) {
        signed_token(sec, uid, 2000000000, tok);
        uint64_t u = 0;
        CHECK_EQ(verify(sec, tok, 1700000000, &u), 0);
        CHECK(u == uid);
    }
    /* the longest possible token fits SK_AUTH_TOKEN_MAX exactly */
    int n = sk_auth_make_token(sec, strlen(sec), UINT64_MAX, INT64_MAX, tok, sizeof tok);
    CHECK_EQ(n, SK_AUTH_TOKEN_MAX);
    uint64_t u = 0;
    CHECK_EQ(verify(sec, tok, 0, &u), 0);
}

SK_TEST(hmac_token_with_a_flipped_signature_byte_is_refused)
{
    const char *sec = "s3cret";
    char tok[SK_AUTH_TOKEN_MAX + 1];
    int n = signed_token(sec, 77, 2000000000, tok);
    CHECK(n > 64);
    static const char hex[] = "0123456789abcdef";
    for (int i = n - 64; i < n; i++) {
        char orig = tok[i];
        for (int h = 0; h < 16; h++) {
            if (hex[h] == orig) continue;
            tok[i] = hex[h];
            uint64_t u = 5;
            CHECK_MSG(verify(sec, tok, 1, &u) == SK_EAUTH, "forged at %d", i);
            CHECK(u == 5);
        }
        tok[i] = orig;
    }
    uint64_t u;
    CHECK_EQ(verify(sec, tok, 1, &u), 0);
}

SK_TEST(hmac_token_signed_with_another_secret_is_refused)
{
    char tok[SK_AUTH_TOKEN_MAX + 1];
    CHECK(sk_auth_make_token("alpha", 5, 9, 2000000000, tok, sizeof tok) > 0);
    uint64_t u;
    CHECK_EQ(verify("alphb", tok, 1, &u), SK_EAUTH);
    CHECK_EQ(verify("alpha ", tok, 1, &u), SK_EAUTH);
    CHECK_EQ(sk_auth_verify_token("alpha", 4, tok, strlen(tok), 1, &u), SK_EAUTH);
    /* an empty secret refuses everything, even a token made "with" it */
    CHECK_EQ(sk_auth_verify_token("", 0, tok, strlen(tok), 1, &u), SK_EAUTH);
    CHECK_EQ(sk_auth_make_token("", 0, 9, 2000000000, tok, sizeof tok), SK_EINVAL);
    CHECK_EQ(verify("alpha", tok, 1, &u), SK_EAUTH); /* tok is "" now */
}

SK_TEST(hmac_token_is_refused_at_and_after_its_expiry)
{
    const char *sec = "s3cret";
    char tok[SK_AUTH_TOKEN_MAX + 1];
    signed_token(sec, 5, 1000, tok);
    uint64_t u;
    CHECK_EQ(verify(sec, tok, 999, &u), 0);
    CHECK_EQ(verify(sec, tok, 1000, &u), SK_EAUTH);
    CHECK_EQ(verify(sec, tok, 1001, &u), SK_EAUTH);
    CHECK_EQ(verify(sec, tok, INT64_MAX, &u), SK_EAUTH);
    CHECK_EQ(verify(sec, tok, INT64_MIN, &u), 0);
}

SK_TEST(hmac_token_with_tampered_user_id_or_expiry_is_refused)
{
    const char *sec = "s3cret";
    char tok[SK_AUTH_TOKEN_MAX + 1], forged[SK_AUTH_TOKEN_MAX + 8];
    signed_token(sec, 100, 2000000000, tok);
    const char *sig = strrchr(tok, '.') + 1;
    const char *variants[] = {"101.2000000000.",  "100.2000000001.", "0100.2000000000.",
                              "100.02000000000.", "1000.200000000.", "10.02000000000."};
    for (size_t i = 0; i < sizeof variants / sizeof variants[0]; i++) {
        snprintf(forged, sizeof forged, "%s%s", variants[i], sig);
        uint64_t u;
        CHECK_MSG(verify(sec, forged, 1, &u) == SK_EAUTH, "accepted %s", forged);
    }
}

SK_TEST(hmac_token_rejects_malformed_shapes)
{
    const char *sec = "s3cret";
    char tok[SK_AUTH_TOKEN_MAX + 1], bad[256];
    signed_token(sec, 12, 2000000000, tok);
    const char *sig = strrchr(tok, '.') + 1;
    char upper[65];
    for (int i = 0; i < 64; i++)
        upper[i] = (char)(sig[i] >= 'a' ? sig[i] - 32 : sig[i]);
    upper[64] = 0;
    const char *shapes[] = {"",
                            "12",
                            "12.2000000000",
                            "12.2000000000.",
                            ".2000000000.%s",
                            "12..%s",
                            "12.2000000000.%s.",
                            "12.2000000000.%s0",
                            "12.2000000000.x%s",
                            " 12.2000000000.%s",
                            "12.2000000000.%s ",
                            "+12.2000000000.%s",
                            "12.-2000000000.%s",
                            "12.2000000000..%s",
                            "0.2000000000.%s",
                            "12.0.%s"};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        snprintf(bad, sizeof bad, shapes[i], sig);
        uint64_t u;
        CHECK_MSG(verify(sec, bad, 1, &u) == SK_EAUTH, "accepted \"%s\"", bad);
    }
    snprintf(bad, sizeof bad, "12.2000000000.%s", upper);
    uint64_t u;
    CHECK_EQ(verify(sec, bad, 1, &u), SK_EAUTH); /* uppercase hex is not the format */
    snprintf(bad, sizeof bad, "12.2000000000.%.63s", sig);
    CHECK_EQ(verify(sec, bad, 1, &u), SK_EAUTH);
    /* a NUL byte inside the token */
    size_t n = strlen(tok);
    char *p = exact(tok, n);
    p[1] = 0;
    CHECK_EQ(sk_auth_verify_token(sec, strlen(sec), p, n, 1, &u), SK_EAUTH);
    free(p);
    /* expiry past INT64_MAX */
    CHECK_EQ(verify(sec,
                    "1.9223372036854775808."
                    "0000000000000000000000000000000000000000000000000000000000000000",
                    1, &u),
             SK_EAUTH);
}

SK_TEST(hmac_verify_never_reads_past_len)
{
    const char *sec = "s3cret";
    char tok[SK_AUTH_TOKEN_MAX + 1];
    int n = signed_token(sec, 3, 2000000000, tok);
    /* every prefix, each in an exactly sized buffer: all refused, no overread */
    for (int k = 0; k < n; k++) {
        char *p = exact(tok, (size_t)k);
        uint64_t u;
        CHECK_EQ(sk_auth_verify_token(sec, strlen(sec), p, (size_t)k, 1, &u), SK_EAUTH);
        free(p);
    }
    char *p = exact(tok, (size_t)n);
    uint64_t u = 0;
    CHECK_EQ(sk_auth_verify_token(sec, strlen(sec), p, (size_t)n, 1, &u), 0);
    CHECK(u == 3);
    free(p);
}

SK_TEST(make_token_reports_small_buffers_and_bad_arguments)
{
    char tok[SK_AUTH_TOKEN_MAX + 1];
    int n = sk_auth_make_token("k", 1, 42, 1900000000, tok, sizeof tok);
    CHECK_EQ(n, 2 + 1 + 10 + 1 + 64);
    memset(tok, 'x', sizeof tok);
    CHECK_EQ(sk_auth_make_token("k", 1, 42, 1900000000, tok, (size_t)n), SK_ENOMEM);
    CHECK_STR(tok, "");
    CHECK_EQ(sk_auth_make_token("k", 1, 42, 1900000000, tok, (size_t)n + 1), n);
    CHECK_EQ(sk_auth_make_token("k", 1, 0, 1900000000, tok, sizeof tok), SK_EINVAL);
    CHECK_EQ(sk_auth_make_token("k", 1, 1, 0, tok, sizeof tok), SK_EINVAL);
    CHECK_EQ(sk_auth_make_token("k", 1, 1, -5, tok, sizeof tok), SK_EINVAL);
    CHECK_EQ(sk_auth_make_token("k", 1, 1, 5, NULL, 0), SK_ENOMEM);
}

static int bearer(const char *h, char *out, size_t cap)
{
    size_t n = strlen(h);
    char *p = exact(h, n);
    const char *t = NULL;
    size_t tl = 0;
    int rc = sk_auth_bearer(p, n, &t, &tl);
    if (rc == 0) {
        CHECK(t >= p && t + tl <= p + n);
        snprintf(out, cap, "%.*s", (int)tl, t);
    }
    free(p);
    return rc;
}

SK_TEST(bearer_extracts_the_token_with_a_case_insensitive_scheme)
{
    char t[128];
    CHECK_EQ(bearer("Bearer abc.def", t, sizeof t), 0);
    CHECK_STR(t, "abc.def");
    CHECK_EQ(bearer("bearer x", t, sizeof t), 0);
    CHECK_STR(t, "x");
    CHECK_EQ(bearer("BEARER \t  tok  \t", t, sizeof t), 0);
    CHECK_STR(t, "tok");
    CHECK_EQ(bearer("bEaReR 1.2.abc", t, sizeof t), 0);
    CHECK_STR(t, "1.2.abc");
}

SK_TEST(bearer_rejects_other_schemes_missing_and_split_tokens)
{
    const char *bad[] = {"",
                         "Bearer",
                         "Bearer ",
                         "Bearer   \t",
                         "Basic abc",
                         "Bearerabc",
                         "Bearer a b",
                         "Bear abc",
                         " Bearer abc",
                         "Token abc",
                         "Bearer\tx\ny",
                         "Bearer a\x01",
                         "Bearer\x0b"
                         "abc"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char t[64];
        CHECK_MSG(bearer(bad[i], t, sizeof t) == SK_EAUTH, "accepted \"%s\"", bad[i]);
    }
    const char *t;
    size_t tl;
    CHECK_EQ(sk_auth_bearer(NULL, 0, &t, &tl), SK_EAUTH);
    CHECK_EQ(sk_auth_bearer("Bearer x", 7, &t, &tl), SK_EAUTH); /* len stops before the token */
}

SK_TEST(admin_token_comparison_is_exact_and_fails_closed_on_empty)
{
    CHECK_EQ(sk_auth_equal("letmein", 7, "letmein", 7), 1);
    CHECK_EQ(sk_auth_equal("letmein", 7, "letmeio", 7), 0);
    CHECK_EQ(sk_auth_equal("letmein", 7, "Letmein", 7), 0);
    CHECK_EQ(sk_auth_equal("letmein", 7, "letmein!", 8), 0);
    CHECK_EQ(sk_auth_equal("letmein", 7, "letmei", 6), 0);
    CHECK_EQ(sk_auth_equal("", 0, "", 0), 0);
    CHECK_EQ(sk_auth_equal(NULL, 0, "x", 1), 0);
    CHECK_EQ(sk_auth_equal("a\0b", 3, "a\0b", 3), 1);
    CHECK_EQ(sk_auth_equal("a\0b", 3, "a\0c", 3), 0);
}

/* 100,000 random and mutated inputs through every parser: no crash (ASan
 * and UBSan under SANITIZE=1), and no mutated token is ever accepted
 * unless it is byte-for-byte the original. */
SK_TEST(auth_parsers_survive_100000_random_and_mutated_inputs)
{
    const char *sec = "fuzz-secret";
    char good[SK_AUTH_TOKEN_MAX + 1];
    int gn = signed_token(sec, 123456789, 2000000000, good);
    static const char alphabet[] = "0123456789abcdef.-+ eE\tBearer\0\xff";
    for (int iter = 0; iter < 100000; iter++) {
        char buf[160];
        size_t n;
        if (iter % 2) { /* mutate the valid token */
            n = (size_t)gn;
            memcpy(buf, good, n);
            int muts = 1 + (int)(rnd() % 3);
            for (int m = 0; m < muts; m++) {
                size_t at = (size_t)(rnd() % n);
                switch (rnd() % 4) {
                case 0: buf[at] = alphabet[rnd() % (sizeof alphabet - 1)]; break;
                case 1: buf[at] = (char)rnd(); break;
                case 2:
                    if (n > 1) {
                        memmove(buf + at, buf + at + 1, n - at - 1);
                        n--;
                    }
                    break;
                default:
                    n = sk_th_insert_drawn(buf, n, sizeof buf, at, alphabet, sizeof alphabet - 1,
                                           &rng_state);
                }
            }
        } else { /* random bytes, random length */
            n = (size_t)(rnd() % sizeof buf);
            for (size_t i = 0; i < n; i++)
                buf[i] = (rnd() & 1) ? alphabet[rnd() % (sizeof alphabet - 1)] : (char)rnd();
        }
        char *p = exact(buf, n);
        uint64_t u = 0;
        int rc = sk_auth_verify_token(sec, strlen(sec), p, n, 1, &u);
        int same = n == (size_t)gn && memcmp(p, good, n) == 0;
        CHECK_MSG(rc == (same ? 0 : SK_EAUTH), "iteration %d: rc %d", iter, rc);
        rc = sk_auth_parse_user_id(p, n, &u);
        CHECK(rc == 0 || rc == SK_EINVAL);
        const char *t;
        size_t tl;
        rc = sk_auth_bearer(p, n, &t, &tl);
        CHECK(rc == SK_EAUTH || (rc == 0 && t > p && t + tl <= p + n && tl > 0));
        CHECK(sk_auth_equal(p, n, good, (size_t)gn) == same);
        free(p);
    }
}

/* ---- key ids and the lifetime bound ---- */

static int verify_keys(const struct sk_auth_key *k, size_t n, const char *tok, int64_t now,
                       int64_t ttl, uint64_t *u)
{
    size_t len = strlen(tok);
    char *p = exact(tok, len);
    int rc = sk_auth_verify_token_keys(k, n, p, len, now, ttl, u);
    free(p);
    return rc;
}

/* Vector from the OpenSSL CLI:
 *   printf '%s' 'k2:42.1900000000' | openssl dgst -sha256 -hmac 'rotation-secret-0002' */
SK_TEST(hmac_token_with_a_key_id_matches_the_openssl_cli_and_signs_the_id)
{
    char tok[SK_AUTH_KID_TOKEN_MAX + 1];
    const char *sec = "rotation-secret-0002";
    int n = sk_auth_make_token_kid("k2", sec, strlen(sec), 42, 1900000000, tok, sizeof tok);
    CHECK_STR(tok, "k2:42.1900000000."
                   "324973bff53ad239f1b83e24a29e8da6fa97786fe03404a2ca7762e34943ef33");
    CHECK_EQ(n, (long long)strlen(tok));
    struct sk_auth_key k[] = {{"k2", sec, strlen(sec)}};
    uint64_t u = 0;
    CHECK_EQ(verify_keys(k, 1, tok, 1800000000, 0, &u), 0);
    CHECK(u == 42);
    /* the id is covered by the MAC: renaming it breaks the token */
    struct sk_auth_key k3[] = {{"k3", sec, strlen(sec)}};
    tok[1] = '3';
    CHECK_EQ(verify_keys(k3, 1, tok, 1800000000, 0, &u), SK_EAUTH);
    /* no id: the same bytes as sk_auth_make_token */
    char a[SK_AUTH_KID_TOKEN_MAX + 1], b[SK_AUTH_TOKEN_MAX + 1];
    CHECK(sk_auth_make_token_kid(NULL, sec, strlen(sec), 7, 1900000000, a, sizeof a) > 0);
    CHECK(sk_auth_make_token(sec, strlen(sec), 7, 1900000000, b, sizeof b) > 0);
    CHECK_STR(a, b);
    CHECK(sk_auth_make_token_kid("", sec, strlen(sec), 7, 1900000000, a, sizeof a) > 0);
    CHECK_STR(a, b);
    /* ids: at most SK_AUTH_KID_MAX of [A-Za-z0-9_-] */
    CHECK_EQ(sk_auth_make_token_kid("a:b", sec, strlen(sec), 7, 1900000000, a, sizeof a),
             SK_EINVAL);
    CHECK_EQ(sk_auth_make_token_kid("012345678901234567890123456789012", sec, strlen(sec), 7,
                                    1900000000, a, sizeof a),
             SK_EINVAL);
    int m = sk_auth_make_token_kid("01234567890123456789012345678901", sec, strlen(sec), UINT64_MAX,
                                   INT64_MAX, a, sizeof a);
    CHECK_EQ(m, SK_AUTH_KID_TOKEN_MAX); /* the longest fits exactly */
    struct sk_auth_key kl[] = {{"01234567890123456789012345678901", sec, strlen(sec)}};
    CHECK_EQ(verify_keys(kl, 1, a, 0, 0, &u), 0);
}

SK_TEST(hmac_rotation_accepts_both_keys_by_id_and_nothing_else)
{
    const char *old = "old-secret-of-16+", *cur = "new-secret-of-16+";
    struct sk_auth_key keys[] = {{"2", cur, strlen(cur)}, {"", old, strlen(old)}};
    char tok[SK_AUTH_KID_TOKEN_MAX + 1];
    uint64_t u = 0;
    /* new tokens carry id 2; old ones carry none and were signed with the old secret */
    CHECK(sk_auth_make_token_kid("2", cur, strlen(cur), 11, 2000, tok, sizeof tok) > 0);
    CHECK_EQ(verify_keys(keys, 2, tok, 1000, 0, &u), 0);
    CHECK(u == 11);
    CHECK(sk_auth_make_token(old, strlen(old), 12, 2000, tok, sizeof tok) > 0);
    CHECK_EQ(verify_keys(keys, 2, tok, 1000, 0, &u), 0);
    CHECK(u == 12);
    /* the wrong secret for the id, an unknown id, the old key alone */
    CHECK(sk_auth_make_token_kid("2", old, strlen(old), 13, 2000, tok, sizeof tok) > 0);
    CHECK_EQ(verify_keys(keys, 2, tok, 1000, 0, &u), SK_EAUTH);
    CHECK(sk_auth_make_token(cur, strlen(cur), 14, 2000, tok, sizeof tok) > 0);
    CHECK_EQ(verify_keys(keys, 2, tok, 1000, 0, &u), SK_EAUTH);
    CHECK(sk_auth_make_token_kid("9", cur, strlen(cur), 15, 2000, tok, sizeof tok) > 0);
    CHECK_EQ(verify_keys(keys, 2, tok, 1000, 0, &u), SK_EAUTH);
    CHECK(sk_auth_make_token_kid("2", cur, strlen(cur), 16, 2000, tok, sizeof tok) > 0);
    CHECK_EQ(verify_keys(keys + 1, 1, tok, 1000, 0, &u), SK_EAUTH); /* old key dropped... */
    CHECK_EQ(verify_keys(keys, 1, tok, 1000, 0, &u), 0);            /* ...new one kept */
    /* malformed ids never reach a key */
    const char *bad[] = {":1.2000.", "a b:1.2000.", "2::1.2000.", "2:2:1.2000."};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char t[256];
        snprintf(t, sizeof t, "%s%.64s", bad[i], strrchr(tok, '.') + 1);
        CHECK_MSG(verify_keys(keys, 2, t, 1000, 0, &u) == SK_EAUTH, "accepted %s", t);
    }
    CHECK(u == 16);
}

SK_TEST(hmac_token_living_longer_than_the_max_ttl_is_refused)
{
    const char *sec = "ttl-secret-0123456";
    struct sk_auth_key k[] = {{"", sec, strlen(sec)}};
    char tok[SK_AUTH_KID_TOKEN_MAX + 1];
    uint64_t u = 0;
    int64_t now = 1800000000;
    CHECK(sk_auth_make_token(sec, strlen(sec), 5, now + 86400, tok, sizeof tok) > 0);
    CHECK_EQ(verify_keys(k, 1, tok, now, 86400, &u), 0); /* exactly the bound */
    CHECK_EQ(verify_keys(k, 1, tok, now - 1, 86400, &u), SK_EAUTH);
    CHECK_EQ(verify_keys(k, 1, tok, now - 1, 0, &u), 0); /* 0: no bound */
    /* the never-expiring token */
    CHECK(sk_auth_make_token(sec, strlen(sec), 6, INT64_MAX, tok, sizeof tok) > 0);
    CHECK_EQ(verify_keys(k, 1, tok, now, 86400, &u), SK_EAUTH);
    CHECK_EQ(verify_keys(k, 1, tok, now, 31536000, &u), SK_EAUTH);
    CHECK(u == 5);
    /* expiry still applies */
    CHECK(sk_auth_make_token(sec, strlen(sec), 7, now, tok, sizeof tok) > 0);
    CHECK_EQ(verify_keys(k, 1, tok, now, 86400, &u), SK_EAUTH);
}
