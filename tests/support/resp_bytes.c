/* resp_bytes.c - replies parsed from RESP bytes (resp_bytes.h). */
#include "support/resp_bytes.h"

#include <string.h>

#include "support/harness.h"

redisReply *sk_th_resp(const char *bytes)
{
    redisReader *rd = redisReaderCreate();
    CHECK(rd);
    CHECK_EQ(redisReaderFeed(rd, bytes, strlen(bytes)), REDIS_OK);
    void *rep = NULL;
    CHECK_EQ(redisReaderGetReply(rd, &rep), REDIS_OK);
    CHECK(rep);
    redisReaderFree(rd);
    return rep;
}
