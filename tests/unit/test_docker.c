/*
 * test_docker — the Docker Engine API client in agent/docker.c: its calls
 * and its events subscription, end to end against the fake engine
 * (tests/fake/) on a unix socket, where HTTP statuses can be injected on
 * demand. How answers are read is test_docker_parse's.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <curl/curl.h>
#include <signal.h>
#include <sys/wait.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bounds.h"
#include "docker.h"
#include "events.h"
#include "fake_engine.h"
#include "lifecycle.h"
#include "log.h"
#include "loop.h"
#include "policy.h"
#include "testutil.h"

static const char *A =
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa1";
static const char *B =
    "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb2";

/* ---- helpers ---------------------------------------------------------- */

static const char *
label(const struct docker_container *c, const char *key)
{
    size_t i;

    for (i = 0; i < c->nlabels; i++)
        if (strcmp(c->labels[i].key, key) == 0)
            return c->labels[i].value;
    return NULL;
}

/* ---- end to end, against the fake engine ----------------------------- */

struct e2e {
    char dir[64];
    char sock[96];
    struct loop *l;
    struct fake_engine *fe;
    struct docker *d;
    int subscribed;
    int lost;
    char lost_why[256];
    int events;
    char last_action[32];
    int stop_in_event;
};

/* The result of one call. */
struct res {
    int done;
    enum docker_status st;
    long http;
    char msg[512];
    int has_c;
    char id[65];
    char name[64];
    char image[64];
    char managed[16];
    enum lc_run run;
    bool finished;
    bool has_exit;
    int exit_code;
    size_t n;
    char ids[8][65];
};

static void
w_subscribed(void *arg)
{
    struct e2e *e = arg;

    e->subscribed++;
}

static void
w_event(const struct docker_event *ev, void *arg)
{
    struct e2e *e = arg;

    (void)ev;
    e->events++;
    if (e->stop_in_event)
        docker_watch_stop(e->d);
}

static void
w_lost(const char *why, uint64_t retry_ms, void *arg)
{
    struct e2e *e = arg;

    e->lost++;
    snprintf(e->lost_why, sizeof(e->lost_why), "%s", why);
    assert_true(retry_ms <= 200 * 2); /* capped by reconnect_max_ms */
}

static const struct docker_watch_cbs WCBS = {w_subscribed, w_event, w_lost,
                                             NULL};

/* A client whose calls time out after `req_ms`. */
static struct e2e *
e2e_new_timeout(int with_engine, long req_ms)
{
    struct e2e *e = calloc(1, sizeof(*e));

    assert_non_null(e);
    snprintf(e->dir, sizeof(e->dir), "/tmp/reapd-docker-XXXXXX");
    assert_non_null(mkdtemp(e->dir));
    snprintf(e->sock, sizeof(e->sock), "%s/docker.sock", e->dir);
    e->l = loop_new();
    assert_non_null(e->l);
    if (with_engine) {
        e->fe = fake_engine_new(loop_base(e->l), e->sock);
        assert_non_null(e->fe);
    }
    e->d = docker_new(e->l, e->sock, req_ms, 200);
    assert_non_null(e->d);
    return e;
}

static struct e2e *
e2e_new(int with_engine)
{
    return e2e_new_timeout(with_engine, 2000);
}

static void
e2e_free(struct e2e *e)
{
    docker_free(e->d);
    fake_engine_free(e->fe);
    loop_free(e->l);
    unlink(e->sock);
    rmdir(e->dir);
    free(e);
}

static void
copy_container(struct res *r, const struct docker_container *c)
{
    const char *m = label(c, "reapd.managed");

    r->has_c = 1;
    snprintf(r->id, sizeof(r->id), "%s", c->id);
    snprintf(r->name, sizeof(r->name), "%s", c->name ? c->name : "(null)");
    snprintf(r->image, sizeof(r->image), "%s", c->image ? c->image : "(null)");
    snprintf(r->managed, sizeof(r->managed), "%s", m ? m : "(none)");
    r->run = c->state.run;
    r->finished = c->state.finished;
    r->has_exit = c->state.has_exit_code;
    r->exit_code = c->state.exit_code;
}

static void
cb_inspect(enum docker_status st, const struct docker_container *c,
           const char *msg, void *arg)
{
    struct res *r = arg;

    r->done++;
    r->st = st;
    snprintf(r->msg, sizeof(r->msg), "%s", msg ? msg : "");
    if (c != NULL)
        copy_container(r, c);
}

static void
cb_list(enum docker_status st, const struct docker_container *cs, size_t n,
        const char *msg, void *arg)
{
    struct res *r = arg;
    size_t i;

    r->done++;
    r->st = st;
    r->n = n;
    r->has_c = cs != NULL;
    snprintf(r->msg, sizeof(r->msg), "%s", msg ? msg : "");
    for (i = 0; i < n && i < 8; i++)
        snprintf(r->ids[i], sizeof(r->ids[i]), "%s", cs[i].id);
    if (n > 0)
        copy_container(r, &cs[0]);
}

static void
cb_delete(enum docker_status st, long http_status, const char *msg, void *arg)
{
    struct res *r = arg;

    r->done++;
    r->st = st;
    r->http = http_status;
    snprintf(r->msg, sizeof(r->msg), "%s", msg ? msg : "");
}

static struct e2e *
e2e_subscribed_timeout(long req_ms)
{
    struct e2e *e = e2e_new_timeout(1, req_ms);

    assert_int_equal(docker_watch_start(e->d, &WCBS, e, 0), 0);
    TU_RUN_UNTIL(e->l, e->subscribed > 0, 3000);
    return e;
}

static struct e2e *
e2e_subscribed(void)
{
    return e2e_subscribed_timeout(2000);
}

static void
do_inspect(struct e2e *e, const char *id, struct res *r)
{
    memset(r, 0, sizeof(*r));
    assert_non_null(docker_inspect(e->d, id, cb_inspect, r));
    TU_RUN_UNTIL(e->l, r->done > 0, 3000);
    assert_int_equal(r->done, 1);
}

static void
do_list(struct e2e *e, const char *id, struct res *r)
{
    memset(r, 0, sizeof(*r));
    assert_non_null(docker_list(e->d, id, cb_list, r));
    TU_RUN_UNTIL(e->l, r->done > 0, 3000);
    assert_int_equal(r->done, 1);
}

static void
do_delete(struct e2e *e, const char *id, struct res *r)
{
    memset(r, 0, sizeof(*r));
    assert_non_null(docker_delete(e->d, id, true, false, cb_delete, r));
    TU_RUN_UNTIL(e->l, r->done > 0, 3000);
    assert_int_equal(r->done, 1);
}

static void
t_e2e_not_negotiated(void **state)
{
    struct e2e *e = e2e_new(1);
    struct res r = {0};

    (void)state;
    /* No version yet: no call can start. */
    assert_null(docker_api_version(e->d));
    assert_null(docker_inspect(e->d, A, cb_inspect, &r));
    assert_null(docker_list(e->d, NULL, cb_list, &r));
    assert_null(docker_delete(e->d, A, true, true, cb_delete, &r));
    assert_false(docker_watch_connected(e->d));
    assert_int_equal(docker_watch_start(e->d, &WCBS, e, 0), 0);
    /* Idempotent. */
    assert_int_equal(docker_watch_start(e->d, &WCBS, e, 0), 0);
    TU_RUN_UNTIL(e->l, e->subscribed > 0, 3000);
    assert_int_equal(e->subscribed, 1);
    assert_int_equal(e->lost, 0);
    assert_true(docker_watch_connected(e->d));
    assert_string_equal(docker_api_version(e->d), "1.41");
    assert_int_equal(fake_engine_count(e->fe, FAKE_VERSION), 1);
    assert_int_equal(fake_engine_count(e->fe, FAKE_EVENTS), 1);
    assert_int_equal(fake_engine_open_streams(e->fe), 1);
    assert_int_equal(docker_watch_reconnects(e->d), 0);
    assert_int_equal(r.done, 0);
    e2e_free(e);
}

static void
t_e2e_inspect(void **state)
{
    struct e2e *e = e2e_subscribed();
    struct res r;

    (void)state;
    fake_engine_add(e->fe, A, "web-1", "{\"reapd.managed\":\"true\"}", NULL,
                    1);
    do_inspect(e, A, &r);
    assert_int_equal(r.st, DOCKER_OK);
    assert_true(r.has_c);
    assert_string_equal(r.id, A);
    assert_string_equal(r.name, "web-1");
    assert_string_equal(r.image, "img:1");
    assert_string_equal(r.managed, "true");
    assert_int_equal(r.run, LC_RUN_RUNNING);
    assert_false(r.finished);

    fake_engine_exit(e->fe, A, 42, 42);
    do_inspect(e, A, &r);
    assert_int_equal(r.st, DOCKER_OK);
    assert_int_equal(r.run, LC_RUN_EXITED);
    assert_true(r.finished);
    assert_true(r.has_exit);
    assert_int_equal(r.exit_code, 42);

    do_inspect(e, B, &r);
    assert_int_equal(r.st, DOCKER_NOT_FOUND);
    assert_false(r.has_c);
    assert_non_null(strstr(r.msg, "No such container"));

    fake_engine_fail(e->fe, FAKE_INSPECT, 500, 1, "engine on fire");
    do_inspect(e, A, &r);
    assert_int_equal(r.st, DOCKER_FAILED);
    assert_false(r.has_c);
    assert_non_null(strstr(r.msg, "500"));
    assert_non_null(strstr(r.msg, "engine on fire"));

    /* Other 4xx: failed, not "not found". */
    fake_engine_fail(e->fe, FAKE_INSPECT, 400, 1, "bad parameter");
    do_inspect(e, A, &r);
    assert_int_equal(r.st, DOCKER_FAILED);

    /* The fault was used up; the real answer is back. */
    do_inspect(e, A, &r);
    assert_int_equal(r.st, DOCKER_OK);

    /* Ids are checked before anything is sent. */
    assert_null(docker_inspect(e->d, "abc", cb_inspect, &r));
    assert_null(docker_inspect(e->d, NULL, cb_inspect, &r));
    assert_null(docker_inspect(e->d, "../version", cb_inspect, &r));
    e2e_free(e);
}

static void
t_e2e_list(void **state)
{
    struct e2e *e = e2e_subscribed();
    struct res r;

    (void)state;
    do_list(e, NULL, &r);
    assert_int_equal(r.st, DOCKER_OK);
    assert_int_equal(r.n, 0);

    fake_engine_add(e->fe, A, "a", "{\"reapd.managed\":\"true\"}", NULL, 0);
    fake_engine_add(e->fe, B, "b", NULL, "exited", 0);
    do_list(e, NULL, &r);
    assert_int_equal(r.st, DOCKER_OK);
    assert_int_equal(r.n, 2);
    assert_string_equal(r.ids[0], A);
    assert_string_equal(r.ids[1], B);
    assert_string_equal(r.name, "a");
    assert_string_equal(r.managed, "true");
    assert_false(r.has_exit); /* a list carries no exit code */

    /* Filtered by id. */
    do_list(e, B, &r);
    assert_int_equal(r.st, DOCKER_OK);
    assert_int_equal(r.n, 1);
    assert_string_equal(r.ids[0], B);
    assert_int_equal(r.run, LC_RUN_EXITED);

    fake_engine_fail(e->fe, FAKE_LIST, 500, 1, "list broke");
    do_list(e, NULL, &r);
    assert_int_equal(r.st, DOCKER_FAILED);
    assert_int_equal(r.n, 0);
    assert_false(r.has_c);
    assert_non_null(strstr(r.msg, "list broke"));

    assert_null(docker_list(e->d, "nothex", cb_list, &r));
    e2e_free(e);
}

static void
t_e2e_delete(void **state)
{
    struct e2e *e = e2e_subscribed();
    struct res r;

    (void)state;
    fake_engine_add(e->fe, A, "a", NULL, "exited", 0);

    fake_engine_fail(e->fe, FAKE_DELETE, 409, 1,
                     "removal of container is already in progress");
    do_delete(e, A, &r);
    assert_int_equal(r.st, DOCKER_CONFLICT);
    assert_int_equal(r.http, 409);
    assert_non_null(strstr(r.msg, "already in progress"));

    fake_engine_fail(e->fe, FAKE_DELETE, 500, 1, "failed to delete task");
    do_delete(e, A, &r);
    assert_int_equal(r.st, DOCKER_FAILED);
    assert_int_equal(r.http, 500);
    assert_non_null(strstr(r.msg, "failed to delete task"));
    assert_true(fake_engine_has(e->fe, A));

    do_delete(e, A, &r);
    assert_int_equal(r.st, DOCKER_OK);
    assert_int_equal(r.http, 204);
    assert_false(fake_engine_has(e->fe, A));

    do_delete(e, A, &r);
    assert_int_equal(r.st, DOCKER_NOT_FOUND);
    assert_int_equal(r.http, 404);
    assert_int_equal(fake_engine_count(e->fe, FAKE_DELETE), 4);

    assert_null(docker_delete(e->d, "A", true, false, cb_delete, &r));
    e2e_free(e);
}

/* docker_list_all hands its answer over: it stays readable after the
 * call is done, an entry at a time, until the caller frees it (a relist
 * takes it in over several loop turns); a bad entry is skipped, not the
 * answer; an error hands nothing. */
struct kept {
    int done;
    enum docker_status st;
    struct docker_list *ans;
    size_t n;
};

static void
cb_list_kept(enum docker_status st, struct docker_list *ans, size_t n,
             const char *msg, void *arg)
{
    struct kept *k = arg;

    (void)msg;
    k->done++;
    k->st = st;
    k->ans = ans;
    k->n = n;
}

static void
t_e2e_list_all_handed_over(void **state)
{
    struct e2e *e = e2e_subscribed();
    const struct docker_container *c;
    struct kept k = {0};

    (void)state;
    fake_engine_add(e->fe, A, "a", "{\"k\":\"v\",\"k2\":\"v2\"}", "exited", 0);
    fake_engine_add(e->fe, B, "b", NULL, NULL, 0);
    assert_non_null(docker_list_all(e->d, cb_list_kept, &k));
    TU_RUN_UNTIL(e->l, k.done == 1, 3000);
    tu_run_for(e->l, 20); /* the call's own memory is long gone */
    assert_int_equal(k.st, DOCKER_OK);
    assert_non_null(k.ans);
    assert_int_equal(k.n, 2);
    assert_int_equal(docker_list_entry(k.ans, 0, &c), 0);
    assert_string_equal(c->id, A);
    assert_string_equal(c->name, "a");
    assert_int_equal(c->state.run, LC_RUN_EXITED);
    assert_int_equal(c->nlabels, 2);
    assert_string_equal(c->labels[1].value, "v2");
    assert_int_equal(docker_list_entry(k.ans, 1, &c), 0);
    assert_string_equal(c->id, B);
    assert_int_equal(c->nlabels, 0);
    assert_int_equal(docker_list_entry(k.ans, 2, &c), 1);
    assert_null(c);
    docker_list_free(k.ans);

    /* An entry without a valid Id is skipped; the others are read. */
    memset(&k, 0, sizeof(k));
    fake_engine_add(e->fe, "zz", "bad", NULL, NULL, 0);
    assert_non_null(docker_list_all(e->d, cb_list_kept, &k));
    TU_RUN_UNTIL(e->l, k.done == 1, 3000);
    assert_int_equal(k.st, DOCKER_OK);
    assert_int_equal(k.n, 3);
    assert_int_equal(docker_list_entry(k.ans, 0, &c), 0);
    assert_int_equal(docker_list_entry(k.ans, 2, &c), 1);
    assert_int_equal(docker_list_entry(k.ans, 1, &c), 0);
    assert_string_equal(c->id, B);
    assert_int_equal(docker_list_free_some(k.ans, 1), 1); /* one piece */
    assert_int_equal(docker_list_free_some(NULL, 1), 1);

    memset(&k, 0, sizeof(k));
    fake_engine_fail(e->fe, FAKE_LIST, 500, 1, "list broken");
    assert_non_null(docker_list_all(e->d, cb_list_kept, &k));
    TU_RUN_UNTIL(e->l, k.done == 1, 3000);
    assert_int_equal(k.st, DOCKER_FAILED);
    assert_null(k.ans);
    assert_int_equal(k.n, 0);
    e2e_free(e);
}

/* A big answer lives in pieces of its own, given back a few at a time:
 * entries stay readable until the first piece goes. Its 2.9 MB take
 * more than the usual 2 s under valgrind on a busy machine: the call's
 * timeout is not what is tested here. */
static void
t_e2e_list_all_freed_in_pieces(void **state)
{
    struct e2e *e = e2e_subscribed_timeout(30000);
    const struct docker_container *c;
    struct kept k = {0};
    struct tu_sbuf labels = {0};
    char id[65], name[32];
    size_t calls = 0;
    int i;

    (void)state;
    tu_sb_printf(&labels, "{");
    for (i = 0; i < 6; i++)
        tu_sb_printf(&labels, "%s\"label.%d\":\"%04000d\"", i ? "," : "", i,
                     i);
    tu_sb_printf(&labels, "}");
    for (i = 0; i < 120; i++) {
        snprintf(id, sizeof(id), "%064x", i + 1);
        snprintf(name, sizeof(name), "c%d", i);
        fake_engine_add(e->fe, id, name, labels.p, "exited", 0);
    }
    assert_non_null(docker_list_all(e->d, cb_list_kept, &k));
    TU_RUN_UNTIL(e->l, k.done == 1, 30000);
    assert_int_equal(k.st, DOCKER_OK);
    assert_int_equal(k.n, 120);
    assert_int_equal(docker_list_entry(k.ans, 119, &c), 0);
    assert_string_equal(c->name, "c119");
    assert_int_equal(c->nlabels, 6);
    /* 120 entries of 6 labels of 4,000 bytes: more than one piece. */
    while (docker_list_free_some(k.ans, 1) == 0)
        calls++;
    assert_true(calls >= 1);
    free(labels.p);
    e2e_free(e);
}

static void
t_e2e_cancel(void **state)
{
    struct e2e *e = e2e_subscribed();
    struct res ri = {0}, rl = {0}, rd = {0};
    struct docker_req *qi, *ql, *qd;

    (void)state;
    fake_engine_add(e->fe, A, "a", NULL, "exited", 0);
    fake_engine_delay(e->fe, FAKE_INSPECT, 150, NULL);
    fake_engine_delay(e->fe, FAKE_DELETE, 150, NULL);
    qi = docker_inspect(e->d, A, cb_inspect, &ri);
    ql = docker_list(e->d, NULL, cb_list, &rl);
    qd = docker_delete(e->d, A, true, true, cb_delete, &rd);
    assert_non_null(qi);
    assert_non_null(ql);
    assert_non_null(qd);
    /* The list is cancelled at once, the others once the engine has
     * them. */
    docker_cancel(ql);
    tu_run_for(e->l, 50);
    assert_int_equal(fake_engine_count(e->fe, FAKE_INSPECT), 1);
    docker_cancel(qi);
    docker_cancel(qd);
    docker_cancel(NULL);
    tu_run_for(e->l, 400);
    assert_int_equal(ri.done, 0);
    assert_int_equal(rl.done, 0);
    assert_int_equal(rd.done, 0);
    /* The engine still carried out the DELETE it had received. */
    assert_false(fake_engine_has(e->fe, A));
    e2e_free(e);
}

/* docker_free with calls in flight: no callback, nothing leaks. */
static void
t_e2e_free_in_flight(void **state)
{
    struct e2e *e = e2e_subscribed();
    struct res ri = {0}, rd = {0};

    (void)state;
    fake_engine_add(e->fe, A, "a", NULL, NULL, 0);
    fake_engine_delay(e->fe, FAKE_INSPECT, 200, NULL);
    fake_engine_delay(e->fe, FAKE_DELETE, 200, NULL);
    assert_non_null(docker_inspect(e->d, A, cb_inspect, &ri));
    assert_non_null(docker_delete(e->d, A, false, false, cb_delete, &rd));
    /* Freed once the engine has the DELETE, before its answer. */
    TU_RUN_UNTIL(e->l, fake_engine_count(e->fe, FAKE_DELETE) == 1, 3000);
    docker_free(e->d);
    e->d = NULL;
    /* Past the engine's late answer (the fake keeps it until sent). */
    tu_run_for(e->l, 350);
    assert_int_equal(ri.done, 0);
    assert_int_equal(rd.done, 0);
    e2e_free(e);
}

static void
t_e2e_version_fault_retried(void **state)
{
    struct e2e *e = e2e_new(1);

    (void)state;
    fake_engine_fail(e->fe, FAKE_VERSION, 500, 2, "not yet");
    assert_int_equal(docker_watch_start(e->d, &WCBS, e, 0), 0);
    TU_RUN_UNTIL(e->l, e->subscribed > 0, 5000);
    assert_int_equal(e->lost, 2);
    assert_non_null(strstr(e->lost_why, "500"));
    assert_int_equal(fake_engine_count(e->fe, FAKE_VERSION), 3);
    assert_string_equal(docker_api_version(e->d), "1.41");
    e2e_free(e);
}

static void
t_e2e_no_engine(void **state)
{
    struct e2e *e = e2e_new(0);

    (void)state;
    assert_int_equal(docker_watch_start(e->d, &WCBS, e, 0), 0);
    TU_RUN_UNTIL(e->l, e->lost > 0, 3000);
    assert_int_equal(e->subscribed, 0);
    assert_false(docker_watch_connected(e->d));
    assert_null(docker_api_version(e->d));
    assert_non_null(strstr(e->lost_why, "version"));
    docker_watch_stop(e->d);
    e2e_free(e);
}

static void
t_e2e_events_and_reconnect(void **state)
{
    struct e2e *e = e2e_subscribed();
    int64_t cp;

    (void)state;
    fake_engine_add(e->fe, A, "a", NULL, NULL, 1);
    TU_RUN_UNTIL(e->l, e->events >= 2, 3000);
    assert_int_equal(e->events, 2); /* create, start */
    assert_int_equal(docker_watch_events(e->d), 2);
    cp = docker_watch_checkpoint(e->d);
    assert_true(cp > 0);
    fake_engine_cut_streams(e->fe);
    /* Happens while the stream is down; the engine keeps the events. */
    fake_engine_add(e->fe, B, "b", NULL, NULL, 1);
    TU_RUN_UNTIL(e->l, e->subscribed >= 2, 3000);
    assert_int_equal(e->lost, 1);
    assert_int_equal(docker_watch_reconnects(e->d), 1);
    assert_true(docker_watch_connected(e->d));
    /* Resumed just after the checkpoint: B's two events come, A's are
     * not replayed. */
    tu_run_for(e->l, 200);
    assert_int_equal(e->events, 4);
    assert_true(docker_watch_checkpoint(e->d) > cp);
    e2e_free(e);
}

/* The subscription asks the engine for the actions reapd acts on only
 * (events.c's table), at the first connect and at a reconnect, after the
 * replay (which asks for every type): the engine then sends no exec,
 * health-check, attach or kill events. */
static void
check_events_filter(const char *query)
{
    static const char want[] =
        "{\"type\":[\"container\"],\"event\":[\"create\",\"start\","
        "\"restart\",\"die\",\"destroy\",\"rename\"]}";
    static const char *const acted[] = {"create", "start",   "restart",
                                        "die",    "destroy", "rename"};
    CURL *h = curl_easy_init();
    const char *f = strstr(query, "filters=");
    const char *end;
    char *json;
    size_t i;

    assert_non_null(h);
    assert_non_null(f);
    f += strlen("filters=");
    end = strchr(f, '&');
    json = curl_easy_unescape(h, f, end != NULL ? (int)(end - f) : 0, NULL);
    assert_non_null(json);
    assert_string_equal(json, want);
    /* Each action the filter names is one the parser maps. */
    for (i = 0; i < sizeof(acted) / sizeof(acted[0]); i++) {
        assert_non_null(strstr(json, acted[i]));
        assert_int_not_equal(events_action_from_string(acted[i]),
                             DOCKER_EV_OTHER);
    }
    curl_free(json);
    curl_easy_cleanup(h);
}

static void
t_e2e_events_filtered(void **state)
{
    struct e2e *e = e2e_subscribed();

    (void)state;
    check_events_filter(fake_engine_events_query(e->fe));
    assert_null(strstr(fake_engine_events_query(e->fe), "since="));
    fake_engine_add(e->fe, A, "a", NULL, NULL, 1);
    TU_RUN_UNTIL(e->l, e->events >= 2, 3000);
    fake_engine_cut_streams(e->fe);
    /* The replay first, of every type: its count says whether the
     * engine's buffer was full (it keeps every type's events together). */
    TU_RUN_UNTIL(e->l,
                 strncmp(fake_engine_events_query(e->fe), "until=", 6) == 0,
                 3000);
    assert_null(strstr(fake_engine_events_query(e->fe), "filters="));
    TU_RUN_UNTIL(e->l,
                 strstr(fake_engine_events_query(e->fe), "filters=") != NULL,
                 3000);
    check_events_filter(fake_engine_events_query(e->fe));
    assert_non_null(strstr(fake_engine_events_query(e->fe), "&since="));
    e2e_free(e);
}

/* A flood of bad events: each stepped over, the stream never reconnected,
 * the checkpoint moved past those with a time, one log line at most. */
static void
t_e2e_rejected_events(void **state)
{
    struct e2e *e = e2e_subscribed();
    char path[] = "/tmp/reapd-log-XXXXXX", line[4096];
    int fd = mkstemp(path), i, lines = 0;
    enum log_level was = log_get_level();
    FILE *f;

    (void)state;
    assert_true(fd >= 0);
    log_setup(LOG_LEVEL_WARN, LOG_FORMAT_TEXT);
    log_set_fd(fd);
    for (i = 0; i < 200; i++)
        fake_engine_stream_raw(e->fe, "{\"Type\":\"container\",,}\n");
    fake_engine_stream_raw(e->fe, "{\"Type\":\"network\",\"timeNano\":"
                                  "4000000000000000000}\n");
    fake_engine_add(e->fe, A, "a", NULL, NULL, 1);
    TU_RUN_UNTIL(e->l, e->events >= 2, 3000);
    log_set_fd(-1);
    log_setup(was, LOG_FORMAT_TEXT);
    assert_int_equal(docker_watch_rejected(e->d), 200);
    assert_int_equal(docker_watch_reconnects(e->d), 0);
    assert_int_equal(e->events, 2);
    assert_true(docker_watch_checkpoint(e->d) >= INT64_C(4000000000000000000));
    f = fdopen(fd, "r");
    assert_non_null(f);
    rewind(f);
    while (fgets(line, sizeof line, f) != NULL)
        if (strstr(line, "stepped over") != NULL)
            lines++;
    fclose(f);
    unlink(path);
    assert_int_equal(lines, 1);
    e2e_free(e);
}

/*
 * The subscriber stops the watch from inside its own on_event. The call
 * stack then is loop's on_data -> events_parser_feed -> json_stream_feed
 * -> yajl -> on_event, and docker_watch_stop frees the events parser (and
 * its yajl handle) under all of them. It runs in a child process, so a
 * crash there fails this test instead of ending the whole run; no cmocka
 * assertion may run in the child (it would resume the test runner there).
 */
static int
stop_from_event_child(void *arg)
{
    const char *dir = arg;
    struct e2e e;
    uint64_t deadline;
    int rc = 0;

    memset(&e, 0, sizeof(e));
    snprintf(e.dir, sizeof(e.dir), "%s", dir);
    snprintf(e.sock, sizeof(e.sock), "%s/docker.sock", e.dir);
    e.l = loop_new();
    if (e.l == NULL)
        return 11;
    e.fe = fake_engine_new(loop_base(e.l), e.sock);
    e.d = docker_new(e.l, e.sock, 2000, 200);
    if (e.fe == NULL || e.d == NULL)
        return 12;
    docker_watch_start(e.d, &WCBS, &e, 0);
    deadline = tu_deadline(3000);
    while (e.subscribed == 0 && tu_turn(e.l, deadline))
        ;
    if (e.subscribed == 0)
        return 13;
    e.stop_in_event = 1;
    fake_engine_add(e.fe, A, "a", NULL, NULL, 1);
    tu_run_for(e.l, 200);
    /* Stopped after the first event; the second never delivered. */
    if (e.events != 1 || docker_watch_connected(e.d))
        rc = 14;
    docker_free(e.d);
    fake_engine_free(e.fe);
    loop_free(e.l);
    return rc;
}

static void
t_regress_stop_watch_from_on_event(void **state)
{
    int st;
    char dir[64], sock[96];

    (void)state;
    /* Made and removed here: the child may not live to clean up. */
    snprintf(dir, sizeof(dir), "/tmp/reapd-docker-XXXXXX");
    assert_non_null(mkdtemp(dir));
    snprintf(sock, sizeof(sock), "%s/docker.sock", dir);
    st = tu_fork_status(stop_from_event_child, dir);
    unlink(sock);
    rmdir(dir);
    if (WIFSIGNALED(st))
        fail_msg("docker_watch_stop from on_event: the process died of "
                 "signal %d (use after free of the events parser)",
                 WTERMSIG(st));
    if (WEXITSTATUS(st) != 0)
        fail_msg("docker_watch_stop from on_event: child failed with %d",
                 WEXITSTATUS(st));
}
int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(t_e2e_not_negotiated),
        cmocka_unit_test(t_e2e_inspect),
        cmocka_unit_test(t_e2e_list),
        cmocka_unit_test(t_e2e_delete),
        cmocka_unit_test(t_e2e_list_all_handed_over),
        cmocka_unit_test(t_e2e_list_all_freed_in_pieces),
        cmocka_unit_test(t_e2e_cancel),
        cmocka_unit_test(t_e2e_free_in_flight),
        cmocka_unit_test(t_e2e_version_fault_retried),
        cmocka_unit_test(t_e2e_no_engine),
        cmocka_unit_test(t_e2e_events_and_reconnect),
        cmocka_unit_test(t_e2e_events_filtered),
        cmocka_unit_test(t_e2e_rejected_events),
        cmocka_unit_test(t_regress_stop_watch_from_on_event),
    };

    signal(SIGPIPE, SIG_IGN); /* the fake engine writes to closed peers */
    tu_test_filters();
    log_setup(getenv("TEST_DEBUG") ? LOG_LEVEL_DEBUG : LOG_LEVEL_ERROR,
              LOG_FORMAT_TEXT);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
