/* buyer_http.c - the buyer's calls of buyer_http.h. */
#include "support/buyer_http.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "core/clock.h"
#include "support/fixtures.h"
#include "support/harness.h"

int sk_th_as_user(struct sk_th_http *c, const char *method, const char *path, uint64_t uid,
                  const char *body, struct sk_th_resp *r)
{
    char hdr[64] = "";
    if (uid) snprintf(hdr, sizeof hdr, "X-User-Id: %" PRIu64 "\r\n", uid);
    return sk_th_http_req(c, method, path, hdr, body, r);
}

int sk_th_buy_one(struct sk_th_http *c, uint64_t aid, uint64_t uid, char *oid, size_t cap)
{
    char path[96];
    struct sk_th_resp r;
    snprintf(path, sizeof path, "/api/v1/activities/%" PRIu64 "/purchase", aid);
    int st = sk_th_as_user(c, "POST", path, uid, NULL, &r);
    if (st == 200 && oid) sk_th_resp_field(&r, "order_id", oid, cap);
    return st;
}

int sk_th_order_op(struct sk_th_http *c, const char *oid, const char *op, uint64_t uid,
                   struct sk_th_resp *r)
{
    char path[128];
    snprintf(path, sizeof path, "/api/v1/orders/%s/%s", oid, op);
    return sk_th_as_user(c, "POST", path, uid, NULL, r);
}

void sk_th_order_wait(struct sk_th_http *c, const char *oid, uint64_t uid, const char *want,
                      int timeout_ms, struct sk_th_resp *r)
{
    char path[128], status[32] = "";
    snprintf(path, sizeof path, "/api/v1/orders/%s", oid);
    int64_t deadline = sk_mono_ms() + timeout_ms;
    for (;;) {
        int st = sk_th_as_user(c, "GET", path, uid, NULL, r);
        /* a poll beyond the process's poll budget, or one the database
         * would not answer within --db-poll-wait-ms, is refused 503 (busy,
         * or unavailable once it waited its bound): a buyer polls again */
        if (st == 503) {
            char err[32] = "";
            sk_th_resp_field(r, "error", err, sizeof err);
            CHECK_MSG(!strcmp(err, "busy") || !strcmp(err, "unavailable"), "order %s: 503 %s", oid,
                      err);
        } else {
            CHECK_EQ(st, 200);
            sk_th_resp_field(r, "status", status, sizeof status);
            if (!strcmp(status, want)) return;
        }
        CHECK_MSG(sk_mono_ms() < deadline, "order %s still %s (last answer %d), want %s", oid,
                  status, st, want);
        sk_th_nap_ms(20);
    }
}

int sk_th_buy_send(int port, uint64_t aid, uint64_t uid)
{
    char req[512];
    int n = snprintf(req, sizeof req,
                     "POST /api/v1/activities/%" PRIu64 "/purchase HTTP/1.1\r\nHost: x\r\n"
                     "X-User-Id: %" PRIu64 "\r\nContent-Type: application/json\r\n"
                     "Content-Length: 14\r\n\r\n{\"quantity\":1}",
                     aid, uid);
    return sk_th_http_send(port, req, (size_t)n);
}

int sk_th_poll_send(int port, const char *oid, uint64_t uid)
{
    char req[512];
    int n = snprintf(req, sizeof req,
                     "GET /api/v1/orders/%s HTTP/1.1\r\nHost: x\r\nX-User-Id: %" PRIu64 "\r\n\r\n",
                     oid, uid);
    return sk_th_http_send(port, req, (size_t)n);
}
