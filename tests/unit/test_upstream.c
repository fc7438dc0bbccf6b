/*
 * test_upstream — report delivery (agent/upstream.c) against a receiver
 * embedded in the test: an evhttp server on 127.0.0.1 (ephemeral port) on
 * the loop's own event_base, so every attempt is a real POST over a real
 * socket and every retry waits on a real timer.
 *
 * What must hold: the contract (POST, Content-Type, Idempotency-Key, the
 * body as given; 2xx delivered, 4xx dead, the rest retried with bounded
 * backoff and Retry-After), one request at a time per container in submit
 * order while other containers go on, max_in_flight, the token in the
 * Authorization header and nowhere else (every test checks the captured
 * log for it), and upstream_free: no callback afterwards, no leak.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"
#include "loop.h"
#include "testutil.h"
#include "upstream.h"

#define MAX_REQS 1024
#define MAX_HELD 128
#define MAX_EVS  1024

/* libevent reads the coarse monotonic clock (one jiffy, 4 ms at HZ=250,
 * 10 ms at HZ=100): a timer may fire that much before the ms clock says
 * it is due. */
#define CLOCK_SLACK_MS 10

/* The secret. Its first 8 characters must never show up anywhere. */
#define TOKEN     "tok-5EcReT.9f8e7d6c5b4a~+/="
#define TOKEN2    "tok2-N3wS3cr3t-0123456789"
#define TOKEN_TAG "tok-5EcR"
#define TAG2      "tok2-N3w"

/* ---- the receiver ----------------------------------------------------- */

/* One request as it arrived. */
struct rreq {
    char method[8];
    char path[64];
    char ctype[64];
    char idem[UPSTREAM_ID_MAX + 8];
    char auth[128];
    char node[64];
    char two[64];
    char cid[64]; /* from the body's "container_id" */
    char *body;
    size_t body_len;
    uint64_t at_ms;
    int code; /* 0: not answered (yet) */
};

/* A request answered later (hold, random) or never. */
struct held {
    struct evhttp_request *req;
    struct evhttp_connection *conn;
    struct event *timer;
    struct srv *s;
    int idx;
    int used;
    int owned; /* the client left: evhttp detached it, ours to free */
};

enum mode {
    M_ANSWER, /* at once: fail_n x fail_code, then code */
    M_HOLD,   /* never, until srv_release */
    M_RESET,  /* close the connection without an answer */
    M_RANDOM, /* after 0..15 ms, 200/503/429/400 at random */
};

struct srv {
    struct event_base *base;
    struct evhttp *http;
    int port;
    enum mode mode;
    int code;
    int fail_n, fail_code;
    const char *retry_after; /* sent with every non-2xx answer */
    const char *body;        /* answer body */
    size_t big;              /* >0: answer body of this many 'x' */
    size_t echo_pad;         /* >0: body is pad 'x' + the Authorization */
    int echo;
    uint32_t rnd;
    struct rreq reqs[MAX_REQS];
    int nreqs;
    struct held held[MAX_HELD];
    int nheld, max_held;
    int violations; /* a request came while one of its container's was
                       still unanswered */
    int freeing;
};

static uint32_t
srv_rand(struct srv *s)
{
    s->rnd ^= s->rnd << 13;
    s->rnd ^= s->rnd >> 17;
    s->rnd ^= s->rnd << 5;
    return s->rnd;
}

static void
held_drop(struct held *h)
{
    if (h->timer != NULL)
        event_free(h->timer);
    h->timer = NULL;
    h->used = 0;
}

/* The client closed a connection: evhttp detaches a request still
 * unanswered (evcon NULL) and leaves it to us. */
static void
on_conn_close(struct evhttp_connection *conn, void *arg)
{
    struct srv *s = arg;
    int i;

    if (s->freeing)
        return;
    for (i = 0; i < MAX_HELD; i++) {
        struct held *h = &s->held[i];

        if (!h->used || h->owned || h->conn != conn)
            continue;
        s->nheld--;
        if (h->timer != NULL)
            evtimer_del(h->timer);
        if (evhttp_request_get_connection(h->req) == NULL)
            h->owned = 1; /* freed in srv_free */
        else
            held_drop(h);
    }
}

static void
answer(struct srv *s, struct evhttp_request *req, int idx, int code)
{
    struct evbuffer *b = evbuffer_new();
    struct evkeyvalq *oh = evhttp_request_get_output_headers(req);
    size_t i;

    assert_non_null(b);
    if (s->retry_after != NULL && (code < 200 || code > 299))
        evhttp_add_header(oh, "Retry-After", s->retry_after);
    if (s->big > 0) {
        for (i = 0; i < s->big; i++)
            evbuffer_add(b, "x", 1);
    } else if (s->echo) {
        /* A careless upstream quoting the request back. */
        for (i = 0; i < s->echo_pad; i++)
            evbuffer_add(b, "x", 1);
        evbuffer_add_printf(
            b, "you sent Authorization: %s; fix it",
            evhttp_find_header(evhttp_request_get_input_headers(req),
                               "Authorization"));
    } else {
        evbuffer_add_printf(b, "%s", s->body != NULL ? s->body : "ok");
    }
    evhttp_send_reply(req, code, "X", b);
    evbuffer_free(b);
    s->reqs[idx].code = code;
}

/* The answer depends on the report and the attempt only, not on the
 * order requests happen to arrive in: the same outcomes every run. */
static int
random_code(struct srv *s, int idx)
{
    const char *k = s->reqs[idx].idem;
    uint32_t h = 2166136261u;
    int i;

    for (; *k != '\0'; k++)
        h = (h ^ (unsigned char)*k) * 16777619u;
    for (i = 0; i < idx; i++)
        if (strcmp(s->reqs[i].idem, s->reqs[idx].idem) == 0)
            h = (h ^ 0x5bd1e995u) * 16777619u;
    h ^= h >> 15;
    h = (h % 100);
    return h < 60 ? 200 : h < 85 ? 503 : h < 90 ? 429 : 400;
}

static void
on_held_timer(evutil_socket_t fd, short what, void *arg)
{
    struct held *h = arg;
    struct srv *s = h->s;

    (void)fd;
    (void)what;
    s->nheld--;
    answer(s, h->req, h->idx, random_code(s, h->idx));
    held_drop(h);
}

static struct held *
hold(struct srv *s, struct evhttp_request *req, int idx)
{
    int i;

    for (i = 0; i < MAX_HELD; i++) {
        struct held *h = &s->held[i];

        if (h->used)
            continue;
        memset(h, 0, sizeof(*h));
        h->used = 1;
        h->s = s;
        h->req = req;
        h->conn = evhttp_request_get_connection(req);
        h->idx = idx;
        s->nheld++;
        if (s->nheld > s->max_held)
            s->max_held = s->nheld;
        return h;
    }
    fail_msg("receiver: too many held requests");
    return NULL;
}

static void
on_request(struct evhttp_request *req, void *arg)
{
    struct srv *s = arg;
    struct evhttp_connection *conn = evhttp_request_get_connection(req);
    struct evbuffer *in = evhttp_request_get_input_buffer(req);
    struct rreq *r;
    const char *p;
    int i, idx;

    assert_true(s->nreqs < MAX_REQS);
    idx = s->nreqs++;
    r = &s->reqs[idx];
    memset(r, 0, sizeof(*r));
    r->at_ms = loop_now_ms();
    snprintf(r->method, sizeof(r->method), "%s",
             evhttp_request_get_command(req) == EVHTTP_REQ_POST ? "POST"
                                                                : "OTHER");
    snprintf(r->path, sizeof(r->path), "%s",
             evhttp_uri_get_path(evhttp_request_get_evhttp_uri(req)));
    tu_http_header(req, "Content-Type", r->ctype, sizeof(r->ctype));
    tu_http_header(req, "Idempotency-Key", r->idem, sizeof(r->idem));
    tu_http_header(req, "Authorization", r->auth, sizeof(r->auth));
    tu_http_header(req, "X-Reapd-Node", r->node, sizeof(r->node));
    tu_http_header(req, "X-Two", r->two, sizeof(r->two));
    r->body_len = evbuffer_get_length(in);
    r->body = malloc(r->body_len + 1);
    assert_non_null(r->body);
    evbuffer_copyout(in, r->body, r->body_len);
    r->body[r->body_len] = '\0';
    p = strstr(r->body, "\"container_id\":\"");
    if (p != NULL)
        snprintf(r->cid, sizeof(r->cid), "%.*s", (int)strcspn(p + 16, "\""),
                 p + 16);
    for (i = 0; i < MAX_HELD; i++) {
        const struct held *h = &s->held[i];

        if (h->used && !h->owned && r->cid[0] != '\0' &&
            strcmp(s->reqs[h->idx].cid, r->cid) == 0)
            s->violations++;
    }
    evhttp_connection_set_closecb(conn, on_conn_close, s);
    switch (s->mode) {
    case M_ANSWER:
        if (s->fail_n > 0) {
            s->fail_n--;
            answer(s, req, idx, s->fail_code);
        } else {
            answer(s, req, idx, s->code);
        }
        break;
    case M_HOLD:
        hold(s, req, idx);
        break;
    case M_RANDOM: {
        struct held *h = hold(s, req, idx);
        struct timeval tv = {0, (suseconds_t)(srv_rand(s) % 16) * 1000};

        h->timer = evtimer_new(s->base, on_held_timer, h);
        assert_non_null(h->timer);
        evtimer_add(h->timer, &tv);
        break;
    }
    case M_RESET: {
        struct linger lg = {1, 0};
        int fd = bufferevent_getfd(evhttp_connection_get_bufferevent(conn));

        /* An RST instead of an answer. */
        setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
        evhttp_connection_free(conn);
        break;
    }
    }
}

static struct srv *
srv_new(struct event_base *base)
{
    struct srv *s = calloc(1, sizeof(*s));

    assert_non_null(s);
    s->base = base;
    s->code = 200;
    s->rnd = 0x9e3779b9u;
    s->http = evhttp_new(base);
    assert_non_null(s->http);
    evhttp_set_allowed_methods(s->http, EVHTTP_REQ_POST | EVHTTP_REQ_GET);
    evhttp_set_max_body_size(s->http, 4u << 20);
    evhttp_set_gencb(s->http, on_request, s);
    s->port = tu_http_bind(s->http);
    return s;
}

static void
srv_free(struct srv *s)
{
    int i;

    s->freeing = 1;
    for (i = 0; i < MAX_HELD; i++) {
        struct held *h = &s->held[i];

        if (!h->used)
            continue;
        /* Detached ones are ours; attached ones go with evhttp_free. */
        if (h->owned)
            evhttp_request_free(h->req);
        held_drop(h);
    }
    evhttp_free(s->http);
    for (i = 0; i < s->nreqs; i++)
        free(s->reqs[i].body);
    free(s);
}

/* Answers the held request with that Idempotency-Key. */
static void
srv_release(struct srv *s, const char *idem, int code)
{
    int i;

    for (i = 0; i < MAX_HELD; i++) {
        struct held *h = &s->held[i];

        if (h->used && !h->owned && strcmp(s->reqs[h->idx].idem, idem) == 0) {
            s->nheld--;
            answer(s, h->req, h->idx, code);
            held_drop(h);
            return;
        }
    }
    fail_msg("receiver: %s is not held", idem);
}

static int
srv_holds(const struct srv *s, const char *idem)
{
    int i;

    for (i = 0; i < MAX_HELD; i++) {
        const struct held *h = &s->held[i];

        if (h->used && !h->owned && strcmp(s->reqs[h->idx].idem, idem) == 0)
            return 1;
    }
    return 0;
}

static int
srv_count(const struct srv *s, const char *idem)
{
    int i, n = 0;

    for (i = 0; i < s->nreqs; i++)
        n += strcmp(s->reqs[i].idem, idem) == 0;
    return n;
}

/* ---- the caller's side ------------------------------------------------ */

enum ev_kind { GOT_DELIVERED, GOT_RETRY, GOT_DEAD };

struct ev {
    enum ev_kind kind;
    char rid[UPSTREAM_ID_MAX];
    char cid[UPSTREAM_ID_MAX];
    unsigned attempts;
    long status;
    char error[UPSTREAM_ERR_MAX];
    uint64_t delay_ms, next_ms, at_ms;
};

struct fx {
    struct loop *l;
    struct srv *s;
    struct upstream *u;
    struct upstream_opts o;
    struct config_header hdrs[2];
    char url[128];
    struct ev evs[MAX_EVS];
    int nevs, ndelivered, nretry, ndead;
    /* Behaviour knobs for the callbacks. */
    int free_in_cb; /* upstream_free from the first callback */
    int chain;      /* delivered: submit the next report, up to this */
    int chain_errs;
    char logpath[64];
    int logfd;
};

static void
record(struct fx *f, enum ev_kind kind, const struct upstream_outcome *o)
{
    struct ev *e;

    assert_true(f->nevs < MAX_EVS);
    e = &f->evs[f->nevs++];
    memset(e, 0, sizeof(*e));
    e->kind = kind;
    snprintf(e->rid, sizeof(e->rid), "%s", o->report_id);
    snprintf(e->cid, sizeof(e->cid), "%s", o->container_id);
    e->attempts = o->attempts;
    e->status = o->status;
    assert_non_null(o->error);
    assert_true(strlen(o->error) < UPSTREAM_ERR_MAX);
    snprintf(e->error, sizeof(e->error), "%s", o->error);
    e->delay_ms = o->delay_ms;
    e->next_ms = o->next_ms;
    e->at_ms = loop_now_ms();
    if (f->free_in_cb) {
        f->free_in_cb = 0;
        upstream_free(f->u);
        f->u = NULL;
    }
}

static void
cb_delivered(const struct upstream_outcome *o, void *arg)
{
    struct fx *f = arg;

    f->ndelivered++;
    assert_string_equal(o->error, "");
    record(f, GOT_DELIVERED, o);
    if (f->u != NULL && f->ndelivered < f->chain) {
        char rid[32], body[128];

        snprintf(rid, sizeof(rid), "chain-%d", f->ndelivered);
        snprintf(body, sizeof(body), "{\"container_id\":\"c-chain\",\"n\":%d}",
                 f->ndelivered);
        if (upstream_submit(f->u, rid, "c-chain", body, strlen(body)) != 0)
            f->chain_errs++;
    }
}

static void
cb_retry(const struct upstream_outcome *o, void *arg)
{
    struct fx *f = arg;

    f->nretry++;
    assert_true(o->error[0] != '\0');
    record(f, GOT_RETRY, o);
}

static void
cb_dead(const struct upstream_outcome *o, void *arg)
{
    struct fx *f = arg;

    f->ndead++;
    assert_true(o->error[0] != '\0');
    record(f, GOT_DEAD, o);
}

static const struct upstream_cbs cbs = {cb_delivered, cb_retry, cb_dead};

/* A loop, a receiver, and the usual options (not yet an upstream). */
static struct fx *
fx_new(void)
{
    struct fx *f = calloc(1, sizeof(*f));

    assert_non_null(f);
    snprintf(f->logpath, sizeof(f->logpath), "/tmp/reapd-upstream-XXXXXX");
    f->logfd = mkstemp(f->logpath);
    assert_true(f->logfd >= 0);
    log_setup(LOG_LEVEL_DEBUG, LOG_FORMAT_TEXT);
    log_set_fd(f->logfd);
    f->l = loop_new();
    assert_non_null(f->l);
    f->s = srv_new(loop_base(f->l));
    snprintf(f->url, sizeof(f->url), "http://127.0.0.1:%d/ingest", f->s->port);
    f->hdrs[0].name = "X-Reapd-Node";
    f->hdrs[0].value = "node-1";
    f->hdrs[1].name = "X-Two";
    f->hdrs[1].value = "a b  c";
    f->o.url = f->url;
    f->o.timeout_ms = 3000;
    f->o.headers = f->hdrs;
    f->o.nheaders = 2;
    f->o.token = TOKEN;
    f->o.max_in_flight = 4;
    f->o.retry_base_ms = 10;
    f->o.retry_max_ms = 20;
    return f;
}

static void
fx_start(struct fx *f)
{
    char err[UPSTREAM_ERR_MAX] = "";

    assert_int_equal(
        upstream_new(f->l, &f->o, &cbs, f, &f->u, err, sizeof(err)), 0);
    assert_non_null(f->u);
}

/* Everything logged so far (caller frees). */
static char *
logged(struct fx *f)
{
    struct stat st;
    char *text;

    assert_int_equal(fstat(f->logfd, &st), 0);
    text = calloc(1, (size_t)st.st_size + 1);
    assert_non_null(text);
    assert_int_equal(pread(f->logfd, text, (size_t)st.st_size, 0), st.st_size);
    return text;
}

static void
fx_free(struct fx *f)
{
    char *text;
    int i;

    upstream_free(f->u);
    srv_free(f->s);
    loop_free(f->l);
    /* Whatever the test did: the token never reached a log line or an
     * outcome. */
    text = logged(f);
    assert_null(strstr(text, TOKEN_TAG));
    assert_null(strstr(text, TAG2));
    free(text);
    for (i = 0; i < f->nevs; i++) {
        assert_null(strstr(f->evs[i].error, TOKEN_TAG));
        assert_null(strstr(f->evs[i].error, TAG2));
    }
    log_set_fd(-1);
    log_setup(LOG_LEVEL_INFO, LOG_FORMAT_TEXT);
    close(f->logfd);
    unlink(f->logpath);
    free(f);
}

static int
n_final(const struct fx *f, const void *arg)
{
    return f->ndelivered + f->ndead >= *(const int *)arg;
}

static int
n_retry(const struct fx *f, const void *arg)
{
    return f->nretry >= *(const int *)arg;
}

static int
n_held(const struct fx *f, const void *arg)
{
    return f->s->nheld >= *(const int *)arg;
}

static int
n_reqs(const struct fx *f, const void *arg)
{
    return f->s->nreqs >= *(const int *)arg;
}

static int
is_held(const struct fx *f, const void *arg)
{
    return srv_holds(f->s, arg);
}

static void
wait_final(struct fx *f, int n, int ms)
{
    TU_RUN_UNTIL(f->l, n_final(f, &n), ms);
}

static void
wait_retries(struct fx *f, int n, int ms)
{
    TU_RUN_UNTIL(f->l, n_retry(f, &n), ms);
}

static void
wait_held(struct fx *f, int n, int ms)
{
    TU_RUN_UNTIL(f->l, n_held(f, &n), ms);
}

static void
wait_reqs(struct fx *f, int n, int ms)
{
    TU_RUN_UNTIL(f->l, n_reqs(f, &n), ms);
}

static void
submit(struct fx *f, const char *rid, const char *cid)
{
    char body[256];

    snprintf(body, sizeof(body),
             "{\"report_id\":\"%s\",\"container_id\":\"%s\"}", rid, cid);
    assert_int_equal(upstream_submit(f->u, rid, cid, body, strlen(body)), 0);
}

static const struct ev *
last_final(const struct fx *f)
{
    int i;

    for (i = f->nevs - 1; i >= 0; i--)
        if (f->evs[i].kind != GOT_RETRY)
            return &f->evs[i];
    fail_msg("no final outcome");
    return NULL;
}

/* ---- the contract ----------------------------------------------------- */

static void
t_delivered_once(void **state)
{
    struct fx *f = fx_new();
    static const char rid[] = "0123456789abcdef0123456789abcdef";
    static const char cid[] = "f00dfeed00112233445566778899aabbccddeeff"
                              "0011223344556677deadbeef";
    /* Sent byte for byte: UTF-8, escapes, no trailing newline. */
    static const char body[] =
        "{\"report_id\":\"0123456789abcdef0123456789abcdef\",\"name\":"
        "\"w\xc3\xa9"
        "b\\\"x\",\"exit_code\":7,\"labels\":{\"a\":\"b\\\\c\"}}";
    struct upstream_stats st;
    const struct rreq *r;

    (void)state;
    fx_start(f);
    assert_int_equal(upstream_submit(f->u, rid, cid, body, strlen(body)), 0);
    /* Never a callback from inside submit. */
    assert_int_equal(f->nevs, 0);
    upstream_stats(f->u, &st);
    assert_int_equal(st.held, 1);
    assert_int_equal(st.containers, 1);
    wait_final(f, 1, 3000);
    tu_run_for(f->l, 200); /* and nothing more comes */
    assert_int_equal(f->s->nreqs, 1);
    assert_int_equal(f->ndelivered, 1);
    assert_int_equal(f->nretry + f->ndead, 0);

    r = &f->s->reqs[0];
    assert_string_equal(r->method, "POST");
    assert_string_equal(r->path, "/ingest");
    assert_string_equal(r->ctype, "application/json");
    assert_string_equal(r->idem, rid);
    assert_string_equal(r->auth, "Bearer " TOKEN);
    assert_string_equal(r->node, "node-1");
    assert_string_equal(r->two, "a b  c");
    assert_int_equal(r->body_len, strlen(body));
    assert_memory_equal(r->body, body, strlen(body));

    assert_int_equal(f->evs[0].kind, GOT_DELIVERED);
    assert_string_equal(f->evs[0].rid, rid);
    assert_string_equal(f->evs[0].cid, cid);
    assert_int_equal(f->evs[0].attempts, 1);
    assert_int_equal(f->evs[0].status, 200);
    upstream_stats(f->u, &st);
    assert_int_equal(st.held, 0);
    assert_int_equal(st.in_flight, 0);
    assert_int_equal(st.containers, 0);
    assert_int_equal(st.delivered, 1);
    assert_int_equal(st.retries, 0);
    fx_free(f);
}

/* Any 2xx is delivered; no token: no Authorization header. */
static void
t_2xx_no_token(void **state)
{
    struct fx *f = fx_new();
    static const int codes[] = {201, 202, 204, 299};
    size_t i;

    (void)state;
    f->o.token = NULL;
    fx_start(f);
    for (i = 0; i < sizeof(codes) / sizeof(codes[0]); i++) {
        char rid[16];

        f->s->code = codes[i];
        snprintf(rid, sizeof(rid), "r%zu", i);
        submit(f, rid, "c");
        wait_final(f, (int)i + 1, 3000);
        assert_int_equal(last_final(f)->kind, GOT_DELIVERED);
        assert_int_equal(last_final(f)->status, codes[i]);
    }
    assert_int_equal(f->s->nreqs, 4);
    assert_string_equal(f->s->reqs[0].auth, "(none)");
    fx_free(f);
}

static void
t_retry_503_then_200(void **state)
{
    struct fx *f = fx_new();
    struct upstream_stats st;
    int i;

    (void)state;
    f->o.retry_base_ms = 40;
    f->o.retry_max_ms = 100;
    f->s->fail_n = 3;
    f->s->fail_code = 503;
    f->s->body = "busy\nnow";
    fx_start(f);
    submit(f, "r1", "c1");
    wait_final(f, 1, 5000);
    assert_int_equal(f->nretry, 3);
    assert_int_equal(f->ndelivered, 1);
    assert_int_equal(f->s->nreqs, 4);
    for (i = 0; i < 3; i++) {
        const struct ev *e = &f->evs[i];
        /* Equal jitter on min(cap, base * 2^(n-1)): 40, 80, then 100. */
        uint64_t d = i == 0 ? 40 : i == 1 ? 80 : 100;
        uint64_t gap = f->s->reqs[i + 1].at_ms - f->s->reqs[i].at_ms;

        assert_int_equal(e->kind, GOT_RETRY);
        assert_string_equal(e->rid, "r1");
        assert_int_equal(e->attempts, (unsigned)i + 1);
        assert_int_equal(e->status, 503);
        assert_string_equal(e->error, "HTTP 503: busy now");
        assert_true(e->delay_ms >= d / 2 && e->delay_ms <= d);
        assert_true(e->next_ms >= e->at_ms && e->next_ms <= e->at_ms + d);
        /* The receiver saw the wait. */
        if (gap + CLOCK_SLACK_MS < e->delay_ms || gap > e->delay_ms + 1000)
            fail_msg("attempt %d: gap %llu ms, delay %llu ms", i + 2,
                     (unsigned long long)gap, (unsigned long long)e->delay_ms);
    }
    assert_int_equal(f->evs[3].kind, GOT_DELIVERED);
    assert_int_equal(f->evs[3].attempts, 4);
    /* Every attempt is the same report under the same key. */
    for (i = 1; i < 4; i++) {
        assert_string_equal(f->s->reqs[i].idem, "r1");
        assert_string_equal(f->s->reqs[i].body, f->s->reqs[0].body);
    }
    upstream_stats(f->u, &st);
    assert_int_equal(st.retries, 3);
    assert_int_equal(st.delivered, 1);
    assert_int_equal(st.waiting, 0);
    /* Each attempt by its answer, and by its duration. */
    assert_int_equal(st.by_code[503], 3);
    assert_int_equal(st.by_code[200], 1);
    assert_int_equal(st.no_answer, 0);
    assert_int_equal(st.lat_count, 4);
    {
        uint64_t n = 0;

        for (i = 0; i <= UPSTREAM_LAT_N; i++)
            n += st.lat_buckets[i];
        assert_int_equal(n, 4);
        assert_true(st.lat_sum > 0 && st.lat_sum < 4 * 3.0);
        assert_int_equal(st.lat_buckets[UPSTREAM_LAT_N], 0);
    }
    fx_free(f);
}

static void
t_dead_400(void **state)
{
    struct fx *f = fx_new();
    struct upstream_stats st;
    char *text;

    (void)state;
    f->s->code = 400;
    f->s->body = "{\"error\":\"missing field exit_code\"}";
    fx_start(f);
    submit(f, "r1", "c1");
    wait_final(f, 1, 3000);
    tu_run_for(f->l, 200); /* never retried */
    assert_int_equal(f->s->nreqs, 1);
    assert_int_equal(f->ndead, 1);
    assert_int_equal(f->nretry + f->ndelivered, 0);
    assert_int_equal(f->evs[0].status, 400);
    assert_int_equal(f->evs[0].attempts, 1);
    assert_string_equal(f->evs[0].error,
                        "HTTP 400: {\"error\":\"missing field exit_code\"}");
    upstream_stats(f->u, &st);
    assert_int_equal(st.dead, 1);
    assert_int_equal(st.held, 0);
    /* A dead letter is never silent. */
    text = logged(f);
    assert_non_null(strstr(text, "dead letter"));
    free(text);
    fx_free(f);
}

static void
t_status_classes(void **state)
{
    struct fx *f = fx_new();
    /* 408, 429, 5xx retried; and what the contract does not name (3xx,
     * redirects are not followed) too, so nothing is lost to it. */
    static const int retried[] = {408, 429, 500, 502, 503, 504, 599, 301};
    static const int dead[] = {400, 401, 403, 404, 409, 410, 413, 422, 499};
    int i, n = 0;
    char rid[16];

    (void)state;
    fx_start(f);
    for (i = 0; i < (int)(sizeof(retried) / sizeof(retried[0])); i++) {
        int before = f->nretry;

        f->s->fail_n = 1;
        f->s->fail_code = retried[i];
        snprintf(rid, sizeof(rid), "ok%d", i);
        submit(f, rid, "c");
        wait_final(f, ++n, 3000);
        assert_int_equal(f->nretry, before + 1);
        assert_int_equal(f->evs[f->nevs - 2].status, retried[i]);
        assert_int_equal(last_final(f)->kind, GOT_DELIVERED);
        assert_int_equal(last_final(f)->attempts, 2);
    }
    for (i = 0; i < (int)(sizeof(dead) / sizeof(dead[0])); i++) {
        int reqs = f->s->nreqs;

        f->s->code = dead[i];
        snprintf(rid, sizeof(rid), "dead%d", i);
        submit(f, rid, "c");
        wait_final(f, ++n, 3000);
        assert_int_equal(last_final(f)->kind, GOT_DEAD);
        assert_int_equal(last_final(f)->status, dead[i]);
        assert_int_equal(f->s->nreqs, reqs + 1);
    }
    tu_run_for(f->l, 100);
    assert_int_equal(f->ndead, (int)(sizeof(dead) / sizeof(dead[0])));
    fx_free(f);
}

static void
check_retry_after(struct fx *f, int code, const char *ra, uint64_t lo,
                  uint64_t hi)
{
    static int n;
    const struct ev *e;
    uint64_t gap;
    int reqs = f->s->nreqs, retries = f->nretry;
    char rid[16];

    f->s->fail_n = 1;
    f->s->fail_code = code;
    f->s->retry_after = ra;
    snprintf(rid, sizeof(rid), "ra%d", n++);
    submit(f, rid, "c");
    wait_final(f, f->ndelivered + f->ndead + 1, 5000);
    assert_int_equal(f->nretry, retries + 1);
    e = &f->evs[f->nevs - 2];
    assert_int_equal(e->kind, GOT_RETRY);
    assert_int_equal(e->status, code);
    if (e->delay_ms < lo || e->delay_ms > hi)
        fail_msg("%d Retry-After \"%s\": delay %llu, want %llu..%llu", code,
                 ra, (unsigned long long)e->delay_ms, (unsigned long long)lo,
                 (unsigned long long)hi);
    gap = f->s->reqs[reqs + 1].at_ms - f->s->reqs[reqs].at_ms;
    if (gap + CLOCK_SLACK_MS < e->delay_ms)
        fail_msg("%d Retry-After \"%s\": the receiver saw a %llu ms gap, "
                 "the delay is %llu ms",
                 code, ra, (unsigned long long)gap,
                 (unsigned long long)e->delay_ms);
}

static void
t_retry_after(void **state)
{
    struct fx *f = fx_new();

    (void)state;
    f->o.retry_after_max_ms = 300;
    fx_start(f);
    /* Backoff alone is 5..10 ms here: Retry-After is the floor. */
    check_retry_after(f, 429, "1", 300, 300);
    check_retry_after(f, 503, " 2 ", 300, 300);
    check_retry_after(f, 429, "99999999999999999999999", 300, 300);
    check_retry_after(f, 429, "0", 5, 10);
    /* Only on 429 and 503, and only the seconds form. */
    check_retry_after(f, 500, "1", 5, 10);
    check_retry_after(f, 429, "Wed, 21 Oct 2015 07:28:00 GMT", 5, 10);
    check_retry_after(f, 429, "1x", 5, 10);
    check_retry_after(f, 429, "", 5, 10);
    upstream_free(f->u);
    f->u = NULL;
    /* Uncapped below the cap: one whole second. */
    f->o.retry_after_max_ms = 0;
    fx_start(f);
    check_retry_after(f, 429, "1", 1000, 1000);
    fx_free(f);
}

/* ---- transport failures ----------------------------------------------- */

static void
t_hang_timeout(void **state)
{
    struct fx *f = fx_new();
    uint64_t t0;

    (void)state;
    f->o.timeout_ms = 300;
    f->s->mode = M_HOLD;
    fx_start(f);
    t0 = loop_now_ms();
    submit(f, "r1", "c1");
    wait_retries(f, 1, 3000);
    assert_int_equal(f->evs[0].status, 0);
    assert_true(strncmp(f->evs[0].error, "timeout: ", 9) == 0);
    assert_true(f->evs[0].at_ms - t0 + CLOCK_SLACK_MS >= 300);
    assert_true(f->evs[0].at_ms - t0 < 2000);
    f->s->mode = M_ANSWER;
    wait_final(f, 1, 3000);
    assert_int_equal(last_final(f)->kind, GOT_DELIVERED);
    assert_int_equal(last_final(f)->attempts, 2);
    fx_free(f);
}

static void
t_reset(void **state)
{
    struct fx *f = fx_new();

    (void)state;
    f->s->mode = M_RESET;
    fx_start(f);
    submit(f, "r1", "c1");
    wait_retries(f, 2, 3000);
    assert_int_equal(f->evs[0].status, 0);
    assert_true(strncmp(f->evs[0].error, "transfer: ", 10) == 0);
    f->s->mode = M_ANSWER;
    wait_final(f, 1, 3000);
    assert_int_equal(last_final(f)->kind, GOT_DELIVERED);
    assert_true(last_final(f)->attempts >= 3);
    fx_free(f);
}

/* Nothing listens; then a reload points at the receiver, with a new
 * token, and the same report gets through. */
static void
t_refused_then_update(void **state)
{
    struct fx *f = fx_new();
    char dead_url[64], err[UPSTREAM_ERR_MAX];

    (void)state;
    snprintf(dead_url, sizeof(dead_url), "http://127.0.0.1:%d/x",
             tu_free_port());
    f->o.url = dead_url;
    fx_start(f);
    submit(f, "r1", "c1");
    wait_retries(f, 3, 3000);
    assert_int_equal(f->s->nreqs, 0);
    assert_int_equal(f->evs[0].status, 0);
    assert_true(strncmp(f->evs[0].error, "connect: ", 9) == 0);
    assert_int_equal(f->evs[2].attempts, 3);
    {
        struct upstream_stats st;

        upstream_stats(f->u, &st);
        assert_true(st.no_answer >= 3);
        assert_int_equal(st.by_code[200], 0);
    }

    /* A bad update changes nothing. */
    f->o.url = "ftp://nowhere";
    assert_int_equal(upstream_update(f->u, &f->o, err, sizeof(err)), -1);
    f->o.url = f->url;
    f->o.token = TOKEN2;
    assert_int_equal(upstream_update(f->u, &f->o, err, sizeof(err)), 0);
    wait_final(f, 1, 3000);
    assert_int_equal(last_final(f)->kind, GOT_DELIVERED);
    assert_string_equal(f->s->reqs[0].auth, "Bearer " TOKEN2);
    assert_string_equal(f->s->reqs[0].idem, "r1");
    fx_free(f);
}

/* The TLS files reach libcurl: a CA file or client certificate that
 * does not parse fails the attempt (retried), naming the file. */
static void
t_tls_options(void **state)
{
    struct fx *f = fx_new();
    char dir[] = "/tmp/reapd-upstream-tls-XXXXXX", ca[96], crt[96], url[96];
    FILE *fp;

    (void)state;
    assert_non_null(mkdtemp(dir));
    snprintf(ca, sizeof(ca), "%s/ca.pem", dir);
    snprintf(crt, sizeof(crt), "%s/client.pem", dir);
    fp = fopen(ca, "w");
    fputs("not a certificate\n", fp);
    fclose(fp);
    fp = fopen(crt, "w");
    fputs("not a certificate either\n", fp);
    fclose(fp);
    snprintf(url, sizeof(url), "https://127.0.0.1:%d/ingest", f->s->port);
    f->o.url = url;
    f->o.ca_file = ca;
    fx_start(f);
    submit(f, "r1", "c1");
    wait_retries(f, 1, 3000);
    assert_non_null(strstr(f->evs[0].error, ca));
    upstream_free(f->u);
    f->o.ca_file = NULL;
    f->o.client_cert = crt;
    fx_start(f);
    submit(f, "r2", "c1");
    wait_retries(f, 2, 3000);
    assert_non_null(strstr(f->evs[f->nevs - 1].error, crt));
    assert_int_equal(f->ndelivered + f->ndead, 0);
    unlink(ca);
    unlink(crt);
    rmdir(dir);
    fx_free(f);
}

/* A huge answer is cut at UPSTREAM_RESP_MAX; the status still decides
 * and the error text stays short. */
static void
t_big_answers(void **state)
{
    struct fx *f = fx_new();

    (void)state;
    f->s->big = 1u << 20;
    fx_start(f);
    submit(f, "r1", "c1");
    wait_final(f, 1, 5000);
    assert_int_equal(last_final(f)->kind, GOT_DELIVERED);
    assert_int_equal(last_final(f)->attempts, 1);
    f->s->code = 400;
    submit(f, "r2", "c1");
    wait_final(f, 2, 5000);
    assert_int_equal(last_final(f)->kind, GOT_DEAD);
    assert_int_equal(last_final(f)->status, 400);
    assert_true(strncmp(last_final(f)->error, "HTTP 400: xxxx", 14) == 0);
    assert_true(strlen(last_final(f)->error) < 200);
    fx_free(f);
}

/* ---- order and concurrency -------------------------------------------- */

static int
final_index(const struct fx *f, const char *rid, enum ev_kind kind)
{
    int i;

    for (i = 0; i < f->nevs; i++)
        if (f->evs[i].kind == kind && strcmp(f->evs[i].rid, rid) == 0)
            return i;
    return -1;
}

static void
t_order_per_container(void **state)
{
    struct fx *f = fx_new();
    struct upstream_stats st;

    (void)state;
    f->o.retry_base_ms = 30;
    f->o.retry_max_ms = 60;
    f->s->mode = M_HOLD;
    fx_start(f);
    submit(f, "a1", "ctr-a");
    submit(f, "a2", "ctr-a");
    submit(f, "a3", "ctr-a");
    submit(f, "b1", "ctr-b");
    submit(f, "c1", "ctr-c");
    wait_held(f, 3, 3000);
    tu_run_for(f->l, 100);
    /* One per container: a2 and a3 wait behind a1. */
    assert_int_equal(f->s->nreqs, 3);
    assert_true(srv_holds(f->s, "a1") && srv_holds(f->s, "b1") &&
                srv_holds(f->s, "c1"));
    upstream_stats(f->u, &st);
    assert_int_equal(st.in_flight, 3);
    assert_int_equal(st.held, 5);
    assert_int_equal(st.containers, 3);

    /* Other containers proceed while a1 hangs. */
    srv_release(f->s, "b1", 200);
    srv_release(f->s, "c1", 200);
    wait_final(f, 2, 3000);
    tu_run_for(f->l, 100);
    assert_int_equal(f->s->nreqs, 3);
    assert_true(srv_holds(f->s, "a1"));

    /* a1 fails: a2 still waits, through a1's retry. */
    srv_release(f->s, "a1", 503);
    wait_retries(f, 1, 3000);
    TU_RUN_UNTIL(f->l, is_held(f, "a1"), 3000);
    assert_int_equal(srv_count(f->s, "a2"), 0);
    srv_release(f->s, "a1", 200);
    TU_RUN_UNTIL(f->l, is_held(f, "a2"), 3000);
    assert_true(final_index(f, "a1", GOT_DELIVERED) >= 0);
    /* A dead letter lets the next one go too. */
    srv_release(f->s, "a2", 400);
    TU_RUN_UNTIL(f->l, is_held(f, "a3"), 3000);
    assert_true(final_index(f, "a2", GOT_DEAD) >= 0);
    srv_release(f->s, "a3", 200);
    wait_final(f, 5, 3000);
    assert_true(final_index(f, "a1", GOT_DELIVERED) <
                final_index(f, "a2", GOT_DEAD));
    assert_true(final_index(f, "a2", GOT_DEAD) <
                final_index(f, "a3", GOT_DELIVERED));
    assert_int_equal(f->s->violations, 0);
    assert_int_equal(srv_count(f->s, "a1"), 2);
    assert_int_equal(srv_count(f->s, "a2"), 1);
    assert_int_equal(srv_count(f->s, "a3"), 1);
    fx_free(f);
}

/* Many containers, random answers and delays: the invariants hold. */
static void
t_order_random(void **state)
{
    enum { NC = 6, NR = 6 };
    struct fx *f = fx_new();
    char rid[16], cid[16];
    int c, k, i, total = 0, attempts = 0;

    (void)state;
    f->o.max_in_flight = 3;
    f->o.retry_base_ms = 2;
    f->o.retry_max_ms = 10;
    f->s->mode = M_RANDOM;
    fx_start(f);
    /* Interleaved submits. */
    for (k = 0; k < NR; k++) {
        for (c = 0; c < NC; c++) {
            snprintf(rid, sizeof(rid), "c%d-%d", c, k);
            snprintf(cid, sizeof(cid), "c%d", c);
            submit(f, rid, cid);
        }
    }
    wait_final(f, NC * NR, 15000);
    tu_run_for(f->l, 50);
    assert_int_equal(f->ndelivered + f->ndead, NC * NR);
    assert_int_equal(f->s->violations, 0);
    assert_true(f->s->max_held <= 3);
    assert_true(f->s->max_held >= 2); /* it did run concurrently */
    print_message("%d delivered, %d dead, %d retries, %d at once\n",
                  f->ndelivered, f->ndead, f->nretry, f->s->max_held);
    assert_true(f->nretry > 0 && f->ndead > 0 && f->ndelivered > 0);
    for (c = 0; c < NC; c++) {
        int prev = -1, last_k = 0;

        for (k = 0; k < NR; k++) {
            int d, x;

            snprintf(rid, sizeof(rid), "c%d-%d", c, k);
            d = final_index(f, rid, GOT_DELIVERED);
            x = final_index(f, rid, GOT_DEAD);
            /* Exactly one final outcome, in submit order. */
            assert_true((d >= 0) != (x >= 0));
            assert_true((d >= 0 ? d : x) > prev);
            prev = d >= 0 ? d : x;
            total++;
        }
        /* The receiver saw c's reports in order: never an earlier one
         * after a later one. */
        for (i = 0; i < f->s->nreqs; i++) {
            int rc, rk;

            if (sscanf(f->s->reqs[i].idem, "c%d-%d", &rc, &rk) != 2 || rc != c)
                continue;
            assert_true(rk >= last_k);
            last_k = rk;
        }
    }
    assert_int_equal(total, NC * NR);
    for (i = 0; i < f->nevs; i++)
        if (f->evs[i].kind != GOT_RETRY)
            attempts += (int)f->evs[i].attempts;
    assert_int_equal(attempts, f->s->nreqs);
    fx_free(f);
}

static void
t_max_in_flight(void **state)
{
    struct fx *f = fx_new();
    struct upstream_stats st;
    char rid[16], cid[16], err[UPSTREAM_ERR_MAX];
    int i, released = 0;

    (void)state;
    f->o.max_in_flight = 3;
    f->s->mode = M_HOLD;
    fx_start(f);
    for (i = 0; i < 10; i++) {
        snprintf(rid, sizeof(rid), "r%d", i);
        snprintf(cid, sizeof(cid), "c%d", i);
        submit(f, rid, cid);
    }
    wait_held(f, 3, 3000);
    tu_run_for(f->l, 100);
    assert_int_equal(f->s->nheld, 3);
    upstream_stats(f->u, &st);
    assert_int_equal(st.in_flight, 3);
    assert_int_equal(st.held, 10);
    /* In submit order across containers too (a FIFO of ready ones). */
    assert_true(srv_holds(f->s, "r0") && srv_holds(f->s, "r1") &&
                srv_holds(f->s, "r2"));
    /* One answered, one more starts. */
    srv_release(f->s, "r0", 200);
    wait_reqs(f, 4, 3000);
    tu_run_for(f->l, 50);
    assert_int_equal(f->s->nheld, 3);
    assert_int_equal(f->s->max_held, 3);
    assert_true(srv_holds(f->s, "r3"));
    /* A reload may raise it. */
    f->o.max_in_flight = 5;
    assert_int_equal(upstream_update(f->u, &f->o, err, sizeof(err)), 0);
    wait_held(f, 5, 3000);
    tu_run_for(f->l, 50);
    assert_int_equal(f->s->nheld, 5);
    for (i = 1; i < 10; i++) {
        snprintf(rid, sizeof(rid), "r%d", i);
        TU_RUN_UNTIL(f->l, is_held(f, rid), 3000);
        srv_release(f->s, rid, 200);
        released++;
    }
    wait_final(f, 10, 3000);
    assert_int_equal(released, 9);
    assert_int_equal(f->s->max_held, 5);
    assert_int_equal(f->s->nreqs, 10);
    fx_free(f);
}

/* Callbacks may submit: a chain of reports, one after the other. */
static void
t_submit_from_callback(void **state)
{
    struct fx *f = fx_new();
    int i;

    (void)state;
    f->chain = 5;
    fx_start(f);
    submit(f, "chain-0", "c-chain");
    wait_final(f, 5, 3000);
    tu_run_for(f->l, 50);
    assert_int_equal(f->chain_errs, 0);
    assert_int_equal(f->ndelivered, 5);
    for (i = 0; i < 5; i++) {
        char rid[16];

        snprintf(rid, sizeof(rid), "chain-%d", i);
        assert_string_equal(f->evs[i].rid, rid);
        assert_string_equal(f->s->reqs[i].idem, rid);
    }
    fx_free(f);
}

/* ---- the token -------------------------------------------------------- */

static void
t_token_never_shown(void **state)
{
    struct fx *f = fx_new();
    char *text, longtok[3000], err[UPSTREAM_ERR_MAX];

    (void)state;
    f->o.retry_base_ms = 5;
    f->o.retry_max_ms = 10;
    f->s->echo = 1;
    f->s->fail_n = 2;
    f->s->fail_code = 503;
    f->s->code = 401;
    fx_start(f);
    submit(f, "r1", "c1");
    wait_final(f, 1, 3000);
    assert_int_equal(f->nretry, 2);
    assert_int_equal(last_final(f)->kind, GOT_DEAD);
    assert_int_equal(last_final(f)->status, 401);
    /* The upstream quoted it back; the error shows where, not what. */
    assert_string_equal(last_final(f)->error, "HTTP 401: you sent "
                                              "Authorization: Bearer "
                                              "[redacted]; fix it");
    /* Near the end of what is shown, and across the end of what is
     * kept: never a piece of it. */
    f->s->echo_pad = 119; /* "[redacted]" just fits */
    submit(f, "r2", "c1");
    wait_final(f, 2, 3000);
    assert_non_null(strstr(last_final(f)->error, "Bearer [redacted]"));
    f->s->echo_pad = 125; /* it does not: cut before it */
    submit(f, "r3", "c1");
    wait_final(f, 3, 3000);
    assert_null(strstr(last_final(f)->error, "tok-"));
    assert_null(strstr(last_final(f)->error, "[redacted]"));
    f->s->echo_pad = 983; /* 10 bytes of it kept */
    submit(f, "r4", "c1");
    wait_final(f, 4, 3000);
    assert_null(strstr(last_final(f)->error, "tok-"));
    /* A token longer than what is kept of the answer (a big JWT): never
     * whole in the kept part, so never replaced; cut instead. */
    memset(longtok, 'A', sizeof(longtok) - 1);
    memcpy(longtok, TOKEN_TAG, strlen(TOKEN_TAG));
    longtok[sizeof(longtok) - 1] = '\0';
    f->o.token = longtok;
    assert_int_equal(upstream_update(f->u, &f->o, err, sizeof(err)), 0);
    f->s->echo_pad = 0;
    submit(f, "r5", "c1");
    wait_final(f, 5, 3000);
    assert_string_equal(last_final(f)->error,
                        "HTTP 401: you sent Authorization: Bearer ");
    /* Debug level logs every attempt; still no token (fx_free checks
     * the whole log, this checks it was captured at all). */
    text = logged(f);
    assert_non_null(strstr(text, "upstream: delivering to "
                                 "http://127.0.0.1:"));
    assert_non_null(strstr(text, "[redacted]"));
    free(text);
    fx_free(f);
}

static void
expect_token_error(const char *path, const char *why)
{
    char err[UPSTREAM_ERR_MAX] = "", *tok = (char *)1;

    assert_int_equal(upstream_read_token(path, &tok, err, sizeof(err)), -1);
    assert_null(tok);
    if (strstr(err, path) == NULL || strstr(err, why) == NULL)
        fail_msg("token file error \"%s\", want \"%s\"", err, why);
    assert_null(strstr(err, "SeCrEt"));
}

static void
t_read_token(void **state)
{
    char dir[] = "/tmp/reapd-upstream-tok-XXXXXX", path[96], fifo[96];
    char err[UPSTREAM_ERR_MAX], *tok = NULL, big[6000];

    (void)state;
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/token", dir);
    snprintf(fifo, sizeof(fifo), "%s/fifo", dir);
    tu_write_file(path, TOKEN "\n", strlen(TOKEN) + 1);
    assert_int_equal(upstream_read_token(path, &tok, err, sizeof(err)), 0);
    assert_string_equal(tok, TOKEN);
    upstream_token_free(tok);

    tu_write_file(path, "\n \n", 3);
    expect_token_error(path, "whitespace");
    tu_write_file(path, "SeCrEt with space", 17);
    expect_token_error(path, "whitespace");
    tu_write_file(path, "SeCrEt\x01", 7);
    expect_token_error(path, "control");
    memset(big, 'a', sizeof(big));
    tu_write_file(path, big, UPSTREAM_TOKEN_MAX + 1);
    expect_token_error(path, "more than 4096 characters");
    tu_write_file(path, big, sizeof(big));
    expect_token_error(path, "more than 4096 characters");
    tu_write_file(path, big, UPSTREAM_TOKEN_MAX);
    assert_int_equal(upstream_read_token(path, &tok, err, sizeof(err)), 0);
    assert_int_equal(strlen(tok), UPSTREAM_TOKEN_MAX);
    upstream_token_free(tok);
    unlink(path);
    expect_token_error(path, "No such file");
    expect_token_error(dir, "not a regular file");
    /* A FIFO nobody writes to must not hang the daemon. */
    assert_int_equal(mkfifo(fifo, 0600), 0);
    expect_token_error(fifo, "not a regular file");
    unlink(fifo);
    rmdir(dir);
}

/* The file's content is checked byte by byte (RFC 6750's b64token, one
 * optional trailing newline); whatever is refused, the error names the
 * file and the rule, never the content. */
static void
t_read_token_strict(void **state)
{
    static const struct {
        const char *text;
        size_t len;
        const char *why;
    } bad[] = {
        {"SeCrEt\0rest", 11, "NUL byte"},
        {"SeCrEt\0", 7, "NUL byte"},
        {"\0SeCrEt", 7, "NUL byte"},
        {"SeCrEt\n\0", 8, "NUL byte"},
        {" SeCrEt", 7, "whitespace"},
        {"\tSeCrEt", 7, "whitespace"},
        {"\nSeCrEt", 7, "whitespace"},
        {"SeCrEt ", 7, "whitespace"},
        {"SeCrEt\t", 7, "whitespace"},
        {"SeCrEt\n\n", 8, "whitespace"},
        {"SeCrEt\r\n\r\n", 10, "whitespace"},
        {"SeCrEt\r", 7, "whitespace"},
        {"SeCrEt\n ", 8, "whitespace"},
        {"SeC rEt", 7, "whitespace"},
        {"SeCrEt\x01", 7, "control"},
        {"SeCrEt\x7f", 7, "control"},
        {"SeCr\033Et", 7, "control"},
        {"SeCr\xc3\xa9t", 7, "not a bearer token"},
        {"SeCrEt,x", 8, "not a bearer token"},
        {"SeCrEt\"x", 8, "not a bearer token"},
        {"SeC=rEt", 7, "not a bearer token"},
        {"=SeCrEt", 7, "not a bearer token"},
        {"", 0, "empty"},
        {"\n", 1, "empty"},
        {"\r\n", 2, "empty"},
        {"==", 2, "not a bearer token"},
    };
    static const char *const good[] = {
        "SeCrEt", "SeCrEt\n", "SeCrEt\r\n", "a-b.c_d~e+f/g",
        "abc=",   "abc==\n",  "Zz09",       "x",
    };
    static const char *const want[] = {
        "SeCrEt", "SeCrEt", "SeCrEt", "a-b.c_d~e+f/g",
        "abc=",   "abc==",  "Zz09",   "x",
    };
    char dir[] = "/tmp/reapd-upstream-tok-XXXXXX", path[96];
    char err[UPSTREAM_ERR_MAX], *tok = NULL, big[UPSTREAM_TOKEN_MAX + 8];
    size_t i;

    (void)state;
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/token", dir);
    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        tu_write_file(path, bad[i].text, bad[i].len);
        expect_token_error(path, bad[i].why);
    }
    for (i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        tu_write_file(path, good[i], strlen(good[i]));
        if (upstream_read_token(path, &tok, err, sizeof(err)) != 0)
            fail_msg("token %zu refused: %s", i, err);
        assert_string_equal(tok, want[i]);
        upstream_token_free(tok);
    }
    /* UPSTREAM_TOKEN_MAX characters, with or without a newline, and not
     * one more. */
    memset(big, 'a', sizeof(big));
    big[UPSTREAM_TOKEN_MAX] = '\r';
    big[UPSTREAM_TOKEN_MAX + 1] = '\n';
    tu_write_file(path, big, UPSTREAM_TOKEN_MAX + 2);
    assert_int_equal(upstream_read_token(path, &tok, err, sizeof(err)), 0);
    assert_int_equal(strlen(tok), UPSTREAM_TOKEN_MAX);
    upstream_token_free(tok);
    big[UPSTREAM_TOKEN_MAX] = 'a';
    tu_write_file(path, big, UPSTREAM_TOKEN_MAX + 1);
    expect_token_error(path, "more than 4096 characters");
    big[UPSTREAM_TOKEN_MAX + 1] = '\n';
    tu_write_file(path, big, UPSTREAM_TOKEN_MAX + 2);
    expect_token_error(path, "more than 4096 characters");
    tu_write_file(path, big, sizeof(big));
    expect_token_error(path, "more than 4096 characters");
    unlink(path);
    rmdir(dir);
}

/* ---- the API's edges -------------------------------------------------- */

static void
expect_bad_opts(struct fx *f, const char *why)
{
    char err[UPSTREAM_ERR_MAX] = "";
    struct upstream *u = (struct upstream *)1;

    assert_int_equal(upstream_new(f->l, &f->o, &cbs, f, &u, err, sizeof(err)),
                     -1);
    assert_null(u);
    if (strstr(err, why) == NULL)
        fail_msg("upstream_new: \"%s\", want \"%s\"", err, why);
    assert_null(strstr(err, TOKEN_TAG));
    assert_null(strstr(err, "SeCrEt"));
}

static void
t_bad_options(void **state)
{
    struct fx *f = fx_new();
    struct config_header h[2] = {{"Authorization", "Basic SeCrEt"},
                                 {"X", "y"}};
    struct upstream_opts keep = f->o;

    (void)state;
    f->o.url = NULL;
    expect_bad_opts(f, "no url");
    f->o.url = "ftp://example.org/";
    expect_bad_opts(f, "not http:// or https://");
    f->o.url = "http://";
    expect_bad_opts(f, "no host");
    f->o.url = "http://a b/";
    expect_bad_opts(f, "no host");
    f->o = keep;
    f->o.timeout_ms = 0;
    expect_bad_opts(f, "timeout_ms");
    f->o = keep;
    f->o.token = "tok-5EcReT with space";
    expect_bad_opts(f, "the token");
    f->o.token = "tok-5EcReT\r\nX-Evil: 1";
    expect_bad_opts(f, "the token");
    f->o.token = "";
    expect_bad_opts(f, "the token");
    f->o = keep;
    f->o.headers = h;
    f->o.nheaders = 1;
    expect_bad_opts(f, "\"Authorization\" and a token");
    f->o.token = NULL; /* alone, it is just a header */
    f->o.nheaders = 2;
    h[1].name = "Idempotency-Key";
    expect_bad_opts(f, "set by reapd itself");
    h[1].name = "Content-Type";
    expect_bad_opts(f, "set by reapd itself");
    h[1].name = "Bad Name";
    expect_bad_opts(f, "a name is not valid");
    h[1].name = "X-Ok";
    h[1].value = "SeCrEt\r\nX-Evil: 1";
    expect_bad_opts(f, "CR, LF");
    f->o = keep;
    f->o.ca_file = "/dev/null";
    expect_bad_opts(f, "only for https://");
    f->o.url = "https://example.org/";
    f->o.ca_file = "/nonexistent/ca.pem";
    expect_bad_opts(f, "No such file");
    f->o.ca_file = NULL;
    f->o.client_key = "/dev/null";
    expect_bad_opts(f, "needs client_cert");
    f->o = keep;
    f->o.retry_base_ms = 100;
    f->o.retry_max_ms = 50;
    expect_bad_opts(f, "retry_max_ms");
    f->o = keep;
    f->o.max_in_flight = 5000;
    expect_bad_opts(f, "max_in_flight");
    f->o = keep;
    fx_free(f);
}

static void
t_bad_submits(void **state)
{
    struct fx *f = fx_new();
    char longid[UPSTREAM_ID_MAX + 1];
    struct upstream_stats st;

    (void)state;
    fx_start(f);
    memset(longid, 'a', sizeof(longid) - 1);
    longid[UPSTREAM_ID_MAX] = '\0';
    assert_int_equal(upstream_submit(f->u, "", "c", "{}", 2), -EINVAL);
    assert_int_equal(upstream_submit(f->u, NULL, "c", "{}", 2), -EINVAL);
    assert_int_equal(upstream_submit(f->u, "r 1", "c", "{}", 2), -EINVAL);
    assert_int_equal(upstream_submit(f->u, "r\n1", "c", "{}", 2), -EINVAL);
    assert_int_equal(upstream_submit(f->u, longid, "c", "{}", 2), -EINVAL);
    assert_int_equal(upstream_submit(f->u, "r1", NULL, "{}", 2), -EINVAL);
    assert_int_equal(upstream_submit(f->u, "r1", "c", NULL, 2), -EINVAL);
    assert_int_equal(
        upstream_submit(f->u, "r1", "c", "{}", UPSTREAM_BODY_MAX + 1),
        -EMSGSIZE);
    longid[UPSTREAM_ID_MAX - 1] = '\0'; /* the longest that fits */
    assert_int_equal(upstream_submit(f->u, longid, "c", "{}", 2), 0);
    assert_int_equal(upstream_submit(f->u, "r1", "c", "{}", 2), 0);
    assert_int_equal(upstream_submit(f->u, "r1", "c", "{}", 2), -EEXIST);
    assert_int_equal(upstream_submit(f->u, "r2", "c", NULL, 0), 0);
    upstream_stats(f->u, &st);
    assert_int_equal(st.held, 3);
    wait_final(f, 3, 3000);
    assert_int_equal(f->ndelivered, 3);
    assert_int_equal(f->s->reqs[2].body_len, 0);
    /* Delivered, so no longer held: the same id may come again. */
    assert_int_equal(upstream_submit(f->u, "r1", "c", "{}", 2), 0);
    wait_final(f, 4, 3000);
    fx_free(f);
}

/* ---- upstream_free ---------------------------------------------------- */

static void
t_free_in_flight(void **state)
{
    struct fx *f = fx_new();
    struct upstream_stats st;
    int nevs, nreqs;

    (void)state;
    f->o.retry_base_ms = 200;
    f->o.retry_max_ms = 200;
    f->s->fail_n = 1;
    f->s->fail_code = 503;
    fx_start(f);
    submit(f, "w1", "cw"); /* will wait on its retry timer */
    wait_retries(f, 1, 3000);
    f->s->mode = M_HOLD;
    submit(f, "h1", "c1");
    submit(f, "h2", "c2");
    submit(f, "h3", "c3");
    submit(f, "h4", "c3"); /* queued behind h3 */
    wait_held(f, 3, 3000);
    upstream_stats(f->u, &st);
    assert_int_equal(st.in_flight, 3);
    assert_int_equal(st.waiting, 1);
    assert_int_equal(st.held, 5);
    assert_int_equal(loop_http_active(f->l), 3);
    nevs = f->nevs;
    nreqs = f->s->nreqs;
    upstream_free(f->u);
    f->u = NULL;
    assert_int_equal(loop_http_active(f->l), 0);
    tu_run_for(f->l, 400); /* past the retry timer */
    assert_int_equal(f->nevs, nevs);
    assert_int_equal(f->s->nreqs, nreqs);
    fx_free(f);
}

static void
t_free_in_callback(void **state)
{
    struct fx *f = fx_new();
    int i;

    (void)state;
    fx_start(f);
    for (i = 0; i < 4; i++) {
        char rid[8], cid[8];

        snprintf(rid, sizeof(rid), "r%d", i);
        snprintf(cid, sizeof(cid), "c%d", i);
        submit(f, rid, cid);
    }
    submit(f, "r4", "c0");
    f->free_in_cb = 1;
    wait_final(f, 1, 3000);
    tu_run_for(f->l, 200);
    assert_null(f->u);
    assert_int_equal(f->nevs, 1);
    assert_int_equal(loop_http_active(f->l), 0);

    /* And from a retry callback, with the retry timer armed. */
    f->s->fail_n = 2; /* both fail: the first callback is a retry */
    f->s->fail_code = 500;
    fx_start(f);
    submit(f, "x1", "c0");
    submit(f, "x2", "c1");
    f->free_in_cb = 1;
    wait_retries(f, 1, 3000);
    tu_run_for(f->l, 200);
    assert_null(f->u);
    assert_int_equal(f->nevs, 2);
    fx_free(f);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(t_delivered_once),
        cmocka_unit_test(t_2xx_no_token),
        cmocka_unit_test(t_retry_503_then_200),
        cmocka_unit_test(t_dead_400),
        cmocka_unit_test(t_status_classes),
        cmocka_unit_test(t_retry_after),
        cmocka_unit_test(t_hang_timeout),
        cmocka_unit_test(t_reset),
        cmocka_unit_test(t_refused_then_update),
        cmocka_unit_test(t_tls_options),
        cmocka_unit_test(t_big_answers),
        cmocka_unit_test(t_order_per_container),
        cmocka_unit_test(t_order_random),
        cmocka_unit_test(t_max_in_flight),
        cmocka_unit_test(t_submit_from_callback),
        cmocka_unit_test(t_token_never_shown),
        cmocka_unit_test(t_read_token),
        cmocka_unit_test(t_read_token_strict),
        cmocka_unit_test(t_bad_options),
        cmocka_unit_test(t_bad_submits),
        cmocka_unit_test(t_free_in_flight),
        cmocka_unit_test(t_free_in_callback),
    };

    signal(SIGPIPE, SIG_IGN); /* the receiver may write to a closed peer */
    tu_test_filters();
    return cmocka_run_group_tests(tests, NULL, NULL);
}
