/*
 * events — the Docker events stream, parsed incrementally.
 *
 * The engine's GET /events answer is an endless sequence of JSON objects.
 * This parser takes it in chunks of any size, bounds every object (size,
 * depth, number of attributes), and hands each container event to a
 * callback as a flat struct. It knows the current field names (Type,
 * Action, Actor.ID, Actor.Attributes, timeNano); the legacy status/id/from
 * fields are ignored, because new API versions no longer send them.
 * A broken or oversized object makes the parser fail for good: the caller
 * logs it and reconnects, which is the only safe way to resynchronise.
 */
#ifndef REAPD_EVENTS_H
#define REAPD_EVENTS_H

#include <stddef.h>
#include <stdint.h>

enum event_action {
    EV_OTHER = 0, /* anything we do not act on (attach, exec_*, top...) */
    EV_CREATE,
    EV_START,
    EV_RESTART,
    EV_DIE,
    EV_OOM,
    EV_KILL,
    EV_STOP,
    EV_PAUSE,
    EV_UNPAUSE,
    EV_RENAME,
    EV_UPDATE,
    EV_DESTROY,
};

struct event_attr {
    const char *key;
    const char *value;
};

/* Valid only during the callback; copy what you keep. */
struct docker_event {
    enum event_action action;
    const char *action_text; /* e.g. "die", "exec_start: sh" */
    const char *id;          /* Actor.ID: 64 lowercase hex, validated */
    int64_t time_nano;       /* timeNano, or time * 1e9, or 0 if absent */
    int has_exit_code;       /* die: Attributes.exitCode was a valid int */
    int exit_code;
    const char *name;  /* Attributes.name or NULL */
    const char *image; /* Attributes.image or NULL */
    /* Attributes with string values, in stream order (others, and any
     * with a NUL in key or value, are left out). */
    const struct event_attr *attrs;
    size_t nattrs;
};

struct events_limits {
    size_t max_event_bytes; /* one event object (0: 256 KiB) */
    unsigned max_depth;     /* (0: 8) */
    size_t max_attrs;       /* Actor.Attributes members, of any type
                               (0: 1024) */
};

typedef void (*events_cb)(const struct docker_event *ev, void *arg);

struct events_parser;

/* NULL on allocation failure; `limits` may be NULL and is copied. */
struct events_parser *events_parser_new(const struct events_limits *limits,
                                        events_cb cb, void *arg);
void events_parser_free(struct events_parser *p);

/*
 * Feeds a chunk. Returns 0, or -1 on malformed JSON or a broken limit; the
 * failure is sticky (see events_parser_error). Objects whose Type is not
 * "container", or that lack a valid Actor.ID or Action, are counted as
 * skipped, not errors.
 */
int events_parser_feed(struct events_parser *p, const char *buf, size_t len);

/* One line ending in "at byte N" (N: offset in the whole stream), or
 * NULL if there was no error. Valid until the parser is freed. */
const char *events_parser_error(const struct events_parser *p);

/* Counters since creation. */
uint64_t events_parser_count(const struct events_parser *p);   /* emitted */
uint64_t events_parser_skipped(const struct events_parser *p); /* ignored */

/* Bytes held for an incomplete object (a cut stream leaves these); 0
 * between objects and after an error. */
size_t events_parser_pending(const struct events_parser *p);

/* "die" -> EV_DIE, unknown -> EV_OTHER. */
enum event_action events_action_from_string(const char *s);

#endif
