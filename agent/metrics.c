/*
 * metrics — the /metrics page; see metrics.h. Each family is written
 * with its HELP and TYPE lines before its samples, in a fixed order, so
 * that a page differs from the last only in its values.
 */
#include "metrics.h"

#include <dirent.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/http.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "lifecycle.h"
#include "reaper.h"
#include "store.h"
#include "upstream.h"

static void
metric(struct evbuffer *b, const char *name, const char *type,
       const char *help, unsigned long long v)
{
    evbuffer_add_printf(b, "# HELP %s %s\n# TYPE %s %s\n%s %llu\n", name, help,
                        name, type, name, v);
}

/* One histogram series: cumulative buckets, +Inf, _sum, _count. `labels`
 * is "" or `k="v",` (with the trailing comma). */
static void
histogram(struct evbuffer *b, const char *name, const char *labels,
          const struct hist *h, const double *bounds, size_t n)
{
    uint64_t cum = 0;
    size_t i, len = strlen(labels);
    /* Without the trailing comma, for _sum and _count. */
    int plain = len > 0 ? (int)len - 1 : 0;

    for (i = 0; i < n; i++) {
        cum += h->buckets[i];
        evbuffer_add_printf(b, "%s_bucket{%sle=\"%g\"} %llu\n", name, labels,
                            bounds[i], (unsigned long long)cum);
    }
    cum += h->buckets[n];
    evbuffer_add_printf(b, "%s_bucket{%sle=\"+Inf\"} %llu\n", name, labels,
                        (unsigned long long)cum);
    if (plain > 0) {
        evbuffer_add_printf(b, "%s_sum{%.*s} %.17g\n", name, plain, labels,
                            h->sum);
        evbuffer_add_printf(b, "%s_count{%.*s} %llu\n", name, plain, labels,
                            (unsigned long long)h->count);
    } else {
        evbuffer_add_printf(b, "%s_sum %.17g\n", name, h->sum);
        evbuffer_add_printf(b, "%s_count %llu\n", name,
                            (unsigned long long)h->count);
    }
}

static void
family(struct evbuffer *b, const char *name, const char *type,
       const char *help)
{
    evbuffer_add_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name,
                        type);
}

static void
metric_double(struct evbuffer *b, const char *name, const char *type,
              const char *help, double v)
{
    family(b, name, type, help);
    evbuffer_add_printf(b, "%s %.15g\n", name, v);
}

/* The first `size - 1` bytes of a /proc file, NUL-terminated; -1 if it
 * cannot be read. procfs answers from memory: no wait on the loop. */
static ssize_t
read_proc(const char *path, char *buf, size_t size)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t n;

    if (fd < 0)
        return -1;
    do
        n = read(fd, buf, size - 1);
    while (n < 0 && errno == EINTR);
    close(fd);
    if (n < 0)
        return -1;
    buf[n] = '\0';
    return n;
}

/* When the process started, from its start in clock ticks after boot
 * (/proc/self/stat, field 22) and the boot time (/proc/stat btime);
 * 0 when either cannot be read. Read once, at start. */
double
metrics_process_start_time(void)
{
    char buf[4096], *p;
    unsigned long long ticks = 0, btime = 0;
    long hz = sysconf(_SC_CLK_TCK);
    int field;

    if (hz <= 0 || read_proc("/proc/self/stat", buf, sizeof(buf)) < 0)
        return 0;
    /* The command name (field 2) may hold spaces and parentheses: the
     * fields are counted after its last ')'. */
    p = strrchr(buf, ')');
    if (p == NULL)
        return 0;
    for (field = 2; field < 22 && p != NULL; field++)
        p = strchr(p + 1, ' ');
    if (p == NULL || sscanf(p + 1, "%llu", &ticks) != 1)
        return 0;
    if (read_proc("/proc/stat", buf, sizeof(buf)) < 0 ||
        (p = strstr(buf, "\nbtime ")) == NULL ||
        sscanf(p + 7, "%llu", &btime) != 1)
        return 0;
    return (double)btime + (double)ticks / (double)hz;
}

/* The process_* metrics Prometheus' client libraries export, so the
 * usual dashboards and alerts work on reapd as they do elsewhere. */
static void
process_metrics(double start_time, struct evbuffer *b)
{
    struct rusage ru;
    struct rlimit rl;
    char buf[256];
    unsigned long long vm_pages, rss_pages;
    long page = sysconf(_SC_PAGESIZE);
    DIR *d;

    if (getrusage(RUSAGE_SELF, &ru) == 0)
        metric_double(b, "process_cpu_seconds_total", "counter",
                      "Total user and system CPU time spent in seconds.",
                      (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
                          (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) /
                              1e6);
    if (page > 0 && read_proc("/proc/self/statm", buf, sizeof(buf)) > 0 &&
        sscanf(buf, "%llu %llu", &vm_pages, &rss_pages) == 2) {
        metric_double(b, "process_virtual_memory_bytes", "gauge",
                      "Virtual memory size in bytes.",
                      (double)vm_pages * (double)page);
        metric_double(b, "process_resident_memory_bytes", "gauge",
                      "Resident memory size in bytes.",
                      (double)rss_pages * (double)page);
    }
    d = opendir("/proc/self/fd");
    if (d != NULL) {
        unsigned long long n = 0;
        struct dirent *e;

        while ((e = readdir(d)) != NULL)
            if (e->d_name[0] != '.')
                n++;
        closedir(d);
        /* Less the directory's own descriptor, open while counting. */
        metric(b, "process_open_fds", "gauge",
               "Number of open file "
               "descriptors.",
               n > 0 ? n - 1 : 0);
    }
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
        metric(b, "process_max_fds", "gauge",
               "Maximum number of open file descriptors.",
               (unsigned long long)rl.rlim_cur);
    if (start_time > 0)
        metric_double(b, "process_start_time_seconds", "gauge",
                      "Start time of the process since unix epoch in "
                      "seconds.",
                      start_time);
}

/* Held requests of every listener (the status endpoint and the admin
 * socket): waits, drains, audits and streams. */
static void
held_metrics(struct evbuffer *b, const struct readapi_stats *st)
{
    metric(b, "reapd_api_held_requests", "gauge",
           "Requests held open now (waits, drains, audits, report "
           "streams), on every listener.",
           st->held);
    metric(b, "reapd_api_streams", "gauge", "Report streams open now.",
           st->streams);
    metric(b, "reapd_api_held_rejected_total", "counter",
           "Waits and streams refused (503) because the bound was reached.",
           st->rejected);
    metric(b, "reapd_api_streams_cut_total", "counter",
           "Report streams cut because their client did not take what was "
           "sent within the deadline.",
           st->cut);
}

/* What reapd adds to the reaper's metrics: build, reloads, the
 * endpoint itself. */
static void
own_metrics(const struct metrics_src *src, struct evbuffer *b)
{
    family(b, "reapd_build_info", "gauge",
           "Always 1; the version reapd was built as and the source "
           "revision are labels.");
    evbuffer_add_printf(b,
                        "reapd_build_info{version=\"%s\",revision=\"%s\"} "
                        "1\n",
                        REAPD_VERSION, src->revision);
    family(b, "reapd_config_reloads_total", "counter",
           "SIGHUP config reloads, by result.");
    evbuffer_add_printf(b,
                        "reapd_config_reloads_total{result=\"ok\"} %llu\n"
                        "reapd_config_reloads_total{result=\"rejected\"} "
                        "%llu\n",
                        (unsigned long long)src->reloads_ok,
                        (unsigned long long)src->reloads_rejected);
    metric(b, "reapd_status_connections", "gauge",
           "Status endpoint connections open, served or refused.",
           src->http.connections);
    family(b, "reapd_status_rejected_total", "counter",
           "Status requests refused, by reason.");
    evbuffer_add_printf(
        b,
        "reapd_status_rejected_total{reason=\"unauthorized\"} %llu\n"
        "reapd_status_rejected_total{reason=\"too_many_connections\"} "
        "%llu\n",
        (unsigned long long)src->rejected_auth,
        (unsigned long long)src->http.rejected_busy);
    family(b, "reapd_status_connections_evicted_total", "counter",
           "Status connections closed to make room for a new one, by "
           "state: idle between requests, or refused and waiting.");
    evbuffer_add_printf(
        b,
        "reapd_status_connections_evicted_total{state=\"idle\"} %llu\n"
        "reapd_status_connections_evicted_total{state=\"refused\"} "
        "%llu\n",
        (unsigned long long)src->http.evicted_idle,
        (unsigned long long)src->http.evicted_waiting);
    metric(b, "reapd_status_requests_timed_out_total", "counter",
           "Status connections closed because a request was not complete, "
           "or an answer not taken, within the deadline.",
           src->http.timed_out);
    metric(b, "reapd_status_accept_errors_total", "counter",
           "accept() failures on the status endpoint; each pauses "
           "accepting.",
           src->http.accept_errors);
    held_metrics(b, &src->held);
}

static void
histograms(struct evbuffer *b, const struct reaper_stats *st)
{
    const double *bounds;
    char labels[96];
    size_t n;
    int i;

    bounds = hist_cleanup_bounds(&n);
    family(b, "reapd_cleanup_duration_seconds", "histogram",
           "From a container's exit to its confirmed cleanup (or give-up), "
           "observed as each report is made, by result.");
    for (i = 0; i < REAPER_CLEANUP_N; i++) {
        snprintf(labels, sizeof(labels), "result=\"%s\",",
                 reaper_cleanup_name((enum reaper_cleanup)i));
        histogram(b, "reapd_cleanup_duration_seconds", labels, &st->cleanup[i],
                  bounds, n);
    }
    bounds = hist_call_bounds(&n);
    family(b, "reapd_engine_request_duration_seconds", "histogram",
           "Engine calls reapd made, from sending to the answer or "
           "failure, by API and call.");
    for (i = 0; i < REAPER_CALL_N; i++) {
        const char *api, *call;

        reaper_call_name((enum reaper_call)i, &api, &call);
        snprintf(labels, sizeof(labels), "api=\"%s\",call=\"%s\",", api, call);
        histogram(b, "reapd_engine_request_duration_seconds", labels,
                  &st->calls[i], bounds, n);
    }
    bounds = hist_latency_bounds(&n);
    family(b, "reapd_report_latency_seconds", "histogram",
           "reapd's own share of a cleanup: from the engine observation "
           "that completed it to its report being durable.");
    histogram(b, "reapd_report_latency_seconds", "", &st->report_latency,
              bounds, n);
}

/* Delivery attempts by the upstream's answer and by duration; the
 * families are there (at zero) without an upstream too, so that
 * dashboards and alerts find them on every node. */
static void
upstream_metrics(struct upstream *up, struct evbuffer *b)
{
    static struct upstream_stats us; /* 5 KiB: not on the stack */
    struct hist h = {0};
    size_t i;

    _Static_assert(UPSTREAM_LAT_N <= HIST_MAX,
                   "the histogram fits a struct hist");
    memset(&us, 0, sizeof(us));
    if (up != NULL)
        upstream_stats(up, &us);
    family(b, "reapd_upstream_requests_total", "counter",
           "Report delivery attempts, by the upstream's HTTP status "
           "(\"none\": no answer came: refused, timed out, cut).");
    for (i = 100; i < UPSTREAM_CODE_MAX; i++)
        if (us.by_code[i] > 0)
            evbuffer_add_printf(b,
                                "reapd_upstream_requests_total{code=\"%zu\"} "
                                "%llu\n",
                                i, (unsigned long long)us.by_code[i]);
    evbuffer_add_printf(b,
                        "reapd_upstream_requests_total{code=\"none\"} %llu\n",
                        (unsigned long long)us.no_answer);
    memcpy(h.buckets, us.lat_buckets, sizeof(us.lat_buckets));
    h.count = us.lat_count;
    h.sum = us.lat_sum;
    family(b, "reapd_upstream_request_duration_seconds", "histogram",
           "Report delivery attempts by duration, from the request's "
           "start to the end of its answer (or its failure).");
    histogram(b, "reapd_upstream_request_duration_seconds", "", &h,
              upstream_latency_bounds(), UPSTREAM_LAT_N);
}

/* What the engine's event stream brought, and the engine itself. */
static void
engine_metrics(struct evbuffer *b, const struct reaper_stats *st)
{
    metric(b, "reapd_events_received_total", "counter",
           "Container events received from the engine.", st->events);
    metric(b, "reapd_events_rejected_total", "counter",
           "Events that could not be read (malformed, too deep), stepped "
           "over without a reconnect; a relist follows.",
           st->events_rejected);
    metric(b, "reapd_events_replays_cut_total", "counter",
           "Replays after a reconnect that held the engine's whole event "
           "buffer, all past the checkpoint: events in between are lost.",
           st->replays_cut);
    evbuffer_add_printf(
        b,
        "# HELP reapd_containers_truncated_total Containers whose labels, "
        "or name or image, were more than reapd keeps (docs/limits.md).\n"
        "# TYPE reapd_containers_truncated_total counter\n"
        "reapd_containers_truncated_total{what=\"labels\"} %llu\n"
        "reapd_containers_truncated_total{what=\"metadata\"} %llu\n",
        (unsigned long long)st->labels_truncated,
        (unsigned long long)st->metadata_truncated);
    metric(b, "reapd_containers_undecidable_total", "counter",
           "Containers gone before their labels could be kept (out of "
           "memory): no policy was decided for them.",
           st->undecidable);
    metric(b, "reapd_deletes_held_total", "counter",
           "DELETEs put off because the container's record could not be "
           "written first (the state's disk full).",
           st->deletes_held);
    metric(b, "reapd_relists_total", "counter",
           "Full relists of the engine's containers.", st->relists);
    /* Only once the engine has answered: a made-up "unknown" series
     * would stay in Prometheus beside the real one. The values are
     * checked to be version-like (docker.h), so need no escaping. */
    if (st->engine_known) {
        family(b, "reapd_engine_info", "gauge",
               "Always 1; the engine's versions, read again at every "
               "reconnect, are labels (\"\" where it did not say).");
        evbuffer_add_printf(b,
                            "reapd_engine_info{docker_version=\"%s\","
                            "api_version=\"%s\",api_version_used=\"%s\","
                            "containerd_version=\"%s\"} 1\n",
                            st->engine.version, st->engine.engine_api,
                            st->engine.api, st->engine.containerd_version);
    }
    evbuffer_add_printf(b,
                        "# HELP reapd_stream_reconnects_total Event "
                        "streams opened again after they were lost.\n"
                        "# TYPE reapd_stream_reconnects_total counter\n"
                        "reapd_stream_reconnects_total{stream=\"docker\"} "
                        "%llu\n"
                        "reapd_stream_reconnects_total{stream=\"containerd\"}"
                        " %llu\n",
                        (unsigned long long)st->docker_reconnects,
                        (unsigned long long)st->containerd_reconnects);
}

/* Containers through their cleanup: reports, removals, leaked tasks. */
static void
cleanup_metrics(struct evbuffer *b, const struct reaper_stats *st)
{
    int i;

    metric(b, "reapd_reports_total", "counter", "Reports made.", st->reports);
    metric(b, "reapd_report_writes_total", "counter",
           "Writes of reports to disk, one sync each; reports of a burst "
           "share one.",
           st->report_writes);
    metric(b, "reapd_exit_code_corrections_total", "counter",
           "Exits whose die event code differed from the true code.",
           st->exit_code_mismatches);
    metric(b, "reapd_tasks_lost_total", "counter",
           "Exits found only as a containerd task gone while the engine "
           "said the container ran; their exit code is unknown.",
           st->tasks_lost);
    evbuffer_add_printf(b, "# HELP reapd_containers_tracked Containers "
                           "tracked, by lifecycle state.\n"
                           "# TYPE reapd_containers_tracked gauge\n");
    for (i = 0; i < LC_NSTATES; i++)
        evbuffer_add_printf(b, "reapd_containers_tracked{state=\"%s\"} %zu\n",
                            lc_state_name((enum lc_state)i), st->by_state[i]);
    evbuffer_add_printf(b, "# HELP reapd_removals_total DELETE answers, by "
                           "result.\n# TYPE reapd_removals_total counter\n");
    evbuffer_add_printf(b, "reapd_removals_total{result=\"ok\"} %llu\n",
                        (unsigned long long)st->deletes_ok);
    evbuffer_add_printf(b, "reapd_removals_total{result=\"gone\"} %llu\n",
                        (unsigned long long)st->deletes_gone);
    evbuffer_add_printf(b,
                        "reapd_removals_total{result=\"conflict\"} "
                        "%llu\n",
                        (unsigned long long)st->deletes_conflict);
    evbuffer_add_printf(b, "reapd_removals_total{result=\"failed\"} %llu\n",
                        (unsigned long long)st->deletes_failed);
    metric(b, "reapd_leaked_tasks", "gauge",
           "containerd tasks without an engine container, now.",
           st->leaked_tasks);
    evbuffer_add_printf(b, "# HELP reapd_tasks_reaped_total Leaked "
                           "containerd tasks reapd deleted, by how they "
                           "were found.\n# TYPE reapd_tasks_reaped_total "
                           "counter\n");
    evbuffer_add_printf(b,
                        "reapd_tasks_reaped_total{found=\"after_removal\"} "
                        "%llu\n",
                        (unsigned long long)st->tasks_reaped);
    evbuffer_add_printf(b, "reapd_tasks_reaped_total{found=\"audit\"} %llu\n",
                        (unsigned long long)st->orphans_reaped);
    metric(b, "reapd_containerd_connected", "gauge",
           "1 when the containerd event stream is open.",
           st->containerd_connected);
    metric(b, "reapd_docker_connected", "gauge",
           "1 when the Docker events stream is open.", st->docker_connected);
    metric_double(b, "reapd_last_event_timestamp_seconds", "gauge",
                  "The engine's time of the newest event received (0: none "
                  "yet); time() - this is how long the node has been quiet "
                  "or the stream stuck.",
                  (double)st->last_event_nano / 1e9);
}

/* The journal, the state database and the outbox. */
static void
state_metrics(struct evbuffer *b, const struct reaper_stats *st,
              struct store *store)
{
    metric(b, "reapd_state_write_errors_total", "counter",
           "Writes to the state database that failed (disk full...).",
           st->store_errors);
    metric(b, "reapd_reports_log_rotations_total", "counter",
           "Rotations of reports.jsonl (reports_log.max_bytes).",
           st->reports_log_rotations);
    metric(b, "reapd_reports_pruned_total", "counter",
           "Delivered reports removed from the state database by "
           "retention.",
           st->pruned);
    metric(b, "reapd_reports_unstored", "gauge",
           "Reports made but not yet accepted by the state database.",
           st->reports_unsaved);
    if (store != NULL) {
        struct store_counts sc;

        if (store_counts(store, &sc) == STORE_OK) {
            metric(b, "reapd_outbox_pending", "gauge",
                   "Reports waiting for upstream delivery.", sc.pending);
            evbuffer_add_printf(b, "# HELP reapd_outbox_reports Reports in "
                                   "the outbox, by delivery state.\n"
                                   "# TYPE reapd_outbox_reports gauge\n");
            evbuffer_add_printf(b,
                                "reapd_outbox_reports{state=\"pending\"} "
                                "%llu\n",
                                (unsigned long long)sc.pending);
            evbuffer_add_printf(b,
                                "reapd_outbox_reports{state=\"delivered\"}"
                                " %llu\n",
                                (unsigned long long)sc.delivered);
            evbuffer_add_printf(b,
                                "reapd_outbox_reports{state=\"dead\"} "
                                "%llu\n",
                                (unsigned long long)sc.dead);
            metric(b, "reapd_state_db_bytes", "gauge",
                   "Size of the state database.", sc.db_bytes);
            metric_double(b, "reapd_outbox_oldest_pending_timestamp_seconds",
                          "gauge",
                          "When the oldest report still waiting for "
                          "upstream delivery was made (0: none waits).",
                          (double)sc.oldest_pending_ms / 1e3);
        }
        metric(b, "reapd_state_commits_total", "counter",
               "Write transactions committed to the state database (steps "
               "of many containers share one).",
               store_commits(store));
        metric(b, "reapd_state_record_writes_total", "counter",
               "Container records written (put or deleted) by those "
               "transactions.",
               store_record_writes(store));
    }
}

void
metrics_serve(const struct metrics_src *src, struct evhttp_request *req)
{
    struct reaper_stats st;
    struct evbuffer *b = evbuffer_new();

    if (b == NULL) {
        evhttp_send_error(req, 500, NULL);
        return;
    }
    reaper_stats(src->reaper, &st);
    own_metrics(src, b);
    process_metrics(src->start_time, b);
    histograms(b, &st);
    engine_metrics(b, &st);
    cleanup_metrics(b, &st);
    state_metrics(b, &st, src->store);
    upstream_metrics(src->up, b);
    evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
                      "text/plain; version=0.0.4");
    httpd_reply(req, 200, "OK", b);
    evbuffer_free(b);
}
