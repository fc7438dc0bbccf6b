/*
 * lifecycle — the pure core: one container's way from exit to confirmed
 * removal and report.
 *
 *   (state, observation) -> (new state, actions)
 *
 * No I/O, no clock reads, no allocation: the caller passes the time and a
 * random number in each observation and carries out the returned actions
 * (engine calls, timers, removal slots, the report). Every product rule
 * lives here: which exit code is true, when an exit is final (not a
 * restart), when a removal counts as confirmed, how retries are spaced.
 *
 * Confirmation is a join, in the manner of tmux's job.c: a removal is
 * confirmed only when BOTH the engine's destroy event (or a relist that no
 * longer lists the container, which stands in for an event missed while
 * the stream was down) AND the engine's word that its record is gone (an
 * inspect answering 404, or its answer to reapd's DELETE) have been seen,
 * in either order. The first only records; the second completes.
 */
#ifndef REAPD_LIFECYCLE_H
#define REAPD_LIFECYCLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "policy.h"

enum lc_state {
    LC_RUNNING,    /* not exited: created, running, paused, restarting */
    LC_SETTLING,   /* exit seen; inspect settles the code and finality */
    LC_DELAYING,   /* policy delay before removal */
    LC_QUEUED,     /* waiting for a removal slot (delete.max_in_flight) */
    LC_REMOVING,   /* DELETE sent, or waiting to retry it */
    LC_CONFIRMING, /* waiting for destroy AND gone (inspect 404, DELETE) */
    LC_KEPT,       /* keep policy: exit reported, container stays */
    LC_ABANDONED,  /* gave up (give_up_after_ms): reported, stays */
    LC_DONE,       /* reported; the record is forgotten */
    /* With the containerd channel, after the engine's removal: */
    LC_TASK_CONFIRMING, /* waiting for /tasks/delete AND Tasks.Get 404 */
    LC_TASK_REAPING,    /* the engine leaked the task: reapd deletes it */
    LC_NSTATES
};

/* Where the true exit code came from. */
enum lc_source {
    LC_SRC_NONE,       /* unknowable (container gone before inspect) */
    LC_SRC_CONTAINERD, /* TaskExit of the init process */
    LC_SRC_INSPECT,    /* State.ExitCode once FinishedAt is set */
    LC_SRC_EVENT,      /* the die event's exitCode */
};

/* Anomalies are flags; they end up in the report's "anomalies" array. */
#define LC_AN_STICKY (LC_AN_LABELS_TRUNCATED | LC_AN_METADATA_TRUNCATED)
enum lc_anomaly {
    LC_AN_EXIT_CODE_MISMATCH = 1u << 0, /* die event code != true code */
    LC_AN_CLEANUP_SLOW = 1u << 1,       /* warn_after_ms passed */
    LC_AN_GAVE_UP = 1u << 2,            /* give_up_after_ms passed */
    LC_AN_DELETE_RETRIED = 1u << 3,     /* a DELETE failed and was retried */
    LC_AN_EXIT_UNKNOWN = 1u << 4, /* gone before its exit code was seen */
    LC_AN_TASK_DELETE_TIMEOUT = 1u << 5,
    LC_AN_TASK_REAPED = 1u << 6,
    /* Properties of the container, not of one exit: they outlive a
     * restart (see LC_AN_STICKY). Set by lc_init from lc_params. */
    LC_AN_LABELS_TRUNCATED = 1u << 7,   /* labels dropped or cut */
    LC_AN_METADATA_TRUNCATED = 1u << 8, /* name or image cut */
    /* Seen running, then found exited by the relist after the engine
     * itself was down (no die event): the code is what the engine
     * recovered at its restart (255 from Docker 26 on; engines.md). */
    LC_AN_EXITED_ENGINE_DOWN = 1u << 9,
    /* The engine says it runs, but containerd has no task for it (the
     * task went with a containerd restart and the engine never heard):
     * its code is gone, and the engine's "running" is not believed until
     * a start event. */
    LC_AN_TASK_LOST = 1u << 10,
};

/* What the engine said of the container's state (inspect or list). */
enum lc_run {
    LC_RUN_CREATED,
    LC_RUN_RUNNING,
    LC_RUN_PAUSED,
    LC_RUN_RESTARTING,
    LC_RUN_REMOVING,
    LC_RUN_EXITED,
    LC_RUN_DEAD,
};

struct lc_inspect {
    enum lc_run run;
    bool has_exit_code; /* list answers carry no exit code */
    int exit_code;
    bool finished; /* FinishedAt is set (not the zero time) */
    bool oom_killed;
};

enum lc_obs_kind {
    OBS_EVENT_START,     /* start or restart event */
    OBS_EVENT_DIE,       /* die event; exit code if the event had one */
    OBS_EVENT_DESTROY,   /* destroy event */
    OBS_FOUND,           /* a relist lists it (inspect.run; no exit code) */
    OBS_ABSENT,          /* a relist does not list it */
    OBS_INSPECT,         /* inspect answered 200 (inspect filled in) */
    OBS_INSPECT_GONE,    /* inspect answered 404 */
    OBS_INSPECT_FAILED,  /* timeout, 5xx, engine unreachable */
    OBS_DELETE_DONE,     /* DELETE answered 2xx */
    OBS_DELETE_GONE,     /* DELETE answered 404 */
    OBS_DELETE_CONFLICT, /* DELETE answered 409 (removal in progress) */
    OBS_DELETE_FAILED,   /* 5xx, timeout, unreachable, other 4xx */
    OBS_SLOT,            /* a removal slot was granted */
    OBS_TIMER_STEP,      /* the step timer (retry, poll, delay) fired */
    OBS_TIMER_WARN,      /* warn_after_ms since the exit */
    OBS_TIMER_GIVEUP,    /* give_up_after_ms since the exit */
    /* The containerd channel. */
    OBS_TASK_EXIT,         /* TaskExit of the init process (exit_code) */
    OBS_TASK_DELETE_EVENT, /* /tasks/delete for it, or a task list that no
                              longer holds it */
    OBS_TASK_PRESENT,      /* Tasks.Get answered (task_status) */
    OBS_TASK_GONE,         /* Tasks.Get answered NOT_FOUND */
    OBS_TASK_FAILED,       /* Tasks.Get failed (containerd unreachable...) */
    OBS_TASK_DELETE_DONE,  /* our Tasks.Delete: OK or NOT_FOUND */
    OBS_TASK_DELETE_FAILED,
    OBS_CTR_DELETE_DONE, /* our Containers.Delete: OK or NOT_FOUND */
    OBS_CTR_DELETE_FAILED,
    OBS_CTRD_OUTAGE,  /* containerd's event stream was lost, or subscribed
                         again: the engine's own calls may have failed */
    OBS_TASK_MISSING, /* a task list without the task of a container the
                         record has running */
    OBS_NKINDS
};

struct lc_obs {
    enum lc_obs_kind kind;
    uint64_t now_ms;    /* monotonic milliseconds */
    uint32_t rnd;       /* a random number for jitter */
    bool has_exit_code; /* OBS_EVENT_DIE */
    int exit_code;
    struct lc_inspect inspect; /* OBS_INSPECT, OBS_FOUND */
    /* OBS_FOUND: the relist follows an engine outage (docker.h,
     * docker_watch_after_outage). OBS_INSPECT: the container's FinishedAt
     * falls in a span when the engine was down. OBS_EVENT_DIE: the event
     * is dated after reapd first found the engine down in such a span, so
     * it may be the restarted engine's own (Docker 20.10 sometimes says
     * die 255 as it restores a container that exited meanwhile), not a
     * witness of the exit. */
    bool after_outage;
    bool task_running; /* OBS_TASK_PRESENT: not yet stopped */
};

/* The rules in force for one container, fixed when it is first tracked. */
struct lc_params {
    enum policy_action action; /* POLICY_REMOVE or POLICY_KEEP */
    int64_t delay_ms;
    int64_t poll_interval_ms;
    int64_t warn_after_ms;    /* 0: never warn */
    int64_t give_up_after_ms; /* 0: never give up */
    int64_t retry_base_ms;
    int64_t retry_max_ms;
    bool containerd;        /* the containerd channel is on */
    bool reap_leaked_tasks; /* delete a task the engine leaked */
    /* What reapd kept of the container's labels, name or image is less
     * than the engine holds (docs/limits.md): said in every report. */
    bool labels_truncated;
    bool metadata_truncated;
};

struct lc {
    enum lc_state state;
    struct lc_params p;

    /* The exit being settled. */
    bool ran;              /* seen running at some point: an exit counts */
    bool restarting;       /* last seen "restarting": polled till it is not */
    bool exited;           /* an exit was observed for the current run */
    uint64_t exited_at_ms; /* when reapd observed it */
    bool die_seen;
    bool die_has_code;
    int die_code;          /* engine_exit_code */
    bool die_after_outage; /* the die may be the restarted engine's */
    bool exit_known;
    int exit_code;
    enum lc_source source;
    bool oom_killed;

    /* The join. */
    bool destroy_seen;
    bool gone_polled;

    /* What is outstanding; the caller's requests mirror these. */
    bool inspect_inflight;
    bool delete_inflight;
    bool has_slot;
    bool removed_by_us; /* our DELETE was answered 2xx */

    unsigned inspect_failures; /* consecutive, for backoff */
    unsigned delete_failures;  /* consecutive, for backoff */
    unsigned delete_attempts;  /* DELETE requests sent, for the report */
    uint32_t anomalies;
    bool removed;        /* confirmed gone (for the report) */
    uint64_t cleanup_ms; /* exit -> confirmation (or give-up) */

    /* The containerd channel. */
    bool task_exit_seen; /* TaskExit of the init process, this run */
    int task_exit_code;
    bool task_delete_seen;
    bool task_gone_polled;
    bool task_get_inflight;
    bool task_delete_inflight;
    bool ctr_delete_inflight;
    bool task_reaped_done; /* our Tasks.Delete succeeded */
    /* The task phase did not go the ordinary way (Tasks.Get failed or
     * found the task), or the exit was not seen live (reapd restarted,
     * found it exited, or containerd went away meanwhile): the engine may
     * not have deleted its containerd container either. */
    bool task_trouble;
    unsigned task_failures;
    unsigned task_gone_polls; /* Tasks.Get 404s without /tasks/delete */
    /* Running, its task not listed: 1 waits to ask Tasks.Get, 2 (gone
     * there too) waits for inspect; running still, the task is lost. */
    uint8_t task_missing;
    bool task_get_missing; /* the Tasks.Get in flight was task_missing's */
    int task_deleted;      /* report: 1, 0, or -1 (null: no containerd) */
};

enum lc_act_kind {
    ACT_INSPECT,     /* send an inspect */
    ACT_DELETE,      /* send DELETE (force/volumes from the policy) */
    ACT_STEP_TIMER,  /* (re)arm the step timer to ms */
    ACT_STEP_CANCEL, /* disarm the step timer */
    ACT_DEADLINES,   /* arm warn and give-up timers (ms, ms2; 0 = none) */
    ACT_DEADLINES_CANCEL,
    ACT_WANT_SLOT,   /* ask for a removal slot; answer with OBS_SLOT */
    ACT_DROP_SLOT,   /* leave the slot queue / give the slot back */
    ACT_WARN,        /* log that cleanup is slow (anomaly recorded) */
    ACT_TASK_GET,    /* containerd Tasks.Get */
    ACT_TASK_DELETE, /* containerd Tasks.Delete (no timeout) */
    ACT_CTR_DELETE,  /* containerd Containers.Delete */
    ACT_TASK_LIST,   /* containerd Tasks.List, shared by the node: a task it
                      * does not hold comes back as OBS_TASK_DELETE_EVENT */
    ACT_REPORT,      /* make the report from the record, now */
    ACT_FORGET,      /* free the record (after cancelling what is pending) */
};

struct lc_act {
    enum lc_act_kind kind;
    uint64_t ms;
    uint64_t ms2;
};

#define LC_MAX_ACTIONS 10

/* How long after a list without its task Tasks.Get and inspect are asked.
 * The engine deletes an exit's task and marks it exited under the
 * container's lock, which inspect waits for: a task gone while inspect
 * says running was not deleted by the engine. Short, so that the check
 * ends before someone kills the container. */
#define LC_TASK_MISSING_MS 1000

struct lc_result {
    struct lc_act acts[LC_MAX_ACTIONS];
    size_t nacts;
    enum lc_state from;
    enum lc_state to;
    const char *reason; /* static text for the log: why this happened */
};

/* A fresh record in LC_RUNNING. */
void lc_init(struct lc *c, const struct lc_params *p);

/*
 * The container's labels, or its name or image, were found cut after
 * lc_init (its inspect or a rename brought longer ones than its event):
 * the report says so. Returns the sticky anomalies that were not set
 * before, so the caller counts each container once.
 */
uint32_t lc_note_cut(struct lc *c, bool labels, bool metadata);

/*
 * A record for a container first seen already exited (a relist or an
 * inspect at startup): it goes straight to settling. Fills `res`.
 */
void lc_start_exited(struct lc *c, uint64_t now_ms, struct lc_result *res);

/*
 * A record loaded from durable state after reapd restarted: nothing is in
 * flight any more, no slot is held, and the monotonic clock started anew.
 * `now_ms` is the new monotonic time, `since_exit_ms` the wall-clock time
 * since the exit was observed (for the deadlines). Re-asks what was
 * outstanding so the wait resumes where it stood; what was already
 * learned (die code, destroy seen, TaskExit...) is kept. Fills `res`.
 */
void lc_resume(struct lc *c, uint64_t now_ms, uint64_t since_exit_ms,
               struct lc_result *res);

/* Applies one observation. Fills `res` (always; nacts may be 0). */
void lc_step(struct lc *c, const struct lc_obs *obs, struct lc_result *res);

const char *lc_state_name(enum lc_state s);
const char *lc_obs_name(enum lc_obs_kind k);
const char *lc_source_name(enum lc_source s); /* NULL for LC_SRC_NONE */
/* Name of one anomaly flag ("engine_exit_code_mismatch", ...). */
const char *lc_anomaly_name(enum lc_anomaly a);

/* Maps the engine's State.Status / list State string: 0 and *out, or -1
 * for a string the engine does not use. */
int lc_run_parse(const char *status, enum lc_run *out);

#endif
