/* redis_cluster.h - the Redis Cluster pieces the client's Cluster front
 * (redis_async_cluster.c) drives: key
 * slots (CRC16 with hash tags), which argument of a command is its key,
 * MOVED/ASK parsing, and the slot map read from CLUSTER SLOTS. No I/O here, so all of it is
 * unit-tested by feeding bytes. See docs/cluster.md. */
#ifndef SK_REDIS_CLUSTER_H
#define SK_REDIS_CLUSTER_H
#include <stddef.h>
#include <stdint.h>

#include <hiredis.h>

#define SK_CLUSTER_SLOTS 16384
#define SK_CLUSTER_MAX_NODES 64
#define SK_CLUSTER_MAX_REDIRECTS 5 /* MOVED/ASK hops of one command */
#define SK_CLUSTER_MAX_RETRIES 20  /* TRYAGAIN/CLUSTERDOWN/ASK-in-MULTI waits of one command */
#define SK_CLUSTER_NO_NODE 0xffff

/* CRC16-CCITT (XMODEM), the one Redis Cluster uses. */
uint16_t sk_cluster_crc16(const char *buf, size_t len);
/* Slot of a key: CRC16 of the content of the first {...} when it is not
 * empty, else of the whole key, modulo 16384. */
int sk_cluster_key_slot(const char *key, size_t len);

/* Index in argv of the command's first key (EVAL/EVALSHA/FCALL: the first
 * after numkeys; XREAD/XREADGROUP: the first stream after STREAMS;
 * XGROUP/XINFO: the one after the subcommand), or -1
 * for a keyless command (PING, INFO, SCRIPT, CONFIG, MULTI, EXEC, ...). */
int sk_cluster_first_key(int argc, const char *const *argv, const size_t *lens);
/* Slot of the command (its first key), or -1 when keyless. */
int sk_cluster_command_slot(int argc, const char *const *argv, const size_t *lens);

/* XREAD/XREADGROUP: index of the first stream after STREAMS and the number
 * of streams (ids follow them); 0 when argv is not such a command. */
int sk_cluster_streams(int argc, const char *const *argv, const size_t *lens, int *first,
                       int *count);

/* A redirection error reply: 1 MOVED, 2 ASK, 0 none. Fills slot and the
 * target (host, cap bytes; port). */
enum { SK_CLUSTER_MOVED = 1, SK_CLUSTER_ASK = 2 };
int sk_cluster_parse_redirect(const char *err, int *slot, char *host, size_t cap, int *port);
/* TRYAGAIN (multi-key op during a migration) or CLUSTERDOWN: wait, retry. */
int sk_cluster_is_transient(const char *err);

struct sk_cluster_node {
    char host[64];
    int port;
};

/* Slot -> master node. Nodes are only ever appended, so a node index stays
 * valid for the life of the map (a node that lost its slots keeps its
 * index; its connection is simply no longer used). */
struct sk_cluster_map {
    uint16_t slot_node[SK_CLUSTER_SLOTS]; /* SK_CLUSTER_NO_NODE: not covered */
    struct sk_cluster_node nodes[SK_CLUSTER_MAX_NODES];
    int nnodes;
    unsigned char master[SK_CLUSTER_MAX_NODES]; /* owns a slot (recomputed on apply) */
    int uncovered;                              /* slots with no owner (recomputed on apply) */
    int loaded;                                 /* a CLUSTER SLOTS answer was applied */
    unsigned epoch;                             /* bumped on every change */
};

void sk_cluster_map_init(struct sk_cluster_map *m);
/* Index of host:port, added when new: >= 0, or SK_ENOMEM when full. */
int sk_cluster_map_node(struct sk_cluster_map *m, const char *host, int port);
/* Applies a CLUSTER SLOTS reply (replaces every slot's owner; a slot the
 * reply does not cover becomes SK_CLUSTER_NO_NODE). 0 or SK_EPROTO. An
 * empty host in the reply (a node that does not know its address) means
 * default_host. */
int sk_cluster_map_apply(struct sk_cluster_map *m, const redisReply *slots,
                         const char *default_host);
/* One slot moved (a MOVED answer): owner of slot becomes node. */
void sk_cluster_map_set(struct sk_cluster_map *m, int slot, int node);
/* Node index owning slot, or -1. */
int sk_cluster_map_owner(const struct sk_cluster_map *m, int slot);
/* Is node i the owner of at least one slot (a master in the map)? */
int sk_cluster_map_is_master(const struct sk_cluster_map *m, int i);

/* Redirections seen by a client (blocking or async), for tests and stats. */
struct sk_cluster_stats {
    uint64_t moved;       /* MOVED answers followed */
    uint64_t ask;         /* ASK answers followed */
    uint64_t retries;     /* TRYAGAIN/CLUSTERDOWN/unreachable-node waits */
    uint64_t refreshes;   /* CLUSTER SLOTS maps applied */
    uint64_t node_errors; /* node connections lost or refused */
};

#endif
