/*
 * groupcommit — when the durable layer's writes reach the store.
 *
 * Changes made in the store (container records, deletions of them, the
 * events checkpoint) are committed together: one transaction per window
 * (the group commit), written a slice at a time within a loop turn's
 * budget, at once for a DELETE or for a fact nobody will tell reapd
 * again. A write that fails is counted, said once (persist_result) and
 * retried a second later. The WAL is copied into the database on the bio
 * thread (agent/bio.c), on the store's connection for it, once it grows
 * past a bound; commits go on meanwhile.
 *
 * The lowest part of the durable layer (persist.h, which declares these
 * to the driver): persist.c and reportwrite.c call down into it; what it
 * must tell them (a retry is due) goes through the hooks
 * given at groupcommit_init. Its state is struct persist's group commit
 * part (persist.h), embedded in struct reaper. Owns the flush, retry and
 * copy timers and the bio thread. Without a store (r->store NULL) nothing
 * is written.
 */
#ifndef REAPD_GROUPCOMMIT_H
#define REAPD_GROUPCOMMIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct reaper;
struct rec;

/* What the group commit tells the layers above it. */
struct groupcommit_hooks {
    /* A second after groupcommit_retry_later: what waits in memory for
     * the store is tried again. false: it still fails (and asked for
     * another retry); true: the pending changes are flushed next. */
    bool (*retry)(struct reaper *r);
};

/* 0, or -1 when out of memory (groupcommit_cleanup frees what was made).
 * `h` is static, borrowed. */
int groupcommit_init(struct reaper *r, const struct groupcommit_hooks *h);
/* At the store's start: the WAL is copied once it holds enough pages. */
void groupcommit_start(struct reaper *r);
/* A copy in flight ends, and the next ones run on the loop (at a stop,
 * before the last commits: the store closes only after). */
void groupcommit_stop(struct reaper *r);
/* The events checkpoint and a last flush; frees what init made. */
void groupcommit_cleanup(struct reaper *r);

/* The events checkpoint moved to `nano` (docker.events.time_nano): it
 * rides with the next flush, lazily. */
void persist_events_checkpoint(struct reaper *r, int64_t nano);
/* A flush within a few milliseconds, with whatever else changes
 * meanwhile (at once when many rows wait). */
void persist_flush_soon(struct reaper *r);
/* A flush within a second or so, for a change a restart redoes by
 * asking the engine again: it rides with the next flush that something
 * else asks for sooner, most often a report's own transaction. */
void persist_flush_lazy(struct reaper *r);
/* Writes c's record now, with a slice of the other pending changes: for
 * a fact nobody will tell reapd again (containerd's TaskExit: containerd
 * does not replay events). */
void persist_flush_rec(struct rec *c);
/* A flush now, for a fact nobody will tell reapd again (containerd's
 * TaskExit: containerd does not replay events). */
void persist_flush_now(struct reaper *r);
/* Counts and says (once) a failed write (rc < 0), and that writes work
 * again. `what` is static text for the log. */
void persist_result(struct reaper *r, int rc, const char *what);

/* Writes the record of container `id` (NULL: none in particular) with
 * other pending changes, a slice in all, now: 0, or the store's error
 * (said, and retried). */
int groupcommit_slice(struct reaper *r, const char *id);
/* The same for the records of the `n` containers `ids` (at most
 * STORE_REPORTS_MAX) in one commit: the DELETEs of a turn. */
int groupcommit_ids(struct reaper *r, const char *const *ids, size_t n);
/* The events checkpoint, if it moved, into the transaction being
 * written: for a commit of another layer's (the reports'), with which it
 * rides as with any flush. */
void groupcommit_put_events(struct reaper *r);
/* A commit left nothing waiting: the group commit's timer, still armed
 * for what it carried, is stopped rather than wake the loop for nothing. */
void groupcommit_settled(struct reaper *r);
/* The retry hook runs in a second (a write failed, or something waits in
 * memory for the store). */
void groupcommit_retry_later(struct reaper *r);

#endif
