/* db_spawn.h - what the two SQL server spawners (pg_spawn.c, mysql_spawn.c)
 * share on top of spawn.h: a setup tool (initdb, mariadb-install-db, cp)
 * run to its end, and a server launched on its port, or on a free one
 * picked again while the one picked turns out taken. */
#ifndef SK_DB_SPAWN_H
#define SK_DB_SPAWN_H
#include <stddef.h>

#include "spawn/spawn.h"

/* Runs cmd (a tool whose output goes to log) and waits at most ms for it
 * to exit 0; a tool still running then is killed. name is the tool in
 * messages. Returns 0, or SK_EIO (cannot run, failed, too slow: err says
 * which, with the end of log). Nothing of it runs after the call. */
int sk_db_spawn_tool(const struct sk_spawn_cmd *cmd, const char *name, const char *log, int ms,
                     char *err, size_t cap);

/* Starts a server through try_launch(arg), which launches on *port and
 * returns 0, SK_EEXIST when the port was taken, or another code. When
 * *port is set (a restart) that port or SK_EIO; else a free loopback port,
 * picked again at most tries times while taken, and 0 again after a
 * failure. Returns 0, SK_EIO (err, unless try_launch wrote it) or what
 * try_launch returned. */
int sk_db_spawn_on_port(int *port, int tries, int (*try_launch)(void *arg), void *arg, char *err,
                        size_t cap);

/* After a failed init or clone: stop(s), the spawner's own stop, undoes
 * what was made, and err (cap bytes), which it may overwrite, keeps the
 * reason of the failure. Returns rc. */
int sk_db_spawn_undo(int (*stop)(void *s), void *s, char *err, size_t cap, int rc);

/* Removes the directory of a halted server and forgets its names: dir,
 * url and other (its socket or its conninfo) become "", *port 0. The
 * strings stay the caller's. Returns 0, or SK_EIO when the directory
 * could not be removed (err). */
int sk_db_spawn_forget(char *dir, char *url, char *other, int *port, char *err, size_t cap);

#endif
