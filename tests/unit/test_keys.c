/* test_keys.c - the KEYS of an admission call (engine/keys.h,
 * sk_stock_batch_keys): every key the script touches, in the order the
 * script reads them, all in the key set's slot. */
#include <string.h>

#include "core/error.h"
#include "engine/keys.h"
#include "engine/stock.h"
#include "redis/redis_cluster.h"
#include "support/harness.h"

SK_TEST(keys_admission_call_names_every_key_in_the_key_sets_slot)
{
    struct sk_keys k;
    sk_keys_seg(&k, 1001, 3);
    struct sk_purchase p[] = {{.user_id = 7, .quantity = 1, .ip = "192.0.2.1"},
                              {.user_id = 18446744073709551615ULL, .quantity = 1},
                              {.user_id = 0, .quantity = 1, .ip = "2001:db8::"}};
    char buf[SK_BATCH_KEY_BYTES(3)];
    const char *keys[SK_BATCH_KEYC(3)];
    /* no per-IP limit: the key set's nine, then one limiter key per buyer */
    CHECK_EQ(sk_stock_batch_keys(&k, NULL, p, 3, buf, sizeof buf, keys), SK_PURCHASE_NKEYS + 3);
    const char *fixed[] = {k.meta,   k.stock, k.buyers,   k.orders, k.idem,
                           k.ledger, k.xin,   k.wr_spent, k.reg};
    for (int i = 0; i < SK_PURCHASE_NKEYS; i++)
        CHECK_STR(keys[i], fixed[i]);
    CHECK_STR(keys[9], "sk:{a1001.s3}:rl:u:7");
    CHECK_STR(keys[10], "sk:{a1001.s3}:rl:u:18446744073709551615");
    CHECK_STR(keys[11], "sk:{a1001.s3}:rl:u:0");
    /* with one: then one per client IP (none known: the bare prefix, which
     * the script never touches) */
    struct sk_rate_limits rl = {.ip_per_s = 5, .ip_burst = 5};
    CHECK_EQ(sk_stock_batch_keys(&k, &rl, p, 3, buf, sizeof buf, keys), SK_PURCHASE_NKEYS + 6);
    CHECK_STR(keys[12], "sk:{a1001.s3}:rl:ip:192.0.2.1");
    CHECK_STR(keys[13], "sk:{a1001.s3}:rl:ip:");
    CHECK_STR(keys[14], "sk:{a1001.s3}:rl:ip:2001:db8::");
    /* and a challenge ticket: then one spent key per purchase (docs/challenges.md) */
    p[1].ch = "20:0:1796000000000:1795999880000";
    p[1].ch_id = "00112233445566778899aabbccddeeff";
    CHECK_EQ(sk_stock_batch_keys(&k, &rl, p, 3, buf, sizeof buf, keys), SK_BATCH_KEYC(3));
    CHECK_STR(keys[15], "sk:{a1001.s3}:ch:");
    CHECK_STR(keys[16], "sk:{a1001.s3}:ch:00112233445566778899aabbccddeeff");
    int slot = sk_cluster_key_slot(k.meta, strlen(k.meta));
    for (int i = 0; i < SK_BATCH_KEYC(3); i++)
        CHECK_EQ(sk_cluster_key_slot(keys[i], strlen(keys[i])), slot);
    p[1].ch = p[1].ch_id = NULL;
    /* a per-user limit alone adds no IP keys */
    struct sk_rate_limits user_only = {.user_per_s = 5, .user_burst = 5};
    CHECK_EQ(sk_stock_batch_keys(&k, &user_only, p, 3, buf, sizeof buf, keys),
             SK_PURCHASE_NKEYS + 3);
}

SK_TEST(keys_limiter_keys_are_bounded_and_a_short_buffer_is_refused)
{
    struct sk_keys k;
    sk_keys_for(&k, 18446744073709551615ULL);
    char out[SK_RL_KEY_MAX];
    /* an IP longer than any address is never part of a key */
    char ip[100];
    memset(ip, '1', sizeof ip - 1);
    ip[sizeof ip - 1] = 0;
    CHECK_EQ(sk_keys_rl_ip(&k, ip, out, sizeof out), (int)strlen(k.rl_ip));
    CHECK_STR(out, k.rl_ip);
    /* the longest address fits */
    ip[SK_RL_IP_MAX] = 0;
    CHECK(sk_keys_rl_ip(&k, ip, out, sizeof out) > 0);
    CHECK_EQ(sk_keys_rl_user(&k, 5, out, 8), SK_ENOMEM);
    struct sk_purchase p = {.user_id = 1, .quantity = 1};
    char small[8];
    const char *keys[SK_BATCH_KEYC(1)];
    CHECK_EQ(sk_stock_batch_keys(&k, NULL, &p, 1, small, sizeof small, keys), SK_ENOMEM);
    CHECK_EQ(sk_stock_batch_keys(&k, NULL, &p, 0, small, sizeof small, keys), SK_EINVAL);
}
