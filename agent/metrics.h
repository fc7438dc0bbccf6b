/*
 * metrics — the /metrics page in Prometheus' text format (version
 * 0.0.4): the process_* families Prometheus' client libraries export,
 * reapd's build and reloads, the HTTP listener's connections and
 * refusals, the held requests of every listener, the reaper's counters,
 * gauges and histograms, the state database and outbox, and upstream
 * delivery attempts. It only reads: every figure comes from the sources
 * the caller hands over (metrics_src), built afresh for each request.
 */
#ifndef REAPD_METRICS_H
#define REAPD_METRICS_H

#include <stdint.h>

#include "httpd.h"
#include "readapi.h"

struct evhttp_request;
struct reaper;
struct store;
struct upstream;

/* What one page is made of; everything is borrowed for the call. */
struct metrics_src {
    struct reaper *reaper;
    struct store *store;  /* NULL: no state database figures */
    struct upstream *up;  /* NULL: delivery families at zero */
    const char *revision; /* the source revision, for reapd_build_info */
    double start_time;    /* metrics_process_start_time(); 0: unknown */
    uint64_t reloads_ok, reloads_rejected;
    uint64_t rejected_auth;    /* requests refused 401 */
    struct httpd_stats http;   /* the listener the page is asked on */
    struct readapi_stats held; /* every listener's, summed */
};

/* Answers `req` with the page (500 when out of memory). */
void metrics_serve(const struct metrics_src *src, struct evhttp_request *req);

/* When this process started, seconds since the epoch (from /proc), or 0
 * when that cannot be read; for process_start_time_seconds, read once. */
double metrics_process_start_time(void);

#endif
