/* shm.c - shared pages and process-shared mutexes (shm.h). */
#include "core/shm.h"

#include <sys/mman.h>

#include "core/error.h"

void *sk_shm_alloc(size_t len)
{
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

void sk_shm_free(void *p, size_t len)
{
    if (p) munmap(p, len);
}

int sk_shm_mutex_init(pthread_mutex_t *m)
{
    pthread_mutexattr_t at;
    if (pthread_mutexattr_init(&at) != 0) return SK_EIO;
    pthread_mutexattr_setpshared(&at, PTHREAD_PROCESS_SHARED);
    int rc = pthread_mutex_init(m, &at);
    pthread_mutexattr_destroy(&at);
    return rc ? SK_EIO : 0;
}
