/*
 * taskwatch — the reaper's containerd channel: containerd's own events (the
 * true exit status, task deletions), the task list that reconciles them
 * after every subscription, and the orphan audit.
 *
 * containerd does not replay events: a task list after each
 * (re)subscription, and after any exit or removal within
 * containerd.audit_interval_ms, tells which tasks are gone. Tasks whose
 * engine container does not exist are leaks (the engine gave up on their
 * deletion, or reapd was down): confirmed by two lists in a row, and
 * reaped only when stopped and containerd.reap_orphans says so. An idle
 * node is never woken to audit.
 *
 * Part of the reaper (reaper_int.h): `struct taskwatch` is embedded in struct
 * reaper; used only when the channel is on (r->ctrd set). A source: what
 * it learns goes up to the driver (reaper.c) through the callbacks given
 * at taskwatch_start, never by calling it.
 */
#ifndef REAPD_TASKWATCH_H
#define REAPD_TASKWATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lifecycle.h"
#include "reaper.h"

struct event;
struct reaper;
struct rec;
struct leak;
struct ctrd_req;

/* What the channel tells the driver. */
struct taskwatch_cbs {
    /* An observation of tracked record c: a TaskExit (code in o), a
     * task's deletion (its event, or a task list without it), containerd
     * lost. c may be freed by it. */
    void (*observe)(struct rec *c, const struct lc_obs *o);
    /* A containerd call sent at `t0` (loop_now_ms) got its answer. */
    void (*call_done)(struct reaper *r, enum reaper_call call, uint64_t t0);
};

struct taskwatch {
    const struct taskwatch_cbs *cb;
    struct ctrd_req *task_list_req;
    uint64_t task_list_t0;
    struct event *audit_timer;
    /* An exit or removal was seen since the last task list was sent: the
     * next periodic audit has something to find. Without one (and
     * without known leaks) an idle node is never woken to audit. */
    bool audit_due;
    struct leak *leaks; /* tasks without an engine container */
    size_t nleaks;
    uint32_t list_gen;     /* task lists answered: rec.listed_tasks's clock */
    uint64_t tasks_reaped; /* leaked by the engine, after removal */
    uint64_t orphans_reaped; /* orphans the audit listed, reaped */
    /* Task lists finished (answered or failed), for reaper_audit_now:
     * the last one's outcome, and whether one more was asked for while
     * one was in flight (its answer may predate the ask). */
    uint64_t lists_done;
    bool list_again;
    /* A list was answered before the engine's first relist: the records
     * that relist made were never held against one. */
    bool list_early;
    bool last_ok;
    size_t last_tasks;
    char last_error[256];
};

/* Subscribes to containerd's events, telling `up` (static, borrowed)
 * what they say; 0, or -1 (out of memory, or the watch could not start). */
int taskwatch_start(struct reaper *r, const struct taskwatch_cbs *up);
/* Cancels the list in flight, drops the leaks, frees the timer. */
void taskwatch_cleanup(struct reaper *r);
/* Sends a task list unless one is in flight (one at a time for the
 * node). */
void taskwatch_list(struct reaper *r);
/* An exit or removal: a task may have been left behind; an audit within
 * the interval. No-op without the channel. */
void taskwatch_activity(struct reaper *r);
/* The engine's first relist is in: one more list, if one came before it
 * (a container whose task containerd lost before reapd started is found
 * only so). No-op without the channel. */
void taskwatch_relisted(struct reaper *r);

#endif
