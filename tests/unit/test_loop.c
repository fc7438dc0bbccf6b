/*
 * test_loop — the libevent + libcurl multi glue in agent/loop.c, driven
 * for real: a small evhttp server listens on 127.0.0.1 (an ephemeral
 * port) and on a unix socket, on the loop's own event_base, so every
 * request crosses a real socket and every callback runs from the loop.
 *
 * What must hold: buffered and streamed bodies arrive whole and in order,
 * every failure maps to its http_error, and a call can be cancelled or a
 * new one started from inside any callback without a crash, a leak or a
 * stray callback afterwards.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <event2/listener.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "loop.h"
#include "testutil.h"

#define STREAM_CHUNKS 5
#define MAX_PENDING   128

/* The monotonic clock agent/loop.c reads: this binary is linked with
 * --wrap=clock_gettime (tests/CMakeLists.txt). While clock_jump_ns is
 * set, each read is that much later than the last, as on a host whose
 * CPU is taken away between any two reads; libevent and libcurl, shared
 * libraries, keep the real clock. */
static uint64_t clock_jump_ns, clock_skew_ns;
int __real_clock_gettime(clockid_t id, struct timespec *ts);
int __wrap_clock_gettime(clockid_t id, struct timespec *ts);

int
__wrap_clock_gettime(clockid_t id, struct timespec *ts)
{
    int rc = __real_clock_gettime(id, ts);
    uint64_t ns;

    if (rc != 0 || id != CLOCK_MONOTONIC || clock_jump_ns == 0)
        return rc;
    clock_skew_ns += clock_jump_ns;
    ns = (uint64_t)ts->tv_sec * 1000000000u + (uint64_t)ts->tv_nsec +
         clock_skew_ns;
    ts->tv_sec = (time_t)(ns / 1000000000u);
    ts->tv_nsec = (long)(ns % 1000000000u);
    return rc;
}

/* The real clock again, however the test ended. */
static int
clock_real(void **state)
{
    (void)state;
    clock_jump_ns = 0;
    return 0;
}

/* Real milliseconds, for waits while the clock above jumps. */
static uint64_t
real_ms(void)
{
    struct timespec ts;

    __real_clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* ---- the test server -------------------------------------------------- */

/* A request the server answers later (a stream) or never. */
struct pend {
    struct srv *s;
    struct evhttp_request *req;
    struct evhttp_connection *conn;
    struct event *timer;
    int chunks_left; /* stream: chunks still to send; -1 = never answer */
    int sent;
    int owned; /* the client left: evhttp detached it, ours to free */
    int used;
};

struct srv {
    struct event_base *base;
    struct evhttp *http;
    int port;
    char dir[64];
    char sock[96];
    int freeing;
    struct pend pend[MAX_PENDING];
    int stream_interval_ms;
    int stream_forever; /* /stream keeps going until the client leaves */
    /* What the last /echo request carried, for the tests to check. */
    char echo_method[16];
    char echo_body[256];
    char echo_hdr[64];
    char echo_ctype[64];
    int nrequests;
    int nstreams_open;
    int slow_now, slow_max; /* /slow requests held at once, and the most */
    int nclosed;            /* pending requests whose client went away */
    void *last_conn;        /* the connection of the last request */
    int nconns;             /* requests on another connection than the last */
};

static struct pend *
pend_new(struct srv *s, struct evhttp_request *req)
{
    int i;

    for (i = 0; i < MAX_PENDING; i++) {
        if (!s->pend[i].used) {
            struct pend *p = &s->pend[i];

            memset(p, 0, sizeof(*p));
            p->used = 1;
            p->s = s;
            p->req = req;
            p->conn = evhttp_request_get_connection(req);
            return p;
        }
    }
    fail_msg("test server: too many pending requests");
    return NULL;
}

static void
pend_drop(struct pend *p)
{
    if (p->timer != NULL)
        event_free(p->timer);
    p->timer = NULL;
    p->used = 0;
}

/*
 * The client closed a connection. evhttp detaches a request still being
 * answered (evcon NULL) and leaves it to us; one still attached is freed
 * by evhttp with the connection.
 */
static void
on_conn_close(struct evhttp_connection *conn, void *arg)
{
    struct srv *s = arg;
    int i;

    if (s->freeing)
        return;
    if ((void *)conn == s->last_conn)
        s->last_conn = NULL; /* the next may get its address */
    for (i = 0; i < MAX_PENDING; i++) {
        struct pend *p = &s->pend[i];

        if (!p->used || p->conn != conn || p->owned)
            continue;
        s->nclosed++;
        if (p->chunks_left >= 0)
            s->nstreams_open--;
        if (p->timer != NULL)
            evtimer_del(p->timer);
        if (evhttp_request_get_connection(p->req) == NULL)
            p->owned = 1; /* freed in srv_free */
        else
            pend_drop(p);
    }
}

static void
on_stream_tick(evutil_socket_t fd, short what, void *arg)
{
    struct pend *p = arg;
    struct evbuffer *b;
    struct timeval tv = {0, p->s->stream_interval_ms * 1000};

    (void)fd;
    (void)what;
    if (p->chunks_left == 0) {
        p->s->nstreams_open--;
        evhttp_send_reply_end(p->req);
        pend_drop(p);
        return;
    }
    b = evbuffer_new();
    evbuffer_add_printf(b, "chunk%d\n", p->sent);
    evhttp_send_reply_chunk(p->req, b);
    evbuffer_free(b);
    p->sent++;
    if (!p->s->stream_forever)
        p->chunks_left--;
    evtimer_add(p->timer, &tv);
}

static void reply_text(struct evhttp_request *req, int code, const char *body);

/* /slow: answered 50 ms after it arrived. */
static void
on_slow_tick(evutil_socket_t fd, short what, void *arg)
{
    struct pend *p = arg;

    (void)fd;
    (void)what;
    p->s->slow_now--;
    reply_text(p->req, 200, "slow");
    pend_drop(p);
}

static void
reply_text(struct evhttp_request *req, int code, const char *body)
{
    struct evbuffer *b = evbuffer_new();

    evbuffer_add(b, body, strlen(body));
    evhttp_add_header(evhttp_request_get_output_headers(req), "X-Test-Header",
                      "yes");
    evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
                      "text/plain");
    evhttp_send_reply(req, code, "X", b);
    evbuffer_free(b);
}

static const char *
method_name(enum evhttp_cmd_type m)
{
    switch (m) {
    case EVHTTP_REQ_GET:
        return "GET";
    case EVHTTP_REQ_POST:
        return "POST";
    case EVHTTP_REQ_DELETE:
        return "DELETE";
    case EVHTTP_REQ_PUT:
        return "PUT";
    default:
        return "OTHER";
    }
}

static void
on_request(struct evhttp_request *req, void *arg)
{
    struct srv *s = arg;
    const char *path = evhttp_uri_get_path(evhttp_request_get_evhttp_uri(req));
    struct evhttp_connection *conn = evhttp_request_get_connection(req);

    s->nrequests++;
    if ((void *)conn != s->last_conn) {
        s->last_conn = conn;
        s->nconns++;
    }
    evhttp_connection_set_closecb(conn, on_conn_close, s);
    if (strcmp(path, "/hello") == 0) {
        reply_text(req, 200, "hello world");
    } else if (strncmp(path, "/num/", 5) == 0) {
        /* Each concurrent request gets its own answer back. */
        char body[64];

        snprintf(body, sizeof(body), "n=%s", path + 5);
        reply_text(req, 200, body);
    } else if (strcmp(path, "/status/418") == 0) {
        reply_text(req, 418, "teapot");
    } else if (strcmp(path, "/echo") == 0) {
        struct evbuffer *in = evhttp_request_get_input_buffer(req);
        size_t n = evbuffer_get_length(in);

        snprintf(s->echo_method, sizeof(s->echo_method), "%s",
                 method_name(evhttp_request_get_command(req)));
        if (n >= sizeof(s->echo_body))
            n = sizeof(s->echo_body) - 1;
        evbuffer_copyout(in, s->echo_body, n);
        s->echo_body[n] = '\0';
        tu_http_header(req, "X-Reapd-Test", s->echo_hdr, sizeof(s->echo_hdr));
        tu_http_header(req, "Content-Type", s->echo_ctype,
                       sizeof(s->echo_ctype));
        /* The server checks too, so the status says it all. */
        reply_text(req,
                   strcmp(s->echo_hdr, "abc 123") == 0 &&
                           strcmp(s->echo_ctype, "application/json") == 0
                       ? 201
                       : 400,
                   s->echo_body);
    } else if (strncmp(path, "/big/", 5) == 0) {
        size_t n = (size_t)strtoul(path + 5, NULL, 10);
        char *body = malloc(n + 1);

        memset(body, 'x', n);
        body[n] = '\0';
        reply_text(req, 200, body);
        free(body);
    } else if (strcmp(path, "/slow") == 0) {
        struct pend *p = pend_new(s, req);
        struct timeval tv = {0, 50000};

        p->chunks_left = -2;
        p->timer = evtimer_new(s->base, on_slow_tick, p);
        evtimer_add(p->timer, &tv);
        if (++s->slow_now > s->slow_max)
            s->slow_max = s->slow_now;
    } else if (strcmp(path, "/never") == 0) {
        struct pend *p = pend_new(s, req);

        p->chunks_left = -1;
    } else if (strcmp(path, "/pair") == 0) {
        /* Two chunks at once, then nothing: a stream gone quiet with its
         * last pieces in the socket. */
        struct pend *p = pend_new(s, req);
        struct evbuffer *b = evbuffer_new();
        int i;

        p->chunks_left = -1;
        evhttp_send_reply_start(req, 200, "OK");
        for (i = 0; i < 2; i++) {
            evbuffer_add_printf(b, "piece%d\n", i);
            evhttp_send_reply_chunk(req, b);
        }
        evbuffer_free(b);
    } else if (strcmp(path, "/big") == 0) {
        /* 512 KiB at once, byte i = i % 251: already in the socket
         * buffers when the client reads, as a big list answer is. */
        struct evbuffer *b = evbuffer_new();
        static char big[512 * 1024];
        size_t i;

        for (i = 0; i < sizeof(big); i++)
            big[i] = (char)(i % 251);
        evbuffer_add(b, big, sizeof(big));
        evhttp_send_reply(req, 200, "OK", b);
        evbuffer_free(b);
    } else if (strcmp(path, "/stream") == 0) {
        struct pend *p = pend_new(s, req);
        struct timeval tv = {0, s->stream_interval_ms * 1000};

        p->chunks_left = STREAM_CHUNKS;
        p->timer = evtimer_new(s->base, on_stream_tick, p);
        evhttp_add_header(evhttp_request_get_output_headers(req),
                          "Content-Type", "application/x-ndjson");
        evhttp_send_reply_start(req, 200, "OK");
        s->nstreams_open++;
        /* The first chunk goes out only after a pause, so the headers
         * surely come in a callback of their own before any data. */
        evtimer_add(p->timer, &tv);
    } else {
        reply_text(req, 404, "no such path");
    }
}

static struct srv *
srv_new(struct event_base *base)
{
    struct srv *s = calloc(1, sizeof(*s));
    struct sockaddr_un sun;
    struct evconnlistener *lev;

    assert_non_null(s);
    s->base = base;
    s->stream_interval_ms = 30;
    s->http = evhttp_new(base);
    assert_non_null(s->http);
    evhttp_set_allowed_methods(s->http, EVHTTP_REQ_GET | EVHTTP_REQ_POST |
                                            EVHTTP_REQ_DELETE |
                                            EVHTTP_REQ_PUT);
    evhttp_set_gencb(s->http, on_request, s);

    s->port = tu_http_bind(s->http);

    snprintf(s->dir, sizeof(s->dir), "/tmp/reapd-loop-XXXXXX");
    assert_non_null(mkdtemp(s->dir));
    snprintf(s->sock, sizeof(s->sock), "%s/srv.sock", s->dir);
    memset(&sun, 0, sizeof(sun));
    sun.sun_family = AF_UNIX;
    snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", s->sock);
    lev = evconnlistener_new_bind(base, NULL, NULL, LEV_OPT_CLOSE_ON_FREE, 128,
                                  (struct sockaddr *)&sun, sizeof(sun));
    assert_non_null(lev);
    assert_non_null(evhttp_bind_listener(s->http, lev));
    return s;
}

static void
srv_free(struct srv *s)
{
    int i;

    s->freeing = 1;
    for (i = 0; i < MAX_PENDING; i++) {
        struct pend *p = &s->pend[i];

        if (!p->used)
            continue;
        /* Detached ones are ours; attached ones go with evhttp_free. */
        if (p->owned)
            evhttp_request_free(p->req);
        pend_drop(p);
    }
    evhttp_free(s->http);
    unlink(s->sock);
    rmdir(s->dir);
    free(s);
}

/* ---- a client's view of one call ------------------------------------- */

struct rec {
    struct loop *l;
    struct loop_http_call *call;
    int nheaders;
    long hstatus;
    int ndata;
    int data_before_headers;
    char data[1024];
    size_t data_len;
    uint64_t first_data_ms, done_ms;
    int done;
    enum loop_http_error error;
    long status;
    char *body; /* copy of the buffered body */
    size_t body_len;
    int body_null;
    char header_val[64];
    int header_found;
    char errmsg[256];
    /* Behaviour knobs. */
    int abort_at_data;  /* on_data returns -1 on this call (1-based) */
    int cancel_at_data; /* on_data cancels its own call on this call */
    int cancel_in_headers;
    int spawn_in_data; /* on_data starts a new GET /hello (once) */
    const char *spawn_url;
    struct rec *spawned;
    size_t active_after_spawn;
    int break_loop;     /* on_data breaks out of the event loop */
    struct rec *victim; /* on_data cancels this other call (once) */
};

static void
rec_headers(long status, void *arg)
{
    struct rec *r = arg;

    r->nheaders++;
    r->hstatus = status;
    if (r->cancel_in_headers) {
        loop_http_cancel(r->call);
        r->call = NULL;
    }
}

static void rec_done(const struct loop_http_resp *res, void *arg);

static int
rec_data(const char *buf, size_t len, void *arg)
{
    struct rec *r = arg;

    r->ndata++;
    if (r->nheaders == 0)
        r->data_before_headers++;
    if (r->ndata == 1)
        r->first_data_ms = loop_now_ms();
    if (r->data_len + len < sizeof(r->data)) {
        memcpy(r->data + r->data_len, buf, len);
        r->data_len += len;
        r->data[r->data_len] = '\0';
    }
    if (r->spawn_in_data && r->spawned == NULL) {
        struct loop_http_req req = {.url = r->spawn_url};

        r->spawned = calloc(1, sizeof(*r->spawned));
        assert_non_null(r->spawned);
        r->spawned->l = r->l;
        r->spawned->call =
            loop_http(r->l, &req, rec_headers, NULL, rec_done, r->spawned);
        assert_non_null(r->spawned->call);
        r->active_after_spawn = loop_http_active(r->l);
        if (r->break_loop)
            event_base_loopbreak(loop_base(r->l));
    }
    if (r->abort_at_data == r->ndata)
        return -1;
    if (r->cancel_at_data == r->ndata) {
        loop_http_cancel(r->call);
        r->call = NULL;
    }
    if (r->victim != NULL && r->victim->call != NULL) {
        loop_http_cancel(r->victim->call);
        r->victim->call = NULL;
    }
    return 0;
}

static void
rec_done(const struct loop_http_resp *res, void *arg)
{
    struct rec *r = arg;
    const char *h;

    r->done++;
    r->done_ms = loop_now_ms();
    r->error = res->error;
    r->status = res->status;
    r->body_null = res->body == NULL;
    if (res->body != NULL) {
        free(r->body);
        r->body = malloc(res->body_len + 1);
        assert_non_null(r->body);
        memcpy(r->body, res->body, res->body_len);
        r->body[res->body_len] = '\0';
        r->body_len = res->body_len;
        /* The loop promises a NUL after the body. */
        assert_int_equal(res->body[res->body_len], '\0');
    }
    if (res->errmsg != NULL)
        snprintf(r->errmsg, sizeof(r->errmsg), "%s", res->errmsg);
    h = loop_http_header(res, "x-TEST-header");
    if (h != NULL) {
        r->header_found = 1;
        snprintf(r->header_val, sizeof(r->header_val), "%s", h);
    }
    r->call = NULL;
}

static void
rec_clear(struct rec *r)
{
    if (r->spawned != NULL) {
        rec_clear(r->spawned);
        free(r->spawned);
        r->spawned = NULL;
    }
    free(r->body);
    r->body = NULL;
}

/* ---- running the loop ------------------------------------------------- */

struct fx {
    struct loop *l;
    struct srv *s;
    char url[128];
};

static struct fx *
fx_new(void)
{
    struct fx *f = calloc(1, sizeof(*f));

    assert_non_null(f);
    f->l = loop_new();
    assert_non_null(f->l);
    f->s = srv_new(loop_base(f->l));
    return f;
}

static void
fx_free(struct fx *f)
{
    srv_free(f->s);
    loop_free(f->l);
    free(f);
}

static const char *
tcp_url(struct fx *f, const char *path)
{
    snprintf(f->url, sizeof(f->url), "http://127.0.0.1:%d%s", f->s->port,
             path);
    return f->url;
}

/* ---- tests ------------------------------------------------------------ */

static void
check_hello(struct rec *r)
{
    assert_int_equal(r->done, 1);
    assert_int_equal(r->error, HTTPC_OK);
    assert_int_equal(r->status, 200);
    assert_int_equal(r->nheaders, 1);
    assert_int_equal(r->hstatus, 200);
    assert_false(r->body_null);
    assert_int_equal(r->body_len, 11);
    assert_string_equal(r->body, "hello world");
    assert_true(r->header_found);
    assert_string_equal(r->header_val, "yes");
}

static void
t_get_buffered_tcp(void **state)
{
    struct fx *f = fx_new();
    struct rec r = {0};
    struct loop_http_req req = {.url = tcp_url(f, "/hello")};

    (void)state;
    r.call = loop_http(f->l, &req, rec_headers, NULL, rec_done, &r);
    assert_non_null(r.call);
    /* Never blocks, never calls back from inside loop_http. */
    assert_int_equal(r.done, 0);
    TU_RUN_UNTIL(f->l, r.done > 0, 3000);
    check_hello(&r);
    rec_clear(&r);
    fx_free(f);
}

static void
t_get_buffered_unix(void **state)
{
    struct fx *f = fx_new();
    struct rec r = {0};
    struct loop_http_req req = {.url = "http://localhost/hello",
                                .unix_socket = f->s->sock};

    (void)state;
    r.call = loop_http(f->l, &req, rec_headers, NULL, rec_done, &r);
    assert_non_null(r.call);
    TU_RUN_UNTIL(f->l, r.done > 0, 3000);
    check_hello(&r);
    rec_clear(&r);
    fx_free(f);
}

/* A unix socket is reached directly whatever proxy the environment
 * names (each of the variables libcurl reads): libcurl applies no proxy
 * to one, so an http_proxy set for the upstream never takes the
 * engine's or containerd's calls. */
static void
t_unix_ignores_proxy_env(void **state)
{
    static const char *const vars[] = {"http_proxy", "HTTP_PROXY", "all_proxy",
                                       "ALL_PROXY"};
    struct fx *f = fx_new();
    struct rec r = {0};
    struct loop_http_req req = {.url = "http://localhost/hello",
                                .unix_socket = f->s->sock};
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
        /* A port nothing listens on: a call sent there fails. */
        assert_int_equal(setenv(vars[i], "http://127.0.0.1:9", 1), 0);
        r.call = loop_http(f->l, &req, rec_headers, NULL, rec_done, &r);
        assert_non_null(r.call);
        TU_RUN_UNTIL(f->l, r.done > 0, 3000);
        check_hello(&r);
        rec_clear(&r);
        memset(&r, 0, sizeof(r));
        assert_int_equal(unsetenv(vars[i]), 0);
    }
    fx_free(f);
}

/* Any status is a response: HTTPC_OK with the status and body. */
static void
t_non_2xx_is_ok(void **state)
{
    struct fx *f = fx_new();
    struct rec r = {0}, r2 = {0};
    struct loop_http_req req = {.url = tcp_url(f, "/status/418")};

    (void)state;
    r.call = loop_http(f->l, &req, NULL, NULL, rec_done, &r);
    assert_non_null(r.call);
    TU_RUN_UNTIL(f->l, r.done > 0, 3000);
    assert_int_equal(r.error, HTTPC_OK);
    assert_int_equal(r.status, 418);
    assert_string_equal(r.body, "teapot");
    req.url = tcp_url(f, "/missing");
    r2.call = loop_http(f->l, &req, NULL, NULL, rec_done, &r2);
    TU_RUN_UNTIL(f->l, r2.done > 0, 3000);
    assert_int_equal(r2.error, HTTPC_OK);
    assert_int_equal(r2.status, 404);
    assert_string_equal(r2.body, "no such path");
    rec_clear(&r);
    rec_clear(&r2);
    fx_free(f);
}

static void
t_post_body_and_headers(void **state)
{
    struct fx *f = fx_new();
    struct rec r = {0}, r2 = {0};
    const char *hdrs[] = {"X-Reapd-Test: abc 123",
                          "Content-Type: application/json"};
    /* An embedded NUL: body_len, not strlen, is the length. */
    static const char body[] = "{\"a\":\"b\\\"q\"}\0tail";
    struct loop_http_req req = {.method = "POST",
                                .url = tcp_url(f, "/echo"),
                                .body = body,
                                .body_len = 12,
                                .headers = hdrs,
                                .nheaders = 2};

    (void)state;
    r.call = loop_http(f->l, &req, NULL, NULL, rec_done, &r);
    assert_non_null(r.call);
    TU_RUN_UNTIL(f->l, r.done > 0, 3000);
    assert_int_equal(r.error, HTTPC_OK);
    assert_string_equal(f->s->echo_method, "POST");
    assert_string_equal(f->s->echo_body, "{\"a\":\"b\\\"q\"}");
    assert_string_equal(f->s->echo_hdr, "abc 123");
    assert_string_equal(f->s->echo_ctype, "application/json");
    assert_int_equal(r.status, 201);
    assert_string_equal(r.body, "{\"a\":\"b\\\"q\"}");

    /* Other methods go as a custom request, over the unix socket too. */
    req.method = "DELETE";
    req.url = "http://localhost/echo";
    req.unix_socket = f->s->sock;
    req.body = NULL;
    req.body_len = 0;
    r2.call = loop_http(f->l, &req, NULL, NULL, rec_done, &r2);
    TU_RUN_UNTIL(f->l, r2.done > 0, 3000);
    assert_int_equal(r2.error, HTTPC_OK);
    assert_int_equal(r2.status, 201);
    assert_string_equal(f->s->echo_method, "DELETE");
    assert_string_equal(f->s->echo_body, "");
    rec_clear(&r);
    rec_clear(&r2);
    fx_free(f);
}

/* A finished call's handle serves the next call, and nothing of the first
 * (method, body, headers) rides along with the second. */
static void
t_handle_kept_clean(void **state)
{
    struct fx *f = fx_new();
    struct rec r = {0}, r2 = {0}, r3 = {0};
    const char *hdrs[] = {"X-Reapd-Test: abc 123",
                          "Content-Type: application/json"};
    struct loop_http_req req = {.method = "POST",
                                .url = tcp_url(f, "/echo"),
                                .body = "{}",
                                .body_len = 2,
                                .headers = hdrs,
                                .nheaders = 2};
    struct loop_http_req get = {.url = tcp_url(f, "/echo")};
    uint64_t made;

    (void)state;
    r.call = loop_http(f->l, &req, NULL, NULL, rec_done, &r);
    assert_non_null(r.call);
    TU_RUN_UNTIL(f->l, r.done > 0, 3000);
    assert_int_equal(r.status, 201);
    made = loop_easy_made(f->l);
    assert_true(made >= 1);

    r2.call = loop_http(f->l, &get, NULL, NULL, rec_done, &r2);
    assert_non_null(r2.call);
    TU_RUN_UNTIL(f->l, r2.done > 0, 3000);
    assert_int_equal(r2.error, HTTPC_OK);
    assert_int_equal(loop_easy_made(f->l), made);
    assert_string_equal(f->s->echo_method, "GET");
    assert_string_equal(f->s->echo_body, "");
    assert_string_equal(f->s->echo_hdr, "(none)");
    assert_string_equal(f->s->echo_ctype, "(none)");
    assert_int_equal(r2.status, 400); /* the server missed the headers */

    /* And back: the kept handle takes a POST's options again. */
    r3.call = loop_http(f->l, &req, NULL, NULL, rec_done, &r3);
    TU_RUN_UNTIL(f->l, r3.done > 0, 3000);
    assert_int_equal(loop_easy_made(f->l), made);
    assert_int_equal(r3.status, 201);
    assert_string_equal(f->s->echo_body, "{}");
    rec_clear(&r);
    rec_clear(&r2);
    rec_clear(&r3);
    fx_free(f);
}

static void
t_stream_in_order(void **state)
{
    struct fx *f = fx_new();
    struct rec r = {0};
    struct loop_http_req req = {.url = "http://localhost/stream",
                                .unix_socket = f->s->sock};

    (void)state;
    r.call = loop_http(f->l, &req, rec_headers, rec_data, rec_done, &r);
    assert_non_null(r.call);
    TU_RUN_UNTIL(f->l, r.done > 0, 3000);
    assert_int_equal(r.error, HTTPC_OK);
    assert_int_equal(r.status, 200);
    assert_int_equal(r.nheaders, 1);
    assert_int_equal(r.hstatus, 200);
    assert_int_equal(r.data_before_headers, 0);
    assert_string_equal(r.data, "chunk0\nchunk1\nchunk2\nchunk3\nchunk4\n");
    /* Streamed, not buffered: no body in on_done, and data came in
     * pieces well before the end. */
    assert_true(r.body_null);
    assert_true(r.ndata >= 2);
    assert_true(r.done_ms - r.first_data_ms >= 60);
    assert_int_equal(loop_http_active(f->l), 0);
    assert_int_equal(f->s->nstreams_open, 0);
    rec_clear(&r);
    fx_free(f);
}

/* ---- yielding calls ---------------------------------------------------- */

/*
 * A turn is told by libevent's time of it (loop_new_turn), the same for
 * every callback of one turn. A 0 ms timer re-armed each turn could not
 * tell them: timers due together run in no set order, so it ran after a
 * data callback in one turn and before the next turn's, and counted both
 * in one (seen under valgrind). libevent reads that time from a coarse
 * clock (4 ms here), so each callback takes longer than its tick: the
 * next turn's time then differs (busy_ns).
 */
struct yrec {
    struct loop *l;
    struct timeval turn;
    size_t len, bad;
    unsigned ndata, same_turn, max_same_turn;
    unsigned shared; /* turns that handed over more than one */
    int done;
    enum loop_http_error error;
};

/* More than a turn's share (2 ms), as parsing a big answer takes, and
 * more than a tick of the clock libevent reads a turn's time from. */
static uint64_t
busy_ns(void)
{
    struct timespec res;
    uint64_t ns = 3000000u, tick;

    if (clock_getres(CLOCK_MONOTONIC_COARSE, &res) == 0) {
        tick = (uint64_t)res.tv_sec * 1000000000u + (uint64_t)res.tv_nsec;
        if (tick + 1000000u > ns)
            ns = tick + 1000000u;
    }
    return ns;
}

/* Holds the loop for `ns`, as parsing a piece of a big answer does. */
static void
spin_ns(uint64_t ns)
{
    uint64_t t0 = loop_now_ns();

    while (loop_now_ns() - t0 < ns)
        ;
}

/* Checks every byte, and takes busy_ns() per call. */
static int
yrec_data(const char *buf, size_t len, void *arg)
{
    struct yrec *y = arg;
    size_t i;

    for (i = 0; i < len; i++)
        if ((unsigned char)buf[i] != (y->len + i) % 251)
            y->bad++;
    y->len += len;
    if (loop_new_turn(y->l, &y->turn))
        y->same_turn = 1;
    else if (++y->same_turn == 2)
        y->shared++;
    y->ndata++;
    if (y->same_turn > y->max_same_turn)
        y->max_same_turn = y->same_turn;
    spin_ns(busy_ns());
    return 0;
}

static void
yrec_done(const struct loop_http_resp *res, void *arg)
{
    struct yrec *y = arg;

    y->error = res->error;
    y->done = 1;
}

static void
run_big(struct fx *f, int yield, struct yrec *y)
{
    struct loop_http_req req = {.url = "http://localhost/big",
                                .unix_socket = f->s->sock,
                                .yield = yield};

    memset(y, 0, sizeof(*y));
    y->l = f->l;
    assert_non_null(loop_http(f->l, &req, NULL, yrec_data, yrec_done, y));
    TU_RUN_UNTIL(f->l, y->done, 10000);
    assert_int_equal(y->error, HTTPC_OK);
    assert_int_equal(y->len, 512 * 1024);
    assert_int_equal(y->bad, 0);
}

/* A yielding call takes a slice and lets the loop run: a big answer
 * already in the socket is not read whole in one turn (libcurl reads on
 * while data waits), and nothing is lost or reordered across the pauses.
 * The slice begins where the loop enters libcurl, and a turn can enter it
 * twice for one call (its timer, then the socket's event, when the server
 * here writes more in between): then two callbacks share a turn, in 0-3
 * turns of 33 here. Without yield every other turn hands over two (as
 * much as the socket holds: two here, where the server shares the loop;
 * a hundred from another process). */
static void
t_yield_between_turns(void **state)
{
    struct fx *f = fx_new();
    struct yrec y;

    (void)state;
    run_big(f, 1, &y);
    print_message("yield: %u callbacks, %u turns with more than one\n",
                  y.ndata, y.shared);
    assert_true(y.ndata >= 16);
    assert_true(y.max_same_turn <= 2);
    assert_true(y.shared <= y.ndata / 8);
    run_big(f, 0, &y);
    print_message("no yield: %u callbacks, %u turns with more than one\n",
                  y.ndata, y.shared);
    assert_true(y.shared >= y.ndata / 4);
    fx_free(f);
}

/* Refuses the answer's second piece: with a 3 ms first piece, that one
 * was kept by libcurl at a pause and comes from inside the next turn's
 * curl_easy_pause. */
static int
refuse_second(const char *buf, size_t len, void *arg)
{
    struct yrec *y = arg;

    (void)buf;
    y->len += len;
    if (++y->ndata >= 2)
        return -1;
    spin_ns(3000000u);
    return 0;
}

/* A yielding call whose consumer refuses the data handed over after a
 * pause ends at once, with the consumer's error, and its consumer is
 * handed nothing more. libcurl returns that error from curl_easy_pause
 * and leaves the transfer paused: on an answer that goes on, its next
 * piece reached the consumer that had refused; on a stream gone quiet
 * (/pair), nothing woke it again, and a stream cut that way did not
 * reconnect until an unrelated timeout. */
static void
refused_after_pause(const char *path)
{
    struct fx *f = fx_new();
    char url[64];
    struct loop_http_req req = {
        .url = url, .unix_socket = f->s->sock, .yield = 1};
    struct yrec y;

    snprintf(url, sizeof(url), "http://localhost%s", path);
    memset(&y, 0, sizeof(y));
    y.l = f->l;
    assert_non_null(loop_http(f->l, &req, NULL, refuse_second, yrec_done, &y));
    TU_RUN_UNTIL(f->l, y.done, 3000);
    assert_int_equal(y.error, HTTPC_ERR_ABORTED);
    assert_int_equal(y.ndata, 2);
    fx_free(f);
}

static void
t_refused_after_pause_ends(void **state)
{
    (void)state;
    refused_after_pause("/big");
    refused_after_pause("/pair");
}

/* A call is handed one piece each time the loop enters libcurl, however
 * late the clock says it is by then: on a host slow enough to spend the
 * slice between the entry and the first piece (CPU stolen; valgrind the
 * first time through), a yielding call that was paused at once on each
 * resume never moved again (test_loop under valgrind: the refusal in
 * t_refused_after_pause_ends never came). Here every read of the clock is
 * 3 ms past the last: each entry hands over exactly one piece and pauses
 * the next, and the answer still arrives whole and in order, and a
 * refusal after a pause still ends the call. */
/* A yielding call of `path` with `on_data`, run to its end by the real
 * clock (10 s at most) while the loop's jumps. */
static void
slow_call(struct fx *f, const char *path, loop_http_data_cb on_data,
          struct yrec *y)
{
    struct loop_http_req req = {
        .url = path, .unix_socket = f->s->sock, .yield = 1};
    uint64_t end = real_ms() + 10000;

    memset(y, 0, sizeof(*y));
    y->l = f->l;
    assert_non_null(loop_http(f->l, &req, NULL, on_data, yrec_done, y));
    while (!y->done && real_ms() < end)
        tu_turn(f->l, UINT64_MAX);
    assert_true(y->done);
}

static void
t_slow_clock_still_moves(void **state)
{
    struct fx *f = fx_new();
    struct yrec y;

    (void)state;
    clock_jump_ns = 3000000u;
    slow_call(f, "http://localhost/big", yrec_data, &y);
    assert_int_equal(y.error, HTTPC_OK);
    assert_int_equal(y.len, 512 * 1024);
    assert_int_equal(y.bad, 0);
    assert_true(y.ndata >= 16);
    slow_call(f, "http://localhost/pair", refuse_second, &y);
    assert_int_equal(y.error, HTTPC_ERR_ABORTED);
    assert_int_equal(y.ndata, 2);
    slow_call(f, "http://localhost/big", refuse_second, &y);
    assert_int_equal(y.error, HTTPC_ERR_ABORTED);
    assert_int_equal(y.ndata, 2);
    fx_free(f);
}

static void
t_max_body(void **state)
{
    struct fx *f = fx_new();
    struct rec r = {0}, r2 = {0}, r3 = {0};
    struct loop_http_req req = {.url = tcp_url(f, "/big/100000"),
                                .max_body = 1000};

    (void)state;
    r.call = loop_http(f->l, &req, NULL, NULL, rec_done, &r);
    TU_RUN_UNTIL(f->l, r.done > 0, 3000);
    assert_int_equal(r.error, HTTPC_ERR_TOO_LARGE);
    assert_true(r.errmsg[0] != '\0');
    /* Exactly max_body bytes is still fine. */
    req.url = tcp_url(f, "/big/1000");
    r2.call = loop_http(f->l, &req, NULL, NULL, rec_done, &r2);
    TU_RUN_UNTIL(f->l, r2.done > 0, 3000);
    assert_int_equal(r2.error, HTTPC_OK);
    assert_int_equal(r2.body_len, 1000);
    req.url = tcp_url(f, "/big/1001");
    r3.call = loop_http(f->l, &req, NULL, NULL, rec_done, &r3);
    TU_RUN_UNTIL(f->l, r3.done > 0, 3000);
    assert_int_equal(r3.error, HTTPC_ERR_TOO_LARGE);
    assert_int_equal(loop_http_active(f->l), 0);
    rec_clear(&r);
    rec_clear(&r2);
    rec_clear(&r3);
    fx_free(f);
}

/* The default cap (4 MiB) lets a 1 MiB body through whole. */
static void
t_default_max_body(void **state)
{
    struct fx *f = fx_new();
    struct rec r = {0};
    struct loop_http_req req = {.url = tcp_url(f, "/big/1048576")};
    size_t i;

    (void)state;
    r.call = loop_http(f->l, &req, NULL, NULL, rec_done, &r);
    TU_RUN_UNTIL(f->l, r.done > 0, 5000);
    assert_int_equal(r.error, HTTPC_OK);
    assert_int_equal(r.body_len, 1048576);
    for (i = 0; i < r.body_len; i++)
        if (r.body[i] != 'x')
            fail_msg("body byte %zu is %d", i, r.body[i]);
    rec_clear(&r);
    fx_free(f);
}

struct nreq {
    const struct srv *s;
    int want;
};

static int
requests_at_least(const void *arg)
{
    const struct nreq *n = arg;

    return n->s->nrequests >= n->want;
}

static void
t_timeout(void **state)
{
    struct fx *f = fx_new();
    struct rec r = {0};
    struct loop_http_req req = {.url = tcp_url(f, "/never"),
                                .timeout_ms = 300};
    uint64_t t0 = loop_now_ms(), el;

    (void)state;
    r.call = loop_http(f->l, &req, rec_headers, NULL, rec_done, &r);
    assert_non_null(r.call);
    TU_RUN_UNTIL(f->l, r.done > 0, 5000);
    el = r.done_ms - t0;
    assert_int_equal(r.error, HTTPC_ERR_TIMEOUT);
    assert_int_equal(r.status, 0);
    assert_int_equal(r.nheaders, 0);
    assert_true(el >= 280);
    assert_true(el < 1500);
    assert_int_equal(f->s->nrequests, 1);
    rec_clear(&r);
    fx_free(f);
}

static void
t_connect_missing_unix(void **state)
{
    struct fx *f = fx_new();
    struct rec r = {0};
    char path[128];
    struct loop_http_req req = {.url = "http://localhost/hello",
                                .unix_socket = path};

    (void)state;
    snprintf(path, sizeof(path), "%s/no-such.sock", f->s->dir);
    r.call = loop_http(f->l, &req, rec_headers, NULL, rec_done, &r);
    assert_non_null(r.call);
    assert_int_equal(r.done, 0);
    TU_RUN_UNTIL(f->l, r.done > 0, 3000);
    assert_int_equal(r.error, HTTPC_ERR_CONNECT);
    assert_int_equal(r.status, 0);
    assert_int_equal(r.nheaders, 0);
    assert_true(r.errmsg[0] != '\0');
    rec_clear(&r);
    fx_free(f);
}

static void
t_connect_refused_tcp(void **state)
{
    struct fx *f = fx_new();
    struct rec r = {0};
    struct loop_http_req req = {0};
    struct sockaddr_in sin;
    socklen_t slen = sizeof(sin);
    char url[64];
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    (void)state;
    /* A port that surely has no listener: bound, never listened on. */
    memset(&sin, 0, sizeof(sin));
    sin.sin_family = AF_INET;
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&sin, &slen), 0);
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/x", ntohs(sin.sin_port));
    req.url = url;
    r.call = loop_http(f->l, &req, NULL, NULL, rec_done, &r);
    TU_RUN_UNTIL(f->l, r.done > 0, 3000);
    close(fd);
    assert_int_equal(r.error, HTTPC_ERR_CONNECT);
    rec_clear(&r);
    fx_free(f);
}

static void
t_data_abort(void **state)
{
    struct fx *f = fx_new();
    struct rec r = {.abort_at_data = 1};
    struct loop_http_req req = {.url = tcp_url(f, "/stream")};

    (void)state;
    r.call = loop_http(f->l, &req, rec_headers, rec_data, rec_done, &r);
    TU_RUN_UNTIL(f->l, r.done > 0, 3000);
    assert_int_equal(r.error, HTTPC_ERR_ABORTED);
    assert_int_equal(r.ndata, 1);
    assert_int_equal(r.nheaders, 1);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.data, "chunk0\n");
    /* Nothing more after on_done. */
    tu_run_for(f->l, 150);
    assert_int_equal(r.done, 1);
    assert_int_equal(r.ndata, 1);
    assert_int_equal(loop_http_active(f->l), 0);
    rec_clear(&r);
    fx_free(f);
}

static void
t_cancel_in_data(void **state)
{
    struct fx *f = fx_new();
    struct rec r = {.cancel_at_data = 1}, r2 = {.cancel_at_data = 2};
    struct loop_http_req req = {.url = tcp_url(f, "/stream")};
    struct loop_http_req ureq = {.url = "http://localhost/stream",
                                 .unix_socket = f->s->sock};

    (void)state;
    r.call = loop_http(f->l, &req, rec_headers, rec_data, rec_done, &r);
    r2.call = loop_http(f->l, &ureq, rec_headers, rec_data, rec_done, &r2);
    assert_int_equal(loop_http_active(f->l), 2);
    TU_RUN_UNTIL(f->l, r.ndata > 0, 3000);
    /* Past the point where all chunks and the end would have come. */
    tu_run_for(f->l, 400);
    assert_int_equal(r.ndata, 1);
    assert_int_equal(r.done, 0);
    assert_int_equal(r2.ndata, 2);
    assert_int_equal(r2.done, 0);
    assert_string_equal(r2.data, "chunk0\nchunk1\n");
    assert_int_equal(loop_http_active(f->l), 0);
    /* The server saw both clients go, and stopped streaming. */
    assert_int_equal(f->s->nclosed, 2);
    assert_int_equal(f->s->nstreams_open, 0);
    rec_clear(&r);
    rec_clear(&r2);
    fx_free(f);
}

static void
t_cancel_in_headers(void **state)
{
    struct fx *f = fx_new();
    struct rec r = {.cancel_in_headers = 1}, r2 = {.cancel_in_headers = 1};
    struct loop_http_req sreq = {.url = tcp_url(f, "/stream")};
    struct loop_http_req hreq = {.url = "http://localhost/hello",
                                 .unix_socket = f->s->sock};

    (void)state;
    /* A stream (data follows) and a whole answer (body in the same
     * packet as the headers). */
    r.call = loop_http(f->l, &sreq, rec_headers, rec_data, rec_done, &r);
    r2.call = loop_http(f->l, &hreq, rec_headers, NULL, rec_done, &r2);
    TU_RUN_UNTIL(f->l, r.nheaders > 0, 3000);
    TU_RUN_UNTIL(f->l, r2.nheaders > 0, 3000);
    tu_run_for(f->l, 300);
    assert_int_equal(r.nheaders, 1);
    assert_int_equal(r.ndata, 0);
    assert_int_equal(r.done, 0);
    assert_int_equal(r2.nheaders, 1);
    assert_int_equal(r2.done, 0);
    assert_int_equal(loop_http_active(f->l), 0);
    assert_int_equal(f->s->nstreams_open, 0);
    rec_clear(&r);
    rec_clear(&r2);
    fx_free(f);
}

/* A callback may cancel another call, one libcurl is working on. */
static void
t_cancel_other_from_data(void **state)
{
    struct fx *f = fx_new();
    struct rec victim = {0}, r = {0};
    struct loop_http_req never = {.url = tcp_url(f, "/never")};
    struct loop_http_req stream = {.url = "http://localhost/stream",
                                   .unix_socket = f->s->sock};
    struct nreq n = {f->s, 1};

    (void)state;
    victim.call =
        loop_http(f->l, &never, rec_headers, NULL, rec_done, &victim);
    TU_RUN_UNTIL(f->l, requests_at_least(&n), 3000);
    r.victim = &victim;
    r.call = loop_http(f->l, &stream, rec_headers, rec_data, rec_done, &r);
    TU_RUN_UNTIL(f->l, r.done > 0, 3000);
    assert_int_equal(r.error, HTTPC_OK);
    assert_null(victim.call);
    tu_run_for(f->l, 100);
    assert_int_equal(victim.done, 0);
    assert_int_equal(victim.nheaders, 0);
    assert_int_equal(loop_http_active(f->l), 0);
    /* (evhttp does not watch a connection whose answer it awaits from
     * us, so the server cannot tell here that the client left.) */
    rec_clear(&r);
    fx_free(f);
}

/* Outside any callback, cancel frees at once. */
static void
t_cancel_outside(void **state)
{
    struct fx *f = fx_new();
    struct rec r = {0};
    struct loop_http_req req = {.url = tcp_url(f, "/never")};
    struct nreq n = {f->s, 1};

    (void)state;
    r.call = loop_http(f->l, &req, rec_headers, NULL, rec_done, &r);
    assert_int_equal(loop_http_active(f->l), 1);
    /* Before it even connected. */
    loop_http_cancel(r.call);
    assert_int_equal(loop_http_active(f->l), 0);
    r.call = loop_http(f->l, &req, rec_headers, NULL, rec_done, &r);
    /* And once the server holds it. */
    TU_RUN_UNTIL(f->l, requests_at_least(&n), 3000);
    loop_http_cancel(r.call);
    assert_int_equal(loop_http_active(f->l), 0);
    loop_http_cancel(NULL); /* documented as fine */
    tu_run_for(f->l, 200);
    assert_int_equal(r.done, 0);
    assert_int_equal(r.nheaders, 0);
    rec_clear(&r);
    fx_free(f);
}

static void
t_spawn_from_data(void **state)
{
    struct fx *f = fx_new();
    struct rec r = {.spawn_in_data = 1};
    struct loop_http_req req = {.url = tcp_url(f, "/stream")};
    char hello[128];

    (void)state;
    snprintf(hello, sizeof(hello), "http://127.0.0.1:%d/hello", f->s->port);
    r.spawn_url = hello;
    r.l = f->l;
    r.call = loop_http(f->l, &req, rec_headers, rec_data, rec_done, &r);
    TU_RUN_UNTIL(f->l, r.done > 0, 3000);
    assert_non_null(r.spawned);
    TU_RUN_UNTIL(f->l, r.spawned->done > 0, 3000);
    /* Counted as soon as started, though added to libcurl later. */
    assert_int_equal(r.active_after_spawn, 2);
    check_hello(r.spawned);
    assert_int_equal(r.error, HTTPC_OK);
    assert_string_equal(r.data, "chunk0\nchunk1\nchunk2\nchunk3\nchunk4\n");
    assert_int_equal(loop_http_active(f->l), 0);
    rec_clear(&r);
    fx_free(f);
}

/* on_done may start the next call (a retry does that). */
struct chain {
    struct loop *l;
    const char *url;
    int left;
    int done;
    long last_status;
};

static void
chain_done(const struct loop_http_resp *res, void *arg)
{
    struct chain *c = arg;
    struct loop_http_req req = {.url = c->url};

    c->done++;
    c->last_status = res->status;
    assert_int_equal(res->error, HTTPC_OK);
    if (--c->left > 0)
        assert_non_null(loop_http(c->l, &req, NULL, NULL, chain_done, c));
}

static void
t_start_from_done(void **state)
{
    struct fx *f = fx_new();
    struct chain c = {.l = f->l, .left = 5};
    struct loop_http_req req = {0};

    (void)state;
    c.url = tcp_url(f, "/hello");
    req.url = c.url;
    assert_non_null(loop_http(f->l, &req, NULL, NULL, chain_done, &c));
    TU_RUN_UNTIL(f->l, c.left == 0, 3000);
    assert_int_equal(c.done, 5);
    assert_int_equal(c.last_status, 200);
    assert_int_equal(loop_http_active(f->l), 0);
    fx_free(f);
}

#define NCONC 50

struct many {
    struct rec r[NCONC];
};

static int
all_done(const void *arg)
{
    const struct many *m = arg;
    int i;

    for (i = 0; i < NCONC; i++)
        if (m->r[i].done == 0)
            return 0;
    return 1;
}

static void
t_concurrent(void **state)
{
    struct fx *f = fx_new();
    struct many *m = calloc(1, sizeof(*m));
    char urls[NCONC][128];
    int i;

    (void)state;
    assert_non_null(m);
    for (i = 0; i < NCONC; i++) {
        struct loop_http_req req = {0};

        /* Half over TCP, half over the unix socket. */
        if (i % 2 == 0) {
            snprintf(urls[i], sizeof(urls[i]), "http://127.0.0.1:%d/num/%d",
                     f->s->port, i);
        } else {
            snprintf(urls[i], sizeof(urls[i]), "http://localhost/num/%d", i);
            req.unix_socket = f->s->sock;
        }
        req.url = urls[i];
        m->r[i].call = loop_http(f->l, &req, NULL, NULL, rec_done, &m->r[i]);
        assert_non_null(m->r[i].call);
    }
    assert_int_equal(loop_http_active(f->l), NCONC);
    TU_RUN_UNTIL(f->l, all_done(m), 10000);
    for (i = 0; i < NCONC; i++) {
        char want[32];

        snprintf(want, sizeof(want), "n=%d", i);
        assert_int_equal(m->r[i].done, 1);
        if (m->r[i].error != HTTPC_OK)
            fail_msg("request %d: error %d: %s", i, m->r[i].error,
                     m->r[i].errmsg);
        assert_int_equal(m->r[i].status, 200);
        assert_string_equal(m->r[i].body, want);
        rec_clear(&m->r[i]);
    }
    assert_int_equal(loop_http_active(f->l), 0);
    assert_int_equal(f->s->nrequests, NCONC);
    free(m);
    fx_free(f);
}

/* The cap: no more than max_calls bounded calls reach the server at once,
 * the rest wait their turn (first come, first served); a waiting call can
 * be cancelled without a callback; a stream does not wait behind them. */
#define NCAPPED 10

struct capped {
    struct rec r[NCAPPED];
    struct rec stream;
};

static int
capped_done(const void *arg)
{
    const struct capped *m = arg;
    int i;

    for (i = 0; i < NCAPPED - 1; i++)
        if (m->r[i].done == 0)
            return 0;
    return 1;
}

static void
t_cap(void **state)
{
    struct fx *f = fx_new();
    struct capped *m = calloc(1, sizeof(*m));
    struct loop_http_req req = {.url = "http://localhost/slow",
                                .unix_socket = f->s->sock};
    struct loop_http_req stream = {.url = "http://localhost/stream",
                                   .unix_socket = f->s->sock,
                                   .stream = 1};
    int i;

    (void)state;
    assert_non_null(m);
    loop_set_max_calls(f->l, 3);
    for (i = 0; i < NCAPPED; i++) {
        m->r[i].call = loop_http(f->l, &req, NULL, NULL, rec_done, &m->r[i]);
        assert_non_null(m->r[i].call);
    }
    assert_int_equal(loop_http_active(f->l), NCAPPED);
    assert_int_equal(loop_http_waiting(f->l), NCAPPED - 3);
    loop_http_cancel(m->r[NCAPPED - 1].call);
    assert_int_equal(loop_http_waiting(f->l), NCAPPED - 4);
    m->stream.call =
        loop_http(f->l, &stream, rec_headers, rec_data, rec_done, &m->stream);
    assert_non_null(m->stream.call);
    /* The stream is answered while the first slow calls are still held. */
    TU_RUN_UNTIL(f->l, m->stream.nheaders > 0, 3000);
    assert_true(m->r[NCAPPED - 2].done == 0);
    TU_RUN_UNTIL(f->l, capped_done(m), 10000);
    for (i = 0; i < NCAPPED - 1; i++) {
        assert_int_equal(m->r[i].error, HTTPC_OK);
        assert_int_equal(m->r[i].status, 200);
        assert_string_equal(m->r[i].body, "slow");
        rec_clear(&m->r[i]);
    }
    /* First come, first served: a call starts when one of the three
     * before it ended, and is held 50 ms. */
    for (i = 3; i < NCAPPED - 1; i++)
        assert_true(m->r[i].done_ms >= m->r[i - 3].done_ms + 30);
    assert_int_equal(m->r[NCAPPED - 1].done, 0);
    assert_int_equal(f->s->slow_max, 3);
    assert_int_equal(f->s->slow_now, 0);
    assert_int_equal(loop_http_waiting(f->l), 0);
    TU_RUN_UNTIL(f->l, m->stream.done > 0, 3000);
    assert_int_equal(m->stream.error, HTTPC_OK);
    rec_clear(&m->stream);
    assert_int_equal(loop_http_active(f->l), 0);
    free(m);
    fx_free(f);
}

static void
t_active_counts(void **state)
{
    struct fx *f = fx_new();
    struct rec a = {0}, b = {0};
    struct loop_http_req req = {.url = tcp_url(f, "/hello")};

    (void)state;
    assert_int_equal(loop_http_active(f->l), 0);
    a.call = loop_http(f->l, &req, NULL, NULL, rec_done, &a);
    assert_int_equal(loop_http_active(f->l), 1);
    b.call = loop_http(f->l, &req, NULL, NULL, rec_done, &b);
    assert_int_equal(loop_http_active(f->l), 2);
    TU_RUN_UNTIL(f->l, a.done > 0, 3000);
    TU_RUN_UNTIL(f->l, b.done > 0, 3000);
    assert_int_equal(loop_http_active(f->l), 0);
    rec_clear(&a);
    rec_clear(&b);
    fx_free(f);
}

static void
t_response_header(void **state)
{
    const char *lines[] = {"Content-Type: text/plain", "X-Test: short",
                           "X-Test-Header:   spaced value",
                           "Empty:", "content-length: 5"};
    struct loop_http_resp res = {.header_lines = lines, .nheader_lines = 5};

    (void)state;
    assert_string_equal(loop_http_header(&res, "content-type"), "text/plain");
    assert_string_equal(loop_http_header(&res, "CONTENT-TYPE"), "text/plain");
    /* A prefix of another header's name is not that header. */
    assert_string_equal(loop_http_header(&res, "x-test"), "short");
    assert_string_equal(loop_http_header(&res, "X-TEST-HEADER"),
                        "spaced value");
    assert_string_equal(loop_http_header(&res, "Empty"), "");
    assert_string_equal(loop_http_header(&res, "Content-Length"), "5");
    assert_null(loop_http_header(&res, "X-Tes"));
    assert_null(loop_http_header(&res, "Content"));
    assert_null(loop_http_header(&res, "missing"));
    res.nheader_lines = 0;
    assert_null(loop_http_header(&res, "content-type"));
}

/* Every kind of call still in flight when the loop goes: connected and
 * waiting, mid-stream, and one started from a callback that libcurl has
 * not been given yet. No callback runs, nothing leaks. */
static void
t_free_in_flight(void **state)
{
    struct fx *f = fx_new();
    struct rec r[3] = {{0}};
    struct loop_http_req never = {.url = tcp_url(f, "/never")};
    struct loop_http_req stream = {.url = "http://localhost/stream",
                                   .unix_socket = f->s->sock};
    char hello[128];
    struct nreq n = {f->s, 3};
    int i;

    (void)state;
    f->s->stream_forever = 1;
    snprintf(hello, sizeof(hello), "http://127.0.0.1:%d/hello", f->s->port);
    r[0].l = f->l;
    r[0].spawn_in_data = 1;
    r[0].spawn_url = hello;
    r[0].break_loop = 1;
    r[0].call =
        loop_http(f->l, &stream, rec_headers, rec_data, rec_done, &r[0]);
    r[1].call = loop_http(f->l, &never, rec_headers, NULL, rec_done, &r[1]);
    r[2].call = loop_http(f->l, &never, rec_headers, NULL, rec_done, &r[2]);
    TU_RUN_UNTIL(f->l, requests_at_least(&n), 3000);
    TU_RUN_UNTIL(f->l, r[0].spawned != NULL, 3000);
    assert_int_equal(loop_http_active(f->l), 4);
    /* The server goes first (it shares the base), then the loop with
     * four calls in flight. */
    srv_free(f->s);
    loop_free(f->l);
    for (i = 0; i < 3; i++)
        assert_int_equal(r[i].done, 0);
    assert_int_equal(r[0].spawned->done, 0);
    assert_int_equal(r[0].spawned->nheaders, 0);
    for (i = 0; i < 3; i++)
        rec_clear(&r[i]);
    free(f);
}

static void
t_loop_basics(void **state)
{
    struct loop *l = loop_new();
    uint64_t a, b;

    (void)state;
    assert_non_null(l);
    assert_non_null(loop_base(l));
    assert_int_equal(loop_http_active(l), 0);
    a = loop_now_ms();
    usleep(20000);
    b = loop_now_ms();
    assert_true(b >= a + 15);
    assert_true(b < a + 2000);
    loop_free(l);
    loop_free(NULL);
}

static void
get_hello(struct fx *f, const struct loop_http_req *req)
{
    struct rec r = {0};

    r.call = loop_http(f->l, req, rec_headers, NULL, rec_done, &r);
    assert_non_null(r.call);
    TU_RUN_UNTIL(f->l, r.done > 0, 3000);
    check_hello(&r);
    rec_clear(&r);
}

/*
 * A connection libcurl keeps stays in the loop's poll set between calls:
 * calls in a row on it add or remove nothing after the first. When the
 * server closes it while it is idle, it leaves the set once (not a
 * wake-up per turn for a socket at its end), and the next call opens
 * another, which stays in turn.
 */
static void
t_kept_connection_stays_watched(void **state)
{
    struct fx *f = fx_new();
    struct loop_http_req req = {.url = "http://localhost/hello",
                                .unix_socket = f->s->sock};
    uint64_t first;
    int i;

    (void)state;
    /* The server drops a connection idle for a second. */
    evhttp_set_timeout(f->s->http, 1);
    get_hello(f, &req);
    first = loop_socket_changes(f->l);
    assert_true(first >= 1);
    for (i = 0; i < 4; i++)
        get_hello(f, &req);
    assert_int_equal(f->s->nconns, 1);
    assert_int_equal(loop_socket_changes(f->l), first);

    tu_run_for(f->l, 1800);
    assert_int_equal(loop_socket_changes(f->l), first + 1);

    get_hello(f, &req);
    assert_int_equal(f->s->nconns, 2);
    first = loop_socket_changes(f->l);
    get_hello(f, &req);
    get_hello(f, &req);
    assert_int_equal(f->s->nconns, 2);
    assert_int_equal(loop_socket_changes(f->l), first);
    fx_free(f);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(t_loop_basics),
        cmocka_unit_test(t_get_buffered_tcp),
        cmocka_unit_test(t_get_buffered_unix),
        cmocka_unit_test(t_unix_ignores_proxy_env),
        cmocka_unit_test(t_non_2xx_is_ok),
        cmocka_unit_test(t_post_body_and_headers),
        cmocka_unit_test(t_handle_kept_clean),
        cmocka_unit_test(t_stream_in_order),
        cmocka_unit_test(t_yield_between_turns),
        cmocka_unit_test(t_refused_after_pause_ends),
        cmocka_unit_test_teardown(t_slow_clock_still_moves, clock_real),
        cmocka_unit_test(t_max_body),
        cmocka_unit_test(t_default_max_body),
        cmocka_unit_test(t_timeout),
        cmocka_unit_test(t_connect_missing_unix),
        cmocka_unit_test(t_connect_refused_tcp),
        cmocka_unit_test(t_data_abort),
        cmocka_unit_test(t_cancel_in_data),
        cmocka_unit_test(t_cancel_in_headers),
        cmocka_unit_test(t_cancel_other_from_data),
        cmocka_unit_test(t_cancel_outside),
        cmocka_unit_test(t_spawn_from_data),
        cmocka_unit_test(t_start_from_done),
        cmocka_unit_test(t_concurrent),
        cmocka_unit_test(t_cap),
        cmocka_unit_test(t_active_counts),
        cmocka_unit_test(t_response_header),
        cmocka_unit_test(t_free_in_flight),
        cmocka_unit_test(t_kept_connection_stays_watched),
    };

    signal(SIGPIPE, SIG_IGN); /* the server may write to a closed peer */
    tu_test_filters();
    log_setup(getenv("TEST_DEBUG") ? LOG_LEVEL_DEBUG : LOG_LEVEL_ERROR,
              LOG_FORMAT_TEXT);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
