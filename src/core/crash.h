/* crash.h - a process that dies of a fault (SIGSEGV, SIGBUS, SIGILL,
 * SIGFPE, SIGABRT) first writes its stack to standard error (the log),
 * then dies of the same signal, so the supervisor and a core dump see what
 * they saw before. A fault seen once under the nemesis is then a stack to
 * read, not a guess (docs/notes/open-questions.md). */
#ifndef SK_CRASH_H
#define SK_CRASH_H

/* Installs the handlers for the calling process (and the threads it
 * starts); call once, early. Nothing is allocated when a fault comes: the
 * unwinder is loaded here. */
void sk_crash_trace_install(void);

#endif
