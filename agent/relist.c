/*
 * relist — the engine's whole container list, taken in a slice per loop
 * turn; see relist.h.
 */
#include "relist.h"

#include <event2/event.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backoff.h"
#include "bounds.h"
#include "docker.h"
#include "log.h"
#include "loop.h"

/* Entries are taken in for at most this long per loop turn. */
#define SLICE_NS 1000000u
/* While the owner is behind (relist_cbs.behind), asked again this often. */
#define BEHIND_MS     1
#define MAX_TOMBSTONE 4096

struct relist {
    struct docker *d;
    const struct relist_cbs *cb;
    void *arg;
    uint32_t rnd;
    uint64_t retry_max_ms;

    struct docker_req *req;
    uint64_t t0;
    uint32_t gen; /* bumped when a relist is sent */
    uint64_t answered;
    unsigned failures;
    struct event *timer;

    /* The answer being taken in: entries before `next` are done. */
    struct docker_list *ans;
    size_t n, next;
    bool incomplete;
    struct event *slice_ev;
    uint64_t slice_ns;
    /* A dropped answer, given back a slice per turn. */
    struct docker_list *old;
    struct event *free_ev;

    /* Destroyed while a relist was in flight or being taken in. */
    char (*tombs)[CTR_ID_SIZE];
    size_t ntombs;
};

static bool
tombstoned(const struct relist *rl, const char *id)
{
    size_t i;

    for (i = 0; i < rl->ntombs; i++)
        if (memcmp(rl->tombs[i], id, CTR_ID_LEN) == 0)
            return true;
    return false;
}

/* The answer is dropped (taken in, or a newer relist under way). A large
 * answer unmapped in one go holds the loop, so it is given back a slice
 * per turn (on_free); a second one dropped before the first is gone goes
 * at once. */
static void
drop_answer(struct relist *rl)
{
    if (rl->ans != NULL) {
        docker_list_free(rl->old);
        rl->old = rl->ans;
        loop_timer_ms(rl->free_ev, 0);
    }
    rl->ans = NULL;
    rl->n = rl->next = 0;
    event_del(rl->slice_ev);
}

static void
on_free(evutil_socket_t fd, short what, void *arg)
{
    struct relist *rl = arg;
    uint64_t t0 = loop_now_ns();

    (void)fd;
    (void)what;
    while (rl->old != NULL) {
        if (docker_list_free_some(rl->old, 1) == 1)
            rl->old = NULL;
        else if (loop_now_ns() - t0 >= rl->slice_ns) {
            loop_timer_ms(rl->free_ev, 0);
            return;
        }
    }
}

static void
finish(struct relist *rl)
{
    uint32_t gen = rl->gen;
    size_t n = rl->n;
    bool incomplete = rl->incomplete;

    drop_answer(rl);
    rl->ntombs = 0;
    rl->cb->finish(rl->arg, gen, n, incomplete);
}

/*
 * Takes in entries for about slice_ns, then yields to the loop and goes
 * on at its next turn. The entries not yet taken in are as if the answer
 * were still in flight: an event for one of them finds no record or a
 * discovering one, and a destroy is tombstoned.
 */
static void
slice(struct relist *rl)
{
    uint64_t t0 = loop_now_ns();
    const struct docker_container *e;

    while (rl->ans != NULL && rl->next < rl->n) {
        int rc;

        /* Taken in no faster than their records can be written: the
         * records would pile up in memory, and be written all at once. */
        if ((rl->next & 15) == 0 && rl->cb->behind != NULL &&
            rl->cb->behind(rl->arg)) {
            loop_timer_ms(rl->slice_ev, BEHIND_MS);
            return;
        }
        rc = docker_list_entry(rl->ans, rl->next++, &e);

        if (rc < 0) {
            /* The rest would be taken for absent: a whole relist again. */
            drop_answer(rl);
            rl->ntombs = 0;
            log_error(NULL, "out of memory taking in the relist; relisting "
                            "again in 1 s");
            relist_after(rl, 1000);
            return;
        }
        if (rc == 0 && !tombstoned(rl, e->id) &&
            rl->cb->take(rl->arg, e, rl->gen) != 0)
            rl->incomplete = true;
        if ((rl->next & 15) == 0 && loop_now_ns() - t0 >= rl->slice_ns)
            break;
    }
    if (rl->ans == NULL)
        return;
    if (rl->next < rl->n) {
        /* A timer, not event_active: an event made active from a
         * callback runs in the same pass, before any socket is read. */
        loop_timer_ms(rl->slice_ev, 0);
        return;
    }
    finish(rl);
}

static void
on_slice(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    slice(arg);
}

static void
on_answer(enum docker_status st, struct docker_list *ans, size_t n,
          const char *msg, void *arg)
{
    struct relist *rl = arg;

    rl->req = NULL;
    if (st != DOCKER_OK) {
        uint64_t ms = backoff_delay_ms(++rl->failures, 250, rl->retry_max_ms,
                                       backoff_rand(&rl->rnd));

        docker_list_free(ans);
        rl->cb->answered(rl->arg, rl->t0, false, 0);
        log_warn(NULL, "relist failed: %s; retrying in %llu ms", msg,
                 (unsigned long long)ms);
        relist_after(rl, ms);
        rl->ntombs = 0;
        return;
    }
    rl->failures = 0;
    rl->answered++;
    rl->ans = ans;
    rl->n = n;
    rl->next = 0;
    rl->incomplete = false;
    rl->cb->answered(rl->arg, rl->t0, true, n);
    slice(rl);
}

static void
on_timer(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    relist_send(arg);
}

struct relist *
relist_new(struct loop *l, struct docker *d, const struct relist_cbs *cb,
           void *arg)
{
    struct relist *rl = calloc(1, sizeof(*rl));

    if (rl == NULL)
        return NULL;
    rl->d = d;
    rl->cb = cb;
    rl->arg = arg;
    rl->rnd = (uint32_t)loop_now_ms() ^ ((uint32_t)getpid() << 12) ^ 11u;
    rl->retry_max_ms = 30000;
    rl->slice_ns = SLICE_NS;
    rl->tombs = calloc(MAX_TOMBSTONE, sizeof(*rl->tombs));
    rl->timer = evtimer_new(loop_base(l), on_timer, rl);
    rl->slice_ev = evtimer_new(loop_base(l), on_slice, rl);
    rl->free_ev = event_new(loop_base(l), -1, 0, on_free, rl);
    if (rl->tombs == NULL || rl->timer == NULL || rl->slice_ev == NULL ||
        rl->free_ev == NULL) {
        relist_free(rl);
        return NULL;
    }
    return rl;
}

void
relist_free(struct relist *rl)
{
    if (rl == NULL)
        return;
    docker_cancel(rl->req);
    docker_list_free(rl->ans);
    docker_list_free(rl->old);
    if (rl->timer != NULL)
        event_free(rl->timer);
    if (rl->slice_ev != NULL)
        event_free(rl->slice_ev);
    if (rl->free_ev != NULL)
        event_free(rl->free_ev);
    free(rl->tombs);
    free(rl);
}

void
relist_send(struct relist *rl)
{
    evtimer_del(rl->timer);
    if (rl->req != NULL) {
        docker_cancel(rl->req);
        rl->req = NULL;
    }
    /* Half taken in: the newer answer is the one to believe. */
    drop_answer(rl);
    rl->ntombs = 0;
    rl->gen++;
    rl->t0 = loop_now_ms();
    rl->req = docker_list_all(rl->d, on_answer, rl);
    if (rl->req == NULL)
        relist_after(rl, 1000);
}

void
relist_after(struct relist *rl, uint64_t ms)
{
    loop_timer_ms(rl->timer, ms);
}

void
relist_soon(struct relist *rl, uint64_t ms)
{
    if (!evtimer_pending(rl->timer, NULL))
        loop_timer_ms(rl->timer, ms);
}

void
relist_tombstone(struct relist *rl, const char *id)
{
    if ((rl->req == NULL && rl->ans == NULL) || rl->ntombs >= MAX_TOMBSTONE)
        return;
    memcpy(rl->tombs[rl->ntombs++], id, CTR_ID_SIZE);
}

uint32_t
relist_gen(const struct relist *rl)
{
    return rl->gen;
}

uint64_t
relist_count(const struct relist *rl)
{
    return rl->answered;
}

void
relist_set_retry_max_ms(struct relist *rl, uint64_t ms)
{
    rl->retry_max_ms = ms;
}

void
relist_set_slice_ns(struct relist *rl, uint64_t ns)
{
    rl->slice_ns = ns;
}
