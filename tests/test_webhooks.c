/* test_webhooks.c - the outbox's way out: `seckill events list`, and
 * outgoing webhooks: the Standard Webhooks signature
 * (orders/webhook_sign.h) checked against the convention's published
 * example and against an independent implementation (Python's hmac, run
 * as a process), the secret's parsing with the operator's mistakes. */
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>

#include "core/clock.h"
#include "core/error.h"
#include "engine/activity.h"
#include "orders/webhook_sign.h"
#include "orders/webhooks.h"
#include "store/store.h"
#include "support/buyer_http.h"
#include "support/fixtures.h"
#include "support/harness.h"
#include "support/http_api.h"
#include "support/http_client.h"
#include "support/mysql_harness.h"
#include "support/pg_harness.h"
#include "support/store_faults.h"
#include "support/webhook_rx.h"

SK_TH_PG_USED
SK_TH_MY_USED

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

/* The store at spec, opened, holding activity aid (stock, pay timeout)
 * opened for sale: an activity.opened event. */
static sk_store *open_sale(const char *spec, uint64_t aid, int64_t stock, int64_t pay_timeout_s)
{
    sk_store *st;
    char err[300];
    CHECK_MSG(sk_store_open(&st, spec, err, sizeof err) == 0, "%s", err);
    struct sk_activity a;
    sk_th_activity_valid(&a, aid);
    a.stock = stock;
    a.pay_timeout_s = pay_timeout_s;
    CHECK_EQ(sk_store_activity_insert(st, &a), 0);
    CHECK_EQ(sk_store_activity_set_state(st, aid, "open"), 0);
    return st;
}

/* `seckill events list`: the outbox as JSON lines, filtered by type and
 * time, paged by row id; the operator's mistakes are usage errors (exit
 * 2) that change nothing. */
SK_TEST(events_list_prints_the_outbox_as_json_lines)
{
    char db[400], spec[420];
    snprintf(db, sizeof db, "%s/ev.db", sk_th_tmpdir());
    snprintf(spec, sizeof spec, "sqlite:%s", db);
    sk_store *st = open_sale(spec, 7, 2, 1800);
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

#define WH_SECRET_A                                                                                \
    "whsec_"                                                                                       \
    "c2Vjb25kLXNlY3JldC1vZi10aGUtc2hvcC0wMTIzNDU2Nzg5"

/* Every request of the TSV file at path (id, timestamp, signature, body
 * a line) checked by Python's hmac: the signature of each of the two
 * secrets is in the header and the body's id is the webhook-id. Returns
 * how many lines verified (the test fails on one that does not). */
static int verified_by_python(const char *path, const char *key1, const char *key2)
{
    char cmd[2000], out[200] = "";
    snprintf(cmd, sizeof cmd,
             "python3 -c 'import base64,hashlib,hmac,json,sys\n"
             "keys=[base64.b64decode(s.split(\"_\",1)[1]) for s in sys.argv[2:4]]\n"
             "n=0\n"
             "for line in open(sys.argv[1],\"rb\"):\n"
             "  i,t,sig,body=line.rstrip(b\"\\n\").split(b\"\\t\",3)\n"
             "  sigs=sig.split(b\" \")\n"
             "  for k in keys:\n"
             "    "
             "want=b\"v1,\"+base64.b64encode(hmac.new(k,i+b\".\"+t+b\".\"+body,hashlib.sha256)."
             "digest())\n"
             "    assert want in sigs, (i, want, sigs)\n"
             "  assert json.loads(body)[\"id\"]==i.decode()\n"
             "  n+=1\n"
             "print(n)' '%s' '%s' '%s'",
             path, key1, key2);
    FILE *p = popen(cmd, "r");
    CHECK(p != NULL);
    CHECK(fgets(out, sizeof out, p) != NULL);
    CHECK_EQ(pclose(p), 0);
    return atoi(out);
}

/* ---- the dispatcher against the tests' receiver (support/webhook_rx.h) ---- */

/* How many requests rx answered 200 for event id. */
static int rx_count(struct sk_th_rx *rx, const char *id)
{
    int k = 0;
    struct sk_th_rx_req q;
    for (size_t j = 0, m = sk_th_rx_count(rx); j < m; j++) {
        sk_th_rx_get(rx, j, &q);
        k += q.status == 200 && !strcmp(q.id, id);
    }
    return k;
}

/* How many of the n event ids have a 200 at rx. */
static int rx_acked(struct sk_th_rx *rx, char (*ids)[96], int n)
{
    int k = 0;
    for (int i = 0; i < n; i++)
        k += rx_count(rx, ids[i]) > 0;
    return k;
}

/* Every request rx holds for one of the n ids (ids NULL: every one),
 * checked by Python's hmac under both keys (the same key twice: one);
 * returns how many. */
static int rx_verify(struct sk_th_rx *rx, char (*ids)[96], int n, const char *k1, const char *k2)
{
    char path[500];
    snprintf(path, sizeof path, "%s/verify-%d.tsv", sk_th_tmpdir(), sk_th_rx_port(rx));
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    int m = 0;
    struct sk_th_rx_req q;
    for (size_t j = 0, all = sk_th_rx_count(rx); j < all; j++) {
        sk_th_rx_get(rx, j, &q);
        int i = 0;
        while (ids && i < n && strcmp(q.id, ids[i]))
            i++;
        if (ids && i == n) continue;
        CHECK(strchr(q.body, '\n') == NULL && strchr(q.body, '\t') == NULL);
        fprintf(f, "%s\t%s\t%s\t%s\n", q.id, q.ts, q.sig, q.body);
        m++;
    }
    fclose(f);
    CHECK_EQ(verified_by_python(path, k1, k2), m);
    return m;
}

/* A fresh store of kind (0 SQLite, file name.db in the test's directory;
 * 1 PostgreSQL; 2 MariaDB): its spec into spec. */
static void fresh_store_spec(int kind, const char *name, char *spec, size_t cap)
{
    if (kind == 1)
        sk_th_pg_fresh_db(spec, cap);
    else if (kind == 2)
        sk_th_my_fresh_db(spec, cap);
    else
        snprintf(spec, cap, "sqlite:%s/%s.db", sk_th_tmpdir(), name);
}

/* A sale with pays, cancels, releases and refused payments, its events
 * posted to a receiver that answers 200, 500, 429 + Retry-After, hangs,
 * resets and answers slowly (seeded): every committed event is
 * acknowledged at least once, each order's events arrive in seq order
 * once duplicates are dropped, every signature verifies with Python's
 * hmac under both secrets of a rotation; a second endpoint that always
 * hangs keeps retrying without holding the first back. */
static void deliver_through_faults(int kind)
{
    char spec[420], err[300];
    fresh_store_spec(kind, "wh", spec, sizeof spec);
    sk_store *st = open_sale(spec, 9, 40, 60);
    struct sk_order o[40];
    for (int i = 0; i < 40; i++)
        sk_th_order(&o[i], 9, 5000, i, (uint64_t)i + 1, 1);
    for (int b = 0; b < 4; b++)
        sk_th_persist_ok(st, o + 10 * b, 10);
    int s;
    for (int i = 0; i < 40; i++) {
        if (i % 4 == 0) CHECK_EQ(sk_store_order_pay_ref(st, o[i].order_id, 6000, "p1", &s), 0);
        if (i % 4 == 1) CHECK_EQ(sk_store_order_cancel(st, o[i].order_id, 6000, &s), 0);
        if (i % 4 == 2) CHECK_EQ(sk_store_order_cancel(st, o[i].order_id, 65000, &s), 0);
        if (i % 4 == 1) CHECK_EQ(sk_store_order_pay(st, o[i].order_id, 70000, &s), SK_ESTATE);
    }
    CHECK_EQ(sk_store_activity_set_state(st, 9, "closed"), 0);
    static struct sk_event ev[200];
    size_t n = 0;
    CHECK_EQ(sk_store_events_list(st, 0, 200, ev, &n), 0);
    CHECK_EQ(n, 83); /* opened, 40 created, sold out, 10 each of paid, cancelled, released, refused,
                        closed */
    static char ids[200][96];
    for (size_t i = 0; i < n; i++)
        snprintf(ids[i], sizeof ids[i], "%s:%" PRId64, ev[i].subject, ev[i].seq);

    struct sk_th_rx *good = sk_th_rx_start(0x5eed, NULL, 1), *dead = sk_th_rx_start(1, NULL, 0);
    sk_th_rx_faults(good, 45, 0);
    sk_th_rx_hold(dead, 1); /* never answers */
    struct sk_wh_endpoint eps[2];
    memset(eps, 0, sizeof eps);
    snprintf(eps[0].name, sizeof eps[0].name, "erp");
    snprintf(eps[0].url, sizeof eps[0].url, "http://127.0.0.1:%d/hook", sk_th_rx_port(good));
    snprintf(eps[0].secret[0], sizeof eps[0].secret[0], "%s", WH_SECRET_A);
    snprintf(eps[0].secret[1], sizeof eps[0].secret[1], "%s", EX_SECRET);
    snprintf(eps[1].name, sizeof eps[1].name, "slow-crm");
    snprintf(eps[1].url, sizeof eps[1].url, "http://127.0.0.1:%d/", sk_th_rx_port(dead));
    snprintf(eps[1].secret[0], sizeof eps[1].secret[0], "%s", EX_SECRET);
    snprintf(eps[1].filter, sizeof eps[1].filter, "order.paid, activity.");
    struct sk_wh_opts opt = {.backoff_min_ms = 10,
                             .backoff_max_ms = 80,
                             .timeout_ms = 300,
                             /* a server store: events wait 200 ms (longer than any
                              * transaction of this test) before they go */
                             .settle_ms = kind ? 200 : -1,
                             .idle_ms = 20,
                             .seed = 42};
    sk_webhooks *w;
    CHECK_MSG(sk_webhooks_start(&w, spec, eps, 2, &opt, err, sizeof err) == 0, "%s", err);
    /* done: every event acknowledged, and the dispatcher saw each answer
     * (an answer it gave up waiting for is posted again) */
    int64_t deadline = sk_mono_ms() + 120000;
    struct sk_wh_stats sa, sb;
    do {
        poll(NULL, 0, 50);
        sk_webhooks_stats(w, 0, &sa);
    } while ((rx_acked(good, ids, (int)n) < (int)n || sa.delivered < n) && sk_mono_ms() < deadline);
    sk_webhooks_stats(w, 1, &sb);
    sk_webhooks_stop(w);
    CHECK_EQ(rx_acked(good, ids, (int)n), (int)n);
    CHECK_EQ(sa.delivered, n);
    CHECK(sa.failed_attempts > 0); /* the faults happened */
    CHECK_EQ(sb.delivered, 0);     /* the hanging endpoint held nobody back */
    CHECK(sb.failed_attempts > 0);
    CHECK_EQ(sb.retrying, 1);

    /* per subject, in arrival order with duplicates dropped: seq 1, 2, ...
     * (a late duplicate of an earlier seq is at-least-once, not disorder) */
    size_t nreq = sk_th_rx_count(good);
    struct sk_th_rx_req *q = calloc(nreq, sizeof *q);
    CHECK(q != NULL);
    for (size_t j = 0; j < nreq; j++)
        sk_th_rx_get(good, j, &q[j]);
    for (size_t i = 0; i < n; i++) {
        int64_t last = 0, prev_at = -1;
        size_t sl = strlen(ev[i].subject);
        for (;;) { /* the next seq's first arrival must come after this one's */
            int64_t first_at = -1;
            for (size_t j = 0; j < nreq; j++) {
                const char *id = q[j].id;
                if (strncmp(id, ev[i].subject, sl) || id[sl] != ':' ||
                    strtoll(id + sl + 1, NULL, 10) != last + 1)
                    continue;
                if (first_at < 0 || q[j].at < first_at) first_at = q[j].at;
            }
            if (first_at < 0) break;
            CHECK_MSG(first_at > prev_at, "%s:%lld arrived first before seq %lld", ev[i].subject,
                      (long long)(last + 1), (long long)last);
            prev_at = first_at;
            last++;
        }
        CHECK_MSG(last >= ev[i].seq, "%s: seq %lld never arrived", ev[i].subject,
                  (long long)ev[i].seq);
    }
    free(q);
    long kinds[5]; /* 200, 500, 429, none */
    sk_th_rx_answers(good, kinds);
    CHECK_MSG(kinds[1] > 0 && kinds[2] > 0 && kinds[3] > 0, "200 %ld, 500 %ld, 429 %ld, other %ld",
              kinds[0], kinds[1], kinds[2], kinds[3]);
    CHECK(nreq > n);
    /* every request, for Python */
    CHECK_EQ(rx_verify(good, NULL, 0, WH_SECRET_A, EX_SECRET), nreq);

    /* the cursor is durable: a restart resumes after the last event */
    int64_t cur = -1;
    CHECK_EQ(sk_store_webhook_cursor(st, "erp", sk_wall_ms(), &cur, NULL), 0);
    CHECK_EQ(cur, ev[n - 1].id);
    sk_store_close(st);
    sk_th_rx_stop(good);
    sk_th_rx_stop(dead);
}

SK_TEST_T(webhooks_sqlite_deliver_every_event_at_least_once_in_order_through_faults, 180)
{
    deliver_through_faults(0);
}

SK_TEST_T(webhooks_pg_deliver_every_event_at_least_once_in_order_through_faults, 180)
{
    deliver_through_faults(1);
}

SK_TEST_T(webhooks_mysql_deliver_every_event_at_least_once_in_order_through_faults, 180)
{
    deliver_through_faults(2);
}

/* When id first arrived at rx (only200: first acknowledged); -1 never. */
static int64_t rx_first(struct sk_th_rx *rx, const char *id, int only200)
{
    int64_t at = -1;
    size_t n = sk_th_rx_count(rx);
    struct sk_th_rx_req q;
    for (size_t j = 0; j < n; j++) {
        sk_th_rx_get(rx, j, &q);
        if (!strcmp(q.id, id) && (!only200 || q.status == 200) && (at < 0 || q.at < at)) at = q.at;
    }
    return at;
}

/* A persist's order.created events are batch rows of up to 128 orders
 * (migration 14), longer than the dispatcher's page of 64. Through the
 * receiver's faults and a restart of the dispatcher in the middle of a
 * row: every event is acknowledged at least once, an order's seq 2 is
 * posted only after its seq 1 was acknowledged, the stored cursor never
 * passes a row before each of its events was, and it ends on the last. */
static void deliver_batch_rows(int kind)
{
    enum { N = 300 };
    char spec[420], err[300];
    fresh_store_spec(kind, "whb", spec, sizeof spec);
    sk_store *st = open_sale(spec, 12, 1000, 60);
    static struct sk_order o[N];
    for (int i = 0; i < N; i++)
        sk_th_order(&o[i], 12, 5000 + i, i, (uint64_t)i + 1, 1);
    sk_th_persist_ok(st, o, N);
    int s;
    for (int i = 0; i < N; i += 7)
        CHECK_EQ(sk_store_order_pay(st, o[i].order_id, 6000, &s), 0);
    static struct sk_event ev[400];
    static char ids[400][96];
    size_t n = 0;
    CHECK_EQ(sk_store_events_list(st, 0, 400, ev, &n), 0);
    CHECK_EQ(n, 1 + N + (N + 6) / 7);                  /* opened, created, paid */
    CHECK_EQ(ev[1].id, ev[SK_STORE_BATCH_ROW_MAX].id); /* one row */
    for (size_t i = 0; i < n; i++)
        snprintf(ids[i], sizeof ids[i], "%s:%" PRId64, ev[i].subject, ev[i].seq);

    struct sk_th_rx *rx = sk_th_rx_start(0xba7c, NULL, 0);
    sk_th_rx_faults(rx, 45, 0);
    struct sk_wh_endpoint ep;
    memset(&ep, 0, sizeof ep);
    snprintf(ep.name, sizeof ep.name, "erp");
    snprintf(ep.url, sizeof ep.url, "http://127.0.0.1:%d/hook", sk_th_rx_port(rx));
    snprintf(ep.secret[0], sizeof ep.secret[0], "%s", WH_SECRET_A);
    struct sk_wh_opts opt = {.backoff_min_ms = 5,
                             .backoff_max_ms = 40,
                             .timeout_ms = 300,
                             .settle_ms = kind ? 200 : -1,
                             .idle_ms = 20,
                             .seed = 7};
    int64_t cur = -1;
    for (int round = 0; round < 2; round++) {
        sk_webhooks *w;
        CHECK_MSG(sk_webhooks_start(&w, spec, &ep, 1, &opt, err, sizeof err) == 0, "%s", err);
        /* first round: stopped inside the second row (events 129-256) */
        int want = round ? (int)n : 150;
        int64_t deadline = sk_mono_ms() + 150000;
        while (rx_acked(rx, ids, (int)n) < want && sk_mono_ms() < deadline)
            poll(NULL, 0, 20);
        /* last round: until the dispatcher moved its cursor past the
         * last answer too (one stopped meanwhile delivers it again) */
        while (round && sk_mono_ms() < deadline &&
               (sk_store_webhook_cursor(st, "erp", sk_wall_ms(), &cur, NULL) != 0 ||
                cur != ev[n - 1].id))
            poll(NULL, 0, 20);
        sk_webhooks_stop(w);
        CHECK(rx_acked(rx, ids, (int)n) >= want);
        CHECK_EQ(sk_store_webhook_cursor(st, "erp", sk_wall_ms(), &cur, NULL), 0);
        /* (the receiver records a request just after its answer) */
        int64_t until = sk_mono_ms() + 3000;
        for (size_t i = 0; i < n && ev[i].id <= cur; i++) {
            while (rx_first(rx, ids[i], 1) < 0 && sk_mono_ms() < until)
                poll(NULL, 0, 10);
            CHECK_MSG(rx_first(rx, ids[i], 1) >= 0, "cursor %lld passed %s unacknowledged",
                      (long long)cur, ids[i]);
        }
        if (round == 0) CHECK(cur < ev[n - 1].id);
    }
    CHECK_EQ(cur, ev[n - 1].id);
    for (int i = 0; i < N; i += 7) {
        char id1[96], id2[96];
        snprintf(id1, sizeof id1, "%.63s:1", o[i].order_id);
        snprintf(id2, sizeof id2, "%.63s:2", o[i].order_id);
        int64_t acked1 = rx_first(rx, id1, 1), first2 = rx_first(rx, id2, 0);
        CHECK_MSG(acked1 >= 0 && first2 > acked1, "%s: seq 2 at %lld, seq 1 acknowledged at %lld",
                  o[i].order_id, (long long)first2, (long long)acked1);
    }
    sk_store_close(st);
    sk_th_rx_stop(rx);
}

SK_TEST_T(webhooks_sqlite_deliver_batch_rows_across_pages_and_a_restart, 180)
{
    deliver_batch_rows(0);
}

SK_TEST_T(webhooks_pg_deliver_batch_rows_across_pages_and_a_restart, 180)
{
    deliver_batch_rows(1);
}

SK_TEST_T(webhooks_mysql_deliver_batch_rows_across_pages_and_a_restart, 180)
{
    deliver_batch_rows(2);
}

/* The worker's dispatcher from the configuration, end to end: `seckill
 * serve` (HTTP, worker, sweeper) with webhook_* keys from its config file
 * (two secrets: a rotation) and a flag, a real sale over HTTP with pays,
 * cancels, pay deadlines passing and a late payment; the tests' receiver
 * (support/webhook_rx.h), answering 200, gets exactly one request per
 * event the database holds, and the database holds exactly the events of its
 * committed changes: per order created, then paid / cancelled / released
 * as its row ended, one refusal per late payment reference. Every
 * signature checked by Python's hmac under both secrets. */
SK_TEST_T(webhooks_from_the_config_serve_posts_one_signed_event_per_committed_change, 120)
{
    struct sk_th_rx *rx = sk_th_rx_start(7, NULL, 1);
    char conf[400], url[100], text[400];
    snprintf(conf, sizeof conf, "%s/wh.conf", sk_th_tmpdir());
    snprintf(text, sizeof text,
             "webhook_name = erp\nwebhook_secret = %s\nwebhook_secret_prev = %s\n"
             "webhook_events = order., activity.\n",
             WH_SECRET_A, EX_SECRET);
    sk_th_write_file(conf, text);
    snprintf(url, sizeof url, "http://127.0.0.1:%d/hook", sk_th_rx_port(rx));
    const char *extra[] = {"--config", conf, "--webhook-url", url, NULL};
    struct srv v;
    srv_start(&v, extra); /* started, connected, ready */
    struct sk_th_serve sv = v.s;
    struct sk_th_http c = v.c;
    struct sk_th_resp r;
    uint64_t aid = sk_th_http_activity(&c, "events", 6, 2);
    char oid[6][64];
    for (int i = 0; i < 6; i++)
        CHECK_EQ(sk_th_buy_one(&c, aid, 100 + (uint64_t)i, oid[i], sizeof oid[i]), 200);
    for (int i = 0; i < 6; i++)
        sk_th_order_wait(&c, oid[i], 100 + (uint64_t)i, "created", 15000, &r);
    for (int i = 0; i < 2; i++) {
        CHECK_EQ(sk_th_order_op(&c, oid[i], "pay", 100 + (uint64_t)i, &r), 200);
        CHECK_EQ(sk_th_order_op(&c, oid[2 + i], "cancel", 102 + (uint64_t)i, &r), 200);
    }
    /* 4 and 5: their pay deadline passes, the sweeper releases them; a
     * payment for 4 afterwards is refused (twice: one refusal event) */
    for (int i = 4; i < 6; i++)
        sk_th_order_wait(&c, oid[i], 100 + (uint64_t)i, "cancelled", 15000, &r);
    CHECK_EQ(sk_th_order_op(&c, oid[4], "pay", 104, &r), 409);
    CHECK_EQ(sk_th_order_op(&c, oid[4], "pay", 104, &r), 409);

    /* the database's outbox, and the orders it speaks of */
    sk_store *st;
    char err[300];
    CHECK_MSG(sk_store_open(&st, sv.db, err, sizeof err) == 0, "%s", err);
    static struct sk_event ev[64];
    size_t n = 0;
    CHECK_EQ(sk_store_events_list(st, 0, 64, ev, &n), 0);
    int types[8] = {0};
    static const char *const names[8] = {
        "activity.opened", "order.created",  "activity.sold_out",    "order.paid",
        "order.cancelled", "order.released", "order.payment_refused"};
    for (size_t i = 0; i < n; i++) {
        int t = 7;
        for (int k = 0; k < 7; k++)
            if (!strcmp(ev[i].type, names[k])) t = k;
        types[t]++;
        if (!strncmp(ev[i].type, "order.", 6)) { /* an event of one of the sale's orders */
            int j = 0;
            while (j < 6 && strcmp(ev[i].order_id, oid[j]))
                j++;
            CHECK_MSG(j < 6, "event %s of an unknown order %s", ev[i].type, ev[i].order_id);
            struct sk_order o;
            CHECK_EQ(sk_store_order_get(st, oid[j], &o), 0);
            const char *want = j < 2 ? "order.paid" : j < 4 ? "order.cancelled" : "order.released";
            int seq_want = !strcmp(ev[i].type, "order.created")                     ? 1
                           : !strcmp(ev[i].type, want)                              ? 2
                           : j == 4 && !strcmp(ev[i].type, "order.payment_refused") ? 3
                                                                                    : -1;
            CHECK_MSG(seq_want == ev[i].seq, "%s seq %lld of order %d (status %d)", ev[i].type,
                      (long long)ev[i].seq, j, o.status);
            CHECK_EQ(o.status, j < 2 ? SK_ORDER_PAID : SK_ORDER_CANCELLED);
        }
    }
    CHECK_EQ(types[0], 1);
    CHECK_EQ(types[1], 6);
    CHECK_EQ(types[2], 1);
    CHECK_EQ(types[3], 2);
    CHECK_EQ(types[4], 2);
    CHECK_EQ(types[5], 2);
    CHECK_EQ(types[6], 1);
    CHECK_EQ(types[7], 0);
    CHECK_EQ(n, 15);
    static char ids[64][96];
    for (size_t i = 0; i < n; i++)
        snprintf(ids[i], sizeof ids[i], "%s:%" PRId64, ev[i].subject, ev[i].seq);
    int64_t deadline = sk_mono_ms() + 30000;
    while (rx_acked(rx, ids, (int)n) < (int)n && sk_mono_ms() < deadline)
        poll(NULL, 0, 20);
    CHECK_EQ(rx_acked(rx, ids, (int)n), (int)n);
    /* /metrics: the endpoint's figures from the worker process */
    static char met[1 << 20];
    char line[120];
    snprintf(line, sizeof line, "seckill_webhook_delivered_total{endpoint=\"erp\"} %zu\n", n);
    deadline = sk_mono_ms() + 10000;
    do
        CHECK_EQ(sk_th_http_get_big(sv.port, "/metrics", met, sizeof met), 200);
    while (!strstr(met, line) && sk_mono_ms() < deadline && poll(NULL, 0, 20) == 0);
    const char *wh = strstr(met, "seckill_webhook");
    CHECK_MSG(strstr(met, line) != NULL, "%.2000s", wh ? wh : met);
    CHECK_MSG(strstr(met, "seckill_webhook_lag_seconds{endpoint=\"erp\"} 0\n") != NULL, "%.2000s",
              wh);
    CHECK(strstr(met, "seckill_webhook_dead_lettered_total{endpoint=\"erp\"} 0\n") != NULL);
    /* the worker stops cleanly with its dispatcher; nothing came twice */
    sk_th_http_close(&c);
    CHECK_EQ(sk_th_serve_stop(&sv, SIGTERM), 0);
    size_t m = 0;
    CHECK_EQ(sk_store_events_list(st, 0, 64, ev, &m), 0);
    CHECK_EQ(m, n); /* no event without a change */
    sk_store_close(st);
    /* each event acknowledged and no more requests: none came twice */
    CHECK_EQ(sk_th_rx_count(rx), n);
    CHECK_EQ(rx_verify(rx, NULL, 0, WH_SECRET_A, EX_SECRET), n);
    sk_th_rx_stop(rx);
}

/* The webhook-timestamp (seconds) of the first 200 rx answered for event
 * id; -1 while there is none. */
static int64_t rx_acked_ts(struct sk_th_rx *rx, const char *id)
{
    struct sk_th_rx_req q;
    for (size_t j = 0, m = sk_th_rx_count(rx); j < m; j++) {
        sk_th_rx_get(rx, j, &q);
        if (q.status == 200 && !strcmp(q.id, id)) return strtoll(q.ts, NULL, 10);
    }
    return -1;
}

/* Buys one unit for uid and waits (bounded) until rx acknowledged the
 * order's order.created; its webhook-timestamp. */
static int64_t bought_and_delivered(struct srv *v, struct sk_th_rx *rx, uint64_t aid, uint64_t uid,
                                    int64_t within_ms)
{
    char oid[64], id[96];
    CHECK_EQ(sk_th_buy_one(&v->c, aid, uid, oid, sizeof oid), 200);
    snprintf(id, sizeof id, "%s:1", oid);
    int64_t by = sk_mono_ms() + within_ms, ts;
    while ((ts = rx_acked_ts(rx, id)) < 0 && sk_mono_ms() < by)
        poll(NULL, 0, 20);
    CHECK_MSG(ts >= 0, "%s not delivered within %lld ms (log %s)", id, (long long)within_ms,
              v->s.log);
    return ts;
}

/* The wall clock of serve's host stepped 3 h ahead, then back (the tests'
 * clock shift library preloaded into serve: its processes read the real
 * wall clock plus an offset from a file; the monotonic clocks untouched,
 * as a real step leaves them). The dispatcher naps between its polls of
 * the outbox; a nap whose deadline was taken on the wall clock while it
 * was ahead, and waited for once it was back, lasted the 3 h (the
 * nemesis found it: 70,000 events undelivered at its end). An order
 * bought once the clock is back goes out within seconds. */
SK_TEST_T(webhooks_go_on_after_the_worker_hosts_clock_stepped_ahead_and_back, 120)
{
    struct sk_th_rx *rx = sk_th_rx_start(11, NULL, 0);
    char conf[400], url[100], text[300], shift[400];
    snprintf(conf, sizeof conf, "%s/wh-clock.conf", sk_th_tmpdir());
    snprintf(text, sizeof text, "webhook_name = erp\nwebhook_secret = %s\n", WH_SECRET_A);
    sk_th_write_file(conf, text);
    snprintf(shift, sizeof shift, "%s/wh-clock-shift", sk_th_tmpdir());
    sk_th_write_file(shift, "+0");
    snprintf(url, sizeof url, "http://127.0.0.1:%d/hook", sk_th_rx_port(rx));
    const char *extra[] = {"--config", conf, "--webhook-url", url, NULL};
    sk_th_clock_shift_env(shift);
    struct srv v;
    srv_start(&v, extra);
    sk_th_clock_shift_env(NULL);
    uint64_t aid = sk_th_http_activity(&v.c, "clock", 100, 600);
    int64_t now_s = sk_wall_ms() / 1000;
    int64_t ts = bought_and_delivered(&v, rx, aid, 1, 15000);
    CHECK_MSG(ts > now_s - 60 && ts < now_s + 60, "timestamp %lld, now %lld", (long long)ts,
              (long long)now_s);

    /* 3 h ahead: until an event says so, the dispatcher's clock is ahead
     * (and so is every nap it takes after it) */
    sk_th_write_file(shift, "+3h");
    uint64_t uid = 2;
    int64_t by = sk_mono_ms() + 15000;
    while ((ts = bought_and_delivered(&v, rx, aid, uid++, 15000)) < sk_wall_ms() / 1000 + 7200)
        CHECK_MSG(sk_mono_ms() < by, "the dispatcher's clock never moved ahead (timestamp %lld)",
                  (long long)ts);

    /* back: the next order's event goes out as promptly as the first's */
    sk_th_write_file(shift, "+0");
    now_s = sk_wall_ms() / 1000;
    ts = bought_and_delivered(&v, rx, aid, uid++, 15000);
    CHECK_MSG(ts > now_s - 60 && ts < now_s + 60, "timestamp %lld, now %lld (the clock is back)",
              (long long)ts, (long long)now_s);
    srv_stop(&v);
    sk_th_rx_stop(rx);
}

/* The operator's mistakes in the webhook keys: clear usage errors (exit
 * 2) that never repeat a secret, from `seckill worker` and `serve
 * --check`; `seckill config` shows the keys with the secrets hidden. */
SK_TEST(webhook_keys_refuse_the_operators_mistakes_without_echoing_secrets)
{
    static const struct {
        const char *args, *says;
    } bad[] = {
        {"worker --webhook-url http://127.0.0.1:9/h", "needs webhook_secret"},
        {"serve --check --webhook-url http://127.0.0.1:9/h", "needs webhook_secret"},
        {"worker --webhook-url ftp://x/ --webhook-secret " WH_SECRET_A, "http:// or https://"},
        {"worker --webhook-url http://x/ --webhook-secret whsec_Zm9vYmFyZm9vYmFy!!",
         "webhook_secret"},
        {"worker --webhook-secret-prev " WH_SECRET_A, "webhook_secret_prev is set"},
        {"worker --webhook-name 'a b' --webhook-url http://x/ --webhook-secret " WH_SECRET_A,
         "webhook_name"},
        {"worker --webhook-events 'ORDER.PAID'", "webhook_events"},
        {"worker --webhook-timeout-ms 5", "webhook_timeout_ms"},
    };
    char cmd[600], out[2000];
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(cmd, sizeof cmd, "%s %s --db sqlite:%s/nope.db 2>&1", sk_th_seckill_bin(),
                 bad[i].args, sk_th_tmpdir());
        int ws = sk_th_sh(cmd, out, sizeof out);
        CHECK_MSG(WEXITSTATUS(ws) == 2, "%s: exit %d: %s", bad[i].args, WEXITSTATUS(ws), out);
        CHECK_MSG(strstr(out, bad[i].says) != NULL, "%s: %s", bad[i].args, out);
        CHECK_MSG(!strstr(out, "Zm9vYmFy") && !strstr(out, WH_SECRET_A + 8), "%s: %s", bad[i].args,
                  out);
    }
    snprintf(cmd, sizeof cmd,
             "%s config --webhook-url http://127.0.0.1:9/h --webhook-secret %s 2>&1 | grep webhook",
             sk_th_seckill_bin(), WH_SECRET_A);
    CHECK_EQ(sk_th_sh(cmd, out, sizeof out), 0);
    CHECK_MSG(strstr(out, "webhook_url") && strstr(out, "http://127.0.0.1:9/h"), "%s", out);
    CHECK_MSG(strstr(out, "(set)") && !strstr(out, WH_SECRET_A + 8), "%s", out);
}

/* ---- endpoints per activity: the admin API, the dispatcher, replay ---- */

#define WH_ADMIN "Authorization: Bearer " SK_TH_ADMIN_TOKEN "\r\n"

/* Waits until each of the n ids came at least times to rx (deadline 30 s). */
static void rx_wait(struct sk_th_rx *rx, char (*ids)[96], int n, int times, const char *who)
{
    int64_t deadline = sk_mono_ms() + 30000;
    for (;;) {
        int missing = -1;
        for (int i = 0; i < n && missing < 0; i++)
            if (rx_count(rx, ids[i]) < times) missing = i;
        if (missing < 0) return;
        CHECK_MSG(sk_mono_ms() < deadline, "%s: %s came fewer than %d times", who, ids[missing],
                  times);
        poll(NULL, 0, 20);
    }
}

/* The ids of the events after row base of activity aid whose type starts
 * with prefix ("" every one), from the database. */
static int events_of(sk_store *st, int64_t base, uint64_t aid, const char *prefix, char (*ids)[96],
                     int cap)
{
    static struct sk_event ev[512];
    size_t n = 0;
    CHECK_EQ(sk_store_events_list(st, base, 512, ev, &n), 0);
    int k = 0;
    for (size_t i = 0; i < n; i++)
        if (ev[i].activity_id == aid && !strncmp(ev[i].type, prefix, strlen(prefix)) && k < cap)
            snprintf(ids[k++], sizeof ids[0], "%s:%" PRId64, ev[i].subject, ev[i].seq);
    return k;
}

static int64_t last_row(sk_store *st)
{
    static struct sk_event ev[512];
    size_t n = 0;
    int64_t after = 0;
    do {
        CHECK_EQ(sk_store_events_list(st, after, 512, ev, &n), 0);
        if (n) after = ev[n - 1].id;
    } while (n == 512);
    return after;
}

/* Polls /metrics until it holds line (want 1) or no longer does (want 0). */
static void metrics_wait(int port, const char *line, int want)
{
    static char met[1 << 20];
    int64_t deadline = sk_mono_ms() + 15000;
    for (;;) {
        CHECK_EQ(sk_th_http_get_big(port, "/metrics", met, sizeof met), 200);
        if ((strstr(met, line) != NULL) == want) return;
        const char *wh = strstr(met, "seckill_webhook");
        CHECK_MSG(sk_mono_ms() < deadline, "/metrics %s %s:\n%.3000s", want ? "lacks" : "keeps",
                  line, wh ? wh : met);
        poll(NULL, 0, 50);
    }
}

/* One order of aid for uid, persisted (created), its id into oid. */
static void wh_buy(struct sk_th_http *c, uint64_t aid, uint64_t uid, char *oid, size_t cap)
{
    struct sk_th_resp r;
    CHECK_EQ(sk_th_buy_one(c, aid, uid, oid, cap), 200);
    sk_th_order_wait(c, oid, uid, "created", 15000, &r);
}

/* The operator's mistakes: each a 4xx naming what is wrong, never
 * echoing a secret, and nothing changed (the store's list is the same). */
static void endpoint_mistakes(struct sk_th_http *c, sk_store *st, uint64_t aid, int rxport)
{
    static const struct {
        const char *method, *path, *body;
        int status;
        const char *says;
    } bad[] = {
        {"POST", "", "{\"name\":\"x\",\"url\":\"ftp://h/\"}", 400, "url"},
        {"POST", "", "{\"name\":\"x\",\"url\":\"http://\"}", 400, "url"},
        {"POST", "", "{\"name\":\"x\",\"url\":\"http://h /\"}", 400, "url"},
        {"POST", "", "{\"name\":\"x\"}", 400, "missing field url"},
        {"POST", "", "{\"name\":\"a b\",\"url\":\"http://h/\"}", 400, "name"},
        {"POST", "", "{\"name\":\"abcdefghijabcdefghijabcdefghijabc\",\"url\":\"http://h/\"}", 400,
         "name"},
        {"POST", "", "{\"name\":\"x\",\"url\":\"http://h/\",\"events\":[\"ORDER.PAID\"]}", 400,
         "ORDER.PAID"},
        {"POST", "", "{\"name\":\"x\",\"url\":\"http://h/\",\"events\":[\"order\"]}", 400,
         "event filter"},
        {"POST", "", "{\"name\":\"x\",\"url\":\"http://h/\",\"events\":[]}", 400, "events"},
        {"POST", "", "{\"name\":\"x\",\"url\":\"http://h/\",\"events\":\"order.\"}", 400, "events"},
        {"POST", "",
         "{\"name\":\"x\",\"url\":\"http://h/\",\"secret\":\"whsec_c2VjcmV0LXRvby1zaG9ydA==\"}",
         400, "secret"},
        {"POST", "",
         "{\"name\":\"x\",\"url\":\"http://h/\",\"secret\":\"c2VjcmV0LXRvby1zaG9ydA==\"}", 400,
         "secret"},
        {"POST", "", "{\"name\":\"x\",\"url\":\"http://h/\",\"colour\":1}", 400, "colour"},
        {"POST", "", "not json", 400, "JSON"},
        {"DELETE", "/nope", NULL, 404, "unknown_webhook"},
        {"DELETE", "/a%20b", NULL, 400, "name"},
        {"POST", "/nope/pause", NULL, 404, "unknown_webhook"},
        {"POST", "/nope/rotate", "{\"secret\":\"whsec_Zm9vYmFyZm9vYmFy!!\"}", 400, "secret"},
        {"POST", "/nope/replay", "{\"since\":\"yesterday\"}", 400, "since"},
        {"POST", "/nope/replay", "{}", 400, "since"},
    };
    struct sk_store_webhook *before, *after;
    size_t nb, na;
    CHECK_EQ(sk_store_webhook_list(st, 0, &before, &nb), 0);
    char path[200];
    struct sk_th_resp r;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64 "/webhooks%s", aid, bad[i].path);
        int got = sk_th_http_req(c, bad[i].method, path, WH_ADMIN, bad[i].body, &r);
        CHECK_MSG(got == bad[i].status && strstr(r.body, bad[i].says), "%s %s %s: %d %s",
                  bad[i].method, path, bad[i].body ? bad[i].body : "", got, r.body);
        CHECK_MSG(!strstr(r.body, "c2VjcmV0") && !strstr(r.body, "Zm9vYmFy"), "echoed: %s", r.body);
    }
    /* an unknown activity, no admin token */
    char body[200];
    snprintf(body, sizeof body, "{\"name\":\"x\",\"url\":\"http://127.0.0.1:%d/\"}", rxport);
    CHECK_EQ(sk_th_http_req(c, "POST", "/api/v1/activities/999999999/webhooks", WH_ADMIN, body, &r),
             404);
    CHECK(strstr(r.body, "unknown_activity") != NULL);
    CHECK_EQ(sk_th_http_req(c, "GET", "/api/v1/activities/999999999/webhooks", WH_ADMIN, NULL, &r),
             404);
    snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64 "/webhooks", aid);
    CHECK_EQ(sk_th_http_req(c, "POST", path, NULL, body, &r), 401);
    CHECK_EQ(sk_store_webhook_list(st, 0, &after, &na), 0);
    CHECK_EQ(na, nb);
    for (size_t i = 0; i < na; i++)
        CHECK(!memcmp(&before[i], &after[i], sizeof before[i]));
    free(before);
    free(after);
}

/* Adds endpoint name to aid: its secret (given or drawn) into secret. */
static void endpoint_add(struct sk_th_http *c, uint64_t aid, const char *name, int port,
                         const char *events, const char *given, char *secret, size_t cap)
{
    char path[200], body[600];
    struct sk_th_resp r;
    snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64 "/webhooks", aid);
    snprintf(body, sizeof body, "{\"name\":\"%s\",\"url\":\"http://127.0.0.1:%d/hook\"%s%s%s%s%s}",
             name, port, events ? ",\"events\":" : "", events ? events : "",
             given ? ",\"secret\":\"" : "", given ? given : "", given ? "\"" : "");
    int st = sk_th_http_req(c, "POST", path, WH_ADMIN, body, &r);
    CHECK_MSG(st == 201, "add %s: %d %s", name, st, r.body);
    sk_th_resp_field(&r, "secret", secret, cap);
    if (given) CHECK_STR(secret, given);
    CHECK_MSG(!strncmp(secret, "whsec_", 6), "%s", r.body);
    char key[96];
    sk_th_resp_field(&r, "endpoint", key, sizeof key);
    char want[96];
    snprintf(want, sizeof want, "%" PRIu64 "/%s", aid, name);
    CHECK_STR(key, want);
}

/* Endpoints added by the admin API, on a real `seckill serve` over the
 * store of kind (0 SQLite, 1 PostgreSQL, 2 MariaDB), each with its own
 * receiver: each gets only its activity's events that pass its filter,
 * signed (Python's hmac) with its secret, both secrets during a rotation;
 * a paused one gets nothing, then everything it missed on resume; a
 * removed one stops; a replay by the API and by `seckill events replay`
 * delivers again; the operator's mistakes are 4xx or exit 2 and change
 * nothing. */
static void endpoints_per_activity(int kind)
{
    char spec[420];
    fresh_store_spec(kind, "ep", spec, sizeof spec);
    const char *extra[] = {"--db", spec, "--webhook-settle-ms", kind ? "200" : "0", NULL};
    struct srv v;
    srv_start(&v, extra); /* started, connected, ready */
    struct sk_th_serve sv = v.s;
    struct sk_th_http c = v.c;
    struct sk_th_resp r;
    uint64_t a1 = sk_th_http_activity(&c, "hooks-1", 8, 600);
    uint64_t a2 = sk_th_http_activity(&c, "hooks-2", 8, 600);
    sk_store *st = sk_th_store_open(spec);
    struct sk_th_rx *ra = sk_th_rx_start(1, NULL, 1), *rb = sk_th_rx_start(2, NULL, 1),
                    *rc = sk_th_rx_start(3, NULL, 1);
    endpoint_mistakes(&c, st, a1, sk_th_rx_port(ra));

    /* a: a1's payments and sale events, its secret given; b: every event of
     * a2, its secret drawn; c: a1's order events, paused before the sale */
    char sa[128], sb[128], sc[128], sa2[128];
    endpoint_add(&c, a1, "a", sk_th_rx_port(ra), "[\"order.paid\",\"activity.\"]", WH_SECRET_A, sa,
                 sizeof sa);
    endpoint_add(&c, a2, "b", sk_th_rx_port(rb), NULL, NULL, sb, sizeof sb);
    endpoint_add(&c, a1, "c", sk_th_rx_port(rc), "[\"order.\"]", NULL, sc, sizeof sc);
    CHECK(strcmp(sb, sc) != 0);
    char path[200], body[300], line[200];
    snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64 "/webhooks", a1);
    snprintf(body, sizeof body, "{\"name\":\"a\",\"url\":\"http://127.0.0.1:%d/x\"}",
             sk_th_rx_port(ra));
    CHECK_EQ(sk_th_http_req(&c, "POST", path, WH_ADMIN, body, &r), 409); /* the name is taken */
    CHECK_EQ(sk_th_http_req(&c, "GET", path, WH_ADMIN, NULL, &r), 200);
    CHECK_MSG(strstr(r.body, "\"name\":\"a\"") && strstr(r.body, "\"name\":\"c\"") &&
                  !strstr(r.body, "\"name\":\"b\"") && !strstr(r.body, "secret\"") &&
                  !strstr(r.body, sa + 6) && !strstr(r.body, sc + 6),
              "%s", r.body);
    snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64 "/webhooks/c/pause", a1);
    CHECK_EQ(sk_th_http_req(&c, "POST", path, WH_ADMIN, NULL, &r), 200);
    snprintf(line, sizeof line, "seckill_webhook_paused{endpoint=\"%" PRIu64 "/c\"} 1\n", a1);
    metrics_wait(sv.port, line, 1);
    int64_t base = last_row(st), t0 = sk_wall_ms();

    /* the sale: 3 orders of a1 (2 paid), 2 of a2 (1 paid) */
    char o1[3][64], o2[2][64];
    for (int i = 0; i < 3; i++)
        wh_buy(&c, a1, 100 + (uint64_t)i, o1[i], sizeof o1[i]);
    for (int i = 0; i < 2; i++)
        wh_buy(&c, a2, 200 + (uint64_t)i, o2[i], sizeof o2[i]);
    CHECK_EQ(sk_th_order_op(&c, o1[0], "pay", 100, &r), 200);
    CHECK_EQ(sk_th_order_op(&c, o1[1], "pay", 101, &r), 200);
    CHECK_EQ(sk_th_order_op(&c, o2[0], "pay", 200, &r), 200);
    static char ida[16][96], idb[16][96], idc[16][96];
    int na = events_of(st, base, a1, "order.paid", ida, 16);
    int nb = events_of(st, base, a2, "", idb, 16);
    CHECK_EQ(na, 2);
    CHECK_EQ(nb, 3);
    rx_wait(ra, ida, na, 1, "a");
    rx_wait(rb, idb, nb, 1, "b");
    CHECK_EQ((int)sk_th_rx_count(ra), na); /* nothing of another type or activity */
    CHECK_EQ((int)sk_th_rx_count(rb), nb);
    CHECK_EQ((int)sk_th_rx_count(rc), 0); /* paused */
    rx_verify(ra, ida, na, sa, sa);
    rx_verify(rb, idb, nb, sb, sb);
    /* the dashboard's tile of each: a delivered both, c paused */
    static char dash[1 << 20];
    char ka[96], kc[96];
    snprintf(ka, sizeof ka, "%" PRIu64 "/a", a1);
    snprintf(kc, sizeof kc, "%" PRIu64 "/c", a1);
    int64_t deadline = sk_mono_ms() + 10000;
    for (int ok = 0; !ok;) {
        CHECK_EQ(sk_th_http_get_big(sv.port, "/dashboard.json", dash, sizeof dash), 200);
        json_t *d = json_loads(dash, 0, NULL), *hooks = json_object_get(d, "webhooks"), *h;
        size_t k;
        int seen_a = 0, seen_c = 0;
        json_array_foreach(hooks, k, h)
        {
            const char *ep = json_string_value(json_object_get(h, "endpoint"));
            json_int_t dl = json_integer_value(json_object_get(h, "delivered"));
            if (ep && !strcmp(ep, ka)) seen_a = dl == na;
            if (ep && !strcmp(ep, kc))
                seen_c = dl == 0 && json_is_true(json_object_get(h, "paused"));
        }
        json_decref(d);
        ok = seen_a && seen_c;
        CHECK_MSG(ok || sk_mono_ms() < deadline, "dashboard: a %d c %d: %.2000s", seen_a, seen_c,
                  dash);
        if (!ok) poll(NULL, 0, 20);
    }

    /* resumed: c catches up with every order event of a1 */
    snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64 "/webhooks/c/resume", a1);
    CHECK_EQ(sk_th_http_req(&c, "POST", path, WH_ADMIN, NULL, &r), 200);
    int nc = events_of(st, base, a1, "order.", idc, 16);
    CHECK_EQ(nc, 5); /* 3 created, 2 paid */
    rx_wait(rc, idc, nc, 1, "c");
    CHECK_EQ((int)sk_th_rx_count(rc), nc);
    rx_verify(rc, idc, nc, sc, sc);

    /* a rotation: both secrets sign until keep_previous_s has passed */
    snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64 "/webhooks/a/rotate", a1);
    CHECK_EQ(sk_th_http_req(&c, "POST", path, WH_ADMIN, "{\"keep_previous_s\":3600}", &r), 200);
    sk_th_resp_field(&r, "secret", sa2, sizeof sa2);
    CHECK(strncmp(sa2, "whsec_", 6) == 0 && strcmp(sa2, sa) != 0);
    snprintf(line, sizeof line, "seckill_webhook_signing_secrets{endpoint=\"%" PRIu64 "/a\"} 2\n",
             a1);
    metrics_wait(sv.port, line, 1);
    snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64 "/webhooks", a1);
    CHECK_EQ(sk_th_http_req(&c, "GET", path, WH_ADMIN, NULL, &r), 200);
    CHECK_MSG(strstr(r.body, "previous_secret_until") && !strstr(r.body, sa2 + 6), "%s", r.body);
    int64_t before_rot = last_row(st);
    CHECK_EQ(sk_th_order_op(&c, o1[2], "pay", 102, &r), 200);
    static char idr[4][96];
    CHECK_EQ(events_of(st, before_rot, a1, "order.paid", idr, 4), 1);
    rx_wait(ra, idr, 1, 1, "a rotated");
    CHECK_EQ(rx_verify(ra, idr, 1, sa2, sa), 1);

    /* replay by the API: a's payments come again */
    snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64 "/webhooks/a/replay", a1);
    char since[SK_TIME_RFC3339_MAX];
    sk_time_format_rfc3339(t0 - 1000, since, sizeof since);
    snprintf(body, sizeof body, "{\"since\":\"%s\"}", since);
    CHECK_EQ(sk_th_http_req(&c, "POST", path, WH_ADMIN, body, &r), 200);
    char n_ev[32];
    sk_th_resp_field(&r, "events", n_ev, sizeof n_ev);
    CHECK_MSG(atoi(n_ev) >= na + 1, "%s", r.body);
    snprintf(ida[na], sizeof ida[na], "%s", idr[0]);
    rx_wait(ra, ida, na + 1, 2, "a replayed");

    /* replay by the CLI, through the config loader: b's events come again */
    char cmd[1200], out[2000], key[96];
    snprintf(key, sizeof key, "%" PRIu64 "/b", a2);
    snprintf(cmd, sizeof cmd, "%s events replay --db '%s' --since %" PRId64 " --endpoint %s 2>&1",
             sk_th_seckill_bin(), spec, t0 - 1000, key);
    CHECK_MSG(sk_th_sh(cmd, out, sizeof out) == 0, "%s", out);
    CHECK_MSG(strstr(out, "event(s) will be delivered again") != NULL, "%s", out);
    rx_wait(rb, idb, nb, 2, "b replayed");
    /* its mistakes: exit 2, the cursor where it was */
    int64_t end = last_row(st), cur = -1;
    deadline = sk_mono_ms() + 15000;
    while (sk_store_webhook_cursor(st, key, sk_wall_ms(), &cur, NULL) == 0 && cur != end) {
        CHECK_MSG(sk_mono_ms() < deadline, "b's cursor %" PRId64 ", the end %" PRId64, cur, end);
        poll(NULL, 0, 20);
    }
    static const struct {
        const char *args;
        int with_key; /* the endpoint b's name goes at the end */
    } wrong[] = {
        {"--since soon --endpoint ", 1},
        {"--since 0 --endpoint 'a b'", 0},
        {"--since 0 --endpoint 9/nope", 0},
        {"--since 0", 0},
        {"--endpoint ", 1},
        {"--type order.paid --since 0 --endpoint ", 1},
        {"--bogus 1 --since 0 --endpoint ", 1},
        {"--since 0 --endpoint", 0},
    };
    for (size_t i = 0; i < sizeof wrong / sizeof wrong[0]; i++) {
        snprintf(cmd, sizeof cmd, "%s events replay --db '%s' %s%s 2>&1", sk_th_seckill_bin(), spec,
                 wrong[i].args, wrong[i].with_key ? key : "");
        int ws = sk_th_sh(cmd, out, sizeof out);
        CHECK_MSG(WEXITSTATUS(ws) == 2 && strstr(out, "events replay"), "%s: exit %d: %s",
                  wrong[i].args, WEXITSTATUS(ws), out);
    }
    int64_t cur2 = -1;
    CHECK_EQ(sk_store_webhook_cursor(st, key, sk_wall_ms(), &cur2, NULL), 0);
    CHECK_EQ(cur2, cur);

    /* removed: c stops; a goes on */
    snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64 "/webhooks/c", a1);
    CHECK_EQ(sk_th_http_req(&c, "DELETE", path, WH_ADMIN, NULL, &r), 200);
    CHECK_EQ(sk_th_http_req(&c, "DELETE", path, WH_ADMIN, NULL, &r), 404);
    snprintf(line, sizeof line, "{endpoint=\"%" PRIu64 "/c\"}", a1);
    metrics_wait(sv.port, line, 0);
    int seen_c = (int)sk_th_rx_count(rc);
    int64_t before_rm = last_row(st);
    char o3[64];
    wh_buy(&c, a1, 103, o3, sizeof o3);
    CHECK_EQ(sk_th_order_op(&c, o3, "pay", 103, &r), 200);
    static char idp[4][96];
    CHECK_EQ(events_of(st, before_rm, a1, "order.paid", idp, 4), 1);
    rx_wait(ra, idp, 1, 1, "a after the remove");
    CHECK_EQ((int)sk_th_rx_count(rc), seen_c);
    snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64 "/webhooks", a1);
    CHECK_EQ(sk_th_http_req(&c, "GET", path, WH_ADMIN, NULL, &r), 200);
    CHECK_MSG(strstr(r.body, "\"name\":\"a\"") && !strstr(r.body, "\"name\":\"c\""), "%s", r.body);

    sk_th_http_close(&c);
    CHECK_EQ(sk_th_serve_stop(&sv, SIGTERM), 0);
    sk_store_close(st);
    sk_th_rx_stop(ra);
    sk_th_rx_stop(rb);
    sk_th_rx_stop(rc);
}

SK_TEST_T(webhook_endpoints_sqlite_per_activity_filter_rotate_pause_remove_replay, 180)
{
    endpoints_per_activity(0);
}

SK_TEST_T(webhook_endpoints_pg_per_activity_filter_rotate_pause_remove_replay, 180)
{
    endpoints_per_activity(1);
}

SK_TEST_T(webhook_endpoints_mysql_per_activity_filter_rotate_pause_remove_replay, 180)
{
    endpoints_per_activity(2);
}

/* The event filter of the admin API: types, prefixes, "*"; nothing else. */
SK_TEST(webhook_filter_takes_types_and_prefixes_only)
{
    char why[300];
    static const char *const good[] = {"",
                                       "*",
                                       "order.",
                                       "order.paid",
                                       "activity.,order.paid",
                                       " order.paid , activity.sold_out",
                                       "reconcile.drift"};
    static const char *const bad[] = {"order", "ORDER.PAID", "order.paid.", "x.",
                                      ",",     "order.,",    "order.paidx", "*x"};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
        CHECK_MSG(sk_wh_filter_check(good[i], why, sizeof why) == 0, "%s: %s", good[i], why);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK_MSG(sk_wh_filter_check(bad[i], why, sizeof why) == SK_EINVAL, "%s accepted", bad[i]);
    CHECK(sk_wh_filter_wants("order.", "order.paid"));
    CHECK(!sk_wh_filter_wants("order.paid", "order.paid_x"));
    CHECK(sk_wh_filter_wants(" order.paid ,activity.", "activity.closed"));
    CHECK(!sk_wh_filter_wants("activity.", "order.paid"));
}

/* The store's side on kind's store: an endpoint added with its cursor at
 * the outbox's end, refused for an unknown activity, a name taken or a
 * ninth; rotated (the old secret kept), paused; a rewind sets the cursor
 * back and bumps its epoch, so a move within the old epoch (a delivery
 * that was in flight) does nothing; removed with its cursor, and dropped
 * with its activity. */
static void endpoints_in_the_store(int kind)
{
    char spec[420];
    fresh_store_spec(kind, "eps", spec, sizeof spec);
    sk_store *st = open_sale(spec, 5, 4, 600);
    struct sk_order o[2];
    for (int i = 0; i < 2; i++)
        sk_th_order(&o[i], 5, 5000, i, (uint64_t)i + 1, 1);
    sk_th_persist_ok(st, o, 2); /* events 2..3 (1: opened) */
    int64_t end = last_row(st);
    static struct sk_event evs[16];
    size_t total = 0;
    CHECK_EQ(sk_store_events_list(st, 0, 16, evs, &total), 0);
    CHECK_EQ(total, 3);
    struct sk_store_webhook w = {.activity_id = 5};
    snprintf(w.name, sizeof w.name, "erp");
    snprintf(w.url, sizeof w.url, "http://127.0.0.1:9/h");
    snprintf(w.events, sizeof w.events, "order.");
    snprintf(w.secret, sizeof w.secret, "%s", WH_SECRET_A);
    CHECK_EQ(sk_store_webhook_add(st, &w, 1000), 0);
    CHECK(w.id > 0);
    CHECK_EQ(sk_store_webhook_add(st, &w, 1000), SK_EEXIST);
    struct sk_store_webhook x = w;
    x.activity_id = 6;
    CHECK_EQ(sk_store_webhook_add(st, &x, 1000), SK_ENOTFOUND);
    for (int i = 1; i < SK_STORE_WH_PER_ACTIVITY; i++) {
        x = w;
        snprintf(x.name, sizeof x.name, "n%d", i);
        CHECK_EQ(sk_store_webhook_add(st, &x, 1000), 0);
    }
    snprintf(x.name, sizeof x.name, "ninth");
    CHECK_EQ(sk_store_webhook_add(st, &x, 1000), SK_ESTATE);
    struct sk_store_webhook *all;
    size_t n;
    CHECK_EQ(sk_store_webhook_list(st, 5, &all, &n), 0);
    CHECK_EQ(n, SK_STORE_WH_PER_ACTIVITY);
    CHECK_STR(all[0].name, "erp");
    CHECK_STR(all[0].events, "order.");
    free(all);
    /* its cursor: at the end when added */
    int64_t cur = -1, ep = -1, row, again;
    CHECK_EQ(sk_store_webhook_cursor_find(st, "5/erp", &cur, &ep), 0);
    CHECK_EQ(cur, end);
    CHECK_EQ(ep, 0);
    /* rotate, pause */
    CHECK_EQ(sk_store_webhook_rotate(st, 5, "erp", EX_SECRET, 99000, 2000), 0);
    CHECK_EQ(sk_store_webhook_pause(st, 5, "erp", 1, 2000), 0);
    CHECK_EQ(sk_store_webhook_pause(st, 5, "nope", 1, 2000), SK_ENOTFOUND);
    CHECK_EQ(sk_store_webhook_get(st, 5, "erp", &x), 0);
    CHECK_STR(x.secret, EX_SECRET);
    CHECK_STR(x.secret_prev, WH_SECRET_A);
    CHECK_EQ(x.prev_until_ms, 99000);
    CHECK_EQ(x.paused, 1);
    /* a rewind to before every event: 3 events again, epoch 1; a move of
     * epoch 0 does nothing, one of epoch 1 moves it */
    CHECK_EQ(sk_store_webhook_rewind(st, "5/erp", 0, 3000, &row, &again), 0);
    CHECK_EQ(row, evs[0].id - 1);
    CHECK_EQ(again, (int64_t)total);
    CHECK_EQ(sk_store_webhook_advance(st, "5/erp", end, 0, 3000), 0);
    CHECK_EQ(sk_store_webhook_cursor_find(st, "5/erp", &cur, &ep), 0);
    CHECK_EQ(cur, evs[0].id - 1);
    CHECK_EQ(ep, 1);
    CHECK_EQ(sk_store_webhook_advance(st, "5/erp", evs[1].id, 1, 3000), 0);
    CHECK_EQ(sk_store_webhook_cursor_find(st, "5/erp", &cur, &ep), 0);
    CHECK_EQ(cur, evs[1].id);
    /* a time after every event: nothing to replay, nothing changed */
    CHECK_EQ(sk_store_webhook_rewind(st, "5/erp", sk_wall_ms() + 60000, 3000, &row, &again), 0);
    CHECK_EQ(again, 0);
    CHECK_EQ(row, evs[1].id);
    CHECK_EQ(sk_store_webhook_rewind(st, "5/nope", 0, 3000, &row, &again), SK_ENOTFOUND);
    /* removed with its cursor; the others go with their activity */
    CHECK_EQ(sk_store_webhook_remove(st, 5, "erp"), 0);
    CHECK_EQ(sk_store_webhook_remove(st, 5, "erp"), SK_ENOTFOUND);
    CHECK_EQ(sk_store_webhook_cursor_find(st, "5/erp", &cur, &ep), SK_ENOTFOUND);
    CHECK_EQ(sk_store_webhook_cursor_find(st, "5/n1", &cur, &ep), 0);
    CHECK_EQ(sk_store_activity_delete(st, 5), 0);
    CHECK_EQ(sk_store_webhook_list(st, 0, &all, &n), 0);
    CHECK_EQ(n, 0);
    free(all);
    CHECK_EQ(sk_store_webhook_cursor_find(st, "5/n1", &cur, &ep), SK_ENOTFOUND);
    sk_store_close(st);
}

SK_TEST(webhook_endpoints_sqlite_store_add_rotate_pause_rewind_remove)
{
    endpoints_in_the_store(0);
}

SK_TEST(webhook_endpoints_pg_store_add_rotate_pause_rewind_remove)
{
    endpoints_in_the_store(1);
}

SK_TEST(webhook_endpoints_mysql_store_add_rotate_pause_rewind_remove)
{
    endpoints_in_the_store(2);
}
