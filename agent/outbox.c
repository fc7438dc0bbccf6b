/*
 * outbox — store -> upstream; see outbox.h.
 *
 * A pump runs on the next loop turn after each kick and every few seconds
 * as a safety net: it asks the store for what is due and submits it.
 * upstream refuses a report it already holds (-EEXIST), so a report whose
 * retry upstream is still waiting on is never sent twice at once. A
 * report upstream refuses for what it is (too large, ids it does not
 * take) would be refused again on every pass and, being among the oldest
 * due, crowd everyone else out of the batch: it becomes a dead letter at
 * once instead, and the pump runs again for the rest.
 *
 * An outcome the store cannot take (a full disk) is held here instead:
 * the store still says "pending", and without this note every pump would
 * send the report again at once and, delivered again, fail to record it
 * again, a storm of deliveries against the upstream. Noted reports are
 * not sent again by this process;
 * their outcomes are written at each pump until the store takes them. A
 * crash meanwhile only means one more delivery, with the same key.
 */
#include "outbox.h"

#include <errno.h>
#include <event2/event.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "loop.h"
#include "report.h"
#include "store.h"
#include "upstream.h"

#define DUE_BATCH     64
#define SAFETY_NET_MS 5000
/* Outcomes held while the store cannot take them: a few dozen bytes
 * each; past this many (a disk full for days under a churn), a report
 * is sent again at the safety net's pace instead. */
#define UNRECORDED_MAX 65536

/* An outcome that upstream reached and the store could not record. */
struct unrecorded {
    char report_id[STORE_REPORT_ID_MAX + 1];
    bool dead;
    enum store_dead_reason why;
    char *error; /* dead: why, owned */
    int64_t at_ms;
};

struct outbox {
    struct store *st;
    struct upstream *up;
    struct event *pump_ev;  /* next loop turn */
    struct event *timer_ev; /* safety net */
    struct outbox_stats stats;
    struct unrecorded *un;
    size_t nun, capun;
};

static bool
is_unrecorded(const struct outbox *ob, const char *report_id)
{
    size_t i;

    for (i = 0; i < ob->nun; i++)
        if (strcmp(ob->un[i].report_id, report_id) == 0)
            return true;
    return false;
}

/* Holds an outcome the store refused. False when it cannot be held (out
 * of memory, or too many): the report will then be sent again. */
static bool
outbox_hold(struct outbox *ob, const char *report_id, bool dead,
            enum store_dead_reason why, const char *error)
{
    struct unrecorded *u;

    if (is_unrecorded(ob, report_id))
        return true;
    if (strlen(report_id) > STORE_REPORT_ID_MAX || ob->nun >= UNRECORDED_MAX)
        return false;
    if (ob->nun == ob->capun) {
        size_t cap = ob->capun ? ob->capun * 2 : 16;

        u = realloc(ob->un, cap * sizeof(*u));
        if (u == NULL)
            return false;
        ob->un = u;
        ob->capun = cap;
    }
    u = &ob->un[ob->nun];
    memset(u, 0, sizeof(*u));
    snprintf(u->report_id, sizeof(u->report_id), "%s", report_id);
    u->dead = dead;
    u->why = why;
    u->at_ms = report_now_ms();
    if (dead && error != NULL && (u->error = strdup(error)) == NULL)
        return false;
    ob->nun++;
    return true;
}

/* Writes the held outcomes, oldest first, until the store refuses one. */
static void
write_held(struct outbox *ob)
{
    size_t i, done = 0;
    int rc;

    for (i = 0; i < ob->nun; i++) {
        struct unrecorded *u = &ob->un[i];

        rc = u->dead ? store_mark_dead_reason(ob->st, u->report_id, u->why,
                                              u->error ? u->error : "")
                     : store_mark_delivered(ob->st, u->report_id, u->at_ms);
        if (rc < 0)
            break;
        free(u->error);
        done++;
    }
    if (done == 0)
        return;
    log_info(NULL,
             "outbox: %zu delivery outcome(s) held while the state "
             "could not be written are recorded now",
             done);
    memmove(ob->un, ob->un + done, (ob->nun - done) * sizeof(*ob->un));
    ob->nun -= done;
}

/* A report upstream_submit refused with `rc` for good: a dead letter with
 * its reason. True if it is one now (the store may have failed). */
static bool
undeliverable(struct outbox *ob, const struct store_report *r, int rc)
{
    enum store_dead_reason why;
    char err[160];
    int mrc;

    if (rc == -EMSGSIZE) {
        why = STORE_DEAD_TOO_LARGE;
        snprintf(err, sizeof(err),
                 "%zu bytes, over the %u bytes upstream takes: never sent",
                 r->body_len, UPSTREAM_BODY_MAX);
    } else {
        why = STORE_DEAD_INVALID;
        snprintf(err, sizeof(err),
                 "report or container id not one upstream takes: never "
                 "sent");
    }
    mrc = store_mark_dead_reason(ob->st, r->report_id, why, err);
    if (mrc < 0) {
        ob->stats.store_errors++;
        log_error(r->container_id,
                  "outbox: report %s can never be delivered (%s) and "
                  "cannot be recorded as a dead letter: %s",
                  r->report_id, err, store_errmsg(ob->st));
        return false;
    }
    ob->stats.dead++;
    log_error(r->container_id,
              "report %s is a dead letter (%s): %s; it stays in the state "
              "database (and reports.jsonl, or a rotated copy)",
              r->report_id, store_dead_reason_name(why), err);
    return true;
}

static void
pump(struct outbox *ob)
{
    struct store_reports due = {0};
    bool more = false;
    size_t i;
    int rc;

    if (ob->up == NULL)
        return;
    if (ob->nun > 0)
        write_held(ob);
    rc = store_due(ob->st, report_now_ms(), DUE_BATCH, &due);
    if (rc < 0) {
        ob->stats.store_errors++;
        log_error(NULL, "outbox: cannot read due reports: %s",
                  store_errmsg(ob->st));
        return;
    }
    for (i = 0; i < due.n; i++) {
        const struct store_report *r = &due.v[i];

        if (ob->nun > 0 && is_unrecorded(ob, r->report_id))
            continue; /* reached upstream already */
        rc = upstream_submit(ob->up, r->report_id, r->container_id, r->body,
                             r->body_len);
        if (rc == -EMSGSIZE || rc == -EINVAL)
            more |= undeliverable(ob, r, rc);
        else if (rc != 0 && rc != -EEXIST)
            log_error(r->container_id, "outbox: report %s not handed over: %s",
                      r->report_id, strerror(-rc));
    }
    store_reports_free(&due);
    /* Their places in the batch are free: the next ones (of other
     * containers, or the same container's next report) on the next
     * turn, not after the safety net's seconds. A dead letter leaves
     * the due list for good, so this ends. */
    if (more)
        outbox_kick(ob);
}

static void
outbox_on_pump(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    pump(arg);
}

static void
outbox_on_timer(evutil_socket_t fd, short what, void *arg)
{
    struct outbox *ob = arg;
    struct timeval tv = {SAFETY_NET_MS / 1000, 0};

    (void)fd;
    (void)what;
    pump(ob);
    evtimer_add(ob->timer_ev, &tv);
}

void
outbox_kick(struct outbox *ob)
{
    if (ob != NULL && ob->up != NULL)
        event_active(ob->pump_ev, EV_TIMEOUT, 0);
}

/* `final`: delivered or dead, so upstream no longer holds the report and
 * the store's "pending" would send it again. */
static void
marked(struct outbox *ob, int rc, const struct upstream_outcome *o, bool final,
       bool dead, enum store_dead_reason why)
{
    /* NOT_FOUND: it was already delivered or dead (a report submitted
     * twice across a restart); nothing to record. */
    if (rc < 0) {
        ob->stats.store_errors++;
        if (!final) {
            /* upstream still holds it and retries: nothing is sent twice;
             * after a restart it is due as the store last said. */
        } else if (outbox_hold(ob, o->report_id, dead, why, o->error)) {
            log_error(o->container_id,
                      "outbox: cannot record the outcome of report %s: %s; "
                      "held in memory, written when the state can be "
                      "(delivered again, with the same Idempotency-Key, "
                      "only if reapd stops first)",
                      o->report_id, store_errmsg(ob->st));
        } else {
            log_error(o->container_id,
                      "outbox: cannot record the outcome of report %s: %s; "
                      "it will be delivered again (same Idempotency-Key)",
                      o->report_id, store_errmsg(ob->st));
            return; /* the safety net paces it */
        }
    }
    outbox_kick(ob);
}

static void
on_delivered(const struct upstream_outcome *o, void *arg)
{
    struct outbox *ob = arg;

    ob->stats.delivered++;
    log_fields(LOG_LEVEL_INFO, o->container_id,
               &(struct log_fields){.report_id = o->report_id,
                                    .http_status = (int)o->status,
                                    .url = o->url},
               "report %s delivered upstream (attempt %u)", o->report_id,
               o->attempts);
    marked(ob, store_mark_delivered(ob->st, o->report_id, report_now_ms()), o,
           true, false, STORE_DEAD_REJECTED);
}

static void
on_retry(const struct upstream_outcome *o, void *arg)
{
    struct outbox *ob = arg;

    ob->stats.retries++;
    log_fields(LOG_LEVEL_WARN, o->container_id,
               &(struct log_fields){.report_id = o->report_id,
                                    .http_status = (int)o->status,
                                    .url = o->url},
               "report %s: %s; retrying in %llu ms", o->report_id, o->error,
               (unsigned long long)o->delay_ms);
    marked(ob,
           store_mark_retry(ob->st, o->report_id,
                            report_now_ms() + (int64_t)o->delay_ms, o->error),
           o, false, false, STORE_DEAD_REJECTED);
}

static void
on_dead(const struct upstream_outcome *o, void *arg)
{
    struct outbox *ob = arg;

    ob->stats.dead++;
    log_fields(LOG_LEVEL_ERROR, o->container_id,
               &(struct log_fields){.report_id = o->report_id,
                                    .http_status = (int)o->status,
                                    .url = o->url},
               "report %s rejected upstream (HTTP %ld: %s): kept as a dead "
               "letter",
               o->report_id, o->status, o->error);
    marked(ob,
           store_mark_dead_reason(ob->st, o->report_id, STORE_DEAD_REJECTED,
                                  o->error),
           o, true, true, STORE_DEAD_REJECTED);
}

const struct upstream_cbs *
outbox_upstream_cbs(void)
{
    static const struct upstream_cbs cbs = {
        .delivered = on_delivered,
        .retry = on_retry,
        .dead = on_dead,
    };

    return &cbs;
}

struct outbox *
outbox_new(struct loop *l, struct store *st, struct upstream *u)
{
    struct outbox *ob = calloc(1, sizeof(*ob));
    struct timeval tv = {SAFETY_NET_MS / 1000, 0};

    if (ob == NULL)
        return NULL;
    ob->st = st;
    ob->up = u;
    ob->pump_ev = event_new(loop_base(l), -1, 0, outbox_on_pump, ob);
    ob->timer_ev = evtimer_new(loop_base(l), outbox_on_timer, ob);
    if (ob->pump_ev == NULL || ob->timer_ev == NULL) {
        outbox_free(ob);
        return NULL;
    }
    evtimer_add(ob->timer_ev, &tv);
    return ob;
}

void
outbox_set_upstream(struct outbox *ob, struct upstream *u)
{
    ob->up = u;
    outbox_kick(ob);
}

void
outbox_free(struct outbox *ob)
{
    if (ob == NULL)
        return;
    if (ob->pump_ev != NULL)
        event_free(ob->pump_ev);
    if (ob->timer_ev != NULL)
        event_free(ob->timer_ev);
    while (ob->nun > 0)
        free(ob->un[--ob->nun].error);
    free(ob->un);
    free(ob);
}

void
outbox_stats(const struct outbox *ob, struct outbox_stats *out)
{
    *out = ob->stats;
    out->unrecorded = ob->nun;
}
