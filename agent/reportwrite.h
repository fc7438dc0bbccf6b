/*
 * reportwrite — the reaper's reports, from made to durable.
 *
 * A report is made from a record when the lifecycle says so (ACT_REPORT),
 * its id from the exit's time: a restart makes the same one again, which
 * the store takes once (counted as a duplicate). An exit an earlier run
 * reported under another id (a die replayed after a crash, a loaded
 * record that run reported removed) is not reported again.
 *
 * Each write is reports.jsonl first (one write and one fdatasync for all
 * its reports), then one transaction of the store, which carries
 * reports.jsonl's checkpoint and deletes the records the reports end;
 * each report stored is then counted and handed to the reaper's report
 * callback (delivery). A loop turn's first reports are written at once,
 * each alone; the rest of a burst wait in the turn's queue and are
 * written together (REPORT_BATCH at a time, or at the turn's end), and
 * the records waiting for them are released at the turn's end.
 *
 * Owns the turn's queue (struct report_queue, r->oq); reports.jsonl's
 * use by the reaper (r->rl, borrowed from its opener): its checkpoint in
 * the store, its rotation past reports_log.max_bytes, and its replay at a
 * start for what a power loss took from the store; and the reports the
 * store cannot take yet (a full disk), kept in memory (the reports' part
 * of struct persist, persist.h), retried by the group commit, said at
 * exit.
 *
 * Part of the durable layer (persist.h includes this header for the
 * driver): persist.c starts and stops it and gives the group commit its
 * retry; the driver makes reports (reportwrite_report) and ends a turn's
 * batch (reportwrite_commit_turn). Of the layer it calls only the group
 * commit (groupcommit.h), below it. A record whose report is written
 * goes back up through the `released` callback given at reportwrite_init.
 * Without a store (r->store NULL, as in unit tests) reports are still
 * made and handed on.
 */
#ifndef REAPD_REPORTWRITE_H
#define REAPD_REPORTWRITE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/time.h>

struct event;
struct reaper;
struct rec;
struct queued;
struct report_line;
struct store_new_report;

/* The reports made this loop turn, waiting for its end. */
struct report_queue {
    struct queued *v;
    size_t n, cap;
    size_t nwritten; /* v[0..nwritten) are written, waiting for release */
    struct timeval turn_tv; /* the turn of the last report made */
    unsigned in_turn;       /* reports made in it */
    struct event *ev;       /* a turn's end, for what it queued */
    /* c's report is written (or kept in memory for a full disk): the
     * record held for it goes on (reportwrite_init). */
    void (*released)(struct rec *c);
};

/* 0, or -1 when out of memory (reportwrite_cleanup frees what was made).
 * `released` is called for each record whose report is written. */
int reportwrite_init(struct reaper *r, void (*released)(struct rec *c));
/* At the store's start: what reports.jsonl (r->rl, if any) holds past
 * its checkpoint and the store lacks is stored again. -1 (logged) when
 * reapd must not start. */
int reportwrite_start(struct reaper *r);
/* A last commit of the reports queued; frees what init made. */
void reportwrite_cleanup(struct reaper *r);
/* Says the reports still unsaved (they are in reports.jsonl, made again
 * at the next start, or their record stays) and frees them: at exit. */
void reportwrite_drop_unsaved(struct reaper *r);
/* The group commit's retry: the reports waiting in memory are stored,
 * oldest first. false: the store still refuses (tried again in a
 * second). */
bool reportwrite_retry(struct reaper *r);

/* Makes c's report (nothing when its policy does not report) and queues
 * it for the end of this loop turn: c->report_due until it is written
 * (or kept in memory for a full disk), and c is forgotten only after
 * (c->forget_due). false only when it could not be made for want of
 * memory, and then nothing of it was queued: make it again
 * (reportwrite_report_later). */
bool reportwrite_report(struct rec *c);
/* Makes it again in a second; c is forgotten only after it
 * (c->forget_due). */
void reportwrite_report_later(struct rec *c);
/* Writes the reports queued (reports.jsonl, then the store), counts them,
 * hands them on, and releases the records waiting for that. Runs at the
 * end of each loop turn that made one; now, for a caller that cannot
 * wait (stopping). */
void reportwrite_commit_turn(struct reaper *r);

#endif
