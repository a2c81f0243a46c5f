/* challenge.c - signed proof-of-work challenges (challenge.h). */
#include "engine/challenge.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "core/codes.h"
#include "core/error.h"
#include "core/num.h"
#include "engine/activity.h"

static const char hexd[] = "0123456789abcdef";

/* The salt: the time it was made, then a counter (challenge.h). */
#define SALT_SEQ_BITS 20
#define SALT_TIME_BITS 44
#define SALT_SEQ_MASK ((UINT64_C(1) << SALT_SEQ_BITS) - 1)

/* The mac of a challenge: the first 128 bits of HMAC-SHA256 over its
 * fields and the buyer, as lowercase hex into out (SK_CH_ID_HEX + 1). */
static int mac_of(const void *secret, size_t slen, uint64_t aid, uint64_t uid, int64_t exp,
                  int bits, int captcha, const char *salt, char *out)
{
    char msg[160];
    int n = snprintf(msg, sizeof msg, "sk-ch1:%" PRIu64 ":%" PRIu64 ":%" PRId64 ":%d:%d:%.*s", aid,
                     uid, exp, bits, captcha, SK_CH_SALT_HEX, salt);
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    if (n < 0 || (size_t)n >= sizeof msg || slen > 0x7fffffff ||
        !HMAC(EVP_sha256(), secret, (int)slen, (const unsigned char *)msg, (size_t)n, md, &mdlen) ||
        mdlen < SK_CH_ID_HEX / 2)
        return SK_EINVAL;
    for (int i = 0; i < SK_CH_ID_HEX / 2; i++) {
        out[2 * i] = hexd[md[i] >> 4];
        out[2 * i + 1] = hexd[md[i] & 15];
    }
    out[SK_CH_ID_HEX] = 0;
    return 0;
}

int sk_challenge_make(const void *secret, size_t slen, const struct sk_ch_issue *in, char *out,
                      size_t cap)
{
    if (!secret || slen < SK_CH_SECRET_MIN || in->activity_id < 1 ||
        in->activity_id > SK_ACTIVITY_ID_MAX || in->exp_ms < 1 || in->exp_ms > SK_TIME_MAX_MS ||
        in->bits < 0 || in->bits > SK_CH_BITS_MAX || (in->captcha != 0 && in->captcha != 1) ||
        in->made_ms < 0 || in->made_ms >= (int64_t)1 << SALT_TIME_BITS)
        return SK_EINVAL;
    char salt[SK_CH_SALT_HEX + 1], mac[SK_CH_ID_HEX + 1];
    snprintf(salt, sizeof salt, "%016" PRIx64,
             (uint64_t)in->made_ms << SALT_SEQ_BITS | (in->salt & SALT_SEQ_MASK));
    if (mac_of(secret, slen, in->activity_id, in->user_id, in->exp_ms, in->bits, in->captcha, salt,
               mac) < 0)
        return SK_EINVAL;
    int n = snprintf(out, cap, "%" PRIu64 ".%" PRId64 ".%d.%d.%s.%s", in->activity_id, in->exp_ms,
                     in->bits, in->captcha, salt, mac);
    if (n < 0 || (size_t)n >= cap) {
        if (cap) out[0] = 0;
        return SK_ENOMEM;
    }
    return n;
}

/* A canonical decimal of 1..maxd digits in [s, e) into *v. */
static int dec(const char *s, const char *e, int maxd, uint64_t *v)
{
    size_t n = (size_t)(e - s);
    if (n == 0 || (int)n > maxd || (s[0] == '0' && n > 1)) return SK_EINVAL;
    uint64_t x = 0;
    for (const char *q = s; q < e; q++) {
        if (*q < '0' || *q > '9') return SK_EINVAL;
        x = x * 10 + (uint64_t)(*q - '0');
    }
    *v = x;
    return 0;
}

static int lower_hex(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return 0;
    return 1;
}

static int nonce_char(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
           c == '-';
}

int sk_challenge_parse(const char *hdr, size_t len, struct sk_ch_parsed *p)
{
    memset(p, 0, sizeof *p);
    if (!hdr || len < 3 || len >= SK_CH_HEADER_MAX) return SK_EINVAL;
    /* seven fields: activity, expiry, bits, captcha, salt, mac, nonce */
    const char *f[8];
    int nf = 0;
    f[nf++] = hdr;
    for (size_t i = 0; i < len; i++)
        if (hdr[i] == '.') {
            if (nf == 7) return SK_EINVAL;
            f[nf++] = hdr + i + 1;
        }
    if (nf != 7) return SK_EINVAL;
    f[7] = hdr + len + 1; /* one past the end, as if a '.' followed */
#define FEND(i) (f[(i) + 1] - 1)
    uint64_t aid, exp, bits, cap;
    if (dec(f[0], FEND(0), 15, &aid) < 0 || aid == 0 || dec(f[1], FEND(1), 15, &exp) < 0 ||
        exp == 0 || dec(f[2], FEND(2), 2, &bits) < 0 || bits > SK_CH_BITS_MAX ||
        dec(f[3], FEND(3), 1, &cap) < 0 || cap > 1)
        return SK_EINVAL;
    if (FEND(4) - f[4] != SK_CH_SALT_HEX || !lower_hex(f[4], SK_CH_SALT_HEX) ||
        FEND(5) - f[5] != SK_CH_ID_HEX || !lower_hex(f[5], SK_CH_ID_HEX))
        return SK_EINVAL;
    size_t nl = (size_t)(FEND(6) - f[6]);
    if (nl < 1 || nl > SK_CH_NONCE_MAX) return SK_EINVAL;
    for (size_t i = 0; i < nl; i++)
        if (!nonce_char(f[6][i])) return SK_EINVAL;
#undef FEND
    p->activity_id = aid;
    p->exp_ms = (int64_t)exp;
    uint64_t salt = 0;
    for (int i = 0; i < SK_CH_SALT_HEX; i++) {
        char h = f[4][i];
        salt = salt << 4 | (uint64_t)(h <= '9' ? h - '0' : h - 'a' + 10);
    }
    p->made_ms = (int64_t)(salt >> SALT_SEQ_BITS);
    p->bits = (int)bits;
    p->captcha = (int)cap;
    p->text = hdr;
    p->text_len = (size_t)(f[6] - 1 - hdr);
    p->salt = f[4];
    p->mac = f[5];
    p->nonce = f[6];
    p->nonce_len = nl;
    return 0;
}

/* Leading zero bits of a digest. */
static int zero_bits(const unsigned char *md, size_t n)
{
    int z = 0;
    for (size_t i = 0; i < n; i++) {
        if (md[i] == 0) {
            z += 8;
            continue;
        }
        for (unsigned b = 0x80; b && !(md[i] & b); b >>= 1)
            z++;
        break;
    }
    return z;
}

int sk_challenge_zero_bits(const char *a, size_t alen, const char *b, size_t blen)
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    int ok = ctx && EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) && EVP_DigestUpdate(ctx, a, alen) &&
             EVP_DigestUpdate(ctx, b, blen) && EVP_DigestFinal_ex(ctx, md, &mdlen);
    EVP_MD_CTX_free(ctx);
    return ok ? zero_bits(md, mdlen) : 0;
}

int sk_challenge_check(const void *secret, size_t slen, const struct sk_ch_parsed *p, uint64_t aid,
                       uint64_t uid, int64_t now_ms, struct sk_ch_ok *ok)
{
    char mac[SK_CH_ID_HEX + 1];
    /* the mac over the challenge's own activity: a valid one for another
     * activity is that activity's, not a forgery */
    if (mac_of(secret, slen, p->activity_id, uid, p->exp_ms, p->bits, p->captcha, p->salt, mac) <
            0 ||
        CRYPTO_memcmp(mac, p->mac, SK_CH_ID_HEX) != 0)
        return SK_RC_CHALLENGE_INVALID;
    if (p->activity_id != aid) return SK_RC_CHALLENGE_FOREIGN;
    if (p->exp_ms <= now_ms) return SK_RC_CHALLENGE_EXPIRED;
    if (sk_challenge_zero_bits(p->text, p->text_len, p->nonce, p->nonce_len) < p->bits)
        return SK_RC_CHALLENGE_UNSOLVED;
    ok->bits = p->bits;
    ok->captcha = p->captcha;
    ok->exp_ms = p->exp_ms;
    ok->made_ms = p->made_ms;
    memcpy(ok->id, p->mac, SK_CH_ID_HEX);
    ok->id[SK_CH_ID_HEX] = 0;
    return SK_RC_OK;
}

int sk_challenge_ticket(const struct sk_ch_ok *ok, int captcha_passed, char *out, size_t cap)
{
    int n = snprintf(out, cap, "%d:%d:%" PRId64 ":%" PRId64, ok->bits, captcha_passed ? 1 : 0,
                     ok->exp_ms, ok->made_ms);
    if (n < 0 || (size_t)n >= cap) {
        if (cap) out[0] = 0;
        return SK_ENOMEM;
    }
    return n;
}

int sk_challenge_bits(int64_t min, int64_t max, int64_t step, int64_t load)
{
    if (min < 0) min = 0;
    if (min > SK_CH_BITS_MAX) min = SK_CH_BITS_MAX;
    if (max > SK_CH_BITS_MAX) max = SK_CH_BITS_MAX;
    if (step <= 0 || max <= min || load <= 0) return (int)min;
    /* floor(log2((load + step) / step)), in integers: how many times step
     * doubles up to load + step */
    int64_t bits = min;
    for (int64_t t = 2 * step; bits < max && t - step <= load; t *= 2) {
        bits++;
        if (t > INT64_MAX / 2) break;
    }
    return (int)bits;
}

int sk_challenge_solve(const char *text, size_t len, int bits, uint64_t start, uint64_t max_tries,
                       char *nonce, size_t cap, uint64_t *tries)
{
    if (tries) *tries = 0;
    if (!text || bits < 0 || bits > 64 || cap < 21) return SK_EINVAL;
    /* the challenge is hashed once; each try copies that state and adds its
     * nonce (a bot's first saving: the text is the same for every try) */
    EVP_MD_CTX *base = EVP_MD_CTX_new(), *ctx = EVP_MD_CTX_new();
    int rc = SK_ENOTFOUND;
    if (!base || !ctx || !EVP_DigestInit_ex(base, EVP_sha256(), NULL) ||
        !EVP_DigestUpdate(base, text, len))
        rc = SK_ENOMEM;
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen;
    uint64_t t = 0;
    for (; rc == SK_ENOTFOUND && t < max_tries; t++) {
        size_t nl = (size_t)(sk_num_u64_put(nonce, start + t) - nonce);
        nonce[nl] = 0;
        if (!EVP_MD_CTX_copy_ex(ctx, base) || !EVP_DigestUpdate(ctx, nonce, nl) ||
            !EVP_DigestFinal_ex(ctx, md, &mdlen)) {
            rc = SK_ENOMEM;
            break;
        }
        if (zero_bits(md, mdlen) >= bits) rc = (int)nl;
    }
    if (rc == SK_ENOTFOUND) nonce[0] = 0;
    if (tries) *tries = t;
    EVP_MD_CTX_free(base);
    EVP_MD_CTX_free(ctx);
    return rc;
}
