/*
 * test_admin — the admin socket's writes in agent/admin.c: requeue by
 * report id and of every dead letter, only on the admin socket (0600,
 * never taken over from a live one). Over HTTP, with a store
 * (endpoint.h's ep_api).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "endpoint.h"
#include "json.h"
#include "log.h"
#include "status.h"
#include "store.h"

static const char *A =
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa1";
static const char *B =
    "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb2";

/* Writes: only on the admin socket; requeue by id (404, 409) and of all
 * dead letters; drain answers 200 when nothing is in flight. The socket
 * is 0600 and a live one is never taken over. */
static void
t_admin_writes(void **state)
{
    struct ep_api a;
    struct ep_resp r;
    struct json_node *root;
    struct stat st;
    struct status *second;
    char path[256];

    (void)state;
    ep_api_open(&a);
    assert_int_equal(stat(a.asock, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    second = status_new_admin(a.h->reapd.l, a.asock, a.h->reapd.r);
    assert_null(second);
    assert_int_equal(stat(a.asock, &st), 0); /* still the first's */

    ep_request(a.h, "POST", "/v1/reports/requeue?state=dead", &r);
    assert_int_equal(r.status, 405);
    ep_resp_clear(&r);
    ep_admin_request(&a, "GET", "/v1/drain", &r);
    assert_int_equal(r.status, 405);
    assert_string_equal(r.allow, "POST");
    ep_resp_clear(&r);

    /* A dead letter, by hand (no upstream here). */
    assert_int_equal(store_add_report(a.st, "r1", A, "{\"x\":1}", 7, 1),
                     STORE_OK);
    assert_int_equal(store_mark_dead(a.st, "r1", "HTTP 400"), STORE_OK);
    assert_int_equal(store_add_delivered(a.st, "r2", B, "{\"x\":2}", 7, 1),
                     STORE_OK);
    ep_admin_request(&a, "POST", "/v1/reports/r2/requeue", &r);
    assert_int_equal(r.status, 409);
    ep_resp_clear(&r);
    ep_admin_request(&a, "POST", "/v1/reports/r9/requeue", &r);
    assert_int_equal(r.status, 404);
    ep_resp_clear(&r);
    ep_admin_request(&a, "POST", "/v1/reports/requeue", &r);
    assert_int_equal(r.status, 400);
    ep_resp_clear(&r);
    ep_admin_request(&a, "POST", "/v1/drain?wait=1", &r);
    assert_int_equal(r.status, 200); /* no upstream: r1 dead, not pending */
    ep_resp_clear(&r);
    ep_admin_request(&a, "POST", "/v1/reports/requeue?state=dead", &r);
    assert_int_equal(r.status, 200);
    root = ep_json_body(&r);
    assert_int_equal(strtol(json_get(root, "requeued")->str, NULL, 10), 1);
    json_free(root);
    ep_resp_clear(&r);
    /* Pending now, and nothing delivers it: a drain says so. */
    ep_admin_request(&a, "POST", "/v1/drain", &r);
    assert_int_equal(r.status, 202);
    root = ep_json_body(&r);
    assert_false(json_get(root, "drained")->boolean);
    assert_int_equal(strtol(json_get(root, "pending")->str, NULL, 10), 1);
    json_free(root);
    ep_resp_clear(&r);
    /* No containerd channel here: nothing to audit. */
    ep_admin_request(&a, "POST", "/v1/audit", &r);
    assert_int_equal(r.status, 409);
    ep_resp_clear(&r);
    ep_request(a.h, "POST", "/v1/audit", &r);
    assert_int_equal(r.status, 405);
    ep_resp_clear(&r);
    snprintf(path, sizeof(path), "/v1/reports/r1/requeue");
    ep_admin_request(&a, "POST", path, &r);
    assert_int_equal(r.status, 200);
    ep_resp_clear(&r);

    ep_request(a.h, "GET", "/v1/status", &r);
    assert_int_equal(r.status, 200);
    root = ep_json_body(&r);
    assert_true(json_get(root, "ready")->boolean);
    assert_int_equal(
        strtol(json_get(json_get(root, "outbox"), "pending")->str, NULL, 10),
        1);
    assert_int_equal(strtol(json_get(root, "last_seq")->str, NULL, 10), 2);
    json_free(root);
    ep_resp_clear(&r);
    ep_api_close(&a);
    {
        /* Gone with its listener. */
        assert_int_equal(stat(a.asock, &st), -1);
    }
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(t_admin_writes),
    };

    signal(SIGPIPE, SIG_IGN); /* raw clients and the fake engine */
    tu_test_filters();
    log_setup(getenv("TEST_DEBUG") ? LOG_LEVEL_DEBUG : LOG_LEVEL_ERROR,
              LOG_FORMAT_TEXT);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
