/* proc_stat.c - /proc/<pid>/stat past the command name (proc_stat.h). */
#include "tests/support/spawn/proc_stat.h"

#include <stdio.h>
#include <string.h>

const char *sk_proc_stat_fields(pid_t pid, char *buf, size_t cap)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f) return NULL;
    size_t n = fread(buf, 1, cap - 1, f);
    fclose(f);
    buf[n] = 0;
    const char *p = strrchr(buf, ')');
    return p && p[1] == ' ' ? p + 2 : NULL;
}

char sk_proc_state(pid_t pid)
{
    char buf[512];
    const char *p = sk_proc_stat_fields(pid, buf, sizeof buf);
    return p ? p[0] : 0;
}
