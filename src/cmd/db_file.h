/* db_file.h - a SQLite store's file, looked at before it is opened: the
 * commands that only read a database never make one (a typo'd path would
 * become an empty database, and every check of it green), and a missing
 * directory is named rather than left to SQLite's "unable to open
 * database file". Only `seckill serve` and `seckill activity create` make
 * a new file. Server stores (PostgreSQL, MariaDB) are not looked at. */
#ifndef SK_DB_FILE_H
#define SK_DB_FILE_H
#include <stddef.h>

/* spec "sqlite:PATH": with may_create 0, PATH must exist ("no such
 * database file: PATH"); with 1, its directory must ("no such directory:
 * DIR"). Returns 0 (also for any other spec), or SK_ENOTFOUND with one
 * line in err (cap bytes) that names the path and what to do. */
int sk_db_file_check(const char *spec, int may_create, char *err, size_t cap);

#endif
