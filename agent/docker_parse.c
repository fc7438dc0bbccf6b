/*
 * docker_parse — the Docker Engine API's answers, read; see docker_parse.h.
 *
 * Engine answers are untrusted input: every body is size-capped by the
 * loop, parsed with json's limits, and every field we use is type-checked.
 * A container with a bad id or an unknown state word is dropped from a
 * list (and logged), not believed.
 *
 * Inspect and list answers are read through a filter that keeps only what
 * reapd reads (docs/limits.md): a container's Env, Cmd, Mounts, Health
 * log... are lexed and left out, whatever their size, and labels are kept
 * by the rules of bounds.h. The same code serves a body in one piece
 * (docker_parse_*) and one streamed from the engine (docker_doc_*).
 */
#include "docker_parse.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "bounds.h"
#include "json.h"
#include "log.h"

/* Containers in one list answer: far more than a node can run. */
#define LIST_MAX_ITEMS ((size_t)1 << 20)

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

/* ---- the filter ------------------------------------------------------- */

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
    enum docker_doc_kind kind;
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

/* A list answer handed over whole (docker_doc_list_owned): its tree,
 * read an entry at a time. */
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
        if (tag == T_TOP && doc->kind == DOCKER_DOC_LIST)
            return T_ITEM;
        return tag == T_NAMES && index == 0 ? T_LEAF : JSON_SKIP;
    }
    switch (tag) {
    case T_TOP:
        if (doc->kind == DOCKER_DOC_LIST)
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

void
docker_doc_free(struct docker_doc *doc)
{
    if (doc == NULL)
        return;
    json_stream_free(doc->js);
    json_free(doc->root);
    free(doc);
}

struct docker_doc *
docker_doc_new(enum docker_doc_kind kind,
               const struct docker_label_rules *rules)
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

int
docker_doc_feed(struct docker_doc *doc, const char *buf, size_t len, char *err,
                size_t errlen)
{
    if (json_stream_feed(doc->js, buf, len) == 0)
        return 0;
    snprintf(err, errlen, "%s at byte %zu", json_stream_error(doc->js),
             json_stream_error_offset(doc->js));
    return -1;
}

void
docker_doc_set_mapped(struct docker_doc *doc)
{
    json_stream_set_mapped(doc->js, true);
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

/* ---- /version, and an error answer's message -------------------------- */

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

bool
docker_parse_message(const char *body, size_t len, char *out, size_t outlen)
{
    struct json_limits lim = {.max_bytes = DOCKER_ERR_MAX_BODY,
                              .max_depth = 4};
    struct json_node *root = NULL;
    const char *m;

    if (body != NULL && len > 0)
        root = json_parse(body, len, &lim, 0, NULL, 0, NULL);
    m = cstr(json_get(root, "message"));
    if (m != NULL)
        snprintf(out, outlen, "%s", m);
    json_free(root);
    return m != NULL;
}

/* ---- containers ------------------------------------------------------- */

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

/* ---- whole bodies and streamed ones ----------------------------------- */

/* One body, in pieces of `chunk` bytes (0: whole), through the same
 * filter as a streamed one: 0, or -1 with `err`. */
static int
feed_whole(struct docker_doc *doc, const char *body, size_t len, size_t chunk,
           char *err, size_t errlen)
{
    size_t off = 0, k;

    if (doc == NULL) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    if (chunk == 0 || chunk > len)
        chunk = len;
    do {
        k = len - off < chunk ? len - off : chunk;
        if (docker_doc_feed(doc, body + off, k, err, errlen) != 0)
            return -1;
        off += k;
    } while (off < len);
    return 0;
}

int
docker_doc_inspect(struct docker_doc *doc, struct docker_parsed **ctx,
                   const struct docker_container **out, char *err,
                   size_t errlen)
{
    struct json_node *root = doc_finish(doc, err, errlen);

    if (root == NULL)
        return -1;
    return inspect_from(root, doc, ctx, out, err, errlen);
}

int
docker_doc_list(struct docker_doc *doc, struct docker_parsed **ctx,
                const struct docker_container **out, size_t *n, char *err,
                size_t errlen)
{
    struct json_node *root = doc_finish(doc, err, errlen);

    if (root == NULL)
        return -1;
    return list_from(root, doc, ctx, out, n, err, errlen);
}

int
docker_doc_list_owned(struct docker_doc *doc, struct docker_list **out,
                      size_t *n, char *err, size_t errlen)
{
    struct json_node *root = doc_finish(doc, err, errlen);
    struct docker_list *l;

    *out = NULL;
    if (root == NULL)
        return -1;
    if (list_root_ok(root, err, errlen) != 0) {
        json_free(root);
        return -1;
    }
    l = calloc(1, sizeof(*l));
    if (l == NULL) {
        json_free(root);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    l->root = root;
    l->rules = doc->rules;
    *out = l;
    *n = root->count;
    return 0;
}

int
docker_parse_inspect_with(const char *body, size_t len, size_t chunk,
                          const struct docker_label_rules *rules,
                          struct docker_parsed **ctx,
                          const struct docker_container **out, char *err,
                          size_t errlen)
{
    struct docker_doc *doc = docker_doc_new(DOCKER_DOC_INSPECT, rules);
    int rc = -1;

    *ctx = NULL;
    if (feed_whole(doc, body, len, chunk, err, errlen) == 0)
        rc = docker_doc_inspect(doc, ctx, out, err, errlen);
    docker_doc_free(doc);
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
    struct docker_doc *doc = docker_doc_new(DOCKER_DOC_LIST, rules);
    int rc = -1;

    *ctx = NULL;
    if (feed_whole(doc, body, len, chunk, err, errlen) == 0)
        rc = docker_doc_list(doc, ctx, out, n, err, errlen);
    docker_doc_free(doc);
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

/* ---- a list answer handed over ---------------------------------------- */

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
