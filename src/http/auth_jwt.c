/* auth_jwt.c - JSON Web Key Sets and JWS token checks (auth_jwt.h). The
 * key set is parsed once (at start and at each reload) into OpenSSL key
 * objects; a check decodes three base64url parts, parses two small JSON
 * objects and runs one signature verification (tens of microseconds for
 * RS256 and ES256, a few for EdDSA). */
#include "http/auth_jwt.h"

#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/ecdsa.h>
#include <openssl/evp.h>
#include <openssl/param_build.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "core/error.h"
#include "core/num.h"

enum jwt_kty { KTY_RSA, KTY_EC, KTY_OKP };

struct jwt_key {
    char kid[128]; /* "" when the key has none */
    int has_kid;
    enum jwt_kty kty;
    EVP_PKEY *pkey;
};

struct sk_jwt_keys {
    size_t n;
    struct jwt_key k[SK_JWKS_KEYS_MAX];
};

/* ---- base64url ----------------------------------------------------------- */

static int b64_val(unsigned char c)
{
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '-') return 62;
    if (c == '_') return 63;
    return -1;
}

int sk_b64url_decode(const char *in, size_t len, unsigned char *out, size_t cap)
{
    if (len % 4 == 1) return SK_EINVAL; /* no whole byte in a lone sextet */
    size_t need = len / 4 * 3 + (len % 4 ? len % 4 - 1 : 0);
    if (need > cap) return SK_EINVAL;
    uint32_t acc = 0;
    int bits = 0;
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        int v = b64_val((unsigned char)in[i]);
        if (v < 0) return SK_EINVAL;
        acc = (acc << 6) | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[o++] = (unsigned char)(acc >> bits);
        }
    }
    /* the leftover bits must be zero: one encoding per byte string */
    if (bits && (acc & ((1u << bits) - 1))) return SK_EINVAL;
    return (int)o;
}

/* A JSON member holding base64url: decoded into out; -1 on failure. */
static int b64_member(json_t *o, const char *name, unsigned char *out, size_t cap)
{
    const char *s = json_string_value(json_object_get(o, name));
    if (!s) return -1;
    int n = sk_b64url_decode(s, strlen(s), out, cap);
    return n < 0 ? -1 : n;
}

/* ---- the key set ----------------------------------------------------------- */

static EVP_PKEY *from_params(const char *type, OSSL_PARAM_BLD *bld)
{
    EVP_PKEY *pkey = NULL;
    OSSL_PARAM *params = OSSL_PARAM_BLD_to_param(bld);
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_name(NULL, type, NULL);
    if (params && ctx && EVP_PKEY_fromdata_init(ctx) > 0)
        EVP_PKEY_fromdata(ctx, &pkey, EVP_PKEY_PUBLIC_KEY, params);
    EVP_PKEY_CTX_free(ctx);
    OSSL_PARAM_free(params);
    return pkey;
}

static EVP_PKEY *rsa_key(json_t *o, char *err, size_t cap)
{
    static unsigned char n[1024], e[16];
    int nl = b64_member(o, "n", n, sizeof n), el = b64_member(o, "e", e, sizeof e);
    if (nl <= 0 || el <= 0) {
        snprintf(err, cap, "RSA key needs base64url n and e");
        return NULL;
    }
    BIGNUM *bn = BN_bin2bn(n, nl, NULL), *be = BN_bin2bn(e, el, NULL);
    EVP_PKEY *pkey = NULL;
    if (bn && be && BN_num_bits(bn) < 2048)
        snprintf(err, cap, "RSA key of %d bits (at least 2048)", BN_num_bits(bn));
    else if (bn && be && (BN_is_one(be) || !BN_is_odd(be)))
        snprintf(err, cap, "RSA key with a bad exponent");
    else if (bn && be) {
        OSSL_PARAM_BLD *bld = OSSL_PARAM_BLD_new();
        if (bld && OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_N, bn) &&
            OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_E, be))
            pkey = from_params("RSA", bld);
        OSSL_PARAM_BLD_free(bld);
        if (!pkey) snprintf(err, cap, "RSA key refused by OpenSSL");
    } else
        snprintf(err, cap, "out of memory");
    BN_free(bn);
    BN_free(be);
    return pkey;
}

static EVP_PKEY *ec_key(json_t *o, char *err, size_t cap)
{
    const char *crv = json_string_value(json_object_get(o, "crv"));
    unsigned char pt[65], x[64], y[64];
    if (!crv || strcmp(crv, "P-256") != 0) {
        snprintf(err, cap, "EC key: only crv P-256 (ES256)");
        return NULL;
    }
    if (b64_member(o, "x", x, sizeof x) != 32 || b64_member(o, "y", y, sizeof y) != 32) {
        snprintf(err, cap, "EC key needs 32-byte base64url x and y");
        return NULL;
    }
    pt[0] = 4; /* uncompressed point */
    memcpy(pt + 1, x, 32);
    memcpy(pt + 33, y, 32);
    EVP_PKEY *pkey = NULL;
    OSSL_PARAM_BLD *bld = OSSL_PARAM_BLD_new();
    if (bld && OSSL_PARAM_BLD_push_utf8_string(bld, OSSL_PKEY_PARAM_GROUP_NAME, "prime256v1", 0) &&
        OSSL_PARAM_BLD_push_octet_string(bld, OSSL_PKEY_PARAM_PUB_KEY, pt, sizeof pt))
        pkey = from_params("EC", bld);
    OSSL_PARAM_BLD_free(bld);
    /* a point off the curve would make every check meaningless */
    EVP_PKEY_CTX *ctx = pkey ? EVP_PKEY_CTX_new_from_pkey(NULL, pkey, NULL) : NULL;
    int ok = ctx && EVP_PKEY_public_check(ctx) > 0;
    EVP_PKEY_CTX_free(ctx);
    if (!ok) {
        EVP_PKEY_free(pkey);
        snprintf(err, cap, "EC key: not a point of P-256");
        return NULL;
    }
    return pkey;
}

static EVP_PKEY *okp_key(json_t *o, char *err, size_t cap)
{
    const char *crv = json_string_value(json_object_get(o, "crv"));
    unsigned char x[64];
    if (!crv || strcmp(crv, "Ed25519") != 0) {
        snprintf(err, cap, "OKP key: only crv Ed25519 (EdDSA)");
        return NULL;
    }
    if (b64_member(o, "x", x, sizeof x) != 32) {
        snprintf(err, cap, "Ed25519 key needs a 32-byte base64url x");
        return NULL;
    }
    EVP_PKEY *pkey = EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, NULL, x, 32);
    if (!pkey) snprintf(err, cap, "Ed25519 key refused by OpenSSL");
    return pkey;
}

static const char *alg_of(enum jwt_kty t)
{
    return t == KTY_RSA ? "RS256" : t == KTY_EC ? "ES256" : "EdDSA";
}

/* One member of "keys": 1 added, 0 skipped (not for signatures), -1 bad. */
static int add_key(sk_jwt_keys *ks, json_t *o, size_t i, char *err, size_t cap)
{
    char why[160] = "";
    const char *kty = json_string_value(json_object_get(o, "kty"));
    const char *use = json_string_value(json_object_get(o, "use"));
    const char *alg = json_string_value(json_object_get(o, "alg"));
    json_t *jkid = json_object_get(o, "kid");
    if (!json_is_object(o) || !kty) {
        snprintf(err, cap, "key %zu: not an object with kty", i + 1);
        return -1;
    }
    if (use && strcmp(use, "sig") != 0) return 0;
    struct jwt_key k = {0};
    if (!strcmp(kty, "RSA"))
        k.kty = KTY_RSA;
    else if (!strcmp(kty, "EC"))
        k.kty = KTY_EC;
    else if (!strcmp(kty, "OKP"))
        k.kty = KTY_OKP;
    else {
        snprintf(err, cap, "key %zu: kty %.20s (RSA, EC or OKP; no symmetric keys)", i + 1, kty);
        return -1;
    }
    if (alg && strcmp(alg, alg_of(k.kty)) != 0) {
        snprintf(err, cap, "key %zu: alg %.20s does not fit kty %s", i + 1, alg, kty);
        return -1;
    }
    if (jkid) {
        const char *kid = json_string_value(jkid);
        if (!kid || strlen(kid) >= sizeof k.kid) {
            snprintf(err, cap, "key %zu: kid must be a string of at most %zu bytes", i + 1,
                     sizeof k.kid - 1);
            return -1;
        }
        snprintf(k.kid, sizeof k.kid, "%s", kid);
        k.has_kid = 1;
        for (size_t j = 0; j < ks->n; j++)
            if (ks->k[j].has_kid && !strcmp(ks->k[j].kid, k.kid)) {
                snprintf(err, cap, "key %zu: kid \"%.40s\" twice", i + 1, k.kid);
                return -1;
            }
    }
    k.pkey = k.kty == KTY_RSA  ? rsa_key(o, why, sizeof why)
             : k.kty == KTY_EC ? ec_key(o, why, sizeof why)
                               : okp_key(o, why, sizeof why);
    if (!k.pkey) {
        snprintf(err, cap, "key %zu: %s", i + 1, why);
        return -1;
    }
    if (ks->n == SK_JWKS_KEYS_MAX) {
        EVP_PKEY_free(k.pkey);
        snprintf(err, cap, "more than %d keys", SK_JWKS_KEYS_MAX);
        return -1;
    }
    ks->k[ks->n++] = k;
    return 1;
}

int sk_jwt_keys_parse(sk_jwt_keys **out, const char *text, size_t len, char *err, size_t cap)
{
    *out = NULL;
    if (cap) err[0] = 0;
    if (!text || len == 0 || len > SK_JWKS_MAX || memchr(text, 0, len))
        return sk_einval(err, cap, "a key set is 1..%d bytes of JSON", SK_JWKS_MAX);
    json_error_t je;
    json_t *doc = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    json_t *keys = json_object_get(doc, "keys");
    if (!json_is_array(keys)) {
        json_decref(doc);
        return sk_einval(err, cap, "not a JWK Set: %s", doc ? "no \"keys\" array" : "not JSON");
    }
    sk_jwt_keys *ks = calloc(1, sizeof *ks);
    if (!ks) {
        json_decref(doc);
        return SK_ENOMEM;
    }
    int rc = 0;
    for (size_t i = 0; i < json_array_size(keys) && rc == 0; i++)
        if (add_key(ks, json_array_get(keys, i), i, err, cap) < 0) rc = SK_EINVAL;
    json_decref(doc);
    if (rc == 0 && ks->n == 0) rc = sk_einval(err, cap, "no signature key in the set");
    if (rc < 0) {
        sk_jwt_keys_free(ks);
        return rc;
    }
    *out = ks;
    return 0;
}

void sk_jwt_keys_free(sk_jwt_keys *k)
{
    if (!k) return;
    for (size_t i = 0; i < k->n; i++)
        EVP_PKEY_free(k->k[i].pkey);
    free(k);
}

size_t sk_jwt_keys_count(const sk_jwt_keys *k)
{
    return k ? k->n : 0;
}

/* ---- a token ------------------------------------------------------------------ */

/* One JSON object out of a base64url part; NULL when it is none. */
static json_t *json_part(const char *p, size_t len)
{
    unsigned char buf[SK_JWT_TOKEN_MAX];
    int n = sk_b64url_decode(p, len, buf, sizeof buf);
    if (n <= 0 || memchr(buf, 0, (size_t)n)) return NULL;
    json_error_t je;
    json_t *o = json_loadb((const char *)buf, (size_t)n, JSON_REJECT_DUPLICATES, &je);
    if (o && !json_is_object(o)) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* ES256's signature is R || S (32 bytes each); OpenSSL checks DER. */
static int es256_der(const unsigned char *sig, unsigned char *der, size_t cap)
{
    ECDSA_SIG *s = ECDSA_SIG_new();
    BIGNUM *r = BN_bin2bn(sig, 32, NULL), *ss = BN_bin2bn(sig + 32, 32, NULL);
    if (!s || !r || !ss || !ECDSA_SIG_set0(s, r, ss)) {
        BN_free(r);
        BN_free(ss);
        ECDSA_SIG_free(s);
        return -1;
    }
    int n = i2d_ECDSA_SIG(s, NULL);
    if (n <= 0 || (size_t)n > cap) {
        ECDSA_SIG_free(s);
        return -1;
    }
    unsigned char *p = der;
    i2d_ECDSA_SIG(s, &p);
    ECDSA_SIG_free(s);
    return n;
}

/* 1 when sig is a valid signature of msg under key k. */
static int sig_ok(const struct jwt_key *k, const char *msg, size_t mlen, const unsigned char *sig,
                  size_t slen)
{
    unsigned char der[80];
    if (k->kty == KTY_EC) {
        if (slen != 64) return 0;
        int n = es256_der(sig, der, sizeof der);
        if (n < 0) return 0;
        sig = der;
        slen = (size_t)n;
    } else if (k->kty == KTY_OKP && slen != 64) {
        return 0;
    }
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    int ok = md &&
             EVP_DigestVerifyInit(md, NULL, k->kty == KTY_OKP ? NULL : EVP_sha256(), NULL,
                                  k->pkey) == 1 &&
             EVP_DigestVerify(md, sig, slen, (const unsigned char *)msg, mlen) == 1;
    EVP_MD_CTX_free(md);
    return ok;
}

/* A NumericDate claim: 1 with *out, 0 when absent, -1 when not a number. */
static int num_date(json_t *claims, const char *name, int64_t *out)
{
    json_t *v = json_object_get(claims, name);
    if (!v) return 0;
    if (json_is_integer(v)) {
        *out = (int64_t)json_integer_value(v);
        return 1;
    }
    if (json_is_real(v)) {
        double d = json_real_value(v);
        if (!(d > -9.2e18 && d < 9.2e18)) return -1;
        *out = (int64_t)d;
        return 1;
    }
    return -1;
}

/* The buyer out of the user claim (auth_jwt.h). */
static int user_of(json_t *claims, const char *name, uint64_t *uid)
{
    json_t *v = json_object_get(claims, name);
    if (json_is_integer(v)) {
        json_int_t x = json_integer_value(v);
        if (x < 1) return -1;
        *uid = (uint64_t)x;
        return 0;
    }
    const char *s = json_string_value(v);
    if (!s) return -1;
    return sk_num_u64_canonical(s, strlen(s), uid) < 0 ? -1 : 0;
}

/* a + b, saturated at the ends of int64_t (claims come from outside:
 * exp near INT64_MAX must not overflow a comparison). */
static int64_t sat_add(int64_t a, int64_t b)
{
    int64_t r;
    if (!__builtin_add_overflow(a, b, &r)) return r;
    return b > 0 ? INT64_MAX : INT64_MIN;
}

static int64_t sat_sub(int64_t a, int64_t b)
{
    int64_t r;
    if (!__builtin_sub_overflow(a, b, &r)) return r;
    return b < 0 ? INT64_MAX : INT64_MIN;
}

static int aud_ok(json_t *claims, const char *want)
{
    json_t *aud = json_object_get(claims, "aud");
    if (json_is_string(aud)) return !strcmp(json_string_value(aud), want);
    size_t i;
    json_t *x;
    json_array_foreach(aud, i,
                       x) if (json_is_string(x) && !strcmp(json_string_value(x), want)) return 1;
    return 0;
}

#define FAIL(text)                                                                                 \
    do {                                                                                           \
        *why = (text);                                                                             \
        goto out;                                                                                  \
    } while (0)

int sk_jwt_verify(const sk_jwt_keys *ks, const struct sk_jwt_policy *p, const char *tok, size_t len,
                  int64_t now, uint64_t *uid, const char **whyp)
{
    const char *dummy, **why = whyp ? whyp : &dummy;
    *why = "malformed";
    if (!ks || !tok || len == 0 || len > SK_JWT_TOKEN_MAX) return SK_EAUTH;
    const char *d1 = memchr(tok, '.', len);
    const char *d2 = d1 ? memchr(d1 + 1, '.', len - (size_t)(d1 + 1 - tok)) : NULL;
    if (!d1 || !d2 || memchr(d2 + 1, '.', len - (size_t)(d2 + 1 - tok))) return SK_EAUTH;
    int rc = SK_EAUTH;
    json_t *hdr = json_part(tok, (size_t)(d1 - tok));
    json_t *claims = NULL;
    unsigned char sig[600];
    const char *alg = json_string_value(json_object_get(hdr, "alg"));
    if (!hdr || !alg) FAIL("malformed header");
    enum jwt_kty want;
    if (!strcmp(alg, "RS256"))
        want = KTY_RSA;
    else if (!strcmp(alg, "ES256"))
        want = KTY_EC;
    else if (!strcmp(alg, "EdDSA"))
        want = KTY_OKP;
    else
        FAIL("algorithm not accepted"); /* none, HS*, PS*, RS384... */
    if (json_object_get(hdr, "crit")) FAIL("crit header");
    json_t *jkid = json_object_get(hdr, "kid");
    if (jkid && !json_is_string(jkid)) FAIL("malformed kid");
    const char *kid = json_string_value(jkid);
    int slen = sk_b64url_decode(d2 + 1, len - (size_t)(d2 + 1 - tok), sig, sizeof sig);
    if (slen <= 0) FAIL("malformed signature");
    int matched = 0, valid = 0;
    for (size_t i = 0; i < ks->n && !valid; i++) {
        const struct jwt_key *k = &ks->k[i];
        if (kid && !(k->has_kid && !strcmp(k->kid, kid))) continue;
        matched = 1;
        if (k->kty != want) continue; /* the key decides the algorithm, not the token */
        valid = sig_ok(k, tok, (size_t)(d2 - tok), sig, (size_t)slen);
    }
    if (!matched) FAIL("unknown kid");
    if (!valid) FAIL("bad signature");
    claims = json_part(d1 + 1, (size_t)(d2 - d1 - 1));
    if (!claims) FAIL("malformed claims");
    int64_t exp, nbf, iat;
    if (num_date(claims, "exp", &exp) != 1) FAIL("no exp");
    if (now >= sat_add(exp, p->leeway_s)) FAIL("expired");
    int r = num_date(claims, "nbf", &nbf);
    if (r < 0 || (r == 1 && nbf > sat_add(now, p->leeway_s))) FAIL("not valid yet");
    r = num_date(claims, "iat", &iat);
    if (r < 0 || (r == 1 && iat > sat_add(now, p->leeway_s))) FAIL("issued in the future");
    /* a lifetime past the bound: a stolen token would serve for that long */
    if (p->max_ttl_s > 0 && sat_sub(exp, r == 1 ? iat : now) > p->max_ttl_s)
        FAIL("lifetime over the maximum");
    if (p->issuer && p->issuer[0]) {
        const char *iss = json_string_value(json_object_get(claims, "iss"));
        if (!iss || strcmp(iss, p->issuer) != 0) FAIL("wrong issuer");
    }
    if (p->audience && p->audience[0] && strcmp(p->audience, "*") != 0 &&
        !aud_ok(claims, p->audience))
        FAIL("wrong audience");
    uint64_t u;
    if (user_of(claims, p->user_claim && p->user_claim[0] ? p->user_claim : "sub", &u) < 0)
        FAIL("user claim is not a positive integer");
    *uid = u;
    *why = "ok";
    rc = 0;
out:
    json_decref(hdr);
    json_decref(claims);
    return rc;
}
