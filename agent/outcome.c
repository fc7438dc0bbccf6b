/*
 * outcome — a record's report, made once; see outcome.h.
 */
#include "outcome.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "log.h"
#include "loop.h"
#include "persist.h"
#include "policy.h"
#include "reaper_int.h"
#include "report.h"
#include "store.h"

/*
 * The same exit, reported by an earlier run of reapd, must not be
 * reported again under another id. Two ways it comes back:
 * - a die replayed after a crash, for an exit reported from its
 *   FinishedAt: the container is gone, so only the die's time is left
 *   and the id would differ (a report at or after the die covers it);
 * - a record loaded from the store whose last change (its deletion, a
 *   later state) was never written (killed while the state's disk was
 *   full): if that run reported the container removed, nothing of it can
 *   exit again (container ids are never reused), so whatever this run
 *   would say is that same exit.
 * The earlier report may still wait in memory for the store (its disk
 * full; a report recovered from the journal at this start is one).
 * Only records that may have been reported before pay for the lookup.
 * (Found by the chaos soak: one exit, two report ids.)
 *
 * covers: whether an earlier report of c's container (made at `made_ms`,
 * its line `body`, NULL if not at hand) is of the exit c would report.
 */
static const char *
covers(const struct rec *c, int64_t made_ms, const char *body, size_t len)
{
    /* A second of slack: the die's time is the engine's clock. */
    if (c->finished_at == NULL && c->die_nano > 0 &&
        made_ms >= c->die_nano / 1000000 - 1000)
        return "the exit replayed after a restart was reported already";
    if (c->loaded && body != NULL && report_line_removed(body, len) == 1)
        return "an earlier run reported it removed already";
    return NULL;
}

/* One of the reports waiting for the store, against the record in `arg`. */
struct unsaved_match {
    const struct rec *c;
    const char *why, *report_id;
};

static bool
covers_unsaved(const char *report_id, const char *container_id,
               int64_t made_ms, const char *json, size_t len, void *arg)
{
    struct unsaved_match *m = arg;

    if (strcmp(container_id, m->c->id) != 0)
        return false;
    m->why = covers(m->c, made_ms, json, len);
    m->report_id = report_id;
    return m->why != NULL;
}

static bool
already_reported(const struct rec *c)
{
    struct store_report prev, full;
    struct unsaved_match m = {.c = c};
    bool die_only = c->finished_at == NULL && c->die_nano > 0;
    const char *why;

    if (!die_only && !c->loaded)
        return false;
    if (persist_find_unsaved(c->r, covers_unsaved, &m)) {
        log_info(c->id, "%s (report %s, not yet stored); not reported again",
                 m.why, m.report_id);
        return true;
    }
    if (c->r->store == NULL ||
        store_latest_report(c->r->store, c->id, &prev) != STORE_OK)
        return false;
    why = covers(c, prev.created_ms, NULL, 0);
    if (why == NULL && c->loaded &&
        store_get_report(c->r->store, prev.report_id, true, &full) ==
            STORE_OK) {
        why = covers(c, prev.created_ms, full.body, full.body_len);
        store_report_clear(&full);
    }
    if (why != NULL)
        log_info(c->id, "%s (report %s); not reported again", why,
                 prev.report_id);
    store_report_clear(&prev);
    return why != NULL;
}

/*
 * Exit to confirmed cleanup. The engine's FinishedAt is the real exit;
 * reapd may learn of it much later (dockerd emits die only after its own
 * task deletion finished or timed out), and that wait is exactly what an
 * operator needs to see. Same host, same clock. Without FinishedAt, the
 * time since reapd saw the exit.
 */
static uint64_t
cleanup_ms(const struct rec *c)
{
    int64_t fin, now = report_now_ms();

    if (c->finished_at != NULL &&
        report_parse_time(c->finished_at, &fin) == 0 && now >= fin &&
        (uint64_t)(now - fin) >= c->lc.cleanup_ms)
        return (uint64_t)(now - fin);
    return c->lc.cleanup_ms;
}

/* The `result` label of the cleanup histogram. A give-up wins over
 * "removed": the cleanup as a whole was not confirmed in time. */
static enum reaper_cleanup
cleanup_result(const struct lc *lc)
{
    if (lc->anomalies & LC_AN_GAVE_UP)
        return REAPER_CLEANUP_GAVE_UP;
    if (lc->removed)
        return REAPER_CLEANUP_REMOVED;
    if (lc->p.action == POLICY_KEEP)
        return REAPER_CLEANUP_KEPT;
    return REAPER_CLEANUP_UNCONFIRMED;
}

/* false only when the report could not be made for want of memory (then
 * nothing of it was written): make it again later. */
bool
outcome_report(struct rec *c)
{
    struct reaper *r = c->r;
    const struct lc *lc = &c->lc;
    struct report rep;
    struct log_fields fields = {0};
    const char *anomalies[16];
    char now[40], key[40];
    const char *exit_key;
    char *json;
    size_t len, n = 0;
    uint32_t bit;
    bool journaled;
    const double *bounds;
    size_t nbounds;
    int rc;

    if (!c->report_on)
        return true;
    memset(&rep, 0, sizeof(rep));
    rep.node = r->cfg->node;
    rep.container_id = c->id;
    rep.name = c->name;
    rep.image = c->image;
    rep.labels = c->labels;
    rep.nlabels = c->nlabels;
    rep.policy = c->policy;
    rep.action = policy_action_name(lc->p.action);
    rep.exit_known = lc->exit_known;
    rep.exit_code = lc->exit_code;
    rep.exit_code_source = lc_source_name(lc->source);
    rep.has_engine_exit_code = lc->die_has_code;
    rep.engine_exit_code = lc->die_code;
    rep.oom_killed = lc->oom_killed;
    rep.started_at = c->started_at;
    rep.finished_at = c->finished_at;
    rep.removed = lc->removed;
    rep.task_deleted = lc->task_deleted;
    rep.cleanup_ms = cleanup_ms(c);
    rep.delete_attempts = lc->delete_attempts;
    for (bit = 1; bit != 0 && n < 16; bit <<= 1)
        if ((lc->anomalies & bit) && lc_anomaly_name(bit) != NULL)
            anomalies[n++] = lc_anomaly_name(bit);
    rep.anomalies = anomalies;
    rep.nanomalies = n;
    rep.removed_by = !lc->removed        ? NULL
                     : lc->removed_by_us ? "reapd"
                                         : "other";
    report_now_rfc3339(now, sizeof(now));
    rep.reported_at = now;
    if (c->finished_at != NULL) {
        exit_key = c->finished_at;
    } else if (c->die_nano != 0) {
        snprintf(key, sizeof(key), "die:%lld", (long long)c->die_nano);
        exit_key = key;
    } else {
        exit_key = "unknown";
    }
    report_make_id(&rep, exit_key);
    if (already_reported(c))
        return true;

    json = report_to_json(&rep, &len);
    if (json == NULL) {
        r->st.report_errors++;
        log_error(c->id, "out of memory making a report; again in 1 s");
        return false;
    }
    bounds = reaper_cleanup_bounds(&nbounds);
    reaper_hist_observe(&r->st.cleanup[cleanup_result(lc)], bounds, nbounds,
                        (double)rep.cleanup_ms / 1000.0);
    /* reports.jsonl first, then the store: a crash between the two
     * leaves the record unforgotten, so the same report (same id) is made
     * again after the restart; never the other way round. */
    errno = 0;
    journaled = r->rl != NULL && persist_journal_append(r, json, len) == 0;
    if (r->rl != NULL && !journaled && errno == EAGAIN) {
        /* A rotation's checkpoint is not on disk yet: nothing goes into
         * the new file before it is (docs/state.md, "Rotation"). */
        log_info(c->id,
                 "report %s goes to the state database alone (synced): "
                 "%s is being rotated",
                 rep.report_id, report_log_path(r->rl));
    } else if (r->rl != NULL && !journaled) {
        r->st.report_errors++;
        log_error(c->id, "cannot append the report to %s: %m",
                  report_log_path(r->rl));
    }
    if (r->store != NULL) {
        /* Not in the journal: the store's own commit must be synced. */
        store_set_journaled(r->store, journaled);
        rc = persist_store_report(r, rep.report_id, c->id, json, len);
        store_set_journaled(r->store, r->rl != NULL);
        if (rc != 0) {
            persist_keep_unsaved(r, rep.report_id, c->id, json, len,
                                 !journaled);
            c->report_only_in_memory = !journaled;
            free(json);
            return true;
        }
        persist_journal_stored(r);
    }
    r->st.reports++;
    if (r->obs_ns != 0) {
        bounds = reaper_latency_bounds(&nbounds);
        reaper_hist_observe(&r->st.report_latency, bounds, nbounds,
                            (double)(loop_now_ns() - r->obs_ns) / 1e9);
    }
    if (lc->anomalies & LC_AN_EXIT_CODE_MISMATCH)
        r->st.exit_code_mismatches++;
    if (lc->anomalies & LC_AN_GAVE_UP)
        r->st.gave_up++;
    fields.report_id = rep.report_id;
    fields.state = lc_state_name(lc->state);
    if (lc->exit_known)
        log_fields(LOG_LEVEL_INFO, c->id, &fields,
                   "report %s: exit_code %d (%s), removed %s, cleanup %llu ms",
                   rep.report_id, lc->exit_code, rep.exit_code_source,
                   lc->removed ? "true" : "false",
                   (unsigned long long)rep.cleanup_ms);
    else
        log_fields(LOG_LEVEL_INFO, c->id, &fields,
                   "report %s: exit code unknown, removed %s", rep.report_id,
                   lc->removed ? "true" : "false");
    if (r->report_cb != NULL)
        r->report_cb(json, len, r->report_arg);
    free(json);
    return true;
}

static void
on_report_again(evutil_socket_t fd, short what, void *arg)
{
    struct rec *c = arg;

    (void)fd;
    (void)what;
    if (!outcome_report(c)) {
        reaper_arm(c, &c->again, on_report_again, 1000);
        return;
    }
    c->report_due = false;
    if (c->forget_due)
        reaper_forget(c);
}

void
outcome_report_later(struct rec *c)
{
    c->report_due = true;
    reaper_arm(c, &c->again, on_report_again, 1000);
}
