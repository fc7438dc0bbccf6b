/*
 * docker — the Docker Engine API client; see docker.h.
 *
 * Engine answers are untrusted input: every body is size-capped by the
 * loop, parsed with json's limits, and every field we use is type-checked.
 * A container with a bad id or an unknown state word is dropped from a
 * list (and logged), not believed.
 */
#include "docker.h"

#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "backoff.h"
#include "json.h"
#include "log.h"
#include "loop.h"

#define INSPECT_MAX_BODY (1u << 20)
#define LIST_MAX_BODY    (64u << 20)
#define ERR_MAX_BODY     (64u << 10)
#define WATCH_BASE_MS    250

enum watch_phase { W_IDLE, W_VERSION, W_CONNECTING, W_OPEN, W_WAITING };

struct docker {
    struct loop *l;
    char *socket;
    long timeout_ms;
    long reconnect_max_ms;
    char api[16]; /* negotiated version, "" until known */
    uint32_t rnd;
    struct docker_req *reqs; /* in flight, for docker_free */

    /* The events subscription. */
    enum watch_phase phase;
    struct docker_watch_cbs cbs;
    void *cbs_arg;
    struct http_call *wcall;
    struct events_parser *parser;
    struct event *wtimer;
    unsigned wfailures;
    int64_t checkpoint;
    uint64_t reconnects;
    uint64_t nevents;
    bool subscribed_once;
    bool feeding;      /* inside events_parser_feed */
    bool parser_dead;  /* free the parser once the feed returns */
    bool free_pending; /* docker_free ran from an event callback */
    char lost_why[256];
};

enum req_kind { REQ_INSPECT, REQ_LIST, REQ_DELETE };

struct docker_req {
    struct docker *d;
    enum req_kind kind;
    struct http_call *call;
    union {
        docker_inspect_cb inspect;
        docker_list_cb list;
        docker_delete_cb del;
    } cb;
    void *arg;
    struct docker_req *prev, *next;
};

struct docker_parsed {
    struct json_node *root;
    struct docker_container *items;
    size_t n;
    struct label *labels;
};

bool
docker_valid_id(const char *s)
{
    size_t i;

    if (s == NULL)
        return false;
    for (i = 0; i < 64; i++) {
        char ch = s[i];

        if (!((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f')))
            return false;
    }
    return s[64] == '\0';
}

/* ---- parsing ---------------------------------------------------------- */

/* The string value when it holds no NUL byte (a "\u0000" inside would
 * make C string functions see only a prefix: "reapd.managed\u0000x" must
 * not pass as "reapd.managed"). Else NULL. */
static const char *
cstr(const struct json_node *n)
{
    const char *s = json_string(n);

    return s != NULL && strlen(s) == n->len ? s : NULL;
}

static int
api_number(const char *v)
{
    int major = 0, minor = 0;
    char tail;

    if (v == NULL || sscanf(v, "%d.%d%c", &major, &minor, &tail) != 2)
        return -1;
    if (major < 1 || major > 99 || minor < 0 || minor > 999)
        return -1;
    return major * 1000 + minor;
}

int
docker_parse_version(const char *body, size_t len, char *out, size_t outlen,
                     char *err, size_t errlen)
{
    struct json_limits lim = {.max_bytes = 1u << 20, .max_depth = 8};
    struct json_node *root;
    const char *srv, *min;
    int nsrv, nmin, nuse, result = -1;

    root = json_parse(body, len, &lim, 0, err, errlen, NULL);
    if (root == NULL)
        return -1;
    srv = cstr(json_get(root, "ApiVersion"));
    min = cstr(json_get(root, "MinAPIVersion"));
    nsrv = api_number(srv);
    nmin = min != NULL ? api_number(min) : nsrv;
    if (nsrv < 0 || nmin < 0) {
        snprintf(err, errlen, "/version: no valid ApiVersion");
        goto out;
    }
    nuse = nsrv;
    if (nuse > api_number(DOCKER_API_MAX))
        nuse = api_number(DOCKER_API_MAX);
    if (nuse < api_number(DOCKER_API_MIN) || nuse < nmin) {
        snprintf(err, errlen,
                 "engine API %s is outside what reapd speaks (%s..%s)", srv,
                 DOCKER_API_MIN, DOCKER_API_MAX);
        goto out;
    }
    snprintf(out, outlen, "%d.%d", nuse / 1000, nuse % 1000);
    result = 0;
out:
    json_free(root);
    return result;
}

/* Copies string members of `obj` into labels[]; non-strings skipped. */
static size_t
take_labels(const struct json_node *obj, struct label *labels)
{
    size_t i, n = 0;

    if (obj == NULL || obj->type != JSON_OBJECT)
        return 0;
    for (i = 0; i < obj->count; i++) {
        const struct json_node *m = obj->items[i];

        if (cstr(m) == NULL || strlen(m->key) != m->key_len)
            continue;
        labels[n].key = (char *)m->key;
        labels[n].value = (char *)m->str;
        n++;
    }
    return n;
}

static size_t
count_labels(const struct json_node *obj)
{
    return obj != NULL && obj->type == JSON_OBJECT ? obj->count : 0;
}

static const char *
time_or_null(const char *t)
{
    /* Go's zero time means "never". */
    if (t == NULL || t[0] == '\0' || strncmp(t, "0001-01-01", 10) == 0)
        return NULL;
    return t;
}

static bool
json_true(const struct json_node *n)
{
    return n != NULL && n->type == JSON_BOOL && n->boolean;
}

static struct docker_parsed *
parsed_new(struct json_node *root, size_t n, size_t nlabels)
{
    struct docker_parsed *p = calloc(1, sizeof(*p));

    if (p == NULL)
        return NULL;
    p->root = root;
    p->items = calloc(n ? n : 1, sizeof(*p->items));
    p->labels = calloc(nlabels ? nlabels : 1, sizeof(*p->labels));
    if (p->items == NULL || p->labels == NULL) {
        p->root = NULL;
        docker_parsed_free(p);
        return NULL;
    }
    return p;
}

void
docker_parsed_free(struct docker_parsed *p)
{
    if (p == NULL)
        return;
    json_free(p->root);
    free(p->items);
    free(p->labels);
    free(p);
}

int
docker_parse_inspect(const char *body, size_t len, struct docker_parsed **ctx,
                     const struct docker_container **out, char *err,
                     size_t errlen)
{
    struct json_limits lim = {
        .max_bytes = INSPECT_MAX_BODY, .max_depth = 16, .max_items = 8192};
    struct json_node *root;
    const struct json_node *cfg, *st, *labels;
    struct docker_parsed *p = NULL;
    struct docker_container *c;
    const char *id, *name, *status;
    int64_t code;

    *ctx = NULL;
    root = json_parse(body, len, &lim, 0, err, errlen, NULL);
    if (root == NULL)
        return -1;
    id = cstr(json_get(root, "Id"));
    cfg = json_get(root, "Config");
    st = json_get(root, "State");
    if (!docker_valid_id(id) || st == NULL || st->type != JSON_OBJECT) {
        snprintf(err, errlen, "inspect: no valid Id or State");
        json_free(root);
        return -1;
    }
    labels = json_get(cfg, "Labels");
    p = parsed_new(root, 1, count_labels(labels));
    if (p == NULL) {
        json_free(root);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    c = &p->items[0];
    p->n = 1;
    memcpy(c->id, id, 65);
    name = cstr(json_get(root, "Name"));
    c->name = name != NULL && name[0] == '/' ? name + 1 : name;
    c->image = cstr(json_get(cfg, "Image"));
    c->labels = p->labels;
    c->nlabels = take_labels(labels, p->labels);
    status = cstr(json_get(st, "Status"));
    if (lc_run_parse(status, &c->state.run) != 0) {
        snprintf(err, errlen, "inspect: unknown State.Status \"%.40s\"",
                 status ? status : "(none)");
        docker_parsed_free(p);
        return -1;
    }
    if (json_int64(json_get(st, "ExitCode"), &code) == 0 &&
        code >= INT32_MIN && code <= INT32_MAX) {
        c->state.has_exit_code = true;
        c->state.exit_code = (int)code;
    }
    c->state.oom_killed = json_true(json_get(st, "OOMKilled"));
    c->started_at = time_or_null(cstr(json_get(st, "StartedAt")));
    c->finished_at = time_or_null(cstr(json_get(st, "FinishedAt")));
    c->state.finished = c->finished_at != NULL;
    *ctx = p;
    *out = c;
    return 0;
}

int
docker_parse_list(const char *body, size_t len, struct docker_parsed **ctx,
                  const struct docker_container **out, size_t *n, char *err,
                  size_t errlen)
{
    struct json_limits lim = {
        .max_bytes = LIST_MAX_BODY, .max_depth = 16, .max_items = 1u << 20};
    struct json_node *root;
    struct docker_parsed *p;
    size_t i, nl = 0, lab = 0;

    *ctx = NULL;
    root = json_parse(body, len, &lim, 0, err, errlen, NULL);
    if (root == NULL)
        return -1;
    if (root->type != JSON_ARRAY) {
        snprintf(err, errlen, "list: expected an array");
        json_free(root);
        return -1;
    }
    for (i = 0; i < root->count; i++)
        nl += count_labels(json_get(root->items[i], "Labels"));
    p = parsed_new(root, root->count, nl);
    if (p == NULL) {
        json_free(root);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    for (i = 0; i < root->count; i++) {
        const struct json_node *it = root->items[i], *names;
        struct docker_container *c = &p->items[p->n];
        const char *id = cstr(json_get(it, "Id"));
        const char *state = cstr(json_get(it, "State"));
        const char *name = NULL;

        if (!docker_valid_id(id) || lc_run_parse(state, &c->state.run)) {
            log_warn(NULL, "list: skipping an entry with a bad Id or State");
            continue;
        }
        memcpy(c->id, id, 65);
        names = json_get(it, "Names");
        if (names != NULL && names->type == JSON_ARRAY && names->count > 0)
            name = cstr(names->items[0]);
        c->name = name != NULL && name[0] == '/' ? name + 1 : name;
        c->image = cstr(json_get(it, "Image"));
        c->labels = p->labels + lab;
        c->nlabels = take_labels(json_get(it, "Labels"), p->labels + lab);
        lab += c->nlabels;
        p->n++;
    }
    *ctx = p;
    *out = p->items;
    *n = p->n;
    return 0;
}

/* ---- requests --------------------------------------------------------- */

static void
req_unlink(struct docker_req *r)
{
    if (r->prev != NULL)
        r->prev->next = r->next;
    else
        r->d->reqs = r->next;
    if (r->next != NULL)
        r->next->prev = r->prev;
}

/* The engine's {"message": "..."} of an error answer, or a default. */
static void
error_message(const struct http_response *res, const char *what, char *buf,
              size_t len)
{
    struct json_limits lim = {.max_bytes = ERR_MAX_BODY, .max_depth = 4};
    struct json_node *root = NULL;
    const char *m = NULL;

    if (res->error != HTTPC_OK) {
        snprintf(buf, len, "%s: %s", what, res->errmsg);
        return;
    }
    if (res->body != NULL && res->body_len > 0)
        root = json_parse(res->body, res->body_len, &lim, 0, NULL, 0, NULL);
    m = cstr(json_get(root, "message"));
    snprintf(buf, len, "%s: HTTP %ld%s%.200s", what, res->status,
             m ? ": " : "", m ? m : "");
    json_free(root);
}

static enum docker_status
status_of(const struct http_response *res)
{
    if (res->error != HTTPC_OK)
        return DOCKER_FAILED;
    if (res->status >= 200 && res->status < 300)
        return DOCKER_OK;
    if (res->status == 404)
        return DOCKER_NOT_FOUND;
    if (res->status == 409)
        return DOCKER_CONFLICT;
    return DOCKER_FAILED;
}

static void
on_req_done(const struct http_response *res, void *arg)
{
    struct docker_req *r = arg;
    enum docker_status st = status_of(res);
    struct docker_parsed *p = NULL;
    const struct docker_container *cs = NULL;
    size_t n = 0;
    char msg[512] = "";

    r->call = NULL;
    req_unlink(r);
    if (st != DOCKER_OK)
        error_message(res,
                      r->kind == REQ_DELETE    ? "delete"
                      : r->kind == REQ_INSPECT ? "inspect"
                                               : "list",
                      msg, sizeof(msg));
    switch (r->kind) {
    case REQ_INSPECT:
        if (st == DOCKER_OK &&
            docker_parse_inspect(res->body, res->body_len, &p, &cs, msg,
                                 sizeof(msg)) != 0)
            st = DOCKER_FAILED;
        r->cb.inspect(st, st == DOCKER_OK ? cs : NULL, msg, r->arg);
        break;
    case REQ_LIST:
        if (st == DOCKER_OK &&
            docker_parse_list(res->body, res->body_len, &p, &cs, &n, msg,
                              sizeof(msg)) != 0)
            st = DOCKER_FAILED;
        r->cb.list(st, cs, n, msg, r->arg);
        break;
    case REQ_DELETE:
        r->cb.del(st, res->status, msg, r->arg);
        break;
    }
    docker_parsed_free(p);
    free(r);
}

static struct docker_req *
start_req(struct docker *d, enum req_kind kind, const char *method,
          const char *path, size_t max_body, void *cb, void *arg)
{
    struct http_request hr;
    struct docker_req *r;
    char url[512];

    if (d->api[0] == '\0')
        return NULL; /* not negotiated yet: the watch does that first */
    r = calloc(1, sizeof(*r));
    if (r == NULL)
        return NULL;
    r->d = d;
    r->kind = kind;
    r->arg = arg;
    if (kind == REQ_INSPECT)
        r->cb.inspect = (docker_inspect_cb)cb;
    else if (kind == REQ_LIST)
        r->cb.list = (docker_list_cb)cb;
    else
        r->cb.del = (docker_delete_cb)cb;
    snprintf(url, sizeof(url), "http://docker/v%s%s", d->api, path);
    memset(&hr, 0, sizeof(hr));
    hr.method = method;
    hr.url = url;
    hr.unix_socket = d->socket;
    hr.timeout_ms = d->timeout_ms;
    hr.max_body = max_body;
    r->call = loop_http(d->l, &hr, NULL, NULL, on_req_done, r);
    if (r->call == NULL) {
        free(r);
        return NULL;
    }
    r->next = d->reqs;
    if (d->reqs != NULL)
        d->reqs->prev = r;
    d->reqs = r;
    return r;
}

struct docker_req *
docker_inspect(struct docker *d, const char *id, docker_inspect_cb cb,
               void *arg)
{
    char path[128];

    if (!docker_valid_id(id))
        return NULL;
    snprintf(path, sizeof(path), "/containers/%s/json", id);
    return start_req(d, REQ_INSPECT, "GET", path, INSPECT_MAX_BODY, (void *)cb,
                     arg);
}

struct docker_req *
docker_list(struct docker *d, const char *id, docker_list_cb cb, void *arg)
{
    char path[256];

    if (id != NULL && !docker_valid_id(id))
        return NULL;
    if (id != NULL)
        /* filters={"id":["<id>"]} */
        snprintf(path, sizeof(path),
                 "/containers/json?all=1&filters=%%7B%%22id%%22%%3A%%5B%%22"
                 "%s%%22%%5D%%7D",
                 id);
    else
        snprintf(path, sizeof(path), "/containers/json?all=1");
    return start_req(d, REQ_LIST, "GET", path, LIST_MAX_BODY, (void *)cb, arg);
}

struct docker_req *
docker_delete(struct docker *d, const char *id, bool force, bool volumes,
              docker_delete_cb cb, void *arg)
{
    char path[160];

    if (!docker_valid_id(id))
        return NULL;
    snprintf(path, sizeof(path), "/containers/%s?force=%d&v=%d", id,
             force ? 1 : 0, volumes ? 1 : 0);
    return start_req(d, REQ_DELETE, "DELETE", path, ERR_MAX_BODY, (void *)cb,
                     arg);
}

void
docker_cancel(struct docker_req *r)
{
    if (r == NULL)
        return;
    loop_http_cancel(r->call);
    req_unlink(r);
    free(r);
}

/* ---- the events subscription ----------------------------------------- */

static void watch_connect(struct docker *d);

static void
watch_retry(struct docker *d, const char *why)
{
    struct timeval tv;
    uint64_t ms;

    if (d->parser != NULL) {
        events_parser_free(d->parser);
        d->parser = NULL;
    }
    d->wcall = NULL;
    d->wfailures++;
    ms =
        backoff_delay_ms(d->wfailures, WATCH_BASE_MS,
                         (uint64_t)d->reconnect_max_ms, backoff_rand(&d->rnd));
    d->phase = W_WAITING;
    snprintf(d->lost_why, sizeof(d->lost_why), "%s", why);
    tv.tv_sec = (time_t)(ms / 1000);
    tv.tv_usec = (suseconds_t)((ms % 1000) * 1000);
    evtimer_add(d->wtimer, &tv);
    if (d->cbs.on_lost != NULL)
        d->cbs.on_lost(why, ms, d->cbs_arg);
}

static void
on_watch_event(const struct docker_event *ev, void *arg)
{
    struct docker *d = arg;

    if (ev->time_nano > d->checkpoint)
        d->checkpoint = ev->time_nano;
    d->nevents++;
    if (d->cbs.on_event != NULL)
        d->cbs.on_event(ev, d->cbs_arg);
}

static void
on_events_headers(long status, void *arg)
{
    struct docker *d = arg;

    if (status != 200)
        return; /* on_done reports it */
    d->phase = W_OPEN;
    d->wfailures = 0;
    if (d->subscribed_once)
        d->reconnects++;
    d->subscribed_once = true;
    if (d->cbs.on_subscribed != NULL)
        d->cbs.on_subscribed(d->cbs_arg);
}

static int
on_events_data(const char *buf, size_t len, void *arg)
{
    struct docker *d = arg;
    int rc;

    if (d->phase != W_OPEN)
        return 0; /* an error body; on_done reports the status */
    d->feeding = true;
    rc = events_parser_feed(d->parser, buf, len);
    d->feeding = false;
    if (d->parser_dead) {
        /* docker_watch_stop ran from an event callback. */
        events_parser_free(d->parser);
        d->parser = NULL;
        d->parser_dead = false;
        if (d->free_pending)
            docker_free(d);
        return -1;
    }
    if (rc != 0) {
        log_error(NULL, "events stream: %s; reconnecting",
                  events_parser_error(d->parser));
        return -1;
    }
    return 0;
}

static void
on_events_done(const struct http_response *res, void *arg)
{
    struct docker *d = arg;
    char why[300];

    d->wcall = NULL;
    if (d->parser != NULL && events_parser_pending(d->parser) > 0 &&
        res->error != HTTPC_ERR_ABORTED)
        snprintf(why, sizeof(why),
                 "events: stream cut mid-object (%zu bytes dropped): %s",
                 events_parser_pending(d->parser),
                 res->error != HTTPC_OK ? res->errmsg : "closed");
    else if (res->error == HTTPC_ERR_ABORTED && d->parser != NULL)
        snprintf(why, sizeof(why), "events: %s",
                 events_parser_error(d->parser));
    else if (res->error != HTTPC_OK)
        snprintf(why, sizeof(why), "events: %s", res->errmsg);
    else if (res->status != 200)
        snprintf(why, sizeof(why), "events: HTTP %ld", res->status);
    else
        snprintf(why, sizeof(why), "events: stream closed by the engine");
    watch_retry(d, why);
}

static void
open_events(struct docker *d)
{
    struct http_request hr;
    char url[512];
    int n;

    d->parser = events_parser_new(NULL, on_watch_event, d);
    if (d->parser == NULL) {
        watch_retry(d, "events: out of memory");
        return;
    }
    /* filters={"type":["container"]} */
    n = snprintf(url, sizeof(url),
                 "http://docker/v%s/events?filters=%%7B%%22type%%22%%3A"
                 "%%5B%%22container%%22%%5D%%7D",
                 d->api);
    if (d->checkpoint > 0) {
        /* Resume just after the last event we saw. */
        int64_t next = d->checkpoint + 1;

        snprintf(url + n, sizeof(url) - (size_t)n, "&since=%lld.%09lld",
                 (long long)(next / 1000000000),
                 (long long)(next % 1000000000));
    }
    memset(&hr, 0, sizeof(hr));
    hr.url = url;
    hr.unix_socket = d->socket;
    hr.connect_timeout_ms = d->timeout_ms;
    hr.max_body = ERR_MAX_BODY; /* only error answers are buffered */
    hr.stream = 1;
    d->phase = W_CONNECTING;
    d->wcall = loop_http(d->l, &hr, on_events_headers, on_events_data,
                         on_events_done, d);
    if (d->wcall == NULL)
        watch_retry(d, "events: could not start the request");
}

static void
on_version_done(const struct http_response *res, void *arg)
{
    struct docker *d = arg;
    char err[256] = "", api[16];

    d->wcall = NULL;
    if (res->error != HTTPC_OK) {
        snprintf(err, sizeof(err), "version: %s", res->errmsg);
    } else if (res->status != 200) {
        snprintf(err, sizeof(err), "version: HTTP %ld", res->status);
    } else if (docker_parse_version(res->body, res->body_len, api, sizeof(api),
                                    err, sizeof(err)) == 0) {
        if (strcmp(api, d->api) != 0)
            log_info(NULL, "docker: using Engine API %s on %s", api,
                     d->socket);
        memcpy(d->api, api, sizeof(d->api));
        open_events(d);
        return;
    }
    watch_retry(d, err);
}

static void
watch_connect(struct docker *d)
{
    struct http_request hr;

    memset(&hr, 0, sizeof(hr));
    hr.url = "http://docker/version";
    hr.unix_socket = d->socket;
    hr.timeout_ms = d->timeout_ms;
    hr.max_body = 1u << 20;
    d->phase = W_VERSION;
    d->wcall = loop_http(d->l, &hr, NULL, NULL, on_version_done, d);
    if (d->wcall == NULL)
        watch_retry(d, "version: could not start the request");
}

static void
on_watch_timer(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    watch_connect(arg);
}

int
docker_watch_start(struct docker *d, const struct docker_watch_cbs *cbs,
                   void *arg, int64_t since_nano)
{
    if (d->phase != W_IDLE)
        return 0;
    d->cbs = *cbs;
    d->cbs_arg = arg;
    d->checkpoint = since_nano;
    watch_connect(d);
    return 0;
}

void
docker_watch_stop(struct docker *d)
{
    evtimer_del(d->wtimer);
    if (d->wcall != NULL) {
        loop_http_cancel(d->wcall);
        d->wcall = NULL;
    }
    if (d->parser != NULL) {
        /* Never free the parser under its own feed (yajl is on the
         * stack); on_events_data frees it when the feed returns. */
        if (d->feeding)
            d->parser_dead = true;
        else
            events_parser_free(d->parser);
        if (!d->feeding)
            d->parser = NULL;
    }
    d->phase = W_IDLE;
}

bool
docker_watch_connected(const struct docker *d)
{
    return d->phase == W_OPEN;
}

int64_t
docker_watch_checkpoint(const struct docker *d)
{
    return d->checkpoint;
}

uint64_t
docker_watch_reconnects(const struct docker *d)
{
    return d->reconnects;
}

uint64_t
docker_watch_events(const struct docker *d)
{
    return d->nevents;
}

const char *
docker_api_version(const struct docker *d)
{
    return d->api[0] ? d->api : NULL;
}

struct docker *
docker_new(struct loop *l, const char *socket, long request_timeout_ms,
           long reconnect_max_ms)
{
    struct docker *d = calloc(1, sizeof(*d));

    if (d == NULL)
        return NULL;
    d->l = l;
    d->socket = strdup(socket);
    d->timeout_ms = request_timeout_ms;
    d->reconnect_max_ms = reconnect_max_ms > 0 ? reconnect_max_ms : 30000;
    d->rnd = (uint32_t)loop_now_ms() ^ ((uint32_t)getpid() << 16) ^ 1u;
    d->wtimer = evtimer_new(loop_base(l), on_watch_timer, d);
    if (d->socket == NULL || d->wtimer == NULL) {
        docker_free(d);
        return NULL;
    }
    return d;
}

void
docker_free(struct docker *d)
{
    if (d == NULL)
        return;
    if (d->wtimer != NULL)
        docker_watch_stop(d);
    if (d->feeding) {
        /* Called from an event callback: the feed below us still uses
         * `d`; on_events_data finishes the job when it returns. */
        while (d->reqs != NULL)
            docker_cancel(d->reqs);
        d->free_pending = true;
        return;
    }
    while (d->reqs != NULL)
        docker_cancel(d->reqs);
    if (d->wtimer != NULL)
        event_free(d->wtimer);
    free(d->socket);
    free(d);
}
