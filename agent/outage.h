/*
 * outage — the spans when the engine was down, as the reaper saw them.
 *
 * An exit in such a span had no die event, and Docker 20.10 may make up
 * a die 255 as it restores the container: the lifecycle is told so
 * (lc_obs.after_outage) to judge the codes it gets. The span going on is
 * durable from its start, and the last one ended stays durable, so that a
 * reapd killed and restarted meanwhile still tells these exits apart.
 *
 * A value embedded in its owner (the reaper); reads and writes only the
 * store's checkpoints (its keys below). No callbacks, no timers.
 */
#ifndef REAPD_OUTAGE_H
#define REAPD_OUTAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct store;

#define OUTAGE_SPANS 8

struct outage_span {
    /* Wall ms: lost, back; `down` the first time in the span reapd found
     * the engine itself down (its /version refused), `from` when never. */
    int64_t from, to, down;
};

struct outages {
    int64_t lost_at_ms;    /* the stream lost (0: connected) */
    int64_t since_ms;      /* the engine itself down since (0: it is not) */
    int64_t down_first_ms; /* `down` of the outage going on */
    struct outage_span spans[OUTAGE_SPANS]; /* the last ended, a ring */
    size_t n;
};

/* The outage an earlier run saw going on or last end; what the store
 * does not hold (or cannot read) stays empty. */
void outage_load(struct outages *o, struct store *st);
/* The stream was lost at `now` (wall ms); `unreachable`: the engine
 * itself refused. true when an outage of the engine begins now: the
 * caller saves it at once (outage_save_begin). */
bool outage_lost(struct outages *o, int64_t now, bool unreachable);
/* Subscribed again at `now`; `after_outage`: the engine says it was
 * down (docker_watch_after_outage). true when that ends an outage: its
 * span is added (in *ended), and the caller saves it (outage_save_end). */
bool outage_back(struct outages *o, int64_t now, bool after_outage,
                 struct outage_span *ended);
/* Store writes for the two above; the store's return code. */
int outage_save_begin(struct store *st, const struct outages *o);
int outage_save_end(struct store *st, const struct outage_span *ended);

/* Is a die event dated `time_nano` at or after reapd first found the
 * engine down in a span, and not after the span's end? */
bool outage_die_within(const struct outages *o, int64_t time_nano);
/* Did a container finish (FinishedAt, RFC 3339) in a span, a second of
 * slack each side? */
bool outage_finished_within(const struct outages *o, const char *finished_at);

#endif
