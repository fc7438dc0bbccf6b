/*
 * stream — a subscription's phase, reconnect timer and counters; see
 * stream.h.
 */
#include "stream.h"

#include <event2/event.h>
#include <stdlib.h>

#include "backoff.h"
#include "loop.h"

struct stream {
    struct stream_cbs cbs;
    void *arg;
    enum stream_phase phase;
    struct event *timer;
    uint64_t base_ms, max_ms;
    uint32_t rnd;
    unsigned failures; /* attempts failed in a row */
    uint64_t reconnects;
    bool was_open;
};

static void
stream_on_timer(evutil_socket_t fd, short what, void *arg)
{
    struct stream *s = arg;

    (void)fd;
    (void)what;
    s->cbs.connect(s->arg);
}

struct stream *
stream_new(struct loop *l, const struct stream_cbs *cbs, void *arg,
           uint64_t base_ms, uint64_t max_ms, uint32_t seed)
{
    struct stream *s = calloc(1, sizeof(*s));

    if (s == NULL)
        return NULL;
    s->cbs = *cbs;
    s->arg = arg;
    s->base_ms = base_ms;
    s->max_ms = max_ms;
    s->rnd = seed;
    s->timer = evtimer_new(loop_base(l), stream_on_timer, s);
    if (s->timer == NULL) {
        free(s);
        return NULL;
    }
    return s;
}

void
stream_free(struct stream *s)
{
    if (s == NULL)
        return;
    event_free(s->timer);
    free(s);
}

void
stream_start(struct stream *s)
{
    if (s->phase != STREAM_IDLE)
        return;
    s->cbs.connect(s->arg);
}

void
stream_stop(struct stream *s)
{
    evtimer_del(s->timer);
    s->phase = STREAM_IDLE;
}

void
stream_connecting(struct stream *s)
{
    s->phase = STREAM_CONNECTING;
}

void
stream_opened(struct stream *s)
{
    s->phase = STREAM_OPEN;
    s->failures = 0;
    if (s->was_open)
        s->reconnects++;
    s->was_open = true;
}

void
stream_failed(struct stream *s, const char *why)
{
    uint64_t ms;

    s->failures++;
    ms = backoff_delay_ms(s->failures, s->base_ms, s->max_ms,
                          backoff_rand(&s->rnd));
    s->phase = STREAM_WAITING;
    loop_timer_ms(s->timer, ms);
    if (s->cbs.lost != NULL)
        s->cbs.lost(why, ms, s->arg);
}

enum stream_phase
stream_phase(const struct stream *s)
{
    return s->phase;
}

bool
stream_is_open(const struct stream *s)
{
    return s->phase == STREAM_OPEN;
}

bool
stream_was_open(const struct stream *s)
{
    return s->was_open;
}

uint64_t
stream_reconnects(const struct stream *s)
{
    return s->reconnects;
}
