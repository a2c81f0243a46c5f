/* netlab.h - hosts in network namespaces of the test's own, for the
 * partition tests (test_partitions.c): each host is a network namespace
 * with one veth link (eth0, 10.77.0.<i+1>/24) into a bridge that lives in
 * a namespace of its own. Nothing is linked to the namespace the test
 * started in, and no host has a route out of 10.77.0.0/24: traffic never
 * leaves the lab.
 *
 * A namespace here is held by a small process (unshare(CLONE_NEWNET),
 * then it waits), not by a name under /run/netns: when the test process
 * ends - passing, failing, or killed by the runner - the holders die with
 * it (PR_SET_PDEATHSIG, and the runner kills the test's process group),
 * every server started in a namespace dies with its parent too, and the
 * kernel removes the namespaces with their links and nft rules. Nothing
 * outlives the test.
 *
 * Servers go into a host by running with the calling thread inside it
 * (sk_th_netlab_enter, then fork: a child starts in its parent thread's
 * namespace); a thread of the test enters one with setns on
 * sk_th_netlab_fd. Partitions are nft rules inside a host's namespace
 * that drop every packet to and from the peers named (both ways, so the
 * cut is symmetric); healing deletes them. Needs root (CAP_SYS_ADMIN and
 * CAP_NET_ADMIN), `ip` (iproute2) and `nft` (nftables): scripts/deps.sh. */
#ifndef SK_TEST_NETLAB_H
#define SK_TEST_NETLAB_H
#include <sys/types.h>

#define SK_TH_NETLAB_MAX 12

struct sk_th_netlab_host {
    char name[16];
    char addr[24]; /* 10.77.0.<i+1> */
    pid_t holder;  /* the process holding the namespace */
    int fd;        /* /proc/<holder>/ns/net */
};

struct sk_th_netlab {
    int n;
    struct sk_th_netlab_host host[SK_TH_NETLAB_MAX];
    pid_t bridge; /* the bridge's namespace */
    int bridge_fd;
    int home_fd; /* the namespace the test started in */
};

/* 1 when this process may build a lab (root, `ip` and `nft` on PATH, a
 * network namespace can be made); else 0 with why (cap bytes). */
int sk_th_netlab_possible(char *why, size_t cap);

/* Makes n hosts named names[i] (short words) linked into one bridge, each
 * with its address up, its loopback up; fails the test when it cannot. */
void sk_th_netlab_start(struct sk_th_netlab *l, const char *const *names, int n);

/* The calling thread into host i's namespace (-1: back where the test
 * started). Every socket it opens from then on is inside. */
void sk_th_netlab_enter(struct sk_th_netlab *l, int i);
/* The namespace of host i for a thread's own setns(fd, CLONE_NEWNET). */
int sk_th_netlab_fd(const struct sk_th_netlab *l, int i);

/* Host i drops every packet to and from the hosts peers[0..np) (nft rules
 * inside i, replacing any it had). */
void sk_th_netlab_cut(struct sk_th_netlab *l, int i, const int *peers, int np);
/* Host i's rules removed: its links carry everything again. */
void sk_th_netlab_heal(struct sk_th_netlab *l, int i);

/* Runs argv (a NULL-terminated command: ip, nft) inside host i (-2: the
 * bridge's namespace); its output into out (cap bytes, may be NULL).
 * Returns its exit status (-1: it could not be run). */
int sk_th_netlab_run(struct sk_th_netlab *l, int i, const char *const *argv, char *out, size_t cap);

/* Ends the holders (the namespaces go once nothing else is in them: stop
 * the servers first), closes the descriptors. Safe on a zeroed l. */
void sk_th_netlab_stop(struct sk_th_netlab *l);

#endif
