/*
 * slots — the node's removal slots; see slots.h.
 */
#include "slots.h"

#include <event2/event.h>

#include "reaper_int.h"

static void
unqueue(struct slots *s, struct rec *c)
{
    if (!c->slot_queued)
        return;
    if (c->qprev != NULL)
        c->qprev->qnext = c->qnext;
    else
        s->head = c->qnext;
    if (c->qnext != NULL)
        c->qnext->qprev = c->qprev;
    else
        s->tail = c->qprev;
    c->qprev = c->qnext = NULL;
    c->slot_queued = false;
    s->waiting--;
}

static void
on_grant(evutil_socket_t fd, short what, void *arg)
{
    struct slots *s = arg;

    (void)fd;
    (void)what;
    while (s->head != NULL && (int64_t)s->used < s->max) {
        struct rec *c = s->head;

        unqueue(s, c);
        c->slot_held = true;
        s->used++;
        s->grant(c);
    }
}

int
slots_init(struct slots *s, struct event_base *base, int64_t max,
           slots_grant_cb grant)
{
    s->head = s->tail = NULL;
    s->used = s->waiting = 0;
    s->max = max;
    s->grant = grant;
    s->ev = event_new(base, -1, 0, on_grant, s);
    return s->ev != NULL ? 0 : -1;
}

void
slots_cleanup(struct slots *s)
{
    if (s->ev != NULL)
        event_free(s->ev);
    s->ev = NULL;
}

void
slots_want(struct slots *s, struct rec *c)
{
    if (c->slot_queued || c->slot_held)
        return;
    c->slot_queued = true;
    c->qprev = s->tail;
    if (s->tail != NULL)
        s->tail->qnext = c;
    else
        s->head = c;
    s->tail = c;
    s->waiting++;
    event_active(s->ev, EV_TIMEOUT, 0);
}

void
slots_drop(struct slots *s, struct rec *c)
{
    unqueue(s, c);
    if (c->slot_held) {
        c->slot_held = false;
        s->used--;
        event_active(s->ev, EV_TIMEOUT, 0);
    }
}

void
slots_set_max(struct slots *s, int64_t max)
{
    s->max = max;
    event_active(s->ev, EV_TIMEOUT, 0);
}
