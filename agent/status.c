/*
 * status — the HTTP status endpoint; see status.h.
 *
 * Answers are built with yajl_gen into an evbuffer and sent in one go.
 * Nothing here can change reapd's state: the endpoint only reads.
 */
#include "status.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <event2/listener.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include <yajl/yajl_gen.h>

#include "bounds.h"
#include "config.h"
#include "docker.h"
#include "feed.h"
#include "lifecycle.h"
#include "log.h"
#include "loop.h"
#include "json.h"
#include "jsonw.h"
#include "outbox.h"
#include "reaper.h"
#include "report.h"
#include "store.h"
#include "upstream.h"

#ifndef REAPD_REVISION /* set by CMakeLists.txt */
#define REAPD_REVISION "unknown"
#endif

#define MAX_HEADERS_SIZE 8192
#define MAX_BODY_SIZE    1024
#define REQUEST_TIMEOUT  10

#define REPORTS_DEFAULT 50
#define REPORTS_MAX     1000

/* The read API's held requests (waits, drains, streams), per listener. */
#define WAIT_MAX_S         300
#define HELD_MAX           512
#define STREAMS_MAX        16
#define STREAM_PAGE        100
#define STREAM_CHUNK_BYTES (256u << 10)
#define HELD_TICK_MS       1000 /* a held client's liveness, a wait's end */
#define DRAIN_TICK_MS      200

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
 * One line per LOG_EVERY_MS at most for one kind of event a client can
 * cause; the next line says how many were left out, the metrics count
 * them all.
 */
struct ratelog {
    bool logged;
    uint64_t last_ms;
    unsigned long long suppressed;
};

/*
 * What a connection is doing, for the deadline and for eviction: waiting
 * for or reading a request (from its start, or after an answer once
 * bytes of the next request came), sending an answer, or idle between
 * requests.
 */
enum phase { PH_REQUEST, PH_ANSWER, PH_IDLE, PH_HELD };

struct held;

struct conn;
struct clist {
    struct conn *head, *tail;
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
struct conn {
    struct status *s;
    struct bufferevent *bev;
    struct evhttp_connection *evcon; /* NULL until resolved */
    int fd;
    bool refused; /* came at the cap with nothing idle to close */
    enum phase phase;
    uint64_t since_ms; /* start of the phase, for the deadline */
    struct event *deadline;
    struct held *held; /* a request held open (PH_HELD); NULL: none */
    struct clist *in;  /* pending, idle or waiting; NULL: none */
    struct conn *prev, *next;
};

struct status {
    struct evhttp *http;
    struct evconnlistener *lev; /* owned by http */
    struct reaper *reaper;
    struct store *store;      /* may be NULL */
    const struct config *cfg; /* may be NULL: /v1/config says 503 */
    double start_time; /* the process's, seconds since the epoch; 0: unknown */
    char *token;       /* NULL: no auth */
    size_t max_connections;
    unsigned deadline_ms;
    /* Connections by state: accepted, not yet resolved; served and idle
     * (oldest first); refused and waiting for their one request. */
    struct clist pending, idle, waiting;
    size_t nserved, nrefused;
    struct conn **byfd; /* resolved connections by descriptor */
    size_t nbyfd;
    struct event *resolve_ev;
    struct event *resume_ev; /* accepting again after an error */
    unsigned pause_ms;
    uint64_t reloads_ok, reloads_rejected;
    uint64_t rejected_auth, rejected_busy;
    uint64_t evicted_idle, evicted_waiting, timed_out, accept_errors;
    struct ratelog log_accept, log_idle, log_waiting, log_deadline, log_refuse,
        log_bad;
    char *unix_path;
    struct status *next_status;
    /* The admin socket: the write operations too, no token. */
    bool admin;
    struct feed *feed;     /* borrowed; NULL: no waits, no streams */
    struct outbox *outbox; /* borrowed; NULL: no upstream */
    struct upstream *up;   /* borrowed; NULL: no upstream */
    struct held *held;     /* every held request */
    size_t nheld, nstreams;
    uint64_t held_rejected, streams_cut;
    struct ratelog log_cut;
};

/*
 * A request answered later: a wait for a container's report, a drain, or
 * the report stream (answered for as long as the client reads). It
 * belongs to its connection: when evhttp frees the connection (the
 * client went away, a write failed, reapd stops) the hold goes with it,
 * unanswered.
 */
enum held_kind { H_WAIT, H_DRAIN, H_STREAM, H_AUDIT };

struct held {
    struct status *s;
    struct conn *c;
    struct evhttp_request *req;
    enum held_kind kind;
    char id[STORE_ID_MAX + 1]; /* H_WAIT: the container */
    struct feed_sub *sub;
    struct event *tick;
    uint64_t until_ms;
    int64_t last_seq;       /* H_STREAM: the last entry sent */
    bool writing;           /* H_STREAM: a chunk is not out yet */
    uint64_t writing_since; /* ... since then */
    uint64_t audit_target;  /* H_AUDIT: reaper_audit_now's */
    struct held *prev, *next;
};

/*
 * Every endpoint, for the listener's error callback: evhttp took the
 * listener's callback argument for itself, so that callback is only told
 * the listener. One loop, one thread: no lock.
 */
static struct status *all_status;

static void ratelog(struct ratelog *r, enum log_level level, const char *fmt,
                    ...) __attribute__((format(printf, 3, 4)));

static void
ratelog(struct ratelog *r, enum log_level level, const char *fmt, ...)
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
cl_push(struct clist *l, struct conn *c)
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
cl_remove(struct conn *c)
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

/* "address:port" of the client (`c` may be NULL), for log lines. */
static const char *
peer(const struct conn *c, char *buf, size_t len)
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
has_input(const struct conn *c)
{
    int n = 0;

    if (evbuffer_get_length(bufferevent_get_input(c->bev)) > 0)
        return true;
    return ioctl(c->fd, FIONREAD, &n) == 0 && n > 0;
}

/* The deadline of a phase runs from its start. */
static void
begin_phase(struct conn *c, enum phase ph)
{
    c->phase = ph;
    c->since_ms = loop_now_ms();
    loop_timer_ms(c->deadline, c->s->deadline_ms);
}

static void held_free(struct held *h);

/* Frees a conn that evhttp no longer has (or never got to). */
static void
conn_free(struct conn *c)
{
    struct status *s = c->s;

    if (c->held != NULL) {
        struct evhttp_request *req = c->held->req;

        held_free(c->held);
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
            s->nrefused--;
        else
            s->nserved--;
        if (c->fd >= 0 && (size_t)c->fd < s->nbyfd && s->byfd[c->fd] == c)
            s->byfd[c->fd] = NULL;
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

/* Closes a connection now; `c` is freed (through on_close). */
static void
conn_close(struct conn *c)
{
    evhttp_connection_free(c->evcon);
}

/* Closes the connection idle longest, if one is; true if it did. */
static bool
evict_idle(struct status *s)
{
    struct conn *c;
    char who[128];

    for (c = s->idle.head; c != NULL; c = c->next) {
        if (has_input(c))
            continue; /* its next request is on its way */
        s->evicted_idle++;
        ratelog(&s->log_idle, LOG_LEVEL_INFO,
                "status: closed the idle connection from %s to make room "
                "(%zu connections served)",
                peer(c, who, sizeof(who)), s->max_connections);
        conn_close(c);
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
 * would go unanswered (seen once in test_status_flood).
 */
static struct conn *
waiting_victim(struct status *s)
{
    struct conn *c;

    for (c = s->waiting.head; c != NULL; c = c->next)
        if (!has_input(c))
            return c;
    return s->waiting.head;
}

static void
on_deadline(evutil_socket_t fd, short what, void *arg)
{
    struct conn *c = arg;
    struct status *s = c->s;
    char who[128];

    (void)fd;
    (void)what;
    /* Idle, and nothing of a next request: an ordinary keep-alive end. */
    if (c->phase == PH_IDLE && !has_input(c)) {
        conn_close(c);
        return;
    }
    s->timed_out++;
    ratelog(&s->log_deadline, LOG_LEVEL_INFO,
            "status: closed the connection from %s: %s within %u ms",
            peer(c, who, sizeof(who)),
            c->phase == PH_ANSWER ? "answer not taken" : "no complete request",
            s->deadline_ms);
    conn_close(c);
}

static size_t
waiting_cap(const struct status *s)
{
    return s->max_connections > WAITING_MIN ? s->max_connections : WAITING_MIN;
}

static int
byfd_put(struct status *s, struct conn *c)
{
    if ((size_t)c->fd >= s->nbyfd) {
        size_t n = s->nbyfd > 0 ? s->nbyfd : 64;
        struct conn **v;

        while (n <= (size_t)c->fd)
            n *= 2;
        v = realloc(s->byfd, n * sizeof(*v));
        if (v == NULL)
            return -1;
        memset(v + s->nbyfd, 0, (n - s->nbyfd) * sizeof(*v));
        s->byfd = v;
        s->nbyfd = n;
    }
    s->byfd[c->fd] = c;
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
resolve_one(struct status *s, struct conn *c)
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
    if (c->fd < 0 || byfd_put(s, c) != 0) {
        /* Nothing to know it by: not served rather than unbounded. */
        struct evhttp_connection *evcon = c->evcon;

        c->evcon = NULL;
        conn_free(c);
        evhttp_connection_free(evcon);
        return;
    }
    evhttp_connection_set_closecb(c->evcon, on_close, c);
    if (s->nserved < s->max_connections || evict_idle(s)) {
        s->nserved++;
    } else {
        if (s->waiting.n >= waiting_cap(s)) {
            struct conn *old = waiting_victim(s);

            s->evicted_waiting++;
            ratelog(&s->log_waiting, LOG_LEVEL_INFO,
                    "status: closed the refused connection from %s: too "
                    "many waiting",
                    peer(old, who, sizeof(who)));
            conn_close(old);
        }
        c->refused = true;
        s->nrefused++;
        cl_push(&s->waiting, c);
    }
    /* The deadline counts from the accept, a loop pass ago. */
    age = now - c->since_ms;
    c->phase = PH_REQUEST;
    age = age < s->deadline_ms ? s->deadline_ms - age : 0;
    loop_timer_ms(c->deadline, age);
}

static void
resolve(evutil_socket_t fd, short what, void *arg)
{
    struct status *s = arg;
    struct conn *c;

    (void)fd;
    (void)what;
    while ((c = s->pending.head) != NULL) {
        cl_remove(c);
        resolve_one(s, c);
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
    struct status *s = arg;
    struct bufferevent *bev = bufferevent_socket_new(base, -1, 0);
    struct conn *c;

    s->pause_ms = PAUSE_MIN_MS; /* accept() works again */
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
    c->s = s;
    c->bev = bev;
    c->fd = -1;
    c->since_ms = loop_now_ms();
    bufferevent_incref(bev);
    cl_push(&s->pending, c);
    event_active(s->resolve_ev, EV_TIMEOUT, 1);
    return bev;
}

/*
 * The conn a request came on, or NULL (untracked). Never resolves: that
 * may close connections, this one among them, and evhttp is on the
 * stack. No need either: a new connection's socket is polled from the
 * next loop pass on, and its resolve runs on this one.
 */
static struct conn *
find_conn(struct status *s, struct evhttp_request *req)
{
    struct evhttp_connection *evcon = evhttp_request_get_connection(req);
    struct bufferevent *bev =
        evcon != NULL ? evhttp_connection_get_bufferevent(evcon) : NULL;
    int fd = bev != NULL ? bufferevent_getfd(bev) : -1;
    struct conn *c;

    if (fd < 0 || (size_t)fd >= s->nbyfd)
        return NULL;
    c = s->byfd[fd];
    return c != NULL && c->evcon == evcon ? c : NULL;
}

/* An answer is out: the connection waits for its next request. */
static void
on_complete(struct evhttp_request *req, void *arg)
{
    struct conn *c = arg;

    (void)req;
    if (c->refused)
        return; /* closed right after this */
    begin_phase(c, PH_IDLE);
    cl_push(&c->s->idle, c);
}

static void
on_resume(evutil_socket_t fd, short what, void *arg)
{
    struct status *s = arg;

    (void)fd;
    (void)what;
    evconnlistener_enable(s->lev);
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
    struct status *s;

    (void)arg;
    for (s = all_status; s != NULL && s->lev != lev; s = s->next_status)
        ;
    if (s == NULL)
        return;
    s->accept_errors++;
    evconnlistener_disable(lev);
    loop_timer_ms(s->resume_ev, s->pause_ms);
    ratelog(&s->log_accept, LOG_LEVEL_WARN,
            "status: cannot accept a connection: %s; not accepting for "
            "%u ms",
            strerror(err), s->pause_ms);
    s->pause_ms =
        s->pause_ms * 2 < PAUSE_MAX_MS ? s->pause_ms * 2 : PAUSE_MAX_MS;
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
static void
reply(struct evhttp_request *req, int code, const char *reason,
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

static void
send_json(struct evhttp_request *req, int code, const char *reason, yajl_gen g)
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
    reply(req, code, reason, buf);
    evbuffer_free(buf);
}

static void
send_error(struct evhttp_request *req, int code, const char *reason,
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
    send_json(req, code, reason, g);
    yajl_gen_free(g);
}

static void
serve_readyz(struct status *s, struct evhttp_request *req)
{
    const char *why = NULL;
    bool ready = reaper_ready(s->reaper, &why);
    yajl_gen g = yajl_gen_alloc(NULL);

    if (g == NULL) {
        evhttp_send_error(req, 500, NULL);
        return;
    }
    yajl_gen_map_open(g);
    jw_key_bool(g, "ready", ready);
    if (!ready) {
        jw_key_str(g, "reason", why);
    }
    yajl_gen_map_close(g);
    send_json(req, ready ? 200 : 503, ready ? "OK" : "Service Unavailable", g);
    yajl_gen_free(g);
}

static void
gen_container(yajl_gen g, const struct reaper_view *v)
{
    const struct lc *lc = v->lc;

    yajl_gen_map_open(g);
    jw_key_str(g, "container_id", v->id);
    jw_key_str(g, "name", v->name);
    jw_key_str(g, "image", v->image);
    jw_key_str(g, "policy", v->policy);
    jw_key_str(g, "state", lc_state_name(v->state));
    jw_key_int_or_null(g, "exit_code", lc->exit_known, lc->exit_code);
    jw_key_str(g, "exit_code_source", lc_source_name(lc->source));
    jw_key_int_or_null(g, "engine_exit_code", lc->die_has_code, lc->die_code);
    jw_key_bool(g, "destroy_seen", lc->destroy_seen);
    jw_key_bool(g, "gone_polled", lc->gone_polled);
    jw_key_int(g, "delete_attempts", lc->delete_attempts);
    jw_str(g, "task_deleted");
    if (lc->task_deleted < 0)
        yajl_gen_null(g);
    else
        yajl_gen_bool(g, lc->task_deleted);
    yajl_gen_map_close(g);
}

struct find {
    yajl_gen g;
    const char *id;
    int found;
};

static void
visit(const struct reaper_view *v, void *arg)
{
    struct find *f = arg;

    if (f->id != NULL && strcmp(f->id, v->id) != 0)
        return;
    f->found++;
    gen_container(f->g, v);
}

static void
serve_containers(struct status *s, struct evhttp_request *req, const char *id)
{
    struct find f = {.id = id};

    f.g = yajl_gen_alloc(NULL);
    if (f.g == NULL) {
        evhttp_send_error(req, 500, NULL);
        return;
    }
    if (id == NULL) {
        yajl_gen_map_open(f.g);
        jw_str(f.g, "containers");
        yajl_gen_array_open(f.g);
    }
    reaper_foreach(s->reaper, visit, &f);
    if (id == NULL) {
        yajl_gen_array_close(f.g);
        yajl_gen_map_close(f.g);
        send_json(req, 200, "OK", f.g);
    } else if (f.found) {
        send_json(req, 200, "OK", f.g);
    } else {
        send_error(req, 404, "Not Found", "container not tracked");
    }
    yajl_gen_free(f.g);
}

static void
metric(struct evbuffer *b, const char *name, const char *type,
       const char *help, unsigned long long v)
{
    evbuffer_add_printf(b, "# HELP %s %s\n# TYPE %s %s\n%s %llu\n", name, help,
                        name, type, name, v);
}

/* One histogram series: cumulative buckets, +Inf, _sum, _count. `labels`
 * is "" or `k="v",` (with the trailing comma). */
static void
histogram(struct evbuffer *b, const char *name, const char *labels,
          const struct hist *h, const double *bounds, size_t n)
{
    uint64_t cum = 0;
    size_t i, len = strlen(labels);
    /* Without the trailing comma, for _sum and _count. */
    int plain = len > 0 ? (int)len - 1 : 0;

    for (i = 0; i < n; i++) {
        cum += h->buckets[i];
        evbuffer_add_printf(b, "%s_bucket{%sle=\"%g\"} %llu\n", name, labels,
                            bounds[i], (unsigned long long)cum);
    }
    cum += h->buckets[n];
    evbuffer_add_printf(b, "%s_bucket{%sle=\"+Inf\"} %llu\n", name, labels,
                        (unsigned long long)cum);
    if (plain > 0) {
        evbuffer_add_printf(b, "%s_sum{%.*s} %.17g\n", name, plain, labels,
                            h->sum);
        evbuffer_add_printf(b, "%s_count{%.*s} %llu\n", name, plain, labels,
                            (unsigned long long)h->count);
    } else {
        evbuffer_add_printf(b, "%s_sum %.17g\n", name, h->sum);
        evbuffer_add_printf(b, "%s_count %llu\n", name,
                            (unsigned long long)h->count);
    }
}

static void
family(struct evbuffer *b, const char *name, const char *type,
       const char *help)
{
    evbuffer_add_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name,
                        type);
}

static void
metric_double(struct evbuffer *b, const char *name, const char *type,
              const char *help, double v)
{
    family(b, name, type, help);
    evbuffer_add_printf(b, "%s %.15g\n", name, v);
}

/* The first `size - 1` bytes of a /proc file, NUL-terminated; -1 if it
 * cannot be read. procfs answers from memory: no wait on the loop. */
static ssize_t
read_proc(const char *path, char *buf, size_t size)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t n;

    if (fd < 0)
        return -1;
    do
        n = read(fd, buf, size - 1);
    while (n < 0 && errno == EINTR);
    close(fd);
    if (n < 0)
        return -1;
    buf[n] = '\0';
    return n;
}

/* When the process started, from its start in clock ticks after boot
 * (/proc/self/stat, field 22) and the boot time (/proc/stat btime);
 * 0 when either cannot be read. Read once, at start. */
static double
process_start_time(void)
{
    char buf[4096], *p;
    unsigned long long ticks = 0, btime = 0;
    long hz = sysconf(_SC_CLK_TCK);
    int field;

    if (hz <= 0 || read_proc("/proc/self/stat", buf, sizeof(buf)) < 0)
        return 0;
    /* The command name (field 2) may hold spaces and parentheses: the
     * fields are counted after its last ')'. */
    p = strrchr(buf, ')');
    if (p == NULL)
        return 0;
    for (field = 2; field < 22 && p != NULL; field++)
        p = strchr(p + 1, ' ');
    if (p == NULL || sscanf(p + 1, "%llu", &ticks) != 1)
        return 0;
    if (read_proc("/proc/stat", buf, sizeof(buf)) < 0 ||
        (p = strstr(buf, "\nbtime ")) == NULL ||
        sscanf(p + 7, "%llu", &btime) != 1)
        return 0;
    return (double)btime + (double)ticks / (double)hz;
}

/* The process_* metrics Prometheus' client libraries export, so the
 * usual dashboards and alerts work on reapd as they do elsewhere. */
static void
process_metrics(struct status *s, struct evbuffer *b)
{
    struct rusage ru;
    struct rlimit rl;
    char buf[256];
    unsigned long long vm_pages, rss_pages;
    long page = sysconf(_SC_PAGESIZE);
    DIR *d;

    if (getrusage(RUSAGE_SELF, &ru) == 0)
        metric_double(b, "process_cpu_seconds_total", "counter",
                      "Total user and system CPU time spent in seconds.",
                      (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
                          (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) /
                              1e6);
    if (page > 0 && read_proc("/proc/self/statm", buf, sizeof(buf)) > 0 &&
        sscanf(buf, "%llu %llu", &vm_pages, &rss_pages) == 2) {
        metric_double(b, "process_virtual_memory_bytes", "gauge",
                      "Virtual memory size in bytes.",
                      (double)vm_pages * (double)page);
        metric_double(b, "process_resident_memory_bytes", "gauge",
                      "Resident memory size in bytes.",
                      (double)rss_pages * (double)page);
    }
    d = opendir("/proc/self/fd");
    if (d != NULL) {
        unsigned long long n = 0;
        struct dirent *e;

        while ((e = readdir(d)) != NULL)
            if (e->d_name[0] != '.')
                n++;
        closedir(d);
        /* Less the directory's own descriptor, open while counting. */
        metric(b, "process_open_fds", "gauge",
               "Number of open file "
               "descriptors.",
               n > 0 ? n - 1 : 0);
    }
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
        metric(b, "process_max_fds", "gauge",
               "Maximum number of open file descriptors.",
               (unsigned long long)rl.rlim_cur);
    if (s->start_time > 0)
        metric_double(b, "process_start_time_seconds", "gauge",
                      "Start time of the process since unix epoch in "
                      "seconds.",
                      s->start_time);
}

/* What reapd adds to the reaper's metrics: build, reloads, the
 * endpoint itself. */
/* Held requests of every listener (the status endpoint and the admin
 * socket): waits, drains, audits and streams. */
static void
held_metrics(struct evbuffer *b)
{
    uint64_t held = 0, streams = 0, rejected = 0, cut = 0;
    const struct status *t;

    for (t = all_status; t != NULL; t = t->next_status) {
        held += t->nheld;
        streams += t->nstreams;
        rejected += t->held_rejected;
        cut += t->streams_cut;
    }
    metric(b, "reapd_api_held_requests", "gauge",
           "Requests held open now (waits, drains, audits, report "
           "streams), on every listener.",
           held);
    metric(b, "reapd_api_streams", "gauge", "Report streams open now.",
           streams);
    metric(b, "reapd_api_held_rejected_total", "counter",
           "Waits and streams refused (503) because the bound was reached.",
           rejected);
    metric(b, "reapd_api_streams_cut_total", "counter",
           "Report streams cut because their client did not take what was "
           "sent within the deadline.",
           cut);
}

static void
own_metrics(struct status *s, struct evbuffer *b)
{
    family(b, "reapd_build_info", "gauge",
           "Always 1; the version reapd was built as and the source "
           "revision are labels.");
    evbuffer_add_printf(b,
                        "reapd_build_info{version=\"%s\",revision=\"%s\"} "
                        "1\n",
                        REAPD_VERSION, REAPD_REVISION);
    family(b, "reapd_config_reloads_total", "counter",
           "SIGHUP config reloads, by result.");
    evbuffer_add_printf(b,
                        "reapd_config_reloads_total{result=\"ok\"} %llu\n"
                        "reapd_config_reloads_total{result=\"rejected\"} "
                        "%llu\n",
                        (unsigned long long)s->reloads_ok,
                        (unsigned long long)s->reloads_rejected);
    metric(b, "reapd_status_connections", "gauge",
           "Status endpoint connections open, served or refused.",
           s->nserved + s->nrefused);
    family(b, "reapd_status_rejected_total", "counter",
           "Status requests refused, by reason.");
    evbuffer_add_printf(
        b,
        "reapd_status_rejected_total{reason=\"unauthorized\"} %llu\n"
        "reapd_status_rejected_total{reason=\"too_many_connections\"} "
        "%llu\n",
        (unsigned long long)s->rejected_auth,
        (unsigned long long)s->rejected_busy);
    family(b, "reapd_status_connections_evicted_total", "counter",
           "Status connections closed to make room for a new one, by "
           "state: idle between requests, or refused and waiting.");
    evbuffer_add_printf(
        b,
        "reapd_status_connections_evicted_total{state=\"idle\"} %llu\n"
        "reapd_status_connections_evicted_total{state=\"refused\"} "
        "%llu\n",
        (unsigned long long)s->evicted_idle,
        (unsigned long long)s->evicted_waiting);
    metric(b, "reapd_status_requests_timed_out_total", "counter",
           "Status connections closed because a request was not complete, "
           "or an answer not taken, within the deadline.",
           s->timed_out);
    metric(b, "reapd_status_accept_errors_total", "counter",
           "accept() failures on the status endpoint; each pauses "
           "accepting.",
           s->accept_errors);
    held_metrics(b);
}

static void
histograms(struct evbuffer *b, const struct reaper_stats *st)
{
    const double *bounds;
    char labels[96];
    size_t n;
    int i;

    bounds = hist_cleanup_bounds(&n);
    family(b, "reapd_cleanup_duration_seconds", "histogram",
           "From a container's exit to its confirmed cleanup (or give-up), "
           "observed as each report is made, by result.");
    for (i = 0; i < REAPER_CLEANUP_N; i++) {
        snprintf(labels, sizeof(labels), "result=\"%s\",",
                 reaper_cleanup_name((enum reaper_cleanup)i));
        histogram(b, "reapd_cleanup_duration_seconds", labels, &st->cleanup[i],
                  bounds, n);
    }
    bounds = hist_call_bounds(&n);
    family(b, "reapd_engine_request_duration_seconds", "histogram",
           "Engine calls reapd made, from sending to the answer or "
           "failure, by API and call.");
    for (i = 0; i < REAPER_CALL_N; i++) {
        const char *api, *call;

        reaper_call_name((enum reaper_call)i, &api, &call);
        snprintf(labels, sizeof(labels), "api=\"%s\",call=\"%s\",", api, call);
        histogram(b, "reapd_engine_request_duration_seconds", labels,
                  &st->calls[i], bounds, n);
    }
    bounds = hist_latency_bounds(&n);
    family(b, "reapd_report_latency_seconds", "histogram",
           "reapd's own share of a cleanup: from the engine observation "
           "that completed it to its report being durable.");
    histogram(b, "reapd_report_latency_seconds", "", &st->report_latency,
              bounds, n);
}

/* Delivery attempts by the upstream's answer and by duration; the
 * families are there (at zero) without an upstream too, so that
 * dashboards and alerts find them on every node. */
static void
upstream_metrics(struct status *s, struct evbuffer *b)
{
    static struct upstream_stats us; /* 5 KiB: not on the stack */
    struct hist h = {0};
    size_t i;

    _Static_assert(UPSTREAM_LAT_N <= HIST_MAX,
                   "the histogram fits a struct hist");
    memset(&us, 0, sizeof(us));
    if (s->up != NULL)
        upstream_stats(s->up, &us);
    family(b, "reapd_upstream_requests_total", "counter",
           "Report delivery attempts, by the upstream's HTTP status "
           "(\"none\": no answer came: refused, timed out, cut).");
    for (i = 100; i < UPSTREAM_CODE_MAX; i++)
        if (us.by_code[i] > 0)
            evbuffer_add_printf(b,
                                "reapd_upstream_requests_total{code=\"%zu\"} "
                                "%llu\n",
                                i, (unsigned long long)us.by_code[i]);
    evbuffer_add_printf(b,
                        "reapd_upstream_requests_total{code=\"none\"} %llu\n",
                        (unsigned long long)us.no_answer);
    memcpy(h.buckets, us.lat_buckets, sizeof(us.lat_buckets));
    h.count = us.lat_count;
    h.sum = us.lat_sum;
    family(b, "reapd_upstream_request_duration_seconds", "histogram",
           "Report delivery attempts by duration, from the request's "
           "start to the end of its answer (or its failure).");
    histogram(b, "reapd_upstream_request_duration_seconds", "", &h,
              upstream_latency_bounds(), UPSTREAM_LAT_N);
}

static void
serve_metrics(struct status *s, struct evhttp_request *req)
{
    struct reaper_stats st;
    struct evbuffer *b = evbuffer_new();
    int i;

    if (b == NULL) {
        evhttp_send_error(req, 500, NULL);
        return;
    }
    reaper_stats(s->reaper, &st);
    own_metrics(s, b);
    process_metrics(s, b);
    histograms(b, &st);
    metric(b, "reapd_events_received_total", "counter",
           "Container events received from the engine.", st.events);
    metric(b, "reapd_events_rejected_total", "counter",
           "Events that could not be read (malformed, too deep), stepped "
           "over without a reconnect; a relist follows.",
           st.events_rejected);
    metric(b, "reapd_events_replays_cut_total", "counter",
           "Replays after a reconnect that held the engine's whole event "
           "buffer, all past the checkpoint: events in between are lost.",
           st.replays_cut);
    evbuffer_add_printf(
        b,
        "# HELP reapd_containers_truncated_total Containers whose labels, "
        "or name or image, were more than reapd keeps (docs/limits.md).\n"
        "# TYPE reapd_containers_truncated_total counter\n"
        "reapd_containers_truncated_total{what=\"labels\"} %llu\n"
        "reapd_containers_truncated_total{what=\"metadata\"} %llu\n",
        (unsigned long long)st.labels_truncated,
        (unsigned long long)st.metadata_truncated);
    metric(b, "reapd_containers_undecidable_total", "counter",
           "Containers gone before their labels could be kept (out of "
           "memory): no policy was decided for them.",
           st.undecidable);
    metric(b, "reapd_deletes_held_total", "counter",
           "DELETEs put off because the container's record could not be "
           "written first (the state's disk full).",
           st.deletes_held);
    metric(b, "reapd_relists_total", "counter",
           "Full relists of the engine's containers.", st.relists);
    /* Only once the engine has answered: a made-up "unknown" series
     * would stay in Prometheus beside the real one. The values are
     * checked to be version-like (docker.h), so need no escaping. */
    if (st.engine_known) {
        family(b, "reapd_engine_info", "gauge",
               "Always 1; the engine's versions, read again at every "
               "reconnect, are labels (\"\" where it did not say).");
        evbuffer_add_printf(b,
                            "reapd_engine_info{docker_version=\"%s\","
                            "api_version=\"%s\",api_version_used=\"%s\","
                            "containerd_version=\"%s\"} 1\n",
                            st.engine.version, st.engine.engine_api,
                            st.engine.api, st.engine.containerd_version);
    }
    evbuffer_add_printf(b,
                        "# HELP reapd_stream_reconnects_total Event "
                        "streams opened again after they were lost.\n"
                        "# TYPE reapd_stream_reconnects_total counter\n"
                        "reapd_stream_reconnects_total{stream=\"docker\"} "
                        "%llu\n"
                        "reapd_stream_reconnects_total{stream=\"containerd\"}"
                        " %llu\n",
                        (unsigned long long)st.docker_reconnects,
                        (unsigned long long)st.containerd_reconnects);
    metric(b, "reapd_reports_total", "counter", "Reports made.", st.reports);
    metric(b, "reapd_report_writes_total", "counter",
           "Writes of reports to disk, one sync each; reports of a burst "
           "share one.",
           st.report_writes);
    metric(b, "reapd_exit_code_corrections_total", "counter",
           "Exits whose die event code differed from the true code.",
           st.exit_code_mismatches);
    evbuffer_add_printf(b, "# HELP reapd_containers_tracked Containers "
                           "tracked, by lifecycle state.\n"
                           "# TYPE reapd_containers_tracked gauge\n");
    for (i = 0; i < LC_NSTATES; i++)
        evbuffer_add_printf(b, "reapd_containers_tracked{state=\"%s\"} %zu\n",
                            lc_state_name((enum lc_state)i), st.by_state[i]);
    evbuffer_add_printf(b, "# HELP reapd_removals_total DELETE answers, by "
                           "result.\n# TYPE reapd_removals_total counter\n");
    evbuffer_add_printf(b, "reapd_removals_total{result=\"ok\"} %llu\n",
                        (unsigned long long)st.deletes_ok);
    evbuffer_add_printf(b, "reapd_removals_total{result=\"gone\"} %llu\n",
                        (unsigned long long)st.deletes_gone);
    evbuffer_add_printf(b,
                        "reapd_removals_total{result=\"conflict\"} "
                        "%llu\n",
                        (unsigned long long)st.deletes_conflict);
    evbuffer_add_printf(b, "reapd_removals_total{result=\"failed\"} %llu\n",
                        (unsigned long long)st.deletes_failed);
    metric(b, "reapd_leaked_tasks", "gauge",
           "containerd tasks without an engine container, now.",
           st.leaked_tasks);
    evbuffer_add_printf(b, "# HELP reapd_tasks_reaped_total Leaked "
                           "containerd tasks reapd deleted, by how they "
                           "were found.\n# TYPE reapd_tasks_reaped_total "
                           "counter\n");
    evbuffer_add_printf(b,
                        "reapd_tasks_reaped_total{found=\"after_removal\"} "
                        "%llu\n",
                        (unsigned long long)st.tasks_reaped);
    evbuffer_add_printf(b, "reapd_tasks_reaped_total{found=\"audit\"} %llu\n",
                        (unsigned long long)st.orphans_reaped);
    metric(b, "reapd_containerd_connected", "gauge",
           "1 when the containerd event stream is open.",
           st.containerd_connected);
    metric(b, "reapd_docker_connected", "gauge",
           "1 when the Docker events stream is open.", st.docker_connected);
    metric_double(b, "reapd_last_event_timestamp_seconds", "gauge",
                  "The engine's time of the newest event received (0: none "
                  "yet); time() - this is how long the node has been quiet "
                  "or the stream stuck.",
                  (double)st.last_event_nano / 1e9);
    metric(b, "reapd_state_write_errors_total", "counter",
           "Writes to the state database that failed (disk full...).",
           st.store_errors);
    metric(b, "reapd_reports_log_rotations_total", "counter",
           "Rotations of reports.jsonl (reports_log.max_bytes).",
           st.reports_log_rotations);
    metric(b, "reapd_reports_pruned_total", "counter",
           "Delivered reports removed from the state database by "
           "retention.",
           st.pruned);
    metric(b, "reapd_reports_unstored", "gauge",
           "Reports made but not yet accepted by the state database.",
           st.reports_unsaved);
    if (s->store != NULL) {
        struct store_counts sc;

        if (store_counts(s->store, &sc) == STORE_OK) {
            metric(b, "reapd_outbox_pending", "gauge",
                   "Reports waiting for upstream delivery.", sc.pending);
            evbuffer_add_printf(b, "# HELP reapd_outbox_reports Reports in "
                                   "the outbox, by delivery state.\n"
                                   "# TYPE reapd_outbox_reports gauge\n");
            evbuffer_add_printf(b,
                                "reapd_outbox_reports{state=\"pending\"} "
                                "%llu\n",
                                (unsigned long long)sc.pending);
            evbuffer_add_printf(b,
                                "reapd_outbox_reports{state=\"delivered\"}"
                                " %llu\n",
                                (unsigned long long)sc.delivered);
            evbuffer_add_printf(b,
                                "reapd_outbox_reports{state=\"dead\"} "
                                "%llu\n",
                                (unsigned long long)sc.dead);
            metric(b, "reapd_state_db_bytes", "gauge",
                   "Size of the state database.", sc.db_bytes);
            metric_double(b, "reapd_outbox_oldest_pending_timestamp_seconds",
                          "gauge",
                          "When the oldest report still waiting for "
                          "upstream delivery was made (0: none waits).",
                          (double)sc.oldest_pending_ms / 1e3);
        }
        metric(b, "reapd_state_commits_total", "counter",
               "Write transactions committed to the state database (steps "
               "of many containers share one).",
               store_commits(s->store));
        metric(b, "reapd_state_record_writes_total", "counter",
               "Container records written (put or deleted) by those "
               "transactions.",
               store_record_writes(s->store));
    }
    upstream_metrics(s, b);
    evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
                      "text/plain; version=0.0.4");
    reply(req, 200, "OK", b);
    evbuffer_free(b);
}

/* docs/report.schema.json, as compiled in: what every report follows. */
static void
serve_schema(struct evhttp_request *req)
{
    struct evbuffer *b = evbuffer_new();

    if (b == NULL ||
        evbuffer_add_reference(b, report_schema_json, report_schema_json_len,
                               NULL, NULL) != 0) {
        if (b != NULL)
            evbuffer_free(b);
        evhttp_send_error(req, 500, NULL);
        return;
    }
    evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
                      "application/schema+json");
    reply(req, 200, "OK", b);
    evbuffer_free(b);
}

static void
visit_leak(const struct reaper_leak_view *v, void *arg)
{
    yajl_gen g = arg;

    yajl_gen_map_open(g);
    jw_key_str(g, "container_id", v->id);
    jw_key_int(g, "pid", v->pid);
    jw_key_str(g, "status", v->stopped ? "stopped" : "running");
    jw_key_int(g, "audits_seen", v->audits_seen);
    jw_key_bool(g, "reaping", v->reaping);
    jw_key_int(g, "failures", v->failures);
    jw_key_str(g, "last_error", v->last_error);
    yajl_gen_map_close(g);
}

static void
serve_leaks(struct status *s, struct evhttp_request *req)
{
    struct reaper_stats st;
    yajl_gen g = yajl_gen_alloc(NULL);

    if (g == NULL) {
        evhttp_send_error(req, 500, NULL);
        return;
    }
    reaper_stats(s->reaper, &st);
    yajl_gen_map_open(g);
    jw_key_bool(g, "containerd", st.containerd);
    jw_str(g, "leaks");
    yajl_gen_array_open(g);
    reaper_foreach_leak(s->reaper, visit_leak, g);
    yajl_gen_array_close(g);
    yajl_gen_map_close(g);
    send_json(req, 200, "OK", g);
    yajl_gen_free(g);
}

/* Writes a parsed document back out (our own report, read from the
 * store); depth is bounded by the parser's limits. */
static void
gen_node(yajl_gen g, const struct json_node *n)
{
    size_t i;

    switch (n->type) {
    case JSON_NULL:
        yajl_gen_null(g);
        break;
    case JSON_BOOL:
        yajl_gen_bool(g, n->boolean);
        break;
    case JSON_NUMBER:
        yajl_gen_number(g, n->str, n->len);
        break;
    case JSON_STRING:
        yajl_gen_string(g, (const unsigned char *)n->str, n->len);
        break;
    case JSON_OBJECT:
        yajl_gen_map_open(g);
        for (i = 0; i < n->count; i++) {
            yajl_gen_string(g, (const unsigned char *)n->items[i]->key,
                            n->items[i]->key_len);
            gen_node(g, n->items[i]);
        }
        yajl_gen_map_close(g);
        break;
    case JSON_ARRAY:
        yajl_gen_array_open(g);
        for (i = 0; i < n->count; i++)
            gen_node(g, n->items[i]);
        yajl_gen_array_close(g);
        break;
    }
}

/* ---- the read API: reports by cursor, by container, as a stream ---- */

/* Whatever the store holds, also a report too large for upstream. */
static const struct json_limits read_limits = {.max_bytes = STORE_BODY_MAX,
                                               .max_depth = 8,
                                               .max_items = LIMIT_READ_ITEMS,
                                               .max_string =
                                                   LIMIT_READ_STRING};

/* One entry of /v1/reports and of the stream. */
static void
gen_entry(yajl_gen g, const struct store_report *r)
{
    struct json_node *body = NULL;

    if (r->body != NULL)
        body =
            json_parse(r->body, r->body_len, &read_limits, 0, NULL, 0, NULL);
    yajl_gen_map_open(g);
    jw_key_int(g, "seq", r->seq);
    jw_key_str(g, "report_id", r->report_id);
    jw_key_str(g, "delivery", store_state_name(r->state));
    jw_key_int(g, "attempts", r->attempts);
    jw_key_str(g, "last_error", r->last_error);
    jw_key_str(g, "dead_reason", store_dead_reason_name(r->dead_reason));
    jw_str(g, "report");
    if (body != NULL)
        gen_node(g, body);
    else
        yajl_gen_null(g);
    yajl_gen_map_close(g);
    json_free(body);
}

/* A query parameter a route knows: an integer in [min, max], or a
 * string checked by the route. */
struct qparam {
    const char *key;
    bool is_int;
    long min, max;
    bool set;
    long ival;
    const char *sval; /* in the caller's evkeyvalq */
};

/*
 * Parses the request's query into `p` (n known keys): each at most once,
 * integers in range. 0, or -1 with a message for a 400 in `err`. `kv` is
 * the caller's to clear (evhttp_clear_headers) whatever the result.
 */
static int
parse_query(struct evhttp_request *req, struct evkeyvalq *kv, struct qparam *p,
            size_t n, char *err, size_t errlen)
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

static int
parse_state(const char *v, int *out)
{
    if (strcmp(v, "pending") == 0)
        *out = STORE_PENDING;
    else if (strcmp(v, "delivered") == 0)
        *out = STORE_DELIVERED;
    else if (strcmp(v, "dead") == 0)
        *out = STORE_DEAD;
    else
        return -1;
    return 0;
}

/*
 * GET /v1/reports[?limit=N][&after=SEQ][&container_id=ID][&state=S]:
 * newest first, or with `after` the entries after that seq, oldest first
 * (a cursor: pass the last seq seen).
 */
static void
serve_reports(struct status *s, struct evhttp_request *req)
{
    struct qparam p[] = {
        {.key = "limit", .is_int = true, .min = 1, .max = REPORTS_MAX},
        {.key = "after", .is_int = true, .min = 0, .max = LONG_MAX},
        {.key = "container_id"},
        {.key = "state"},
    };
    struct store_query q = {.max = REPORTS_DEFAULT,
                            .state = -1,
                            .with_body = true,
                            .newest_first = true};
    struct store_reports list = {0};
    struct evkeyvalq kv;
    char err[256];
    yajl_gen g;
    size_t i;

    if (parse_query(req, &kv, p, 4, err, sizeof(err)) != 0)
        goto bad;
    if (p[0].set)
        q.max = (size_t)p[0].ival;
    if (p[1].set) {
        q.after = p[1].ival;
        q.newest_first = false;
    }
    if (p[2].set) {
        if (!docker_valid_id(p[2].sval)) {
            snprintf(err, sizeof(err),
                     "container_id must be a full container id");
            goto bad;
        }
        q.container_id = p[2].sval;
    }
    if (p[3].set && parse_state(p[3].sval, &q.state) != 0) {
        snprintf(err, sizeof(err), "state must be pending, delivered or dead");
        goto bad;
    }
    if (s->store == NULL) {
        send_error(req, 503, "Service Unavailable", "no durable state");
        goto out;
    }
    if (store_after(s->store, &q, &list) < 0) {
        send_error(req, 500, "Internal Server Error", store_errmsg(s->store));
        goto out;
    }
    g = yajl_gen_alloc(NULL);
    if (g == NULL) {
        evhttp_send_error(req, 500, NULL);
        goto out;
    }
    yajl_gen_map_open(g);
    jw_str(g, "reports");
    yajl_gen_array_open(g);
    for (i = 0; i < list.n; i++)
        gen_entry(g, &list.v[i]);
    yajl_gen_array_close(g);
    yajl_gen_map_close(g);
    send_json(req, 200, "OK", g);
    yajl_gen_free(g);
    goto out;
bad:
    send_error(req, 400, "Bad Request", err);
out:
    store_reports_free(&list);
    evhttp_clear_headers(&kv);
}

/* Whether the client of a held request closed its end: evhttp reads
 * nothing while a request is unanswered, so the socket itself is asked
 * (without taking anything a pipelined next request may have sent). */
static bool
client_gone(const struct conn *c)
{
    char b;
    ssize_t n = recv(c->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);

    if (n == 0)
        return true;
    return n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;
}

static void
held_free(struct held *h)
{
    struct status *s = h->s;

    if (h->prev != NULL)
        h->prev->next = h->next;
    else
        s->held = h->next;
    if (h->next != NULL)
        h->next->prev = h->prev;
    s->nheld--;
    if (h->kind == H_STREAM)
        s->nstreams--;
    feed_sub_free(h->sub);
    if (h->tick != NULL)
        event_free(h->tick);
    if (h->c != NULL)
        h->c->held = NULL;
    free(h);
}

/* The hold ends and its request is answered now: it has the answer
 * deadline like any other. Returns the request to answer. */
static struct evhttp_request *
held_end(struct held *h)
{
    struct evhttp_request *req = h->req;
    struct conn *c = h->c;

    held_free(h);
    begin_phase(c, PH_ANSWER);
    return req;
}

static void on_held_tick(evutil_socket_t fd, short what, void *arg);
static void admin_log(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));
static void on_held_feed(struct feed_sub *sub, void *arg);

/*
 * Holds `req` on connection `c` (NULL: an untracked connection, which
 * cannot be held). Returns NULL, having answered 503, when the bound is
 * reached or memory is short.
 */
static struct held *
held_new(struct status *s, struct conn *c, struct evhttp_request *req,
         enum held_kind kind, uint64_t wait_ms, const char *feed_id)
{
    struct held *h = NULL;
    uint64_t now = loop_now_ms();

    if (c == NULL || s->nheld >= HELD_MAX ||
        (kind == H_STREAM && s->nstreams >= STREAMS_MAX))
        goto busy;
    h = calloc(1, sizeof(*h));
    if (h == NULL)
        goto busy;
    h->s = s;
    h->c = c;
    h->req = req;
    h->kind = kind;
    h->until_ms = now + wait_ms;
    h->tick =
        evtimer_new(evhttp_connection_get_base(c->evcon), on_held_tick, h);
    if (h->tick == NULL)
        goto busy;
    if (kind == H_WAIT || kind == H_STREAM) {
        h->sub = s->feed != NULL
                     ? feed_sub_new(s->feed, feed_id, on_held_feed, h)
                     : NULL;
        if (h->sub == NULL)
            goto busy;
    }
    if (feed_id != NULL)
        snprintf(h->id, sizeof(h->id), "%s", feed_id);
    h->next = s->held;
    if (s->held != NULL)
        s->held->prev = h;
    s->held = h;
    s->nheld++;
    if (kind == H_STREAM)
        s->nstreams++;
    c->held = h;
    c->phase = PH_HELD;
    evtimer_del(c->deadline);
    loop_timer_ms(h->tick, kind == H_DRAIN || kind == H_AUDIT ? DRAIN_TICK_MS
                                                              : HELD_TICK_MS);
    return h;
busy:
    if (h != NULL) {
        feed_sub_free(h->sub);
        if (h->tick != NULL)
            event_free(h->tick);
        free(h);
    }
    s->held_rejected++;
    evhttp_add_header(evhttp_request_get_output_headers(req), "Retry-After",
                      "1");
    send_error(req, 503, "Service Unavailable",
               kind == H_STREAM ? "too many report streams open"
                                : "too many requests waiting");
    return NULL;
}

/* A report, as stored, with its place in the cursor in a header. */
static void
send_report(struct evhttp_request *req, const struct store_report *r)
{
    struct evkeyvalq *h = evhttp_request_get_output_headers(req);
    struct evbuffer *b = evbuffer_new();
    char seq[32];

    if (b == NULL) {
        evhttp_send_error(req, 500, NULL);
        return;
    }
    snprintf(seq, sizeof(seq), "%lld", (long long)r->seq);
    evhttp_add_header(h, "Content-Type", "application/json");
    evhttp_add_header(h, "Reapd-Report-Seq", seq);
    evhttp_add_header(h, "Reapd-Delivery", store_state_name(r->state));
    evbuffer_add(b, r->body, r->body_len);
    evbuffer_add(b, "\n", 1);
    reply(req, 200, "OK", b);
    evbuffer_free(b);
}

/* 202 with the state of a container tracked but not reported yet; 404
 * when reapd knows nothing of it. */
static void
send_unreported(struct status *s, struct evhttp_request *req, const char *id)
{
    struct reaper_view v;
    yajl_gen g;

    if (!reaper_lookup(s->reaper, id, &v)) {
        send_error(req, 404, "Not Found",
                   "container neither tracked nor reported");
        return;
    }
    g = yajl_gen_alloc(NULL);
    if (g == NULL) {
        evhttp_send_error(req, 500, NULL);
        return;
    }
    yajl_gen_map_open(g);
    jw_key_str(g, "container_id", id);
    jw_key_str(g, "state", lc_state_name(v.state));
    yajl_gen_map_close(g);
    send_json(req, 202, "Accepted", g);
    yajl_gen_free(g);
}

/*
 * A wait's check: answers (ending the hold, if any) when the report is
 * there, when the store fails, when the container is no longer tracked,
 * or when `final`; else returns false and the wait goes on.
 */
static bool
wait_check(struct status *s, struct held *h, struct evhttp_request *req,
           const char *wanted, bool final)
{
    struct store_report r;
    struct reaper_view v;
    char id[STORE_ID_MAX + 1]; /* `wanted` may be h's, which may end here */
    int rc;

    snprintf(id, sizeof(id), "%s", wanted);
    rc = store_latest_report_body(s->store, id, &r);
    if (rc == STORE_NOT_FOUND && !final && reaper_lookup(s->reaper, id, &v))
        return false;
    if (h != NULL)
        req = held_end(h);
    if (rc == STORE_OK)
        send_report(req, &r);
    else if (rc == STORE_NOT_FOUND)
        send_unreported(s, req, id);
    else
        send_error(req, 500, "Internal Server Error", store_errmsg(s->store));
    store_report_clear(&r);
    return true;
}

/* GET /v1/containers/{id}/report[?wait=S] */
static void
serve_container_report(struct status *s, struct conn *c,
                       struct evhttp_request *req, const char *id)
{
    struct qparam p[] = {
        {.key = "wait", .is_int = true, .min = 1, .max = WAIT_MAX_S},
    };
    struct evkeyvalq kv;
    char err[256];

    if (parse_query(req, &kv, p, 1, err, sizeof(err)) != 0) {
        send_error(req, 400, "Bad Request", err);
        goto out;
    }
    if (s->store == NULL) {
        send_error(req, 503, "Service Unavailable", "no durable state");
        goto out;
    }
    if (wait_check(s, NULL, req, id, !p[0].set))
        goto out;
    held_new(s, c, req, H_WAIT, (uint64_t)p[0].ival * 1000, id);
out:
    evhttp_clear_headers(&kv);
}

static void stream_pump(struct held *h);

static void
stream_written(struct evhttp_connection *evcon, void *arg)
{
    struct held *h = arg;

    (void)evcon;
    h->writing = false;
    stream_pump(h);
}

/* Sends what the stream's client has not seen yet, a chunk at a time: the
 * next one only once the last is out, so a client that reads slowly
 * holds one chunk of reapd's memory, and one that stops reading is cut
 * (on_held_tick). */
static void
stream_pump(struct held *h)
{
    struct store_query q = {.after = h->last_seq,
                            .max = STREAM_PAGE,
                            .state = -1,
                            .with_body = true};
    struct store_reports list = {0};
    struct evbuffer *b = NULL;
    yajl_gen g = NULL;
    size_t i;

    if (h->writing)
        return;
    if (store_after(h->s->store, &q, &list) < 0) {
        log_error(NULL, "status: report stream: %s",
                  store_errmsg(h->s->store));
        goto cut;
    }
    if (list.n == 0)
        goto out;
    b = evbuffer_new();
    if (b == NULL)
        goto cut;
    for (i = 0; i < list.n && evbuffer_get_length(b) < STREAM_CHUNK_BYTES;
         i++) {
        const unsigned char *out;
        size_t len;

        g = yajl_gen_alloc(NULL);
        if (g == NULL)
            goto cut;
        gen_entry(g, &list.v[i]);
        yajl_gen_get_buf(g, &out, &len);
        if (evbuffer_add(b, out, len) != 0 || evbuffer_add(b, "\n", 1) != 0)
            goto cut;
        yajl_gen_free(g);
        g = NULL;
        h->last_seq = list.v[i].seq;
    }
    h->writing = true;
    h->writing_since = loop_now_ms();
    evhttp_send_reply_chunk_with_cb(h->req, b, stream_written, h);
    goto out;
cut:
    if (g != NULL)
        yajl_gen_free(g);
    /* From the loop, not from inside evhttp's write callback. */
    if (h->tick != NULL)
        event_active(h->tick, EV_TIMEOUT, 0);
    h->writing = true;
    h->writing_since = 0; /* the tick cuts it */
out:
    if (b != NULL)
        evbuffer_free(b);
    store_reports_free(&list);
}

/* GET /v1/reports/stream[?after=SEQ] */
static void
serve_stream(struct status *s, struct conn *c, struct evhttp_request *req)
{
    struct qparam p[] = {
        {.key = "after", .is_int = true, .min = 0, .max = LONG_MAX},
    };
    struct evkeyvalq kv;
    struct held *h;
    char err[256];
    int64_t last = 0;

    if (parse_query(req, &kv, p, 1, err, sizeof(err)) != 0) {
        send_error(req, 400, "Bad Request", err);
        goto out;
    }
    if (s->store == NULL || s->feed == NULL) {
        send_error(req, 503, "Service Unavailable", "no durable state");
        goto out;
    }
    if (evhttp_request_get_command(req) == EVHTTP_REQ_HEAD) {
        send_error(req, 405, "Method Not Allowed", "GET the stream");
        goto out;
    }
    if (!p[0].set && store_last_seq(s->store, &last) < 0) {
        send_error(req, 500, "Internal Server Error", store_errmsg(s->store));
        goto out;
    }
    h = held_new(s, c, req, H_STREAM, 0, NULL);
    if (h == NULL)
        goto out;
    h->last_seq = p[0].set ? p[0].ival : last;
    evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
                      "application/x-ndjson");
    evhttp_add_header(evhttp_request_get_output_headers(req), "Cache-Control",
                      "no-store");
    evhttp_send_reply_start(req, 200, "OK");
    stream_pump(h);
out:
    evhttp_clear_headers(&kv);
}

static void
on_held_feed(struct feed_sub *sub, void *arg)
{
    struct held *h = arg;

    (void)sub;
    if (h->kind == H_STREAM)
        stream_pump(h);
    else
        wait_check(h->s, h, NULL, h->id, false);
}

/* ---- admin: drain and requeue ----------------------------------------- */

struct drain {
    uint64_t cleaning; /* between an exit and its report */
    uint64_t pending;  /* reports not yet delivered upstream */
};

static bool
drain_counts(struct status *s, struct drain *d, char *err, size_t errlen)
{
    static const enum lc_state busy[] = {
        LC_SETTLING,   LC_DELAYING,        LC_QUEUED,       LC_REMOVING,
        LC_CONFIRMING, LC_TASK_CONFIRMING, LC_TASK_REAPING,
    };
    struct reaper_stats st;
    struct store_counts sc = {0};
    size_t i;

    reaper_stats(s->reaper, &st);
    d->cleaning = st.reports_unsaved;
    for (i = 0; i < sizeof(busy) / sizeof(busy[0]); i++)
        d->cleaning += st.by_state[busy[i]];
    if (s->store != NULL && store_counts(s->store, &sc) < 0) {
        snprintf(err, errlen, "%s", store_errmsg(s->store));
        return false;
    }
    d->pending = sc.pending;
    return true;
}

/* Answers a drain: 200 once drained, 202 with the counts when `final`;
 * false (nothing sent) to wait on. */
static bool
drain_check(struct status *s, struct held *h, struct evhttp_request *req,
            bool final)
{
    struct drain d;
    char err[256];
    yajl_gen g;
    bool drained, ok = drain_counts(s, &d, err, sizeof(err));

    drained = ok && d.cleaning == 0 && d.pending == 0;
    if (ok && !drained && !final)
        return false;
    if (h != NULL)
        req = held_end(h);
    if (!ok) {
        send_error(req, 500, "Internal Server Error", err);
        return true;
    }
    g = yajl_gen_alloc(NULL);
    if (g == NULL) {
        evhttp_send_error(req, 500, NULL);
        return true;
    }
    yajl_gen_map_open(g);
    jw_key_bool(g, "drained", drained);
    jw_key_int(g, "cleaning", (long long)d.cleaning);
    jw_key_int(g, "pending", (long long)d.pending);
    yajl_gen_map_close(g);
    send_json(req, drained ? 200 : 202, drained ? "OK" : "Accepted", g);
    yajl_gen_free(g);
    return true;
}

/* POST /v1/drain[?wait=S] */
static void
serve_drain(struct status *s, struct conn *c, struct evhttp_request *req)
{
    struct qparam p[] = {
        {.key = "wait", .is_int = true, .min = 1, .max = WAIT_MAX_S},
    };
    struct evkeyvalq kv;
    char err[256];

    if (parse_query(req, &kv, p, 1, err, sizeof(err)) != 0)
        send_error(req, 400, "Bad Request", err);
    else if (!drain_check(s, NULL, req, !p[0].set))
        held_new(s, c, req, H_DRAIN, (uint64_t)p[0].ival * 1000, NULL);
    evhttp_clear_headers(&kv);
}

/* Answers an audit once the task list it asked for is done: 200 with
 * what it found, 502 when containerd did not answer; 202 when `final`
 * comes first. False (nothing sent) to wait on. */
static bool
audit_check(struct status *s, struct held *h, struct evhttp_request *req,
            uint64_t target, bool final)
{
    struct reaper_audit au;
    yajl_gen g;

    reaper_audit_state(s->reaper, &au);
    if (au.lists_done < target && !final)
        return false;
    if (h != NULL)
        req = held_end(h);
    if (au.lists_done >= target && !au.ok) {
        send_error(req, 502, "Bad Gateway", au.error);
        return true;
    }
    g = yajl_gen_alloc(NULL);
    if (g == NULL) {
        evhttp_send_error(req, 500, NULL);
        return true;
    }
    yajl_gen_map_open(g);
    jw_key_bool(g, "done", au.lists_done >= target);
    if (au.lists_done >= target) {
        jw_key_int(g, "tasks", (long long)au.tasks);
        jw_key_int(g, "leaked_tasks", (long long)au.leaks);
        jw_str(g, "leaks");
        yajl_gen_array_open(g);
        reaper_foreach_leak(s->reaper, visit_leak, g);
        yajl_gen_array_close(g);
    }
    yajl_gen_map_close(g);
    if (au.lists_done >= target)
        send_json(req, 200, "OK", g);
    else
        send_json(req, 202, "Accepted", g);
    yajl_gen_free(g);
    return true;
}

/* POST /v1/audit[?wait=S]: S defaults to 30. */
static void
serve_audit(struct status *s, struct conn *c, struct evhttp_request *req)
{
    struct qparam p[] = {
        {.key = "wait", .is_int = true, .min = 1, .max = WAIT_MAX_S},
    };
    struct evkeyvalq kv;
    struct held *h;
    uint64_t target;
    char err[256];

    if (parse_query(req, &kv, p, 1, err, sizeof(err)) != 0) {
        send_error(req, 400, "Bad Request", err);
        goto out;
    }
    target = reaper_audit_now(s->reaper);
    if (target == 0) {
        send_error(req, 409, "Conflict",
                   "the containerd channel is off (containerd.socket)");
        goto out;
    }
    admin_log("containerd audit asked for");
    if (audit_check(s, NULL, req, target, false))
        goto out;
    h = held_new(s, c, req, H_AUDIT,
                 (uint64_t)(p[0].set ? p[0].ival : 30) * 1000, NULL);
    if (h != NULL)
        h->audit_target = target;
out:
    evhttp_clear_headers(&kv);
}

static void
on_held_tick(evutil_socket_t fd, short what, void *arg)
{
    struct held *h = arg;
    struct status *s = h->s;
    uint64_t now = loop_now_ms(), tick = HELD_TICK_MS;
    bool final = now >= h->until_ms;
    char who[128];

    (void)fd;
    (void)what;
    if (client_gone(h->c)) {
        conn_close(h->c); /* frees h */
        return;
    }
    switch (h->kind) {
    case H_WAIT:
        if (wait_check(s, h, NULL, h->id, final))
            return;
        break;
    case H_DRAIN:
        if (drain_check(s, h, NULL, final))
            return;
        tick = DRAIN_TICK_MS;
        break;
    case H_AUDIT:
        if (audit_check(s, h, NULL, h->audit_target, final))
            return;
        tick = DRAIN_TICK_MS;
        break;
    case H_STREAM:
        if (h->writing && (h->writing_since == 0 ||
                           now - h->writing_since >= s->deadline_ms)) {
            s->streams_cut++;
            ratelog(&s->log_cut, LOG_LEVEL_INFO,
                    "status: cut the report stream to %s: %s",
                    peer(h->c, who, sizeof(who)),
                    h->writing_since == 0 ? "reapd could not read its reports"
                                          : "it does not read what is sent");
            conn_close(h->c); /* frees h */
            return;
        }
        loop_timer_ms(h->tick, HELD_TICK_MS);
        return;
    }
    if (h->until_ms - now < tick)
        tick = h->until_ms - now;
    loop_timer_ms(h->tick, tick);
}

/* Logs an operator's write, for the record of who changed what. */
static void admin_log(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));

static void
admin_log(const char *fmt, ...)
{
    char msg[512];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    log_info(NULL, "admin: %s", msg);
}

/* POST /v1/reports/{report_id}/requeue and /v1/reports/requeue?state=dead */
static void
serve_requeue(struct status *s, struct evhttp_request *req,
              const char *report_id)
{
    struct qparam p[] = {{.key = "state"}};
    struct evkeyvalq kv;
    uint64_t n = 0;
    char err[256];
    yajl_gen g = NULL;
    int rc;

    if (parse_query(req, &kv, p, 1, err, sizeof(err)) != 0)
        goto bad;
    if (report_id == NULL && (!p[0].set || strcmp(p[0].sval, "dead") != 0)) {
        snprintf(err, sizeof(err), "state=dead is required");
        goto bad;
    }
    if (report_id != NULL && p[0].set) {
        snprintf(err, sizeof(err), "no query parameters here");
        goto bad;
    }
    if (s->store == NULL) {
        send_error(req, 503, "Service Unavailable", "no durable state");
        goto out;
    }
    if (report_id != NULL) {
        rc = store_requeue(s->store, report_id, report_now_ms());
        n = rc == STORE_OK;
    } else {
        rc = store_requeue_dead(s->store, report_now_ms(), &n);
    }
    if (rc == STORE_NOT_FOUND) {
        send_error(req, 404, "Not Found", "no such report (or pruned)");
        goto out;
    }
    if (rc == STORE_CONFLICT) {
        send_error(req, 409, "Conflict", "the report is delivered already");
        goto out;
    }
    if (rc < 0) {
        send_error(req, 500, "Internal Server Error", store_errmsg(s->store));
        goto out;
    }
    if (report_id != NULL)
        log_fields(LOG_LEVEL_INFO, NULL,
                   &(struct log_fields){.report_id = report_id},
                   "admin: report %s requeued", report_id);
    else
        admin_log("%llu dead letters requeued", (unsigned long long)n);
    outbox_kick(s->outbox);
    g = yajl_gen_alloc(NULL);
    if (g == NULL) {
        evhttp_send_error(req, 500, NULL);
        goto out;
    }
    yajl_gen_map_open(g);
    jw_key_int(g, "requeued", (long long)n);
    if (report_id != NULL) {
        jw_key_str(g, "report_id", report_id);
    }
    yajl_gen_map_close(g);
    send_json(req, 200, "OK", g);
    yajl_gen_free(g);
    goto out;
bad:
    send_error(req, 400, "Bad Request", err);
out:
    evhttp_clear_headers(&kv);
}

/* GET /v1/status: one look at the node for an operator or a probe. */
static void
serve_status(struct status *s, struct evhttp_request *req)
{
    const char *why = NULL;
    bool ready = reaper_ready(s->reaper, &why);
    struct store_counts sc = {0};
    struct reaper_stats st;
    struct drain d = {0};
    int64_t last = 0;
    char err[256];
    yajl_gen g;
    int i;

    reaper_stats(s->reaper, &st);
    if (s->store != NULL && (store_counts(s->store, &sc) < 0 ||
                             store_last_seq(s->store, &last) < 0)) {
        send_error(req, 500, "Internal Server Error", store_errmsg(s->store));
        return;
    }
    if (!drain_counts(s, &d, err, sizeof(err))) {
        send_error(req, 500, "Internal Server Error", err);
        return;
    }
    g = yajl_gen_alloc(NULL);
    if (g == NULL) {
        evhttp_send_error(req, 500, NULL);
        return;
    }
    yajl_gen_map_open(g);
    jw_key_bool(g, "ready", ready);
    if (!ready) {
        jw_key_str(g, "reason", why);
    }
    jw_key_str(g, "version", REAPD_VERSION);
    jw_key_str(g, "revision", REAPD_REVISION);
    jw_key_str(g, "node", s->cfg != NULL ? s->cfg->node : NULL);
    jw_key_bool(g, "docker_connected", st.docker_connected);
    jw_key_bool(g, "containerd", st.containerd);
    jw_key_bool(g, "containerd_connected", st.containerd_connected);
    jw_str(g, "containers");
    yajl_gen_map_open(g);
    jw_key_int(g, "total", (long long)st.tracked);
    jw_key_int(g, "cleaning", (long long)d.cleaning);
    for (i = 0; i < LC_NSTATES; i++) {
        jw_str(g, lc_state_name((enum lc_state)i));
        jw_int(g, (long long)st.by_state[i]);
    }
    yajl_gen_map_close(g);
    jw_key_int(g, "leaked_tasks", (long long)st.leaked_tasks);
    jw_str(g, "outbox");
    yajl_gen_map_open(g);
    jw_key_int(g, "pending", (long long)sc.pending);
    jw_key_int(g, "delivered", (long long)sc.delivered);
    jw_key_int(g, "dead", (long long)sc.dead);
    jw_key_int(g, "unstored", (long long)st.reports_unsaved);
    yajl_gen_map_close(g);
    jw_key_int(g, "last_seq", (long long)last);
    yajl_gen_map_close(g);
    send_json(req, 200, "OK", g);
    yajl_gen_free(g);
}

static void
serve_config(struct status *s, struct evhttp_request *req)
{
    struct evbuffer *b;
    char *json;
    size_t len;

    if (s->cfg == NULL) {
        send_error(req, 503, "Service Unavailable", "no config yet");
        return;
    }
    json = config_to_json(s->cfg, true, &len);
    b = json != NULL ? evbuffer_new() : NULL;
    if (b == NULL) {
        free(json);
        evhttp_send_error(req, 500, NULL);
        return;
    }
    evbuffer_add(b, json, len);
    evbuffer_add(b, "\n", 1);
    free(json);
    evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
                      "application/json");
    reply(req, 200, "OK", b);
    evbuffer_free(b);
}

bool
status_token_matches(const char *token, const char *guess)
{
    size_t tlen = strlen(token), glen = strlen(guess), i;
    unsigned char diff = 0;

    for (i = 0; i < tlen; i++)
        diff |= (unsigned char)(token[i] ^ (i < glen ? guess[i] : 0));
    return diff == 0 && glen == tlen;
}

/* Whether `req` carries "Authorization: Bearer <token>" (the scheme in
 * any case, RFC 9110 11.1). */
static bool
authorized(const struct status *s, struct evhttp_request *req)
{
    const char *h = evhttp_find_header(evhttp_request_get_input_headers(req),
                                       "Authorization");

    if (h == NULL || strncasecmp(h, "Bearer ", 7) != 0)
        return false;
    return status_token_matches(s->token, h + 7);
}

/* The read API's paths: they name containers, which only root and the
 * docker group may see, so the status listener serves them with a token
 * only. */
static bool
api_path(const char *path)
{
    return strncmp(path, "/v1/", 4) == 0 || strcmp(path, "/v1") == 0;
}

/* Whether the status listener (not the admin socket) may answer `path`
 * to `req`, a probe aside: with a token, only with that token; without,
 * everything but the read API (/metrics never names a container). */
static bool
may_read(const struct status *s, struct evhttp_request *req, const char *path)
{
    if (s->token != NULL)
        return authorized(s, req);
    return !api_path(path);
}

/* The 401: where the read API can be had instead. */
static void
send_unauthorized(const struct status *s, struct evhttp_request *req)
{
    const char *sock = s->cfg != NULL ? s->cfg->admin_socket : NULL;
    char msg[512];

    if (sock == NULL || strcmp(sock, "off") == 0)
        sock = "admin.socket, off in this config";
    if (s->token != NULL)
        snprintf(msg, sizeof(msg),
                 "a valid bearer token is required: \"Authorization: Bearer "
                 "<token>\" with the token of status.token_file, or the "
                 "admin socket (%s) as root",
                 sock);
    else
        snprintf(msg, sizeof(msg),
                 "the read API (/v1/) names containers, so the status "
                 "listener serves it only with a token, and none is "
                 "configured: read it on the admin socket (%s) as root, "
                 "or set status.token_file and send \"Authorization: "
                 "Bearer <token>\"",
                 sock);
    send_error(req, 401, "Unauthorized", msg);
}

/*
 * The request on `c` is in: it is no longer idle or waiting, and its
 * answer has the deadline. A refused one is served after all if room has
 * come since. Returns whether it stays refused.
 */
static bool
take_request(struct status *s, struct conn *c, struct evhttp_request *req)
{
    cl_remove(c);
    if (c->refused && (s->nserved < s->max_connections || evict_idle(s))) {
        c->refused = false;
        s->nrefused--;
        s->nserved++;
    }
    begin_phase(c, PH_ANSWER);
    evhttp_request_set_on_complete_cb(req, on_complete, c);
    return c->refused;
}

/* "/v1/containers/{id}/report": the id into `id`. */
static bool
report_route(const char *path, char *id, size_t size)
{
    static const char pre[] = "/v1/containers/", suf[] = "/report";
    size_t n = strlen(path), idlen;

    if (n <= sizeof(pre) - 1 + sizeof(suf) - 1 ||
        strncmp(path, pre, sizeof(pre) - 1) != 0 ||
        strcmp(path + n - (sizeof(suf) - 1), suf) != 0)
        return false;
    idlen = n - (sizeof(pre) - 1) - (sizeof(suf) - 1);
    if (idlen >= size)
        return false;
    memcpy(id, path + sizeof(pre) - 1, idlen);
    id[idlen] = '\0';
    return docker_valid_id(id);
}

/* The admin socket's write routes: "/v1/drain", "/v1/reports/requeue",
 * "/v1/reports/{report_id}/requeue" (the id into `rid`). */
static bool
write_route(const char *path, char *rid, size_t size)
{
    static const char pre[] = "/v1/reports/", suf[] = "/requeue";
    size_t n = strlen(path), idlen, i;

    rid[0] = '\0';
    if (strcmp(path, "/v1/drain") == 0 || strcmp(path, "/v1/audit") == 0 ||
        strcmp(path, "/v1/reports/requeue") == 0)
        return true;
    if (n <= sizeof(pre) - 1 + sizeof(suf) - 1 ||
        strncmp(path, pre, sizeof(pre) - 1) != 0 ||
        strcmp(path + n - (sizeof(suf) - 1), suf) != 0)
        return false;
    idlen = n - (sizeof(pre) - 1) - (sizeof(suf) - 1);
    if (idlen > STORE_REPORT_ID_MAX || idlen >= size)
        return false;
    memcpy(rid, path + sizeof(pre) - 1, idlen);
    rid[idlen] = '\0';
    for (i = 0; i < idlen; i++)
        if (rid[i] <= ' ' || rid[i] > '~' || rid[i] == '/')
            return false;
    return true;
}

static void
on_request(struct evhttp_request *req, void *arg)
{
    struct status *s = arg;
    enum evhttp_cmd_type m = evhttp_request_get_command(req);
    const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
    const char *path = uri != NULL ? evhttp_uri_get_path(uri) : NULL;
    struct conn *c = find_conn(s, req);
    bool refused = c != NULL && take_request(s, c, req);
    char who[128], rid[STORE_ID_MAX + 1];
    /* Probes stay open: a kubelet or systemd has no token to send, and
     * has to hear from the loop whatever other clients do. */
    bool open = path != NULL &&
                (strcmp(path, "/livez") == 0 || strcmp(path, "/readyz") == 0);

    /* Nothing may touch `c` once an answer is sent: on failure evhttp
     * frees the connection at once. */
    if (refused) {
        /* One answer, then closed: a refused connection holds nothing. */
        evhttp_add_header(evhttp_request_get_output_headers(req), "Connection",
                          "close");
        if (!open) {
            s->rejected_busy++;
            ratelog(&s->log_refuse, LOG_LEVEL_INFO,
                    "status: refused a request from %s: all %zu "
                    "connections busy",
                    peer(c, who, sizeof(who)), s->max_connections);
            evhttp_add_header(evhttp_request_get_output_headers(req),
                              "Retry-After", "1");
            send_error(req, 503, "Service Unavailable",
                       "too many connections to the status endpoint");
            return;
        }
    }
    if (path == NULL) {
        ratelog(&s->log_bad, LOG_LEVEL_INFO,
                "status: bad request from %s: malformed request target",
                peer(c, who, sizeof(who)));
        send_error(req, 400, "Bad Request", "malformed request target");
        return;
    }
    if (!s->admin && !open && !may_read(s, req, path)) {
        s->rejected_auth++;
        evhttp_add_header(evhttp_request_get_output_headers(req),
                          "WWW-Authenticate", "Bearer realm=\"reapd\"");
        send_unauthorized(s, req);
        return;
    }
    if (write_route(path, rid, sizeof(rid))) {
        if (!s->admin || m != EVHTTP_REQ_POST) {
            evhttp_add_header(evhttp_request_get_output_headers(req), "Allow",
                              s->admin ? "POST" : "");
            send_error(req, 405, "Method Not Allowed",
                       s->admin ? "POST only"
                                : "the status listener is read-only: "
                                  "writes go to the admin socket "
                                  "(admin.socket)");
            return;
        }
        if (strcmp(path, "/v1/drain") == 0)
            serve_drain(s, c, req);
        else if (strcmp(path, "/v1/audit") == 0)
            serve_audit(s, c, req);
        else if (strcmp(path, "/v1/reports/requeue") == 0)
            serve_requeue(s, req, NULL);
        else
            serve_requeue(s, req, rid);
        return;
    }
    if (m != EVHTTP_REQ_GET && m != EVHTTP_REQ_HEAD) {
        evhttp_add_header(evhttp_request_get_output_headers(req), "Allow",
                          "GET, HEAD");
        send_error(req, 405, "Method Not Allowed", "read-only endpoint");
        return;
    }
    if (strcmp(path, "/livez") == 0) {
        yajl_gen g = yajl_gen_alloc(NULL);

        if (g == NULL) {
            evhttp_send_error(req, 500, NULL);
            return;
        }
        yajl_gen_map_open(g);
        jw_key_bool(g, "live", 1);
        yajl_gen_map_close(g);
        send_json(req, 200, "OK", g);
        yajl_gen_free(g);
    } else if (strcmp(path, "/readyz") == 0) {
        serve_readyz(s, req);
    } else if (strcmp(path, "/metrics") == 0) {
        serve_metrics(s, req);
    } else if (strcmp(path, "/v1/reports") == 0) {
        serve_reports(s, req);
    } else if (strcmp(path, "/v1/reports/stream") == 0) {
        serve_stream(s, c, req);
    } else if (strcmp(path, "/v1/status") == 0) {
        serve_status(s, req);
    } else if (strcmp(path, "/v1/leaks") == 0) {
        serve_leaks(s, req);
    } else if (strcmp(path, "/v1/config") == 0) {
        serve_config(s, req);
    } else if (strcmp(path, "/v1/schema/report") == 0) {
        serve_schema(req);
    } else if (strcmp(path, "/v1/containers") == 0) {
        serve_containers(s, req, NULL);
    } else if (strncmp(path, "/v1/containers/", 15) == 0 &&
               docker_valid_id(path + 15)) {
        serve_containers(s, req, path + 15);
    } else if (report_route(path, rid, sizeof(rid))) {
        serve_container_report(s, c, req, rid);
    } else {
        send_error(req, 404, "Not Found", "no such endpoint");
    }
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

static int
bind_unix(struct status *s, struct event_base *base, const char *path)
{
    struct sockaddr_un sa;
    struct evconnlistener *lev;
    struct stat st;
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
    /* Only a stale socket of an earlier run may be replaced; anything
     * else at that path (a typo pointing at a file), or a socket another
     * process still serves, is left alone. */
    if (lstat(path, &st) == 0) {
        if (!S_ISSOCK(st.st_mode)) {
            log_error(NULL, "status: %s exists and is not a socket", path);
            return -1;
        }
        if (socket_live(&sa)) {
            log_error(NULL,
                      "status: %s is in use by another process (another "
                      "reapd?)",
                      path);
            return -1;
        }
        unlink(path);
    }
    if (s->admin) {
        /* Its parent, one level (/run/reapd): a tmpfs is empty at boot. */
        char dir[sizeof(sa.sun_path)];
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
    }
    /* The admin socket is root's alone from its first instant: its mode
     * comes from the umask at bind(), never a chmod after. */
    old = umask(s->admin ? 0177 : 0);
    if (!s->admin)
        umask(old);
    lev = evconnlistener_new_bind(
        base, NULL, NULL, LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC,
        LISTEN_BACKLOG, (struct sockaddr *)&sa, sizeof(sa));
    if (s->admin)
        umask(old);
    if (lev == NULL) {
        log_error(NULL, "status: cannot listen on %s: %s", path,
                  strerror(errno));
        return -1;
    }
    if (evhttp_bind_listener(s->http, lev) == NULL) {
        evconnlistener_free(lev);
        return -1;
    }
    s->lev = lev;
    s->unix_path = strdup(path);
    return 0;
}

static int
bind_tcp(struct status *s, const char *listen)
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
        evhttp_bind_socket_with_handle(s->http, host, (unsigned short)port);
    if (bound == NULL) {
        log_error(NULL, "status: cannot listen on %s: %s", listen,
                  strerror(errno));
        return -1;
    }
    s->lev = evhttp_bound_socket_get_listener(bound);
    return 0;
}

static struct status *
status_make(struct loop *l, const char *listen, struct reaper *reaper,
            bool admin)
{
    struct status *s = calloc(1, sizeof(*s));
    int rc;

    if (s == NULL)
        return NULL;
    s->admin = admin;
    s->reaper = reaper;
    s->start_time = process_start_time();
    s->max_connections = DEFAULT_MAX_CONNECTIONS;
    s->deadline_ms = REQUEST_DEADLINE_MS;
    s->pause_ms = PAUSE_MIN_MS;
    s->next_status = all_status;
    all_status = s;
    if (strcmp(listen, "off") == 0) {
        log_info(NULL, "%s: off", admin ? "admin socket" : "status endpoint");
        return s;
    }
    s->resolve_ev = event_new(loop_base(l), -1, 0, resolve, s);
    s->resume_ev = evtimer_new(loop_base(l), on_resume, s);
    s->http = evhttp_new(loop_base(l));
    if (s->resolve_ev == NULL || s->resume_ev == NULL || s->http == NULL)
        goto fail;
    evhttp_set_max_headers_size(s->http, MAX_HEADERS_SIZE);
    evhttp_set_max_body_size(s->http, MAX_BODY_SIZE);
    /* Idle time between reads and writes; the deadline bounds the rest. */
    evhttp_set_timeout(s->http, REQUEST_TIMEOUT);
    evhttp_set_allowed_methods(
        s->http, EVHTTP_REQ_GET | EVHTTP_REQ_HEAD | EVHTTP_REQ_POST |
                     EVHTTP_REQ_PUT | EVHTTP_REQ_DELETE | EVHTTP_REQ_PATCH |
                     EVHTTP_REQ_OPTIONS);
    evhttp_set_gencb(s->http, on_request, s);
    evhttp_set_bevcb(s->http, on_accept, s);
    if (strncmp(listen, "unix:", 5) == 0)
        rc = bind_unix(s, loop_base(l), listen + 5);
    else
        rc = bind_tcp(s, listen);
    if (rc != 0) {
        log_error(NULL, "status: cannot serve on \"%s\"", listen);
        goto fail;
    }
    evconnlistener_set_error_cb(s->lev, on_accept_error);
    log_info(NULL, "%s on %s", admin ? "admin socket" : "status endpoint",
             listen);
    return s;
fail:
    status_free(s);
    return NULL;
}

struct status *
status_new(struct loop *l, const char *listen, struct reaper *reaper)
{
    return status_make(l, listen, reaper, false);
}

struct status *
status_new_admin(struct loop *l, const char *path, struct reaper *reaper)
{
    char listen[sizeof(((struct sockaddr_un *)0)->sun_path) + 8];

    if (strcmp(path, "off") == 0)
        return status_make(l, "off", reaper, true);
    snprintf(listen, sizeof(listen), "unix:%s", path);
    return status_make(l, listen, reaper, true);
}

void
status_set_feed(struct status *s, struct feed *f)
{
    s->feed = f;
}

void
status_set_outbox(struct status *s, struct outbox *ob)
{
    s->outbox = ob;
}

void
status_set_upstream(struct status *s, struct upstream *u)
{
    s->up = u;
}

void
status_set_store(struct status *s, struct store *st)
{
    s->store = st;
}

int
status_read_token(const struct config *cfg, char **token, char *err,
                  size_t errlen)
{
    *token = NULL;
    if (cfg->status_token_file == NULL)
        return 0;
    return upstream_read_private_token(cfg->status_token_file, token, err,
                                       errlen);
}

void
status_set_config(struct status *s, const struct config *cfg, char *token)
{
    upstream_token_free(s->token);
    s->token = token;
    s->cfg = cfg;
    /* Shrinking: connections beyond the new cap stay until they close;
     * new ones are judged by it. */
    s->max_connections = (size_t)cfg->status_max_connections;
}

void
status_note_reload(struct status *s, bool ok)
{
    if (ok)
        s->reloads_ok++;
    else
        s->reloads_rejected++;
}

size_t
status_connections(struct status *s)
{
    if (s->pending.head != NULL)
        resolve(-1, 0, s);
    return s->nserved + s->nrefused;
}

void
status_set_deadline_ms(struct status *s, unsigned ms)
{
    s->deadline_ms = ms;
}

void
status_free(struct status *s)
{
    struct status **p;
    struct conn *c;
    size_t i;

    if (s == NULL)
        return;
    for (p = &all_status; *p != NULL; p = &(*p)->next_status)
        if (*p == s) {
            *p = s->next_status;
            break;
        }
    /* Frees every connection; each resolved one through on_close. */
    if (s->http != NULL)
        evhttp_free(s->http);
    while ((c = s->pending.head) != NULL) {
        cl_remove(c);
        bufferevent_decref(c->bev);
        event_free(c->deadline);
        free(c);
    }
    for (i = 0; i < s->nbyfd; i++)
        if (s->byfd[i] != NULL) /* evhttp kept it past evhttp_free */
            conn_free(s->byfd[i]);
    free(s->byfd);
    if (s->resolve_ev != NULL)
        event_free(s->resolve_ev);
    if (s->resume_ev != NULL)
        event_free(s->resume_ev);
    upstream_token_free(s->token);
    if (s->unix_path != NULL) {
        unlink(s->unix_path);
        free(s->unix_path);
    }
    free(s);
}
