/*
 * persist — the reaper's durable state; see persist.h.
 *
 * Container records and checkpoints are batched: one store_flush per loop
 * turn writes them all (group commit). Reports go to reports.jsonl first,
 * then to the store; what the store cannot take yet (disk full) is kept
 * in memory and retried, and the journal is replayed at a start for what
 * a power loss took from the store.
 *
 * Two parts: records, checkpoints and the store's housekeeping first;
 * then reports (made from a record, batched per loop turn, written).
 */
#include "persist.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bio.h"
#include "config.h"
#include "docker.h"
#include "log.h"
#include "loop.h"
#include "policy.h"
#include "reaper_int.h"
#include "record.h"
#include "report.h"
#include "store.h"

static void flush_within(struct reaper *r, uint64_t ms);
static void put_events_checkpoint(struct reaper *r);

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

#define PRUNE_INTERVAL_S 600

/*
 * Group commit: the records (and checkpoints) changed in this window go
 * in one transaction; each engine answer is a loop turn of its own, and a
 * flush per turn was a transaction per step. Nothing outside reapd learns
 * of a step before it is on disk: a DELETE flushes first, a report is
 * stored in its own transaction with whatever waits. A kill -9 inside the
 * window loses only what the engine's replay gives again; what nobody
 * replays is written at once (persist_flush_now: containerd's TaskExit).
 */
#define GROUP_COMMIT_MS 20

/*
 * What a restart learns again waits longer, to ride with the next
 * transaction something else needs sooner (at an exit's pace, its
 * DELETE's or its report's): a container's first record (a relist or the
 * replay finds it again), the events and journal checkpoints (a lagging
 * one only replays more), a record's deletion that no report carried.
 */
#define LAZY_COMMIT_MS 1000

/*
 * The WAL is copied into the database once it holds this many pages, on
 * agent/bio.c's thread (store_on_wal), not inside whichever commit
 * crossed SQLite's own bound. Meanwhile commits wait, so a copy is kept
 * short: its distinct pages and two syncs, a few milliseconds.
 */
#define CHECKPOINT_PAGES 256

/* Writes of pending records per loop turn, and past how many waiting
 * they go on regardless (flush_budget). */
#define FLUSH_TURN_NS 2000000u
#define FLUSH_BACKLOG 4096

static void on_flush(evutil_socket_t fd, short what, void *arg);
static void on_store_retry(evutil_socket_t fd, short what, void *arg);
static void on_prune(evutil_socket_t fd, short what, void *arg);
static void on_checkpoint(evutil_socket_t fd, short what, void *arg);
static void on_delq(evutil_socket_t fd, short what, void *arg);
static void arm_store_retry(struct reaper *r);
static void flush_delq(struct reaper *r);
static int reports_init(struct reaper *r);
static void reports_cleanup(struct reaper *r);
static bool reports_unstored(const struct reaper *r);
static bool journal_movable(const struct reaper *r);

int
persist_init(struct reaper *r, const struct persist_cbs *up)
{
    struct persist *ps = &r->ps;
    struct event_base *base = loop_base(r->l);

    ps->cb = up;
    ps->journal_saved = -1;
    if (reports_init(r) != 0)
        return -1;
    ps->flush_ev = evtimer_new(base, on_flush, r);
    ps->retry = evtimer_new(base, on_store_retry, r);
    ps->prune_timer = evtimer_new(base, on_prune, r);
    ps->ckpt_ev = evtimer_new(base, on_checkpoint, r);
    ps->delq_ev = event_new(base, -1, 0, on_delq, r);
    /* Without the thread (none to be had), the copy runs on the loop. */
    ps->bio = bio_new(base);
    if (ps->bio == NULL)
        log_warn(NULL, "state: no thread for checkpoints; they run on the "
                       "loop");
    return ps->flush_ev != NULL && ps->retry != NULL &&
                   ps->prune_timer != NULL && ps->ckpt_ev != NULL &&
                   ps->delq_ev != NULL
               ? 0
               : -1;
}

void
persist_cleanup(struct reaper *r)
{
    struct persist *ps = &r->ps;

    /* A checkpoint in flight ends first: the store is the loop's again. */
    bio_free(ps->bio);
    ps->bio = NULL;
    reports_cleanup(r);
    if (r->store != NULL)
        put_events_checkpoint(r);
    if (r->store != NULL && store_flush(r->store) < 0)
        log_error(NULL, "state: last flush failed: %s",
                  store_errmsg(r->store));
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
    if (ps->flush_ev != NULL)
        event_free(ps->flush_ev);
    if (ps->retry != NULL)
        event_free(ps->retry);
    if (ps->prune_timer != NULL)
        event_free(ps->prune_timer);
    if (ps->ckpt_ev != NULL)
        event_free(ps->ckpt_ev);
    if (ps->delq_ev != NULL)
        event_free(ps->delq_ev);
    ps->delq_ev = NULL;
    free(ps->delq);
    ps->delq = NULL;
    ps->ndelq = ps->delq_cap = 0;
    if (r->store != NULL)
        store_on_wal(r->store, 0, NULL, NULL);
    ps->flush_ev = ps->retry = ps->prune_timer = ps->ckpt_ev = NULL;
}

/* The flush is due within `ms`: an earlier one already scheduled
 * stands, a later one is brought forward. */
static void
schedule_flush(struct reaper *r, uint64_t ms)
{
    struct persist *ps = &r->ps;
    uint64_t due = loop_now_ms() + ms;

    if (ps->flush_scheduled && ps->flush_at_ms <= due)
        return;
    ps->flush_scheduled = true;
    ps->flush_at_ms = due;
    loop_timer_ms(ps->flush_ev, ms);
}

/*
 * Is there time left in this loop turn for another slice of records?
 * Writing pending records takes at most FLUSH_TURN_NS of a turn (about:
 * a slice that starts before the budget is spent runs whole); the rest
 * waits for the next turn. Past FLUSH_BACKLOG records waiting there is no
 * budget: the writes must keep up before the store refuses changes
 * (STORE_PENDING_MAX).
 */
static void
turn_roll(struct reaper *r)
{
    if (loop_new_turn(r->l, &r->ps.turn_tv))
        r->ps.turn_flush_ns = 0;
}

static bool
flush_budget(struct reaper *r)
{
    struct persist *ps = &r->ps;

    turn_roll(r);
    return ps->turn_flush_ns < FLUSH_TURN_NS ||
           store_pending(r->store) > FLUSH_BACKLOG;
}

/* Nothing waits to be written: no pending change, no events checkpoint
 * to put (put_events_checkpoint). */
static bool
nothing_waits(const struct reaper *r)
{
    return store_pending(r->store) == 0 && !r->ps.events_due;
}

/*
 * A commit that left nothing waiting (a DELETE's record, the reports of a
 * turn, each with what else waited): the group commit's timer, still
 * armed for what it carried, would wake the loop for an empty flush.
 */
static void
flush_settled(struct reaper *r)
{
    if (r->ps.flush_scheduled && nothing_waits(r)) {
        evtimer_del(r->ps.flush_ev);
        r->ps.flush_scheduled = false;
    }
}

void
persist_events_checkpoint(struct reaper *r, int64_t nano)
{
    if (r->store == NULL || nano <= 0)
        return;
    r->ps.events_ckpt = nano;
    if (nano == r->ps.events_saved || r->ps.events_due)
        return;
    r->ps.events_due = true;
    flush_within(r, LAZY_COMMIT_MS);
}

/* The events checkpoint into the transaction being written. */
static void
put_events_checkpoint(struct reaper *r)
{
    int64_t t = r->ps.events_ckpt;
    int rc;

    if (!r->ps.events_due)
        return;
    r->ps.events_due = false;
    if (t == r->ps.events_saved)
        return;
    rc = store_set_checkpoint(r->store, CHECKPOINT_KEY, t);
    persist_result(r, rc, "saving the events checkpoint");
    /* Not taken (too much waits for a full disk): the next change asks
     * again. */
    if (rc >= 0)
        r->ps.events_saved = t;
}

/*
 * Writes the record of container `id` (NULL: none in particular) and
 * other pending changes, FLUSH_SLICE_ROWS in all; what is left goes a
 * slice at a time within each turn's budget (on_flush), so that a DELETE
 * after a burst of new containers does not write all of their records in
 * its turn first. A failure is retried (store_retry).
 */
static int
flush_slice(struct reaper *r, const char *id)
{
    uint64_t t0 = loop_now_ns();
    int rc;

    turn_roll(r);
    put_events_checkpoint(r);
    rc = store_flush_some(r->store, id, FLUSH_SLICE_ROWS);
    r->ps.turn_flush_ns += loop_now_ns() - t0;
    persist_result(r, rc, "saving container records");
    if (rc < 0)
        arm_store_retry(r);
    else if (store_pending(r->store) > 0 && id != NULL)
        schedule_flush(r, 0);
    else
        flush_settled(r);
    return rc;
}

/*
 * The WAL's copy is running or about to: slices that can wait do. Each
 * one written meanwhile would make the copy longer, and a DELETE's own
 * flush would then wait for it on the loop.
 */
static bool
ckpt_due(const struct reaper *r)
{
    /* A copy that failed (a full disk) is tried again in a second:
     * meanwhile the writes go on, and fail or not on their own. */
    return bio_busy(r->ps.bio) || (r->ps.ckpt_scheduled && !r->ps.ckpt_failed);
}

static void
flush_within(struct reaper *r, uint64_t ms)
{
    if (r->store == NULL)
        return;
    /* A loop turn that changes thousands of records (a relist at a
     * start) writes them a slice at a time: their copies, held until the
     * flush, would otherwise interleave with the records made meanwhile
     * and leave the heap fragmented for good (1 KiB per container). */
    if (store_pending(r->store) >= FLUSH_SLICE_ROWS && !ckpt_due(r)) {
        if (!flush_budget(r) || flush_slice(r, NULL) >= 0) {
            /* A slice written, or none due this turn: the rest next. */
            if (store_pending(r->store) > 0)
                schedule_flush(r, 0);
            return;
        }
    }
    schedule_flush(r, ms);
}

void
persist_flush_soon(struct reaper *r)
{
    flush_within(r, GROUP_COMMIT_MS);
}

void
persist_flush_lazy(struct reaper *r)
{
    flush_within(r, LAZY_COMMIT_MS);
}

/* Says it loudly once when writes start failing, and once when they work
 * again; a full disk must not also fill the log. */
void
persist_result(struct reaper *r, int rc, const char *what)
{
    if (rc >= 0) {
        if (r->ps.failing)
            log_info(NULL, "state: writes to %s work again",
                     store_path(r->store));
        r->ps.failing = false;
        return;
    }
    r->ps.errors++;
    if (!r->ps.failing)
        log_error(NULL,
                  "state: %s failed: %s (%s); nothing already accepted is "
                  "lost, retrying",
                  what, store_strerror(rc), store_errmsg(r->store));
    r->ps.failing = true;
}

static void
arm_store_retry(struct reaper *r)
{
    loop_timer_ms(r->ps.retry, 1000);
}

void
persist_flush_rec(struct rec *c)
{
    if (c->r->store != NULL)
        flush_slice(c->r, c->id);
}

void
persist_flush_now(struct reaper *r)
{
    int rc;

    if (r->store == NULL)
        return;
    if (r->ps.flush_scheduled) {
        evtimer_del(r->ps.flush_ev);
        r->ps.flush_scheduled = false;
    }
    put_events_checkpoint(r);
    rc = store_flush(r->store);
    persist_result(r, rc, "saving container records");
    if (rc < 0)
        arm_store_retry(r);
}

/* From inside a commit (store_on_wal): only schedules. A timer, not
 * event_active, so that the sockets ready meanwhile are read first. */
static void
on_wal_full(void *arg)
{
    struct reaper *r = arg;

    if (r->ps.ckpt_scheduled || r->ps.ckpt_ev == NULL)
        return;
    r->ps.ckpt_scheduled = true;
    loop_timer_ms(r->ps.ckpt_ev, 0);
}

static void
checkpoint_result(struct reaper *r, int rc)
{
    persist_result(r, rc, "copying the WAL into the state database");
    /* Failed (a full disk): again in a second, and at the next commit. */
    r->ps.ckpt_failed = rc < 0;
    if (rc < 0) {
        r->ps.ckpt_scheduled = true;
        loop_timer_ms(r->ps.ckpt_ev, 1000);
    }
}

/* On the bio thread: the store is not touched by the loop meanwhile but
 * for what cannot wait, and the connection serializes that. */
static int
checkpoint_job(void *arg)
{
    struct reaper *r = arg;

    return store_checkpoint_bg(r->store);
}

static void
checkpoint_done(int rc, void *arg)
{
    struct reaper *r = arg;

    checkpoint_result(r, store_checkpoint_end(r->store, rc));
    /* What waited for the connection, before another copy can begin:
     * the DELETEs' records, then the reports. */
    flush_delq(r);
    if (r->oq.n > 0)
        persist_commit_reports(r);
    if (r->ps.flush_deferred) {
        r->ps.flush_deferred = false;
        /* Unless the DELETEs' and reports' transactions just wrote it. */
        if (!nothing_waits(r))
            persist_flush_soon(r);
    }
    /* What was committed meanwhile may be past the bound already. */
    if (store_wal_pages(r->store) >= CHECKPOINT_PAGES)
        on_wal_full(r);
}

static void
on_checkpoint(evutil_socket_t fd, short what, void *arg)
{
    struct reaper *r = arg;

    (void)fd;
    (void)what;
    r->ps.ckpt_scheduled = false;
    if (r->ps.bio == NULL) {
        store_checkpoint_begin(r->store);
        checkpoint_done(store_checkpoint_bg(r->store), r);
        return;
    }
    if (bio_busy(r->ps.bio))
        return; /* its end looks at the WAL again */
    store_checkpoint_begin(r->store);
    bio_run(r->ps.bio, checkpoint_job, checkpoint_done, r);
}

bool
persist_store_busy(const struct reaper *r)
{
    return r->store != NULL && bio_busy(r->ps.bio);
}

bool
persist_backlogged(const struct reaper *r)
{
    return r->store != NULL && ckpt_due(r) &&
           store_pending(r->store) >= FLUSH_SLICE_ROWS;
}

/* The group commit's timer: put off while the store copies its WAL (the
 * copy's end flushes), where persist_flush_now, for what must be on disk
 * before reapd goes on, waits for it. */
static void
on_flush(evutil_socket_t fd, short what, void *arg)
{
    struct reaper *r = arg;

    (void)fd;
    (void)what;
    r->ps.flush_scheduled = false;
    if (nothing_waits(r))
        r->ps.empty_flushes++;
    if (ckpt_due(r)) {
        r->ps.flush_deferred = true;
        return;
    }
    /* At least one slice (the group commit is due), more within the
     * turn's budget. */
    do {
        if (flush_slice(r, NULL) < 0)
            return;
    } while (store_pending(r->store) > 0 && flush_budget(r));
    if (store_pending(r->store) > 0)
        schedule_flush(r, 0);
}

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
int
persist_store_report(struct reaper *r, const char *id, const char *cid,
                     const char *json, size_t len)
{
    int rc = store_add(r, id, cid, json, len);

    if (rc == STORE_DUPLICATE) {
        /* Made before a restart already: stored and delivered once. */
        r->ps.duplicates++;
        log_fields(LOG_LEVEL_INFO, cid, &(struct log_fields){.report_id = id},
                   "report %s was already made before a restart", id);
        return 0;
    }
    persist_result(r, rc, "storing a report");
    return rc < 0 ? -1 : 0;
}

int
persist_store_reports(struct reaper *r, struct store_new_report *v, size_t n)
{
    int rc;
    size_t i;

    /* The events checkpoint rides along, as with any flush: the group
     * commit's timer may not be left to write it (flush_settled). */
    put_events_checkpoint(r);
    if (r->cfg->upstream_url == NULL)
        rc = store_add_reports(r->store, v, n, report_now_ms(), true);
    else
        rc = store_add_reports(r->store, v, n, report_now_ms(), false);
    persist_result(r, rc, "storing reports");
    if (rc < 0)
        return -1;
    flush_settled(r);
    for (i = 0; i < n; i++) {
        if (v[i].result == STORE_DUPLICATE) {
            r->ps.duplicates++;
            log_fields(LOG_LEVEL_INFO, v[i].container_id,
                       &(struct log_fields){.report_id = v[i].report_id},
                       "report %s was already made before a restart",
                       v[i].report_id);
            v[i].result = STORE_OK;
        } else if (v[i].result < 0) {
            persist_result(r, v[i].result, "storing a report");
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
    persist_result(r, rc, "saving the reports.jsonl checkpoint");
    if (rc < 0)
        return false;
    r->ps.journal_behind = false;
    return true;
}

bool
persist_journal_ready(const struct reaper *r)
{
    return r->store == NULL || !r->ps.journal_behind;
}

int
persist_journal_append_many(struct reaper *r, const struct report_line *v,
                            size_t n)
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
    persist_result(r, rc, "saving the state before rotating reports.jsonl");
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

/* Every report in reports.jsonl so far is in the store too (none is
 * waiting in memory for a full disk to free up): move the journal
 * checkpoint (batched with the next flush; a checkpoint that lags only
 * makes the replay meet duplicates), and rotate a file grown too big. */
/* Whether reports.jsonl's checkpoint may move to the file's end once the
 * reports being stored are: none waits in memory or journaled and not
 * stored, and the checkpoint is not behind a rotation. */
static bool
journal_movable(const struct reaper *r)
{
    return r->rl != NULL && r->store != NULL && r->ps.nunsaved == 0 &&
           !reports_unstored(r) && !r->ps.journal_behind;
}

void
persist_journal_stored(struct reaper *r)
{
    if (r->rl == NULL || r->store == NULL || r->ps.nunsaved > 0 ||
        reports_unstored(r))
        return;
    if (!journal_catch_up(r))
        return;
    /* Unless the reports' own transaction wrote it already; a rotation
     * wants it in its synced commit all the same (rotate_journal, 1). */
    if (report_log_end(r->rl) != r->ps.journal_saved || rotation_due(r)) {
        persist_result(
            r,
            store_set_checkpoint(r->store, JOURNAL_KEY, report_log_end(r->rl)),
            "saving the reports.jsonl checkpoint");
        persist_flush_lazy(r);
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
    persist_result(r, rc, "storing a recovered report");
    if (rc < 0) {
        persist_keep_unsaved(r, id, cid, line, len, false);
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
    persist_journal_stored(r);
    return 0;
}

/* Retention: delivered reports beyond the configured age or count go;
 * pending and dead ones stay (store_prune never touches them). */
static void
on_prune(evutil_socket_t fd, short what, void *arg)
{
    struct reaper *r = arg;
    const struct config *cfg = r->cfg;
    struct timeval tv = {PRUNE_INTERVAL_S, 0};
    uint64_t n = 0;
    int rc;

    (void)fd;
    (void)what;
    rc = store_prune(r->store, report_now_ms(),
                     cfg->retention_delivered_max_age_ms > 0
                         ? cfg->retention_delivered_max_age_ms
                         : -1,
                     cfg->retention_delivered_max_count > 0
                         ? cfg->retention_delivered_max_count
                         : -1,
                     &n);
    persist_result(r, rc, "pruning delivered reports");
    if (n > 0) {
        r->ps.pruned += n;
        log_info(NULL, "state: pruned %llu delivered reports",
                 (unsigned long long)n);
    }
    evtimer_add(r->ps.prune_timer, &tv);
}

void
persist_keep_unsaved(struct reaper *r, const char *id, const char *cid,
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
    arm_store_retry(r);
}

static void
on_store_retry(evutil_socket_t fd, short what, void *arg)
{
    struct reaper *r = arg;

    (void)fd;
    (void)what;
    while (r->ps.unsaved != NULL) {
        struct unsaved *u = r->ps.unsaved;
        int rc;

        /* The only copy: the store's commit is synced. */
        store_set_journaled(r->store, r->rl != NULL && !u->only_copy);
        rc = persist_store_report(r, u->report_id, u->container_id, u->json,
                                  u->len);
        store_set_journaled(r->store, r->rl != NULL);
        if (rc != 0) {
            arm_store_retry(r);
            return;
        }
        /* The record kept for it can go, unless the container is tracked
         * again (a kept one that ran anew). */
        if (u->only_copy && ctable_find(&r->tab, u->container_id) == NULL) {
            persist_result(r,
                           store_delete_container(r->store, u->container_id),
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
    persist_journal_stored(r);
    if (store_pending(r->store) > 0)
        persist_flush_soon(r);
}

static void
fill_meta(const struct rec *c, struct record_meta *m)
{
    memset(m, 0, sizeof(*m));
    m->name = c->name;
    m->image = c->image;
    m->labels = c->labels;
    m->nlabels = c->nlabels;
    m->policy = c->policy;
    m->force = c->force;
    m->volumes = c->volumes;
    m->report_on = c->report_on;
    m->started_at = c->started_at;
    m->finished_at = c->finished_at;
    m->die_nano = c->die_nano;
    m->exited_wall_ms = c->exited_wall_ms;
}

static uint64_t
fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;

    while (n-- > 0)
        h = (h ^ *b++) * 0x100000001b3ULL;
    return h;
}

static uint64_t
fnv_str(uint64_t h, const char *s)
{
    return s != NULL ? fnv(h, s, strlen(s) + 1) : fnv(h, "", 1);
}

/* What a record knows that nobody may tell reapd again: how the
 * container exited and by whose word, what went wrong, who removed it
 * and its task. The rest of a cleanup (its state, what was polled and
 * seen gone) a restart learns again from the engine. */
static uint64_t
facts_of(const struct rec *c)
{
    const struct lc *l = &c->lc;
    struct {
        int32_t die_code, exit_code, source, task_exit_code;
        uint32_t anomalies;
        uint8_t ran, exited, die_seen, die_has_code, die_after_outage,
            exit_known, oom_killed, removed_by_us, task_exit_seen,
            task_reaped_done, task_trouble;
        int64_t die_nano, exited_wall_ms;
    } f;
    uint64_t h = 0xcbf29ce484222325ULL;

    memset(&f, 0, sizeof(f)); /* the padding too: it is hashed */
    f.die_code = l->die_code;
    f.exit_code = l->exit_code;
    f.source = (int32_t)l->source;
    f.task_exit_code = l->task_exit_code;
    f.anomalies = l->anomalies;
    f.ran = l->ran;
    f.exited = l->exited;
    f.die_seen = l->die_seen;
    f.die_has_code = l->die_has_code;
    f.die_after_outage = l->die_after_outage;
    f.exit_known = l->exit_known;
    f.oom_killed = l->oom_killed;
    f.removed_by_us = l->removed_by_us;
    f.task_exit_seen = l->task_exit_seen;
    f.task_reaped_done = l->task_reaped_done;
    f.task_trouble = l->task_trouble;
    f.die_nano = c->die_nano;
    f.exited_wall_ms = c->exited_wall_ms;
    h = fnv(h, &f, sizeof(f));
    h = fnv_str(h, c->name);
    h = fnv_str(h, c->started_at);
    return fnv_str(h, c->finished_at);
}

/* States a restart resumes by asking the engine again (lc_resume). */
static bool
resumable(enum lc_state s)
{
    switch (s) {
    case LC_RUNNING:
    case LC_SETTLING:
    case LC_DELAYING:
    case LC_QUEUED:
    case LC_REMOVING:
    case LC_CONFIRMING:
    case LC_TASK_CONFIRMING:
    case LC_TASK_REAPING:
        return true;
    default:
        return false;
    }
}

/*
 * After every step of a managed record: what a restart must not forget
 * (docs/state.md, "Which facts must be on disk"). Every record past an
 * exit, or reported and kept; one whose containerd TaskExit is in while
 * the engine has not yet said it exited (its die comes after its own task
 * deletion, which can take more than 30 s): containerd does not replay
 * events, and that TaskExit may be the only true code the node will ever
 * have. And a container that runs, once: a relist would find it again,
 * but not if it exits and is removed (`--rm`) while reapd is down and the
 * engine's events are lost with an engine restart (or pushed out of its
 * 256-event buffer); the record turns that silence into a report whose
 * code is unknown. A step that changes no fact, only the state, is not
 * written when the state is one a restart resumes by asking the engine
 * again: resumed from the state on disk, the record comes to the same
 * place (a DELETE sent again is answered 404). `must`: written whatever
 * changed (a DELETE's record: only it says the removal is reapd's).
 */
static void
rec_write(struct rec *c, bool must)
{
    struct reaper *r = c->r;
    struct record_meta m;
    char *json;
    size_t len;
    bool running, lazy;
    uint64_t facts;
    int rc;

    if (r->store == NULL)
        return;
    if (c->persist_done) {
        /* The step's DELETE wrote it (persist_before_delete). */
        c->persist_done = false;
        return;
    }
    /* Its report waits for the end of the turn (persist_commit_reports),
     * or to be made again (out of memory), which writes this record after
     * it: the step that reported must not be on disk ahead of the report
     * (a kill -9 in between would lose it). */
    if (c->report_due)
        return;
    if (c->lc.exited && c->exited_wall_ms == 0)
        c->exited_wall_ms = report_now_ms();
    if (!c->lc.exited)
        c->exited_wall_ms = 0;
    running =
        c->lc.state == LC_RUNNING && !c->lc.exited && !c->lc.task_exit_seen;
    if (running && !c->lc.ran) {
        /* Created, never started: if it goes unseen, nothing ran. */
        if (c->persisted) {
            persist_result(r, store_delete_container(r->store, c->id),
                           "saving container records");
            c->persisted = c->persisted_running = false;
            persist_flush_soon(r);
        }
        return;
    }
    if (running && c->persisted_running)
        return;
    facts = facts_of(c);
    if (!must && c->persisted && !running && facts == c->facts &&
        resumable(c->lc.state))
        return;
    fill_meta(c, &m);
    json = record_to_json(&c->lc, &m, &len);
    if (json == NULL) {
        log_error(c->id, "out of memory saving its record");
        return;
    }
    lazy = running && (!c->persisted || facts == c->facts);
    rc = store_put_container(r->store, c->id, json, len, report_now_ms());
    persist_result(r, rc, "saving container records");
    free(json);
    if (rc >= 0) {
        c->persisted = true;
        c->persisted_running = running;
        c->facts = facts;
    }
    if (lazy)
        persist_flush_lazy(r);
    else
        persist_flush_soon(r);
}

void
persist_rec(struct rec *c)
{
    rec_write(c, false);
}

/* The DELETEs queued: their records in one commit per
 * PERSIST_DELETE_BATCH, then each is sent, or held when that failed
 * (logged once by persist_result). */
static void
flush_delq(struct reaper *r)
{
    struct persist *ps = &r->ps;
    const char *ids[PERSIST_DELETE_BATCH];
    struct rec *q[PERSIST_DELETE_BATCH];
    size_t i, n;
    uint64_t t0;
    int rc;

    /* Re-read each time: a DELETE written may forget a record queued. */
    while (ps->ndelq > 0) {
        n = ps->ndelq < PERSIST_DELETE_BATCH ? ps->ndelq
                                             : PERSIST_DELETE_BATCH;
        t0 = loop_now_ns();
        for (i = 0; i < n; i++) {
            q[i] = ps->delq[i];
            ids[i] = q[i]->id;
            q[i]->delete_queued = false;
        }
        ps->ndelq -= n;
        memmove(ps->delq, ps->delq + n, ps->ndelq * sizeof(ps->delq[0]));
        turn_roll(r);
        put_events_checkpoint(r);
        rc = store_flush_ids(r->store, ids, n, FLUSH_SLICE_ROWS);
        ps->turn_flush_ns += loop_now_ns() - t0;
        persist_result(r, rc, "saving container records");
        if (rc < 0)
            arm_store_retry(r);
        else if (store_pending(r->store) > 0)
            schedule_flush(r, 0);
        else
            flush_settled(r);
        for (i = 0; i < n; i++) {
            if (rc < 0) {
                r->st.deletes_held++;
                log_debug(q[i]->id, "DELETE held: its record cannot be "
                                    "written yet");
            }
            r->ps.cb->delete_written(q[i], rc >= 0);
        }
    }
}

/* Queues c's DELETE; false when out of memory. */
static bool
delq_push(struct rec *c)
{
    struct persist *ps = &c->r->ps;

    if (ps->ndelq == ps->delq_cap) {
        size_t ncap =
            ps->delq_cap == 0 ? PERSIST_DELETE_BATCH : ps->delq_cap * 2;
        struct rec **v = realloc(ps->delq, ncap * sizeof(*v));

        if (v == NULL)
            return false;
        ps->delq = v;
        ps->delq_cap = ncap;
    }
    ps->delq[ps->ndelq++] = c;
    c->delete_queued = true;
    if (ps->ndelq == 1)
        event_active(ps->delq_ev, EV_TIMEOUT, 1);
    return true;
}

static void
on_delq(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    /* The copy's end writes them. */
    if (persist_store_busy(arg))
        return;
    flush_delq(arg);
}

enum persist_delete
persist_before_delete(struct rec *c)
{
    struct reaper *r = c->r;
    struct persist *ps = &r->ps;
    int rc;

    if (r->store == NULL)
        return PERSIST_NOW;
    rec_write(c, true);
    /* The step's own persist, after its actions, would write the same. */
    c->persist_done = true;
    /* Out of memory for the queue: written now, as the first. */
    if ((ps->ndelq > 0 || persist_store_busy(r) ||
         !loop_new_turn(r->l, &ps->delete_tv)) &&
        delq_push(c)) {
        if (ps->ndelq >= PERSIST_DELETE_BATCH && !persist_store_busy(r))
            flush_delq(r);
        return PERSIST_QUEUED;
    }
    rc = flush_slice(r, c->id);
    if (rc < 0) {
        r->st.deletes_held++;
        log_debug(c->id, "DELETE held: its record cannot be written yet");
        return PERSIST_HELD;
    }
    return PERSIST_NOW;
}

/* c is being forgotten: a DELETE of it waiting in the queue is dropped. */
static void
delq_drop(struct rec *c)
{
    struct persist *ps = &c->r->ps;
    size_t i;

    if (!c->delete_queued)
        return;
    for (i = 0; i < ps->ndelq && ps->delq[i] != c; i++)
        ;
    if (i < ps->ndelq) {
        memmove(&ps->delq[i], &ps->delq[i + 1],
                (ps->ndelq - i - 1) * sizeof(ps->delq[0]));
        ps->ndelq--;
    }
    c->delete_queued = false;
}

int
persist_start(struct reaper *r)
{
    struct timeval soon = {0, 0};

    if (r->rl != NULL) {
        store_set_journaled(r->store, true);
        if (recover_journal(r) != 0)
            return -1;
    }
    store_on_wal(r->store, CHECKPOINT_PAGES, on_wal_full, r);
    evtimer_add(r->ps.prune_timer, &soon);
    return 0;
}

void
persist_forget(struct rec *c)
{
    delq_drop(c);
    if (c->report_only_in_memory && c->persisted) {
        /* Its report waits in memory for the store (the disk full), in
         * no file: killed now, reapd would lose it. The record stays, so
         * that the next start makes the report again (same id). */
        log_warn(c->id, "its report is only in memory (the state's disk "
                        "full): its record stays until the report is stored");
        return;
    }
    if (c->persisted && c->r->store != NULL) {
        persist_result(c->r, store_delete_container(c->r->store, c->id),
                       "saving container records");
        persist_flush_lazy(c->r);
    }
}

bool
persist_find_unsaved(const struct reaper *r, persist_unsaved_cb cb, void *arg)
{
    const struct unsaved *u;

    for (u = r->ps.unsaved; u != NULL; u = u->next)
        if (cb(u->report_id, u->container_id, u->made_ms, u->json, u->len,
               arg))
            return true;
    return false;
}

/* ---- reports ---------------------------------------------------------- */

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
 * `c` stays (c->report_due) until persist_commit_reports is done with it.
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
 * turn's end: a burst's reports share a write and a sync without each
 * waiting for a whole turn of 30-40 exits.
 */
#define REPORT_BATCH 8

/*
 * While the WAL's copy runs, a burst's reports are journaled once
 * REPORT_BATCH wait, or once the first has waited this long: at each
 * turn's end the loop's syncs would meet the copy's on the same disk, at
 * the copy's end they would wait for all of it. A turn of a sustained pace
 * journals its reports at its end (on_commit).
 */
#define JOURNAL_WAIT_MS 5

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

static int
reports_init(struct reaper *r)
{
    r->oq.ev = event_new(loop_base(r->l), -1, 0, on_commit, r);
    r->oq.jev = evtimer_new(loop_base(r->l), on_journal, r);
    r->oq.journal_wait_ms = JOURNAL_WAIT_MS;
    return r->oq.ev != NULL && r->oq.jev != NULL ? 0 : -1;
}

static void
reports_cleanup(struct reaper *r)
{
    persist_commit_reports(r);
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
persist_report(struct rec *c)
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
        if (persist_store_reports(r, sv, n) != 0)
            for (i = 0; i < n; i++)
                sv[i].result = STORE_ERROR;
        else if (store_reports_checkpoint_written(r->store))
            r->ps.journal_saved = report_log_end(r->rl);
        store_set_journaled(r->store, r->rl != NULL);
    }
    for (i = 0; i < n; i++) {
        if (r->store != NULL && sv[i].result != STORE_OK) {
            persist_keep_unsaved(r, v[i].report_id, v[i].c->id, v[i].json,
                                 v[i].len, !v[i].journaled);
            v[i].c->report_only_in_memory = !v[i].journaled;
            continue;
        }
        if (r->store != NULL && sv[i].forgotten)
            v[i].c->persisted = v[i].c->persisted_running = false;
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
 * not only at the copy's end; their transaction,
 * the count, delivery and the report streams wait for that end
 * (checkpoint_done: persist_commit_reports).
 */
static void
journal_queued(struct reaper *r)
{
    struct report_queue *q = &r->oq;
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
    struct report_queue *q = &r->oq;
    size_t at, n;

    while (q->nwritten < q->n) {
        at = q->nwritten;
        n = q->n - at;
        if (n > STORE_REPORTS_MAX)
            n = STORE_REPORTS_MAX;
        /* Counted as written first: the journal's checkpoint, moved
         * after the store takes them, must still see the later ones
         * journaled and not stored (reports_unstored). */
        q->nwritten += n;
        commit_some(r, q->v + at, n);
    }
}

static bool
reports_unstored(const struct reaper *r)
{
    return r->oq.njournaled > r->oq.nwritten;
}

void
persist_commit_reports(struct reaper *r)
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
    q->n = q->cap = q->nwritten = q->njournaled = 0;
    for (i = 0; i < nv; i++) {
        struct rec *c = v[i].c;

        free(v[i].json);
        c->report_queued = false;
        c->report_due = false;
        if (c->forget_due)
            r->ps.cb->forget(c);
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
 * end commits them (checkpoint_done); a turn of a sustained pace
 * (REPORTS_AT_ONCE or fewer) journals its own now, together, rather than
 * wait JOURNAL_WAIT_MS for company that does not come. A burst's turn
 * leaves them to REPORT_BATCH and the timer (on_journal).
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
    persist_commit_reports(r);
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
    if (!persist_report(c)) {
        rec_arm(c, &c->again, on_report_again, 1000);
        return;
    }
    /* Queued: persist_commit_reports goes on; or nothing to write. */
    if (c->report_due)
        return;
    if (c->forget_due)
        c->r->ps.cb->forget(c);
    else
        persist_rec(c);
}

void
persist_report_later(struct rec *c)
{
    c->report_due = true;
    rec_arm(c, &c->again, on_report_again, 1000);
}
