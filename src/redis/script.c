/* script.c - embedded Lua scripts: SHA1s, SCRIPT LOAD, the Functions
 * library (FUNCTION LOAD), the argv of a call. Calling them is the
 * transport's (redis_async.c: FCALL or EVALSHA, EVAL when the server lacks
 * one; sk_script_eval and sk_script_append in redis_conn.c). */
#include "redis/script.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "core/error.h"

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

static int load_one(sk_redis *r, enum sk_script_id id)
{
    redisReply *rep;
    const char *argv[] = {"SCRIPT", "LOAD", sk_script_text(id)};
    int rc = sk_redis_command(r, &rep, 3, argv, NULL);
    if (rc < 0) return rc;
    if (rep->type != REDIS_REPLY_STRING || strcmp(rep->str, sk_script_sha(id)) != 0) {
        snprintf(r->errstr, sizeof r->errstr, "SCRIPT LOAD %s: %s", sk_script_name(id),
                 rep->type == REDIS_REPLY_ERROR ? rep->str : "unexpected reply");
        freeReplyObject(rep);
        return r->err = SK_ESCRIPT;
    }
    freeReplyObject(rep);
    return 0;
}

/* "ERR unknown command 'FCALL'..." or "... 'FUNCTION'...": a server
 * without Functions (before 7.0). */
static int no_functions(const redisReply *rep)
{
    return rep->type == REDIS_REPLY_ERROR && strncmp(rep->str, "ERR unknown command", 19) == 0 &&
           (strstr(rep->str, "FCALL") || strstr(rep->str, "fcall") ||
            strstr(rep->str, "FUNCTION") || strstr(rep->str, "function"));
}

/* FUNCTION LOAD of the library: 0 (loaded, or there already: the name
 * carries a hash of the text), SK_ENOTFOUND (no Functions on this server),
 * or an error (r->errstr). */
static int load_library(sk_redis *r)
{
    redisReply *rep;
    const char *argv[] = {"FUNCTION", "LOAD", sk_script_library};
    int rc = sk_redis_command(r, &rep, 3, argv, NULL);
    if (rc < 0) return rc;
    /* The name carries a hash of the text: "already exists" is our library
     * (and costs the server no compile, where REPLACE would). */
    if (rep->type == REDIS_REPLY_STRING ||
        (rep->type == REDIS_REPLY_ERROR && strstr(rep->str, "already exists"))) {
        rc = 0;
    } else if (no_functions(rep)) {
        rc = SK_ENOTFOUND;
    } else {
        snprintf(r->errstr, sizeof r->errstr, "FUNCTION LOAD: %.200s",
                 rep->type == REDIS_REPLY_ERROR ? rep->str : "unexpected reply");
        rc = r->err = SK_ESCRIPT;
    }
    freeReplyObject(rep);
    return rc;
}

int sk_script_load_all(sk_redis *r)
{
    for (int i = 0; i < SK_SCRIPT_COUNT; i++) {
        int rc = load_one(r, (enum sk_script_id)i);
        if (rc < 0) return rc;
    }
    if (r->fn == SK_FN_OFF) return 0;
    int rc = load_library(r);
    if (rc == SK_ENOTFOUND) {
        r->fn = SK_FN_OFF;
        return 0;
    }
    if (rc == 0) r->fn = SK_FN_ON;
    return rc;
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
