/*
 * docker — the Docker Engine API client; see docker.h.
 *
 * The calls and the events subscription: requests through the loop's
 * libcurl multi handle, their answers fed to docker_parse.h's readers as
 * they arrive (an error answer's first DOCKER_ERR_MAX_BODY bytes are kept
 * for its message), and the subscription's reconnections.
 */
#include "docker.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "docker_parse.h"
#include "log.h"
#include "loop.h"
#include "stream.h"

#define WATCH_BASE_MS 250
#define REJECT_LOG_MS 10000

struct docker {
    struct loop *l;
    char *socket;
    long timeout_ms;
    char api[16];                     /* negotiated version, "" until known */
    struct docker_engine_info engine; /* the last /version answer */
    bool engine_known;
    struct docker_req *reqs; /* in flight, for docker_free */
    /* The labels a policy names, and the operator's filter. */
    struct docker_label_rules rules;

    /* The events subscription: /version, then /events. */
    struct stream *st;
    struct docker_watch_cbs cbs;
    void *cbs_arg;
    struct loop_http_call *wcall;
    struct events_parser *parser;
    int64_t checkpoint;
    uint64_t nevents;
    uint64_t rejected;        /* events stepped over, all parsers */
    uint64_t parser_rejected; /* ... of which the current parser's */
    uint64_t rejected_logged;
    uint64_t reject_log_ms; /* when the last line about them was written */
    /* Since the last subscription (after the first), the engine refused
     * or failed a connection: it was down, not just the stream cut. */
    bool unreachable;
    bool after_outage; /* ... said of the subscription now open */
    bool feeding;      /* inside events_parser_feed */
    /* The attempt's first request is the engine's replay of the events
     * since the checkpoint, bounded (until=) so that its end says it is
     * all read; the live stream follows (open_events). */
    bool replaying;
    bool announced;       /* on_subscribed said for this attempt */
    uint64_t replay_objs; /* objects the replay held, of every type */
    int64_t replay_since; /* the time it was asked from */
    int64_t replay_first; /* the first one's time */
    uint64_t replays_cut; /* replays that may have begun past the checkpoint */
    bool replay_refused;  /* answered 4xx: not asked again */
    void (*on_replayed)(void *arg);
    bool parser_dead;  /* free the parser once the feed returns */
    bool free_pending; /* docker_free ran from an event callback */
};

enum req_kind { REQ_INSPECT, REQ_LIST, REQ_DELETE };

struct docker_req {
    struct docker *d;
    enum req_kind kind;
    struct loop_http_call *call;
    /* Inspect and list answers are parsed as they arrive; an error
     * answer's first DOCKER_ERR_MAX_BODY bytes are kept for its message. */
    struct docker_doc *doc;
    long status;
    char *errbody;
    size_t errlen;
    char parse_err[256];
    union {
        docker_inspect_cb inspect;
        docker_list_cb list;
        docker_list_owned_cb list_owned;
        docker_delete_cb del;
    } cb;
    bool hand_over; /* a list whose answer goes to its callback */
    void *arg;
    struct docker_req *prev, *next;
};

/* ---- requests --------------------------------------------------------- */

static void
docker_req_unlink(struct docker_req *r)
{
    if (r->prev != NULL)
        r->prev->next = r->next;
    else
        r->d->reqs = r->next;
    if (r->next != NULL)
        r->next->prev = r->prev;
}

static void
req_free(struct docker_req *r)
{
    docker_doc_free(r->doc);
    free(r->errbody);
    free(r);
}

/* The engine's {"message": "..."} of an error answer, or a default. */
static void
error_message(const struct loop_http_resp *res, const char *body,
              size_t body_len, const char *what, char *buf, size_t len)
{
    char m[201]; /* the message is cut at 200 bytes */
    bool has;

    if (res->error != HTTPC_OK) {
        snprintf(buf, len, "%s: %s", what, res->errmsg);
        return;
    }
    has = docker_parse_message(body, body_len, m, sizeof(m));
    snprintf(buf, len, "%s: HTTP %ld%s%s", what, res->status, has ? ": " : "",
             has ? m : "");
}

static enum docker_status
status_of(const struct loop_http_resp *res)
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
on_req_headers(long status, void *arg)
{
    struct docker_req *r = arg;

    r->status = status;
}

static int
on_req_data(const char *buf, size_t len, void *arg)
{
    struct docker_req *r = arg;
    size_t room;
    char *nb;

    if (r->status >= 200 && r->status < 300) {
        return docker_doc_feed(r->doc, buf, len, r->parse_err,
                               sizeof(r->parse_err));
    }
    room = DOCKER_ERR_MAX_BODY - r->errlen;
    if (len > room)
        len = room;
    if (len == 0)
        return 0;
    nb = realloc(r->errbody, r->errlen + len + 1);
    if (nb == NULL)
        return 0; /* the message is a nicety */
    memcpy(nb + r->errlen, buf, len);
    r->errlen += len;
    nb[r->errlen] = '\0';
    r->errbody = nb;
    return 0;
}

static const char *
req_what(const struct docker_req *r)
{
    return r->kind == REQ_DELETE    ? "delete"
           : r->kind == REQ_INSPECT ? "inspect"
                                    : "list";
}

static void
docker_req_done(const struct loop_http_resp *res, void *arg)
{
    struct docker_req *r = arg;
    enum docker_status st = status_of(res);
    struct docker_parsed *p = NULL;
    const struct docker_container *cs = NULL;
    struct docker_list *l = NULL;
    size_t n = 0;
    char msg[512] = "";

    r->call = NULL;
    docker_req_unlink(r);
    if (r->parse_err[0] != '\0') {
        st = DOCKER_FAILED;
        snprintf(msg, sizeof(msg), "%s: %s", req_what(r), r->parse_err);
    } else if (st != DOCKER_OK) {
        error_message(res, r->doc != NULL ? r->errbody : res->body,
                      r->doc != NULL ? r->errlen : res->body_len, req_what(r),
                      msg, sizeof(msg));
    }
    /* An answer read whole is ended and built here: it may still fail. */
    switch (r->kind) {
    case REQ_INSPECT:
        if (st == DOCKER_OK &&
            docker_doc_inspect(r->doc, &p, &cs, msg, sizeof(msg)) != 0)
            st = DOCKER_FAILED;
        r->cb.inspect(st, st == DOCKER_OK ? cs : NULL, msg, r->arg);
        break;
    case REQ_LIST:
        if (r->hand_over) {
            /* The answer's tree, NULL unless DOCKER_OK, is the
             * callback's. */
            if (st == DOCKER_OK &&
                docker_doc_list_owned(r->doc, &l, &n, msg, sizeof(msg)) != 0)
                st = DOCKER_FAILED;
            r->cb.list_owned(st, l, n, msg, r->arg);
            break;
        }
        if (st == DOCKER_OK &&
            docker_doc_list(r->doc, &p, &cs, &n, msg, sizeof(msg)) != 0)
            st = DOCKER_FAILED;
        r->cb.list(st, cs, n, msg, r->arg);
        break;
    case REQ_DELETE:
        r->cb.del(st, res->status, msg, r->arg);
        break;
    }
    docker_parsed_free(p);
    req_free(r);
}

static struct docker_req *
docker_start_req(struct docker *d, enum req_kind kind, const char *method,
                 const char *path, size_t max_body, void *cb, void *arg)
{
    struct loop_http_req hr;
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
    if (kind != REQ_DELETE) {
        r->doc = docker_doc_new(kind == REQ_INSPECT ? DOCKER_DOC_INSPECT
                                                    : DOCKER_DOC_LIST,
                                &d->rules);
        if (r->doc == NULL) {
            free(r);
            return NULL;
        }
    }
    snprintf(url, sizeof(url), "http://docker/v%s%s", d->api, path);
    memset(&hr, 0, sizeof(hr));
    hr.method = method;
    hr.url = url;
    hr.unix_socket = d->socket;
    hr.timeout_ms = d->timeout_ms;
    hr.max_body = max_body;
    hr.yield = 1; /* a list of every container can be large */
    r->call =
        loop_http(d->l, &hr, r->doc != NULL ? on_req_headers : NULL,
                  r->doc != NULL ? on_req_data : NULL, docker_req_done, r);
    if (r->call == NULL) {
        req_free(r);
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
    return docker_start_req(d, REQ_INSPECT, "GET", path, DOCKER_ERR_MAX_BODY,
                            (void *)cb, arg);
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
    return docker_start_req(d, REQ_LIST, "GET", path, DOCKER_ERR_MAX_BODY,
                            (void *)cb, arg);
}

struct docker_req *
docker_list_all(struct docker *d, docker_list_owned_cb cb, void *arg)
{
    struct docker_req *r = docker_list(d, NULL, NULL, arg);

    if (r != NULL) {
        r->hand_over = true;
        r->cb.list_owned = cb;
        /* A large answer: given back a few chunks per loop turn
         * (docker_list_free_some), with no heap trim. */
        docker_doc_set_mapped(r->doc);
    }
    return r;
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
    return docker_start_req(d, REQ_DELETE, "DELETE", path, DOCKER_ERR_MAX_BODY,
                            (void *)cb, arg);
}

void
docker_cancel(struct docker_req *r)
{
    if (r == NULL)
        return;
    loop_http_cancel(r->call);
    docker_req_unlink(r);
    req_free(r);
}

/* ---- the events subscription ----------------------------------------- */

static void
docker_watch_retry(struct docker *d, const char *why)
{
    d->replaying = false;
    if (d->parser != NULL) {
        events_parser_free(d->parser);
        d->parser = NULL;
    }
    d->wcall = NULL;
    stream_failed(d->st, why);
}

static void
docker_on_stream_lost(const char *why, uint64_t retry_ms, void *arg)
{
    struct docker *d = arg;

    if (d->cbs.on_lost != NULL)
        d->cbs.on_lost(why, retry_ms, d->cbs_arg);
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
    if (!d->announced) {
        d->announced = true;
        d->after_outage = stream_was_open(d->st) && d->unreachable;
        d->unreachable = false;
        stream_opened(d->st);
        if (d->cbs.on_subscribed != NULL)
            d->cbs.on_subscribed(d->cbs_arg);
    }
    if (!d->replaying && d->on_replayed != NULL)
        d->on_replayed(d->cbs_arg);
}

/* Events the parser stepped over: counted, and one line about them at
 * most every REJECT_LOG_MS, however many there are. Skipped and rejected
 * objects move the checkpoint too (when they had a time), so a resume
 * does not ask for them again. */
static void
note_rejections(struct docker *d)
{
    uint64_t n = events_parser_rejected(d->parser), now;
    int64_t t = events_parser_last_time(d->parser);

    if (t > d->checkpoint)
        d->checkpoint = t;
    if (n == d->parser_rejected)
        return;
    d->rejected += n - d->parser_rejected;
    d->parser_rejected = n;
    if (d->cbs.on_gap != NULL)
        d->cbs.on_gap(d->cbs_arg);
    now = loop_now_ms();
    if (d->reject_log_ms != 0 && now - d->reject_log_ms < REJECT_LOG_MS)
        return;
    log_warn(NULL,
             "events stream: %llu event(s) stepped over, %llu in all "
             "(the last: %s)",
             (unsigned long long)(d->rejected - d->rejected_logged),
             (unsigned long long)d->rejected,
             events_parser_last_rejection(d->parser));
    d->rejected_logged = d->rejected;
    d->reject_log_ms = now;
}

static int
on_events_data(const char *buf, size_t len, void *arg)
{
    struct docker *d = arg;
    int rc;

    if (!stream_is_open(d->st))
        return 0; /* an error body; on_done reports the status */
    d->feeding = true;
    rc = events_parser_feed(d->parser, buf, len);
    d->feeding = false;
    if (!d->parser_dead)
        note_rejections(d);
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

static void open_events(struct docker *d);
static void replay_read(struct docker *d);

static void
on_events_done(const struct loop_http_resp *res, void *arg)
{
    struct docker *d = arg;
    char why[300];

    d->wcall = NULL;
    if (d->replaying && res->error == HTTPC_OK && res->status == 200 &&
        d->parser != NULL && events_parser_pending(d->parser) == 0) {
        replay_read(d);
        return;
    }
    if (d->replaying && res->error == HTTPC_OK && res->status >= 400 &&
        res->status < 500) {
        /* Something in front of the engine refuses the bounded replay:
         * the live stream's own replays it, as before, unbounded. */
        log_warn(NULL,
                 "events: the replay with until= refused (HTTP %ld); "
                 "resuming without it",
                 res->status);
        d->replay_refused = true;
        d->replaying = false;
        events_parser_free(d->parser);
        d->parser = NULL;
        open_events(d);
        return;
    }
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
    docker_watch_retry(d, why);
}

static int64_t
wall_now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/*
 * The replay is read whole: every event the engine still held since the
 * checkpoint is in, the dies of containers removed meanwhile included.
 * A replay that holds the engine's whole buffer, all of it past the
 * checkpoint, may have begun later than asked: what came between was
 * pushed out, and exits seen only there are lost.
 */
static void
replay_read(struct docker *d)
{
    d->replay_first = events_parser_first_time(d->parser);
    d->replay_objs = events_parser_count(d->parser) +
                     events_parser_skipped(d->parser) +
                     events_parser_rejected(d->parser);
    note_rejections(d);
    events_parser_free(d->parser);
    d->parser = NULL;
    d->replaying = false;
    if (d->replay_objs >= DOCKER_ENGINE_EVENTS_KEPT &&
        d->replay_first > d->replay_since) {
        d->replays_cut++;
        log_warn(NULL,
                 "events: the engine's replay held its whole buffer (%llu "
                 "events), the first %.3f s after the checkpoint: events "
                 "in between are lost, and an exit seen only there is "
                 "reported with its code unknown unless the container or "
                 "its record still has it",
                 (unsigned long long)d->replay_objs,
                 (double)(d->replay_first - d->replay_since) / 1e9);
    } else {
        log_debug(NULL,
                  "events: replay since the checkpoint read, %llu "
                  "events",
                  (unsigned long long)d->replay_objs);
    }
    open_events(d);
}

static void
open_events(struct docker *d)
{
    struct loop_http_req hr;
    char url[512];
    int n;
    int64_t next = 0, until = 0;

    if (d->checkpoint > 0) {
        /* Resume just after the last event we saw (the engine's times
         * are checked, but a checkpoint may come from disk). */
        next = d->checkpoint < INT64_MAX ? d->checkpoint + 1 : d->checkpoint;
        /* First the replay, bounded, so that its end says when every
         * event it holds is read: the relist that follows a subscription
         * takes a container it does not list for removed, and a die
         * replayed after that came too late (the engine writes the
         * replay only after the stream's headers). Not when the
         * checkpoint is ahead of the clock: the engine refuses an until
         * before since. */
        if (!d->announced && !d->replay_refused) {
            until = wall_now_ns();
            d->replaying = until > next;
        }
    }
    d->parser = events_parser_new(NULL, on_watch_event, d);
    if (d->parser == NULL) {
        docker_watch_retry(d, "events: out of memory");
        return;
    }
    events_parser_set_labels(d->parser, d->rules.wanted, d->rules.wanted_arg);
    events_parser_set_filter(d->parser, d->rules.kept, d->rules.kept_arg);
    d->parser_rejected = 0;
    if (d->replaying) {
        /* Every type: the count tells whether the engine's buffer was
         * full (it keeps the last events of every type together). */
        n = snprintf(url, sizeof(url),
                     "http://docker/v%s/events?until=%lld.%09lld", d->api,
                     (long long)(until / 1000000000),
                     (long long)(until % 1000000000));
        d->replay_since = next;
    } else {
        /* Only the actions the parser maps (events_filter_query). */
        n = snprintf(url, sizeof(url), "http://docker/v%s/events?filters=%s",
                     d->api, events_filter_query);
    }
    if (next > 0)
        snprintf(url + n, sizeof(url) - (size_t)n, "&since=%lld.%09lld",
                 (long long)(next / 1000000000),
                 (long long)(next % 1000000000));
    memset(&hr, 0, sizeof(hr));
    hr.url = url;
    hr.unix_socket = d->socket;
    hr.connect_timeout_ms = d->timeout_ms;
    hr.max_body = DOCKER_ERR_MAX_BODY; /* only error answers are buffered */
    hr.stream = 1;
    hr.yield = 1; /* a burst after a reconnection replays thousands */
    if (!d->announced)
        stream_connecting(d->st); /* else open since the replay's headers */
    d->wcall = loop_http(d->l, &hr, on_events_headers, on_events_data,
                         on_events_done, d);
    if (d->wcall == NULL)
        docker_watch_retry(d, "events: could not start the request");
}

static void
on_version_done(const struct loop_http_resp *res, void *arg)
{
    struct docker *d = arg;
    char err[256] = "";
    struct docker_engine_info info;

    d->wcall = NULL;
    if (res->error != HTTPC_OK) {
        snprintf(err, sizeof(err), "version: %s", res->errmsg);
        d->unreachable = res->error != HTTPC_ERR_TOO_LARGE;
    } else if (res->status != 200) {
        snprintf(err, sizeof(err), "version: HTTP %ld", res->status);
    } else if (docker_parse_engine(res->body, res->body_len, &info, err,
                                   sizeof(err)) == 0) {
        /* Said at the start and again whenever it changed (an engine
         * upgraded or replaced under reapd). */
        if (!d->engine_known || memcmp(&info, &d->engine, sizeof(info)) != 0)
            log_info(NULL,
                     "docker: engine %s (API %s; reapd uses %s), "
                     "containerd %s, on %s",
                     info.version[0] ? info.version : "(unknown version)",
                     info.engine_api, info.api,
                     info.containerd_version[0] ? info.containerd_version
                                                : "(unknown version)",
                     d->socket);
        d->engine = info;
        d->engine_known = true;
        memcpy(d->api, info.api, sizeof(d->api));
        open_events(d);
        return;
    }
    docker_watch_retry(d, err);
}

static void
docker_watch_connect(void *arg)
{
    struct docker *d = arg;
    struct loop_http_req hr;

    d->announced = false;
    d->replaying = false;
    memset(&hr, 0, sizeof(hr));
    hr.url = "http://docker/version";
    hr.unix_socket = d->socket;
    hr.timeout_ms = d->timeout_ms;
    hr.max_body = 1u << 20;
    stream_connecting(d->st);
    d->wcall = loop_http(d->l, &hr, NULL, NULL, on_version_done, d);
    if (d->wcall == NULL)
        docker_watch_retry(d, "version: could not start the request");
}

int
docker_watch_start(struct docker *d, const struct docker_watch_cbs *cbs,
                   void *arg, int64_t since_nano)
{
    if (stream_phase(d->st) != STREAM_IDLE)
        return 0;
    d->cbs = *cbs;
    d->cbs_arg = arg;
    d->checkpoint = since_nano;
    stream_start(d->st);
    return 0;
}

void
docker_watch_stop(struct docker *d)
{
    stream_stop(d->st);
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
}

bool
docker_watch_connected(const struct docker *d)
{
    return stream_is_open(d->st);
}

void
docker_watch_on_replayed(struct docker *d, void (*cb)(void *arg))
{
    d->on_replayed = cb;
}

uint64_t
docker_watch_replays_cut(const struct docker *d)
{
    return d->replays_cut;
}

int64_t
docker_watch_checkpoint(const struct docker *d)
{
    return d->checkpoint;
}

uint64_t
docker_watch_reconnects(const struct docker *d)
{
    return stream_reconnects(d->st);
}

uint64_t
docker_watch_events(const struct docker *d)
{
    return d->nevents;
}

uint64_t
docker_watch_rejected(const struct docker *d)
{
    return d->rejected;
}

void
docker_set_labels(struct docker *d, events_label_cb wanted, void *arg)
{
    d->rules.wanted = wanted;
    d->rules.wanted_arg = arg;
    if (d->parser != NULL)
        events_parser_set_labels(d->parser, wanted, arg);
}

void
docker_set_label_filter(struct docker *d, events_label_cb kept, void *arg)
{
    d->rules.kept = kept;
    d->rules.kept_arg = arg;
    if (d->parser != NULL)
        events_parser_set_filter(d->parser, kept, arg);
}

bool
docker_watch_unreachable(const struct docker *d)
{
    return d->unreachable;
}

bool
docker_watch_after_outage(const struct docker *d)
{
    return stream_is_open(d->st) && d->after_outage;
}

const struct docker_engine_info *
docker_engine(const struct docker *d)
{
    return d->engine_known ? &d->engine : NULL;
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
    static const struct stream_cbs scbs = {
        .connect = docker_watch_connect,
        .lost = docker_on_stream_lost,
    };
    struct docker *d = calloc(1, sizeof(*d));

    if (d == NULL)
        return NULL;
    d->l = l;
    d->socket = strdup(socket);
    d->timeout_ms = request_timeout_ms;
    d->st =
        stream_new(l, &scbs, d, WATCH_BASE_MS,
                   (uint64_t)(reconnect_max_ms > 0 ? reconnect_max_ms : 30000),
                   (uint32_t)loop_now_ms() ^ ((uint32_t)getpid() << 16) ^ 1u);
    if (d->socket == NULL || d->st == NULL) {
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
    if (d->st != NULL)
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
    stream_free(d->st);
    free(d->socket);
    free(d);
}
