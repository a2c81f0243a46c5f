/* crash.c - a stack on standard error before a fault kills the process
 * (crash.h). */
#include "core/crash.h"

#include <execinfo.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

/* gcc names the sanitizers with macros, clang with __has_feature */
#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define SK_CRASH_SANITIZED 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SK_CRASH_SANITIZED 1
#endif

#ifndef SK_CRASH_SANITIZED
static const int fault_signals[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};

/* Only async-signal-safe calls: write, backtrace (its library is loaded
 * at install), backtrace_symbols_fd (no malloc), then the same signal
 * again, which SA_RESETHAND has given its default action. */
static void on_fault(int sig)
{
    static const char head[] =
        "seckill: fatal signal; the stack (addr2line -e <binary> <+offset>):\n";
    (void)!write(STDERR_FILENO, head, sizeof head - 1);
    void *frames[64];
    int n = backtrace(frames, 64);
    backtrace_symbols_fd(frames, n, STDERR_FILENO);
    raise(sig);
}
#endif

void sk_crash_trace_install(void)
{
#ifdef SK_CRASH_SANITIZED
    /* the sanitizers' own fault reports are better than this one */
#else
    void *one[1];
    backtrace(one, 1); /* loads libgcc's unwinder now, not inside a fault */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_fault;
    sa.sa_flags = SA_RESETHAND | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < sizeof fault_signals / sizeof fault_signals[0]; i++)
        sigaction(fault_signals[i], &sa, NULL);
#endif
}
