/*
 * groupcommit — when the durable layer's writes reach the store; see
 * groupcommit.h.
 *
 * Pending changes go in one transaction per window (GROUP_COMMIT_MS, or
 * LAZY_COMMIT_MS for what a restart learns again), a slice at a time
 * within a loop turn's budget. The WAL's copy runs on the bio thread, on
 * a connection of the store's own: commits go on meanwhile.
 */
#include "groupcommit.h"

#include "bio.h"
#include "log.h"
#include "loop.h"
#include "reaper_int.h"
#include "store.h"

/*
 * Group commit: the records (and checkpoints) changed in this window go
 * in one transaction; each engine answer is a loop turn of its own, and a
 * flush per turn would be a transaction per step. Nothing outside reapd
 * learns of a step before it is on disk: a DELETE flushes first, a
 * report is stored in its own transaction with whatever waits. A kill -9
 * inside the window loses only what the engine's replay gives again; what
 * nobody replays is written at once (persist_flush_now: containerd's
 * TaskExit).
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
 * The WAL is copied into the database once this many of its pages are
 * not yet copied, on agent/bio.c's thread (store_on_wal), not inside
 * whichever commit crossed SQLite's own bound: a copy is its distinct
 * pages and two syncs, and the WAL starts over after each one that
 * catches up.
 */
#define CHECKPOINT_PAGES 256
/* A WAL this long has had commits all through its copies, none of which
 * could catch up: the loop copies the rest itself and starts it over
 * (store_wal_restart), or it would grow as long as the load lasts. */
#define WAL_MAX_PAGES (16 * CHECKPOINT_PAGES)

/* Writes of pending records per loop turn, and past how many waiting
 * they go on regardless (flush_budget). */
#define FLUSH_TURN_NS 2000000u
#define FLUSH_BACKLOG 4096

static void on_flush(evutil_socket_t fd, short what, void *arg);
static void on_store_retry(evutil_socket_t fd, short what, void *arg);
static void on_checkpoint(evutil_socket_t fd, short what, void *arg);
static void on_wal_full(void *arg);
static void flush_within(struct reaper *r, uint64_t ms);

int
groupcommit_init(struct reaper *r, const struct groupcommit_hooks *h)
{
    struct persist *ps = &r->ps;
    struct event_base *base = loop_base(r->l);

    ps->hooks = h;
    ps->flush_ev = evtimer_new(base, on_flush, r);
    ps->retry = evtimer_new(base, on_store_retry, r);
    ps->ckpt_ev = evtimer_new(base, on_checkpoint, r);
    /* Without the thread (none to be had), the copy runs on the loop. */
    ps->bio = bio_new(base);
    if (ps->bio == NULL)
        log_warn(NULL, "state: no thread for checkpoints; they run on the "
                       "loop");
    return ps->flush_ev != NULL && ps->retry != NULL && ps->ckpt_ev != NULL
               ? 0
               : -1;
}

void
groupcommit_start(struct reaper *r)
{
    store_on_wal(r->store, CHECKPOINT_PAGES, on_wal_full, r);
}

void
groupcommit_stop(struct reaper *r)
{
    /* A checkpoint in flight ends first: the store is the loop's again. */
    bio_free(r->ps.bio);
    r->ps.bio = NULL;
}

void
groupcommit_cleanup(struct reaper *r)
{
    struct persist *ps = &r->ps;

    if (r->store != NULL)
        groupcommit_put_events(r);
    if (r->store != NULL && store_flush(r->store) < 0)
        log_error(NULL, "state: last flush failed: %s",
                  store_errmsg(r->store));
    if (ps->flush_ev != NULL)
        event_free(ps->flush_ev);
    if (ps->retry != NULL)
        event_free(ps->retry);
    if (ps->ckpt_ev != NULL)
        event_free(ps->ckpt_ev);
    if (r->store != NULL)
        store_on_wal(r->store, 0, NULL, NULL);
    ps->flush_ev = ps->retry = ps->ckpt_ev = NULL;
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
 * to put (groupcommit_put_events). */
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
void
groupcommit_settled(struct reaper *r)
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
void
groupcommit_put_events(struct reaper *r)
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
 * its turn first. A failure is retried (groupcommit_retry_later).
 */
int
groupcommit_slice(struct reaper *r, const char *id)
{
    uint64_t t0 = loop_now_ns();
    int rc;

    turn_roll(r);
    groupcommit_put_events(r);
    rc = store_flush_some(r->store, id, FLUSH_SLICE_ROWS);
    r->ps.turn_flush_ns += loop_now_ns() - t0;
    persist_result(r, rc, "saving container records");
    if (rc < 0)
        groupcommit_retry_later(r);
    else if (store_pending(r->store) > 0 && id != NULL)
        schedule_flush(r, 0);
    else
        groupcommit_settled(r);
    return rc;
}

int
groupcommit_ids(struct reaper *r, const char *const *ids, size_t n)
{
    uint64_t t0 = loop_now_ns();
    int rc;

    turn_roll(r);
    groupcommit_put_events(r);
    rc = store_flush_ids(r->store, ids, n, FLUSH_SLICE_ROWS);
    r->ps.turn_flush_ns += loop_now_ns() - t0;
    persist_result(r, rc, "saving container records");
    if (rc < 0)
        groupcommit_retry_later(r);
    else if (store_pending(r->store) > 0)
        schedule_flush(r, 0);
    else
        groupcommit_settled(r);
    return rc;
}

static void
flush_within(struct reaper *r, uint64_t ms)
{
    if (r->store == NULL)
        return;
    /* A loop turn that changes thousands of records (a relist at a
     * start) writes them a slice at a time: their copies, held until the
     * flush, would otherwise interleave with the records made meanwhile
     * and leave the heap fragmented for good. */
    if (store_pending(r->store) >= FLUSH_SLICE_ROWS) {
        if (!flush_budget(r) || groupcommit_slice(r, NULL) >= 0) {
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

void
groupcommit_retry_later(struct reaper *r)
{
    loop_timer_ms(r->ps.retry, 1000);
}

/* What waits in memory first (the retry hook: it asks again while it
 * still fails), then the changes pending. */
static void
on_store_retry(evutil_socket_t fd, short what, void *arg)
{
    struct reaper *r = arg;

    (void)fd;
    (void)what;
    if (!r->ps.hooks->retry(r))
        return;
    if (store_pending(r->store) > 0)
        persist_flush_soon(r);
}

void
persist_flush_rec(struct rec *c)
{
    if (c->r->store != NULL)
        groupcommit_slice(c->r, c->id);
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
    groupcommit_put_events(r);
    rc = store_flush(r->store);
    persist_result(r, rc, "saving container records");
    if (rc < 0)
        groupcommit_retry_later(r);
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
    if (rc < 0) {
        r->ps.ckpt_scheduled = true;
        loop_timer_ms(r->ps.ckpt_ev, 1000);
    }
}

/* On the bio thread, on the store's checkpoint connection: the loop goes
 * on with its own. */
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
    if (store_wal_frames(r->store) >= WAL_MAX_PAGES)
        checkpoint_result(r, store_wal_restart(r->store));
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

/* The group commit's timer. */
static void
on_flush(evutil_socket_t fd, short what, void *arg)
{
    struct reaper *r = arg;

    (void)fd;
    (void)what;
    r->ps.flush_scheduled = false;
    if (nothing_waits(r))
        r->ps.empty_flushes++;
    /* At least one slice (the group commit is due), more within the
     * turn's budget. */
    do {
        if (groupcommit_slice(r, NULL) < 0)
            return;
    } while (store_pending(r->store) > 0 && flush_budget(r));
    if (store_pending(r->store) > 0)
        schedule_flush(r, 0);
}
