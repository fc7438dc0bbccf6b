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
 * Reports: made from a record when the lifecycle says so (ACT_REPORT),
 * with an id from the exit's time (a restart makes the same one again);
 * one an earlier run made under another id is refused. The reports of a
 * loop turn are written together (one write and one fdatasync of
 * reports.jsonl, one transaction), counted, and handed to the reaper's
 * report callback (delivery). While the store's WAL copy runs, they are
 * journaled as ever (durable then); their transaction, count and
 * hand-over wait for the copy's end.
 *
 * Below the driver (reaper.c): it calls down; what goes back up (a held
 * DELETE may go, a record may be forgotten) goes through the callbacks
 * given at persist_init. `struct persist` is embedded in struct reaper
 * (reaper_int.h). Without a store (r->store NULL, as in unit tests)
 * records are not written; reports are still made and handed on.
 */
#ifndef REAPD_PERSIST_H
#define REAPD_PERSIST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/time.h>

struct event;
struct reaper;
struct rec;
struct unsaved;
struct queued;

/* What the durable layer tells the driver. */
struct persist_cbs {
    /* c's DELETE may go (`written`: its record is on disk), or waits (the
     * state cannot be written). */
    void (*delete_written)(struct rec *c, bool written);
    /* c's report is written (or kept in memory for a full disk), and c
     * waited for that to be forgotten (c->forget_due). */
    void (*forget)(struct rec *c);
};

/* The reports made this loop turn, waiting for its end. */
struct report_queue {
    struct queued *v;
    size_t n, cap;
    size_t nwritten;   /* v[0..nwritten) are written, waiting for release */
    size_t njournaled; /* v[0..njournaled) are in reports.jsonl at least */
    struct timeval turn_tv;   /* the turn of the last report made */
    unsigned in_turn;         /* reports made in it */
    struct event *ev;         /* a turn's end, for what it queued */
    struct event *jev;        /* journal_wait_ms, during the WAL's copy */
    unsigned journal_wait_ms; /* JOURNAL_WAIT_MS; tests make it longer */
};

/* DELETEs whose records one commit writes (persist_before_delete). */
#define PERSIST_DELETE_BATCH 8

struct persist {
    const struct persist_cbs *cb;
    struct event *flush_ev;
    bool flush_scheduled;
    uint64_t flush_at_ms; /* loop time the scheduled flush is due */
    bool failing;         /* the last write failed; said once */
    struct event *retry;
    struct event *prune_timer;
    struct event *ckpt_ev; /* the WAL's checkpoint, in a turn of its own */
    bool ckpt_scheduled;
    bool ckpt_failed;       /* the last copy failed; tried again in a second */
    struct bio *bio;        /* where the checkpoint runs (NULL: on the loop) */
    bool flush_deferred;    /* a group commit waits for the checkpoint */
    struct timeval turn_tv; /* the loop turn turn_flush_ns is of */
    uint64_t turn_flush_ns; /* spent writing records in it */
    uint64_t pruned;
    struct unsaved *unsaved, *unsaved_tail; /* reports not yet stored */
    size_t nunsaved;
    uint64_t errors;     /* failed writes */
    uint64_t duplicates; /* reports made again after a restart */
    /* The group commit's timer finding nothing to write: a wakeup for
     * nothing, which flush_settled exists to spare (a test counts it). */
    uint64_t empty_flushes;
    /* reports.jsonl: the checkpoint stored may be past its end (just
     * rotated, or found shorter at a start) until a synced commit says
     * otherwise; no line is appended meanwhile (persist.c). */
    bool journal_behind;
    /* The reports.jsonl checkpoint a report transaction last wrote (-1:
     * none since the last rotation). */
    int64_t journal_saved;
    uint64_t rotations;
    bool rotate_failing;      /* the last rotation failed; said once */
    uint64_t rotate_again_ms; /* loop time of the next try after one */
    /* DELETEs waiting for their records' commit (persist_before_delete):
     * of this loop turn, or of the WAL copy's time; and the turn of the
     * last sent at once. */
    struct rec **delq;
    size_t ndelq, delq_cap;
    struct event *delq_ev; /* active while ndelq > 0: the turn's end */
    struct timeval delete_tv;
    /* The events checkpoint the reaper last handed down, the one in the
     * store, and whether the next flush writes it. */
    int64_t events_ckpt, events_saved;
    bool events_due;
};

/* 0, or -1 when out of memory. `up` is static, borrowed. */
int persist_init(struct reaper *r, const struct persist_cbs *up);
/* The records waiting are as many as one commit takes and the store is
 * busy with a checkpoint: whoever makes more (a relist's slice) waits. */
bool persist_backlogged(const struct reaper *r);
/* The WAL's copy runs on the bio thread and holds the store's connection
 * till its end: a store call now would hold the loop as long (3-240 ms
 * in a burst). What can wait does: DELETEs (persist_before_delete) and
 * reports are written when the copy ends. */
bool persist_store_busy(const struct reaper *r);
/* A last commit of the reports queued, a last flush; reports still unsaved are
 * said (they are in reports.jsonl, made again at the next start); frees what
 * init made. */
void persist_cleanup(struct reaper *r);
/* At reaper_start: reports.jsonl replayed into the store, retention
 * started. -1 (logged) when reapd must not start. */
int persist_start(struct reaper *r);

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

/* After every step of a managed record: writes what a restart must not
 * forget (see persist.c). */
void persist_rec(struct rec *c);
/*
 * c's DELETE is due: its record, saying it is being removed, must be on
 * disk first. The loop turn's first DELETE writes it (with a slice of the
 * other pending changes) at once: PERSIST_NOW, send it. The next ones of
 * the same turn share one commit, when PERSIST_DELETE_BATCH wait or at
 * the turn's end: PERSIST_QUEUED, and reaper_delete_written says when.
 * While the WAL's copy runs (persist_store_busy), every one is queued, and
 * written when it ends. PERSIST_HELD: the state cannot be written (the
 * DELETE waits).
 */
enum persist_delete { PERSIST_NOW, PERSIST_QUEUED, PERSIST_HELD };
enum persist_delete persist_before_delete(struct rec *c);
/* Drops c's stored record (c is being forgotten). */
void persist_forget(struct rec *c);

/* Stores one report already in reports.jsonl: 0, or -1 (not stored). A
 * report stored before (a restart) counts as stored. The strings are
 * borrowed. */
int persist_store_report(struct reaper *r, const char *id, const char *cid,
                         const char *json, size_t len);
/* Keeps a copy of a report the store could not take, retried until it
 * does; said when even that fails. `only_copy`: the report is not in
 * reports.jsonl either (its append failed too); the container's stored
 * record then stays until the store takes the report (the caller marks
 * the record: c->report_only_in_memory). */
void persist_keep_unsaved(struct reaper *r, const char *id, const char *cid,
                          const char *json, size_t len, bool only_copy);
/* Appends `n` reports' lines to reports.jsonl (r->rl, not NULL) in one
 * write and one sync (report_log_append_many: at most
 * REPORT_LOG_LINES_MAX): 0, or -1 with errno. EAGAIN: the journal's
 * checkpoint could not be reset after a rotation yet (the state's disk
 * full), and lines appended now would lie before it, never replayed; the
 * caller then stores the reports as ones in no journal. */
struct report_line;
int persist_journal_append_many(struct reaper *r, const struct report_line *v,
                                size_t n);
/* Whether persist_journal_append_many can append without the store (its
 * checkpoint is not behind a rotation): what a report made while the
 * WAL's copy holds the store needs. */
bool persist_journal_ready(const struct reaper *r);
/* persist_store_report for `n` reports in one transaction
 * (store_add_reports: at most STORE_REPORTS_MAX): 0 when committed, and
 * then v[i].result is STORE_OK for each one stored now or before (a
 * duplicate), an error for one refused; -1: none stored. */
struct store_new_report;
int persist_store_reports(struct reaper *r, struct store_new_report *v,
                          size_t n);
/* Every report in reports.jsonl is in the store: the journal checkpoint
 * moves (batched with the next flush), and a file past
 * reports_log.max_bytes is rotated. Nothing, while one waits in memory
 * (a full disk) or in the turn's queue, journaled and not stored. */
void persist_journal_stored(struct reaper *r);
/* Visits the reports waiting in memory for the store, oldest first, until
 * `cb` returns true; returns that. */
typedef bool (*persist_unsaved_cb)(const char *report_id,
                                   const char *container_id, int64_t made_ms,
                                   const char *json, size_t len, void *arg);
bool persist_find_unsaved(const struct reaper *r, persist_unsaved_cb cb,
                          void *arg);

/* Makes c's report (nothing when its policy does not report) and queues
 * it for the end of this loop turn: c->report_due until it is written
 * (or kept in memory for a full disk), and c is forgotten only after
 * (c->forget_due). false only when it could not be made for want of
 * memory, and then nothing of it was queued: make it again
 * (persist_report_later). */
bool persist_report(struct rec *c);
/* Makes it again in a second; c is forgotten only after it
 * (c->forget_due). */
void persist_report_later(struct rec *c);
/* Writes the reports queued (reports.jsonl, then the store), counts them,
 * hands them on, and forgets the records waiting for that. Runs at the
 * end of each loop turn that made one; now, for a caller that cannot
 * wait (stopping). */
void persist_commit_reports(struct reaper *r);

#endif
