/*
 * loop — the event_base and the libcurl multi handle it drives.
 *
 * libcurl forbids calling curl_multi_* from inside its own callbacks, and
 * our callers routinely start or cancel requests from a data callback (an
 * event from the stream starts an inspect). So while libcurl is on the
 * stack (`in_curl`), additions and removals are queued and carried out by
 * a deferred event on the next loop turn.
 */
#include "loop.h"

#include <curl/curl.h>
#include <event2/event.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "log.h"

#define DEFAULT_MAX_BODY (4u * 1024 * 1024)

/*
 * What the data callbacks of a yielding call (loop_http_req.yield) may
 * take from the loop's entry to libcurl before it is paused until the
 * next turn. libcurl reads a socket up to a hundred times per action
 * while data is waiting, so a large answer (a relist of a crowded node)
 * would otherwise be parsed in one turn. Counted from the entry to
 * libcurl, not per turn: a turn can enter libcurl twice for one call (its
 * timer, then the socket's event), and a budget per turn would starve the
 * calls late in a busy turn, or, judged by libevent's coarse time of the
 * turn, pause a stream again at each resume.
 */
#define DATA_SLICE_NS 2000000u
/* A stream's receive buffer (libcurl's default: 16 KiB). An events burst
 * arrives faster than the loop parses it: a larger buffer means fewer
 * reads of the socket and fewer passes through libcurl per event. The
 * pages are touched only as a burst fills them. */
#define STREAM_BUFFER    (64L * 1024)
#define MAX_HEADER_LINES 64
#define MAX_HEADER_LINE  8192

struct loop_http_call {
    struct loop *l;
    CURL *easy;
    struct curl_slist *hdrs;
    loop_http_headers_cb on_headers;
    loop_http_data_cb on_data;
    loop_http_done_cb on_done;
    void *arg;

    char *buf; /* buffered body */
    size_t len, cap, max;
    char *lines[MAX_HEADER_LINES];
    size_t nlines;

    bool added;     /* inside the multi handle */
    bool cancelled; /* no more callbacks; remove at the next safe point */
    bool bounded;   /* not a stream: counts against the cap */
    enum { Q_NONE, Q_WAIT, Q_DEAD } q; /* which list qprev/qnext are in */
    bool headers_done;
    bool too_large;
    bool aborted;
    bool yield;           /* may be paused between turns (req->yield) */
    struct event *resume; /* the next turn's unpause, while paused */
    uint64_t took_entry;  /* the entry to libcurl it last took data in */
    /* HTTP/2 on libcurl before 7.89 (h2_old_curl): */
    bool h2_fresh; /* prior knowledge, on a connection of its own */
    bool h2_reuse; /* plain HTTP/2, to ride on a kept connection */
    bool h2_again; /* made again with prior knowledge (h2_again) */
    char *h2_sock; /* the unix socket, while h2_fresh */
    char errbuf[CURL_ERROR_SIZE];

    struct loop_http_call *prev, *next;   /* all calls of the loop */
    struct loop_http_call *qprev, *qnext; /* the wait queue or the dead list */
};

/* A doubly linked list with a tail, for O(1) push and unlink. */
struct callq {
    struct loop_http_call *head, *tail;
    size_t n;
};

#define SOCK_POOL      256 /* spare socket records kept at most */
#define SOCK_PRIME     8   /* made at start, before memory can run out */
#define SOCK_UNWATCHED 64
/* Easy handles of finished calls kept for the next ones: a reset handle
 * costs less than a new one. Streams' (a bigger buffer, seldom made)
 * are not kept. */
#define EASY_POOL 4

struct loop {
    struct event_base *base;
    CURLM *multi;
    struct event *timer;    /* libcurl's timeout */
    struct event *deferred; /* queued adds and removals */
    int in_curl;            /* libcurl is on the stack */
    uint64_t turn_ns;       /* when libcurl was last entered from the loop */
    uint64_t entries;       /* how many times it was entered */
    struct loop_http_call *calls;
    size_t ncalls;
    /* Calls not yet handed to libcurl: streams first, then the rest in
     * the order they came. */
    struct callq wait;
    /* Cancelled while libcurl was on the stack: freed at the next safe
     * point, without walking every call. */
    struct callq dead;
    size_t nbounded;  /* bounded calls inside libcurl */
    size_t max_calls; /* 0: no cap */
    /* Socket records come from a pool, so libcurl's socket callback
     * seldom allocates; when it must and cannot, the socket waits in
     * `unwatched` (no allocation) and is watched from the deferred event.
     * Failing the callback instead would make libcurl abort every
     * transfer on the handle, the events streams included. */
    struct sock *spare;
    size_t nspare;
    struct {
        curl_socket_t fd;
        short kind;
    } unwatched[SOCK_UNWATCHED];
    size_t nunwatched;
    /* Per descriptor: whether libcurl opened it through open_cb (and has
     * not closed it through close_cb), and its parked record, if any. */
    struct fdslot *fds;
    size_t nfds;
    uint64_t sock_changes; /* loop_socket_changes */
    CURL *idle[EASY_POOL]; /* reset, for the next calls */
    size_t nidle;
    uint64_t easy_made; /* loop_easy_made */
    /* A prior-knowledge HTTP/2 connection to this unix socket succeeded
     * and libcurl keeps it: the next calls ride on it (h2_old_curl). */
    bool h2_live;
    char h2_sock[108];
};

/* A watched socket: the record and its event in one block. */
struct sock {
    struct event *ev; /* points into this block */
    struct loop *l;
    struct sock *next; /* in the pool */
    curl_socket_t fd;
    short kind;  /* what ev is added for; 0: not added */
    bool parked; /* libcurl keeps the connection idle (sock_park) */
};

struct fdslot {
    struct sock *parked;
    bool ours;
};

static void check_multi_info(struct loop *l);

uint64_t
loop_now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

uint64_t
loop_now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

bool
loop_new_turn(struct loop *l, struct timeval *last)
{
    struct timeval tv;

    if (event_base_gettimeofday_cached(l->base, &tv) != 0)
        return true;
    if (tv.tv_sec == last->tv_sec && tv.tv_usec == last->tv_usec)
        return false;
    *last = tv;
    return true;
}

void
loop_timer_ms(struct event *ev, uint64_t ms)
{
    struct timeval tv;

    tv.tv_sec = (time_t)(ms / 1000);
    tv.tv_usec = (suseconds_t)((ms % 1000) * 1000);
    evtimer_add(ev, &tv);
}

static void
socket_action(struct loop *l, curl_socket_t fd, int flags)
{
    int running = 0;
    CURLMcode rc;

    if (l->in_curl == 0) {
        l->turn_ns = loop_now_ns();
        l->entries++;
    }
    l->in_curl++;
    rc = curl_multi_socket_action(l->multi, fd, flags, &running);
    l->in_curl--;
    if (rc != CURLM_OK)
        log_error(NULL, "curl_multi_socket_action: %s",
                  curl_multi_strerror(rc));
    check_multi_info(l);
}

static void sock_arm(struct sock *sk, short kind);

static void
on_socket_event(evutil_socket_t fd, short what, void *arg)
{
    struct sock *sk = arg;
    int flags = 0;

    /* An idle kept connection the server wrote to or closed: libcurl
     * finds out when it next looks at it (it checks a connection before
     * reusing it); until then there is nothing to wait for. */
    if (sk->parked) {
        sock_arm(sk, 0);
        return;
    }
    if (what & EV_READ)
        flags |= CURL_CSELECT_IN;
    if (what & EV_WRITE)
        flags |= CURL_CSELECT_OUT;
    socket_action(sk->l, fd, flags);
}

static void
loop_on_timer(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    socket_action(arg, CURL_SOCKET_TIMEOUT, 0);
}

static struct sock *
sock_get(struct loop *l)
{
    struct sock *sk = l->spare;

    if (sk != NULL) {
        l->spare = sk->next;
        l->nspare--;
        return sk;
    }
    sk = calloc(1, sizeof(*sk) + event_get_struct_event_size());
    if (sk == NULL)
        return NULL;
    sk->ev = (struct event *)(void *)(sk + 1);
    sk->l = l;
    return sk;
}

static void
sock_put(struct loop *l, struct sock *sk)
{
    if (l->nspare >= SOCK_POOL) {
        free(sk);
        return;
    }
    sk->next = l->spare;
    l->spare = sk;
    l->nspare++;
}

static void schedule_deferred(struct loop *l);

/* Adds sk's event for `kind` (0: none), with no system call when it is
 * already added for that. */
static void
sock_arm(struct sock *sk, short kind)
{
    if (sk->kind == kind)
        return;
    if (sk->kind != 0) {
        event_del(sk->ev);
        sk->l->sock_changes++;
    }
    sk->kind = kind;
    if (kind == 0)
        return;
    sk->l->sock_changes++;
    event_assign(sk->ev, sk->l->base, sk->fd, kind, on_socket_event, sk);
    event_add(sk->ev, NULL);
}

static struct fdslot *
fdslot(struct loop *l, curl_socket_t s)
{
    return s >= 0 && (size_t)s < l->nfds ? &l->fds[s] : NULL;
}

/* The parked record of `s`, taken out of its slot (NULL: none). */
static struct sock *
sock_unpark(struct loop *l, curl_socket_t s)
{
    struct fdslot *fs = fdslot(l, s);
    struct sock *sk;

    if (fs == NULL || (sk = fs->parked) == NULL)
        return NULL;
    fs->parked = NULL;
    sk->parked = false;
    return sk;
}

/*
 * libcurl has done with `sk` for now (CURL_POLL_REMOVE). When it is a
 * connection libcurl keeps for the next call, its record stays, with
 * its event still added for reading: the next call on it (the usual case
 * on the engine's socket: an inspect, then the DELETE, then the next
 * inspect) then costs no epoll_ctl at all, where removing and adding it
 * again would cost two system calls per call. Only descriptors libcurl
 * opened through open_cb are kept, because only those are sure to be
 * closed through close_cb, where the record goes: a record kept for a
 * descriptor closed behind our back would shadow the next one to get its
 * number.
 */
static void
sock_park(struct loop *l, struct sock *sk)
{
    struct fdslot *fs = fdslot(l, sk->fd);

    if (fs == NULL || !fs->ours || fs->parked != NULL) {
        sock_arm(sk, 0);
        sock_put(l, sk);
        return;
    }
    if (sk->kind != (EV_READ | EV_PERSIST))
        sock_arm(sk, 0);
    sk->parked = true;
    fs->parked = sk;
}

static void
sock_drop_parked(struct loop *l, curl_socket_t s)
{
    struct sock *sk = sock_unpark(l, s);

    if (sk != NULL) {
        sock_arm(sk, 0);
        sock_put(l, sk);
    }
}

/* libcurl's sockets, made as libcurl makes them (and not inherited by
 * what reapd may run), marked as ours for sock_park. */
static curl_socket_t
open_cb(void *clientp, curlsocktype purpose, struct curl_sockaddr *a)
{
    struct loop *l = clientp;
    curl_socket_t s;
    struct fdslot *fs;

    (void)purpose;
    s = socket(a->family, a->socktype | SOCK_CLOEXEC, a->protocol);
    if (s < 0)
        return CURL_SOCKET_BAD;
    if ((size_t)s >= l->nfds) {
        size_t n = l->nfds ? l->nfds : 64;

        while (n <= (size_t)s)
            n *= 2;
        fs = realloc(l->fds, n * sizeof(*fs));
        if (fs == NULL)
            return s; /* not parked, then: still correct */
        memset(fs + l->nfds, 0, (n - l->nfds) * sizeof(*fs));
        l->fds = fs;
        l->nfds = n;
    }
    /* A record left for this number would be a bug; never trust it. */
    sock_drop_parked(l, s);
    l->fds[s].ours = true;
    return s;
}

static int
close_cb(void *clientp, curl_socket_t s)
{
    struct loop *l = clientp;
    struct fdslot *fs = fdslot(l, s);

    /* libcurl said CURL_POLL_REMOVE first, so the event is in a parked
     * record or gone; taken off epoll before the number is free. */
    sock_drop_parked(l, s);
    if (fs != NULL)
        fs->ours = false;
    return close(s);
}

static void
unwatched_drop(struct loop *l, curl_socket_t s)
{
    size_t i;

    for (i = 0; i < l->nunwatched; i++)
        if (l->unwatched[i].fd == s) {
            l->unwatched[i] = l->unwatched[--l->nunwatched];
            return;
        }
}

/* Watches `s` for libcurl; -1 only when even the fallback is full. */
static int
watch(struct loop *l, curl_socket_t s, short kind)
{
    struct sock *sk = sock_get(l);
    size_t i;

    if (sk == NULL) {
        for (i = 0; i < l->nunwatched; i++)
            if (l->unwatched[i].fd == s)
                break;
        if (i == SOCK_UNWATCHED)
            return -1;
        l->unwatched[i].fd = s;
        l->unwatched[i].kind = kind;
        if (i == l->nunwatched)
            l->nunwatched++;
        schedule_deferred(l);
        return 0;
    }
    unwatched_drop(l, s);
    sk->fd = s;
    sk->kind = 0;
    sk->parked = false;
    curl_multi_assign(l->multi, s, sk);
    sock_arm(sk, kind);
    return 0;
}

static int
curl_socket_cb(CURL *easy, curl_socket_t s, int what, void *userp,
               void *socketp)
{
    struct loop *l = userp;
    struct sock *sk = socketp;
    short kind;

    (void)easy;
    if (what == CURL_POLL_REMOVE) {
        unwatched_drop(l, s);
        if (sk != NULL) {
            curl_multi_assign(l->multi, s, NULL);
            sock_park(l, sk);
        }
        return 0;
    }
    kind = EV_PERSIST;
    if (what & CURL_POLL_IN)
        kind |= EV_READ;
    if (what & CURL_POLL_OUT)
        kind |= EV_WRITE;
    if (sk == NULL && (sk = sock_unpark(l, s)) != NULL)
        curl_multi_assign(l->multi, s, sk);
    if (sk == NULL)
        return watch(l, s, kind);
    sock_arm(sk, kind);
    return 0;
}

static int
curl_timer_cb(CURLM *multi, long timeout_ms, void *userp)
{
    struct loop *l = userp;
    struct timeval tv;

    (void)multi;
    if (timeout_ms < 0) {
        evtimer_del(l->timer);
        return 0;
    }
    tv.tv_sec = timeout_ms / 1000;
    tv.tv_usec = (timeout_ms % 1000) * 1000;
    evtimer_add(l->timer, &tv);
    return 0;
}

static void
schedule_deferred(struct loop *l)
{
    event_active(l->deferred, EV_TIMEOUT, 0);
}

static void
q_push(struct callq *q, struct loop_http_call *c, bool front)
{
    c->qprev = c->qnext = NULL;
    if (q->head == NULL) {
        q->head = q->tail = c;
    } else if (front) {
        c->qnext = q->head;
        q->head->qprev = c;
        q->head = c;
    } else {
        c->qprev = q->tail;
        q->tail->qnext = c;
        q->tail = c;
    }
    q->n++;
}

static void
q_unlink(struct callq *q, struct loop_http_call *c)
{
    if (c->qprev != NULL)
        c->qprev->qnext = c->qnext;
    else
        q->head = c->qnext;
    if (c->qnext != NULL)
        c->qnext->qprev = c->qprev;
    else
        q->tail = c->qprev;
    c->qprev = c->qnext = NULL;
    q->n--;
}

/* A handle for a new call: a kept one, or a new one (NULL: no memory). */
static CURL *
easy_get(struct loop *l)
{
    if (l->nidle > 0)
        return l->idle[--l->nidle];
    l->easy_made++;
    return curl_easy_init();
}

/* The handle of a call that ended, out of libcurl: kept, its options back
 * to their defaults (and its connection to the pool), or cleaned up. */
static void
easy_put(struct loop *l, CURL *e, bool keep)
{
    if (e == NULL)
        return;
    if (keep && l->nidle < EASY_POOL) {
        curl_easy_reset(e);
        l->idle[l->nidle++] = e;
    } else {
        curl_easy_cleanup(e);
    }
}

static void
call_free(struct loop_http_call *c)
{
    struct loop *l = c->l;
    size_t i;

    if (c->q == Q_WAIT)
        q_unlink(&l->wait, c);
    else if (c->q == Q_DEAD)
        q_unlink(&l->dead, c);
    c->q = Q_NONE;
    if (c->added) {
        curl_multi_remove_handle(l->multi, c->easy);
        c->added = false;
        if (c->bounded) {
            l->nbounded--;
            /* Room for the next waiting call. */
            if (l->wait.head != NULL)
                schedule_deferred(l);
        }
    }
    if (c->prev != NULL)
        c->prev->next = c->next;
    else
        l->calls = c->next;
    if (c->next != NULL)
        c->next->prev = c->prev;
    l->ncalls--;
    if (c->resume != NULL)
        event_free(c->resume);
    easy_put(l, c->easy, c->bounded);
    curl_slist_free_all(c->hdrs);
    for (i = 0; i < c->nlines; i++)
        free(c->lines[i]);
    free(c->buf);
    free(c->h2_sock);
    free(c);
}

/*
 * libcurl before 7.89.0 (Debian 12 has 7.88.1) breaks a prior-knowledge
 * HTTP/2 connection it reuses ("Error in the HTTP2 framing layer", curl
 * issue 10634: it sets up HTTP/2 a second time on it). A call asking
 * plain HTTP/2 (CURL_HTTP_VERSION_2_0) reuses such a connection cleanly,
 * though, and multiplexes on it. So the first call to a socket opens a
 * prior-knowledge connection that libcurl then keeps (not forbidden to
 * reuse), and the next ones ask plain HTTP/2. When no such connection is
 * left (the server closed it, libcurl retired it), libcurl opens a new
 * one and speaks HTTP/1.1 with an Upgrade, which a gRPC server refuses
 * before reading any request: that call is made again at once with
 * prior knowledge on a connection of its own (h2_again). Each Tasks.Get
 * had its own connection: a connect, the HTTP/2 greeting both ways and
 * a close, about twenty system calls and two wakeups more per call.
 */
static bool
h2_old_curl(void)
{
    return curl_version_info(CURLVERSION_NOW)->version_num < 0x075900;
}

static void
h2_fresh(struct loop_http_call *c)
{
    curl_easy_setopt(c->easy, CURLOPT_HTTP_VERSION,
                     (long)CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE);
    curl_easy_setopt(c->easy, CURLOPT_FRESH_CONNECT, 1L);
    c->h2_fresh = true;
    c->h2_reuse = false;
}

/* `c`, a plain HTTP/2 call that found no connection to ride on, failed
 * before any answer: asked again with prior knowledge on a connection of
 * its own. 0 if it is queued again (no callback ran), -1 if not. */
static int
h2_again(struct loop_http_call *c, CURLcode rc)
{
    struct loop *l = c->l;
    long conns = 0;
    size_t i;

    if (!c->h2_reuse)
        return -1;
    l->h2_live = false;
    curl_easy_getinfo(c->easy, CURLINFO_NUM_CONNECTS, &conns);
    /* Refused outright (a connect error), or answered: not the upgrade
     * the server refused. */
    if (rc == CURLE_OK || conns == 0 || c->headers_done || c->len > 0 ||
        c->too_large || c->aborted)
        return -1;
    curl_multi_remove_handle(l->multi, c->easy);
    c->added = false;
    if (c->bounded)
        l->nbounded--;
    for (i = 0; i < c->nlines; i++)
        free(c->lines[i]);
    c->nlines = 0;
    c->errbuf[0] = '\0';
    h2_fresh(c);
    c->h2_again = true; /* to l->h2_sock, which stays */
    c->q = Q_WAIT;
    q_push(&l->wait, c, true);
    schedule_deferred(l);
    return 0;
}

/* A prior-knowledge call answered: libcurl keeps its connection. */
static void
h2_note_live(struct loop_http_call *c, CURLcode rc)
{
    struct loop *l = c->l;

    if (!c->h2_fresh || rc != CURLE_OK)
        return;
    if (c->h2_again) {
        l->h2_live = true;
    } else if (c->h2_sock != NULL && strlen(c->h2_sock) < sizeof(l->h2_sock)) {
        strcpy(l->h2_sock, c->h2_sock);
        l->h2_live = true;
    }
}

/* Runs on the loop with libcurl off the stack: carry out what callbacks
 * asked for while libcurl was busy. */
static bool
has_room(const struct loop *l, const struct loop_http_call *c)
{
    return !c->bounded || l->max_calls == 0 || l->nbounded < l->max_calls;
}

/* Hands `c` to libcurl; -1 (and `c` untouched) if libcurl refuses. */
static int
add_to_multi(struct loop *l, struct loop_http_call *c)
{
    CURLMcode rc = curl_multi_add_handle(l->multi, c->easy);

    if (rc != CURLM_OK) {
        log_error(NULL, "curl_multi_add_handle: %s", curl_multi_strerror(rc));
        return -1;
    }
    c->added = true;
    if (c->bounded)
        l->nbounded++;
    return 0;
}

static void finish_call(struct loop_http_call *c, CURLcode rc);

/* Runs on the loop with libcurl off the stack: frees what was cancelled
 * while libcurl was busy, then starts waiting calls while there is room.
 * Work is proportional to what changed, not to the calls in flight. */
static void
on_deferred(evutil_socket_t fd, short what, void *arg)
{
    struct loop *l = arg;
    struct loop_http_call *c;

    (void)fd;
    (void)what;
    while (l->nunwatched > 0) {
        size_t n = l->nunwatched;

        /* Memory ran out in the socket callback: try again now. */
        watch(l, l->unwatched[n - 1].fd, l->unwatched[n - 1].kind);
        if (l->nunwatched == n) {
            struct timeval tv = {0, 100000};

            event_add(l->deferred, &tv); /* still none: in 100 ms */
            break;
        }
    }
    while (l->dead.head != NULL)
        call_free(l->dead.head);
    while ((c = l->wait.head) != NULL && has_room(l, c)) {
        q_unlink(&l->wait, c);
        c->q = Q_NONE;
        if (add_to_multi(l, c) != 0) {
            snprintf(c->errbuf, sizeof(c->errbuf),
                     "libcurl refused the transfer");
            finish_call(c, CURLE_FAILED_INIT);
        }
    }
}

static enum loop_http_error
map_error(const struct loop_http_call *c, CURLcode rc)
{
    if (c->too_large)
        return HTTPC_ERR_TOO_LARGE;
    if (c->aborted)
        return HTTPC_ERR_ABORTED;
    switch (rc) {
    case CURLE_OK:
        return HTTPC_OK;
    case CURLE_OPERATION_TIMEDOUT:
        return HTTPC_ERR_TIMEOUT;
    case CURLE_COULDNT_CONNECT:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
        return HTTPC_ERR_CONNECT;
    default:
        return HTTPC_ERR_OTHER;
    }
}

static void
finish_call(struct loop_http_call *c, CURLcode rc)
{
    struct loop_http_resp res;

    if (rc != CURLE_OK && !c->cancelled && h2_again(c, rc) == 0)
        return;
    h2_note_live(c, rc);
    memset(&res, 0, sizeof(res));
    curl_easy_getinfo(c->easy, CURLINFO_RESPONSE_CODE, &res.status);
    res.error = map_error(c, rc);
    if (res.error != HTTPC_OK)
        res.errmsg = c->errbuf[0] ? c->errbuf : curl_easy_strerror(rc);
    if (c->on_data == NULL) {
        res.body = c->buf != NULL ? c->buf : "";
        res.body_len = c->len;
    }
    res.header_lines = (const char *const *)c->lines;
    res.nheader_lines = c->nlines;
    /* The callback may start or cancel other calls; ours is done. */
    c->cancelled = true;
    c->on_done(&res, c->arg);
    call_free(c);
}

static void
check_multi_info(struct loop *l)
{
    CURLMsg *msg;
    int left;
    struct loop_http_call *c;

    while ((msg = curl_multi_info_read(l->multi, &left)) != NULL) {
        if (msg->msg != CURLMSG_DONE)
            continue;
        c = NULL;
        curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&c);
        if (c == NULL)
            continue;
        if (c->cancelled)
            call_free(c);
        else
            finish_call(c, msg->data.result);
    }
}

static void
deliver_headers(struct loop_http_call *c)
{
    long status = 0;

    if (c->headers_done)
        return;
    curl_easy_getinfo(c->easy, CURLINFO_RESPONSE_CODE, &status);
    if (status >= 100 && status < 200)
        return; /* informational; the real status follows */
    c->headers_done = true;
    if (c->on_headers != NULL && !c->cancelled)
        c->on_headers(status, c->arg);
}

static size_t
header_cb(char *buf, size_t size, size_t nitems, void *ud)
{
    struct loop_http_call *c = ud;
    size_t n = size * nitems, len = n;

    if (c->cancelled)
        return 0;
    while (len > 0 && (buf[len - 1] == '\n' || buf[len - 1] == '\r'))
        len--;
    if (len == 0) {
        deliver_headers(c);
        return n;
    }
    if (len >= 5 && strncmp(buf, "HTTP/", 5) == 0)
        return n; /* status line; the code comes from getinfo */
    if (c->nlines < MAX_HEADER_LINES && len < MAX_HEADER_LINE) {
        char *line = malloc(len + 1);

        if (line != NULL) {
            memcpy(line, buf, len);
            line[len] = '\0';
            c->lines[c->nlines++] = line;
        }
    }
    return n;
}

static size_t
write_cb(char *ptr, size_t size, size_t nmemb, void *ud)
{
    struct loop_http_call *c = ud;
    size_t n = size * nmemb;

    /* A consumer that refused is handed nothing more. */
    if (c->cancelled || c->aborted)
        return 0;
    deliver_headers(c);
    if (c->cancelled)
        return 0;
    if (c->on_data != NULL) {
        /* A call takes one piece per entry whatever the clock says: a
         * host slow enough to spend the slice before the first piece
         * (CPU stolen, valgrind) would otherwise never move it on. */
        if (c->yield && c->l->in_curl && c->took_entry == c->l->entries &&
            loop_now_ns() - c->l->turn_ns >= DATA_SLICE_NS &&
            event_pending(c->resume, EV_TIMEOUT, NULL) == 0) {
            /* Not taken: libcurl keeps it and reads no more until the
             * next turn's on_resume. */
            loop_timer_ms(c->resume, 0);
            return CURL_WRITEFUNC_PAUSE;
        }
        c->took_entry = c->l->entries;
        if (c->on_data(ptr, n, c->arg) != 0) {
            c->aborted = true;
            return 0;
        }
        return c->cancelled ? 0 : n;
    }
    if (c->len + n > c->max) {
        c->too_large = true;
        return 0;
    }
    if (c->len + n + 1 > c->cap) {
        size_t cap = c->cap ? c->cap : 4096;
        char *nb;

        while (cap < c->len + n + 1)
            cap *= 2;
        nb = realloc(c->buf, cap);
        if (nb == NULL)
            return 0;
        c->buf = nb;
        c->cap = cap;
    }
    memcpy(c->buf + c->len, ptr, n);
    c->len += n;
    c->buf[c->len] = '\0';
    return n;
}

/*
 * The turn after a pause: the data libcurl kept is handed over from
 * inside curl_easy_pause, and the transfer reads on. When that data is
 * refused (the consumer's error: a stream's bad JSON, memory out),
 * libcurl 7.88 returns the error from curl_easy_pause and leaves the
 * transfer as it is: paused, its socket unwatched, no timer set. Nothing
 * would ever wake it (seen as a stream that did not reconnect until an
 * unrelated timeout), so the call ends here with that error.
 */
static void
on_resume(evutil_socket_t fd, short what, void *arg)
{
    struct loop_http_call *c = arg;
    struct loop *l = c->l;
    CURLcode rc;

    (void)fd;
    (void)what;
    if (c->cancelled || !c->added)
        return;
    l->turn_ns = loop_now_ns();
    l->entries++;
    l->in_curl++;
    rc = curl_easy_pause(c->easy, CURLPAUSE_CONT);
    l->in_curl--;
    if (rc != CURLE_OK && !c->cancelled)
        finish_call(c, rc);
    check_multi_info(l);
}

static int
setup_easy(struct loop_http_call *c, const struct loop_http_req *req)
{
    CURL *e = c->easy;
    const char *method = req->method ? req->method : "GET";
    size_t i;

    curl_easy_setopt(e, CURLOPT_URL, req->url);
    curl_easy_setopt(e, CURLOPT_PRIVATE, (char *)c);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, c->errbuf);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, write_cb);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, c);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, header_cb);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, c);
    curl_easy_setopt(e, CURLOPT_OPENSOCKETFUNCTION, open_cb);
    curl_easy_setopt(e, CURLOPT_OPENSOCKETDATA, c->l);
    curl_easy_setopt(e, CURLOPT_CLOSESOCKETFUNCTION, close_cb);
    curl_easy_setopt(e, CURLOPT_CLOSESOCKETDATA, c->l);
    if (req->unix_socket != NULL)
        curl_easy_setopt(e, CURLOPT_UNIX_SOCKET_PATH, req->unix_socket);
    if (req->timeout_ms > 0)
        curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, req->timeout_ms);
    if (req->stream)
        curl_easy_setopt(e, CURLOPT_BUFFERSIZE, STREAM_BUFFER);
    if (req->connect_timeout_ms > 0)
        curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS,
                         req->connect_timeout_ms);
    if (req->http2_prior_knowledge && !h2_old_curl()) {
        curl_easy_setopt(e, CURLOPT_HTTP_VERSION,
                         (long)CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE);
    } else if (req->http2_prior_knowledge) {
        if (req->unix_socket != NULL && c->l->h2_live &&
            strcmp(c->l->h2_sock, req->unix_socket) == 0) {
            curl_easy_setopt(e, CURLOPT_HTTP_VERSION,
                             (long)CURL_HTTP_VERSION_2_0);
            c->h2_reuse = true;
        } else {
            h2_fresh(c);
            if (req->unix_socket == NULL) /* kept for unix sockets only */
                curl_easy_setopt(e, CURLOPT_FORBID_REUSE, 1L);
            else if ((c->h2_sock = strdup(req->unix_socket)) == NULL)
                return -1;
        }
    }
    if (req->ca_file != NULL)
        curl_easy_setopt(e, CURLOPT_CAINFO, req->ca_file);
    if (req->client_cert != NULL)
        curl_easy_setopt(e, CURLOPT_SSLCERT, req->client_cert);
    if (req->client_key != NULL)
        curl_easy_setopt(e, CURLOPT_SSLKEY, req->client_key);

    if (strcmp(method, "POST") == 0) {
        curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE, (long)req->body_len);
        curl_easy_setopt(e, CURLOPT_COPYPOSTFIELDS,
                         req->body != NULL ? req->body : "");
        /* No 100-continue round trip: our bodies are small. */
        c->hdrs = curl_slist_append(c->hdrs, "Expect:");
        if (c->hdrs == NULL)
            return -1;
    } else if (strcmp(method, "GET") != 0) {
        curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, method);
    }
    for (i = 0; i < req->nheaders; i++) {
        struct curl_slist *h = curl_slist_append(c->hdrs, req->headers[i]);

        if (h == NULL)
            return -1;
        c->hdrs = h;
    }
    if (c->hdrs != NULL)
        curl_easy_setopt(e, CURLOPT_HTTPHEADER, c->hdrs);
    return 0;
}

struct loop_http_call *
loop_http(struct loop *l, const struct loop_http_req *req,
          loop_http_headers_cb on_headers, loop_http_data_cb on_data,
          loop_http_done_cb on_done, void *arg)
{
    struct loop_http_call *c = NULL, *result = NULL;

    c = calloc(1, sizeof(*c));
    if (c == NULL)
        goto out;
    c->l = l;
    c->on_headers = on_headers;
    c->on_data = on_data;
    c->on_done = on_done;
    c->arg = arg;
    c->max = req->max_body ? req->max_body : DEFAULT_MAX_BODY;
    if (req->yield && on_data != NULL && !req->http2_prior_knowledge) {
        c->yield = true;
        c->resume = evtimer_new(l->base, on_resume, c);
        if (c->resume == NULL)
            goto out;
    }
    c->easy = easy_get(l);
    if (c->easy == NULL || setup_easy(c, req) != 0)
        goto out;

    c->bounded = !req->stream;
    c->next = l->calls;
    if (l->calls != NULL)
        l->calls->prev = c;
    l->calls = c;
    l->ncalls++;
    if (!l->in_curl && l->wait.head == NULL && has_room(l, c)) {
        if (add_to_multi(l, c) != 0) {
            call_free(c);
            c = NULL;
            goto out;
        }
    } else {
        /* Streams jump the queue: an events subscription must not wait
         * behind a burst of inspects. */
        c->q = Q_WAIT;
        q_push(&l->wait, c, !c->bounded);
        schedule_deferred(l);
    }
    result = c;
    c = NULL;
out:
    if (c != NULL) {
        if (c->resume != NULL)
            event_free(c->resume);
        easy_put(l, c->easy, false);
        curl_slist_free_all(c->hdrs);
        free(c);
    }
    return result;
}

void
loop_http_cancel(struct loop_http_call *c)
{
    if (c == NULL || c->cancelled)
        return;
    c->cancelled = true;
    /* libcurl never saw a waiting call: free it whoever is on the
     * stack. */
    if (c->l->in_curl && c->added) {
        c->q = Q_DEAD;
        q_push(&c->l->dead, c, false);
        schedule_deferred(c->l);
    } else {
        call_free(c);
    }
}

const char *
loop_http_header(const struct loop_http_resp *res, const char *name)
{
    size_t i, n = strlen(name);

    for (i = 0; i < res->nheader_lines; i++) {
        const char *line = res->header_lines[i];

        if (strncasecmp(line, name, n) == 0 && line[n] == ':') {
            line += n + 1;
            while (*line == ' ' || *line == '\t')
                line++;
            return line;
        }
    }
    return NULL;
}

size_t
loop_http_active(const struct loop *l)
{
    return l->ncalls;
}

size_t
loop_http_waiting(const struct loop *l)
{
    return l->wait.n;
}

uint64_t
loop_easy_made(const struct loop *l)
{
    return l->easy_made;
}

uint64_t
loop_socket_changes(const struct loop *l)
{
    return l->sock_changes;
}

void
loop_set_max_calls(struct loop *l, size_t n)
{
    l->max_calls = n;
    if (l->wait.head != NULL)
        schedule_deferred(l);
}

/*
 * libevent's own messages (it warns, for instance, when a client sends
 * what evhttp cannot parse) go through log.c like everything else, and,
 * since clients can cause them, one a second at most; those left out are
 * counted into the next. Debug messages are off in libevent anyway.
 */
static void
on_libevent_log(int severity, const char *msg)
{
    static uint64_t last_ms, dropped;
    uint64_t now = loop_now_ms();

    if (last_ms != 0 && now - last_ms < 1000) {
        dropped++;
        return;
    }
    last_ms = now;
    log_msg(severity >= EVENT_LOG_ERR    ? LOG_LEVEL_ERROR
            : severity >= EVENT_LOG_WARN ? LOG_LEVEL_WARN
                                         : LOG_LEVEL_DEBUG,
            NULL, "libevent: %s (%llu more left out)", msg,
            (unsigned long long)dropped);
    dropped = 0;
}

struct loop *
loop_new(void)
{
    struct loop *l = NULL, *result = NULL;
    size_t i;

    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        log_error(NULL, "curl_global_init failed");
        return NULL;
    }
    event_set_log_callback(on_libevent_log);
    l = calloc(1, sizeof(*l));
    if (l == NULL)
        goto out;
    l->base = event_base_new();
    if (l->base == NULL)
        goto out;
    l->multi = curl_multi_init();
    l->timer = evtimer_new(l->base, loop_on_timer, l);
    l->deferred = event_new(l->base, -1, 0, on_deferred, l);
    l->max_calls = LOOP_MAX_CALLS;
    if (l->multi == NULL || l->timer == NULL || l->deferred == NULL)
        goto out;
    for (i = 0; i < SOCK_PRIME; i++) {
        struct sock *sk =
            calloc(1, sizeof(*sk) + event_get_struct_event_size());

        if (sk == NULL)
            goto out;
        sk->ev = (struct event *)(void *)(sk + 1);
        sk->l = l;
        sock_put(l, sk);
    }
    curl_multi_setopt(l->multi, CURLMOPT_SOCKETFUNCTION, curl_socket_cb);
    curl_multi_setopt(l->multi, CURLMOPT_SOCKETDATA, l);
    curl_multi_setopt(l->multi, CURLMOPT_TIMERFUNCTION, curl_timer_cb);
    curl_multi_setopt(l->multi, CURLMOPT_TIMERDATA, l);
    result = l;
    l = NULL;
out:
    if (l != NULL)
        loop_free(l);
    else if (result == NULL)
        curl_global_cleanup();
    return result;
}

void
loop_free(struct loop *l)
{
    if (l == NULL)
        return;
    while (l->calls != NULL)
        call_free(l->calls);
    while (l->nidle > 0)
        curl_easy_cleanup(l->idle[--l->nidle]);
    /* Closes the kept connections, through close_cb. */
    if (l->multi != NULL)
        curl_multi_cleanup(l->multi);
    for (size_t i = 0; i < l->nfds; i++)
        sock_drop_parked(l, (curl_socket_t)i);
    free(l->fds);
    if (l->timer != NULL)
        event_free(l->timer);
    if (l->deferred != NULL)
        event_free(l->deferred);
    while (l->spare != NULL) {
        struct sock *sk = l->spare;

        l->spare = sk->next;
        free(sk);
    }
    if (l->base != NULL)
        event_base_free(l->base);
    free(l);
    curl_global_cleanup();
}

struct event_base *
loop_base(struct loop *l)
{
    return l->base;
}
