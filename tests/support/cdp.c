/* cdp.c - Chromium over the DevTools protocol's pipe (cdp.h). */
#include "support/cdp.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "core/clock.h"
#include "support/harness.h"

/* How long one command may take (a navigation, a screenshot). */
#define CALL_TIMEOUT_MS 30000

void sk_cdp_start(struct sk_cdp *b)
{
    memset(b, 0, sizeof *b);
    snprintf(b->dir, sizeof b->dir, "%s", sk_th_tmpdir());
    int to_child[2], from_child[2];
    CHECK(pipe(to_child) == 0 && pipe(from_child) == 0);
    char profile[360];
    snprintf(profile, sizeof profile, "--user-data-dir=%s/profile", b->dir);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        /* fd 3: what Chromium reads, fd 4: what it writes */
        int r = dup(to_child[0]), w = dup(from_child[1]);
        dup2(r, 3);
        dup2(w, 4);
        int devnull = open("/dev/null", O_RDWR);
        dup2(devnull, 0);
        dup2(devnull, 1);
        char log[340];
        snprintf(log, sizeof log, "%s/chromium.log", b->dir);
        int lfd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        dup2(lfd >= 0 ? lfd : devnull, 2);
        for (int fd = 5; fd < 1024; fd++)
            close(fd);
        setenv("HOME", b->dir, 1);
        execlp("chromium", "chromium", "--headless", "--no-sandbox", "--disable-gpu",
               "--disable-quic", "--no-first-run", "--disable-background-networking",
               "--disable-component-update", "--disable-sync", "--disable-extensions",
               "--disable-default-apps", "--mute-audio", "--hide-scrollbars",
               /* pages behind others keep their timers: several buyers wait at once */
               "--disable-background-timer-throttling", "--disable-renderer-backgrounding",
               "--disable-backgrounding-occluded-windows", "--remote-debugging-pipe", profile,
               "about:blank", (char *)NULL);
        _exit(127);
    }
    close(to_child[0]);
    close(from_child[1]);
    b->pid = pid;
    b->wfd = to_child[1];
    b->rfd = from_child[0];
    b->events = json_array();
    signal(SIGPIPE, SIG_IGN);
    json_t *v = sk_cdp_call(b, NULL, "Browser.getVersion", NULL);
    snprintf(b->ua, sizeof b->ua, "%s", json_string_value(json_object_get(v, "userAgent")));
    json_decref(v);
}

void sk_cdp_stop(struct sk_cdp *b)
{
    if (b->pid > 0) {
        kill(b->pid, SIGTERM);
        int64_t deadline = sk_mono_ms() + 5000;
        int st;
        while (waitpid(b->pid, &st, WNOHANG) == 0) {
            if (sk_mono_ms() > deadline) {
                kill(b->pid, SIGKILL);
                waitpid(b->pid, &st, 0);
                break;
            }
            struct timespec ts = {0, 20000000L};
            nanosleep(&ts, NULL);
        }
        b->pid = 0;
    }
    if (b->wfd > 0) close(b->wfd);
    if (b->rfd > 0) close(b->rfd);
    free(b->buf);
    json_decref(b->events);
    memset(b, 0, sizeof *b);
}

/* One message from Chromium within timeout_ms (a new reference), or NULL. */
static json_t *next_message(struct sk_cdp *b, int timeout_ms)
{
    int64_t deadline = sk_mono_ms() + timeout_ms;
    for (;;) {
        char *nul = b->n ? memchr(b->buf, 0, b->n) : NULL;
        if (nul) {
            size_t len = (size_t)(nul - b->buf);
            json_error_t e;
            json_t *m = json_loadb(b->buf, len, 0, &e);
            memmove(b->buf, nul + 1, b->n - len - 1);
            b->n -= len + 1;
            CHECK_MSG(m != NULL, "chromium sent bad JSON: %s", e.text);
            return m;
        }
        int left = (int)(deadline - sk_mono_ms());
        if (left <= 0) return NULL;
        struct pollfd pfd = {b->rfd, POLLIN, 0};
        int pr = poll(&pfd, 1, left);
        if (pr < 0 && errno == EINTR) continue;
        if (pr <= 0) return NULL;
        if (b->cap - b->n < 65536) {
            b->cap = b->cap ? b->cap * 2 : 1 << 20;
            b->buf = realloc(b->buf, b->cap);
            CHECK(b->buf != NULL);
        }
        ssize_t got = read(b->rfd, b->buf + b->n, b->cap - b->n);
        CHECK_MSG(got > 0, "chromium closed its pipe (see %s/chromium.log)", b->dir);
        b->n += (size_t)got;
    }
}

/* Keeps an event (a message without an id). */
static void keep_event(struct sk_cdp *b, json_t *m)
{
    json_array_append_new(b->events, m);
}

json_t *sk_cdp_call(struct sk_cdp *b, const struct sk_cdp_page *p, const char *method,
                    json_t *params)
{
    int id = ++b->next_id;
    json_t *msg = json_object();
    json_object_set_new(msg, "id", json_integer(id));
    json_object_set_new(msg, "method", json_string(method));
    json_object_set_new(msg, "params", params ? params : json_object());
    if (p) json_object_set_new(msg, "sessionId", json_string(p->session));
    char *text = json_dumps(msg, JSON_COMPACT);
    json_decref(msg);
    size_t len = strlen(text) + 1; /* with its NUL */
    for (size_t off = 0; off < len;) {
        ssize_t w = write(b->wfd, text + off, len - off);
        CHECK_MSG(w > 0, "cannot write to chromium: %s", strerror(errno));
        off += (size_t)w;
    }
    free(text);
    int64_t deadline = sk_mono_ms() + CALL_TIMEOUT_MS;
    for (;;) {
        int left = (int)(deadline - sk_mono_ms());
        json_t *m = left > 0 ? next_message(b, left) : NULL;
        CHECK_MSG(m != NULL, "chromium did not answer %s in %d ms", method, CALL_TIMEOUT_MS);
        json_t *mid = json_object_get(m, "id");
        if (!mid) {
            keep_event(b, m);
            continue;
        }
        if (json_integer_value(mid) != id) {
            json_decref(m);
            continue;
        }
        json_t *err = json_object_get(m, "error");
        if (err) {
            char *et = json_dumps(err, JSON_COMPACT);
            CHECK_MSG(0, "chromium: %s: %s", method, et);
        }
        json_t *res = json_incref(json_object_get(m, "result"));
        json_decref(m);
        return res ? res : json_object();
    }
}

void sk_cdp_pump(struct sk_cdp *b, int ms)
{
    int64_t deadline = sk_mono_ms() + ms;
    for (;;) {
        int left = (int)(deadline - sk_mono_ms());
        if (left <= 0) return;
        json_t *m = next_message(b, left);
        if (!m) return;
        if (json_object_get(m, "id"))
            json_decref(m);
        else
            keep_event(b, m);
    }
}

static void call_void(struct sk_cdp *b, const struct sk_cdp_page *p, const char *method,
                      json_t *params)
{
    json_decref(sk_cdp_call(b, p, method, params));
}

void sk_cdp_resize(struct sk_cdp *b, const struct sk_cdp_page *p, int width, int height, int mobile)
{
    call_void(b, p, "Emulation.setDeviceMetricsOverride",
              json_pack("{s:i,s:i,s:i,s:b}", "width", width, "height", height, "deviceScaleFactor",
                        1, "mobile", mobile));
    call_void(b, p, "Emulation.setTouchEmulationEnabled", json_pack("{s:b}", "enabled", mobile));
}

static void wait_loaded(struct sk_cdp *b, const struct sk_cdp_page *p)
{
    CHECK_MSG(sk_cdp_wait(b, p, "document.readyState === 'complete'", 20000),
              "the page did not load in 20 s");
}

void sk_cdp_page_open(struct sk_cdp *b, struct sk_cdp_page *p, const char *url, int width,
                      int height, int mobile, const char *lang, const char *init_script)
{
    memset(p, 0, sizeof *p);
    json_t *r =
        sk_cdp_call(b, NULL, "Target.createTarget", json_pack("{s:s}", "url", "about:blank"));
    snprintf(p->target, sizeof p->target, "%s", json_string_value(json_object_get(r, "targetId")));
    json_decref(r);
    r = sk_cdp_call(b, NULL, "Target.attachToTarget",
                    json_pack("{s:s,s:b}", "targetId", p->target, "flatten", 1));
    snprintf(p->session, sizeof p->session, "%s",
             json_string_value(json_object_get(r, "sessionId")));
    json_decref(r);
    call_void(b, p, "Page.enable", NULL);
    call_void(b, p, "Runtime.enable", NULL);
    call_void(b, p, "Network.enable", NULL);
    /* a page in a background tab must not look hidden to itself */
    call_void(b, p, "Emulation.setFocusEmulationEnabled", json_pack("{s:b}", "enabled", 1));
    sk_cdp_resize(b, p, width, height, mobile);
    if (lang) {
        call_void(b, p, "Network.setUserAgentOverride",
                  json_pack("{s:s,s:s}", "userAgent", b->ua, "acceptLanguage", lang));
        call_void(b, p, "Emulation.setLocaleOverride",
                  json_pack("{s:s}", "locale", strncmp(lang, "zh", 2) ? "en-US" : "zh-CN"));
    }
    if (init_script)
        call_void(b, p, "Page.addScriptToEvaluateOnNewDocument",
                  json_pack("{s:s}", "source", init_script));
    call_void(b, p, "Page.navigate", json_pack("{s:s}", "url", url));
    wait_loaded(b, p);
}

void sk_cdp_reload(struct sk_cdp *b, const struct sk_cdp_page *p)
{
    call_void(b, p, "Page.reload", json_pack("{s:b}", "ignoreCache", 0));
    /* the old document may still answer "complete" for a moment */
    sk_cdp_pump(b, 100);
    wait_loaded(b, p);
}

json_t *sk_cdp_eval(struct sk_cdp *b, const struct sk_cdp_page *p, const char *expr)
{
    json_t *r = sk_cdp_call(
        b, p, "Runtime.evaluate",
        json_pack("{s:s,s:b,s:b}", "expression", expr, "returnByValue", 1, "awaitPromise", 1));
    json_t *ex = json_object_get(r, "exceptionDetails");
    if (ex) {
        char *et = json_dumps(ex, JSON_COMPACT);
        CHECK_MSG(0, "exception in `%s`: %.600s", expr, et);
    }
    json_t *v = json_incref(json_object_get(json_object_get(r, "result"), "value"));
    json_decref(r);
    return v ? v : json_null();
}

void sk_cdp_eval_text(struct sk_cdp *b, const struct sk_cdp_page *p, const char *expr, char *out,
                      size_t cap)
{
    json_t *v = sk_cdp_eval(b, p, expr);
    if (json_is_string(v)) {
        snprintf(out, cap, "%s", json_string_value(v));
    } else {
        char *t = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
        snprintf(out, cap, "%s", t ? t : "");
        free(t);
    }
    json_decref(v);
}

int sk_cdp_wait(struct sk_cdp *b, const struct sk_cdp_page *p, const char *expr, int timeout_ms)
{
    int64_t deadline = sk_mono_ms() + timeout_ms;
    char wrapped[2048];
    snprintf(wrapped, sizeof wrapped,
             "(() => { try { return !!(%s); } catch (e) { return false; } })()", expr);
    for (;;) {
        json_t *v = sk_cdp_eval(b, p, wrapped);
        int ok = json_is_true(v);
        json_decref(v);
        if (ok) return 1;
        if (sk_mono_ms() > deadline) return 0;
        sk_cdp_pump(b, 40); /* and keeps the events meanwhile */
    }
}

void sk_cdp_click(struct sk_cdp *b, const struct sk_cdp_page *p, const char *css)
{
    char expr[512];
    snprintf(expr, sizeof expr,
             "(() => { const r = document.querySelector(%s).getBoundingClientRect();"
             " return [r.x + r.width / 2, r.y + r.height / 2]; })()",
             css);
    json_t *xy = sk_cdp_eval(b, p, expr);
    double x = json_number_value(json_array_get(xy, 0)),
           y = json_number_value(json_array_get(xy, 1));
    json_decref(xy);
    const char *kinds[] = {"mouseMoved", "mousePressed", "mouseReleased"};
    for (int i = 0; i < 3; i++)
        call_void(b, p, "Input.dispatchMouseEvent",
                  json_pack("{s:s,s:f,s:f,s:s,s:i}", "type", kinds[i], "x", x, "y", y, "button",
                            i ? "left" : "none", "clickCount", i ? 1 : 0));
}

void sk_cdp_key(struct sk_cdp *b, const struct sk_cdp_page *p, const char *key)
{
    int code = !strcmp(key, "Tab") ? 9 : 13;
    const char *text = code == 13 ? "\r" : "";
    call_void(b, p, "Input.dispatchKeyEvent",
              json_pack("{s:s,s:s,s:s,s:i,s:s}", "type", "keyDown", "key", key, "code", key,
                        "windowsVirtualKeyCode", code, "text", text));
    call_void(b, p, "Input.dispatchKeyEvent",
              json_pack("{s:s,s:s,s:s,s:i}", "type", "keyUp", "key", key, "code", key,
                        "windowsVirtualKeyCode", code));
}

void sk_cdp_screenshot(struct sk_cdp *b, const struct sk_cdp_page *p, const char *path)
{
    json_t *r = sk_cdp_call(b, p, "Page.captureScreenshot", json_pack("{s:s}", "format", "png"));
    const char *data = json_string_value(json_object_get(r, "data"));
    CHECK(data != NULL);
    size_t len = strlen(data);
    unsigned char *png = malloc(len);
    CHECK(png != NULL);
    int n = EVP_DecodeBlock(png, (const unsigned char *)data, (int)len);
    CHECK(n > 0);
    while (len > 0 && data[len - 1] == '=') { /* DecodeBlock counts the padding */
        n--;
        len--;
    }
    FILE *f = fopen(path, "wb");
    CHECK_MSG(f != NULL, "cannot write %s", path);
    CHECK(fwrite(png, 1, (size_t)n, f) == (size_t)n);
    fclose(f);
    free(png);
    json_decref(r);
}
