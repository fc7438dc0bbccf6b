/*
 * readapi — reports by cursor, by container and as a stream, and the
 * requests held open for them; see readapi.h. Answers are built with
 * yajl_gen; a held request is a struct held, tied to its connection
 * through httpd_hold so that it goes when the connection does.
 */
#include "readapi.h"

#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bounds.h"
#include "docker.h"
#include "feed.h"
#include "httpd.h"
#include "json.h"
#include "jsonw.h"
#include "lifecycle.h"
#include "log.h"
#include "loop.h"
#include "reaper.h"
#include "store.h"

#define REPORTS_DEFAULT 50
#define REPORTS_MAX     1000

/* The held requests (waits, drains, audits, streams), per listener. */
#define WAIT_MAX_S         300
#define HELD_MAX           512
#define STREAMS_MAX        16
#define STREAM_PAGE        100
#define STREAM_CHUNK_BYTES (256u << 10)
#define HELD_TICK_MS       1000 /* a held client's liveness, a wait's end */
#define DRAIN_TICK_MS      200

/*
 * A request answered later: a wait for a container's report, a drain, an
 * audit, or the report stream (answered for as long as the client
 * reads). It belongs to its connection: when the connection goes (the
 * client went away, a write failed, reapd stops) the hold goes with it,
 * unanswered.
 */
enum held_kind { H_WAIT, H_DRAIN, H_STREAM, H_AUDIT };

struct held {
    struct readapi *ra;
    struct httpd_conn *c;
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

struct readapi {
    struct loop *l;
    struct reaper *reaper;
    struct store *store; /* borrowed; NULL: no durable state */
    struct feed *feed;   /* borrowed; NULL: no waits, no streams */
    struct held *held;   /* every held request */
    size_t nheld, nstreams;
    uint64_t held_rejected, streams_cut;
    struct httpd_ratelog log_cut;
};

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
void
readapi_serve_reports(struct readapi *ra, struct evhttp_request *req)
{
    struct httpd_qparam p[] = {
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

    if (httpd_parse_query(req, &kv, p, 4, err, sizeof(err)) != 0)
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
    if (ra->store == NULL) {
        httpd_send_error(req, 503, "Service Unavailable", "no durable state");
        goto out;
    }
    if (store_after(ra->store, &q, &list) < 0) {
        httpd_send_error(req, 500, "Internal Server Error",
                         store_errmsg(ra->store));
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
    httpd_send_json(req, 200, "OK", g);
    yajl_gen_free(g);
    goto out;
bad:
    httpd_send_error(req, 400, "Bad Request", err);
out:
    store_reports_free(&list);
    evhttp_clear_headers(&kv);
}

/* Frees what the read API has of a hold; its connection is the
 * caller's business. */
static void
held_free(struct held *h)
{
    struct readapi *ra = h->ra;

    if (h->prev != NULL)
        h->prev->next = h->next;
    else
        ra->held = h->next;
    if (h->next != NULL)
        h->next->prev = h->prev;
    ra->nheld--;
    if (h->kind == H_STREAM)
        ra->nstreams--;
    feed_sub_free(h->sub);
    if (h->tick != NULL)
        event_free(h->tick);
    free(h);
}

/* The connection is going, the request unanswered. */
static void
held_dropped(void *arg)
{
    held_free(arg);
}

/* The hold ends and its request is answered now: it has the answer
 * deadline like any other. Returns the request to answer. */
static struct evhttp_request *
held_end(struct held *h)
{
    struct evhttp_request *req = h->req;
    struct httpd_conn *c = h->c;

    held_free(h);
    httpd_hold_end(c);
    return req;
}

static void on_held_tick(evutil_socket_t fd, short what, void *arg);
static void on_held_feed(struct feed_sub *sub, void *arg);

/*
 * Holds `req` on connection `c` (NULL: an untracked connection, which
 * cannot be held). Returns NULL, having answered 503, when the bound is
 * reached or memory is short.
 */
static struct held *
held_new(struct readapi *ra, struct httpd_conn *c, struct evhttp_request *req,
         enum held_kind kind, uint64_t wait_ms, const char *feed_id)
{
    struct held *h = NULL;
    uint64_t now = loop_now_ms();

    if (c == NULL || ra->nheld >= HELD_MAX ||
        (kind == H_STREAM && ra->nstreams >= STREAMS_MAX))
        goto busy;
    h = calloc(1, sizeof(*h));
    if (h == NULL)
        goto busy;
    h->ra = ra;
    h->c = c;
    h->req = req;
    h->kind = kind;
    h->until_ms = now + wait_ms;
    h->tick = evtimer_new(loop_base(ra->l), on_held_tick, h);
    if (h->tick == NULL)
        goto busy;
    if (kind == H_WAIT || kind == H_STREAM) {
        h->sub = ra->feed != NULL
                     ? feed_sub_new(ra->feed, feed_id, on_held_feed, h)
                     : NULL;
        if (h->sub == NULL)
            goto busy;
    }
    if (feed_id != NULL)
        snprintf(h->id, sizeof(h->id), "%s", feed_id);
    h->next = ra->held;
    if (ra->held != NULL)
        ra->held->prev = h;
    ra->held = h;
    ra->nheld++;
    if (kind == H_STREAM)
        ra->nstreams++;
    httpd_hold(c, req, held_dropped, h);
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
    ra->held_rejected++;
    evhttp_add_header(evhttp_request_get_output_headers(req), "Retry-After",
                      "1");
    httpd_send_error(req, 503, "Service Unavailable",
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
    httpd_reply(req, 200, "OK", b);
    evbuffer_free(b);
}

/* 202 with the state of a container tracked but not reported yet; 404
 * when reapd knows nothing of it. */
static void
send_unreported(struct readapi *ra, struct evhttp_request *req, const char *id)
{
    struct reaper_view v;
    yajl_gen g;

    if (!reaper_lookup(ra->reaper, id, &v)) {
        httpd_send_error(req, 404, "Not Found",
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
    httpd_send_json(req, 202, "Accepted", g);
    yajl_gen_free(g);
}

/*
 * A wait's check: answers (ending the hold, if any) when the report is
 * there, when the store fails, when the container is no longer tracked,
 * or when `final`; else returns false and the wait goes on.
 */
static bool
wait_check(struct readapi *ra, struct held *h, struct evhttp_request *req,
           const char *wanted, bool final)
{
    struct store_report r;
    struct reaper_view v;
    char id[STORE_ID_MAX + 1]; /* `wanted` may be h's, which may end here */
    int rc;

    snprintf(id, sizeof(id), "%s", wanted);
    rc = store_latest_report_body(ra->store, id, &r);
    if (rc == STORE_NOT_FOUND && !final && reaper_lookup(ra->reaper, id, &v))
        return false;
    if (h != NULL)
        req = held_end(h);
    if (rc == STORE_OK)
        send_report(req, &r);
    else if (rc == STORE_NOT_FOUND)
        send_unreported(ra, req, id);
    else
        httpd_send_error(req, 500, "Internal Server Error",
                         store_errmsg(ra->store));
    store_report_clear(&r);
    return true;
}

void
readapi_serve_container_report(struct readapi *ra, struct httpd_conn *c,
                               struct evhttp_request *req, const char *id)
{
    struct httpd_qparam p[] = {
        {.key = "wait", .is_int = true, .min = 1, .max = WAIT_MAX_S},
    };
    struct evkeyvalq kv;
    char err[256];

    if (httpd_parse_query(req, &kv, p, 1, err, sizeof(err)) != 0) {
        httpd_send_error(req, 400, "Bad Request", err);
        goto out;
    }
    if (ra->store == NULL) {
        httpd_send_error(req, 503, "Service Unavailable", "no durable state");
        goto out;
    }
    if (wait_check(ra, NULL, req, id, !p[0].set))
        goto out;
    held_new(ra, c, req, H_WAIT, (uint64_t)p[0].ival * 1000, id);
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
    if (store_after(h->ra->store, &q, &list) < 0) {
        log_error(NULL, "status: report stream: %s",
                  store_errmsg(h->ra->store));
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

void
readapi_serve_stream(struct readapi *ra, struct httpd_conn *c,
                     struct evhttp_request *req)
{
    struct httpd_qparam p[] = {
        {.key = "after", .is_int = true, .min = 0, .max = LONG_MAX},
    };
    struct evkeyvalq kv;
    struct held *h;
    char err[256];
    int64_t last = 0;

    if (httpd_parse_query(req, &kv, p, 1, err, sizeof(err)) != 0) {
        httpd_send_error(req, 400, "Bad Request", err);
        goto out;
    }
    if (ra->store == NULL || ra->feed == NULL) {
        httpd_send_error(req, 503, "Service Unavailable", "no durable state");
        goto out;
    }
    if (evhttp_request_get_command(req) == EVHTTP_REQ_HEAD) {
        httpd_send_error(req, 405, "Method Not Allowed", "GET the stream");
        goto out;
    }
    if (!p[0].set && store_last_seq(ra->store, &last) < 0) {
        httpd_send_error(req, 500, "Internal Server Error",
                         store_errmsg(ra->store));
        goto out;
    }
    h = held_new(ra, c, req, H_STREAM, 0, NULL);
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
        wait_check(h->ra, h, NULL, h->id, false);
}

/* ---- the admin socket's waits: drain and audit ------------------------ */

bool
readapi_drain_counts(struct readapi *ra, struct readapi_drain *d, char *err,
                     size_t errlen)
{
    static const enum lc_state busy[] = {
        LC_SETTLING,   LC_DELAYING,        LC_QUEUED,       LC_REMOVING,
        LC_CONFIRMING, LC_TASK_CONFIRMING, LC_TASK_REAPING,
    };
    struct reaper_stats st;
    struct store_counts sc = {0};
    size_t i;

    reaper_stats(ra->reaper, &st);
    d->cleaning = st.reports_unsaved;
    for (i = 0; i < sizeof(busy) / sizeof(busy[0]); i++)
        d->cleaning += st.by_state[busy[i]];
    if (ra->store != NULL && store_counts(ra->store, &sc) < 0) {
        snprintf(err, errlen, "%s", store_errmsg(ra->store));
        return false;
    }
    d->pending = sc.pending;
    return true;
}

/* Answers a drain: 200 once drained, 202 with the counts when `final`;
 * false (nothing sent) to wait on. */
static bool
drain_check(struct readapi *ra, struct held *h, struct evhttp_request *req,
            bool final)
{
    struct readapi_drain d;
    char err[256];
    yajl_gen g;
    bool drained, ok = readapi_drain_counts(ra, &d, err, sizeof(err));

    drained = ok && d.cleaning == 0 && d.pending == 0;
    if (ok && !drained && !final)
        return false;
    if (h != NULL)
        req = held_end(h);
    if (!ok) {
        httpd_send_error(req, 500, "Internal Server Error", err);
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
    httpd_send_json(req, drained ? 200 : 202, drained ? "OK" : "Accepted", g);
    yajl_gen_free(g);
    return true;
}

void
readapi_serve_drain(struct readapi *ra, struct httpd_conn *c,
                    struct evhttp_request *req)
{
    struct httpd_qparam p[] = {
        {.key = "wait", .is_int = true, .min = 1, .max = WAIT_MAX_S},
    };
    struct evkeyvalq kv;
    char err[256];

    if (httpd_parse_query(req, &kv, p, 1, err, sizeof(err)) != 0)
        httpd_send_error(req, 400, "Bad Request", err);
    else if (!drain_check(ra, NULL, req, !p[0].set))
        held_new(ra, c, req, H_DRAIN, (uint64_t)p[0].ival * 1000, NULL);
    evhttp_clear_headers(&kv);
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

void
readapi_gen_leaks(yajl_gen g, struct reaper *r)
{
    yajl_gen_array_open(g);
    reaper_foreach_leak(r, visit_leak, g);
    yajl_gen_array_close(g);
}

/* Answers an audit once the task list it asked for is done: 200 with
 * what it found, 502 when containerd did not answer; 202 when `final`
 * comes first. False (nothing sent) to wait on. */
static bool
audit_check(struct readapi *ra, struct held *h, struct evhttp_request *req,
            uint64_t target, bool final)
{
    struct reaper_audit au;
    yajl_gen g;

    reaper_audit_state(ra->reaper, &au);
    if (au.lists_done < target && !final)
        return false;
    if (h != NULL)
        req = held_end(h);
    if (au.lists_done >= target && !au.ok) {
        httpd_send_error(req, 502, "Bad Gateway", au.error);
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
        readapi_gen_leaks(g, ra->reaper);
    }
    yajl_gen_map_close(g);
    if (au.lists_done >= target)
        httpd_send_json(req, 200, "OK", g);
    else
        httpd_send_json(req, 202, "Accepted", g);
    yajl_gen_free(g);
    return true;
}

void
readapi_serve_audit(struct readapi *ra, struct httpd_conn *c,
                    struct evhttp_request *req)
{
    struct httpd_qparam p[] = {
        {.key = "wait", .is_int = true, .min = 1, .max = WAIT_MAX_S},
    };
    struct evkeyvalq kv;
    struct held *h;
    uint64_t target;
    char err[256];

    if (httpd_parse_query(req, &kv, p, 1, err, sizeof(err)) != 0) {
        httpd_send_error(req, 400, "Bad Request", err);
        goto out;
    }
    target = reaper_audit_now(ra->reaper);
    if (target == 0) {
        httpd_send_error(req, 409, "Conflict",
                         "the containerd channel is off (containerd.socket)");
        goto out;
    }
    /* An operator's request, for the record, as the admin writes are. */
    log_info(NULL, "admin: containerd audit asked for");
    if (audit_check(ra, NULL, req, target, false))
        goto out;
    h = held_new(ra, c, req, H_AUDIT,
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
    struct readapi *ra = h->ra;
    uint64_t now = loop_now_ms(), tick = HELD_TICK_MS;
    bool final = now >= h->until_ms;
    char who[128];

    (void)fd;
    (void)what;
    if (httpd_conn_gone(h->c)) {
        httpd_conn_close(h->c); /* frees h */
        return;
    }
    switch (h->kind) {
    case H_WAIT:
        if (wait_check(ra, h, NULL, h->id, final))
            return;
        break;
    case H_DRAIN:
        if (drain_check(ra, h, NULL, final))
            return;
        tick = DRAIN_TICK_MS;
        break;
    case H_AUDIT:
        if (audit_check(ra, h, NULL, h->audit_target, final))
            return;
        tick = DRAIN_TICK_MS;
        break;
    case H_STREAM:
        if (h->writing &&
            (h->writing_since == 0 ||
             now - h->writing_since >= httpd_conn_deadline_ms(h->c))) {
            ra->streams_cut++;
            httpd_ratelog(&ra->log_cut, LOG_LEVEL_INFO,
                          "status: cut the report stream to %s: %s",
                          httpd_conn_peer(h->c, who, sizeof(who)),
                          h->writing_since == 0
                              ? "reapd could not read its reports"
                              : "it does not read what is sent");
            httpd_conn_close(h->c); /* frees h */
            return;
        }
        loop_timer_ms(h->tick, HELD_TICK_MS);
        return;
    }
    if (h->until_ms - now < tick)
        tick = h->until_ms - now;
    loop_timer_ms(h->tick, tick);
}

struct readapi *
readapi_new(struct loop *l, struct reaper *r)
{
    struct readapi *ra = calloc(1, sizeof(*ra));

    if (ra == NULL)
        return NULL;
    ra->l = l;
    ra->reaper = r;
    return ra;
}

void
readapi_set_store(struct readapi *ra, struct store *st)
{
    ra->store = st;
}

void
readapi_set_feed(struct readapi *ra, struct feed *f)
{
    ra->feed = f;
}

void
readapi_stats(const struct readapi *ra, struct readapi_stats *st)
{
    st->held = ra->nheld;
    st->streams = ra->nstreams;
    st->rejected = ra->held_rejected;
    st->cut = ra->streams_cut;
}

void
readapi_free(struct readapi *ra)
{
    if (ra == NULL)
        return;
    /* The server's connections are gone, their holds with them. */
    while (ra->held != NULL)
        held_free(ra->held);
    free(ra);
}
