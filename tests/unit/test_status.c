/*
 * test_status — the router in agent/status.c: the probes, /v1/status,
 * /v1/containers, /v1/config, the method table of each listener, who may
 * read what (the token, the closed read API, the admin socket), and the
 * token file. Through the public API over HTTP (endpoint.h's harness: a
 * real reaper on the fake engine behind the endpoint).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "docker.h"
#include "endpoint.h"
#include "fake_engine.h"
#include "json.h"
#include "log.h"
#include "reaper.h"
#include "status.h"
#include "store.h"
#include "upstream.h"

static const char *A =
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa1";
static const char *B =
    "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb2";
static const char *MANAGED = "{\"reapd.managed\":\"true\"}";

static void
t_livez(void **state)
{
    struct ep *h = ep_new();
    struct ep_resp r;

    (void)state;
    /* Live before the reaper even started: the process answers. */
    ep_expect_live(h);
    /* The query string is not part of the path. */
    ep_request(h, "GET", "/livez?verbose=1", &r);
    assert_int_equal(r.status, 200);
    ep_resp_clear(&r);
    ep_free(h);
}

static int
has_reason(const struct json_node *root, const char *reason)
{
    const char *s = json_string(json_get(root, "reason"));

    return s != NULL && strcmp(s, reason) == 0;
}

static void
t_readyz(void **state)
{
    struct ep *h = ep_new();
    struct ep_resp r;
    struct json_node *root;
    const struct json_node *ready;

    (void)state;
    ep_request(h, "GET", "/readyz", &r);
    assert_int_equal(r.status, 503);
    root = ep_json_body(&r);
    ready = json_get(root, "ready");
    assert_non_null(ready);
    assert_int_equal(ready->type, JSON_BOOL);
    assert_false(ready->boolean);
    assert_true(has_reason(root, "docker event stream not connected"));
    json_free(root);
    ep_resp_clear(&r);

    assert_int_equal(reaper_start(h->reapd.r), 0);
    TU_RUN_UNTIL(h->reapd.l, reaper_ready(h->reapd.r, NULL), 3000);
    ep_request(h, "GET", "/readyz", &r);
    assert_int_equal(r.status, 200);
    root = ep_json_body(&r);
    ready = json_get(root, "ready");
    assert_non_null(ready);
    assert_true(ready->boolean);
    assert_null(json_get(root, "reason"));
    json_free(root);
    ep_resp_clear(&r);
    ep_free(h);
}

/* Stream open but the relist failing: not ready, and it says why. */
static void
t_readyz_waits_for_relist(void **state)
{
    struct ep *h = ep_new();
    struct ep_resp r;
    struct json_node *root;

    (void)state;
    fake_engine_fail(h->reapd.fe, FAKE_LIST, 500, 1000000, "list broken");
    assert_int_equal(reaper_start(h->reapd.r), 0);
    TU_RUN_UNTIL(h->reapd.l, docker_watch_connected(h->reapd.d), 3000);
    tu_run_for(h->reapd.l, 100);
    ep_request(h, "GET", "/readyz", &r);
    assert_int_equal(r.status, 503);
    root = ep_json_body(&r);
    assert_true(has_reason(root, "first reconcile with the engine not done"));
    json_free(root);
    ep_resp_clear(&r);
    /* The engine recovers; the reaper's retry makes it ready. */
    fake_engine_fail(h->reapd.fe, FAKE_LIST, 0, 0, NULL);
    TU_RUN_UNTIL(h->reapd.l, reaper_ready(h->reapd.r, NULL), 5000);
    ep_request(h, "GET", "/readyz", &r);
    assert_int_equal(r.status, 200);
    ep_resp_clear(&r);
    ep_free(h);
}

static void
t_containers(void **state)
{
    struct ep *h = ep_new();
    struct ep_resp r;
    struct json_node *root;
    const struct json_node *list, *c;
    char path[128];
    size_t one = 1;

    (void)state;
    /* Empty before anything is tracked. */
    ep_request(h, "GET", "/v1/containers", &r);
    assert_int_equal(r.status, 200);
    root = ep_json_body(&r);
    list = json_get(root, "containers");
    assert_non_null(list);
    assert_int_equal(list->type, JSON_ARRAY);
    assert_int_equal(list->count, 0);
    json_free(root);
    ep_resp_clear(&r);

    assert_int_equal(reaper_start(h->reapd.r), 0);
    TU_RUN_UNTIL(h->reapd.l, reaper_ready(h->reapd.r, NULL), 3000);
    fake_engine_add(h->reapd.fe, A, "web-1", MANAGED, NULL, 1);
    fake_engine_add(h->reapd.fe, B, "other", "{\"x\":\"y\"}", NULL, 1);
    TU_RUN_UNTIL(h->reapd.l, ep_tracked(h, &one), 3000);
    tu_run_for(h->reapd.l, 50);

    ep_request(h, "GET", "/v1/containers", &r);
    assert_int_equal(r.status, 200);
    root = ep_json_body(&r);
    list = json_get(root, "containers");
    assert_non_null(list);
    assert_int_equal(list->type, JSON_ARRAY);
    /* Only the managed one: the other is ignored by policy. */
    assert_int_equal(list->count, 1);
    c = list->items[0];
    assert_string_equal(json_string(json_get(c, "container_id")), A);
    assert_string_equal(json_string(json_get(c, "name")), "web-1");
    assert_string_equal(json_string(json_get(c, "policy")), "managed");
    assert_string_equal(json_string(json_get(c, "state")), "running");
    assert_int_equal(json_get(c, "exit_code")->type, JSON_NULL);
    assert_int_equal(json_get(c, "exit_code_source")->type, JSON_NULL);
    assert_int_equal(json_get(c, "engine_exit_code")->type, JSON_NULL);
    assert_int_equal(json_get(c, "destroy_seen")->type, JSON_BOOL);
    assert_false(json_get(c, "destroy_seen")->boolean);
    assert_non_null(json_get(c, "delete_attempts"));
    json_free(root);
    ep_resp_clear(&r);

    /* One of them by id. */
    snprintf(path, sizeof(path), "/v1/containers/%s", A);
    ep_request(h, "GET", path, &r);
    assert_int_equal(r.status, 200);
    root = ep_json_body(&r);
    assert_int_equal(root->type, JSON_OBJECT);
    assert_string_equal(json_string(json_get(root, "container_id")), A);
    assert_string_equal(json_string(json_get(root, "state")), "running");
    json_free(root);
    ep_resp_clear(&r);

    /* Known to the engine but not tracked, and unknown: 404 JSON. */
    snprintf(path, sizeof(path), "/v1/containers/%s", B);
    ep_request(h, "GET", path, &r);
    assert_int_equal(r.status, 404);
    root = ep_json_body(&r);
    assert_non_null(json_string(json_get(root, "error")));
    json_free(root);
    ep_resp_clear(&r);
    ep_request(
        h, "GET",
        "/v1/containers/"
        "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
        &r);
    assert_int_equal(r.status, 404);
    root = ep_json_body(&r);
    assert_non_null(json_string(json_get(root, "error")));
    json_free(root);
    ep_resp_clear(&r);
    ep_free(h);
}

static void
t_not_found(void **state)
{
    static const char *paths[] = {
        "/",
        "/nope",
        "/livez/",
        "/LIVEZ",
        "/v1",
        "/v1/containers/",
        "/v1/containers/abc",
        "/v1/containers/"
        "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
        "AAAAAAAA",
        "/v1/containers/"
        "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
        "aaaaaaaa1/x",
        "/v1/containers/../livez",
        "/metrics.json",
    };
    struct ep *h = ep_new();
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
        struct ep_resp r;
        struct json_node *root;

        ep_request(h, "GET", paths[i], &r);
        if (r.status != 404)
            fail_msg("%s: status %ld", paths[i], r.status);
        root = ep_json_body(&r);
        assert_non_null(json_string(json_get(root, "error")));
        json_free(root);
        ep_resp_clear(&r);
    }
    ep_expect_live(h);
    ep_free(h);
}

static void
t_methods(void **state)
{
    static const char *methods[] = {"POST", "DELETE", "PUT", "PATCH",
                                    "OPTIONS"};
    static const char *paths[] = {"/livez", "/v1/containers", "/nope"};
    struct ep *h = ep_new();
    size_t i, j;

    (void)state;
    for (i = 0; i < sizeof(methods) / sizeof(methods[0]); i++) {
        for (j = 0; j < sizeof(paths) / sizeof(paths[0]); j++) {
            struct ep_resp r;
            struct json_node *root;

            ep_request_full(h, methods[i], paths[j], NULL, 0,
                            i == 0 ? "{}" : NULL, &r);
            if (r.status != 405)
                fail_msg("%s %s: status %ld", methods[i], paths[j], r.status);
            assert_string_equal(r.allow, "GET, HEAD");
            root = ep_json_body(&r);
            assert_non_null(json_string(json_get(root, "error")));
            json_free(root);
            ep_resp_clear(&r);
        }
    }
    ep_expect_live(h);
    ep_free(h);
}

static void
t_config_redacted(void **state)
{
    struct ep *h = ep_plain();
    struct ep_resp r;
    struct json_node *root;
    const struct json_node *up, *st;
    char tokpath[128];
    struct config *cfg;

    (void)state;
    /* No config yet, so no token: closed. */
    ep_request(h, "GET", "/v1/config", &r);
    assert_int_equal(r.status, 401);
    ep_resp_clear(&r);
    cfg = ep_secret_config(h, tokpath, sizeof(tokpath));
    ep_request_auth(h, "/v1/config", "Authorization: Bearer " EP_TOKEN, &r);
    assert_int_equal(r.status, 200);
    root = ep_json_body(&r);
    assert_null(strstr(r.body, "hunter2"));
    assert_null(strstr(r.body, "pa55w0rd"));
    assert_null(strstr(r.body, "abcdef"));
    assert_null(strstr(r.body, EP_TOKEN));
    up = json_get(root, "upstream");
    assert_string_equal(
        json_string(json_get(json_get(up, "headers"), "X-Api-Key")),
        "<redacted>");
    assert_string_equal(json_string(json_get(up, "url")),
                        "https://<redacted>@example.com/in?<redacted>");
    st = json_get(root, "status");
    assert_string_equal(json_string(json_get(st, "token_file")), tokpath);
    assert_string_equal(json_string(json_get(root, "node")), "t");
    json_free(root);
    ep_resp_clear(&r);
    ep_free(h);
    config_free(cfg);
}

static void
t_auth(void **state)
{
    struct ep *h = ep_new();
    struct ep_resp r;
    char tokpath[128], path[128];
    struct config *cfg = ep_secret_config(h, tokpath, sizeof(tokpath));
    static const char *const closed[] = {"/metrics", "/v1/containers",
                                         "/v1/config", "/v1/leaks",
                                         "/no/such/path"};
    size_t i;

    (void)state;
    h->auth = NULL;
    for (i = 0; i < sizeof(closed) / sizeof(closed[0]); i++) {
        ep_request(h, "GET", closed[i], &r);
        assert_int_equal(r.status, 401);
        assert_string_equal(r.www, "Bearer realm=\"reapd\"");
        assert_null(strstr(r.body, EP_TOKEN));
        json_free(ep_json_body(&r));
        ep_resp_clear(&r);
        ep_request_auth(h, closed[i], "Authorization: Bearer wrong", &r);
        assert_int_equal(r.status, 401);
        ep_resp_clear(&r);
        /* A prefix of the token, and the token with more after it. */
        ep_request_auth(h, closed[i], "Authorization: Bearer s3cr3t", &r);
        assert_int_equal(r.status, 401);
        ep_resp_clear(&r);
        ep_request_auth(h, closed[i], "Authorization: Bearer " EP_TOKEN "x",
                        &r);
        assert_int_equal(r.status, 401);
        ep_resp_clear(&r);
        ep_request_auth(h, closed[i], "Authorization: Basic " EP_TOKEN, &r);
        assert_int_equal(r.status, 401);
        ep_resp_clear(&r);
        ep_request_auth(h, closed[i], "Authorization: Bearer " EP_TOKEN, &r);
        assert_int_equal(r.status,
                         i + 1 < sizeof(closed) / sizeof(*closed) ? 200 : 404);
        ep_resp_clear(&r);
    }
    /* Probes need no token. */
    ep_expect_live(h);
    ep_request(h, "GET", "/readyz", &r);
    assert_int_equal(r.status, 503);
    ep_resp_clear(&r);
    /* The refusals are counted. */
    ep_request_auth(h, "/metrics", "Authorization: Bearer " EP_TOKEN, &r);
    assert_true(ep_sample(r.body, "reapd_status_rejected_total{reason=\""
                                  "unauthorized\"}") == 25);
    ep_resp_clear(&r);
    snprintf(path, sizeof(path), "%s", tokpath);
    unlink(path);
    ep_free(h);
    config_free(cfg);
}

/* The method table on each listener: the admin socket's read routes are
 * GET and HEAD (a POST there is 405, not served); its write routes take
 * no query they do not know (requeue by id: none at all); a report id
 * of 64 characters is a write route, one of 65 is not; "bearer" is the
 * token's scheme in any case. */
static void
t_corner_method_table(void **state)
{
    struct ep_api a;
    struct ep_resp r;
    char path[256], id[80];

    (void)state;
    ep_api_open(&a);
    ep_admin_request(&a, "POST", "/v1/status", &r);
    assert_int_equal(r.status, 405);
    assert_string_equal(r.allow, "GET, HEAD");
    ep_resp_clear(&r);
    assert_int_equal(ep_admin_status_of(&a, "POST", "/v1/reports"), 405);
    assert_int_equal(ep_admin_status_of(&a, "GET", "/v1/status"), 200);

    assert_int_equal(store_add_report(a.st, "r1", A, "{\"x\":1}", 7, 1),
                     STORE_OK);
    assert_int_equal(store_mark_dead(a.st, "r1", "HTTP 400"), STORE_OK);
    assert_int_equal(
        ep_admin_status_of(&a, "POST", "/v1/reports/r1/requeue?state=dead"),
        400);
    assert_int_equal(ep_admin_status_of(&a, "POST", "/v1/reports/r1/requeue"),
                     200);
    memset(id, 'z', 64);
    id[64] = '\0';
    snprintf(path, sizeof(path), "/v1/reports/%s/requeue", id);
    assert_int_equal(ep_admin_status_of(&a, "POST", path), 404);
    memset(id, 'z', 65);
    id[65] = '\0';
    snprintf(path, sizeof(path), "/v1/reports/%s/requeue", id);
    assert_int_equal(ep_admin_status_of(&a, "POST", path), 405);
    ep_api_close(&a);
}

/* ---- who may read what ------------------------------------------------ */

/* Every route of the read API, and what the status listener answers it
 * with the token (reaper started, no container, a store). */
static const struct route {
    const char *method, *path;
    long with_token;
} routes[] = {
    {"GET", "/v1/status", 200},
    {"GET", "/v1/containers", 200},
    {"GET",
     "/v1/containers/"
     "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa1",
     404},
    {"GET",
     "/v1/containers/"
     "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa1/report",
     404},
    {"GET",
     "/v1/containers/"
     "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa1/"
     "report?wait=1",
     404},
    {"GET", "/v1/reports", 200},
    {"GET", "/v1/reports?after=0&limit=5", 200},
    {"GET", "/v1/leaks", 200},
    {"GET", "/v1/config", 200},
    {"GET", "/v1/schema/report", 200},
    {"GET", "/v1/no/such/route", 404},
    {"GET", "/v1", 404},
    {"POST", "/v1/drain", 405},
    {"POST", "/v1/audit", 405},
    {"POST", "/v1/reports/requeue?state=dead", 405},
    {"POST", "/v1/reports/r1/requeue", 405},
};

/* The status of `line`'s answer (a request line; HTTP/1.1 added) on a
 * raw connection, with `auth` (NULL: none), within 300 ms: the report
 * stream's never ends, and libcurl would wait for a HEAD's body. */
static int
raw_status_of(struct ep_api *a, const char *line, const char *auth)
{
    const char *saved = a->h->auth;
    char buf[4096] = "", req[256];
    int fd, closed;

    snprintf(req, sizeof(req), "%s HTTP/1.1\r\nHost: x\r\n\r\n", line);
    a->h->auth = auth;
    fd = ep_raw_send(a->h, req);
    a->h->auth = saved;
    ep_raw_gather(a->h, fd, buf, sizeof(buf), 300, &closed);
    close(fd);
    return ep_raw_status(buf);
}

static int
stream_status(struct ep_api *a, const char *auth)
{
    return raw_status_of(a, "GET /v1/reports/stream", auth);
}

/* Without a token configured, the status listener serves the probes and
 * /metrics, and answers every route of the read API 401 with a reason
 * naming the admin socket and status.token_file, a token sent or not;
 * the admin socket serves them all without one. */
static void
t_access_closed_by_default(void **state)
{
    struct ep_api a;
    struct ep_resp r;
    struct json_node *root;
    char extra[256];
    struct config *cfg;
    size_t i;
    const char *sent[] = {NULL, EP_AUTH, "Authorization: Bearer "};

    (void)state;
    ep_api_open(&a);
    snprintf(extra, sizeof(extra), "\"admin\":{\"socket\":\"%s\"}", a.asock);
    cfg = ep_config(a.h, extra);
    status_set_config(a.h->s, cfg, NULL);
    for (i = 0; i < sizeof(routes) / sizeof(routes[0]); i++) {
        size_t k;

        for (k = 0; k < sizeof(sent) / sizeof(sent[0]); k++) {
            a.h->auth = sent[k];
            ep_request(a.h, routes[i].method, routes[i].path, &r);
            if (r.status != 401)
                fail_msg("%s %s with %s: %ld, want 401", routes[i].method,
                         routes[i].path, sent[k] ? sent[k] : "no token",
                         r.status);
            assert_string_equal(r.www, "Bearer realm=\"reapd\"");
            root = ep_json_body(&r);
            assert_non_null(strstr(json_string(json_get(root, "error")),
                                   "status.token_file"));
            assert_non_null(
                strstr(json_string(json_get(root, "error")), a.asock));
            assert_non_null(
                strstr(json_string(json_get(root, "error")), "admin socket"));
            json_free(root);
            ep_resp_clear(&r);
        }
        /* The admin socket: never a 401. */
        a.h->auth = NULL;
        if (ep_admin_status_of(&a, routes[i].method, routes[i].path) == 401)
            fail_msg("admin socket: %s %s: 401", routes[i].method,
                     routes[i].path);
    }
    assert_int_equal(stream_status(&a, NULL), 401);
    assert_int_equal(stream_status(&a, EP_AUTH), 401);
    assert_int_equal(raw_status_of(&a, "HEAD /v1/status", NULL), 401);
    assert_int_equal(raw_status_of(&a, "HEAD /v1/status", EP_AUTH), 401);
    a.h->auth = NULL;
    assert_int_equal(ep_admin_status_of(&a, "GET", "/v1/status"), 200);
    assert_int_equal(ep_admin_status_of(&a, "GET", "/v1/containers"), 200);
    /* Open: the probes, /metrics; anything else is not there. */
    assert_int_equal(ep_status_of(a.h, "GET", "/livez"), 200);
    assert_int_equal(ep_status_of(a.h, "GET", "/readyz"), 200);
    assert_int_equal(ep_status_of(a.h, "GET", "/no/such/path"), 404);
    assert_int_equal(ep_status_of(a.h, "GET", "/v1x"), 404);
    ep_request(a.h, "GET", "/metrics", &r);
    assert_int_equal(r.status, 200);
    assert_true(ep_sample(r.body, "reapd_status_rejected_total{reason=\""
                                  "unauthorized\"}") ==
                3 * (double)(sizeof(routes) / sizeof(routes[0])) + 4);
    ep_resp_clear(&r);
    ep_api_close(&a);
    config_free(cfg);
}

/* With the token: every route as without the gate; a wrong token, one a
 * byte shorter or longer, an empty one, another scheme: 401 on all of
 * them and on /metrics, which a token closes too. */
static void
t_access_token_routes(void **state)
{
    struct ep_api a;
    size_t i, k;
    const char *wrong[] = {
        NULL,
        "Authorization: Bearer s3cr3t-t0ken-valuf",
        "Authorization: Bearer s3cr3t-t0ken-valu",
        "Authorization: Bearer s3cr3t-t0ken-valuee",
        "Authorization: Bearer ",
        "Authorization: Basic " EP_TOKEN,
        "Authorization: " EP_TOKEN,
    };

    (void)state;
    ep_api_open(&a);
    for (i = 0; i < sizeof(routes) / sizeof(routes[0]); i++) {
        long code;

        a.h->auth = EP_AUTH;
        code = ep_status_of(a.h, routes[i].method, routes[i].path);
        if (code != routes[i].with_token)
            fail_msg("%s %s with the token: %ld, want %ld", routes[i].method,
                     routes[i].path, code, routes[i].with_token);
        for (k = 0; k < sizeof(wrong) / sizeof(wrong[0]); k++) {
            a.h->auth = wrong[k];
            code = ep_status_of(a.h, routes[i].method, routes[i].path);
            if (code != 401)
                fail_msg("%s %s with %s: %ld, want 401", routes[i].method,
                         routes[i].path, wrong[k] ? wrong[k] : "no token",
                         code);
        }
    }
    assert_int_equal(stream_status(&a, EP_AUTH), 200);
    assert_int_equal(stream_status(&a, NULL), 401);
    assert_int_equal(raw_status_of(&a, "HEAD /v1/status", EP_AUTH), 200);
    assert_int_equal(raw_status_of(&a, "HEAD /v1/status", NULL), 401);
    assert_int_equal(stream_status(&a, wrong[1]), 401);
    for (k = 0; k < sizeof(wrong) / sizeof(wrong[0]); k++) {
        a.h->auth = wrong[k];
        assert_int_equal(ep_status_of(a.h, "GET", "/metrics"), 401);
        assert_int_equal(ep_status_of(a.h, "GET", "/livez"), 200);
        assert_int_equal(ep_status_of(a.h, "GET", "/readyz"), 200);
    }
    a.h->auth = "Authorization: bEaReR " EP_TOKEN;
    assert_int_equal(ep_status_of(a.h, "GET", "/metrics"), 200);
    assert_int_equal(ep_status_of(a.h, "GET", "/v1/status"), 200);
    ep_api_close(&a);
}

/* status_read_token on a token file at `path`: 0 or -1, the reason in
 * `err`. */
static int
read_token_at(struct ep *h, const char *path, char *err, size_t errlen)
{
    char text[1024];
    struct config *cfg;
    char *token = NULL;
    int rc;

    snprintf(text, sizeof(text),
             "{\"node\":\"t\",\"state_dir\":\"%s\","
             "\"status\":{\"token_file\":\"%s\"}}",
             h->reapd.dir, path);
    cfg = tu_config(text);
    err[0] = '\0';
    rc = status_read_token(cfg, &token, err, errlen);
    if (rc == 0) {
        assert_string_equal(token, EP_TOKEN);
        upstream_token_free(token);
    } else {
        assert_null(token);
        assert_non_null(strstr(err, path));
        assert_null(strstr(err, EP_TOKEN));
    }
    config_free(cfg);
    return rc;
}

/* The token file must be a regular file (a symlink is followed: the file
 * read is what counts) that only its owner, reapd's user or root, may
 * read or write: each bit of 0066 refuses it, execute bits do not. */
static void
t_token_file_private(void **state)
{
    struct ep *h = ep_base();
    char path[160], link[160], fifo[160], dir[160], err[512];
    static const struct {
        mode_t mode;
        int rc;
    } modes[] = {
        {0600, 0},  {0400, 0},  {0200, -1}, {0700, 0},  {0611, 0},
        {0640, -1}, {0620, -1}, {0604, -1}, {0602, -1}, {0660, -1},
        {0606, -1}, {0644, -1}, {0666, -1}, {0000, -1},
    };
    size_t i;

    (void)state;
    snprintf(path, sizeof(path), "%s/tok", h->reapd.dir);
    tu_write_file(path, EP_TOKEN "\n", strlen(EP_TOKEN "\n"));
    for (i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
        int rc;

        assert_int_equal(chmod(path, modes[i].mode), 0);
        rc = read_token_at(h, path, err, sizeof(err));
        /* 0200 and 0000: root reads them all the same; the group and
         * others bits are what is judged. */
        if (modes[i].mode == 0200 || modes[i].mode == 0000)
            rc = geteuid() == 0 ? rc : -1;
        if (modes[i].mode == 0200 || modes[i].mode == 0000)
            continue;
        if (rc != modes[i].rc)
            fail_msg("mode %04o: %d (%s), want %d", (unsigned)modes[i].mode,
                     rc, err, modes[i].rc);
        if (rc != 0 && (modes[i].mode & 066) != 0)
            assert_non_null(strstr(err, "group or others"));
    }
    /* A symlink to it: its target's mode counts, not the link's. */
    snprintf(link, sizeof(link), "%s/tok.link", h->reapd.dir);
    assert_int_equal(symlink(path, link), 0);
    assert_int_equal(chmod(path, 0600), 0);
    assert_int_equal(read_token_at(h, link, err, sizeof(err)), 0);
    assert_int_equal(chmod(path, 0644), 0);
    assert_int_equal(read_token_at(h, link, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "group or others"));
    assert_int_equal(chmod(path, 0600), 0);
    /* Owned by another user: refused (root can make one). */
    if (geteuid() == 0) {
        assert_int_equal(chown(path, 65534, 65534), 0);
        assert_int_equal(read_token_at(h, path, err, sizeof(err)), -1);
        assert_non_null(strstr(err, "another user"));
        assert_int_equal(chown(path, 0, 0), 0);
        assert_int_equal(read_token_at(h, path, err, sizeof(err)), 0);
    } else {
        assert_int_equal(read_token_at(h, path, err, sizeof(err)), 0);
    }
    /* Not a regular file: a directory, a FIFO (no hang on it). */
    snprintf(dir, sizeof(dir), "%s/tokdir", h->reapd.dir);
    assert_int_equal(mkdir(dir, 0700), 0);
    assert_int_equal(read_token_at(h, dir, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "not a regular file"));
    snprintf(fifo, sizeof(fifo), "%s/tokfifo", h->reapd.dir);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    assert_int_equal(read_token_at(h, fifo, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "not a regular file"));
    unlink(fifo);
    rmdir(dir);
    unlink(link);
    unlink(path);
    ep_free(h);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(t_livez),
        cmocka_unit_test(t_readyz),
        cmocka_unit_test(t_readyz_waits_for_relist),
        cmocka_unit_test(t_containers),
        cmocka_unit_test(t_not_found),
        cmocka_unit_test(t_methods),
        cmocka_unit_test(t_config_redacted),
        cmocka_unit_test(t_auth),
        cmocka_unit_test(t_corner_method_table),
        cmocka_unit_test(t_access_closed_by_default),
        cmocka_unit_test(t_access_token_routes),
        cmocka_unit_test(t_token_file_private),
    };

    signal(SIGPIPE, SIG_IGN); /* raw clients and the fake engine */
    tu_test_filters();
    log_setup(getenv("TEST_DEBUG") ? LOG_LEVEL_DEBUG : LOG_LEVEL_ERROR,
              LOG_FORMAT_TEXT);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
