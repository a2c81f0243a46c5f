/* bench_pow.c - `seckill-bench pow`: what a challenge's proof of work
 * costs a bot, and what checking one costs the server (docs/challenges.md).
 *
 * One core, no server: challenges made with the product's code
 * (engine/challenge.c), solved by its native solver (the challenge hashed
 * once, each try a copy of that state plus the nonce: what a careful bot
 * writes first, on OpenSSL's SHA-256, which uses the CPU's SHA extensions
 * where there are some), and checked as `seckill serve` checks them (one
 * HMAC, one SHA-256). Prints solutions/s, hashes/s and checks/s. Nothing is
 * asserted; the figures go to docs/challenges.md. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench_int.h"
#include "core/cli.h"
#include "core/clock.h"
#include "engine/challenge.h"

static const char KEY[] = "bench-pow-secret-0123456789abcdef";

static int usage(FILE *f)
{
    fprintf(f, "usage: seckill-bench pow [--bits N] [--seconds S]\n"
               "One core: challenges of N leading zero bits (default 18) solved by a native\n"
               "C loop for S seconds (default 10): solutions/s and hashes/s; then the\n"
               "server's check of a solution (HMAC + SHA-256): checks/s.\n");
    return f == stdout ? SK_EXIT_OK : SK_EXIT_USAGE;
}

int sk_bench_pow(int argc, char **argv)
{
    int bits = 18, secs = 10;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) return usage(stdout);
        if (i + 1 < argc && !strcmp(argv[i], "--bits")) {
            bits = atoi(argv[++i]);
            if (bits < 0 || bits > 30) return sk_cli_usage_error("bench pow: --bits 0..30");
        } else if (i + 1 < argc && !strcmp(argv[i], "--seconds")) {
            secs = atoi(argv[++i]);
            if (secs < 1 || secs > 3600) return sk_cli_usage_error("bench pow: --seconds 1..3600");
        } else {
            return usage(stderr);
        }
    }
    int64_t t0 = sk_mono_ms(), now = sk_wall_ms();
    uint64_t solved = 0, hashes = 0;
    char text[SK_CH_TEXT_MAX], nonce[32], hdr[SK_CH_HEADER_MAX];
    while (sk_mono_ms() - t0 < 1000LL * secs) {
        struct sk_ch_issue in = {.activity_id = 1001,
                                 .user_id = 42 + solved,
                                 .exp_ms = now + 120000,
                                 .bits = bits,
                                 .salt = solved};
        if (sk_challenge_make(KEY, strlen(KEY), &in, text, sizeof text) < 0) return 1;
        uint64_t tries;
        if (sk_challenge_solve(text, strlen(text), bits, 0, UINT64_MAX, nonce, sizeof nonce,
                               &tries) < 0)
            return 1;
        hashes += tries;
        solved++;
    }
    double s = (double)(sk_mono_ms() - t0) / 1000.0;
    printf("pow %d bits, one core: %" PRIu64 " solutions in %.1f s = %.2f solutions/s, %.2f M "
           "hashes/s (expected %.0f hashes a solution, measured %.0f)\n",
           bits, solved, s, (double)solved / s, (double)hashes / s / 1e6, (double)(1u << bits),
           solved ? (double)hashes / (double)solved : 0.0);
    /* the server's side: the last solution checked over and over */
    snprintf(hdr, sizeof hdr, "%s.%s", text, nonce);
    struct sk_ch_parsed p;
    struct sk_ch_ok ok;
    uint64_t checks = 0;
    t0 = sk_mono_ms();
    while (sk_mono_ms() - t0 < 2000) {
        for (int k = 0; k < 1000; k++) {
            if (sk_challenge_parse(hdr, strlen(hdr), &p) < 0 ||
                sk_challenge_check(KEY, strlen(KEY), &p, 1001, 42 + solved - 1, now, &ok) != 0)
                return 1;
        }
        checks += 1000;
    }
    s = (double)(sk_mono_ms() - t0) / 1000.0;
    printf("check (parse + HMAC + SHA-256), one core: %.0f checks/s (%.2f us each)\n",
           (double)checks / s, 1e6 * s / (double)checks);
    return 0;
}
