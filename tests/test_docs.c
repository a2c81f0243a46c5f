/* test_docs.c - the documents, checked against the program and the tree.
 *
 * The README's quick start is run as written: the shell block after the
 * README's "quickstart" marker is copied verbatim into a script and run by
 * /bin/sh in a directory of its own (build/ there is the binary under
 * test), on free ports given through the variables the block reads, with
 * no SECKILL_* variable set (a fresh shell). Its output must be what the
 * README says: each "# -> TEXT" line of the block is one line of output, in
 * order, where "..." stands for any text (an order id, a time) and a line
 * "# -> ..." for any number of lines; a command with no "# ->" line after
 * it prints nothing. The block must also stop what it started: when the
 * script ends, no process of its process group may be left.
 *
 * scripts/check-doc-paths.sh (run by make test through check-layers) is
 * run on a tree of its own: it names a process word, a missing path, and
 * passes clean documents. */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "support/harness.h"

#define QS_DEADLINE_S 120 /* the script's own bound, under the test's */
#define MAX_LINES 4096

extern char **environ;

/* The whole file, NUL-terminated; the caller frees it. */
static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    CHECK_MSG(f != NULL, "open %s: %s", path, strerror(errno));
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    CHECK(buf != NULL);
    size_t got;
    while ((got = fread(buf + n, 1, cap - n - 1, f)) > 0) {
        n += got;
        if (cap - n - 1 == 0) {
            cap *= 2;
            buf = realloc(buf, cap);
            CHECK(buf != NULL);
        }
    }
    fclose(f);
    buf[n] = 0;
    if (len) *len = n;
    return buf;
}

/* Splits text in place at '\n' into lines[] (at most max); returns the count. */
static size_t split_lines(char *text, char **lines, size_t max)
{
    size_t n = 0;
    char *p = text;
    while (*p && n < max) {
        lines[n++] = p;
        char *nl = strchr(p, '\n');
        if (!nl) break;
        *nl = 0;
        p = nl + 1;
    }
    return n;
}

/* 1 when line is pat, where each "..." of pat stands for any text. */
static int line_matches(const char *pat, const char *line)
{
    const char *dots = strstr(pat, "...");
    if (!dots) return strcmp(pat, line) == 0;
    size_t head = (size_t)(dots - pat);
    if (strncmp(pat, line, head) != 0) return 0;
    for (const char *rest = line + head;; rest++) {
        if (line_matches(dots + 3, rest)) return 1;
        if (!*rest) return 0;
    }
}

/* 1 when out[oi..] is pat[pi..]: a pattern "..." alone takes any lines. */
static int lines_match(char **pat, size_t np, size_t pi, char **out, size_t no, size_t oi)
{
    if (pi == np) return oi == no;
    if (strcmp(pat[pi], "...") == 0) {
        for (size_t k = oi; k <= no; k++)
            if (lines_match(pat, np, pi + 1, out, no, k)) return 1;
        return 0;
    }
    return oi < no && line_matches(pat[pi], out[oi]) &&
           lines_match(pat, np, pi + 1, out, no, oi + 1);
}

/* Where a greedy walk first misses: the expectation's index (np when the
 * output has lines left over), and the output line it met in *oi. */
static size_t first_miss(char **pat, size_t np, char **out, size_t no, size_t *oi)
{
    size_t o = 0, p = 0;
    for (; p < np; p++) {
        if (strcmp(pat[p], "...") == 0) {
            if (p + 1 == np) {
                o = no;
                continue;
            }
            while (o < no && !line_matches(pat[p + 1], out[o]))
                o++;
            continue;
        }
        if (o >= no || !line_matches(pat[p], out[o])) break;
        o++;
    }
    *oi = o;
    return p;
}

static pid_t qs_group;
static void kill_group(void *arg)
{
    (void)arg;
    if (qs_group > 0) kill(-qs_group, SIGKILL);
}

SK_TEST_T(docs_readme_quickstart_runs_verbatim_and_prints_what_it_says, 180)
{
    char path[PATH_MAX], dir[PATH_MAX], script[PATH_MAX + 32], outpath[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/README.md", sk_th_source_root());
    char *readme = slurp(path, NULL);
    static char *rl[MAX_LINES];
    size_t nrl = split_lines(readme, rl, MAX_LINES);

    /* the block: the first ```sh fence after the marker, to its end */
    size_t i = 0, start = 0, end = 0;
    while (i < nrl && !strstr(rl[i], "<!-- quickstart"))
        i++;
    CHECK_MSG(i < nrl, "README.md has no <!-- quickstart ... --> marker before its quick start");
    while (i < nrl && strcmp(rl[i], "```sh") != 0)
        i++;
    CHECK_MSG(i < nrl, "README.md: no ```sh block after the quickstart marker");
    start = i + 1;
    for (end = start; end < nrl && strncmp(rl[end], "```", 3) != 0; end++)
        ;
    CHECK_MSG(end < nrl, "README.md: the quick start's block is not closed");

    /* the script (verbatim) and what it must print */
    size_t cap = 1 << 16, len = 0;
    char *text = malloc(cap);
    CHECK(text != NULL);
    static char *want[MAX_LINES];
    static size_t want_at[MAX_LINES];
    size_t nwant = 0;
    for (size_t k = start; k < end; k++) {
        size_t n = strlen(rl[k]);
        while (len + n + 2 > cap) {
            cap *= 2;
            text = realloc(text, cap);
            CHECK(text != NULL);
        }
        memcpy(text + len, rl[k], n);
        len += n;
        text[len++] = '\n';
        const char *s = rl[k] + strspn(rl[k], " ");
        if (strncmp(s, "# ->", 4) == 0 && (s[4] == ' ' || s[4] == 0)) {
            CHECK(nwant < MAX_LINES);
            want_at[nwant] = k + 1;
            want[nwant++] = (char *)(s[4] ? s + 5 : s + 4);
        }
    }
    text[len] = 0;
    /* ports and places come from variables with defaults, so the suite's
     * run is private */
    const char *vars[] = {"${REDIS_PORT:-", "${HTTP_PORT:-", "${OPS_PORT:-", "mktemp -d"};
    for (size_t k = 0; k < sizeof vars / sizeof vars[0]; k++)
        CHECK_MSG(strstr(text, vars[k]) != NULL, "the quick start does not take %s", vars[k]);
    CHECK_MSG(nwant > 5, "the quick start says what to expect in %zu lines only", nwant);

    /* what the README asks to install (scripts/deps.sh installs it too) */
    static char missing[256];
    sk_th_sh("for t in redis-server redis-cli curl openssl; do command -v $t >/dev/null || "
             "printf ' %s' $t; done",
             missing, sizeof missing);
    CHECK_MSG(!missing[0], "the quick start needs:%s (apt-get install redis-server curl openssl)",
              missing);

    snprintf(dir, sizeof dir, "%s", sk_th_tmpdir());
    snprintf(script, sizeof script, "%s/quickstart.sh", dir);
    snprintf(outpath, sizeof outpath, "%s/quickstart.out", dir);
    sk_th_write_file(script, text);
    free(text);
    /* build/ of the block: the directory of the binary under test */
    char bin[PATH_MAX], link[PATH_MAX + 16];
    CHECK_MSG(realpath(sk_th_seckill_bin(), bin) != NULL, "%s: %s", sk_th_seckill_bin(),
              strerror(errno));
    snprintf(link, sizeof link, "%s/build", dir);
    CHECK_MSG(symlink(dirname(bin), link) == 0, "symlink %s: %s", link, strerror(errno));

    int ports[3];
    for (int k = 0; k < 3; k++) {
        do
            ports[k] = sk_th_free_port();
        while ((k > 0 && ports[k] == ports[0]) || (k > 1 && ports[k] == ports[1]));
    }
    char penv[3][40];
    snprintf(penv[0], sizeof penv[0], "REDIS_PORT=%d", ports[0]);
    snprintf(penv[1], sizeof penv[1], "HTTP_PORT=%d", ports[1]);
    snprintf(penv[2], sizeof penv[2], "OPS_PORT=%d", ports[2]);

    sk_th_at_fail(kill_group, NULL);
    pid_t pid = sk_th_fork();
    if (pid == 0) {
        setpgid(0, 0);
        /* a fresh shell: nothing of the suite's SECKILL_* settings */
        for (char **e = environ; *e;) {
            if (strncmp(*e, "SECKILL_", 8) == 0) {
                char name[128];
                size_t n = strcspn(*e, "=");
                snprintf(name, sizeof name, "%.*s", (int)(n < 127 ? n : 127), *e);
                unsetenv(name);
                e = environ;
                continue;
            }
            e++;
        }
        for (int k = 0; k < 3; k++)
            putenv(penv[k]);
        int in = open("/dev/null", O_RDONLY),
            out = open(outpath, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (in < 0 || out < 0 || chdir(dir) != 0) _exit(127);
        dup2(in, 0);
        dup2(out, 1);
        dup2(out, 2);
        execl("/bin/sh", "sh", script, (char *)NULL);
        _exit(127);
    }
    setpgid(pid, pid);
    qs_group = pid;

    int status = 0;
    struct timespec t0, now;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        pid_t w = waitpid(pid, &status, WNOHANG);
        if (w == pid) break;
        CHECK_MSG(w == 0, "waitpid: %s", strerror(errno));
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec - t0.tv_sec > QS_DEADLINE_S) {
            char *o = slurp(outpath, NULL);
            sk_th_fail(__FILE__, __LINE__,
                       "the quick start did not finish within %d s; its output so far:\n%s",
                       QS_DEADLINE_S, o);
        }
        usleep(50 * 1000);
    }
    char *out = slurp(outpath, NULL);
    /* it stopped what it started: no process of its group is left */
    int left = kill(-pid, 0) == 0;
    CHECK_MSG(!left,
              "the quick start ended with processes still running (its redis-server or "
              "serve was not stopped); its output:\n%s",
              out);
    sk_th_at_fail_cancel(kill_group, NULL);
    qs_group = 0;

    static char *got[MAX_LINES];
    size_t ngot = split_lines(out, got, MAX_LINES);
    if (ngot > 0 && got[ngot - 1][0] == 0) ngot--; /* the text's last newline */
    if (!lines_match(want, nwant, 0, got, ngot, 0)) {
        size_t oi, p = first_miss(want, nwant, got, ngot, &oi);
        char *o = slurp(outpath, NULL);
        if (p < nwant)
            sk_th_fail(__FILE__, __LINE__,
                       "README.md:%zu says the quick start prints\n  %s\nbut it printed\n  %s\n"
                       "(output line %zu; exit status %d). The whole output:\n%s",
                       want_at[p], want[p], oi < ngot ? got[oi] : "(nothing more)", oi + 1,
                       WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), o);
        sk_th_fail(__FILE__, __LINE__,
                   "the quick start printed more than README.md says, from output line %zu:\n"
                   "  %s\nThe whole output:\n%s",
                   oi + 1, oi < ngot ? got[oi] : "", o);
    }
    CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0,
              "the quick start's script exited with status %d", status);
    free(out);
    free(readme);
}

/* The matcher the quick start test relies on: what "..." may stand for. */
SK_TEST(docs_quickstart_expectations_match_variable_parts_only)
{
    CHECK(line_matches("PONG", "PONG"));
    CHECK(!line_matches("PONG", "PONG "));
    CHECK(line_matches("{\"order_id\":\"1001-...\",...} 200",
                       "{\"order_id\":\"1001-1796-0-ab\",\"status\":\"paid\"} 200"));
    CHECK(!line_matches("{\"order_id\":\"1001-...\",...} 200",
                        "{\"order_id\":\"1002-1796-0-ab\",\"status\":\"paid\"} 200"));
    CHECK(!line_matches("... 200", "{\"error\":\"sold_out\"} 409"));
    CHECK(line_matches("...", ""));
    char a[] = "a", dots[] = "...", z[] = "z", x[] = "x", y[] = "y";
    char *pat[] = {a, dots, z}, *out1[] = {a, z}, *out2[] = {a, x, y, z}, *out3[] = {a, x};
    CHECK(lines_match(pat, 3, 0, out1, 2, 0));
    CHECK(lines_match(pat, 3, 0, out2, 4, 0));
    CHECK(!lines_match(pat, 3, 0, out3, 2, 0));
    char *pat2[] = {a};
    CHECK(!lines_match(pat2, 1, 0, out1, 2, 0)); /* more output than said */
}

SK_TEST(docs_check_names_process_words_and_missing_paths_and_passes_clean_pages)
{
    char root[400], cmd[2048];
    static char out[16384];
    snprintf(root, sizeof root, "%s/docs-check", sk_th_tmpdir());
    snprintf(cmd, sizeof cmd,
             "mkdir -p %s/docs/notes %s/src/core %s/man && touch %s/src/core/clock.c", root, root,
             root, root);
    CHECK_EQ(sk_th_sh(cmd, out, sizeof out), 0);
    sk_th_write_in(root, "README.md",
                   "# seckill\n\nThe clock is `src/core/clock.c`; a session of the shell,\n"
                   "flag helpers, one round trip, every round of the probe.\n");
    sk_th_write_in(root, "docs/notes/open.md", "# Open\n\n- the issue is the clock (`clock.c`).\n");
    CHECK_MSG(sk_th_check_script("check-doc-paths.sh", root, out, sizeof out) == 0 &&
                  strstr(out, "check-doc-paths: ok"),
              "%s", out);

    /* process words, one across a line break, and a missing path */
    sk_th_write_in(root, "BENCHMARKS.md",
                   "# Benchmarks\n\n## Issue 23 closed (session\n13)\n\nMeasured by helper a1 "
                   "before this round; see `src/core/gone.c`.\n");
    sk_th_write_in(root, "docs/notes/open.md",
                   "# Open\n\nOther helpers' suites ran; the lead reruns it.\n");
    CHECK_MSG(sk_th_check_script("check-doc-paths.sh", root, out, sizeof out) != 0, "%s", out);
    const char *said[] = {
        "BENCHMARKS.md:3: \"Issue 23\"",      "BENCHMARKS.md:3: \"session 13\"",
        "BENCHMARKS.md:6: \"helper a1\"",     "BENCHMARKS.md:6: \"this round\"",
        "src/core/gone.c does not exist",     "docs/notes/open.md:3: \"Other helpers\"",
        "docs/notes/open.md:3: \"the lead\"",
    };
    for (size_t k = 0; k < sizeof said / sizeof said[0]; k++)
        CHECK_MSG(strstr(out, said[k]) != NULL, "the check did not say %s:\n%s", said[k], out);
    CHECK_MSG(!strstr(out, "README.md"), "a clean page was named:\n%s", out);
}

/* The manual stays short: the README a page of its own, BENCHMARKS what
 * is measured now (the rest is in git's history). */
SK_TEST(docs_readme_and_benchmarks_stay_short)
{
    const char *files[] = {"README.md", "BENCHMARKS.md", "docs/notes/open-questions.md"};
    const size_t most[] = {250, 600, 150};
    for (size_t k = 0; k < 3; k++) {
        char path[PATH_MAX];
        snprintf(path, sizeof path, "%s/%s", sk_th_source_root(), files[k]);
        char *t = slurp(path, NULL);
        size_t lines = 0;
        for (char *p = t; *p; p++)
            lines += *p == '\n';
        free(t);
        CHECK_MSG(lines <= most[k],
                  "%s has %zu lines, more than %zu: move reference material "
                  "to docs/ (and history to git)",
                  files[k], lines, most[k]);
    }
}
