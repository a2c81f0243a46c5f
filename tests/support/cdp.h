/* cdp.h - headless Chromium (the Debian package) driven over the DevTools
 * protocol for the page tests: one browser per test, started with
 * --remote-debugging-pipe (JSON messages ended by a NUL byte on fds 3 and
 * 4: no WebSocket, nothing from npm), pages as targets with a session
 * each. Every call is bounded and fails the test when Chromium does not
 * answer; the network events of every page are kept for the test to read.
 * The browser dies with the test (PR_SET_PDEATHSIG). */
#ifndef SK_TEST_CDP_H
#define SK_TEST_CDP_H
#include <stddef.h>
#include <sys/types.h>

#include <jansson.h>

struct sk_cdp {
    pid_t pid;
    int wfd, rfd;
    char *buf;
    size_t n, cap;
    int next_id;
    char dir[300];
    char ua[400];   /* the browser's user agent (kept when the language is set) */
    json_t *events; /* every event: {"method","params","sessionId"} */
};

struct sk_cdp_page {
    char target[64];
    char session[64];
};

/* Starts Chromium; fails the test (saying to install chromium) when it
 * cannot. */
void sk_cdp_start(struct sk_cdp *b);
/* Closes the browser (SIGTERM, then SIGKILL) and frees what it kept. */
void sk_cdp_stop(struct sk_cdp *b);

/* One command (params: a new reference, taken; may be NULL) on a page's
 * session (NULL: the browser); its result (a new reference) or the test
 * fails with Chromium's error. */
json_t *sk_cdp_call(struct sk_cdp *b, const struct sk_cdp_page *p, const char *method,
                    json_t *params);

/* A new page of width x height CSS pixels (mobile: a phone's viewport and
 * touch), its language (Accept-Language and navigator.languages, e.g.
 * "zh-CN,zh"; NULL: Chromium's), a script run before any of the page's
 * own on every load (NULL: none), then url loaded. */
void sk_cdp_page_open(struct sk_cdp *b, struct sk_cdp_page *p, const char *url, int width,
                      int height, int mobile, const char *lang, const char *init_script);
/* A new viewport size for the page. */
void sk_cdp_resize(struct sk_cdp *b, const struct sk_cdp_page *p, int width, int height,
                   int mobile);
/* Reloads the page and waits until its document has loaded. */
void sk_cdp_reload(struct sk_cdp *b, const struct sk_cdp_page *p);

/* The value of a JavaScript expression in the page (promises awaited), a
 * new reference; fails the test on an exception. */
json_t *sk_cdp_eval(struct sk_cdp *b, const struct sk_cdp_page *p, const char *expr);
/* The same as text into out (cap bytes): strings as they are, anything
 * else as JSON. */
void sk_cdp_eval_text(struct sk_cdp *b, const struct sk_cdp_page *p, const char *expr, char *out,
                      size_t cap);
/* Evaluates expr until it is true; 1 when it became true within
 * timeout_ms, else 0. */
int sk_cdp_wait(struct sk_cdp *b, const struct sk_cdp_page *p, const char *expr, int timeout_ms);

/* A real mouse click at the centre of the element css selects. */
void sk_cdp_click(struct sk_cdp *b, const struct sk_cdp_page *p, const char *css);
/* A key typed on the keyboard: "Tab" or "Enter". */
void sk_cdp_key(struct sk_cdp *b, const struct sk_cdp_page *p, const char *key);

/* A PNG of the viewport into path. */
void sk_cdp_screenshot(struct sk_cdp *b, const struct sk_cdp_page *p, const char *path);

/* Reads events for ms milliseconds (they are kept in b->events). */
void sk_cdp_pump(struct sk_cdp *b, int ms);

#endif
