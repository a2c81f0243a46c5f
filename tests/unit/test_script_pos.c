/* test_script_pos.c - the positions C and the scripts share come from one
 * definition (src/engine/script_pos.def, tools/gen_scripts.c): the text
 * embedded for Redis says, in numbers and field names, what C's generated
 * names say. Each check reads a script as it ships (sk_script_text). */
#include <stdio.h>
#include <string.h>

#include "engine/keys.h"
#include "orders/order_worker.h"
#include "redis/script.h"
#include "support/harness.h"

/* 1 when the embedded text of script id holds s. */
static int says(enum sk_script_id id, const char *s)
{
    return strstr(sk_script_text(id), s) != NULL;
}

/* "'a', 'b', ..." of n field names: a script's HMGET field list. */
static void quoted(const char *const *f, int n, char *out, size_t cap)
{
    size_t o = 0;
    out[0] = 0;
    for (int i = 0; i < n && o < cap; i++)
        o += (size_t)snprintf(out + o, cap - o, "%s'%s'", i ? ", " : "", f[i]);
}

SK_TEST(script_pos_lua_and_c_read_one_definition)
{
    char want[512], fields[400];
    /* a script's ARGV (Lua counts from 1, C from 0) */
    snprintf(want, sizeof want, "local why, text = ARGV[%d] or '', ARGV[%d] or ''",
             SK_A_FENCE_WHY + 1, SK_A_FENCE_TEXT + 1);
    CHECK(says(SK_SCRIPT_FENCE, want));
    snprintf(want, sizeof want, "or ARGV[%d + 1] then", SK_A_FENCE_N);
    CHECK(says(SK_SCRIPT_FENCE, want));
    /* its KEYS */
    snprintf(want, sizeof want, "redis.call('HGET', KEYS[%d], 'fence')", SK_K_FENCE_META + 1);
    CHECK(says(SK_SCRIPT_FENCE, want));
    /* a repeated group: the queue's buyers */
    snprintf(want, sizeof want, "local B0 = %d + 1 - %d", SK_A_QUEUE_N, SK_A_JOIN_N);
    CHECK(says(SK_SCRIPT_QUEUE, want));
    snprintf(want, sizeof want, "ARGV[%d * i + (B0 + %d)]", SK_A_JOIN_N, SK_A_JOIN_TICKET);
    CHECK(says(SK_SCRIPT_QUEUE, want));
    /* a meta read: the script's HMGET names C's fields, in C's order */
    const char *const st[] = {SK_M_STATE_FIELDS};
    quoted(st, SK_M_STATE_N, fields, sizeof fields);
    snprintf(want, sizeof want, "redis.call('HMGET', KEYS[%d], %s)", SK_K_STATE_META + 1, fields);
    CHECK(says(SK_SCRIPT_STATE, want));
    snprintf(want, sizeof want, "m[%d] == '1'", SK_M_STATE_OPEN + 1);
    CHECK(says(SK_SCRIPT_STATE, want));
    /* a name in Redis: the worker's group, as preheat makes it and state
     * counts its backlog */
    snprintf(want, sizeof want, "KEYS[%d], '%s', '0', 'MKSTREAM')", SK_K_PREHEAT_ORDERS + 1,
             SK_WORKER_GROUP);
    CHECK(says(SK_SCRIPT_PREHEAT, want));
    snprintf(want, sizeof want, "backlog_of(KEYS[%d], '%s')", SK_K_STATE_ORDERS + 1,
             SK_WORKER_GROUP);
    CHECK(says(SK_SCRIPT_STATE, want));
    CHECK(strstr(sk_script_text(SK_SCRIPT_RESUME), "NAME.") == NULL);
    /* no name of a list is left for Redis to find as a nil global */
    for (int i = 0; i < SK_SCRIPT_COUNT; i++) {
        const char *t = sk_script_text((enum sk_script_id)i);
        for (const char *p = t; (p = strpbrk(p, "AKM")) != NULL; p++)
            if (p[1] == '_' && (p == t || !(p[-1] == '_' || (p[-1] >= 'A' && p[-1] <= 'Z') ||
                                            (p[-1] >= 'a' && p[-1] <= 'z')))) {
                const char *q = p + 2;
                while ((*q >= 'A' && *q <= 'Z') || *q == '_' || (*q >= '0' && *q <= '9'))
                    q++;
                if (*q == '.') {
                    fprintf(stderr, "%s: %.*s\n", sk_script_name((enum sk_script_id)i),
                            (int)(q - p + 8), p);
                    CHECK(0);
                }
            }
    }
}

SK_TEST(script_pos_keys_of_a_key_set_follow_the_script)
{
    struct sk_keys k;
    sk_keys_seg(&k, 1001, 2);
    /* queue.lua's KEYS from the key set, as the script names them */
    const char *q[SK_QUEUE_NKEYS];
    sk_keys_queue(&k, q);
    CHECK_EQ(SK_QUEUE_NKEYS, 6);
    CHECK_STR(q[SK_K_QUEUE_META], k.meta);
    CHECK_STR(q[SK_K_QUEUE_WR_Q], k.wr_q);
    CHECK_STR(q[SK_K_QUEUE_WR_PASS], k.wr_pass);
    CHECK_STR(q[SK_K_QUEUE_STOCK], k.stock);
    CHECK_STR(q[SK_K_QUEUE_REG], k.reg);
    CHECK_STR(q[SK_K_QUEUE_WR_HELD], k.wr_held);
    char want[128];
    snprintf(want, sizeof want, "redis.call('ZCARD', KEYS[%d])", SK_K_QUEUE_WR_Q + 1);
    CHECK(says(SK_SCRIPT_QUEUE, want));
    /* reset.lua's, through the generated initializer */
    const char *r[] = {SK_K_RESET_EACH(SK_KEY_OF, &k)};
    CHECK_EQ((int)(sizeof r / sizeof *r), SK_K_RESET_N);
    CHECK_STR(r[SK_K_RESET_LEDGER], k.ledger);
    CHECK_STR(r[SK_K_RESET_IDEM], k.idem);
    snprintf(want, sizeof want, "if #KEYS ~= %d or #ARGV > 0 then", SK_K_RESET_N);
    CHECK(says(SK_SCRIPT_RESET, want));
}
