/* db_file.c - a SQLite store's file and directory before the open
 * (db_file.h). */
#include "cmd/db_file.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"

/* path's directory into dir ("." for a bare name). */
static void dir_of(const char *path, char *dir, size_t cap)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        snprintf(dir, cap, ".");
    else if (slash == path)
        snprintf(dir, cap, "/");
    else
        snprintf(dir, cap, "%.*s", (int)(slash - path), path);
}

/* " (in /cwd)" for a relative path, so the message says where it looked. */
static void where(const char *path, char *out, size_t cap)
{
    char cwd[1024];
    out[0] = 0;
    if (path[0] != '/' && getcwd(cwd, sizeof cwd)) snprintf(out, cap, " (in %s)", cwd);
}

int sk_db_file_check(const char *spec, int may_create, char *err, size_t cap)
{
    if (err && cap) err[0] = 0;
    if (!spec || strncmp(spec, "sqlite:", 7) != 0) return 0;
    const char *path = spec + 7;
    if (!*path || !strcmp(path, ":memory:")) return 0;
    char dir[1024], in[1100];
    dir_of(path, dir, sizeof dir);
    where(path, in, sizeof in);
    struct stat st;
    int dir_ok = stat(dir, &st) == 0 && S_ISDIR(st.st_mode);
    if (may_create) {
        if (dir_ok) return 0;
        return sk_errf(err, cap, SK_ENOTFOUND,
                       "no such directory: %s%s, for the database %s (create it, owned by the "
                       "user seckill runs as; `make install` makes /var/lib/seckill)",
                       dir, in, path);
    }
    if (stat(path, &st) == 0 || errno != ENOENT) return 0; /* there: open says the rest */
    return sk_errf(err, cap, SK_ENOTFOUND,
                   "no such database file: %s%s%s%s; name the store with --db, SECKILL_DB or db "
                   "in the config file (only `seckill serve` and `seckill activity create` make "
                   "a new one)",
                   path, in, dir_ok ? "" : ", and no directory ", dir_ok ? "" : dir);
}
