/* label_mem.h - what `seckill serve` remembers of each key set it admitted
 * into (docs/recovery.md): the key set's epoch and the highest admission
 * count a purchase_batch reply showed. The next call passes them, and the
 * script fences the key set when Redis is behind them: Redis went back in
 * time, and nothing more is sold until the order worker has rebuilt it.
 *
 * The table lives in shared memory: made before `serve --processes N`
 * forks (sk_labelmem_host_init), every process of the host reads and
 * raises the same entries, so each checks against the host's highest
 * count, not only what its own replies showed. Lock-free (atomics in the
 * shared mapping); a reader that meets an entry half-updated by another
 * process sees "nothing known" for that call, which only skips one check.
 * Fixed size: a key set that finds no room is simply not remembered. */
#ifndef SK_LABEL_MEM_H
#define SK_LABEL_MEM_H
#include <stdint.h>

typedef struct sk_labelmem sk_labelmem;

/* Makes the host's table now, in a shared anonymous mapping, so processes
 * forked afterwards share it. 0, or SK_ENOMEM (each process then makes a
 * private one on first use). Idempotent. */
int sk_labelmem_host_init(void);

/* The host's table (made on first use when sk_labelmem_host_init was not
 * called: private to this process then); NULL when out of memory. Lives
 * until the process exits. */
sk_labelmem *sk_labelmem_host(void);

/* What is known of key set (activity, seg; seg -1 = unsegmented): *epoch 0
 * and *adm 0 when nothing. m may be NULL. */
void sk_labelmem_get(sk_labelmem *m, uint64_t activity_id, int seg, int64_t *epoch, int64_t *adm);

/* A reply showed (epoch, adm): the count only grows within one epoch; a
 * new epoch (the key set was rebuilt) replaces it. epoch <= 0: ignored. */
void sk_labelmem_seen(sk_labelmem *m, uint64_t activity_id, int seg, int64_t epoch, int64_t adm);

/* The key set was found fenced: forget it (the next reply says again). */
void sk_labelmem_forget(sk_labelmem *m, uint64_t activity_id, int seg);

#endif
