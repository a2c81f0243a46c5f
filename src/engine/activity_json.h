/* activity_json.h - an activity as JSON, written once for every reader:
 * the buyer's view (GET /api/v1/activities/{id}, the admin routes'
 * replies), an item of the admin list (GET /api/v1/activities) and the
 * operator's (`seckill activity show|list|create --json`). Pure: the
 * caller reads the definition, the live state and the clock. */
#ifndef SK_ACTIVITY_JSON_H
#define SK_ACTIVITY_JSON_H
#include <stdint.h>

#include <jansson.h>

#include "engine/activity.h"
#include "engine/stock.h"

enum sk_activity_view {
    SK_AV_PUBLIC,   /* the buyer's: no stored state, no seeds but a drawn one */
    SK_AV_LISTED,   /* the admin list's: the stored state and the main figures */
    SK_AV_OPERATOR, /* the CLI's: everything, the live figures at the end */
};

/* Activity a in view v, with its live state at now (unix ms; live NULL:
 * the operator's view of the definition alone). ch: the public view's
 * challenge object (this reference is taken; NULL: none). A new object,
 * the caller's to json_decref; NULL when out of memory. */
json_t *sk_activity_json(const struct sk_activity *a, const struct sk_stock_state *live,
                         int64_t now, enum sk_activity_view v, json_t *ch);

#endif
