/* chaos_store.h - the database under a nemesis, as a parameter: a private
 * server the test can stop, restart and freeze (PostgreSQL: the suite's
 * private cluster harness, stopped by a fast shutdown; MariaDB: a private
 * mariadbd, stopped by SIGKILL, a crash its recovery must survive), or a
 * SQLite file (no server: "freezing" it holds its write lock, which the
 * worker waits on; it cannot be stopped). A new store is one more kind
 * here. */
#ifndef SK_TEST_CHAOS_STORE_H
#define SK_TEST_CHAOS_STORE_H
#include <sqlite3.h>

#include "support/mysql_harness.h"
#include "support/pg_harness.h"

enum chaos_store_kind {
    CHAOS_STORE_POSTGRES,
    CHAOS_STORE_SQLITE,
    CHAOS_STORE_MARIADB,
    CHAOS_STORE_KINDS
};

struct chaos_store {
    enum chaos_store_kind kind;
    char spec[420];     /* what --db takes */
    struct sk_th_pg pg; /* PostgreSQL */
    struct sk_th_my my; /* MariaDB */
    char path[400];     /* SQLite */
    sqlite3 *lock;      /* SQLite: the connection holding the write lock while frozen */
    int down, frozen;
};

/* "postgres" (also "pg"), "sqlite", "mariadb" (also "mysql"); -1 for
 * anything else (the message lists what there is). */
int chaos_store_kind_of(const char *name);
const char *chaos_store_name(enum chaos_store_kind k);

/* Starts a fresh one (fails the test when it cannot). */
void chaos_store_start(struct chaos_store *s, enum chaos_store_kind kind);
/* The same with its files under dir (a filesystem of the test's own, for
 * a full disk), NULL: the run's temporary directory. */
void chaos_store_start_in(struct chaos_store *s, enum chaos_store_kind kind, const char *dir);
/* Starts the server again when it died by itself (PostgreSQL exits when
 * its disk is full and its crash recovery cannot write); 1 when it had
 * to, 0 when it runs (or is SQLite). */
int chaos_store_revive(struct chaos_store *s);
/* 1 when the kind can be stopped and started again. */
int chaos_store_can_stop(const struct chaos_store *s);
/* Fast shutdown / start again on the same data (only when it can stop). */
void chaos_store_stop(struct chaos_store *s);
void chaos_store_restart(struct chaos_store *s);
/* Freezes (1) or thaws (0) it: every connection hangs, none fails. */
void chaos_store_freeze(struct chaos_store *s, int frozen);
/* Thaws and restarts whatever is stopped or frozen. */
void chaos_store_heal(struct chaos_store *s);
/* Stops it for good. */
void chaos_store_done(struct chaos_store *s);

#endif
