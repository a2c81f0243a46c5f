/* label_mem.c - the shared table of key set epochs and admission counts
 * (label_mem.h).
 *
 * Open addressing over SLOTS entries of three 64-bit atomics: the key
 * (activity id and segment, claimed once with a compare-and-swap, never
 * released), the epoch, and a word packing the low TAG_BITS of the epoch
 * with the count. The epoch and the word cannot change together; the tag
 * tells a reader whether the count it read belongs to the epoch it read. */
#include "http/label_mem.h"

#include <stdatomic.h>
#include <stddef.h>

#include "core/error.h"
#include "core/shm.h"

#define SLOT_BITS 16
#define SLOTS (1u << SLOT_BITS) /* key sets per host: 1.5 MiB */
#define PROBES 64
#define TAG_BITS 20
#define ADM_BITS (64 - TAG_BITS)
#define ADM_MAX ((1ULL << ADM_BITS) - 1)

struct slot {
    _Atomic uint64_t key;
    _Atomic int64_t epoch;
    _Atomic uint64_t word; /* tag << ADM_BITS | adm */
};

struct sk_labelmem {
    struct slot s[SLOTS];
};

static sk_labelmem *host;

static sk_labelmem *make(void)
{
    return sk_shm_alloc(sizeof(sk_labelmem)); /* zero-filled: every slot free */
}

int sk_labelmem_host_init(void)
{
    if (!host) host = make();
    return host ? 0 : SK_ENOMEM;
}

sk_labelmem *sk_labelmem_host(void)
{
    if (!host) host = make();
    return host;
}

static uint64_t key_of(uint64_t aid, int seg)
{
    return aid * 512 + (uint64_t)(seg + 2); /* seg -1..255 -> 1..257: never 0 */
}

static uint64_t tag_of(int64_t epoch)
{
    return (uint64_t)epoch & ((1ULL << TAG_BITS) - 1);
}

static uint64_t pack(int64_t epoch, int64_t adm)
{
    uint64_t a = adm < 0 ? 0 : (uint64_t)adm > ADM_MAX ? ADM_MAX : (uint64_t)adm;
    return tag_of(epoch) << ADM_BITS | a;
}

/* The slot of key (claimed when create), or NULL. */
static struct slot *find(sk_labelmem *m, uint64_t key, int create)
{
    /* Fibonacci hashing: the high bits of the product are the well-mixed ones */
    uint64_t h = (key * 0x9e3779b97f4a7c15ULL) >> (64 - SLOT_BITS);
    for (int i = 0; i < PROBES; i++) {
        struct slot *s = &m->s[(h + (uint64_t)i) % SLOTS];
        uint64_t k = atomic_load(&s->key);
        if (k == key) return s;
        if (k == 0) {
            if (!create) return NULL;
            uint64_t zero = 0;
            if (atomic_compare_exchange_strong(&s->key, &zero, key) || zero == key) return s;
        }
    }
    return NULL;
}

void sk_labelmem_get(sk_labelmem *m, uint64_t aid, int seg, int64_t *epoch, int64_t *adm)
{
    *epoch = *adm = 0;
    struct slot *s = m ? find(m, key_of(aid, seg), 0) : NULL;
    if (!s) return;
    int64_t e = atomic_load(&s->epoch);
    uint64_t w = atomic_load(&s->word);
    if (e <= 0 || w >> ADM_BITS != tag_of(e)) return; /* half-updated: nothing known */
    *epoch = e;
    *adm = (int64_t)(w & ADM_MAX);
}

void sk_labelmem_seen(sk_labelmem *m, uint64_t aid, int seg, int64_t epoch, int64_t adm)
{
    struct slot *s = m && epoch > 0 ? find(m, key_of(aid, seg), 1) : NULL;
    if (!s) return;
    int64_t e = atomic_load(&s->epoch);
    if (e != epoch) atomic_store(&s->epoch, epoch); /* a new incarnation replaces the old */
    uint64_t w = atomic_load(&s->word);
    for (;;) {
        uint64_t want = pack(epoch, adm);
        /* same epoch: the count only grows */
        if (w >> ADM_BITS == tag_of(epoch) && (w & ADM_MAX) >= (want & ADM_MAX)) return;
        if (atomic_compare_exchange_weak(&s->word, &w, want)) return;
    }
}

void sk_labelmem_forget(sk_labelmem *m, uint64_t aid, int seg)
{
    struct slot *s = m ? find(m, key_of(aid, seg), 0) : NULL;
    if (!s) return;
    atomic_store(&s->epoch, 0);
    atomic_store(&s->word, 0);
}
