/* outbound.c - POSTs off the event loop on a libcurl multi thread
 * (outbound.h).
 *
 * A request moves through three lists: `posted` (the loop put it there;
 * the thread takes it on its next wake-up, curl_multi_wakeup), the
 * thread's own running set (curl's), and `done` (the thread put it there
 * and signalled the eventfd; the loop takes the list in one go and runs
 * the callbacks). The lists are guarded by one mutex, held only to link or
 * unlink; curl work and callbacks run outside it. */
#include "http/outbound.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <curl/curl.h>

#include "core/error.h"

struct req {
    struct req *next;
    struct req *rnext, *rprev; /* the thread's running list */
    char *url, *body;
    size_t len;
    int timeout_ms;
    sk_outbound_cb cb;
    void *arg;
    CURL *easy;
    /* filled by the thread */
    int status;
    char why[CURL_ERROR_SIZE];
    char *resp;
    size_t resp_len;
    int too_long;
};

struct sk_outbound {
    pthread_t thread;
    pthread_mutex_t lock;
    CURLM *multi;
    int efd;
    int stop;            /* under lock */
    struct req *posted;  /* under lock */
    struct req *done;    /* under lock, newest first */
    struct req *running; /* the thread's: transfers in curl's hands */
    int inflight;        /* the owner's count */
    int max_inflight;
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc;

static void curl_init(void)
{
    curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

static void req_free(struct req *r)
{
    if (!r) return;
    free(r->url);
    free(r->body);
    free(r->resp);
    free(r);
}

static size_t on_data(char *p, size_t size, size_t n, void *ud)
{
    struct req *r = ud;
    size_t len = size * n;
    if (r->resp_len + len > SK_OUTBOUND_BODY_MAX) {
        r->too_long = 1;
        return 0; /* curl fails the transfer (CURLE_WRITE_ERROR) */
    }
    char *b = realloc(r->resp, r->resp_len + len + 1);
    if (!b) return 0;
    memcpy(b + r->resp_len, p, len);
    r->resp = b;
    r->resp_len += len;
    b[r->resp_len] = 0;
    return len;
}

/* On the thread: the request's easy handle, added to the multi. */
static void start(struct sk_outbound *o, struct req *r)
{
    CURL *e = curl_easy_init();
    r->easy = e;
    if (!e) {
        snprintf(r->why, sizeof r->why, "libcurl: no handle");
        return;
    }
    curl_easy_setopt(e, CURLOPT_URL, r->url);
    curl_easy_setopt(e, CURLOPT_POST, 1L);
    curl_easy_setopt(e, CURLOPT_POSTFIELDS, r->body);
    curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE, (long)r->len);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)r->timeout_ms);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, (long)r->timeout_ms);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, r);
    curl_easy_setopt(e, CURLOPT_PRIVATE, r);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, r->why);
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(e, CURLOPT_USERAGENT, "seckill");
    r->why[0] = 0;
    if (curl_multi_add_handle(o->multi, e) != CURLM_OK) {
        curl_easy_cleanup(e);
        r->easy = NULL;
        snprintf(r->why, sizeof r->why, "libcurl: cannot add the request");
        return;
    }
    r->rprev = NULL;
    r->rnext = o->running;
    if (o->running) o->running->rprev = r;
    o->running = r;
}

/* On the thread: r's transfer is over; out of curl's hands. */
static void stop_transfer(struct sk_outbound *o, struct req *r)
{
    curl_multi_remove_handle(o->multi, r->easy);
    curl_easy_cleanup(r->easy);
    r->easy = NULL;
    if (r->rprev)
        r->rprev->rnext = r->rnext;
    else
        o->running = r->rnext;
    if (r->rnext) r->rnext->rprev = r->rprev;
}

/* On the thread: r is answered; to the loop. */
static void finish(struct sk_outbound *o, struct req *r)
{
    pthread_mutex_lock(&o->lock);
    r->next = o->done;
    o->done = r;
    pthread_mutex_unlock(&o->lock);
    uint64_t one = 1;
    ssize_t n = write(o->efd, &one, sizeof one);
    (void)n; /* a full counter still wakes the loop */
}

/* On the thread: the transfers curl reports finished. */
static void reap(struct sk_outbound *o)
{
    CURLMsg *m;
    int left;
    while ((m = curl_multi_info_read(o->multi, &left))) {
        if (m->msg != CURLMSG_DONE) continue;
        CURL *e = m->easy_handle;
        struct req *r = NULL;
        curl_easy_getinfo(e, CURLINFO_PRIVATE, (char **)&r);
        long code = 0;
        if (m->data.result == CURLE_OK) {
            curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &code);
            r->status = (int)code;
        } else {
            r->status = 0;
            if (r->too_long)
                snprintf(r->why, sizeof r->why, "answer longer than %d bytes",
                         SK_OUTBOUND_BODY_MAX);
            else if (!r->why[0])
                snprintf(r->why, sizeof r->why, "%s", curl_easy_strerror(m->data.result));
        }
        stop_transfer(o, r);
        finish(o, r);
    }
}

static void *outbound_main(void *arg)
{
    struct sk_outbound *o = arg;
    for (;;) {
        pthread_mutex_lock(&o->lock);
        int stop = o->stop;
        struct req *batch = o->posted;
        o->posted = NULL;
        pthread_mutex_unlock(&o->lock);
        if (stop) {
            /* what is still out ends now */
            for (struct req *r = batch; r;) {
                struct req *next = r->next;
                snprintf(r->why, sizeof r->why, "stopping");
                finish(o, r);
                r = next;
            }
            break;
        }
        for (struct req *r = batch; r;) {
            struct req *next = r->next;
            start(o, r);
            if (!r->easy) finish(o, r);
            r = next;
        }
        int running = 0;
        curl_multi_perform(o->multi, &running);
        reap(o);
        curl_multi_poll(o->multi, NULL, 0, 1000, NULL);
        curl_multi_perform(o->multi, &running);
        reap(o);
    }
    /* the transfers still running end with the thread */
    while (o->running) {
        struct req *r = o->running;
        stop_transfer(o, r);
        r->status = 0;
        snprintf(r->why, sizeof r->why, "stopping");
        finish(o, r);
    }
    return NULL;
}

int sk_outbound_new(struct sk_outbound **out, int max_inflight)
{
    *out = NULL;
    pthread_once(&curl_once, curl_init);
    if (curl_init_rc != CURLE_OK) return SK_EIO;
    struct sk_outbound *o = calloc(1, sizeof *o);
    if (!o) return SK_ENOMEM;
    o->max_inflight = max_inflight > 0 ? max_inflight : 1;
    o->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    o->multi = curl_multi_init();
    if (o->efd < 0 || !o->multi || pthread_mutex_init(&o->lock, NULL) != 0) {
        if (o->efd >= 0) close(o->efd);
        if (o->multi) curl_multi_cleanup(o->multi);
        free(o);
        return SK_EIO;
    }
    /* keep-alive to the provider: a few connections serve every request */
    curl_multi_setopt(o->multi, CURLMOPT_MAXCONNECTS, 16L);
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old); /* no signal meant for the loop lands here */
    int rc = pthread_create(&o->thread, NULL, outbound_main, o);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        pthread_mutex_destroy(&o->lock);
        curl_multi_cleanup(o->multi);
        close(o->efd);
        free(o);
        return SK_EIO;
    }
    *out = o;
    return 0;
}

int sk_outbound_fd(const struct sk_outbound *o)
{
    return o->efd;
}

int sk_outbound_post(struct sk_outbound *o, const char *url, const char *body, size_t len,
                     int timeout_ms, sk_outbound_cb cb, void *arg)
{
    if (o->inflight >= o->max_inflight) return SK_EBUSY;
    struct req *r = calloc(1, sizeof *r);
    if (r) {
        r->url = strdup(url);
        r->body = malloc(len + 1);
    }
    if (!r || !r->url || !r->body) {
        req_free(r);
        return SK_ENOMEM;
    }
    memcpy(r->body, body, len);
    r->body[len] = 0;
    r->len = len;
    r->timeout_ms = timeout_ms > 0 ? timeout_ms : 1;
    r->cb = cb;
    r->arg = arg;
    pthread_mutex_lock(&o->lock);
    r->next = o->posted;
    o->posted = r;
    pthread_mutex_unlock(&o->lock);
    o->inflight++;
    curl_multi_wakeup(o->multi);
    return 0;
}

int sk_outbound_drain(struct sk_outbound *o)
{
    uint64_t v;
    while (read(o->efd, &v, sizeof v) > 0) {
    }
    pthread_mutex_lock(&o->lock);
    struct req *list = o->done;
    o->done = NULL;
    pthread_mutex_unlock(&o->lock);
    /* oldest first: the list is newest first */
    struct req *rev = NULL;
    while (list) {
        struct req *next = list->next;
        list->next = rev;
        rev = list;
        list = next;
    }
    int n = 0;
    while (rev) {
        struct req *next = rev->next;
        o->inflight--;
        rev->cb(rev->arg, rev->status, rev->resp ? rev->resp : "", rev->resp_len, rev->why);
        req_free(rev);
        rev = next;
        n++;
    }
    return n;
}

void sk_outbound_free(struct sk_outbound *o)
{
    if (!o) return;
    pthread_mutex_lock(&o->lock);
    o->stop = 1;
    pthread_mutex_unlock(&o->lock);
    curl_multi_wakeup(o->multi);
    pthread_join(o->thread, NULL);
    sk_outbound_drain(o);
    curl_multi_cleanup(o->multi);
    pthread_mutex_destroy(&o->lock);
    close(o->efd);
    free(o);
}
