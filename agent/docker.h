/*
 * docker — the Docker Engine API over its unix socket.
 *
 * Four calls (version, list, inspect, delete) and one long-lived events
 * subscription, all through the loop's libcurl multi handle, none
 * blocking. Engine answers are read by docker_parse.h (included here: its
 * structs are what the callbacks hand over) into bounded structs and
 * validated; anything else is a failed call with a message, never a
 * crash.
 *
 * The subscription (docker_watch) reconnects by itself forever, with
 * capped exponential backoff and jitter, re-negotiating the API version
 * each time (the engine may have been upgraded) and resuming from the
 * last event's timeNano. Because the engine replays at most 256 buffered
 * events, and none across its own restart, every (re)subscription is
 * announced so the caller relists and reconciles; the subscription is
 * open before it is announced, so nothing falls between the two. The
 * replay is read first, bounded (until=), so that the relist never
 * judges a container gone before its replayed die is in.
 */
#ifndef REAPD_DOCKER_H
#define REAPD_DOCKER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "docker_parse.h"
#include "events.h"

struct loop;
struct docker;
struct docker_req;

enum docker_status {
    DOCKER_OK,
    DOCKER_NOT_FOUND, /* 404 */
    DOCKER_CONFLICT,  /* 409 */
    DOCKER_FAILED,    /* timeout, unreachable, 5xx, other 4xx, bad JSON */
};

/* The containers a callback is given (docker_parse.h) are the docker
 * module's, valid during the callback only. */
typedef void (*docker_inspect_cb)(enum docker_status st,
                                  const struct docker_container *c,
                                  const char *msg, void *arg);
typedef void (*docker_list_cb)(enum docker_status st,
                               const struct docker_container *cs, size_t n,
                               const char *msg, void *arg);
typedef void (*docker_delete_cb)(enum docker_status st, long http_status,
                                 const char *msg, void *arg);
/* A list answer handed over: `l` (NULL unless DOCKER_OK) is the
 * callee's, to read with docker_list_entry and free with
 * docker_list_free (docker_parse.h); `n` entries. */
typedef void (*docker_list_owned_cb)(enum docker_status st,
                                     struct docker_list *l, size_t n,
                                     const char *msg, void *arg);

/* `socket` is copied. NULL on allocation failure. */
struct docker *docker_new(struct loop *l, const char *socket,
                          long request_timeout_ms, long reconnect_max_ms);
/* Cancels everything in flight (no callbacks). */
void docker_free(struct docker *d);

/* The labels that policies name, kept whatever the limits (in answers
 * and events parsed from now on); `wanted` may be NULL. */
void docker_set_labels(struct docker *d, events_label_cb wanted, void *arg);
/* The operator's label filter, for answers and events parsed from now
 * on: a label `kept` refuses and no policy names is left out as if the
 * engine had not sent it (labels_truncated says only what the limits
 * cut). NULL keeps all. */
void docker_set_label_filter(struct docker *d, events_label_cb kept,
                             void *arg);

/* The API version in use ("1.41"), once negotiated; else NULL. */
const char *docker_api_version(const struct docker *d);

/* What the engine says it is (docker_parse.h), read again at every
 * (re)subscription, since the engine may have been upgraded under reapd;
 * NULL until the first /version answer. */
const struct docker_engine_info *docker_engine(const struct docker *d);

/*
 * Calls. Each returns a request handle, valid until its callback runs or
 * docker_cancel is called, or NULL when it could not even be started (no
 * callback then). `id` must be 64 hex (checked: NULL is returned
 * otherwise). The list call with `id` NULL lists all containers.
 */
struct docker_req *docker_inspect(struct docker *d, const char *id,
                                  docker_inspect_cb cb, void *arg);
struct docker_req *docker_list(struct docker *d, const char *id,
                               docker_list_cb cb, void *arg);
/* Every container, the answer handed to the callback to keep: it is read
 * an entry at a time (docker_list_entry), in slices between loop turns
 * after the call is done, so that a large answer never holds the loop
 * for long. */
struct docker_req *docker_list_all(struct docker *d, docker_list_owned_cb cb,
                                   void *arg);
struct docker_req *docker_delete(struct docker *d, const char *id, bool force,
                                 bool volumes, docker_delete_cb cb, void *arg);
/* No callback runs after this. NULL is fine. */
void docker_cancel(struct docker_req *r);

/* Events a Docker engine keeps for replays (moby's daemon/events: the
 * last 256, of every type). */
#define DOCKER_ENGINE_EVENTS_KEPT 256

struct docker_watch_cbs {
    /* The engine answers (again): the replay of the events since the
     * checkpoint follows, then on_replayed. */
    void (*on_subscribed)(void *arg);
    void (*on_event)(const struct docker_event *ev, void *arg);
    /* The stream is down; it will be retried after `retry_ms`. */
    void (*on_lost)(const char *why, uint64_t retry_ms, void *arg);
    /* Events were stepped over (unreadable): what they said is unknown,
     * so reconcile soon, as after a reconnect. May be NULL. */
    void (*on_gap)(void *arg);
};

/* Called, with the watch's `arg`, once every event the engine replayed
 * is in (each die it still held) and the live stream is open: where to
 * relist and reconcile. Set before docker_watch_start; NULL: none. */
void docker_watch_on_replayed(struct docker *d, void (*cb)(void *arg));
/* Starts the subscription (idempotent). `since_nano` 0: from now. */
int docker_watch_start(struct docker *d, const struct docker_watch_cbs *cbs,
                       void *arg, int64_t since_nano);
void docker_watch_stop(struct docker *d);
bool docker_watch_connected(const struct docker *d);
int64_t docker_watch_checkpoint(const struct docker *d);
/* Replays that held the engine's whole buffer, all past the checkpoint:
 * events in between may have been pushed out (logged). */
uint64_t docker_watch_replays_cut(const struct docker *d);
uint64_t docker_watch_reconnects(const struct docker *d);
uint64_t docker_watch_events(const struct docker *d);
/* The subscription now open follows one that was lost while the engine
 * itself could not be reached (its API refused or failed the /version
 * call at least once): dockerd was down or restarting, so containers
 * that exited meanwhile had no die event. */
bool docker_watch_after_outage(const struct docker *d);
/* Since the last subscription, the engine refused or failed a /version
 * call: it is down (or was), not just the stream cut. */
bool docker_watch_unreachable(const struct docker *d);
/* Events that could not be read (malformed, too deep, too big as sent),
 * stepped over without a reconnect; see events.h. */
uint64_t docker_watch_rejected(const struct docker *d);

#endif
