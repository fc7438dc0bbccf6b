/*
 * outage — the spans when the engine was down; see outage.h.
 */
#include "outage.h"

#include "report.h"
#include "store.h"

/* When the engine was lost, while it stays unreachable (0: it is not). */
#define SINCE_KEY "docker.outage_since_ms"
/* The last outage that ended: a reapd killed soon after it still says
 * that a container which finished in it exited while the engine was
 * down. */
#define LAST_FROM_KEY "docker.last_outage_from_ms"
#define LAST_TO_KEY   "docker.last_outage_to_ms"

void
outage_load(struct outages *o, struct store *st)
{
    int64_t from, to;
    int rc = store_get_checkpoint(st, SINCE_KEY, &o->since_ms);

    if (rc != STORE_OK || o->since_ms < 0)
        o->since_ms = 0;
    /* Its first refusal was an earlier run's: count from its start. */
    o->down_first_ms = o->since_ms;
    if (store_get_checkpoint(st, LAST_FROM_KEY, &from) != STORE_OK ||
        store_get_checkpoint(st, LAST_TO_KEY, &to) != STORE_OK || from <= 0 ||
        to < from)
        return;
    o->spans[o->n++ % OUTAGE_SPANS] =
        (struct outage_span){.from = from, .to = to, .down = from};
}

bool
outage_lost(struct outages *o, int64_t now, bool unreachable)
{
    if (o->lost_at_ms == 0)
        o->lost_at_ms = now;
    if (!unreachable)
        return false;
    if (o->down_first_ms == 0)
        o->down_first_ms = now;
    if (o->since_ms != 0)
        return false;
    o->since_ms = o->lost_at_ms;
    return true;
}

bool
outage_back(struct outages *o, int64_t now, bool after_outage,
            struct outage_span *ended)
{
    struct outage_span *s;

    o->lost_at_ms = 0;
    if (!after_outage && o->since_ms == 0)
        return false;
    s = &o->spans[o->n++ % OUTAGE_SPANS];
    s->from = o->since_ms ? o->since_ms : now;
    s->to = now;
    s->down = o->down_first_ms ? o->down_first_ms : s->from;
    o->since_ms = 0;
    o->down_first_ms = 0;
    *ended = *s;
    return true;
}

int
outage_save_begin(struct store *st, const struct outages *o)
{
    return store_set_checkpoint(st, SINCE_KEY, o->since_ms);
}

int
outage_save_end(struct store *st, const struct outage_span *ended)
{
    int rc = store_set_checkpoint(st, SINCE_KEY, 0);

    if (rc >= 0)
        rc = store_set_checkpoint(st, LAST_FROM_KEY, ended->from);
    if (rc >= 0)
        rc = store_set_checkpoint(st, LAST_TO_KEY, ended->to);
    return rc;
}

/* From the first refusal on, the engine that was up is gone: a die dated
 * then is the restarted engine's, which may make one up as it restores a
 * container (a refusal goes on while it restores, before its API serves).
 * One dated before may have been seen by an engine that was up while
 * reapd's way to it was cut. The span ends when reapd subscribed again;
 * no slack past it: an exit just after the reconnect is cleared by its
 * die. */
bool
outage_die_within(const struct outages *o, int64_t time_nano)
{
    int64_t t = time_nano / 1000000;
    size_t i;

    for (i = 0; i < o->n && i < OUTAGE_SPANS; i++)
        if (t >= o->spans[i].down && t <= o->spans[i].to)
            return true;
    return false;
}

bool
outage_finished_within(const struct outages *o, const char *finished_at)
{
    int64_t t;
    size_t i;

    if (o->n == 0 || finished_at == NULL ||
        report_parse_time(finished_at, &t) != 0)
        return false;
    for (i = 0; i < o->n && i < OUTAGE_SPANS; i++)
        if (t >= o->spans[i].from - 1000 && t <= o->spans[i].to + 1000)
            return true;
    return false;
}
