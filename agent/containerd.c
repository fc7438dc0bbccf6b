/*
 * containerd — the containerd gRPC client; see containerd.h.
 *
 * Every call is one HTTP/2 POST through loop_http(): a framed request
 * message out, a buffered and bounded answer back, the status from the
 * grpc-status trailer (or header, for a trailers-only answer). The events
 * subscription is the same POST left open, its body fed to a grpc_reader
 * frame by frame.
 *
 * containerd's answers are untrusted input: every message is bounded
 * before it is decoded, decoding runs on an allocator with a budget
 * proportional to the input, and every string we keep is copied and
 * checked (ids: non-empty, bounded, printable ASCII) before it is
 * believed. A malformed answer is a failed call with a message.
 */
#include "containerd.h"

#include <event2/event.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "containerd.pb-c.h"
#include "grpc.h"
#include "log.h"
#include "loop.h"
#include "stream.h"

#define LIST_MAX_MSG  (16u << 20) /* Tasks.List: containerd sends no more */
#define UNARY_MAX_MSG (64u << 10) /* Get, Delete answers */
#define EVENT_MAX_MSG (64u << 10) /* one envelope */
#define ID_MAX        128         /* containerd's own limit is 76 */
#define NS_MAX        76
#define WATCH_BASE_MS 250
/* Decoding may allocate this many bytes per input byte (plus a floor):
 * far above what real messages need, far below what a hostile repeated
 * field of empty messages could make protobuf-c allocate. */
#define BUDGET_FACTOR 32
#define BUDGET_FLOOR  (16u << 10)
/*
 * containerd (grpc-go) sends the response headers of Events.Subscribe
 * only with the first event, so a quiet engine gives no sign that the
 * subscription is open. It is taken as open once the call has been in
 * flight this long without failing (containerd registers the subscriber
 * as soon as it reads the request), or at the first event if sooner.
 */
#define SUBSCRIBE_SETTLE_MS 250

#define SVC_TASKS      "containerd.services.tasks.v1.Tasks/"
#define SVC_CONTAINERS "containerd.services.containers.v1.Containers/"
#define SVC_EVENTS     "containerd.services.events.v1.Events/"

static const char *const auto_sockets[] = {
    "/run/containerd/containerd.sock",
    "/var/run/docker/containerd/containerd.sock",
};

/* The topics we subscribe to, and the Any type each one carries. */
static const struct {
    const char *topic;
    const char *type; /* matched as the suffix of Any.type_url */
    enum ctrd_event_kind kind;
} event_kinds[] = {
    {"/tasks/exit", "containerd.events.TaskExit", CTRD_EV_TASK_EXIT},
    {"/tasks/delete", "containerd.events.TaskDelete", CTRD_EV_TASK_DELETE},
};
#define NKINDS (sizeof(event_kinds) / sizeof(event_kinds[0]))

struct ctrd {
    struct loop *l;
    char *socket_cfg; /* "auto" or a path */
    char *socket;     /* resolved; NULL until then */
    char *ns;
    char *ns_header; /* "containerd-namespace: <ns>" */
    long timeout_ms;
    struct ctrd_req *reqs; /* in flight, for ctrd_free */

    /* The events subscription. */
    struct stream *st;
    struct ctrd_watch_cbs cbs;
    void *cbs_arg;
    struct loop_http_call *wcall;
    long wstatus; /* HTTP status of the open call, 0 before headers */
    struct grpc_reader *wreader;
    struct grpc_reader *feeding; /* the reader on the stack, if any */
    struct grpc_reader *doomed;  /* stopped while on the stack */
    struct event *settle;        /* see SUBSCRIBE_SETTLE_MS */
    char werr[128];              /* why the last envelope was refused */
};

enum req_kind { REQ_GET, REQ_LIST, REQ_TASK_DELETE, REQ_CONTAINER_DELETE };

struct ctrd_req {
    struct ctrd *c;
    enum req_kind kind;
    struct loop_http_call *call;
    union {
        ctrd_task_cb task;
        ctrd_list_cb list;
        ctrd_delete_cb del;
        ctrd_done_cb done;
    } cb;
    void *arg;
    struct ctrd_req *prev, *next;
};

/* What a decoder returns: tasks and the strings they point to. */
struct ctrd_decoded {
    struct ctrd_task *tasks;
    size_t n;
    char *arena; /* NUL-terminated copies of every string handed out */
    size_t used, cap;
};

/* ---- a budgeted allocator for protobuf-c ------------------------------ */

struct budget {
    size_t used, limit;
};

/* Each block starts with its size, so free can give the budget back. */
union block_head {
    size_t size;
    max_align_t align;
};

static void *
budget_alloc(void *data, size_t size)
{
    struct budget *b = data;
    union block_head *h;

    if (size > b->limit - b->used ||
        size > SIZE_MAX - sizeof(union block_head))
        return NULL;
    h = malloc(sizeof(*h) + size);
    if (h == NULL)
        return NULL;
    h->size = size;
    b->used += size;
    return h + 1;
}

static void
budget_free(void *data, void *p)
{
    struct budget *b = data;
    union block_head *h;

    if (p == NULL)
        return;
    h = (union block_head *)p - 1;
    b->used -= h->size;
    free(h);
}

static void
budget_init(struct budget *b, ProtobufCAllocator *a, size_t input_len)
{
    b->used = 0;
    b->limit = BUDGET_FLOOR + input_len * BUDGET_FACTOR;
    a->alloc = budget_alloc;
    a->free = budget_free;
    a->allocator_data = b;
}

/* ---- decoding ---------------------------------------------------------- */

static bool
ctrd_id_ok(const uint8_t *s, size_t len, bool may_be_empty)
{
    size_t i;

    if (len == 0)
        return may_be_empty;
    if (len > ID_MAX)
        return false;
    for (i = 0; i < len; i++)
        if (s[i] < 0x21 || s[i] > 0x7e)
            return false;
    return true;
}

static bool
valid_cstr_id(const char *s)
{
    return s != NULL && ctrd_id_ok((const uint8_t *)s, strlen(s), false);
}

static struct ctrd_decoded *
decoded_new(size_t ntasks, size_t arena)
{
    struct ctrd_decoded *d = calloc(1, sizeof(*d));

    if (d == NULL)
        return NULL;
    d->tasks = calloc(ntasks ? ntasks : 1, sizeof(*d->tasks));
    d->arena = malloc(arena ? arena : 1);
    d->cap = arena;
    if (d->tasks == NULL || d->arena == NULL) {
        ctrd_decoded_free(d);
        return NULL;
    }
    return d;
}

void
ctrd_decoded_free(struct ctrd_decoded *d)
{
    if (d == NULL)
        return;
    free(d->tasks);
    free(d->arena);
    free(d);
}

/* A NUL-terminated copy of an id in the arena (sized beforehand), or NULL
 * when it is not a valid id. */
static const char *
take_id(struct ctrd_decoded *d, const ProtobufCBinaryData *b,
        bool may_be_empty)
{
    char *s;

    if (!ctrd_id_ok(b->data, b->len, may_be_empty) ||
        b->len + 1 > d->cap - d->used)
        return NULL;
    s = d->arena + d->used;
    if (b->len > 0)
        memcpy(s, b->data, b->len);
    s[b->len] = '\0';
    d->used += b->len + 1;
    return s;
}

/* Nanoseconds since the epoch; 0 for unset, Go's zero time (what
 * containerd sends for a task that has not exited), or nonsense. */
static int64_t
timestamp_ns(const Reapd__Ctrd__Timestamp *t)
{
    if (t == NULL || t->seconds <= 0 || t->nanos < 0 || t->nanos > 999999999 ||
        t->seconds > INT64_MAX / 1000000000 - 1)
        return 0;
    return t->seconds * 1000000000 + t->nanos;
}

static enum ctrd_task_status
task_status(int v)
{
    switch (v) {
    case REAPD__CTRD__TASK_STATUS__CREATED:
        return CTRD_TASK_CREATED;
    case REAPD__CTRD__TASK_STATUS__RUNNING:
        return CTRD_TASK_RUNNING;
    case REAPD__CTRD__TASK_STATUS__STOPPED:
        return CTRD_TASK_STOPPED;
    case REAPD__CTRD__TASK_STATUS__PAUSED:
        return CTRD_TASK_PAUSED;
    case REAPD__CTRD__TASK_STATUS__PAUSING:
        return CTRD_TASK_PAUSING;
    default:
        return CTRD_TASK_UNKNOWN;
    }
}

/*
 * containerd 1.6 leaves Process.container_id empty in Get and List
 * answers (seen in tests/fixtures/containerd/tasks-list-1.6.20.bin): the
 * task is the container's init process, whose id is the container's id,
 * so that id stands in. One of the two must be there.
 */
static int
take_process(struct ctrd_decoded *d, const Reapd__Ctrd__Process *p,
             struct ctrd_task *t)
{
    t->id = take_id(d, &p->id, true);
    if (p->container_id.len > 0)
        t->container_id = take_id(d, &p->container_id, false);
    else
        t->container_id = t->id != NULL && t->id[0] != '\0' ? t->id : NULL;
    if (t->container_id == NULL || t->id == NULL)
        return -1;
    t->pid = p->pid;
    t->status = task_status((int)p->status);
    t->exit_status = p->exit_status;
    t->exited_at_ns = timestamp_ns(p->exited_at);
    return 0;
}

static size_t
process_strings(const Reapd__Ctrd__Process *p)
{
    return p->container_id.len + 1 + p->id.len + 1;
}

int
ctrd_decode_list(const uint8_t *msg, size_t len, struct ctrd_decoded **ctx,
                 const struct ctrd_task **tasks, size_t *n)
{
    ProtobufCAllocator a;
    struct budget b;
    Reapd__Ctrd__ListTasksResponse *m = NULL;
    struct ctrd_decoded *d = NULL;
    size_t i, arena = 0;
    int result = -1;

    *ctx = NULL;
    *tasks = NULL;
    *n = 0;
    if (len > LIST_MAX_MSG)
        goto out;
    budget_init(&b, &a, len);
    m = reapd__ctrd__list_tasks_response__unpack(&a, len, msg);
    if (m == NULL)
        goto out;
    for (i = 0; i < m->n_tasks; i++)
        arena += process_strings(m->tasks[i]);
    d = decoded_new(m->n_tasks, arena);
    if (d == NULL)
        goto out;
    /* One bad entry fails the whole list: a task left out would look
     * deleted to the caller. */
    for (i = 0; i < m->n_tasks; i++)
        if (take_process(d, m->tasks[i], &d->tasks[i]) != 0)
            goto out;
    d->n = m->n_tasks;
    *ctx = d;
    *tasks = d->tasks;
    *n = d->n;
    d = NULL;
    result = 0;
out:
    if (m != NULL)
        reapd__ctrd__list_tasks_response__free_unpacked(m, &a);
    ctrd_decoded_free(d);
    return result;
}

int
ctrd_decode_get(const uint8_t *msg, size_t len, struct ctrd_decoded **ctx,
                const struct ctrd_task **task)
{
    ProtobufCAllocator a;
    struct budget b;
    Reapd__Ctrd__GetResponse *m = NULL;
    struct ctrd_decoded *d = NULL;
    int result = -1;

    *ctx = NULL;
    *task = NULL;
    if (len > UNARY_MAX_MSG)
        goto out;
    budget_init(&b, &a, len);
    m = reapd__ctrd__get_response__unpack(&a, len, msg);
    if (m == NULL || m->process == NULL)
        goto out;
    d = decoded_new(1, process_strings(m->process));
    if (d == NULL || take_process(d, m->process, &d->tasks[0]) != 0)
        goto out;
    d->n = 1;
    *ctx = d;
    *task = d->tasks;
    d = NULL;
    result = 0;
out:
    if (m != NULL)
        reapd__ctrd__get_response__free_unpacked(m, &a);
    ctrd_decoded_free(d);
    return result;
}

/* Tasks.Delete's answer: the exit status it collected. 0 or -1. */
static int
decode_delete(const uint8_t *msg, size_t len, uint32_t *exit_status)
{
    ProtobufCAllocator a;
    struct budget b;
    Reapd__Ctrd__DeleteResponse *m;

    budget_init(&b, &a, len);
    m = reapd__ctrd__delete_response__unpack(&a, len, msg);
    if (m == NULL)
        return -1;
    *exit_status = m->exit_status;
    reapd__ctrd__delete_response__free_unpacked(m, &a);
    return 0;
}

/* Does Any.type_url name `type`? Either exactly, or as the last part of
 * a URL ("type.googleapis.com/containerd.events.TaskExit"). */
static bool
type_is(const ProtobufCBinaryData *url, const char *type)
{
    size_t n = strlen(type);

    if (url->len < n || memcmp(url->data + url->len - n, type, n) != 0)
        return false;
    return url->len == n || url->data[url->len - n - 1] == '/';
}

/* Fills `ev` from the Any payload of an envelope of a known kind. */
static int
decode_payload(enum ctrd_event_kind kind, const ProtobufCBinaryData *v,
               struct ctrd_decoded *d, struct ctrd_event *ev)
{
    ProtobufCAllocator a;
    struct budget b;
    int result = -1;

    budget_init(&b, &a, v->len);
    ev->kind = kind;
    switch (kind) {
    case CTRD_EV_TASK_EXIT: {
        Reapd__Ctrd__TaskExit *m;

        m = reapd__ctrd__task_exit__unpack(&a, v->len, v->data);
        if (m == NULL)
            break;
        ev->container_id = take_id(d, &m->container_id, false);
        ev->id = take_id(d, &m->id, true);
        ev->pid = m->pid;
        ev->exit_status = m->exit_status;
        ev->exited_at_ns = timestamp_ns(m->exited_at);
        reapd__ctrd__task_exit__free_unpacked(m, &a);
        result = 0;
        break;
    }
    case CTRD_EV_TASK_DELETE: {
        Reapd__Ctrd__TaskDelete *m;

        m = reapd__ctrd__task_delete__unpack(&a, v->len, v->data);
        if (m == NULL)
            break;
        ev->container_id = take_id(d, &m->container_id, false);
        ev->id = take_id(d, &m->id, true);
        ev->pid = m->pid;
        ev->exit_status = m->exit_status;
        ev->exited_at_ns = timestamp_ns(m->exited_at);
        reapd__ctrd__task_delete__free_unpacked(m, &a);
        result = 0;
        break;
    }
    }
    if (ev->container_id == NULL || ev->id == NULL)
        result = -1;
    return result;
}

int
ctrd_decode_envelope(const uint8_t *msg, size_t len, struct ctrd_decoded **ctx,
                     struct ctrd_event *ev)
{
    ProtobufCAllocator a;
    struct budget b;
    Reapd__Ctrd__Envelope *m = NULL;
    struct ctrd_decoded *d = NULL;
    size_t i;
    int result = -1;

    *ctx = NULL;
    memset(ev, 0, sizeof(*ev));
    if (len > EVENT_MAX_MSG)
        goto out;
    budget_init(&b, &a, len);
    m = reapd__ctrd__envelope__unpack(&a, len, msg);
    if (m == NULL || m->event == NULL)
        goto out;
    for (i = 0; i < NKINDS; i++)
        if (type_is(&m->event->type_url, event_kinds[i].type))
            break;
    if (i == NKINDS) {
        result = 1; /* not one we act on */
        goto out;
    }
    /* The payload is smaller than the envelope holding it: `len` bytes
     * cover all its strings plus their terminators. */
    d = decoded_new(0, len + 2);
    if (d == NULL ||
        decode_payload(event_kinds[i].kind, &m->event->value, d, ev) != 0)
        goto out;
    ev->timestamp_ns = timestamp_ns(m->timestamp);
    *ctx = d;
    d = NULL;
    result = 0;
out:
    if (m != NULL)
        reapd__ctrd__envelope__free_unpacked(m, &a);
    ctrd_decoded_free(d);
    if (result != 0)
        memset(ev, 0, sizeof(*ev));
    return result;
}

/* ---- requests ---------------------------------------------------------- */

/* The socket to use, resolved at first use; NULL when "auto" finds none
 * yet (tried again at the next use: containerd may start later). */
static const char *
resolve_socket(struct ctrd *c)
{
    size_t i;

    if (c->socket != NULL)
        return c->socket;
    if (strcmp(c->socket_cfg, "auto") != 0) {
        c->socket = strdup(c->socket_cfg);
        return c->socket;
    }
    for (i = 0; i < sizeof(auto_sockets) / sizeof(auto_sockets[0]); i++) {
        if (access(auto_sockets[i], F_OK) == 0) {
            c->socket = strdup(auto_sockets[i]);
            if (c->socket != NULL)
                log_info(NULL, "containerd: using %s", c->socket);
            return c->socket;
        }
    }
    return NULL;
}

/*
 * Starts one gRPC call: POST of the framed `body` to `method`. Returns the
 * loop's call, or NULL. `timeout_ms` 0: none. The body is copied.
 * (Connection reuse is loop.c's business: it avoids it where libcurl's
 * HTTP/2 reuse is broken.)
 */
static struct loop_http_call *
start_call(struct ctrd *c, const char *method, const uint8_t *body,
           size_t body_len, size_t max_msg, long timeout_ms,
           loop_http_headers_cb on_headers, loop_http_data_cb on_data,
           loop_http_done_cb on_done, void *arg)
{
    const char *headers[3];
    struct loop_http_req hr;
    struct loop_http_call *call = NULL;
    const char *sock;
    uint8_t *frame = NULL;
    size_t frame_len = 0;
    char url[160];

    sock = resolve_socket(c);
    if (sock == NULL)
        goto out;
    frame = grpc_frame(body, body_len, &frame_len);
    if (frame == NULL)
        goto out;
    snprintf(url, sizeof(url), "http://containerd/%s", method);
    headers[0] = "content-type: application/grpc";
    headers[1] = "te: trailers";
    headers[2] = c->ns_header;
    memset(&hr, 0, sizeof(hr));
    hr.method = "POST";
    hr.url = url;
    hr.unix_socket = sock;
    hr.body = (const char *)frame;
    hr.body_len = frame_len;
    hr.headers = headers;
    hr.nheaders = 3;
    hr.timeout_ms = timeout_ms;
    hr.connect_timeout_ms = c->timeout_ms;
    hr.max_body = max_msg + 5;
    hr.http2_prior_knowledge = 1;
    /* Only the events subscription runs without a deadline. */
    hr.stream = timeout_ms == 0;
    call = loop_http(c->l, &hr, on_headers, on_data, on_done, arg);
out:
    free(frame);
    return call;
}

/*
 * The outcome of a finished unary call: CTRD_OK with the one answer
 * message in `*msg` (borrowed from `res`), or an error and why in `why`.
 */
static enum ctrd_status
unary_result(const struct loop_http_resp *res, const char *what,
             size_t max_msg, const uint8_t **msg, size_t *msg_len, char *why,
             size_t whylen)
{
    char gmsg[256];
    int code;

    why[0] = '\0';
    if (res->error == HTTPC_ERR_TOO_LARGE) {
        snprintf(why, whylen, "%s: answer over %zu bytes", what, max_msg);
        return CTRD_FAILED;
    }
    if (res->error != HTTPC_OK) {
        snprintf(why, whylen, "%s: %s", what,
                 res->errmsg ? res->errmsg : "transfer failed");
        return CTRD_FAILED;
    }
    if (res->status != 200) {
        snprintf(why, whylen, "%s: HTTP %ld", what, res->status);
        return CTRD_FAILED;
    }
    /* Trailers normally; headers for a trailers-only answer (errors):
     * loop.c keeps both in header_lines. */
    code =
        grpc_status(loop_http_header(res, "grpc-status"),
                    loop_http_header(res, "grpc-message"), gmsg, sizeof(gmsg));
    if (code < 0) {
        snprintf(why, whylen, "%s: no grpc-status (call cut short)", what);
        return CTRD_FAILED;
    }
    if (code != GRPC_OK) {
        snprintf(why, whylen, "%s: grpc-status %d%s%s", what, code,
                 gmsg[0] ? ": " : "", gmsg);
        return code == GRPC_NOT_FOUND ? CTRD_NOT_FOUND : CTRD_FAILED;
    }
    if (grpc_unframe((const uint8_t *)res->body, res->body_len, max_msg, msg,
                     msg_len) != 0) {
        snprintf(why, whylen, "%s: answer is not one gRPC message", what);
        return CTRD_FAILED;
    }
    return CTRD_OK;
}

static void
ctrd_req_unlink(struct ctrd_req *r)
{
    if (r->prev != NULL)
        r->prev->next = r->next;
    else
        r->c->reqs = r->next;
    if (r->next != NULL)
        r->next->prev = r->prev;
}

static const char *const req_names[] = {
    [REQ_GET] = "containerd Tasks.Get",
    [REQ_LIST] = "containerd Tasks.List",
    [REQ_TASK_DELETE] = "containerd Tasks.Delete",
    [REQ_CONTAINER_DELETE] = "containerd Containers.Delete",
};

static void
ctrd_req_done(const struct loop_http_resp *res, void *arg)
{
    struct ctrd_req *r = arg;
    const char *what = req_names[r->kind];
    struct ctrd_decoded *d = NULL;
    const struct ctrd_task *ts = NULL;
    const uint8_t *msg = NULL;
    size_t n = 0, msg_len = 0;
    uint32_t exit_status = 0;
    enum ctrd_status st;
    char why[384];

    r->call = NULL;
    ctrd_req_unlink(r);
    st = unary_result(res, what,
                      r->kind == REQ_LIST ? LIST_MAX_MSG : UNARY_MAX_MSG, &msg,
                      &msg_len, why, sizeof(why));
    switch (r->kind) {
    case REQ_GET:
        if (st == CTRD_OK && ctrd_decode_get(msg, msg_len, &d, &ts) != 0) {
            st = CTRD_FAILED;
            snprintf(why, sizeof(why), "%s: malformed answer", what);
        }
        r->cb.task(st, st == CTRD_OK ? ts : NULL, why, r->arg);
        break;
    case REQ_LIST:
        if (st == CTRD_OK &&
            ctrd_decode_list(msg, msg_len, &d, &ts, &n) != 0) {
            st = CTRD_FAILED;
            snprintf(why, sizeof(why), "%s: malformed answer", what);
        }
        r->cb.list(st, st == CTRD_OK ? ts : NULL, st == CTRD_OK ? n : 0, why,
                   r->arg);
        break;
    case REQ_TASK_DELETE:
        if (st == CTRD_OK && decode_delete(msg, msg_len, &exit_status) != 0) {
            st = CTRD_FAILED;
            snprintf(why, sizeof(why), "%s: malformed answer", what);
        }
        r->cb.del(st, exit_status, why, r->arg);
        break;
    case REQ_CONTAINER_DELETE:
        /* google.protobuf.Empty: nothing to read. */
        r->cb.done(st, why, r->arg);
        break;
    }
    ctrd_decoded_free(d);
    free(r);
}

/* Packs `m` with protobuf-c's generic packer into a new buffer. */
static uint8_t *
pack(const ProtobufCMessage *m, size_t *len)
{
    size_t n = protobuf_c_message_get_packed_size(m);
    uint8_t *buf = malloc(n ? n : 1);

    if (buf == NULL)
        return NULL;
    *len = protobuf_c_message_pack(m, buf);
    return buf;
}

static struct ctrd_req *
ctrd_start_req(struct ctrd *c, enum req_kind kind, const char *method,
               const ProtobufCMessage *m, void *cb, void *arg)
{
    struct ctrd_req *r = NULL, *result = NULL;
    uint8_t *body = NULL;
    size_t body_len = 0, max_msg;
    long timeout;

    r = calloc(1, sizeof(*r));
    body = pack(m, &body_len);
    if (r == NULL || body == NULL)
        goto out;
    r->c = c;
    r->kind = kind;
    r->arg = arg;
    switch (kind) {
    case REQ_GET:
        r->cb.task = (ctrd_task_cb)cb;
        break;
    case REQ_LIST:
        r->cb.list = (ctrd_list_cb)cb;
        break;
    case REQ_TASK_DELETE:
        r->cb.del = (ctrd_delete_cb)cb;
        break;
    case REQ_CONTAINER_DELETE:
        r->cb.done = (ctrd_done_cb)cb;
        break;
    }
    max_msg = kind == REQ_LIST ? LIST_MAX_MSG : UNARY_MAX_MSG;
    /* A task delete waits on the runtime; see containerd.h. */
    timeout = kind == REQ_TASK_DELETE ? 0 : c->timeout_ms;
    r->call = start_call(c, method, body, body_len, max_msg, timeout, NULL,
                         NULL, ctrd_req_done, r);
    if (r->call == NULL)
        goto out;
    r->next = c->reqs;
    if (c->reqs != NULL)
        c->reqs->prev = r;
    c->reqs = r;
    result = r;
    r = NULL;
out:
    free(r);
    free(body);
    return result;
}

struct ctrd_req *
ctrd_task_get(struct ctrd *c, const char *container_id, ctrd_task_cb cb,
              void *arg)
{
    Reapd__Ctrd__GetRequest m = REAPD__CTRD__GET_REQUEST__INIT;

    if (!valid_cstr_id(container_id))
        return NULL;
    /* exec_id stays "": the init process, i.e. the container's task. */
    m.container_id = (char *)container_id;
    return ctrd_start_req(c, REQ_GET, SVC_TASKS "Get", &m.base, (void *)cb,
                          arg);
}

struct ctrd_req *
ctrd_task_list(struct ctrd *c, ctrd_list_cb cb, void *arg)
{
    Reapd__Ctrd__ListTasksRequest m = REAPD__CTRD__LIST_TASKS_REQUEST__INIT;

    return ctrd_start_req(c, REQ_LIST, SVC_TASKS "List", &m.base, (void *)cb,
                          arg);
}

struct ctrd_req *
ctrd_task_delete(struct ctrd *c, const char *container_id, ctrd_delete_cb cb,
                 void *arg)
{
    Reapd__Ctrd__DeleteTaskRequest m = REAPD__CTRD__DELETE_TASK_REQUEST__INIT;

    if (!valid_cstr_id(container_id))
        return NULL;
    m.container_id = (char *)container_id;
    return ctrd_start_req(c, REQ_TASK_DELETE, SVC_TASKS "Delete", &m.base,
                          (void *)cb, arg);
}

struct ctrd_req *
ctrd_container_delete(struct ctrd *c, const char *id, ctrd_done_cb cb,
                      void *arg)
{
    Reapd__Ctrd__DeleteContainerRequest m =
        REAPD__CTRD__DELETE_CONTAINER_REQUEST__INIT;

    if (!valid_cstr_id(id))
        return NULL;
    m.id = (char *)id;
    return ctrd_start_req(c, REQ_CONTAINER_DELETE, SVC_CONTAINERS "Delete",
                          &m.base, (void *)cb, arg);
}

void
ctrd_cancel(struct ctrd_req *r)
{
    if (r == NULL)
        return;
    loop_http_cancel(r->call);
    ctrd_req_unlink(r);
    free(r);
}

/* ---- the events subscription ------------------------------------------ */

/* Drops the stream's reader; deferred when we are inside its feed. */
static void
drop_reader(struct ctrd *c)
{
    if (c->wreader == NULL)
        return;
    if (c->wreader == c->feeding)
        c->doomed = c->wreader;
    else
        grpc_reader_free(c->wreader);
    c->wreader = NULL;
}

static void
ctrd_watch_retry(struct ctrd *c, const char *why)
{
    drop_reader(c);
    evtimer_del(c->settle);
    c->wcall = NULL;
    c->wstatus = 0;
    stream_failed(c->st, why);
}

static void
ctrd_on_stream_lost(const char *why, uint64_t retry_ms, void *arg)
{
    struct ctrd *c = arg;

    if (c->cbs.on_lost != NULL)
        c->cbs.on_lost(why, retry_ms, c->cbs_arg);
}

/* The subscription is open: say so once per connection. */
static void
announce(struct ctrd *c)
{
    if (stream_phase(c->st) != STREAM_CONNECTING)
        return;
    evtimer_del(c->settle);
    stream_opened(c->st);
    if (c->cbs.on_subscribed != NULL)
        c->cbs.on_subscribed(c->cbs_arg);
}

static void
on_settle(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    announce(arg);
}

static int
on_watch_msg(const uint8_t *msg, size_t len, void *arg)
{
    struct ctrd *c = arg;
    struct ctrd_decoded *d = NULL;
    struct ctrd_event ev;
    int rc;

    if (c->wreader != c->feeding)
        return 1; /* stopped from a callback: no more events */
    rc = ctrd_decode_envelope(msg, len, &d, &ev);
    if (rc < 0) {
        snprintf(c->werr, sizeof(c->werr), "malformed envelope (%zu bytes)",
                 len);
        return 1;
    }
    if (rc == 0 && c->cbs.on_event != NULL)
        c->cbs.on_event(&ev, c->cbs_arg);
    ctrd_decoded_free(d);
    return 0;
}

static void
on_sub_headers(long status, void *arg)
{
    struct ctrd *c = arg;

    c->wstatus = status;
}

static int
on_sub_data(const char *buf, size_t len, void *arg)
{
    struct ctrd *c = arg;
    struct grpc_reader *r = c->wreader;
    int rc = 0;

    if (c->wstatus != 200 || r == NULL)
        return 0; /* an error body; on_done reports the status */
    c->feeding = r;
    announce(c); /* a frame is arriving: the stream is certainly open */
    if (c->wreader == r)
        rc = grpc_reader_feed(r, (const uint8_t *)buf, len);
    c->feeding = NULL;
    if (c->doomed != NULL) {
        /* Stopped from one of our callbacks: the call is cancelled. */
        grpc_reader_free(c->doomed);
        c->doomed = NULL;
        return -1;
    }
    if (rc != 0) {
        log_error(NULL, "containerd events: %s; resubscribing",
                  c->werr[0] ? c->werr : grpc_reader_error(r));
        return -1;
    }
    return 0;
}

static void
on_sub_done(const struct loop_http_resp *res, void *arg)
{
    struct ctrd *c = arg;
    const char *gs = loop_http_header(res, "grpc-status");
    char why[384], gmsg[200];
    int code;

    c->wcall = NULL;
    code = grpc_status(gs, loop_http_header(res, "grpc-message"), gmsg,
                       sizeof(gmsg));
    if (res->error == HTTPC_ERR_ABORTED && c->werr[0] != '\0')
        snprintf(why, sizeof(why), "containerd events: %s", c->werr);
    else if (res->error == HTTPC_ERR_ABORTED && c->wreader != NULL &&
             grpc_reader_error(c->wreader) != NULL)
        snprintf(why, sizeof(why), "containerd events: %s",
                 grpc_reader_error(c->wreader));
    else if (res->error != HTTPC_OK)
        snprintf(why, sizeof(why), "containerd events: %s",
                 res->errmsg ? res->errmsg : "transfer failed");
    else if (res->status != 200)
        snprintf(why, sizeof(why), "containerd events: HTTP %ld", res->status);
    else if (code > 0)
        snprintf(why, sizeof(why), "containerd events: grpc-status %d%s%s",
                 code, gmsg[0] ? ": " : "", gmsg);
    else if (c->wreader != NULL && grpc_reader_pending(c->wreader) > 0)
        snprintf(why, sizeof(why),
                 "containerd events: stream cut mid-frame (%zu bytes "
                 "dropped)",
                 grpc_reader_pending(c->wreader));
    else
        snprintf(why, sizeof(why),
                 "containerd events: stream closed by containerd");
    ctrd_watch_retry(c, why);
}

/* The SubscribeRequest: one filter per topic, each AND-ed with our
 * namespace (containerd OR-s the filters, and by default sends every
 * namespace's events). */
static uint8_t *
subscribe_body(const struct ctrd *c, size_t *len)
{
    Reapd__Ctrd__SubscribeRequest m = REAPD__CTRD__SUBSCRIBE_REQUEST__INIT;
    char filters[NKINDS][160];
    char *fp[NKINDS];
    size_t i;

    for (i = 0; i < NKINDS; i++) {
        snprintf(filters[i], sizeof(filters[i]),
                 "namespace==\"%s\",topic==\"%s\"", c->ns,
                 event_kinds[i].topic);
        fp[i] = filters[i];
    }
    m.n_filters = NKINDS;
    m.filters = fp;
    return pack(&m.base, len);
}

static void
ctrd_watch_connect(void *arg)
{
    struct ctrd *c = arg;
    uint8_t *body = NULL;
    size_t body_len = 0;
    const char *why = NULL;

    c->werr[0] = '\0';
    c->wstatus = 0;
    if (resolve_socket(c) == NULL) {
        why = "containerd events: no containerd socket found";
        goto out;
    }
    c->wreader = grpc_reader_new(EVENT_MAX_MSG, on_watch_msg, c);
    body = subscribe_body(c, &body_len);
    if (c->wreader == NULL || body == NULL) {
        why = "containerd events: out of memory";
        goto out;
    }
    stream_connecting(c->st);
    c->wcall =
        start_call(c, SVC_EVENTS "Subscribe", body, body_len, EVENT_MAX_MSG, 0,
                   on_sub_headers, on_sub_data, on_sub_done, c);
    if (c->wcall == NULL) {
        why = "containerd events: could not start the request";
        goto out;
    }
    loop_timer_ms(c->settle, SUBSCRIBE_SETTLE_MS);
out:
    free(body);
    if (why != NULL)
        ctrd_watch_retry(c, why);
}

int
ctrd_watch_start(struct ctrd *c, const struct ctrd_watch_cbs *cbs, void *arg)
{
    if (stream_phase(c->st) != STREAM_IDLE)
        return 0;
    c->cbs = *cbs;
    c->cbs_arg = arg;
    stream_start(c->st);
    return 0;
}

void
ctrd_watch_stop(struct ctrd *c)
{
    stream_stop(c->st);
    evtimer_del(c->settle);
    if (c->wcall != NULL) {
        loop_http_cancel(c->wcall);
        c->wcall = NULL;
    }
    drop_reader(c);
}

bool
ctrd_watch_connected(const struct ctrd *c)
{
    return stream_is_open(c->st);
}

uint64_t
ctrd_watch_reconnects(const struct ctrd *c)
{
    return stream_reconnects(c->st);
}

/* ---- lifetime ---------------------------------------------------------- */

/* containerd namespaces are identifiers: letters, digits, '.', '_', '-'.
 * Checked here because the name is put into a filter expression. */
static bool
valid_namespace(const char *ns)
{
    size_t i, n = strlen(ns);

    if (n == 0 || n > NS_MAX)
        return false;
    for (i = 0; i < n; i++) {
        char ch = ns[i];

        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
              (ch >= '0' && ch <= '9') || ch == '.' || ch == '_' || ch == '-'))
            return false;
    }
    return true;
}

struct ctrd *
ctrd_new(struct loop *l, const char *socket, const char *namespace_,
         long request_timeout_ms, long reconnect_max_ms, bool *off)
{
    static const struct stream_cbs scbs = {
        .connect = ctrd_watch_connect,
        .lost = ctrd_on_stream_lost,
    };
    struct ctrd *c = NULL, *result = NULL;
    size_t hl;

    if (off != NULL)
        *off = socket != NULL && strcmp(socket, "off") == 0;
    if (socket == NULL || strcmp(socket, "off") == 0 || socket[0] == '\0')
        goto out;
    if (namespace_ == NULL || !valid_namespace(namespace_)) {
        log_error(NULL, "containerd: invalid namespace \"%.80s\"",
                  namespace_ ? namespace_ : "");
        goto out;
    }
    c = calloc(1, sizeof(*c));
    if (c == NULL)
        goto out;
    c->l = l;
    c->socket_cfg = strdup(socket);
    c->ns = strdup(namespace_);
    hl = strlen("containerd-namespace: ") + strlen(namespace_) + 1;
    c->ns_header = malloc(hl);
    c->timeout_ms = request_timeout_ms;
    c->st =
        stream_new(l, &scbs, c, WATCH_BASE_MS,
                   (uint64_t)(reconnect_max_ms > 0 ? reconnect_max_ms : 30000),
                   (uint32_t)loop_now_ms() ^ ((uint32_t)getpid() << 16) ^ 2u);
    c->settle = evtimer_new(loop_base(l), on_settle, c);
    if (c->socket_cfg == NULL || c->ns == NULL || c->ns_header == NULL ||
        c->st == NULL || c->settle == NULL)
        goto out;
    snprintf(c->ns_header, hl, "containerd-namespace: %s", namespace_);
    result = c;
    c = NULL;
out:
    ctrd_free(c);
    return result;
}

void
ctrd_free(struct ctrd *c)
{
    if (c == NULL)
        return;
    if (c->st != NULL && c->settle != NULL)
        ctrd_watch_stop(c);
    while (c->reqs != NULL)
        ctrd_cancel(c->reqs);
    stream_free(c->st);
    if (c->settle != NULL)
        event_free(c->settle);
    free(c->socket_cfg);
    free(c->socket);
    free(c->ns);
    free(c->ns_header);
    free(c);
}

const char *
ctrd_socket(const struct ctrd *c)
{
    return c->socket;
}
