/* chaos_store.c - the nemesis's database, by kind (chaos_store.h). */
#include "support/chaos_store.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "support/harness.h"

static const char *const names[CHAOS_STORE_KINDS] = {"postgres", "sqlite", "mariadb"};

int chaos_store_kind_of(const char *name)
{
    if (!strcmp(name, "pg")) return CHAOS_STORE_POSTGRES;
    if (!strcmp(name, "mysql")) return CHAOS_STORE_MARIADB;
    for (int k = 0; k < CHAOS_STORE_KINDS; k++)
        if (!strcmp(name, names[k])) return k;
    return -1;
}

const char *chaos_store_name(enum chaos_store_kind k)
{
    return k < CHAOS_STORE_KINDS ? names[k] : "?";
}

void chaos_store_start(struct chaos_store *s, enum chaos_store_kind kind)
{
    chaos_store_start_in(s, kind, NULL);
}

void chaos_store_start_in(struct chaos_store *s, enum chaos_store_kind kind, const char *dir)
{
    memset(s, 0, sizeof *s);
    s->kind = kind;
    /* the servers' spawners make their directories under TMPDIR */
    char *tmp = getenv("TMPDIR") ? strdup(getenv("TMPDIR")) : NULL;
    if (dir) setenv("TMPDIR", dir, 1);
    if (kind == CHAOS_STORE_POSTGRES) {
        sk_th_pg_start(&s->pg);
        sk_th_pg_create_db(&s->pg, "chaos", s->spec, sizeof s->spec);
    } else if (kind == CHAOS_STORE_MARIADB) {
        sk_th_my_start(&s->my);
        sk_th_my_create_db(&s->my, "chaos", s->spec, sizeof s->spec);
    } else {
        snprintf(s->path, sizeof s->path, "%s/chaos.db", dir ? dir : sk_th_tmpdir());
        snprintf(s->spec, sizeof s->spec, "sqlite:%s", s->path);
    }
    if (dir && tmp)
        setenv("TMPDIR", tmp, 1);
    else if (dir)
        unsetenv("TMPDIR");
    free(tmp);
}

/* The server's process (0: none, or SQLite). */
static pid_t *server_pid(struct chaos_store *s)
{
    if (s->kind == CHAOS_STORE_POSTGRES) return &s->pg.srv.pid;
    if (s->kind == CHAOS_STORE_MARIADB) return &s->my.srv.pid;
    return NULL;
}

int chaos_store_revive(struct chaos_store *s)
{
    pid_t *pid = server_pid(s);
    if (!pid || s->down || s->frozen || *pid <= 0) return 0;
    /* gone: exited (a child of ours, reaped here) or no longer there */
    if (waitpid(*pid, NULL, WNOHANG) != *pid && kill(*pid, 0) == 0) return 0;
    *pid = 0;
    s->down = 1;
    chaos_store_restart(s);
    return 1;
}

int chaos_store_can_stop(const struct chaos_store *s)
{
    return s->kind == CHAOS_STORE_POSTGRES || s->kind == CHAOS_STORE_MARIADB;
}

void chaos_store_stop(struct chaos_store *s)
{
    if (!chaos_store_can_stop(s) || s->down) return;
    if (s->kind == CHAOS_STORE_MARIADB)
        sk_th_my_kill(&s->my); /* a crash: InnoDB's recovery on the restart */
    else
        sk_th_pg_stop(&s->pg);
    s->down = 1;
    s->frozen = 0;
}

void chaos_store_restart(struct chaos_store *s)
{
    if (!s->down) return;
    if (s->kind == CHAOS_STORE_MARIADB)
        sk_th_my_restart(&s->my);
    else
        sk_th_pg_restart(&s->pg);
    s->down = 0;
}

void chaos_store_freeze(struct chaos_store *s, int frozen)
{
    if (s->down || s->frozen == frozen) return;
    if (s->kind == CHAOS_STORE_POSTGRES) {
        sk_th_pg_freeze(&s->pg, frozen);
    } else if (s->kind == CHAOS_STORE_MARIADB) {
        sk_th_my_freeze(&s->my, frozen);
    } else if (frozen) {
        CHECK_EQ(sqlite3_open(s->path, &s->lock), SQLITE_OK);
        sqlite3_busy_timeout(s->lock, 10000);
        CHECK_EQ(sqlite3_exec(s->lock, "BEGIN IMMEDIATE", NULL, NULL, NULL), SQLITE_OK);
    } else {
        CHECK_EQ(sqlite3_exec(s->lock, "COMMIT", NULL, NULL, NULL), SQLITE_OK);
        sqlite3_close(s->lock);
        s->lock = NULL;
    }
    s->frozen = frozen;
}

void chaos_store_heal(struct chaos_store *s)
{
    chaos_store_freeze(s, 0);
    chaos_store_restart(s);
}

void chaos_store_done(struct chaos_store *s)
{
    chaos_store_heal(s);
    if (s->kind == CHAOS_STORE_POSTGRES) sk_th_pg_stop(&s->pg);
    if (s->kind == CHAOS_STORE_MARIADB) sk_th_my_stop(&s->my);
}
