/* test_webhooks.c - outgoing webhooks: the Standard Webhooks signature
 * (orders/webhook_sign.h) checked against the convention's published
 * example and against an independent implementation (Python's hmac, run
 * as a process), the secret's parsing with the operator's mistakes. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "orders/webhook_sign.h"
#include "support/harness.h"

/* The example of the Standard Webhooks specification. */
#define EX_SECRET "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
#define EX_ID "msg_p5jXN8AQM9LWM0D4loKWxJek"
#define EX_TS 1614265330
#define EX_BODY "{\"test\": 2432232314}"
#define EX_SIG "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="

SK_TEST(webhook_signature_matches_the_conventions_example)
{
    struct sk_wh_key k;
    char why[200], sig[SK_WH_SIG_MAX];
    CHECK_EQ(sk_wh_key_parse(EX_SECRET, &k, why, sizeof why), 0);
    CHECK_EQ(k.len, 24);
    CHECK_EQ(sk_wh_sign(&k, EX_ID, EX_TS, EX_BODY, strlen(EX_BODY), sig, sizeof sig), 0);
    CHECK_STR(sig, EX_SIG);
    /* a byte of the body, the id or the time changed: another signature */
    char other[SK_WH_SIG_MAX];
    CHECK_EQ(sk_wh_sign(&k, EX_ID, EX_TS + 1, EX_BODY, strlen(EX_BODY), other, sizeof other), 0);
    CHECK(strcmp(other, sig) != 0);
    CHECK_EQ(sk_wh_sign(&k, EX_ID, EX_TS, EX_BODY, strlen(EX_BODY) - 1, other, sizeof other), 0);
    CHECK(strcmp(other, sig) != 0);
    CHECK_EQ(sk_wh_sign(&k, EX_ID, EX_TS, EX_BODY, strlen(EX_BODY), other, 10), SK_EINVAL);
}

/* Python's hmac and base64 verify what the C side signs, for both keys
 * of a rotation (each signature of the header on its own). */
SK_TEST(webhook_signatures_verify_with_pythons_hmac_for_both_rotation_keys)
{
    const char *secrets[2] = {"whsec_"
                              "c2Vjb25kLXNlY3JldC1vZi10aGUtc2hvcC0wMTIzNDU2Nzg5",
                              EX_SECRET};
    struct sk_wh_key k[2];
    char why[200];
    for (int i = 0; i < 2; i++)
        CHECK_MSG(sk_wh_key_parse(secrets[i], &k[i], why, sizeof why) == 0, "%s", why);
    const char *body =
        "{\"type\":\"order.paid\",\"data\":{\"order_id\":\"7-1-0\",\"q\":\"\\u00e9\"}}";
    char hdr[2 * SK_WH_SIG_MAX + 2];
    CHECK_EQ(
        sk_wh_signature_header(k, 2, "7-1-0:2", 1700000000, body, strlen(body), hdr, sizeof hdr),
        0);
    CHECK(strchr(hdr, ' ') != NULL);
    char dir[400], path[500];
    snprintf(dir, sizeof dir, "%s", sk_th_tmpdir());
    snprintf(path, sizeof path, "%s/body", dir);
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    fwrite(body, 1, strlen(body), f);
    fclose(f);
    for (int i = 0; i < 2; i++) {
        char cmd[2000];
        snprintf(
            cmd, sizeof cmd,
            "python3 -c 'import base64,hashlib,hmac,sys\n"
            "key=base64.b64decode(sys.argv[1].split(\"_\",1)[1])\n"
            "body=open(sys.argv[2],\"rb\").read()\n"
            "msg=b\"7-1-0:2.1700000000.\"+body\n"
            "want=\"v1,\"+base64.b64encode(hmac.new(key,msg,hashlib.sha256).digest()).decode()\n"
            "print(\"ok\" if want in sys.argv[3].split(\" \") else \"bad \"+want)' '%s' '%s' '%s'",
            secrets[i], path, hdr);
        FILE *p = popen(cmd, "r");
        CHECK(p != NULL);
        char out[200] = "";
        CHECK(fgets(out, sizeof out, p) != NULL);
        CHECK_EQ(pclose(p), 0);
        CHECK_MSG(!strncmp(out, "ok", 2), "key %d: python says %s (header %s)", i, out, hdr);
    }
}

/* The operator's mistakes in a secret: refused with a reason that never
 * repeats the secret. */
SK_TEST(webhook_secrets_that_are_malformed_are_refused_without_echo)
{
    const char *bad[] = {
        "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",       /* no prefix */
        "whsec_",                                 /* empty */
        "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaS",  /* not a multiple of 4 */
        "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLa!w", /* not base64 */
        "whsec_c2hvcnQ=",                         /* 5 bytes: too short */
        "whsec_MfKQ9r8GKYq=TwjUPD8ILPZIo2LaLaSw", /* padding inside */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct sk_wh_key k;
        char why[200] = "";
        CHECK_MSG(sk_wh_key_parse(bad[i], &k, why, sizeof why) == SK_EINVAL, "accepted %s", bad[i]);
        CHECK(why[0] != 0);
        CHECK_MSG(strlen(bad[i]) < 10 || !strstr(why, bad[i] + 6), "echoed: %s", why);
    }
}
