/* serve_notify.h - what `seckill serve`'s supervisor tells systemd
 * (Type=notify, core/sd_notify.h): READY=1 once every process of the node
 * is ready (HTTP processes: listeners bound, Redis reached with the
 * scripts loaded, the database reached; the order worker: its first
 * sample reached Redis and the database), STATUS= lines while it waits
 * and whenever the node's state changes, RELOADING=1 / READY=1 around a
 * reload, STOPPING=1 when a drain starts, and WATCHDOG=1 every half
 * watchdog interval while every process shows a recent sign of life (a
 * hung event loop stops the pings, and systemd restarts the service).
 *
 * The processes say what they wait for in the node's shared segment
 * (struct sk_node_proc: waiting, beat_ms): no message between them. */
#ifndef SK_SERVE_NOTIFY_H
#define SK_SERVE_NOTIFY_H
#include <stdint.h>
#include <sys/types.h>

#include "core/node_stats.h"
#include "http/config.h"

struct sk_svc_notify {
    int enabled;      /* $NOTIFY_SOCKET set */
    int ready_sent;   /* READY=1 sent (again after a reload) */
    int hold;         /* a reload is being applied: no READY=1 yet */
    uint64_t wd_ms;   /* the watchdog interval, 0: none */
    int64_t next_wd;  /* when the next ping is due (sk_mono_ms) */
    int64_t stale_ms; /* a process whose last sign of life is older is hung */
    int wd_quiet;     /* pings withheld: the hung process was logged */
    char status[512]; /* the last STATUS= sent */
    char redis[512];  /* the URLs as logs show them (passwords redacted) */
    char db[512];
    char listen[256];
};

/* Reads the environment (NOTIFY_SOCKET, WATCHDOG_USEC/PID). */
void sk_svc_notify_init(struct sk_svc_notify *sn, const struct sk_config *cfg);

/* Once per supervisor pass: slot i of node runs pids[i] (0: none now),
 * HTTP slots first (n_api of them), then the worker. */
void sk_svc_notify_tick(struct sk_svc_notify *sn, sk_node *node, const pid_t *pids, int n_api,
                        int n);

/* A drain starts: STOPPING=1. */
void sk_svc_notify_stopping(struct sk_svc_notify *sn);
/* A reload starts (RELOADING=1); READY=1 follows with the next tick that
 * finds every process ready. */
void sk_svc_notify_reloading(struct sk_svc_notify *sn);

/* Every process applied the reload: READY=1 may follow. */
void sk_svc_notify_reloaded(struct sk_svc_notify *sn);

#endif
