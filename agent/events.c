/*
 * events — the Docker events stream turned into flat container events
 * (events.h).
 *
 * The JSON stream does the bounding and the tree building; this file
 * decides which objects are container events and flattens them. Strings in
 * a struct docker_event point into the object's arena and the attribute
 * list into a buffer owned by the parser and reused, so an event costs its
 * arena and nothing else; both are gone when the callback returns.
 *
 * A filter keeps only the fields an event is read for, so the rest of an
 * object (legacy fields, anything new) costs lexing and nothing more.
 */
#include "events.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bounds.h"
#include "json.h"

/* No limit on an event as sent: it keeps what the filter wants, cut to
 * size, so its length costs time, never memory (a 64 MiB label makes a
 * 67 MB die event, and the engine sends it). */
#define DEFAULT_EVENT_BYTES SIZE_MAX
#define DEFAULT_DEPTH       8u
/* Members kept in any one object: the labels a policy names on top of the
 * others, and room for the event's own fields. */
#define FIELD_SLACK ((size_t)64)

/* The filter's tags: where in an event a value sits. */
enum {
    E_ROOT = 0,
    E_LEAF,  /* a field we read; whatever is inside is not ours */
    E_ACTOR, /* Actor */
    E_ATTRS, /* Actor.Attributes */
};

struct events_parser {
    struct json_stream *js;
    struct events_limits lim;
    events_cb cb;
    void *arg;
    events_label_cb wanted;
    void *wanted_arg;
    events_label_cb kept; /* the operator's filter, or NULL */
    void *kept_arg;
    struct event_attr *attrs; /* reused by every event */
    size_t attrs_cap;
    size_t others; /* labels kept in this event's Attributes, not wanted */
    size_t named;  /* ... and named by a policy */
    size_t filter_dropped;
    uint64_t count;
    uint64_t skipped;
    uint64_t rejected;
    int64_t last_time;
    int64_t first_time;
    size_t js_base; /* stream offset of the current json stream's start */
    size_t fed;     /* bytes of the stream so far */
    int resync;     /* discarding up to the end of a rejected line */
    int failed;
    char err[200];
    char rejection[200];
};

static const struct {
    const char *name;
    enum event_action action;
} actions[] = {
    {"create", DOCKER_EV_CREATE},   {"start", DOCKER_EV_START},
    {"restart", DOCKER_EV_RESTART}, {"die", DOCKER_EV_DIE},
    {"rename", DOCKER_EV_RENAME},   {"destroy", DOCKER_EV_DESTROY},
};

/* {"type":["container"],"event":["create","start","restart","die",
 * "destroy","rename"]}: the table's actions, so that the engine sends no
 * other (a health check's or an exec's three, attach, kill...). */
const char events_filter_query[] =
    "%7B%22type%22%3A%5B%22container%22%5D%2C%22event%22%3A%5B"
    "%22create%22%2C%22start%22%2C%22restart%22%2C"
    "%22die%22%2C%22destroy%22%2C%22rename%22%5D%7D";

enum event_action
events_action_from_string(const char *s)
{
    size_t i;

    if (s == NULL)
        return DOCKER_EV_OTHER;
    for (i = 0; i < sizeof actions / sizeof actions[0]; i++)
        if (strcmp(s, actions[i].name) == 0)
            return actions[i].action;
    return DOCKER_EV_OTHER;
}

/* The string value of `n` if it is a string without NUL bytes: a C string
 * that says less than the JSON did could fool a label match. */
static const char *
plain_string(const struct json_node *n)
{
    if (n == NULL || n->type != JSON_STRING || memchr(n->str, '\0', n->len))
        return NULL;
    return n->str;
}

static int
plain_key(const struct json_node *n)
{
    return memchr(n->key, '\0', n->key_len) == NULL;
}

static int
events_valid_id(const struct json_node *n)
{
    size_t i;

    if (n == NULL || n->type != JSON_STRING || n->len != CTR_ID_LEN)
        return 0;
    for (i = 0; i < CTR_ID_LEN; i++)
        if (!((n->str[i] >= '0' && n->str[i] <= '9') ||
              (n->str[i] >= 'a' && n->str[i] <= 'f')))
            return 0;
    return 1;
}

/* Docker sends exit codes as decimal strings; anything that is not exactly
 * an int is no exit code at all. */
static int
parse_int(const struct json_node *n, int *out)
{
    const char *p, *end;
    long long v = 0;
    int neg = 0;

    if (n == NULL || n->type != JSON_STRING)
        return -1;
    p = n->str;
    end = p + n->len;
    if (p < end && *p == '-') {
        neg = 1;
        p++;
    }
    if (p == end || end - p > 10)
        return -1;
    for (; p < end; p++) {
        if (*p < '0' || *p > '9')
            return -1;
        v = v * 10 + (*p - '0');
    }
    if (neg)
        v = -v;
    if (v < -2147483648LL || v > 2147483647LL)
        return -1;
    *out = (int)v;
    return 0;
}

/* The event's time in ns since the epoch, or 0 when it has none that is
 * believable: a checkpoint is built from it, so negative values are
 * refused and INT64_MAX too (the resume point is one past it). */
static int64_t
event_time(const struct json_node *root)
{
    int64_t t;

    if (json_int64(json_get(root, "timeNano"), &t) == 0)
        return t > 0 && t < INT64_MAX ? t : 0;
    if (json_int64(json_get(root, "time"), &t) == 0 && t > 0 &&
        t < INT64_MAX / 1000000000)
        return t * 1000000000;
    return 0;
}

static int
events_key_is(const char *key, size_t len, const char *want)
{
    return strlen(want) == len && memcmp(key, want, len) == 0;
}

/* The engine's own attributes, which are not labels. */
static int
meta_attr(const char *key, size_t len)
{
    return events_key_is(key, len, "name") ||
           events_key_is(key, len, "image") ||
           events_key_is(key, len, "exitCode");
}

static int
filter(int tag, const char *key, size_t len, int cut, size_t index, void *arg)
{
    struct events_parser *p = arg;

    (void)index;
    if (key == NULL)
        return JSON_SKIP; /* no array in an event is ours */
    switch (tag) {
    case E_ROOT:
        if (events_key_is(key, len, "Type") ||
            events_key_is(key, len, "Action") ||
            events_key_is(key, len, "time") ||
            events_key_is(key, len, "timeNano"))
            return E_LEAF;
        return events_key_is(key, len, "Actor") ? E_ACTOR : JSON_SKIP;
    case E_ACTOR:
        if (events_key_is(key, len, "ID"))
            return E_LEAF;
        if (!events_key_is(key, len, "Attributes"))
            return JSON_SKIP;
        p->others = 0;
        p->named = 0;
        p->filter_dropped = 0;
        return E_ATTRS;
    case E_ATTRS:
        if (cut || len > LIMIT_LABEL_KEY) {
            p->filter_dropped++;
            return JSON_SKIP;
        }
        if (meta_attr(key, len))
            return E_LEAF;
        if (p->wanted != NULL && p->wanted(key, len, p->wanted_arg)) {
            if (p->named++ < LIMIT_POLICY_LABELS)
                return E_LEAF; /* more can only be duplicates */
            p->filter_dropped++;
            return JSON_SKIP;
        }
        /* Refused by choice, not cut by a limit: not counted. */
        if (p->kept != NULL && !p->kept(key, len, p->kept_arg))
            return JSON_SKIP;
        if (p->others < p->lim.max_attrs) {
            p->others++;
            return E_LEAF;
        }
        p->filter_dropped++;
        return JSON_SKIP;
    default:
        return JSON_SKIP;
    }
}

/* Fills ev->attrs from the Attributes object; -1 if out of memory. The
 * buffer grows to the largest event seen and is then reused. Labels no
 * policy names share LIMIT_LABEL_BYTES; past it they are dropped. */
static int
collect_attrs(struct events_parser *p, const struct json_node *obj,
              struct docker_event *ev)
{
    const struct json_node *m;
    struct event_attr *a;
    size_t i, cap, bytes = 0, size;

    if (obj->count > p->attrs_cap) {
        cap = p->attrs_cap ? p->attrs_cap : 16;
        while (cap < obj->count)
            cap *= 2;
        a = realloc(p->attrs, cap * sizeof *a);
        if (a == NULL)
            return -1;
        p->attrs = a;
        p->attrs_cap = cap;
    }
    ev->attrs_dropped = p->filter_dropped + obj->dropped;
    for (i = 0; i < obj->count; i++) {
        m = obj->items[i];
        if (plain_string(m) == NULL || !plain_key(m))
            continue; /* labels are strings; anything else is not ours */
        if (!meta_attr(m->key, m->key_len) &&
            (p->wanted == NULL ||
             !p->wanted(m->key, m->key_len, p->wanted_arg))) {
            size = m->key_len + m->len;
            if (size > LIMIT_LABEL_BYTES - bytes) {
                ev->attrs_dropped++;
                continue;
            }
            bytes += size;
        }
        p->attrs[ev->nattrs].key = m->key;
        p->attrs[ev->nattrs].value = m->str;
        p->attrs[ev->nattrs].truncated = m->truncated != 0;
        ev->nattrs++;
    }
    ev->attrs = p->attrs;
    return 0;
}

__attribute__((format(printf, 2, 3))) static void
set_error(struct events_parser *p, const char *fmt, ...)
{
    va_list ap;

    if (p->failed)
        return;
    va_start(ap, fmt);
    vsnprintf(p->err, sizeof p->err, fmt, ap);
    va_end(ap);
    p->failed = 1;
}

/* Called for each top-level value; owns `root`. Non-zero stops the
 * stream, after set_error() said why. */
static int
on_object(struct json_node *root, void *arg)
{
    struct events_parser *p = arg;
    const struct json_node *actor, *id, *attrs;
    struct docker_event ev;
    const char *type;
    int rc = 0;

    memset(&ev, 0, sizeof ev);
    ev.time_nano = event_time(root);
    if (p->first_time == 0)
        p->first_time = ev.time_nano;
    if (ev.time_nano > p->last_time)
        p->last_time = ev.time_nano;
    type = plain_string(json_get(root, "Type"));
    ev.action_text = plain_string(json_get(root, "Action"));
    actor = json_get(root, "Actor");
    id = json_get(actor, "ID");
    if (type == NULL || strcmp(type, "container") != 0 ||
        ev.action_text == NULL || ev.action_text[0] == '\0' ||
        !events_valid_id(id)) {
        p->skipped++;
        goto out;
    }
    ev.action = events_action_from_string(ev.action_text);
    ev.id = id->str;
    attrs = json_get(actor, "Attributes");
    if (attrs != NULL && attrs->type == JSON_OBJECT) {
        if (collect_attrs(p, attrs, &ev) != 0) {
            set_error(p, "out of memory at byte %zu", root->offset);
            rc = -1;
            goto out;
        }
        ev.name = plain_string(json_get(attrs, "name"));
        ev.image = plain_string(json_get(attrs, "image"));
        ev.name_truncated =
            ev.name != NULL && json_get(attrs, "name")->truncated;
        ev.image_truncated =
            ev.image != NULL && json_get(attrs, "image")->truncated;
        if (ev.action == DOCKER_EV_DIE &&
            parse_int(json_get(attrs, "exitCode"), &ev.exit_code) == 0)
            ev.has_exit_code = 1;
    }
    p->count++;
    if (p->cb != NULL)
        p->cb(&ev, p->arg);
out:
    json_stream_release(p->js, root);
    return rc;
}

/* A fresh JSON stream that starts at stream offset `at`. */
static int
open_json(struct events_parser *p, size_t at)
{
    struct json_limits jl;

    json_stream_free(p->js);
    memset(&jl, 0, sizeof jl);
    jl.max_bytes = p->lim.max_event_bytes;
    jl.max_depth = p->lim.max_depth;
    jl.max_items =
        p->lim.max_attrs > SIZE_MAX - FIELD_SLACK - LIMIT_POLICY_LABELS
            ? SIZE_MAX
            : p->lim.max_attrs + FIELD_SLACK + LIMIT_POLICY_LABELS;
    jl.max_string = LIMIT_LABEL_VALUE;
    p->js = json_stream_new(&jl, JSON_MULTIPLE | JSON_TRUNCATE, on_object, p);
    if (p->js == NULL)
        return -1;
    json_stream_set_filter(p->js, filter, p);
    p->js_base = at;
    return 0;
}

struct events_parser *
events_parser_new(const struct events_limits *limits, events_cb cb, void *arg)
{
    struct events_parser *p = calloc(1, sizeof *p);

    if (p == NULL)
        return NULL;
    if (limits != NULL)
        p->lim = *limits;
    if (p->lim.max_event_bytes == 0)
        p->lim.max_event_bytes = DEFAULT_EVENT_BYTES;
    if (p->lim.max_depth == 0)
        p->lim.max_depth = DEFAULT_DEPTH;
    if (p->lim.max_attrs == 0)
        p->lim.max_attrs = LIMIT_LABELS;
    p->cb = cb;
    p->arg = arg;
    if (open_json(p, 0) != 0) {
        free(p);
        return NULL;
    }
    return p;
}

void
events_parser_set_labels(struct events_parser *p, events_label_cb wanted,
                         void *arg)
{
    p->wanted = wanted;
    p->wanted_arg = arg;
}

void
events_parser_set_filter(struct events_parser *p, events_label_cb kept,
                         void *arg)
{
    p->kept = kept;
    p->kept_arg = arg;
}

void
events_parser_free(struct events_parser *p)
{
    if (p == NULL)
        return;
    json_stream_free(p->js);
    free(p->attrs);
    free(p);
}

/* Counts the object just given up on, with why. */
static void
reject(struct events_parser *p, const char *why, size_t at)
{
    p->rejected++;
    snprintf(p->rejection, sizeof p->rejection, "%s at byte %zu", why, at);
}

/*
 * The engine writes one object per line, so a line is the unit of
 * recovery: the stream is fed a line at a time, and an object that is
 * malformed, or still open when its line ends, is given up on at that
 * line's end. Where the chunks of the stream fall changes nothing.
 */
int
events_parser_feed(struct events_parser *p, const char *buf, size_t len)
{
    const char *nl;
    size_t k;
    int bad;

    if (p->failed)
        return -1;
    while (len > 0) {
        nl = memchr(buf, '\n', len);
        k = nl != NULL ? (size_t)(nl - buf) + 1 : len;
        if (!p->resync) {
            bad = json_stream_feed(p->js, buf, k) != 0;
            if (bad && p->failed)
                return -1; /* on_object() stopped it with its own reason */
            if (bad && json_stream_oom(p->js))
                goto oom; /* not the event's fault: read it again */
            if (bad) {
                reject(p, json_stream_error(p->js),
                       p->js_base + json_stream_error_offset(p->js));
                p->resync = 1;
            } else if (nl != NULL && json_stream_pending(p->js) > 0) {
                reject(p, "object not closed at the end of its line",
                       p->fed + k - 1);
                p->resync = 1;
            }
        }
        p->fed += k;
        buf += k;
        len -= k;
        if (nl != NULL && p->resync) {
            p->resync = 0;
            if (open_json(p, p->fed) != 0)
                goto oom;
        }
    }
    return 0;
oom:
    set_error(p, "out of memory at byte %zu", p->fed);
    return -1;
}

uint64_t
events_parser_rejected(const struct events_parser *p)
{
    return p->rejected;
}

const char *
events_parser_last_rejection(const struct events_parser *p)
{
    return p->rejected > 0 ? p->rejection : NULL;
}

int64_t
events_parser_last_time(const struct events_parser *p)
{
    return p->last_time;
}

int64_t
events_parser_first_time(const struct events_parser *p)
{
    return p->first_time;
}

const char *
events_parser_error(const struct events_parser *p)
{
    return p->failed ? p->err : NULL;
}

uint64_t
events_parser_count(const struct events_parser *p)
{
    return p->count;
}

uint64_t
events_parser_skipped(const struct events_parser *p)
{
    return p->skipped;
}

size_t
events_parser_pending(const struct events_parser *p)
{
    return p->js != NULL && !p->resync ? json_stream_pending(p->js) : 0;
}
