/* serve_notify.c - the supervisor's readiness, status and watchdog
 * messages to systemd (serve_notify.h). */
#include "cmd/serve_notify.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "core/clock.h"
#include "core/log.h"
#include "core/redact.h"
#include "core/sd_notify.h"

void sk_svc_notify_init(struct sk_svc_notify *sn, const struct sk_config *cfg)
{
    memset(sn, 0, sizeof *sn);
    sn->enabled = sk_sd_notify_enabled();
    sn->wd_ms = sk_sd_watchdog_usec() / 1000;
    /* the worker shows a sign of life once a second: never call it hung
     * sooner than 3 s, whatever the interval */
    sn->stale_ms = sn->wd_ms / 2 > 3000 ? (int64_t)(sn->wd_ms / 2) : 3000;
    sn->next_wd = sk_mono_ms();
    sk_redact_url(cfg->redis, sn->redis, sizeof sn->redis);
    sk_redact_url(cfg->db, sn->db, sizeof sn->db);
    snprintf(sn->listen, sizeof sn->listen, "%s", cfg->listen);
    if (sn->wd_ms)
        sk_log(SK_LOG_INFO, "systemd watchdog: a ping every %llu ms while every process runs",
               (unsigned long long)(sn->wd_ms / 2));
}

/* The readiness of slot i as text for STATUS= ("" when ready). */
static const char *wait_text(int w)
{
    if (w & SK_NODE_WAIT_START) return "starting";
    switch (w & (SK_NODE_WAIT_REDIS | SK_NODE_WAIT_DB)) {
    case SK_NODE_WAIT_REDIS: return "waiting for Redis";
    case SK_NODE_WAIT_DB: return "waiting for the database";
    case SK_NODE_WAIT_REDIS | SK_NODE_WAIT_DB: return "waiting for Redis and the database";
    default: return "";
    }
}

/* What slot i waits for (SK_NODE_WAIT_* bits); the worker's from its last
 * sample, which reads both Redis and the database. */
static int slot_waiting(sk_node *node, int i, int n_api, pid_t pid)
{
    struct sk_node_proc *p = sk_node_proc_at(node, i);
    if (!p || pid <= 0 || atomic_load(&p->pid) != (int)pid) return SK_NODE_WAIT_START;
    if (i < n_api) return atomic_load(&p->waiting);
    static struct sk_node_sample buf; /* large: not on the stack (one supervisor thread) */
    struct sk_node_sample *smp = &buf;
    if (sk_node_sample_get(sk_node_worker(node), smp) < 0 ||
        smp->sampled_ms < atomic_load(&p->started_ms))
        return SK_NODE_WAIT_START;
    return (smp->redis_ok ? 0 : SK_NODE_WAIT_REDIS) | (smp->db_ok ? 0 : SK_NODE_WAIT_DB);
}

static void send_status(struct sk_svc_notify *sn, const char *text)
{
    if (!strcmp(sn->status, text)) return;
    snprintf(sn->status, sizeof sn->status, "%s", text);
    sk_sd_notifyf("STATUS=%s", text);
}

/* The watchdog: a ping when every running process showed a sign of life
 * within stale_ms. */
static void watchdog(struct sk_svc_notify *sn, sk_node *node, const pid_t *pids, int n)
{
    int64_t now = sk_mono_ms();
    if (!sn->wd_ms || now < sn->next_wd) return;
    sn->next_wd = now + (int64_t)(sn->wd_ms / 2);
    int64_t wall = sk_wall_ms();
    for (int i = 0; i < n; i++) {
        struct sk_node_proc *p = sk_node_proc_at(node, i);
        if (!p || pids[i] <= 0 || atomic_load(&p->pid) != (int)pids[i]) continue; /* restarting */
        int64_t age = wall - atomic_load(&p->beat_ms);
        if (age > sn->stale_ms) {
            if (!sn->wd_quiet)
                sk_log(SK_LOG_ERROR,
                       "watchdog: process %d has shown no sign of life for %lld ms; systemd is "
                       "not pinged",
                       (int)pids[i], (long long)age);
            sn->wd_quiet = 1;
            return;
        }
    }
    if (sn->wd_quiet) sk_log(SK_LOG_INFO, "watchdog: every process runs again; pinging systemd");
    sn->wd_quiet = 0;
    sk_sd_notify("WATCHDOG=1");
}

void sk_svc_notify_tick(struct sk_svc_notify *sn, sk_node *node, const pid_t *pids, int n_api,
                        int n)
{
    if (!sn->enabled) return;
    watchdog(sn, node, pids, n);
    int waiting_http = 0, bits = 0, worker_bits = 0;
    for (int i = 0; i < n; i++) {
        int w = slot_waiting(node, i, n_api, pids[i]);
        if (i < n_api) {
            waiting_http += w != 0;
            bits |= w;
        } else {
            worker_bits = w;
        }
    }
    char text[512];
    if (!waiting_http && !worker_bits && !sn->hold) {
        snprintf(text, sizeof text, "serving%s%s: %d HTTP process%s%s", n_api ? " on " : "",
                 n_api ? sn->listen : "", n_api, n_api == 1 ? "" : "es",
                 n > n_api ? ", order worker" : "");
        if (!sn->ready_sent) {
            /* STATUS first: a reader of READY=1 finds the state it says */
            send_status(sn, text);
            sk_sd_notify("READY=1");
            sn->ready_sent = 1;
            sk_log(SK_LOG_INFO, "ready: told systemd");
        }
        send_status(sn, text);
        return;
    }
    if (!waiting_http && !worker_bits) return; /* a reload not applied everywhere yet */
    int all = bits | worker_bits;
    int off = snprintf(text, sizeof text, "%s", sn->ready_sent ? "degraded: " : "");
    if (waiting_http)
        off += snprintf(text + off, sizeof text - (size_t)off, "%d of %d HTTP process%s %s",
                        waiting_http, n_api, n_api == 1 ? "" : "es", wait_text(bits));
    if (worker_bits && off < (int)sizeof text)
        off += snprintf(text + off, sizeof text - (size_t)off, "%sorder worker %s",
                        waiting_http ? "; " : "", wait_text(worker_bits));
    if ((all & SK_NODE_WAIT_REDIS) && off < (int)sizeof text)
        off += snprintf(text + off, sizeof text - (size_t)off, "; Redis %s", sn->redis);
    if ((all & SK_NODE_WAIT_DB) && off < (int)sizeof text)
        snprintf(text + off, sizeof text - (size_t)off, "; database %s", sn->db);
    send_status(sn, text);
}

void sk_svc_notify_stopping(struct sk_svc_notify *sn)
{
    if (!sn->enabled) return;
    sk_sd_notify("STOPPING=1");
    send_status(sn, "stopping: draining requests in flight");
}

void sk_svc_notify_reloading(struct sk_svc_notify *sn)
{
    if (!sn->enabled) return;
    sk_sd_notify("RELOADING=1");
    sn->ready_sent = 0;
    sn->hold = 1;
    sn->status[0] = 0;
}

void sk_svc_notify_reloaded(struct sk_svc_notify *sn)
{
    sn->hold = 0;
}
