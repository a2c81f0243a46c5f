/* redis_cluster.c - key slots, key positions, redirections, slot map. */
#include "redis/redis_cluster.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/error.h"
#include "core/num.h"

/* Table-driven CRC16-CCITT, polynomial 0x1021, init 0 (the Redis spec's). */
static uint16_t crc_table[256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void crc_init(void)
{
    for (int i = 0; i < 256; i++) {
        uint16_t c = (uint16_t)(i << 8);
        for (int b = 0; b < 8; b++)
            c = (uint16_t)(c & 0x8000 ? (c << 1) ^ 0x1021 : c << 1);
        crc_table[i] = c;
    }
}

uint16_t sk_cluster_crc16(const char *buf, size_t len)
{
    pthread_once(&crc_once, crc_init); /* threads route at once (the worker's) */
    uint16_t crc = 0;
    for (size_t i = 0; i < len; i++)
        crc = (uint16_t)((crc << 8) ^ crc_table[((crc >> 8) ^ (unsigned char)buf[i]) & 0xff]);
    return crc;
}

int sk_cluster_key_slot(const char *key, size_t len)
{
    const char *open = memchr(key, '{', len);
    if (open) {
        size_t rest = len - (size_t)(open + 1 - key);
        const char *close = memchr(open + 1, '}', rest);
        if (close && close > open + 1) /* non-empty tag */
            return sk_cluster_crc16(open + 1, (size_t)(close - open - 1)) & (SK_CLUSTER_SLOTS - 1);
    }
    return sk_cluster_crc16(key, len) & (SK_CLUSTER_SLOTS - 1);
}

static size_t alen(const char *const *argv, const size_t *lens, int i)
{
    return lens ? lens[i] : strlen(argv[i]);
}

static int is(const char *const *argv, const size_t *lens, int i, const char *word)
{
    size_t n = strlen(word);
    return alen(argv, lens, i) == n && strncasecmp(argv[i], word, n) == 0;
}

/* Commands without a key: they go to a chosen master (or every one, for
 * SCRIPT and FLUSH*; see redis_async_cluster.c). */
static const char *const keyless[] = {
    "PING",      "INFO",    "CONFIG",   "SCRIPT",   "TIME",      "MULTI",    "EXEC",    "DISCARD",
    "UNWATCH",   "CLUSTER", "CLIENT",   "DBSIZE",   "FLUSHALL",  "FLUSHDB",  "AUTH",    "SELECT",
    "ECHO",      "ROLE",    "WAIT",     "READONLY", "READWRITE", "ASKING",   "COMMAND", "DEBUG",
    "SAVE",      "BGSAVE",  "LASTSAVE", "SLOWLOG",  "LATENCY",   "FUNCTION", "MEMORY",  "HELLO",
    "RANDOMKEY", "SCAN",    "KEYS",     "PUBLISH",  "SHUTDOWN",  "QUIT",     "RESET",   "MONITOR"};

int sk_cluster_streams(int argc, const char *const *argv, const size_t *lens, int *first,
                       int *count)
{
    if (argc < 1 || !(is(argv, lens, 0, "XREAD") || is(argv, lens, 0, "XREADGROUP"))) return 0;
    for (int i = 1; i < argc; i++)
        if (is(argv, lens, i, "STREAMS")) {
            int n = (argc - i - 1) / 2;
            if (n < 1 || (argc - i - 1) % 2) return 0;
            *first = i + 1;
            *count = n;
            return 1;
        }
    return 0;
}

/* -1 is a value here: the command names no key */
int sk_cluster_first_key(int argc, const char *const *argv, const size_t *lens)
{
    if (argc < 1) return -1; /* value: no key */
    if (is(argv, lens, 0, "EVALSHA") || is(argv, lens, 0, "EVAL") || is(argv, lens, 0, "FCALL") ||
        is(argv, lens, 0, "EVALSHA_RO") || is(argv, lens, 0, "EVAL_RO")) {
        uint64_t n;
        if (argc < 4 || sk_num_u64(argv[2], alen(argv, lens, 2), &n)) return -1; /* value: none */
        return n > 0 ? 3 : -1;
    }
    int first, count;
    if (sk_cluster_streams(argc, argv, lens, &first, &count)) return first;
    if (is(argv, lens, 0, "XREAD") || is(argv, lens, 0, "XREADGROUP")) return -1; /* value: none */
    /* a subcommand first: XGROUP CREATE key ..., XINFO GROUPS key */
    if (is(argv, lens, 0, "XGROUP") || is(argv, lens, 0, "XINFO")) return argc >= 3 ? 2 : -1;
    for (size_t i = 0; i < sizeof keyless / sizeof keyless[0]; i++)
        if (is(argv, lens, 0, keyless[i])) return -1; /* value: keyless */
    return argc >= 2 ? 1 : -1;
}

int sk_cluster_command_slot(int argc, const char *const *argv, const size_t *lens)
{
    int k = sk_cluster_first_key(argc, argv, lens);
    return k < 0 ? -1 : sk_cluster_key_slot(argv[k], alen(argv, lens, k));
}

int sk_cluster_parse_redirect(const char *err, int *slot, char *host, size_t cap, int *port)
{
    int kind;
    if (strncmp(err, "MOVED ", 6) == 0)
        kind = SK_CLUSTER_MOVED;
    else if (strncmp(err, "ASK ", 4) == 0)
        kind = SK_CLUSTER_ASK;
    else
        return 0;
    const char *p = strchr(err, ' ') + 1, *sp = strchr(p, ' ');
    uint64_t s, pt;
    if (!sp || sk_num_u64_range(p, (size_t)(sp - p), 0, SK_CLUSTER_SLOTS - 1, &s)) return 0;
    p = sp + 1;
    const char *colon = strrchr(p, ':'); /* last ':' (IPv6 hosts have more) */
    if (!colon || colon == p || (size_t)(colon - p) >= cap) return 0;
    if (sk_num_u64_range(colon + 1, strlen(colon + 1), 1, 65535, &pt)) return 0;
    memcpy(host, p, (size_t)(colon - p));
    host[colon - p] = 0;
    *slot = (int)s;
    *port = (int)pt;
    return kind;
}

int sk_cluster_is_transient(const char *err)
{
    return strncmp(err, "TRYAGAIN", 8) == 0 || strncmp(err, "CLUSTERDOWN", 11) == 0;
}

void sk_cluster_map_init(struct sk_cluster_map *m)
{
    memset(m, 0, sizeof *m);
    for (int i = 0; i < SK_CLUSTER_SLOTS; i++)
        m->slot_node[i] = SK_CLUSTER_NO_NODE;
    m->uncovered = SK_CLUSTER_SLOTS;
}

int sk_cluster_map_node(struct sk_cluster_map *m, const char *host, int port)
{
    for (int i = 0; i < m->nnodes; i++)
        if (m->nodes[i].port == port && strcmp(m->nodes[i].host, host) == 0) return i;
    if (m->nnodes == SK_CLUSTER_MAX_NODES || strlen(host) >= sizeof m->nodes[0].host)
        return SK_ENOMEM;
    struct sk_cluster_node *n = &m->nodes[m->nnodes];
    snprintf(n->host, sizeof n->host, "%s", host);
    n->port = port;
    return m->nnodes++;
}

static void recount(struct sk_cluster_map *m)
{
    memset(m->master, 0, sizeof m->master);
    m->uncovered = 0;
    for (int s = 0; s < SK_CLUSTER_SLOTS; s++) {
        if (m->slot_node[s] != SK_CLUSTER_NO_NODE)
            m->master[m->slot_node[s]] = 1;
        else
            m->uncovered++;
    }
}

int sk_cluster_map_apply(struct sk_cluster_map *m, const redisReply *r, const char *default_host)
{
    if (!r || r->type != REDIS_REPLY_ARRAY) return SK_EPROTO;
    /* validate everything before touching the map */
    for (size_t i = 0; i < r->elements; i++) {
        const redisReply *e = r->element[i];
        if (e->type != REDIS_REPLY_ARRAY || e->elements < 3 ||
            e->element[0]->type != REDIS_REPLY_INTEGER ||
            e->element[1]->type != REDIS_REPLY_INTEGER ||
            e->element[2]->type != REDIS_REPLY_ARRAY || e->element[2]->elements < 2 ||
            e->element[2]->element[0]->type != REDIS_REPLY_STRING ||
            e->element[2]->element[1]->type != REDIS_REPLY_INTEGER || e->element[0]->integer < 0 ||
            e->element[1]->integer >= SK_CLUSTER_SLOTS ||
            e->element[0]->integer > e->element[1]->integer)
            return SK_EPROTO;
    }
    uint16_t owner[SK_CLUSTER_SLOTS];
    for (int s = 0; s < SK_CLUSTER_SLOTS; s++)
        owner[s] = SK_CLUSTER_NO_NODE;
    for (size_t i = 0; i < r->elements; i++) {
        const redisReply *e = r->element[i], *mst = e->element[2];
        const char *host = mst->element[0]->len ? mst->element[0]->str : default_host;
        int node = sk_cluster_map_node(m, host, (int)mst->element[1]->integer);
        if (node < 0) return node;
        for (long long s = e->element[0]->integer; s <= e->element[1]->integer; s++)
            owner[s] = (uint16_t)node;
    }
    memcpy(m->slot_node, owner, sizeof owner);
    recount(m);
    m->loaded = 1;
    m->epoch++;
    return 0;
}

void sk_cluster_map_set(struct sk_cluster_map *m, int slot, int node)
{
    if (slot < 0 || slot >= SK_CLUSTER_SLOTS || node < 0 || node >= m->nnodes) return;
    if (m->slot_node[slot] == SK_CLUSTER_NO_NODE) m->uncovered--;
    m->slot_node[slot] = (uint16_t)node;
    m->master[node] = 1;
    m->epoch++;
}

int sk_cluster_map_owner(const struct sk_cluster_map *m, int slot)
{
    if (slot < 0 || slot >= SK_CLUSTER_SLOTS) return -1; /* value: nobody owns it */
    return m->slot_node[slot] == SK_CLUSTER_NO_NODE ? -1 : m->slot_node[slot];
}

int sk_cluster_map_is_master(const struct sk_cluster_map *m, int i)
{
    return i >= 0 && i < m->nnodes && m->master[i];
}
