/* chaos_buyers.c - seeded buyers that record every answer (chaos_buyers.h). */
#include "support/chaos_buyers.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"
#include "support/harness.h"
#include "support/http_load_env.h"

struct buyer_arg {
    struct chaos_buyers *b;
    int idx;
};

static void nap_us(long us)
{
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    nanosleep(&ts, NULL);
}

/* One attempt on serve s (connected on demand) into the ledger. */
static void attempt(struct chaos_buyers *b, struct hconn *c, int s, uint64_t aid, uint32_t user,
                    int qty, uint64_t key, int nth, struct chaos_answer *out)
{
    char kt[24];
    chaos_key_text(key, kt, sizeof kt);
    struct rec q = {.user = user, .qty = (int16_t)qty};
    *out = (struct chaos_answer){.aid = aid,
                                 .key = key,
                                 .user = user,
                                 .qty = (int16_t)qty,
                                 .serve = (uint8_t)s,
                                 .attempt = (uint8_t)nth,
                                 .t_send_ms = sk_wall_ms()};
    const int *ns = b->o.netns_fds;
    if (c->fd < 0 && ((ns && setns(ns[s], CLONE_NEWNET) < 0) || hc_open(c, b->o.ports[s]) < 0)) {
        out->t_done_ms = sk_wall_ms();
        return; /* nothing left: it cannot have run */
    }
    do_purchase_key(c, aid, kt, &q);
    out->t_done_ms = sk_wall_ms();
    out->sent = q.sent && q.outcome != OUT_SEND_FAILED;
    if (q.outcome == OUT_ANSWERED) {
        out->status = q.status;
        out->bad = q.bad_body;
        snprintf(out->err, sizeof out->err, "%.15s", q.err);
        snprintf(out->oid, sizeof out->oid, "%s", q.oid);
        if (q.status == 200 && q.got_qty != qty) out->bad = 1;
    }
    if (q.outcome != OUT_ANSWERED || q.close) hc_close(c);
}

static void *buyer(void *arg)
{
    struct buyer_arg *ba = arg;
    struct chaos_buyers *b = ba->b;
    const struct chaos_buyers_opts *o = &b->o;
    uint64_t rng = o->seed ^ (0x9e3779b97f4a7c15ULL * (uint64_t)(ba->idx + 1));
    struct hconn c[CHAOS_MAX_SERVES];
    for (int s = 0; s < o->nports; s++)
        c[s] = (struct hconn){-1, o->ports[s]};
    uint64_t seq = 0;
    while (!atomic_load(&b->stop)) {
        uint64_t aid = o->acts[sk_th_rng(&rng) % o->nacts].id;
        uint32_t user = 1 + (uint32_t)(sk_th_rng(&rng) % o->users);
        int qty = 1 + (int)(sk_th_rng(&rng) % (uint64_t)o->max_qty);
        uint64_t key = ((uint64_t)(ba->idx + 1) << 40) | seq++;
        for (int n = 1; n <= o->max_attempts && !atomic_load(&b->stop); n++) {
            int s = o->home && n == 1 ? ba->idx % o->nports
                                      : (int)(sk_th_rng(&rng) % (uint64_t)o->nports);
            struct chaos_answer *a = chaos_ledger_add(o->ledger);
            if (!a) {
                atomic_store(&b->stop, 1); /* full: the run cannot be judged (the check says so) */
                break;
            }
            attempt(b, &c[s], s, aid, user, qty, key, n, a);
            atomic_fetch_add(&b->answered, 1);
            if (a->status == 200) {
                atomic_fetch_add(&b->ok, 1);
                atomic_fetch_add(&b->ok_on[s], 1);
            }
            if (a->status != 0 && a->status < 500) break; /* definite */
            nap_us((long)o->backoff_ms * 1000 * n);
        }
        if (o->think_us) nap_us(o->think_us);
    }
    for (int s = 0; s < o->nports; s++)
        hc_close(&c[s]);
    free(ba);
    return NULL;
}

void chaos_buyers_start(struct chaos_buyers *b, const struct chaos_buyers_opts *o)
{
    memset(b, 0, sizeof *b);
    b->o = *o;
    CHECK(o->nports > 0 && o->nports <= CHAOS_MAX_SERVES && o->nacts > 0 && o->users > 0 &&
          o->max_qty > 0 && o->max_attempts > 0);
    b->nth = o->threads < CHAOS_MAX_BUYERS ? o->threads : CHAOS_MAX_BUYERS;
    for (int i = 0; i < b->nth; i++) {
        struct buyer_arg *ba = malloc(sizeof *ba);
        CHECK(ba);
        *ba = (struct buyer_arg){b, i};
        CHECK_EQ(pthread_create(&b->th[i], NULL, buyer, ba), 0);
    }
}

void chaos_buyers_stop(struct chaos_buyers *b)
{
    atomic_store(&b->stop, 1);
    for (int i = 0; i < b->nth; i++)
        pthread_join(b->th[i], NULL);
    b->nth = 0;
}
