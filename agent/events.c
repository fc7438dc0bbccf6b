/*
 * events — the Docker events stream turned into flat container events
 * (events.h).
 *
 * The JSON stream does the bounding and the tree building; this file
 * decides which objects are container events and flattens them. Strings in
 * a struct docker_event point into the object's arena and the attribute
 * list into a buffer owned by the parser and reused, so an event costs its
 * arena and nothing else; both are gone when the callback returns.
 */
#include "events.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"

#define DEFAULT_EVENT_BYTES ((size_t)256 * 1024)
#define DEFAULT_DEPTH       8u
#define DEFAULT_ATTRS       ((size_t)1024)
/* Members allowed in any object on top of max_attrs, so the event and its
 * Actor fit while Attributes is still checked against max_attrs exactly,
 * here, with a message that names it. */
#define FIELD_SLACK ((size_t)64)

struct events_parser {
    struct json_stream *js;
    struct events_limits lim;
    events_cb cb;
    void *arg;
    struct event_attr *attrs; /* reused by every event */
    size_t attrs_cap;
    uint64_t count;
    uint64_t skipped;
    int failed;
    char err[200];
};

static const struct {
    const char *name;
    enum event_action action;
} actions[] = {
    {"create", EV_CREATE}, {"start", EV_START},   {"restart", EV_RESTART},
    {"die", EV_DIE},       {"oom", EV_OOM},       {"kill", EV_KILL},
    {"stop", EV_STOP},     {"pause", EV_PAUSE},   {"unpause", EV_UNPAUSE},
    {"rename", EV_RENAME}, {"update", EV_UPDATE}, {"destroy", EV_DESTROY},
};

enum event_action
events_action_from_string(const char *s)
{
    size_t i;

    if (s == NULL)
        return EV_OTHER;
    for (i = 0; i < sizeof actions / sizeof actions[0]; i++)
        if (strcmp(s, actions[i].name) == 0)
            return actions[i].action;
    return EV_OTHER;
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
valid_id(const struct json_node *n)
{
    size_t i;

    if (n == NULL || n->type != JSON_STRING || n->len != 64)
        return 0;
    for (i = 0; i < 64; i++)
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

static int64_t
event_time(const struct json_node *root)
{
    int64_t t;

    if (json_int64(json_get(root, "timeNano"), &t) == 0)
        return t;
    if (json_int64(json_get(root, "time"), &t) == 0 &&
        t <= INT64_MAX / 1000000000 && t >= INT64_MIN / 1000000000)
        return t * 1000000000;
    return 0;
}

/* Fills ev->attrs from the Attributes object; -1 if out of memory. The
 * buffer grows to the largest event seen and is then reused. */
static int
collect_attrs(struct events_parser *p, const struct json_node *obj,
              struct docker_event *ev)
{
    const struct json_node *m;
    struct event_attr *a;
    size_t i, cap;

    if (obj->count > p->attrs_cap) {
        cap = p->attrs_cap ? p->attrs_cap : 16;
        while (cap < obj->count)
            cap *= 2;
        if (cap > p->lim.max_attrs)
            cap = p->lim.max_attrs;
        a = realloc(p->attrs, cap * sizeof *a);
        if (a == NULL)
            return -1;
        p->attrs = a;
        p->attrs_cap = cap;
    }
    for (i = 0; i < obj->count; i++) {
        m = obj->items[i];
        if (plain_string(m) == NULL || !plain_key(m))
            continue; /* labels are strings; anything else is not ours */
        p->attrs[ev->nattrs].key = m->key;
        p->attrs[ev->nattrs].value = m->str;
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
    type = plain_string(json_get(root, "Type"));
    ev.action_text = plain_string(json_get(root, "Action"));
    actor = json_get(root, "Actor");
    id = json_get(actor, "ID");
    if (type == NULL || strcmp(type, "container") != 0 ||
        ev.action_text == NULL || ev.action_text[0] == '\0' || !valid_id(id)) {
        p->skipped++;
        goto out;
    }
    ev.action = events_action_from_string(ev.action_text);
    ev.id = id->str;
    attrs = json_get(actor, "Attributes");
    if (attrs != NULL && attrs->type == JSON_OBJECT) {
        if (attrs->count > p->lim.max_attrs) {
            set_error(p,
                      "Actor.Attributes has more than %zu members "
                      "at byte %zu",
                      p->lim.max_attrs, root->offset);
            rc = -1;
            goto out;
        }
        if (collect_attrs(p, attrs, &ev) != 0) {
            set_error(p, "out of memory at byte %zu", root->offset);
            rc = -1;
            goto out;
        }
        ev.name = plain_string(json_get(attrs, "name"));
        ev.image = plain_string(json_get(attrs, "image"));
        if (ev.action == EV_DIE &&
            parse_int(json_get(attrs, "exitCode"), &ev.exit_code) == 0)
            ev.has_exit_code = 1;
    }
    ev.time_nano = event_time(root);
    p->count++;
    if (p->cb != NULL)
        p->cb(&ev, p->arg);
out:
    json_stream_release(p->js, root);
    return rc;
}

struct events_parser *
events_parser_new(const struct events_limits *limits, events_cb cb, void *arg)
{
    struct events_parser *p = calloc(1, sizeof *p);
    struct json_limits jl;

    if (p == NULL)
        return NULL;
    if (limits != NULL)
        p->lim = *limits;
    if (p->lim.max_event_bytes == 0)
        p->lim.max_event_bytes = DEFAULT_EVENT_BYTES;
    if (p->lim.max_depth == 0)
        p->lim.max_depth = DEFAULT_DEPTH;
    if (p->lim.max_attrs == 0)
        p->lim.max_attrs = DEFAULT_ATTRS;
    p->cb = cb;
    p->arg = arg;

    memset(&jl, 0, sizeof jl);
    jl.max_bytes = p->lim.max_event_bytes;
    jl.max_depth = p->lim.max_depth;
    jl.max_items = p->lim.max_attrs > SIZE_MAX - FIELD_SLACK
                       ? SIZE_MAX
                       : p->lim.max_attrs + FIELD_SLACK;
    /* The event size already bounds every string in it. */
    jl.max_string = p->lim.max_event_bytes;
    p->js = json_stream_new(&jl, JSON_MULTIPLE, on_object, p);
    if (p->js == NULL) {
        free(p);
        return NULL;
    }
    return p;
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

int
events_parser_feed(struct events_parser *p, const char *buf, size_t len)
{
    if (p->failed)
        return -1;
    if (json_stream_feed(p->js, buf, len) == 0)
        return 0;
    /* Unless on_object() stopped the stream with its own reason. */
    set_error(p, "%s at byte %zu", json_stream_error(p->js),
              json_stream_error_offset(p->js));
    return -1;
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
    return json_stream_pending(p->js);
}
