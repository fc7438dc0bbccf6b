/*
 * httpd — the hardened HTTP server under the status endpoint and the
 * admin socket; see httpd.h. Connections are tracked from the accept to
 * evhttp's close callback, each with a deadline timer and a place in one
 * list by state (pending, idle, waiting); requests go to the owner's
 * handler once the connection is known.
 */
#include "httpd.h"

#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <event2/listener.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "jsonw.h"
#include "loop.h"

#define MAX_HEADERS_SIZE 8192
#define MAX_BODY_SIZE    1024
#define REQUEST_TIMEOUT  10

#define DEFAULT_MAX_CONNECTIONS 64
#define REQUEST_DEADLINE_MS     10000
#define PAUSE_MIN_MS            100
#define PAUSE_MAX_MS            1000
#define LOG_EVERY_MS            10000
#define LISTEN_BACKLOG          128 /* evhttp_bind_socket's, and ours */
/* Refused connections that may wait for their request, at least: twice
 * what one pass of accept() can bring (the backlog, and a few more), so
 * that a burst accepted with a probe cannot push it out before its
 * request is read on the next pass. */
#define WAITING_MIN (2 * LISTEN_BACKLOG)

/*
 * What a connection is doing, for the deadline and for eviction: waiting
 * for or reading a request (from its start, or after an answer once
 * bytes of the next request came), sending an answer, idle between
 * requests, or holding a request open.
 */
enum phase { PH_REQUEST, PH_ANSWER, PH_IDLE, PH_HELD };

struct clist {
    struct httpd_conn *head, *tail;
    size_t n;
};

/*
 * A connection evhttp accepted. evhttp 2.1 tells nobody that a
 * connection starts (evhttp_set_newreqcb is 2.2); it only asks us for
 * the bufferevent to use (evhttp_set_bevcb), before the connection
 * object exists. So the bufferevent is made here and held by one extra
 * reference until, on the same loop pass, the connection object is read
 * back from it (bufferevent_getcb: its callback argument) and given a
 * close callback; a bufferevent that evhttp already let go of has its
 * callbacks cleared. From then on evhttp_connection_free() always calls
 * the close callback for an incoming connection (http.c: its fd is set
 * and its state is never "disconnected"), which is where a conn ends.
 */
struct httpd_conn {
    struct httpd *h;
    struct bufferevent *bev;
    struct evhttp_connection *evcon; /* NULL until resolved */
    int fd;
    bool refused; /* came at the cap with nothing idle to close */
    enum phase phase;
    uint64_t since_ms; /* start of the phase, for the deadline */
    struct event *deadline;
    /* A request held open (PH_HELD), and who to tell when the
     * connection goes first; NULL: none. */
    struct evhttp_request *held;
    httpd_drop_cb *drop;
    void *drop_arg;
    struct clist *in; /* pending, idle or waiting; NULL: none */
    struct httpd_conn *prev, *next;
};

struct httpd {
    struct evhttp *http;
    struct evconnlistener *lev; /* owned by http */
    struct httpd_opts o;
    size_t max_connections;
    unsigned deadline_ms;
    /* Connections by state: accepted, not yet resolved; served and idle
     * (oldest first); refused and waiting for their one request. */
    struct clist pending, idle, waiting;
    size_t nserved, nrefused;
    struct httpd_conn **byfd; /* resolved connections by descriptor */
    size_t nbyfd;
    struct event *resolve_ev;
    struct event *resume_ev; /* accepting again after an error */
    unsigned pause_ms;
    uint64_t rejected_busy;
    uint64_t evicted_idle, evicted_waiting, timed_out, accept_errors;
    struct httpd_ratelog log_accept, log_idle, log_waiting, log_deadline,
        log_refuse, log_bad;
    char *unix_path;
    struct httpd *next_httpd;
};

/*
 * Every server, for the listener's error callback: evhttp took the
 * listener's callback argument for itself, so that callback is only told
 * the listener. One loop, one thread: no lock.
 */
static struct httpd *all_httpd;

void
httpd_ratelog(struct httpd_ratelog *r, enum log_level level, const char *fmt,
              ...)
{
    uint64_t now = loop_now_ms();
    char msg[512];
    va_list ap;

    if (r->logged && now - r->last_ms < LOG_EVERY_MS) {
        r->suppressed++;
        return;
    }
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (r->suppressed > 0)
        log_msg(level, NULL, "%s (and %llu more like it in the last %d s)",
                msg, r->suppressed, LOG_EVERY_MS / 1000);
    else
        log_msg(level, NULL, "%s", msg);
    r->logged = true;
    r->last_ms = now;
    r->suppressed = 0;
}

static void
cl_push(struct clist *l, struct httpd_conn *c)
{
    c->in = l;
    c->next = NULL;
    c->prev = l->tail;
    if (l->tail != NULL)
        l->tail->next = c;
    else
        l->head = c;
    l->tail = c;
    l->n++;
}

static void
cl_remove(struct httpd_conn *c)
{
    struct clist *l = c->in;

    if (l == NULL)
        return;
    if (c->prev != NULL)
        c->prev->next = c->next;
    else
        l->head = c->next;
    if (c->next != NULL)
        c->next->prev = c->prev;
    else
        l->tail = c->prev;
    l->n--;
    c->in = NULL;
    c->prev = c->next = NULL;
}

const char *
httpd_conn_peer(const struct httpd_conn *c, char *buf, size_t len)
{
    char *addr = NULL;
    ev_uint16_t port = 0;

    if (c != NULL && c->evcon != NULL)
        evhttp_connection_get_peer(c->evcon, &addr, &port);
    snprintf(buf, len, "%s:%u", addr != NULL ? addr : "?", (unsigned)port);
    return buf;
}

/* Whether bytes of a request have come in: buffered by evhttp, or still
 * in the socket. Such a connection is not idle, whatever its phase. */
static bool
has_input(const struct httpd_conn *c)
{
    int n = 0;

    if (evbuffer_get_length(bufferevent_get_input(c->bev)) > 0)
        return true;
    return ioctl(c->fd, FIONREAD, &n) == 0 && n > 0;
}

/* The deadline of a phase runs from its start. */
static void
begin_phase(struct httpd_conn *c, enum phase ph)
{
    c->phase = ph;
    c->since_ms = loop_now_ms();
    loop_timer_ms(c->deadline, c->h->deadline_ms);
}

/* Frees a conn that evhttp no longer has (or never got to). */
static void
conn_free(struct httpd_conn *c)
{
    struct httpd *h = c->h;

    if (c->held != NULL) {
        struct evhttp_request *req = c->held;

        c->held = NULL;
        c->drop(c->drop_arg);
        /* A connection that fails (EOF, a timeout) while its answer is
         * unfinished lets go of the request instead of freeing it
         * (http.c, evhttp_connection_incoming_fail): it is ours then. A
         * request still on the connection goes with it. */
        if (evhttp_request_get_connection(req) == NULL)
            evhttp_request_free(req);
    }
    cl_remove(c);
    if (c->evcon != NULL) {
        if (c->refused)
            h->nrefused--;
        else
            h->nserved--;
        if (c->fd >= 0 && (size_t)c->fd < h->nbyfd && h->byfd[c->fd] == c)
            h->byfd[c->fd] = NULL;
    }
    event_free(c->deadline);
    free(c);
}

/* evhttp is freeing the connection: right before its socket closes. */
static void
on_close(struct evhttp_connection *evcon, void *arg)
{
    (void)evcon;
    conn_free(arg);
}

void
httpd_conn_close(struct httpd_conn *c)
{
    evhttp_connection_free(c->evcon);
}

/* Closes the connection idle longest, if one is; true if it did. */
static bool
evict_idle(struct httpd *h)
{
    struct httpd_conn *c;
    char who[128];

    for (c = h->idle.head; c != NULL; c = c->next) {
        if (has_input(c))
            continue; /* its next request is on its way */
        h->evicted_idle++;
        httpd_ratelog(&h->log_idle, LOG_LEVEL_INFO,
                      "status: closed the idle connection from %s to make "
                      "room (%zu connections served)",
                      httpd_conn_peer(c, who, sizeof(who)),
                      h->max_connections);
        httpd_conn_close(c);
        return true;
    }
    return false;
}

/*
 * The refused connection to close for a newcomer when too many wait: the
 * one waiting longest among those that have sent nothing, else the one
 * waiting longest. A probe sends its request with its connection; closed
 * by a burst of connections that arrived after it and before its request
 * was read (a flood reconnecting what was just closed to make room), it
 * would go unanswered.
 */
static struct httpd_conn *
waiting_victim(struct httpd *h)
{
    struct httpd_conn *c;

    for (c = h->waiting.head; c != NULL; c = c->next)
        if (!has_input(c))
            return c;
    return h->waiting.head;
}

static void
on_deadline(evutil_socket_t fd, short what, void *arg)
{
    struct httpd_conn *c = arg;
    struct httpd *h = c->h;
    char who[128];

    (void)fd;
    (void)what;
    /* Idle, and nothing of a next request: an ordinary keep-alive end. */
    if (c->phase == PH_IDLE && !has_input(c)) {
        httpd_conn_close(c);
        return;
    }
    h->timed_out++;
    httpd_ratelog(&h->log_deadline, LOG_LEVEL_INFO,
                  "status: closed the connection from %s: %s within %u ms",
                  httpd_conn_peer(c, who, sizeof(who)),
                  c->phase == PH_ANSWER ? "answer not taken"
                                        : "no complete request",
                  h->deadline_ms);
    httpd_conn_close(c);
}

static size_t
waiting_cap(const struct httpd *h)
{
    return h->max_connections > WAITING_MIN ? h->max_connections : WAITING_MIN;
}

static int
byfd_put(struct httpd *h, struct httpd_conn *c)
{
    if ((size_t)c->fd >= h->nbyfd) {
        size_t n = h->nbyfd > 0 ? h->nbyfd : 64;
        struct httpd_conn **v;

        while (n <= (size_t)c->fd)
            n *= 2;
        v = realloc(h->byfd, n * sizeof(*v));
        if (v == NULL)
            return -1;
        memset(v + h->nbyfd, 0, (n - h->nbyfd) * sizeof(*v));
        h->byfd = v;
        h->nbyfd = n;
    }
    h->byfd[c->fd] = c;
    return 0;
}

/*
 * A new connection is known: served if there is room or an idle one can
 * be closed for it, else refused (and the refused one waiting longest
 * closed when too many wait). Only from the loop, never from inside an
 * evhttp callback: closing a connection evhttp is working on frees it
 * under evhttp's feet.
 */
static void
resolve_one(struct httpd *h, struct httpd_conn *c)
{
    uint64_t age, now = loop_now_ms();
    void *arg = NULL;
    char who[128];

    bufferevent_getcb(c->bev, NULL, NULL, NULL, &arg);
    c->evcon = arg;
    c->fd = bufferevent_getfd(c->bev);
    /* evhttp's own reference keeps it from here, if it still wants it. */
    bufferevent_decref(c->bev);
    if (c->evcon == NULL) { /* evhttp gave up on it already */
        event_free(c->deadline);
        free(c);
        return;
    }
    if (c->fd < 0 || byfd_put(h, c) != 0) {
        /* Nothing to know it by: not served rather than unbounded. */
        struct evhttp_connection *evcon = c->evcon;

        c->evcon = NULL;
        conn_free(c);
        evhttp_connection_free(evcon);
        return;
    }
    evhttp_connection_set_closecb(c->evcon, on_close, c);
    if (h->nserved < h->max_connections || evict_idle(h)) {
        h->nserved++;
    } else {
        if (h->waiting.n >= waiting_cap(h)) {
            struct httpd_conn *old = waiting_victim(h);

            h->evicted_waiting++;
            httpd_ratelog(&h->log_waiting, LOG_LEVEL_INFO,
                          "status: closed the refused connection from %s: "
                          "too many waiting",
                          httpd_conn_peer(old, who, sizeof(who)));
            httpd_conn_close(old);
        }
        c->refused = true;
        h->nrefused++;
        cl_push(&h->waiting, c);
    }
    /* The deadline counts from the accept, a loop pass ago. */
    age = now - c->since_ms;
    c->phase = PH_REQUEST;
    age = age < h->deadline_ms ? h->deadline_ms - age : 0;
    loop_timer_ms(c->deadline, age);
}

static void
resolve(evutil_socket_t fd, short what, void *arg)
{
    struct httpd *h = arg;
    struct httpd_conn *c;

    (void)fd;
    (void)what;
    while ((c = h->pending.head) != NULL) {
        cl_remove(c);
        resolve_one(h, c);
    }
}

/*
 * evhttp accepted a connection and asks for its bufferevent (the same
 * kind it would make itself). When memory runs out the connection goes
 * untracked, bounded by evhttp's own timeout only.
 */
static struct bufferevent *
on_accept(struct event_base *base, void *arg)
{
    struct httpd *h = arg;
    struct bufferevent *bev = bufferevent_socket_new(base, -1, 0);
    struct httpd_conn *c;

    h->pause_ms = PAUSE_MIN_MS; /* accept() works again */
    if (bev == NULL)
        return NULL;
    c = calloc(1, sizeof(*c));
    if (c == NULL)
        return bev;
    c->deadline = evtimer_new(base, on_deadline, c);
    if (c->deadline == NULL) {
        free(c);
        return bev;
    }
    c->h = h;
    c->bev = bev;
    c->fd = -1;
    c->since_ms = loop_now_ms();
    bufferevent_incref(bev);
    cl_push(&h->pending, c);
    event_active(h->resolve_ev, EV_TIMEOUT, 1);
    return bev;
}

/*
 * The conn a request came on, or NULL (untracked). Never resolves: that
 * may close connections, this one among them, and evhttp is on the
 * stack. No need either: a new connection's socket is polled from the
 * next loop pass on, and its resolve runs on this one.
 */
static struct httpd_conn *
find_conn(struct httpd *h, struct evhttp_request *req)
{
    struct evhttp_connection *evcon = evhttp_request_get_connection(req);
    struct bufferevent *bev =
        evcon != NULL ? evhttp_connection_get_bufferevent(evcon) : NULL;
    int fd = bev != NULL ? bufferevent_getfd(bev) : -1;
    struct httpd_conn *c;

    if (fd < 0 || (size_t)fd >= h->nbyfd)
        return NULL;
    c = h->byfd[fd];
    return c != NULL && c->evcon == evcon ? c : NULL;
}

/* An answer is out: the connection waits for its next request. */
static void
on_complete(struct evhttp_request *req, void *arg)
{
    struct httpd_conn *c = arg;

    (void)req;
    if (c->refused)
        return; /* closed right after this */
    begin_phase(c, PH_IDLE);
    cl_push(&c->h->idle, c);
}

static void
on_resume(evutil_socket_t fd, short what, void *arg)
{
    struct httpd *h = arg;

    (void)fd;
    (void)what;
    evconnlistener_enable(h->lev);
}

/*
 * accept() failed for good (EMFILE, ENFILE, ENOBUFS, ENOMEM...; libevent
 * retries EINTR, EAGAIN and ECONNABORTED itself). The pending connection
 * stays in the backlog and the socket stays readable, so without a pause
 * the loop would spin on it.
 */
static void
on_accept_error(struct evconnlistener *lev, void *arg)
{
    int err = errno;
    struct httpd *h;

    (void)arg;
    for (h = all_httpd; h != NULL && h->lev != lev; h = h->next_httpd)
        ;
    if (h == NULL)
        return;
    h->accept_errors++;
    evconnlistener_disable(lev);
    loop_timer_ms(h->resume_ev, h->pause_ms);
    httpd_ratelog(&h->log_accept, LOG_LEVEL_WARN,
                  "status: cannot accept a connection: %s; not accepting "
                  "for %u ms",
                  strerror(err), h->pause_ms);
    h->pause_ms =
        h->pause_ms * 2 < PAUSE_MAX_MS ? h->pause_ms * 2 : PAUSE_MAX_MS;
}

/*
 * Sends `buf` (may be NULL: no body) with its Content-Length, whatever
 * version the request line named. evhttp 2.1 adds the length only to an
 * answer to HTTP/1.x, but keeps a connection open after other versions
 * too: "HTTP/0.9" with "Connection: keep-alive", or a major number its
 * parser lets through and then cuts to a char ("HTTP/144444444444444444.1"
 * passes its "major > 1" check as a negative int and is answered as
 * "HTTP/28.1"). Without a length such an answer has no end but the
 * connection's, and the next pipelined answer reads as more of its body.
 * HEAD gets the headers only, so a client pipelining HEAD then GET is not
 * handed a body it did not ask for.
 */
void
httpd_reply(struct evhttp_request *req, int code, const char *reason,
            struct evbuffer *buf)
{
    size_t n = buf != NULL ? evbuffer_get_length(buf) : 0;
    char len[32];

    snprintf(len, sizeof(len), "%zu", n);
    evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Length",
                      len);
    if (n > 0 && evhttp_request_get_command(req) == EVHTTP_REQ_HEAD)
        evbuffer_drain(buf, n);
    evhttp_send_reply(req, code, reason, buf);
}

void
httpd_send_json(struct evhttp_request *req, int code, const char *reason,
                yajl_gen g)
{
    struct evbuffer *buf = evbuffer_new();
    const unsigned char *out;
    size_t len;

    if (buf == NULL) {
        evhttp_send_error(req, 500, NULL);
        return;
    }
    yajl_gen_get_buf(g, &out, &len);
    evbuffer_add(buf, out, len);
    evbuffer_add(buf, "\n", 1);
    evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
                      "application/json");
    httpd_reply(req, code, reason, buf);
    evbuffer_free(buf);
}

void
httpd_send_error(struct evhttp_request *req, int code, const char *reason,
                 const char *msg)
{
    yajl_gen g = yajl_gen_alloc(NULL);

    if (g == NULL) {
        evhttp_send_error(req, 500, NULL);
        return;
    }
    yajl_gen_map_open(g);
    jw_key_str(g, "error", msg);
    yajl_gen_map_close(g);
    httpd_send_json(req, code, reason, g);
    yajl_gen_free(g);
}

bool
httpd_token_matches(const char *token, const char *guess)
{
    size_t tlen = strlen(token), glen = strlen(guess), i;
    unsigned char diff = 0;

    for (i = 0; i < tlen; i++)
        diff |= (unsigned char)(token[i] ^ (i < glen ? guess[i] : 0));
    return diff == 0 && glen == tlen;
}

bool
httpd_authorized(const char *token, struct evhttp_request *req)
{
    const char *h = evhttp_find_header(evhttp_request_get_input_headers(req),
                                       "Authorization");

    if (h == NULL || strncasecmp(h, "Bearer ", 7) != 0)
        return false;
    return httpd_token_matches(token, h + 7);
}

int
httpd_parse_query(struct evhttp_request *req, struct evkeyvalq *kv,
                  struct httpd_qparam *p, size_t n, char *err, size_t errlen)
{
    const char *q = evhttp_uri_get_query(evhttp_request_get_evhttp_uri(req));
    struct evkeyval *e;
    size_t i;

    /* TAILQ_INIT: keyvalq_struct.h declares the list, not its macros. */
    kv->tqh_first = NULL;
    kv->tqh_last = &kv->tqh_first;
    if (q == NULL || *q == '\0')
        return 0;
    if (evhttp_parse_query_str(q, kv) != 0) {
        snprintf(err, errlen, "malformed query string");
        return -1;
    }
    for (e = kv->tqh_first; e != NULL; e = e->next.tqe_next) {
        for (i = 0; i < n; i++)
            if (strcmp(e->key, p[i].key) == 0)
                break;
        if (i == n) {
            snprintf(err, errlen,
                     "unknown query parameter (known: %s%s%s%s%s%s%s)",
                     p[0].key, n > 1 ? ", " : "", n > 1 ? p[1].key : "",
                     n > 2 ? ", " : "", n > 2 ? p[2].key : "",
                     n > 3 ? ", " : "", n > 3 ? p[3].key : "");
            return -1;
        }
        if (p[i].set) {
            snprintf(err, errlen, "%s given twice", p[i].key);
            return -1;
        }
        p[i].set = true;
        p[i].sval = e->value;
        if (p[i].is_int) {
            char *end;

            errno = 0;
            p[i].ival = strtol(e->value, &end, 10);
            if (e->value[0] == '\0' || *end != '\0' || errno != 0 ||
                p[i].ival < p[i].min || p[i].ival > p[i].max) {
                snprintf(err, errlen, "%s must be an integer in %ld..%ld",
                         p[i].key, p[i].min, p[i].max);
                return -1;
            }
        }
    }
    return 0;
}

void
httpd_hold(struct httpd_conn *c, struct evhttp_request *req,
           httpd_drop_cb *drop, void *arg)
{
    c->held = req;
    c->drop = drop;
    c->drop_arg = arg;
    c->phase = PH_HELD;
    evtimer_del(c->deadline);
}

void
httpd_hold_end(struct httpd_conn *c)
{
    c->held = NULL;
    c->drop = NULL;
    c->drop_arg = NULL;
    begin_phase(c, PH_ANSWER);
}

bool
httpd_conn_gone(const struct httpd_conn *c)
{
    char b;
    ssize_t n = recv(c->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);

    if (n == 0)
        return true;
    return n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;
}

unsigned
httpd_conn_deadline_ms(const struct httpd_conn *c)
{
    return c->h->deadline_ms;
}

/*
 * The request on `c` is in: it is no longer idle or waiting, and its
 * answer has the deadline. A refused one is served after all if room has
 * come since. Returns whether it stays refused.
 */
static bool
take_request(struct httpd *h, struct httpd_conn *c, struct evhttp_request *req)
{
    cl_remove(c);
    if (c->refused && (h->nserved < h->max_connections || evict_idle(h))) {
        c->refused = false;
        h->nrefused--;
        h->nserved++;
    }
    begin_phase(c, PH_ANSWER);
    evhttp_request_set_on_complete_cb(req, on_complete, c);
    return c->refused;
}

static bool
is_probe(const struct httpd *h, const char *path)
{
    const char *const *p;

    if (path == NULL || h->o.probes == NULL)
        return false;
    for (p = h->o.probes; *p != NULL; p++)
        if (strcmp(path, *p) == 0)
            return true;
    return false;
}

/* What every request goes through before its handler: the connection's
 * bookkeeping, the refusal at the cap, a malformed target. */
static void
on_request(struct evhttp_request *req, void *arg)
{
    struct httpd *h = arg;
    const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
    const char *path = uri != NULL ? evhttp_uri_get_path(uri) : NULL;
    struct httpd_conn *c = find_conn(h, req);
    bool refused = c != NULL && take_request(h, c, req);
    char who[128];

    /* Nothing may touch `c` once an answer is sent: on failure evhttp
     * frees the connection at once. */
    if (refused) {
        /* One answer, then closed: a refused connection holds nothing. */
        evhttp_add_header(evhttp_request_get_output_headers(req), "Connection",
                          "close");
        /* Probes stay open: a kubelet or systemd has to hear from the
         * loop whatever other clients do. */
        if (!is_probe(h, path)) {
            h->rejected_busy++;
            httpd_ratelog(&h->log_refuse, LOG_LEVEL_INFO,
                          "status: refused a request from %s: all %zu "
                          "connections busy",
                          httpd_conn_peer(c, who, sizeof(who)),
                          h->max_connections);
            evhttp_add_header(evhttp_request_get_output_headers(req),
                              "Retry-After", "1");
            httpd_send_error(req, 503, "Service Unavailable",
                             "too many connections to the status endpoint");
            return;
        }
    }
    if (path == NULL) {
        httpd_ratelog(&h->log_bad, LOG_LEVEL_INFO,
                      "status: bad request from %s: malformed request target",
                      httpd_conn_peer(c, who, sizeof(who)));
        httpd_send_error(req, 400, "Bad Request", "malformed request target");
        return;
    }
    h->o.on_request(c, req, path, h->o.arg);
}

/* Whether something answers on the unix socket at `path`: another
 * reapd, whose socket must not be taken from it. */
static bool
socket_live(const struct sockaddr_un *sa)
{
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    bool live;

    if (fd < 0)
        return false;
    live = connect(fd, (const struct sockaddr *)sa, sizeof(*sa)) == 0;
    close(fd);
    return live;
}

/* Only a stale socket of an earlier run may be replaced; anything else at
 * that path (a typo pointing at a file), or a socket another process
 * still serves, is left alone. */
static int
clear_stale(const struct sockaddr_un *sa)
{
    const char *path = sa->sun_path;
    struct stat st;

    if (lstat(path, &st) != 0)
        return 0;
    if (!S_ISSOCK(st.st_mode)) {
        log_error(NULL, "status: %s exists and is not a socket", path);
        return -1;
    }
    if (socket_live(sa)) {
        log_error(NULL,
                  "status: %s is in use by another process (another "
                  "reapd?)",
                  path);
        return -1;
    }
    unlink(path);
    return 0;
}

/* A private socket's parent, one level (/run/reapd): a tmpfs is empty at
 * boot. */
static int
make_parent(const char *path)
{
    char dir[sizeof(((struct sockaddr_un *)0)->sun_path)];
    char *slash;

    snprintf(dir, sizeof(dir), "%s", path);
    slash = strrchr(dir, '/');
    if (slash != NULL && slash != dir) {
        *slash = '\0';
        if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
            log_error(NULL, "admin: cannot create %s: %s", dir,
                      strerror(errno));
            return -1;
        }
    }
    return 0;
}

static int
bind_unix(struct httpd *h, struct event_base *base, const char *path)
{
    bool is_private = h->o.private_socket;
    struct sockaddr_un sa;
    struct evconnlistener *lev;
    mode_t old;

    if (path[0] != '/' || strlen(path) >= sizeof(sa.sun_path)) {
        log_error(NULL,
                  "status: unix socket path must be absolute and "
                  "shorter than %zu bytes: \"%s\"",
                  sizeof(sa.sun_path), path);
        return -1;
    }
    memset(&sa, 0, sizeof(sa));
    sa.sun_family = AF_UNIX;
    strcpy(sa.sun_path, path);
    if (clear_stale(&sa) != 0 || (is_private && make_parent(path) != 0))
        return -1;
    /* A private socket is its owner's alone from its first instant: its
     * mode comes from the umask at bind(), never a chmod after. */
    old = umask(is_private ? 0177 : 0);
    if (!is_private)
        umask(old);
    lev = evconnlistener_new_bind(
        base, NULL, NULL, LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC,
        LISTEN_BACKLOG, (struct sockaddr *)&sa, sizeof(sa));
    if (is_private)
        umask(old);
    if (lev == NULL) {
        log_error(NULL, "status: cannot listen on %s: %s", path,
                  strerror(errno));
        return -1;
    }
    if (evhttp_bind_listener(h->http, lev) == NULL) {
        evconnlistener_free(lev);
        return -1;
    }
    h->lev = lev;
    h->unix_path = strdup(path);
    return 0;
}

static int
bind_tcp(struct httpd *h, const char *listen)
{
    char host[256];
    const char *colon = strrchr(listen, ':');
    long port;
    char *end;
    size_t hl;
    struct evhttp_bound_socket *bound;

    if (colon == NULL)
        return -1;
    hl = (size_t)(colon - listen);
    if (hl >= sizeof(host))
        return -1;
    memcpy(host, listen, hl);
    host[hl] = '\0';
    /* "[::1]:9323" */
    if (hl >= 2 && host[0] == '[' && host[hl - 1] == ']') {
        memmove(host, host + 1, hl - 2);
        host[hl - 2] = '\0';
    }
    port = strtol(colon + 1, &end, 10);
    if (*end != '\0' || port < 1 || port > 65535)
        return -1;
    bound =
        evhttp_bind_socket_with_handle(h->http, host, (unsigned short)port);
    if (bound == NULL) {
        log_error(NULL, "status: cannot listen on %s: %s", listen,
                  strerror(errno));
        return -1;
    }
    h->lev = evhttp_bound_socket_get_listener(bound);
    return 0;
}

/* The evhttp server with its bounds and callbacks, not yet listening. */
static int
make_http(struct httpd *h, struct event_base *base)
{
    h->resolve_ev = event_new(base, -1, 0, resolve, h);
    h->resume_ev = evtimer_new(base, on_resume, h);
    h->http = evhttp_new(base);
    if (h->resolve_ev == NULL || h->resume_ev == NULL || h->http == NULL)
        return -1;
    evhttp_set_max_headers_size(h->http, MAX_HEADERS_SIZE);
    evhttp_set_max_body_size(h->http, MAX_BODY_SIZE);
    /* Idle time between reads and writes; the deadline bounds the rest. */
    evhttp_set_timeout(h->http, REQUEST_TIMEOUT);
    evhttp_set_allowed_methods(
        h->http, EVHTTP_REQ_GET | EVHTTP_REQ_HEAD | EVHTTP_REQ_POST |
                     EVHTTP_REQ_PUT | EVHTTP_REQ_DELETE | EVHTTP_REQ_PATCH |
                     EVHTTP_REQ_OPTIONS);
    evhttp_set_gencb(h->http, on_request, h);
    evhttp_set_bevcb(h->http, on_accept, h);
    return 0;
}

struct httpd *
httpd_new(struct loop *l, const char *listen, const struct httpd_opts *o)
{
    struct httpd *h = calloc(1, sizeof(*h));
    int rc;

    if (h == NULL)
        return NULL;
    h->o = *o;
    h->max_connections = DEFAULT_MAX_CONNECTIONS;
    h->deadline_ms = REQUEST_DEADLINE_MS;
    h->pause_ms = PAUSE_MIN_MS;
    h->next_httpd = all_httpd;
    all_httpd = h;
    if (strcmp(listen, "off") == 0) {
        log_info(NULL, "%s: off", o->name);
        return h;
    }
    if (make_http(h, loop_base(l)) != 0)
        goto fail;
    if (strncmp(listen, "unix:", 5) == 0)
        rc = bind_unix(h, loop_base(l), listen + 5);
    else
        rc = bind_tcp(h, listen);
    if (rc != 0) {
        log_error(NULL, "status: cannot serve on \"%s\"", listen);
        goto fail;
    }
    evconnlistener_set_error_cb(h->lev, on_accept_error);
    log_info(NULL, "%s on %s", o->name, listen);
    return h;
fail:
    httpd_free(h);
    return NULL;
}

void
httpd_set_max_connections(struct httpd *h, size_t n)
{
    h->max_connections = n;
}

void
httpd_set_deadline_ms(struct httpd *h, unsigned ms)
{
    h->deadline_ms = ms;
}

size_t
httpd_connections(struct httpd *h)
{
    if (h->pending.head != NULL)
        resolve(-1, 0, h);
    return h->nserved + h->nrefused;
}

void
httpd_stats(const struct httpd *h, struct httpd_stats *st)
{
    st->connections = h->nserved + h->nrefused;
    st->rejected_busy = h->rejected_busy;
    st->evicted_idle = h->evicted_idle;
    st->evicted_waiting = h->evicted_waiting;
    st->timed_out = h->timed_out;
    st->accept_errors = h->accept_errors;
}

void
httpd_free(struct httpd *h)
{
    struct httpd **p;
    struct httpd_conn *c;
    size_t i;

    if (h == NULL)
        return;
    for (p = &all_httpd; *p != NULL; p = &(*p)->next_httpd)
        if (*p == h) {
            *p = h->next_httpd;
            break;
        }
    /* Frees every connection; each resolved one through on_close. */
    if (h->http != NULL)
        evhttp_free(h->http);
    while ((c = h->pending.head) != NULL) {
        cl_remove(c);
        bufferevent_decref(c->bev);
        event_free(c->deadline);
        free(c);
    }
    for (i = 0; i < h->nbyfd; i++)
        if (h->byfd[i] != NULL) /* evhttp kept it past evhttp_free */
            conn_free(h->byfd[i]);
    free(h->byfd);
    if (h->resolve_ev != NULL)
        event_free(h->resolve_ev);
    if (h->resume_ev != NULL)
        event_free(h->resume_ev);
    if (h->unix_path != NULL) {
        unlink(h->unix_path);
        free(h->unix_path);
    }
    free(h);
}
