/*
 * persist — the reaper's durable layer: what a restart, a kill -9 or a
 * power loss must not take.
 *
 * Container records (one per managed container past a run or an exit),
 * the checkpoints, and reports: reports.jsonl first, then the store
 * (store.h). Writes are batched into one flush every few milliseconds
 * (group commit; a DELETE or a report flushes first); a write
 * that fails (disk full) is said once, retried, and nothing already
 * accepted is lost: reports the store cannot take wait in memory, and a
 * DELETE waits until the container's record is on disk.
 *
 * Three modules, each called only by those above it:
 *  - persist.c (this header's own functions): the layer's init, start
 *    and cleanup; container records (what a step must write, and when
 *    it may wait); the DELETE barrier (a DELETE is sent only once its
 *    record is on disk; the DELETEs of a turn share a commit); the
 *    retention of delivered reports;
 *  - reportwrite.h: reports, from made to durable (made from a record,
 *    once per exit; the turn's batch; reports.jsonl, its checkpoint,
 *    rotation and replay; the reports kept in memory);
 *  - groupcommit.h: when writes reach the store (the group commit, the
 *    WAL's copy on the bio thread, failed writes said and retried).
 * This header declares the whole layer's interface to the driver.
 *
 * Below the driver (reaper.c): it calls down; what goes back up (a held
 * DELETE may go, a record may be forgotten) goes through the callbacks
 * given at persist_init. `struct persist` and `struct report_queue` are
 * embedded in struct reaper (reaper_int.h); the group commit is an
 * object of its own (struct groupcommit, r->ps.gc), which knows nothing
 * of struct reaper. Without a store (r->store NULL, as in unit tests)
 * records are not written; reports are still made and handed on.
 */
#ifndef REAPD_PERSIST_H
#define REAPD_PERSIST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/time.h>

#include "groupcommit.h"
#include "reportwrite.h"

struct event;
struct reaper;
struct rec;
struct unsaved;

/* What the durable layer tells the driver. */
struct persist_cbs {
    /* c's DELETE may go (`written`: its record is on disk), or waits (the
     * state cannot be written). */
    void (*delete_written)(struct rec *c, bool written);
    /* c's report is written (or kept in memory for a full disk), and c
     * waited for that to be forgotten (c->forget_due). */
    void (*forget)(struct rec *c);
};

/* DELETEs whose records one commit writes (persist_before_delete). */
#define PERSIST_DELETE_BATCH 8

/* The durable layer's state, one part per module. */
struct persist {
    const struct persist_cbs *cb;

    /* The group commit and the WAL's copy (groupcommit.c): made by
     * persist_init, freed by persist_cleanup. */
    struct groupcommit *gc;

    /* Reports (reportwrite.c). */
    struct unsaved *unsaved, *unsaved_tail; /* reports not yet stored */
    size_t nunsaved;
    uint64_t duplicates; /* reports made again after a restart */
    /* reports.jsonl: the checkpoint stored may be past its end (just
     * rotated, or found shorter at a start) until a synced commit says
     * otherwise; no line is appended meanwhile. */
    bool journal_behind;
    /* The reports.jsonl checkpoint a report transaction last wrote (-1:
     * none since the last rotation). */
    int64_t journal_saved;
    uint64_t rotations;
    bool rotate_failing;      /* the last rotation failed; said once */
    uint64_t rotate_again_ms; /* loop time of the next try after one */

    /* Records, DELETEs and retention (persist.c). */
    struct event *prune_timer;
    uint64_t pruned;
    /* DELETEs waiting for their records' commit (persist_before_delete):
     * of this loop turn; and the turn of the last sent at once. */
    struct rec **delq;
    size_t ndelq, delq_cap;
    struct event *delq_ev; /* active while ndelq > 0: the turn's end */
    struct timeval delete_tv;
};

/* 0, or -1 when out of memory. `up` is static, borrowed. */
int persist_init(struct reaper *r, const struct persist_cbs *up);
/* A last commit of the reports queued, a last flush; reports still unsaved are
 * said (they are in reports.jsonl, made again at the next start); frees what
 * init made. */
void persist_cleanup(struct reaper *r);
/* At reaper_start: reports.jsonl replayed into the store, retention
 * started. -1 (logged) when reapd must not start. */
int persist_start(struct reaper *r);

/* After every step of a managed record: writes what a restart must not
 * forget (see persist.c). */
void persist_rec(struct rec *c);
/*
 * c's DELETE is due: its record, saying it is being removed, must be on
 * disk first. The loop turn's first DELETE writes it (with a slice of the
 * other pending changes) at once: PERSIST_NOW, send it. The next ones of
 * the same turn share one commit, when PERSIST_DELETE_BATCH wait or at
 * the turn's end: PERSIST_QUEUED, and reaper_delete_written says when.
 * PERSIST_HELD: the state cannot be written (the
 * DELETE waits).
 */
enum persist_delete { PERSIST_NOW, PERSIST_QUEUED, PERSIST_HELD };
enum persist_delete persist_before_delete(struct rec *c);
/* Drops c's stored record (c is being forgotten). */
void persist_forget(struct rec *c);
/* The store to write to (NULL: none); the records rec_write marks are
 * read from the reaper's table when their commit comes. */
void persist_set_store(struct reaper *r, struct store *st);
/* The records are about to go (reaper_free): the marked ones are made
 * into JSON now, for the last flush. */
void persist_records_fill(struct reaper *r);

#endif
