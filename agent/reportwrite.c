/*
 * reportwrite — the reaper's reports, from made to durable; see
 * reportwrite.h.
 *
 * Two parts: reports.jsonl and the store (appends, the journal's
 * checkpoint, rotation, the replay at a start, and the reports the store
 * cannot take yet, kept in memory and retried); then reports made from a
 * record (an exit an earlier run reported is not reported again) and the
 * loop turn's batch of them (written together, counted, handed on).
 */
#include "reportwrite.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "log.h"
#include "loop.h"
#include "policy.h"
#include "reaper_int.h"
#include "report.h"
#include "store.h"

#define MAX_UNSAVED 100000 /* reports held while the disk is full */

struct replay {
    struct reaper *r;
    size_t lines, recovered, bad;
    bool oom; /* a line could not be read for want of memory */
};

/* A report written to reports.jsonl that the store could not take yet
 * (disk full): kept and retried, so nothing already made is lost. */
struct unsaved {
    struct unsaved *next;
    char report_id[40];
    char container_id[CTR_ID_SIZE];
    char *json;
    size_t len;
    int64_t made_ms; /* when it was kept (as the store's created_ms) */
    /* Not in reports.jsonl either: this is the report's only copy, and
     * the container's stored record stays until the store takes it. */
    bool only_copy;
};

/* ---- reports.jsonl, the store, the reports kept in memory ------------ */

static void keep_unsaved(struct reaper *r, const char *id, const char *cid,
                         const char *json, size_t len, bool only_copy);
static void journal_stored(struct reaper *r);

/* Without an upstream, reports.jsonl and the store are where a report
 * goes: it is delivered as it is stored, and retention applies. */
static int
store_add(struct reaper *r, const char *id, const char *cid, const char *json,
          size_t len)
{
    if (r->cfg->upstream_url == NULL)
        return store_add_delivered(r->store, id, cid, json, len,
                                   report_now_ms());
    return store_add_report(r->store, id, cid, json, len, report_now_ms());
}

/* Stores one report (it is already in reports.jsonl). */
static int
store_one(struct reaper *r, const char *id, const char *cid, const char *json,
          size_t len)
{
    int rc = store_add(r, id, cid, json, len);

    if (rc == STORE_DUPLICATE) {
        /* Made before a restart already: stored and delivered once. */
        r->ps.duplicates++;
        log_fields(LOG_LEVEL_INFO, cid, &(struct log_fields){.report_id = id},
                   "report %s was already made before a restart", id);
        return 0;
    }
    groupcommit_result(r->ps.gc, rc, "storing a report");
    return rc < 0 ? -1 : 0;
}

/* store_one for `n` reports in one transaction (store_add_reports: at
 * most STORE_REPORTS_MAX): 0 when committed, and then v[i].result is
 * STORE_OK for each one stored now or before (a duplicate), an error for
 * one refused; -1: none stored. */
static int
store_batch(struct reaper *r, struct store_new_report *v, size_t n)
{
    int rc;
    size_t i;

    /* The events checkpoint rides along, as with any flush: the group
     * commit's timer may not be left to write it (groupcommit_settled). */
    groupcommit_put_events(r->ps.gc);
    if (r->cfg->upstream_url == NULL)
        rc = store_add_reports(r->store, v, n, report_now_ms(), true);
    else
        rc = store_add_reports(r->store, v, n, report_now_ms(), false);
    groupcommit_result(r->ps.gc, rc, "storing reports");
    if (rc < 0)
        return -1;
    groupcommit_settled(r->ps.gc);
    for (i = 0; i < n; i++) {
        if (v[i].result == STORE_DUPLICATE) {
            r->ps.duplicates++;
            log_fields(LOG_LEVEL_INFO, v[i].container_id,
                       &(struct log_fields){.report_id = v[i].report_id},
                       "report %s was already made before a restart",
                       v[i].report_id);
            v[i].result = STORE_OK;
        } else if (v[i].result < 0) {
            groupcommit_result(r->ps.gc, v[i].result, "storing a report");
        }
    }
    return 0;
}

/*
 * The stored checkpoint is past the end of reports.jsonl: a rotation just
 * started a new file, or a start found the file shorter (a rotation a
 * crash cut short). A line appended now would lie before the checkpoint,
 * and the next start, finding the file shorter still (or cut mid-line),
 * would never replay it: a report the store lost to a power loss, or one
 * waiting in memory for a full disk, would be lost. So the checkpoint is
 * set to the file's end (nothing has been appended since) and committed
 * with a sync first; true once it is.
 */
static bool
journal_catch_up(struct reaper *r)
{
    int rc;

    if (!r->ps.journal_behind)
        return true;
    rc = store_set_checkpoint(r->store, JOURNAL_KEY, report_log_end(r->rl));
    if (rc >= 0)
        rc = store_flush_synced(r->store);
    groupcommit_result(r->ps.gc, rc, "saving the reports.jsonl checkpoint");
    if (rc < 0)
        return false;
    r->ps.journal_behind = false;
    return true;
}

/* Appends `n` reports' lines to reports.jsonl (r->rl, not NULL) in one
 * write and one sync: 0, or -1 with errno. EAGAIN: the journal's
 * checkpoint could not be reset after a rotation yet (the state's disk
 * full), and lines appended now would lie before it, never replayed; the
 * caller then stores the reports as ones in no journal. */
static int
journal_append(struct reaper *r, const struct report_line *v, size_t n)
{
    if (r->store != NULL && !journal_catch_up(r)) {
        errno = EAGAIN;
        return -1;
    }
    return report_log_append_many(r->rl, v, n);
}

/* After a failed rotation the file grows on; tried again this much later
 * (each try costs a synced commit). */
#define ROTATE_RETRY_MS 60000

/*
 * reports.jsonl past reports_log.max_bytes is rotated, and only when the
 * caller saw every line of it in the store (no report waits in memory) and
 * set the checkpoint to its end: the rotated file is never read again,
 * and the store is what holds its reports from then on. Each step leaves
 * what a start handles (docs/state.md, "Rotation"):
 *
 *  1. the checkpoint (at the end) and every report are committed with a
 *     sync: the store holds them through a power loss too, which a commit
 *     of a journaled report (synchronous=NORMAL) alone would not;
 *     killed before or during this, nothing has changed;
 *  2. report_log_rotate: killed before its rename, reports.jsonl is whole
 *     and the checkpoint at its end, so the start replays nothing; after
 *     it, reports.jsonl is missing (made again, empty) or empty, shorter
 *     than the checkpoint: the start replays nothing (all of it is in the
 *     store) and resets the checkpoint as in 3 before any append;
 *  3. the checkpoint is set to 0 and committed with a sync before any line
 *     goes to the new file (journal_catch_up; appends wait until it is).
 *
 * No step makes a start replay a line the store already had, beyond the
 * usual lag of the checkpoint: nothing is delivered twice. All on the
 * loop: two synced commits, a few renames and one fsync of the directory,
 * once per max_bytes of reports.
 */
static bool
rotation_due(const struct reaper *r)
{
    const struct config *cfg = r->cfg;

    return cfg->reports_log_max_bytes > 0 &&
           report_log_end(r->rl) >= cfg->reports_log_max_bytes &&
           loop_now_ms() >= r->ps.rotate_again_ms;
}

static void
rotate_journal(struct reaper *r)
{
    const struct config *cfg = r->cfg;
    int64_t end = report_log_end(r->rl);
    unsigned keep = (unsigned)cfg->reports_log_keep;
    int rc;

    if (!rotation_due(r))
        return;
    rc = store_flush_synced(r->store);
    groupcommit_result(r->ps.gc, rc,
                       "saving the state before rotating reports.jsonl");
    if (rc < 0)
        return; /* tried again after the next report */
    if (report_log_rotate(r->rl, keep) != 0) {
        if (!r->ps.rotate_failing)
            log_error(NULL,
                      "cannot rotate %s (%lld bytes): %s; it grows on, "
                      "tried again every %d s",
                      report_log_path(r->rl), (long long)end,
                      errno == ESTALE ? "it is no longer the file reapd "
                                        "appends to (moved by hand?)"
                                      : strerror(errno),
                      ROTATE_RETRY_MS / 1000);
        r->ps.rotate_failing = true;
        r->ps.rotate_again_ms = loop_now_ms() + ROTATE_RETRY_MS;
        return;
    }
    r->ps.rotate_failing = false;
    r->ps.rotations++;
    r->ps.journal_behind = true;
    r->ps.journal_saved = -1;
    log_info(NULL, "%s rotated at %lld bytes (reports_log.keep %u)",
             report_log_path(r->rl), (long long)end, keep);
    journal_catch_up(r);
}

/* Whether reports.jsonl's checkpoint may move to the file's end once the
 * reports being stored are: none waits in memory, and the checkpoint is
 * not behind a rotation. */
static bool
journal_movable(const struct reaper *r)
{
    return r->rl != NULL && r->store != NULL && r->ps.nunsaved == 0 &&
           !r->ps.journal_behind;
}

/* Every report in reports.jsonl so far is in the store too (none is
 * waiting in memory for a full disk to free up): move the journal
 * checkpoint (batched with the next flush; a checkpoint that lags only
 * makes the replay meet duplicates), and rotate a file grown too big. */
static void
journal_stored(struct reaper *r)
{
    if (r->rl == NULL || r->store == NULL || r->ps.nunsaved > 0)
        return;
    if (!journal_catch_up(r))
        return;
    /* Unless the reports' own transaction wrote it already; a rotation
     * wants it in its synced commit all the same (rotate_journal, 1). */
    if (report_log_end(r->rl) != r->ps.journal_saved || rotation_due(r)) {
        groupcommit_result(
            r->ps.gc,
            store_set_checkpoint(r->store, JOURNAL_KEY, report_log_end(r->rl)),
            "saving the reports.jsonl checkpoint");
        groupcommit_lazy(r->ps.gc);
    }
    rotate_journal(r);
}

static void
on_journal_line(const char *line, size_t len, void *arg)
{
    struct replay *rp = arg;
    struct reaper *r = rp->r;
    char id[33], cid[CTR_ID_SIZE];
    int rc;

    if (rp->oom)
        return; /* the replay fails; nothing past that line is taken */
    rp->lines++;
    rc = report_line_ids(line, len, id, cid);
    if (rc == -2) {
        rp->oom = true;
        return;
    }
    if (rc != 0) {
        rp->bad++;
        return;
    }
    rc = store_add(r, id, cid, line, len);
    if (rc == STORE_DUPLICATE)
        return; /* the usual case: the checkpoint lagged a little */
    groupcommit_result(r->ps.gc, rc, "storing a recovered report");
    if (rc < 0) {
        keep_unsaved(r, id, cid, line, len, false);
        return;
    }
    rp->recovered++;
}

/*
 * Repairs the store from reports.jsonl, the journal of reports: lines
 * past the checkpoint whose reports the store does not hold (a power loss
 * undid their commit) are stored again, to be delivered. The first start
 * on a state directory (no checkpoint yet) trusts the store as it is.
 */
static int
recover_journal(struct reaper *r)
{
    struct replay rp = {.r = r};
    int64_t from = 0, end = report_log_end(r->rl);

    if (store_get_checkpoint(r->store, JOURNAL_KEY, &from) != STORE_OK) {
        from = end;
    } else if (from > end) {
        log_warn(NULL,
                 "%s is shorter than when last seen (%lld < %lld bytes: a "
                 "rotation cut short, or truncated by hand?); nothing to "
                 "recover from it",
                 report_log_path(r->rl), (long long)end, (long long)from);
        from = end;
        /* Its lines, if any, are taken as stored; the checkpoint comes
         * back within the file before anything is appended. */
        r->ps.journal_behind = true;
        r->ps.journal_saved = -1;
    }
    if (report_log_replay(r->rl, from, on_journal_line, &rp, &end) != 0) {
        log_error(NULL, "cannot read %s: %m", report_log_path(r->rl));
        return -1;
    }
    if (rp.oom) {
        /* Moving the checkpoint past a line not read could lose its
         * report: fail, and read it again at the next start. */
        log_error(NULL, "out of memory reading %s; not starting",
                  report_log_path(r->rl));
        return -1;
    }
    if (rp.bad > 0)
        log_warn(NULL,
                 "%s: %zu lines past byte %lld are not reports; "
                 "skipped",
                 report_log_path(r->rl), rp.bad, (long long)from);
    if (rp.recovered > 0)
        log_warn(NULL,
                 "recovered %zu reports from %s that the state database "
                 "had lost (a power loss?); they will be delivered",
                 rp.recovered, report_log_path(r->rl));
    journal_stored(r);
    return 0;
}

/* Keeps a copy of a report the store could not take, retried until it
 * does; said when even that fails. `only_copy`: the report is not in
 * reports.jsonl either (its append failed too); the container's stored
 * record then stays until the store takes the report (the caller marks
 * the record: c->report_only_in_memory). */
static void
keep_unsaved(struct reaper *r, const char *id, const char *cid,
             const char *json, size_t len, bool only_copy)
{
    struct unsaved *u;

    if (r->ps.nunsaved >= MAX_UNSAVED || (u = calloc(1, sizeof(*u))) == NULL ||
        (u->json = malloc(len + 1)) == NULL) {
        if (r->ps.nunsaved < MAX_UNSAVED)
            free(u);
        log_error(cid, "report %s could not be stored nor kept in memory; %s",
                  id,
                  only_copy ? "the container's record stays, and the report "
                              "is made again at the next start"
                            : "it is only in reports.jsonl");
        return;
    }
    u->only_copy = only_copy;
    snprintf(u->report_id, sizeof(u->report_id), "%s", id);
    snprintf(u->container_id, sizeof(u->container_id), "%s", cid);
    memcpy(u->json, json, len);
    u->json[len] = '\0';
    u->len = len;
    u->made_ms = report_now_ms();
    if (r->ps.unsaved_tail != NULL)
        r->ps.unsaved_tail->next = u;
    else
        r->ps.unsaved = u;
    r->ps.unsaved_tail = u;
    r->ps.nunsaved++;
    groupcommit_retry_later(r->ps.gc);
}

bool
reportwrite_retry(struct reaper *r)
{
    while (r->ps.unsaved != NULL) {
        struct unsaved *u = r->ps.unsaved;
        int rc;

        /* The only copy: the store's commit is synced. */
        store_set_journaled(r->store, r->rl != NULL && !u->only_copy);
        rc = store_one(r, u->report_id, u->container_id, u->json, u->len);
        store_set_journaled(r->store, r->rl != NULL);
        if (rc != 0) {
            groupcommit_retry_later(r->ps.gc);
            return false;
        }
        /* The record kept for it can go, unless the container is tracked
         * again (a kept one that ran anew). */
        if (u->only_copy && ctable_find(&r->tab, u->container_id) == NULL) {
            groupcommit_result(
                r->ps.gc, store_delete_container(r->store, u->container_id),
                "saving container records");
        }
        r->ps.unsaved = u->next;
        if (r->ps.unsaved == NULL)
            r->ps.unsaved_tail = NULL;
        r->ps.nunsaved--;
        if (r->report_cb != NULL)
            r->report_cb(u->json, u->len, r->report_arg);
        free(u->json);
        free(u);
    }
    journal_stored(r);
    return true;
}

/* Visits the reports waiting in memory for the store, oldest first, until
 * `cb` returns true; returns that. */
typedef bool (*unsaved_cb)(const char *report_id, const char *container_id,
                           int64_t made_ms, const char *json, size_t len,
                           void *arg);

static bool
find_unsaved(const struct reaper *r, unsaved_cb cb, void *arg)
{
    const struct unsaved *u;

    for (u = r->ps.unsaved; u != NULL; u = u->next)
        if (cb(u->report_id, u->container_id, u->made_ms, u->json, u->len,
               arg))
            return true;
    return false;
}

int
reportwrite_start(struct reaper *r)
{
    if (r->rl == NULL)
        return 0;
    store_set_journaled(r->store, true);
    return recover_journal(r);
}

void
reportwrite_drop_unsaved(struct reaper *r)
{
    struct persist *ps = &r->ps;

    while (ps->unsaved != NULL) {
        struct unsaved *u = ps->unsaved;

        ps->unsaved = u->next;
        log_error(u->container_id,
                  "report %s not stored at exit; %s, and it will be made "
                  "again after the restart",
                  u->report_id,
                  u->only_copy ? "the container's record stays"
                               : "it is in reports.jsonl");
        free(u->json);
        free(u);
    }
    ps->unsaved_tail = NULL;
    ps->nunsaved = 0;
}

/* ---- reports made, and batched per loop turn ------------------------- */

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
    if (find_unsaved(c->r, covers_unsaved, &m)) {
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
 * `c` stays (c->report_due) until reportwrite_commit_turn is done with it.
 */
struct queued {
    struct rec *c;
    char *json;
    size_t len;
    char report_id[sizeof(((struct report *)0)->report_id)];
    const char *source; /* exit_code_source, static */
    uint64_t cleanup_ms;
    uint64_t obs_ns; /* r->obs_ns when made: for the added latency */
    bool journaled;  /* it is in reports.jsonl, synced */
};

static void on_commit(evutil_socket_t fd, short what, void *arg);
static void write_queued(struct reaper *r);
static void commit_some(struct reaper *r, struct queued *v, size_t n);

/*
 * Reports queued in a turn are written once this many wait, or at the
 * turn's end: a burst's reports share a write and a sync without each
 * waiting for the whole of a busy turn.
 */
#define REPORT_BATCH 8

/*
 * The first reports of a loop turn are written at once, as they would be
 * alone: at a sustained pace a report often shares its turn with one
 * other, which should not wait for the rest of the turn; three in a turn
 * is a burst.
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
    struct report_queue *q = &r->oq;

    if (loop_new_turn(r->l, &q->turn_tv)) {
        q->in_turn = 0;
        r->st.report_turns++;
    }
    return ++q->in_turn;
}

/* Whether the turn's `k`th report is written at once: nothing queued,
 * and it is among the turn's first REPORTS_AT_ONCE. */
static bool
write_now(struct reaper *r, unsigned k)
{
    if (r->oq.n > 0)
        return false;
    return k <= REPORTS_AT_ONCE;
}

int
reportwrite_init(struct reaper *r, void (*released)(struct rec *c))
{
    r->ps.journal_saved = -1;
    r->oq.released = released;
    r->oq.ev = event_new(loop_base(r->l), -1, 0, on_commit, r);
    return r->oq.ev != NULL ? 0 : -1;
}

void
reportwrite_cleanup(struct reaper *r)
{
    reportwrite_commit_turn(r);
    if (r->oq.ev != NULL)
        event_free(r->oq.ev);
    r->oq.ev = NULL;
    free(r->oq.v);
    r->oq.v = NULL;
    r->oq.cap = 0;
}

/*
 * Writes a made report, or queues it for the end of the turn; false: out
 * of memory. The turn's first reports are written at once (write_now):
 * at a sustained pace that is nearly every one, and their latency is that
 * of their own write. Those that follow in the same turn (a burst) share
 * one write at its end.
 */
static bool
enqueue(struct rec *c, char *json, size_t len, const struct report *rep)
{
    struct reaper *r = c->r;
    struct report_queue *q = &r->oq;
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
    e->journaled = false;
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
     * the turn. */
    if (q->n == 1)
        event_active(q->ev, EV_TIMEOUT, 1);
    /* Enough to share a write: written now, the records let go at the
     * turn's end all the same. */
    if (q->n - q->nwritten >= REPORT_BATCH)
        write_queued(r);
    return true;
}

bool
reportwrite_report(struct rec *c)
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
    if (lc->anomalies & LC_AN_TASK_LOST)
        r->st.tasks_lost++;
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
 * Appends the `n` reports (at most STORE_REPORTS_MAX) to reports.jsonl,
 * in one write and one sync: each is then durable, and its added latency
 * ends (a report the journal could not take is durable only at its
 * synced commit, in commit_some).
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
        lines[k].json = v[i].json;
        lines[k].len = v[i].len;
        of[k++] = &v[i];
    }
    if (k == 0 || r->rl == NULL)
        return;
    errno = 0;
    journaled = journal_append(r, lines, k) == 0;
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
 * first, then the store. A crash
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
            /* Its record ends with it: one commit for both. */
            sv[i].forget = v[i].c->forget_due && v[i].c->persisted;
            sv[i].forgotten = false;
        }
        /* reports.jsonl's checkpoint, true once they are stored, goes
         * in their transaction (no commit of its own after it). */
        if (journal_movable(r))
            store_set_reports_checkpoint(r->store, JOURNAL_KEY,
                                         report_log_end(r->rl));
        /* One not in the journal: the store's own commit must be
         * synced. */
        store_set_journaled(r->store, journaled);
        if (store_batch(r, sv, n) != 0)
            for (i = 0; i < n; i++)
                sv[i].result = STORE_ERROR;
        else if (store_reports_checkpoint_written(r->store))
            r->ps.journal_saved = report_log_end(r->rl);
        store_set_journaled(r->store, r->rl != NULL);
    }
    for (i = 0; i < n; i++) {
        if (r->store != NULL && sv[i].result != STORE_OK) {
            keep_unsaved(r, v[i].report_id, v[i].c->id, v[i].json, v[i].len,
                         !v[i].journaled);
            v[i].c->report_only_in_memory = !v[i].journaled;
            continue;
        }
        if (r->store != NULL && sv[i].forgotten)
            v[i].c->persisted = v[i].c->persisted_running = false;
        stored = true;
        made(r, &v[i]);
    }
    if (stored && r->store != NULL)
        journal_stored(r);
}

/* Writes the reports queued and not yet written. */
static void
write_queued(struct reaper *r)
{
    struct report_queue *q = &r->oq;
    size_t at, n;

    while (q->nwritten < q->n) {
        at = q->nwritten;
        n = q->n - at;
        if (n > STORE_REPORTS_MAX)
            n = STORE_REPORTS_MAX;
        q->nwritten += n;
        commit_some(r, q->v + at, n);
    }
}

void
reportwrite_commit_turn(struct reaper *r)
{
    struct report_queue *q = &r->oq;
    struct queued *v;
    size_t nv, cap, i;

    write_queued(r);
    /* Taken whole: what runs from here (a record forgotten) may queue
     * another report, for a turn of its own. */
    v = q->v;
    nv = q->n;
    cap = q->cap;
    q->v = NULL;
    q->n = q->cap = q->nwritten = 0;
    for (i = 0; i < nv; i++) {
        struct rec *c = v[i].c;

        free(v[i].json);
        c->report_queued = false;
        c->report_due = false;
        r->oq.released(c);
    }
    if (q->v == NULL) { /* kept for the next turn's */
        q->v = v;
        q->cap = cap;
    } else {
        free(v);
    }
}

/* The end of a turn that made reports. */
static void
on_commit(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    reportwrite_commit_turn(arg);
}

static void
on_report_again(evutil_socket_t fd, short what, void *arg)
{
    struct rec *c = arg;

    (void)fd;
    (void)what;
    if (!reportwrite_report(c)) {
        rec_arm(c, &c->again, on_report_again, 1000);
        return;
    }
    /* Queued: reportwrite_commit_turn goes on; or nothing to write. */
    if (c->report_due)
        return;
    c->r->oq.released(c);
}

void
reportwrite_report_later(struct rec *c)
{
    c->report_due = true;
    rec_arm(c, &c->again, on_report_again, 1000);
}
