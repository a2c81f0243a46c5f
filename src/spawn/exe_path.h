/* exe_path.h - where a program to start is: on PATH, else in the
 * directories Debian installs servers and tools in (root's PATH has
 * /usr/sbin, another user's may not). Shared by the spawners and the
 * benchmarks that start nginx or wrk. */
#ifndef SK_EXE_PATH_H
#define SK_EXE_PATH_H
#include <stddef.h>

/* Writes the path of the executable name into out (cap bytes): the first
 * directory of $PATH (or /usr/bin:/bin when unset) that has it, else
 * /usr/sbin, /usr/bin, /usr/local/sbin or /usr/local/bin. name stays the
 * caller's. Returns 0, or SK_ENOTFOUND (out then holds the last path
 * tried). */
int sk_exe_path(const char *name, char *out, size_t cap);

#endif
