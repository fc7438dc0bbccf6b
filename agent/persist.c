/*
 * persist — the durable layer's top; see persist.h.
 *
 * Container records go to the store after every step that changes what a
 * restart must not forget; a DELETE waits for its record's commit, shared
 * by the DELETEs of a loop turn; delivered reports are pruned. When the
 * commits happen is the group commit's (groupcommit.c), the reports are
 * reportwrite.c's: this file starts and stops both, and gives the group
 * commit's retry hook to what waits for it.
 */
#include "persist.h"

#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "log.h"
#include "loop.h"
#include "reaper_int.h"
#include "record.h"
#include "report.h"
#include "store.h"

#define PRUNE_INTERVAL_S 600

static void on_prune(evutil_socket_t fd, short what, void *arg);
static void on_delq(evutil_socket_t fd, short what, void *arg);
static void flush_delq(struct reaper *r);

/* c's report is written: c, held for it, is forgotten if it waited for
 * that, or else its record written. */
static void
report_released(struct rec *c)
{
    if (c->forget_due)
        c->r->ps.cb->forget(c);
    else
        persist_rec(c); /* the step that reported, held till now */
}

/* The group commit's retry hook: the reports waiting in memory. */
static bool
retry_unsaved(void *arg)
{
    return reportwrite_retry(arg);
}

int
persist_init(struct reaper *r, const struct persist_cbs *up)
{
    static const struct groupcommit_hooks hooks = {
        .retry = retry_unsaved,
    };
    struct persist *ps = &r->ps;
    struct event_base *base = loop_base(r->l);

    ps->cb = up;
    if (reportwrite_init(r, report_released) != 0)
        return -1;
    ps->gc = groupcommit_new(r->l, r->store, &hooks, r);
    ps->prune_timer = evtimer_new(base, on_prune, r);
    ps->delq_ev = event_new(base, -1, 0, on_delq, r);
    return ps->gc != NULL && ps->prune_timer != NULL && ps->delq_ev != NULL
               ? 0
               : -1;
}

void
persist_cleanup(struct reaper *r)
{
    struct persist *ps = &r->ps;

    /* The copy in flight ends first: the reports queued are committed on
     * the loop, then the last flush; what the store did not take is said
     * last. */
    groupcommit_stop(ps->gc);
    reportwrite_cleanup(r);
    groupcommit_free(ps->gc);
    ps->gc = NULL;
    reportwrite_drop_unsaved(r);
    if (ps->prune_timer != NULL)
        event_free(ps->prune_timer);
    ps->prune_timer = NULL;
    if (ps->delq_ev != NULL)
        event_free(ps->delq_ev);
    ps->delq_ev = NULL;
    free(ps->delq);
    ps->delq = NULL;
    ps->ndelq = ps->delq_cap = 0;
}

int
persist_start(struct reaper *r)
{
    struct timeval soon = {0, 0};

    if (reportwrite_start(r) != 0)
        return -1;
    groupcommit_start(r->ps.gc);
    evtimer_add(r->ps.prune_timer, &soon);
    return 0;
}

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
    groupcommit_result(r->ps.gc, rc, "pruning delivered reports");
    if (n > 0) {
        r->ps.pruned += n;
        log_info(NULL, "state: pruned %llu delivered reports",
                 (unsigned long long)n);
    }
    evtimer_add(r->ps.prune_timer, &tv);
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

static uint64_t
fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;

    while (n-- > 0)
        h = (h ^ *b++) * 0x100000001b3ULL;
    return h;
}

static uint64_t
fnv_str(uint64_t h, const char *s)
{
    return s != NULL ? fnv(h, s, strlen(s) + 1) : fnv(h, "", 1);
}

/* What a record knows that nobody may tell reapd again: how the
 * container exited and by whose word, what went wrong, who removed it
 * and its task. The rest of a cleanup (its state, what was polled and
 * seen gone) a restart learns again from the engine. */
static uint64_t
facts_of(const struct rec *c)
{
    const struct lc *l = &c->lc;
    struct {
        int32_t die_code, exit_code, source, task_exit_code;
        uint32_t anomalies;
        uint8_t ran, exited, die_seen, die_has_code, die_after_outage,
            exit_known, oom_killed, removed_by_us, task_exit_seen,
            task_reaped_done, task_trouble;
        int64_t die_nano, exited_wall_ms;
    } f;
    uint64_t h = 0xcbf29ce484222325ULL;

    memset(&f, 0, sizeof(f)); /* the padding too: it is hashed */
    f.die_code = l->die_code;
    f.exit_code = l->exit_code;
    f.source = (int32_t)l->source;
    f.task_exit_code = l->task_exit_code;
    f.anomalies = l->anomalies;
    f.ran = l->ran;
    f.exited = l->exited;
    f.die_seen = l->die_seen;
    f.die_has_code = l->die_has_code;
    f.die_after_outage = l->die_after_outage;
    f.exit_known = l->exit_known;
    f.oom_killed = l->oom_killed;
    f.removed_by_us = l->removed_by_us;
    f.task_exit_seen = l->task_exit_seen;
    f.task_reaped_done = l->task_reaped_done;
    f.task_trouble = l->task_trouble;
    f.die_nano = c->die_nano;
    f.exited_wall_ms = c->exited_wall_ms;
    h = fnv(h, &f, sizeof(f));
    h = fnv_str(h, c->name);
    h = fnv_str(h, c->started_at);
    return fnv_str(h, c->finished_at);
}

/* States a restart resumes by asking the engine again (lc_resume). */
static bool
resumable(enum lc_state s)
{
    switch (s) {
    case LC_RUNNING:
    case LC_SETTLING:
    case LC_DELAYING:
    case LC_QUEUED:
    case LC_REMOVING:
    case LC_CONFIRMING:
    case LC_TASK_CONFIRMING:
    case LC_TASK_REAPING:
        return true;
    default:
        return false;
    }
}

/*
 * After every step of a managed record: what a restart must not forget
 * (docs/state.md, "Which facts must be on disk"). Every record past an
 * exit, or reported and kept; one whose containerd TaskExit is in while
 * the engine has not yet said it exited (its die comes after its own task
 * deletion, which can take more than 30 s): containerd does not replay
 * events, and that TaskExit may be the only true code the node will ever
 * have. And a container that runs, once: a relist would find it again,
 * but not if it exits and is removed (`--rm`) while reapd is down and the
 * engine's events are lost with an engine restart (or pushed out of its
 * 256-event buffer); the record turns that silence into a report whose
 * code is unknown. A step that changes no fact, only the state, is not
 * written when the state is one a restart resumes by asking the engine
 * again: resumed from the state on disk, the record comes to the same
 * place (a DELETE sent again is answered 404). `must`: written whatever
 * changed (a DELETE's record: only it says the removal is reapd's).
 */
static void
rec_write(struct rec *c, bool must)
{
    struct reaper *r = c->r;
    bool running, lazy;
    uint64_t facts;
    int rc;

    if (r->store == NULL)
        return;
    if (c->persist_done) {
        /* The step's DELETE wrote it (persist_before_delete). */
        c->persist_done = false;
        return;
    }
    /* Its report waits: the record source would give nothing now, and
     * the step is written after the report (report_released). */
    if (c->report_due)
        return;
    if (c->lc.exited && c->exited_wall_ms == 0)
        c->exited_wall_ms = report_now_ms();
    if (!c->lc.exited)
        c->exited_wall_ms = 0;
    running =
        c->lc.state == LC_RUNNING && !c->lc.exited && !c->lc.task_exit_seen;
    if (running && !c->lc.ran) {
        /* Created, never started: if it goes unseen, nothing ran. */
        if (c->persisted) {
            groupcommit_result(r->ps.gc,
                               store_delete_container(r->store, c->id),
                               "saving container records");
            c->persisted = c->persisted_running = false;
            groupcommit_soon(r->ps.gc);
        }
        return;
    }
    if (running && c->persisted_running)
        return;
    facts = facts_of(c);
    if (!must && c->persisted && !running && facts == c->facts &&
        resumable(c->lc.state))
        return;
    lazy = running && (!c->persisted || facts == c->facts);
    /* Made into JSON when its commit comes (record_source): a record
     * that changes again meanwhile is serialised once. */
    rc = store_mark_container(r->store, c->id, report_now_ms());
    groupcommit_result(r->ps.gc, rc, "saving container records");
    if (rc >= 0) {
        c->persisted = true;
        c->persisted_running = running;
        c->facts = facts;
    }
    if (lazy)
        groupcommit_lazy(r->ps.gc);
    else
        groupcommit_soon(r->ps.gc);
}

void
persist_rec(struct rec *c)
{
    rec_write(c, false);
}

/* The store's source of the records rec_write marked, read when their
 * commit comes: the record as it is then. Nothing while its report waits
 * for the end of the turn (reportwrite_commit_turn) or to be made again
 * (out of memory): the step that reported must not be on disk ahead of
 * the report (a kill -9 in between would lose it). The stored record
 * stays as it was; the report's transaction ends it, or the step is
 * written after the report (report_released). */
static int
record_source(const char *id, char **json, size_t *len, void *arg)
{
    struct reaper *r = arg;
    struct rec *c = ctable_find(&r->tab, id);
    struct record_meta m;

    if (c == NULL || !c->persisted || c->report_due)
        return STORE_NOT_FOUND;
    fill_meta(c, &m);
    *json = record_to_json(&c->lc, &m, len);
    if (*json == NULL) {
        log_error(c->id, "out of memory saving its record");
        return STORE_NOMEM;
    }
    return STORE_OK;
}

void
persist_set_store(struct reaper *r, struct store *st)
{
    if (r->store != NULL && r->store != st)
        store_set_record_source(r->store, NULL, NULL);
    r->store = st;
    groupcommit_set_store(r->ps.gc, st);
    if (st != NULL)
        store_set_record_source(st, record_source, r);
}

void
persist_records_fill(struct reaper *r)
{
    if (r->store != NULL)
        groupcommit_result(r->ps.gc,
                           store_set_record_source(r->store, NULL, NULL),
                           "saving container records");
}

/* The DELETEs queued: their records in one commit per
 * PERSIST_DELETE_BATCH, then each is sent, or held when that failed
 * (logged once by groupcommit_result). */
static void
flush_delq(struct reaper *r)
{
    struct persist *ps = &r->ps;
    const char *ids[PERSIST_DELETE_BATCH];
    struct rec *q[PERSIST_DELETE_BATCH];
    size_t i, n;
    int rc;

    /* Re-read each time: a DELETE written may forget a record queued. */
    while (ps->ndelq > 0) {
        n = ps->ndelq < PERSIST_DELETE_BATCH ? ps->ndelq
                                             : PERSIST_DELETE_BATCH;
        for (i = 0; i < n; i++) {
            q[i] = ps->delq[i];
            ids[i] = q[i]->id;
            q[i]->delete_queued = false;
        }
        ps->ndelq -= n;
        memmove(ps->delq, ps->delq + n, ps->ndelq * sizeof(ps->delq[0]));
        rc = groupcommit_ids(ps->gc, ids, n);
        for (i = 0; i < n; i++) {
            if (rc < 0) {
                r->st.deletes_held++;
                log_debug(q[i]->id, "DELETE held: its record cannot be "
                                    "written yet");
            }
            r->ps.cb->delete_written(q[i], rc >= 0);
        }
    }
}

/* Queues c's DELETE; false when out of memory. */
static bool
delq_push(struct rec *c)
{
    struct persist *ps = &c->r->ps;

    if (ps->ndelq == ps->delq_cap) {
        size_t ncap =
            ps->delq_cap == 0 ? PERSIST_DELETE_BATCH : ps->delq_cap * 2;
        struct rec **v = realloc(ps->delq, ncap * sizeof(*v));

        if (v == NULL)
            return false;
        ps->delq = v;
        ps->delq_cap = ncap;
    }
    ps->delq[ps->ndelq++] = c;
    c->delete_queued = true;
    if (ps->ndelq == 1)
        event_active(ps->delq_ev, EV_TIMEOUT, 1);
    return true;
}

static void
on_delq(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    flush_delq(arg);
}

enum persist_delete
persist_before_delete(struct rec *c)
{
    struct reaper *r = c->r;
    struct persist *ps = &r->ps;
    int rc;

    if (r->store == NULL)
        return PERSIST_NOW;
    rec_write(c, true);
    /* The step's own persist, after its actions, would write the same. */
    c->persist_done = true;
    /* Out of memory for the queue: written now, as the first. */
    if ((ps->ndelq > 0 || !loop_new_turn(r->l, &ps->delete_tv)) &&
        delq_push(c)) {
        if (ps->ndelq >= PERSIST_DELETE_BATCH)
            flush_delq(r);
        return PERSIST_QUEUED;
    }
    rc = groupcommit_slice(ps->gc, c->id);
    if (rc < 0) {
        r->st.deletes_held++;
        log_debug(c->id, "DELETE held: its record cannot be written yet");
        return PERSIST_HELD;
    }
    return PERSIST_NOW;
}

/* c is being forgotten: a DELETE of it waiting in the queue is dropped. */
static void
delq_drop(struct rec *c)
{
    struct persist *ps = &c->r->ps;
    size_t i;

    if (!c->delete_queued)
        return;
    for (i = 0; i < ps->ndelq && ps->delq[i] != c; i++)
        ;
    if (i < ps->ndelq) {
        memmove(&ps->delq[i], &ps->delq[i + 1],
                (ps->ndelq - i - 1) * sizeof(ps->delq[0]));
        ps->ndelq--;
    }
    c->delete_queued = false;
}

void
persist_forget(struct rec *c)
{
    delq_drop(c);
    if (c->report_only_in_memory && c->persisted) {
        /* Its report waits in memory for the store (the disk full), in
         * no file: killed now, reapd would lose it. The record stays as
         * last committed (at least its DELETE's, a state a start resumes
         * from), so that the next start makes the report again (same
         * id); a change marked since goes with the record in memory. */
        log_warn(c->id, "its report is only in memory (the state's disk "
                        "full): its record stays until the report is stored");
        return;
    }
    if (c->persisted && c->r->store != NULL) {
        groupcommit_result(c->r->ps.gc,
                           store_delete_container(c->r->store, c->id),
                           "saving container records");
        groupcommit_lazy(c->r->ps.gc);
    }
}
