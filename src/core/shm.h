/* shm.h - memory shared by a process and the children it forks (the
 * node's HTTP processes and its worker): anonymous MAP_SHARED pages, and a
 * mutex that locks across those processes. */
#ifndef SK_SHM_H
#define SK_SHM_H
#include <pthread.h>
#include <stddef.h>

/* len zero-filled bytes shared with every child forked after the call, or
 * NULL. They live as long as the process. */
void *sk_shm_alloc(size_t len);

/* As sk_shm_alloc, with a process-shared mutex initialized lock_off bytes
 * into the area; NULL when either fails. */
void *sk_shm_alloc_locked(size_t len, size_t lock_off);

#endif
