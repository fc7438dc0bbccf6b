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

#include <event2/event.h>
#include <stdlib.h>
#include <sys/time.h>

#include "bio.h"
#include "log.h"
#include "loop.h"
#include "store.h"

/*
 * Group commit: the records (and checkpoints) changed in this window go
 * in one transaction; each engine answer is a loop turn of its own, and a
 * flush per turn would be a transaction per step. Nothing outside reapd
 * learns of a step before it is on disk: a DELETE flushes first, a
 * report is stored in its own transaction with whatever waits. A kill -9
 * inside the window loses only what the engine's replay gives again; what
 * nobody replays is written at once (groupcommit_rec: containerd's
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
 * could catch up. The records that can wait then wait for a copy
 * (groupcommit_holding), which catches up, and the next commit starts the WAL
 * over. When writes that cannot wait (a DELETE's, a report's) kept even
 * that copy behind, the loop copies the rest itself and starts it over
 * (store_wal_restart), or the WAL would grow as long as the load lasts. */
#define WAL_MAX_PAGES (16 * CHECKPOINT_PAGES)

/* Writes of pending records per loop turn, and past how many waiting
 * they go on regardless (flush_budget). */
#define FLUSH_TURN_NS 2000000u
#define FLUSH_BACKLOG 4096

/* The rows a slice writes, and how many pending are written at once
 * rather than at the window's end (flush_within). */
#define FLUSH_SLICE_ROWS 32

struct groupcommit {
    struct loop *l;
    struct store *store; /* borrowed; NULL: nothing is written */
    const struct groupcommit_hooks *hooks;
    void *arg; /* the hooks' */
    struct event *flush_ev;
    bool flush_scheduled;
    uint64_t flush_at_ms; /* loop time the scheduled flush is due */
    bool failing;         /* the last write failed; said once */
    struct event *retry;
    struct event *ckpt_ev; /* the WAL's checkpoint, in a turn of its own */
    bool ckpt_scheduled;
    struct bio *bio; /* where the checkpoint runs (NULL: on the loop) */
    bool ckpt_held;  /* the copy under way began with the WAL at its bound */
    uint64_t loop_copies; /* WALs the loop copied and started over itself */
    /* CHECKPOINT_PAGES, WAL_MAX_PAGES and FLUSH_BACKLOG, unless a test
     * makes them small (groupcommit_set_bounds). */
    int ckpt_pages, wal_max_pages;
    size_t backlog;
    struct timeval turn_tv; /* the loop turn turn_flush_ns is of */
    uint64_t turn_flush_ns; /* spent writing records in it */
    uint64_t errors;        /* failed writes */
    /* The group commit's timer finding nothing to write: a wakeup for
     * nothing, which groupcommit_settled exists to spare (a test counts
     * it). */
    uint64_t empty_flushes;
    /* The events checkpoint last handed down, the one in the store, and
     * whether the next flush writes it. */
    int64_t events_ckpt, events_saved;
    bool events_due;
};

static void on_flush(evutil_socket_t fd, short what, void *arg);
static void on_store_retry(evutil_socket_t fd, short what, void *arg);
static void on_checkpoint(evutil_socket_t fd, short what, void *arg);
static void on_wal_full(void *arg);
static void flush_within(struct groupcommit *gc, uint64_t ms);

struct groupcommit *
groupcommit_new(struct loop *l, struct store *st,
                const struct groupcommit_hooks *h, void *arg)
{
    struct event_base *base = loop_base(l);
    struct groupcommit *gc = calloc(1, sizeof(*gc));

    if (gc == NULL)
        return NULL;
    gc->l = l;
    gc->hooks = h;
    gc->ckpt_pages = CHECKPOINT_PAGES;
    gc->wal_max_pages = WAL_MAX_PAGES;
    gc->backlog = FLUSH_BACKLOG;
    gc->arg = arg;
    gc->flush_ev = evtimer_new(base, on_flush, gc);
    gc->retry = evtimer_new(base, on_store_retry, gc);
    gc->ckpt_ev = evtimer_new(base, on_checkpoint, gc);
    if (gc->flush_ev == NULL || gc->retry == NULL || gc->ckpt_ev == NULL) {
        groupcommit_free(gc); /* no store yet: nothing written */
        return NULL;
    }
    gc->store = st;
    /* Without the thread (none to be had), the copy runs on the loop. */
    gc->bio = bio_new(base);
    if (gc->bio == NULL)
        log_warn(NULL, "state: no thread for checkpoints; they run on the "
                       "loop");
    return gc;
}

void
groupcommit_set_store(struct groupcommit *gc, struct store *st)
{
    gc->store = st;
}

void
groupcommit_start(struct groupcommit *gc)
{
    store_on_wal(gc->store, gc->ckpt_pages, on_wal_full, gc);
}

void
groupcommit_stop(struct groupcommit *gc)
{
    if (gc == NULL)
        return;
    /* A checkpoint in flight ends first: the store is the loop's again. */
    bio_free(gc->bio);
    gc->bio = NULL;
}

void
groupcommit_free(struct groupcommit *gc)
{
    if (gc == NULL)
        return;
    groupcommit_stop(gc);
    if (gc->store != NULL)
        groupcommit_put_events(gc);
    if (gc->store != NULL && store_flush(gc->store) < 0)
        log_error(NULL, "state: last flush failed: %s",
                  store_errmsg(gc->store));
    if (gc->flush_ev != NULL)
        event_free(gc->flush_ev);
    if (gc->retry != NULL)
        event_free(gc->retry);
    if (gc->ckpt_ev != NULL)
        event_free(gc->ckpt_ev);
    if (gc->store != NULL)
        store_on_wal(gc->store, 0, NULL, NULL);
    free(gc);
}

void
groupcommit_stats(const struct groupcommit *gc, struct groupcommit_stats *out)
{
    out->errors = gc->errors;
    out->empty_flushes = gc->empty_flushes;
    out->loop_copies = gc->loop_copies;
}

void
groupcommit_set_bounds(struct groupcommit *gc, int ckpt_pages,
                       int wal_max_pages, size_t backlog)
{
    gc->ckpt_pages = ckpt_pages;
    gc->wal_max_pages = wal_max_pages;
    gc->backlog = backlog;
}

/* The flush is due within `ms`: an earlier one already scheduled
 * stands, a later one is brought forward. */
static void
schedule_flush(struct groupcommit *gc, uint64_t ms)
{
    uint64_t due = loop_now_ms() + ms;

    if (gc->flush_scheduled && gc->flush_at_ms <= due)
        return;
    gc->flush_scheduled = true;
    gc->flush_at_ms = due;
    loop_timer_ms(gc->flush_ev, ms);
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
turn_roll(struct groupcommit *gc)
{
    if (loop_new_turn(gc->l, &gc->turn_tv))
        gc->turn_flush_ns = 0;
}

/*
 * A copy runs and the WAL is at its bound: the records that can wait
 * hold their commits till its end, so that it catches up. Not when so
 * many wait that the store would soon refuse changes.
 */
bool
groupcommit_holding(const struct groupcommit *gc)
{
    return gc->store != NULL && bio_busy(gc->bio) &&
           store_wal_frames(gc->store) >= gc->wal_max_pages &&
           store_pending(gc->store) <= STORE_PENDING_MAX / 2;
}

static bool
flush_budget(struct groupcommit *gc)
{
    if (groupcommit_holding(gc))
        return false;
    turn_roll(gc);
    return gc->turn_flush_ns < FLUSH_TURN_NS ||
           store_pending(gc->store) > gc->backlog;
}

/* Nothing waits to be written: no pending change, no events checkpoint
 * to put (groupcommit_put_events). */
static bool
nothing_waits(const struct groupcommit *gc)
{
    return store_pending(gc->store) == 0 && !gc->events_due;
}

/*
 * A commit that left nothing waiting (a DELETE's record, the reports of a
 * turn, each with what else waited): the group commit's timer, still
 * armed for what it carried, would wake the loop for an empty flush.
 */
void
groupcommit_settled(struct groupcommit *gc)
{
    if (gc->flush_scheduled && nothing_waits(gc)) {
        evtimer_del(gc->flush_ev);
        gc->flush_scheduled = false;
    }
}

void
groupcommit_events_checkpoint(struct groupcommit *gc, int64_t nano)
{
    if (gc->store == NULL || nano <= 0)
        return;
    gc->events_ckpt = nano;
    if (nano == gc->events_saved || gc->events_due)
        return;
    gc->events_due = true;
    flush_within(gc, LAZY_COMMIT_MS);
}

/* The events checkpoint into the transaction being written. */
void
groupcommit_put_events(struct groupcommit *gc)
{
    int64_t t = gc->events_ckpt;
    int rc;

    if (!gc->events_due)
        return;
    gc->events_due = false;
    if (t == gc->events_saved)
        return;
    rc = store_set_checkpoint(gc->store, GROUPCOMMIT_EVENTS_KEY, t);
    groupcommit_result(gc, rc, "saving the events checkpoint");
    /* Not taken (too much waits for a full disk): the next change asks
     * again. */
    if (rc >= 0)
        gc->events_saved = t;
}

/*
 * Writes the record of container `id` (NULL: none in particular) and
 * other pending changes, FLUSH_SLICE_ROWS in all; what is left goes a
 * slice at a time within each turn's budget (on_flush), so that a DELETE
 * after a burst of new containers does not write all of their records in
 * its turn first. A failure is retried (groupcommit_retry_later).
 */
int
groupcommit_slice(struct groupcommit *gc, const char *id)
{
    uint64_t t0 = loop_now_ns();
    int rc;

    turn_roll(gc);
    groupcommit_put_events(gc);
    rc = store_flush_some(gc->store, id, FLUSH_SLICE_ROWS);
    gc->turn_flush_ns += loop_now_ns() - t0;
    groupcommit_result(gc, rc, "saving container records");
    if (rc < 0)
        groupcommit_retry_later(gc);
    else if (store_pending(gc->store) > 0 && id != NULL)
        schedule_flush(gc, 0);
    else
        groupcommit_settled(gc);
    return rc;
}

int
groupcommit_ids(struct groupcommit *gc, const char *const *ids, size_t n)
{
    uint64_t t0 = loop_now_ns();
    int rc;

    turn_roll(gc);
    groupcommit_put_events(gc);
    rc = store_flush_ids(gc->store, ids, n, FLUSH_SLICE_ROWS);
    gc->turn_flush_ns += loop_now_ns() - t0;
    groupcommit_result(gc, rc, "saving container records");
    if (rc < 0)
        groupcommit_retry_later(gc);
    else if (store_pending(gc->store) > 0)
        schedule_flush(gc, 0);
    else
        groupcommit_settled(gc);
    return rc;
}

static void
flush_within(struct groupcommit *gc, uint64_t ms)
{
    if (gc->store == NULL)
        return;
    /* A loop turn that changes thousands of records (a relist at a
     * start) writes them a slice at a time: their copies, held until the
     * flush, would otherwise interleave with the records made meanwhile
     * and leave the heap fragmented for good. */
    if (store_pending(gc->store) >= FLUSH_SLICE_ROWS) {
        if (!flush_budget(gc) || groupcommit_slice(gc, NULL) >= 0) {
            /* A slice written, or none due this turn: the rest next. */
            if (store_pending(gc->store) > 0)
                schedule_flush(gc, 0);
            return;
        }
    }
    schedule_flush(gc, ms);
}

void
groupcommit_soon(struct groupcommit *gc)
{
    flush_within(gc, GROUP_COMMIT_MS);
}

void
groupcommit_lazy(struct groupcommit *gc)
{
    flush_within(gc, LAZY_COMMIT_MS);
}

/* Says it loudly once when writes start failing, and once when they work
 * again; a full disk must not also fill the log. */
void
groupcommit_result(struct groupcommit *gc, int rc, const char *what)
{
    if (rc >= 0) {
        if (gc->failing)
            log_info(NULL, "state: writes to %s work again",
                     store_path(gc->store));
        gc->failing = false;
        return;
    }
    gc->errors++;
    if (!gc->failing)
        log_error(NULL,
                  "state: %s failed: %s (%s); nothing already accepted is "
                  "lost, retrying",
                  what, store_strerror(rc), store_errmsg(gc->store));
    gc->failing = true;
}

void
groupcommit_retry_later(struct groupcommit *gc)
{
    loop_timer_ms(gc->retry, 1000);
}

/* What waits in memory first (the retry hook: it asks again while it
 * still fails), then the changes pending. */
static void
on_store_retry(evutil_socket_t fd, short what, void *arg)
{
    struct groupcommit *gc = arg;

    (void)fd;
    (void)what;
    if (!gc->hooks->retry(gc->arg))
        return;
    if (store_pending(gc->store) > 0)
        groupcommit_soon(gc);
}

void
groupcommit_rec(struct groupcommit *gc, const char *id)
{
    if (gc->store != NULL)
        groupcommit_slice(gc, id);
}

void
groupcommit_now(struct groupcommit *gc)
{
    int rc;

    if (gc->store == NULL)
        return;
    if (gc->flush_scheduled) {
        evtimer_del(gc->flush_ev);
        gc->flush_scheduled = false;
    }
    groupcommit_put_events(gc);
    rc = store_flush(gc->store);
    groupcommit_result(gc, rc, "saving container records");
    if (rc < 0)
        groupcommit_retry_later(gc);
}

/* From inside a commit (store_on_wal): only schedules. A timer, not
 * event_active, so that the sockets ready meanwhile are read first. */
static void
on_wal_full(void *arg)
{
    struct groupcommit *gc = arg;

    if (gc->ckpt_scheduled || gc->ckpt_ev == NULL)
        return;
    gc->ckpt_scheduled = true;
    loop_timer_ms(gc->ckpt_ev, 0);
}

static void
checkpoint_result(struct groupcommit *gc, int rc)
{
    groupcommit_result(gc, rc, "copying the WAL into the state database");
    /* Failed (a full disk): again in a second, and at the next commit. */
    if (rc < 0) {
        gc->ckpt_scheduled = true;
        loop_timer_ms(gc->ckpt_ev, 1000);
    }
}

/* On the bio thread, on the store's checkpoint connection: the loop goes
 * on with its own. */
static int
checkpoint_job(void *arg)
{
    struct groupcommit *gc = arg;

    return store_checkpoint_bg(gc->store);
}

static void
checkpoint_done(int rc, void *arg)
{
    struct groupcommit *gc = arg;

    checkpoint_result(gc, store_checkpoint_end(gc->store, rc));
    if (store_wal_frames(gc->store) >= gc->wal_max_pages) {
        /* Behind: a copy that held the records that can wait was kept
         * behind by those that cannot, so the loop copies the rest; one
         * that began before the bound is followed by one that holds. */
        if (store_wal_pages(gc->store) > 0 && gc->ckpt_held) {
            gc->loop_copies++;
            checkpoint_result(gc, store_wal_restart(gc->store));
        } else if (store_wal_pages(gc->store) > 0)
            on_wal_full(gc);
        /* Caught up: the held records' commit starts the WAL over. */
        if (!nothing_waits(gc))
            schedule_flush(gc, 0);
    }
    /* What was committed meanwhile may be past the bound already. */
    if (store_wal_pages(gc->store) >= gc->ckpt_pages)
        on_wal_full(gc);
}

static void
on_checkpoint(evutil_socket_t fd, short what, void *arg)
{
    struct groupcommit *gc = arg;

    (void)fd;
    (void)what;
    gc->ckpt_scheduled = false;
    if (gc->bio == NULL) {
        /* Nothing commits during a copy on the loop. */
        gc->ckpt_held = true;
        store_checkpoint_begin(gc->store);
        checkpoint_done(store_checkpoint_bg(gc->store), gc);
        return;
    }
    if (bio_busy(gc->bio))
        return; /* its end looks at the WAL again */
    store_checkpoint_begin(gc->store);
    gc->ckpt_held = store_wal_frames(gc->store) >= gc->wal_max_pages;
    bio_run(gc->bio, checkpoint_job, checkpoint_done, gc);
}

/* The group commit's timer. */
static void
on_flush(evutil_socket_t fd, short what, void *arg)
{
    struct groupcommit *gc = arg;

    (void)fd;
    (void)what;
    gc->flush_scheduled = false;
    if (groupcommit_holding(gc))
        return; /* the copy's end asks again */
    if (nothing_waits(gc))
        gc->empty_flushes++;
    /* At least one slice (the group commit is due), more within the
     * turn's budget. */
    do {
        if (groupcommit_slice(gc, NULL) < 0)
            return;
    } while (store_pending(gc->store) > 0 && flush_budget(gc));
    if (store_pending(gc->store) > 0)
        schedule_flush(gc, 0);
}
