/*
 * endpoint — the harness of the status endpoint's tests; see endpoint.h.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "endpoint.h"

#include "config.h"
#include "feed.h"
#include "json.h"
#include "loop.h"
#include "reaper.h"
#include "status.h"
#include "store.h"

struct ep *
ep_base(void)
{
    struct ep *h = calloc(1, sizeof(*h));

    assert_non_null(h);
    tu_reapd_open(&h->reapd, "status", "", "");
    return h;
}

struct ep *
ep_plain(void)
{
    struct ep *h = ep_base();
    char listen[64];

    h->port = tu_free_port();
    snprintf(listen, sizeof(listen), "127.0.0.1:%d", h->port);
    h->s = status_new(h->reapd.l, listen, h->reapd.r);
    assert_non_null(h->s);
    return h;
}

void
ep_token(struct ep *h, struct status *s)
{
    char text[1024], err[256], *token = NULL;

    snprintf(h->tokpath, sizeof(h->tokpath), "%s/status.token", h->reapd.dir);
    tu_write_file(h->tokpath, EP_TOKEN "\n", strlen(EP_TOKEN "\n"));
    assert_int_equal(chmod(h->tokpath, 0600), 0);
    snprintf(text, sizeof(text),
             "{\"node\":\"t\",\"state_dir\":\"%s\","
             "\"status\":{\"token_file\":\"%s\"}}",
             h->reapd.dir, h->tokpath);
    config_free(h->cfg);
    h->cfg = tu_config(text);
    assert_int_equal(status_read_token(h->cfg, &token, err, sizeof(err)), 0);
    status_set_config(s, h->cfg, token);
    h->auth = EP_AUTH;
}

struct ep *
ep_new(void)
{
    struct ep *h = ep_plain();

    ep_token(h, h->s);
    return h;
}

void
ep_free(struct ep *h)
{
    status_free(h->s);
    config_free(h->cfg);
    if (h->tokpath[0] != '\0')
        unlink(h->tokpath);
    if (h->ssock[0] != '\0')
        unlink(h->ssock);
    tu_reapd_close(&h->reapd);
    free(h);
}

int
ep_tracked(struct ep *h, const void *arg)
{
    struct reaper_stats st;

    reaper_stats(h->reapd.r, &st);
    return st.tracked >= *(const size_t *)arg;
}

void
ep_on_done(const struct loop_http_resp *res, void *arg)
{
    struct ep_resp *r = arg;
    const char *v;

    r->done = 1;
    r->error = res->error;
    r->status = res->status;
    r->body = malloc(res->body_len + 1);
    assert_non_null(r->body);
    memcpy(r->body, res->body != NULL ? res->body : "", res->body_len);
    r->body[res->body_len] = '\0';
    r->len = res->body_len;
    v = loop_http_header(res, "Content-Type");
    snprintf(r->ctype, sizeof(r->ctype), "%s", v ? v : "");
    v = loop_http_header(res, "Allow");
    snprintf(r->allow, sizeof(r->allow), "%s", v ? v : "");
    v = loop_http_header(res, "WWW-Authenticate");
    snprintf(r->www, sizeof(r->www), "%s", v ? v : "");
    v = loop_http_header(res, "Connection");
    snprintf(r->conn, sizeof(r->conn), "%s", v ? v : "");
}

void
ep_resp_clear(struct ep_resp *r)
{
    free(r->body);
    memset(r, 0, sizeof(*r));
}

void
ep_request_full(struct ep *h, const char *method, const char *path,
                const char *const *hdrs, size_t nhdrs, const char *body,
                struct ep_resp *r)
{
    char url[8192 + 256];
    struct loop_http_req req = {0};

    memset(r, 0, sizeof(*r));
    if (h->ssock[0] != '\0') {
        snprintf(url, sizeof(url), "http://localhost%s", path);
        req.unix_socket = h->ssock;
    } else {
        snprintf(url, sizeof(url), "http://127.0.0.1:%d%s", h->port, path);
    }
    if (hdrs == NULL && h->auth != NULL) {
        hdrs = &h->auth;
        nhdrs = 1;
    }
    req.method = method;
    req.url = url;
    req.headers = hdrs;
    req.nheaders = nhdrs;
    req.body = body;
    req.body_len = body != NULL ? strlen(body) : 0;
    req.timeout_ms = 3000;
    assert_non_null(loop_http(h->reapd.l, &req, NULL, NULL, ep_on_done, r));
    TU_RUN_UNTIL(h->reapd.l, r->done, 4000);
}

void
ep_request(struct ep *h, const char *method, const char *path,
           struct ep_resp *r)
{
    ep_request_full(h, method, path, NULL, 0, NULL, r);
}

struct json_node *
ep_json_body(const struct ep_resp *r)
{
    char err[256] = "";
    struct json_node *root =
        json_parse(r->body, r->len, NULL, 0, err, sizeof(err), NULL);

    if (root == NULL)
        fail_msg("not JSON (%s): %s", err, r->body);
    assert_string_equal(r->ctype, "application/json");
    return root;
}

void
ep_expect_live(struct ep *h)
{
    struct ep_resp r;
    struct json_node *root;
    const struct json_node *live;

    ep_request(h, "GET", "/livez", &r);
    assert_int_equal(r.error, HTTPC_OK);
    assert_int_equal(r.status, 200);
    root = ep_json_body(&r);
    live = json_get(root, "live");
    assert_non_null(live);
    assert_int_equal(live->type, JSON_BOOL);
    assert_true(live->boolean);
    assert_int_equal(root->count, 1);
    json_free(root);
    ep_resp_clear(&r);
}

int
ep_raw_status(const char *buf)
{
    int major, minor, code;

    if (sscanf(buf, "HTTP/%d.%d %d", &major, &minor, &code) != 3)
        return -1;
    return code;
}

int
ep_raw_connect(struct ep *h)
{
    struct sockaddr_in sin;
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    assert_true(fd >= 0);
    memset(&sin, 0, sizeof(sin));
    sin.sin_family = AF_INET;
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    sin.sin_port = htons((uint16_t)h->port);
    assert_int_equal(connect(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
    assert_int_equal(fcntl(fd, F_SETFL, O_NONBLOCK), 0);
    return fd;
}

long long
ep_metric_value(const char *text, const char *name)
{
    size_t n = strlen(name);
    const char *p = text;

    while ((p = strstr(p, name)) != NULL) {
        if ((p == text || p[-1] == '\n') && p[n] == ' ')
            return strtoll(p + n + 1, NULL, 10);
        p += n;
    }
    return -1;
}

double
ep_sample(const char *text, const char *series)
{
    size_t n = strlen(series);
    const char *p = text;

    while ((p = strstr(p, series)) != NULL) {
        if ((p == text || p[-1] == '\n') && p[n] == ' ')
            return strtod(p + n + 1, NULL);
        p += n;
    }
    return -1;
}

struct config *
ep_config(struct ep *h, const char *extra)
{
    char text[2048];

    snprintf(text, sizeof(text), "{\"node\":\"t\",\"state_dir\":\"%s\",%s}",
             h->reapd.dir, extra);
    return tu_config(text);
}

struct config *
ep_secret_config(struct ep *h, char *tokpath, size_t cap)
{
    char extra[1024];
    struct config *cfg;
    char *token = NULL, err[256];

    snprintf(tokpath, cap, "%s/token", h->reapd.dir);
    tu_write_file(tokpath, EP_TOKEN "\n", strlen(EP_TOKEN "\n"));
    snprintf(extra, sizeof(extra),
             "\"status\":{\"token_file\":\"%s\"},"
             "\"upstream\":{\"url\":\"https://user:pa55w0rd@example.com/"
             "in?sig=abcdef\",\"headers\":{\"X-Api-Key\":\"hunter2\"}}",
             tokpath);
    cfg = ep_config(h, extra);
    assert_int_equal(status_read_token(cfg, &token, err, sizeof(err)), 0);
    assert_string_equal(token, EP_TOKEN);
    status_set_config(h->s, cfg, token);
    return cfg;
}

void
ep_request_auth(struct ep *h, const char *path, const char *auth,
                struct ep_resp *r)
{
    const char *hdrs[1] = {auth};

    ep_request_full(h, "GET", path, hdrs, auth != NULL ? 1 : 0, NULL, r);
}

static void
on_durable(const char *report_id, const char *container_id, void *arg)
{
    (void)report_id;
    feed_publish(arg, container_id);
}

void
ep_api_open(struct ep_api *a)
{
    char err[256];

    memset(a, 0, sizeof(*a));
    a->h = ep_new();
    assert_int_equal(store_open(a->h->reapd.dir, &a->st, err, sizeof(err)),
                     STORE_OK);
    a->feed = feed_new(loop_base(a->h->reapd.l));
    assert_non_null(a->feed);
    store_on_report(a->st, on_durable, a->feed);
    reaper_set_store(a->h->reapd.r, a->st);
    status_set_store(a->h->s, a->st);
    status_set_feed(a->h->s, a->feed);
    snprintf(a->asock, sizeof(a->asock), "%s/run/admin.sock", a->h->reapd.dir);
    a->admin = status_new_admin(a->h->reapd.l, a->asock, a->h->reapd.r);
    assert_non_null(a->admin);
    status_set_store(a->admin, a->st);
    status_set_feed(a->admin, a->feed);
    assert_int_equal(reaper_start(a->h->reapd.r), 0);
    TU_RUN_UNTIL(a->h->reapd.l, reaper_ready(a->h->reapd.r, NULL), 3000);
}

void
ep_api_close(struct ep_api *a)
{
    char dir[160];

    status_free(a->admin);
    status_free(a->h->s);
    a->h->s = NULL;
    feed_free(a->feed);
    reaper_free(a->h->reapd.r);
    a->h->reapd.r = NULL;
    assert_int_equal(store_close(a->st), STORE_OK);
    tu_rm_store(a->h->reapd.dir);
    snprintf(dir, sizeof(dir), "%s/run", a->h->reapd.dir);
    assert_int_equal(rmdir(dir), 0);
    ep_free(a->h);
}

void
ep_admin_request(struct ep_api *a, const char *method, const char *path,
                 struct ep_resp *r)
{
    snprintf(a->h->ssock, sizeof(a->h->ssock), "%s", a->asock);
    ep_request(a->h, method, path, r);
    a->h->ssock[0] = '\0';
}

int
ep_raw_send(struct ep *h, const char *req)
{
    int fd = ep_raw_connect(h);
    const char *eol = strstr(req, "\r\n");
    char buf[4096];
    int n;

    if (h->auth != NULL && eol != NULL) {
        n = snprintf(buf, sizeof(buf), "%.*s\r\n%s%s", (int)(eol - req), req,
                     h->auth, eol);
        assert_true(n > 0 && (size_t)n < sizeof(buf));
        req = buf;
    }
    assert_int_equal(send(fd, req, strlen(req), 0), (ssize_t)strlen(req));
    return fd;
}

size_t
ep_raw_gather(struct ep *h, int fd, char *buf, size_t cap, int ms, int *closed)
{
    uint64_t deadline = loop_now_ms() + (uint64_t)ms;
    size_t got = strlen(buf);

    *closed = 0;
    while (loop_now_ms() < deadline) {
        ssize_t n = recv(fd, buf + got, cap - 1 - got, 0);

        if (n > 0) {
            got += (size_t)n;
            buf[got] = '\0';
            continue;
        }
        if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
            *closed = 1;
            break;
        }
        event_base_loop(loop_base(h->reapd.l), EVLOOP_ONCE | EVLOOP_NONBLOCK);
        usleep(1000);
    }
    return got;
}

long
ep_status_of(struct ep *h, const char *method, const char *path)
{
    struct ep_resp r;
    long code;

    ep_request(h, method, path, &r);
    assert_int_equal(r.error, HTTPC_OK);
    code = r.status;
    ep_resp_clear(&r);
    return code;
}

long
ep_admin_status_of(struct ep_api *a, const char *method, const char *path)
{
    struct ep_resp r;
    long code;

    ep_admin_request(a, method, path, &r);
    assert_int_equal(r.error, HTTPC_OK);
    code = r.status;
    ep_resp_clear(&r);
    return code;
}
