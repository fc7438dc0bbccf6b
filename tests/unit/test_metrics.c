/*
 * test_metrics — the /metrics page in agent/metrics.c: the exposition
 * format, every family and sample, the histograms' consistency, build
 * and engine info. Through the status endpoint over HTTP (endpoint.h's
 * harness: a real reaper on the fake engine).
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

#include "endpoint.h"
#include "fake_engine.h"
#include "hist.h"
#include "lifecycle.h"
#include "log.h"
#include "loop.h"
#include "reaper.h"
#include "upstream.h"

static const char *A =
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa1";
static const char *B =
    "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb2";
static const char *MANAGED = "{\"reapd.managed\":\"true\"}";

static void
t_metrics(void **state)
{
    struct ep *h = ep_new();
    struct ep_resp r;
    struct reaper_stats st;
    size_t one = 1;
    char *line, *save = NULL;
    int i, samples = 0, nprocess = 0;

    (void)state;
    assert_int_equal(reaper_start(h->reapd.r), 0);
    TU_RUN_UNTIL(h->reapd.l, reaper_ready(h->reapd.r, NULL), 3000);
    fake_engine_add(h->reapd.fe, A, "web-1", MANAGED, NULL, 1);
    fake_engine_add(h->reapd.fe, B, "other", NULL, NULL, 1);
    TU_RUN_UNTIL(h->reapd.l, ep_tracked(h, &one), 3000);
    tu_run_for(h->reapd.l, 50);
    ep_request(h, "GET", "/metrics", &r);
    assert_int_equal(r.error, HTTPC_OK);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.ctype, "text/plain; version=0.0.4");
    reaper_stats(h->reapd.r, &st);
    assert_true(st.events >= 4);
    assert_int_equal(ep_metric_value(r.body, "reapd_events_received_total"),
                     (long long)st.events);
    assert_int_equal(ep_metric_value(r.body, "reapd_relists_total"),
                     (long long)st.relists);
    assert_int_equal(
        ep_metric_value(r.body, "reapd_containers_tracked{state=\"running\"}"),
        1);
    /* Every state has its gauge, at zero but for running. */
    for (i = 1; i < LC_NSTATES; i++) {
        char name[96];

        snprintf(name, sizeof(name), "reapd_containers_tracked{state=\"%s\"}",
                 lc_state_name((enum lc_state)i));
        assert_int_equal(ep_metric_value(r.body, name), 0);
    }
    assert_int_equal(
        ep_metric_value(r.body, "reapd_removals_total{result=\"ok\"}"), 0);
    assert_int_equal(ep_metric_value(r.body, "reapd_leaked_tasks"), 0);
    assert_int_equal(ep_metric_value(r.body, "reapd_tasks_lost_total"), 0);
    /* The exposition format: comments, or "name[{labels}] value". */
    assert_int_equal(r.body[r.len - 1], '\n');
    for (line = strtok_r(r.body, "\n", &save); line != NULL;
         line = strtok_r(NULL, "\n", &save)) {
        char name[256];
        double v;
        char extra;

        if (strncmp(line, "# HELP ", 7) == 0 ||
            strncmp(line, "# TYPE ", 7) == 0)
            continue;
        if (sscanf(line, "%255s %lf %c", name, &v, &extra) != 2)
            fail_msg("bad metric line: %s", line);
        if (strncmp(name, "process_", 8) == 0) {
            nprocess++; /* the client libraries' standard names */
            continue;
        }
        if (strncmp(name, "reapd_", 6) != 0)
            fail_msg("metric outside the reapd_ namespace: %s", line);
        samples++;
    }
    /* 6 counters, a gauge per state, 4 removal results, leaked tasks, 2
     * reaped-task counters, containerd connected, state write errors,
     * pruned and unstored reports (no store here: no outbox gauges);
     * build info, 2 reload results, connections, 2 rejection reasons,
     * 2 eviction states, timed-out requests, accept errors; 2 stream
     * reconnect counters; rejected events, cut replays, 2 truncation
     * kinds,
     * undecidable containers; held DELETEs; the engine's identity;
     * Docker connected and the last event's time; 4 held-request
     * figures; journal rotations; upstream attempts
     * with no answer (no upstream: no status codes); each histogram
     * series (the upstream's too): its buckets, +Inf, _sum and _count. */
    {
        size_t nc, ne, nl;

        hist_cleanup_bounds(&nc);
        hist_call_bounds(&ne);
        hist_latency_bounds(&nl);
        /* CPU, virtual and resident memory, open and max fds, start. */
        assert_int_equal(nprocess, 6);
        assert_int_equal(samples, 6 + LC_NSTATES + 4 + 4 + 3 + 10 + 2 + 4 + 4 +
                                      4 + 1 + 1 + 1 +
                                      REAPER_CLEANUP_N * (int)(nc + 3) +
                                      REAPER_CALL_N * (int)(ne + 3) +
                                      (int)(nl + 3) + UPSTREAM_LAT_N + 3);
    }
    ep_resp_clear(&r);
    ep_free(h);
}

static int
reported(struct ep *h, const void *arg)
{
    struct reaper_stats st;

    reaper_stats(h->reapd.r, &st);
    return st.reports >= *(const uint64_t *)arg;
}

/* One histogram series: cumulative, +Inf == _count, _sum within what the
 * buckets allow. Returns its _count. */
static double
check_histogram(const char *text, const char *name, const char *labels,
                const double *bounds, size_t n)
{
    char series[256];
    double prev = 0, v, count, sum, lo = 0, hi = 0;
    size_t i;

    for (i = 0; i < n; i++) {
        snprintf(series, sizeof(series), "%s_bucket{%sle=\"%g\"}", name,
                 labels, bounds[i]);
        v = ep_sample(text, series);
        if (v < 0)
            fail_msg("missing %s", series);
        assert_true(v >= prev);
        /* v - prev observations lie in (bounds[i-1], bounds[i]]. */
        lo += (v - prev) * (i > 0 ? bounds[i - 1] : 0);
        hi += (v - prev) * bounds[i];
        prev = v;
    }
    snprintf(series, sizeof(series), "%s_bucket{%sle=\"+Inf\"}", name, labels);
    v = ep_sample(text, series);
    assert_true(v >= prev);
    if (labels[0] == '\0')
        snprintf(series, sizeof(series), "%s_count", name);
    else
        snprintf(series, sizeof(series), "%s_count{%.*s}", name,
                 (int)strlen(labels) - 1, labels);
    count = ep_sample(text, series);
    if (count != v)
        fail_msg("%s: _count %g, +Inf bucket %g", name, count, v);
    if (labels[0] == '\0')
        snprintf(series, sizeof(series), "%s_sum", name);
    else
        snprintf(series, sizeof(series), "%s_sum{%.*s}", name,
                 (int)strlen(labels) - 1, labels);
    sum = ep_sample(text, series);
    assert_true(sum >= 0);
    if (v == prev) /* nothing above the last bound: the sum is bounded */
        assert_true(sum >= lo - 1e-9 && sum <= hi + 1e-9);
    if (count == 0)
        assert_true(sum == 0);
    return count;
}

static void
t_metrics_histograms(void **state)
{
    struct ep *h = ep_new();
    struct ep_resp r;
    uint64_t one = 1;
    const double *bounds;
    size_t n;
    char labels[128];

    (void)state;
    assert_int_equal(reaper_start(h->reapd.r), 0);
    TU_RUN_UNTIL(h->reapd.l, reaper_ready(h->reapd.r, NULL), 3000);
    fake_engine_add(h->reapd.fe, A, "web-1", MANAGED, NULL, 1);
    tu_run_for(h->reapd.l, 50);
    fake_engine_exit(h->reapd.fe, A, 3, 3);
    TU_RUN_UNTIL(h->reapd.l, reported(h, &one), 5000);
    ep_request(h, "GET", "/metrics", &r);
    assert_int_equal(r.status, 200);
    /* The revision is the build's (CMakeLists.txt): any, or unknown. */
    {
        const char *bi =
            strstr(r.body, "\nreapd_build_info{version=\"" REAPD_VERSION
                           "\",revision=\"");
        const char *end = bi != NULL ? strchr(bi + 1, '\n') : NULL;

        assert_non_null(end);
        assert_true(end - bi > 4 && strncmp(end - 4, "\"} 1", 4) == 0);
    }
    /* What the (fake) engine said of itself; it names no containerd. */
    assert_true(ep_sample(r.body,
                          "reapd_engine_info{docker_version=\"fake\","
                          "api_version=\"1.41\",api_version_used=\"1.41\","
                          "containerd_version=\"\"}") == 1);
    bounds = hist_cleanup_bounds(&n);
    assert_true(check_histogram(r.body, "reapd_cleanup_duration_seconds",
                                "result=\"removed\",", bounds, n) == 1);
    assert_true(check_histogram(r.body, "reapd_cleanup_duration_seconds",
                                "result=\"kept\",", bounds, n) == 0);
    bounds = hist_call_bounds(&n);
    assert_true(
        check_histogram(r.body, "reapd_engine_request_duration_seconds",
                        "api=\"docker\",call=\"inspect\",", bounds, n) >= 1);
    assert_true(
        check_histogram(r.body, "reapd_engine_request_duration_seconds",
                        "api=\"docker\",call=\"delete\",", bounds, n) == 1);
    bounds = hist_latency_bounds(&n);
    assert_true(check_histogram(r.body, "reapd_report_latency_seconds", "",
                                bounds, n) == 1);
    bounds = hist_call_bounds(&n);
    snprintf(labels, sizeof(labels), "api=\"docker\",call=\"list\",");
    assert_true(check_histogram(r.body,
                                "reapd_engine_request_duration_seconds",
                                labels, bounds, n) >= 1);
    /* Every family once, its HELP and TYPE before its samples. */
    assert_non_null(strstr(r.body, "# TYPE reapd_cleanup_duration_seconds "
                                   "histogram\n"));
    assert_null(strstr(strstr(r.body, "# TYPE reapd_cleanup_duration") + 1,
                       "# TYPE reapd_cleanup_duration"));
    /* No container id as a label value. */
    assert_null(strstr(r.body, A));
    ep_resp_clear(&r);
    ep_free(h);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(t_metrics),
        cmocka_unit_test(t_metrics_histograms),
    };

    signal(SIGPIPE, SIG_IGN); /* raw clients and the fake engine */
    tu_test_filters();
    log_setup(getenv("TEST_DEBUG") ? LOG_LEVEL_DEBUG : LOG_LEVEL_ERROR,
              LOG_FORMAT_TEXT);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
