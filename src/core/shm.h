/* shm.h - memory shared by a process and the children it forks (the
 * node's HTTP processes and its worker): anonymous MAP_SHARED pages, and a
 * mutex that locks across those processes. */
#ifndef SK_SHM_H
#define SK_SHM_H
#include <pthread.h>
#include <stddef.h>

/* len zero-filled bytes shared with every child forked after the call, or
 * NULL. The caller owns them: sk_shm_free with the same len. */
void *sk_shm_alloc(size_t len);
void sk_shm_free(void *p, size_t len);

/* Initializes m (inside shared memory) as a process-shared mutex: 0, or
 * SK_EIO. */
int sk_shm_mutex_init(pthread_mutex_t *m);

#endif
