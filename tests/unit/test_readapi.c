/*
 * test_readapi — the read API in agent/readapi.c: /v1/reports and its
 * cursor, the report stream, a container's report and the wait for it,
 * the drain and audit waits of the admin socket, and the bounds of the
 * requests it holds. Through the status endpoint and the admin socket
 * over HTTP, with a store and a feed (endpoint.h's ep_api).
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
#include <unistd.h>

#include "endpoint.h"
#include "fake_engine.h"
#include "json.h"
#include "log.h"
#include "loop.h"
#include "report.h"
#include "status.h"
#include "store.h"

static const char *A =
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa1";
static const char *B =
    "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb2";
static const char *MANAGED = "{\"reapd.managed\":\"true\"}";

/* A wait is held until the report is durable and answered then with the
 * report itself; 202 for a tracked container at the end of a wait, 404
 * for one reapd does not know; bad queries 400. */
static void
t_wait_for_report(void **state)
{
    struct ep_api a;
    struct ep_resp r;
    struct json_node *root;
    char path[256], req[512], buf[8192] = "";
    size_t one = 1;
    int fd, closed;

    (void)state;
    ep_api_open(&a);
    fake_engine_add(a.h->reapd.fe, A, "web-1", MANAGED, NULL, 1);
    TU_RUN_UNTIL(a.h->reapd.l, ep_tracked(a.h, &one), 3000);

    snprintf(path, sizeof(path), "/v1/containers/%s/report", A);
    ep_request(a.h, "GET", path, &r);
    assert_int_equal(r.status, 202);
    root = ep_json_body(&r);
    assert_string_equal(json_string(json_get(root, "container_id")), A);
    assert_string_equal(json_string(json_get(root, "state")), "running");
    json_free(root);
    ep_resp_clear(&r);

    snprintf(path, sizeof(path), "/v1/containers/%s/report?wait=1", B);
    ep_request(a.h, "GET", path, &r);
    assert_int_equal(r.status, 404);
    ep_resp_clear(&r);
    snprintf(path, sizeof(path), "/v1/containers/%s/report?wait=301", A);
    ep_request(a.h, "GET", path, &r);
    assert_int_equal(r.status, 400);
    ep_resp_clear(&r);
    snprintf(path, sizeof(path), "/v1/containers/%s/report?wait=1&x=2", A);
    ep_request(a.h, "GET", path, &r);
    assert_int_equal(r.status, 400);
    ep_resp_clear(&r);

    /* Held: nothing comes while the container runs. */
    snprintf(
        req, sizeof(req),
        "GET /v1/containers/%s/report?wait=30 HTTP/1.1\r\nHost: x\r\n\r\n", A);
    fd = ep_raw_send(a.h, req);
    ep_raw_gather(a.h, fd, buf, sizeof(buf), 300, &closed);
    assert_int_equal(buf[0], '\0');
    assert_false(closed);
    fake_engine_exit(a.h->reapd.fe, A, 7, 7);
    TU_RUN_UNTIL(a.h->reapd.l, a.h->reapd.nreports == 1, 5000);
    ep_raw_gather(a.h, fd, buf, sizeof(buf), 300, &closed);
    assert_int_equal(ep_raw_status(buf), 200);
    assert_non_null(strstr(buf, "Reapd-Report-Seq: 1\r\n"));
    assert_non_null(strstr(buf, "\"exit_code\":7"));
    close(fd);

    /* Answered at once now, on either listener. */
    snprintf(path, sizeof(path), "/v1/containers/%s/report?wait=5", A);
    ep_admin_request(&a, "GET", path, &r);
    assert_int_equal(r.status, 200);
    root = ep_json_body(&r);
    assert_int_equal(json_get(root, "exit_code")->type, JSON_NUMBER);
    assert_string_equal(json_string(json_get(root, "container_id")), A);
    json_free(root);
    ep_resp_clear(&r);
    ep_api_close(&a);
}

/* A held request whose client goes away is dropped within a second, and
 * its connection with it; a wait for a container that is tracked but not
 * reported ends with 202 when its time is up. */
static void
t_wait_client_gone(void **state)
{
    struct ep_api a;
    char req[512], buf[4096] = "";
    size_t one = 1;
    int fd, closed;
    uint64_t t0;

    (void)state;
    ep_api_open(&a);
    fake_engine_add(a.h->reapd.fe, A, "web-1", MANAGED, NULL, 1);
    TU_RUN_UNTIL(a.h->reapd.l, ep_tracked(a.h, &one), 3000);
    snprintf(
        req, sizeof(req),
        "GET /v1/containers/%s/report?wait=60 HTTP/1.1\r\nHost: x\r\n\r\n", A);
    fd = ep_raw_send(a.h, req);
    TU_RUN_UNTIL(a.h->reapd.l, status_connections(a.h->s) == 1, 2000);
    tu_run_for(a.h->reapd.l, 100);
    close(fd);
    TU_RUN_UNTIL(a.h->reapd.l, status_connections(a.h->s) == 0, 2500);

    /* The wait's end: 202, well before the 10 s answer deadline. */
    snprintf(req, sizeof(req),
             "GET /v1/containers/%s/report?wait=2 HTTP/1.1\r\nHost: x\r\n\r\n",
             A);
    t0 = loop_now_ms();
    fd = ep_raw_send(a.h, req);
    while (ep_raw_status(buf) < 0 && loop_now_ms() - t0 < 5000)
        ep_raw_gather(a.h, fd, buf, sizeof(buf), 100, &closed);
    assert_int_equal(ep_raw_status(buf), 202);
    assert_true(loop_now_ms() - t0 >= 1900);
    assert_true(loop_now_ms() - t0 < 4000);
    close(fd);
    ep_api_close(&a);
}

/* The stream: what follows ?after first, then each report as it becomes
 * durable, one line each with growing seq; without after, only new
 * ones. The cursor on /v1/reports agrees. */
static void
t_stream_and_cursor(void **state)
{
    struct ep_api a;
    struct ep_resp r;
    struct json_node *root;
    const struct json_node *list;
    static char buf[65536], buf2[65536];
    size_t one = 1;
    int fd, fd2, closed;
    const char *p;

    (void)state;
    ep_api_open(&a);
    fake_engine_add(a.h->reapd.fe, A, "a", MANAGED, NULL, 1);
    buf[0] = buf2[0] = '\0';
    TU_RUN_UNTIL(a.h->reapd.l, ep_tracked(a.h, &one), 3000);
    fake_engine_exit(a.h->reapd.fe, A, 3, 3);
    TU_RUN_UNTIL(a.h->reapd.l, a.h->reapd.nreports == 1, 5000);

    fd = ep_raw_send(a.h, "GET /v1/reports/stream?after=0 HTTP/1.1\r\n"
                          "Host: x\r\n\r\n");
    fd2 =
        ep_raw_send(a.h, "GET /v1/reports/stream HTTP/1.1\r\nHost: x\r\n\r\n");
    ep_raw_gather(a.h, fd, buf, sizeof(buf), 300, &closed);
    assert_false(closed);
    assert_int_equal(ep_raw_status(buf), 200);
    assert_non_null(strstr(buf, "application/x-ndjson"));
    assert_non_null(strstr(buf, "{\"seq\":1,"));
    ep_raw_gather(a.h, fd2, buf2, sizeof(buf2), 100, &closed);
    assert_int_equal(ep_raw_status(buf2), 200);
    assert_null(strstr(buf2, "\"seq\":1"));

    /* A is forgotten once reported: B alone is tracked. */
    fake_engine_add(a.h->reapd.fe, B, "b", MANAGED, NULL, 1);
    TU_RUN_UNTIL(a.h->reapd.l, ep_tracked(a.h, &one), 3000);
    fake_engine_exit(a.h->reapd.fe, B, 5, 5);
    TU_RUN_UNTIL(a.h->reapd.l, a.h->reapd.nreports == 2, 5000);
    ep_raw_gather(a.h, fd, buf, sizeof(buf), 300, &closed);
    ep_raw_gather(a.h, fd2, buf2, sizeof(buf2), 300, &closed);
    p = strstr(buf, "{\"seq\":1,");
    assert_non_null(p);
    assert_non_null(strstr(p, "{\"seq\":2,"));
    assert_non_null(strstr(buf2, "{\"seq\":2,"));
    assert_null(strstr(buf2, "{\"seq\":1,"));
    ep_request(a.h, "GET", "/metrics", &r);
    assert_int_equal(ep_metric_value(r.body, "reapd_api_streams"), 2);
    assert_int_equal(ep_metric_value(r.body, "reapd_api_held_requests"), 2);
    ep_resp_clear(&r);
    close(fd);
    close(fd2);
    /* The streams' connections go; the one /metrics came on stays. */
    TU_RUN_UNTIL(a.h->reapd.l, status_connections(a.h->s) == 1, 2500);

    ep_request(a.h, "GET", "/v1/reports?after=1", &r);
    assert_int_equal(r.status, 200);
    root = ep_json_body(&r);
    list = json_get(root, "reports");
    assert_int_equal(list->count, 1);
    assert_int_equal(json_get(list->items[0], "seq")->type, JSON_NUMBER);
    assert_string_equal(
        json_string(
            json_get(json_get(list->items[0], "report"), "container_id")),
        B);
    json_free(root);
    ep_resp_clear(&r);
    ep_request(a.h, "GET", "/v1/reports?state=bogus", &r);
    assert_int_equal(r.status, 400);
    ep_resp_clear(&r);
    ep_request(a.h, "GET", "/v1/reports/stream?after=-1", &r);
    assert_int_equal(r.status, 400);
    ep_resp_clear(&r);
    ep_api_close(&a);
}

/* A wait's seconds are 1..300: 0 and 301 are refused, 300 is held (not
 * answered at once), and so is 1; a wait for a container reapd knows
 * nothing of is answered 404 at once, not held to its end. */
static void
t_corner_wait_bounds(void **state)
{
    struct ep_api a;
    char path[256], req[512], buf[4096] = "";
    static const char *bad[] = {"0", "301", "-1", "x", "1x", "", "1&wait=1"};
    size_t one = 1, i;
    uint64_t t0;
    int fd, closed;

    (void)state;
    ep_api_open(&a);
    fake_engine_add(a.h->reapd.fe, A, "web-1", MANAGED, NULL, 1);
    TU_RUN_UNTIL(a.h->reapd.l, ep_tracked(a.h, &one), 3000);
    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        snprintf(path, sizeof(path), "/v1/containers/%s/report?wait=%s", A,
                 bad[i]);
        if (ep_status_of(a.h, "GET", path) != 400)
            fail_msg("wait=%s not refused", bad[i]);
    }
    /* The largest wait and the smallest are held. */
    snprintf(
        req, sizeof(req),
        "GET /v1/containers/%s/report?wait=300 HTTP/1.1\r\nHost: x\r\n\r\n",
        A);
    fd = ep_raw_send(a.h, req);
    ep_raw_gather(a.h, fd, buf, sizeof(buf), 400, &closed);
    if (buf[0] != '\0')
        fail_msg("wait=300 answered at once: %.40s", buf);
    assert_false(closed);
    close(fd);
    snprintf(req, sizeof(req),
             "GET /v1/containers/%s/report?wait=1 HTTP/1.1\r\nHost: x\r\n\r\n",
             A);
    t0 = loop_now_ms();
    fd = ep_raw_send(a.h, req);
    while (ep_raw_status(buf) < 0 && loop_now_ms() - t0 < 4000)
        ep_raw_gather(a.h, fd, buf, sizeof(buf), 100, &closed);
    assert_int_equal(ep_raw_status(buf), 202);
    assert_true(loop_now_ms() - t0 >= 900);
    close(fd);

    /* Unknown: 404 at once, whatever the wait. */
    snprintf(path, sizeof(path), "/v1/containers/%s/report?wait=30", B);
    t0 = loop_now_ms();
    assert_int_equal(ep_status_of(a.h, "GET", path), 404);
    if (loop_now_ms() - t0 > 700)
        fail_msg("404 after %llu ms: held",
                 (unsigned long long)(loop_now_ms() - t0));
    ep_api_close(&a);
}

/* The admin socket's waits have the same bounds: drain and audit take
 * 300 and refuse 0 and 301 (audit then says 409: no containerd here). */
static void
t_corner_admin_wait_bounds(void **state)
{
    struct ep_api a;

    (void)state;
    ep_api_open(&a);
    assert_int_equal(ep_admin_status_of(&a, "POST", "/v1/drain?wait=0"), 400);
    assert_int_equal(ep_admin_status_of(&a, "POST", "/v1/drain?wait=301"),
                     400);
    assert_int_equal(ep_admin_status_of(&a, "POST", "/v1/drain?wait=300"),
                     200);
    assert_int_equal(ep_admin_status_of(&a, "POST", "/v1/drain?wait=1"), 200);
    assert_int_equal(ep_admin_status_of(&a, "POST", "/v1/audit?wait=0"), 400);
    assert_int_equal(ep_admin_status_of(&a, "POST", "/v1/audit?wait=301"),
                     400);
    assert_int_equal(ep_admin_status_of(&a, "POST", "/v1/audit?wait=300"),
                     409);
    assert_int_equal(ep_admin_status_of(&a, "POST", "/v1/audit?wait=1"), 409);
    ep_api_close(&a);
}

/* The seqs of a /v1/reports answer, in its order, into seqs[]; returns
 * how many. */
static size_t
report_seqs(struct ep *h, const char *path, long *seqs, size_t cap)
{
    struct ep_resp r;
    struct json_node *root;
    const struct json_node *list;
    size_t i;

    ep_request(h, "GET", path, &r);
    if (r.status != 200)
        fail_msg("%s: status %ld", path, r.status);
    root = ep_json_body(&r);
    list = json_get(root, "reports");
    assert_non_null(list);
    assert_true(list->count <= cap);
    for (i = 0; i < list->count; i++)
        seqs[i] = strtol(json_get(list->items[i], "seq")->str, NULL, 10);
    i = list->count;
    json_free(root);
    ep_resp_clear(&r);
    return i;
}

/* The cursor at its edges: after=0 is every report, oldest first;
 * after the last seq and past it, none; garbage and negatives are
 * refused. limit is 1..1000; without it a page is 50, newest first. */
static void
t_corner_cursor_and_limit(void **state)
{
    struct ep_api a;
    char rid[32];
    long seqs[64];
    static const char *bad[] = {
        "after=-1", "after=x",         "after=1x",
        "after=",   "limit=0",         "limit=1001",
        "limit=-5", "after=1&after=2", "after=99999999999999999999"};
    size_t i, n;

    (void)state;
    ep_api_open(&a);
    for (i = 1; i <= 51; i++) {
        snprintf(rid, sizeof(rid), "r%zu", i);
        assert_int_equal(store_add_report(a.st, rid, A, "{\"x\":1}", 7, 1),
                         STORE_OK);
    }
    n = report_seqs(a.h, "/v1/reports?after=0&limit=3", seqs, 64);
    assert_int_equal(n, 3);
    assert_int_equal(seqs[0], 1);
    assert_int_equal(seqs[1], 2);
    assert_int_equal(seqs[2], 3);
    n = report_seqs(a.h, "/v1/reports?after=49", seqs, 64);
    assert_int_equal(n, 2);
    assert_int_equal(seqs[0], 50);
    assert_int_equal(seqs[1], 51);
    assert_int_equal(report_seqs(a.h, "/v1/reports?after=51", seqs, 64), 0);
    assert_int_equal(report_seqs(a.h, "/v1/reports?after=52", seqs, 64), 0);
    assert_int_equal(
        report_seqs(a.h, "/v1/reports?after=9223372036854775807", seqs, 64),
        0);
    /* The default page: the 50 newest, newest first. */
    n = report_seqs(a.h, "/v1/reports", seqs, 64);
    assert_int_equal(n, 50);
    assert_int_equal(seqs[0], 51);
    assert_int_equal(seqs[49], 2);
    assert_int_equal(report_seqs(a.h, "/v1/reports?limit=1000", seqs, 64), 51);
    n = report_seqs(a.h, "/v1/reports?limit=1", seqs, 64);
    assert_int_equal(n, 1);
    assert_int_equal(seqs[0], 51);
    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char path[128];

        snprintf(path, sizeof(path), "/v1/reports?%s", bad[i]);
        if (ep_status_of(a.h, "GET", path) != 400)
            fail_msg("%s not refused", bad[i]);
    }
    ep_api_close(&a);
}

/* At most 16 streams at once: the 17th is refused 503 with Retry-After,
 * and a stream whose client left gives its place back. */
static void
t_corner_streams_bounded(void **state)
{
    struct ep_api a;
    static const char get[] =
        "GET /v1/reports/stream HTTP/1.1\r\nHost: x\r\n\r\n";
    int fds[17], closed, i;
    char buf[2048];

    (void)state;
    ep_api_open(&a);
    for (i = 0; i < 16; i++) {
        buf[0] = '\0';
        fds[i] = ep_raw_send(a.h, get);
        ep_raw_gather(a.h, fds[i], buf, sizeof(buf), 150, &closed);
        if (ep_raw_status(buf) != 200)
            fail_msg("stream %d: %.60s", i + 1, buf);
        assert_false(closed);
    }
    buf[0] = '\0';
    fds[16] = ep_raw_send(a.h, get);
    ep_raw_gather(a.h, fds[16], buf, sizeof(buf), 300, &closed);
    assert_int_equal(ep_raw_status(buf), 503);
    assert_non_null(strstr(buf, "Retry-After: 1\r\n"));
    close(fds[16]);
    /* One leaves: its place is free within a tick. */
    close(fds[0]);
    TU_RUN_UNTIL(a.h->reapd.l, status_connections(a.h->s) == 15, 2500);
    buf[0] = '\0';
    fds[0] = ep_raw_send(a.h, get);
    ep_raw_gather(a.h, fds[0], buf, sizeof(buf), 300, &closed);
    assert_int_equal(ep_raw_status(buf), 200);
    /* HEAD has no stream to give. */
    buf[0] = '\0';
    fds[16] = ep_raw_send(a.h, "HEAD /v1/reports/stream HTTP/1.1\r\n"
                               "Host: x\r\n\r\n");
    ep_raw_gather(a.h, fds[16], buf, sizeof(buf), 300, &closed);
    assert_int_equal(ep_raw_status(buf), 405);
    for (i = 0; i < 17; i++)
        close(fds[i]);
    ep_api_close(&a);
}

/* The report routes need the store: 503 without it, on every path. */
static void
t_corner_report_routes_without_store(void **state)
{
    struct ep *h = ep_new();
    char path[256];

    (void)state;
    snprintf(path, sizeof(path), "/v1/containers/%s/report", A);
    assert_int_equal(ep_status_of(h, "GET", path), 503);
    snprintf(path, sizeof(path), "/v1/containers/%s/report?wait=5", A);
    assert_int_equal(ep_status_of(h, "GET", path), 503);
    assert_int_equal(ep_status_of(h, "GET", "/v1/reports"), 503);
    assert_int_equal(ep_status_of(h, "GET", "/v1/reports/stream"), 503);
    ep_expect_live(h);
    ep_free(h);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(t_wait_for_report),
        cmocka_unit_test(t_wait_client_gone),
        cmocka_unit_test(t_stream_and_cursor),
        cmocka_unit_test(t_corner_wait_bounds),
        cmocka_unit_test(t_corner_admin_wait_bounds),
        cmocka_unit_test(t_corner_cursor_and_limit),
        cmocka_unit_test(t_corner_streams_bounded),
        cmocka_unit_test(t_corner_report_routes_without_store),
    };

    signal(SIGPIPE, SIG_IGN); /* raw clients and the fake engine */
    tu_test_filters();
    log_setup(getenv("TEST_DEBUG") ? LOG_LEVEL_DEBUG : LOG_LEVEL_ERROR,
              LOG_FORMAT_TEXT);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
