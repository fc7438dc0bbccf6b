/*
 * feed — "a report is durable" from the store to the held requests of the
 * read API, one loop turn later (feed.h).
 */
#include "feed.h"

#include <event2/event.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define ID_MAX 128

struct feed_sub {
    struct feed *f;
    char id[ID_MAX + 1]; /* "" with `all` */
    bool all;
    bool dead; /* freed during a dispatch: unlinked after it */
    feed_cb cb;
    void *arg;
    struct feed_sub *prev, *next;
};

struct feed {
    struct event *ev;
    struct feed_sub *head;
    size_t nsubs;
    bool dispatching;
    size_t ndead;
    /* Published since the last dispatch. */
    char ids[FEED_IDS_MAX][ID_MAX + 1];
    size_t nids;
    bool overflow; /* more than FEED_IDS_MAX: everyone looks */
};

static void
unlink_sub(struct feed_sub *sub)
{
    struct feed *f = sub->f;

    if (sub->prev != NULL)
        sub->prev->next = sub->next;
    else
        f->head = sub->next;
    if (sub->next != NULL)
        sub->next->prev = sub->prev;
    free(sub);
}

static bool
concerns(const struct feed_sub *sub, char (*ids)[ID_MAX + 1], size_t nids,
         bool overflow)
{
    size_t i;

    if (sub->all || overflow)
        return true;
    for (i = 0; i < nids; i++)
        if (strcmp(ids[i], sub->id) == 0)
            return true;
    return false;
}

static void
dispatch(evutil_socket_t fd, short what, void *arg)
{
    struct feed *f = arg;
    struct feed_sub *sub, *next;
    size_t nids = f->nids;
    bool overflow = f->overflow;
    /* A copy: a callback may publish (it reads the store, which does not
     * write) or free anything; new publications go to the next turn. */
    char(*ids)[ID_MAX + 1] = NULL;

    (void)fd;
    (void)what;
    if (nids > 0) {
        ids = malloc(nids * sizeof(*ids));
        if (ids == NULL) {
            overflow = true; /* wake everyone rather than lose it */
            nids = 0;
        } else {
            memcpy(ids, f->ids, nids * sizeof(*ids));
        }
    }
    f->nids = 0;
    f->overflow = false;
    f->dispatching = true;
    /* Only the subscriptions there now: one made by a callback is added
     * at the head, before this walk's position. */
    for (sub = f->head; sub != NULL; sub = sub->next)
        if (!sub->dead && concerns(sub, ids, nids, overflow))
            sub->cb(sub, sub->arg);
    f->dispatching = false;
    for (sub = f->head; sub != NULL && f->ndead > 0; sub = next) {
        next = sub->next;
        if (sub->dead) {
            f->ndead--;
            unlink_sub(sub);
        }
    }
    free(ids);
}

struct feed *
feed_new(struct event_base *base)
{
    struct feed *f = calloc(1, sizeof(*f));

    if (f == NULL)
        return NULL;
    f->ev = event_new(base, -1, 0, dispatch, f);
    if (f->ev == NULL) {
        free(f);
        return NULL;
    }
    return f;
}

void
feed_free(struct feed *f)
{
    struct feed_sub *sub, *next;

    if (f == NULL)
        return;
    for (sub = f->head; sub != NULL; sub = next) {
        next = sub->next;
        free(sub);
    }
    event_free(f->ev);
    free(f);
}

void
feed_publish(struct feed *f, const char *container_id)
{
    size_t i, n;

    if (f == NULL)
        return;
    n = strlen(container_id);
    if (n > ID_MAX) {
        f->overflow = true;
    } else if (!f->overflow) {
        for (i = 0; i < f->nids; i++)
            if (strcmp(f->ids[i], container_id) == 0)
                break;
        if (i == f->nids) {
            if (f->nids == FEED_IDS_MAX)
                f->overflow = true;
            else
                memcpy(f->ids[f->nids++], container_id, n + 1);
        }
    }
    if (f->nsubs > 0)
        event_active(f->ev, EV_TIMEOUT, 0);
    else {
        f->nids = 0; /* nobody to tell */
        f->overflow = false;
    }
}

struct feed_sub *
feed_sub_new(struct feed *f, const char *container_id, feed_cb cb, void *arg)
{
    struct feed_sub *sub;

    if (container_id != NULL && strlen(container_id) > ID_MAX)
        return NULL;
    sub = calloc(1, sizeof(*sub));
    if (sub == NULL)
        return NULL;
    sub->f = f;
    sub->all = container_id == NULL;
    if (container_id != NULL)
        strcpy(sub->id, container_id);
    sub->cb = cb;
    sub->arg = arg;
    sub->next = f->head;
    if (f->head != NULL)
        f->head->prev = sub;
    f->head = sub;
    f->nsubs++;
    return sub;
}

void
feed_sub_free(struct feed_sub *sub)
{
    struct feed *f;

    if (sub == NULL || sub->dead)
        return;
    f = sub->f;
    f->nsubs--;
    if (f->dispatching) {
        sub->dead = true;
        f->ndead++;
        return;
    }
    unlink_sub(sub);
}

size_t
feed_subs(const struct feed *f)
{
    return f != NULL ? f->nsubs : 0;
}
