/*
 * events — the Docker events stream, parsed incrementally.
 *
 * The engine's GET /events answer is an endless sequence of JSON objects.
 * This parser takes it in chunks of any size, bounds every object (size,
 * depth, number of attributes), and hands each container event to a
 * callback as a flat struct. It knows the current field names (Type,
 * Action, Actor.ID, Actor.Attributes, timeNano); the legacy status/id/from
 * fields are ignored, because new API versions no longer send them.
 *
 * No event can stop the stream. Attributes carry every label of the
 * container, so an event is as big as its labels: values are cut to
 * LIMIT_LABEL_VALUE and flagged, labels past the limits are dropped and
 * counted (never one a policy names), labels the operator's filter
 * refuses are left out unseen, and nothing else of the object is kept. An
 * object that is malformed, too deep or too big is rejected: counted, its
 * message kept, and the parser resumes after the end of its line (the engine
 * writes one event per line), so one bad event never costs a reconnect that
 * the engine's replay (since=) would repeat.
 */
#ifndef REAPD_EVENTS_H
#define REAPD_EVENTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The actions reapd acts on; the events subscription asks the engine for
 * these only (events_filter_query). */
enum event_action {
    DOCKER_EV_OTHER = 0, /* anything else (exec_*, health_status, kill...) */
    DOCKER_EV_CREATE,
    DOCKER_EV_START,
    DOCKER_EV_RESTART,
    DOCKER_EV_DIE,
    DOCKER_EV_RENAME,
    DOCKER_EV_DESTROY,
};

struct event_attr {
    const char *key;
    const char *value;
    bool truncated; /* `value` is a prefix of a longer one */
};

/* Valid only during the callback; copy what you keep. */
struct docker_event {
    enum event_action action;
    const char *action_text; /* e.g. "die", "exec_start: sh" */
    const char *id;          /* Actor.ID: 64 lowercase hex, validated */
    int64_t time_nano;       /* timeNano, or time * 1e9, or 0 if absent */
    int has_exit_code;       /* die: Attributes.exitCode was a valid int */
    int exit_code;
    const char *name;                     /* Attributes.name or NULL */
    const char *image;                    /* Attributes.image or NULL */
    bool name_truncated, image_truncated; /* prefixes of longer ones */
    /* Attributes with string values, in stream order (others, and any
     * with a NUL in key or value, are left out). */
    const struct event_attr *attrs;
    size_t nattrs;
    size_t attrs_dropped; /* attributes left out over the limits */
};

struct events_limits {
    size_t max_event_bytes; /* one event object, as sent (0: none) */
    unsigned max_depth;     /* (0: 8) */
    size_t max_attrs;       /* labels kept besides those `wanted` names
                               (0: LIMIT_LABELS) */
};

typedef void (*events_cb)(const struct docker_event *ev, void *arg);

/* Is `key` (`len` bytes, not NUL-terminated) a label some policy names?
 * Such labels are kept whatever the limits. */
typedef bool (*events_label_cb)(const char *key, size_t len, void *arg);

struct events_parser;

/* NULL on allocation failure; `limits` may be NULL and is copied. */
struct events_parser *events_parser_new(const struct events_limits *limits,
                                        events_cb cb, void *arg);
void events_parser_free(struct events_parser *p);

/* The labels to keep whatever the limits; `wanted` may be NULL. */
void events_parser_set_labels(struct events_parser *p, events_label_cb wanted,
                              void *arg);

/* The operator's filter (config "labels"): a label `kept` refuses and
 * `wanted` does not name is left out as if the engine had not sent it,
 * not counted in attrs_dropped (which says the limits cut something).
 * NULL keeps all. */
void events_parser_set_filter(struct events_parser *p, events_label_cb kept,
                              void *arg);

/*
 * Feeds a chunk. Returns 0, or -1 when the parser cannot go on (out of
 * memory; sticky, see events_parser_error). Objects whose Type is not
 * "container", or that lack a valid Actor.ID or Action, are counted as
 * skipped; malformed ones as rejected.
 */
int events_parser_feed(struct events_parser *p, const char *buf, size_t len);

/* One line ending in "at byte N" (N: offset in the whole stream), or
 * NULL if there was no error. Valid until the parser is freed. */
const char *events_parser_error(const struct events_parser *p);

/* Counters since creation. */
uint64_t events_parser_count(const struct events_parser *p);   /* emitted */
uint64_t events_parser_skipped(const struct events_parser *p); /* ignored */
uint64_t events_parser_rejected(const struct events_parser *p);
/* Why the last object was rejected ("... at byte N"), or NULL. */
const char *events_parser_last_rejection(const struct events_parser *p);
/* The latest timeNano of any whole object, emitted or skipped (0: none),
 * so a checkpoint can move past events nobody acts on. */
int64_t events_parser_last_time(const struct events_parser *p);
/* The timeNano of the first whole object that had one (0: none). */
int64_t events_parser_first_time(const struct events_parser *p);

/* Bytes held for an incomplete object (a cut stream leaves these); 0
 * between objects and after an error. */
size_t events_parser_pending(const struct events_parser *p);

/* "die" -> DOCKER_EV_DIE, unknown -> DOCKER_EV_OTHER. */
enum event_action events_action_from_string(const char *s);

/* The events subscription's filter, URL-encoded (the value of
 * `filters=`): container events of the actions above only, so that the
 * engine sends no other. */
extern const char events_filter_query[];

#endif
