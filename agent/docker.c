/*
 * docker — the Docker Engine API client; see docker.h.
 *
 * Engine answers are untrusted input: every body is size-capped by the
 * loop, parsed with json's limits, and every field we use is type-checked.
 * A container with a bad id or an unknown state word is dropped from a
 * list (and logged), not believed.
 */
#include "docker.h"

#include <ctype.h>
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "bounds.h"
#include "json.h"
#include "log.h"
#include "loop.h"
#include "stream.h"

#define ERR_MAX_BODY (64u << 10)
/* Containers in one list answer: far more than a node can run. */
#define LIST_MAX_ITEMS ((size_t)1 << 20)
#define WATCH_BASE_MS  250
#define REJECT_LOG_MS  10000

struct docker {
    struct loop *l;
    char *socket;
    long timeout_ms;
    char api[16];                     /* negotiated version, "" until known */
    struct docker_engine_info engine; /* the last /version answer */
    bool engine_known;
    struct docker_req *reqs; /* in flight, for docker_free */
    /* The labels a policy names, and the operator's filter. */
    struct docker_label_rules rules;

    /* The events subscription: /version, then /events. */
    struct stream *st;
    struct docker_watch_cbs cbs;
    void *cbs_arg;
    struct loop_http_call *wcall;
    struct events_parser *parser;
    int64_t checkpoint;
    uint64_t nevents;
    uint64_t rejected;        /* events stepped over, all parsers */
    uint64_t parser_rejected; /* ... of which the current parser's */
    uint64_t rejected_logged;
    uint64_t reject_log_ms; /* when the last line about them was written */
    /* Since the last subscription (after the first), the engine refused
     * or failed a connection: it was down, not just the stream cut. */
    bool unreachable;
    bool after_outage; /* ... said of the subscription now open */
    bool feeding;      /* inside events_parser_feed */
    /* The attempt's first request is the engine's replay of the events
     * since the checkpoint, bounded (until=) so that its end says it is
     * all read; the live stream follows (open_events). */
    bool replaying;
    bool announced;       /* on_subscribed said for this attempt */
    uint64_t replay_objs; /* objects the replay held, of every type */
    int64_t replay_since; /* the time it was asked from */
    int64_t replay_first; /* the first one's time */
    uint64_t replays_cut; /* replays that may have begun past the checkpoint */
    bool replay_refused;  /* answered 4xx: not asked again */
    void (*on_replayed)(void *arg);
    bool parser_dead;  /* free the parser once the feed returns */
    bool free_pending; /* docker_free ran from an event callback */
};

enum req_kind { REQ_INSPECT, REQ_LIST, REQ_DELETE };

struct docker_req {
    struct docker *d;
    enum req_kind kind;
    struct loop_http_call *call;
    /* Inspect and list answers are parsed as they arrive; an error
     * answer's first ERR_MAX_BODY bytes are kept for its message. */
    struct docker_doc *doc;
    long status;
    char *errbody;
    size_t errlen;
    char parse_err[256];
    union {
        docker_inspect_cb inspect;
        docker_list_cb list;
        docker_list_owned_cb list_owned;
        docker_delete_cb del;
    } cb;
    bool hand_over; /* a list whose answer goes to its callback */
    void *arg;
    struct docker_req *prev, *next;
};

bool
docker_valid_id(const char *s)
{
    size_t i;

    if (s == NULL)
        return false;
    for (i = 0; i < CTR_ID_LEN; i++) {
        char ch = s[i];

        if (!((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f')))
            return false;
    }
    return s[CTR_ID_LEN] == '\0';
}

/* ---- parsing ---------------------------------------------------------- */

/*
 * Inspect and list answers are read through a filter that keeps only what
 * reapd reads (docs/limits.md): a container's Env, Cmd, Mounts, Health
 * log... are lexed and left out, whatever their size, and labels are kept
 * by the rules of bounds.h. The same code serves a body in one piece
 * (docker_parse_*) and one streamed from the engine.
 */
enum doc_kind { DOC_INSPECT, DOC_LIST };

/* The filter's tags. */
enum {
    T_TOP = 0, /* the inspect object, or the list array */
    T_LEAF,    /* a field we read; nothing inside it is ours */
    T_ITEM,    /* one container of a list */
    T_STATE,   /* inspect State */
    T_CONFIG,  /* inspect Config */
    T_NAMES,   /* list Names */
    T_LABELS,
};

struct docker_doc {
    enum doc_kind kind;
    struct json_stream *js;
    struct json_node *root;
    struct docker_label_rules rules;
    size_t others; /* labels kept in the current Labels object, unwanted */
    size_t named;  /* ... and named by a policy (duplicates are bounded) */
};

struct docker_parsed {
    struct json_node *root;
    struct docker_container *items;
    size_t n;
    struct policy_label *labels;
};

/* A list answer handed over whole (docker_list_all): its tree, read an
 * entry at a time. */
struct docker_list {
    struct json_node *root;
    struct docker_label_rules rules;
    struct docker_container cur;
    struct policy_label *labels;
    size_t labels_cap;
};

static int
docker_key_is(const char *key, size_t len, const char *want)
{
    return strlen(want) == len && memcmp(key, want, len) == 0;
}

static int
label_rule(struct docker_doc *doc, const char *key, size_t len, int cut)
{
    const struct docker_label_rules *r = &doc->rules;

    if (cut || len > LIMIT_LABEL_KEY)
        return JSON_DROP;
    if (r->wanted != NULL && r->wanted(key, len, r->wanted_arg))
        return doc->named++ < LIMIT_POLICY_LABELS ? T_LEAF : JSON_DROP;
    /* Refused by choice, not cut by a limit: not flagged. */
    if (r->kept != NULL && !r->kept(key, len, r->kept_arg))
        return JSON_SKIP;
    if (doc->others >= LIMIT_LABELS)
        return JSON_DROP;
    doc->others++;
    return T_LEAF;
}

static int
doc_filter(int tag, const char *key, size_t len, int cut, size_t index,
           void *arg)
{
    struct docker_doc *doc = arg;

    if (key == NULL) {
        if (tag == T_TOP && doc->kind == DOC_LIST)
            return T_ITEM;
        return tag == T_NAMES && index == 0 ? T_LEAF : JSON_SKIP;
    }
    switch (tag) {
    case T_TOP:
        if (doc->kind == DOC_LIST)
            return JSON_SKIP;
        if (docker_key_is(key, len, "Id") || docker_key_is(key, len, "Name"))
            return T_LEAF;
        if (docker_key_is(key, len, "State"))
            return T_STATE;
        return docker_key_is(key, len, "Config") ? T_CONFIG : JSON_SKIP;
    case T_ITEM:
        if (docker_key_is(key, len, "Id") ||
            docker_key_is(key, len, "State") ||
            docker_key_is(key, len, "Image"))
            return T_LEAF;
        if (docker_key_is(key, len, "Names"))
            return T_NAMES;
        break;
    case T_STATE:
        return docker_key_is(key, len, "Status") ||
                       docker_key_is(key, len, "ExitCode") ||
                       docker_key_is(key, len, "OOMKilled") ||
                       docker_key_is(key, len, "StartedAt") ||
                       docker_key_is(key, len, "FinishedAt")
                   ? T_LEAF
                   : JSON_SKIP;
    case T_CONFIG:
        if (docker_key_is(key, len, "Image"))
            return T_LEAF;
        break;
    case T_LABELS:
        return label_rule(doc, key, len, cut);
    default:
        return JSON_SKIP;
    }
    if (!docker_key_is(key, len, "Labels"))
        return JSON_SKIP;
    doc->others = 0;
    doc->named = 0;
    return T_LABELS;
}

static int
keep_doc(struct json_node *root, void *arg)
{
    struct docker_doc *doc = arg;

    json_free(doc->root); /* a second document is refused at finish */
    doc->root = root;
    return 0;
}

static void
doc_free(struct docker_doc *doc)
{
    if (doc == NULL)
        return;
    json_stream_free(doc->js);
    json_free(doc->root);
    free(doc);
}

static struct docker_doc *
doc_new(enum doc_kind kind, const struct docker_label_rules *rules)
{
    struct docker_doc *doc = calloc(1, sizeof(*doc));
    /* Strings are cut, not refused; the size as sent is not bounded, as
     * nothing of it is kept but what the filter wants. */
    struct json_limits lim = {.max_bytes = SIZE_MAX,
                              .max_depth = 16,
                              .max_items = LIST_MAX_ITEMS,
                              .max_string = LIMIT_LABEL_VALUE};

    if (doc == NULL)
        return NULL;
    doc->kind = kind;
    if (rules != NULL)
        doc->rules = *rules;
    doc->js = json_stream_new(&lim, JSON_TRUNCATE, keep_doc, doc);
    if (doc->js == NULL) {
        free(doc);
        return NULL;
    }
    json_stream_set_filter(doc->js, doc_filter, doc);
    return doc;
}

static int
doc_feed(struct docker_doc *doc, const char *buf, size_t len)
{
    return json_stream_feed(doc->js, buf, len);
}

/* Ends the input: the root, now the caller's, or NULL with `err`. */
static struct json_node *
doc_finish(struct docker_doc *doc, char *err, size_t errlen)
{
    struct json_node *root;

    if (json_stream_finish(doc->js) != 0) {
        snprintf(err, errlen, "%s at byte %zu", json_stream_error(doc->js),
                 json_stream_error_offset(doc->js));
        return NULL;
    }
    root = doc->root;
    doc->root = NULL;
    return root;
}

/* The string value when it holds no NUL byte (a "\u0000" inside would
 * make C string functions see only a prefix: "reapd.managed\u0000x" must
 * not pass as "reapd.managed"). Else NULL. */
static const char *
cstr(const struct json_node *n)
{
    const char *s = json_string(n);

    return s != NULL && strlen(s) == n->len ? s : NULL;
}

static int
api_number(const char *v)
{
    int major = 0, minor = 0;
    char tail;

    if (v == NULL || sscanf(v, "%d.%d%c", &major, &minor, &tail) != 2)
        return -1;
    if (major < 1 || major > 99 || minor < 0 || minor > 999)
        return -1;
    return major * 1000 + minor;
}

/* Copies a version string the engine gave, or "" when it is absent or
 * not one: it ends up in logs and Prometheus label values unescaped. */
static void
take_version(const struct json_node *n, char *out, size_t outlen)
{
    const char *s = cstr(n);
    size_t i;

    out[0] = '\0';
    if (s == NULL || s[0] == '\0' || strlen(s) >= outlen)
        return;
    for (i = 0; s[i] != '\0'; i++)
        if (!isalnum((unsigned char)s[i]) && strchr(".+~_-:", s[i]) == NULL)
            return;
    memcpy(out, s, i + 1);
}

/* The Version of the component named `name` in Components[]. */
static const struct json_node *
component_version(const struct json_node *root, const char *name)
{
    const struct json_node *list = json_get(root, "Components"), *c, *n;
    size_t i;

    if (list == NULL || list->type != JSON_ARRAY)
        return NULL;
    for (i = 0; i < list->count; i++) {
        c = list->items[i];
        n = json_get(c, "Name");
        if (cstr(n) != NULL && strcasecmp(cstr(n), name) == 0)
            return json_get(c, "Version");
    }
    return NULL;
}

int
docker_parse_version(const char *body, size_t len, char *out, size_t outlen,
                     char *err, size_t errlen)
{
    struct docker_engine_info info;

    if (docker_parse_engine(body, len, &info, err, errlen) != 0)
        return -1;
    snprintf(out, outlen, "%s", info.api);
    return 0;
}

int
docker_parse_engine(const char *body, size_t len,
                    struct docker_engine_info *out, char *err, size_t errlen)
{
    struct json_limits lim = {.max_bytes = 1u << 20, .max_depth = 8};
    struct json_node *root;
    const char *srv, *min;
    int nsrv, nmin, nuse, result = -1;

    memset(out, 0, sizeof(*out));
    root = json_parse(body, len, &lim, 0, err, errlen, NULL);
    if (root == NULL)
        return -1;
    srv = cstr(json_get(root, "ApiVersion"));
    min = cstr(json_get(root, "MinAPIVersion"));
    nsrv = api_number(srv);
    nmin = min != NULL ? api_number(min) : nsrv;
    if (nsrv < 0 || nmin < 0) {
        snprintf(err, errlen, "/version: no valid ApiVersion");
        goto out;
    }
    nuse = nsrv;
    if (nuse > api_number(DOCKER_API_MAX))
        nuse = api_number(DOCKER_API_MAX);
    if (nuse < api_number(DOCKER_API_MIN) || nuse < nmin) {
        snprintf(err, errlen,
                 "engine API %s is outside what reapd speaks (%s..%s)", srv,
                 DOCKER_API_MIN, DOCKER_API_MAX);
        goto out;
    }
    snprintf(out->api, sizeof(out->api), "%d.%d", nuse / 1000, nuse % 1000);
    snprintf(out->engine_api, sizeof(out->engine_api), "%d.%d", nsrv / 1000,
             nsrv % 1000);
    take_version(json_get(root, "Version"), out->version,
                 sizeof(out->version));
    take_version(component_version(root, "containerd"),
                 out->containerd_version, sizeof(out->containerd_version));
    result = 0;
out:
    json_free(root);
    return result;
}

/*
 * Copies the string members of `obj` into labels[] and says in `c`
 * whether any was cut or left out. Labels a policy names come first and
 * are all kept; the others share LIMIT_LABEL_BYTES.
 */
static size_t
take_labels(const struct json_node *obj, struct policy_label *labels,
            struct docker_container *c, events_label_cb wanted,
            void *wanted_arg)
{
    size_t i, n = 0, bytes = 0, size;
    int pass;

    if (obj == NULL || obj->type != JSON_OBJECT)
        return 0;
    c->labels_truncated = obj->truncated != 0;
    for (pass = 0; pass < 2; pass++) {
        for (i = 0; i < obj->count; i++) {
            const struct json_node *m = obj->items[i];
            int want =
                wanted != NULL && wanted(m->key, m->key_len, wanted_arg);

            if (want != (pass == 0))
                continue;
            if (cstr(m) == NULL || strlen(m->key) != m->key_len) {
                c->labels_truncated = true; /* not a label we can keep */
                continue;
            }
            if (!want) {
                size = m->key_len + m->len;
                if (size > LIMIT_LABEL_BYTES - bytes) {
                    c->labels_truncated = true;
                    continue;
                }
                bytes += size;
            }
            if (m->truncated)
                c->labels_truncated = true;
            labels[n].key = (char *)m->key;
            labels[n].value = (char *)m->str;
            n++;
        }
    }
    return n;
}

static size_t
count_labels(const struct json_node *obj)
{
    return obj != NULL && obj->type == JSON_OBJECT ? obj->count : 0;
}

static const char *
time_or_null(const char *t)
{
    /* Go's zero time means "never". */
    if (t == NULL || t[0] == '\0' || strncmp(t, "0001-01-01", 10) == 0)
        return NULL;
    return t;
}

static bool
json_true(const struct json_node *n)
{
    return n != NULL && n->type == JSON_BOOL && n->boolean;
}

static bool
cut(const struct json_node *n)
{
    return n != NULL && n->truncated;
}

static struct docker_parsed *
parsed_new(struct json_node *root, size_t n, size_t nlabels)
{
    struct docker_parsed *p = calloc(1, sizeof(*p));

    if (p == NULL)
        return NULL;
    p->root = root;
    p->items = calloc(n ? n : 1, sizeof(*p->items));
    p->labels = calloc(nlabels ? nlabels : 1, sizeof(*p->labels));
    if (p->items == NULL || p->labels == NULL) {
        p->root = NULL;
        docker_parsed_free(p);
        return NULL;
    }
    return p;
}

void
docker_parsed_free(struct docker_parsed *p)
{
    if (p == NULL)
        return;
    json_free(p->root);
    free(p->items);
    free(p->labels);
    free(p);
}

/* Builds the inspect result from `root`, which it takes. */
static int
inspect_from(struct json_node *root, const struct docker_doc *doc,
             struct docker_parsed **ctx, const struct docker_container **out,
             char *err, size_t errlen)
{
    const struct json_node *cfg, *st, *labels, *nm, *img;
    struct docker_parsed *p = NULL;
    struct docker_container *c;
    const char *id, *name, *status;
    int64_t code;

    id = cstr(json_get(root, "Id"));
    cfg = json_get(root, "Config");
    st = json_get(root, "State");
    if (!docker_valid_id(id) || st == NULL || st->type != JSON_OBJECT) {
        snprintf(err, errlen, "inspect: no valid Id or State");
        json_free(root);
        return -1;
    }
    labels = json_get(cfg, "Labels");
    p = parsed_new(root, 1, count_labels(labels));
    if (p == NULL) {
        json_free(root);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    c = &p->items[0];
    p->n = 1;
    memcpy(c->id, id, CTR_ID_SIZE);
    nm = json_get(root, "Name");
    name = cstr(nm);
    c->name = name != NULL && name[0] == '/' ? name + 1 : name;
    c->name_truncated = cut(nm);
    img = json_get(cfg, "Image");
    c->image = cstr(img);
    c->image_truncated = cut(img);
    c->labels = p->labels;
    c->nlabels = take_labels(labels, p->labels, c, doc->rules.wanted,
                             doc->rules.wanted_arg);
    status = cstr(json_get(st, "Status"));
    if (lc_run_parse(status, &c->state.run) != 0) {
        snprintf(err, errlen, "inspect: unknown State.Status \"%.40s\"",
                 status ? status : "(none)");
        docker_parsed_free(p);
        return -1;
    }
    if (json_int64(json_get(st, "ExitCode"), &code) == 0 &&
        code >= INT32_MIN && code <= INT32_MAX) {
        c->state.has_exit_code = true;
        c->state.exit_code = (int)code;
    }
    c->state.oom_killed = json_true(json_get(st, "OOMKilled"));
    c->started_at = time_or_null(cstr(json_get(st, "StartedAt")));
    c->finished_at = time_or_null(cstr(json_get(st, "FinishedAt")));
    c->state.finished = c->finished_at != NULL;
    *ctx = p;
    *out = c;
    return 0;
}

/* One entry of a list answer into *c, its labels into `labels` (room for
 * as many as its Labels object has): 0, or -1 for an entry without a
 * valid Id or State (logged, skipped). */
static int
list_item(const struct json_node *it, struct docker_container *c,
          struct policy_label *labels, events_label_cb wanted,
          void *wanted_arg)
{
    const struct json_node *names, *nm = NULL;
    const char *id = cstr(json_get(it, "Id"));
    const char *state = cstr(json_get(it, "State"));
    const char *name;

    memset(c, 0, sizeof(*c));
    if (!docker_valid_id(id) || lc_run_parse(state, &c->state.run)) {
        log_warn(NULL, "list: skipping an entry with a bad Id or State");
        return -1;
    }
    memcpy(c->id, id, CTR_ID_SIZE);
    names = json_get(it, "Names");
    if (names != NULL && names->type == JSON_ARRAY && names->count > 0)
        nm = names->items[0];
    name = cstr(nm);
    c->name = name != NULL && name[0] == '/' ? name + 1 : name;
    c->name_truncated = cut(nm);
    c->image = cstr(json_get(it, "Image"));
    c->image_truncated = cut(json_get(it, "Image"));
    c->labels = labels;
    c->nlabels =
        take_labels(json_get(it, "Labels"), labels, c, wanted, wanted_arg);
    return 0;
}

/* 0 when a list answer's root is an array reapd took whole, else -1 with
 * the reason in err. */
static int
list_root_ok(const struct json_node *root, char *err, size_t errlen)
{
    if (root->type == JSON_ARRAY && !root->truncated)
        return 0;
    snprintf(err, errlen,
             root->type != JSON_ARRAY ? "list: expected an array"
                                      : "list: more than %zu containers",
             (size_t)LIST_MAX_ITEMS);
    return -1;
}

/* Builds the list result from `root`, which it takes. */
static int
list_from(struct json_node *root, const struct docker_doc *doc,
          struct docker_parsed **ctx, const struct docker_container **out,
          size_t *n, char *err, size_t errlen)
{
    struct docker_parsed *p;
    size_t i, nl = 0, lab = 0;

    if (list_root_ok(root, err, errlen) != 0) {
        json_free(root);
        return -1;
    }
    for (i = 0; i < root->count; i++)
        nl += count_labels(json_get(root->items[i], "Labels"));
    p = parsed_new(root, root->count, nl);
    if (p == NULL) {
        json_free(root);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    for (i = 0; i < root->count; i++) {
        struct docker_container *c = &p->items[p->n];

        if (list_item(root->items[i], c, p->labels + lab, doc->rules.wanted,
                      doc->rules.wanted_arg) != 0)
            continue;
        lab += c->nlabels;
        p->n++;
    }
    *ctx = p;
    *out = p->items;
    *n = p->n;
    return 0;
}

/* One body, in pieces of `chunk` bytes (0: whole), through the same
 * filter as a streamed one. */
static struct json_node *
parse_whole(struct docker_doc *doc, const char *body, size_t len, size_t chunk,
            char *err, size_t errlen)
{
    size_t off = 0, k;

    if (doc == NULL) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    if (chunk == 0 || chunk > len)
        chunk = len;
    do {
        k = len - off < chunk ? len - off : chunk;
        if (doc_feed(doc, body + off, k) != 0) {
            snprintf(err, errlen, "%s at byte %zu", json_stream_error(doc->js),
                     json_stream_error_offset(doc->js));
            return NULL;
        }
        off += k;
    } while (off < len);
    return doc_finish(doc, err, errlen);
}

int
docker_parse_inspect_with(const char *body, size_t len, size_t chunk,
                          const struct docker_label_rules *rules,
                          struct docker_parsed **ctx,
                          const struct docker_container **out, char *err,
                          size_t errlen)
{
    struct docker_doc *doc = doc_new(DOC_INSPECT, rules);
    struct json_node *root;
    int rc = -1;

    *ctx = NULL;
    root = parse_whole(doc, body, len, chunk, err, errlen);
    if (root != NULL)
        rc = inspect_from(root, doc, ctx, out, err, errlen);
    doc_free(doc);
    return rc;
}

int
docker_parse_inspect(const char *body, size_t len, struct docker_parsed **ctx,
                     const struct docker_container **out, char *err,
                     size_t errlen)
{
    return docker_parse_inspect_with(body, len, 0, NULL, ctx, out, err,
                                     errlen);
}

int
docker_parse_list_with(const char *body, size_t len, size_t chunk,
                       const struct docker_label_rules *rules,
                       struct docker_parsed **ctx,
                       const struct docker_container **out, size_t *n,
                       char *err, size_t errlen)
{
    struct docker_doc *doc = doc_new(DOC_LIST, rules);
    struct json_node *root;
    int rc = -1;

    *ctx = NULL;
    root = parse_whole(doc, body, len, chunk, err, errlen);
    if (root != NULL)
        rc = list_from(root, doc, ctx, out, n, err, errlen);
    doc_free(doc);
    return rc;
}

int
docker_parse_list(const char *body, size_t len, struct docker_parsed **ctx,
                  const struct docker_container **out, size_t *n, char *err,
                  size_t errlen)
{
    return docker_parse_list_with(body, len, 0, NULL, ctx, out, n, err,
                                  errlen);
}

/* ---- requests --------------------------------------------------------- */

static void
docker_req_unlink(struct docker_req *r)
{
    if (r->prev != NULL)
        r->prev->next = r->next;
    else
        r->d->reqs = r->next;
    if (r->next != NULL)
        r->next->prev = r->prev;
}

static void
req_free(struct docker_req *r)
{
    doc_free(r->doc);
    free(r->errbody);
    free(r);
}

/* The engine's {"message": "..."} of an error answer, or a default. */
static void
error_message(const struct loop_http_resp *res, const char *body,
              size_t body_len, const char *what, char *buf, size_t len)
{
    struct json_limits lim = {.max_bytes = ERR_MAX_BODY, .max_depth = 4};
    struct json_node *root = NULL;
    const char *m = NULL;

    if (res->error != HTTPC_OK) {
        snprintf(buf, len, "%s: %s", what, res->errmsg);
        return;
    }
    if (body != NULL && body_len > 0)
        root = json_parse(body, body_len, &lim, 0, NULL, 0, NULL);
    m = cstr(json_get(root, "message"));
    snprintf(buf, len, "%s: HTTP %ld%s%.200s", what, res->status,
             m ? ": " : "", m ? m : "");
    json_free(root);
}

static enum docker_status
status_of(const struct loop_http_resp *res)
{
    if (res->error != HTTPC_OK)
        return DOCKER_FAILED;
    if (res->status >= 200 && res->status < 300)
        return DOCKER_OK;
    if (res->status == 404)
        return DOCKER_NOT_FOUND;
    if (res->status == 409)
        return DOCKER_CONFLICT;
    return DOCKER_FAILED;
}

static void
on_req_headers(long status, void *arg)
{
    struct docker_req *r = arg;

    r->status = status;
}

static int
on_req_data(const char *buf, size_t len, void *arg)
{
    struct docker_req *r = arg;
    size_t room;
    char *nb;

    if (r->status >= 200 && r->status < 300) {
        if (doc_feed(r->doc, buf, len) == 0)
            return 0;
        snprintf(r->parse_err, sizeof(r->parse_err), "%s at byte %zu",
                 json_stream_error(r->doc->js),
                 json_stream_error_offset(r->doc->js));
        return -1;
    }
    room = ERR_MAX_BODY - r->errlen;
    if (len > room)
        len = room;
    if (len == 0)
        return 0;
    nb = realloc(r->errbody, r->errlen + len + 1);
    if (nb == NULL)
        return 0; /* the message is a nicety */
    memcpy(nb + r->errlen, buf, len);
    r->errlen += len;
    nb[r->errlen] = '\0';
    r->errbody = nb;
    return 0;
}

static const char *
req_what(const struct docker_req *r)
{
    return r->kind == REQ_DELETE    ? "delete"
           : r->kind == REQ_INSPECT ? "inspect"
                                    : "list";
}

/* The answer's tree (taken; NULL unless st is DOCKER_OK) to a
 * docker_list_all callback. */
static void
list_hand_over(struct docker_req *r, enum docker_status st,
               struct json_node *root, const char *msg)
{
    struct docker_list *l = NULL;
    char err[128];

    if (st == DOCKER_OK && list_root_ok(root, err, sizeof(err)) != 0) {
        msg = err;
        st = DOCKER_FAILED;
    } else if (st == DOCKER_OK && (l = calloc(1, sizeof(*l))) == NULL) {
        msg = "out of memory";
        st = DOCKER_FAILED;
    }
    if (st != DOCKER_OK) {
        json_free(root);
        r->cb.list_owned(st, NULL, 0, msg, r->arg);
        return;
    }
    l->root = root;
    l->rules = r->doc->rules;
    r->cb.list_owned(st, l, root->count, msg, r->arg);
}

int
docker_list_entry(struct docker_list *l, size_t i,
                  const struct docker_container **out)
{
    const struct json_node *it, *labels;
    size_t need;

    *out = NULL;
    if (l == NULL || i >= l->root->count)
        return 1;
    it = l->root->items[i];
    labels = json_get(it, "Labels");
    need = count_labels(labels);
    if (need > l->labels_cap) {
        struct policy_label *nl = realloc(l->labels, need * sizeof(*nl));

        if (nl == NULL)
            return -1;
        l->labels = nl;
        l->labels_cap = need;
    }
    if (list_item(it, &l->cur, l->labels, l->rules.wanted,
                  l->rules.wanted_arg) != 0)
        return 1;
    *out = &l->cur;
    return 0;
}

void
docker_list_free(struct docker_list *l)
{
    if (l == NULL)
        return;
    json_free(l->root);
    free(l->labels);
    free(l);
}

int
docker_list_free_some(struct docker_list *l, size_t max)
{
    if (l == NULL)
        return 1;
    if (json_free_some(l->root, max) == 0)
        return 0;
    free(l->labels);
    free(l);
    return 1;
}

static void
docker_req_done(const struct loop_http_resp *res, void *arg)
{
    struct docker_req *r = arg;
    enum docker_status st = status_of(res);
    struct docker_parsed *p = NULL;
    const struct docker_container *cs = NULL;
    struct json_node *root = NULL;
    size_t n = 0;
    char msg[512] = "";

    r->call = NULL;
    docker_req_unlink(r);
    if (r->parse_err[0] != '\0') {
        st = DOCKER_FAILED;
        snprintf(msg, sizeof(msg), "%s: %s", req_what(r), r->parse_err);
    } else if (st != DOCKER_OK) {
        error_message(res, r->doc != NULL ? r->errbody : res->body,
                      r->doc != NULL ? r->errlen : res->body_len, req_what(r),
                      msg, sizeof(msg));
    } else if (r->doc != NULL) {
        root = doc_finish(r->doc, msg, sizeof(msg));
        if (root == NULL)
            st = DOCKER_FAILED;
    }
    switch (r->kind) {
    case REQ_INSPECT:
        if (st == DOCKER_OK &&
            inspect_from(root, r->doc, &p, &cs, msg, sizeof(msg)) != 0)
            st = DOCKER_FAILED;
        r->cb.inspect(st, st == DOCKER_OK ? cs : NULL, msg, r->arg);
        break;
    case REQ_LIST:
        if (r->hand_over) {
            list_hand_over(r, st, root, msg);
            root = NULL;
            break;
        }
        if (st == DOCKER_OK &&
            list_from(root, r->doc, &p, &cs, &n, msg, sizeof(msg)) != 0)
            st = DOCKER_FAILED;
        r->cb.list(st, cs, n, msg, r->arg);
        break;
    case REQ_DELETE:
        r->cb.del(st, res->status, msg, r->arg);
        break;
    }
    docker_parsed_free(p);
    req_free(r);
}

static struct docker_req *
docker_start_req(struct docker *d, enum req_kind kind, const char *method,
                 const char *path, size_t max_body, void *cb, void *arg)
{
    struct loop_http_req hr;
    struct docker_req *r;
    char url[512];

    if (d->api[0] == '\0')
        return NULL; /* not negotiated yet: the watch does that first */
    r = calloc(1, sizeof(*r));
    if (r == NULL)
        return NULL;
    r->d = d;
    r->kind = kind;
    r->arg = arg;
    if (kind == REQ_INSPECT)
        r->cb.inspect = (docker_inspect_cb)cb;
    else if (kind == REQ_LIST)
        r->cb.list = (docker_list_cb)cb;
    else
        r->cb.del = (docker_delete_cb)cb;
    if (kind != REQ_DELETE) {
        r->doc =
            doc_new(kind == REQ_INSPECT ? DOC_INSPECT : DOC_LIST, &d->rules);
        if (r->doc == NULL) {
            free(r);
            return NULL;
        }
    }
    snprintf(url, sizeof(url), "http://docker/v%s%s", d->api, path);
    memset(&hr, 0, sizeof(hr));
    hr.method = method;
    hr.url = url;
    hr.unix_socket = d->socket;
    hr.timeout_ms = d->timeout_ms;
    hr.max_body = max_body;
    hr.yield = 1; /* a list of 100,000 is tens of megabytes */
    r->call =
        loop_http(d->l, &hr, r->doc != NULL ? on_req_headers : NULL,
                  r->doc != NULL ? on_req_data : NULL, docker_req_done, r);
    if (r->call == NULL) {
        req_free(r);
        return NULL;
    }
    r->next = d->reqs;
    if (d->reqs != NULL)
        d->reqs->prev = r;
    d->reqs = r;
    return r;
}

struct docker_req *
docker_inspect(struct docker *d, const char *id, docker_inspect_cb cb,
               void *arg)
{
    char path[128];

    if (!docker_valid_id(id))
        return NULL;
    snprintf(path, sizeof(path), "/containers/%s/json", id);
    return docker_start_req(d, REQ_INSPECT, "GET", path, ERR_MAX_BODY,
                            (void *)cb, arg);
}

struct docker_req *
docker_list(struct docker *d, const char *id, docker_list_cb cb, void *arg)
{
    char path[256];

    if (id != NULL && !docker_valid_id(id))
        return NULL;
    if (id != NULL)
        /* filters={"id":["<id>"]} */
        snprintf(path, sizeof(path),
                 "/containers/json?all=1&filters=%%7B%%22id%%22%%3A%%5B%%22"
                 "%s%%22%%5D%%7D",
                 id);
    else
        snprintf(path, sizeof(path), "/containers/json?all=1");
    return docker_start_req(d, REQ_LIST, "GET", path, ERR_MAX_BODY, (void *)cb,
                            arg);
}

struct docker_req *
docker_list_all(struct docker *d, docker_list_owned_cb cb, void *arg)
{
    struct docker_req *r = docker_list(d, NULL, NULL, arg);

    if (r != NULL) {
        r->hand_over = true;
        r->cb.list_owned = cb;
        /* Tens of megabytes with 100,000 containers: given back a few
         * chunks per loop turn (docker_list_free_some), no heap trim. */
        json_stream_set_mapped(r->doc->js, true);
    }
    return r;
}

struct docker_req *
docker_delete(struct docker *d, const char *id, bool force, bool volumes,
              docker_delete_cb cb, void *arg)
{
    char path[160];

    if (!docker_valid_id(id))
        return NULL;
    snprintf(path, sizeof(path), "/containers/%s?force=%d&v=%d", id,
             force ? 1 : 0, volumes ? 1 : 0);
    return docker_start_req(d, REQ_DELETE, "DELETE", path, ERR_MAX_BODY,
                            (void *)cb, arg);
}

void
docker_cancel(struct docker_req *r)
{
    if (r == NULL)
        return;
    loop_http_cancel(r->call);
    docker_req_unlink(r);
    req_free(r);
}

/* ---- the events subscription ----------------------------------------- */

static void
docker_watch_retry(struct docker *d, const char *why)
{
    d->replaying = false;
    if (d->parser != NULL) {
        events_parser_free(d->parser);
        d->parser = NULL;
    }
    d->wcall = NULL;
    stream_failed(d->st, why);
}

static void
docker_on_stream_lost(const char *why, uint64_t retry_ms, void *arg)
{
    struct docker *d = arg;

    if (d->cbs.on_lost != NULL)
        d->cbs.on_lost(why, retry_ms, d->cbs_arg);
}

static void
on_watch_event(const struct docker_event *ev, void *arg)
{
    struct docker *d = arg;

    if (ev->time_nano > d->checkpoint)
        d->checkpoint = ev->time_nano;
    d->nevents++;
    if (d->cbs.on_event != NULL)
        d->cbs.on_event(ev, d->cbs_arg);
}

static void
on_events_headers(long status, void *arg)
{
    struct docker *d = arg;

    if (status != 200)
        return; /* on_done reports it */
    if (!d->announced) {
        d->announced = true;
        d->after_outage = stream_was_open(d->st) && d->unreachable;
        d->unreachable = false;
        stream_opened(d->st);
        if (d->cbs.on_subscribed != NULL)
            d->cbs.on_subscribed(d->cbs_arg);
    }
    if (!d->replaying && d->on_replayed != NULL)
        d->on_replayed(d->cbs_arg);
}

/* Events the parser stepped over: counted, and one line about them at
 * most every REJECT_LOG_MS, however many there are. Skipped and rejected
 * objects move the checkpoint too (when they had a time), so a resume
 * does not ask for them again. */
static void
note_rejections(struct docker *d)
{
    uint64_t n = events_parser_rejected(d->parser), now;
    int64_t t = events_parser_last_time(d->parser);

    if (t > d->checkpoint)
        d->checkpoint = t;
    if (n == d->parser_rejected)
        return;
    d->rejected += n - d->parser_rejected;
    d->parser_rejected = n;
    if (d->cbs.on_gap != NULL)
        d->cbs.on_gap(d->cbs_arg);
    now = loop_now_ms();
    if (d->reject_log_ms != 0 && now - d->reject_log_ms < REJECT_LOG_MS)
        return;
    log_warn(NULL,
             "events stream: %llu event(s) stepped over, %llu in all "
             "(the last: %s)",
             (unsigned long long)(d->rejected - d->rejected_logged),
             (unsigned long long)d->rejected,
             events_parser_last_rejection(d->parser));
    d->rejected_logged = d->rejected;
    d->reject_log_ms = now;
}

static int
on_events_data(const char *buf, size_t len, void *arg)
{
    struct docker *d = arg;
    int rc;

    if (!stream_is_open(d->st))
        return 0; /* an error body; on_done reports the status */
    d->feeding = true;
    rc = events_parser_feed(d->parser, buf, len);
    d->feeding = false;
    if (!d->parser_dead)
        note_rejections(d);
    if (d->parser_dead) {
        /* docker_watch_stop ran from an event callback. */
        events_parser_free(d->parser);
        d->parser = NULL;
        d->parser_dead = false;
        if (d->free_pending)
            docker_free(d);
        return -1;
    }
    if (rc != 0) {
        log_error(NULL, "events stream: %s; reconnecting",
                  events_parser_error(d->parser));
        return -1;
    }
    return 0;
}

static void open_events(struct docker *d);
static void replay_read(struct docker *d);

static void
on_events_done(const struct loop_http_resp *res, void *arg)
{
    struct docker *d = arg;
    char why[300];

    d->wcall = NULL;
    if (d->replaying && res->error == HTTPC_OK && res->status == 200 &&
        d->parser != NULL && events_parser_pending(d->parser) == 0) {
        replay_read(d);
        return;
    }
    if (d->replaying && res->error == HTTPC_OK && res->status >= 400 &&
        res->status < 500) {
        /* Something in front of the engine refuses the bounded replay:
         * the live stream's own replays it, as before, unbounded. */
        log_warn(NULL,
                 "events: the replay with until= refused (HTTP %ld); "
                 "resuming without it",
                 res->status);
        d->replay_refused = true;
        d->replaying = false;
        events_parser_free(d->parser);
        d->parser = NULL;
        open_events(d);
        return;
    }
    if (d->parser != NULL && events_parser_pending(d->parser) > 0 &&
        res->error != HTTPC_ERR_ABORTED)
        snprintf(why, sizeof(why),
                 "events: stream cut mid-object (%zu bytes dropped): %s",
                 events_parser_pending(d->parser),
                 res->error != HTTPC_OK ? res->errmsg : "closed");
    else if (res->error == HTTPC_ERR_ABORTED && d->parser != NULL)
        snprintf(why, sizeof(why), "events: %s",
                 events_parser_error(d->parser));
    else if (res->error != HTTPC_OK)
        snprintf(why, sizeof(why), "events: %s", res->errmsg);
    else if (res->status != 200)
        snprintf(why, sizeof(why), "events: HTTP %ld", res->status);
    else
        snprintf(why, sizeof(why), "events: stream closed by the engine");
    docker_watch_retry(d, why);
}

static int64_t
wall_now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/*
 * The replay is read whole: every event the engine still held since the
 * checkpoint is in, the dies of containers removed meanwhile included.
 * A replay that holds the engine's whole buffer, all of it past the
 * checkpoint, may have begun later than asked: what came between was
 * pushed out, and exits seen only there are lost.
 */
static void
replay_read(struct docker *d)
{
    d->replay_first = events_parser_first_time(d->parser);
    d->replay_objs = events_parser_count(d->parser) +
                     events_parser_skipped(d->parser) +
                     events_parser_rejected(d->parser);
    note_rejections(d);
    events_parser_free(d->parser);
    d->parser = NULL;
    d->replaying = false;
    if (d->replay_objs >= DOCKER_ENGINE_EVENTS_KEPT &&
        d->replay_first > d->replay_since) {
        d->replays_cut++;
        log_warn(NULL,
                 "events: the engine's replay held its whole buffer (%llu "
                 "events), the first %.3f s after the checkpoint: events "
                 "in between are lost, and an exit seen only there is "
                 "reported with its code unknown unless the container or "
                 "its record still has it",
                 (unsigned long long)d->replay_objs,
                 (double)(d->replay_first - d->replay_since) / 1e9);
    } else {
        log_debug(NULL,
                  "events: replay since the checkpoint read, %llu "
                  "events",
                  (unsigned long long)d->replay_objs);
    }
    open_events(d);
}

static void
open_events(struct docker *d)
{
    struct loop_http_req hr;
    char url[512];
    int n;
    int64_t next = 0, until = 0;

    if (d->checkpoint > 0) {
        /* Resume just after the last event we saw (the engine's times
         * are checked, but a checkpoint may come from disk). */
        next = d->checkpoint < INT64_MAX ? d->checkpoint + 1 : d->checkpoint;
        /* First the replay, bounded, so that its end says when every
         * event it holds is read: the relist that follows a subscription
         * takes a container it does not list for removed, and a die
         * replayed after that came too late (the engine writes the
         * replay only after the stream's headers). Not when the
         * checkpoint is ahead of the clock: the engine refuses an until
         * before since. */
        if (!d->announced && !d->replay_refused) {
            until = wall_now_ns();
            d->replaying = until > next;
        }
    }
    d->parser = events_parser_new(NULL, on_watch_event, d);
    if (d->parser == NULL) {
        docker_watch_retry(d, "events: out of memory");
        return;
    }
    events_parser_set_labels(d->parser, d->rules.wanted, d->rules.wanted_arg);
    events_parser_set_filter(d->parser, d->rules.kept, d->rules.kept_arg);
    d->parser_rejected = 0;
    if (d->replaying) {
        /* Every type: the count tells whether the engine's buffer was
         * full (it keeps the last events of every type together). */
        n = snprintf(url, sizeof(url),
                     "http://docker/v%s/events?until=%lld.%09lld", d->api,
                     (long long)(until / 1000000000),
                     (long long)(until % 1000000000));
        d->replay_since = next;
    } else {
        /* filters={"type":["container"]} */
        n = snprintf(url, sizeof(url),
                     "http://docker/v%s/events?filters=%%7B%%22type%%22%%3A"
                     "%%5B%%22container%%22%%5D%%7D",
                     d->api);
    }
    if (next > 0)
        snprintf(url + n, sizeof(url) - (size_t)n, "&since=%lld.%09lld",
                 (long long)(next / 1000000000),
                 (long long)(next % 1000000000));
    memset(&hr, 0, sizeof(hr));
    hr.url = url;
    hr.unix_socket = d->socket;
    hr.connect_timeout_ms = d->timeout_ms;
    hr.max_body = ERR_MAX_BODY; /* only error answers are buffered */
    hr.stream = 1;
    hr.yield = 1; /* a burst after a reconnection replays thousands */
    if (!d->announced)
        stream_connecting(d->st); /* else open since the replay's headers */
    d->wcall = loop_http(d->l, &hr, on_events_headers, on_events_data,
                         on_events_done, d);
    if (d->wcall == NULL)
        docker_watch_retry(d, "events: could not start the request");
}

static void
on_version_done(const struct loop_http_resp *res, void *arg)
{
    struct docker *d = arg;
    char err[256] = "";
    struct docker_engine_info info;

    d->wcall = NULL;
    if (res->error != HTTPC_OK) {
        snprintf(err, sizeof(err), "version: %s", res->errmsg);
        d->unreachable = res->error != HTTPC_ERR_TOO_LARGE;
    } else if (res->status != 200) {
        snprintf(err, sizeof(err), "version: HTTP %ld", res->status);
    } else if (docker_parse_engine(res->body, res->body_len, &info, err,
                                   sizeof(err)) == 0) {
        /* Said at the start and again whenever it changed (an engine
         * upgraded or replaced under reapd). */
        if (!d->engine_known || memcmp(&info, &d->engine, sizeof(info)) != 0)
            log_info(NULL,
                     "docker: engine %s (API %s; reapd uses %s), "
                     "containerd %s, on %s",
                     info.version[0] ? info.version : "(unknown version)",
                     info.engine_api, info.api,
                     info.containerd_version[0] ? info.containerd_version
                                                : "(unknown version)",
                     d->socket);
        d->engine = info;
        d->engine_known = true;
        memcpy(d->api, info.api, sizeof(d->api));
        open_events(d);
        return;
    }
    docker_watch_retry(d, err);
}

static void
docker_watch_connect(void *arg)
{
    struct docker *d = arg;
    struct loop_http_req hr;

    d->announced = false;
    d->replaying = false;
    memset(&hr, 0, sizeof(hr));
    hr.url = "http://docker/version";
    hr.unix_socket = d->socket;
    hr.timeout_ms = d->timeout_ms;
    hr.max_body = 1u << 20;
    stream_connecting(d->st);
    d->wcall = loop_http(d->l, &hr, NULL, NULL, on_version_done, d);
    if (d->wcall == NULL)
        docker_watch_retry(d, "version: could not start the request");
}

int
docker_watch_start(struct docker *d, const struct docker_watch_cbs *cbs,
                   void *arg, int64_t since_nano)
{
    if (stream_phase(d->st) != STREAM_IDLE)
        return 0;
    d->cbs = *cbs;
    d->cbs_arg = arg;
    d->checkpoint = since_nano;
    stream_start(d->st);
    return 0;
}

void
docker_watch_stop(struct docker *d)
{
    stream_stop(d->st);
    if (d->wcall != NULL) {
        loop_http_cancel(d->wcall);
        d->wcall = NULL;
    }
    if (d->parser != NULL) {
        /* Never free the parser under its own feed (yajl is on the
         * stack); on_events_data frees it when the feed returns. */
        if (d->feeding)
            d->parser_dead = true;
        else
            events_parser_free(d->parser);
        if (!d->feeding)
            d->parser = NULL;
    }
}

bool
docker_watch_connected(const struct docker *d)
{
    return stream_is_open(d->st);
}

void
docker_watch_on_replayed(struct docker *d, void (*cb)(void *arg))
{
    d->on_replayed = cb;
}

uint64_t
docker_watch_replays_cut(const struct docker *d)
{
    return d->replays_cut;
}

int64_t
docker_watch_checkpoint(const struct docker *d)
{
    return d->checkpoint;
}

uint64_t
docker_watch_reconnects(const struct docker *d)
{
    return stream_reconnects(d->st);
}

uint64_t
docker_watch_events(const struct docker *d)
{
    return d->nevents;
}

uint64_t
docker_watch_rejected(const struct docker *d)
{
    return d->rejected;
}

void
docker_set_labels(struct docker *d, events_label_cb wanted, void *arg)
{
    d->rules.wanted = wanted;
    d->rules.wanted_arg = arg;
    if (d->parser != NULL)
        events_parser_set_labels(d->parser, wanted, arg);
}

void
docker_set_label_filter(struct docker *d, events_label_cb kept, void *arg)
{
    d->rules.kept = kept;
    d->rules.kept_arg = arg;
    if (d->parser != NULL)
        events_parser_set_filter(d->parser, kept, arg);
}

bool
docker_watch_unreachable(const struct docker *d)
{
    return d->unreachable;
}

bool
docker_watch_after_outage(const struct docker *d)
{
    return stream_is_open(d->st) && d->after_outage;
}

const struct docker_engine_info *
docker_engine(const struct docker *d)
{
    return d->engine_known ? &d->engine : NULL;
}

const char *
docker_api_version(const struct docker *d)
{
    return d->api[0] ? d->api : NULL;
}

struct docker *
docker_new(struct loop *l, const char *socket, long request_timeout_ms,
           long reconnect_max_ms)
{
    static const struct stream_cbs scbs = {
        .connect = docker_watch_connect,
        .lost = docker_on_stream_lost,
    };
    struct docker *d = calloc(1, sizeof(*d));

    if (d == NULL)
        return NULL;
    d->l = l;
    d->socket = strdup(socket);
    d->timeout_ms = request_timeout_ms;
    d->st =
        stream_new(l, &scbs, d, WATCH_BASE_MS,
                   (uint64_t)(reconnect_max_ms > 0 ? reconnect_max_ms : 30000),
                   (uint32_t)loop_now_ms() ^ ((uint32_t)getpid() << 16) ^ 1u);
    if (d->socket == NULL || d->st == NULL) {
        docker_free(d);
        return NULL;
    }
    return d;
}

void
docker_free(struct docker *d)
{
    if (d == NULL)
        return;
    if (d->st != NULL)
        docker_watch_stop(d);
    if (d->feeding) {
        /* Called from an event callback: the feed below us still uses
         * `d`; on_events_data finishes the job when it returns. */
        while (d->reqs != NULL)
            docker_cancel(d->reqs);
        d->free_pending = true;
        return;
    }
    while (d->reqs != NULL)
        docker_cancel(d->reqs);
    stream_free(d->st);
    free(d->socket);
    free(d);
}
