/*
 * test_torture_reaper — the reaper against the fake engine, with each
 * allocation of a whole scenario failed in turn (torture.h), setting up
 * the reaper included.
 *
 * A failed setup must fail cleanly (an error returned, nothing leaked).
 * Once the reaper runs, an allocation that fails once is a transient lack
 * of memory: reapd retries, so every such run must still end with exactly
 * the report a run without failures makes, and must never decide a
 * container's policy on partial data (an unmanaged container removed, a
 * managed one ignored).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <curl/curl.h>

#include "config.h"
#include "docker.h"
#include "fake_engine.h"
#include "json.h"
#include "log.h"
#include "loop.h"
#include "reaper.h"
#include "report.h"
#include "store.h"
#include "testutil.h"
#include "torture.h"

#define MAX_REPORTS 8

/*
 * How long a run may take. A failure costs a retry or a reconnect, each
 * well under a second with this config (reconnect_max_ms 100, retries
 * from 20 ms, a request that could not start is retried after 1 s); a
 * run that needs more than these has stalled. The sanitizer build on a
 * busy two-core machine runs a few times slower: one run there took its
 * exit's inspect past 2 s (not seen again in 25 runs under load), so
 * the exit's end gets 5 s; a transfer left paused for good still fails.
 */
#define READY_MS  1500
#define DECIDE_MS 1000
#define DONE_MS   5000

static const char A[] =
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa1";
static const char B[] =
    "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb2";
static const char MANAGED[] = "{\"reapd.managed\":\"true\"}";
static const char OTHER[] = "{\"x\":\"y\"}";

/* One run's world. Static: the test's own memory must not count. */
struct h {
    char dir[64];
    char sock[96];
    char logpath[96];
    int logfd;
    struct config *cfg;
    struct loop *l;
    struct fake_engine *fe;
    struct docker *d;
    struct report_log *rl;
    struct reaper *r;
    struct json_node *reports[MAX_REPORTS];
    char texts[MAX_REPORTS][1024]; /* as made, for messages */
    int nreports;
    int report_bad; /* a report that did not parse, or too many */
};

static struct h H;

static void
on_report(const char *json, size_t len, void *arg)
{
    struct h *h = arg;
    struct json_node *doc;

    /* Checking is the test's business, not a run's allocation. */
    torture_pause();
    doc = json_parse(json, len, NULL, 0, NULL, 0, NULL);
    torture_resume();
    if (doc == NULL || h->nreports >= MAX_REPORTS) {
        json_free(doc);
        h->report_bad = 1;
        return;
    }
    snprintf(h->texts[h->nreports], sizeof(h->texts[0]), "%.*s", (int)len,
             json);
    h->reports[h->nreports++] = doc;
}

/* The last lines of the run's log, after a run went wrong. */
static void
show_log(const struct h *h)
{
    static char buf[8192];
    ssize_t n;
    off_t size;
    int fd = open(h->logpath, O_RDONLY);

    if (fd < 0)
        return;
    size = lseek(fd, 0, SEEK_END);
    lseek(fd,
          size > (off_t)sizeof(buf) - 1 ? size - (off_t)sizeof(buf) + 1 : 0,
          SEEK_SET);
    n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0)
        return;
    buf[n] = '\0';
    fprintf(stderr, "torture: N=%lu: reapd's log of that run (its end):\n%s",
            torture_fail_at(), buf);
}

/* Frees what a run set up; the files stay. */
static void
h_release(struct h *h)
{
    int i;

    reaper_free(h->r);
    docker_free(h->d);
    fake_engine_free(h->fe);
    loop_free(h->l);
    report_log_close(h->rl);
    config_free(h->cfg);
    for (i = 0; i < h->nreports; i++)
        json_free(h->reports[i]);
    h->r = NULL;
    h->d = NULL;
    h->fe = NULL;
    h->l = NULL;
    h->rl = NULL;
    h->cfg = NULL;
    h->nreports = 0;
    log_set_fd(-1);
    if (h->logfd >= 0)
        close(h->logfd);
    h->logfd = -1;
}

/* Forgets the run; its directory goes with the run (torture_dir). */
static void
h_remove(struct h *h)
{
    memset(h, 0, sizeof(*h));
    h->logfd = -1;
}

static void
h_close(struct h *h)
{
    h_release(h);
    h_remove(h);
}

/*
 * Sets a reaper up in h->dir as reapd does, every step counted, with the
 * fake engine when `fake`. TORTURE_OK when it runs; TORTURE_FAILED when
 * one of reapd's constructors said no (everything is released then, the
 * files stay); TORTURE_WRONG for anything else.
 */
static enum torture_outcome
h_open_in(struct h *h, int fake)
{
    struct config_errors errs = {0};
    char text[1024];
    size_t i;
    int oom = 0;

    snprintf(h->sock, sizeof(h->sock), "%s/docker.sock", h->dir);
    snprintf(h->logpath, sizeof(h->logpath), "%s/reapd.log", h->dir);
    h->logfd = open(h->logpath, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (h->logfd >= 0)
        log_set_fd(h->logfd);
    /* Short waits, so that a retry costs milliseconds. */
    snprintf(text, sizeof(text),
             "{\"node\":\"t\",\"state_dir\":\"%s\","
             "\"containerd\":{\"socket\":\"off\"},"
             "\"docker\":{\"socket\":\"%s\",\"request_timeout_ms\":2000,"
             "\"reconnect_max_ms\":100},"
             "\"delete\":{\"poll_interval_ms\":20,\"retry_base_ms\":20,"
             "\"retry_max_ms\":100}}",
             h->dir, h->sock);
    if (config_parse("test", text, strlen(text), &h->cfg, &errs) != 0) {
        for (i = 0; i < errs.count; i++)
            oom |= strstr(errs.lines[i], "out of memory") != NULL;
        config_errors_clear(&errs);
        if (h->cfg != NULL || !oom)
            return torture_wrong("config_parse failed without saying "
                                 "out of memory");
        goto failed;
    }
    h->l = loop_new();
    if (h->l == NULL)
        goto failed;
    if (fake) {
        h->fe = fake_engine_new(loop_base(h->l), h->sock);
        if (h->fe == NULL)
            return torture_wrong("the fake engine did not start");
    }
    h->d = docker_new(h->l, h->sock, 2000, 100);
    if (h->d == NULL)
        goto failed;
    h->rl = report_log_open(h->dir);
    if (h->rl == NULL)
        goto failed;
    h->r = reaper_new(h->l, h->d, h->cfg, h->rl);
    if (h->r == NULL)
        goto failed;
    reaper_on_report(h->r, on_report, h);
    return TORTURE_OK;
failed:
    h_release(h);
    return TORTURE_FAILED;
}

/* A new directory and a reaper against the fake engine in it. */
static enum torture_outcome
h_open(struct h *h)
{
    enum torture_outcome res;

    memset(h, 0, sizeof(*h));
    h->logfd = -1;
    snprintf(h->dir, sizeof(h->dir), "%s", torture_dir());
    res = h_open_in(h, 1);
    if (res != TORTURE_OK)
        h_close(h);
    return res;
}

typedef int (*cond_fn)(struct h *h);

/* Runs the loop until `cond` holds (1) or `ms` pass (0). Not
 * TU_RUN_UNTIL: a run that stalls is not a failure of the test but a
 * wrong run, which the verdict then tells. */
static int
run_until(struct h *h, cond_fn cond, int ms)
{
    uint64_t deadline = tu_deadline(ms);

    while (!cond(h))
        if (!tu_turn(h->l, deadline))
            return 0;
    return 1;
}

static int
is_ready(struct h *h)
{
    return reaper_ready(h->r, NULL);
}

static struct reaper_stats stats;

static size_t
n_tracked(struct h *h)
{
    reaper_stats(h->r, &stats);
    return stats.tracked;
}

static size_t
n_ignored(struct h *h)
{
    reaper_stats(h->r, &stats);
    return stats.ignored;
}

static const struct json_node *
report_for(const struct h *h, const char *id)
{
    int i;

    for (i = 0; i < h->nreports; i++) {
        const char *cid = json_string(json_get(h->reports[i], "container_id"));

        if (cid != NULL && strcmp(cid, id) == 0)
            return h->reports[i];
    }
    return NULL;
}

static int
str_is(const struct json_node *rep, const char *key, const char *want)
{
    const char *s = json_string(json_get(rep, key));

    return s != NULL && strcmp(s, want) == 0;
}

static int
int_is(const struct json_node *rep, const char *key, int64_t want)
{
    int64_t v;

    return json_int64(json_get(rep, key), &v) == 0 && v == want;
}

static int
is_null(const struct json_node *rep, const char *key)
{
    const struct json_node *n = json_get(rep, key);

    return n != NULL && n->type == JSON_NULL;
}

static int
bool_is(const struct json_node *rep, const char *key, int want)
{
    const struct json_node *n = json_get(rep, key);

    return n != NULL && n->type == JSON_BOOL && n->boolean == want;
}

/*
 * The one report A's exit must make, written down: exit 42 from inspect
 * under policy "managed", removed by reapd after one DELETE, no anomaly.
 * `engine_code` is the die event's code, or -1 when no die event was seen (the
 * engine's code is then null).
 */
static const char *
report_differs(const struct json_node *rep, const char *name, int engine_code)
{
    const struct json_node *an = json_get(rep, "anomalies");

    if (!int_is(rep, "exit_code", 42))
        return "exit_code";
    if (!str_is(rep, "exit_code_source", "inspect"))
        return "exit_code_source";
    if (engine_code >= 0 ? !int_is(rep, "engine_exit_code", engine_code)
                         : !is_null(rep, "engine_exit_code"))
        return "engine_exit_code";
    if (!str_is(rep, "policy", "managed") || !str_is(rep, "action", "remove"))
        return "policy";
    if (!bool_is(rep, "removed", 1) || !str_is(rep, "removed_by", "reapd"))
        return "removed";
    if (!str_is(rep, "name", name) || !str_is(rep, "node", "t") ||
        !str_is(rep, "image", "img:1"))
        return "name, node or image";
    if (!str_is(json_get(rep, "labels"), "reapd.managed", "true"))
        return "labels";
    /* One DELETE; two when the failure stopped the first from being
     * sent, which counts as an attempt (docs/reports.md). */
    if (!int_is(rep, "delete_attempts", 1) &&
        !(torture_hit() && int_is(rep, "delete_attempts", 2)))
        return "delete_attempts";
    if (!is_null(rep, "task_deleted"))
        return "task_deleted";
    if (an == NULL || an->type != JSON_ARRAY || an->count != 0)
        return "anomalies";
    return NULL;
}

/* What every scenario checks at its end. */
static enum torture_outcome
verdict(struct h *h, const char *name, int engine_code, int with_b)
{
    const struct json_node *rep = report_for(h, A);
    const char *diff;

    if (h->report_bad)
        return torture_wrong("a report did not parse, or too many");
    if (rep == NULL)
        return torture_wrong("no report for the managed container "
                             "(%d reports)",
                             h->nreports);
    if (h->nreports != 1)
        return torture_wrong("%d reports instead of one", h->nreports);
    diff = report_differs(rep, name, engine_code);
    if (diff != NULL)
        return torture_wrong("the report's %s is wrong: %.700s", diff,
                             h->texts[0]);
    if (fake_engine_has(h->fe, A))
        return torture_wrong("the managed container was not removed");
    if (with_b && !fake_engine_has(h->fe, B))
        return torture_wrong("the unmanaged container was removed");
    return TORTURE_OK;
}

/* ---- a managed container exits 42, an unmanaged one exits 3 --------- */

static int
both_decided(struct h *h)
{
    return n_tracked(h) >= 1 && n_ignored(h) >= 1;
}

static int
a_done_b_ignored(struct h *h)
{
    return report_for(h, A) != NULL && !fake_engine_has(h->fe, A) &&
           n_ignored(h) >= 1;
}

/* Starts the reaper and waits until it is ready. */
static enum torture_outcome
h_start(struct h *h)
{
    if (reaper_start(h->r) != 0) {
        h_close(h);
        return TORTURE_FAILED;
    }
    if (!run_until(h, is_ready, READY_MS))
        return torture_wrong("not ready after %d ms", READY_MS);
    return TORTURE_OK;
}

static enum torture_outcome
finish(struct h *h, enum torture_outcome res)
{
    if (res == TORTURE_WRONG)
        show_log(h);
    h_close(h);
    return res;
}

/*
 * The engine's code A's report must carry: the die event's, unless a
 * failure cut the events stream. reapd then relists once the stream is
 * back, and the relist's inspect can settle the exit before the stream's
 * die event is read (a loaded machine shows that order); the report then
 * rightly says the engine's code unseen (-1: null). Its exit code, from
 * inspect, is checked all the same.
 */
static int
die_code_seen(struct h *h, int die_code)
{
    const struct json_node *rep = report_for(h, A);

    reaper_stats(h->r, &stats);
    if (stats.docker_reconnects > 0 && rep != NULL &&
        is_null(rep, "engine_exit_code"))
        return -1;
    return die_code;
}

static enum torture_outcome
run_exit42(void *arg)
{
    struct h *h = &H;
    enum torture_outcome res;

    (void)arg;
    if ((res = h_open(h)) != TORTURE_OK)
        return res;
    if ((res = h_start(h)) != TORTURE_OK)
        return res == TORTURE_FAILED ? res : finish(h, res);
    fake_engine_add(h->fe, A, "web-1", MANAGED, NULL, 1);
    fake_engine_add(h->fe, B, "other", OTHER, NULL, 1);
    /* Decided before they exit, as usually; a run where a failure
     * delays that is still bound to end the same. */
    run_until(h, both_decided, DECIDE_MS);
    fake_engine_exit(h->fe, B, 3, 3);
    fake_engine_exit(h->fe, A, 42, 42);
    /* B is usually ignored by now; if a failure lost its record, it is
     * still not to be touched, which the verdict checks. */
    run_until(h, a_done_b_ignored, DONE_MS);
    /* A second report would come now, if ever. */
    tu_run_for(h->l, 30);
    return finish(h, verdict(h, "web-1", die_code_seen(h, 42), 1));
}

static void
sweep(const char *name, torture_fn fn)
{
    struct torture_sweep sw;
    struct torture_summary sum;

    memset(&sw, 0, sizeof(sw));
    sw.name = name;
    sw.run = fn;
    sw.vg_stride = 10;
    /* Runs mostly wait on timers: more of them at once cost little. */
    sw.jobs = 8;
    torture_sweep(&sw, &sum);
    assert_true(sum.runs > 0);
    if (sum.wrong > 0)
        fail_msg("%s: %lu runs went wrong (see above)", name, sum.wrong);
}

static void
t_exit42_and_unmanaged(void **state)
{
    (void)state;
    sweep("reaper exit 42 + unmanaged", run_exit42);
}

/* ---- the managed label known only from the list answer --------------- */

/*
 * The engine merges a container's labels into its events' attributes;
 * these events leave them out, so only the list answer can tell that the
 * container is managed. A reaper that decided on what the events said
 * (for instance when copying the list's labels fails) would ignore it.
 */
static void
send_bare_event(struct h *h, const char *action)
{
    char line[512];

    snprintf(line, sizeof(line),
             "{\"Type\":\"container\",\"Action\":\"%s\",\"Actor\":{\"ID\":"
             "\"%s\",\"Attributes\":{\"image\":\"img:1\",\"name\":"
             "\"web-1\"}},\"scope\":\"local\"}\n",
             action, A);
    fake_engine_stream_raw(h->fe, line);
}

static int
a_decided(struct h *h)
{
    return n_tracked(h) >= 1 || n_ignored(h) >= 1;
}

static int
a_done(struct h *h)
{
    return report_for(h, A) != NULL && !fake_engine_has(h->fe, A);
}

static enum torture_outcome
run_list_labels(void *arg)
{
    struct h *h = &H;
    enum torture_outcome res;

    (void)arg;
    if ((res = h_open(h)) != TORTURE_OK)
        return res;
    if ((res = h_start(h)) != TORTURE_OK)
        return res == TORTURE_FAILED ? res : finish(h, res);
    fake_engine_add(h->fe, A, "web-1", MANAGED, NULL, 0);
    send_bare_event(h, "create");
    send_bare_event(h, "start");
    run_until(h, a_decided, DECIDE_MS);
    if (n_ignored(h) > 0)
        return finish(h, torture_wrong("the managed container was "
                                       "ignored (decided on the events' "
                                       "attributes)"));
    fake_engine_exit(h->fe, A, 42, 42);
    run_until(h, a_done, DONE_MS);
    tu_run_for(h->l, 30);
    return finish(h, verdict(h, "web-1", die_code_seen(h, 42), 0));
}

static void
t_labels_only_from_list(void **state)
{
    (void)state;
    sweep("reaper labels only from list", run_list_labels);
}

/* ---- found exited by the first relist --------------------------------- */

/* Both exited before reapd started: only the relist after subscribing
 * tells of them (no die event is replayed without a checkpoint). */
static enum torture_outcome
run_relist(void *arg)
{
    struct h *h = &H;
    enum torture_outcome res;

    (void)arg;
    if ((res = h_open(h)) != TORTURE_OK)
        return res;
    fake_engine_add(h->fe, A, "web-1", MANAGED, NULL, 0);
    fake_engine_add(h->fe, B, "other", OTHER, NULL, 0);
    fake_engine_exit(h->fe, A, 42, 42);
    fake_engine_exit(h->fe, B, 3, 3);
    if ((res = h_start(h)) != TORTURE_OK)
        return res == TORTURE_FAILED ? res : finish(h, res);
    run_until(h, a_done_b_ignored, DONE_MS);
    tu_run_for(h->l, 30);
    return finish(h, verdict(h, "web-1", -1, 1));
}

static void
t_found_by_relist(void **state)
{
    (void)state;
    sweep("reaper found by relist", run_relist);
}

/* ---- a report the state database lost, recovered from the journal ---- */

/*
 * The state of the last run, made before a run starts (not counted):
 * reports.jsonl holds two reports; the database holds the first and the
 * journal checkpoint just past it, but lost the second (a power loss
 * undid its commit). Starting reapd must store the second again, or, if
 * it cannot start, leave the checkpoint where it was so that the next
 * start does. Skipping the line as "not a report" loses it for good.
 */
static const char C[] =
    "ccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc3";

struct journal {
    char lost[33];
    int64_t lost_at; /* the checkpoint: where the lost report's line is */
};

static struct journal J;
static struct store *J_store; /* the run's, while it runs */

static int
lost_is_stored(struct h *h)
{
    struct store_report sr;
    int rc;

    (void)h;
    torture_pause();
    rc = store_get_report(J_store, J.lost, false, &sr);
    if (rc == STORE_OK)
        store_report_clear(&sr);
    torture_resume();
    return rc == STORE_OK;
}

static int
journal_prepare(struct h *h)
{
    struct report_log *rl;
    struct store *st = NULL;
    struct report rep;
    char err[256], kept[33];
    size_t len;
    char *json;
    int rc = -1;

    rl = report_log_open(h->dir);
    if (rl == NULL || store_open(h->dir, &st, err, sizeof(err)) != STORE_OK)
        goto out;
    memset(&rep, 0, sizeof(rep));
    rep.node = "t";
    rep.container_id = C;
    rep.exit_known = true;
    rep.exit_code = 5;
    rep.exit_code_source = "inspect";
    rep.task_deleted = -1;
    rep.reported_at = "2026-12-02T10:00:02.000Z";
    report_make_id(&rep, "exit-1");
    memcpy(kept, rep.report_id, 33);
    json = report_to_json(&rep, &len);
    if (json == NULL || report_log_append(rl, json, len) != 0 ||
        store_add_report(st, kept, C, json, len, 1) != STORE_OK) {
        free(json);
        goto out;
    }
    free(json);
    J.lost_at = report_log_end(rl);
    if (store_set_checkpoint(st, "reports.jsonl.end", J.lost_at) != STORE_OK ||
        store_flush(st) != STORE_OK)
        goto out;
    report_make_id(&rep, "exit-2");
    memcpy(J.lost, rep.report_id, 33);
    json = report_to_json(&rep, &len);
    if (json == NULL || report_log_append(rl, json, len) != 0) {
        free(json);
        goto out;
    }
    free(json);
    rc = 0;
out:
    if (store_close(st) != STORE_OK)
        rc = -1;
    report_log_close(rl);
    return rc;
}

/* What the database says now: 1 the lost report is back, 0 it is not
 * but the checkpoint still points before it, -1 it is lost for good. */
static int
journal_state(const struct h *h)
{
    struct store *st = NULL;
    struct store_report sr;
    char err[256];
    int64_t mark = -1;
    int res = -1;

    if (store_open(h->dir, &st, err, sizeof(err)) != STORE_OK)
        return -1;
    if (store_get_report(st, J.lost, false, &sr) == STORE_OK) {
        store_report_clear(&sr);
        res = 1;
    } else if (store_get_checkpoint(st, "reports.jsonl.end", &mark) ==
                   STORE_OK &&
               mark <= J.lost_at) {
        res = 0;
    }
    store_close(st);
    return res;
}

static enum torture_outcome
run_journal(void *arg)
{
    struct h *h = &H;
    struct store *st = NULL;
    enum torture_outcome res;
    char err[256];
    int started = 0, state;

    (void)arg;
    memset(h, 0, sizeof(*h));
    h->logfd = -1;
    snprintf(h->dir, sizeof(h->dir), "%s", torture_dir());
    torture_pause();
    state = journal_prepare(h);
    torture_resume();
    if (state != 0) {
        h_remove(h);
        return torture_wrong("could not prepare the last run's state");
    }
    /* reapd's start, counted. No engine answers (its socket does not
     * exist): only the recovery matters here. */
    res = h_open_in(h, 0);
    if (res == TORTURE_WRONG) {
        h_close(h);
        return res;
    }
    if (res == TORTURE_OK &&
        store_open(h->dir, &st, err, sizeof(err)) == STORE_OK) {
        reaper_set_store(h->r, st);
        started = reaper_start(h->r) == 0;
        /* A report the store could not take at once is retried within
         * a second. */
        J_store = st;
        if (started)
            run_until(h, lost_is_stored, 1500);
        J_store = NULL;
        reaper_free(h->r);
        h->r = NULL;
        store_close(st);
    }
    h_release(h);
    torture_pause();
    state = journal_state(h);
    torture_resume();
    h_remove(h);
    if (started && state != 1)
        return torture_wrong(state == 0 ? "started, but the lost report "
                                          "was not stored again"
                                        : "started, and the lost report "
                                          "was skipped for good");
    if (!started && state < 0)
        return torture_wrong("the lost report was lost for good by a "
                             "failed start");
    return started ? TORTURE_OK : TORTURE_FAILED;
}

static void
t_journal_recovery(void **state)
{
    (void)state;
    sweep("reaper journal recovery", run_journal);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(t_exit42_and_unmanaged),
        cmocka_unit_test(t_labels_only_from_list),
        cmocka_unit_test(t_found_by_relist),
        cmocka_unit_test(t_journal_recovery),
    };
    int rc;

    signal(SIGPIPE, SIG_IGN); /* the fake engine writes to closed peers */
    /* Held for the whole process, so each run's loop_new() does not
     * initialise libcurl (and its TLS library) again. */
    curl_global_init(CURL_GLOBAL_DEFAULT);
    log_setup(LOG_LEVEL_INFO, LOG_FORMAT_TEXT);
    H.logfd = -1;
    tu_test_filters();
    rc = cmocka_run_group_tests(tests, NULL, NULL);
    curl_global_cleanup();
    return rc;
}
