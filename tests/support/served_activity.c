/* served_activity.c - a server under test with one fresh activity. */
#include "support/served_activity.h"

#include "support/harness.h"

uint64_t srv_start_activity(struct srv *v, enum srv_activity_state state, long long stock,
                            long long limit, long long maxq)
{
    uint64_t id = sk_th_unique_id();
    srv_start(v, NULL);
    if (state == ACT_READY)
        ready_act(v, id, stock, limit, maxq, W_NOW);
    else
        create_act(v, id, stock, limit, maxq, W_NOW);
    return id;
}
