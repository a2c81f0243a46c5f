/* sig.c - stop signals held during start-up (sig.h). */
#include "core/sig.h"

#include <signal.h>

static void stop_mask(int how)
{
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGTERM);
    sigaddset(&s, SIGINT);
    pthread_sigmask(how, &s, NULL);
}

void sk_sig_block_stop(void)
{
    stop_mask(SIG_BLOCK);
}

void sk_sig_unblock_stop(void)
{
    stop_mask(SIG_UNBLOCK);
}
