/*
 * upstream_receiver — a stand-in for the upstream that reapd POSTs its
 * reports to, for integration and crash tests (loopback only). It records
 * every request as one JSON line (method, path, headers, Idempotency-Key,
 * body, and the answer it got) and answers as told: a status code, Retry-
 * After, a delay, "hang" (never answer) or "reset" (close without an
 * answer), switched at run time on /_control of the same server. See
 * docs/delivery.md for the protocol.
 *
 * A record is written when the request has come in, before it is
 * answered, with a single write(2): a test that sees the line knows the
 * request arrived, and a reader never sees half a line.
 */
#include <errno.h>
#include <sys/queue.h> /* before libevent: TAILQ_* for evkeyvalq */
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <event2/listener.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <getopt.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <yajl/yajl_gen.h>

#define MAX_BODY     (16u << 20)
#define MAX_HEADERS  (64u << 10)
#define MAX_DELAY_MS 3600000L
#define MODE_MAX     16
#define SWEEP_MS     250

/* How to answer: a status code, or one of the two non-answers. */
struct mode {
    char name[MODE_MAX]; /* "200", "503", "hang", "reset" */
    int code;            /* 0 for hang and reset */
};

/* A request answered later (delay) or never (hang). */
struct pending {
    struct evhttp_request *req;
    struct evhttp_connection *conn;
    struct event *timer; /* NULL: hang */
    int code;
    uint64_t seq;
    struct pending *next;
};

static struct {
    struct event_base *base;
    struct evhttp *http;
    int record_fd;
    struct mode mode, then;
    long times; /* requests left in `mode` before `then`; -1: forever */
    char retry_after[64];
    long delay_ms;
    uint64_t seq; /* requests recorded */
    uint64_t answered, hung, resets, closed_early;
    struct pending *pending;
    struct event *sweep;
    struct timespec t0;
} R = {.record_fd = -1, .times = -1};

static void logf_(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void
logf_(const char *fmt, ...)
{
    struct timespec now;
    va_list ap;

    clock_gettime(CLOCK_MONOTONIC, &now);
    fprintf(stderr, "upstream_receiver +%.3fs: ",
            (double)(now.tv_sec - R.t0.tv_sec) +
                (double)(now.tv_nsec - R.t0.tv_nsec) / 1e9);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

static int
mode_parse(const char *s, struct mode *m)
{
    char *end;
    long code;

    if (strcmp(s, "hang") == 0 || strcmp(s, "reset") == 0) {
        snprintf(m->name, sizeof(m->name), "%s", s);
        m->code = 0;
        return 0;
    }
    errno = 0;
    code = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || code < 200 || code > 599)
        return -1;
    snprintf(m->name, sizeof(m->name), "%ld", code);
    m->code = (int)code;
    return 0;
}

/* ---- records ---------------------------------------------------------- */

static bool
valid_utf8(const unsigned char *s, size_t n)
{
    size_t i = 0, k, len;

    while (i < n) {
        if (s[i] < 0x80) {
            i++;
            continue;
        }
        len = s[i] >= 0xf0 && s[i] <= 0xf4   ? 4
              : s[i] >= 0xe0 && s[i] <= 0xef ? 3
              : s[i] >= 0xc2 && s[i] <= 0xdf ? 2
                                             : 0;
        if (len == 0 || i + len > n)
            return false;
        for (k = 1; k < len; k++)
            if ((s[i + k] & 0xc0) != 0x80)
                return false;
        i += len;
    }
    return true;
}

static void
gen_str(yajl_gen g, const char *s)
{
    if (s == NULL)
        yajl_gen_null(g);
    else if (valid_utf8((const unsigned char *)s, strlen(s)))
        yajl_gen_string(g, (const unsigned char *)s, strlen(s));
    else
        yajl_gen_string(g, (const unsigned char *)"(not UTF-8)", 11);
}

static void
gen_key(yajl_gen g, const char *k)
{
    yajl_gen_string(g, (const unsigned char *)k, strlen(k));
}

static void
gen_body(yajl_gen g, const unsigned char *b, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    char *h;
    size_t i;

    gen_key(g, "body_len");
    yajl_gen_integer(g, (long long)n);
    if (valid_utf8(b, n)) {
        gen_key(g, "body");
        yajl_gen_string(g, b, n);
        return;
    }
    /* Not text: hex, so the record stays valid JSON. */
    gen_key(g, "body");
    yajl_gen_null(g);
    h = malloc(2 * n + 1);
    if (h == NULL)
        return;
    for (i = 0; i < n; i++) {
        h[2 * i] = hex[b[i] >> 4];
        h[2 * i + 1] = hex[b[i] & 15];
    }
    gen_key(g, "body_hex");
    yajl_gen_string(g, (const unsigned char *)h, 2 * n);
    free(h);
}

static const char *
method_name(enum evhttp_cmd_type m)
{
    switch (m) {
    case EVHTTP_REQ_GET:
        return "GET";
    case EVHTTP_REQ_POST:
        return "POST";
    case EVHTTP_REQ_PUT:
        return "PUT";
    case EVHTTP_REQ_DELETE:
        return "DELETE";
    case EVHTTP_REQ_HEAD:
        return "HEAD";
    case EVHTTP_REQ_PATCH:
        return "PATCH";
    default:
        return "OTHER";
    }
}

/* One line per request, in one write(2). */
static void
record(struct evhttp_request *req, const char *answer)
{
    const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
    struct evkeyvalq *in = evhttp_request_get_input_headers(req);
    struct evbuffer *body = evhttp_request_get_input_buffer(req);
    struct evkeyval *kv;
    struct timespec wall;
    char *peer = NULL, when[40];
    ev_uint16_t port = 0;
    const unsigned char *out;
    size_t len;
    yajl_gen g = yajl_gen_alloc(NULL);

    if (g == NULL)
        return;
    clock_gettime(CLOCK_REALTIME, &wall);
    strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", gmtime(&wall.tv_sec));
    snprintf(when + strlen(when), sizeof(when) - strlen(when), ".%03ldZ",
             wall.tv_nsec / 1000000);
    evhttp_connection_get_peer(evhttp_request_get_connection(req), &peer,
                               &port);
    yajl_gen_map_open(g);
    gen_key(g, "seq");
    yajl_gen_integer(g, (long long)R.seq);
    gen_key(g, "time");
    gen_str(g, when);
    gen_key(g, "peer_port");
    yajl_gen_integer(g, port);
    gen_key(g, "method");
    gen_str(g, method_name(evhttp_request_get_command(req)));
    gen_key(g, "path");
    gen_str(g, evhttp_uri_get_path(uri));
    gen_key(g, "query");
    gen_str(g, evhttp_uri_get_query(uri));
    gen_key(g, "idempotency_key");
    gen_str(g, evhttp_find_header(in, "Idempotency-Key"));
    gen_key(g, "headers");
    yajl_gen_array_open(g);
    TAILQ_FOREACH(kv, in, next)
    {
        yajl_gen_array_open(g);
        gen_str(g, kv->key);
        gen_str(g, kv->value);
        yajl_gen_array_close(g);
    }
    yajl_gen_array_close(g);
    len = evbuffer_get_length(body);
    gen_body(g,
             len > 0 ? evbuffer_pullup(body, -1) : (const unsigned char *)"",
             len);
    gen_key(g, "answer");
    gen_str(g, answer);
    yajl_gen_map_close(g);
    if (yajl_gen_get_buf(g, &out, &len) == yajl_gen_status_ok) {
        char *line = malloc(len + 1);

        if (line != NULL) {
            memcpy(line, out, len);
            line[len] = '\n';
            if (write(R.record_fd, line, len + 1) != (ssize_t)(len + 1))
                logf_("record: %s", strerror(errno));
            free(line);
        }
    }
    yajl_gen_free(g);
}

/* ---- answers ---------------------------------------------------------- */

static void
reply(struct evhttp_request *req, int code)
{
    struct evbuffer *b = evbuffer_new();
    struct evkeyvalq *oh = evhttp_request_get_output_headers(req);

    evhttp_add_header(oh, "Content-Type", "application/json");
    if (R.retry_after[0] != '\0' && (code < 200 || code > 299))
        evhttp_add_header(oh, "Retry-After", R.retry_after);
    if (code >= 200 && code <= 299)
        evbuffer_add_printf(b, "{\"ok\":true}");
    else
        evbuffer_add_printf(b, "{\"error\":\"answered %d as told\"}", code);
    evhttp_send_reply(req, code, NULL, b);
    evbuffer_free(b);
    R.answered++;
}

static void
pending_unlink(struct pending *p)
{
    struct pending **pp = &R.pending;

    while (*pp != p)
        pp = &(*pp)->next;
    *pp = p->next;
    if (p->timer != NULL)
        event_free(p->timer);
    free(p);
}

static void
on_delay(evutil_socket_t fd, short what, void *arg)
{
    struct pending *p = arg;

    (void)fd;
    (void)what;
    reply(p->req, p->code);
    pending_unlink(p);
}

/*
 * A client left. evhttp detaches a request we have not answered yet
 * (its connection becomes NULL) and leaves it to us; it is freed here,
 * after which evhttp no longer looks at it.
 */
static void
on_close(struct evhttp_connection *conn, void *arg)
{
    struct pending *p, *next;

    (void)arg;
    for (p = R.pending; p != NULL; p = next) {
        next = p->next;
        if (p->conn != conn)
            continue;
        R.closed_early++;
        logf_("#%llu: the client left before an answer",
              (unsigned long long)p->seq);
        if (evhttp_request_get_connection(p->req) == NULL)
            evhttp_request_free(p->req);
        pending_unlink(p);
    }
}

/*
 * evhttp stops reading a connection once a request is in, so it does not
 * notice a client that gives up on a request we never answer: every
 * SWEEP_MS, a peek at each held connection finds the ones closed, and
 * frees them (on_close then drops the entry), so fds do not pile up.
 */
static void
on_sweep(evutil_socket_t fd_, short what, void *arg)
{
    struct pending *p;
    char ch;

    (void)fd_;
    (void)what;
    (void)arg;
again:
    for (p = R.pending; p != NULL; p = p->next) {
        struct evhttp_connection *conn = evhttp_request_get_connection(p->req);
        int fd;
        ssize_t n;

        if (conn == NULL)
            continue;
        fd = bufferevent_getfd(evhttp_connection_get_bufferevent(conn));
        n = recv(fd, &ch, 1, MSG_PEEK | MSG_DONTWAIT);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK &&
                       errno != EINTR)) {
            evhttp_connection_free(conn); /* on_close unlinks p */
            goto again;
        }
    }
}

static void
state_json(struct evbuffer *b)
{
    size_t held = 0;
    struct pending *p;

    for (p = R.pending; p != NULL; p = p->next)
        held++;
    evbuffer_add_printf(
        b,
        "{\"mode\":\"%s\",\"times\":%ld,\"then\":\"%s\","
        "\"retry_after\":\"%s\",\"delay_ms\":%ld,\"requests\":%llu,"
        "\"answered\":%llu,\"hung\":%llu,\"resets\":%llu,"
        "\"closed_early\":%llu,\"held\":%zu}\n",
        R.mode.name, R.times, R.then.name, R.retry_after, R.delay_ms,
        (unsigned long long)R.seq, (unsigned long long)R.answered,
        (unsigned long long)R.hung, (unsigned long long)R.resets,
        (unsigned long long)R.closed_early, held);
}

static void
control_reply(struct evhttp_request *req, int code, const char *err)
{
    struct evbuffer *b = evbuffer_new();

    evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
                      "application/json");
    if (err != NULL)
        evbuffer_add_printf(b, "{\"error\":\"%s\"}\n", err);
    else
        state_json(b);
    evhttp_send_reply(req, code, NULL, b);
    evbuffer_free(b);
}

/* /_control?mode=M&times=N&then=M&retry_after=S&delay_ms=N: all or
 * nothing. No query: just the state. */
static void
control(struct evhttp_request *req)
{
    const char *q = evhttp_uri_get_query(evhttp_request_get_evhttp_uri(req));
    struct evkeyvalq kv;
    struct evkeyval *e;
    struct mode mode = R.mode, then = R.then;
    long times = R.times, delay = R.delay_ms;
    char ra[sizeof(R.retry_after)], *end;
    const char *err = NULL;
    bool times_set = false;

    memcpy(ra, R.retry_after, sizeof(ra));
    TAILQ_INIT(&kv);
    if (q != NULL && evhttp_parse_query_str(q, &kv) != 0)
        err = "bad query";
    TAILQ_FOREACH(e, &kv, next)
    {
        if (err != NULL)
            break;
        if (strcmp(e->key, "mode") == 0) {
            if (mode_parse(e->value, &mode) != 0)
                err = "mode: 200..599, hang or reset";
        } else if (strcmp(e->key, "then") == 0) {
            if (mode_parse(e->value, &then) != 0)
                err = "then: 200..599, hang or reset";
        } else if (strcmp(e->key, "times") == 0) {
            times = strtol(e->value, &end, 10);
            times_set = true;
            if (*e->value == '\0' || *end != '\0' || times < 1)
                err = "times: a count >= 1";
        } else if (strcmp(e->key, "retry_after") == 0) {
            if (strlen(e->value) >= sizeof(ra) ||
                strpbrk(e->value, "\r\n") != NULL)
                err = "retry_after: too long";
            else
                snprintf(ra, sizeof(ra), "%s", e->value);
        } else if (strcmp(e->key, "delay_ms") == 0) {
            delay = strtol(e->value, &end, 10);
            if (*e->value == '\0' || *end != '\0' || delay < 0 ||
                delay > MAX_DELAY_MS)
                err = "delay_ms: 0..3600000";
        } else {
            err = "unknown key (mode, times, then, retry_after, delay_ms)";
        }
    }
    evhttp_clear_headers(&kv);
    if (!times_set && strcmp(mode.name, R.mode.name) != 0)
        times = -1; /* a new mode lasts, unless times says otherwise */
    if (err != NULL) {
        control_reply(req, 400, err);
        return;
    }
    if (q != NULL) {
        R.mode = mode;
        R.then = then;
        R.times = times;
        R.delay_ms = delay;
        memcpy(R.retry_after, ra, sizeof(ra));
        logf_("control: mode %s (times %ld, then %s), retry_after \"%s\", "
              "delay %ld ms",
              R.mode.name, R.times, R.then.name, R.retry_after, R.delay_ms);
    }
    control_reply(req, 200, NULL);
}

static void
on_request(struct evhttp_request *req, void *arg)
{
    struct evhttp_connection *conn = evhttp_request_get_connection(req);
    const char *path = evhttp_uri_get_path(evhttp_request_get_evhttp_uri(req));
    struct mode m = R.mode;
    struct pending *p;

    (void)arg;
    if (path != NULL &&
        (strcmp(path, "/_control") == 0 || strcmp(path, "/_state") == 0)) {
        control(req);
        return;
    }
    if (R.times > 0 && --R.times == 0) {
        R.mode = R.then; /* `m` is this request's, the last one */
        R.times = -1;
    }
    R.seq++;
    record(req, m.name);
    logf_("#%llu: %s %s -> %s", (unsigned long long)R.seq,
          method_name(evhttp_request_get_command(req)), path ? path : "",
          m.name);
    evhttp_connection_set_closecb(conn, on_close, NULL);
    if (strcmp(m.name, "reset") == 0) {
        struct linger lg = {1, 0};
        int fd = bufferevent_getfd(evhttp_connection_get_bufferevent(conn));

        /* RST, not FIN: as an upstream that crashed mid-request. */
        setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
        R.resets++;
        evhttp_connection_free(conn);
        return;
    }
    if (m.code != 0 && R.delay_ms == 0) {
        reply(req, m.code);
        return;
    }
    p = calloc(1, sizeof(*p));
    if (p == NULL) {
        evhttp_send_error(req, 500, NULL);
        return;
    }
    p->req = req;
    p->conn = conn;
    p->code = m.code;
    p->seq = R.seq;
    p->next = R.pending;
    R.pending = p;
    if (m.code == 0) {
        R.hung++; /* never answered */
        return;
    }
    p->timer = evtimer_new(R.base, on_delay, p);
    if (p->timer != NULL) {
        struct timeval tv = {R.delay_ms / 1000, (R.delay_ms % 1000) * 1000};

        evtimer_add(p->timer, &tv);
    }
}

/* ---- main ------------------------------------------------------------- */

static void
on_signal(evutil_socket_t sig, short what, void *arg)
{
    (void)what;
    (void)arg;
    logf_("signal %d: stopping", (int)sig);
    event_base_loopexit(R.base, NULL);
}

static void
usage(FILE *to)
{
    fprintf(to,
            "usage: upstream_receiver --record FILE [--port N] "
            "[--port-file FILE] [--mode M]\n"
            "  Listens on 127.0.0.1:N (0: any free port, printed), records "
            "every request\n"
            "  as a JSON line in FILE, answers as told (M: 200..599, hang, "
            "reset);\n"
            "  GET /_control?mode=503&times=2&then=200&retry_after=1&"
            "delay_ms=0 switches.\n"
            "  See docs/delivery.md.\n");
}

int
main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"record", required_argument, NULL, 'r'},
        {"port", required_argument, NULL, 'p'},
        {"port-file", required_argument, NULL, 'f'},
        {"mode", required_argument, NULL, 'm'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    const char *rec = NULL, *port_file = NULL;
    struct evhttp_bound_socket *bs;
    struct event *sigterm = NULL, *sigint = NULL;
    struct sockaddr_in sin;
    socklen_t slen = sizeof(sin);
    long port = 0;
    int ch, rc = 1;

    clock_gettime(CLOCK_MONOTONIC, &R.t0);
    mode_parse("200", &R.mode);
    mode_parse("200", &R.then);
    while ((ch = getopt_long(argc, argv, "r:p:f:m:h", opts, NULL)) != -1) {
        switch (ch) {
        case 'r':
            rec = optarg;
            break;
        case 'p':
            port = strtol(optarg, NULL, 10);
            break;
        case 'f':
            port_file = optarg;
            break;
        case 'm':
            if (mode_parse(optarg, &R.mode) != 0) {
                usage(stderr);
                return 2;
            }
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (rec == NULL || optind != argc || port < 0 || port > 65535) {
        usage(stderr);
        return 2;
    }
    R.record_fd = open(rec, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (R.record_fd < 0) {
        fprintf(stderr, "upstream_receiver: %s: %s\n", rec, strerror(errno));
        return 1;
    }
    /* A client that went away must not kill us through a write. */
    signal(SIGPIPE, SIG_IGN);
    R.base = event_base_new();
    if (R.base == NULL)
        goto out;
    sigterm = evsignal_new(R.base, SIGTERM, on_signal, NULL);
    sigint = evsignal_new(R.base, SIGINT, on_signal, NULL);
    R.sweep = event_new(R.base, -1, EV_PERSIST, on_sweep, NULL);
    R.http = evhttp_new(R.base);
    if (sigterm == NULL || sigint == NULL || R.sweep == NULL ||
        R.http == NULL || evsignal_add(sigterm, NULL) != 0 ||
        evsignal_add(sigint, NULL) != 0)
        goto out;
    {
        struct timeval tv = {0, SWEEP_MS * 1000};

        event_add(R.sweep, &tv);
    }
    evhttp_set_gencb(R.http, on_request, NULL);
    evhttp_set_max_body_size(R.http, MAX_BODY);
    evhttp_set_max_headers_size(R.http, MAX_HEADERS);
    evhttp_set_allowed_methods(R.http, EVHTTP_REQ_GET | EVHTTP_REQ_POST |
                                           EVHTTP_REQ_PUT | EVHTTP_REQ_DELETE |
                                           EVHTTP_REQ_PATCH | EVHTTP_REQ_HEAD);
    /* Loopback only: this is a test tool. */
    bs =
        evhttp_bind_socket_with_handle(R.http, "127.0.0.1", (ev_uint16_t)port);
    if (bs == NULL || getsockname(evconnlistener_get_fd(
                                      evhttp_bound_socket_get_listener(bs)),
                                  (struct sockaddr *)&sin, &slen) != 0) {
        fprintf(stderr, "upstream_receiver: cannot listen on 127.0.0.1:%ld\n",
                port);
        goto out;
    }
    port = ntohs(sin.sin_port);
    if (port_file != NULL) {
        /* Written whole, then renamed: a poller never reads half. */
        char tmp[4096];
        FILE *f;

        snprintf(tmp, sizeof(tmp), "%s.tmp", port_file);
        f = fopen(tmp, "w");
        if (f == NULL || fprintf(f, "%ld\n", port) < 0 || fclose(f) != 0 ||
            rename(tmp, port_file) != 0) {
            fprintf(stderr, "upstream_receiver: %s: %s\n", port_file,
                    strerror(errno));
            goto out;
        }
    }
    printf("upstream_receiver: listening on http://127.0.0.1:%ld/, "
           "recording to %s\n",
           port, rec);
    printf("port %ld\n", port);
    printf("ready\n");
    fflush(stdout);
    event_base_dispatch(R.base);
    rc = 0;
out:
    while (R.pending != NULL) {
        struct pending *p = R.pending;

        /* Detached ones are ours; attached ones go with evhttp_free. */
        if (evhttp_request_get_connection(p->req) == NULL)
            evhttp_request_free(p->req);
        pending_unlink(p);
    }
    if (R.http != NULL)
        evhttp_free(R.http);
    if (R.sweep != NULL)
        event_free(R.sweep);
    if (sigterm != NULL)
        event_free(sigterm);
    if (sigint != NULL)
        event_free(sigint);
    if (R.base != NULL)
        event_base_free(R.base);
    close(R.record_fd);
    if (rc == 0)
        logf_("stopped after %llu requests", (unsigned long long)R.seq);
    return rc;
}
