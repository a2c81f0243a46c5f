/* test_label_mem.c - serve's memory of key sets for the rollback guard
 * (http/label_mem.h): the count only grows within an epoch, a new epoch
 * replaces it, a fenced key set is forgotten, and processes forked after
 * sk_labelmem_host_init share one table. */
#include <stdint.h>
#include <sys/wait.h>
#include <unistd.h>

#include "http/label_mem.h"
#include "support/harness.h"

static void expect(sk_labelmem *m, uint64_t aid, int seg, int64_t epoch, int64_t adm)
{
    int64_t e, a;
    sk_labelmem_get(m, aid, seg, &e, &a);
    CHECK_EQ(e, epoch);
    CHECK_EQ(a, adm);
}

SK_TEST(label_mem_keeps_the_highest_count_per_epoch_and_forgets_a_fenced_key_set)
{
    sk_labelmem *m = sk_labelmem_host();
    CHECK(m != NULL);
    expect(m, 7001, -1, 0, 0); /* nothing known */
    sk_labelmem_seen(m, 7001, -1, 1700000000000001, 10);
    expect(m, 7001, -1, 1700000000000001, 10);
    sk_labelmem_seen(m, 7001, -1, 1700000000000001, 5); /* an older reply */
    expect(m, 7001, -1, 1700000000000001, 10);
    sk_labelmem_seen(m, 7001, -1, 1700000000000001, 20);
    expect(m, 7001, -1, 1700000000000001, 20);
    /* the key set was rebuilt: a new epoch starts over */
    sk_labelmem_seen(m, 7001, -1, 1700000000000999, 3);
    expect(m, 7001, -1, 1700000000000999, 3);
    /* a reply that read nothing says nothing */
    sk_labelmem_seen(m, 7001, -1, 0, 0);
    expect(m, 7001, -1, 1700000000000999, 3);
    /* segments are key sets of their own */
    expect(m, 7001, 0, 0, 0);
    sk_labelmem_seen(m, 7001, 0, 1700000000000005, 8);
    expect(m, 7001, 0, 1700000000000005, 8);
    expect(m, 7001, -1, 1700000000000999, 3);
    /* fenced: forgotten, then learnt again from the next reply */
    sk_labelmem_forget(m, 7001, -1);
    expect(m, 7001, -1, 0, 0);
    sk_labelmem_seen(m, 7001, -1, 1700000000000999, 4);
    expect(m, 7001, -1, 1700000000000999, 4);
    sk_labelmem_forget(m, 7002, 3); /* unknown: nothing happens */
    /* many key sets at once */
    for (uint64_t a = 1; a <= 20000; a++)
        sk_labelmem_seen(m, 900000 + a, (int)(a % 5) - 1, 1700000000000000 + (int64_t)a,
                         (int64_t)a);
    for (uint64_t a = 1; a <= 20000; a++)
        expect(m, 900000 + a, (int)(a % 5) - 1, 1700000000000000 + (int64_t)a, (int64_t)a);
    sk_labelmem_get(NULL, 1, -1, &(int64_t){0}, &(int64_t){0});
}

SK_TEST(label_mem_made_before_fork_is_shared_by_the_processes)
{
    CHECK_EQ(sk_labelmem_host_init(), 0);
    sk_labelmem *m = sk_labelmem_host();
    pid_t pid[4];
    for (int i = 0; i < 4; i++) {
        pid[i] = fork();
        CHECK(pid[i] >= 0);
        if (pid[i] == 0) {
            /* each process raises the count of one shared key set */
            for (int64_t a = 1; a <= 1000; a++)
                sk_labelmem_seen(m, 4242, -1, 1700000000000042, a * 4 + i);
            _exit(0);
        }
    }
    for (int i = 0; i < 4; i++) {
        int st;
        CHECK_EQ(waitpid(pid[i], &st, 0), pid[i]);
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    /* the host's highest: what process 3 saw last */
    expect(m, 4242, -1, 1700000000000042, 4003);
}
