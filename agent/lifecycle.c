/*
 * lifecycle — the pure core; see lifecycle.h for the model.
 *
 * Each handler below is one (state, observation) cell of the table in
 * docs/design.md. Results of engine calls clear their in-flight flag
 * before anything else, so a stale answer (one that arrives after the
 * record moved on) is harmless: it is read against the current state.
 */
#include "lifecycle.h"

#include <string.h>

#include "backoff.h"

static void
push(struct lc_result *res, enum lc_act_kind kind, uint64_t ms, uint64_t ms2)
{
    /* LC_MAX_ACTIONS bounds the longest path (finish); never exceeded. */
    if (res->nacts < LC_MAX_ACTIONS) {
        res->acts[res->nacts].kind = kind;
        res->acts[res->nacts].ms = ms;
        res->acts[res->nacts].ms2 = ms2;
        res->nacts++;
    }
}

static void
go(struct lc *c, struct lc_result *res, enum lc_state to, const char *why)
{
    c->state = to;
    res->to = to;
    res->reason = why;
    /* Whatever moves it out of running ends the check of its task. */
    if (to != LC_RUNNING)
        c->task_missing = 0;
}

static uint64_t
retry_delay(const struct lc *c, unsigned failures, uint32_t rnd)
{
    return backoff_delay_ms(failures, (uint64_t)c->p.retry_base_ms,
                            (uint64_t)c->p.retry_max_ms, rnd);
}

static void
want_inspect(struct lc *c, struct lc_result *res)
{
    if (!c->inspect_inflight) {
        c->inspect_inflight = true;
        push(res, ACT_INSPECT, 0, 0);
    }
}

static void
send_delete(struct lc *c, struct lc_result *res)
{
    if (!c->delete_inflight) {
        c->delete_inflight = true;
        c->delete_attempts++;
        push(res, ACT_DELETE, 0, 0);
    }
}

/* Leaves the slot queue, or gives the slot back. Call before changing
 * state away from QUEUED/REMOVING/CONFIRMING. */
static void
drop_slot(struct lc *c, struct lc_result *res)
{
    if (c->has_slot || c->state == LC_QUEUED)
        push(res, ACT_DROP_SLOT, 0, 0);
    c->has_slot = false;
}

static void
reset_exit(struct lc *c)
{
    c->exited = false;
    c->exited_at_ms = 0;
    c->die_seen = false;
    c->die_has_code = false;
    c->die_code = 0;
    c->die_after_outage = false;
    c->exit_known = false;
    c->exit_code = 0;
    c->source = LC_SRC_NONE;
    c->oom_killed = false;
    c->inspect_failures = 0;
    c->delete_failures = 0;
    c->delete_attempts = 0;
    c->anomalies &= LC_AN_STICKY;
    c->removed = false;
    c->removed_by_us = false;
    c->cleanup_ms = 0;
}

/* containerd's facts about the run just reported or restarted. Not part
 * of reset_exit: a TaskExit of the next run may already be in. */
static void
clear_task_facts(struct lc *c)
{
    c->task_exit_seen = false;
    c->task_exit_code = 0;
    c->task_delete_seen = false;
    c->task_gone_polled = false;
    c->task_reaped_done = false;
    c->task_trouble = false;
    c->task_failures = 0;
    c->task_gone_polls = 0;
}

static void
want_task_get(struct lc *c, struct lc_result *res)
{
    if (!c->task_get_inflight) {
        c->task_get_inflight = true;
        push(res, ACT_TASK_GET, 0, 0);
    }
}

static void
check_mismatch(struct lc *c)
{
    if (c->exit_known && c->die_has_code && c->die_code != c->exit_code)
        c->anomalies |= LC_AN_EXIT_CODE_MISMATCH;
}

/* The first code other than 255 that inspect (`inspect`, -1: none) or
 * the die event gave; -1 if none did. */
static int
known_not_255(const struct lc *c, int inspect)
{
    if (inspect >= 0 && inspect != 255)
        return inspect;
    if (c->die_has_code && c->die_code != 255)
        return c->die_code;
    return -1;
}

/* containerd's TaskExit outranks every other source, but for its 255
 * when inspect or the die event says another code: containerd records
 * 255 for a task whose shim it lost (killed, or containerd restarted),
 * when the engine may still have had the true code (26 and later say it
 * in the die event). `other`: known_not_255's answer. */
static bool
settle_from_containerd(struct lc *c, int other)
{
    if (!c->task_exit_seen)
        return false;
    if (c->task_exit_code == 255 &&
        (other >= 0 || (c->anomalies & LC_AN_TASK_LOST)))
        return false;
    c->exit_known = true;
    c->exit_code = c->task_exit_code;
    c->source = LC_SRC_CONTAINERD;
    /* Judged again against the final truth. */
    c->anomalies &= ~(uint32_t)(LC_AN_EXIT_UNKNOWN | LC_AN_EXIT_CODE_MISMATCH);
    check_mismatch(c);
    return true;
}

static void
note_die(struct lc *c, const struct lc_obs *o)
{
    /* The engine's code for the exit being settled stays put: a replayed
     * die without a code, or one arriving after the code was settled,
     * must not rewrite what the report will compare against. */
    if (c->die_seen && c->die_has_code && (!o->has_exit_code || c->exit_known))
        return;
    c->die_seen = true;
    c->die_has_code = o->has_exit_code;
    c->die_code = o->exit_code;
    c->die_after_outage = o->after_outage;
    /* The engine saw this exit happen: it was up, whatever the relist
     * after the outage suggested (the die was replayed after it). Not
     * so for a die dated after the engine was first found down: the
     * restarted engine may have made it as it restored the container. */
    if (!o->after_outage)
        c->anomalies &= ~(uint32_t)LC_AN_EXITED_ENGINE_DOWN;
    check_mismatch(c);
}

/* An exit was observed for the current run: settle it. */
static void
begin_exit(struct lc *c, uint64_t now, struct lc_result *res, const char *why)
{
    c->exited = true;
    c->ran = true;
    c->restarting = false;
    c->exited_at_ms = now;
    push(res, ACT_DEADLINES, (uint64_t)c->p.warn_after_ms,
         (uint64_t)c->p.give_up_after_ms);
    go(c, res, LC_SETTLING, why);
    want_inspect(c, res);
}

/* The engine runs the container again: this exit was not final. */
static void
back_to_running(struct lc *c, struct lc_result *res, const char *why)
{
    drop_slot(c, res);
    push(res, ACT_STEP_CANCEL, 0, 0);
    push(res, ACT_DEADLINES_CANCEL, 0, 0);
    reset_exit(c);
    clear_task_facts(c);
    c->ran = true;
    c->restarting = false;
    c->destroy_seen = false;
    c->gone_polled = false;
    go(c, res, LC_RUNNING, why);
}

/* Reports (when something ran) and forgets. */
static void
finish(struct lc *c, uint64_t now, struct lc_result *res, const char *why)
{
    drop_slot(c, res);
    push(res, ACT_STEP_CANCEL, 0, 0);
    push(res, ACT_DEADLINES_CANCEL, 0, 0);
    c->removed = c->destroy_seen && c->gone_polled;
    if (c->p.containerd)
        c->task_deleted = c->task_delete_seen && c->task_gone_polled;
    if (c->exited)
        c->cleanup_ms = now >= c->exited_at_ms ? now - c->exited_at_ms : 0;
    go(c, res, LC_DONE, why);
    if (c->ran || c->exited)
        push(res, ACT_REPORT, 0, 0);
    push(res, ACT_FORGET, 0, 0);
}

static void
poll_later(struct lc *c, struct lc_result *res, uint64_t ms)
{
    if ((int64_t)ms < c->p.poll_interval_ms)
        ms = (uint64_t)c->p.poll_interval_ms;
    push(res, ACT_STEP_TIMER, ms, 0);
}

/*
 * The engine said "restarting": its restart policy runs it again, after
 * a backoff. When that start fails (containerd away), Docker 20.10 marks
 * it exited and says nothing, no event at all: only asking again finds
 * that, or the exit is never reported. So a container seen restarting is
 * inspected every poll interval till it is not.
 */
static void
watch_restart(struct lc *c, struct lc_result *res, enum lc_run run)
{
    bool was = c->restarting;

    c->restarting = run == LC_RUN_RESTARTING;
    if (c->restarting) {
        c->task_missing = 0; /* no task while it waits to restart */
        poll_later(c, res, 0);
    } else if (was)
        push(res, ACT_STEP_CANCEL, 0, 0);
}

/* Both halves of the join hold: removal confirmed. */
static bool
try_task_join(struct lc *c, uint64_t now, struct lc_result *res)
{
    if (!(c->task_delete_seen && c->task_gone_polled))
        return false;
    /* The engine gave up on this task, or the task phase was troubled
     * (containerd down or restarted, reapd restarted): the engine may
     * never delete its containerd container. When the task went without
     * reapd (containerd's own cleanup of a lost shim), that container is
     * left to reapd too: deleted (NOT_FOUND is fine) before the report.
     * The ordinary way costs no extra call. */
    if (((c->anomalies & LC_AN_TASK_DELETE_TIMEOUT) || c->task_trouble) &&
        c->p.reap_leaked_tasks && !c->task_reaped_done) {
        go(c, res, LC_TASK_REAPING,
           "task gone, but the engine gave up on it: deleting its "
           "containerd container");
        c->task_reaped_done = true;
        c->ctr_delete_inflight = true;
        push(res, ACT_CTR_DELETE, 0, 0);
        return true;
    }
    finish(c, now, res,
           "task deletion confirmed: /tasks/delete seen and Tasks.Get 404");
    return true;
}

static bool
try_join(struct lc *c, uint64_t now, struct lc_result *res)
{
    if (!(c->destroy_seen && c->gone_polled))
        return false;
    if (!c->p.containerd) {
        finish(c, now, res,
               "removal confirmed: destroy seen and the engine said gone");
        return true;
    }
    /* The engine's record is gone; its containerd task must be too. */
    push(res, ACT_STEP_CANCEL, 0, 0);
    go(c, res, LC_TASK_CONFIRMING,
       "removal confirmed: destroy seen and the engine said gone; "
       "checking the task");
    if (!try_task_join(c, now, res))
        want_task_get(c, res);
    return true;
}

/* The exit code is the engine's die event's, since the container is gone
 * before inspect could tell. */
static void
settle_from_event(struct lc *c)
{
    if (c->exit_known)
        return;
    if (settle_from_containerd(c, known_not_255(c, -1)))
        return;
    /* The engine's die for a lost task is made up when it is killed. */
    if (c->die_has_code && !(c->anomalies & LC_AN_TASK_LOST)) {
        c->exit_known = true;
        c->exit_code = c->die_code;
        c->source = LC_SRC_EVENT;
    } else {
        c->anomalies |= LC_AN_EXIT_UNKNOWN;
    }
}

static void
settle_from_inspect(struct lc *c, const struct lc_inspect *in)
{
    /* ExitCode means something only once FinishedAt is set. */
    if (!in->has_exit_code || !in->finished)
        return;
    c->oom_killed = in->oom_killed;
    if (settle_from_containerd(c, known_not_255(c, in->exit_code)))
        return;
    /* A source higher in the order (containerd) is never overwritten. */
    if (!c->exit_known || c->source == LC_SRC_EVENT) {
        c->exit_known = true;
        c->exit_code = in->exit_code;
        c->source = LC_SRC_INSPECT;
    }
    check_mismatch(c);
}

/* Exit settled and the container still there: keep it or remove it. */
static void
after_settle(struct lc *c, struct lc_result *res)
{
    if (c->destroy_seen) {
        /* Already removed by someone else (the inspect answer predates
         * the destroy): nothing to keep or remove, only to confirm. */
        go(c, res, LC_CONFIRMING, "exit settled; already destroyed");
        poll_later(c, res, 0);
        return;
    }
    if (c->p.action == POLICY_KEEP) {
        push(res, ACT_DEADLINES_CANCEL, 0, 0);
        push(res, ACT_STEP_CANCEL, 0, 0);
        go(c, res, LC_KEPT, "exit settled; policy keeps the container");
        if (c->p.containerd)
            c->task_deleted = c->task_delete_seen;
        push(res, ACT_REPORT, 0, 0);
        clear_task_facts(c);
        return;
    }
    if (c->p.delay_ms > 0) {
        go(c, res, LC_DELAYING, "exit settled; waiting the policy delay");
        push(res, ACT_STEP_TIMER, (uint64_t)c->p.delay_ms, 0);
        return;
    }
    go(c, res, LC_QUEUED, "exit settled; waiting for a removal slot");
    push(res, ACT_WANT_SLOT, 0, 0);
}

static bool
is_live(enum lc_run r)
{
    return r == LC_RUN_RUNNING || r == LC_RUN_PAUSED ||
           r == LC_RUN_RESTARTING || r == LC_RUN_CREATED;
}

/* What the engine says, but for a lost task's "running": that is the
 * engine not knowing, until a start event says it runs again. */
static bool
engine_live(const struct lc *c, enum lc_run r)
{
    return is_live(r) && !(c->anomalies & LC_AN_TASK_LOST);
}

static bool
in_cleanup(enum lc_state s)
{
    return s == LC_SETTLING || s == LC_DELAYING || s == LC_QUEUED ||
           s == LC_REMOVING || s == LC_CONFIRMING || s == LC_TASK_CONFIRMING ||
           s == LC_TASK_REAPING;
}

static bool
in_task_phase(enum lc_state s)
{
    return s == LC_TASK_CONFIRMING || s == LC_TASK_REAPING;
}

/*
 * The engine says it runs, yet containerd had no task for it, listed nor
 * asked: the task went with a containerd restart, and the engine never
 * heard (26 and later drop a task whose shim they lost). Its code is gone
 * from the node. It is settled as unknown and removed (by force: no
 * process is left to kill), or kept as the policy says.
 */
static void
lose_task(struct lc *c, uint64_t now, struct lc_result *res)
{
    c->exited = true;
    c->exited_at_ms = now;
    c->task_trouble = true;
    c->anomalies |= LC_AN_TASK_LOST;
    settle_from_event(c);
    go(c, res, LC_SETTLING, NULL);
    after_settle(c, res);
    if (in_cleanup(c->state))
        push(res, ACT_DEADLINES, (uint64_t)c->p.warn_after_ms,
             (uint64_t)c->p.give_up_after_ms);
    res->reason = "its task is lost: the engine says it runs, containerd "
                  "has no task";
}

/* The engine no longer has it (destroy event, or absent from a relist). */
static void
on_destroy(struct lc *c, const struct lc_obs *o, struct lc_result *res)
{
    c->destroy_seen = true;
    switch (c->state) {
    case LC_RUNNING:
        if (!c->ran) {
            finish(c, o->now_ms, res, "removed before it ever ran");
            return;
        }
        /* Its die was missed (stream cut): the exit is unknowable. */
        c->exited = true;
        c->exited_at_ms = o->now_ms;
        push(res, ACT_DEADLINES, (uint64_t)c->p.warn_after_ms,
             (uint64_t)c->p.give_up_after_ms);
        settle_from_event(c);
        go(c, res, LC_CONFIRMING, "removed while running; exit not seen");
        want_inspect(c, res);
        return;
    case LC_SETTLING:
        if (!try_join(c, o->now_ms, res))
            want_inspect(c, res);
        return;
    case LC_DELAYING:
    case LC_QUEUED:
        drop_slot(c, res);
        push(res, ACT_STEP_CANCEL, 0, 0);
        go(c, res, LC_CONFIRMING, "removed by someone else");
        if (!try_join(c, o->now_ms, res))
            want_inspect(c, res);
        return;
    case LC_REMOVING:
        if (c->delete_inflight)
            return; /* its answer moves us on */
        push(res, ACT_STEP_CANCEL, 0, 0);
        go(c, res, LC_CONFIRMING, "removed while a DELETE retry waited");
        if (!try_join(c, o->now_ms, res))
            want_inspect(c, res);
        return;
    case LC_CONFIRMING:
        try_join(c, o->now_ms, res);
        return;
    case LC_KEPT:
    case LC_ABANDONED:
        /* Already reported; nothing more to say about it. */
        push(res, ACT_FORGET, 0, 0);
        go(c, res, LC_DONE, "removed after its report");
        return;
    default:
        return;
    }
}

static void
on_die(struct lc *c, const struct lc_obs *o, struct lc_result *res)
{
    switch (c->state) {
    case LC_KEPT:
    case LC_ABANDONED:
        /* The engine hearing at last of the lost task reported. */
        if (c->anomalies & LC_AN_TASK_LOST) {
            res->reason = "die of the lost task already reported";
            return;
        }
        /* A new run whose start we missed. */
        reset_exit(c);
        c->destroy_seen = c->gone_polled = false;
        /* fall through */
    case LC_RUNNING:
        note_die(c, o);
        begin_exit(c, o->now_ms, res, "die event");
        return;
    default:
        /* The same exit seen another way first (relist, replay). */
        note_die(c, o);
        return;
    }
}

static void
on_start(struct lc *c, const struct lc_obs *o, struct lc_result *res)
{
    (void)o;
    if (c->state == LC_RUNNING) {
        c->ran = true;
        if (c->restarting) /* the watch is over */
            push(res, ACT_STEP_CANCEL, 0, 0);
        c->restarting = false;
        return;
    }
    if (c->state == LC_DONE || in_task_phase(c->state))
        return; /* removed already: a stale or foreign event */
    back_to_running(c, res, "started again");
}

static void
on_found(struct lc *c, const struct lc_obs *o, struct lc_result *res)
{
    bool live = engine_live(c, o->inspect.run);

    switch (c->state) {
    case LC_RUNNING:
        if (live) {
            if (o->inspect.run != LC_RUN_CREATED)
                c->ran = true;
            watch_restart(c, res, o->inspect.run);
            return;
        }
        begin_exit(c, o->now_ms, res,
                   o->after_outage ? "relist: found exited after the "
                                     "engine was down"
                                   : "relist: found exited");
        /* Its exit went unseen: whatever failed then is unknown. */
        c->task_trouble = true;
        if (o->after_outage)
            c->anomalies |= LC_AN_EXITED_ENGINE_DOWN;
        return;
    case LC_KEPT:
    case LC_ABANDONED:
        if (live && o->inspect.run != LC_RUN_CREATED) {
            back_to_running(c, res, "relist: running again");
            watch_restart(c, res, o->inspect.run);
        }
        return;
    case LC_DELAYING:
    case LC_QUEUED:
        /* Its start event was missed: removing it now would kill it. */
        if (live && o->inspect.run != LC_RUN_CREATED) {
            back_to_running(c, res, "relist: running again");
            watch_restart(c, res, o->inspect.run);
        }
        return;
    default:
        return;
    }
}

static void
on_inspect(struct lc *c, const struct lc_obs *o, struct lc_result *res)
{
    const struct lc_inspect *in = &o->inspect;
    bool live = engine_live(c, in->run);

    switch (c->state) {
    case LC_RUNNING:
        if (live && c->task_missing == 2 && !c->task_exit_seen &&
            (in->run == LC_RUN_RUNNING || in->run == LC_RUN_PAUSED)) {
            lose_task(c, o->now_ms, res);
            return;
        }
        if (live) {
            if (c->task_missing == 2) { /* it has a task after all */
                c->task_missing = 0;
                push(res, ACT_STEP_CANCEL, 0, 0);
            }
            if (in->run != LC_RUN_CREATED)
                c->ran = true;
            c->inspect_failures = 0;
            watch_restart(c, res, in->run);
            return;
        }
        /* Possibly stale: ask again from the settling state. */
        begin_exit(c, o->now_ms, res, "inspect: found exited");
        return;
    case LC_SETTLING:
        c->inspect_failures = 0;
        if (live) {
            back_to_running(c, res, "not final: the engine restarts it");
            watch_restart(c, res, in->run);
            return;
        }
        settle_from_inspect(c, in);
        if (!c->exit_known)
            settle_from_event(c);
        /* No die for it (or only one the restarted engine may have
         * made), and it finished while the engine was down: what the
         * engine recovered at its restart (reapd may have started after
         * that, so it never saw it run). */
        if (o->after_outage && (!c->die_seen || c->die_after_outage)) {
            c->anomalies |= LC_AN_EXITED_ENGINE_DOWN;
            c->task_trouble = true;
        }
        if (in->run == LC_RUN_REMOVING) {
            go(c, res, LC_CONFIRMING, "exit settled; engine is removing it");
            poll_later(c, res, 0);
            return;
        }
        after_settle(c, res);
        return;
    case LC_CONFIRMING:
        c->inspect_failures = 0;
        if (live) {
            back_to_running(c, res, "started again during removal");
            watch_restart(c, res, in->run);
            return;
        }
        if (in->run == LC_RUN_REMOVING) {
            poll_later(c, res, 0);
            return;
        }
        /* Still there and nobody is removing it. */
        if (c->p.action == POLICY_KEEP) {
            after_settle(c, res);
            return;
        }
        if (c->has_slot) {
            c->delete_failures++;
            c->anomalies |= LC_AN_DELETE_RETRIED;
            go(c, res, LC_REMOVING, "still present after removal; retry");
            push(res, ACT_STEP_TIMER,
                 retry_delay(c, c->delete_failures, o->rnd), 0);
            return;
        }
        go(c, res, LC_QUEUED, "still present; waiting for a removal slot");
        push(res, ACT_WANT_SLOT, 0, 0);
        return;
    case LC_DELAYING:
    case LC_QUEUED:
    case LC_REMOVING:
        if (live && c->state != LC_REMOVING) {
            back_to_running(c, res, "started again before removal");
            watch_restart(c, res, in->run);
        }
        return;
    default:
        return;
    }
}

static void
on_inspect_gone(struct lc *c, const struct lc_obs *o, struct lc_result *res)
{
    c->gone_polled = true;
    c->inspect_failures = 0;
    switch (c->state) {
    case LC_RUNNING:
        /* Gone without a die we saw; the destroy event completes it. */
        if (c->ran) {
            c->exited = true;
            c->exited_at_ms = o->now_ms;
            push(res, ACT_DEADLINES, (uint64_t)c->p.warn_after_ms,
                 (uint64_t)c->p.give_up_after_ms);
        }
        settle_from_event(c);
        go(c, res, LC_CONFIRMING, "inspect: gone");
        if (!try_join(c, o->now_ms, res))
            poll_later(c, res, 0);
        return;
    case LC_SETTLING:
    case LC_DELAYING:
    case LC_QUEUED:
        settle_from_event(c);
        drop_slot(c, res);
        push(res, ACT_STEP_CANCEL, 0, 0);
        go(c, res, LC_CONFIRMING, "inspect: gone before removal");
        if (!try_join(c, o->now_ms, res))
            poll_later(c, res, 0);
        return;
    case LC_REMOVING:
        if (c->delete_inflight)
            return;
        push(res, ACT_STEP_CANCEL, 0, 0);
        go(c, res, LC_CONFIRMING, "inspect: gone");
        if (!try_join(c, o->now_ms, res))
            poll_later(c, res, 0);
        return;
    case LC_CONFIRMING:
        if (!try_join(c, o->now_ms, res))
            poll_later(c, res, 0);
        return;
    default:
        return;
    }
}

static void
on_inspect_failed(struct lc *c, const struct lc_obs *o, struct lc_result *res)
{
    if (c->state != LC_SETTLING && c->state != LC_CONFIRMING &&
        !(c->state == LC_RUNNING && (c->restarting || c->task_missing == 2)))
        return;
    c->inspect_failures++;
    /* A slow or failed inspect never ends the wait; it is retried. */
    push(res, ACT_STEP_TIMER, retry_delay(c, c->inspect_failures, o->rnd), 0);
    res->reason = "inspect failed; retrying";
}

static void
on_delete_result(struct lc *c, const struct lc_obs *o, struct lc_result *res)
{
    if (c->state != LC_REMOVING)
        return; /* stale: we moved on while it was in flight */
    switch (o->kind) {
    case OBS_DELETE_DONE:
        /* The engine answers a DELETE only once its record of the
         * container is gone: the same word as inspect's 404, so no
         * inspect is asked for; only the destroy event is awaited. */
        c->removed_by_us = true;
        c->gone_polled = true;
        c->delete_failures = 0;
        go(c, res, LC_CONFIRMING, "DELETE accepted");
        if (!try_join(c, o->now_ms, res))
            poll_later(c, res, 0);
        return;
    case OBS_DELETE_GONE:
        c->gone_polled = true;
        c->delete_failures = 0;
        go(c, res, LC_CONFIRMING, "DELETE: no such container");
        if (!try_join(c, o->now_ms, res))
            poll_later(c, res, 0);
        return;
    case OBS_DELETE_CONFLICT:
        go(c, res, LC_CONFIRMING, "DELETE: conflict; polling");
        poll_later(c, res, 0);
        return;
    default:
        c->delete_failures++;
        c->anomalies |= LC_AN_DELETE_RETRIED;
        push(res, ACT_STEP_TIMER, retry_delay(c, c->delete_failures, o->rnd),
             0);
        res->reason = "DELETE failed; retrying";
        return;
    }
}

static void
on_slot(struct lc *c, const struct lc_obs *o, struct lc_result *res)
{
    (void)o;
    if (c->state != LC_QUEUED) {
        /* Granted after we stopped wanting it: hand it back. */
        push(res, ACT_DROP_SLOT, 0, 0);
        return;
    }
    c->has_slot = true;
    go(c, res, LC_REMOVING, "removal slot granted");
    send_delete(c, res);
}

static void
on_step(struct lc *c, const struct lc_obs *o, struct lc_result *res)
{
    (void)o;
    switch (c->state) {
    case LC_RUNNING:
        if (c->restarting || c->task_missing == 2)
            want_inspect(c, res);
        else if (c->task_missing == 1 && !c->task_get_inflight) {
            c->task_get_inflight = c->task_get_missing = true;
            push(res, ACT_TASK_GET, 0, 0);
        }
        return;
    case LC_SETTLING:
    case LC_CONFIRMING:
        want_inspect(c, res);
        return;
    case LC_DELAYING:
        go(c, res, LC_QUEUED, "delay over; waiting for a removal slot");
        push(res, ACT_WANT_SLOT, 0, 0);
        return;
    case LC_REMOVING:
        send_delete(c, res);
        return;
    case LC_TASK_CONFIRMING:
        want_task_get(c, res);
        return;
    case LC_TASK_REAPING:
        if (!c->task_reaped_done && !c->task_delete_inflight) {
            c->task_delete_inflight = true;
            push(res, ACT_TASK_DELETE, 0, 0);
        } else if (c->task_reaped_done && !c->ctr_delete_inflight) {
            c->ctr_delete_inflight = true;
            push(res, ACT_CTR_DELETE, 0, 0);
        }
        return;
    default:
        return;
    }
}

static void
on_warn(struct lc *c, const struct lc_obs *o, struct lc_result *res)
{
    (void)o;
    if (!in_cleanup(c->state))
        return;
    c->anomalies |= LC_AN_CLEANUP_SLOW;
    push(res, ACT_WARN, 0, 0);
    res->reason = "cleanup slower than warn_after_ms; still waiting";
}

static void
on_giveup(struct lc *c, const struct lc_obs *o, struct lc_result *res)
{
    if (!in_cleanup(c->state))
        return;
    c->anomalies |= LC_AN_GAVE_UP;
    settle_from_event(c);
    drop_slot(c, res);
    push(res, ACT_STEP_CANCEL, 0, 0);
    push(res, ACT_DEADLINES_CANCEL, 0, 0);
    /* In the task phase the engine's side is confirmed; only containerd's
     * is not. */
    c->removed = in_task_phase(c->state);
    if (c->p.containerd)
        c->task_deleted = 0;
    c->cleanup_ms =
        o->now_ms >= c->exited_at_ms ? o->now_ms - c->exited_at_ms : 0;
    if (c->destroy_seen || in_task_phase(c->state)) {
        /* No further event will come to retire the record. */
        go(c, res, LC_DONE, "gave up after give_up_after_ms; destroyed");
        push(res, ACT_REPORT, 0, 0);
        push(res, ACT_FORGET, 0, 0);
        return;
    }
    go(c, res, LC_ABANDONED, "gave up after give_up_after_ms");
    push(res, ACT_REPORT, 0, 0);
    clear_task_facts(c);
}

static void
on_task_exit(struct lc *c, const struct lc_obs *o, struct lc_result *res)
{
    /* 255 is containerd's "unknown": what it records for a task whose
     * shim it lost (killed, or mid-delete when containerd restarted),
     * with the time of its cleanup. It never replaces the code the run's
     * real TaskExit said; a new run clears that first (a start). */
    if (c->task_exit_seen && o->exit_code == 255 && c->task_exit_code != 255) {
        res->reason = "containerd TaskExit 255 after the run's own: kept "
                      "the first";
        return;
    }
    c->task_exit_seen = true;
    c->task_exit_code = o->exit_code;
    /* A run's TaskExit can come before the engine's start event: it ran
     * (a container gone before that event is read still exited). */
    if (c->state == LC_RUNNING)
        c->ran = true;
    /* Arriving after the exit was settled (by inspect, the die event, or
     * as unknown): containerd outranks them all (its 255 only the
     * unknown and other 255s). In KEPT or ABANDONED it
     * belongs to the next run and waits for its die. */
    if (in_cleanup(c->state) &&
        (c->exit_known || (c->anomalies & LC_AN_EXIT_UNKNOWN)))
        settle_from_containerd(
            c, known_not_255(c, c->exit_known && c->source != LC_SRC_CONTAINERD
                                    ? c->exit_code
                                    : -1));
    res->reason = "containerd TaskExit";
}

static void
on_task_delete_event(struct lc *c, const struct lc_obs *o,
                     struct lc_result *res)
{
    c->task_delete_seen = true;
    if (c->state == LC_TASK_CONFIRMING && !try_task_join(c, o->now_ms, res))
        want_task_get(c, res);
}

/* A task list did not hold the task of a running container. The list may
 * be older than a task just started, or the exit ordinary with its
 * TaskExit missed: Tasks.Get, then inspect, decide. */
static void
on_task_missing(struct lc *c, const struct lc_obs *o, struct lc_result *res)
{
    (void)o;
    if (c->state != LC_RUNNING || !c->ran || c->restarting ||
        c->task_exit_seen || c->task_missing != 0)
        return;
    c->task_missing = 1;
    push(res, ACT_STEP_TIMER, LC_TASK_MISSING_MS, 0);
    res->reason = "its task is not listed; asking again";
}

static void
on_missing_result(struct lc *c, const struct lc_obs *o, struct lc_result *res)
{
    switch (o->kind) {
    case OBS_TASK_GONE:
        c->task_missing = 2;
        c->task_failures = 0;
        want_inspect(c, res);
        res->reason = "its task is gone; asking the engine";
        return;
    case OBS_TASK_PRESENT:
        c->task_missing = 0;
        c->task_failures = 0;
        push(res, ACT_STEP_CANCEL, 0, 0);
        res->reason = "its task is there after all";
        return;
    default: /* OBS_TASK_FAILED */
        c->task_failures++;
        push(res, ACT_STEP_TIMER, retry_delay(c, c->task_failures, o->rnd), 0);
        res->reason = "Tasks.Get failed; retrying";
        return;
    }
}

static void
on_task_result(struct lc *c, const struct lc_obs *o, struct lc_result *res)
{
    if (c->task_get_missing) {
        c->task_get_missing = false;
        if (c->state == LC_RUNNING && c->task_missing == 1)
            on_missing_result(c, o, res);
        else if (c->state == LC_TASK_CONFIRMING)
            want_task_get(c, res); /* asked before this phase: again */
        return;
    }
    if (c->state != LC_TASK_CONFIRMING)
        return; /* stale */
    switch (o->kind) {
    case OBS_TASK_GONE:
        c->task_gone_polled = true;
        c->task_failures = 0;
        if (try_task_join(c, o->now_ms, res))
            return;
        /* Tasks.Get says gone twice, and its /tasks/delete has not come:
         * an event containerd never replays may have been lost (its
         * stream cut, the event before reapd knew the container). The
         * task list stands in for it, now, not at the next audit; then
         * again now and then while the event stays away. */
        if (++c->task_gone_polls == 2 || c->task_gone_polls % 20 == 0) {
            push(res, ACT_TASK_LIST, 0, 0);
            res->reason = "task gone, its /tasks/delete not seen: listing "
                          "tasks";
        }
        poll_later(c, res, 0);
        return;
    case OBS_TASK_PRESENT:
        c->task_failures = 0;
        c->task_trouble = true;
        if (o->task_running) {
            /* The engine has no container, yet the task runs: not ours
             * to kill. Keep watching; warn/give-up deadlines apply. */
            res->reason = "task still running without its container";
            poll_later(c, res, 0);
            return;
        }
        /* Stopped, and the engine's record is gone: the engine gave up
         * on deleting it (the leak after a task-delete timeout). */
        c->anomalies |= LC_AN_TASK_DELETE_TIMEOUT;
        if (!c->p.reap_leaked_tasks) {
            finish(c, o->now_ms, res,
                   "the engine leaked the task; policy leaves it");
            return;
        }
        go(c, res, LC_TASK_REAPING, "the engine leaked the task; reaping");
        c->task_reaped_done = false;
        c->task_delete_inflight = true;
        push(res, ACT_TASK_DELETE, 0, 0);
        return;
    default: /* OBS_TASK_FAILED */
        c->task_failures++;
        c->task_trouble = true;
        push(res, ACT_STEP_TIMER, retry_delay(c, c->task_failures, o->rnd), 0);
        res->reason = "Tasks.Get failed; retrying";
        return;
    }
}

static void
on_reap_result(struct lc *c, const struct lc_obs *o, struct lc_result *res)
{
    if (c->state != LC_TASK_REAPING)
        return;
    /* Each answer only in its turn: a result nobody asked for (a caller's
     * slip) must not send a second delete. */
    if ((o->kind == OBS_TASK_DELETE_DONE && c->task_reaped_done) ||
        (o->kind == OBS_CTR_DELETE_DONE && !c->task_reaped_done))
        return;
    switch (o->kind) {
    case OBS_TASK_DELETE_DONE:
        c->task_reaped_done = true;
        c->task_failures = 0;
        c->anomalies |= LC_AN_TASK_REAPED;
        c->ctr_delete_inflight = true;
        push(res, ACT_CTR_DELETE, 0, 0);
        res->reason = "leaked task deleted; deleting its containerd "
                      "container";
        return;
    case OBS_CTR_DELETE_DONE:
        c->task_failures = 0;
        go(c, res, LC_TASK_CONFIRMING, "containerd container deleted");
        if (!try_task_join(c, o->now_ms, res))
            want_task_get(c, res);
        return;
    default: /* a failed Tasks.Delete or Containers.Delete */
        c->task_failures++;
        push(res, ACT_STEP_TIMER, retry_delay(c, c->task_failures, o->rnd), 0);
        res->reason = "reaping the leaked task failed; retrying";
        return;
    }
}

void
lc_init(struct lc *c, const struct lc_params *p)
{
    memset(c, 0, sizeof(*c));
    c->p = *p;
    c->state = LC_RUNNING;
    c->task_deleted = p->containerd ? 0 : -1;
    if (p->labels_truncated)
        c->anomalies |= LC_AN_LABELS_TRUNCATED;
    if (p->metadata_truncated)
        c->anomalies |= LC_AN_METADATA_TRUNCATED;
}

uint32_t
lc_note_cut(struct lc *c, bool labels, bool metadata)
{
    uint32_t add = (labels ? LC_AN_LABELS_TRUNCATED : 0) |
                   (metadata ? LC_AN_METADATA_TRUNCATED : 0);

    add &= ~c->anomalies;
    c->anomalies |= add;
    return add;
}

void
lc_start_exited(struct lc *c, uint64_t now_ms, struct lc_result *res)
{
    memset(res, 0, sizeof(*res));
    res->from = res->to = c->state;
    begin_exit(c, now_ms, res, "first seen exited");
    c->task_trouble = true;
}

static uint64_t
remaining(int64_t total_ms, uint64_t spent_ms)
{
    if (total_ms <= 0)
        return 0;
    /* At least 1 ms: a deadline already passed fires at once. */
    return (uint64_t)total_ms > spent_ms ? (uint64_t)total_ms - spent_ms : 1;
}

void
lc_resume(struct lc *c, uint64_t now_ms, uint64_t since_exit_ms,
          struct lc_result *res)
{
    memset(res, 0, sizeof(*res));
    res->from = res->to = c->state;
    c->inspect_inflight = c->delete_inflight = false;
    c->task_get_inflight = c->task_delete_inflight = false;
    c->task_get_missing = false;
    c->task_missing = 0;
    c->ctr_delete_inflight = false;
    c->has_slot = false;
    if (c->exited)
        c->exited_at_ms = now_ms > since_exit_ms ? now_ms - since_exit_ms : 0;
    /* Whatever happened while reapd was down (containerd restarted amid
     * the engine's cleanup) is unknown. */
    if (in_cleanup(c->state)) {
        c->task_trouble = true;
        push(res, ACT_DEADLINES,
             (c->anomalies & LC_AN_CLEANUP_SLOW)
                 ? 0
                 : remaining(c->p.warn_after_ms, since_exit_ms),
             remaining(c->p.give_up_after_ms, since_exit_ms));
    }
    switch (c->state) {
    case LC_SETTLING:
        res->reason = "resumed after restart: settling";
        want_inspect(c, res);
        return;
    case LC_DELAYING:
        res->reason = "resumed after restart: policy delay";
        push(res, ACT_STEP_TIMER, remaining(c->p.delay_ms, since_exit_ms), 0);
        return;
    case LC_QUEUED:
    case LC_REMOVING:
        /* A DELETE whose answer was lost is sent again: 404 is fine. */
        go(c, res, LC_QUEUED, "resumed after restart: removal");
        push(res, ACT_WANT_SLOT, 0, 0);
        return;
    case LC_CONFIRMING:
        res->reason = "resumed after restart: confirming removal";
        want_inspect(c, res);
        return;
    case LC_TASK_CONFIRMING:
    case LC_TASK_REAPING:
        /* Tasks.Get decides again whether the task is still there. */
        go(c, res, LC_TASK_CONFIRMING,
           "resumed after restart: confirming task deletion");
        want_task_get(c, res);
        return;
    default:
        return;
    }
}

void
lc_step(struct lc *c, const struct lc_obs *o, struct lc_result *res)
{
    memset(res, 0, sizeof(*res));
    res->from = res->to = c->state;

    switch (o->kind) {
    case OBS_INSPECT:
    case OBS_INSPECT_GONE:
    case OBS_INSPECT_FAILED:
        c->inspect_inflight = false;
        break;
    case OBS_DELETE_DONE:
    case OBS_DELETE_GONE:
    case OBS_DELETE_CONFLICT:
    case OBS_DELETE_FAILED:
        c->delete_inflight = false;
        break;
    case OBS_TASK_PRESENT:
    case OBS_TASK_GONE:
    case OBS_TASK_FAILED:
        c->task_get_inflight = false;
        break;
    case OBS_TASK_DELETE_DONE:
    case OBS_TASK_DELETE_FAILED:
        c->task_delete_inflight = false;
        break;
    case OBS_CTR_DELETE_DONE:
    case OBS_CTR_DELETE_FAILED:
        c->ctr_delete_inflight = false;
        break;
    default:
        break;
    }
    if (c->state == LC_DONE) {
        if (o->kind == OBS_SLOT)
            push(res, ACT_DROP_SLOT, 0, 0);
        return;
    }

    /* Without the channel, containerd observations mean nothing here. */
    if (!c->p.containerd && o->kind >= OBS_TASK_EXIT)
        return;

    switch (o->kind) {
    case OBS_EVENT_START:
        on_start(c, o, res);
        break;
    case OBS_EVENT_DIE:
        on_die(c, o, res);
        break;
    case OBS_EVENT_DESTROY:
    case OBS_ABSENT:
        on_destroy(c, o, res);
        break;
    case OBS_FOUND:
        on_found(c, o, res);
        break;
    case OBS_INSPECT:
        on_inspect(c, o, res);
        break;
    case OBS_INSPECT_GONE:
        on_inspect_gone(c, o, res);
        break;
    case OBS_INSPECT_FAILED:
        on_inspect_failed(c, o, res);
        break;
    case OBS_DELETE_DONE:
    case OBS_DELETE_GONE:
    case OBS_DELETE_CONFLICT:
    case OBS_DELETE_FAILED:
        on_delete_result(c, o, res);
        break;
    case OBS_SLOT:
        on_slot(c, o, res);
        break;
    case OBS_TIMER_STEP:
        on_step(c, o, res);
        break;
    case OBS_TIMER_WARN:
        on_warn(c, o, res);
        break;
    case OBS_TIMER_GIVEUP:
        on_giveup(c, o, res);
        break;
    case OBS_TASK_EXIT:
        on_task_exit(c, o, res);
        break;
    case OBS_TASK_DELETE_EVENT:
        on_task_delete_event(c, o, res);
        break;
    case OBS_TASK_PRESENT:
    case OBS_TASK_GONE:
    case OBS_TASK_FAILED:
        on_task_result(c, o, res);
        break;
    case OBS_TASK_DELETE_DONE:
    case OBS_TASK_DELETE_FAILED:
    case OBS_CTR_DELETE_DONE:
    case OBS_CTR_DELETE_FAILED:
        on_reap_result(c, o, res);
        break;
    case OBS_TASK_MISSING:
        on_task_missing(c, o, res);
        break;
    case OBS_CTRD_OUTAGE:
        /* The engine's cleanup of an exit may have run while containerd
         * was away: its Containers.Delete refused, the task gone but the
         * containerd container left. Made sure of in the task phase. */
        if (in_cleanup(c->state))
            c->task_trouble = true;
        break;
    default:
        break;
    }
}

const char *
lc_state_name(enum lc_state s)
{
    static const char *const names[LC_NSTATES] = {
        "running",  "settling",        "delaying",     "queued",
        "removing", "confirming",      "kept",         "abandoned",
        "done",     "task_confirming", "task_reaping",
    };
    return (unsigned)s < LC_NSTATES ? names[s] : "invalid";
}

const char *
lc_obs_name(enum lc_obs_kind k)
{
    static const char *const names[OBS_NKINDS] = {
        "event_start",
        "event_die",
        "event_destroy",
        "found",
        "absent",
        "inspect",
        "inspect_gone",
        "inspect_failed",
        "delete_done",
        "delete_gone",
        "delete_conflict",
        "delete_failed",
        "slot",
        "timer_step",
        "timer_warn",
        "timer_giveup",
        "task_exit",
        "task_delete_event",
        "task_present",
        "task_gone",
        "task_failed",
        "task_delete_done",
        "task_delete_failed",
        "ctr_delete_done",
        "ctr_delete_failed",
        "ctrd_outage",
        "task_missing",
    };
    return (unsigned)k < OBS_NKINDS ? names[k] : "invalid";
}

const char *
lc_source_name(enum lc_source s)
{
    switch (s) {
    case LC_SRC_CONTAINERD:
        return "containerd";
    case LC_SRC_INSPECT:
        return "inspect";
    case LC_SRC_EVENT:
        return "event";
    default:
        return NULL;
    }
}

const char *
lc_anomaly_name(enum lc_anomaly a)
{
    switch (a) {
    case LC_AN_EXIT_CODE_MISMATCH:
        return "engine_exit_code_mismatch";
    case LC_AN_CLEANUP_SLOW:
        return "cleanup_slow";
    case LC_AN_GAVE_UP:
        return "cleanup_gave_up";
    case LC_AN_DELETE_RETRIED:
        return "delete_retried";
    case LC_AN_EXIT_UNKNOWN:
        return "exit_code_unknown";
    case LC_AN_TASK_DELETE_TIMEOUT:
        return "task_delete_timeout";
    case LC_AN_TASK_REAPED:
        return "task_reaped";
    case LC_AN_LABELS_TRUNCATED:
        return "labels_truncated";
    case LC_AN_METADATA_TRUNCATED:
        return "metadata_truncated";
    case LC_AN_EXITED_ENGINE_DOWN:
        return "exited_while_engine_down";
    case LC_AN_TASK_LOST:
        return "task_lost";
    default:
        return NULL;
    }
}

int
lc_run_parse(const char *s, enum lc_run *out)
{
    static const struct {
        const char *name;
        enum lc_run run;
    } map[] = {
        {"created", LC_RUN_CREATED},   {"running", LC_RUN_RUNNING},
        {"paused", LC_RUN_PAUSED},     {"restarting", LC_RUN_RESTARTING},
        {"removing", LC_RUN_REMOVING}, {"exited", LC_RUN_EXITED},
        {"dead", LC_RUN_DEAD},
    };
    size_t i;

    if (s == NULL)
        return -1;
    for (i = 0; i < sizeof(map) / sizeof(map[0]); i++) {
        if (strcmp(s, map[i].name) == 0) {
            *out = map[i].run;
            return 0;
        }
    }
    return -1;
}
