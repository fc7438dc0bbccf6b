/*
 * slots — the node's removal slots (delete.max_in_flight): records wait
 * for one in order of asking, and are granted one on a turn of the loop
 * of its own (never inside the call that asked or freed one).
 *
 * Embedded in struct reaper; uses the queue links of struct rec
 * (reaper_int.h). A grant goes up through the callback given at
 * slots_init; nothing else calls up.
 */
#ifndef REAPD_SLOTS_H
#define REAPD_SLOTS_H

#include <stddef.h>
#include <stdint.h>

struct event;
struct event_base;
struct rec;

/* Record c holds a slot now. */
typedef void (*slots_grant_cb)(struct rec *c);

struct slots {
    struct rec *head, *tail; /* waiting, first asked first */
    size_t used, waiting;
    int64_t max;
    struct event *ev; /* grants, on a loop turn of its own */
    slots_grant_cb grant;
};

/* 0, or -1 when out of memory. */
int slots_init(struct slots *s, struct event_base *base, int64_t max,
               slots_grant_cb grant);
void slots_cleanup(struct slots *s);
/* c joins the queue, unless it waits or holds one already. */
void slots_want(struct slots *s, struct rec *c);
/* c leaves the queue, or gives its slot back. */
void slots_drop(struct slots *s, struct rec *c);
/* A new max (a reload): more may be granted. */
void slots_set_max(struct slots *s, int64_t max);

#endif
