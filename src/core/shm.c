/* shm.c - shared pages and process-shared mutexes (shm.h). */
#include "core/shm.h"

#include <sys/mman.h>

void *sk_shm_alloc(size_t len)
{
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

void *sk_shm_alloc_locked(size_t len, size_t lock_off)
{
    char *p = sk_shm_alloc(len);
    pthread_mutexattr_t at;
    if (!p) return NULL;
    int rc = pthread_mutexattr_init(&at);
    if (rc == 0) {
        pthread_mutexattr_setpshared(&at, PTHREAD_PROCESS_SHARED);
        rc = pthread_mutex_init((pthread_mutex_t *)(p + lock_off), &at);
        pthread_mutexattr_destroy(&at);
    }
    if (rc == 0) return p;
    munmap(p, len); /* nothing else holds it yet */
    return NULL;
}
