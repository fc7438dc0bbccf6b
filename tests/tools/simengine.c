/*
 * simengine — a simulated Docker engine for reapd's benchmarks.
 *
 * It speaks the part of the Engine API reapd uses (version, the events
 * stream with since= replay, the container list, inspect, delete) on a unix
 * socket, for up to a million simulated containers held in memory, and
 * generates load: "noise" events (exec and health-check events, short-lived
 * unmanaged containers) as fast as the reader drains the stream, and exits
 * of managed containers at a set rate, with the engine's delays modelled
 * (inspects held while the task is deleted, the engine's 30 s task-delete
 * timeout that makes the die event say 255, slow and failing deletes, cut
 * streams). It exists so that benchmarks measure reapd, not the engine:
 * event lines are rendered into a reused ring by hand, the list is one
 * buffer, lookups are one hash probe.
 *
 * It generates load; it does not inject faults on demand (faultproxy does,
 * in front of a real engine), and the end-to-end tests use the real engine.
 * Every random choice comes from one small deterministic PRNG (--random),
 * so a run can be repeated. See README.md for the options and endpoints.
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
#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define MAX_CONTAINERS  1000000u
#define MAX_RING        (1u << 18)
#define SLOT            1024 /* one event line; they are < 700 bytes */
#define MAX_STREAMS     64
#define REFILL          (256u << 10) /* noise bytes per refill */
#define MAX_QUEUED      (64u << 20)  /* a stream further behind is cut */
#define BACKLOG         (1u << 20)   /* exits pause while a reader lags */
#define MAX_URI         4096
#define LQ_MAX          256 /* short-lived noise containers at once */
#define LIFE_GAP        512 /* noise events between their lifecycle steps */
#define TICK_MS         10
#define TASK_TIMEOUT_MS 30000 /* the engine gives up deleting a task */
#define MAX_MS          3600000L
#define IMAGE           "sim/app:1"
#define ZERO_TIME       "0001-01-01T00:00:00Z"
#define LABELS_MANAGED                                                        \
    "\"app\":\"sim-app\",\"reapd.managed\":\"true\",\"team\":\"sim\""
#define LABELS_OTHER "\"app\":\"other-app\",\"team\":\"other\""
#define NS           1000000000LL
#define XATTR_EXEC   76 /* "execID":"<64 hex>", */

#define PUT(p, lit)                                                           \
    (memcpy((p), (lit), sizeof(lit) - 1), (p) += sizeof(lit) - 1)
#define EMIT(c, act, x, xlen) emit((c), (act), sizeof(act) - 1, (x), (xlen))

enum cstate { C_FREE, C_CREATED, C_RUNNING, C_EXITING, C_EXITED };

/* An inspect waiting for the container's task deletion, or a DELETE
 * waiting out --delete-ms. */
struct held {
    struct held *next;
    struct evhttp_request *req;
    bool del, force;
};

struct cont {
    char id[65];
    uint8_t state;    /* enum cstate; C_EXITING lists as "running" */
    uint8_t managed;  /* carries reapd.managed=true */
    uint8_t pickable; /* in run[managed]: noise and exits choose it */
    uint8_t code;     /* the true exit code */
    uint8_t die255;   /* the task delete timed out: die says 255 */
    uint32_t hnext;   /* hash chain (slot + 1); the free list when free */
    uint32_t rpos;    /* index in run[managed] */
    uint64_t n;       /* the counter its id and name come from */
    int64_t started, finished; /* CLOCK_REALTIME ns, 0: never */
    struct held *held;
};

struct stream {
    struct evhttp_request *req;
    struct evhttp_connection *conn;
    struct evbuffer *out; /* lines not yet handed to evhttp */
    struct event *kill;   /* closes it on a later loop turn */
    uint64_t sent;
    bool drained, cutting;
};

/* A short-lived unmanaged container of the noise: create, then start,
 * die and destroy LIFE_GAP noise events apart. */
struct life {
    uint64_t n, due; /* due: the noise sequence number of the next step */
    uint32_t slot;
    int step; /* 1 start, 2 die, 3 destroy */
};

struct range {
    long a, b;
};

struct opts {
    const char *socket;
    uint64_t containers, random, noise, exit_count, exit_code, slow_ms,
        cut_every, ring;
    double managed_frac, life_frac, exit_rate, slow_frac, del_fail, del_409;
    struct range task_ms, del_ms;
    bool replace, go;
};

static struct {
    struct opts o;
    struct event_base *base;
    struct evhttp *http;
    struct event *tick;
    uint64_t rnd;
    /* The container table: slots, an id hash, the pickable run lists. */
    struct cont *c;
    uint32_t cap, top, free_head, count, nrunning;
    uint32_t *bucket, bmask;
    uint32_t *run[2], nrun[2];
    uint64_t next_n;
    /* Events: the replay ring and the open streams. */
    char *ring;
    int64_t *ring_nano;
    uint16_t *ring_len;
    uint64_t head;
    int64_t last_nano;
    struct stream *streams[MAX_STREAMS];
    int nstreams, nlive; /* nlive: streams not being cut */
    /* The load. */
    bool go;
    int64_t go_mono, last_tick;
    double owed;
    uint64_t noise_left, noise_seq, lq_steps;
    struct life lq[LQ_MAX];
    unsigned lq_head, lq_n;
    uint32_t cyc_slot;
    uint64_t cyc_n;
    int cyc_pos;
    char xattr[128]; /* "execID":"<64 hex>","exitCode":"0", */
    /* Counters for /sim/stats. */
    uint64_t events_sent, events_generated, stream_cuts, exits, exits_skipped,
        deletes_ok, deletes_failed, deletes_404, lists, inspects,
        inspects_held;
} S;

/* ---- small helpers --------------------------------------------------- */

static uint64_t
mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* splitmix64 */
static uint64_t
rnd64(void)
{
    return mix64(S.rnd += 0x9e3779b97f4a7c15ULL);
}

static double
rnd_unit(void)
{
    return (double)(rnd64() >> 11) * (1.0 / 9007199254740992.0);
}

static long
rnd_range(struct range r)
{
    return r.a + (r.b > r.a ? (long)(rnd64() % (uint64_t)(r.b - r.a + 1)) : 0);
}

static int64_t
clock_ns(clockid_t id)
{
    struct timespec ts;

    clock_gettime(id, &ts);
    return (int64_t)ts.tv_sec * NS + ts.tv_nsec;
}

static char *
put_hex64(char *p, uint64_t v)
{
    static const char hex[] = "0123456789abcdef";
    int i;

    for (i = 0; i < 16; i++)
        p[i] = hex[(v >> (60 - 4 * i)) & 15];
    return p + 16;
}

static char *
put_u64(char *p, uint64_t v)
{
    char t[20];
    int i = 0;

    do
        t[i++] = (char)('0' + v % 10);
    while ((v /= 10) != 0);
    while (i > 0)
        *p++ = t[--i];
    return p;
}

static char *
put(char *p, const char *s, size_t n)
{
    memcpy(p, s, n);
    return p + n;
}

/* RFC 3339 with nanoseconds, trailing zeros trimmed as Go does. */
static char *
put_time(char *p, int64_t ns)
{
    struct tm tm;
    time_t t = (time_t)(ns / NS);
    long frac = (long)(ns % NS);
    int digits = 9;

    if (ns <= 0 || gmtime_r(&t, &tm) == NULL)
        return PUT(p, ZERO_TIME), p;
    p += strftime(p, 24, "%Y-%m-%dT%H:%M:%S", &tm);
    if (frac != 0) {
        while (frac % 10 == 0) {
            frac /= 10;
            digits--;
        }
        *p++ = '.';
        for (int i = digits - 1; i >= 0; i--, frac /= 10)
            p[i] = (char)('0' + frac % 10);
        p += digits;
    }
    *p++ = 'Z';
    return p;
}

/* Distinct counters give distinct ids: mix64 is a bijection. */
static void
id_of(uint64_t n, char id[65])
{
    char *p = put_hex64(id, mix64(n));

    p = put_hex64(p, mix64(n ^ 0x5ca1ab1e5ca1ab1eULL));
    p = put_hex64(p, mix64(n ^ 0x0ddba11c0ffee000ULL));
    put_hex64(p, mix64(n ^ 0xfeedfacecafebeefULL));
    id[64] = '\0';
}

static bool
valid_id(const char *s, size_t len)
{
    size_t i;

    if (len != 64)
        return false;
    for (i = 0; i < 64; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return false;
    return true;
}

static uint32_t
id_bucket(const char *id)
{
    uint64_t h = 0;
    int i;

    for (i = 0; i < 16; i++)
        h = h << 4 | (uint64_t)(id[i] <= '9' ? id[i] - '0' : id[i] - 'a' + 10);
    return (uint32_t)(h ^ h >> 32) & S.bmask;
}

/* ---- the container table --------------------------------------------- */

static int
table_grow(void)
{
    uint32_t ncap = S.cap ? S.cap * 2 : 1024, nb = 1, i;
    void *p;

    if (ncap > MAX_CONTAINERS)
        ncap = MAX_CONTAINERS;
    if (ncap <= S.cap)
        return -1;
    if ((p = realloc(S.c, ncap * sizeof(*S.c))) == NULL)
        return -1;
    S.c = p;
    for (i = 0; i < 2; i++) {
        if ((p = realloc(S.run[i], ncap * sizeof(uint32_t))) == NULL)
            return -1;
        S.run[i] = p;
    }
    while (nb < ncap * 2)
        nb <<= 1;
    if ((p = calloc(nb, sizeof(uint32_t))) == NULL)
        return -1;
    free(S.bucket);
    S.bucket = p;
    S.bmask = nb - 1;
    S.cap = ncap;
    for (i = 0; i < S.top; i++) {
        struct cont *c = &S.c[i];
        uint32_t b;

        if (c->state == C_FREE)
            continue;
        b = id_bucket(c->id);
        c->hnext = S.bucket[b];
        S.bucket[b] = i + 1;
    }
    return 0;
}

static struct cont *
cont_find(const char *id, size_t len)
{
    uint32_t s;

    if (!valid_id(id, len) || S.bucket == NULL)
        return NULL;
    for (s = S.bucket[id_bucket(id)]; s != 0; s = S.c[s - 1].hnext)
        if (memcmp(S.c[s - 1].id, id, 64) == 0)
            return &S.c[s - 1];
    return NULL;
}

static bool
is_running(int state)
{
    return state == C_RUNNING || state == C_EXITING;
}

static void
set_state(struct cont *c, int state)
{
    S.nrunning += is_running(state) - is_running(c->state);
    c->state = (uint8_t)state;
}

static void
list_add(struct cont *c)
{
    int k = c->managed;

    c->rpos = S.nrun[k];
    S.run[k][S.nrun[k]++] = (uint32_t)(c - S.c);
    c->pickable = 1;
}

static void
list_del(struct cont *c)
{
    int k = c->managed;
    uint32_t last = S.run[k][--S.nrun[k]];

    S.run[k][c->rpos] = last;
    S.c[last].rpos = c->rpos;
    c->pickable = 0;
}

/* A new container in state "created". It may move the table: a struct
 * cont pointer taken before is stale afterwards (slots are not). */
static struct cont *
cont_new(bool managed)
{
    struct cont *c;
    uint32_t slot, b;

    if (S.free_head != 0) {
        slot = S.free_head - 1;
        S.free_head = S.c[slot].hnext;
    } else {
        if (S.top == S.cap && table_grow() != 0)
            return NULL;
        slot = S.top++;
    }
    c = &S.c[slot];
    memset(c, 0, sizeof(*c));
    c->n = ++S.next_n;
    c->managed = managed;
    c->state = C_CREATED;
    id_of(c->n, c->id);
    b = id_bucket(c->id);
    c->hnext = S.bucket[b];
    S.bucket[b] = slot + 1;
    S.count++;
    return c;
}

static void
cont_free(struct cont *c)
{
    uint32_t slot = (uint32_t)(c - S.c), *pp = &S.bucket[id_bucket(c->id)];

    while (*pp != slot + 1)
        pp = &S.c[*pp - 1].hnext;
    *pp = c->hnext;
    if (c->pickable)
        list_del(c);
    set_state(c, C_FREE);
    c->hnext = S.free_head;
    S.free_head = slot + 1;
    S.count--;
}

/* ---- answers --------------------------------------------------------- */

static void
reply_json(struct evhttp_request *req, int code)
{
    evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
                      "application/json");
    evhttp_send_reply(req, code, NULL, NULL);
}

/* msg must need no JSON escaping. */
static void
reply_message(struct evhttp_request *req, int code, const char *msg)
{
    evbuffer_add_printf(evhttp_request_get_output_buffer(req),
                        "{\"message\":\"%s\"}", msg);
    reply_json(req, code);
}

/* Echoes the name asked for when it needs no JSON escaping. */
static void
reply_no_such(struct evhttp_request *req, const char *id, size_t len)
{
    static const char safe[] = "0123456789abcdefghijklmnopqrstuvwxyz"
                               "ABCDEFGHIJKLMNOPQRSTUVWXYZ_.-";
    bool ok = len <= 128 && strspn(id, safe) >= len;
    char msg[160];

    snprintf(msg, sizeof(msg), "No such container: %.*s", ok ? (int)len : 1,
             ok ? id : "?");
    reply_message(req, 404, msg);
}

static void
reply_inspect(struct evhttp_request *req, const struct cont *c)
{
    static const char *const words[] = {"removing", "created", "running",
                                        "running", "exited"};
    char st[40], fin[40];
    bool running = is_running(c->state);

    *put_time(st, c->started) = '\0';
    *put_time(fin, running ? 0 : c->finished) = '\0';
    evbuffer_add_printf(
        evhttp_request_get_output_buffer(req),
        "{\"Id\":\"%s\",\"Name\":\"/sim-%llu\",\"RestartCount\":0,"
        "\"State\":{\"Status\":\"%s\",\"Running\":%s,\"Paused\":false,"
        "\"Restarting\":false,\"OOMKilled\":false,\"Dead\":false,"
        "\"Pid\":%d,\"ExitCode\":%d,\"Error\":\"\",\"StartedAt\":\"%s\","
        "\"FinishedAt\":\"%s\"},\"Config\":{\"Image\":\"" IMAGE "\","
        "\"Labels\":{%s}}}",
        c->id, (unsigned long long)c->n, words[c->state],
        running ? "true" : "false", running ? (int)(1000 + c->n % 30000) : 0,
        c->state == C_EXITED ? c->code : 0, st, fin,
        c->managed ? LABELS_MANAGED : LABELS_OTHER);
    reply_json(req, 200);
}

/* ---- events ---------------------------------------------------------- */

static void
stream_cut(struct stream *s)
{
    if (!s->cutting) {
        s->cutting = true;
        S.nlive--;
    }
}

static void
stream_add(struct stream *s, const char *line, size_t len)
{
    evbuffer_add(s->out, line, len);
    S.events_sent++;
    if (++s->sent == S.o.cut_every) /* --cut-every: this one is the last */
        stream_cut(s);
}

static void
deliver(const char *line, size_t len)
{
    int i;

    for (i = 0; i < S.nstreams; i++)
        if (!S.streams[i]->cutting)
            stream_add(S.streams[i], line, len);
}

/* Renders the event into the ring and queues it on every stream; the
 * caller flushes. act and x are our own literals, so a line stays far
 * below SLOT. */
static size_t
emit(const struct cont *c, const char *act, size_t alen, const char *x,
     size_t xlen)
{
    uint64_t i = S.head++ % S.o.ring;
    char *b = S.ring + i * SLOT, *p = b;
    int64_t nano = clock_ns(CLOCK_REALTIME);

    if (nano <= S.last_nano)
        nano = S.last_nano + 1;
    S.last_nano = nano;
    PUT(p, "{\"status\":\"");
    p = put(p, act, alen);
    PUT(p, "\",\"id\":\"");
    p = put(p, c->id, 64);
    PUT(p, "\",\"from\":\"" IMAGE "\",\"Type\":\"container\",\"Action\":\"");
    p = put(p, act, alen);
    PUT(p, "\",\"Actor\":{\"ID\":\"");
    p = put(p, c->id, 64);
    PUT(p, "\",\"Attributes\":{");
    p = put(p, x, xlen);
    PUT(p, "\"image\":\"" IMAGE "\",\"name\":\"sim-");
    p = put_u64(p, c->n);
    PUT(p, "\",");
    if (c->managed)
        PUT(p, LABELS_MANAGED);
    else
        PUT(p, LABELS_OTHER);
    PUT(p, "}},\"scope\":\"local\",\"time\":");
    p = put_u64(p, (uint64_t)(nano / NS));
    PUT(p, ",\"timeNano\":");
    p = put_u64(p, (uint64_t)nano);
    PUT(p, "}\n");
    S.ring_nano[i] = nano;
    S.ring_len[i] = (uint16_t)(p - b);
    S.events_generated++;
    deliver(b, (size_t)(p - b));
    return (size_t)(p - b);
}

static size_t
emit_die(const struct cont *c, int code)
{
    char x[32], *p = x;

    PUT(p, "\"exitCode\":\"");
    p = put_u64(p, (uint64_t)code);
    PUT(p, "\",");
    return EMIT(c, "die", x, (size_t)(p - x));
}

static void pump(void);

static void
on_drained(struct evhttp_connection *conn, void *arg)
{
    struct stream *s = arg;

    (void)conn;
    s->drained = true;
    if (s->cutting)
        event_active(s->kill, EV_TIMEOUT, 1);
    else
        pump();
}

static void
flush_streams(void)
{
    int i;

    for (i = 0; i < S.nstreams; i++) {
        struct stream *s = S.streams[i];
        struct bufferevent *bev = evhttp_connection_get_bufferevent(s->conn);

        if (evbuffer_get_length(s->out) == 0)
            continue;
        if (evbuffer_get_length(bufferevent_get_output(bev)) > MAX_QUEUED) {
            fprintf(stderr,
                    "simengine: an events reader is %u MiB behind: "
                    "cutting its stream\n",
                    MAX_QUEUED >> 20);
            evbuffer_drain(s->out, evbuffer_get_length(s->out));
            stream_cut(s);
            event_active(s->kill, EV_TIMEOUT, 1);
            continue;
        }
        evhttp_send_reply_chunk_with_cb(s->req, s->out, on_drained, s);
        s->drained = false;
    }
}

static void
stream_forget(struct stream *s)
{
    int i;

    for (i = 0; i < S.nstreams; i++)
        if (S.streams[i] == s)
            S.streams[i] = S.streams[--S.nstreams];
    if (!s->cutting)
        S.nlive--;
    event_free(s->kill);
    evbuffer_free(s->out);
    free(s);
}

/* --cut-every, or a reader too far behind: close on a later loop turn. */
static void
on_kill(evutil_socket_t fd, short what, void *arg)
{
    struct stream *s = arg;

    (void)fd;
    (void)what;
    evhttp_connection_set_closecb(s->conn, NULL, NULL);
    evhttp_connection_free(s->conn); /* frees s->req too */
    S.stream_cuts++;
    stream_forget(s);
    pump(); /* the slowest reader may be gone */
}

/* The client left. evhttp has detached the request: it is ours. */
static void
on_stream_close(struct evhttp_connection *conn, void *arg)
{
    struct stream *s = arg;

    (void)conn;
    if (evhttp_request_get_connection(s->req) == NULL)
        evhttp_request_free(s->req);
    stream_forget(s);
    pump();
}

/* ---- load: noise ----------------------------------------------------- */

static size_t
life_start(void)
{
    struct cont *c = cont_new(false);
    struct life *l;

    if (c == NULL) {
        fprintf(stderr, "simengine: container table full: noise stops\n");
        S.noise_left = 0;
        return 0;
    }
    l = &S.lq[(S.lq_head + S.lq_n++) % LQ_MAX];
    l->slot = (uint32_t)(c - S.c);
    l->n = c->n;
    l->step = 1;
    l->due = S.noise_seq + LIFE_GAP;
    S.lq_steps += 3;
    return EMIT(c, "create", "", 0);
}

static size_t
life_step(void)
{
    struct life l = S.lq[S.lq_head];
    struct cont *c = &S.c[l.slot];
    size_t len = 0;

    S.lq_head = (S.lq_head + 1) % LQ_MAX;
    S.lq_n--;
    if (c->state == C_FREE || c->n != l.n) { /* deleted by a client */
        S.lq_steps -= (uint64_t)(4 - l.step);
        return 0;
    }
    S.lq_steps--;
    if (l.step == 1) {
        set_state(c, C_RUNNING);
        c->started = clock_ns(CLOCK_REALTIME);
        len = EMIT(c, "start", "", 0);
    } else if (l.step == 2) {
        set_state(c, C_EXITED);
        c->finished = clock_ns(CLOCK_REALTIME);
        c->code = (uint8_t)(rnd64() % 4);
        len = emit_die(c, c->code);
    } else {
        len = EMIT(c, "destroy", "", 0);
        cont_free(c);
        return len;
    }
    l.step++;
    l.due = S.noise_seq + LIFE_GAP;
    S.lq[(S.lq_head + S.lq_n++) % LQ_MAX] = l;
    return len;
}

/* exec_create, exec_start, exec_die, health_status on one container. */
static size_t
exec_step(void)
{
    struct cont *c = &S.c[S.cyc_slot];
    char *p;

    if (S.cyc_pos != 0 && (c->n != S.cyc_n || !c->pickable))
        S.cyc_pos = 0;
    if (S.cyc_pos == 0) {
        uint32_t k = (uint32_t)(rnd64() % (S.nrun[0] + S.nrun[1]));

        S.cyc_slot = k < S.nrun[0] ? S.run[0][k] : S.run[1][k - S.nrun[0]];
        c = &S.c[S.cyc_slot];
        S.cyc_n = c->n;
        p = S.xattr;
        PUT(p, "\"execID\":\"");
        p = put_hex64(
            put_hex64(put_hex64(put_hex64(p, rnd64()), rnd64()), rnd64()),
            rnd64());
        PUT(p, "\",\"exitCode\":\"0\",");
    }
    switch (S.cyc_pos++) {
    case 0:
        return EMIT(c, "exec_create: sh -c check", S.xattr, XATTR_EXEC);
    case 1:
        return EMIT(c, "exec_start: sh -c check", S.xattr, XATTR_EXEC);
    case 2:
        return EMIT(c, "exec_die", S.xattr, strlen(S.xattr));
    default:
        S.cyc_pos = 0;
        return EMIT(c, "health_status: healthy", "", 0);
    }
}

/* One noise event. Lifecycles start only while the budget still covers
 * their remaining steps, so exactly --noise-events are made (unless no
 * container runs: then a last lifecycle may add up to 3). */
static size_t
noise_step(void)
{
    bool can_exec = S.nrun[0] + S.nrun[1] > 0;
    bool can_start = S.lq_n < LQ_MAX && S.noise_left > 0 &&
                     (S.noise_left >= S.lq_steps + 4 || !can_exec);
    size_t len;

    if (S.lq_n > 0 &&
        (S.noise_left <= S.lq_steps || S.lq[S.lq_head].due <= S.noise_seq ||
         (!can_exec && !can_start)))
        len = life_step();
    else if (can_start && (!can_exec || rnd_unit() < S.o.life_frac))
        len = life_start();
    else
        len = exec_step();
    S.noise_seq++;
    if (len > 0 && S.noise_left > 0)
        S.noise_left--;
    return len;
}

/* Noise goes out when every stream has drained its last batch: as fast
 * as the slowest reader takes it, never piling up in memory. */
static void
pump(void)
{
    size_t bytes = 0;
    int i;

    if (!S.go || (S.noise_left == 0 && S.lq_n == 0) || S.nlive == 0)
        return;
    for (i = 0; i < S.nstreams; i++)
        if (!S.streams[i]->cutting && !S.streams[i]->drained)
            return;
    for (i = 0; i < S.nstreams; i++)
        if (!S.streams[i]->cutting)
            evbuffer_expand(S.streams[i]->out, REFILL + SLOT);
    while ((S.noise_left > 0 || S.lq_n > 0) && S.nlive > 0 && bytes < REFILL)
        bytes += noise_step();
    flush_streams();
}

/* ---- load: exits ----------------------------------------------------- */

/* Answers what waits on c: when it is gone, all with 404; else the
 * inspects, with its state. */
static void
release_held(struct cont *c, bool gone)
{
    struct held **pp = &c->held, *h;

    while ((h = *pp) != NULL) {
        if (h->del && !gone) {
            pp = &h->next;
            continue;
        }
        *pp = h->next;
        if (!gone)
            reply_inspect(h->req, c);
        else
            reply_no_such(h->req, c->id, 64);
        S.deletes_404 += h->del;
        free(h);
    }
}

static void
task_done(struct cont *c)
{
    set_state(c, C_EXITED);
    release_held(c, false);
    emit_die(c, c->die255 ? 255 : c->code);
}

/* Timers carry the container's counter, not a pointer: the container may
 * be gone when they fire (libevent frees pending ones with the base). */
static int
after_ms(long ms, event_callback_fn cb, uint64_t n)
{
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};

    return event_base_once(S.base, -1, EV_TIMEOUT, cb, (void *)(uintptr_t)n,
                           &tv);
}

static struct cont *
cont_by_n(void *arg)
{
    char id[65];

    id_of((uintptr_t)arg, id);
    return cont_find(id, 64);
}

static void
on_task(evutil_socket_t fd, short what, void *arg)
{
    struct cont *c = cont_by_n(arg);

    (void)fd;
    (void)what;
    if (c != NULL && c->state == C_EXITING) {
        task_done(c);
        flush_streams();
    }
}

static void
spawn_managed(void)
{
    struct cont *c = cont_new(true);

    if (c == NULL)
        return;
    EMIT(c, "create", "", 0);
    set_state(c, C_RUNNING);
    c->started = clock_ns(CLOCK_REALTIME);
    EMIT(c, "start", "", 0);
    list_add(c);
}

static void
exit_one(void)
{
    uint32_t slot = S.run[1][rnd64() % S.nrun[1]];
    struct cont *c = &S.c[slot];
    long t = rnd_range(S.o.task_ms);

    list_del(c);
    set_state(c, C_EXITING);
    c->finished = clock_ns(CLOCK_REALTIME);
    c->code = (uint8_t)(S.o.exit_code <= 255 ? S.o.exit_code : rnd64() % 4);
    if (S.o.slow_frac > 0 && rnd_unit() < S.o.slow_frac)
        t = (long)S.o.slow_ms;
    c->die255 = t > TASK_TIMEOUT_MS;
    S.exits++;
    if (t > TASK_TIMEOUT_MS)
        t = TASK_TIMEOUT_MS;
    if (t == 0 || after_ms(t, on_task, c->n) != 0)
        task_done(c);
    if (S.o.replace)
        spawn_managed();
}

/* Exits are an offer: while a reader has not taken BACKLOG bytes, none are
 * made, so a slow client is measured, not buried in a growing backlog. */
static bool
readers_behind(void)
{
    int i;

    for (i = 0; i < S.nstreams; i++) {
        struct stream *s = S.streams[i];

        if (!s->cutting &&
            evbuffer_get_length(bufferevent_get_output(
                evhttp_connection_get_bufferevent(s->conn))) > BACKLOG)
            return true;
    }
    return false;
}

static void
on_tick(evutil_socket_t fd, short what, void *arg)
{
    int64_t now = clock_ns(CLOCK_MONOTONIC);

    (void)fd;
    (void)what;
    (void)arg;
    S.owed += S.o.exit_rate * (double)(now - S.last_tick) / 1e9;
    S.last_tick = now;
    if (S.owed > S.o.exit_rate + 1) { /* no burst after a stall */
        S.exits_skipped += (uint64_t)(S.owed - S.o.exit_rate - 1);
        S.owed = S.o.exit_rate + 1;
    }
    if (readers_behind() && S.owed >= 1) {
        S.exits_skipped += (uint64_t)S.owed;
        S.owed -= (double)(uint64_t)S.owed;
    }
    for (; S.owed >= 1 && S.nrun[1] > 0; S.owed -= 1) {
        if (S.o.exit_count != 0 && S.exits >= S.o.exit_count) {
            event_del(S.tick);
            break;
        }
        exit_one();
    }
    flush_streams();
}

static void
start_load(void)
{
    struct timeval tv = {0, TICK_MS * 1000};

    if (S.go)
        return;
    S.go = true;
    S.go_mono = S.last_tick = clock_ns(CLOCK_MONOTONIC);
    fprintf(stderr, "simengine: load started\n");
    if (S.o.exit_rate > 0)
        evtimer_add(S.tick, &tv);
    pump();
}

/* ---- HTTP ------------------------------------------------------------ */

static char *
put_entry(char *p, const struct cont *c)
{
    PUT(p, "{\"Id\":\"");
    p = put(p, c->id, 64);
    PUT(p, "\",\"Names\":[\"/sim-");
    p = put_u64(p, c->n);
    PUT(p, "\"],\"Image\":\"" IMAGE "\",\"Command\":\"sim\",\"Created\":");
    p = put_u64(p, (uint64_t)(c->started / NS));
    PUT(p, ",\"Labels\":{");
    if (c->managed)
        PUT(p, LABELS_MANAGED);
    else
        PUT(p, LABELS_OTHER);
    if (is_running(c->state)) {
        PUT(p, "},\"State\":\"running\",\"Status\":\"Up\"}");
    } else if (c->state == C_EXITED) {
        PUT(p, "},\"State\":\"exited\",\"Status\":\"Exited (");
        p = put_u64(p, c->code);
        PUT(p, ")\"}");
    } else {
        PUT(p, "},\"State\":\"created\",\"Status\":\"Created\"}");
    }
    return p;
}

static void
do_list(struct evhttp_request *req, const struct evkeyvalq *q)
{
    struct evbuffer *out = evhttp_request_get_output_buffer(req);
    const char *all = evhttp_find_header(q, "all");
    const char *f = evhttp_find_header(q, "filters");
    bool everyone = all != NULL && (!strcmp(all, "1") || !strcmp(all, "true"));
    char blk[64 << 10], *p = blk;
    bool first = true;
    uint32_t i;

    S.lists++;
    *p++ = '[';
    if (f != NULL && strstr(f, "\"id\"") != NULL) {
        /* {"id":["<64 hex>"]}: the first run of 64 hex digits after it */
        const char *s = strstr(f, "\"id\"") + 4;
        struct cont *c = NULL;

        for (; *s != '\0' && c == NULL; s++)
            if (strspn(s, "0123456789abcdef") == 64)
                c = cont_find(s, 64);
        if (c != NULL && (everyone || is_running(c->state)))
            p = put_entry(p, c);
    } else {
        evbuffer_expand(out, (size_t)S.count * 330 + 2);
        for (i = 0; i < S.top; i++) {
            const struct cont *c = &S.c[i];

            if (c->state == C_FREE || (!everyone && !is_running(c->state)))
                continue;
            if (p - blk > (long)sizeof(blk) - SLOT) { /* one buffer, added */
                evbuffer_add(out, blk, (size_t)(p - blk));
                p = blk;
            }
            if (!first)
                *p++ = ',';
            first = false;
            p = put_entry(p, c);
        }
    }
    *p++ = ']';
    evbuffer_add(out, blk, (size_t)(p - blk));
    reply_json(req, 200);
}

static void
open_stream(struct evhttp_request *req, const struct evkeyvalq *q)
{
    const char *since = evhttp_find_header(q, "since");
    int64_t since_nano = -1;
    struct stream *s;

    if (since != NULL) {
        char *end;
        long long sec = strtoll(since, &end, 10);
        long long frac = 0;
        int digits = 0;

        if (*end == '.')
            for (end++; *end >= '0' && *end <= '9'; end++)
                if (digits++ < 9)
                    frac = frac * 10 + (*end - '0');
        if (end == since || *end != '\0' || sec < 0 || sec > 1LL << 40) {
            reply_message(req, 400, "since: expected SECONDS[.NANOSECONDS]");
            return;
        }
        for (; digits < 9; digits++)
            frac *= 10;
        since_nano = sec * NS + frac;
    }
    if (S.nstreams == MAX_STREAMS || (s = calloc(1, sizeof(*s))) == NULL) {
        reply_message(req, 503, "too many event streams");
        return;
    }
    s->out = evbuffer_new();
    s->kill = event_new(S.base, -1, 0, on_kill, s);
    if (s->out == NULL || s->kill == NULL) {
        if (s->out != NULL)
            evbuffer_free(s->out);
        free(s);
        reply_message(req, 503, "out of memory");
        return;
    }
    evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
                      "application/json");
    evhttp_send_reply_start(req, 200, "OK");
    s->req = req;
    s->conn = evhttp_request_get_connection(req);
    evhttp_connection_set_closecb(s->conn, on_stream_close, s);
    /* Endless and mostly one-way: no idle timeout; big writes. */
    bufferevent_set_timeouts(evhttp_connection_get_bufferevent(s->conn), NULL,
                             NULL);
    bufferevent_set_max_single_write(
        evhttp_connection_get_bufferevent(s->conn), 1u << 20);
    S.streams[S.nstreams++] = s;
    S.nlive++;
    if (since_nano >= 0) {
        uint64_t lo = S.head > S.o.ring ? S.head - S.o.ring : 0, hi = S.head;

        if (lo > 0 && since_nano < S.ring_nano[lo % S.o.ring])
            fprintf(stderr, "simengine: since= is older than the ring's "
                            "oldest event: events may be lost (--ring)\n");
        while (lo < hi) { /* the first event at or after since */
            uint64_t mid = lo + (hi - lo) / 2;

            if (S.ring_nano[mid % S.o.ring] < since_nano)
                lo = mid + 1;
            else
                hi = mid;
        }
        for (; lo < S.head && !s->cutting; lo++)
            stream_add(s, S.ring + (lo % S.o.ring) * SLOT,
                       S.ring_len[lo % S.o.ring]);
    }
    s->drained = true;
    flush_streams();
    pump();
}

static void
answer_delete(struct evhttp_request *req, struct cont *c, bool force)
{
    char msg[192];

    if (S.o.del_fail > 0 && rnd_unit() < S.o.del_fail) {
        S.deletes_failed++;
        reply_message(req, 500, "simulated failure");
    } else if (S.o.del_409 > 0 && rnd_unit() < S.o.del_409) {
        S.deletes_failed++;
        snprintf(msg, sizeof(msg),
                 "removal of container %s is already in progress", c->id);
        reply_message(req, 409, msg);
    } else if (is_running(c->state) && !force) {
        S.deletes_failed++;
        snprintf(msg, sizeof(msg),
                 "cannot remove container /sim-%llu: container is running: "
                 "stop the container before removing or force remove",
                 (unsigned long long)c->n);
        reply_message(req, 409, msg);
    } else {
        S.deletes_ok++;
        if (is_running(c->state)) {
            c->finished = clock_ns(CLOCK_REALTIME);
            emit_die(c, 137);
        }
        release_held(c, true);
        EMIT(c, "destroy", "", 0);
        cont_free(c);
        evhttp_send_reply(req, 204, NULL, NULL);
        flush_streams();
    }
}

/* --delete-ms is over for one DELETE waiting on the container. If the
 * container went meanwhile, that DELETE was answered 404 then. */
static void
on_delete_due(evutil_socket_t fd, short what, void *arg)
{
    struct cont *c = cont_by_n(arg);
    struct held **pp, **oldest = NULL, *h;

    (void)fd;
    (void)what;
    if (c == NULL)
        return;
    for (pp = &c->held; *pp != NULL; pp = &(*pp)->next)
        if ((*pp)->del)
            oldest = pp; /* new ones go first: the oldest is last */
    if (oldest == NULL)
        return;
    h = *oldest;
    *oldest = h->next;
    answer_delete(h->req, c, h->force);
    free(h);
}

/* GET /containers/{id}/json, DELETE /containers/{id} */
static void
container_request(struct evhttp_request *req, enum evhttp_cmd_type m,
                  const char *rest, const struct evkeyvalq *q)
{
    const char *slash = strchr(rest, '/'), *f = evhttp_find_header(q, "force");
    size_t len = slash ? (size_t)(slash - rest) : strlen(rest);
    struct cont *c = cont_find(rest, len);
    bool inspect = m == EVHTTP_REQ_GET && slash && !strcmp(slash, "/json");
    bool del = m == EVHTTP_REQ_DELETE && slash == NULL;
    bool force = f != NULL && (!strcmp(f, "1") || !strcmp(f, "true"));
    long ms = del ? rnd_range(S.o.del_ms) : 0;
    struct held *h;

    if (!inspect && !del) {
        reply_message(req, 404, "page not found");
        return;
    }
    S.inspects += inspect;
    if (c == NULL) {
        S.deletes_404 += del;
        reply_no_such(req, rest, len);
        return;
    }
    if ((inspect && c->state != C_EXITING) || (del && ms == 0)) {
        if (inspect)
            reply_inspect(req, c);
        else
            answer_delete(req, c, force);
        return;
    }
    /* Held: an inspect until the task is deleted, a DELETE for ms. */
    h = calloc(1, sizeof(*h));
    if (h == NULL || (del && after_ms(ms, on_delete_due, c->n) != 0)) {
        free(h);
        reply_message(req, 500, "out of memory");
        return;
    }
    h->req = req;
    h->del = del;
    h->force = force;
    h->next = c->held;
    c->held = h;
    S.inspects_held += inspect;
}

static int
stats_json(char *buf, size_t len)
{
    int64_t ms = S.go ? (clock_ns(CLOCK_MONOTONIC) - S.go_mono) / 1000000 : 0;

    return snprintf(
        buf, len,
        "{\"events_sent\":%llu,\"events_generated\":%llu,\"noise_left\":%llu,"
        "\"streams_open\":%d,\"stream_cuts\":%llu,\"containers\":%u,"
        "\"running\":%u,\"exits\":%llu,\"exits_skipped\":%llu,"
        "\"deletes_ok\":%llu,\"deletes_failed\":%llu,\"deletes_404\":%llu,"
        "\"lists\":%llu,"
        "\"inspects\":%llu,\"inspects_held\":%llu,\"started_ms\":%lld}",
        (unsigned long long)S.events_sent,
        (unsigned long long)S.events_generated,
        (unsigned long long)S.noise_left, S.nstreams,
        (unsigned long long)S.stream_cuts, S.count, S.nrunning,
        (unsigned long long)S.exits, (unsigned long long)S.exits_skipped,
        (unsigned long long)S.deletes_ok, (unsigned long long)S.deletes_failed,
        (unsigned long long)S.deletes_404, (unsigned long long)S.lists,
        (unsigned long long)S.inspects, (unsigned long long)S.inspects_held,
        (long long)ms);
}

static void
reply_stats(struct evhttp_request *req)
{
    char buf[1024];

    evbuffer_add(evhttp_request_get_output_buffer(req), buf,
                 (size_t)stats_json(buf, sizeof(buf)));
    reply_json(req, 200);
}

static void
on_request(struct evhttp_request *req, void *arg)
{
    const struct evhttp_uri *u = evhttp_request_get_evhttp_uri(req);
    const char *path = evhttp_uri_get_path(u),
               *query = evhttp_uri_get_query(u);
    enum evhttp_cmd_type m = evhttp_request_get_command(req);
    struct evkeyvalq q;

    (void)arg;
    TAILQ_INIT(&q);
    if (path == NULL || strlen(path) > MAX_URI ||
        (query != NULL && (strlen(query) > MAX_URI ||
                           evhttp_parse_query_str(query, &q) != 0))) {
        reply_message(req, 400, "bad request");
        goto out;
    }
    if (strncmp(path, "/v", 2) == 0 && path[2] >= '0' && path[2] <= '9') {
        path = strchr(path + 1, '/'); /* /v1.41/version -> /version */
        if (path == NULL)
            path = "/";
    }
    if (m == EVHTTP_REQ_GET && strcmp(path, "/version") == 0) {
        evbuffer_add_printf(evhttp_request_get_output_buffer(req),
                            "{\"ApiVersion\":\"1.41\",\"MinAPIVersion\":"
                            "\"1.12\",\"Version\":\"sim\"}");
        reply_json(req, 200);
    } else if (m == EVHTTP_REQ_GET && strcmp(path, "/_ping") == 0) {
        evbuffer_add(evhttp_request_get_output_buffer(req), "OK", 2);
        evhttp_send_reply(req, 200, NULL, NULL);
    } else if (m == EVHTTP_REQ_GET && strcmp(path, "/events") == 0) {
        open_stream(req, &q);
    } else if (m == EVHTTP_REQ_GET && strcmp(path, "/containers/json") == 0) {
        do_list(req, &q);
    } else if (strncmp(path, "/containers/", 12) == 0) {
        container_request(req, m, path + 12, &q);
    } else if (m == EVHTTP_REQ_POST && strcmp(path, "/sim/go") == 0) {
        start_load();
        reply_stats(req);
    } else if (m == EVHTTP_REQ_GET && strcmp(path, "/sim/stats") == 0) {
        reply_stats(req);
    } else {
        reply_message(req, 404, "page not found");
    }
out:
    evhttp_clear_headers(&q);
}

/* ---- the command line ------------------------------------------------ */

enum { O_STR, O_U64, O_NUM, O_RANGE, O_TRUE, O_FALSE };

#define OPT(name, kind, field, max)                                           \
    {                                                                         \
        name, kind, offsetof(struct opts, field), max                         \
    }
static const struct optdef {
    const char *name;
    int kind;
    size_t off; /* in struct opts */
    double max;
} defs[] = {
    OPT("socket", O_STR, socket, 0),
    OPT("containers", O_U64, containers, MAX_CONTAINERS),
    OPT("managed-frac", O_NUM, managed_frac, 1),
    OPT("random", O_U64, random, 1.8e19),
    OPT("noise-events", O_U64, noise, 1e15),
    OPT("noise-lifecycle-frac", O_NUM, life_frac, 1),
    OPT("exit-rate", O_NUM, exit_rate, 1e6),
    OPT("exit-count", O_U64, exit_count, 1e15),
    OPT("exit-code", O_U64, exit_code, 255),
    OPT("task-delete-ms", O_RANGE, task_ms, MAX_MS),
    OPT("slow-frac", O_NUM, slow_frac, 1),
    OPT("slow-ms", O_U64, slow_ms, MAX_MS),
    OPT("replace", O_TRUE, replace, 0),
    OPT("no-replace", O_FALSE, replace, 0),
    OPT("delete-ms", O_RANGE, del_ms, MAX_MS),
    OPT("delete-fail", O_NUM, del_fail, 1),
    OPT("delete-conflict", O_NUM, del_409, 1),
    OPT("cut-every", O_U64, cut_every, 1e15),
    OPT("ring", O_U64, ring, MAX_RING),
    OPT("go", O_TRUE, go, 0),
};
#define NDEFS (sizeof(defs) / sizeof(defs[0]))

/* Numbers are plain decimals (no sign, no hex), within the option's max. */
static int
parse_opt(const struct optdef *d, const char *v, struct opts *o)
{
    void *dst = (char *)o + d->off;
    char *end = (char *)v;
    bool ok = v != NULL && v[0] >= '0' && v[0] <= '9';

    errno = 0;
    switch (d->kind) {
    case O_STR:
        *(const char **)dst = v;
        return strlen(v) < sizeof(((struct sockaddr_un *)0)->sun_path) ? 0
                                                                       : -1;
    case O_TRUE:
    case O_FALSE:
        *(bool *)dst = d->kind == O_TRUE;
        return 0;
    case O_U64:
        *(uint64_t *)dst = strtoull(v, &end, 10);
        ok = ok && (double)*(uint64_t *)dst <= d->max;
        break;
    case O_NUM:
        *(double *)dst = strtod(v, &end);
        ok = ok && *(double *)dst <= d->max;
        break;
    default: { /* O_RANGE: A[:B] */
        struct range *r = dst;

        r->a = r->b = strtol(v, &end, 10);
        if (ok && *end == ':' && end[1] >= '0' && end[1] <= '9')
            r->b = strtol(end + 1, &end, 10);
        ok = ok && r->a <= r->b && r->b <= d->max;
    }
    }
    return ok && *end == '\0' && errno == 0 ? 0 : -1;
}

static void
usage(FILE *to)
{
    fprintf(to, "usage: simengine --socket PATH [--containers N] "
                "[--managed-frac F] [--random N]\n"
                "         [--noise-events K] [--noise-lifecycle-frac P]\n"
                "         [--exit-rate R] [--exit-count M] [--exit-code C] "
                "[--task-delete-ms A[:B]]\n"
                "         [--slow-frac P] [--slow-ms S] [--replace | "
                "--no-replace]\n"
                "         [--delete-ms A[:B]] [--delete-fail P] "
                "[--delete-conflict P]\n"
                "         [--cut-every N] [--ring N] [--go]\n"
                "  A simulated Docker engine for benchmarks on a unix socket; "
                "the load starts\n"
                "  with POST /sim/go (or --go); GET /sim/stats counts. See "
                "tests/tools/README.md.\n");
}

static int
parse_args(int argc, char **argv, struct opts *o)
{
    struct option lo[NDEFS + 2];
    size_t i;
    int ch;

    for (i = 0; i < NDEFS; i++)
        lo[i] = (struct option){defs[i].name,
                                defs[i].kind >= O_TRUE ? no_argument
                                                       : required_argument,
                                NULL, 256 + (int)i};
    lo[NDEFS] = (struct option){"help", no_argument, NULL, 'h'};
    lo[NDEFS + 1] = (struct option){NULL, 0, NULL, 0};
    while ((ch = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
        if (ch == 'h') {
            usage(stdout);
            exit(0);
        }
        if (ch < 256) { /* getopt said why */
            usage(stderr);
            return -1;
        }
        if (parse_opt(&defs[ch - 256], optarg, o) != 0) {
            fprintf(stderr, "simengine: bad value for --%s: %s\n",
                    defs[ch - 256].name, optarg);
            usage(stderr);
            return -1;
        }
    }
    if (o->socket == NULL || optind != argc || o->ring == 0) {
        fprintf(stderr, "simengine: %s\n",
                o->socket == NULL ? "--socket is required"
                : o->ring == 0    ? "--ring must be at least 1"
                                  : "unexpected arguments");
        usage(stderr);
        return -1;
    }
    return 0;
}

/* ---- main ------------------------------------------------------------ */

static void
on_signal(evutil_socket_t sig, short what, void *arg)
{
    (void)sig;
    (void)what;
    (void)arg;
    event_base_loopbreak(S.base);
}

/* Requests we hold that evhttp_free does not: those whose client left. */
static void
free_if_detached(struct evhttp_request *req)
{
    if (evhttp_request_get_connection(req) == NULL)
        evhttp_request_free(req);
}

int
main(int argc, char **argv)
{
    struct event *sigterm = NULL, *sigint = NULL;
    struct evconnlistener *lev;
    struct sockaddr_un sa;
    int64_t now;
    uint64_t i;
    char stats[1024];
    int rc = 1;

    S.o = (struct opts){.managed_frac = 1.0,
                        .life_frac = 0.01,
                        .random = 1,
                        .exit_code = UINT64_MAX, /* random 0..3 */
                        .slow_ms = 35000,
                        .replace = true,
                        .ring = 4096};
    if (parse_args(argc, argv, &S.o) != 0)
        return 2;
    S.rnd = S.o.random;
    S.noise_left = S.o.noise;
    signal(SIGPIPE, SIG_IGN);
    S.ring = malloc(S.o.ring * SLOT);
    S.ring_nano = calloc(S.o.ring, sizeof(*S.ring_nano));
    S.ring_len = calloc(S.o.ring, sizeof(*S.ring_len));
    S.base = event_base_new();
    if (S.ring == NULL || S.ring_nano == NULL || S.ring_len == NULL ||
        S.base == NULL || table_grow() != 0)
        goto out;
    sigterm = evsignal_new(S.base, SIGTERM, on_signal, NULL);
    sigint = evsignal_new(S.base, SIGINT, on_signal, NULL);
    S.tick = event_new(S.base, -1, EV_PERSIST, on_tick, NULL);
    S.http = evhttp_new(S.base);
    if (sigterm == NULL || sigint == NULL || S.tick == NULL ||
        S.http == NULL || evsignal_add(sigterm, NULL) != 0 ||
        evsignal_add(sigint, NULL) != 0)
        goto out;
    /* The containers running at start: no events, they were there. */
    now = clock_ns(CLOCK_REALTIME);
    for (i = 1; i <= S.o.containers; i++) {
        /* exactly F of every 1000, spread out: 619 is prime to 1000 */
        struct cont *c = cont_new(i * 619 % 1000 <
                                  (uint64_t)(S.o.managed_frac * 1000 + 0.5));
        if (c == NULL)
            goto out;
        set_state(c, C_RUNNING);
        c->started = now;
        list_add(c);
    }
    evhttp_set_gencb(S.http, on_request, NULL);
    evhttp_set_allowed_methods(S.http, EVHTTP_REQ_GET | EVHTTP_REQ_POST |
                                           EVHTTP_REQ_DELETE);
    evhttp_set_max_headers_size(S.http, 16 << 10);
    evhttp_set_max_body_size(S.http, 64 << 10);
    memset(&sa, 0, sizeof(sa));
    sa.sun_family = AF_UNIX;
    memcpy(sa.sun_path, S.o.socket, strlen(S.o.socket) + 1);
    unlink(S.o.socket);
    lev = evconnlistener_new_bind(
        S.base, NULL, NULL, LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC,
        1024, (struct sockaddr *)&sa, sizeof(sa));
    if (lev == NULL || evhttp_bind_listener(S.http, lev) == NULL) {
        fprintf(stderr, "simengine: cannot listen on %s: %s\n", S.o.socket,
                strerror(errno));
        if (lev != NULL)
            evconnlistener_free(lev);
        goto out;
    }
    printf("simengine: listening on %s\nready\n", S.o.socket);
    fflush(stdout);
    if (S.o.go)
        start_load();
    event_base_dispatch(S.base);
    stats_json(stats, sizeof(stats));
    printf("%s\n", stats);
    fflush(stdout);
    rc = 0;
out:
    while (S.nstreams > 0) { /* their requests go with evhttp_free */
        struct stream *s = S.streams[0];

        evhttp_connection_set_closecb(s->conn, NULL, NULL);
        stream_forget(s);
    }
    for (i = 0; i < S.top; i++) {
        while (S.c[i].held != NULL) {
            struct held *h = S.c[i].held;

            S.c[i].held = h->next;
            free_if_detached(h->req);
            free(h);
        }
    }
    if (S.http != NULL)
        evhttp_free(S.http);
    if (S.tick != NULL)
        event_free(S.tick);
    if (sigterm != NULL)
        event_free(sigterm);
    if (sigint != NULL)
        event_free(sigint);
    if (S.base != NULL)
        event_base_free(S.base);
    if (rc == 0)
        unlink(S.o.socket);
    free(S.c);
    free(S.bucket);
    free(S.run[0]);
    free(S.run[1]);
    free(S.ring);
    free(S.ring_nano);
    free(S.ring_len);
    return rc;
}
