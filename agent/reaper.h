/*
 * reaper — the table of tracked containers, fed by the engine.
 *
 * It turns what the docker adapter sees (events, list and inspect answers,
 * DELETE results) and its own timers into lifecycle observations, and
 * carries out the actions the lifecycle returns: engine calls, timers,
 * removal slots (delete.max_in_flight), reports. It holds no product rule
 * itself; those live in lifecycle.c.
 *
 * A record is freed only when the lifecycle says so, and then its pending
 * engine calls and timers are cancelled first, so no callback ever finds
 * a freed record.
 */
#ifndef REAPD_REAPER_H
#define REAPD_REAPER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "docker.h"
#include "hist.h"
#include "lifecycle.h"

struct loop;
struct ctrd;
struct store;
struct docker;
struct config;
struct report_log;
struct reaper;

/* How a reported exit ended, for the cleanup histogram's label. */
enum reaper_cleanup {
    REAPER_CLEANUP_REMOVED,     /* removal confirmed */
    REAPER_CLEANUP_KEPT,        /* a keep policy */
    REAPER_CLEANUP_GAVE_UP,     /* delete.give_up_after_ms passed */
    REAPER_CLEANUP_UNCONFIRMED, /* settled without a confirmed removal */
    REAPER_CLEANUP_N
};

/* The engine calls the reaper times. */
enum reaper_call {
    REAPER_CALL_DOCKER_LIST,
    REAPER_CALL_DOCKER_INSPECT,
    REAPER_CALL_DOCKER_DELETE,
    REAPER_CALL_TASK_GET,
    REAPER_CALL_TASK_DELETE,
    REAPER_CALL_CONTAINER_DELETE,
    REAPER_CALL_TASK_LIST,
    REAPER_CALL_N
};

/* "removed", "kept", "gave_up", "unconfirmed". */
const char *reaper_cleanup_name(enum reaper_cleanup c);
/* api "docker" or "containerd"; call "list", "inspect", "delete",
 * "task_get", "task_delete", "container_delete", "task_list". */
void reaper_call_name(enum reaper_call c, const char **api, const char **call);

/* Counters for metrics and tests. */
struct reaper_stats {
    uint64_t events;
    uint64_t events_rejected; /* unreadable, stepped over (docker.h) */
    uint64_t replays_cut;     /* replays that began past the checkpoint */
    /* Containers whose labels, or name or image, were more than reapd
     * keeps (docs/limits.md), counted when their policy is decided. */
    uint64_t labels_truncated;
    uint64_t metadata_truncated;
    /* Gone before their labels could be kept (out of memory): no policy
     * could be decided for them. */
    uint64_t undecidable;
    uint64_t relists;
    /* What the engine said of itself at the last (re)subscription;
     * engine_known false before the first. */
    bool engine_known;
    struct docker_engine_info engine;
    uint64_t docker_reconnects;     /* events stream re-subscriptions */
    uint64_t containerd_reconnects; /* containerd events re-subscriptions */
    uint64_t reports;
    /* Writes of reports to reports.jsonl and the store, each with its
     * sync: the reports of a burst share them (persist.h). */
    uint64_t report_writes;
    /* Loop turns that made reports: a burst made in one turn, or spread
     * over several (the tests tell the two apart). */
    uint64_t report_turns;
    uint64_t report_errors;
    uint64_t deletes_ok;
    uint64_t deletes_failed;
    uint64_t deletes_conflict;
    uint64_t deletes_gone;
    /* DELETEs put off because the container's record could not be
     * written first (the state's disk full). */
    uint64_t deletes_held;
    uint64_t exit_code_mismatches;
    uint64_t tasks_lost; /* reports of exits whose task containerd lost */
    uint64_t cleanup_slow;
    uint64_t gave_up;
    size_t tracked;
    size_t ignored;
    size_t by_state[LC_NSTATES];
    size_t slots_used;
    size_t slots_waiting;
    /* The containerd channel. */
    bool docker_connected; /* the Docker events stream is open */
    /* The engine's time of the newest event received (ns since the
     * epoch; 0: none yet). */
    int64_t last_event_nano;
    bool containerd;           /* on (not Docker-only mode) */
    bool containerd_connected; /* its event stream is open */
    size_t leaked_tasks;       /* tasks without an engine container now */
    uint64_t tasks_reaped;     /* leaked by the engine, reaped after removal */
    uint64_t orphans_reaped;   /* orphans the audit listed, reaped */
    /* Durable state. */
    uint64_t store_errors;  /* failed writes (disk full...) */
    size_t reports_unsaved; /* made, waiting for the store to take them */
    uint64_t duplicates;    /* reports made again after a restart */
    uint64_t empty_flushes; /* group commits with nothing to write */
    uint64_t pruned;        /* delivered reports removed by retention */
    uint64_t reports_log_rotations; /* of reports.jsonl (reports_log) */
    /* Exit -> settled, observed as each report is made. */
    struct hist cleanup[REAPER_CLEANUP_N];
    /* Engine calls that got an answer (or failed), by call. */
    struct hist calls[REAPER_CALL_N];
    /* reapd's own share of a cleanup: from the engine observation that
     * completed it (handed to the lifecycle) to its report being durable
     * (reports.jsonl and the state database). */
    struct hist report_latency;
};

/*
 * Borrowed, not owned: `l`, `d`, `cfg` and `rl` must outlive the reaper.
 * Returns NULL on allocation failure.
 */
struct reaper *reaper_new(struct loop *l, struct docker *d,
                          const struct config *cfg, struct report_log *rl);
/* Cancels all pending work and frees every record. */
void reaper_free(struct reaper *r);

/* How long a relist's answer is taken in per loop turn before the loop
 * gets its turn (default 2 ms; tests make it short to see the slices). */
void reaper_set_relist_slice_ns(struct reaper *r, uint64_t ns);

/* Swaps the config (SIGHUP). Records already tracked keep the policy they
 * were given; new ones get the new policies. `cfg` is borrowed. */
void reaper_set_config(struct reaper *r, const struct config *cfg);

/* Turns the containerd channel on (before reaper_start); `c` is borrowed.
 * Without it reapd runs in Docker-only mode. */
void reaper_set_containerd(struct reaper *r, struct ctrd *c);

/* Turns durable state on (before reaper_start): container records,
 * reports and the events checkpoint go to `st` (borrowed), and records
 * of the last run are resumed. */
void reaper_set_store(struct reaper *r, struct store *st);

/* Subscribes to the engine's events and starts reconciling. */
int reaper_start(struct reaper *r);

/* Ready: stream open and the relist after it done. When not ready, `why`
 * (may be NULL) gets a static reason. */
bool reaper_ready(const struct reaper *r, const char **why);

void reaper_stats(const struct reaper *r, struct reaper_stats *out);

/* Visits each tracked (non-ignored) container; for the status endpoint. */
struct reaper_view {
    const char *id;
    const char *name;
    const char *image;
    const char *policy;
    enum lc_state state;
    const struct lc *lc;
};
typedef void (*reaper_visit_cb)(const struct reaper_view *v, void *arg);
void reaper_foreach(const struct reaper *r, reaper_visit_cb cb, void *arg);

/* The tracked container with the full id `id`, into *out (its strings
 * are the reaper's: valid until the loop runs again); false if none. */
bool reaper_lookup(const struct reaper *r, const char *id,
                   struct reaper_view *out);

/* Visits each containerd task the audit found without an engine
 * container. */
struct reaper_leak_view {
    const char *id;
    uint32_t pid;
    bool stopped;
    unsigned audits_seen;
    bool reaping;
    unsigned failures;
    const char *last_error; /* or NULL */
};
typedef void (*reaper_leak_cb)(const struct reaper_leak_view *v, void *arg);
void reaper_foreach_leak(const struct reaper *r, reaper_leak_cb cb, void *arg);

/*
 * An operator's audit (POST /v1/audit): a containerd task list now, or,
 * when one is in flight, once more right after it. Returns the count
 * of finished lists (reaper_audit_state) that includes this audit; 0
 * when the containerd channel is off.
 */
uint64_t reaper_audit_now(struct reaper *r);

struct reaper_audit {
    bool on;             /* the containerd channel is on */
    uint64_t lists_done; /* task lists finished, answered or failed */
    bool ok;             /* the last one was answered */
    size_t tasks;        /* ... and listed this many tasks */
    const char *error;   /* why it failed ("" if it did not); borrowed */
    size_t leaks;        /* tasks without an engine container now */
};
void reaper_audit_state(const struct reaper *r, struct reaper_audit *out);

/* Called after each report is written; for tests and delivery. */
typedef void (*reaper_report_cb)(const char *json, size_t len, void *arg);
void reaper_on_report(struct reaper *r, reaper_report_cb cb, void *arg);

/* Called when reaper_ready() turns: ready once a relist after a
 * (re)subscription is done, not ready when the stream is lost; `why` as
 * reaper_ready() gives it (NULL when ready). For systemd's READY=1. */
typedef void (*reaper_ready_cb)(bool ready, const char *why, void *arg);
void reaper_on_ready(struct reaper *r, reaper_ready_cb cb, void *arg);

#endif
