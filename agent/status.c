/*
 * status — the router of the status endpoint and the admin socket; see
 * status.h. It decides who may ask what and which module answers; its
 * own answers (probes, /v1/status, /v1/containers, /v1/leaks, /v1/config,
 * /v1/schema/report) are built with yajl_gen and sent in one go.
 */
#include "status.h"

#include <event2/buffer.h>
#include <event2/http.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>
#include <yajl/yajl_gen.h>

#include "admin.h"
#include "config.h"
#include "docker.h"
#include "httpd.h"
#include "jsonw.h"
#include "lifecycle.h"
#include "metrics.h"
#include "readapi.h"
#include "reaper.h"
#include "report.h"
#include "store.h"
#include "upstream.h"

#ifndef REAPD_REVISION /* set by CMakeLists.txt */
#define REAPD_REVISION "unknown"
#endif

struct status {
    struct httpd *http;
    struct readapi *ra;
    struct reaper *reaper;
    struct store *store;      /* may be NULL */
    const struct config *cfg; /* may be NULL: /v1/config says 503 */
    double start_time; /* the process's, seconds since the epoch; 0: unknown */
    char *token;       /* NULL: no auth */
    uint64_t reloads_ok, reloads_rejected;
    uint64_t rejected_auth;
    /* The admin socket: the write operations too, no token. */
    bool admin;
    struct outbox *outbox; /* borrowed; NULL: no upstream */
    struct upstream *up;   /* borrowed; NULL: no upstream */
    struct status *next_status;
};

/* Every listener, for the held requests /metrics counts on all of them.
 * One loop, one thread: no lock. */
static struct status *all_status;

/* Probes are answered to anyone, on a refused connection too: a kubelet
 * or systemd has no token to send, and has to hear from the loop
 * whatever other clients do. */
static const char *const probes[] = {"/livez", "/readyz", NULL};

static void
serve_livez(struct evhttp_request *req)
{
    yajl_gen g = yajl_gen_alloc(NULL);

    if (g == NULL) {
        evhttp_send_error(req, 500, NULL);
        return;
    }
    yajl_gen_map_open(g);
    jw_key_bool(g, "live", 1);
    yajl_gen_map_close(g);
    httpd_send_json(req, 200, "OK", g);
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
    httpd_send_json(req, ready ? 200 : 503,
                    ready ? "OK" : "Service Unavailable", g);
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
        httpd_send_json(req, 200, "OK", f.g);
    } else if (f.found) {
        httpd_send_json(req, 200, "OK", f.g);
    } else {
        httpd_send_error(req, 404, "Not Found", "container not tracked");
    }
    yajl_gen_free(f.g);
}

static void
serve_metrics(struct status *s, struct evhttp_request *req)
{
    struct metrics_src src = {.reaper = s->reaper,
                              .store = s->store,
                              .up = s->up,
                              .revision = REAPD_REVISION,
                              .start_time = s->start_time,
                              .reloads_ok = s->reloads_ok,
                              .reloads_rejected = s->reloads_rejected,
                              .rejected_auth = s->rejected_auth};
    const struct status *t;

    httpd_stats(s->http, &src.http);
    for (t = all_status; t != NULL; t = t->next_status) {
        struct readapi_stats one;

        readapi_stats(t->ra, &one);
        src.held.held += one.held;
        src.held.streams += one.streams;
        src.held.rejected += one.rejected;
        src.held.cut += one.cut;
    }
    metrics_serve(&src, req);
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
    httpd_reply(req, 200, "OK", b);
    evbuffer_free(b);
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
    readapi_gen_leaks(g, s->reaper);
    yajl_gen_map_close(g);
    httpd_send_json(req, 200, "OK", g);
    yajl_gen_free(g);
}

/* GET /v1/status: one look at the node for an operator or a probe. */
static void
serve_status(struct status *s, struct evhttp_request *req)
{
    const char *why = NULL;
    bool ready = reaper_ready(s->reaper, &why);
    struct store_counts sc = {0};
    struct reaper_stats st;
    struct readapi_drain d = {0};
    int64_t last = 0;
    char err[256];
    yajl_gen g;
    int i;

    reaper_stats(s->reaper, &st);
    if (s->store != NULL && (store_counts(s->store, &sc) < 0 ||
                             store_last_seq(s->store, &last) < 0)) {
        httpd_send_error(req, 500, "Internal Server Error",
                         store_errmsg(s->store));
        return;
    }
    if (!readapi_drain_counts(s->ra, &d, err, sizeof(err))) {
        httpd_send_error(req, 500, "Internal Server Error", err);
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
    httpd_send_json(req, 200, "OK", g);
    yajl_gen_free(g);
}

static void
serve_config(struct status *s, struct evhttp_request *req)
{
    struct evbuffer *b;
    char *json;
    size_t len;

    if (s->cfg == NULL) {
        httpd_send_error(req, 503, "Service Unavailable", "no config yet");
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
    httpd_reply(req, 200, "OK", b);
    evbuffer_free(b);
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
        return httpd_authorized(s->token, req);
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
    httpd_send_error(req, 401, "Unauthorized", msg);
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

static bool
is_probe(const char *path)
{
    const char *const *p;

    for (p = probes; *p != NULL; p++)
        if (strcmp(path, *p) == 0)
            return true;
    return false;
}

/* The write routes: only the admin socket takes them, and only POST. */
static void
serve_write(struct status *s, struct httpd_conn *c, struct evhttp_request *req,
            const char *path, const char *rid)
{
    if (!s->admin || evhttp_request_get_command(req) != EVHTTP_REQ_POST) {
        evhttp_add_header(evhttp_request_get_output_headers(req), "Allow",
                          s->admin ? "POST" : "");
        httpd_send_error(req, 405, "Method Not Allowed",
                         s->admin ? "POST only"
                                  : "the status listener is read-only: "
                                    "writes go to the admin socket "
                                    "(admin.socket)");
        return;
    }
    if (strcmp(path, "/v1/drain") == 0)
        readapi_serve_drain(s->ra, c, req);
    else if (strcmp(path, "/v1/audit") == 0)
        readapi_serve_audit(s->ra, c, req);
    else if (strcmp(path, "/v1/reports/requeue") == 0)
        admin_serve_requeue(s->store, s->outbox, req, NULL);
    else
        admin_serve_requeue(s->store, s->outbox, req, rid);
}

/* Every request the server lets through: who may ask, then the route. */
static void
on_request(struct httpd_conn *c, struct evhttp_request *req, const char *path,
           void *arg)
{
    struct status *s = arg;
    enum evhttp_cmd_type m = evhttp_request_get_command(req);
    char rid[STORE_ID_MAX + 1];
    bool open = is_probe(path);

    if (!s->admin && !open && !may_read(s, req, path)) {
        s->rejected_auth++;
        evhttp_add_header(evhttp_request_get_output_headers(req),
                          "WWW-Authenticate", "Bearer realm=\"reapd\"");
        send_unauthorized(s, req);
        return;
    }
    if (write_route(path, rid, sizeof(rid))) {
        serve_write(s, c, req, path, rid);
        return;
    }
    if (m != EVHTTP_REQ_GET && m != EVHTTP_REQ_HEAD) {
        evhttp_add_header(evhttp_request_get_output_headers(req), "Allow",
                          "GET, HEAD");
        httpd_send_error(req, 405, "Method Not Allowed", "read-only endpoint");
        return;
    }
    if (strcmp(path, "/livez") == 0) {
        serve_livez(req);
    } else if (strcmp(path, "/readyz") == 0) {
        serve_readyz(s, req);
    } else if (strcmp(path, "/metrics") == 0) {
        serve_metrics(s, req);
    } else if (strcmp(path, "/v1/reports") == 0) {
        readapi_serve_reports(s->ra, req);
    } else if (strcmp(path, "/v1/reports/stream") == 0) {
        readapi_serve_stream(s->ra, c, req);
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
        readapi_serve_container_report(s->ra, c, req, rid);
    } else {
        httpd_send_error(req, 404, "Not Found", "no such endpoint");
    }
}

static struct status *
status_make(struct loop *l, const char *listen, struct reaper *reaper,
            bool admin)
{
    struct status *s = calloc(1, sizeof(*s));
    struct httpd_opts o = {.name = admin ? "admin socket" : "status endpoint",
                           .private_socket = admin,
                           .probes = probes,
                           .on_request = on_request};

    if (s == NULL)
        return NULL;
    o.arg = s;
    s->admin = admin;
    s->reaper = reaper;
    s->start_time = metrics_process_start_time();
    s->next_status = all_status;
    all_status = s;
    s->ra = readapi_new(l, reaper);
    if (s->ra == NULL)
        goto fail;
    s->http = httpd_new(l, listen, &o);
    if (s->http == NULL)
        goto fail;
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
    readapi_set_feed(s->ra, f);
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
    readapi_set_store(s->ra, st);
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
    httpd_set_max_connections(s->http, (size_t)cfg->status_max_connections);
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
    return httpd_connections(s->http);
}

void
status_set_deadline_ms(struct status *s, unsigned ms)
{
    httpd_set_deadline_ms(s->http, ms);
}

void
status_free(struct status *s)
{
    struct status **p;

    if (s == NULL)
        return;
    for (p = &all_status; *p != NULL; p = &(*p)->next_status)
        if (*p == s) {
            *p = s->next_status;
            break;
        }
    /* The server first: its connections' held requests are the read
     * API's to forget. */
    httpd_free(s->http);
    readapi_free(s->ra);
    upstream_token_free(s->token);
    free(s);
}
