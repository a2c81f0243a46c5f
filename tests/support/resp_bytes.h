/* resp_bytes.h - replies parsed from RESP bytes, for the tests that feed a
 * protocol written without I/O what a transport would hand it (no server:
 * tests/unit/test_sentinels.c, test_seg_borrow.c, test_seg_preheat.c). */
#ifndef SK_TH_RESP_BYTES_H
#define SK_TH_RESP_BYTES_H

#include <hiredis.h>

/* One reply parsed from bytes (a test failure when they do not hold one
 * whole reply); the caller frees it with freeReplyObject. */
redisReply *sk_th_resp(const char *bytes);

#endif
