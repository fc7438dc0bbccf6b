/*
 * config_policies — "policies", "default_action" and "labels"; see
 * config_policies.h.
 */
#include "config_policies.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bounds.h"
#include "config_check.h"
#include "config_keys.h"

/* ---- policies ---------------------------------------------------------- */

void
config_parse_action(struct config_ctx *c, const struct json_node *n,
                    const char *path, enum policy_action *out)
{
    if (config_expect_type(c, n, JSON_STRING, "a string", path) &&
        policy_action_parse(n->str, out) != 0)
        config_problem(c, n->offset,
                       "%s: must be \"remove\", \"keep\" or \"ignore\"", path);
}

/*
 * Counts the label name of member `m` among those all policies match on.
 * reapd keeps the labels a policy names whatever else it drops
 * (bounds.h), so their number is what lets a container's record and
 * report stay within their bounds: past LIMIT_POLICY_LABELS names, the
 * first one over is a problem.
 */
static void
count_label_key(struct config_ctx *c, const struct json_node *m,
                const char *path, const char *shown)
{
    size_t i;

    for (i = 0; i < c->nlabel_keys; i++)
        if (strcmp(c->label_keys[i], m->key) == 0)
            return;
    if (c->nlabel_keys < LIMIT_POLICY_LABELS) {
        c->label_keys[c->nlabel_keys++] = m->key;
        return;
    }
    if (c->too_many_label_keys)
        return;
    c->too_many_label_keys = true;
    config_problem(c, m->key_offset,
                   "%s.%s: more than %zu distinct label names in all policies "
                   "together",
                   path, shown, LIMIT_POLICY_LABELS);
}

static void
parse_labels(struct config_ctx *c, const struct json_node *obj,
             const char *path, struct policy *p)
{
    char k[CONFIG_SHOW_MAX + 4];
    size_t i;

    if (!config_expect_type(c, obj, JSON_OBJECT, "an object", path))
        return;
    config_dup_keys(c, obj, path, false);
    /* A duplicate "labels" key (already reported) must not leak. */
    for (i = 0; i < p->nmatch_labels; i++) {
        free(p->match_labels[i].key);
        free(p->match_labels[i].value);
    }
    free(p->match_labels);
    p->nmatch_labels = 0;
    p->match_labels =
        calloc(obj->count ? obj->count : 1, sizeof(*p->match_labels));
    if (!p->match_labels) {
        c->oom = true;
        return;
    }
    for (i = 0; i < obj->count; i++) {
        const struct json_node *m = obj->items[i];
        struct policy_label *l;

        config_show(k, m->key, m->key_len);
        if (m->key_len == 0 || strlen(m->key) != m->key_len) {
            config_problem(c, m->key_offset, "%s: invalid label name \"%s\"",
                           path, k);
            continue;
        }
        if (m->type != JSON_STRING) {
            config_problem(
                c, m->offset,
                "%s.%s: expected a string (a value, or \"*\" for any), "
                "got %s",
                path, k, config_type_name(m));
            continue;
        }
        if (strlen(m->str) != m->len) {
            config_problem(c, m->offset,
                           "%s.%s: must not contain NUL characters", path, k);
            continue;
        }
        /* What reapd keeps of a container's labels is bounded; a policy
         * must name only what can be kept whole, so that it is decided
         * exactly (bounds.h). */
        if (m->key_len > LIMIT_LABEL_KEY) {
            config_problem(c, m->key_offset,
                           "%s.%s: label name longer than %zu bytes", path, k,
                           LIMIT_LABEL_KEY);
            continue;
        }
        if (m->len > LIMIT_POLICY_LABEL_VALUE) {
            config_problem(c, m->offset, "%s.%s: value longer than %zu bytes",
                           path, k, LIMIT_POLICY_LABEL_VALUE);
            continue;
        }
        count_label_key(c, m, path, k);
        l = &p->match_labels[p->nmatch_labels++];
        l->key = strdup(m->key);
        l->value = strdup(m->str);
        if (!l->key || !l->value)
            c->oom = true;
    }
}

static void
parse_glob(struct config_ctx *c, const struct json_node *n, const char *path,
           char **out)
{
    char g[CONFIG_SHOW_MAX + 4];
    const char *why;

    if (!config_expect_type(c, n, JSON_STRING, "a string", path))
        return;
    if (strlen(n->str) != n->len) {
        config_problem(c, n->offset, "%s: must not contain NUL characters",
                       path);
        return;
    }
    why = config_check_glob(n->str);
    if (why) {
        config_problem(c, n->offset, "%s: invalid glob \"%s\": %s", path,
                       config_show(g, n->str, n->len), why);
        return;
    }
    free(*out);
    *out = strdup(n->str);
    if (!*out)
        c->oom = true;
}

static void
parse_match(struct config_ctx *c, const struct json_node *obj,
            const char *ppath, struct policy *p)
{
    char path[64], sub[80];
    size_t i;

    snprintf(path, sizeof(path), "%s.match", ppath);
    if (!config_expect_type(c, obj, JSON_OBJECT, "an object", path))
        return;
    config_dup_keys(c, obj, path, false);
    for (i = 0; i < obj->count; i++) {
        const struct json_node *m = obj->items[i];

        snprintf(sub, sizeof(sub), "%s.%s", path, m->key);
        if (strcmp(m->key, "labels") == 0)
            parse_labels(c, m, sub, p);
        else if (strcmp(m->key, "name") == 0)
            parse_glob(c, m, sub, &p->match_name);
        else if (strcmp(m->key, "image") == 0)
            parse_glob(c, m, sub, &p->match_image);
        else
            config_unknown_key(c, m, path);
    }
}

/* Whether the JSON `match` of a policy (NULL if absent) says anything. */
static bool
match_is_empty(const struct json_node *match)
{
    const struct json_node *labels;

    if (!match || match->type != JSON_OBJECT)
        return match == NULL;
    if (json_get(match, "name") || json_get(match, "image"))
        return false;
    labels = json_get(match, "labels");
    return !labels || (labels->type == JSON_OBJECT && labels->count == 0);
}

static void
parse_policy(struct config_ctx *c, const struct json_node *obj, size_t idx,
             struct policy *p)
{
    const struct json_node *match = NULL;
    char path[40], sub[64];
    bool allow_all = false, has_action = false;
    size_t i;

    snprintf(path, sizeof(path), "policies[%zu]", idx);
    p->force = true;
    p->reap_leaked_tasks = true;
    p->report = true;
    p->action = POLICY_IGNORE;
    if (!config_expect_type(c, obj, JSON_OBJECT, "an object", path))
        return;
    config_dup_keys(c, obj, path, false);
    for (i = 0; i < obj->count; i++) {
        const struct json_node *m = obj->items[i];
        const char *k = m->key;

        snprintf(sub, sizeof(sub), "%s.%s", path, k);
        if (strcmp(k, "name") == 0) {
            config_set_string(
                &p->name, config_get_string(c, m, sub, config_check_nonempty));
        } else if (strcmp(k, "match") == 0) {
            match = m;
            parse_match(c, m, path, p);
        } else if (strcmp(k, "action") == 0) {
            has_action = true;
            config_parse_action(c, m, sub, &p->action);
        } else if (strcmp(k, "delay_ms") == 0) {
            config_get_int(c, m, sub, 0, CONFIG_WEEK_MS, &p->delay_ms);
        } else if (strcmp(k, "force") == 0) {
            config_get_bool(c, m, sub, &p->force);
        } else if (strcmp(k, "remove_volumes") == 0) {
            config_get_bool(c, m, sub, &p->remove_volumes);
        } else if (strcmp(k, "reap_leaked_tasks") == 0) {
            config_get_bool(c, m, sub, &p->reap_leaked_tasks);
        } else if (strcmp(k, "report") == 0) {
            config_get_bool(c, m, sub, &p->report);
        } else if (strcmp(k, "allow_match_all") == 0) {
            config_get_bool(c, m, sub, &allow_all);
        } else {
            config_unknown_key(c, m, path);
        }
    }
    if (!json_get(obj, "name"))
        config_problem(c, obj->offset, "%s: missing required key \"name\"",
                       path);
    if (!has_action)
        config_problem(c, obj->offset, "%s: missing required key \"action\"",
                       path);
    /* The one mistake here that destroys data: refuse it unless asked. */
    if (p->action == POLICY_REMOVE && !allow_all && match_is_empty(match))
        config_problem(
            c, match ? match->offset : obj->offset,
            "%s: a remove policy with an empty match would remove "
            "every container; set \"allow_match_all\": true to mean it",
            path);
}

void
config_parse_policies(struct config_ctx *c, const struct json_node *arr,
                      struct config *cfg)
{
    struct policy_set *set = &cfg->policies;
    enum policy_action saved = set->default_action;
    char name[CONFIG_SHOW_MAX + 4];
    size_t i, j;

    if (!config_expect_type(c, arr, JSON_ARRAY, "an array", "policies"))
        return;
    /* The file's list replaces the default one, default_action stays. */
    policy_set_clear(set);
    set->default_action = saved;
    set->items = calloc(arr->count ? arr->count : 1, sizeof(*set->items));
    if (!set->items) {
        c->oom = true;
        return;
    }
    for (i = 0; i < arr->count; i++) {
        struct policy *p = &set->items[set->count++];

        parse_policy(c, arr->items[i], i, p);
        if (!p->name)
            continue;
        for (j = 0; j < i; j++) {
            if (!set->items[j].name ||
                strcmp(set->items[j].name, p->name) != 0)
                continue;
            config_problem(c, json_get(arr->items[i], "name")->offset,
                           "policies[%zu].name: duplicate policy name \"%s\" "
                           "(also policies[%zu])",
                           i, config_show(name, p->name, strlen(p->name)), j);
            break;
        }
    }
}

/* ---- the labels kept -------------------------------------------------- */

/* One list of globs ("allow" or "deny") into *out / *n, replacing what
 * was there (a duplicate key, already reported, must not leak). */
static void
parse_globs(struct config_ctx *c, const struct json_node *arr,
            const char *path, char ***out, size_t *n)
{
    char g[CONFIG_SHOW_MAX + 4], sub[48];
    const char *why;
    size_t i;

    if (!config_expect_type(c, arr, JSON_ARRAY, "an array of globs", path))
        return;
    for (i = 0; i < *n; i++)
        free((*out)[i]);
    free(*out);
    *out = NULL;
    *n = 0;
    if (arr->count > CONFIG_LABEL_GLOBS) {
        config_problem(c, arr->items[CONFIG_LABEL_GLOBS]->offset,
                       "%s: more than %d globs", path, CONFIG_LABEL_GLOBS);
        return;
    }
    *out = calloc(arr->count ? arr->count : 1, sizeof(**out));
    if (*out == NULL) {
        c->oom = true;
        return;
    }
    for (i = 0; i < arr->count; i++) {
        const struct json_node *m = arr->items[i];

        snprintf(sub, sizeof(sub), "%s[%zu]", path, i);
        if (!config_expect_type(c, m, JSON_STRING, "a string", sub))
            continue;
        if (strlen(m->str) != m->len) {
            config_problem(c, m->offset, "%s: must not contain NUL characters",
                           sub);
            continue;
        }
        if (m->len > CONFIG_LABEL_GLOB_MAX) {
            config_problem(c, m->offset, "%s: glob longer than %d bytes", sub,
                           CONFIG_LABEL_GLOB_MAX);
            continue;
        }
        why = config_check_glob(m->str);
        if (why) {
            config_problem(c, m->offset, "%s: invalid glob \"%s\": %s", sub,
                           config_show(g, m->str, m->len), why);
            continue;
        }
        (*out)[*n] = strdup(m->str);
        if ((*out)[*n] == NULL)
            c->oom = true;
        else
            (*n)++;
    }
}

void
config_parse_label_filter(struct config_ctx *c, const struct json_node *obj,
                          struct config *cfg)
{
    struct label_filter *f = &cfg->labels;
    size_t i;

    if (!config_expect_type(c, obj, JSON_OBJECT, "an object", "labels"))
        return;
    config_dup_keys(c, obj, "labels", false);
    for (i = 0; i < obj->count; i++) {
        const struct json_node *m = obj->items[i];

        if (strcmp(m->key, "allow") == 0)
            parse_globs(c, m, "labels.allow", &f->allow, &f->nallow);
        else if (strcmp(m->key, "deny") == 0)
            parse_globs(c, m, "labels.deny", &f->deny, &f->ndeny);
        else
            config_unknown_key(c, m, "labels");
    }
}
