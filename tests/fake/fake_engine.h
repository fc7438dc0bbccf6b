/*
 * fake_engine — a programmable stand-in for dockerd's API on a unix
 * socket, for tests that need precise faults on demand: a slow inspect, a
 * DELETE that fails N times, a die event that lies, an events stream cut
 * in the middle of an object. It runs on the test's own event_base.
 *
 * The real engine is what the end-to-end tests use; this one exists only
 * for what a real engine cannot be made to do at a precise moment.
 */
#ifndef FAKE_ENGINE_H
#define FAKE_ENGINE_H

#include <event2/event.h>
#include <stddef.h>

struct fake_engine;

enum fake_op {
    FAKE_VERSION,
    FAKE_LIST,
    FAKE_INSPECT,
    FAKE_DELETE,
    FAKE_EVENTS,
    FAKE_NOPS
};

/* Listens on `path` (unlinked first). NULL on failure. */
struct fake_engine *fake_engine_new(struct event_base *base, const char *path);
void fake_engine_free(struct fake_engine *fe);

/* Adds a container in state "running" (or `state`). `labels_json` is a
 * JSON object text like {"reapd.managed":"true"} (NULL: {}). Emits
 * create and start events when `emit` is 1; only start when it is
 * FAKE_START_ONLY (its create unseen: reapd lists it to learn its
 * labels), only create when it is FAKE_CREATE_ONLY. */
#define FAKE_START_ONLY 2
/* Emit only its create event. */
#define FAKE_CREATE_ONLY 3
void fake_engine_add(struct fake_engine *fe, const char *id, const char *name,
                     const char *labels_json, const char *state, int emit);

/* Adds JSON object members (text like "\"Env\":[...]") of any size to
 * the container's inspect answer (at the top and in Config) and to its
 * list entry, as the engine's Env, Cmd or Command would be; NULL: none. */
void fake_engine_set_bulk(struct fake_engine *fe, const char *id,
                          const char *members);

/* The container exits with `code`; its die event says `die_code` (pass
 * the same value for an honest engine). Sets FinishedAt. */
void fake_engine_exit(struct fake_engine *fe, const char *id, int code,
                      int die_code);

/* The FinishedAt inspect says once it finished (RFC 3339); by default a
 * fixed date in the past. */
void fake_engine_set_finished_at(struct fake_engine *fe, const char *id,
                                 const char *rfc3339);

/* Sets the state word only ("restarting", "removing", ...). */
void fake_engine_set_state(struct fake_engine *fe, const char *id,
                           const char *state);

/* Removes the container as someone else would (emits destroy when
 * `emit`). */
void fake_engine_remove(struct fake_engine *fe, const char *id, int emit);

/* The next `count` requests of `op` answer `status` (with a Docker-style
 * {"message":...}) instead of the real answer; status 0 = no fault. */
void fake_engine_fail(struct fake_engine *fe, enum fake_op op, int status,
                      int count, const char *message);
/* Every request of `op` (FAKE_INSPECT, FAKE_DELETE, FAKE_LIST) is
 * answered after `ms` (0 = at once). For
 * FAKE_INSPECT, only for container `id` when id is not NULL. For
 * FAKE_EVENTS, a stream with since= gets its headers at once and its
 * replay (events of since..until) after `ms`, as the engine writes it
 * after the headers; until= ends the stream after its replay. */
void fake_engine_delay(struct fake_engine *fe, enum fake_op op, int ms,
                       const char *id);

/* Answers every request of `op` held by fake_engine_delay now, in one
 * callback (so that the answers arrive together); how many. */
int fake_engine_release(struct fake_engine *fe, enum fake_op op);

/* Sends raw bytes on every open events stream (to cut mid-object, or to
 * send garbage). */
void fake_engine_stream_raw(struct fake_engine *fe, const char *bytes);
/* Closes every open events stream. */
void fake_engine_cut_streams(struct fake_engine *fe);
/* While non-zero, new events are not sent (the engine "forgets" them, as
 * a restarted engine does); the containers still change state. */
void fake_engine_drop_events(struct fake_engine *fe, int drop);

/* Requests served per op, and DELETEs currently being answered late. */
int fake_engine_count(const struct fake_engine *fe, enum fake_op op);
int fake_engine_max_concurrent_deletes(const struct fake_engine *fe);
/* Does the engine still have the container? */
int fake_engine_has(const struct fake_engine *fe, const char *id);
int fake_engine_open_streams(const struct fake_engine *fe);
/* The query string of the last /events request ("" before one). */
const char *fake_engine_events_query(const struct fake_engine *fe);

#endif
