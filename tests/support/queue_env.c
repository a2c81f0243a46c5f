/* queue_env.c - see queue_env.h. */
#include "support/queue_env.h"

#include <inttypes.h>
#include <time.h>

#include "core/clock.h"
#include "core/codes.h"
#include "core/error.h"
#include "support/harness.h"

struct sk_queue_answer queue_one(sk_redis *r, uint64_t aid, char op, uint64_t uid,
                                 struct sk_queue_head *h)
{
    struct sk_queue_head tmp;
    struct sk_queue_answer a;
    if (!h) h = &tmp;
    int rc = sk_queue_call(r, aid, &op, &uid, 1, h, &a);
    CHECK_MSG(rc == 0, "queue call: %s (%s)", sk_strerror(rc), r->errstr);
    return a;
}

struct sk_queue_answer queue_admitted(sk_redis *r, uint64_t aid, uint64_t uid)
{
    int64_t deadline = sk_mono_ms() + 5000;
    struct sk_queue_answer a = queue_one(r, aid, SK_QUEUE_JOIN, uid, NULL);
    while (a.rc != SK_RC_Q_ADMITTED) {
        CHECK_MSG(a.rc == SK_RC_Q_WAITING, "user %" PRIu64 ": rc %d", uid, a.rc);
        CHECK_MSG(sk_mono_ms() < deadline, "user %" PRIu64 " got no pass within 5 s", uid);
        struct timespec ts = {0, 2 * 1000 * 1000};
        nanosleep(&ts, NULL);
        a = queue_one(r, aid, SK_QUEUE_POLL, uid, NULL);
    }
    return a;
}
