/* exe_path.c - where a program to start is (exe_path.h). */
#include "spawn/exe_path.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/error.h"

int sk_exe_path(const char *name, char *out, size_t cap)
{
    const char *path = getenv("PATH");
    char buf[4096];
    snprintf(buf, sizeof buf, "%s:/usr/sbin:/usr/bin:/usr/local/sbin:/usr/local/bin",
             path ? path : "/usr/bin:/bin");
    for (char *save = NULL, *d = strtok_r(buf, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
        snprintf(out, cap, "%s/%s", d, name);
        if (access(out, X_OK) == 0) return 0;
    }
    return SK_ENOTFOUND;
}
