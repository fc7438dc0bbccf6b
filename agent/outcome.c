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

/*
 * A report made and waiting for the end of its loop turn. It owns `json`;
 * `c` stays (c->report_due) until outcome_commit is done with it.
 */
struct queued {
    struct rec *c;
    char *json;
    size_t len;
    char report_id[sizeof(((struct report *)0)->report_id)];
    const char *source; /* exit_code_source, static */
    uint64_t cleanup_ms;
    uint64_t obs_ns;   /* r->obs_ns when made: for the added latency */
    bool journal_done; /* its append to reports.jsonl was tried */
    bool journaled;    /* and it is there, synced */
};

static void on_commit(evutil_socket_t fd, short what, void *arg);
static void on_journal(evutil_socket_t fd, short what, void *arg);
static void write_queued(struct reaper *r);
static void journal_queued(struct reaper *r);
static void commit_some(struct reaper *r, struct queued *v, size_t n);

/*
 * Reports queued in a turn are written once this many wait, or at the
 * turn's end. A 3,000-exit burst makes 30-40 per turn: written at the
 * turn's end, each waited for the rest of it (added latency p99 10-131
 * ms against 1.4-3.8 written one by one); eight at a time, 4.0-4.9 ms,
 * and most of the saving (CPU per exit 496 us against 623 one by one and
 * 427 at the turn's end; docs/performance.md).
 */
#define REPORT_BATCH 8

/*
 * While the WAL's copy runs, a burst's reports are journaled once
 * REPORT_BATCH wait, or once the first has waited this long. Each turn's
 * end was too often: the loop's syncs then met the copy's on the same
 * disk, a 3,000-exit burst settled a third slower, at a fifth more CPU
 * per exit (docs/performance.md); at the copy's end was too late (25-50
 * ms). A turn of a sustained pace journals its reports at its end
 * (on_commit).
 */
#define JOURNAL_WAIT_MS 5

/*
 * The first reports of a loop turn are written at once, as they would be
 * alone: at a sustained pace (200 exits/s) a third of the reports share
 * their turn with one other, and queued, the second waited for the rest
 * of the turn (added latency p99 8.3-9.5 ms against 5.8-9.3 written one
 * by one, in the smoke run of the bench); three in a turn is a burst.
 */
#define REPORTS_AT_ONCE 2

/*
 * Counts a report made in this loop turn: how many the turn has made,
 * this one included. libevent's time of the turn says which turn it is
 * (outside the loop, as in some tests, every call is a turn of its own).
 */
static unsigned
turn_count(struct reaper *r)
{
    struct outcome_queue *q = &r->oq;

    if (loop_new_turn(r->l, &q->turn_tv))
        q->in_turn = 0;
    return ++q->in_turn;
}

/* Whether the turn's `k`th report is written at once: nothing queued,
 * and it is among the turn's first REPORTS_AT_ONCE. */
static bool
write_now(struct reaper *r, unsigned k)
{
    /* Queued too while the WAL's copy holds the store: its end writes
     * them (persist_store_busy). */
    if (r->oq.n > 0 || persist_store_busy(r))
        return false;
    return k <= REPORTS_AT_ONCE;
}

int
outcome_init(struct reaper *r)
{
    r->oq.ev = event_new(loop_base(r->l), -1, 0, on_commit, r);
    r->oq.jev = evtimer_new(loop_base(r->l), on_journal, r);
    r->oq.journal_wait_ms = JOURNAL_WAIT_MS;
    return r->oq.ev != NULL && r->oq.jev != NULL ? 0 : -1;
}

void
outcome_cleanup(struct reaper *r)
{
    outcome_commit(r);
    if (r->oq.ev != NULL)
        event_free(r->oq.ev);
    r->oq.ev = NULL;
    if (r->oq.jev != NULL)
        event_free(r->oq.jev);
    r->oq.jev = NULL;
    free(r->oq.v);
    r->oq.v = NULL;
    r->oq.cap = 0;
}

/*
 * Writes a made report, or queues it for the end of the turn; false: out
 * of memory. The turn's first reports are written at once (write_now):
 * at a sustained pace that is nearly every one, and their latency is that
 * of their own write. Those that follow in the same turn (a burst: 30-40
 * per turn of a 3,000-exit burst) share one write at its end.
 */
static bool
enqueue(struct rec *c, char *json, size_t len, const struct report *rep)
{
    struct reaper *r = c->r;
    struct outcome_queue *q = &r->oq;
    struct queued *e, one;
    unsigned k = turn_count(r);

    if (write_now(r, k)) {
        e = &one;
    } else {
        if (q->n == q->cap) {
            size_t ncap = q->cap == 0 ? 16 : q->cap * 2;

            e = realloc(q->v, ncap * sizeof(*e));
            if (e == NULL)
                return false;
            q->v = e;
            q->cap = ncap;
        }
        e = &q->v[q->n];
    }
    e->c = c;
    e->json = json;
    e->len = len;
    snprintf(e->report_id, sizeof(e->report_id), "%s", rep->report_id);
    e->source = rep->exit_code_source;
    e->cleanup_ms = rep->cleanup_ms;
    e->obs_ns = r->obs_ns;
    e->journal_done = e->journaled = false;
    if (e == &one) {
        commit_some(r, e, 1);
        free(json);
        c->report_due = false;
        return true;
    }
    q->n++;
    c->report_queued = true;
    c->report_due = true;
    /* After every callback made ready with the one running: the end of
     * the turn. During the WAL's copy the queue outlives the turn, and
     * each turn's end has its say (on_commit). */
    if (q->n == 1 || k == 1)
        event_active(q->ev, EV_TIMEOUT, 1);
    /* Enough to share a write: written now, the records let go at the
     * turn's end all the same. */
    if (!persist_store_busy(r)) {
        if (q->n - q->nwritten >= REPORT_BATCH)
            write_queued(r);
    } else if (q->n - q->njournaled >= REPORT_BATCH) {
        journal_queued(r);
    } else if (k > REPORTS_AT_ONCE && !evtimer_pending(q->jev, NULL)) {
        loop_timer_ms(q->jev, q->journal_wait_ms);
    }
    return true;
}

bool
outcome_report(struct rec *c)
{
    struct reaper *r = c->r;
    const struct lc *lc = &c->lc;
    struct report rep;
    const char *anomalies[16];
    char now[40], key[40];
    const char *exit_key;
    char *json;
    size_t len, n = 0;
    uint32_t bit;
    const double *bounds;
    size_t nbounds;

    if (!c->report_on) {
        c->report_due = false;
        return true;
    }
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
    if (already_reported(c)) {
        c->report_due = false;
        return true;
    }

    json = report_to_json(&rep, &len);
    if (json == NULL) {
        r->st.report_errors++;
        log_error(c->id, "out of memory making a report; again in 1 s");
        return false;
    }
    if (!enqueue(c, json, len, &rep)) {
        free(json);
        r->st.report_errors++;
        log_error(c->id, "out of memory queueing a report; again in 1 s");
        return false;
    }
    bounds = hist_cleanup_bounds(&nbounds);
    hist_observe(&r->st.cleanup[cleanup_result(lc)], bounds, nbounds,
                        (double)rep.cleanup_ms / 1000.0);
    return true;
}

/* The report is durable (its line synced in reports.jsonl, or its
 * synced commit): the added latency ends here, once. */
static void
durable(struct reaper *r, struct queued *e)
{
    const double *bounds;
    size_t nbounds;

    if (e->obs_ns == 0)
        return;
    bounds = hist_latency_bounds(&nbounds);
    hist_observe(&r->st.report_latency, bounds, nbounds,
                        (double)(loop_now_ns() - e->obs_ns) / 1e9);
    e->obs_ns = 0;
}

/* Counts, logs and hands on a report now in the store (or, without one,
 * in reports.jsonl alone). */
static void
made(struct reaper *r, struct queued *e)
{
    const struct rec *c = e->c;
    const struct lc *lc = &c->lc;
    struct log_fields fields = {0};

    r->st.reports++;
    durable(r, e);
    if (lc->anomalies & LC_AN_EXIT_CODE_MISMATCH)
        r->st.exit_code_mismatches++;
    if (lc->anomalies & LC_AN_GAVE_UP)
        r->st.gave_up++;
    fields.report_id = e->report_id;
    fields.state = lc_state_name(lc->state);
    if (lc->exit_known)
        log_fields(LOG_LEVEL_INFO, c->id, &fields,
                   "report %s: exit_code %d (%s), removed %s, cleanup %llu ms",
                   e->report_id, lc->exit_code, e->source,
                   lc->removed ? "true" : "false",
                   (unsigned long long)e->cleanup_ms);
    else
        log_fields(LOG_LEVEL_INFO, c->id, &fields,
                   "report %s: exit code unknown, removed %s", e->report_id,
                   lc->removed ? "true" : "false");
    if (r->report_cb != NULL)
        r->report_cb(e->json, e->len, r->report_arg);
}

/*
 * Appends to reports.jsonl, in one write and one sync, those of the `n`
 * reports (at most STORE_REPORTS_MAX) not tried yet: each is then
 * durable, and its added latency ends (a report the journal could not
 * take is durable only at its synced commit, in commit_some).
 */
static void
journal_some(struct reaper *r, struct queued *v, size_t n)
{
    struct report_line lines[STORE_REPORTS_MAX];
    struct queued *of[STORE_REPORTS_MAX];
    bool journaled = false;
    size_t i, k = 0;
    int e;

    for (i = 0; i < n; i++) {
        if (v[i].journal_done)
            continue;
        v[i].journal_done = true;
        lines[k].json = v[i].json;
        lines[k].len = v[i].len;
        of[k++] = &v[i];
    }
    if (k == 0 || r->rl == NULL)
        return;
    errno = 0;
    journaled = persist_journal_append_many(r, lines, k) == 0;
    e = errno;
    if (journaled)
        r->st.report_writes++;
    for (i = 0; i < k; i++) {
        of[i]->journaled = journaled;
        if (journaled) {
            durable(r, of[i]);
        } else if (e == EAGAIN) {
            /* A rotation's checkpoint is not on disk yet: nothing
             * goes into the new file before it is (docs/state.md,
             * "Rotation"). */
            log_info(of[i]->c->id,
                     "report %s goes to the state database alone "
                     "(synced): %s is being rotated",
                     of[i]->report_id, report_log_path(r->rl));
        } else {
            r->st.report_errors++;
            log_error(of[i]->c->id, "cannot append the report to %s: %s",
                      report_log_path(r->rl), strerror(e));
        }
    }
}

/*
 * Writes `n` queued reports (at most STORE_REPORTS_MAX): reports.jsonl
 * first (unless journal_some did already), then the store. A crash
 * between the two leaves the records unforgotten, so the same reports
 * (same ids) are made again after the restart; never the other way
 * round.
 */
static void
commit_some(struct reaper *r, struct queued *v, size_t n)
{
    struct store_new_report sv[STORE_REPORTS_MAX];
    bool journaled = true, stored = false;
    size_t i;

    journal_some(r, v, n);
    for (i = 0; i < n; i++)
        journaled = journaled && v[i].journaled;
    if (!journaled) /* the store's commit is the synced write */
        r->st.report_writes++;
    if (r->store != NULL) {
        for (i = 0; i < n; i++) {
            sv[i].report_id = v[i].report_id;
            sv[i].container_id = v[i].c->id;
            sv[i].body = v[i].json;
            sv[i].len = v[i].len;
        }
        /* One not in the journal: the store's own commit must be
         * synced. */
        store_set_journaled(r->store, journaled);
        if (persist_store_reports(r, sv, n) != 0)
            for (i = 0; i < n; i++)
                sv[i].result = STORE_ERROR;
        store_set_journaled(r->store, r->rl != NULL);
    }
    for (i = 0; i < n; i++) {
        if (r->store != NULL && sv[i].result != STORE_OK) {
            persist_keep_unsaved(r, v[i].report_id, v[i].c->id, v[i].json,
                                 v[i].len, !v[i].journaled);
            v[i].c->report_only_in_memory = !v[i].journaled;
            continue;
        }
        stored = true;
        made(r, &v[i]);
    }
    if (stored && r->store != NULL)
        persist_journal_stored(r);
}

/*
 * While the WAL's copy holds the store: the reports queued are appended
 * to reports.jsonl now, which needs no store (unless a rotation left the
 * journal's checkpoint to be written first), so they are durable now and
 * not at the copy's end, 25-50 ms later in a burst; their transaction,
 * the count, delivery and the report streams wait for that end
 * (checkpoint_done: outcome_commit).
 */
static void
journal_queued(struct reaper *r)
{
    struct outcome_queue *q = &r->oq;
    size_t at = q->njournaled > q->nwritten ? q->njournaled : q->nwritten, n;

    if (r->rl == NULL || !persist_journal_ready(r))
        return;
    while (at < q->n) {
        n = q->n - at;
        if (n > STORE_REPORTS_MAX)
            n = STORE_REPORTS_MAX;
        journal_some(r, q->v + at, n);
        at += n;
    }
    q->njournaled = q->n;
    evtimer_del(q->jev); /* nothing left for it */
}

/* Writes the reports queued and not yet written. */
static void
write_queued(struct reaper *r)
{
    struct outcome_queue *q = &r->oq;
    size_t at, n;

    while (q->nwritten < q->n) {
        at = q->nwritten;
        n = q->n - at;
        if (n > STORE_REPORTS_MAX)
            n = STORE_REPORTS_MAX;
        /* Counted as written first: the journal's checkpoint, moved
         * after the store takes them, must still see the later ones
         * journaled and not stored (outcome_unstored). */
        q->nwritten += n;
        commit_some(r, q->v + at, n);
    }
}

bool
outcome_unstored(const struct reaper *r)
{
    return r->oq.njournaled > r->oq.nwritten;
}

void
outcome_commit(struct reaper *r)
{
    struct outcome_queue *q = &r->oq;
    struct queued *v;
    size_t nv, cap, i;

    write_queued(r);
    /* Taken whole: what runs from here (a record forgotten) may queue
     * another report, for a turn of its own. */
    v = q->v;
    nv = q->n;
    cap = q->cap;
    q->v = NULL;
    q->n = q->cap = q->nwritten = q->njournaled = 0;
    for (i = 0; i < nv; i++) {
        struct rec *c = v[i].c;

        free(v[i].json);
        c->report_queued = false;
        c->report_due = false;
        if (c->forget_due)
            reaper_forget(c);
        else
            persist_rec(c); /* the step that reported, held till now */
    }
    if (q->v == NULL) { /* kept for the next turn's */
        q->v = v;
        q->cap = cap;
    } else {
        free(v);
    }
}

/*
 * The end of a turn that made reports. During the WAL's copy, the copy's
 * end commits them (persist.c, checkpoint_done); a turn of a sustained
 * pace (REPORTS_AT_ONCE or fewer) journals its own now, together. At 200
 * exits/s the copy runs during about one report in fifty, and each of
 * those waited JOURNAL_WAIT_MS for company that did not come: that wait
 * was the added latency's p99 (8.1-9.7 ms against 4.9-8.1;
 * docs/performance.md). A burst's turn leaves them to REPORT_BATCH and
 * the timer (on_journal).
 */
static void
on_commit(evutil_socket_t fd, short what, void *arg)
{
    struct reaper *r = arg;

    (void)fd;
    (void)what;
    if (persist_store_busy(r)) {
        if (r->oq.in_turn <= REPORTS_AT_ONCE)
            journal_queued(r);
        return;
    }
    outcome_commit(r);
}

static void
on_journal(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    if (persist_store_busy(arg))
        journal_queued(arg);
}

static void
on_report_again(evutil_socket_t fd, short what, void *arg)
{
    struct rec *c = arg;

    (void)fd;
    (void)what;
    if (!outcome_report(c)) {
        rec_arm(c, &c->again, on_report_again, 1000);
        return;
    }
    /* Queued: outcome_commit goes on; or nothing to write. */
    if (c->report_due)
        return;
    if (c->forget_due)
        reaper_forget(c);
    else
        persist_rec(c);
}

void
outcome_report_later(struct rec *c)
{
    c->report_due = true;
    rec_arm(c, &c->again, on_report_again, 1000);
}
