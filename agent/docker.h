/*
 * docker — the Docker Engine API over its unix socket.
 *
 * Four calls (version, list, inspect, delete) and one long-lived events
 * subscription, all through the loop's libcurl multi handle, none
 * blocking. Engine answers are parsed into bounded structs and validated
 * (ids are 64 hex, states are known words); anything else is a failed
 * call with a message, never a crash.
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

#include "bounds.h"
#include "events.h"
#include "lifecycle.h"
#include "policy.h"

struct loop;
struct docker;
struct docker_req;

/* The oldest and newest Engine API versions reapd speaks. */
#define DOCKER_API_MIN "1.24"
#define DOCKER_API_MAX "1.51"

enum docker_status {
    DOCKER_OK,
    DOCKER_NOT_FOUND, /* 404 */
    DOCKER_CONFLICT,  /* 409 */
    DOCKER_FAILED,    /* timeout, unreachable, 5xx, other 4xx, bad JSON */
};

/* One container as list or inspect describes it. All owned by the
 * docker module; valid during the callback only. */
struct docker_container {
    char id[CTR_ID_SIZE];
    const char *name;  /* without the leading "/"; may be NULL */
    const char *image; /* Config.Image (inspect) or Image (list) */
    const struct policy_label *labels;
    size_t nlabels;
    /* Over the limits of bounds.h: a label was dropped or a value cut;
     * the name or image is a prefix (a policy glob must not match it). */
    bool labels_truncated;
    bool name_truncated;
    bool image_truncated;
    struct lc_inspect state; /* list answers: has_exit_code false */
    const char *started_at;  /* RFC 3339, NULL if never */
    const char *finished_at; /* RFC 3339, NULL if never */
};

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
 * docker_list_free; `n` entries. */
struct docker_list;
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

/* What the engine says it is, from its /version answer. Each string is
 * "" when the engine did not say, or said something other than a version
 * (only letters, digits and . + ~ _ - : are taken, at most 63). */
struct docker_engine_info {
    char api[16];                /* the version reapd uses with it */
    char engine_api[16];         /* the engine's own ApiVersion */
    char version[64];            /* dockerd's, "20.10.24+dfsg1" */
    char containerd_version[64]; /* its containerd's, "1.6.20~ds1" */
};

/* Read again at every (re)subscription, since the engine may have been
 * upgraded under reapd; NULL until the first /version answer. */
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
/* Every container, the answer handed to the callback to keep: a relist
 * of 100,000 containers is read an entry at a time, in slices between
 * loop turns, after the call is done (reading it whole into an array
 * held the loop 80 ms). */
struct docker_req *docker_list_all(struct docker *d, docker_list_owned_cb cb,
                                   void *arg);
/* Entry i of a handed-over answer (i < n) in *out, valid until the next
 * call or docker_list_free: 0; 1 for an entry without a valid Id or State
 * (said in the log; not taken); -1 when its labels find no memory (the
 * answer cannot be taken whole: a decision on part of its labels could
 * pick the wrong policy). The labels kept follow the rules of the list. */
int docker_list_entry(struct docker_list *l, size_t i,
                      const struct docker_container **out);
void docker_list_free(struct docker_list *l);
/* Frees `l` a part at a time: up to `max` of its 1 MiB pieces per call;
 * 1 once all is freed (`l` is gone), 0 while some is left (then `l` may
 * only be passed here again or to docker_list_free). NULL: 1. */
int docker_list_free_some(struct docker_list *l, size_t max);
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

/* Parsers, exposed for tests: fill `out` from an engine answer. They
 * return 0, or -1 with a message in `err`. The results live in `ctx`
 * until docker_parsed_free. */
struct docker_parsed;
int docker_parse_inspect(const char *body, size_t len,
                         struct docker_parsed **ctx,
                         const struct docker_container **out, char *err,
                         size_t errlen);
int docker_parse_list(const char *body, size_t len, struct docker_parsed **ctx,
                      const struct docker_container **out, size_t *n,
                      char *err, size_t errlen);
/* The API version to use given the engine's ApiVersion and
 * MinAPIVersion: "1.41" etc. into `out`. -1 if the engine is too old. */
int docker_parse_version(const char *body, size_t len, char *out,
                         size_t outlen, char *err, size_t errlen);
/* The same, and what the engine says of itself (Version, and the
 * Version of its "containerd" component), into `out`. */
int docker_parse_engine(const char *body, size_t len,
                        struct docker_engine_info *out, char *err,
                        size_t errlen);
void docker_parsed_free(struct docker_parsed *ctx);

/* The label rules of a parse: `wanted` and `kept` as docker_set_labels
 * and docker_set_label_filter take them (either may be NULL). */
struct docker_label_rules {
    events_label_cb wanted;
    void *wanted_arg;
    events_label_cb kept;
    void *kept_arg;
};
/* docker_parse_inspect and docker_parse_list under `rules` (NULL: none),
 * the body fed in pieces of `chunk` bytes (0: whole) as from the engine. */
int docker_parse_inspect_with(const char *body, size_t len, size_t chunk,
                              const struct docker_label_rules *rules,
                              struct docker_parsed **ctx,
                              const struct docker_container **out, char *err,
                              size_t errlen);
int docker_parse_list_with(const char *body, size_t len, size_t chunk,
                           const struct docker_label_rules *rules,
                           struct docker_parsed **ctx,
                           const struct docker_container **out, size_t *n,
                           char *err, size_t errlen);

/* Is `s` exactly 64 lowercase hex digits? */
bool docker_valid_id(const char *s);

#endif
