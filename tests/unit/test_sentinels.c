/* test_sentinels.c - the Sentinel decision (redis/sentinels.h), fed the
 * replies a transport would hand it, parsed from RESP bytes (no server). */
#include <stdio.h>
#include <string.h>

#include <hiredis.h>

#include "redis/redis_url.h"
#include "redis/sentinels.h"
#include "support/harness.h"
#include "support/resp_bytes.h"

/* What SENTINEL MASTER answers (the fields the decision reads, among others). */
static redisReply *master_is(const char *ip, int port, int epoch)
{
    char b[512], p[16], e[16];
    snprintf(p, sizeof p, "%d", port);
    snprintf(e, sizeof e, "%d", epoch);
    snprintf(
        b, sizeof b,
        "*10\r\n$4\r\nname\r\n$7\r\nseckill\r\n$2\r\nip\r\n$%zu\r\n%s\r\n$4\r\nport\r\n$%zu\r\n%"
        "s\r\n$5\r\nflags\r\n$6\r\nmaster\r\n$12\r\nconfig-epoch\r\n$%zu\r\n%s\r\n",
        strlen(ip), ip, strlen(p), p, strlen(e), e);
    return sk_th_resp(b);
}

/* A message of the +switch-master subscription carrying payload. */
static redisReply *switch_msg(const char *payload)
{
    char b[512];
    snprintf(b, sizeof b, "*3\r\n$7\r\nmessage\r\n$14\r\n+switch-master\r\n$%zu\r\n%s\r\n",
             strlen(payload), payload);
    return sk_th_resp(b);
}

static void answer(struct sk_sentinels *s, int i, const char *ip, int port, int epoch, int64_t t)
{
    redisReply *r = master_is(ip, port, epoch);
    sk_sentinels_answer(s, i, r, t);
    freeReplyObject(r);
}

static struct sk_sentinels three(void)
{
    struct sk_redis_url u;
    const char *url = "redis+sentinel://10.0.0.1:26379,10.0.0.2:26379,10.0.0.3:26379/seckill";
    char err[128];
    CHECK_EQ(sk_redis_url_parse(&u, url, strlen(url), err, sizeof err), 0);
    struct sk_sentinels s;
    sk_sentinels_init(&s, &u, 1000);
    return s;
}

static enum sk_sentinels_verdict decide(struct sk_sentinels *s, int64_t t, char *host, int *port)
{
    return sk_sentinels_decide(s, t, host, 256, port);
}

/* Three Sentinels that all name 10.0.1.1:6379 at epoch at 1000 ms: the
 * client uses it (into host and *port). */
static struct sk_sentinels all_name_one(int epoch, char *host, int *port)
{
    struct sk_sentinels s = three();
    for (int i = 0; i < 3; i++)
        answer(&s, i, "10.0.1.1", 6379, epoch, 1000);
    CHECK_EQ(decide(&s, 1000, host, port), SK_SN_USE);
    sk_sentinels_using(&s, host, *port, 1000);
    return s;
}

/* What sk_sentinels_role makes of the reply resp. */
static int role_of(struct sk_sentinels *s, const char *resp)
{
    redisReply *r = sk_th_resp(resp);
    int v = sk_sentinels_role(s, r);
    freeReplyObject(r);
    return v;
}

SK_TEST(sentinels_use_a_master_only_once_a_majority_answered)
{
    struct sk_sentinels s = three();
    char host[256];
    int port = 0;
    const char *q[3];
    sk_sentinels_query(&s, q);
    CHECK_STR(q[0], "SENTINEL");
    CHECK_STR(q[1], "MASTER");
    CHECK_STR(q[2], "seckill");
    CHECK(sk_sentinels_due(&s, 1000));
    CHECK_EQ(decide(&s, 1000, host, &port), SK_SN_WAIT);
    /* one Sentinel of three: not yet, whatever it says */
    answer(&s, 0, "10.0.1.1", 6379, 1, 1000);
    CHECK_EQ(decide(&s, 1001, host, &port), SK_SN_WAIT);
    CHECK_MSG(strstr(s.why, "1 answered"), "%s", s.why);
    /* two: the master they name */
    answer(&s, 2, "10.0.1.1", 6379, 1, 1002);
    CHECK_EQ(decide(&s, 1003, host, &port), SK_SN_USE);
    CHECK_STR(host, "10.0.1.1");
    CHECK_EQ(port, 6379);
    sk_sentinels_using(&s, host, port, 1003);
    CHECK_EQ(decide(&s, 1004, host, &port), SK_SN_KEEP);
    CHECK(sk_sentinels_is_current(&s, "10.0.1.1", 6379));
    /* a round: slow while a master is in use, fast when asked so */
    sk_sentinels_round(&s, 1004, 0);
    CHECK(!sk_sentinels_due(&s, 1004 + SK_SENTINELS_POLL_MS - 1));
    CHECK(sk_sentinels_due(&s, 1004 + SK_SENTINELS_POLL_MS));
    sk_sentinels_round(&s, 1004, 1);
    CHECK(sk_sentinels_due(&s, 1004 + SK_SENTINELS_FAST_MS));
    /* an error that is not "no such master" is no answer */
    redisReply *e = sk_th_resp("-ERR unknown subcommand\r\n");
    sk_sentinels_answer(&s, 1, e, 1005);
    freeReplyObject(e);
    CHECK_EQ(s.peer[1].answered, 0);
}

SK_TEST(sentinels_move_to_the_newest_epoch_even_against_a_stale_minority)
{
    struct sk_sentinels s = three();
    char host[256];
    int port = 0;
    answer(&s, 0, "10.0.1.1", 6379, 1, 1000);
    answer(&s, 1, "10.0.1.1", 6379, 1, 1000);
    answer(&s, 2, "10.0.1.1", 6379, 1, 1000);
    CHECK_EQ(decide(&s, 1000, host, &port), SK_SN_USE);
    sk_sentinels_using(&s, host, port, 1000);
    /* a failover: two name the promoted replica in epoch 2; the first
     * (cut off with the old master) still names the old one */
    answer(&s, 1, "10.0.1.2", 6379, 2, 1500);
    CHECK_EQ(decide(&s, 1500, host, &port), SK_SN_USE);
    CHECK_STR(host, "10.0.1.2");
    answer(&s, 2, "10.0.1.2", 6379, 2, 1500);
    answer(&s, 0, "10.0.1.1", 6379, 1, 1600);
    CHECK_EQ(decide(&s, 1600, host, &port), SK_SN_USE);
    CHECK_STR(host, "10.0.1.2");
    sk_sentinels_using(&s, host, port, 1600);
    /* the stale one's later answers never move it back */
    answer(&s, 0, "10.0.1.1", 6379, 1, 2000);
    CHECK_EQ(decide(&s, 2000, host, &port), SK_SN_KEEP);
    /* within one epoch, the most named */
    struct sk_sentinels t = three();
    answer(&t, 0, "10.0.2.1", 1, 5, 100);
    answer(&t, 1, "10.0.2.2", 2, 5, 100);
    answer(&t, 2, "10.0.2.2", 2, 5, 100);
    CHECK_EQ(decide(&t, 100, host, &port), SK_SN_USE);
    CHECK_EQ(port, 2);
}

SK_TEST(sentinels_leave_a_master_no_majority_named_for_the_lease)
{
    char host[256];
    int port = 0;
    struct sk_sentinels s = all_name_one(1, host, &port);
    /* cut off with its clients: only the first Sentinel answers (it names
     * it), the others do not */
    int64_t t = 1000;
    for (; t <= 1000 + SK_SENTINELS_LEASE_MS; t += 500) {
        answer(&s, 0, "10.0.1.1", 6379, 1, t);
        sk_sentinels_answer(&s, 1, NULL, t);
        sk_sentinels_answer(&s, 2, NULL, t);
        CHECK_EQ(decide(&s, t, host, &port), SK_SN_KEEP);
    }
    answer(&s, 0, "10.0.1.1", 6379, 1, t);
    CHECK_EQ(decide(&s, t, host, &port), SK_SN_LEAVE);
    CHECK_MSG(strstr(s.why, "no majority"), "%s", s.why);
    sk_sentinels_dropped(&s);
    CHECK_EQ(decide(&s, t + 1, host, &port), SK_SN_WAIT);
    /* a majority that does not know the name is no master either */
    struct sk_sentinels u = three();
    redisReply *nm = sk_th_resp("-ERR No such master with that name\r\n");
    for (int i = 0; i < 3; i++)
        sk_sentinels_answer(&u, i, nm, 10);
    freeReplyObject(nm);
    CHECK_EQ(u.peer[0].answered, 1);
    CHECK_EQ(decide(&u, 10, host, &port), SK_SN_WAIT);
    /* answers older than the lease count for nothing */
    struct sk_sentinels v = three();
    answer(&v, 0, "10.0.1.1", 6379, 1, 0);
    answer(&v, 1, "10.0.1.1", 6379, 1, 0);
    CHECK_EQ(decide(&v, SK_SENTINELS_LEASE_MS + 1, host, &port), SK_SN_WAIT);
}

SK_TEST(sentinels_move_at_once_on_switch_master_and_leave_a_demoted_master)
{
    char host[256];
    int port = 0;
    struct sk_sentinels s = all_name_one(7, host, &port);
    const char *sub[2];
    sk_sentinels_subscribe(sub);
    CHECK_STR(sub[1], "+switch-master");
    /* another name's switch, a malformed one: nothing */
    redisReply *m = switch_msg("other 10.0.1.1 6379 10.0.1.9 6379");
    CHECK_EQ(sk_sentinels_message(&s, 1, m, 1100), 0);
    freeReplyObject(m);
    m = switch_msg("seckill");
    CHECK_EQ(sk_sentinels_message(&s, 1, m, 1100), 0);
    freeReplyObject(m);
    CHECK_EQ(decide(&s, 1100, host, &port), SK_SN_KEEP);
    /* ours: newer than every answer, so a move at once, and a round due */
    m = switch_msg("seckill 10.0.1.1 6379 10.0.1.2 6380");
    CHECK_EQ(sk_sentinels_message(&s, 1, m, 1200), 1);
    freeReplyObject(m);
    CHECK(sk_sentinels_due(&s, 1200));
    CHECK_EQ(decide(&s, 1200, host, &port), SK_SN_USE);
    CHECK_STR(host, "10.0.1.2");
    CHECK_EQ(port, 6380);
    sk_sentinels_using(&s, host, port, 1200);
    /* ROLE: a master is fine, a replica is left; READONLY too */
    const char *role[1];
    sk_sentinels_role_query(role);
    CHECK_STR(role[0], "ROLE");
    CHECK_EQ(role_of(&s, "*3\r\n$6\r\nmaster\r\n:10\r\n*0\r\n"), 0);
    CHECK_EQ(decide(&s, 1300, host, &port), SK_SN_KEEP);
    CHECK_EQ(
        role_of(&s, "*5\r\n$5\r\nslave\r\n$8\r\n10.0.1.3\r\n:6379\r\n$9\r\nconnected\r\n:10\r\n"),
        1);
    CHECK_EQ(decide(&s, 1300, host, &port), SK_SN_LEAVE);
    CHECK_MSG(strstr(s.why, "ROLE slave"), "%s", s.why);
    sk_sentinels_dropped(&s);
    sk_sentinels_using(&s, "10.0.1.2", 6380, 1300);
    /* READONLY (the transport counts those answers): left, and why says so */
    CHECK_EQ(decide(&s, 1301, host, &port), SK_SN_KEEP);
    sk_sentinels_demoted(&s, "answered READONLY");
    CHECK_EQ(decide(&s, 1301, host, &port), SK_SN_LEAVE);
    CHECK_MSG(strstr(s.why, "answered READONLY"), "%s", s.why);
}

SK_TEST(sentinels_take_odd_answers_as_none)
{
    struct sk_sentinels s = three();
    const char *odd[] = {
        "*4\r\n$2\r\nip\r\n$8\r\n10.0.1.1\r\n$4\r\nport\r\n$1\r\n0\r\n",
        "*4\r\n$2\r\nip\r\n$8\r\n10.0.1.1\r\n$4\r\nport\r\n$5\r\n65536\r\n",
        "*4\r\n$2\r\nip\r\n$8\r\n10.0.1.1\r\n$4\r\nport\r\n$2\r\nxx\r\n",
        "*2\r\n$2\r\nip\r\n$8\r\n10.0.1.1\r\n",
        "*6\r\n$2\r\nip\r\n$0\r\n\r\n$4\r\nport\r\n$1\r\n1\r\n$12\r\nconfig-epoch\r\n$1\r\n1\r\n",
        ":1\r\n",
        "$3\r\nabc\r\n",
    };
    for (size_t i = 0; i < sizeof odd / sizeof odd[0]; i++) {
        redisReply *r = sk_th_resp(odd[i]);
        sk_sentinels_answer(&s, 0, r, 10);
        freeReplyObject(r);
        CHECK_MSG(!s.peer[0].answered && !s.peer[0].named, "odd answer %zu taken", i);
    }
    /* no epoch field (an older Sentinel): epoch 0 */
    redisReply *r = sk_th_resp("*4\r\n$2\r\nip\r\n$8\r\n10.0.1.1\r\n$4\r\nport\r\n$4\r\n6379\r\n");
    sk_sentinels_answer(&s, 0, r, 10);
    freeReplyObject(r);
    CHECK_EQ(s.peer[0].named, 1);
    CHECK_EQ(s.peer[0].epoch, 0);
    /* out of range Sentinels are ignored */
    sk_sentinels_answer(&s, 7, NULL, 10);
    sk_sentinels_answer(&s, -1, NULL, 10);
}
