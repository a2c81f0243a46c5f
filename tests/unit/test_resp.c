/* test_resp.c - a command's RESP bytes (redis/resp.h) are hiredis's
 * redisFormatCommandArgv's, byte for byte: empty arguments, binary bytes,
 * lengths across every digit count, C strings and explicit lengths. */
#include <stdlib.h>
#include <string.h>

#include <hiredis.h>

#include "redis/resp.h"
#include "support/harness.h"

/* Both writers on one command: same length, same bytes. */
static void same_as_hiredis(int argc, const char **argv, const size_t *lens)
{
    char *want = NULL;
    int wn = redisFormatCommandArgv(&want, argc, argv, lens);
    CHECK(wn > 0);
    size_t n = sk_resp_cmd_len(argc, argv, lens);
    CHECK_EQ(n, (size_t)wn);
    char *got = malloc(n + 1);
    CHECK(got);
    got[n] = 'x'; /* not written past its length */
    CHECK(sk_resp_cmd_put(got, argc, argv, lens) == got + n);
    CHECK(memcmp(got, want, n) == 0);
    CHECK(got[n] == 'x');
    free(got);
    redisFreeCommand(want);
}

SK_TEST(resp_command_bytes_are_hiredis_formatters)
{
    const char *wait[] = {"WAIT", "1", "100"};
    same_as_hiredis(3, wait, NULL);
    const char *one[] = {"PING"};
    same_as_hiredis(1, one, NULL);
    /* empty arguments (an admission's absent key, IP, pass) and NUL bytes */
    const char *bin[] = {"FCALL", "", "a\0b\r\n", ""};
    size_t binl[] = {5, 0, 5, 0};
    same_as_hiredis(4, bin, binl);
    /* lengths of 1 to 6 digits, and argc of 2 digits and more */
    static char big[123457];
    memset(big, 'v', sizeof big);
    size_t sizes[] = {0, 1, 9, 10, 99, 100, 999, 1000, 9999, 10000, 123456};
    const char *av[120];
    size_t al[120];
    for (int i = 0; i < 120; i++) {
        av[i] = big;
        al[i] = sizes[i % 11];
    }
    for (int argc = 1; argc <= 120; argc += 7)
        same_as_hiredis(argc, av, al);
    same_as_hiredis(100, av, al);
}
