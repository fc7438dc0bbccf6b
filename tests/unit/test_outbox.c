/*
 * test_outbox — store -> upstream (agent/outbox.c) with a real store in a
 * temporary directory, a real upstream module and a receiver embedded in
 * the test (evhttp on 127.0.0.1, on the loop's own event_base).
 *
 * What must hold: every report the store says is due goes out; one that
 * can never be delivered as it is (upstream refuses its size or its ids)
 * becomes a dead letter at once, with its reason, instead of being handed
 * back on every pass, so it never holds back anybody else's reports.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "log.h"
#include "loop.h"
#include "outbox.h"
#include "store.h"
#include "testutil.h"
#include "upstream.h"

#define MAX_KEYS 256

/* The receiver: answers every POST with `code`, remembers each
 * Idempotency-Key and the largest body it was sent. */
struct srv {
    struct evhttp *http;
    int port;
    int code;
    char keys[MAX_KEYS][STORE_REPORT_ID_MAX + 1];
    int nkeys;
    size_t max_body;
};

struct fx {
    char dir[64];
    char url[96];
    struct loop *l;
    struct store *st;
    struct outbox *ob;
    struct upstream *u;
    struct srv srv;
};

static void
on_request(struct evhttp_request *req, void *arg)
{
    struct srv *s = arg;
    const char *key = evhttp_find_header(evhttp_request_get_input_headers(req),
                                         "Idempotency-Key");
    size_t len = evbuffer_get_length(evhttp_request_get_input_buffer(req));

    if (key != NULL && s->nkeys < MAX_KEYS)
        snprintf(s->keys[s->nkeys++], sizeof(s->keys[0]), "%s", key);
    if (len > s->max_body)
        s->max_body = len;
    evhttp_send_reply(req, s->code, s->code < 300 ? "OK" : "No", NULL);
}

static int
srv_seen(const struct srv *s, const char *key)
{
    int i, n = 0;

    for (i = 0; i < s->nkeys; i++)
        n += strcmp(s->keys[i], key) == 0;
    return n;
}

static struct fx *
fx_new(void)
{
    struct fx *f = calloc(1, sizeof(*f));
    char err[512];

    assert_non_null(f);
    snprintf(f->dir, sizeof(f->dir), "/tmp/reapd-outbox-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    assert_int_equal(store_open(f->dir, &f->st, err, sizeof(err)), STORE_OK);
    /* No fsync per report: this test is about delivery, not durability. */
    store_set_journaled(f->st, true);
    f->l = loop_new();
    assert_non_null(f->l);
    f->srv.code = 200;
    f->srv.http = evhttp_new(loop_base(f->l));
    assert_non_null(f->srv.http);
    evhttp_set_max_body_size(f->srv.http, 8u << 20);
    evhttp_set_gencb(f->srv.http, on_request, &f->srv);
    f->srv.port = tu_http_bind(f->srv.http);
    snprintf(f->url, sizeof(f->url), "http://127.0.0.1:%d/ingest",
             f->srv.port);
    return f;
}

/* The outbox and its upstream, wired as main.c does. */
static void
fx_start(struct fx *f)
{
    struct upstream_opts o;
    char err[UPSTREAM_ERR_MAX] = "";

    memset(&o, 0, sizeof(o));
    o.url = f->url;
    o.timeout_ms = 3000;
    o.max_in_flight = 4;
    o.retry_base_ms = 10;
    o.retry_max_ms = 20;
    f->ob = outbox_new(f->l, f->st, NULL);
    assert_non_null(f->ob);
    assert_int_equal(upstream_new(f->l, &o, outbox_upstream_cbs(), f->ob,
                                  &f->u, err, sizeof(err)),
                     0);
    outbox_set_upstream(f->ob, f->u);
}

static void
fx_free(struct fx *f)
{
    upstream_free(f->u);
    outbox_free(f->ob);
    evhttp_free(f->srv.http);
    loop_free(f->l);
    assert_int_equal(store_close(f->st), STORE_OK);
    tu_rm_store(f->dir);
    assert_int_equal(rmdir(f->dir), 0);
    free(f);
}

static int
is_delivered(struct fx *f, const void *arg)
{
    struct store_report r;
    int rc = store_get_report(f->st, arg, false, &r);
    int yes = rc == STORE_OK && r.state == STORE_DELIVERED;

    if (rc == STORE_OK)
        store_report_clear(&r);
    return yes;
}

static int
n_dead(struct fx *f, const void *arg)
{
    struct store_counts c;

    assert_int_equal(store_counts(f->st, &c), STORE_OK);
    return c.dead >= *(const uint64_t *)arg;
}

/* A report body of exactly `len` bytes (a JSON string, padded). */
static char *
body_of(size_t len)
{
    char *b = malloc(len + 1);

    assert_non_null(b);
    assert_true(len >= 2);
    memset(b, 'x', len);
    b[0] = '"';
    b[len - 1] = '"';
    b[len] = '\0';
    return b;
}

/* Report n is a dead letter for `why`, its error saying `text`, and no
 * attempt was counted unless upstream refused it. */
static void
expect_dead(struct fx *f, unsigned n, enum store_dead_reason why,
            const char *text)
{
    char id[STORE_REPORT_ID_MAX + 1];
    struct store_report r;

    tu_report_id(id, n);
    assert_int_equal(store_get_report(f->st, id, false, &r), STORE_OK);
    assert_int_equal(r.state, STORE_DEAD);
    assert_int_equal(r.dead_reason, why);
    assert_non_null(r.last_error);
    if (strstr(r.last_error, text) == NULL)
        fail_msg("report %u: last_error \"%s\", want \"%s\"", n, r.last_error,
                 text);
    assert_int_equal(r.attempts, why == STORE_DEAD_REJECTED ? 1 : 0);
    store_report_clear(&r);
}

/*
 * 64 reports upstream will never take (over its size limit), one per
 * container, all older than one ordinary report: the ordinary one is
 * delivered, and each of the 64 is a dead letter, once.
 */
static void
t_oversize_do_not_block(void **state)
{
    struct fx *f = fx_new();
    const unsigned nbig = 65;
    char id[STORE_REPORT_ID_MAX + 1], ctr[STORE_ID_MAX + 1];
    char *big = body_of(UPSTREAM_BODY_MAX + 1), *small = body_of(40);
    uint64_t want = nbig;
    struct store_counts c;
    struct outbox_stats os;
    unsigned i;

    (void)state;
    for (i = 1; i <= nbig; i++) {
        tu_report_id(id, i);
        tu_container_id(ctr, i);
        assert_int_equal(
            store_add_report(f->st, id, ctr, big, UPSTREAM_BODY_MAX + 1, 1000),
            STORE_OK);
    }
    tu_report_id(id, 1000);
    tu_container_id(ctr, 1000);
    assert_int_equal(store_add_report(f->st, id, ctr, small, 40, 1000),
                     STORE_OK);
    fx_start(f);
    /* Generous: under valgrind each 1 MiB body read back costs ~0.1 s. */
    TU_RUN_UNTIL(f->l, is_delivered(f, id), 60000);
    TU_RUN_UNTIL(f->l, n_dead(f, &want), 60000);
    assert_int_equal(srv_seen(&f->srv, id), 1);
    assert_int_equal(f->srv.nkeys, 1); /* none of the big ones was sent */
    assert_true(f->srv.max_body <= UPSTREAM_BODY_MAX);
    assert_int_equal(store_counts(f->st, &c), STORE_OK);
    assert_int_equal(c.pending, 0);
    assert_int_equal(c.delivered, 1);
    assert_int_equal(c.dead, 65);
    expect_dead(f, 1, STORE_DEAD_TOO_LARGE,
                "1048577 bytes, over the "
                "1048576 bytes upstream takes");
    expect_dead(f, 65, STORE_DEAD_TOO_LARGE, "never sent");
    outbox_stats(f->ob, &os);
    assert_int_equal(os.dead, 65);
    assert_int_equal(os.delivered, 1);
    assert_int_equal(store_check(f->st), STORE_OK);
    free(big);
    free(small);
    fx_free(f);
}

/*
 * The same with reports whose container id the store takes and upstream
 * does not (STORE_ID_MAX characters; upstream takes one fewer).
 */
static void
t_bad_ids_do_not_block(void **state)
{
    struct fx *f = fx_new();
    const unsigned nbad = 64;
    char id[STORE_REPORT_ID_MAX + 1], ctr[STORE_ID_MAX + 1];
    char *small = body_of(40);
    uint64_t want = nbad;
    struct store_counts c;
    unsigned i;

    (void)state;
    for (i = 1; i <= nbad; i++) {
        tu_report_id(id, i);
        snprintf(ctr, sizeof(ctr), "%0128x", i);
        assert_int_equal(strlen(ctr), STORE_ID_MAX);
        assert_int_equal(store_add_report(f->st, id, ctr, small, 40, 1000),
                         STORE_OK);
    }
    tu_report_id(id, 1000);
    tu_container_id(ctr, 1000);
    assert_int_equal(store_add_report(f->st, id, ctr, small, 40, 1000),
                     STORE_OK);
    fx_start(f);
    /* Generous: under valgrind each 1 MiB body read back costs ~0.1 s. */
    TU_RUN_UNTIL(f->l, is_delivered(f, id), 60000);
    TU_RUN_UNTIL(f->l, n_dead(f, &want), 60000);
    assert_int_equal(f->srv.nkeys, 1);
    assert_int_equal(store_counts(f->st, &c), STORE_OK);
    assert_int_equal(c.pending, 0);
    assert_int_equal(c.delivered, 1);
    assert_int_equal(c.dead, 64);
    expect_dead(f, 1, STORE_DEAD_INVALID, "id not one upstream takes");
    expect_dead(f, 64, STORE_DEAD_INVALID, "never sent");
    free(small);
    fx_free(f);
}

/* One container: an oversize report, then an ordinary one. The order
 * per container holds (the second is sent only once the first is dead),
 * and the first does not hold it back. */
static void
t_same_container(void **state)
{
    struct fx *f = fx_new();
    char id[STORE_REPORT_ID_MAX + 1], id2[STORE_REPORT_ID_MAX + 1];
    char ctr[STORE_ID_MAX + 1];
    char *big = body_of(UPSTREAM_BODY_MAX + 1), *small = body_of(40);

    (void)state;
    tu_report_id(id, 1);
    tu_report_id(id2, 2);
    tu_container_id(ctr, 1);
    assert_int_equal(
        store_add_report(f->st, id, ctr, big, UPSTREAM_BODY_MAX + 1, 1000),
        STORE_OK);
    assert_int_equal(store_add_report(f->st, id2, ctr, small, 40, 1000),
                     STORE_OK);
    fx_start(f);
    TU_RUN_UNTIL(f->l, is_delivered(f, id2), 10000);
    expect_dead(f, 1, STORE_DEAD_TOO_LARGE, "never sent");
    assert_int_equal(f->srv.nkeys, 1);
    assert_string_equal(f->srv.keys[0], id2);
    free(big);
    free(small);
    fx_free(f);
}

/* What upstream refuses for good (a 4xx) is a dead letter "rejected",
 * with the status in its error and the attempt counted. */
static void
t_rejected(void **state)
{
    struct fx *f = fx_new();
    char id[STORE_REPORT_ID_MAX + 1], ctr[STORE_ID_MAX + 1];
    char *small = body_of(40);
    uint64_t want = 1;
    struct outbox_stats os;

    (void)state;
    f->srv.code = 422;
    tu_report_id(id, 1);
    tu_container_id(ctr, 1);
    assert_int_equal(store_add_report(f->st, id, ctr, small, 40, 1000),
                     STORE_OK);
    fx_start(f);
    TU_RUN_UNTIL(f->l, n_dead(f, &want), 10000);
    expect_dead(f, 1, STORE_DEAD_REJECTED, "HTTP 422");
    assert_int_equal(srv_seen(&f->srv, id), 1);
    outbox_stats(f->ob, &os);
    assert_int_equal(os.dead, 1);
    assert_int_equal(os.delivered, 0);
    free(small);
    fx_free(f);
}

/*
 * An operator's requeue (POST /v1/reports/{id}/requeue): a dead letter
 * goes out again once kicked and is delivered; a pending report requeued
 * while upstream holds it and retries is delivered once upstream takes
 * it, with nothing left pending and no second copy queued.
 */
static void
t_requeue(void **state)
{
    struct fx *f = fx_new();
    char id[STORE_REPORT_ID_MAX + 1], id2[STORE_REPORT_ID_MAX + 1];
    char ctr[STORE_ID_MAX + 1];
    char *small = body_of(40);
    uint64_t want = 1;
    struct store_counts c;

    (void)state;
    f->srv.code = 422;
    tu_report_id(id, 1);
    tu_container_id(ctr, 1);
    assert_int_equal(store_add_report(f->st, id, ctr, small, 40, 1000),
                     STORE_OK);
    fx_start(f);
    TU_RUN_UNTIL(f->l, n_dead(f, &want), 10000);
    f->srv.code = 200;
    assert_int_equal(store_requeue(f->st, id, 2000), STORE_OK);
    outbox_kick(f->ob);
    TU_RUN_UNTIL(f->l, is_delivered(f, id), 10000);
    assert_int_equal(srv_seen(&f->srv, id), 2);

    /* In flight and retrying when requeued. */
    f->srv.code = 503;
    tu_report_id(id2, 2);
    assert_int_equal(store_add_report(f->st, id2, ctr, small, 40, 3000),
                     STORE_OK);
    outbox_kick(f->ob);
    TU_RUN_UNTIL(f->l, srv_seen(&f->srv, id2) >= 2, 10000);
    assert_int_equal(store_requeue(f->st, id2, 4000), STORE_OK);
    outbox_kick(f->ob);
    tu_run_for(f->l, 50);
    f->srv.code = 200;
    TU_RUN_UNTIL(f->l, is_delivered(f, id2), 10000);
    tu_run_for(f->l, 100);
    assert_int_equal(store_counts(f->st, &c), STORE_OK);
    assert_int_equal(c.pending, 0);
    assert_int_equal(c.dead, 0);
    assert_int_equal(c.delivered, 2);
    assert_int_equal(store_check(f->st), STORE_OK);
    free(small);
    fx_free(f);
}

/* The child of t_disk_full_no_storm: 0, or the number of the check that
 * failed. */
static int
disk_full_child(void *arg)
{
    struct fx *f = fx_new();
    char id[STORE_REPORT_ID_MAX + 1], ctr[STORE_ID_MAX + 1];
    char *small = body_of(40);
    struct outbox_stats os;
    struct rlimit rl;
    int rc = 0;

    (void)arg;
    tu_report_id(id, 1);
    tu_container_id(ctr, 1);
    if (store_add_report(f->st, id, ctr, small, 40, 1000) != STORE_OK)
        return 10;
    /* The store's writes fail as on a full disk. */
    if (tu_disk_full(&rl) != 0)
        return 12;
    fx_start(f);
    /* Delivered (under valgrind on a busy host that takes a while), then
     * time for a storm to show. */
    TU_RUN_UNTIL(f->l, srv_seen(&f->srv, id) >= 1, 20000);
    tu_run_for(f->l, 1500);
    outbox_stats(f->ob, &os);
    if (srv_seen(&f->srv, id) != 1)
        rc = 1; /* delivered once, not again and again */
    else if (os.delivered != 1 || os.unrecorded != 1 || os.store_errors < 1)
        rc = 2;
    else if (is_delivered(f, id))
        rc = 3;
    if (rc != 0) {
        fprintf(stderr, "disk full: %d deliveries, %llu delivered, %zu held\n",
                srv_seen(&f->srv, id), (unsigned long long)os.delivered,
                os.unrecorded);
        return rc;
    }
    /* Space again: the held outcome is written (at the safety net's pump
     * at the latest), and the report is still not sent again. */
    if (setrlimit(RLIMIT_FSIZE, &rl) != 0)
        return 13;
    TU_RUN_UNTIL(f->l, is_delivered(f, id), 10000);
    outbox_stats(f->ob, &os);
    if (srv_seen(&f->srv, id) != 1)
        return 4;
    if (os.unrecorded != 0)
        return 5;
    free(small);
    fx_free(f);
    return 0;
}

/*
 * Delivered while the state cannot be written (disk full): the outcome is
 * held, the report is not sent again (it was, tens of thousands of times
 * in seconds, before), and it is recorded once the disk has room. In a
 * child: RLIMIT_FSIZE is the process's.
 */
static void
t_disk_full_no_storm(void **state)
{
    (void)state;
    assert_int_equal(tu_fork(disk_full_child, NULL), 0);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(t_oversize_do_not_block),
        cmocka_unit_test(t_bad_ids_do_not_block),
        cmocka_unit_test(t_same_container),
        cmocka_unit_test(t_rejected),
        cmocka_unit_test(t_requeue),
        cmocka_unit_test(t_disk_full_no_storm),
    };

    log_setup(LOG_LEVEL_ERROR, LOG_FORMAT_TEXT);
    tu_test_filters(); /* REAPD_TEST_ONLY, TEST_FILTER */
    return cmocka_run_group_tests(tests, NULL, NULL);
}
