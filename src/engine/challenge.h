/* challenge.h - the challenge a buyer solves before a queue join (or a
 * purchase, without a waiting room) of an activity that asks one
 * (docs/challenges.md): proof of work, with a CAPTCHA riding along when the
 * activity names a provider.
 *
 * The server hands out a challenge, signed with its secret:
 *
 *     <activity>.<expiry ms>.<bits>.<captcha 0|1>.<salt: 16 hex>.<mac: 32 hex>
 *
 * The salt is the time it was made (unix ms, its high 44 bits) and a
 * counter of the issuing process (its low 20): two challenges of one buyer
 * never share an id, and the time it was made is signed with the rest (a
 * key set recovered from a Redis fault refuses challenges made before the
 * recovery: what spent them may be lost, lua/lib/challenge.lua).
 *
 * mac = the first 128 bits of HMAC-SHA256(secret,
 * "sk-ch1:<activity>:<buyer>:<expiry>:<bits>:<captcha>:<salt>"), so it
 * names one buyer (who is not in the text: the request says who asks) and
 * one activity, until its expiry. The client finds a nonce (1..32 bytes of
 * [0-9A-Za-z_-]) such that SHA-256(challenge text immediately followed by
 * the nonce) starts with <bits> zero bits, and sends
 *
 *     X-Challenge: <challenge>.<nonce>
 *
 * Checking costs one HMAC and one SHA-256, no I/O. That the challenge is
 * used once is the admission or queue script's to say (lua/lib/challenge.lua:
 * a key per spent challenge, named by its mac, living until its expiry), in
 * the call the request makes anyway.
 *
 * Everything here is pure (no clock reads: callers pass now), and the
 * header parser takes any bytes (tests/fuzz/fuzz_challenge.c). */
#ifndef SK_CHALLENGE_H
#define SK_CHALLENGE_H
#include <stddef.h>
#include <stdint.h>

#define SK_CH_ID_HEX 32    /* the id of a challenge: its mac, hex */
#define SK_CH_SALT_HEX 16  /* its salt, hex */
#define SK_CH_NONCE_MAX 32 /* longest nonce */
#define SK_CH_TEXT_MAX 112 /* longest challenge text, with its terminator */
#define SK_CH_HEADER_MAX (SK_CH_TEXT_MAX + SK_CH_NONCE_MAX + 1)
#define SK_CH_TICKET_MAX 48 /* "<bits>:<captcha>:<expiry ms>:<made ms>" with its terminator */
#define SK_CH_SECRET_MIN 16 /* shortest secret accepted (bytes) */

/* A challenge to hand out. */
struct sk_ch_issue {
    uint64_t activity_id, user_id;
    int64_t exp_ms;  /* unix ms */
    int bits;        /* 0..SK_CH_BITS_MAX (activity.h) */
    int captcha;     /* 1: a CAPTCHA token must come with the solution */
    uint64_t salt;   /* a counter (its low 20 bits are used): two challenges
                        of one buyer made in one millisecond never share an id */
    int64_t made_ms; /* unix ms, 0..2^44-1: when it was made (in the salt) */
};

/* The challenge text of in, signed with secret (slen >= SK_CH_SECRET_MIN
 * bytes), into out (cap bytes, terminated). Returns its length, or
 * SK_EINVAL (bad fields, short secret) / SK_ENOMEM (cap too small). */
int sk_challenge_make(const void *secret, size_t slen, const struct sk_ch_issue *in, char *out,
                      size_t cap);

/* An X-Challenge header as parsed: the fields of the challenge and where
 * the challenge text and the nonce are (pointers into the header). */
struct sk_ch_parsed {
    uint64_t activity_id;
    int64_t exp_ms;
    int64_t made_ms; /* from the salt (trusted once the mac is checked) */
    int bits, captcha;
    const char *text; /* the challenge text (without ".<nonce>") */
    size_t text_len;
    const char *salt, *mac; /* SK_CH_SALT_HEX and SK_CH_ID_HEX bytes into text */
    const char *nonce;
    size_t nonce_len;
};

/* The shape of len bytes of an X-Challenge header (any bytes): 0 with *p
 * filled, or SK_EINVAL when it is not shaped like a challenge and a nonce
 * (canonical decimals, bits <= 30, captcha 0 or 1, lowercase hex salt and
 * mac of their lengths, a nonce of 1..SK_CH_NONCE_MAX [0-9A-Za-z_-]). */
int sk_challenge_parse(const char *hdr, size_t len, struct sk_ch_parsed *p);

/* What a checked solution carries to the scripts. */
struct sk_ch_ok {
    int bits, captcha;
    int64_t exp_ms, made_ms;
    char id[SK_CH_ID_HEX + 1]; /* names its spent key (keys.h: sk_keys_ch) */
};

/* Checks a parsed solution of buyer user_id for activity_id at now_ms.
 * Returns SK_RC_OK (*ok filled), or the refusal (codes.def):
 * CHALLENGE_INVALID (the mac is not this server's for this buyer: forged,
 * altered, another buyer's), CHALLENGE_FOREIGN (this buyer's, another
 * activity's), CHALLENGE_EXPIRED, CHALLENGE_UNSOLVED (too few zero bits).
 * The mac is compared in constant time. */
int sk_challenge_check(const void *secret, size_t slen, const struct sk_ch_parsed *p,
                       uint64_t activity_id, uint64_t user_id, int64_t now_ms, struct sk_ch_ok *ok);

/* Leading zero bits of SHA-256(a || b) (0..256). */
int sk_challenge_zero_bits(const char *a, size_t alen, const char *b, size_t blen);

/* The ticket of a checked solution as the scripts take it:
 * "<bits>:<captcha 1|0>:<expiry ms>:<made ms>"; captcha is 1 only when the CAPTCHA
 * token was verified (or the provider failed open). Returns its length or
 * SK_ENOMEM. */
int sk_challenge_ticket(const struct sk_ch_ok *ok, int captcha_passed, char *out, size_t cap);

/* The bits to ask under load: min, plus one each time load + step
 * doubles from step (load = step: +1, 3 step: +2, 7 step: +3, ...), at
 * most max. step <= 0 or max <= min: min. */
int sk_challenge_bits(int64_t min, int64_t max, int64_t step, int64_t load);

/* A solver, as a bot (or `seckill load`, or a test) runs it: tries nonces
 * start, start+1, ... (decimal) until SHA-256(text || nonce) has bits
 * leading zero bits, at most max_tries of them. Returns the nonce's
 * length (written to nonce, cap >= 21 bytes, terminated) with *tries
 * (may be NULL) the nonces hashed, or SK_ENOTFOUND after max_tries,
 * SK_EINVAL. One core; about 1.5 us a try on this machine's OpenSSL. */
int sk_challenge_solve(const char *text, size_t len, int bits, uint64_t start, uint64_t max_tries,
                       char *nonce, size_t cap, uint64_t *tries);

#endif
