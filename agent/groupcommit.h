/*
 * groupcommit — when the durable layer's writes reach the store.
 *
 * Changes made in the store (container records, deletions of them, the
 * events checkpoint) are committed together: one transaction per window
 * (the group commit), written a slice at a time within a loop turn's
 * budget, at once for a DELETE or for a fact nobody will tell reapd
 * again. A write that fails is counted, said once (groupcommit_result) and
 * retried a second later. The WAL is copied into the database on the bio
 * thread (agent/bio.c), on the store's connection for it, once it grows
 * past a bound; commits go on meanwhile.
 *
 * The lowest part of the durable layer (persist.h declares the layer to
 * the driver): persist.c makes it and, with reportwrite.c and the
 * driver, calls down into it; it knows nothing of records or reports,
 * only container ids, and what it must tell the layers above (a retry is
 * due) goes through the hooks given at groupcommit_new. Owns the flush,
 * retry and checkpoint timers and the bio thread; borrows the loop and
 * the store. Without a store (NULL) nothing is written.
 */
#ifndef REAPD_GROUPCOMMIT_H
#define REAPD_GROUPCOMMIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct groupcommit;
struct loop;
struct store;

/* The events checkpoint's key in the store (docker.events.time_nano). */
#define GROUPCOMMIT_EVENTS_KEY "docker.events.time_nano"

/* What the group commit tells the layers above it; `arg` is the one given
 * to groupcommit_new. */
struct groupcommit_hooks {
    /* A second after groupcommit_retry_later: what waits in memory for
     * the store is tried again. false: it still fails (and asked for
     * another retry); true: the pending changes are flushed next. */
    bool (*retry)(void *arg);
};

/* What others read of it (the metrics). */
struct groupcommit_stats {
    uint64_t errors; /* failed writes */
    /* The group commit's timer finding nothing to write. */
    uint64_t empty_flushes;
    /* WALs the loop copied the rest of and started over itself: writes
     * that cannot wait kept every copy behind. */
    uint64_t loop_copies;
};

/* NULL when out of memory. `l` and `st` (may be NULL: nothing written)
 * are borrowed and must outlive it; `h` is static, borrowed; `arg` is
 * handed to the hooks. */
struct groupcommit *groupcommit_new(struct loop *l, struct store *st,
                                    const struct groupcommit_hooks *h,
                                    void *arg);
/* The store to write to, given after groupcommit_new (before
 * groupcommit_start); borrowed. */
void groupcommit_set_store(struct groupcommit *gc, struct store *st);
/* At the store's start: the WAL is copied once it holds enough pages. */
void groupcommit_start(struct groupcommit *gc);
/* A copy in flight ends, and the next ones run on the loop (at a stop,
 * before the last commits: the store closes only after). NULL: nothing. */
void groupcommit_stop(struct groupcommit *gc);
/* The events checkpoint and a last flush, then frees it (stopping it
 * first if it was not). NULL: nothing. */
void groupcommit_free(struct groupcommit *gc);
void groupcommit_stats(const struct groupcommit *gc,
                       struct groupcommit_stats *out);

/* The WAL is at its bound and a copy runs: the writes that can wait do,
 * till its end, so that it catches up and the WAL starts over without the
 * loop copying it. A source that makes records by the thousand (a
 * relist) waits meanwhile too. */
bool groupcommit_holding(const struct groupcommit *gc);
/* For tests: the WAL's pages before a copy (256), at which the loop
 * copies it (4,096), and the records waiting past which they are written
 * regardless of the turn's budget (4,096). */
void groupcommit_set_bounds(struct groupcommit *gc, int ckpt_pages,
                            int wal_max_pages, size_t backlog);

/* The events checkpoint moved to `nano` (GROUPCOMMIT_EVENTS_KEY): it
 * rides with the next flush, lazily. */
void groupcommit_events_checkpoint(struct groupcommit *gc, int64_t nano);
/* A flush within a few milliseconds, with whatever else changes
 * meanwhile (at once when many rows wait). */
void groupcommit_soon(struct groupcommit *gc);
/* A flush within a second or so, for a change a restart redoes by
 * asking the engine again: it rides with the next flush that something
 * else asks for sooner, most often a report's own transaction. */
void groupcommit_lazy(struct groupcommit *gc);
/* Writes the record of container `id` now, with a slice of the other
 * pending changes: for a fact nobody will tell reapd again (containerd's
 * TaskExit: containerd does not replay events). */
void groupcommit_rec(struct groupcommit *gc, const char *id);
/* A flush now, for a fact nobody will tell reapd again (the engine's
 * outages). */
void groupcommit_now(struct groupcommit *gc);
/* Counts and says (once) a failed write (rc < 0), and that writes work
 * again. `what` is static text for the log. */
void groupcommit_result(struct groupcommit *gc, int rc, const char *what);

/* Writes the record of container `id` (NULL: none in particular) with
 * other pending changes, a slice in all, now: 0, or the store's error
 * (said, and retried). */
int groupcommit_slice(struct groupcommit *gc, const char *id);
/* The same for the records of the `n` containers `ids` (at most
 * STORE_REPORTS_MAX) in one commit: the DELETEs of a turn. */
int groupcommit_ids(struct groupcommit *gc, const char *const *ids, size_t n);
/* The events checkpoint, if it moved, into the transaction being
 * written: for a commit of another layer's (the reports'), with which it
 * rides as with any flush. */
void groupcommit_put_events(struct groupcommit *gc);
/* A commit left nothing waiting: the group commit's timer, still armed
 * for what it carried, is stopped rather than wake the loop for nothing. */
void groupcommit_settled(struct groupcommit *gc);
/* The retry hook runs in a second (a write failed, or something waits in
 * memory for the store). */
void groupcommit_retry_later(struct groupcommit *gc);

#endif
