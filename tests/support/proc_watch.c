/* proc_watch.c - process state and socket queues from /proc (proc_watch.h). */
#include "support/proc_watch.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "support/harness.h"
#include "tests/support/spawn/proc_stat.h"

char sk_th_proc_state(pid_t pid)
{
    return sk_proc_state(pid);
}

int sk_th_proc_children(pid_t pid, const char *comm, pid_t *out, int cap)
{
    char path[64], buf[512] = "";
    snprintf(path, sizeof path, "/proc/%d/task/%d/children", (int)pid, (int)pid);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    fclose(f);
    int k = 0;
    char *save = NULL;
    for (char *p = strtok_r(buf, " \n", &save); p && k < cap; p = strtok_r(NULL, " \n", &save)) {
        if (comm) {
            char cp[64], name[32] = "";
            snprintf(cp, sizeof cp, "/proc/%s/comm", p);
            FILE *g = fopen(cp, "r");
            if (g && fgets(name, sizeof name, g)) name[strcspn(name, "\n")] = 0;
            if (g) fclose(g);
            if (strcmp(name, comm) != 0) continue;
        }
        out[k++] = atoi(p);
    }
    return k;
}

int sk_th_proc_wait_stopped(pid_t pid, int ms)
{
    int64_t by = sk_mono_ms() + ms;
    for (;;) {
        char s = sk_th_proc_state(pid);
        if (s == 'T' || s == 't') return 1;
        if (!s || sk_mono_ms() > by) return 0;
        struct timespec ts = {0, 2 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

/* The socket inodes of pid's descriptors into ino (at most cap). */
static size_t socket_inodes(pid_t pid, unsigned long *ino, size_t cap)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/fd", (int)pid);
    DIR *d = opendir(path);
    size_t n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)) && n < cap) {
        char fd[320], link[64];
        snprintf(fd, sizeof fd, "%s/%s", path, e->d_name);
        ssize_t l = readlink(fd, link, sizeof link - 1);
        if (l <= 0) continue;
        link[l] = 0;
        if (sscanf(link, "socket:[%lu]", &ino[n]) == 1) n++;
    }
    if (d) closedir(d);
    return n;
}

struct tcp_row {
    unsigned lport, rport;
    unsigned long rxq, inode;
};

/* The IPv4 TCP sockets of the host (/proc/net/tcp) into *rows (malloc'ed). */
static size_t tcp_rows(struct tcp_row **rows)
{
    FILE *f = fopen("/proc/net/tcp", "r");
    size_t n = 0, cap = 0;
    *rows = NULL;
    char line[512];
    if (f && !fgets(line, sizeof line, f)) {
        fclose(f);
        return 0;
    }
    while (f && fgets(line, sizeof line, f)) {
        unsigned la, lp, ra, rp, st;
        unsigned long tx, rx, ino;
        if (sscanf(line, " %*d: %x:%x %x:%x %x %lx:%lx %*s %*s %*s %*s %lu", &la, &lp, &ra, &rp,
                   &st, &tx, &rx, &ino) != 8)
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 256;
            struct tcp_row *g = realloc(*rows, cap * sizeof *g);
            if (!g) break;
            *rows = g;
        }
        (*rows)[n++] = (struct tcp_row){lp, rp, rx, ino};
    }
    if (f) fclose(f);
    return n;
}

long sk_th_proc_bytes_queued_at(pid_t pid, int port)
{
    unsigned long ino[256];
    size_t ni = socket_inodes(pid, ino, 256);
    struct tcp_row *rows;
    size_t nr = tcp_rows(&rows);
    long queued = 0;
    for (size_t i = 0; i < nr; i++) {
        /* pid's end of a connection to port: its local port is the remote
         * port of the server's end, whose rx queue holds what pid sent */
        if (rows[i].rport != (unsigned)port) continue;
        int mine = 0;
        for (size_t k = 0; k < ni && !mine; k++)
            mine = rows[i].inode == ino[k];
        if (!mine) continue;
        for (size_t j = 0; j < nr; j++)
            if (rows[j].lport == (unsigned)port && rows[j].rport == rows[i].lport)
                queued += (long)rows[j].rxq;
    }
    free(rows);
    return queued;
}

long sk_th_proc_rss_kib(pid_t pid)
{
    CHECK(sk_th_proc_state(pid) != 0);
    return sk_th_proc_rss_kib_or(pid);
}

long sk_th_proc_rss_kib_or(pid_t pid)
{
    return sk_th_proc_status_kib(pid, "VmRSS");
}

long sk_th_proc_status_kib(pid_t pid, const char *field)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    long kib = -1;
    size_t fl = strlen(field);
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, field, fl) && line[fl] == ':' && sscanf(line + fl + 1, "%ld", &kib) == 1)
            break;
    fclose(f);
    return kib;
}
