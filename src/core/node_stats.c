/* node_stats.c - the node's shared segment: layout, process headers, the
 * worker's counters and its sample under a sequence lock. */
#include "core/node_stats.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/error.h"

#define ALIGN 64 /* a cache line: slots of different writers never share one */

struct api_slot_hdr {
    struct sk_node_proc proc;
};

struct sk_node {
    unsigned char *base;
    size_t len;
    int n_api;
    size_t api_stride; /* header + api_bytes, aligned */
    size_t api_off;    /* the payload's offset in an HTTP slot */
    struct sk_node_worker *worker;
};

static size_t align_up(size_t n)
{
    return (n + ALIGN - 1) & ~(size_t)(ALIGN - 1);
}

int sk_node_new(sk_node **out, int n_api, size_t api_bytes, int with_worker)
{
    *out = NULL;
    if (n_api < 0 || n_api > 256 || api_bytes > ((size_t)1 << 24)) return SK_EINVAL;
    sk_node *n = calloc(1, sizeof *n);
    if (!n) return SK_ENOMEM;
    n->n_api = n_api;
    n->api_off = align_up(sizeof(struct api_slot_hdr));
    n->api_stride = align_up(n->api_off + api_bytes);
    size_t worker_off = (size_t)n_api * n->api_stride;
    n->len = worker_off + (with_worker ? align_up(sizeof(struct sk_node_worker)) : 0);
    if (n->len == 0) n->len = ALIGN;
    void *p = mmap(NULL, n->len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        free(n);
        return SK_EIO;
    }
    n->base = p; /* anonymous pages are zero */
    n->worker = with_worker ? (struct sk_node_worker *)(n->base + worker_off) : NULL;
    *out = n;
    return 0;
}

void sk_node_free(sk_node *n)
{
    if (!n) return;
    munmap(n->base, n->len);
    free(n);
}

int sk_node_api_slots(const sk_node *n)
{
    return n ? n->n_api : 0;
}

void *sk_node_api_mem(sk_node *n, int i)
{
    if (!n || i < 0 || i >= n->n_api) return NULL;
    return n->base + (size_t)i * n->api_stride + n->api_off;
}

struct sk_node_proc *sk_node_proc_at(sk_node *n, int i)
{
    if (!n || i < 0) return NULL;
    if (i < n->n_api) return &((struct api_slot_hdr *)(n->base + (size_t)i * n->api_stride))->proc;
    if (i == n->n_api && n->worker) return &n->worker->proc;
    return NULL;
}

int sk_node_procs(const sk_node *n)
{
    return n ? n->n_api + (n->worker ? 1 : 0) : 0;
}

struct sk_node_worker *sk_node_worker(sk_node *n)
{
    return n ? n->worker : NULL;
}

void sk_node_proc_start(struct sk_node_proc *p, enum sk_node_kind kind)
{
    if (!p) return;
    int64_t now = sk_wall_ms();
    atomic_store(&p->kind, (int)kind);
    atomic_store(&p->pid, (int)getpid());
    atomic_fetch_add(&p->starts, 1);
    atomic_store(&p->started_ms, now);
    atomic_store(&p->beat_ms, now);
    atomic_store(&p->waiting, SK_NODE_WAIT_START);
}

void sk_node_proc_waiting(struct sk_node_proc *p, int bits)
{
    if (p) atomic_store_explicit(&p->waiting, bits, memory_order_relaxed);
}

void sk_node_proc_beat(struct sk_node_proc *p, int64_t now_ms)
{
    if (p) atomic_store_explicit(&p->beat_ms, now_ms, memory_order_relaxed);
}

uint64_t sk_node_wc_get(const struct sk_node_worker *w, enum sk_node_wc c)
{
    if (!w || (unsigned)c >= SK_WC_COUNT_) return 0;
    return atomic_load_explicit(&((struct sk_node_worker *)w)->wc[c], memory_order_relaxed);
}

static const struct {
    const char *field, *name, *help;
    enum sk_node_wc_kind kind;
} wc_table[SK_WC_COUNT_] = {
#define SK_WC(f, k, n, h) [SK_WC_##f] = {#f, n, h, k},
#include "core/worker_counters.def"
#undef SK_WC
};

const char *sk_node_wc_name(enum sk_node_wc c)
{
    return (unsigned)c < SK_WC_COUNT_ ? wc_table[c].name : "";
}

const char *sk_node_wc_help(enum sk_node_wc c)
{
    return (unsigned)c < SK_WC_COUNT_ ? wc_table[c].help : "";
}

enum sk_node_wc_kind sk_node_wc_kind_of(enum sk_node_wc c)
{
    return (unsigned)c < SK_WC_COUNT_ ? wc_table[c].kind : SK_WC_COUNTER;
}

const char *sk_node_wc_field(enum sk_node_wc c)
{
    return (unsigned)c < SK_WC_COUNT_ ? wc_table[c].field : "";
}

/* The sample is plain memory under the sequence number: the writer makes
 * it odd, writes, makes it even; a reader that saw the same even number
 * before and after its copy has a consistent copy. The fences order the
 * plain copy against the sequence number (the copy itself is a data race
 * by design, resolved by the re-check). */
void sk_node_sample_put(struct sk_node_worker *w, const struct sk_node_sample *s)
{
    if (!w) return;
    uint32_t q = atomic_load_explicit(&w->seq, memory_order_relaxed);
    atomic_store_explicit(&w->seq, q + 1, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
    memcpy(&w->sample, s, sizeof *s);
    atomic_thread_fence(memory_order_release);
    atomic_store_explicit(&w->seq, q + 2, memory_order_relaxed);
}

int sk_node_sample_get(const struct sk_node_worker *w, struct sk_node_sample *out)
{
    struct sk_node_worker *mw = (struct sk_node_worker *)w;
    for (int attempt = 0; w && attempt < 1000; attempt++) {
        uint32_t a = atomic_load_explicit(&mw->seq, memory_order_acquire);
        if (a & 1) continue;
        memcpy(out, &mw->sample, sizeof *out);
        atomic_thread_fence(memory_order_acquire);
        if (atomic_load_explicit(&mw->seq, memory_order_relaxed) == a) return 0;
    }
    memset(out, 0, sizeof *out);
    return w ? SK_ESTATE : 0;
}
