/* test_webhooks.c - the outbox's way out: `seckill events list`, and
 * outgoing webhooks: the Standard Webhooks signature
 * (orders/webhook_sign.h) checked against the convention's published
 * example and against an independent implementation (Python's hmac, run
 * as a process), the secret's parsing with the operator's mistakes. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>

#include "core/error.h"
#include "orders/webhook_sign.h"
#include "store/store.h"
#include "support/fixtures.h"
#include "support/harness.h"
#include "support/store_faults.h"

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

/* `seckill events list`: the outbox as JSON lines, filtered by type and
 * time, paged by row id; the operator's mistakes are usage errors (exit
 * 2) that change nothing. */
SK_TEST(events_list_prints_the_outbox_as_json_lines)
{
    char db[400], spec[420], err[300];
    snprintf(db, sizeof db, "%s/ev.db", sk_th_tmpdir());
    snprintf(spec, sizeof spec, "sqlite:%s", db);
    sk_store *st;
    CHECK_EQ(sk_store_open(&st, spec, err, sizeof err), 0);
    struct sk_activity a;
    sk_th_activity_valid(&a, 7);
    a.stock = 2;
    CHECK_EQ(sk_store_activity_insert(st, &a), 0);
    CHECK_EQ(sk_store_activity_set_state(st, 7, "open"), 0);
    struct sk_order o[2];
    for (int i = 0; i < 2; i++)
        sk_th_order(&o[i], 7, 5000, i, (uint64_t)i + 1, 1);
    sk_th_persist_ok(st, o, 2);
    int s;
    CHECK_EQ(sk_store_order_pay_ref(st, o[0].order_id, 6000, "psp_1", &s), 0);
    sk_store_close(st);

    char cmd[900], out[8192];
    snprintf(cmd, sizeof cmd, "%s events list --db %s", sk_th_seckill_bin(), spec);
    CHECK_EQ(sk_th_sh(cmd, out, sizeof out), 0);
    /* opened, two created, sold out, paid */
    int lines = 0;
    for (char *p = out; (p = strchr(p, '\n')) != NULL; p++)
        lines++;
    CHECK_EQ(lines, 5);
    snprintf(cmd, sizeof cmd, "%s events list --db %s --type order.paid", sk_th_seckill_bin(),
             spec);
    CHECK_EQ(sk_th_sh(cmd, out, sizeof out), 0);
    json_t *j = json_loads(out, JSON_DISABLE_EOF_CHECK, NULL);
    CHECK(j != NULL);
    char id[100];
    snprintf(id, sizeof id, "%s:2", o[0].order_id);
    CHECK_STR(json_string_value(json_object_get(j, "id")), id);
    CHECK_STR(json_string_value(json_object_get(j, "order_id")), o[0].order_id);
    json_t *data = json_object_get(j, "data");
    CHECK_STR(json_string_value(json_object_get(data, "payment_ref")), "psp_1");
    CHECK_STR(json_string_value(json_object_get(data, "status")), "paid");
    json_decref(j);
    snprintf(cmd, sizeof cmd, "%s events list --db %s --after 2 --limit 1", sk_th_seckill_bin(),
             spec);
    CHECK_EQ(sk_th_sh(cmd, out, sizeof out), 0);
    CHECK_MSG(strstr(out, "\"row\":3,") != NULL && !strstr(out, "\"row\":4"), "%s", out);
    const char *bad[] = {"--limit 0", "--after -1", "--since soon", "--bogus 1", "--limit"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(cmd, sizeof cmd, "%s events list --db %s %s 2>&1", sk_th_seckill_bin(), spec,
                 bad[i]);
        CHECK_MSG(WEXITSTATUS(sk_th_sh(cmd, out, sizeof out)) == 2, "%s: %s", bad[i], out);
        CHECK(strstr(out, "events list") != NULL);
    }
    /* a mistyped file is named, never created */
    snprintf(cmd, sizeof cmd, "%s events list --db sqlite:%s.typo 2>&1", sk_th_seckill_bin(), db);
    CHECK_EQ(WEXITSTATUS(sk_th_sh(cmd, out, sizeof out)), 1);
    CHECK_MSG(strstr(out, "no such database file") != NULL, "%s", out);
    snprintf(cmd, sizeof cmd, "%s.typo", db);
    CHECK(access(cmd, F_OK) != 0);
    snprintf(cmd, sizeof cmd, "%s events nope 2>&1", sk_th_seckill_bin());
    CHECK_EQ(WEXITSTATUS(sk_th_sh(cmd, out, sizeof out)), 2);
}
