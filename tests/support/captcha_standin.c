/* captcha_standin.c - the tests' stand-in CAPTCHA provider
 * (captcha_standin.h). */
#include "support/captcha_standin.h"

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "support/harness.h"
#include "support/http_client.h"

/* The stand-in widget: what Turnstile's explicit rendering offers a page,
 * drawn as a plain box; solved by itself 300 ms after it is rendered (or
 * reset). Its DOM: #standin-widget-<n>, data-solved="1" once solved. */
static const char widget_js[] =
    "(function () {\n"
    "  var n = 0, w = {};\n"
    "  function solve(id) {\n"
    "    var x = w[id];\n"
    "    if (!x) return;\n"
    "    x.token = null;\n"
    "    x.box.dataset.solved = '0';\n"
    "    x.label.textContent = 'Checking you are human...';\n"
    "    setTimeout(function () {\n"
    "      if (!w[id]) return;\n"
    "      x.token = 'standin.' + (x.o.action || 'none') + '.' + (++x.solves) + '.' + id;\n"
    "      x.box.dataset.solved = '1';\n"
    "      x.label.textContent = '\\u2713 Success';\n"
    "      if (typeof x.o.callback === 'function') x.o.callback(x.token);\n"
    "    }, 300);\n"
    "  }\n"
    "  window.turnstile = {\n"
    "    render: function (el, o) {\n"
    "      if (typeof el === 'string') el = document.querySelector(el);\n"
    "      if (!el || !o || !o.sitekey) return undefined;\n"
    "      var id = 'w' + (++n), box = document.createElement('div'),\n"
    "          label = document.createElement('div'), who = document.createElement('div');\n"
    "      box.id = 'standin-widget-' + n;\n"
    "      box.className = 'standin-widget';\n"
    "      box.style.cssText = 'display:inline-block;box-sizing:border-box;width:300px;' +\n"
    "        'min-height:65px;padding:10px 12px;border:1px solid #d0d0d0;border-radius:4px;' +\n"
    "        'background:#fafafa;font:14px sans-serif;color:#222';\n"
    "      label.style.cssText = 'font-weight:bold';\n"
    "      who.style.cssText = 'font-size:11px;color:#666;margin-top:4px';\n"
    "      who.textContent = 'stand-in CAPTCHA, site key ' + o.sitekey;\n"
    "      box.appendChild(label);\n"
    "      box.appendChild(who);\n"
    "      el.appendChild(box);\n"
    "      w[id] = {box: box, label: label, o: o, token: null, solves: 0};\n"
    "      solve(id);\n"
    "      return id;\n"
    "    },\n"
    "    reset: function (id) { if (id == null) id = 'w' + n; solve(id); },\n"
    "    remove: function (id) {\n"
    "      if (id == null) id = 'w' + n;\n"
    "      var x = w[id];\n"
    "      if (x && x.box.parentNode) x.box.parentNode.removeChild(x.box);\n"
    "      delete w[id];\n"
    "    },\n"
    "    getResponse: function (id) {\n"
    "      if (id == null) id = 'w' + n;\n"
    "      return w[id] ? w[id].token || undefined : undefined;\n"
    "    }\n"
    "  };\n"
    "})();\n";

/* One request on fd: its head into head (cap bytes), its body (by
 * Content-Length) into s->last when it has one. */
static int sv_read(struct sk_th_captcha *s, int fd, char *head, size_t cap)
{
    char buf[4096];
    size_t n = 0;
    char *body = NULL;
    long clen = -1;
    while (n < sizeof buf - 1) {
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, 2000) <= 0) return -1;
        ssize_t k = read(fd, buf + n, sizeof buf - 1 - n);
        if (k <= 0) return -1;
        n += (size_t)k;
        buf[n] = 0;
        if (!body && (body = strstr(buf, "\r\n\r\n"))) {
            body += 4;
            char *cl = strcasestr(buf, "content-length:");
            clen = cl ? atol(cl + 15) : 0;
        }
        if (body && (long)(buf + n - body) >= clen) break;
    }
    if (!body) return -1;
    snprintf(head, cap, "%.*s", (int)(body - buf), buf);
    if (clen > 0) {
        pthread_mutex_lock(&s->mu);
        snprintf(s->last, sizeof s->last, "%s", body);
        pthread_mutex_unlock(&s->mu);
    }
    return 0;
}

/* The action a stand-in widget's token was made for ("standin.<action>.
 * ..."), into out; "purchase" for any other token. */
static void token_action(const char *form, char *out, size_t cap)
{
    const char *t = strstr(form, "response=standin.");
    snprintf(out, cap, "purchase");
    if (!t) return;
    t += strlen("response=standin.");
    size_t n = strcspn(t, ".&");
    if (n > 0 && n < cap) snprintf(out, cap, "%.*s", (int)n, t);
}

static void answer(int c, const char *type, const char *body)
{
    char resp[8192];
    int n = snprintf(resp, sizeof resp,
                     "HTTP/1.1 200 OK\r\nContent-Type: %s\r\nCache-Control: no-store\r\n"
                     "Content-Length: %zu\r\nConnection: close\r\n\r\n%s",
                     type, strlen(body), body);
    if (n > 0 && (size_t)n < sizeof resp) sk_th_send_all(c, resp, (size_t)n);
}

static void *sv_loop(void *arg)
{
    struct sk_th_captcha *s = arg;
    char head[4096];
    while (!atomic_load(&s->stop)) {
        struct pollfd p = {s->fd, POLLIN, 0};
        if (poll(&p, 1, 20) <= 0) continue;
        int c = accept(s->fd, NULL, NULL);
        if (c < 0) continue;
        if (sv_read(s, c, head, sizeof head) < 0) {
            close(c);
            continue;
        }
        if (!strncmp(head, "GET /api.js", 11)) {
            atomic_fetch_add(&s->scripts, 1);
            answer(c, "text/javascript", widget_js);
            close(c);
            continue;
        }
        atomic_fetch_add(&s->requests, 1);
        int mode = atomic_load(&s->mode);
        if (mode == SK_TH_SV_HANG) {
            /* never answered: held open until the end */
            if (s->nhung < 64)
                s->hung[s->nhung++] = c;
            else
                close(c);
            continue;
        }
        /* the documented shape (Turnstile's siteverify) */
        char body[512], action[32];
        pthread_mutex_lock(&s->mu);
        token_action(s->last, action, sizeof action);
        pthread_mutex_unlock(&s->mu);
        if (mode == SK_TH_SV_PASS)
            snprintf(body, sizeof body,
                     "{\"success\":true,\"challenge_ts\":\"2026-12-06T12:00:00.000Z\","
                     "\"hostname\":\"shop.example\",\"error-codes\":[],\"action\":\"%s\","
                     "\"cdata\":\"\"}",
                     action);
        else
            snprintf(body, sizeof body,
                     "{\"success\":false,\"error-codes\":[\"invalid-input-response\"]}");
        answer(c, "application/json", body);
        close(c);
    }
    return NULL;
}

void sk_th_captcha_start(struct sk_th_captcha *s)
{
    memset(s, 0, sizeof *s);
    pthread_mutex_init(&s->mu, NULL);
    s->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    CHECK(s->fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    CHECK(bind(s->fd, (struct sockaddr *)&a, sizeof a) == 0);
    CHECK(listen(s->fd, 64) == 0);
    socklen_t al = sizeof a;
    CHECK(getsockname(s->fd, (struct sockaddr *)&a, &al) == 0);
    s->port = ntohs(a.sin_port);
    CHECK(pthread_create(&s->th, NULL, sv_loop, s) == 0);
}

void sk_th_captcha_stop(struct sk_th_captcha *s)
{
    atomic_store(&s->stop, 1);
    pthread_join(s->th, NULL);
    for (int i = 0; i < s->nhung; i++)
        close(s->hung[i]);
    close(s->fd);
    pthread_mutex_destroy(&s->mu);
}
