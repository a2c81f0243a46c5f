/* serve_buy.c - a blocking test's purchases, a segmented activity's
 * through a real `seckill serve` (serve_buy.h). */
#include "support/serve_buy.h"

#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "core/clock.h"
#include "core/codes.h"
#include "core/error.h"
#include "spawn/netutil.h"
#include "support/fixtures.h"
#include "support/harness.h"
#include "support/http_client.h"

/* The serve of this test process (a forked child starts its own). */
static struct {
    pid_t owner; /* 0: none runs */
    struct sk_th_serve s;
    struct sk_th_http c;
    char url[1024];
    struct sk_rate_limits rl;
    int starts;
} sv;
static char store[420];

void sk_th_buy_store(const char *db_spec)
{
    snprintf(store, sizeof store, "%s", db_spec ? db_spec : "");
}

/* r's Redis as a URL serve takes. */
static void url_of(const sk_redis *r, char *out, size_t cap)
{
    const struct sk_redis_url *u = &r->url;
    char creds[400] = "";
    if (u->user[0] || u->pass[0]) snprintf(creds, sizeof creds, "%s:%s@", u->user, u->pass);
    if (u->unix_sock) {
        snprintf(out, cap, "redis+unix://%s%s?db=%d", creds, u->host, u->db);
        return;
    }
    size_t n = (size_t)snprintf(out, cap, "%s://%s",
                                u->cluster    ? "redis+cluster"
                                : u->sentinel ? "redis+sentinel"
                                              : "redis",
                                creds);
    for (int i = 0; i < u->nseeds && n < cap; i++)
        n += (size_t)snprintf(out + n, cap - n, "%s%s:%d", i ? "," : "", u->seeds[i].host,
                              u->seeds[i].port);
    if (n >= cap) return;
    if (u->sentinel)
        snprintf(out + n, cap - n, "/%s/%d", u->master_name, u->db);
    else if (!u->cluster)
        snprintf(out + n, cap - n, "/%d", u->db);
}

void sk_th_buy_stop(void)
{
    if (sv.owner != getpid()) return;
    sk_th_http_close(&sv.c);
    CHECK_EQ(sk_th_serve_stop(&sv.s, SIGTERM), 0);
    sv.owner = 0;
}

/* The serve for r's Redis and these limits, started when none runs (or
 * another one does). */
static void ensure(sk_redis *r, const struct sk_rate_limits *rl)
{
    char url[1024];
    url_of(r, url, sizeof url);
    struct sk_rate_limits want = rl ? *rl : (struct sk_rate_limits){0};
    CHECK_MSG(want.ip_per_s == 0, "a per-IP limit cannot be sent over one local connection");
    if (sv.owner == getpid() && (strcmp(url, sv.url) || want.user_per_s != sv.rl.user_per_s ||
                                 want.user_burst != sv.rl.user_burst))
        sk_th_buy_stop();
    if (sv.owner == getpid()) return;
    char dir[400], rate[24], burst[24];
    snprintf(dir, sizeof dir, "%s/buyer-%d", sk_th_tmpdir(), ++sv.starts);
    CHECK(mkdir(dir, 0700) == 0);
    snprintf(rate, sizeof rate, "%" PRId64, want.user_per_s);
    snprintf(burst, sizeof burst, "%" PRId64, want.user_burst);
    const char *extra[12] = {"--role", "api", "--rate-per-user-per-s", rate, "--rate-burst", burst};
    int n = 6;
    if (store[0]) {
        extra[n++] = "--db";
        extra[n++] = store;
    }
    extra[n] = NULL;
    sk_th_serve_start_in(&sv.s, dir, url, extra);
    sv.owner = getpid();
    snprintf(sv.url, sizeof sv.url, "%s", url);
    sv.rl = want;
    /* ready to sell, or (Redis down) as ready as it gets within 5 s */
    int64_t until = sk_mono_ms() + 5000;
    while (!sk_net_http_ok(sv.s.port, "/readyz", 1000) && sk_mono_ms() < until)
        sk_th_nap_ms(10);
    sk_th_http_open(&sv.c, sv.s.port);
}

int sk_th_buy_port(sk_redis *r)
{
    ensure(r, NULL);
    return sv.s.port;
}

/* The result code whose wire name, HTTP status and message an answer
 * carries (sold_out names two codes: the message tells them apart). */
static int rc_of(const char *wire, int status, const char *msg)
{
    int found = -1;
    for (int rc = 0; rc < SK_RC_COUNT_; rc++)
        if (!strcmp(sk_rc_wire(rc), wire) && sk_rc_http_status(rc) == status &&
            (found < 0 || (msg && !strcmp(sk_rc_message(rc), msg))))
            found = rc;
    return found;
}

/* One purchase over HTTP into *a; 0, or SK_EIO on a 503 unavailable. */
static int buy_http(sk_redis *r, uint64_t aid, const struct sk_purchase *p, struct sk_admission *a)
{
    char path[96], hdrs[512], body[48];
    snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64 "/purchase", aid);
    int n = snprintf(hdrs, sizeof hdrs,
                     "X-User-Id: %" PRIu64 "\r\nContent-Type: application/json\r\n", p->user_id);
    if (p->idem)
        n += snprintf(hdrs + n, sizeof hdrs - (size_t)n, "Idempotency-Key: %.*s\r\n",
                      (int)p->idem_len, p->idem);
    if (p->pass)
        snprintf(hdrs + n, sizeof hdrs - (size_t)n, "X-Queue-Pass: %.*s\r\n", (int)p->pass_len,
                 p->pass);
    snprintf(body, sizeof body, "{\"quantity\":%" PRId64 "}", p->quantity);
    struct sk_th_resp *resp = sk_th_resp_new();
    int st = sk_th_http_req(&sv.c, "POST", path, hdrs, body, resp);
    json_t *o = json_loadb(resp->body, resp->body_len, 0, NULL);
    CHECK_MSG(st > 0 && json_is_object(o), "purchase: %d %.*s", st, (int)resp->body_len,
              resp->body);
    memset(a, 0, sizeof *a);
    int rc = 0;
    if (st == 200) {
        a->rc = SK_RC_OK;
        a->quantity = json_integer_value(json_object_get(o, "quantity"));
        snprintf(a->order_id, sizeof a->order_id, "%s",
                 json_string_value(json_object_get(o, "order_id")));
    } else {
        const char *wire = json_string_value(json_object_get(o, "error"));
        CHECK_MSG(wire != NULL, "purchase: %d %.*s", st, (int)resp->body_len, resp->body);
        const char *msg = json_string_value(json_object_get(o, "message"));
        a->rc = rc_of(wire, st, msg);
        /* refused at serve's door (a malformed header): no code says it */
        if (st == 400 && msg && strcmp(sk_rc_message(a->rc), msg)) a->rc = SK_RC_BAD_ARGUMENT;
        a->retry_after_ms = json_integer_value(json_object_get(o, "retry_after_ms"));
        if (a->rc < 0) {
            /* unavailable, unconfirmed: as a blocking call that got no answer */
            snprintf(r->errstr, sizeof r->errstr, "serve: %d %s", st, wire);
            rc = r->err = SK_EIO;
        }
    }
    json_decref(o);
    free(resp);
    return rc;
}

int sk_th_stock_buy(sk_redis *r, uint64_t aid, const struct sk_rate_limits *rl,
                    const struct sk_purchase *p, size_t n, struct sk_admission *res,
                    int64_t *remaining)
{
    int rc = sk_stock_buy(r, aid, rl, p, n, res, remaining);
    if (rc < 0 || res[0].rc != SK_RC_SEGMENTED) return rc;
    ensure(r, rl);
    for (size_t i = 0; rc == 0 && i < n; i++)
        rc = buy_http(r, aid, &p[i], &res[i]);
    if (rc == 0 && remaining) {
        struct sk_stock_state st;
        rc = sk_stock_state(r, aid, &st);
        *remaining = st.remaining;
    }
    return rc;
}
