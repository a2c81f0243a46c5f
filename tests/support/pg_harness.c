/* pg_harness.c - private PostgreSQL clusters for the tests (pg_harness.h):
 * the servers are pg_spawn.c's; here are the template, the shared cluster
 * the runner starts through its hooks, and the test-failing wrappers. */
#include "support/pg_harness.h"

#include <stdio.h>
#include <string.h>

#include <libpq-fe.h>

#include "core/clock.h"
#include "support/harness.h"

/* Speed for tests: test data need not survive a crash. */
static const char *const settings[] = {"fsync=off", "full_page_writes=off", "shared_buffers=32MB",
                                       NULL};

static struct sk_pg_spawn tmpl; /* initdb'd data/, never running */

static char used_files[32][200];
static int nused;

static struct sk_th_pg shared;
static int shared_state; /* 0 not started, 1 up, -1 failed (shared_err) */
static char shared_err[600];

void sk_th_pg_use_file(const char *file)
{
    if (nused < 32) snprintf(used_files[nused++], sizeof used_files[0], "%s", file);
}

/* initdb once per process tree: the template every cluster copies. */
static int make_template(char *err, size_t cap)
{
    if (tmpl.dir[0]) return 0;
    int64_t t0 = sk_mono_ms();
    if (sk_pg_spawn_init(&tmpl) < 0) {
        snprintf(err, cap, "%s", tmpl.errstr);
        return -1;
    }
    printf("# PostgreSQL: initdb of the template cluster took %lld ms\n",
           (long long)(sk_mono_ms() - t0));
    return 0;
}

/* A copy of the template, started; nothing left behind on failure. */
static int start(struct sk_th_pg *pg, char *err, size_t cap)
{
    memset(pg, 0, sizeof *pg);
    if (make_template(err, cap) < 0) return -1;
    if (sk_pg_spawn_clone(&pg->srv, &tmpl) < 0 || sk_pg_spawn_launch(&pg->srv, settings) < 0) {
        snprintf(err, cap, "%s", pg->srv.errstr);
        sk_pg_spawn_stop(&pg->srv);
        return -1;
    }
    return 0;
}

/* ---- the shared cluster ---- */

static int file_uses_pg(const char *file)
{
    for (int i = 0; i < nused; i++)
        if (!strcmp(used_files[i], file)) return 1;
    return 0;
}

/* Runner: before a test of a file that uses PostgreSQL, start the shared
 * cluster once. A failure is kept for the tests to report: the runner
 * itself must go on. */
static void before_test(const char *name, const char *file)
{
    (void)name;
    if (shared_state != 0 || !file_uses_pg(file)) return;
    int64_t t0 = sk_mono_ms();
    if (start(&shared, shared_err, sizeof shared_err) < 0) {
        shared_state = -1;
        printf("# PostgreSQL: shared cluster failed to start: %s\n", shared_err);
        return;
    }
    shared_state = 1;
    printf("# PostgreSQL: shared cluster on port %d ready %lld ms after the start request\n",
           shared.srv.port, (long long)(sk_mono_ms() - t0));
}

static void at_exit(void)
{
    if (shared_state == 1) sk_pg_spawn_stop(&shared.srv);
    sk_pg_spawn_stop(&tmpl);
}

__attribute__((constructor)) static void register_hooks(void)
{
    sk_th_add_hooks(before_test, at_exit);
}

const char *sk_th_pg_url(void)
{
    if (shared_state == 0) {
        /* A file without SK_TH_PG_USED: a cluster for this test alone. */
        fprintf(stderr, "    note: add SK_TH_PG_USED to this test file to share one cluster\n");
        shared_state = start(&shared, shared_err, sizeof shared_err) < 0 ? -1 : 1;
    }
    if (shared_state < 0) sk_th_fail(__FILE__, __LINE__, "PostgreSQL test cluster: %s", shared_err);
    return shared.srv.url;
}

void sk_th_pg_create_db(const struct sk_th_pg *pg, const char *name, char *url_out, size_t cap)
{
    PGconn *c = PQconnectdb(pg->srv.url);
    if (PQstatus(c) != CONNECTION_OK)
        sk_th_fail(__FILE__, __LINE__, "connect %s: %s", pg->srv.url, PQerrorMessage(c));
    char sql[160];
    snprintf(sql, sizeof sql, "CREATE DATABASE \"%s\"", name);
    PGresult *r = PQexec(c, sql);
    if (PQresultStatus(r) != PGRES_COMMAND_OK)
        sk_th_fail(__FILE__, __LINE__, "%s: %s", sql, PQresultErrorMessage(r));
    PQclear(r);
    PQfinish(c);
    snprintf(url_out, cap, "postgres://postgres@127.0.0.1:%d/%s", pg->srv.port, name);
}

void sk_th_pg_fresh_db(char *url_out, size_t cap)
{
    sk_th_pg_url();
    char name[40];
    snprintf(name, sizeof name, "t%llu", (unsigned long long)sk_th_unique_id());
    sk_th_pg_create_db(&shared, name, url_out, cap);
}

/* ---- private clusters ---- */

void sk_th_pg_start(struct sk_th_pg *pg)
{
    char err[600];
    if (start(pg, err, sizeof err) < 0)
        sk_th_fail(__FILE__, __LINE__, "PostgreSQL test cluster: %s", err);
}

void sk_th_pg_stop(struct sk_th_pg *pg)
{
    sk_pg_spawn_halt(&pg->srv);
}

void sk_th_pg_restart(struct sk_th_pg *pg)
{
    sk_pg_spawn_halt(&pg->srv);
    if (sk_pg_spawn_launch(&pg->srv, settings) < 0)
        sk_th_fail(__FILE__, __LINE__, "PostgreSQL restart: %s", pg->srv.errstr);
}

/* A failed test leaves its frozen cluster behind: the runner kills the
 * postmaster with the test's process group, but every backend called
 * setsid() and stays stopped, parentless, for good unless thawed first
 * (thawed, it sees its postmaster gone and exits). */
static void thaw(void *arg)
{
    sk_pg_spawn_freeze(&((struct sk_th_pg *)arg)->srv, 0);
}

void sk_th_pg_freeze(struct sk_th_pg *pg, int frozen)
{
    sk_pg_spawn_freeze(&pg->srv, frozen);
    sk_th_at_fail_cancel(thaw, pg);
    if (frozen) sk_th_at_fail(thaw, pg);
    if (frozen)
        CHECK_MSG(sk_pg_spawn_wait_frozen(&pg->srv, 5000), "PostgreSQL %d did not stop",
                  (int)pg->srv.pid);
}
