/*
 * faultproxy — an HTTP/1.1 proxy on a unix socket in front of a Docker
 * engine's unix socket, for reapd's end-to-end tests. It passes requests
 * and answers through (the endless events stream event by event, as each
 * arrives) and, when told so on its control socket, injects the engine
 * faults reapd has to survive: die events with a rewritten exitCode, DELETE
 * answered 500 or 409, slow answers, an events stream cut mid-object, an
 * engine that is down. See README.md for the control protocol.
 *
 * Why byte-level and not evhttp on both sides: libevent 2.1's evhttp client
 * cannot connect to a unix socket, and a cut "mid-object" needs control
 * over exactly which bytes reach the client before the close. The control
 * socket, where nothing unusual happens, is plain evhttp.
 *
 * One client connection has at most one upstream connection and one
 * exchange at a time (clients that pipeline wait, their bytes stay
 * buffered). Every buffer is bounded; a connection is freed on a later
 * loop turn (conn_kill), so no callback ever touches freed memory.
 */
#include <errno.h>
#include <sys/queue.h> /* before libevent: TAILQ_* for evkeyvalq */
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <event2/listener.h>
#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>
#include <yajl/yajl_gen.h>
#include <yajl/yajl_tree.h>

#define MAX_HEAD       (64u << 10) /* request or response header block */
#define MAX_TARGET     8192        /* request-target */
#define MAX_REQ_BODY   (16u << 20) /* Content-Length of a request */
#define MAX_LINE       (1u << 20)  /* one event of the events stream */
#define MAX_CHUNK_LINE 1024        /* chunk-size line, trailer line */
#define MAX_CONNS      256
#define HIGH_WATER     (4u << 20) /* pause the other side above this */
#define MAX_JSON_DEPTH 64

/* What a request is, for faults and counters. */
enum kind {
    K_PING,
    K_VERSION,
    K_EVENTS,
    K_LIST,
    K_INSPECT,
    K_DELETE,
    K_OTHER,
    K_NKINDS
};

static const char *const kind_names[K_NKINDS] = {
    "ping", "version", "events", "list", "inspect", "delete", "other"};

enum inject { INJ_NONE, INJ_500, INJ_409 };

struct faults {
    bool die_rewrite;
    long die_exit_code;
    unsigned long del500, del409; /* answers still to inject */
    long delay_ms[K_NKINDS];
    char delay_only[65]; /* delays only for this container id (prefix) */
    unsigned long cut;   /* events still to cut */
    char cut_on[32];     /* only events with this Action; "" = any */
    bool down_close;     /* down: accept and close instead of refusing */
};

struct counters {
    uint64_t requests[K_NKINDS];
    uint64_t injected_500, injected_409;
    uint64_t delayed;
    uint64_t events; /* event lines passed on */
    uint64_t die_rewritten;
    uint64_t cuts;
    uint64_t refused; /* connections closed because down/full */
    uint64_t dropped; /* client connections closed by the proxy */
    uint64_t upstream_errors;
    uint64_t client_gone; /* clients that left mid-exchange */
};

struct conn;

struct proxy {
    struct event_base *base;
    const char *listen_path, *upstream_path, *control_path;
    struct sockaddr_un up_addr;
    struct evconnlistener *lis;
    struct evhttp *ctl;
    struct event *sigterm, *sigint, *down_timer;
    struct conn *conns;
    size_t nconns;
    uint64_t next_id;
    bool down;
    struct faults f;
    struct counters n;
    struct timespec t0;
};

enum rq_state { RQ_HEAD, RQ_BODY, RQ_DONE, RQ_TUNNEL };
enum rs_state { RS_IDLE, RS_HEAD, RS_BODY, RS_TUNNEL };
enum body_mode { B_LENGTH, B_CHUNKED, B_EOF };
enum chunk_state { CH_SIZE, CH_DATA, CH_DATA_END, CH_TRAILER };

struct conn {
    struct proxy *p;
    uint64_t id;
    struct conn *prev, *next;
    struct bufferevent *cl, *up;
    struct event *reap; /* frees a killed connection on the next turn */
    struct event *hold; /* a delayed answer */
    bool dead, closing, holding, up_eof;
    bool in_client;   /* process_client is on the stack */
    bool half_closed; /* tunnel: the client has shut its write side */

    /* The current exchange. */
    enum rq_state rq;
    uint64_t rq_left;
    bool rq_discard; /* the body of a request we answer ourselves */
    enum kind kind;
    char what[160]; /* "METHOD target" for the log, shortened */
    char cid[72];   /* the container id of an inspect/delete */
    bool head_req, client_close, up_close;
    enum inject inject;
    long delay_ms;

    enum rs_state rs;
    enum body_mode body;
    enum chunk_state ch;
    uint64_t rs_left;
    bool events; /* a 200 events stream: passed on event by event */
    struct evbuffer *line;
};

/* A parsed header block (request or response). */
struct head {
    size_t len; /* bytes, with the final CRLF CRLF */
    char method[16];
    char target[MAX_TARGET];
    int minor; /* HTTP/1.x */
    int status;
    bool has_cl;
    uint64_t cl;
    bool te, chunked;
    bool conn_close, conn_keepalive;
};

static struct proxy P;

static void process_client(struct conn *c);
static void process_upstream(struct conn *c);
static void process_client_loop(struct conn *c, struct evbuffer *in);

/* ---- small helpers ---------------------------------------------------- */

static long
elapsed_ms(void)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long)((t.tv_sec - P.t0.tv_sec) * 1000 +
                  (t.tv_nsec - P.t0.tv_nsec) / 1000000);
}

/* One line per happening on stderr: the e2e log is the proxy's story. */
static void logf_(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void
logf_(const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    long ms = elapsed_ms();

    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    fprintf(stderr, "faultproxy +%ld.%03lds: %s\n", ms / 1000, ms % 1000, buf);
}

static bool
ieq(const char *a, const char *b)
{
    for (; *a && *b; a++, b++) {
        char x = *a, y = *b;

        if (x >= 'A' && x <= 'Z')
            x = (char)(x - 'A' + 'a');
        if (y >= 'A' && y <= 'Z')
            y = (char)(y - 'A' + 'a');
        if (x != y)
            return false;
    }
    return *a == *b;
}

/* Does the comma-separated header value hold this token? */
static bool
has_token(const char *value, const char *token)
{
    char tok[64];
    const char *s = value;

    while (*s) {
        size_t n = 0;

        while (*s == ' ' || *s == '\t' || *s == ',')
            s++;
        while (*s && *s != ',' && n < sizeof(tok) - 1)
            tok[n++] = *s++;
        while (n > 0 && (tok[n - 1] == ' ' || tok[n - 1] == '\t'))
            n--;
        tok[n] = '\0';
        if (n > 0 && ieq(tok, token))
            return true;
        while (*s && *s != ',')
            s++;
    }
    return false;
}

static int
parse_u64(const char *s, uint64_t max, uint64_t *out)
{
    uint64_t v = 0;

    if (*s == '\0')
        return -1;
    for (; *s; s++) {
        if (*s < '0' || *s > '9')
            return -1;
        v = v * 10 + (uint64_t)(*s - '0');
        if (v > max)
            return -1;
    }
    *out = v;
    return 0;
}

static int
listen_unix(const char *path)
{
    struct sockaddr_un sa;
    int fd;

    memset(&sa, 0, sizeof(sa));
    sa.sun_family = AF_UNIX;
    if (strlen(path) >= sizeof(sa.sun_path)) {
        logf_("socket path too long: %s", path);
        return -1;
    }
    strcpy(sa.sun_path, path);
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return -1;
    unlink(path);
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
        listen(fd, 128) != 0) {
        logf_("cannot listen on %s: %s", path, strerror(errno));
        close(fd);
        return -1;
    }
    /* The e2e tests run as root, reapd may not: let anyone connect. */
    chmod(path, 0666);
    return fd;
}

/* ---- header blocks ---------------------------------------------------- */

/* Where the header block in `in` ends (0: not complete yet). */
static size_t
head_end(struct evbuffer *in)
{
    struct evbuffer_ptr e = evbuffer_search(in, "\r\n\r\n", 4, NULL);

    return e.pos < 0 ? 0 : (size_t)e.pos + 4;
}

/*
 * Parses the header lines of a NUL-terminated block whose first line the
 * caller handled; keeps only what framing needs. -1 on a malformed line.
 */
static int
parse_fields(char *s, struct head *h)
{
    while (*s) {
        char *eol = strstr(s, "\r\n"), *colon, *v, *end;

        if (eol == NULL || eol == s)
            break;
        *eol = '\0';
        if (*s == ' ' || *s == '\t')
            return -1; /* obsolete line folding */
        colon = strchr(s, ':');
        if (colon == NULL)
            return -1;
        *colon = '\0';
        v = colon + 1;
        while (*v == ' ' || *v == '\t')
            v++;
        end = v + strlen(v);
        while (end > v && (end[-1] == ' ' || end[-1] == '\t'))
            *--end = '\0';
        if (ieq(s, "Content-Length")) {
            uint64_t cl;

            if (parse_u64(v, UINT64_MAX / 16, &cl) != 0 ||
                (h->has_cl && cl != h->cl))
                return -1;
            h->has_cl = true;
            h->cl = cl;
        } else if (ieq(s, "Transfer-Encoding")) {
            h->te = true;
            if (has_token(v, "chunked"))
                h->chunked = true;
        } else if (ieq(s, "Connection")) {
            if (has_token(v, "close"))
                h->conn_close = true;
            if (has_token(v, "keep-alive"))
                h->conn_keepalive = true;
        }
        s = eol + 2;
    }
    return 0;
}

/* Copies the first `len` bytes of `in` out as a C string. */
static char *
block_copy(struct evbuffer *in, size_t len)
{
    char *s = malloc(len + 1);

    if (s == NULL)
        return NULL;
    evbuffer_copyout(in, s, len);
    s[len] = '\0';
    return s;
}

/* 0 ok, else the HTTP status to answer with. */
static int
parse_request(struct evbuffer *in, size_t len, struct head *h)
{
    char *s = block_copy(in, len), *sp1, *sp2, *eol;
    int rc = 400;

    memset(h, 0, sizeof(*h));
    h->len = len;
    if (s == NULL)
        return 500;
    eol = strstr(s, "\r\n");
    *eol = '\0';
    sp1 = strchr(s, ' ');
    sp2 = sp1 != NULL ? strchr(sp1 + 1, ' ') : NULL;
    if (sp1 == NULL || sp2 == NULL || (size_t)(sp1 - s) >= sizeof(h->method))
        goto out;
    if ((size_t)(sp2 - sp1 - 1) >= sizeof(h->target)) {
        rc = 414;
        goto out;
    }
    memcpy(h->method, s, (size_t)(sp1 - s));
    memcpy(h->target, sp1 + 1, (size_t)(sp2 - sp1 - 1));
    if (strncmp(sp2 + 1, "HTTP/1.", 7) != 0 || sp2[8] < '0' || sp2[8] > '9' ||
        sp2[9] != '\0' || h->target[0] != '/')
        goto out;
    h->minor = sp2[8] - '0';
    if (parse_fields(eol + 2, h) != 0)
        goto out;
    rc = 0;
out:
    free(s);
    return rc;
}

static int
parse_response(struct evbuffer *in, size_t len, struct head *h)
{
    char *s = block_copy(in, len), *eol;
    int rc = -1;

    memset(h, 0, sizeof(*h));
    h->len = len;
    if (s == NULL)
        return -1;
    eol = strstr(s, "\r\n");
    *eol = '\0';
    /* HTTP/1.x SSS[ reason] */
    if (strncmp(s, "HTTP/1.", 7) != 0 || s[7] < '0' || s[7] > '9' ||
        s[8] != ' ' || s[9] < '1' || s[9] > '5' || s[10] < '0' ||
        s[10] > '9' || s[11] < '0' || s[11] > '9' ||
        (s[12] != ' ' && s[12] != '\0'))
        goto out;
    h->minor = s[7] - '0';
    h->status = (s[9] - '0') * 100 + (s[10] - '0') * 10 + (s[11] - '0');
    rc = parse_fields(eol + 2, h);
out:
    free(s);
    return rc;
}

/* Sorts a request by its path; versioned paths are /v1.41/containers/... */
static enum kind
classify(const char *method, const char *target, char *cid, size_t cidlen)
{
    char path[MAX_TARGET];
    const char *s = path, *rest;
    size_t n = strcspn(target, "?#");

    memcpy(path, target, n);
    path[n] = '\0';
    cid[0] = '\0';
    if (s[0] == '/' && s[1] == 'v' && s[2] >= '0' && s[2] <= '9') {
        const char *q = s + 2;

        while ((*q >= '0' && *q <= '9') || *q == '.')
            q++;
        if (*q == '/')
            s = q;
    }
    if (strcmp(s, "/_ping") == 0)
        return K_PING;
    if (strcmp(s, "/version") == 0)
        return K_VERSION;
    if (strcmp(s, "/events") == 0)
        return K_EVENTS;
    if (strcmp(s, "/containers/json") == 0)
        return K_LIST;
    if (strncmp(s, "/containers/", 12) != 0)
        return K_OTHER;
    rest = s + 12;
    n = strcspn(rest, "/");
    if (n == 0 || n >= cidlen)
        return K_OTHER;
    if (strcmp(rest + n, "/json") == 0 &&
        (strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0)) {
        memcpy(cid, rest, n);
        cid[n] = '\0';
        return K_INSPECT;
    }
    if (rest[n] == '\0' && strcmp(method, "DELETE") == 0) {
        memcpy(cid, rest, n);
        cid[n] = '\0';
        return K_DELETE;
    }
    return K_OTHER;
}

/* ---- connections ------------------------------------------------------ */

static void
conn_destroy(struct conn *c)
{
    if (c->prev != NULL)
        c->prev->next = c->next;
    else
        P.conns = c->next;
    if (c->next != NULL)
        c->next->prev = c->prev;
    P.nconns--;
    if (c->cl != NULL)
        bufferevent_free(c->cl);
    if (c->up != NULL)
        bufferevent_free(c->up);
    if (c->hold != NULL)
        event_free(c->hold);
    if (c->reap != NULL)
        event_free(c->reap);
    if (c->line != NULL)
        evbuffer_free(c->line);
    free(c);
}

static void
on_reap(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    conn_destroy(arg);
}

/*
 * Closes both sides at once. The memory lives until the next loop turn,
 * so callers up the stack only have to look at c->dead.
 */
static void
conn_kill(struct conn *c)
{
    if (c->dead)
        return;
    c->dead = true;
    if (c->cl != NULL) {
        bufferevent_free(c->cl);
        c->cl = NULL;
    }
    if (c->up != NULL) {
        bufferevent_free(c->up);
        c->up = NULL;
    }
    event_del(c->hold);
    event_active(c->reap, EV_TIMEOUT, 1);
}

static void
up_drop(struct conn *c)
{
    if (c->up != NULL) {
        bufferevent_free(c->up);
        c->up = NULL;
    }
    c->up_eof = false;
}

/* Lets what is queued for the client go out, then closes. */
static void
conn_close_after_flush(struct conn *c)
{
    if (c->dead)
        return;
    c->closing = true;
    up_drop(c);
    event_del(c->hold);
    c->holding = false;
    bufferevent_disable(c->cl, EV_READ);
    if (evbuffer_get_length(bufferevent_get_output(c->cl)) == 0)
        conn_kill(c);
}

/*
 * The exchange is over: close, or go on with a request the client sent
 * meanwhile (not from inside process_client, whose loop does that itself:
 * recursing once per pipelined request could run out of stack).
 */
static void
exchange_over(struct conn *c)
{
    c->rs = RS_IDLE;
    c->events = false;
    evbuffer_drain(c->line, evbuffer_get_length(c->line));
    if (c->up_close)
        up_drop(c);
    if (c->client_close)
        conn_close_after_flush(c);
    else if (c->rq == RQ_DONE && !c->in_client)
        process_client(c);
}

/* An answer of our own (injected, or an error of the proxy). */
static void
local_reply(struct conn *c, int status, const char *reason,
            const char *message, bool close_after)
{
    struct evbuffer *out = bufferevent_get_output(c->cl);
    yajl_gen g = yajl_gen_alloc(NULL);
    const unsigned char *body = (const unsigned char *)"{}";
    size_t blen = 2;

    if (g != NULL && yajl_gen_map_open(g) == yajl_gen_status_ok &&
        yajl_gen_string(g, (const unsigned char *)"message", 7) ==
            yajl_gen_status_ok &&
        yajl_gen_string(g, (const unsigned char *)message, strlen(message)) ==
            yajl_gen_status_ok &&
        yajl_gen_map_close(g) == yajl_gen_status_ok)
        yajl_gen_get_buf(g, &body, &blen);
    /* What dockerd 20.10 sends with an error. */
    evbuffer_add_printf(out,
                        "HTTP/1.1 %d %s\r\n"
                        "Api-Version: 1.41\r\n"
                        "Content-Type: application/json\r\n"
                        "Server: faultproxy\r\n"
                        "Content-Length: %zu\r\n"
                        "%s\r\n",
                        status, reason, blen + 1,
                        close_after ? "Connection: close\r\n" : "");
    evbuffer_add(out, body, blen);
    evbuffer_add(out, "\n", 1);
    if (g != NULL)
        yajl_gen_free(g);
    if (close_after)
        c->client_close = true;
    exchange_over(c);
}

static void
send_injected(struct conn *c)
{
    char msg[160];

    if (c->inject == INJ_500) {
        P.n.injected_500++;
        logf_("#%llu %s -> 500 (injected)", (unsigned long long)c->id,
              c->what);
        local_reply(c, 500, "Internal Server Error",
                    "failed to delete task: context deadline exceeded", false);
    } else {
        P.n.injected_409++;
        logf_("#%llu %s -> 409 (injected)", (unsigned long long)c->id,
              c->what);
        snprintf(msg, sizeof(msg),
                 "removal of container %s is already in progress", c->cid);
        local_reply(c, 409, "Conflict", msg, false);
    }
}

static void
on_hold(evutil_socket_t fd, short what, void *arg)
{
    struct conn *c = arg;

    (void)fd;
    (void)what;
    if (c->dead)
        return;
    c->holding = false;
    if (c->inject != INJ_NONE)
        send_injected(c);
    else
        process_upstream(c);
}

/* ---- the upstream side ------------------------------------------------ */

static void
put_chunk(struct evbuffer *out, const void *data, size_t len)
{
    if (len == 0)
        return;
    evbuffer_add_printf(out, "%zx\r\n", len);
    evbuffer_add(out, data, len);
    evbuffer_add(out, "\r\n", 2);
}

static yajl_gen_status
gen_tree(yajl_gen g, yajl_val v, yajl_val target, const char *subst, int depth)
{
    yajl_gen_status st = yajl_gen_status_ok;
    size_t i;

    if (depth > MAX_JSON_DEPTH)
        return yajl_max_depth_exceeded;
    if (v == target)
        return yajl_gen_string(g, (const unsigned char *)subst, strlen(subst));
    switch (v->type) {
    case yajl_t_string:
        return yajl_gen_string(g, (const unsigned char *)v->u.string,
                               strlen(v->u.string));
    case yajl_t_number:
        /* The text as it came: timeNano does not fit a double. */
        return yajl_gen_number(g, v->u.number.r, strlen(v->u.number.r));
    case yajl_t_true:
        return yajl_gen_bool(g, 1);
    case yajl_t_false:
        return yajl_gen_bool(g, 0);
    case yajl_t_null:
        return yajl_gen_null(g);
    case yajl_t_object:
        st = yajl_gen_map_open(g);
        for (i = 0; st == yajl_gen_status_ok && i < v->u.object.len; i++) {
            const char *k = v->u.object.keys[i];

            st = yajl_gen_string(g, (const unsigned char *)k, strlen(k));
            if (st == yajl_gen_status_ok)
                st = gen_tree(g, v->u.object.values[i], target, subst,
                              depth + 1);
        }
        return st == yajl_gen_status_ok ? yajl_gen_map_close(g) : st;
    case yajl_t_array:
        st = yajl_gen_array_open(g);
        for (i = 0; st == yajl_gen_status_ok && i < v->u.array.len; i++)
            st = gen_tree(g, v->u.array.values[i], target, subst, depth + 1);
        return st == yajl_gen_status_ok ? yajl_gen_array_close(g) : st;
    default:
        return yajl_gen_invalid_string;
    }
}

static const char *
tree_string(yajl_val root, const char *a, const char *b, const char *c)
{
    const char *path[4] = {a, b, c, NULL};
    yajl_val v = yajl_tree_get(root, path, yajl_t_string);

    return v != NULL ? v->u.string : NULL;
}

/* Passes one event line (with its newline) on, or cuts the stream there. */
static void
event_line(struct conn *c, const char *data, size_t len)
{
    struct evbuffer *out = bufferevent_get_output(c->cl);
    bool cut_armed = P.f.cut > 0;
    bool need_parse = P.f.die_rewrite || (cut_armed && P.f.cut_on[0]);
    yajl_val root = NULL;
    const char *action = NULL;
    char err[128];

    P.n.events++;
    if (need_parse) {
        char *s = malloc(len + 1);

        if (s != NULL) {
            memcpy(s, data, len);
            s[len] = '\0';
            root = yajl_tree_parse(s, err, sizeof(err));
            free(s);
        }
        if (root != NULL && YAJL_IS_OBJECT(root)) {
            action = tree_string(root, "Action", NULL, NULL);
            if (action == NULL)
                action = tree_string(root, "status", NULL, NULL);
        }
    }
    if (cut_armed && (P.f.cut_on[0] == '\0' ||
                      (action != NULL && strcmp(action, P.f.cut_on) == 0))) {
        /* Half of the object, never its newline: then the connection
         * goes, as when an engine dies while writing. */
        size_t half = (len - 1) / 2 > 0 ? (len - 1) / 2 : 1;

        P.f.cut--;
        P.n.cuts++;
        logf_("#%llu events: cut mid-object after %zu of %zu bytes "
              "(action %s)",
              (unsigned long long)c->id, half, len,
              action != NULL ? action : "?");
        put_chunk(out, data, half);
        P.n.dropped++;
        conn_close_after_flush(c);
        goto out;
    }
    if (P.f.die_rewrite && action != NULL && strcmp(action, "die") == 0) {
        const char *p[] = {"Actor", "Attributes", "exitCode", NULL};
        yajl_val code = yajl_tree_get(root, p, yajl_t_any);
        yajl_gen g = code != NULL ? yajl_gen_alloc(NULL) : NULL;
        char subst[24];
        const unsigned char *buf;
        size_t blen;

        snprintf(subst, sizeof(subst), "%ld", P.f.die_exit_code);
        if (g != NULL &&
            gen_tree(g, root, code, subst, 0) == yajl_gen_status_ok &&
            yajl_gen_get_buf(g, &buf, &blen) == yajl_gen_status_ok) {
            const char *was = YAJL_IS_STRING(code) ? code->u.string : "?";

            P.n.die_rewritten++;
            logf_("#%llu events: die of %.12s: exitCode %s -> %s",
                  (unsigned long long)c->id,
                  tree_string(root, "Actor", "ID", NULL) != NULL
                      ? tree_string(root, "Actor", "ID", NULL)
                      : "?",
                  was, subst);
            evbuffer_add_printf(out, "%zx\r\n", blen + 1);
            evbuffer_add(out, buf, blen);
            evbuffer_add(out, "\n\r\n", 3);
            yajl_gen_free(g);
            goto out;
        }
        if (g != NULL)
            yajl_gen_free(g);
    }
    put_chunk(out, data, len);
out:
    if (root != NULL)
        yajl_tree_free(root);
}

static void
event_lines(struct conn *c)
{
    for (;;) {
        struct evbuffer_ptr e = evbuffer_search(c->line, "\n", 1, NULL);
        size_t n;
        const char *data;

        if (e.pos < 0)
            break;
        n = (size_t)e.pos + 1;
        data = (const char *)evbuffer_pullup(c->line, (ev_ssize_t)n);
        event_line(c, data, n);
        if (c->dead || c->closing)
            return;
        evbuffer_drain(c->line, n);
    }
    if (evbuffer_get_length(c->line) > MAX_LINE) {
        logf_("#%llu events: an event over %u bytes; closing",
              (unsigned long long)c->id, MAX_LINE);
        conn_close_after_flush(c);
    }
}

/* Hands `n` body bytes of upstream's input to the client. */
static void
body_bytes(struct conn *c, struct evbuffer *in, size_t n)
{
    struct evbuffer *out = bufferevent_get_output(c->cl);

    if (c->events) {
        evbuffer_remove_buffer(in, c->line, n);
        event_lines(c);
    } else if (c->body == B_CHUNKED) {
        evbuffer_add_printf(out, "%zx\r\n", n);
        evbuffer_remove_buffer(in, out, n);
        evbuffer_add(out, "\r\n", 2);
    } else {
        evbuffer_remove_buffer(in, out, n);
    }
}

/* The end of a chunked body: the rest of a last event, the last chunk. */
static void
chunked_end(struct conn *c)
{
    struct evbuffer *out = bufferevent_get_output(c->cl);
    size_t rest = evbuffer_get_length(c->line);

    if (rest > 0)
        put_chunk(out, evbuffer_pullup(c->line, (ev_ssize_t)rest), rest);
    evbuffer_add(out, "0\r\n\r\n", 5);
    exchange_over(c);
}

/* A broken upstream answer: 502 if nothing went out yet, else close. */
static void
upstream_failed(struct conn *c, const char *why)
{
    P.n.upstream_errors++;
    logf_("#%llu %s: upstream %s", (unsigned long long)c->id, c->what, why);
    up_drop(c);
    if (c->rs == RS_HEAD) {
        c->rs = RS_IDLE;
        local_reply(c, 502, "Bad Gateway", why, true);
    } else {
        conn_close_after_flush(c);
    }
}

static void
parse_chunked(struct conn *c, struct evbuffer *in)
{
    while (!c->dead && !c->closing && c->rs == RS_BODY) {
        size_t avail = evbuffer_get_length(in), n;
        char *line;

        switch (c->ch) {
        case CH_SIZE:
        case CH_TRAILER:
        case CH_DATA_END:
            line = evbuffer_readln(in, &n, EVBUFFER_EOL_CRLF_STRICT);
            if (line == NULL) {
                if (avail > MAX_CHUNK_LINE)
                    upstream_failed(c, "sent an overlong chunk line");
                return;
            }
            if (c->ch == CH_DATA_END) {
                if (n != 0) {
                    free(line);
                    upstream_failed(c, "sent a bad chunk end");
                    return;
                }
                c->ch = CH_SIZE;
            } else if (c->ch == CH_TRAILER) {
                if (n == 0)
                    chunked_end(c);
            } else {
                char *end;
                unsigned long long size = strtoull(line, &end, 16);

                if (end == line || (*end != '\0' && *end != ';' &&
                                    *end != ' ' && *end != '\t')) {
                    free(line);
                    upstream_failed(c, "sent a bad chunk size");
                    return;
                }
                c->rs_left = size;
                c->ch = size == 0 ? CH_TRAILER : CH_DATA;
            }
            free(line);
            break;
        case CH_DATA:
            if (avail == 0)
                return;
            n = avail < c->rs_left ? avail : (size_t)c->rs_left;
            c->rs_left -= n;
            if (c->rs_left == 0)
                c->ch = CH_DATA_END;
            body_bytes(c, in, n);
            break;
        }
    }
}

static void
parse_response_head(struct conn *c, struct evbuffer *in)
{
    struct evbuffer *out = bufferevent_get_output(c->cl);
    size_t len = head_end(in);
    struct head h;

    if (len == 0) {
        if (evbuffer_get_length(in) > MAX_HEAD)
            upstream_failed(c, "sent an overlong header block");
        return;
    }
    if (len > MAX_HEAD || parse_response(in, len, &h) != 0) {
        upstream_failed(c, "sent a malformed header block");
        return;
    }
    evbuffer_remove_buffer(in, out, len);
    logf_("#%llu %s -> %d", (unsigned long long)c->id, c->what, h.status);
    if (h.status == 101) {
        /* attach/exec hijack: from now on bytes, both ways. */
        c->rs = RS_TUNNEL;
        c->rq = RQ_TUNNEL;
        if (!c->in_client)
            process_client(c); /* what the client sent meanwhile */
        return;
    }
    if (h.status < 200)
        return; /* 100 Continue: the real answer follows */
    if (h.conn_close || (h.minor == 0 && !h.conn_keepalive)) {
        c->up_close = true;
        c->client_close = true;
    }
    c->rs = RS_BODY;
    if (c->head_req || h.status == 204 || h.status == 304) {
        exchange_over(c);
    } else if (h.chunked) {
        c->body = B_CHUNKED;
        c->ch = CH_SIZE;
        c->events = c->kind == K_EVENTS && h.status == 200;
    } else if (h.has_cl) {
        c->body = B_LENGTH;
        c->rs_left = h.cl;
        if (h.cl == 0)
            exchange_over(c);
    } else {
        c->body = B_EOF;
        c->up_close = true;
        c->client_close = true;
    }
}

static void
process_upstream(struct conn *c)
{
    struct bufferevent *up = c->up;
    struct evbuffer *in;

    if (c->dead || c->closing || c->holding || up == NULL)
        return;
    in = bufferevent_get_input(up);
    /* Each step may end the exchange, start the next one (a pipelined
     * request), drop this upstream connection or the whole connection. */
    while (!c->dead && !c->closing && c->up == up &&
           evbuffer_get_length(in) > 0) {
        size_t before = evbuffer_get_length(in), n;
        enum rs_state rs = c->rs;

        if (rs == RS_IDLE) {
            /* Nobody asked: an answer to nothing is not passed on. */
            P.n.upstream_errors++;
            logf_("#%llu upstream spoke out of turn; dropping it",
                  (unsigned long long)c->id);
            up_drop(c);
            return;
        } else if (rs == RS_TUNNEL) {
            evbuffer_add_buffer(bufferevent_get_output(c->cl), in);
        } else if (rs == RS_HEAD) {
            parse_response_head(c, in);
        } else if (c->body == B_CHUNKED) {
            parse_chunked(c, in);
        } else if (c->body == B_LENGTH) {
            n = before < c->rs_left ? before : (size_t)c->rs_left;
            c->rs_left -= n;
            body_bytes(c, in, n);
            if (c->rs_left == 0)
                exchange_over(c);
        } else {
            body_bytes(c, in, before);
        }
        if (c->up == up && c->rs == rs && evbuffer_get_length(in) == before)
            break; /* needs more bytes */
    }
    if (c->dead || c->closing || c->up != up)
        return;
    if (evbuffer_get_length(bufferevent_get_output(c->cl)) > HIGH_WATER)
        bufferevent_disable(up, EV_READ); /* on_cl_write resumes */
    if (c->up_eof) {
        /* Upstream has closed and everything it sent is handled. */
        if (c->rs == RS_BODY && c->body == B_EOF) {
            up_drop(c);
            exchange_over(c);
        } else if (c->rs == RS_IDLE) {
            up_drop(c);
        } else if (c->rs == RS_TUNNEL) {
            conn_close_after_flush(c);
        } else {
            upstream_failed(c, "closed the connection mid-answer");
        }
    }
}

static void
on_up_read(struct bufferevent *bev, void *arg)
{
    (void)bev;
    process_upstream(arg);
}

/* A tunnel's client said all it had to say: tell upstream the same
 * once what it sent went out (docker attach without stdin does this). */
static void
tunnel_shut(struct conn *c)
{
    if (c->up != NULL &&
        evbuffer_get_length(bufferevent_get_output(c->up)) == 0)
        shutdown(bufferevent_getfd(c->up), SHUT_WR);
}

static void
on_up_write(struct bufferevent *bev, void *arg)
{
    struct conn *c = arg;

    (void)bev;
    if (c->dead || c->closing)
        return;
    if (c->half_closed) {
        tunnel_shut(c);
        return;
    }
    /* A request body or tunnel paused for upstream may go on. */
    if (!(bufferevent_get_enabled(c->cl) & EV_READ)) {
        bufferevent_enable(c->cl, EV_READ);
        process_client(c);
    }
}

static void
on_up_event(struct bufferevent *bev, short what, void *arg)
{
    struct conn *c = arg;

    (void)bev;
    if (c->dead || !(what & (BEV_EVENT_EOF | BEV_EVENT_ERROR)))
        return;
    if ((what & BEV_EVENT_ERROR) && c->rs == RS_HEAD &&
        evbuffer_get_length(bufferevent_get_input(c->up)) == 0) {
        char why[160];

        snprintf(why, sizeof(why), "unreachable: %s", strerror(errno));
        upstream_failed(c, why);
        return;
    }
    c->up_eof = true;
    bufferevent_disable(c->up, EV_READ | EV_WRITE);
    process_upstream(c);
}

static int
up_connect(struct conn *c)
{
    c->up = bufferevent_socket_new(P.base, -1, BEV_OPT_CLOSE_ON_FREE);
    if (c->up == NULL)
        return -1;
    bufferevent_setcb(c->up, on_up_read, on_up_write, on_up_event, c);
    if (bufferevent_socket_connect(c->up, (struct sockaddr *)&P.up_addr,
                                   sizeof(P.up_addr)) != 0) {
        bufferevent_free(c->up);
        c->up = NULL;
        return -1;
    }
    bufferevent_enable(c->up, EV_READ | EV_WRITE);
    return 0;
}

/* ---- the client side -------------------------------------------------- */

/* A complete request head is in `in`: decide and start the exchange. */
static void
start_exchange(struct conn *c, struct evbuffer *in, size_t len)
{
    struct head h;
    int bad = parse_request(in, len, &h);

    c->inject = INJ_NONE;
    c->client_close = false;
    c->up_close = false;
    c->rq_discard = false;
    c->rq_left = 0;
    if (bad != 0) {
        evbuffer_drain(in, len);
        c->rq = RQ_DONE;
        c->rs = RS_HEAD;
        snprintf(c->what, sizeof(c->what), "(bad request)");
        local_reply(c, bad, bad == 414 ? "URI Too Long" : "Bad Request",
                    "faultproxy: malformed request", true);
        return;
    }
    c->kind = classify(h.method, h.target, c->cid, sizeof(c->cid));
    snprintf(c->what, sizeof(c->what), "%s %.140s", h.method, h.target);
    c->head_req = strcmp(h.method, "HEAD") == 0;
    c->client_close = h.conn_close || (h.minor == 0 && !h.conn_keepalive);
    P.n.requests[c->kind]++;
    c->rq = RQ_DONE;
    c->rs = RS_HEAD;
    if (h.te || h.cl > MAX_REQ_BODY) {
        /* Bounded and simple: reapd sends no bodies at all. */
        evbuffer_drain(in, len);
        local_reply(c, h.te ? 501 : 413,
                    h.te ? "Not Implemented" : "Payload Too Large",
                    "faultproxy: chunked or oversized request body", true);
        return;
    }
    if (h.cl > 0) {
        c->rq = RQ_BODY;
        c->rq_left = h.cl;
    }
    c->delay_ms = P.f.delay_ms[c->kind];
    if (P.f.delay_only[0] != '\0' &&
        strncmp(c->cid, P.f.delay_only, strlen(P.f.delay_only)) != 0)
        c->delay_ms = 0;
    if (c->kind == K_DELETE && P.f.del500 > 0) {
        P.f.del500--;
        c->inject = INJ_500;
    } else if (c->kind == K_DELETE && P.f.del409 > 0) {
        P.f.del409--;
        c->inject = INJ_409;
    }
    if (c->inject != INJ_NONE) {
        evbuffer_drain(in, len);
        c->rq_discard = true;
    } else {
        if (c->up == NULL && up_connect(c) != 0) {
            char why[160];

            snprintf(why, sizeof(why), "cannot connect: %s", strerror(errno));
            evbuffer_drain(in, len);
            upstream_failed(c, why);
            return;
        }
        evbuffer_remove_buffer(in, bufferevent_get_output(c->up), len);
        logf_("#%llu %s (%s)%s", (unsigned long long)c->id, c->what,
              kind_names[c->kind], c->delay_ms > 0 ? " delayed" : "");
    }
    if (c->delay_ms > 0) {
        struct timeval tv = {c->delay_ms / 1000, (c->delay_ms % 1000) * 1000};

        P.n.delayed++;
        c->holding = true;
        evtimer_add(c->hold, &tv);
    } else if (c->inject != INJ_NONE) {
        send_injected(c);
    }
}

static void
process_client(struct conn *c)
{
    struct evbuffer *in;

    if (c->dead || c->closing || c->in_client)
        return;
    in = bufferevent_get_input(c->cl);
    c->in_client = true;
    process_client_loop(c, in);
    c->in_client = false;
    if (c->dead || c->closing)
        return;
    if (c->up != NULL &&
        evbuffer_get_length(bufferevent_get_output(c->up)) > HIGH_WATER)
        bufferevent_disable(c->cl, EV_READ); /* on_up_write resumes */
}

static void
process_client_loop(struct conn *c, struct evbuffer *in)
{
    for (;;) {
        size_t avail = evbuffer_get_length(in), len;

        if (c->dead || c->closing)
            return;
        if (c->rq == RQ_TUNNEL) {
            if (c->up != NULL)
                evbuffer_add_buffer(bufferevent_get_output(c->up), in);
            break;
        }
        if (c->rq == RQ_BODY) {
            size_t n = avail < c->rq_left ? avail : (size_t)c->rq_left;

            if (n == 0)
                break;
            if (c->rq_discard || c->up == NULL)
                evbuffer_drain(in, n);
            else
                evbuffer_remove_buffer(in, bufferevent_get_output(c->up), n);
            c->rq_left -= n;
            if (c->rq_left == 0)
                c->rq = RQ_DONE;
            continue;
        }
        if (c->rq == RQ_DONE) {
            if (c->rs != RS_IDLE) {
                /* Pipelined: it waits, within bounds. */
                if (avail > MAX_HEAD + MAX_REQ_BODY) {
                    P.n.dropped++;
                    conn_kill(c);
                }
                return;
            }
            c->rq = RQ_HEAD;
        }
        if (avail == 0)
            break;
        len = head_end(in);
        if (len == 0 || len > MAX_HEAD) {
            if (avail > MAX_HEAD || len > MAX_HEAD) {
                c->rq = RQ_DONE;
                c->rs = RS_HEAD;
                snprintf(c->what, sizeof(c->what), "(oversized request)");
                local_reply(c, 431, "Request Header Fields Too Large",
                            "faultproxy: header block too large", true);
            }
            return;
        }
        start_exchange(c, in, len);
    }
}

static void
on_cl_read(struct bufferevent *bev, void *arg)
{
    (void)bev;
    process_client(arg);
}

static void
on_cl_write(struct bufferevent *bev, void *arg)
{
    struct conn *c = arg;

    (void)bev;
    if (c->dead)
        return;
    if (c->closing) {
        conn_kill(c); /* everything went out */
        return;
    }
    if (c->up != NULL && !(bufferevent_get_enabled(c->up) & EV_READ) &&
        !c->up_eof) {
        bufferevent_enable(c->up, EV_READ);
        process_upstream(c);
    }
}

static void
on_cl_event(struct bufferevent *bev, short what, void *arg)
{
    struct conn *c = arg;

    (void)bev;
    if (c->dead || !(what & (BEV_EVENT_EOF | BEV_EVENT_ERROR)))
        return;
    if ((what & BEV_EVENT_EOF) && c->rq == RQ_TUNNEL && !c->closing &&
        c->up != NULL) {
        /* Half-close: upstream's answer may still come back. */
        process_client(c);
        c->half_closed = true;
        bufferevent_disable(c->cl, EV_READ);
        tunnel_shut(c);
        return;
    }
    if (!c->closing && (c->rs != RS_IDLE || c->rq == RQ_BODY)) {
        P.n.client_gone++;
        logf_("#%llu %s: client left mid-exchange", (unsigned long long)c->id,
              c->what);
    }
    conn_kill(c);
}

static void
on_accept(struct evconnlistener *lis, evutil_socket_t fd, struct sockaddr *sa,
          int salen, void *arg)
{
    struct conn *c;

    (void)lis;
    (void)sa;
    (void)salen;
    (void)arg;
    if (P.down || P.nconns >= MAX_CONNS) {
        P.n.refused++;
        close(fd);
        return;
    }
    c = calloc(1, sizeof(*c));
    if (c == NULL) {
        close(fd);
        return;
    }
    c->p = &P;
    c->id = ++P.next_id;
    c->cl = bufferevent_socket_new(P.base, fd, BEV_OPT_CLOSE_ON_FREE);
    c->reap = event_new(P.base, -1, 0, on_reap, c);
    c->hold = evtimer_new(P.base, on_hold, c);
    c->line = evbuffer_new();
    c->next = P.conns;
    if (P.conns != NULL)
        P.conns->prev = c;
    P.conns = c;
    P.nconns++;
    if (c->cl == NULL || c->reap == NULL || c->hold == NULL ||
        c->line == NULL) {
        if (c->cl == NULL)
            close(fd);
        conn_destroy(c);
        return;
    }
    bufferevent_setcb(c->cl, on_cl_read, on_cl_write, on_cl_event, c);
    bufferevent_enable(c->cl, EV_READ | EV_WRITE);
}

static int
start_listening(void)
{
    int fd = listen_unix(P.listen_path);

    if (fd < 0)
        return -1;
    P.lis = evconnlistener_new(P.base, on_accept, NULL,
                               LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC,
                               -1, fd);
    if (P.lis == NULL) {
        close(fd);
        return -1;
    }
    return 0;
}

/* ---- down / up -------------------------------------------------------- */

static void
set_up(void)
{
    if (!P.down)
        return;
    event_del(P.down_timer);
    P.down = false;
    if (P.lis == NULL && start_listening() != 0) {
        logf_("cannot listen again on %s; exiting", P.listen_path);
        event_base_loopexit(P.base, NULL);
        return;
    }
    logf_("engine up again");
}

static void
on_down_timer(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
    set_up();
}

/* Every connection goes; new ones are refused (or closed) for `ms`. */
static void
set_down(long ms)
{
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    struct conn *c;
    unsigned n = 0;

    for (c = P.conns; c != NULL; c = c->next) {
        if (!c->dead) {
            n++;
            P.n.dropped++;
            conn_kill(c);
        }
    }
    if (!P.f.down_close && P.lis != NULL) {
        /* The socket file stays and nobody listens: ECONNREFUSED, as
         * after a crashed dockerd. */
        evconnlistener_free(P.lis);
        P.lis = NULL;
    }
    P.down = true;
    evtimer_add(P.down_timer, &tv);
    logf_("engine down for %ld ms (%s; %u connections closed)", ms,
          P.f.down_close ? "accept and close" : "refused", n);
}

/* ---- the control socket ----------------------------------------------- */

static void
gen_str(yajl_gen g, const char *s)
{
    yajl_gen_string(g, (const unsigned char *)s, strlen(s));
}

static void
gen_int(yajl_gen g, const char *k, long long v)
{
    gen_str(g, k);
    yajl_gen_integer(g, v);
}

/* Killed connections wait for their reap event; they do not count. */
static size_t
live_conns(void)
{
    const struct conn *c;
    size_t n = 0;

    for (c = P.conns; c != NULL; c = c->next)
        n += !c->dead;
    return n;
}

static void
gen_state(yajl_gen g)
{
    int k;

    yajl_gen_map_open(g);
    gen_str(g, "faults");
    yajl_gen_map_open(g);
    gen_str(g, "die_exit_code");
    if (P.f.die_rewrite)
        yajl_gen_integer(g, P.f.die_exit_code);
    else
        yajl_gen_null(g);
    gen_int(g, "del500", (long long)P.f.del500);
    gen_int(g, "del409", (long long)P.f.del409);
    gen_int(g, "cut", (long long)P.f.cut);
    gen_str(g, "cut_on");
    gen_str(g, P.f.cut_on);
    gen_str(g, "down_mode");
    gen_str(g, P.f.down_close ? "close" : "refuse");
    gen_str(g, "delay_only");
    gen_str(g, P.f.delay_only);
    for (k = 0; k < K_NKINDS; k++) {
        char key[32];

        snprintf(key, sizeof(key), "delay_%s", kind_names[k]);
        gen_int(g, key, P.f.delay_ms[k]);
    }
    yajl_gen_map_close(g);
    gen_str(g, "down");
    yajl_gen_bool(g, P.down);
    gen_int(g, "connections", (long long)live_conns());
    gen_str(g, "counters");
    yajl_gen_map_open(g);
    gen_str(g, "requests");
    yajl_gen_map_open(g);
    for (k = 0; k < K_NKINDS; k++)
        gen_int(g, kind_names[k], (long long)P.n.requests[k]);
    yajl_gen_map_close(g);
    gen_int(g, "injected_500", (long long)P.n.injected_500);
    gen_int(g, "injected_409", (long long)P.n.injected_409);
    gen_int(g, "delayed", (long long)P.n.delayed);
    gen_int(g, "events", (long long)P.n.events);
    gen_int(g, "die_rewritten", (long long)P.n.die_rewritten);
    gen_int(g, "cuts", (long long)P.n.cuts);
    gen_int(g, "refused", (long long)P.n.refused);
    gen_int(g, "dropped", (long long)P.n.dropped);
    gen_int(g, "upstream_errors", (long long)P.n.upstream_errors);
    gen_int(g, "client_gone", (long long)P.n.client_gone);
    yajl_gen_map_close(g);
    yajl_gen_map_close(g);
}

static void
ctl_send(struct evhttp_request *req, int code, const char *error)
{
    struct evbuffer *buf = evbuffer_new();
    yajl_gen g = yajl_gen_alloc(NULL);
    const unsigned char *out;
    size_t len;

    if (buf == NULL || g == NULL) {
        evhttp_send_error(req, 500, NULL);
        goto out;
    }
    if (error != NULL) {
        yajl_gen_map_open(g);
        gen_str(g, "error");
        gen_str(g, error);
        yajl_gen_map_close(g);
    } else {
        gen_state(g);
    }
    yajl_gen_get_buf(g, &out, &len);
    evbuffer_add(buf, out, len);
    evbuffer_add(buf, "\n", 1);
    evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
                      "application/json");
    evhttp_send_reply(req, code, code == 200 ? "OK" : "Bad Request", buf);
out:
    if (buf != NULL)
        evbuffer_free(buf);
    if (g != NULL)
        yajl_gen_free(g);
}

static int
num_arg(const char *v, long max, long *out)
{
    uint64_t u;

    if (parse_u64(v, (uint64_t)max, &u) != 0)
        return -1;
    *out = (long)u;
    return 0;
}

/*
 * Applies one query: all of it or, on any bad key or value, none of it.
 * `down` is returned apart since it acts (closes connections) at once.
 */
static int
apply_query(const char *query, struct faults *f, long *down, char *err,
            size_t errlen)
{
    struct evkeyvalq q;
    struct evkeyval *kv;
    int rc = 0;

    TAILQ_INIT(&q);
    if (query != NULL && evhttp_parse_query_str(query, &q) != 0) {
        snprintf(err, errlen, "malformed query");
        return -1;
    }
    /* reset first, wherever it is, so "reset=1&del500=2" means both. */
    TAILQ_FOREACH(kv, &q, next)
    {
        if (strcmp(kv->key, "reset") == 0)
            memset(f, 0, sizeof(*f));
    }
    TAILQ_FOREACH(kv, &q, next)
    {
        const char *k = kv->key, *v = kv->value;
        long n;
        int i;

        if (strcmp(k, "reset") == 0)
            continue;
        if (strcmp(k, "die_exit_code") == 0) {
            char *end;

            if (strcmp(v, "off") == 0) {
                f->die_rewrite = false;
                continue;
            }
            errno = 0;
            n = strtol(v, &end, 10);
            if (*v == '\0' || *end != '\0' || errno != 0 || n < -1000000 ||
                n > 1000000)
                goto bad;
            f->die_rewrite = true;
            f->die_exit_code = n;
        } else if (strcmp(k, "del500") == 0 && num_arg(v, 1000000, &n) == 0) {
            f->del500 = (unsigned long)n;
        } else if (strcmp(k, "del409") == 0 && num_arg(v, 1000000, &n) == 0) {
            f->del409 = (unsigned long)n;
        } else if (strcmp(k, "cut") == 0 && num_arg(v, 1000000, &n) == 0) {
            f->cut = (unsigned long)n;
        } else if (strcmp(k, "delay_only") == 0 &&
                   strlen(v) < sizeof(f->delay_only) &&
                   strspn(v, "0123456789abcdef") == strlen(v)) {
            snprintf(f->delay_only, sizeof(f->delay_only), "%s", v);
        } else if (strcmp(k, "cut_on") == 0 && strlen(v) < sizeof(f->cut_on)) {
            snprintf(f->cut_on, sizeof(f->cut_on), "%s", v);
        } else if (strcmp(k, "down") == 0 && num_arg(v, 3600000, &n) == 0) {
            *down = n;
        } else if (strcmp(k, "down_mode") == 0 &&
                   (strcmp(v, "refuse") == 0 || strcmp(v, "close") == 0)) {
            f->down_close = strcmp(v, "close") == 0;
        } else if (strncmp(k, "delay_", 6) == 0 &&
                   num_arg(v, 3600000, &n) == 0) {
            for (i = 0; i < K_NKINDS; i++)
                if (strcmp(k + 6, kind_names[i]) == 0)
                    break;
            if (i == K_NKINDS)
                goto bad;
            f->delay_ms[i] = n;
        } else {
            goto bad;
        }
        continue;
    bad:
        snprintf(err, errlen, "bad parameter %.40s=%.40s", k, v);
        rc = -1;
        break;
    }
    evhttp_clear_headers(&q);
    return rc;
}

static void
on_ctl(struct evhttp_request *req, void *arg)
{
    const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
    const char *path = uri != NULL ? evhttp_uri_get_path(uri) : NULL;
    const char *query = uri != NULL ? evhttp_uri_get_query(uri) : NULL;
    char err[128];

    (void)arg;
    if (path == NULL) {
        ctl_send(req, 400, "no path");
    } else if (strcmp(path, "/state") == 0) {
        ctl_send(req, 200, NULL);
    } else if (strcmp(path, "/fault") == 0 || strcmp(path, "/reset") == 0) {
        struct faults f = P.f;
        long down = -1;

        if (strcmp(path, "/reset") == 0)
            memset(&f, 0, sizeof(f));
        if (apply_query(query, &f, &down, err, sizeof(err)) != 0) {
            ctl_send(req, 400, err);
            return;
        }
        P.f = f;
        logf_("control: %s%s%s", path, query != NULL ? "?" : "",
              query != NULL ? query : "");
        if (strcmp(path, "/reset") == 0 || down == 0)
            set_up();
        if (down > 0)
            set_down(down);
        ctl_send(req, 200, NULL);
    } else {
        ctl_send(req, 400, "unknown path (use /fault, /reset, /state)");
    }
}

/* ---- main --------------------------------------------------------------- */

static void
on_signal(evutil_socket_t sig, short what, void *arg)
{
    (void)what;
    (void)arg;
    logf_("signal %d: stopping", (int)sig);
    event_base_loopexit(P.base, NULL);
}

static void
usage(FILE *to)
{
    fprintf(to, "usage: faultproxy --listen SOCK --upstream ENGINE_SOCK "
                "--control CTL_SOCK\n"
                "  Proxies HTTP/1.1 from SOCK to ENGINE_SOCK; faults are "
                "switched through CTL_SOCK\n"
                "  (curl --unix-socket CTL_SOCK 'http://x/fault?del500=2'; "
                "see tests/tools/README.md).\n");
}

int
main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"listen", required_argument, NULL, 'l'},
        {"upstream", required_argument, NULL, 'u'},
        {"control", required_argument, NULL, 'c'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    int ch, cfd, rc = 1;

    clock_gettime(CLOCK_MONOTONIC, &P.t0);
    while ((ch = getopt_long(argc, argv, "l:u:c:h", opts, NULL)) != -1) {
        switch (ch) {
        case 'l':
            P.listen_path = optarg;
            break;
        case 'u':
            P.upstream_path = optarg;
            break;
        case 'c':
            P.control_path = optarg;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (P.listen_path == NULL || P.upstream_path == NULL ||
        P.control_path == NULL || optind != argc) {
        usage(stderr);
        return 2;
    }
    if (strlen(P.upstream_path) >= sizeof(P.up_addr.sun_path)) {
        fprintf(stderr, "faultproxy: upstream path too long\n");
        return 2;
    }
    P.up_addr.sun_family = AF_UNIX;
    strcpy(P.up_addr.sun_path, P.upstream_path);
    /* A client that went away must not kill us through a write. */
    signal(SIGPIPE, SIG_IGN);

    P.base = event_base_new();
    if (P.base == NULL)
        return 1;
    P.sigterm = evsignal_new(P.base, SIGTERM, on_signal, NULL);
    P.sigint = evsignal_new(P.base, SIGINT, on_signal, NULL);
    P.down_timer = evtimer_new(P.base, on_down_timer, NULL);
    P.ctl = evhttp_new(P.base);
    if (P.sigterm == NULL || P.sigint == NULL || P.down_timer == NULL ||
        P.ctl == NULL || evsignal_add(P.sigterm, NULL) != 0 ||
        evsignal_add(P.sigint, NULL) != 0)
        goto out;
    evhttp_set_gencb(P.ctl, on_ctl, NULL);
    evhttp_set_max_headers_size(P.ctl, 8192);
    evhttp_set_max_body_size(P.ctl, 4096);
    evhttp_set_timeout(P.ctl, 10);
    evhttp_set_allowed_methods(P.ctl, EVHTTP_REQ_GET | EVHTTP_REQ_POST |
                                          EVHTTP_REQ_PUT);
    cfd = listen_unix(P.control_path);
    if (cfd < 0 || evhttp_accept_socket_with_handle(P.ctl, cfd) == NULL) {
        if (cfd >= 0)
            close(cfd);
        goto out;
    }
    if (start_listening() != 0)
        goto out;

    printf("faultproxy: listening on %s, upstream %s, control %s\n",
           P.listen_path, P.upstream_path, P.control_path);
    printf("ready\n");
    fflush(stdout);
    event_base_dispatch(P.base);
    rc = 0;
out:
    while (P.conns != NULL)
        conn_destroy(P.conns);
    if (P.lis != NULL) {
        evconnlistener_free(P.lis);
        unlink(P.listen_path);
    } else if (P.listen_path != NULL && P.down) {
        unlink(P.listen_path);
    }
    if (P.ctl != NULL) {
        evhttp_free(P.ctl);
        unlink(P.control_path);
    }
    if (P.down_timer != NULL)
        event_free(P.down_timer);
    if (P.sigterm != NULL)
        event_free(P.sigterm);
    if (P.sigint != NULL)
        event_free(P.sigint);
    event_base_free(P.base);
    if (rc == 0)
        logf_("stopped");
    return rc;
}
