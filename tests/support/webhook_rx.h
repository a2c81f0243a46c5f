/* webhook_rx.h - a webhook receiver of the tests' own: a real HTTP/1.1
 * server on a loopback port (keep-alive, one thread per connection) that
 * records every request it read whole (its webhook-* headers, its body,
 * what it answered, the order of arrival) and checks each signature with
 * OpenSSL's HMAC directly (not the product's webhook_sign.c), under the
 * secrets it was given.
 *
 * It answers 200 at once, unless told otherwise: a share of the requests
 * (seeded) gets a fault instead: 500, 429 with Retry-After (r or r + 1 s),
 * no answer until the client gives up (a hang), a reset connection, or a
 * 200 after 50-300 ms. Held, every request read is recorded and left
 * unanswered until released (its client may die meanwhile: the worker
 * killed mid-delivery; never released: an endpoint that always hangs). */
#ifndef SK_TEST_WEBHOOK_RX_H
#define SK_TEST_WEBHOOK_RX_H
#include <stddef.h>
#include <stdint.h>

struct sk_th_rx_req {
    char id[96], ts[24];
    char *body;      /* NUL-terminated, NULL when bodies are not kept */
    char *sig;       /* the webhook-signature header, kept with the body */
    char type[32];   /* the body's "type" */
    int status;      /* what was answered: 200, 500, 429; 0 none (hang, reset, held) */
    int sig_ok;      /* a v1 signature of the header verified under one of the secrets */
    int id_ok;       /* the body's "id" is the webhook-id, "subject" and "seq" make it */
    int64_t at;      /* arrival order (0, 1, ...) */
    int64_t wall_ms; /* when it was read whole */
};

struct sk_th_rx;

/* Starts a receiver on a free loopback port. secrets: up to two
 * "whsec_..." (NULL-terminated list) a signature must verify under one
 * of; keep_bodies: keep each request's body. */
struct sk_th_rx *sk_th_rx_start(uint64_t seed, const char *const *secrets, int keep_bodies);
int sk_th_rx_port(const struct sk_th_rx *rx);
/* pct % of the requests from now on get a fault (0: none); r: see above. */
void sk_th_rx_faults(struct sk_th_rx *rx, int pct, int r);
/* Hold (1) or release (0) requests; sk_th_rx_held: how many wait now. */
void sk_th_rx_hold(struct sk_th_rx *rx, int on);
int sk_th_rx_held(struct sk_th_rx *rx);
/* Requests recorded so far, and a copy of the n-th (its body and
 * signature not copied: valid until sk_th_rx_stop). */
size_t sk_th_rx_count(struct sk_th_rx *rx);
void sk_th_rx_get(struct sk_th_rx *rx, size_t i, struct sk_th_rx_req *out);
/* How many requests got each answer: [0] 200, [1] 500, [2] 429, [3]
 * none (hang, reset, held), [4] slow 200 (also counted in [0]). */
void sk_th_rx_answers(struct sk_th_rx *rx, long out[5]);
/* Stops accepting, cuts every connection, frees everything. */
void sk_th_rx_stop(struct sk_th_rx *rx);

#endif
