/*
 * ctable — the reaper's records by id; see ctable.h.
 */
#include "ctable.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "docker.h"
#include "log.h"
#include "loop.h"
#include "policy.h"
#include "reaper_int.h"

int
ctable_init(struct ctable *t)
{
    t->n = 0;
    t->thead = t->ttail = NULL;
    t->buckets = calloc(256, sizeof(*t->buckets));
    t->nbuckets = t->buckets != NULL ? 256 : 0;
    return t->buckets != NULL ? 0 : -1;
}

void
ctable_cleanup(struct ctable *t)
{
    free(t->buckets);
    t->buckets = NULL;
    t->nbuckets = t->n = 0;
    t->thead = t->ttail = NULL;
}

static void
t_unlink(struct ctable *t, struct rec *c)
{
    if (c->tprev != NULL)
        c->tprev->tnext = c->tnext;
    else
        t->thead = c->tnext;
    if (c->tnext != NULL)
        c->tnext->tprev = c->tprev;
    else
        t->ttail = c->tprev;
    c->tprev = c->tnext = NULL;
}

static void
t_append(struct ctable *t, struct rec *c)
{
    c->tnext = NULL;
    c->tprev = t->ttail;
    if (t->ttail != NULL)
        t->ttail->tnext = c;
    else
        t->thead = c;
    t->ttail = c;
}

void
ctable_touch(struct ctable *t, struct rec *c)
{
    if (t->ttail == c)
        return;
    t_unlink(t, c);
    t_append(t, c);
}

static size_t
bucket_of(const struct ctable *t, const char *id)
{
    uint64_t h = 0;
    int i;

    /* Ids are random hex: their first 16 digits are a fine hash. */
    for (i = 0; i < 16; i++) {
        char ch = id[i];

        h = (h << 4) | (uint64_t)(ch <= '9' ? ch - '0' : ch - 'a' + 10);
    }
    return (size_t)(h & (t->nbuckets - 1));
}

struct rec *
ctable_find(const struct ctable *t, const char *id)
{
    struct rec *c;

    for (c = t->buckets[bucket_of(t, id)]; c != NULL; c = c->hnext)
        if (memcmp(c->id, id, CTR_ID_LEN) == 0)
            return c;
    return NULL;
}

static void
grow_to(struct ctable *t, size_t n)
{
    size_t i;
    struct rec **nb = calloc(n, sizeof(*nb)), *c, *next;
    struct rec **old = t->buckets;
    size_t oldn = t->nbuckets;

    if (nb == NULL)
        return; /* longer chains, still correct */
    t->buckets = nb;
    t->nbuckets = n;
    for (i = 0; i < oldn; i++) {
        for (c = old[i]; c != NULL; c = next) {
            size_t b = bucket_of(t, c->id);

            next = c->hnext;
            c->hnext = nb[b];
            nb[b] = c;
        }
    }
    free(old);
}

void
ctable_reserve(struct ctable *t, size_t n)
{
    size_t want = t->nbuckets;

    while (want < n && want <= SIZE_MAX / 4 / sizeof(struct rec *))
        want *= 2;
    if (want > t->nbuckets)
        grow_to(t, want);
}

void
ctable_add(struct ctable *t, struct rec *c)
{
    size_t b;

    if (t->n >= t->nbuckets)
        grow_to(t, t->nbuckets * 2);
    b = bucket_of(t, c->id);
    c->hnext = t->buckets[b];
    t->buckets[b] = c;
    t->n++;
    t_append(t, c);
}

void
ctable_remove(struct ctable *t, struct rec *c)
{
    struct rec **pp = &t->buckets[bucket_of(t, c->id)];

    while (*pp != NULL && *pp != c)
        pp = &(*pp)->hnext;
    if (*pp == c) {
        *pp = c->hnext;
        t->n--;
        t_unlink(t, c);
    }
}

/* The first record at or after bucket it->b, or NULL. */
static struct rec *
from_bucket(const struct ctable *t, struct ctable_iter *it)
{
    struct rec *c;

    for (; it->b < t->nbuckets; it->b++)
        if ((c = t->buckets[it->b]) != NULL) {
            it->next = c->hnext;
            if (it->next == NULL)
                it->b++;
            return c;
        }
    it->next = NULL;
    return NULL;
}

struct rec *
ctable_first(const struct ctable *t, struct ctable_iter *it)
{
    it->b = 0;
    it->next = NULL;
    return from_bucket(t, it);
}

struct rec *
ctable_next(const struct ctable *t, struct ctable_iter *it)
{
    struct rec *c = it->next;

    if (c == NULL)
        return from_bucket(t, it);
    it->next = c->hnext;
    if (it->next == NULL)
        it->b++;
    return c;
}

struct rec **
ctable_collect(const struct ctable *t, ctable_pick_fn pick, const void *arg,
               size_t *n)
{
    struct rec **v = calloc(t->n ? t->n : 1, sizeof(*v)), *c;
    struct ctable_iter it;

    *n = 0;
    if (v == NULL)
        return NULL;
    for (c = ctable_first(t, &it); c != NULL; c = ctable_next(t, &it))
        if (pick(c, arg))
            v[(*n)++] = c;
    return v;
}

struct rec **
ctable_collect_front(const struct ctable *t, ctable_pick_fn stop,
                     ctable_pick_fn pick, const void *arg, size_t *n)
{
    struct rec *c;
    size_t cap = 0;
    struct rec **v = NULL;

    *n = 0;
    for (c = t->thead; c != NULL && !stop(c, arg); c = c->tnext) {
        if (!pick(c, arg))
            continue;
        if (*n == cap) {
            size_t ncap = cap ? cap * 2 : 16;
            struct rec **nv = realloc(v, ncap * sizeof(*nv));

            if (nv == NULL) {
                free(v);
                *n = 0;
                return NULL;
            }
            v = nv;
            cap = ncap;
        }
        v[(*n)++] = c;
    }
    /* None is an empty array, not a failure. */
    if (v == NULL)
        v = malloc(sizeof(*v));
    return v;
}

void
rec_free_meta(struct rec *c)
{
    free(c->meta);
    c->meta = NULL;
    c->labels = NULL;
    c->nlabels = 0;
    c->name = c->image = NULL;
}

static char *
put_str(char **p, const char *s)
{
    char *at = *p;
    size_t n = strlen(s) + 1;

    memcpy(at, s, n);
    *p += n;
    return at;
}

void
rec_set_str(char **dst, const char *src)
{
    char *n = src != NULL ? strdup(src) : NULL;

    if (src != NULL && n == NULL)
        return; /* keep the old value rather than lose it */
    free(*dst);
    *dst = n;
}

int
rec_set_meta(struct rec *c, const char *name, const char *image,
             const struct policy_label *labels, size_t n, bool labels_cut,
             bool meta_cut)
{
    size_t i, size = n * sizeof(struct policy_label);
    struct policy_label *copy;
    char *blob, *p;

    size += name != NULL ? strlen(name) + 1 : 0;
    size += image != NULL ? strlen(image) + 1 : 0;
    for (i = 0; i < n; i++)
        size += strlen(labels[i].key) + strlen(labels[i].value) + 2;
    blob = malloc(size > 0 ? size : 1);
    if (blob == NULL)
        return -1;
    copy = (struct policy_label *)(void *)blob;
    p = blob + n * sizeof(struct policy_label);
    for (i = 0; i < n; i++) {
        copy[i].key = put_str(&p, labels[i].key);
        copy[i].value = put_str(&p, labels[i].value);
    }
    name = name != NULL ? put_str(&p, name) : NULL;
    image = image != NULL ? put_str(&p, image) : NULL;
    rec_free_meta(c);
    c->meta = blob;
    c->labels = n > 0 ? copy : NULL;
    c->nlabels = n;
    c->name = (char *)name;
    c->image = (char *)image;
    c->meta_known = true;
    c->labels_cut = labels_cut;
    c->meta_cut = meta_cut;
    return 0;
}

void
rec_arm(struct rec *c, struct event **ev, event_callback_fn fn, uint64_t ms)
{
    if (*ev == NULL) {
        *ev = evtimer_new(loop_base(c->r->l), fn, c);
        if (*ev == NULL) {
            log_error(c->id, "out of memory arming a timer");
            return;
        }
    }
    loop_timer_ms(*ev, ms);
}

/* ---- a record's metadata from an event ------------------------------ */

/* The engine's own attributes: on a create event only name and image
 * (anything else there is a label), on the others a few more. */
static bool
is_meta_attr(const char *k, enum event_action action)
{
    if (strcmp(k, "name") == 0 || strcmp(k, "image") == 0)
        return true;
    return action != DOCKER_EV_CREATE &&
           (strcmp(k, "exitCode") == 0 || strcmp(k, "signal") == 0 ||
            strcmp(k, "execID") == 0 || strcmp(k, "execDuration") == 0);
}

/* The labels the current policies name: kept whatever the input limits. */
bool
rec_wanted_label(const char *key, size_t len, void *arg)
{
    const struct reaper *r = arg;

    return r->cfg != NULL &&
           policy_set_names_label(&r->cfg->policies, key, len);
}

/* The operator's filter of the current config (config "labels"): read at
 * each label, so a reload applies to what is taken in after it. */
bool
rec_kept_label(const char *key, size_t len, void *arg)
{
    const struct reaper *r = arg;

    return r->cfg == NULL || label_filter_keeps(&r->cfg->labels, key, len);
}

static bool
label_taken(struct reaper *r, const char *key, size_t len)
{
    return rec_wanted_label(key, len, r) || rec_kept_label(key, len, r);
}

/* Until list answers, the event's attributes are the best guess of the
 * labels (the engine merges labels with a few fields of its own). The
 * events parser has bounded them already (bounds.h). */
void
rec_meta_from_event(struct rec *c, const struct docker_event *ev)
{
    struct policy_label *labels;
    size_t i, n = 0;
    bool cut = ev->attrs_dropped > 0;

    labels = calloc(ev->nattrs ? ev->nattrs : 1, sizeof(*labels));
    if (labels == NULL) {
        log_error(c->id, "out of memory copying labels");
        return;
    }
    for (i = 0; i < ev->nattrs; i++) {
        const char *k = ev->attrs[i].key;

        /* The parser lets the engine's exitCode through unfiltered; on a
         * create event, one is a label. */
        if (is_meta_attr(k, ev->action) || !label_taken(c->r, k, strlen(k)))
            continue;
        labels[n].key = (char *)ev->attrs[i].key;
        labels[n].value = (char *)ev->attrs[i].value;
        cut = cut || ev->attrs[i].truncated;
        n++;
    }
    if (rec_set_meta(c, ev->name, ev->image, labels, n, cut,
                     ev->name_truncated || ev->image_truncated) != 0)
        log_error(c->id, "out of memory copying labels");
    free(labels);
}
