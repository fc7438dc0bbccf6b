/*
 * reaper — tracked containers, driven by the engine; see reaper.h.
 *
 * Three sources feed a record: the events stream, relists (after every
 * (re)subscription) and the answers to its own engine calls. A container
 * first heard of through an event is "discovering" until a list-by-id
 * answer tells its labels, name and image (list reads the engine's
 * in-memory view and does not wait on the container lock, unlike inspect);
 * events that arrive meanwhile are queued and replayed, so nothing is
 * decided on half the facts.
 */
#include "reaper.h"

#include <event2/event.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backoff.h"
#include "config.h"
#include "containerd.h"
#include "docker.h"
#include "log.h"
#include "loop.h"
#include "record.h"
#include "report.h"
#include "store.h"

#define MAX_PENDING    8
#define MAX_UNSAVED    100000 /* reports held while the disk is full */
#define CHECKPOINT_KEY "docker.events.time_nano"
/* When the engine was lost, while it stays unreachable (wall ms; 0: it is
 * not): a reapd started during an outage learns of it from its
 * predecessor. */
#define OUTAGE_KEY   "docker.outage_since_ms"
#define OUTAGE_SPANS 8
/* Bytes of reports.jsonl whose reports the store holds (see report.h). */
#define JOURNAL_KEY "reports.jsonl.end"
/* Pending record changes written at once rather than at the loop turn's
 * end (schedule_flush). */
#define FLUSH_SLICE_ROWS 256
#define MAX_TOMBSTONE    4096

enum rec_kind { R_DISCOVERING, R_IGNORED, R_MANAGED };

struct rec {
    char id[65];
    struct rec *hnext;
    struct reaper *r;
    enum rec_kind kind;

    /* name, image and labels point into `meta`, one block (see
     * set_meta): a tracked container costs one allocation for them, not
     * 2 + 2 per label. */
    void *meta;
    char *name;
    char *image;
    struct label *labels;
    size_t nlabels;
    char *policy; /* name of the policy that matched, or "default" */
    bool force, volumes, report_on;
    /* The metadata is known (from an event, a list or the store), and
     * whether it is less than the engine holds (docs/limits.md). */
    bool meta_known, labels_cut, meta_cut;

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

    bool slot_queued, slot_held;
    struct rec *qprev, *qnext;

    uint64_t born_relist;   /* relist generation when created */
    bool persisted;         /* a record of it is in the store */
    bool persisted_running; /* ... and it says only "running" */
    bool persist_done;      /* written by this step already (a DELETE's) */
    bool resume_pending;    /* loaded from the store, not yet resumed */
    bool loaded;            /* loaded from the store (an earlier run's) */
    int64_t exited_wall_ms; /* wall clock when its exit was seen */
    /* Observations held while discovering (NULL otherwise: most
     * records never need it). */
    struct lc_obs *pend;
    size_t npend;
};

/* A containerd task whose engine container does not exist (found by the
 * audit): the engine leaked it before reapd watched, or while it was
 * down. */
struct leak {
    char id[65];
    enum ctrd_task_status status;
    uint32_t pid;
    unsigned audits_seen; /* consecutive audits that listed it */
    bool reaping;
    bool task_deleted;
    unsigned failures;
    struct ctrd_req *req;
    uint64_t req_t0; /* when `req` was sent */
    struct reaper *r;
    char last_error[128];
    struct leak *next;
};

/* A report written to reports.jsonl that the store could not take yet
 * (disk full): kept and retried, so nothing already made is lost. */
struct unsaved {
    struct unsaved *next;
    char report_id[40];
    char container_id[65];
    char *json;
    size_t len;
    int64_t made_ms; /* when it was kept (as the store's created_ms) */
};

struct reaper {
    struct loop *l;
    struct docker *d;
    const struct config *cfg;
    struct report_log *rl;
    uint32_t rnd;

    struct rec **buckets;
    size_t nbuckets;
    size_t nrecs;

    struct rec *qhead, *qtail; /* waiting for a removal slot */
    size_t slots_used;
    struct event *grant_ev;

    /* Relists. */
    struct docker_req *relist_req;
    uint64_t relist_t0;
    uint64_t relist_gen; /* bumped when a relist is sent */
    bool relisted;       /* a relist completed since the last subscribe */
    /* The subscription follows an engine outage: what the next complete
     * relist finds exited, exited while dockerd was down. */
    bool outage_relist;
    /* The engine outage under way (wall ms it began; 0: none), and the
     * last spans it was down, for FinishedAt (inspect) to be judged by. */
    int64_t lost_at_ms;
    int64_t outage_since_ms;
    struct {
        int64_t from, to;
    } outages[OUTAGE_SPANS];
    size_t noutages;
    unsigned relist_failures;
    struct event *relist_timer;
    struct event *trim_ev; /* after a relist: give the heap back */
    char (*tombs)[65];     /* destroyed while a relist was in flight */
    size_t ntombs;

    /* The containerd channel (NULL: Docker-only mode). */
    struct ctrd *ctrd;
    struct ctrd_req *task_list_req;
    uint64_t task_list_t0;
    bool task_list_is_audit; /* else: the reconcile after a subscribe */
    struct event *audit_timer;
    /* An exit or removal was seen since the last task list was sent: the
     * next periodic audit has something to find. Without one (and
     * without known leaks) an idle node is never woken to audit. */
    bool audit_due;
    struct leak *leaks; /* tasks without an engine container */
    size_t nleaks;
    uint64_t tasks_reaped;   /* leaked by the engine, after removal */
    uint64_t orphans_reaped; /* found by the audit */

    /* Durable state (NULL: none, as in unit tests). */
    struct store *store;
    struct event *flush_ev;
    bool flush_scheduled;
    bool store_failing; /* the last write failed; logged once */
    struct event *store_retry;
    struct event *prune_timer;
    uint64_t pruned;
    struct unsaved *unsaved, *unsaved_tail; /* reports not yet stored */
    size_t nunsaved;
    uint64_t store_errors;
    uint64_t duplicates;

    reaper_report_cb report_cb;
    void *report_arg;
    struct reaper_stats st;
    /* When the observation being fed arrived (loop_now_ns); 0 outside
     * feed(). A report made meanwhile measures reapd's added latency. */
    uint64_t obs_ns;
};

static bool feed(struct rec *c, const struct lc_obs *o);
static bool apply(struct rec *c, const struct lc_result *res);
static void forget(struct rec *c);
static void audit_activity(struct reaper *r);

/* ---- histograms ------------------------------------------------------- */

/* From "the engine answered at once" to "well past the default delete
 * timeouts", so a slow cleanup (a task-delete timeout) lands in a bucket of
 * its own rather than in +Inf. */
static const double cleanup_bounds[] = {0.1, 0.25, 0.5, 1,   2.5, 5,   10,
                                        30,  60,   120, 300, 600, 1800};
/* Engine calls: milliseconds when healthy, up to the request timeout
 * (docker.request_timeout_ms, 30 s by default) when not. */
static const double call_bounds[] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                                     1,     2.5,  5,     10,   30,  60};

/* reapd's own latency: sub-millisecond when healthy, a slow disk sync at
 * the far end. */
static const double latency_bounds[] = {0.0001, 0.00025, 0.0005, 0.001,
                                        0.002,  0.005,   0.01,   0.025,
                                        0.05,   0.1,     0.25,   1};

#define NBOUNDS(a) (sizeof(a) / sizeof((a)[0]))
_Static_assert(NBOUNDS(cleanup_bounds) <= REAPER_HIST_MAX, "bounds");
_Static_assert(NBOUNDS(call_bounds) <= REAPER_HIST_MAX, "bounds");
_Static_assert(NBOUNDS(latency_bounds) <= REAPER_HIST_MAX, "bounds");

const double *
reaper_cleanup_bounds(size_t *n)
{
    *n = NBOUNDS(cleanup_bounds);
    return cleanup_bounds;
}

const double *
reaper_call_bounds(size_t *n)
{
    *n = NBOUNDS(call_bounds);
    return call_bounds;
}

const double *
reaper_latency_bounds(size_t *n)
{
    *n = NBOUNDS(latency_bounds);
    return latency_bounds;
}

const char *
reaper_cleanup_name(enum reaper_cleanup c)
{
    static const char *const names[REAPER_CLEANUP_N] = {
        "removed", "kept", "gave_up", "unconfirmed"};

    return (unsigned)c < REAPER_CLEANUP_N ? names[c] : "unknown";
}

void
reaper_call_name(enum reaper_call c, const char **api, const char **call)
{
    static const char *const names[REAPER_CALL_N] = {
        "list",        "inspect",          "delete",   "task_get",
        "task_delete", "container_delete", "task_list"};

    *api = c <= REAPER_CALL_DOCKER_DELETE ? "docker" : "containerd";
    *call = (unsigned)c < REAPER_CALL_N ? names[c] : "unknown";
}

static void
hist_observe(struct reaper_hist *h, const double *bounds, size_t n, double v)
{
    size_t i = 0;

    while (i < n && v > bounds[i])
        i++;
    h->buckets[i]++;
    h->count++;
    h->sum += v;
}

/* An engine call sent at `t0` just got its answer. */
static void
call_done(struct reaper *r, enum reaper_call call, uint64_t t0)
{
    uint64_t now = loop_now_ms();

    hist_observe(&r->st.calls[call], call_bounds, NBOUNDS(call_bounds),
                 now >= t0 ? (double)(now - t0) / 1000.0 : 0.0);
}

/* ---- the table -------------------------------------------------------- */

static size_t
bucket_of(const struct reaper *r, const char *id)
{
    uint64_t h = 0;
    int i;

    /* Ids are random hex: their first 16 digits are a fine hash. */
    for (i = 0; i < 16; i++) {
        char ch = id[i];

        h = (h << 4) | (uint64_t)(ch <= '9' ? ch - '0' : ch - 'a' + 10);
    }
    return (size_t)(h & (r->nbuckets - 1));
}

static struct rec *
lookup(const struct reaper *r, const char *id)
{
    struct rec *c;

    for (c = r->buckets[bucket_of(r, id)]; c != NULL; c = c->hnext)
        if (memcmp(c->id, id, 64) == 0)
            return c;
    return NULL;
}

static void
grow(struct reaper *r)
{
    size_t n = r->nbuckets * 2, i;
    struct rec **nb = calloc(n, sizeof(*nb)), *c, *next;
    struct rec **old = r->buckets;
    size_t oldn = r->nbuckets;

    if (nb == NULL)
        return; /* longer chains, still correct */
    r->buckets = nb;
    r->nbuckets = n;
    for (i = 0; i < oldn; i++) {
        for (c = old[i]; c != NULL; c = next) {
            size_t b = bucket_of(r, c->id);

            next = c->hnext;
            c->hnext = nb[b];
            nb[b] = c;
        }
    }
    free(old);
}

static struct rec *
rec_new(struct reaper *r, const char *id)
{
    struct rec *c = calloc(1, sizeof(*c));
    size_t b;

    if (c == NULL) {
        log_error(id, "out of memory tracking a container");
        return NULL;
    }
    memcpy(c->id, id, 65);
    c->r = r;
    c->kind = R_DISCOVERING;
    c->born_relist = r->relist_gen;
    if (r->nrecs >= r->nbuckets)
        grow(r);
    b = bucket_of(r, id);
    c->hnext = r->buckets[b];
    r->buckets[b] = c;
    r->nrecs++;
    return c;
}

static void
rec_unlink(struct rec *c)
{
    struct reaper *r = c->r;
    struct rec **pp = &r->buckets[bucket_of(r, c->id)];

    while (*pp != NULL && *pp != c)
        pp = &(*pp)->hnext;
    if (*pp == c)
        *pp = c->hnext;
    r->nrecs--;
}

static void
free_meta(struct rec *c)
{
    free(c->meta);
    c->meta = NULL;
    c->labels = NULL;
    c->nlabels = 0;
    c->name = c->image = NULL;
}

static char *
put_str(char **p, const char *s)
{
    char *at = *p;
    size_t n = strlen(s) + 1;

    memcpy(at, s, n);
    *p += n;
    return at;
}

static void
set_str(char **dst, const char *src)
{
    char *n = src != NULL ? strdup(src) : NULL;

    if (src != NULL && n == NULL)
        return; /* keep the old value rather than lose it */
    free(*dst);
    *dst = n;
}

/*
 * Copies name, image and labels into one block: the label array, then the
 * strings. The arguments may point into the record's current block (a
 * rename): it is freed only after the copy. `labels_cut` and `meta_cut`
 * say that labels, or the name or image, are less than the engine holds.
 * Returns 0 or -1 (out of memory; the old values and flags stay).
 */
static int
set_meta(struct rec *c, const char *name, const char *image,
         const struct label *labels, size_t n, bool labels_cut, bool meta_cut)
{
    size_t i, size = n * sizeof(struct label);
    struct label *copy;
    char *blob, *p;

    size += name != NULL ? strlen(name) + 1 : 0;
    size += image != NULL ? strlen(image) + 1 : 0;
    for (i = 0; i < n; i++)
        size += strlen(labels[i].key) + strlen(labels[i].value) + 2;
    blob = malloc(size > 0 ? size : 1);
    if (blob == NULL)
        return -1;
    copy = (struct label *)(void *)blob;
    p = blob + n * sizeof(struct label);
    for (i = 0; i < n; i++) {
        copy[i].key = put_str(&p, labels[i].key);
        copy[i].value = put_str(&p, labels[i].value);
    }
    name = name != NULL ? put_str(&p, name) : NULL;
    image = image != NULL ? put_str(&p, image) : NULL;
    free_meta(c);
    c->meta = blob;
    c->labels = n > 0 ? copy : NULL;
    c->nlabels = n;
    c->name = (char *)name;
    c->image = (char *)image;
    c->meta_known = true;
    c->labels_cut = labels_cut;
    c->meta_cut = meta_cut;
    return 0;
}

static int
meta_from_list(struct rec *c, const struct docker_container *dc)
{
    return set_meta(c, dc->name, dc->image, dc->labels, dc->nlabels,
                    dc->labels_truncated,
                    dc->name_truncated || dc->image_truncated);
}

/* ---- slots ------------------------------------------------------------ */

static void
queue_remove(struct rec *c)
{
    struct reaper *r = c->r;

    if (!c->slot_queued)
        return;
    if (c->qprev != NULL)
        c->qprev->qnext = c->qnext;
    else
        r->qhead = c->qnext;
    if (c->qnext != NULL)
        c->qnext->qprev = c->qprev;
    else
        r->qtail = c->qprev;
    c->qprev = c->qnext = NULL;
    c->slot_queued = false;
}

static void
on_grant(evutil_socket_t fd, short what, void *arg)
{
    struct reaper *r = arg;
    int64_t max = r->cfg->delete_max_in_flight;
    struct lc_obs o;

    (void)fd;
    (void)what;
    while (r->qhead != NULL && (int64_t)r->slots_used < max) {
        struct rec *c = r->qhead;

        queue_remove(c);
        c->slot_held = true;
        r->slots_used++;
        memset(&o, 0, sizeof(o));
        o.kind = OBS_SLOT;
        feed(c, &o);
    }
}

static void
drop_slot(struct rec *c)
{
    struct reaper *r = c->r;

    queue_remove(c);
    if (c->slot_held) {
        c->slot_held = false;
        r->slots_used--;
        event_active(r->grant_ev, EV_TIMEOUT, 0);
    }
}

/* ---- engine calls ----------------------------------------------------- */

/* Did the container finish in a span when the engine was down (its
 * FinishedAt, an RFC 3339 time; a second of slack each side for the
 * engine's and reapd's clocks being read at different moments)? */
static bool
finished_in_outage(const struct reaper *r, const char *finished_at)
{
    int64_t t;
    size_t i;

    if (r->noutages == 0 || finished_at == NULL ||
        report_parse_time(finished_at, &t) != 0)
        return false;
    for (i = 0; i < r->noutages && i < OUTAGE_SPANS; i++)
        if (t >= r->outages[i].from - 1000 && t <= r->outages[i].to + 1000)
            return true;
    return false;
}

static void
on_inspect(enum docker_status st, const struct docker_container *dc,
           const char *msg, void *arg)
{
    struct rec *c = arg;
    struct lc_obs o;

    c->inspect_req = NULL;
    call_done(c->r, REAPER_CALL_DOCKER_INSPECT, c->inspect_t0);
    memset(&o, 0, sizeof(o));
    switch (st) {
    case DOCKER_OK:
        o.kind = OBS_INSPECT;
        o.inspect = dc->state;
        o.after_outage = finished_in_outage(c->r, dc->finished_at);
        set_str(&c->started_at, dc->started_at);
        set_str(&c->finished_at, dc->finished_at);
        break;
    case DOCKER_NOT_FOUND:
        o.kind = OBS_INSPECT_GONE;
        break;
    default:
        log_warn(c->id, "%s", msg);
        o.kind = OBS_INSPECT_FAILED;
        break;
    }
    feed(c, &o);
}

static void
on_delete(enum docker_status st, long status, const char *msg, void *arg)
{
    struct rec *c = arg;
    struct reaper *r = c->r;
    struct lc_obs o;

    c->delete_req = NULL;
    call_done(r, REAPER_CALL_DOCKER_DELETE, c->delete_t0);
    memset(&o, 0, sizeof(o));
    switch (st) {
    case DOCKER_OK:
        o.kind = OBS_DELETE_DONE;
        r->st.deletes_ok++;
        break;
    case DOCKER_NOT_FOUND:
        o.kind = OBS_DELETE_GONE;
        r->st.deletes_gone++;
        break;
    case DOCKER_CONFLICT:
        log_info(c->id, "%s", msg);
        o.kind = OBS_DELETE_CONFLICT;
        r->st.deletes_conflict++;
        break;
    default:
        log_warn(c->id, "%s", msg);
        o.kind = OBS_DELETE_FAILED;
        r->st.deletes_failed++;
        break;
    }
    (void)status;
    feed(c, &o);
}

static void
on_task_get(enum ctrd_status st, const struct ctrd_task *t, const char *msg,
            void *arg)
{
    struct rec *c = arg;
    struct lc_obs o;

    c->task_req = NULL;
    call_done(c->r, REAPER_CALL_TASK_GET, c->task_t0);
    memset(&o, 0, sizeof(o));
    switch (st) {
    case CTRD_OK:
        o.kind = OBS_TASK_PRESENT;
        o.task_running =
            t->status != CTRD_TASK_STOPPED && t->status != CTRD_TASK_UNKNOWN;
        break;
    case CTRD_NOT_FOUND:
        o.kind = OBS_TASK_GONE;
        break;
    default:
        log_warn(c->id, "containerd Tasks.Get: %s", msg);
        o.kind = OBS_TASK_FAILED;
        break;
    }
    feed(c, &o);
}

static void
on_task_delete(enum ctrd_status st, uint32_t exit_status, const char *msg,
               void *arg)
{
    struct rec *c = arg;
    struct lc_obs o;

    c->task_del_req = NULL;
    call_done(c->r, REAPER_CALL_TASK_DELETE, c->task_del_t0);
    memset(&o, 0, sizeof(o));
    if (st == CTRD_FAILED) {
        log_warn(c->id, "containerd Tasks.Delete: %s", msg);
        o.kind = OBS_TASK_DELETE_FAILED;
    } else {
        log_info(c->id,
                 "reaped the task the engine leaked (exit status "
                 "%u)",
                 exit_status);
        c->r->tasks_reaped++;
        o.kind = OBS_TASK_DELETE_DONE;
    }
    feed(c, &o);
}

static void
on_ctr_delete(enum ctrd_status st, const char *msg, void *arg)
{
    struct rec *c = arg;
    struct lc_obs o;

    c->ctr_del_req = NULL;
    call_done(c->r, REAPER_CALL_CONTAINER_DELETE, c->ctr_del_t0);
    memset(&o, 0, sizeof(o));
    if (st == CTRD_FAILED) {
        log_warn(c->id, "containerd Containers.Delete: %s", msg);
        o.kind = OBS_CTR_DELETE_FAILED;
    } else {
        o.kind = OBS_CTR_DELETE_DONE;
    }
    feed(c, &o);
}

/* ---- timers ----------------------------------------------------------- */

static void
on_timer(struct rec *c, enum lc_obs_kind kind)
{
    struct lc_obs o;

    memset(&o, 0, sizeof(o));
    o.kind = kind;
    feed(c, &o);
}

static void
on_step(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    on_timer(arg, OBS_TIMER_STEP);
}

static void
on_warn(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    on_timer(arg, OBS_TIMER_WARN);
}

static void
on_giveup(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    on_timer(arg, OBS_TIMER_GIVEUP);
}

static void
arm(struct rec *c, struct event **ev, event_callback_fn fn, uint64_t ms)
{
    struct timeval tv;

    if (*ev == NULL) {
        *ev = evtimer_new(loop_base(c->r->l), fn, c);
        if (*ev == NULL) {
            log_error(c->id, "out of memory arming a timer");
            return;
        }
    }
    tv.tv_sec = (time_t)(ms / 1000);
    tv.tv_usec = (suseconds_t)((ms % 1000) * 1000);
    evtimer_add(*ev, &tv);
}

static void
disarm(struct event *ev)
{
    if (ev != NULL)
        evtimer_del(ev);
}

/* ---- durable state ----------------------------------------------------- */

static void on_flush(evutil_socket_t fd, short what, void *arg);

/* Container records and checkpoints are batched: one store_flush per
 * loop turn writes them all (group commit). */
static void store_result(struct reaper *r, int rc, const char *what);

static void
schedule_flush(struct reaper *r)
{
    if (r->store == NULL)
        return;
    /* A loop turn that changes thousands of records (a relist at a
     * start) writes them a slice at a time: their copies, held until the
     * flush, would otherwise interleave with the records made meanwhile
     * and leave the heap fragmented for good (1 KiB per container). */
    if (store_pending(r->store) >= FLUSH_SLICE_ROWS) {
        int rc = store_flush(r->store);

        store_result(r, rc, "saving container records");
        if (rc >= 0)
            return;
    }
    if (r->flush_scheduled)
        return;
    r->flush_scheduled = true;
    event_active(r->flush_ev, EV_TIMEOUT, 0);
}

/* Says it loudly once when writes start failing, and once when they work
 * again; a full disk must not also fill the log. */
static void
store_result(struct reaper *r, int rc, const char *what)
{
    if (rc >= 0) {
        if (r->store_failing)
            log_info(NULL, "state: writes to %s work again",
                     store_path(r->store));
        r->store_failing = false;
        return;
    }
    r->store_errors++;
    if (!r->store_failing)
        log_error(NULL,
                  "state: %s failed: %s (%s); nothing already accepted is "
                  "lost, retrying",
                  what, store_strerror(rc), store_errmsg(r->store));
    r->store_failing = true;
}

static void
arm_store_retry(struct reaper *r)
{
    struct timeval tv = {1, 0};

    evtimer_add(r->store_retry, &tv);
}

static void
on_flush(evutil_socket_t fd, short what, void *arg)
{
    struct reaper *r = arg;
    int rc;

    (void)fd;
    (void)what;
    r->flush_scheduled = false;
    rc = store_flush(r->store);
    store_result(r, rc, "saving container records");
    if (rc < 0)
        arm_store_retry(r);
}

/* Without an upstream, reports.jsonl and the store are where a report
 * goes: it is delivered as it is stored, and retention applies. */
static int
store_add(struct reaper *r, const char *id, const char *cid, const char *json,
          size_t len)
{
    if (r->cfg->upstream_url == NULL)
        return store_add_delivered(r->store, id, cid, json, len,
                                   report_now_ms());
    return store_add_report(r->store, id, cid, json, len, report_now_ms());
}

/* Stores one report (it is already in reports.jsonl). */
static int
store_report(struct reaper *r, const char *id, const char *cid,
             const char *json, size_t len)
{
    int rc = store_add(r, id, cid, json, len);

    if (rc == STORE_DUPLICATE) {
        /* Made before a restart already: stored and delivered once. */
        r->duplicates++;
        log_info(cid, "report %s was already made before a restart", id);
        return 0;
    }
    store_result(r, rc, "storing a report");
    return rc < 0 ? -1 : 0;
}

/* Every report in reports.jsonl so far is in the store too (none is
 * waiting in memory for a full disk to free up): move the journal
 * checkpoint (batched with the next flush; a checkpoint that lags only
 * makes the replay meet duplicates). */
static void
journal_stored(struct reaper *r)
{
    if (r->rl == NULL || r->store == NULL || r->nunsaved > 0)
        return;
    store_result(
        r, store_set_checkpoint(r->store, JOURNAL_KEY, report_log_end(r->rl)),
        "saving the reports.jsonl checkpoint");
    schedule_flush(r);
}

struct replay {
    struct reaper *r;
    size_t lines, recovered, bad;
    bool oom; /* a line could not be read for want of memory */
};

static void keep_unsaved(struct reaper *r, const char *id, const char *cid,
                         const char *json, size_t len);

static void
on_journal_line(const char *line, size_t len, void *arg)
{
    struct replay *rp = arg;
    struct reaper *r = rp->r;
    char id[33], cid[65];
    int rc;

    if (rp->oom)
        return; /* the replay fails; nothing past that line is taken */
    rp->lines++;
    rc = report_line_ids(line, len, id, cid);
    if (rc == -2) {
        rp->oom = true;
        return;
    }
    if (rc != 0) {
        rp->bad++;
        return;
    }
    rc = store_add(r, id, cid, line, len);
    if (rc == STORE_DUPLICATE)
        return; /* the usual case: the checkpoint lagged a little */
    store_result(r, rc, "storing a recovered report");
    if (rc < 0) {
        keep_unsaved(r, id, cid, line, len);
        return;
    }
    rp->recovered++;
}

/*
 * Repairs the store from reports.jsonl, the journal of reports: lines
 * past the checkpoint whose reports the store does not hold (a power loss
 * undid their commit) are stored again, to be delivered. The first start
 * on a state directory (no checkpoint yet) trusts the store as it is.
 */
static int
recover_journal(struct reaper *r)
{
    struct replay rp = {.r = r};
    int64_t from = 0, end = report_log_end(r->rl);

    if (store_get_checkpoint(r->store, JOURNAL_KEY, &from) != STORE_OK) {
        from = end;
    } else if (from > end) {
        log_warn(NULL,
                 "%s is shorter than when last seen (%lld < %lld bytes: "
                 "rotated or truncated?); nothing to recover from it",
                 report_log_path(r->rl), (long long)end, (long long)from);
        from = end;
    }
    if (report_log_replay(r->rl, from, on_journal_line, &rp, &end) != 0) {
        log_error(NULL, "cannot read %s: %m", report_log_path(r->rl));
        return -1;
    }
    if (rp.oom) {
        /* Moving the checkpoint past a line not read could lose its
         * report: fail, and read it again at the next start. */
        log_error(NULL, "out of memory reading %s; not starting",
                  report_log_path(r->rl));
        return -1;
    }
    if (rp.bad > 0)
        log_warn(NULL,
                 "%s: %zu lines past byte %lld are not reports; "
                 "skipped",
                 report_log_path(r->rl), rp.bad, (long long)from);
    if (rp.recovered > 0)
        log_warn(NULL,
                 "recovered %zu reports from %s that the state database "
                 "had lost (a power loss?); they will be delivered",
                 rp.recovered, report_log_path(r->rl));
    journal_stored(r);
    return 0;
}

#define PRUNE_INTERVAL_S 600

/* Retention: delivered reports beyond the configured age or count go;
 * pending and dead ones stay (store_prune never touches them). */
static void
on_prune(evutil_socket_t fd, short what, void *arg)
{
    struct reaper *r = arg;
    const struct config *cfg = r->cfg;
    struct timeval tv = {PRUNE_INTERVAL_S, 0};
    uint64_t n = 0;
    int rc;

    (void)fd;
    (void)what;
    rc = store_prune(r->store, report_now_ms(),
                     cfg->retention_delivered_max_age_ms > 0
                         ? cfg->retention_delivered_max_age_ms
                         : -1,
                     cfg->retention_delivered_max_count > 0
                         ? cfg->retention_delivered_max_count
                         : -1,
                     &n);
    store_result(r, rc, "pruning delivered reports");
    if (n > 0) {
        r->pruned += n;
        log_info(NULL, "state: pruned %llu delivered reports",
                 (unsigned long long)n);
    }
    evtimer_add(r->prune_timer, &tv);
}

static void
keep_unsaved(struct reaper *r, const char *id, const char *cid,
             const char *json, size_t len)
{
    struct unsaved *u;

    if (r->nunsaved >= MAX_UNSAVED || (u = calloc(1, sizeof(*u))) == NULL ||
        (u->json = malloc(len + 1)) == NULL) {
        if (r->nunsaved < MAX_UNSAVED)
            free(u);
        log_error(cid,
                  "report %s could not be stored nor kept in memory; "
                  "it is only in reports.jsonl",
                  id);
        return;
    }
    snprintf(u->report_id, sizeof(u->report_id), "%s", id);
    snprintf(u->container_id, sizeof(u->container_id), "%s", cid);
    memcpy(u->json, json, len);
    u->json[len] = '\0';
    u->len = len;
    u->made_ms = report_now_ms();
    if (r->unsaved_tail != NULL)
        r->unsaved_tail->next = u;
    else
        r->unsaved = u;
    r->unsaved_tail = u;
    r->nunsaved++;
    arm_store_retry(r);
}

static void
on_store_retry(evutil_socket_t fd, short what, void *arg)
{
    struct reaper *r = arg;

    (void)fd;
    (void)what;
    while (r->unsaved != NULL) {
        struct unsaved *u = r->unsaved;

        if (store_report(r, u->report_id, u->container_id, u->json, u->len) !=
            0) {
            arm_store_retry(r);
            return;
        }
        r->unsaved = u->next;
        if (r->unsaved == NULL)
            r->unsaved_tail = NULL;
        r->nunsaved--;
        if (r->report_cb != NULL)
            r->report_cb(u->json, u->len, r->report_arg);
        free(u->json);
        free(u);
    }
    journal_stored(r);
    if (store_pending(r->store) > 0)
        schedule_flush(r);
}

static void
fill_meta(const struct rec *c, struct record_meta *m)
{
    memset(m, 0, sizeof(*m));
    m->name = c->name;
    m->image = c->image;
    m->labels = c->labels;
    m->nlabels = c->nlabels;
    m->policy = c->policy;
    m->force = c->force;
    m->volumes = c->volumes;
    m->report_on = c->report_on;
    m->started_at = c->started_at;
    m->finished_at = c->finished_at;
    m->die_nano = c->die_nano;
    m->exited_wall_ms = c->exited_wall_ms;
}

/* After every step of a managed record: what a restart must not forget.
 * Every record past an exit, or reported and kept; one whose containerd
 * TaskExit is in while the engine has not yet said it exited (its die
 * comes after its own task deletion, which can take more than 30 s):
 * containerd does not replay events, and that TaskExit may be the only
 * true code the node will ever have. And a container that runs, once: a
 * relist would find it again, but not if it exits and is removed (`--rm`)
 * while reapd is down and the engine's events are lost with an engine
 * restart (or pushed out of its 256-event buffer); the record turns that
 * silence into a report whose code is unknown. Only one write per run:
 * nothing in a running record changes. */
static void
persist(struct rec *c)
{
    struct reaper *r = c->r;
    struct record_meta m;
    char *json;
    size_t len;
    bool running;
    int rc;

    if (r->store == NULL)
        return;
    if (c->persist_done) {
        /* The step's DELETE wrote it (durable_before_delete). */
        c->persist_done = false;
        return;
    }
    if (c->lc.exited && c->exited_wall_ms == 0)
        c->exited_wall_ms = report_now_ms();
    if (!c->lc.exited)
        c->exited_wall_ms = 0;
    running =
        c->lc.state == LC_RUNNING && !c->lc.exited && !c->lc.task_exit_seen;
    if (running && !c->lc.ran) {
        /* Created, never started: if it goes unseen, nothing ran. */
        if (c->persisted) {
            store_result(r, store_delete_container(r->store, c->id),
                         "saving container records");
            c->persisted = c->persisted_running = false;
            schedule_flush(r);
        }
        return;
    }
    if (running && c->persisted_running)
        return;
    fill_meta(c, &m);
    json = record_to_json(&c->lc, &m, &len);
    if (json == NULL) {
        log_error(c->id, "out of memory saving its record");
        return;
    }
    rc = store_put_container(r->store, c->id, json, len, report_now_ms());
    store_result(r, rc, "saving container records");
    free(json);
    if (rc >= 0) {
        c->persisted = true;
        c->persisted_running = running;
    }
    schedule_flush(r);
}

/* Records saved by an earlier run: tracked again, resumed once the
 * engine is reachable (on_subscribed). */
static int
load_records(struct reaper *r)
{
    struct store_containers all = {0};
    char err[256];
    size_t i;
    int rc;

    rc = store_get_containers(r->store, &all);
    if (rc < 0) {
        log_error(NULL, "state: cannot read container records: %s",
                  store_errmsg(r->store));
        return -1;
    }
    for (i = 0; i < all.n; i++) {
        struct record *rec;
        const struct record_meta *m;
        struct rec *c;

        if (!docker_valid_id(all.v[i].id) || lookup(r, all.v[i].id)) {
            store_delete_container(r->store, all.v[i].id);
            continue;
        }
        rec = record_parse(all.v[i].json, all.v[i].len, err, sizeof(err));
        if (rec == NULL) {
            log_error(all.v[i].id, "state: dropping an unreadable record: %s",
                      err);
            store_delete_container(r->store, all.v[i].id);
            continue;
        }
        c = rec_new(r, all.v[i].id);
        if (c == NULL) {
            record_free(rec);
            continue;
        }
        m = record_meta(rec);
        /* Truncation, if any, is in the record's lifecycle anomalies. */
        if (set_meta(c, m->name, m->image, m->labels, m->nlabels, false,
                     false) != 0)
            log_error(c->id, "out of memory copying labels");
        c->kind = R_MANAGED;
        c->policy = strdup(m->policy != NULL ? m->policy : "default");
        c->force = m->force;
        c->volumes = m->volumes;
        c->report_on = m->report_on;
        set_str(&c->started_at, m->started_at);
        set_str(&c->finished_at, m->finished_at);
        c->die_nano = m->die_nano;
        c->exited_wall_ms = m->exited_wall_ms;
        c->lc = *record_lc(rec);
        c->persisted = true;
        c->persisted_running = c->lc.state == LC_RUNNING && !c->lc.exited &&
                               !c->lc.task_exit_seen;
        c->resume_pending = true;
        c->loaded = true;
        record_free(rec);
    }
    if (all.n > 0)
        log_info(NULL, "state: %zu container records from the last run",
                 all.n);
    store_containers_free(&all);
    schedule_flush(r);
    return 0;
}

static void
resume_loaded(struct reaper *r)
{
    struct rec **waiting, *c;
    size_t b, n = 0, i;
    int64_t now_wall = report_now_ms();

    waiting = calloc(r->nrecs ? r->nrecs : 1, sizeof(*waiting));
    if (waiting == NULL)
        return;
    for (b = 0; b < r->nbuckets; b++)
        for (c = r->buckets[b]; c != NULL; c = c->hnext)
            if (c->resume_pending)
                waiting[n++] = c;
    for (i = 0; i < n; i++) {
        struct lc_result res;
        uint64_t since = 0;

        c = waiting[i];
        c->resume_pending = false;
        if (c->exited_wall_ms > 0 && now_wall > c->exited_wall_ms)
            since = (uint64_t)(now_wall - c->exited_wall_ms);
        lc_resume(&c->lc, loop_now_ms(), since, &res);
        if (apply(c, &res))
            persist(c);
    }
    free(waiting);
}

/* ---- reports ---------------------------------------------------------- */

/*
 * The same exit, reported by an earlier run of reapd, must not be
 * reported again under another id. Two ways it comes back:
 * - a die replayed after a crash, for an exit reported from its
 *   FinishedAt: the container is gone, so only the die's time is left
 *   and the id would differ (a report at or after the die covers it);
 * - a record loaded from the store whose last change (its deletion, a
 *   later state) was never written (killed while the state's disk was
 *   full): if that run reported the container removed, nothing of it can
 *   exit again (container ids are never reused), so whatever this run
 *   would say is that same exit.
 * The earlier report may still wait in memory for the store (its disk
 * full; a report recovered from the journal at this start is one).
 * Only records that may have been reported before pay for the lookup.
 * (Found by the chaos soak: one exit, two report ids.)
 *
 * covers: whether an earlier report of c's container (made at `made_ms`,
 * its line `body`, NULL if not at hand) is of the exit c would report.
 */
static const char *
covers(const struct rec *c, int64_t made_ms, const char *body, size_t len)
{
    /* A second of slack: the die's time is the engine's clock. */
    if (c->finished_at == NULL && c->die_nano > 0 &&
        made_ms >= c->die_nano / 1000000 - 1000)
        return "the exit replayed after a restart was reported already";
    if (c->loaded && body != NULL && report_line_removed(body, len) == 1)
        return "an earlier run reported it removed already";
    return NULL;
}

static bool
already_reported(const struct rec *c)
{
    struct store_report prev, full;
    const struct unsaved *u;
    bool die_only = c->finished_at == NULL && c->die_nano > 0;
    const char *why = NULL, *id = NULL;

    if (!die_only && !c->loaded)
        return false;
    for (u = c->r->unsaved; u != NULL && why == NULL; u = u->next)
        if (strcmp(u->container_id, c->id) == 0 &&
            (why = covers(c, u->made_ms, u->json, u->len)) != NULL)
            id = u->report_id;
    if (why != NULL) {
        log_info(c->id, "%s (report %s, not yet stored); not reported again",
                 why, id);
        return true;
    }
    if (c->r->store == NULL ||
        store_latest_report(c->r->store, c->id, &prev) != STORE_OK)
        return false;
    why = covers(c, prev.created_ms, NULL, 0);
    if (why == NULL && c->loaded &&
        store_get_report(c->r->store, prev.report_id, true, &full) ==
            STORE_OK) {
        why = covers(c, prev.created_ms, full.body, full.body_len);
        store_report_clear(&full);
    }
    if (why != NULL)
        log_info(c->id, "%s (report %s); not reported again", why,
                 prev.report_id);
    store_report_clear(&prev);
    return why != NULL;
}

/*
 * Exit to confirmed cleanup. The engine's FinishedAt is the real exit;
 * reapd may learn of it much later (dockerd emits die only after its own
 * task deletion finished or timed out), and that wait is exactly what an
 * operator needs to see. Same host, same clock. Without FinishedAt, the
 * time since reapd saw the exit.
 */
static uint64_t
cleanup_ms(const struct rec *c)
{
    int64_t fin, now = report_now_ms();

    if (c->finished_at != NULL &&
        report_parse_time(c->finished_at, &fin) == 0 && now >= fin &&
        (uint64_t)(now - fin) >= c->lc.cleanup_ms)
        return (uint64_t)(now - fin);
    return c->lc.cleanup_ms;
}

/* The `result` label of the cleanup histogram. A give-up wins over
 * "removed": the cleanup as a whole was not confirmed in time. */
static enum reaper_cleanup
cleanup_result(const struct lc *lc)
{
    if (lc->anomalies & LC_AN_GAVE_UP)
        return REAPER_CLEANUP_GAVE_UP;
    if (lc->removed)
        return REAPER_CLEANUP_REMOVED;
    if (lc->p.action == POLICY_KEEP)
        return REAPER_CLEANUP_KEPT;
    return REAPER_CLEANUP_UNCONFIRMED;
}

/* false only when the report could not be made for want of memory (then
 * nothing of it was written): make it again later. */
static bool
make_report(struct rec *c)
{
    struct reaper *r = c->r;
    const struct lc *lc = &c->lc;
    struct report rep;
    const char *anomalies[16];
    char now[40], key[40];
    const char *exit_key;
    char *json;
    size_t len, n = 0;
    uint32_t bit;
    bool journaled;
    int rc;

    if (!c->report_on)
        return true;
    memset(&rep, 0, sizeof(rep));
    rep.node = r->cfg->node;
    rep.container_id = c->id;
    rep.name = c->name;
    rep.image = c->image;
    rep.labels = c->labels;
    rep.nlabels = c->nlabels;
    rep.policy = c->policy;
    rep.action = policy_action_name(lc->p.action);
    rep.exit_known = lc->exit_known;
    rep.exit_code = lc->exit_code;
    rep.exit_code_source = lc_source_name(lc->source);
    rep.has_engine_exit_code = lc->die_has_code;
    rep.engine_exit_code = lc->die_code;
    rep.oom_killed = lc->oom_killed;
    rep.started_at = c->started_at;
    rep.finished_at = c->finished_at;
    rep.removed = lc->removed;
    rep.task_deleted = lc->task_deleted;
    rep.cleanup_ms = cleanup_ms(c);
    rep.delete_attempts = lc->delete_attempts;
    for (bit = 1; bit != 0 && n < 16; bit <<= 1)
        if ((lc->anomalies & bit) && lc_anomaly_name(bit) != NULL)
            anomalies[n++] = lc_anomaly_name(bit);
    rep.anomalies = anomalies;
    rep.nanomalies = n;
    rep.removed_by = !lc->removed        ? NULL
                     : lc->removed_by_us ? "reapd"
                                         : "other";
    report_now_rfc3339(now, sizeof(now));
    rep.reported_at = now;
    if (c->finished_at != NULL) {
        exit_key = c->finished_at;
    } else if (c->die_nano != 0) {
        snprintf(key, sizeof(key), "die:%lld", (long long)c->die_nano);
        exit_key = key;
    } else {
        exit_key = "unknown";
    }
    report_make_id(&rep, exit_key);
    if (already_reported(c))
        return true;

    json = report_to_json(&rep, &len);
    if (json == NULL) {
        r->st.report_errors++;
        log_error(c->id, "out of memory making a report; again in 1 s");
        return false;
    }
    hist_observe(&r->st.cleanup[cleanup_result(lc)], cleanup_bounds,
                 NBOUNDS(cleanup_bounds), (double)rep.cleanup_ms / 1000.0);
    /* reports.jsonl first, then the store: a crash between the two
     * leaves the record unforgotten, so the same report (same id) is made
     * again after the restart; never the other way round. */
    journaled = r->rl != NULL && report_log_append(r->rl, json, len) == 0;
    if (r->rl != NULL && !journaled) {
        r->st.report_errors++;
        log_error(c->id, "cannot append the report to %s: %m",
                  report_log_path(r->rl));
    }
    if (r->store != NULL) {
        /* Not in the journal: the store's own commit must be synced. */
        store_set_journaled(r->store, journaled);
        rc = store_report(r, rep.report_id, c->id, json, len);
        store_set_journaled(r->store, r->rl != NULL);
        if (rc != 0) {
            keep_unsaved(r, rep.report_id, c->id, json, len);
            free(json);
            return true;
        }
        journal_stored(r);
    }
    r->st.reports++;
    if (r->obs_ns != 0)
        hist_observe(&r->st.report_latency, latency_bounds,
                     NBOUNDS(latency_bounds),
                     (double)(loop_now_ns() - r->obs_ns) / 1e9);
    if (lc->anomalies & LC_AN_EXIT_CODE_MISMATCH)
        r->st.exit_code_mismatches++;
    if (lc->anomalies & LC_AN_GAVE_UP)
        r->st.gave_up++;
    if (lc->exit_known)
        log_info(c->id,
                 "report %s: exit_code %d (%s), removed %s, cleanup %llu ms",
                 rep.report_id, lc->exit_code, rep.exit_code_source,
                 lc->removed ? "true" : "false",
                 (unsigned long long)rep.cleanup_ms);
    else
        log_info(c->id, "report %s: exit code unknown, removed %s",
                 rep.report_id, lc->removed ? "true" : "false");
    if (r->report_cb != NULL)
        r->report_cb(json, len, r->report_arg);
    free(json);
    return true;
}

static void
on_report_again(evutil_socket_t fd, short what, void *arg)
{
    struct rec *c = arg;

    (void)fd;
    (void)what;
    if (!make_report(c)) {
        arm(c, &c->again, on_report_again, 1000);
        return;
    }
    c->report_due = false;
    if (c->forget_due)
        forget(c);
}

/* ---- carrying out actions ---------------------------------------------- */

static void persist(struct rec *c);

/* Writes c's record as it stands and flushes every pending change; false
 * (logged once by store_result) when the state cannot be written. */
static bool
durable_before_delete(struct rec *c)
{
    struct reaper *r = c->r;
    int rc;

    if (r->store == NULL)
        return true;
    persist(c);
    rc = store_flush(r->store);
    store_result(r, rc, "saving container records");
    /* The step's own persist, after its actions, would write the same. */
    c->persist_done = true;
    if (rc < 0) {
        r->st.deletes_held++;
        log_debug(c->id, "DELETE held: its record cannot be written yet");
        return false;
    }
    return true;
}

static void task_list(struct reaper *r);

/* Returns false when the record was freed. */
static bool
apply(struct rec *c, const struct lc_result *res)
{
    struct reaper *r = c->r;
    size_t i;

    if (res->from != res->to)
        log_transition(c->id, lc_state_name(res->from), lc_state_name(res->to),
                       res->reason);
    else if (res->reason != NULL)
        log_debug(c->id, "%s: %s", lc_state_name(res->to), res->reason);

    for (i = 0; i < res->nacts; i++) {
        const struct lc_act *a = &res->acts[i];

        switch (a->kind) {
        case ACT_INSPECT:
            c->inspect_t0 = loop_now_ms();
            c->inspect_req = docker_inspect(r->d, c->id, on_inspect, c);
            if (c->inspect_req == NULL) {
                /* Not negotiated or out of memory: try again soon. */
                c->lc.inspect_inflight = false;
                arm(c, &c->step, on_step, 1000);
            }
            break;
        case ACT_DELETE:
            /* The container is the exit's record until reapd's own is on
             * disk: removed first, a kill -9 while the state cannot be
             * written (disk full) would leave nothing that says it
             * exited. So its record, saying it is being removed, is
             * written (and every change before it) first; while that
             * fails, the DELETE waits. */
            c->delete_req = NULL;
            if (durable_before_delete(c))
                c->delete_req = docker_delete(r->d, c->id, c->force,
                                              c->volumes, on_delete, c);
            c->delete_t0 = loop_now_ms();
            if (c->delete_req == NULL) {
                c->lc.delete_inflight = false;
                arm(c, &c->step, on_step, 1000);
            }
            break;
        case ACT_STEP_TIMER:
            arm(c, &c->step, on_step, a->ms);
            break;
        case ACT_STEP_CANCEL:
            disarm(c->step);
            break;
        case ACT_DEADLINES:
            if (a->ms > 0)
                arm(c, &c->warn, on_warn, a->ms);
            if (a->ms2 > 0)
                arm(c, &c->giveup, on_giveup, a->ms2);
            break;
        case ACT_DEADLINES_CANCEL:
            disarm(c->warn);
            disarm(c->giveup);
            break;
        case ACT_WANT_SLOT:
            if (!c->slot_queued && !c->slot_held) {
                c->slot_queued = true;
                c->qprev = r->qtail;
                if (r->qtail != NULL)
                    r->qtail->qnext = c;
                else
                    r->qhead = c;
                r->qtail = c;
                event_active(r->grant_ev, EV_TIMEOUT, 0);
            }
            break;
        case ACT_DROP_SLOT:
            drop_slot(c);
            break;
        case ACT_WARN:
            r->st.cleanup_slow++;
            log_warn(c->id,
                     "cleanup still not confirmed after %lld ms (state %s); "
                     "still waiting",
                     (long long)c->lc.p.warn_after_ms,
                     lc_state_name(c->lc.state));
            break;
        case ACT_TASK_GET:
            c->task_t0 = loop_now_ms();
            c->task_req = ctrd_task_get(r->ctrd, c->id, on_task_get, c);
            if (c->task_req == NULL) {
                c->lc.task_get_inflight = false;
                arm(c, &c->step, on_step, 1000);
            }
            break;
        case ACT_TASK_DELETE:
            c->task_del_t0 = loop_now_ms();
            c->task_del_req =
                ctrd_task_delete(r->ctrd, c->id, on_task_delete, c);
            if (c->task_del_req == NULL) {
                c->lc.task_delete_inflight = false;
                arm(c, &c->step, on_step, 1000);
            }
            break;
        case ACT_CTR_DELETE:
            c->ctr_del_t0 = loop_now_ms();
            c->ctr_del_req =
                ctrd_container_delete(r->ctrd, c->id, on_ctr_delete, c);
            if (c->ctr_del_req == NULL) {
                c->lc.ctr_delete_inflight = false;
                arm(c, &c->step, on_step, 1000);
            }
            break;
        case ACT_TASK_LIST:
            task_list(r); /* one at a time for the node */
            break;
        case ACT_REPORT:
            if (!make_report(c)) {
                c->report_due = true;
                arm(c, &c->again, on_report_again, 1000);
            }
            break;
        case ACT_FORGET:
            if (c->report_due) {
                c->forget_due = true; /* after the report */
                break;
            }
            forget(c);
            return false;
        }
    }
    return true;
}

/* Returns false when the record was freed. */
static bool
feed(struct rec *c, const struct lc_obs *obs)
{
    struct reaper *r = c->r;
    struct lc_result res;
    struct lc_obs o = *obs;

    if (c->kind == R_IGNORED)
        return true;
    if (c->kind == R_DISCOVERING) {
        if (c->pend == NULL)
            c->pend = calloc(MAX_PENDING, sizeof(*c->pend));
        if (c->pend != NULL && c->npend < MAX_PENDING)
            c->pend[c->npend++] = o;
        else
            log_warn(c->id, "too many events before its labels were known;"
                            " the relist will reconcile");
        return true;
    }
    r->obs_ns = loop_now_ns();
    o.now_ms = loop_now_ms();
    o.rnd = backoff_rand(&r->rnd);
    lc_step(&c->lc, &o, &res);
    if (!apply(c, &res)) {
        r->obs_ns = 0;
        return false;
    }
    r->obs_ns = 0;
    persist(c);
    return true;
}

static void
forget(struct rec *c)
{
    if (c->persisted && c->r->store != NULL) {
        store_result(c->r, store_delete_container(c->r->store, c->id),
                     "saving container records");
        schedule_flush(c->r);
    }
    docker_cancel(c->meta_req);
    docker_cancel(c->inspect_req);
    docker_cancel(c->delete_req);
    ctrd_cancel(c->task_req);
    ctrd_cancel(c->task_del_req);
    ctrd_cancel(c->ctr_del_req);
    drop_slot(c);
    if (c->step != NULL)
        event_free(c->step);
    if (c->warn != NULL)
        event_free(c->warn);
    if (c->giveup != NULL)
        event_free(c->giveup);
    if (c->again != NULL)
        event_free(c->again);
    rec_unlink(c);
    free_meta(c);
    free(c->pend);
    free(c->policy);
    free(c->started_at);
    free(c->finished_at);
    free(c);
}

/* ---- deciding the policy ------------------------------------------------ */

/* Metadata known: choose the policy and start the lifecycle. false when
 * it could not (out of memory): nothing changed, decide again later. */
static bool
decide(struct rec *c, bool found, const struct lc_inspect *state)
{
    struct reaper *r = c->r;
    const struct config *cfg = r->cfg;
    const struct policy *p = NULL;
    enum policy_action a;
    struct lc_params lp;
    struct lc_obs *pend = c->pend, o;
    size_t npend = c->npend, i;
    char *policy = NULL;

    /* A glob must not match a prefix: a truncated name or image counts as
     * absent. A truncated label value cannot equal a policy value, and a
     * label a policy names is never dropped (bounds.h). */
    a = policy_decide(&cfg->policies, c->meta_cut ? NULL : c->name,
                      c->meta_cut ? NULL : c->image, c->labels, c->nlabels,
                      &p);
    if (a != POLICY_IGNORE) {
        policy = strdup(p != NULL ? p->name : "default");
        if (policy == NULL)
            return false;
    }
    c->pend = NULL;
    c->npend = 0;
    if (a == POLICY_IGNORE) {
        c->kind = R_IGNORED;
        free(pend);
        free_meta(c); /* an ignored record is just its id */
        return true;
    }
    c->kind = R_MANAGED;
    c->policy = policy;
    c->force = p != NULL ? p->force : true;
    c->volumes = p != NULL ? p->remove_volumes : false;
    c->report_on = p != NULL ? p->report : true;
    memset(&lp, 0, sizeof(lp));
    lp.action = a;
    lp.delay_ms = p != NULL ? p->delay_ms : 0;
    lp.poll_interval_ms = cfg->delete_poll_interval_ms;
    lp.warn_after_ms = cfg->delete_warn_after_ms;
    lp.give_up_after_ms = cfg->delete_give_up_after_ms;
    lp.retry_base_ms = cfg->delete_retry_base_ms;
    lp.retry_max_ms = cfg->delete_retry_max_ms;
    lp.containerd = r->ctrd != NULL;
    lp.reap_leaked_tasks = p != NULL ? p->reap_leaked_tasks : true;
    lp.labels_truncated = c->labels_cut;
    lp.metadata_truncated = c->meta_cut;
    lc_init(&c->lc, &lp);
    if (c->labels_cut)
        r->st.labels_truncated++;
    if (c->meta_cut)
        r->st.metadata_truncated++;
    log_info(c->id, "tracking %s (image %s) under policy \"%s\": %s",
             c->name ? c->name : "?", c->image ? c->image : "?", c->policy,
             policy_action_name(a));

    for (i = 0; i < npend; i++)
        if (!feed(c, &pend[i])) {
            free(pend);
            return true; /* forgotten (e.g. destroyed before it ran) */
        }
    free(pend);
    memset(&o, 0, sizeof(o));
    if (found) {
        o.kind = OBS_FOUND;
        o.inspect = *state;
    } else {
        o.kind = OBS_ABSENT;
    }
    feed(c, &o);
    return true;
}

static void on_meta_step(evutil_socket_t fd, short what, void *arg);

/* Could not decide for want of memory: try again after a backoff (the
 * container is listed again; nothing was taken from its record). */
static void
decide_later(struct rec *c)
{
    c->kind = R_DISCOVERING;
    c->meta_failures++;
    log_error(c->id, "out of memory deciding its policy; deciding later");
    arm(c, &c->step, on_meta_step,
        backoff_delay_ms(c->meta_failures, 250, 10000,
                         backoff_rand(&c->r->rnd)));
}

static void meta_fetch(struct rec *c);

/*
 * Decides on a list answer. Never on partial data: when its labels
 * cannot be copied (out of memory) the container stays undecided and is
 * listed again after a backoff.
 */
static void
decide_listed(struct rec *c, const struct docker_container *dc)
{
    if (meta_from_list(c, dc) != 0 || !decide(c, true, &dc->state))
        decide_later(c);
}

static void
on_meta_step(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    meta_fetch(arg);
}

static void
on_meta(enum docker_status st, const struct docker_container *cs, size_t n,
        const char *msg, void *arg)
{
    struct rec *c = arg;
    size_t i;

    c->meta_req = NULL;
    call_done(c->r, REAPER_CALL_DOCKER_LIST, c->meta_t0);
    if (st != DOCKER_OK) {
        c->meta_failures++;
        log_warn(c->id, "%s; retrying", msg);
        arm(c, &c->step, on_meta_step,
            backoff_delay_ms(c->meta_failures, 250, 10000,
                             backoff_rand(&c->r->rnd)));
        return;
    }
    for (i = 0; i < n; i++) {
        if (strcmp(cs[i].id, c->id) == 0) {
            decide_listed(c, &cs[i]);
            return;
        }
    }
    /* Gone already: decide on what its events said, if they said it. */
    if (!c->meta_known) {
        log_error(c->id, "gone before its labels could be kept (out of "
                         "memory): no policy can be decided for it");
        c->r->st.undecidable++;
        forget(c);
        return;
    }
    if (!decide(c, false, NULL))
        decide_later(c);
}

static void
meta_fetch(struct rec *c)
{
    c->meta_t0 = loop_now_ms();
    c->meta_req = docker_list(c->r->d, c->id, on_meta, c);
    if (c->meta_req == NULL)
        arm(c, &c->step, on_meta_step, 1000);
}

/* ---- events ----------------------------------------------------------- */

static bool
is_meta_attr(const char *k)
{
    return strcmp(k, "name") == 0 || strcmp(k, "image") == 0 ||
           strcmp(k, "exitCode") == 0 || strcmp(k, "signal") == 0 ||
           strcmp(k, "execID") == 0 || strcmp(k, "execDuration") == 0;
}

/* Until list answers, the event's attributes are the best guess of the
 * labels (the engine merges labels with a few fields of its own). The
 * events parser has bounded them already (bounds.h). */
static void
meta_from_event(struct rec *c, const struct docker_event *ev)
{
    struct label *labels;
    size_t i, n = 0;
    bool cut = ev->attrs_dropped > 0;

    labels = calloc(ev->nattrs ? ev->nattrs : 1, sizeof(*labels));
    if (labels == NULL) {
        log_error(c->id, "out of memory copying labels");
        return;
    }
    for (i = 0; i < ev->nattrs; i++) {
        if (is_meta_attr(ev->attrs[i].key))
            continue;
        labels[n].key = (char *)ev->attrs[i].key;
        labels[n].value = (char *)ev->attrs[i].value;
        cut = cut || ev->attrs[i].truncated;
        n++;
    }
    if (set_meta(c, ev->name, ev->image, labels, n, cut,
                 ev->name_truncated || ev->image_truncated) != 0)
        log_error(c->id, "out of memory copying labels");
    free(labels);
}

static void
tombstone(struct reaper *r, const char *id)
{
    if (r->relist_req == NULL || r->ntombs >= MAX_TOMBSTONE)
        return;
    memcpy(r->tombs[r->ntombs++], id, 65);
}

static bool
is_tombstoned(const struct reaper *r, const char *id)
{
    size_t i;

    for (i = 0; i < r->ntombs; i++)
        if (memcmp(r->tombs[i], id, 64) == 0)
            return true;
    return false;
}

static void
on_event(const struct docker_event *ev, void *arg)
{
    struct reaper *r = arg;
    struct rec *c;
    struct lc_obs o;

    r->st.events++;
    if (r->store != NULL && ev->time_nano > 0) {
        store_result(
            r, store_set_checkpoint(r->store, CHECKPOINT_KEY, ev->time_nano),
            "saving the events checkpoint");
        schedule_flush(r);
    }
    memset(&o, 0, sizeof(o));
    switch (ev->action) {
    case EV_START:
    case EV_RESTART:
        o.kind = OBS_EVENT_START;
        break;
    case EV_DIE:
        audit_activity(r);
        o.kind = OBS_EVENT_DIE;
        o.has_exit_code = ev->has_exit_code;
        o.exit_code = ev->exit_code;
        break;
    case EV_DESTROY:
        audit_activity(r);
        o.kind = OBS_EVENT_DESTROY;
        tombstone(r, ev->id);
        break;
    case EV_CREATE:
    case EV_RENAME:
        o.kind = OBS_NKINDS; /* metadata only */
        break;
    default:
        return;
    }
    c = lookup(r, ev->id);
    if (c == NULL) {
        if (ev->action == EV_DESTROY)
            return;
        c = rec_new(r, ev->id);
        if (c == NULL)
            return;
        meta_from_event(c, ev);
        meta_fetch(c);
    } else if (c->kind == R_IGNORED) {
        if (ev->action == EV_DESTROY)
            forget(c);
        return;
    }
    if (ev->action == EV_RENAME && ev->name != NULL &&
        set_meta(c, ev->name, c->image, c->labels, c->nlabels, c->labels_cut,
                 c->meta_cut || ev->name_truncated) != 0)
        log_error(c->id, "out of memory copying its new name");
    else if (ev->action == EV_RENAME && c->persisted_running) {
        /* Its record carries the name a report after a restart uses. */
        c->persisted_running = false;
        persist(c);
    }
    if (ev->action == EV_DIE)
        c->die_nano = ev->time_nano;
    if (o.kind != OBS_NKINDS)
        feed(c, &o);
}

/* ---- relists ---------------------------------------------------------- */

static void relist(struct reaper *r);

static void
on_relist_timer(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    relist(arg);
}

static void
on_relist(enum docker_status st, const struct docker_container *cs, size_t n,
          const char *msg, void *arg)
{
    struct reaper *r = arg;
    uint64_t gen = r->relist_gen;
    struct rec **absent = NULL;
    size_t i, b, nabsent = 0;
    struct lc_obs o;
    struct timeval tv;
    bool incomplete = false;

    r->relist_req = NULL;
    call_done(r, REAPER_CALL_DOCKER_LIST, r->relist_t0);
    if (st != DOCKER_OK) {
        uint64_t ms = backoff_delay_ms(
            ++r->relist_failures, 250,
            (uint64_t)r->cfg->docker_reconnect_max_ms, backoff_rand(&r->rnd));

        log_warn(NULL, "relist failed: %s; retrying in %llu ms", msg,
                 (unsigned long long)ms);
        tv.tv_sec = (time_t)(ms / 1000);
        tv.tv_usec = (suseconds_t)((ms % 1000) * 1000);
        evtimer_add(r->relist_timer, &tv);
        r->ntombs = 0;
        return;
    }
    r->relist_failures = 0;
    r->st.relists++;

    /* Mark who is listed, by visiting each entry. */
    for (i = 0; i < n; i++) {
        struct rec *c;

        if (is_tombstoned(r, cs[i].id))
            continue; /* destroyed after the snapshot was taken */
        c = lookup(r, cs[i].id);
        if (c == NULL) {
            c = rec_new(r, cs[i].id);
            if (c == NULL) {
                incomplete = true; /* out of memory: seen next time */
                continue;
            }
            decide_listed(c, &cs[i]);
            continue;
        }
        c->born_relist = gen + 1; /* listed: not absent */
        if (c->kind == R_DISCOVERING) {
            docker_cancel(c->meta_req);
            c->meta_req = NULL;
            disarm(c->step);
            decide_listed(c, &cs[i]);
        } else if (c->kind == R_MANAGED) {
            memset(&o, 0, sizeof(o));
            o.kind = OBS_FOUND;
            o.inspect = cs[i].state;
            o.after_outage = r->outage_relist;
            feed(c, &o);
        }
    }
    /* Records known before this relist was sent and not listed: gone. */
    absent = calloc(r->nrecs ? r->nrecs : 1, sizeof(*absent));
    if (absent != NULL) {
        for (b = 0; b < r->nbuckets; b++) {
            struct rec *c;

            for (c = r->buckets[b]; c != NULL; c = c->hnext)
                if (c->born_relist < gen && c->kind != R_DISCOVERING)
                    absent[nabsent++] = c;
        }
        for (i = 0; i < nabsent; i++) {
            struct rec *c = absent[i];

            if (c->kind == R_IGNORED) {
                forget(c);
                continue;
            }
            memset(&o, 0, sizeof(o));
            o.kind = OBS_ABSENT;
            feed(c, &o);
        }
        free(absent);
    } else {
        incomplete = true;
    }
    /* Everyone still here is now "before" the next relist. */
    for (b = 0; b < r->nbuckets; b++) {
        struct rec *c;

        for (c = r->buckets[b]; c != NULL; c = c->hnext)
            if (c->born_relist > gen)
                c->born_relist = gen;
    }
    r->ntombs = 0;
    if (!r->relisted)
        log_info(NULL,
                 "reconciled with the engine: %zu containers listed, "
                 "%zu tracked",
                 n, r->nrecs);
    r->relisted = true;
    if (incomplete) {
        /* Out of memory for part of it: another relist, soon, finds what
         * this one could not take in. */
        log_error(NULL, "out of memory taking in the relist; relisting "
                        "again in 1 s");
        tv.tv_sec = 1;
        tv.tv_usec = 0;
        evtimer_add(r->relist_timer, &tv);
    } else {
        r->outage_relist = false;
    }
    /* The answer (megabytes with thousands of containers) is freed when
     * this callback returns; the heap it grew would otherwise stay
     * resident for good. */
    event_active(r->trim_ev, EV_TIMEOUT, 0);
}

static void
on_trim(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
#if defined(__GLIBC__)
    malloc_trim(0);
#endif
}

static void
relist(struct reaper *r)
{
    if (r->relist_req != NULL) {
        docker_cancel(r->relist_req);
        r->relist_req = NULL;
    }
    r->ntombs = 0;
    r->relist_gen++;
    r->relist_t0 = loop_now_ms();
    r->relist_req = docker_list(r->d, NULL, on_relist, r);
    if (r->relist_req == NULL) {
        struct timeval tv = {1, 0};

        evtimer_add(r->relist_timer, &tv);
    }
}

/* Events were stepped over: a container may have exited unseen. A
 * relist finds it; bursts of bad events share one, a second later. */
static void
on_gap(void *arg)
{
    struct reaper *r = arg;
    struct timeval tv = {1, 0};

    if (!evtimer_pending(r->relist_timer, NULL))
        evtimer_add(r->relist_timer, &tv);
}

static void
on_subscribed(void *arg)
{
    struct reaper *r = arg;

    log_info(NULL, "docker events: subscribed (API %s); relisting",
             docker_api_version(r->d));
    r->relisted = false;
    r->lost_at_ms = 0;
    if (docker_watch_after_outage(r->d) || r->outage_since_ms != 0) {
        int64_t now = report_now_ms();
        size_t k = r->noutages++ % OUTAGE_SPANS;

        log_warn(NULL, "docker: the engine was down; containers found "
                       "exited now exited without a die event");
        r->outage_relist = docker_watch_after_outage(r->d);
        r->outages[k].from = r->outage_since_ms ? r->outage_since_ms : now;
        r->outages[k].to = now;
        r->outage_since_ms = 0;
        if (r->store != NULL)
            store_result(r, store_set_checkpoint(r->store, OUTAGE_KEY, 0),
                         "saving the events checkpoint");
    }
    evtimer_del(r->relist_timer);
    /* The engine answers now: records of the last run pick up where they
     * stood, before the relist reconciles them. */
    resume_loaded(r);
    relist(r);
}

static void
on_lost(const char *why, uint64_t retry_ms, void *arg)
{
    struct reaper *r = arg;

    r->relisted = false;
    if (r->lost_at_ms == 0)
        r->lost_at_ms = report_now_ms();
    /* The engine itself is down: said in the state at once, so that a
     * reapd restarted before it is back knows. */
    if (r->outage_since_ms == 0 && docker_watch_unreachable(r->d)) {
        r->outage_since_ms = r->lost_at_ms;
        if (r->store != NULL) {
            store_result(
                r,
                store_set_checkpoint(r->store, OUTAGE_KEY, r->outage_since_ms),
                "saving the events checkpoint");
            schedule_flush(r);
        }
    }
    log_warn(NULL, "%s; reconnecting in %llu ms", why,
             (unsigned long long)retry_ms);
}

/* ---- the containerd channel ------------------------------------------- */

static void audit_schedule(struct reaper *r);

/* A task list is either the reconcile after a (re)subscription or the
 * periodic audit; both are the same walk. */
static bool
task_listed(const struct ctrd_task *ts, size_t n, const char *id)
{
    size_t i;

    for (i = 0; i < n; i++)
        if (strcmp(ts[i].container_id, id) == 0 &&
            (ts[i].id[0] == '\0' || strcmp(ts[i].id, id) == 0))
            return true;
    return false;
}

static struct leak *
leak_find(struct reaper *r, const char *id)
{
    struct leak *lk;

    for (lk = r->leaks; lk != NULL; lk = lk->next)
        if (strcmp(lk->id, id) == 0)
            return lk;
    return NULL;
}

/* Cancelling first means no callback can find the freed entry. */
static void
leak_drop(struct reaper *r, struct leak *lk)
{
    struct leak **pp = &r->leaks;

    while (*pp != NULL && *pp != lk)
        pp = &(*pp)->next;
    if (*pp == lk)
        *pp = lk->next;
    ctrd_cancel(lk->req);
    r->nleaks--;
    free(lk);
}

static void
on_orphan_ctr_deleted(enum ctrd_status st, const char *msg, void *arg)
{
    struct leak *lk = arg;
    struct reaper *r = lk->r;

    lk->req = NULL;
    call_done(r, REAPER_CALL_CONTAINER_DELETE, lk->req_t0);
    if (st == CTRD_FAILED) {
        lk->failures++;
        snprintf(lk->last_error, sizeof(lk->last_error), "%s", msg);
        log_warn(lk->id, "orphan task: Containers.Delete: %s", msg);
        lk->reaping = false; /* the next audit tries again */
        return;
    }
    log_info(lk->id, "orphan task reaped: task and containerd container "
                     "deleted");
    r->orphans_reaped++;
    leak_drop(r, lk);
}

static void
on_orphan_task_deleted(enum ctrd_status st, uint32_t exit_status,
                       const char *msg, void *arg)
{
    struct leak *lk = arg;

    (void)exit_status;
    lk->req = NULL;
    call_done(lk->r, REAPER_CALL_TASK_DELETE, lk->req_t0);
    if (st == CTRD_FAILED) {
        lk->failures++;
        snprintf(lk->last_error, sizeof(lk->last_error), "%s", msg);
        log_warn(lk->id, "orphan task: Tasks.Delete: %s", msg);
        lk->reaping = false;
        return;
    }
    lk->task_deleted = true;
    lk->req_t0 = loop_now_ms();
    lk->req =
        ctrd_container_delete(lk->r->ctrd, lk->id, on_orphan_ctr_deleted, lk);
    if (lk->req == NULL)
        lk->reaping = false;
}

/* Reaps an orphan: only a STOPPED task, only one listed by two audits in a
 * row (so a container the engine is still creating is never mistaken for
 * one), only with containerd.reap_orphans. */
static void
leak_step(struct reaper *r, struct leak *lk)
{
    if (lk->reaping || !r->cfg->containerd_reap_orphans ||
        lk->status != CTRD_TASK_STOPPED || lk->audits_seen < 2)
        return;
    lk->reaping = true;
    log_warn(lk->id, "orphan containerd task (no engine container): "
                     "reaping");
    lk->req_t0 = loop_now_ms();
    if (lk->task_deleted)
        lk->req =
            ctrd_container_delete(r->ctrd, lk->id, on_orphan_ctr_deleted, lk);
    else
        lk->req =
            ctrd_task_delete(r->ctrd, lk->id, on_orphan_task_deleted, lk);
    if (lk->req == NULL)
        lk->reaping = false;
}

static void
audit(struct reaper *r, const struct ctrd_task *ts, size_t n)
{
    struct leak *lk, *next;
    size_t i;

    /* Only against a reconciled table: otherwise "not tracked" means
     * "not listed yet", not "gone". */
    if (!r->relisted)
        return;
    for (i = 0; i < n; i++) {
        const struct ctrd_task *t = &ts[i];

        if (t->id[0] != '\0' && strcmp(t->id, t->container_id) != 0)
            continue; /* an exec, not an init process */
        if (!docker_valid_id(t->container_id) ||
            lookup(r, t->container_id) != NULL)
            continue;
        lk = leak_find(r, t->container_id);
        if (lk == NULL) {
            lk = calloc(1, sizeof(*lk));
            if (lk == NULL)
                continue;
            memcpy(lk->id, t->container_id, 65);
            lk->r = r;
            lk->next = r->leaks;
            r->leaks = lk;
            r->nleaks++;
            log_warn(lk->id,
                     "containerd task without an engine container "
                     "(pid %u, status %d)",
                     t->pid, (int)t->status);
        }
        lk->status = t->status;
        lk->pid = t->pid;
        lk->audits_seen++;
    }
    /* Leaks the list no longer holds were deleted by someone. */
    for (lk = r->leaks; lk != NULL; lk = next) {
        next = lk->next;
        if (!lk->reaping && !task_listed(ts, n, lk->id))
            leak_drop(r, lk);
    }
    for (lk = r->leaks; lk != NULL; lk = lk->next)
        leak_step(r, lk);
}

static void
on_task_list(enum ctrd_status st, const struct ctrd_task *ts, size_t n,
             const char *msg, void *arg)
{
    struct reaper *r = arg;
    size_t b;
    struct rec *c;
    struct rec **notask = NULL;
    size_t nnotask = 0, i;

    r->task_list_req = NULL;
    call_done(r, REAPER_CALL_TASK_LIST, r->task_list_t0);
    if (st != CTRD_OK) {
        log_warn(NULL, "containerd Tasks.List: %s", msg);
        r->audit_due = true;
        audit_schedule(r);
        return;
    }
    /* A task the list no longer holds was deleted, whether or not we saw
     * its /tasks/delete (containerd does not replay events). */
    notask = calloc(r->nrecs ? r->nrecs : 1, sizeof(*notask));
    if (notask != NULL) {
        for (b = 0; b < r->nbuckets; b++)
            for (c = r->buckets[b]; c != NULL; c = c->hnext)
                /* Only exits being cleaned up: a kept container's next
                 * run must not inherit this list's verdict. */
                if (c->kind == R_MANAGED && c->lc.exited &&
                    c->lc.state != LC_KEPT && c->lc.state != LC_ABANDONED &&
                    !c->lc.task_delete_seen && !task_listed(ts, n, c->id))
                    notask[nnotask++] = c;
        for (i = 0; i < nnotask; i++) {
            struct lc_obs o;

            memset(&o, 0, sizeof(o));
            o.kind = OBS_TASK_DELETE_EVENT;
            feed(notask[i], &o);
        }
        free(notask);
    }
    audit(r, ts, n);
    audit_schedule(r);
}

static void
task_list(struct reaper *r)
{
    if (r->task_list_req != NULL)
        return;
    r->task_list_t0 = loop_now_ms();
    r->task_list_req = ctrd_task_list(r->ctrd, on_task_list, r);
    r->audit_due = r->task_list_req == NULL;
    if (r->task_list_req == NULL)
        audit_schedule(r);
}

/* A task may have been left behind: audit within the interval. */
static void
audit_activity(struct reaper *r)
{
    if (r->ctrd == NULL)
        return;
    r->audit_due = true;
    audit_schedule(r);
}

static void
on_audit_timer(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    task_list(arg);
}

static void
audit_schedule(struct reaper *r)
{
    int64_t ms = r->cfg->containerd_audit_interval_ms;
    struct timeval tv;

    if (ms <= 0 || r->audit_timer == NULL ||
        evtimer_pending(r->audit_timer, NULL))
        return;
    /* Leaks known are confirmed (two audits in a row) and reaped by
     * audits; otherwise only activity makes a new one possible. */
    if (!r->audit_due && r->nleaks == 0)
        return;
    tv.tv_sec = (time_t)(ms / 1000);
    tv.tv_usec = (suseconds_t)((ms % 1000) * 1000);
    evtimer_add(r->audit_timer, &tv);
}

static void
on_ctrd_subscribed(void *arg)
{
    struct reaper *r = arg;

    log_info(NULL, "containerd events: subscribed on %s; reconciling tasks",
             ctrd_socket(r->ctrd));
    task_list(r);
}

static void
on_ctrd_event(const struct ctrd_event *ev, void *arg)
{
    struct reaper *r = arg;
    struct rec *c;
    struct lc_obs o;

    if (!docker_valid_id(ev->container_id))
        return;
    if (ev->kind == CTRD_EV_TASK_EXIT || ev->kind == CTRD_EV_TASK_DELETE)
        audit_activity(r);
    c = lookup(r, ev->container_id);
    memset(&o, 0, sizeof(o));
    switch (ev->kind) {
    case CTRD_EV_TASK_EXIT:
        /* Only the init process's exit is the container's. */
        if (ev->id[0] != '\0' && strcmp(ev->id, ev->container_id) != 0)
            return;
        o.kind = OBS_TASK_EXIT;
        o.exit_code = (int)ev->exit_status;
        if (c != NULL)
            log_debug(c->id, "containerd: TaskExit, status %u",
                      ev->exit_status);
        break;
    case CTRD_EV_TASK_DELETE:
        if (ev->id[0] != '\0' && strcmp(ev->id, ev->container_id) != 0)
            return;
        o.kind = OBS_TASK_DELETE_EVENT;
        break;
    default:
        return;
    }
    if (c != NULL && c->kind != R_IGNORED)
        feed(c, &o);
}

static void
on_ctrd_lost(const char *why, uint64_t retry_ms, void *arg)
{
    (void)arg;
    log_warn(NULL, "%s; reconnecting in %llu ms", why,
             (unsigned long long)retry_ms);
}

/* ---- public ----------------------------------------------------------- */

/* The labels the current policies name: kept whatever the input limits. */
static bool
wanted_label(const char *key, size_t len, void *arg)
{
    const struct reaper *r = arg;

    return r->cfg != NULL &&
           policy_set_names_label(&r->cfg->policies, key, len);
}

struct reaper *
reaper_new(struct loop *l, struct docker *d, const struct config *cfg,
           struct report_log *rl)
{
    struct reaper *r = calloc(1, sizeof(*r));

    if (r == NULL)
        return NULL;
    r->l = l;
    r->d = d;
    r->cfg = cfg;
    r->rl = rl;
    r->rnd = (uint32_t)loop_now_ms() ^ ((uint32_t)getpid() << 8) ^ 7u;
    r->nbuckets = 256;
    r->buckets = calloc(r->nbuckets, sizeof(*r->buckets));
    r->tombs = calloc(MAX_TOMBSTONE, sizeof(*r->tombs));
    r->grant_ev = event_new(loop_base(l), -1, 0, on_grant, r);
    r->relist_timer = evtimer_new(loop_base(l), on_relist_timer, r);
    r->trim_ev = event_new(loop_base(l), -1, 0, on_trim, r);
    r->flush_ev = event_new(loop_base(l), -1, 0, on_flush, r);
    r->store_retry = evtimer_new(loop_base(l), on_store_retry, r);
    r->prune_timer = evtimer_new(loop_base(l), on_prune, r);
    if (r->buckets == NULL || r->tombs == NULL || r->grant_ev == NULL ||
        r->relist_timer == NULL || r->trim_ev == NULL || r->flush_ev == NULL ||
        r->store_retry == NULL || r->prune_timer == NULL) {
        reaper_free(r);
        return NULL;
    }
    if (d != NULL)
        docker_set_labels(d, wanted_label, r);
    return r;
}

void
reaper_free(struct reaper *r)
{
    size_t b;

    if (r == NULL)
        return;
    if (r->d != NULL)
        docker_set_labels(r->d, NULL, NULL);
    docker_cancel(r->relist_req);
    ctrd_cancel(r->task_list_req);
    while (r->leaks != NULL)
        leak_drop(r, r->leaks);
    if (r->audit_timer != NULL)
        event_free(r->audit_timer);
    if (r->buckets != NULL) {
        /* Stopping is not forgetting: the records stay in the store. */
        for (b = 0; b < r->nbuckets; b++) {
            struct rec *c;

            for (c = r->buckets[b]; c != NULL; c = c->hnext)
                c->persisted = false;
            while (r->buckets[b] != NULL)
                forget(r->buckets[b]);
        }
    }
    if (r->store != NULL && store_flush(r->store) < 0)
        log_error(NULL, "state: last flush failed: %s",
                  store_errmsg(r->store));
    while (r->unsaved != NULL) {
        struct unsaved *u = r->unsaved;

        r->unsaved = u->next;
        log_error(u->container_id,
                  "report %s not stored at exit; it is "
                  "in reports.jsonl and will be made "
                  "again after the restart",
                  u->report_id);
        free(u->json);
        free(u);
    }
    if (r->flush_ev != NULL)
        event_free(r->flush_ev);
    if (r->store_retry != NULL)
        event_free(r->store_retry);
    if (r->prune_timer != NULL)
        event_free(r->prune_timer);
    if (r->grant_ev != NULL)
        event_free(r->grant_ev);
    if (r->relist_timer != NULL)
        event_free(r->relist_timer);
    if (r->trim_ev != NULL)
        event_free(r->trim_ev);
    free(r->buckets);
    free(r->tombs);
    free(r);
}

void
reaper_set_config(struct reaper *r, const struct config *cfg)
{
    r->cfg = cfg;
    /* max_in_flight may have grown. */
    event_active(r->grant_ev, EV_TIMEOUT, 0);
}

void
reaper_set_containerd(struct reaper *r, struct ctrd *c)
{
    r->ctrd = c;
}

void
reaper_set_store(struct reaper *r, struct store *st)
{
    r->store = st;
}

int
reaper_start(struct reaper *r)
{
    static const struct docker_watch_cbs cbs = {
        .on_subscribed = on_subscribed,
        .on_gap = on_gap,
        .on_event = on_event,
        .on_lost = on_lost,
    };
    static const struct ctrd_watch_cbs ccbs = {
        .on_subscribed = on_ctrd_subscribed,
        .on_event = on_ctrd_event,
        .on_lost = on_ctrd_lost,
    };

    if (r->ctrd != NULL) {
        r->audit_timer = evtimer_new(loop_base(r->l), on_audit_timer, r);
        if (r->audit_timer == NULL || ctrd_watch_start(r->ctrd, &ccbs, r))
            return -1;
    }
    if (r->store != NULL) {
        int64_t since = 0;

        struct timeval soon = {0, 0};

        if (r->rl != NULL) {
            store_set_journaled(r->store, true);
            if (recover_journal(r) != 0)
                return -1;
        }
        if (load_records(r) != 0)
            return -1;
        evtimer_add(r->prune_timer, &soon);
        /* Resume the stream where the last run stopped reading; the
         * relist after subscribing covers what the engine no longer
         * buffers. */
        if (store_get_checkpoint(r->store, CHECKPOINT_KEY, &since) != STORE_OK)
            since = 0;
        /* The last run ended while the engine was down. */
        if (store_get_checkpoint(r->store, OUTAGE_KEY, &r->outage_since_ms) !=
                STORE_OK ||
            r->outage_since_ms < 0)
            r->outage_since_ms = 0;
        return docker_watch_start(r->d, &cbs, r, since);
    }
    return docker_watch_start(r->d, &cbs, r, 0);
}

bool
reaper_ready(const struct reaper *r, const char **why)
{
    const char *w = NULL;

    if (!docker_watch_connected(r->d))
        w = "docker event stream not connected";
    else if (!r->relisted)
        w = "first reconcile with the engine not done";
    if (why != NULL)
        *why = w;
    return w == NULL;
}

void
reaper_stats(const struct reaper *r, struct reaper_stats *out)
{
    size_t b;
    struct rec *c;

    const struct docker_engine_info *eng = docker_engine(r->d);

    *out = r->st;
    out->engine_known = eng != NULL;
    if (eng != NULL)
        out->engine = *eng;
    out->tracked = out->ignored = 0;
    memset(out->by_state, 0, sizeof(out->by_state));
    for (b = 0; b < r->nbuckets; b++) {
        for (c = r->buckets[b]; c != NULL; c = c->hnext) {
            if (c->kind == R_IGNORED) {
                out->ignored++;
            } else if (c->kind == R_MANAGED) {
                out->tracked++;
                out->by_state[c->lc.state]++;
            }
        }
    }
    out->store_errors = r->store_errors;
    out->reports_unsaved = r->nunsaved;
    out->duplicates = r->duplicates;
    out->pruned = r->pruned;
    out->docker_reconnects = docker_watch_reconnects(r->d);
    out->events_rejected = docker_watch_rejected(r->d);
    out->containerd_reconnects =
        r->ctrd != NULL ? ctrd_watch_reconnects(r->ctrd) : 0;
    out->leaked_tasks = r->nleaks;
    out->tasks_reaped = r->tasks_reaped;
    out->orphans_reaped = r->orphans_reaped;
    out->containerd = r->ctrd != NULL;
    out->containerd_connected =
        r->ctrd != NULL && ctrd_watch_connected(r->ctrd);
    out->slots_used = r->slots_used;
    out->slots_waiting = 0;
    for (c = r->qhead; c != NULL; c = c->qnext)
        out->slots_waiting++;
}

void
reaper_foreach(const struct reaper *r, reaper_visit_cb cb, void *arg)
{
    size_t b;
    struct rec *c;
    struct reaper_view v;

    for (b = 0; b < r->nbuckets; b++) {
        for (c = r->buckets[b]; c != NULL; c = c->hnext) {
            if (c->kind != R_MANAGED)
                continue;
            v.id = c->id;
            v.name = c->name;
            v.image = c->image;
            v.policy = c->policy;
            v.state = c->lc.state;
            v.lc = &c->lc;
            cb(&v, arg);
        }
    }
}

void
reaper_foreach_leak(const struct reaper *r, reaper_leak_cb cb, void *arg)
{
    const struct leak *lk;
    struct reaper_leak_view v;

    for (lk = r->leaks; lk != NULL; lk = lk->next) {
        v.id = lk->id;
        v.pid = lk->pid;
        v.stopped = lk->status == CTRD_TASK_STOPPED;
        v.audits_seen = lk->audits_seen;
        v.reaping = lk->reaping;
        v.failures = lk->failures;
        v.last_error = lk->last_error[0] ? lk->last_error : NULL;
        cb(&v, arg);
    }
}

void
reaper_on_report(struct reaper *r, reaper_report_cb cb, void *arg)
{
    r->report_cb = cb;
    r->report_arg = arg;
}
