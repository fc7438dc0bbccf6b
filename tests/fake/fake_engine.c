/*
 * fake_engine — a programmable Docker Engine API double; see the header.
 *
 * Small on purpose: fixed tables, JSON written by hand from trusted test
 * values, evhttp for the protocol. It keeps every event it ever sent, so
 * a reconnect with since= replays them as the real engine does.
 */
#include "fake_engine.h"

#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <event2/listener.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define MAX_CONTAINERS 4096
#define MAX_EVENTS     4096
#define MAX_STREAMS    16

struct fcont {
    int used;
    char id[65];
    char name[64];
    char *labels; /* JSON object text, owned */
    char *bulk;   /* extra members of any size (Env, Cmd...), or NULL */
    char state[16];
    int exit_code;
    int finished;
    char finished_at[40]; /* FinishedAt once finished ("": a fixed date) */
};

struct fevent {
    long long nano;
    char *line;
};

struct fake_engine {
    struct event_base *base;
    struct evhttp *http;
    char path[108];
    struct fcont c[MAX_CONTAINERS];
    struct fevent ev[MAX_EVENTS];
    int nev;
    long long clock;
    struct evhttp_request *streams[MAX_STREAMS];
    struct evhttp_connection *sconn[MAX_STREAMS];
    /* A stream's replay (since=), sent late under fake_engine_delay
     * (FAKE_EVENTS): held streams get no live events before it. until
     * (-1: none) ends the stream after the replay, as the engine does. */
    int held[MAX_STREAMS];
    long long since[MAX_STREAMS], until[MAX_STREAMS];
    char events_query[1024]; /* of the last /events request */
    /* Replies whose client left: ours to end (which frees them). */
    struct evhttp_request *dead[64];
    int ndead;
    int drop;
    int count[FAKE_NOPS];
    int fail_status[FAKE_NOPS];
    int fail_count[FAKE_NOPS];
    char fail_msg[FAKE_NOPS][128];
    int delay_ms[FAKE_NOPS];
    char delay_id[65];
    int deletes_now, deletes_max;
    struct pending *pendings; /* answers not yet sent */
};

struct pending {
    struct pending *next;
    struct fake_engine *fe;
    struct evhttp_request *req;
    enum fake_op op;
    char id[65];
    int is_delete;
    struct event *timer;
};

static struct fcont *
find(struct fake_engine *fe, const char *id)
{
    int i;

    for (i = 0; i < MAX_CONTAINERS; i++)
        if (fe->c[i].used && strcmp(fe->c[i].id, id) == 0)
            return &fe->c[i];
    return NULL;
}

static void
stream_send(struct fake_engine *fe, const char *bytes)
{
    int i;

    for (i = 0; i < MAX_STREAMS; i++) {
        if (fe->streams[i] != NULL && !fe->held[i]) {
            struct evbuffer *b = evbuffer_new();

            evbuffer_add(b, bytes, strlen(bytes));
            evhttp_send_reply_chunk(fe->streams[i], b);
            evbuffer_free(b);
        }
    }
}

/* The members of a labels object's text (without its braces) but those
 * named name or image: the engine sets its own name and image attributes
 * after copying the labels, so a label of either name never shows in an
 * event. Labels here are strings, as the Engine API has them. */
static void
drop_hidden(char *inner)
{
    char *r = inner, *w = inner;

    while (*r != '\0') {
        char *start = r, *key_end, *v;
        size_t klen;
        bool hide;

        if (*r != '"')
            break; /* not a member: keep the rest as it is */
        key_end = strchr(r + 1, '"');
        if (key_end == NULL || key_end[1] != ':' || key_end[2] != '"')
            break;
        klen = (size_t)(key_end - r - 1);
        hide = (klen == 4 && strncmp(r + 1, "name", 4) == 0) ||
               (klen == 5 && strncmp(r + 1, "image", 5) == 0);
        for (v = key_end + 3; *v != '\0' && *v != '"'; v++)
            if (*v == '\\' && v[1] != '\0')
                v++;
        if (*v != '"')
            break;
        r = v + 1;
        if (*r == ',')
            r++;
        if (!hide) {
            memmove(w, start, (size_t)(r - start));
            w += r - start;
        }
    }
    memmove(w, r, strlen(r) + 1);
    /* No member left dangling after a comma. */
    if (w > inner && *(w - 1) == ',' && *w == '\0')
        *(w - 1) = '\0';
}

static void
emit(struct fake_engine *fe, struct fcont *c, const char *action,
     const char *extra_attr)
{
    size_t n = strlen(c->labels), size = 2 * n + 1024;
    char *line, *inner;
    struct timespec ts;
    long long nano;

    /* The engine stamps events with the wall clock: later ones later,
     * never two alike. */
    clock_gettime(CLOCK_REALTIME, &ts);
    nano = (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
    if (nano <= fe->clock)
        nano = fe->clock + 1;
    fe->clock = nano;

    if (fe->drop)
        return;
    line = malloc(size);
    inner = malloc(n + 1);
    if (line == NULL || inner == NULL)
        abort();
    /* The labels object without its braces, merged into Attributes the
     * way the engine does it. */
    inner[0] = '\0';
    if (n >= 2 && c->labels[0] == '{') {
        snprintf(inner, n + 1, "%.*s", (int)(n - 2), c->labels + 1);
        drop_hidden(inner);
    }
    /* The engine copies the labels over its own attributes (dockerd
     * 20.10 to 28.5): a label named exitCode is what a die event says. */
    if (extra_attr != NULL && strncmp(extra_attr, "\"exitCode\":", 11) == 0 &&
        strstr(inner, "\"exitCode\":") != NULL)
        extra_attr = NULL;
    snprintf(line, size,
             "{\"status\":\"%s\",\"id\":\"%s\",\"from\":\"img:1\","
             "\"Type\":\"container\",\"Action\":\"%s\",\"Actor\":{\"ID\":"
             "\"%s\",\"Attributes\":{%s%s\"image\":\"img:1\",\"name\":"
             "\"%s\"%s%s}},\"scope\":\"local\",\"time\":%lld,\"timeNano\":"
             "%lld}\n",
             action, c->id, action, c->id, extra_attr ? extra_attr : "",
             extra_attr ? "," : "", c->name, inner[0] ? "," : "", inner,
             nano / 1000000000, nano);
    free(inner);
    if (fe->nev < MAX_EVENTS) {
        fe->ev[fe->nev].nano = nano;
        fe->ev[fe->nev].line = strdup(line);
        fe->nev++;
    }
    stream_send(fe, line);
    free(line);
}

static void
reply(struct evhttp_request *req, int code, const char *body)
{
    struct evbuffer *b = evbuffer_new();

    evbuffer_add(b, body, strlen(body));
    evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
                      "application/json");
    evhttp_send_reply(req, code, code == 204 ? "No Content" : "X", b);
    evbuffer_free(b);
}

static void
reply_inspect(struct fake_engine *fe, struct evhttp_request *req,
              const char *id)
{
    struct fcont *c = find(fe, id);
    const char *bulk;
    char *body;
    size_t size;

    if (c == NULL) {
        char msg[256];

        snprintf(msg, sizeof(msg), "{\"message\":\"No such container: %s\"}",
                 id);
        reply(req, 404, msg);
        return;
    }
    bulk = c->bulk != NULL ? c->bulk : "\"Path\":\"sh\"";
    size = strlen(c->labels) + 2 * strlen(bulk) + 2048;
    body = malloc(size);
    if (body == NULL)
        abort();
    snprintf(body, size,
             "{\"Id\":\"%s\",\"Name\":\"/%s\",\"RestartCount\":0,%s,"
             "\"State\":{\"Status\":\"%s\",\"Running\":%s,\"Paused\":false,"
             "\"Restarting\":%s,\"OOMKilled\":false,\"Dead\":false,"
             "\"Pid\":0,\"ExitCode\":%d,\"Error\":\"\","
             "\"StartedAt\":\"2026-12-02T10:00:00.000000000Z\","
             "\"FinishedAt\":\"%s\"},"
             "\"Config\":{\"Image\":\"img:1\",%s,\"Labels\":%s}}",
             c->id, c->name, bulk, c->state,
             strcmp(c->state, "running") == 0 ? "true" : "false",
             strcmp(c->state, "restarting") == 0 ? "true" : "false",
             c->exit_code,
             !c->finished             ? "0001-01-01T00:00:00Z"
             : c->finished_at[0] != 0 ? c->finished_at
                                      : "2026-12-02T10:00:01.000000000Z",
             bulk, c->labels);
    reply(req, 200, body);
    free(body);
}

static void
reply_list(struct fake_engine *fe, struct evhttp_request *req,
           const char *only)
{
    struct evbuffer *b = evbuffer_new();
    int i, first = 1;

    evbuffer_add_printf(b, "[");
    for (i = 0; i < MAX_CONTAINERS; i++) {
        struct fcont *c = &fe->c[i];

        if (!c->used || (only != NULL && strcmp(only, c->id) != 0))
            continue;
        evbuffer_add_printf(b,
                            "%s{\"Id\":\"%s\",\"Names\":[\"/%s\"],\"Image\":"
                            "\"img:1\",",
                            first ? "" : ",", c->id, c->name);
        if (c->bulk != NULL)
            evbuffer_add_printf(b, "%s,", c->bulk);
        evbuffer_add(b, "\"Labels\":", 9);
        evbuffer_add(b, c->labels, strlen(c->labels));
        evbuffer_add_printf(b, ",\"State\":\"%s\",\"Status\":\"whatever\"}",
                            c->state);
        first = 0;
    }
    evbuffer_add_printf(b, "]");
    evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
                      "application/json");
    evhttp_send_reply(req, 200, "OK", b);
    evbuffer_free(b);
}

static void
do_delete(struct fake_engine *fe, struct evhttp_request *req, const char *id)
{
    struct fcont *c = find(fe, id);
    char body[256];

    if (c == NULL) {
        snprintf(body, sizeof(body), "{\"message\":\"No such container: %s\"}",
                 id);
        reply(req, 404, body);
        return;
    }
    emit(fe, c, "destroy", NULL);
    c->used = 0;
    evhttp_send_reply(req, 204, "No Content", NULL);
}

/* Faults first; then the real answer. Returns 1 when a fault answered. */
static int
fault(struct fake_engine *fe, struct evhttp_request *req, enum fake_op op)
{
    char body[256];

    if (fe->fail_count[op] <= 0 || fe->fail_status[op] == 0)
        return 0;
    fe->fail_count[op]--;
    snprintf(body, sizeof(body), "{\"message\":\"%s\"}", fe->fail_msg[op]);
    reply(req, fe->fail_status[op], body);
    return 1;
}

static void replay_stream(struct fake_engine *fe, int slot);

static void
answer(struct fake_engine *fe, struct evhttp_request *req, enum fake_op op,
       const char *id)
{
    int i;

    if (op == FAKE_EVENTS) {
        /* Its headers went out when it came; gone meanwhile: nothing. */
        for (i = 0; i < MAX_STREAMS; i++)
            if (fe->streams[i] == req)
                replay_stream(fe, i);
        return;
    }
    if (op == FAKE_LIST) {
        /* Its fault, if any, was answered when it came. */
        reply_list(fe, req, id[0] != '\0' ? id : NULL);
        return;
    }
    if (fault(fe, req, op))
        return;
    if (op == FAKE_INSPECT)
        reply_inspect(fe, req, id);
    else if (op == FAKE_DELETE)
        do_delete(fe, req, id);
}

static void
pending_unlink(struct pending *p)
{
    struct pending **pp = &p->fe->pendings;

    while (*pp != NULL && *pp != p)
        pp = &(*pp)->next;
    if (*pp == p)
        *pp = p->next;
}

static void
on_pending(evutil_socket_t fd, short what, void *arg)
{
    struct pending *p = arg;

    (void)fd;
    (void)what;
    pending_unlink(p);
    if (p->is_delete)
        p->fe->deletes_now--;
    answer(p->fe, p->req, p->op, p->id);
    event_free(p->timer);
    free(p);
}

int
fake_engine_release(struct fake_engine *fe, enum fake_op op)
{
    struct pending *p = fe->pendings, *next;
    int n = 0;

    for (; p != NULL; p = next) {
        next = p->next;
        if (p->op != op)
            continue;
        on_pending(-1, EV_TIMEOUT, p);
        n++;
    }
    return n;
}

static void
on_stream_close(struct evhttp_connection *conn, void *arg)
{
    struct fake_engine *fe = arg;
    int i;

    for (i = 0; i < MAX_STREAMS; i++) {
        if (fe->streams[i] != NULL && fe->sconn[i] == conn) {
            if (fe->ndead < 64)
                fe->dead[fe->ndead++] = fe->streams[i];
            fe->streams[i] = NULL;
        }
    }
}

/* The events of [since, until] on stream `slot`, then live ones, or its
 * end when until was given. */
static void
replay_stream(struct fake_engine *fe, int slot)
{
    struct evhttp_request *req = fe->streams[slot];
    int i;

    fe->held[slot] = 0;
    for (i = 0; i < fe->nev && fe->since[slot] >= 0; i++) {
        if (fe->ev[i].nano >= fe->since[slot] &&
            (fe->until[slot] < 0 || fe->ev[i].nano <= fe->until[slot])) {
            struct evbuffer *b = evbuffer_new();

            evbuffer_add(b, fe->ev[i].line, strlen(fe->ev[i].line));
            evhttp_send_reply_chunk(req, b);
            evbuffer_free(b);
        }
    }
    if (fe->until[slot] >= 0) {
        fe->streams[slot] = NULL;
        evhttp_connection_set_closecb(fe->sconn[slot], NULL, NULL);
        evhttp_send_reply_end(req);
    }
}

static long long
time_param(struct evkeyvalq *params, const char *name)
{
    const char *v = evhttp_find_header(params, name);
    long long s = 0, ns = 0;

    if (v == NULL)
        return -1;
    sscanf(v, "%lld.%lld", &s, &ns);
    return s * 1000000000LL + ns;
}

static void
open_stream(struct fake_engine *fe, struct evhttp_request *req)
{
    const char *q = evhttp_uri_get_query(evhttp_request_get_evhttp_uri(req));
    struct evkeyvalq params;
    long long since_nano = -1, until_nano = -1;
    int i, slot = -1;

    for (i = 0; i < MAX_STREAMS; i++)
        if (fe->streams[i] == NULL) {
            slot = i;
            break;
        }
    if (slot < 0) {
        reply(req, 500, "{\"message\":\"too many streams\"}");
        return;
    }
    params.tqh_first = NULL;
    params.tqh_last = &params.tqh_first;
    if (q != NULL && evhttp_parse_query_str(q, &params) == 0) {
        since_nano = time_param(&params, "since");
        until_nano = time_param(&params, "until");
    }
    evhttp_clear_headers(&params);
    evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
                      "application/json");
    evhttp_send_reply_start(req, 200, "OK");
    fe->streams[slot] = req;
    fe->sconn[slot] = evhttp_request_get_connection(req);
    evhttp_connection_set_closecb(fe->sconn[slot], on_stream_close, fe);
    fe->since[slot] = since_nano;
    fe->until[slot] = until_nano;
    fe->held[slot] = 0;
    if (since_nano >= 0 && fe->delay_ms[FAKE_EVENTS] > 0) {
        /* The engine writes its replay only after the headers. */
        struct pending *p = calloc(1, sizeof(*p));
        struct timeval tv = {fe->delay_ms[FAKE_EVENTS] / 1000,
                             (fe->delay_ms[FAKE_EVENTS] % 1000) * 1000};

        fe->held[slot] = 1;
        p->fe = fe;
        p->req = req;
        p->op = FAKE_EVENTS;
        p->timer = evtimer_new(fe->base, on_pending, p);
        evtimer_add(p->timer, &tv);
        p->next = fe->pendings;
        fe->pendings = p;
        return;
    }
    replay_stream(fe, slot);
}

static void
on_request(struct evhttp_request *req, void *arg)
{
    struct fake_engine *fe = arg;
    const char *path = evhttp_uri_get_path(evhttp_request_get_evhttp_uri(req));
    const char *q = evhttp_uri_get_query(evhttp_request_get_evhttp_uri(req));
    enum evhttp_cmd_type m = evhttp_request_get_command(req);
    enum fake_op op;
    char id[65] = "";

    if (strncmp(path, "/v1.", 4) == 0) {
        path = strchr(path + 1, '/');
        if (path == NULL)
            path = "/";
    }
    if (strcmp(path, "/version") == 0) {
        op = FAKE_VERSION;
    } else if (strcmp(path, "/events") == 0) {
        op = FAKE_EVENTS;
        snprintf(fe->events_query, sizeof(fe->events_query), "%s",
                 q != NULL ? q : "");
    } else if (strcmp(path, "/containers/json") == 0) {
        op = FAKE_LIST;
    } else if (strncmp(path, "/containers/", 12) == 0 &&
               strlen(path + 12) >= 64) {
        memcpy(id, path + 12, 64);
        op = m == EVHTTP_REQ_DELETE ? FAKE_DELETE : FAKE_INSPECT;
    } else {
        reply(req, 404, "{\"message\":\"page not found\"}");
        return;
    }
    fe->count[op]++;
    if (op != FAKE_INSPECT && op != FAKE_DELETE && fault(fe, req, op))
        return;
    switch (op) {
    case FAKE_VERSION:
        reply(req, 200,
              "{\"ApiVersion\":\"1.41\",\"MinAPIVersion\":\"1.12\","
              "\"Version\":\"fake\"}");
        return;
    case FAKE_EVENTS:
        open_stream(fe, req);
        return;
    case FAKE_LIST: {
        /* filters={"id":["<id>"]} arrives URL-encoded. */
        const char *f = q != NULL ? strstr(q, "filters=") : NULL;
        char *dec = f != NULL ? evhttp_decode_uri(f + 8) : NULL;
        const char *idp = dec != NULL ? strstr(dec, "[\"") : NULL;
        char only[65];

        only[0] = '\0';
        if (idp != NULL && strlen(idp + 2) >= 64) {
            memcpy(only, idp + 2, 64);
            only[64] = '\0';
        }
        free(dec);
        if (fe->delay_ms[FAKE_LIST] > 0) {
            memcpy(id, only, sizeof(only)); /* answered late, below */
            break;
        }
        reply_list(fe, req, only[0] != '\0' ? only : NULL);
        return;
    }
    default:
        break;
    }
    if (fe->delay_ms[op] > 0 &&
        (op != FAKE_INSPECT || fe->delay_id[0] == '\0' ||
         strcmp(fe->delay_id, id) == 0)) {
        struct pending *p = calloc(1, sizeof(*p));
        struct timeval tv = {fe->delay_ms[op] / 1000,
                             (fe->delay_ms[op] % 1000) * 1000};

        p->fe = fe;
        p->req = req;
        p->op = op;
        memcpy(p->id, id, 65);
        p->is_delete = op == FAKE_DELETE;
        if (p->is_delete && ++fe->deletes_now > fe->deletes_max)
            fe->deletes_max = fe->deletes_now;
        p->timer = evtimer_new(fe->base, on_pending, p);
        evtimer_add(p->timer, &tv);
        p->next = fe->pendings;
        fe->pendings = p;
        return;
    }
    if (op == FAKE_DELETE && fe->deletes_max < 1)
        fe->deletes_max = 1;
    answer(fe, req, op, id);
}

struct fake_engine *
fake_engine_new(struct event_base *base, const char *path)
{
    struct fake_engine *fe = calloc(1, sizeof(*fe));
    struct sockaddr_un sa;
    struct evconnlistener *lev;
    struct timespec ts;

    if (fe == NULL || strlen(path) >= sizeof(sa.sun_path))
        goto fail;
    fe->base = base;
    snprintf(fe->path, sizeof(fe->path), "%s", path);
    clock_gettime(CLOCK_REALTIME, &ts);
    fe->clock = (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
    fe->http = evhttp_new(base);
    if (fe->http == NULL)
        goto fail;
    evhttp_set_allowed_methods(fe->http, EVHTTP_REQ_GET | EVHTTP_REQ_DELETE |
                                             EVHTTP_REQ_POST);
    evhttp_set_gencb(fe->http, on_request, fe);
    memset(&sa, 0, sizeof(sa));
    sa.sun_family = AF_UNIX;
    strcpy(sa.sun_path, path);
    unlink(path);
    lev = evconnlistener_new_bind(base, NULL, NULL, LEV_OPT_CLOSE_ON_FREE, 64,
                                  (struct sockaddr *)&sa, sizeof(sa));
    if (lev == NULL)
        goto fail;
    if (evhttp_bind_listener(fe->http, lev) == NULL) {
        evconnlistener_free(lev);
        goto fail;
    }
    return fe;
fail:
    fake_engine_free(fe);
    return NULL;
}

void
fake_engine_free(struct fake_engine *fe)
{
    int i;

    if (fe == NULL)
        return;
    /* Answers never sent: their requests go with evhttp_free below. */
    while (fe->pendings != NULL) {
        struct pending *p = fe->pendings;

        fe->pendings = p->next;
        event_free(p->timer);
        free(p);
    }
    /* Ending the open replies lets evhttp_free release their requests,
     * also those whose client already went away. */
    for (i = 0; i < MAX_STREAMS; i++) {
        if (fe->streams[i] != NULL) {
            struct evhttp_request *req = fe->streams[i];

            fe->streams[i] = NULL;
            evhttp_connection_set_closecb(fe->sconn[i], NULL, NULL);
            evhttp_send_reply_end(req);
        }
    }
    for (i = 0; i < fe->ndead; i++)
        evhttp_send_reply_end(fe->dead[i]);
    if (fe->http != NULL)
        evhttp_free(fe->http);
    for (i = 0; i < fe->nev; i++)
        free(fe->ev[i].line);
    for (i = 0; i < MAX_CONTAINERS; i++) {
        free(fe->c[i].labels);
        free(fe->c[i].bulk);
    }
    unlink(fe->path);
    free(fe);
}

void
fake_engine_add(struct fake_engine *fe, const char *id, const char *name,
                const char *labels_json, const char *state, int emit_events)
{
    int i;

    for (i = 0; i < MAX_CONTAINERS; i++) {
        struct fcont *c = &fe->c[i];

        if (c->used)
            continue;
        free(c->labels);
        free(c->bulk);
        memset(c, 0, sizeof(*c));
        c->used = 1;
        snprintf(c->id, sizeof(c->id), "%s", id);
        snprintf(c->name, sizeof(c->name), "%s", name);
        c->labels = strdup(labels_json ? labels_json : "{}");
        if (c->labels == NULL)
            abort();
        snprintf(c->state, sizeof(c->state), "%s", state ? state : "running");
        /* An engine that shows a container exited also knows when. */
        c->finished = state != NULL && (strcmp(state, "exited") == 0 ||
                                        strcmp(state, "dead") == 0);
        if (emit_events == 1 || emit_events == FAKE_CREATE_ONLY)
            emit(fe, c, "create", NULL);
        if (emit_events == 1 || emit_events == FAKE_START_ONLY)
            emit(fe, c, "start", NULL);
        return;
    }
}

void
fake_engine_exit(struct fake_engine *fe, const char *id, int code,
                 int die_code)
{
    struct fcont *c = find(fe, id);
    char attr[64];

    if (c == NULL)
        return;
    snprintf(c->state, sizeof(c->state), "exited");
    c->exit_code = code;
    c->finished = 1;
    snprintf(attr, sizeof(attr), "\"exitCode\":\"%d\"", die_code);
    emit(fe, c, "die", attr);
}

void
fake_engine_set_finished_at(struct fake_engine *fe, const char *id,
                            const char *rfc3339)
{
    struct fcont *c = find(fe, id);

    if (c != NULL)
        snprintf(c->finished_at, sizeof(c->finished_at), "%s", rfc3339);
}

void
fake_engine_set_state(struct fake_engine *fe, const char *id,
                      const char *state)
{
    struct fcont *c = find(fe, id);

    if (c != NULL)
        snprintf(c->state, sizeof(c->state), "%s", state);
}

void
fake_engine_remove(struct fake_engine *fe, const char *id, int emit_events)
{
    struct fcont *c = find(fe, id);

    if (c == NULL)
        return;
    if (emit_events)
        emit(fe, c, "destroy", NULL);
    c->used = 0;
}

void
fake_engine_fail(struct fake_engine *fe, enum fake_op op, int status,
                 int count, const char *message)
{
    fe->fail_status[op] = status;
    fe->fail_count[op] = count;
    snprintf(fe->fail_msg[op], sizeof(fe->fail_msg[op]), "%s",
             message ? message : "injected fault");
}

void
fake_engine_delay(struct fake_engine *fe, enum fake_op op, int ms,
                  const char *id)
{
    fe->delay_ms[op] = ms;
    snprintf(fe->delay_id, sizeof(fe->delay_id), "%s", id ? id : "");
}

void
fake_engine_stream_raw(struct fake_engine *fe, const char *bytes)
{
    stream_send(fe, bytes);
}

void
fake_engine_cut_streams(struct fake_engine *fe)
{
    int i;

    for (i = 0; i < MAX_STREAMS; i++) {
        if (fe->streams[i] != NULL) {
            struct evhttp_connection *conn = fe->sconn[i];

            fe->streams[i] = NULL;
            evhttp_connection_set_closecb(conn, NULL, NULL);
            evhttp_connection_free(conn);
        }
    }
}

void
fake_engine_drop_events(struct fake_engine *fe, int drop)
{
    fe->drop = drop;
}

int
fake_engine_count(const struct fake_engine *fe, enum fake_op op)
{
    return fe->count[op];
}

int
fake_engine_max_concurrent_deletes(const struct fake_engine *fe)
{
    return fe->deletes_max;
}

int
fake_engine_has(const struct fake_engine *fe, const char *id)
{
    return find((struct fake_engine *)fe, id) != NULL;
}

int
fake_engine_open_streams(const struct fake_engine *fe)
{
    int i, n = 0;

    for (i = 0; i < MAX_STREAMS; i++)
        n += fe->streams[i] != NULL;
    return n;
}

void
fake_engine_set_bulk(struct fake_engine *fe, const char *id,
                     const char *members)
{
    struct fcont *c = find(fe, id);

    if (c == NULL)
        return;
    free(c->bulk);
    c->bulk = members != NULL ? strdup(members) : NULL;
    if (members != NULL && c->bulk == NULL)
        abort();
}

const char *
fake_engine_events_query(const struct fake_engine *fe)
{
    return fe->events_query;
}
