/*
 * stream — what the engine's events subscription and containerd's have in
 * common: a long-lived call that must always be open again after it ends.
 *
 * It keeps the subscription's phase, the reconnect timer (jittered
 * exponential backoff from `base_ms` to `max_ms`, reset by a subscription
 * that opens) and the counters. The owner (docker.c, containerd.c) makes
 * the calls themselves and tells the stream what became of them:
 * stream_connecting when an attempt starts, stream_opened when the
 * subscription is open, stream_failed when an attempt or the open
 * subscription ends, however. The stream calls the owner's `connect` to
 * make the next attempt, from its timer, never from inside one of these
 * calls; and `lost` after each failure, with the wait before the next.
 */
#ifndef REAPD_STREAM_H
#define REAPD_STREAM_H

#include <stdbool.h>
#include <stdint.h>

struct loop;
struct stream;

enum stream_phase {
    STREAM_IDLE,       /* not started, or stopped */
    STREAM_CONNECTING, /* an attempt is under way */
    STREAM_OPEN,       /* subscribed */
    STREAM_WAITING,    /* the timer will make the next attempt */
};

struct stream_cbs {
    /* Makes an attempt: calls stream_connecting, then later
     * stream_opened or stream_failed (stream_failed at once when the
     * attempt cannot even start). */
    void (*connect)(void *arg);
    /* The subscription (or an attempt) ended; the next attempt in
     * `retry_ms`. May be NULL. `why` is borrowed for the call. */
    void (*lost)(const char *why, uint64_t retry_ms, void *arg);
};

/* `cbs` is copied; `arg` is the owner, passed back. NULL when out of
 * memory. */
struct stream *stream_new(struct loop *l, const struct stream_cbs *cbs,
                          void *arg, uint64_t base_ms, uint64_t max_ms,
                          uint32_t seed);
/* The owner's calls must be cancelled first. */
void stream_free(struct stream *s);

/* From IDLE: the first attempt, now (cbs.connect). Otherwise nothing. */
void stream_start(struct stream *s);
/* Back to IDLE, the timer off; the owner cancels its own calls. */
void stream_stop(struct stream *s);

void stream_connecting(struct stream *s);
/* Open: the backoff starts again from its base. */
void stream_opened(struct stream *s);
/* Ended (`why` for the owner's log line): the next attempt after a
 * backoff. */
void stream_failed(struct stream *s, const char *why);

enum stream_phase stream_phase(const struct stream *s);
bool stream_is_open(const struct stream *s);
/* Opened at least once since stream_new. */
bool stream_was_open(const struct stream *s);
/* Openings after the first. */
uint64_t stream_reconnects(const struct stream *s);

#endif
