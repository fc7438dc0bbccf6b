/*
 * outcome — the report of one container's exit and cleanup, made from its
 * record when the lifecycle says so (ACT_REPORT).
 *
 * It settles the report's id (from the exit's time, so a restart makes
 * the same one again), refuses one an earlier run already made under
 * another id, writes it to reports.jsonl and then the store (persist.h),
 * counts it in the metrics and hands it to the reaper's report callback
 * (delivery). Part of the reaper (reaper_int.h).
 *
 * The reports made in one loop turn are written together at its end
 * (outcome_commit): one write and one fdatasync of reports.jsonl, one
 * transaction. A burst of exits settles tens of them per turn, each of
 * which cost a sync of its own (0.5-1 ms here) before. While the store's
 * WAL copy runs (persist_store_busy), the loop must not wait for the
 * connection the copy holds: the reports are appended to reports.jsonl
 * at the turn's end as ever (durable then), and their transaction, count
 * and hand-over wait for the copy's end.
 */
#ifndef REAPD_OUTCOME_H
#define REAPD_OUTCOME_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/time.h>

struct event;
struct reaper;
struct rec;
struct queued;

/* The reports made this loop turn, waiting for its end. */
struct outcome_queue {
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

/* 0, or -1 (out of memory). */
int outcome_init(struct reaper *r);
/* Commits what waits (outcome_commit), then frees the queue. */
void outcome_cleanup(struct reaper *r);

/* Makes c's report (nothing when its policy does not report) and queues
 * it for the end of this loop turn: c->report_due until it is written
 * (or kept in memory for a full disk), and c is forgotten only after
 * (c->forget_due). false only when it could not be made for want of
 * memory, and then nothing of it was queued: make it again
 * (outcome_report_later). */
bool outcome_report(struct rec *c);
/* Writes the reports queued (reports.jsonl, then the store), counts them,
 * hands them on, and forgets the records waiting for that. Runs at the
 * end of each loop turn that made one; now, for a caller that cannot
 * wait (stopping). */
void outcome_commit(struct reaper *r);
/* Whether reports wait in the queue that are in reports.jsonl and not
 * yet in the store (made during the WAL's copy): the journal's checkpoint
 * must not move past them (persist_journal_stored), or a crash would
 * leave their lines unread. */
bool outcome_unstored(const struct reaper *r);
/* Makes it again in a second; c is forgotten only after it
 * (c->forget_due). */
void outcome_report_later(struct rec *c);

#endif
