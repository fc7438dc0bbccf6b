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
 *
 * This file is the driver: it feeds observations to the lifecycle and
 * carries out its actions (engine calls, timers), decides policies,
 * reads the events stream, and alone creates, resumes and forgets
 * records. Below it: ctable.c (the records by id, their metadata),
 * relist.c (the engine's whole list, taken in slices), outage.c (when
 * the engine was down), slots.c (removal slots), taskwatch.c (the
 * containerd channel) and persist.c (the durable layer); those that
 * report back do so only through the callbacks given here.
 */
#include "reaper.h"

#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backoff.h"
#include "config.h"
#include "containerd.h"
#include "docker.h"
#include "hist.h"
#include "log.h"
#include "loop.h"
#include "reaper_int.h"
#include "outage.h"
#include "record.h"
#include "slots.h"
#include "relist.h"
#include "report.h"
#include "store.h"

/* ---- names ------------------------------------------------------------ */

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
reaper_call_done(struct reaper *r, enum reaper_call call, uint64_t t0)
{
    uint64_t now = loop_now_ms();
    size_t n;
    const double *bounds = hist_call_bounds(&n);

    hist_observe(&r->st.calls[call], bounds, n,
                 now >= t0 ? (double)(now - t0) / 1000.0 : 0.0);
}

static struct rec *
rec_new(struct reaper *r, const char *id)
{
    struct rec *c = calloc(1, sizeof(*c));

    if (c == NULL) {
        log_error(id, "out of memory tracking a container");
        return NULL;
    }
    memcpy(c->id, id, CTR_ID_SIZE);
    c->r = r;
    c->kind = R_DISCOVERING;
    c->born_relist = relist_gen(r->relist);
    ctable_add(&r->tab, c);
    return c;
}

/* A tracked container's report says what was cut, also when it is found
 * cut only after it was decided (its event held a shorter name). */
static void
cut_noted(struct rec *c)
{
    uint32_t add;

    if (c->kind != R_MANAGED)
        return;
    add = lc_note_cut(&c->lc, c->labels_cut, c->meta_cut);
    if (add & LC_AN_LABELS_TRUNCATED)
        c->r->st.labels_truncated++;
    if (add & LC_AN_METADATA_TRUNCATED)
        c->r->st.metadata_truncated++;
}

static int
meta_from_list(struct rec *c, const struct docker_container *dc)
{
    int rc = rec_set_meta(c, dc->name, dc->image, dc->labels, dc->nlabels,
                          dc->labels_truncated,
                          dc->name_truncated || dc->image_truncated);

    if (rc == 0)
        cut_noted(c);
    return rc;
}

static void checkpoint_unhold(struct rec *c);
/* feed returns false when the record was freed (forgotten): the caller
 * must not touch it again. */
static bool reaper_feed(struct rec *c, const struct lc_obs *o);
static bool reaper_feed_kind(struct rec *c, enum lc_obs_kind kind);
static void reaper_forget(struct rec *c);

/* A removal slot is granted (slots.c). */
static void
on_slot(struct rec *c)
{
    reaper_feed_kind(c, OBS_SLOT);
}

/* ---- engine calls ----------------------------------------------------- */

static void
inspect_done(enum docker_status st, const struct docker_container *dc,
             const char *msg, void *arg)
{
    struct rec *c = arg;
    struct lc_obs o;

    c->inspect_req = NULL;
    reaper_call_done(c->r, REAPER_CALL_DOCKER_INSPECT, c->inspect_t0);
    memset(&o, 0, sizeof(o));
    switch (st) {
    case DOCKER_OK:
        o.kind = OBS_INSPECT;
        o.inspect = dc->state;
        o.after_outage =
            outage_finished_within(&c->r->outage, dc->finished_at);
        rec_set_str(&c->started_at, dc->started_at);
        rec_set_str(&c->finished_at, dc->finished_at);
        /* The labels as the engine holds them, those named name or image
         * included, for the report (the policy stays as decided: a label
         * a policy names is never hidden). */
        if (c->labels_from_event && meta_from_list(c, dc) == 0) {
            c->labels_from_event = false;
            c->persisted_running = false;
        }
        break;
    case DOCKER_NOT_FOUND:
        o.kind = OBS_INSPECT_GONE;
        break;
    default:
        log_warn(c->id, "%s", msg);
        o.kind = OBS_INSPECT_FAILED;
        break;
    }
    reaper_feed(c, &o);
}

static void
delete_done(enum docker_status st, long status, const char *msg, void *arg)
{
    struct rec *c = arg;
    struct reaper *r = c->r;
    struct lc_obs o;

    c->delete_req = NULL;
    reaper_call_done(r, REAPER_CALL_DOCKER_DELETE, c->delete_t0);
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
    reaper_feed(c, &o);
}

static void
task_get_done(enum ctrd_status st, const struct ctrd_task *t, const char *msg,
              void *arg)
{
    struct rec *c = arg;
    struct lc_obs o;

    c->task_req = NULL;
    reaper_call_done(c->r, REAPER_CALL_TASK_GET, c->task_t0);
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
    reaper_feed(c, &o);
}

static void
task_delete_done(enum ctrd_status st, uint32_t exit_status, const char *msg,
                 void *arg)
{
    struct rec *c = arg;
    struct lc_obs o;

    c->task_del_req = NULL;
    reaper_call_done(c->r, REAPER_CALL_TASK_DELETE, c->task_del_t0);
    memset(&o, 0, sizeof(o));
    if (st == CTRD_FAILED) {
        log_warn(c->id, "containerd Tasks.Delete: %s", msg);
        o.kind = OBS_TASK_DELETE_FAILED;
    } else {
        log_info(c->id,
                 "reaped the task the engine leaked (exit status "
                 "%u)",
                 exit_status);
        c->r->tw.tasks_reaped++;
        o.kind = OBS_TASK_DELETE_DONE;
    }
    reaper_feed(c, &o);
}

static void
ctr_delete_done(enum ctrd_status st, const char *msg, void *arg)
{
    struct rec *c = arg;
    struct lc_obs o;

    c->ctr_del_req = NULL;
    reaper_call_done(c->r, REAPER_CALL_CONTAINER_DELETE, c->ctr_del_t0);
    memset(&o, 0, sizeof(o));
    if (st == CTRD_FAILED) {
        log_warn(c->id, "containerd Containers.Delete: %s", msg);
        o.kind = OBS_CTR_DELETE_FAILED;
    } else {
        o.kind = OBS_CTR_DELETE_DONE;
    }
    reaper_feed(c, &o);
}

/* ---- timers ----------------------------------------------------------- */

static void
step_fired(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    reaper_feed_kind(arg, OBS_TIMER_STEP);
}

static void
warn_fired(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    reaper_feed_kind(arg, OBS_TIMER_WARN);
}

static void
giveup_fired(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    reaper_feed_kind(arg, OBS_TIMER_GIVEUP);
}

static void
disarm(struct event *ev)
{
    if (ev != NULL)
        evtimer_del(ev);
}

/* A call that could not be sent (not negotiated, out of memory): the
 * step timer tries again in a second. */
static void
unsent(struct rec *c, bool *inflight)
{
    *inflight = false;
    rec_arm(c, &c->step, step_fired, 1000);
}

static void
reaper_delete_written(struct rec *c, bool written)
{
    /* A lost task leaves the engine saying "running": only a forced
     * DELETE removes it, and no process is left for it to kill. */
    bool force = c->force || (c->lc.anomalies & LC_AN_TASK_LOST);

    if (written)
        c->delete_req =
            docker_delete(c->r->d, c->id, force, c->volumes, delete_done, c);
    if (c->delete_req == NULL)
        unsent(c, &c->lc.delete_inflight);
}

/*
 * The container is the exit's record until reapd's own is on disk:
 * removed first, a kill -9 while the state cannot be written (disk full)
 * would leave nothing that says it exited. So its record, saying it is
 * being removed, is written first (with a slice of the other pending
 * changes); while that fails, the DELETE waits.
 */
static void
delete_after_record(struct rec *c)
{
    c->delete_req = NULL;
    c->delete_t0 = loop_now_ms();
    switch (persist_before_delete(c)) {
    case PERSIST_NOW:
        reaper_delete_written(c, true);
        break;
    case PERSIST_QUEUED: /* persist.c calls reaper_delete_written */
        break;
    case PERSIST_HELD:
        unsent(c, &c->lc.delete_inflight);
        break;
    }
}

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

    /* A report that ends the record: its record is deleted in the
     * report's own transaction (reportwrite.c), known before it is made. */
    for (i = 0; i < res->nacts; i++)
        if (res->acts[i].kind == ACT_FORGET)
            c->forget_due = true;
    for (i = 0; i < res->nacts; i++) {
        const struct lc_act *a = &res->acts[i];

        switch (a->kind) {
        case ACT_INSPECT:
            c->inspect_t0 = loop_now_ms();
            c->inspect_req = docker_inspect(r->d, c->id, inspect_done, c);
            if (c->inspect_req == NULL)
                unsent(c, &c->lc.inspect_inflight);
            break;
        case ACT_DELETE:
            delete_after_record(c);
            break;
        case ACT_STEP_TIMER:
            rec_arm(c, &c->step, step_fired, a->ms);
            break;
        case ACT_STEP_CANCEL:
            disarm(c->step);
            break;
        case ACT_DEADLINES:
            if (a->ms > 0)
                rec_arm(c, &c->warn, warn_fired, a->ms);
            if (a->ms2 > 0)
                rec_arm(c, &c->giveup, giveup_fired, a->ms2);
            break;
        case ACT_DEADLINES_CANCEL:
            disarm(c->warn);
            disarm(c->giveup);
            break;
        case ACT_WANT_SLOT:
            slots_want(&c->r->slots, c);
            break;
        case ACT_DROP_SLOT:
            slots_drop(&c->r->slots, c);
            break;
        case ACT_WARN:
            r->st.cleanup_slow++;
            log_warn(c->id,
                     "cleanup still not confirmed after %lld ms "
                     "(state %s); still waiting",
                     (long long)c->lc.p.warn_after_ms,
                     lc_state_name(c->lc.state));
            break;
        case ACT_TASK_GET:
            c->task_t0 = loop_now_ms();
            c->task_req = ctrd_task_get(r->ctrd, c->id, task_get_done, c);
            if (c->task_req == NULL)
                unsent(c, &c->lc.task_get_inflight);
            break;
        case ACT_TASK_DELETE:
            c->task_del_t0 = loop_now_ms();
            c->task_del_req =
                ctrd_task_delete(r->ctrd, c->id, task_delete_done, c);
            if (c->task_del_req == NULL)
                unsent(c, &c->lc.task_delete_inflight);
            break;
        case ACT_CTR_DELETE:
            c->ctr_del_t0 = loop_now_ms();
            c->ctr_del_req =
                ctrd_container_delete(r->ctrd, c->id, ctr_delete_done, c);
            if (c->ctr_del_req == NULL)
                unsent(c, &c->lc.ctr_delete_inflight);
            break;
        case ACT_TASK_LIST:
            taskwatch_list(r); /* one at a time for the node */
            break;
        case ACT_REPORT:
            if (!reportwrite_report(c))
                reportwrite_report_later(c);
            break;
        case ACT_FORGET:
            if (c->report_due) {
                c->forget_due = true; /* after the report */
                break;
            }
            reaper_forget(c);
            return false;
        }
    }
    return true;
}

/*
 * The engine copies a container's labels over its own fields in an
 * event's attributes: a label named "exitCode" is what the die event says
 * in place of the exit code (seen on dockerd 20.10, 26.1 and 28.5), so
 * "exitCode=0" would make an exit of 3 look clean. For such a container
 * the die event's code says nothing. (Past the label limits of bounds.h
 * the label may be among those dropped: then it goes unseen; the die
 * event's code is only the last source, after containerd and inspect.)
 */
static bool
die_code_masked(const struct rec *c)
{
    size_t i;

    for (i = 0; i < c->nlabels; i++)
        if (strcmp(c->labels[i].key, "exitCode") == 0)
            return true;
    return false;
}

static bool
reaper_feed(struct rec *c, const struct lc_obs *obs)
{
    struct reaper *r = c->r;
    struct lc_result res;
    struct lc_obs o = *obs;
    uint32_t had;

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
    if (o.kind == OBS_EVENT_DIE && o.has_exit_code && die_code_masked(c))
        o.has_exit_code = false;
    r->obs_ns = loop_now_ns();
    o.now_ms = loop_now_ms();
    o.rnd = backoff_rand(&r->rnd);
    had = c->lc.anomalies;
    lc_step(&c->lc, &o, &res);
    if (c->lc.anomalies & ~had & LC_AN_TASK_LOST)
        log_warn(c->id,
                 "containerd has no task for it, yet the engine says "
                 "it runs (containerd restarted as it exited): exit "
                 "code unknown; %s",
                 c->lc.state == LC_KEPT ? "kept, as its policy says"
                                        : "removing it by force");
    if (!apply(c, &res)) {
        r->obs_ns = 0;
        return false;
    }
    r->obs_ns = 0;
    persist_rec(c);
    return true;
}

static bool
reaper_feed_kind(struct rec *c, enum lc_obs_kind kind)
{
    struct lc_obs o;

    memset(&o, 0, sizeof(o));
    o.kind = kind;
    return reaper_feed(c, &o);
}

/* The containerd channel's observations (taskwatch.h). */
static void
on_ctrd_obs(struct rec *c, const struct lc_obs *o)
{
    if (!reaper_feed(c, o) || o->kind != OBS_TASK_EXIT)
        return;
    /* Perhaps the only true code the node will have, and containerd never
     * says it again: on disk before anything else happens (and before the
     * log says it was seen). */
    groupcommit_rec(c->r->ps.gc, c->id);
    log_debug(c->id, "containerd: TaskExit, status %u",
              (unsigned)o->exit_code);
}

static void
reaper_forget(struct rec *c)
{
    if (c->report_queued) {
        /* Its report is not written yet: reportwrite_commit_turn
         * forgets it. */
        c->forget_due = true;
        return;
    }
    persist_forget(c);
    checkpoint_unhold(c);
    docker_cancel(c->meta_req);
    docker_cancel(c->inspect_req);
    docker_cancel(c->delete_req);
    ctrd_cancel(c->task_req);
    ctrd_cancel(c->task_del_req);
    ctrd_cancel(c->ctr_del_req);
    slots_drop(&c->r->slots, c);
    if (c->step != NULL)
        event_free(c->step);
    if (c->warn != NULL)
        event_free(c->warn);
    if (c->giveup != NULL)
        event_free(c->giveup);
    if (c->again != NULL)
        event_free(c->again);
    ctable_remove(&c->r->tab, c);
    rec_free_meta(c);
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
    checkpoint_unhold(c);
    if (a == POLICY_IGNORE) {
        c->kind = R_IGNORED;
        free(pend);
        rec_free_meta(c); /* an ignored record is just its id */
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
    log_msg(!r->rl_taking || r->rl_managed++ < RELIST_LOG_TRACKED
                ? LOG_LEVEL_INFO
                : LOG_LEVEL_DEBUG,
            c->id, "tracking %s (image %s) under policy \"%s\": %s",
            c->name ? c->name : "?", c->image ? c->image : "?", c->policy,
            policy_action_name(a));

    for (i = 0; i < npend; i++)
        if (!reaper_feed(c, &pend[i])) {
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
    reaper_feed(c, &o);
    return true;
}

static void meta_retry(evutil_socket_t fd, short what, void *arg);

/* Could not decide for want of memory: try again after a backoff (the
 * container is listed again; nothing was taken from its record). */
static void
decide_later(struct rec *c)
{
    c->kind = R_DISCOVERING;
    c->meta_failures++;
    log_error(c->id, "out of memory deciding its policy; deciding later");
    rec_arm(c, &c->step, meta_retry,
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
meta_retry(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    meta_fetch(arg);
}

static void
meta_done(enum docker_status st, const struct docker_container *cs, size_t n,
          const char *msg, void *arg)
{
    struct rec *c = arg;
    size_t i;

    c->meta_req = NULL;
    reaper_call_done(c->r, REAPER_CALL_DOCKER_LIST, c->meta_t0);
    if (st != DOCKER_OK) {
        c->meta_failures++;
        log_warn(c->id, "%s; retrying", msg);
        rec_arm(c, &c->step, meta_retry,
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
        reaper_forget(c);
        return;
    }
    if (!decide(c, false, NULL))
        decide_later(c);
}

static void
meta_fetch(struct rec *c)
{
    c->meta_t0 = loop_now_ms();
    c->meta_req = docker_list(c->r->d, c->id, meta_done, c);
    if (c->meta_req == NULL)
        rec_arm(c, &c->step, meta_retry, 1000);
}

/* ---- events ----------------------------------------------------------- */

/*
 * A live create event carries everything the policy needs: the labels
 * (the engine merges them into the attributes), the name and the image.
 * Asking the engine again (a list by id, the one engine call per exit
 * that only confirmed what the event said) is needed only when the event
 * is a replay (the container may be long gone, and a record made from it
 * now would escape the relist sent before), when something in it was cut
 * at the limits, or when a policy names a label the engine's own name or
 * image attribute hides.
 */
static bool
decidable_on_create(const struct reaper *r, const struct rec *c,
                    const struct docker_event *ev)
{
    /* labels_cut and meta_cut say what rec_meta_from_event found cut. */
    if (ev->action != DOCKER_EV_CREATE || !c->meta_known || c->labels_cut ||
        c->meta_cut || ev->name == NULL || ev->image == NULL ||
        r->subscribed_ns == 0 ||
        ev->time_nano < r->subscribed_ns - LIVE_SLACK_NS)
        return false;
    return !policy_set_names_label(&r->cfg->policies, "name", 4) &&
           !policy_set_names_label(&r->cfg->policies, "image", 5);
}

/*
 * The events checkpoint a restart resumes from: the last event's time,
 * but never past the first event of a container still being discovered.
 * Its events wait in memory for its labels (c->pend): killed then, a
 * reapd whose checkpoint had moved on would never be sent them again, and
 * an exit whose container is removed meanwhile (--rm) would be lost. Held
 * back, the replay brings them (and a few already taken, which the
 * lifecycle and the report dedupe take twice safely).
 *
 * Worked out at each change (an event taken, a hold let go) and handed
 * down; the durable layer writes it with its next flush.
 */
static void
save_checkpoint(struct reaper *r)
{
    int64_t t = r->last_ev_nano;

    /* Stopping is not forgetting: records discovering now are held
     * still. */
    if (r->store == NULL || r->stopping)
        return;
    if (r->holds != NULL && r->holds->hold_nano - 1 < t)
        t = r->holds->hold_nano - 1;
    groupcommit_events_checkpoint(r->ps.gc, t);
}

/* c, discovering, holds an event of time `nano` in memory. */
static void
checkpoint_hold(struct rec *c, int64_t nano)
{
    struct reaper *r = c->r;

    if (c->holding || nano <= 0)
        return;
    c->holding = true;
    c->hold_nano = nano;
    c->hold_prev = r->holds_tail;
    c->hold_next = NULL;
    if (r->holds_tail != NULL)
        r->holds_tail->hold_next = c;
    else
        r->holds = c;
    r->holds_tail = c;
}

/* c's events are in its lifecycle now (or c is forgotten). */
static void
checkpoint_unhold(struct rec *c)
{
    struct reaper *r = c->r;

    if (!c->holding)
        return;
    if (c->hold_prev != NULL)
        c->hold_prev->hold_next = c->hold_next;
    else
        r->holds = c->hold_next;
    if (c->hold_next != NULL)
        c->hold_next->hold_prev = c->hold_prev;
    else
        r->holds_tail = c->hold_prev;
    c->hold_prev = c->hold_next = NULL;
    c->holding = false;
    save_checkpoint(r);
}

static void
take_event(struct reaper *r, const struct docker_event *ev)
{
    struct rec *c;
    struct lc_obs o;

    memset(&o, 0, sizeof(o));
    switch (ev->action) {
    case DOCKER_EV_START:
    case DOCKER_EV_RESTART:
        o.kind = OBS_EVENT_START;
        break;
    case DOCKER_EV_DIE:
        taskwatch_activity(r);
        o.kind = OBS_EVENT_DIE;
        o.has_exit_code = ev->has_exit_code;
        o.exit_code = ev->exit_code;
        o.after_outage = outage_die_within(&r->outage, ev->time_nano);
        break;
    case DOCKER_EV_DESTROY:
        taskwatch_activity(r);
        o.kind = OBS_EVENT_DESTROY;
        relist_tombstone(r->relist, ev->id);
        break;
    case DOCKER_EV_CREATE:
    case DOCKER_EV_RENAME:
        o.kind = OBS_NKINDS; /* metadata only */
        break;
    default:
        return;
    }
    c = ctable_find(&r->tab, ev->id);
    if (c == NULL) {
        if (ev->action == DOCKER_EV_DESTROY)
            return;
        c = rec_new(r, ev->id);
        if (c == NULL)
            return;
        rec_meta_from_event(c, ev);
        if (decidable_on_create(r, c, ev)) {
            static const struct lc_inspect created = {.run = LC_RUN_CREATED};

            c->labels_from_event = true;
            if (!decide(c, true, &created))
                decide_later(c);
        } else {
            meta_fetch(c);
        }
    } else if (c->kind == R_IGNORED) {
        if (ev->action == DOCKER_EV_DESTROY)
            reaper_forget(c);
        return;
    }
    if (ev->action == DOCKER_EV_RENAME && ev->name != NULL &&
        rec_set_meta(c, ev->name, c->image, c->labels, c->nlabels,
                     c->labels_cut, c->meta_cut || ev->name_truncated) != 0)
        log_error(c->id, "out of memory copying its new name");
    else if (ev->action == DOCKER_EV_RENAME) {
        cut_noted(c);
        if (c->persisted_running) {
            /* Its record carries the name a report after a restart uses. */
            c->persisted_running = false;
            persist_rec(c);
        }
    }
    if (ev->action == DOCKER_EV_DIE)
        c->die_nano = ev->time_nano;
    if (c->kind == R_DISCOVERING)
        checkpoint_hold(c, ev->time_nano);
    if (o.kind != OBS_NKINDS)
        reaper_feed(c, &o);
}

static void
on_event(const struct docker_event *ev, void *arg)
{
    struct reaper *r = arg;

    r->st.events++;
    take_event(r, ev);
    if (ev->time_nano > r->last_ev_nano)
        r->last_ev_nano = ev->time_nano;
    save_checkpoint(r);
}

/* ---- relists (relist.c sends them and hands over their answers) ------- */

static void resume_loaded(struct reaper *r);
static void ready_turned(struct reaper *r);

static void
relist_answered(void *arg, uint64_t t0, bool ok, size_t n)
{
    struct reaper *r = arg;

    reaper_call_done(r, REAPER_CALL_DOCKER_LIST, t0);
    if (ok)
        ctable_reserve(&r->tab, r->tab.n + n);
}

/* Known before the relist of generation *arg was sent, and not listed. */
static bool
unlisted(const struct rec *c, const void *arg)
{
    uint32_t gen = *(const uint32_t *)arg;

    return c->born_relist < gen && c->listed_relist != gen &&
           c->kind != R_DISCOVERING;
}

/* Touched by this relist (ctable_touch): every record in front of the
 * first such one is unlisted or newer than the relist. */
static bool
listed_now(const struct rec *c, const void *arg)
{
    return c->listed_relist == *(const uint32_t *)arg;
}

/* One entry of the relist's answer, taken in against the records. */
static int
relist_take(void *arg, const struct docker_container *e, uint32_t gen)
{
    struct reaper *r = arg;
    struct rec *c;
    struct lc_obs o;

    if (gen != r->rl_log_gen) {
        r->rl_log_gen = gen;
        r->rl_managed = 0;
    }
    c = ctable_find(&r->tab, e->id);
    if (c == NULL) {
        c = rec_new(r, e->id);
        if (c == NULL)
            return -1; /* out of memory: seen next time */
        /* Listed, and behind every record older than this relist: where
         * the search for the absent ones stops (relist_finish). */
        c->listed_relist = gen;
        r->rl_taking = true;
        decide_listed(c, e);
        r->rl_taking = false;
        return 0;
    }
    c->listed_relist = gen; /* listed: not absent */
    ctable_touch(&r->tab, c);
    if (c->kind == R_DISCOVERING) {
        docker_cancel(c->meta_req);
        c->meta_req = NULL;
        disarm(c->step);
        r->rl_taking = true;
        decide_listed(c, e);
        r->rl_taking = false;
    } else if (c->kind == R_MANAGED) {
        memset(&o, 0, sizeof(o));
        o.kind = OBS_FOUND;
        o.inspect = e->state;
        o.after_outage = r->outage_relist;
        reaper_feed(c, &o);
    }
    return 0;
}

static bool
relist_behind(void *arg)
{
    struct reaper *r = arg;

    return groupcommit_holding(r->ps.gc);
}

/* The whole answer is taken in: what it did not list is gone. */
static void
relist_finish(void *arg, uint32_t gen, size_t n, bool incomplete)
{
    struct reaper *r = arg;
    struct rec **absent, *c;
    size_t i, nabsent = 0;

    /* Records known before this relist was sent and not listed: gone. */
    absent =
        ctable_collect_front(&r->tab, listed_now, unlisted, &gen, &nabsent);
    if (absent == NULL)
        incomplete = true;
    for (i = 0; i < nabsent; i++) {
        c = absent[i];
        if (c->kind == R_IGNORED)
            reaper_forget(c);
        else
            reaper_feed_kind(c, OBS_ABSENT);
    }
    free(absent);
    if (r->rl_managed > RELIST_LOG_TRACKED)
        log_info(NULL,
                 "relist: %zu containers put under a policy (the first %d "
                 "logged; the rest at debug)",
                 r->rl_managed, RELIST_LOG_TRACKED);
    r->rl_managed = 0;
    if (!r->relisted)
        log_info(NULL,
                 "reconciled with the engine: %zu containers listed, "
                 "%zu tracked",
                 n, r->tab.n);
    r->relisted = true;
    taskwatch_relisted(r);
    ready_turned(r);
    if (incomplete) {
        /* Out of memory for part of it: another relist, soon, finds what
         * this one could not take in. */
        log_error(NULL, "out of memory taking in the relist; relisting "
                        "again in 1 s");
        relist_after(r->relist, 1000);
    } else {
        r->outage_relist = false;
    }
}

/* Events were stepped over: a container may have exited unseen. A
 * relist finds it; bursts of bad events share one, a second later. */
static void
on_gap(void *arg)
{
    struct reaper *r = arg;

    relist_soon(r->relist, 1000);
}

static void
on_subscribed(void *arg)
{
    struct reaper *r = arg;
    struct outage_span ended;

    log_info(NULL, "docker events: subscribed (API %s); relisting",
             docker_api_version(r->d));
    r->subscribed_ns = report_now_ms() * 1000000;
    r->relisted = false;
    if (outage_back(&r->outage, report_now_ms(),
                    docker_watch_after_outage(r->d), &ended)) {
        log_warn(NULL, "docker: the engine was down; containers found "
                       "exited now exited without a die event");
        r->outage_relist = docker_watch_after_outage(r->d);
        if (r->store != NULL) {
            groupcommit_result(r->ps.gc, outage_save_end(r->store, &ended),
                               "saving the events checkpoint");
            /* Rare, and a reapd killed before the group commit would
             * take a span that has ended for one still open. */
            groupcommit_now(r->ps.gc);
        }
    }
    /* The engine answers now: records of the last run pick up where they
     * stood, before the replay and the relist reconcile them. */
    resume_loaded(r);
}

/*
 * The engine's replay is read (docker.c reads it whole before the live
 * stream opens): only now may the relist take a container it does not
 * list for removed unseen. Sent with the subscription, its answer came
 * before the replay's dies (the engine writes the replay after the
 * stream's headers), and the exits of containers removed while reapd
 * was down were reported unknown, their replayed dies then taken for
 * exits already reported (t_relist_waits_for_replay).
 */
static void
on_replayed(void *arg)
{
    struct reaper *r = arg;

    relist_send(r->relist);
}

static void
on_lost(const char *why, uint64_t retry_ms, void *arg)
{
    struct reaper *r = arg;

    r->relisted = false;
    ready_turned(r);
    /* The engine itself is down: committed before anything is said, so
     * that a reapd killed at any moment after and restarted before the
     * engine is back knows. */
    if (outage_lost(&r->outage, report_now_ms(),
                    docker_watch_unreachable(r->d)) &&
        r->store != NULL) {
        groupcommit_result(r->ps.gc, outage_save_begin(r->store, &r->outage),
                           "saving the events checkpoint");
        groupcommit_now(r->ps.gc);
    }
    log_warn(NULL, "%s; reconnecting in %llu ms", why,
             (unsigned long long)retry_ms);
}

/* ---- public ----------------------------------------------------------- */

struct reaper *
reaper_new(struct loop *l, struct docker *d, const struct config *cfg,
           struct report_log *rl)
{
    static const struct persist_cbs durable_cbs = {
        .delete_written = reaper_delete_written,
        .forget = reaper_forget,
    };
    static const struct relist_cbs relist_cbs = {
        .answered = relist_answered,
        .take = relist_take,
        .finish = relist_finish,
        .behind = relist_behind,
    };
    struct reaper *r = calloc(1, sizeof(*r));

    if (r == NULL)
        return NULL;
    r->l = l;
    r->d = d;
    r->cfg = cfg;
    r->rl = rl;
    r->rnd = (uint32_t)loop_now_ms() ^ ((uint32_t)getpid() << 8) ^ 7u;
    r->relist = relist_new(l, d, &relist_cbs, r);
    if (slots_init(&r->slots, loop_base(l),
                   cfg != NULL ? cfg->delete_max_in_flight : 1,
                   on_slot) != 0 ||
        ctable_init(&r->tab) != 0 || persist_init(r, &durable_cbs) != 0 ||
        r->relist == NULL) {
        reaper_free(r);
        return NULL;
    }
    if (cfg != NULL)
        relist_set_retry_max_ms(r->relist,
                                (uint64_t)cfg->docker_reconnect_max_ms);
    if (d != NULL) {
        docker_set_labels(d, rec_wanted_label, r);
        docker_set_label_filter(d, rec_kept_label, r);
    }
    return r;
}

void
reaper_free(struct reaper *r)
{
    struct ctable_iter it;
    struct rec *c;

    if (r == NULL)
        return;
    if (r->d != NULL) {
        docker_set_labels(r->d, NULL, NULL);
        docker_set_label_filter(r->d, NULL, NULL);
    }
    /* The reports of this turn are made: written before anything goes. */
    reportwrite_commit_turn(r);
    relist_free(r->relist);
    r->relist = NULL;
    taskwatch_cleanup(r);
    /* The checkpoint handed down stands: the holds let go now move it no
     * more, and the last flush writes it. */
    r->stopping = true;
    persist_records_fill(r);
    /* Stopping is not forgetting: the records stay in the store. */
    for (c = ctable_first(&r->tab, &it); c != NULL;
         c = ctable_next(&r->tab, &it)) {
        c->persisted = false;
        reaper_forget(c);
    }
    persist_cleanup(r);
    slots_cleanup(&r->slots);
    ctable_cleanup(&r->tab);
    free(r);
}

void
reaper_set_relist_slice_ns(struct reaper *r, uint64_t ns)
{
    relist_set_slice_ns(r->relist, ns);
}

void
reaper_set_config(struct reaper *r, const struct config *cfg)
{
    r->cfg = cfg;
    relist_set_retry_max_ms(r->relist, (uint64_t)cfg->docker_reconnect_max_ms);
    /* max_in_flight may have grown. */
    slots_set_max(&r->slots, cfg->delete_max_in_flight);
}

void
reaper_set_containerd(struct reaper *r, struct ctrd *c)
{
    r->ctrd = c;
}

void
reaper_set_store(struct reaper *r, struct store *st)
{
    persist_set_store(r, st);
}

/* ---- records of the last run ----------------------------------------- */

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

        if (!docker_valid_id(all.v[i].id) ||
            ctable_find(&r->tab, all.v[i].id)) {
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
        if (rec_set_meta(c, m->name, m->image, m->labels, m->nlabels, false,
                         false) != 0)
            log_error(c->id, "out of memory copying labels");
        c->kind = R_MANAGED;
        c->policy = strdup(m->policy != NULL ? m->policy : "default");
        c->force = m->force;
        c->volumes = m->volumes;
        c->report_on = m->report_on;
        rec_set_str(&c->started_at, m->started_at);
        rec_set_str(&c->finished_at, m->finished_at);
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
    groupcommit_soon(r->ps.gc);
    return 0;
}

static bool
resume_pending(const struct rec *c, const void *arg)
{
    (void)arg;
    return c->resume_pending;
}

static void
resume_loaded(struct reaper *r)
{
    struct rec **waiting, *c;
    size_t n, i;
    int64_t now_wall = report_now_ms();

    /* Out of memory, they wait for the next subscription. */
    waiting = ctable_collect(&r->tab, resume_pending, NULL, &n);
    if (waiting == NULL)
        return;
    for (i = 0; i < n; i++) {
        struct lc_result res;
        uint64_t since = 0;

        c = waiting[i];
        c->resume_pending = false;
        if (c->exited_wall_ms > 0 && now_wall > c->exited_wall_ms)
            since = (uint64_t)(now_wall - c->exited_wall_ms);
        lc_resume(&c->lc, loop_now_ms(), since, &res);
        if (apply(c, &res))
            persist_rec(c);
    }
    free(waiting);
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

    static const struct taskwatch_cbs ctrd_cbs = {
        .observe = on_ctrd_obs,
        .call_done = reaper_call_done,
    };

    if (r->ctrd != NULL && taskwatch_start(r, &ctrd_cbs) != 0)
        return -1;
    docker_watch_on_replayed(r->d, on_replayed);
    if (r->store != NULL) {
        int64_t since = 0;

        if (persist_start(r) != 0 || load_records(r) != 0)
            return -1;
        /* Resume the stream where the last run stopped reading; the
         * relist after subscribing covers what the engine no longer
         * buffers. */
        if (store_get_checkpoint(r->store, GROUPCOMMIT_EVENTS_KEY, &since) !=
            STORE_OK)
            since = 0;
        /* The last run ended while the engine was down, or soon after. */
        outage_load(&r->outage, r->store);
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
    const struct docker_engine_info *eng = docker_engine(r->d);
    struct groupcommit_stats gs;
    struct ctable_iter it;
    struct rec *c;

    *out = r->st;
    out->relists = relist_count(r->relist);
    out->engine_known = eng != NULL;
    if (eng != NULL)
        out->engine = *eng;
    out->tracked = out->ignored = 0;
    memset(out->by_state, 0, sizeof(out->by_state));
    for (c = ctable_first(&r->tab, &it); c != NULL;
         c = ctable_next(&r->tab, &it)) {
        if (c->kind == R_IGNORED) {
            out->ignored++;
        } else if (c->kind == R_MANAGED) {
            out->tracked++;
            out->by_state[c->lc.state]++;
        }
    }
    groupcommit_stats(r->ps.gc, &gs);
    out->store_errors = gs.errors;
    out->reports_unsaved = r->ps.nunsaved;
    out->duplicates = r->ps.duplicates;
    out->empty_flushes = gs.empty_flushes;
    out->pruned = r->ps.pruned;
    out->reports_log_rotations = r->ps.rotations;
    out->docker_reconnects = docker_watch_reconnects(r->d);
    out->events_rejected = docker_watch_rejected(r->d);
    out->replays_cut = docker_watch_replays_cut(r->d);
    out->containerd_reconnects =
        r->ctrd != NULL ? ctrd_watch_reconnects(r->ctrd) : 0;
    out->leaked_tasks = r->tw.nleaks;
    out->tasks_reaped = r->tw.tasks_reaped;
    out->orphans_reaped = r->tw.orphans_reaped;
    out->docker_connected = docker_watch_connected(r->d);
    out->last_event_nano = r->last_ev_nano;
    out->containerd = r->ctrd != NULL;
    out->containerd_connected =
        r->ctrd != NULL && ctrd_watch_connected(r->ctrd);
    out->slots_used = r->slots.used;
    out->slots_waiting = r->slots.waiting;
}

void
reaper_foreach(const struct reaper *r, reaper_visit_cb cb, void *arg)
{
    struct ctable_iter it;
    struct rec *c;
    struct reaper_view v;

    for (c = ctable_first(&r->tab, &it); c != NULL;
         c = ctable_next(&r->tab, &it)) {
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

bool
reaper_lookup(const struct reaper *r, const char *id, struct reaper_view *out)
{
    struct rec *c = ctable_find(&r->tab, id);

    if (c == NULL || c->kind != R_MANAGED)
        return false;
    out->id = c->id;
    out->name = c->name;
    out->image = c->image;
    out->policy = c->policy;
    out->state = c->lc.state;
    out->lc = &c->lc;
    return true;
}

void
reaper_on_report(struct reaper *r, reaper_report_cb cb, void *arg)
{
    r->report_cb = cb;
    r->report_arg = arg;
}

void
reaper_on_ready(struct reaper *r, reaper_ready_cb cb, void *arg)
{
    r->ready_cb = cb;
    r->ready_arg = arg;
}

/* Tells ready_cb when reaper_ready() has turned since it was last told. */
static void
ready_turned(struct reaper *r)
{
    const char *why = NULL;
    bool ready = reaper_ready(r, &why);

    if (ready == r->told_ready || r->ready_cb == NULL)
        return;
    r->told_ready = ready;
    r->ready_cb(ready, why, r->ready_arg);
}
