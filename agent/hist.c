/*
 * hist — histograms and the reaper's bucket bounds; see hist.h.
 */
#include "hist.h"

/* From "the engine answered at once" to "well past the default delete
 * timeouts", so a slow cleanup (a task-delete timeout) lands in a bucket of
 * its own rather than in +Inf. */
static const double cleanup_bounds[] = {0.1, 0.25, 0.5, 1,   2.5, 5,   10,
                                        30,  60,   120, 300, 600, 1800};
/* Engine calls: milliseconds when healthy, up to the request timeout
 * (docker.request_timeout_ms, 30 s by default) when not. */
static const double call_bounds[] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                                     1,     2.5,  5,     10,   30,  60};

/* reapd's own latency: sub-millisecond when healthy, a slow disk sync at
 * the far end. Between 2 and 10 ms, where one disk sync's tail lies and a
 * p99 is judged against a few milliseconds, a bound every millisecond or
 * so: across wider buckets the interpolation would read a p99 a bucket
 * off. */
static const double latency_bounds[] = {0.0001, 0.00025, 0.0005, 0.001,  0.002,
                                        0.003,  0.004,   0.005,  0.0075, 0.01,
                                        0.025,  0.05,    0.1,    0.25,   1};

#define NBOUNDS(a) (sizeof(a) / sizeof((a)[0]))
_Static_assert(NBOUNDS(cleanup_bounds) <= HIST_MAX, "bounds");
_Static_assert(NBOUNDS(call_bounds) <= HIST_MAX, "bounds");
_Static_assert(NBOUNDS(latency_bounds) <= HIST_MAX, "bounds");

const double *
hist_cleanup_bounds(size_t *n)
{
    *n = NBOUNDS(cleanup_bounds);
    return cleanup_bounds;
}

const double *
hist_call_bounds(size_t *n)
{
    *n = NBOUNDS(call_bounds);
    return call_bounds;
}

const double *
hist_latency_bounds(size_t *n)
{
    *n = NBOUNDS(latency_bounds);
    return latency_bounds;
}

void
hist_observe(struct hist *h, const double *bounds, size_t n, double v)
{
    size_t i = 0;

    while (i < n && v > bounds[i])
        i++;
    h->buckets[i]++;
    h->count++;
    h->sum += v;
}
