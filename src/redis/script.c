/* script.c - embedded Lua scripts: SHA1s, the argv of a call. Calling
 * and loading them is the transport's (redis_async.c: FCALL or EVALSHA,
 * EVAL when the server lacks one, FUNCTION LOAD at the handshake;
 * sk_script_eval and sk_script_append in redis_conn.c). */
#include "redis/script.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

static char shas[SK_SCRIPT_COUNT][41];
static pthread_once_t shas_once = PTHREAD_ONCE_INIT;

static void compute_shas(void)
{
    for (int i = 0; i < SK_SCRIPT_COUNT; i++) {
        unsigned char md[EVP_MAX_MD_SIZE];
        unsigned int n = 0;
        const char *t = sk_script_sources[i].text;
        if (!EVP_Digest(t, strlen(t), md, &n, EVP_sha1(), NULL)) abort();
        for (unsigned j = 0; j < n && j < 20; j++)
            sprintf(&shas[i][2 * j], "%02x", md[j]);
    }
}

const char *sk_script_sha(enum sk_script_id id)
{
    pthread_once(&shas_once, compute_shas);
    return shas[id];
}

const char *sk_script_name(enum sk_script_id id)
{
    return sk_script_sources[id].name;
}
const char *sk_script_text(enum sk_script_id id)
{
    return sk_script_sources[id].text;
}
const char *sk_script_fname(enum sk_script_id id)
{
    return sk_script_fnames[id];
}

/* "ERR unknown command 'FCALL'..." or "... 'FUNCTION'...": a server
 * without Functions (before 7.0). */
static int no_functions(const redisReply *rep)
{
    return rep->type == REDIS_REPLY_ERROR && strncmp(rep->str, "ERR unknown command", 19) == 0 &&
           (strstr(rep->str, "FCALL") || strstr(rep->str, "fcall") ||
            strstr(rep->str, "FUNCTION") || strstr(rep->str, "function"));
}

int sk_script_is_noscript(const redisReply *rep)
{
    return rep && rep->type == REDIS_REPLY_ERROR &&
           (strncmp(rep->str, "NOSCRIPT", 8) == 0 ||
            strncmp(rep->str, "ERR Function not found", 22) == 0 || no_functions(rep));
}

void sk_script_fill_argv(enum sk_script_id id, int nkeys, const char *const *keys, int nargs,
                         const char *const *args, const size_t *arglens, const char **argv,
                         size_t *lens, char numkeys[16])
{
    snprintf(numkeys, 16, "%d", nkeys);
    argv[0] = "EVALSHA";
    argv[1] = sk_script_sha(id);
    argv[2] = numkeys;
    for (int i = 0; i < 3; i++)
        lens[i] = strlen(argv[i]);
    for (int i = 0; i < nkeys; i++) {
        argv[3 + i] = keys[i];
        lens[3 + i] = strlen(keys[i]);
    }
    for (int i = 0; i < nargs; i++) {
        argv[3 + nkeys + i] = args[i];
        lens[3 + nkeys + i] = arglens ? arglens[i] : strlen(args[i]);
    }
}
