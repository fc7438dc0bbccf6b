/*
 * policy — see policy.h. Matching is pure: no allocation, no global state,
 * so the lifecycle code can ask as often as it likes.
 */
#include "policy.h"

#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>

#include "bounds.h"

static const char *const action_names[] = {
    [POLICY_IGNORE] = "ignore",
    [POLICY_KEEP] = "keep",
    [POLICY_REMOVE] = "remove",
};

static bool
labels_hold(const struct policy *p, const struct policy_label *labels,
            size_t nlabels)
{
    size_t i, j;

    for (i = 0; i < p->nmatch_labels; i++) {
        const struct policy_label *want = &p->match_labels[i];
        bool found = false;

        for (j = 0; j < nlabels && !found; j++) {
            if (!labels[j].key || strcmp(labels[j].key, want->key) != 0)
                continue;
            found =
                strcmp(want->value, "*") == 0 ||
                (labels[j].value && strcmp(labels[j].value, want->value) == 0);
        }
        if (!found)
            return false;
    }
    return true;
}

static bool
glob_holds(const char *glob, const char *s, bool strip_slash)
{
    if (!glob)
        return true;
    if (!s)
        return false;
    /* The engine reports names as "/web-1"; people write "web-*". */
    if (strip_slash && s[0] == '/')
        s++;
    return fnmatch(glob, s, 0) == 0;
}

const struct policy *
policy_match(const struct policy_set *set, const char *name, const char *image,
             const struct policy_label *labels, size_t nlabels)
{
    size_t i;

    if (!set)
        return NULL;
    for (i = 0; i < set->count; i++) {
        const struct policy *p = &set->items[i];

        if (labels_hold(p, labels, nlabels) &&
            glob_holds(p->match_name, name, true) &&
            glob_holds(p->match_image, image, false))
            return p;
    }
    return NULL;
}

bool
policy_set_names_label(const struct policy_set *set, const char *key,
                       size_t len)
{
    size_t i, j;

    if (set == NULL)
        return false;
    for (i = 0; i < set->count; i++) {
        const struct policy *p = &set->items[i];

        for (j = 0; j < p->nmatch_labels; j++)
            if (strlen(p->match_labels[j].key) == len &&
                memcmp(p->match_labels[j].key, key, len) == 0)
                return true;
    }
    return false;
}

static bool
any_glob(char *const *globs, size_t n, const char *s)
{
    size_t i;

    for (i = 0; i < n; i++)
        if (fnmatch(globs[i], s, 0) == 0)
            return true;
    return false;
}

bool
label_filter_keeps(const struct label_filter *f, const char *key, size_t len)
{
    char k[LIMIT_LABEL_KEY + 1];

    if (f == NULL || (f->nallow == 0 && f->ndeny == 0) ||
        len > LIMIT_LABEL_KEY || memchr(key, '\0', len) != NULL)
        return true;
    /* Keys from the parsers are not NUL-terminated; fnmatch needs one. */
    memcpy(k, key, len);
    k[len] = '\0';
    if (f->nallow > 0 && !any_glob(f->allow, f->nallow, k))
        return false;
    return !any_glob(f->deny, f->ndeny, k);
}

void
label_filter_clear(struct label_filter *f)
{
    size_t i;

    if (f == NULL)
        return;
    for (i = 0; i < f->nallow; i++)
        free(f->allow[i]);
    for (i = 0; i < f->ndeny; i++)
        free(f->deny[i]);
    free(f->allow);
    free(f->deny);
    memset(f, 0, sizeof(*f));
}

enum policy_action
policy_decide(const struct policy_set *set, const char *name,
              const char *image, const struct policy_label *labels,
              size_t nlabels, const struct policy **matched)
{
    const struct policy *p = policy_match(set, name, image, labels, nlabels);

    if (matched)
        *matched = p;
    if (p)
        return p->action;
    return set ? set->default_action : POLICY_IGNORE;
}

const char *
policy_action_name(enum policy_action a)
{
    if ((unsigned)a >= sizeof(action_names) / sizeof(action_names[0]))
        return "unknown";
    return action_names[a];
}

int
policy_action_parse(const char *s, enum policy_action *out)
{
    size_t i;

    if (!s)
        return -1;
    for (i = 0; i < sizeof(action_names) / sizeof(action_names[0]); i++) {
        if (strcmp(s, action_names[i]) == 0) {
            *out = (enum policy_action)i;
            return 0;
        }
    }
    return -1;
}

void
policy_clear(struct policy *p)
{
    size_t i;

    if (!p)
        return;
    free(p->name);
    for (i = 0; i < p->nmatch_labels; i++) {
        free(p->match_labels[i].key);
        free(p->match_labels[i].value);
    }
    free(p->match_labels);
    free(p->match_name);
    free(p->match_image);
    memset(p, 0, sizeof(*p));
}

void
policy_set_clear(struct policy_set *set)
{
    size_t i;

    if (!set)
        return;
    for (i = 0; i < set->count; i++)
        policy_clear(&set->items[i]);
    free(set->items);
    set->items = NULL;
    set->count = 0;
    set->default_action = POLICY_IGNORE;
}
