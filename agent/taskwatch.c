/*
 * taskwatch — the reaper's containerd channel; see taskwatch.h.
 */
#include "taskwatch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "containerd.h"
#include "docker.h"
#include "log.h"
#include "loop.h"
#include "reaper_int.h"

/* A containerd task the audit lists without an engine container: the
 * engine leaked it before reapd watched, or while it was down. */
struct leak {
    char id[CTR_ID_SIZE];
    uint32_t listed; /* the last task list that held it (list_gen) */
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

static void audit_schedule(struct reaper *r);

/* An observation that is only its kind, to the driver. */
static void
tell(struct reaper *r, struct rec *c, enum lc_obs_kind kind)
{
    struct lc_obs o;

    memset(&o, 0, sizeof(o));
    o.kind = kind;
    r->tw.cb->observe(c, &o);
}

/* Only an init process's task is its container's; an exec has its own. */
static bool
is_init(const struct ctrd_task *t)
{
    return t->id[0] == '\0' || strcmp(t->id, t->container_id) == 0;
}

static struct leak *
leak_find(struct reaper *r, const char *id)
{
    struct leak *lk;

    for (lk = r->tw.leaks; lk != NULL; lk = lk->next)
        if (strcmp(lk->id, id) == 0)
            return lk;
    return NULL;
}

/* Cancelling first means no callback can find the freed entry. */
static void
leak_drop(struct reaper *r, struct leak *lk)
{
    struct leak **pp = &r->tw.leaks;

    while (*pp != NULL && *pp != lk)
        pp = &(*pp)->next;
    if (*pp == lk)
        *pp = lk->next;
    ctrd_cancel(lk->req);
    r->tw.nleaks--;
    free(lk);
}

static void
on_orphan_ctr_deleted(enum ctrd_status st, const char *msg, void *arg)
{
    struct leak *lk = arg;
    struct reaper *r = lk->r;

    lk->req = NULL;
    r->tw.cb->call_done(r, REAPER_CALL_CONTAINER_DELETE, lk->req_t0);
    if (st == CTRD_FAILED) {
        lk->failures++;
        snprintf(lk->last_error, sizeof(lk->last_error), "%s", msg);
        log_warn(lk->id, "orphan task: Containers.Delete: %s", msg);
        lk->reaping = false; /* the next audit tries again */
        return;
    }
    log_info(lk->id, "orphan task reaped: task and containerd container "
                     "deleted");
    r->tw.orphans_reaped++;
    leak_drop(r, lk);
}

static void
on_orphan_task_deleted(enum ctrd_status st, uint32_t exit_status,
                       const char *msg, void *arg)
{
    struct leak *lk = arg;

    (void)exit_status;
    lk->req = NULL;
    lk->r->tw.cb->call_done(lk->r, REAPER_CALL_TASK_DELETE, lk->req_t0);
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

/*
 * One pass over a task list (the reconcile after a (re)subscription, or
 * the periodic audit; both are the same walk). Each record and known leak
 * whose task it holds is marked with the list's number, so that what it
 * does not hold is found by one look at each. A task of no record is a
 * leak, but only against a reconciled table: otherwise "not tracked"
 * means "not listed yet".
 */
static void
list_walk(struct reaper *r, const struct ctrd_task *ts, size_t n)
{
    struct leak *lk, *next;
    struct rec *c;
    size_t i;

    if (++r->tw.list_gen == 0) /* 0 is "never listed" */
        r->tw.list_gen = 1;
    for (i = 0; i < n; i++) {
        const struct ctrd_task *t = &ts[i];

        if (!is_init(t))
            continue;
        if ((c = ctable_find(&r->tab, t->container_id)) != NULL) {
            c->listed_tasks = r->tw.list_gen;
            continue;
        }
        if ((lk = leak_find(r, t->container_id)) != NULL)
            lk->listed = r->tw.list_gen;
        if (!r->relisted || !docker_valid_id(t->container_id))
            continue;
        if (lk == NULL) {
            lk = calloc(1, sizeof(*lk));
            if (lk == NULL)
                continue;
            memcpy(lk->id, t->container_id, CTR_ID_SIZE);
            lk->listed = r->tw.list_gen;
            lk->r = r;
            lk->next = r->tw.leaks;
            r->tw.leaks = lk;
            r->tw.nleaks++;
            log_warn(lk->id,
                     "containerd task without an engine container "
                     "(pid %u, status %d)",
                     t->pid, (int)t->status);
        }
        lk->status = t->status;
        lk->pid = t->pid;
        lk->audits_seen++;
    }
    if (!r->relisted)
        return;
    /* Leaks the list no longer holds were deleted by someone. */
    for (lk = r->tw.leaks; lk != NULL; lk = next) {
        next = lk->next;
        if (!lk->reaping && lk->listed != r->tw.list_gen)
            leak_drop(r, lk);
    }
    for (lk = r->tw.leaks; lk != NULL; lk = lk->next)
        leak_step(r, lk);
}

/* An exit being cleaned up whose task the list no longer holds: deleted,
 * whether or not its /tasks/delete was seen (containerd does not replay
 * events). Not a kept one: its next run must not inherit the verdict. */
static bool
no_task_left(const struct rec *c)
{
    return c->lc.exited && c->lc.state != LC_KEPT &&
           c->lc.state != LC_ABANDONED && !c->lc.task_delete_seen;
}

/* Running by the record, no TaskExit seen: the engine may say it runs on
 * a task containerd lost (lifecycle.c, lose_task). */
static bool
running_no_task(const struct rec *c)
{
    return c->lc.state == LC_RUNNING && c->lc.ran && !c->lc.task_exit_seen;
}

/* A managed record the list just walked did not hold, with something to
 * tell of it. */
static bool
unlisted(const struct rec *c, const void *arg)
{
    const uint32_t *gen = arg;

    return c->kind == R_MANAGED && c->listed_tasks != *gen &&
           (no_task_left(c) || running_no_task(c));
}

/* An operator asked for an audit while a list was in flight: one more,
 * sent after the ask. */
static void
audit_again(struct reaper *r)
{
    if (!r->tw.list_again)
        return;
    r->tw.list_again = false;
    taskwatch_list(r);
}

static void
on_task_list(enum ctrd_status st, const struct ctrd_task *ts, size_t n,
             const char *msg, void *arg)
{
    struct reaper *r = arg;
    struct rec **notask;
    size_t nnotask, i;

    r->tw.task_list_req = NULL;
    r->tw.cb->call_done(r, REAPER_CALL_TASK_LIST, r->tw.task_list_t0);
    r->tw.lists_done++;
    r->tw.last_ok = st == CTRD_OK;
    r->tw.last_tasks = st == CTRD_OK ? n : 0;
    snprintf(r->tw.last_error, sizeof(r->tw.last_error), "%s",
             st == CTRD_OK ? "" : msg);
    if (st != CTRD_OK) {
        log_warn(NULL, "containerd Tasks.List: %s", msg);
        r->tw.audit_due = true;
        audit_schedule(r);
        audit_again(r);
        return;
    }
    r->tw.list_early = !r->relisted;
    list_walk(r, ts, n);
    notask = ctable_collect(&r->tab, unlisted, &r->tw.list_gen, &nnotask);
    for (i = 0; notask != NULL && i < nnotask; i++)
        tell(r, notask[i],
             no_task_left(notask[i]) ? OBS_TASK_DELETE_EVENT
                                     : OBS_TASK_MISSING);
    free(notask);
    audit_schedule(r);
    audit_again(r);
}

void
taskwatch_list(struct reaper *r)
{
    if (r->tw.task_list_req != NULL)
        return;
    r->tw.task_list_t0 = loop_now_ms();
    r->tw.task_list_req = ctrd_task_list(r->ctrd, on_task_list, r);
    r->tw.audit_due = r->tw.task_list_req == NULL;
    if (r->tw.task_list_req == NULL)
        audit_schedule(r);
}

uint64_t
reaper_audit_now(struct reaper *r)
{
    if (r->ctrd == NULL)
        return 0;
    if (r->tw.task_list_req != NULL) {
        r->tw.list_again = true;
        return r->tw.lists_done + 2;
    }
    taskwatch_list(r);
    if (r->tw.task_list_req == NULL) { /* could not even be sent */
        r->tw.lists_done++;
        r->tw.last_ok = false;
        r->tw.last_tasks = 0;
        snprintf(r->tw.last_error, sizeof(r->tw.last_error),
                 "containerd Tasks.List could not be sent");
        return r->tw.lists_done;
    }
    return r->tw.lists_done + 1;
}

void
reaper_audit_state(const struct reaper *r, struct reaper_audit *out)
{
    out->on = r->ctrd != NULL;
    out->lists_done = r->tw.lists_done;
    out->ok = r->tw.last_ok;
    out->tasks = r->tw.last_tasks;
    out->error = r->tw.last_error;
    out->leaks = r->tw.nleaks;
}

/* A task may have been left behind: audit within the interval. */
void
taskwatch_activity(struct reaper *r)
{
    if (r->ctrd == NULL)
        return;
    r->tw.audit_due = true;
    audit_schedule(r);
}

void
taskwatch_relisted(struct reaper *r)
{
    if (r->ctrd == NULL || !r->tw.list_early)
        return;
    r->tw.list_early = false;
    taskwatch_list(r);
}

static void
on_audit_timer(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    taskwatch_list(arg);
}

static void
audit_schedule(struct reaper *r)
{
    int64_t ms = r->cfg->containerd_audit_interval_ms;

    if (ms <= 0 || r->tw.audit_timer == NULL ||
        evtimer_pending(r->tw.audit_timer, NULL))
        return;
    /* Leaks known are confirmed (two audits in a row) and reaped by
     * audits; otherwise only activity makes a new one possible. */
    if (!r->tw.audit_due && r->tw.nleaks == 0)
        return;
    loop_timer_ms(r->tw.audit_timer, (uint64_t)ms);
}

/* containerd went away (or reapd did not watch it until now): every exit
 * being cleaned up may have had the engine's Containers.Delete refused.
 * Feeding this acts on nothing at once, so a plain walk is safe. */
static void
note_outage(struct reaper *r)
{
    struct ctable_iter it;
    struct rec *c;

    for (c = ctable_first(&r->tab, &it); c != NULL;
         c = ctable_next(&r->tab, &it))
        if (c->kind == R_MANAGED && c->lc.exited)
            tell(r, c, OBS_CTRD_OUTAGE);
}

static void
on_ctrd_subscribed(void *arg)
{
    struct reaper *r = arg;

    log_info(NULL, "containerd events: subscribed on %s; reconciling tasks",
             ctrd_socket(r->ctrd));
    note_outage(r);
    taskwatch_list(r);
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
        taskwatch_activity(r);
    c = ctable_find(&r->tab, ev->container_id);
    memset(&o, 0, sizeof(o));
    switch (ev->kind) {
    case CTRD_EV_TASK_EXIT:
        /* Only the init process's exit is the container's. */
        if (ev->id[0] != '\0' && strcmp(ev->id, ev->container_id) != 0)
            return;
        o.kind = OBS_TASK_EXIT;
        o.exit_code = (int)ev->exit_status;
        break;
    case CTRD_EV_TASK_DELETE:
        if (ev->id[0] != '\0' && strcmp(ev->id, ev->container_id) != 0)
            return;
        o.kind = OBS_TASK_DELETE_EVENT;
        break;
    default:
        return;
    }
    if (c == NULL || c->kind == R_IGNORED)
        return;
    r->tw.cb->observe(c, &o);
}

static void
on_ctrd_lost(const char *why, uint64_t retry_ms, void *arg)
{
    note_outage(arg);
    log_warn(NULL, "%s; reconnecting in %llu ms", why,
             (unsigned long long)retry_ms);
}

void
reaper_foreach_leak(const struct reaper *r, reaper_leak_cb cb, void *arg)
{
    const struct leak *lk;
    struct reaper_leak_view v;

    for (lk = r->tw.leaks; lk != NULL; lk = lk->next) {
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

int
taskwatch_start(struct reaper *r, const struct taskwatch_cbs *up)
{
    static const struct ctrd_watch_cbs cbs = {
        .on_subscribed = on_ctrd_subscribed,
        .on_event = on_ctrd_event,
        .on_lost = on_ctrd_lost,
    };

    r->tw.cb = up;
    r->tw.audit_timer = evtimer_new(loop_base(r->l), on_audit_timer, r);
    if (r->tw.audit_timer == NULL)
        return -1;
    return ctrd_watch_start(r->ctrd, &cbs, r) != 0 ? -1 : 0;
}

void
taskwatch_cleanup(struct reaper *r)
{
    ctrd_cancel(r->tw.task_list_req);
    r->tw.task_list_req = NULL;
    while (r->tw.leaks != NULL)
        leak_drop(r, r->tw.leaks);
    if (r->tw.audit_timer != NULL)
        event_free(r->tw.audit_timer);
    r->tw.audit_timer = NULL;
}
