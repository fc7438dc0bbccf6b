/*
 * policy — which containers reapd acts on, and how.
 *
 * A policy set is an ordered list; the first policy whose match holds wins,
 * else the default action applies. A match holds when every condition it
 * gives holds: each label (exact value, or "*" for any value, the label
 * must exist), the container name glob and the image glob (fnmatch(3)
 * syntax; a leading "/" of Docker names is ignored).
 */
#ifndef REAPD_POLICY_H
#define REAPD_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum policy_action { POLICY_IGNORE = 0, POLICY_KEEP, POLICY_REMOVE };

struct policy_label {
    char *key;
    char *value;
};

struct policy {
    char *name;
    struct policy_label *match_labels; /* value "*" = any value */
    size_t nmatch_labels;
    char *match_name;  /* glob or NULL */
    char *match_image; /* glob or NULL */
    enum policy_action action;
    int64_t delay_ms;
    bool force;
    bool remove_volumes;
    bool reap_leaked_tasks;
    bool report;
};

struct policy_set {
    struct policy *items;
    size_t count;
    enum policy_action default_action;
};

/*
 * The first matching policy, or NULL when none matches (then the set's
 * default_action applies). `name` and `image` may be NULL (a glob on an
 * absent field does not match). `labels` is not owned.
 */
const struct policy *policy_match(const struct policy_set *set,
                                  const char *name, const char *image,
                                  const struct policy_label *labels,
                                  size_t nlabels);

/* The action for a container: the match's, else the default. */
enum policy_action policy_decide(const struct policy_set *set,
                                 const char *name, const char *image,
                                 const struct policy_label *labels,
                                 size_t nlabels,
                                 const struct policy **matched);

/* Does some policy of `set` match on label `key` (`len` bytes, not
 * NUL-terminated)? Such labels are kept whatever the input limits, so a
 * policy is never decided on a label that was dropped. */
bool policy_set_names_label(const struct policy_set *set, const char *key,
                            size_t len);

/*
 * The operator's choice of the labels reapd keeps (config "labels"): a
 * label is kept when its key matches an allow glob (none given: every
 * key does) and no deny glob (fnmatch(3), no flags, so "*" spans dots).
 * Labels a policy names are kept whatever this says (the callers ask
 * policy_set_names_label first).
 */
struct label_filter {
    char **allow;
    size_t nallow;
    char **deny;
    size_t ndeny;
};

/* Does `f` keep label `key` (`len` bytes, not NUL-terminated)? NULL or
 * an empty filter keeps all. A key longer than LIMIT_LABEL_KEY or holding
 * a NUL is said kept: the input limits drop it, and flag that. */
bool label_filter_keeps(const struct label_filter *f, const char *key,
                        size_t len);
void label_filter_clear(struct label_filter *f);

const char *policy_action_name(enum policy_action a);
/* "remove" | "keep" | "ignore" -> 0; else -1. */
int policy_action_parse(const char *s, enum policy_action *out);

/* Frees the contents of a policy / a set (not the set struct itself). */
void policy_clear(struct policy *p);
void policy_set_clear(struct policy_set *set);

#endif
