/*
 * reaper_int — the reaper's private parts, shared by the files that make
 * it up: the driver (reaper.c), and below it the record table
 * (ctable.c), the removal slots (slots.c), the containerd channel
 * (taskwatch.c) and the durable layer (persist.c, reportwrite.c), which
 * call back up only through the callbacks the driver gives them. Nothing
 * else includes this header; the reaper's interface is reaper.h. The
 * group commit (groupcommit.h), below them all, is an object of its own
 * that struct persist points to (r->ps.gc).
 *
 * One owner, several files: `struct reaper` holds a sub-struct for each
 * part that has state of its own, each with its own init and cleanup.
 */
#ifndef REAPD_REAPER_INT_H
#define REAPD_REAPER_INT_H

#include <event2/event.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "taskwatch.h"
#include "bounds.h"
#include "ctable.h"
#include "lifecycle.h"
#include "outage.h"
#include "persist.h"
#include "slots.h"
#include "reaper.h"

struct policy_label;

#define MAX_PENDING 8
/* Bytes of reports.jsonl whose reports the store holds (see report.h). */
#define JOURNAL_KEY "reports.jsonl.end"
/* A relist logs this many "tracking" lines at info, the rest at debug
 * (each line is a write to stderr, 100,000 at a start with 100,000
 * containers), and says how many there were. */
#define RELIST_LOG_TRACKED 100
/* An event up to this long before the subscription still counts as live
 * (the engine stamps it; reapd reads the same clock a little later). */
#define LIVE_SLACK_NS 2000000000LL

enum rec_kind { R_DISCOVERING, R_IGNORED, R_MANAGED };

/* One container the reaper knows of. Owned by the table; freed only by
 * reaper_forget, after its calls and timers are cancelled. */
struct rec {
    char id[CTR_ID_SIZE];
    struct rec *hnext; /* the table's chain (ctable.c) */
    /* ctable's order of touch, least recent first (ctable_touch). */
    struct rec *tprev, *tnext;
    struct reaper *r;
    enum rec_kind kind;

    /* name, image and labels point into `meta`, one block (see
     * rec_set_meta): a tracked container costs one allocation for them, not
     * 2 + 2 per label. */
    void *meta;
    char *name;
    char *image;
    struct policy_label *labels;
    size_t nlabels;
    char *policy; /* name of the policy that matched, or "default" */
    bool force, volumes, report_on;
    /* The metadata is known (from an event, a list or the store), and
     * whether it is less than the engine holds (docs/limits.md). */
    bool meta_known, labels_cut, meta_cut;
    /* Decided on its create event's attributes, which lose labels named
     * name or image to the engine's own fields: the labels are taken
     * again from its first inspect. */
    bool labels_from_event;

    struct lc lc;
    char *started_at;
    char *finished_at;
    int64_t die_nano; /* time of the last die event, for the report id */

    struct docker_req *meta_req;
    struct docker_req *inspect_req;
    struct docker_req *delete_req;
    struct ctrd_req *task_req;     /* Tasks.Get */
    struct ctrd_req *task_del_req; /* Tasks.Delete */
    struct ctrd_req *ctr_del_req;  /* Containers.Delete */
    /* When each of those calls was sent (loop_now_ms), for metrics. */
    uint64_t meta_t0, inspect_t0, delete_t0, task_t0, task_del_t0, ctr_del_t0;
    unsigned meta_failures;
    struct event *step, *warn, *giveup;
    /* A report that could not be made (out of memory) is made again on
     * this timer; the record is forgotten only after it. */
    struct event *again;
    bool report_due, forget_due;
    bool report_queued; /* in the turn's queue (reportwrite_commit_turn) */
    bool delete_queued; /* its DELETE waits for its record's commit */
    /* Its report is in neither reports.jsonl nor the store (the disk
     * full): its stored record is not deleted when it is forgotten. */
    bool report_only_in_memory;

    bool slot_queued, slot_held;
    struct rec *qprev, *qnext;

    /* Relist generations (reaper.relist_gen): when created, and the last
     * relist that listed it. */
    uint32_t born_relist;
    uint32_t listed_relist;
    /* The last containerd task list that held its task (taskwatch.c). */
    uint32_t listed_tasks;
    bool persisted;         /* a record of it is in the store */
    bool persisted_running; /* ... and it says only "running" */
    bool persist_done;      /* written by this step already (a DELETE's) */
    /* Digest of the facts in its stored record (persist.c, facts_of):
     * a step that changes none of them is written lazily. */
    uint64_t facts;
    bool resume_pending;    /* loaded from the store, not yet resumed */
    bool loaded;            /* loaded from the store (an earlier run's) */
    int64_t exited_wall_ms; /* wall clock when its exit was seen */
    /* Observations held while discovering (NULL otherwise: most
     * records never need it). */
    struct lc_obs *pend;
    size_t npend;
    /* Discovering with events held in memory only: the events
     * checkpoint stays before the first of them (hold_nano), so that a
     * restart is sent them again. In r->holds, oldest first. */
    bool holding;
    int64_t hold_nano;
    struct rec *hold_prev, *hold_next;
};

struct reaper {
    struct loop *l;
    struct docker *d;
    const struct config *cfg;
    struct report_log *rl;
    uint32_t rnd;

    struct ctable tab; /* every record, by id */

    struct slots slots; /* removal slots, delete.max_in_flight */

    /* Relists: sent and taken in by relist.c; rl_taking and rl_managed
     * cap the "tracking" lines one relist logs at info. */
    struct relist *relist;
    bool rl_taking;
    size_t rl_managed;
    uint32_t rl_log_gen;
    /* Wall time (ns) of the last subscription: an event before it is a
     * replay (since=), after it live. */
    int64_t subscribed_ns;
    bool relisted; /* a relist completed since the last subscribe */
    /* The subscription follows an engine outage: what the next complete
     * relist finds exited, exited while dockerd was down. */
    bool outage_relist;
    struct outages outage; /* the engine's, for exits in them */
    /* The events checkpoint: the last event's time, and the records
     * still discovering that hold it back. */
    int64_t last_ev_nano;
    struct rec *holds, *holds_tail;
    bool stopping; /* in reaper_free */

    /* The containerd channel (NULL: Docker-only mode). */
    struct ctrd *ctrd;
    struct taskwatch tw;

    /* Durable state (NULL: none, as in unit tests). */
    struct store *store;
    struct persist ps;
    struct report_queue oq;

    reaper_report_cb report_cb;
    void *report_arg;
    reaper_ready_cb ready_cb;
    void *ready_arg;
    bool told_ready; /* what ready_cb was last told */
    struct reaper_stats st;
    /* When the observation being fed arrived (loop_now_ns); 0 outside
     * feed(). A report made meanwhile measures reapd's added latency. */
    uint64_t obs_ns;
};

#endif
