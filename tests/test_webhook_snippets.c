/* test_webhook_snippets.c - docs/integration.md's signature-verifying
 * snippets (shell and openssl, Python, Node), each copied from the page as
 * written (the fenced block after its "<!-- verify-snippet: LANG -->"
 * marker) and run against real deliveries: the dispatcher posts a sale's
 * events, signed under two secrets (a rotation), to a receiver of the
 * test's own, which keeps them as they came. Each snippet accepts every
 * delivery under either secret, and refuses, on the payment's delivery
 * (an escaped payment reference in its body), a byte of the body changed,
 * another id, another timestamp, another secret, and a correctly signed
 * request whose timestamp is an hour old (a replay). The test adds only
 * the lines that feed a snippet its input. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "core/clock.h"
#include "orders/webhook_sign.h"
#include "orders/webhooks.h"
#include "store/store.h"
#include "support/fixtures.h"
#include "support/harness.h"
#include "support/store_faults.h"
#include "support/webhook_rx.h"

#define SECRET_NEW "whsec_c2Vjb25kLXNlY3JldC1vZi10aGUtc2hvcC0wMTIzNDU2Nzg5"
#define SECRET_OLD "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
#define SECRET_OTHER "whsec_b3RoZXItc2hvcHMtc2VjcmV0LW5vdC1vdXJzLTAxMjM="

/* The block after marker "<!-- verify-snippet: lang -->" of
 * docs/integration.md, verbatim (new memory). */
static char *snippet(const char *lang)
{
    char path[600], marker[64];
    snprintf(path, sizeof path, "%s/docs/integration.md", sk_th_source_root());
    FILE *f = fopen(path, "r");
    CHECK_MSG(f != NULL, "%s", path);
    snprintf(marker, sizeof marker, "<!-- verify-snippet: %s -->", lang);
    size_t cap = 1 << 14, len = 0;
    char *out = malloc(cap), line[1024];
    CHECK(out != NULL);
    int state = 0; /* 0 before the marker, 1 before the fence, 2 inside */
    while (fgets(line, sizeof line, f) && state < 3) {
        if (state == 0 && strstr(line, marker))
            state = 1;
        else if (state == 1 && !strncmp(line, "```", 3))
            state = 2;
        else if (state == 2 && !strncmp(line, "```", 3))
            state = 3;
        else if (state == 2) {
            size_t n = strlen(line);
            CHECK(len + n + 1 < cap);
            memcpy(out + len, line, n);
            len += n;
        }
    }
    fclose(f);
    out[len] = 0;
    CHECK_MSG(state == 3, "docs/integration.md: no closed block after %s", marker);
    CHECK_MSG(len > 200, "docs/integration.md: the %s snippet is %zu bytes", lang, len);
    return out;
}

/* The feeding lines the test adds after a function snippet. */
static const char py_main[] = "\nimport json, sys\n"
                              "secret, hdr, body = sys.argv[1:4]\n"
                              "try:\n"
                              "    verify(secret, json.load(open(hdr)), open(body, 'rb').read())\n"
                              "except ValueError as e:\n"
                              "    print('refused:', e)\n"
                              "    sys.exit(1)\n"
                              "print('valid')\n";
static const char js_main[] =
    "\nconst fs = require('node:fs');\n"
    "const [secret, hdr, body] = process.argv.slice(2);\n"
    "try {\n"
    "  verify(secret, JSON.parse(fs.readFileSync(hdr, 'utf8')), fs.readFileSync(body));\n"
    "} catch (e) {\n"
    "  console.log('refused:', e.message);\n"
    "  process.exit(1);\n"
    "}\n"
    "console.log('valid');\n";

struct req {
    char id[96], ts[24], sig[200];
    char *body;
};

/* Runs the snippet of language l (0 sh, 1 python, 2 node, its file at
 * prog) on q under secret: its exit status; its output into out. */
static int run(int l, const char *prog, const struct req *q, const char *secret, char *out,
               size_t cap)
{
    char dir[400], body[500], hdr[500], cmd[2400];
    snprintf(dir, sizeof dir, "%s", sk_th_tmpdir());
    snprintf(body, sizeof body, "%s/body", dir);
    snprintf(hdr, sizeof hdr, "%s/headers.json", dir);
    FILE *f = fopen(body, "wb");
    CHECK(f != NULL);
    fwrite(q->body, 1, strlen(q->body), f);
    fclose(f);
    char json[600];
    snprintf(json, sizeof json,
             "{\"webhook-id\":\"%s\",\"webhook-timestamp\":\"%s\",\"webhook-signature\":\"%s\"}",
             q->id, q->ts, q->sig);
    sk_th_write_file(hdr, json);
    if (l == 0)
        snprintf(cmd, sizeof cmd,
                 "WEBHOOK_SECRET='%s' WEBHOOK_ID='%s' WEBHOOK_TIMESTAMP='%s' "
                 "WEBHOOK_SIGNATURE='%s' sh '%s' '%s' 2>&1",
                 secret, q->id, q->ts, q->sig, prog, body);
    else
        snprintf(cmd, sizeof cmd, "%s '%s' '%s' '%s' '%s' 2>&1", l == 1 ? "python3" : "node", prog,
                 secret, hdr, body);
    int ws = sk_th_sh(cmd, out, cap);
    CHECK_MSG(WIFEXITED(ws), "%s: %s", cmd, out);
    return WEXITSTATUS(ws);
}

SK_TEST_T(webhook_snippets_in_the_docs_verify_real_deliveries_and_refuse_tampered_ones, 120)
{
    static char missing[128];
    sk_th_sh("for t in python3 node openssl base64 od; do command -v $t >/dev/null || "
             "printf ' %s' $t; done",
             missing, sizeof missing);
    CHECK_MSG(!missing[0], "the snippets need:%s (scripts/deps.sh: python3 nodejs openssl)",
              missing);
    /* a sale's events in a store of the test's own */
    char spec[500], err[300];
    snprintf(spec, sizeof spec, "sqlite:%s/snip.db", sk_th_tmpdir());
    sk_store *st;
    CHECK_MSG(sk_store_open(&st, spec, err, sizeof err) == 0, "%s", err);
    struct sk_activity a;
    sk_th_activity_valid(&a, 5);
    a.stock = 3;
    CHECK_EQ(sk_store_activity_insert(st, &a), 0);
    CHECK_EQ(sk_store_activity_set_state(st, 5, "open"), 0);
    struct sk_order o[2];
    for (int i = 0; i < 2; i++)
        sk_th_order(&o[i], 5, 5000, i, (uint64_t)i + 1, 1);
    sk_th_persist_ok(st, o, 2);
    int s;
    CHECK_EQ(sk_store_order_pay_ref(st, o[0].order_id, 6000, "psp_\"quoted\"/1", &s), 0);
    struct sk_event ev[16];
    size_t n = 0;
    CHECK_EQ(sk_store_events_list(st, 0, 16, ev, &n), 0);
    CHECK_EQ(n, 4); /* opened, two created, paid */

    /* delivered for real, signed under both secrets of a rotation */
    const char *secrets[] = {SECRET_NEW, SECRET_OLD, NULL};
    struct sk_th_rx *rx = sk_th_rx_start(3, secrets, 1);
    struct sk_wh_endpoint ep;
    memset(&ep, 0, sizeof ep);
    snprintf(ep.name, sizeof ep.name, "erp");
    snprintf(ep.url, sizeof ep.url, "http://127.0.0.1:%d/hook", sk_th_rx_port(rx));
    snprintf(ep.secret[0], sizeof ep.secret[0], "%s", SECRET_NEW);
    snprintf(ep.secret[1], sizeof ep.secret[1], "%s", SECRET_OLD);
    struct sk_wh_opts opt = {.settle_ms = -1, .idle_ms = 20, .seed = 1};
    sk_webhooks *w;
    CHECK_MSG(sk_webhooks_start(&w, spec, &ep, 1, &opt, err, sizeof err) == 0, "%s", err);
    int64_t deadline = sk_mono_ms() + 20000;
    while (sk_th_rx_count(rx) < n && sk_mono_ms() < deadline)
        sk_th_nap_ms(10);
    sk_webhooks_stop(w);
    CHECK_EQ(sk_th_rx_count(rx), n);
    struct req q[4];
    for (size_t i = 0; i < n; i++) {
        struct sk_th_rx_req r;
        sk_th_rx_get(rx, i, &r);
        CHECK_MSG(r.sig_ok && r.id_ok && r.status == 200, "delivery %zu: %s", i, r.body);
        snprintf(q[i].id, sizeof q[i].id, "%s", r.id);
        snprintf(q[i].ts, sizeof q[i].ts, "%s", r.ts);
        snprintf(q[i].sig, sizeof q[i].sig, "%s", r.sig);
        CHECK_MSG(strchr(q[i].sig, ' ') != NULL, "not two signatures: %s", q[i].sig);
        q[i].body = strdup(r.body);
    }
    sk_th_rx_stop(rx);
    /* (the replay below is signed here, for its own time) */
    struct sk_wh_key k[1];
    char why[200];
    CHECK(sk_wh_key_parse(SECRET_NEW, &k[0], why, sizeof why) == 0);
    CHECK(strstr(q[3].body, "\\\"quoted\\\"") != NULL); /* an escaped payment reference */

    static const char *const langs[3] = {"sh", "python", "node"};
    static const char *const files[3] = {"verify.sh", "verify.py", "verify.js"};
    for (int l = 0; l < 3; l++) {
        char *text = snippet(langs[l]), prog[500], out[2000];
        snprintf(prog, sizeof prog, "%s/%s", sk_th_tmpdir(), files[l]);
        size_t tl = strlen(text);
        const char *feed = l == 1 ? py_main : l == 2 ? js_main : "";
        char *all = malloc(tl + strlen(feed) + 1);
        CHECK(all != NULL);
        memcpy(all, text, tl);
        strcpy(all + tl, feed);
        sk_th_write_file(prog, all);
        free(all);
        free(text);
        for (size_t i = 0; i < n; i++) {
            /* as delivered: under either secret */
            CHECK_MSG(run(l, prog, &q[i], SECRET_NEW, out, sizeof out) == 0, "%s, %s: %s", langs[l],
                      q[i].id, out);
            CHECK_MSG(run(l, prog, &q[i], SECRET_OLD, out, sizeof out) == 0, "%s, %s: %s", langs[l],
                      q[i].id, out);
            if (i != 3) continue; /* the tampered copies: of the payment (seconds each in node) */
            CHECK_MSG(run(l, prog, &q[i], SECRET_OTHER, out, sizeof out) != 0,
                      "%s accepted another secret: %s", langs[l], out);
            struct req t = q[i];
            /* a byte of the body changed */
            t.body = strdup(q[i].body);
            char *d = strpbrk(t.body, "0123456789");
            CHECK(d != NULL);
            *d = *d == '9' ? '0' : (char)(*d + 1);
            CHECK_MSG(run(l, prog, &t, SECRET_NEW, out, sizeof out) != 0,
                      "%s accepted a changed body: %s", langs[l], out);
            free(t.body);
            t.body = q[i].body;
            /* another id, another timestamp (the signatures kept) */
            size_t il = strlen(t.id);
            CHECK(il + 1 < sizeof t.id);
            t.id[il] = '0';
            t.id[il + 1] = 0;
            CHECK_MSG(run(l, prog, &t, SECRET_NEW, out, sizeof out) != 0,
                      "%s accepted another id: %s", langs[l], out);
            t = q[i];
            snprintf(t.ts, sizeof t.ts, "%lld", strtoll(q[i].ts, NULL, 10) - 1);
            CHECK_MSG(run(l, prog, &t, SECRET_NEW, out, sizeof out) != 0,
                      "%s accepted another timestamp: %s", langs[l], out);
            /* a replay an hour later, its signature right for its time */
            t = q[i];
            snprintf(t.ts, sizeof t.ts, "%lld", (long long)(sk_wall_ms() / 1000 - 3600));
            CHECK_EQ(sk_wh_signature_header(k, 1, t.id, strtoll(t.ts, NULL, 10), t.body,
                                            strlen(t.body), t.sig, sizeof t.sig),
                     0);
            CHECK_MSG(run(l, prog, &t, SECRET_NEW, out, sizeof out) != 0,
                      "%s accepted an hour-old timestamp: %s", langs[l], out);
        }
    }
    for (size_t i = 0; i < n; i++)
        free(q[i].body);
    sk_store_close(st);
}
