/* sig.h - the stop signals (SIGTERM, SIGINT) of the processes serve forks:
 * held from fork until the child has installed its own handler, so a stop
 * that arrives during start-up is graceful, not the default action. */
#ifndef SK_SIG_H
#define SK_SIG_H

/* Blocks SIGTERM and SIGINT in the calling thread (inherited by fork). */
void sk_sig_block_stop(void);
/* Unblocks them; a stop that arrived meanwhile is delivered now. */
void sk_sig_unblock_stop(void);

#endif
