/*
 * hist — histograms in Prometheus' shape, and the bucket bounds of the
 * reaper's: cleanup times, engine calls, reapd's own added latency.
 *
 * A leaf: plain data and arithmetic, used by the reaper and its durable
 * layer to observe and by the status page to expose.
 */
#ifndef REAPD_HIST_H
#define REAPD_HIST_H

#include <stddef.h>
#include <stdint.h>

/* `buckets[i]` counts observations <= bound i and above bound i-1 (not
 * cumulative; the exposition sums them), `buckets[nbounds]` those above
 * the last bound. Values are in seconds. */
#define HIST_MAX 16
struct hist {
    uint64_t buckets[HIST_MAX + 1];
    uint64_t count;
    double sum;
};

/* Adds `v` to a histogram whose buckets end at bounds[0..n). */
void hist_observe(struct hist *h, const double *bounds, size_t n, double v);

/* Upper bounds (seconds, ascending) of the reaper's histograms. */
const double *hist_cleanup_bounds(size_t *n);
const double *hist_call_bounds(size_t *n);
const double *hist_latency_bounds(size_t *n);

#endif
