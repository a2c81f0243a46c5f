/* resp_bytes.h - a Redis reply parsed from RESP bytes by hiredis's reader,
 * for the unit tests of the I/O-free protocol code (handshake, Sentinels,
 * the segment borrow and preheat): the replies a transport would hand it,
 * without a server. */
#ifndef SK_TEST_RESP_BYTES_H
#define SK_TEST_RESP_BYTES_H
#include <hiredis.h>

/* One reply from bytes (one whole reply); fails the test otherwise. The
 * caller frees it with freeReplyObject. */
redisReply *sk_th_resp(const char *bytes);

#endif
