/*
 * Unit tests for policy matching: labels, globs, precedence, defaults.
 * Policies are built on the heap the way config_policies.c builds them,
 * so that policy_set_clear is exercised (and checked by ASan/valgrind)
 * too.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "policy.h"
#include "testutil.h"

static char *
xdup(const char *s)
{
    char *d = s ? strdup(s) : NULL;

    if (s)
        assert_non_null(d);
    return d;
}

/* Appends a policy; `kv` is a NULL-terminated key, value, ... list. */
static struct policy *
add(struct policy_set *set, const char *name, enum policy_action action,
    const char *glob_name, const char *glob_image, const char *const *kv)
{
    struct policy *p;
    size_t n = 0, i;

    set->items = realloc(set->items, (set->count + 1) * sizeof(*set->items));
    assert_non_null(set->items);
    p = &set->items[set->count++];
    memset(p, 0, sizeof(*p));
    p->name = xdup(name);
    p->action = action;
    p->match_name = xdup(glob_name);
    p->match_image = xdup(glob_image);
    while (kv && kv[2 * n])
        n++;
    if (n) {
        p->match_labels = calloc(n, sizeof(*p->match_labels));
        assert_non_null(p->match_labels);
        for (i = 0; i < n; i++) {
            p->match_labels[i].key = xdup(kv[2 * i]);
            p->match_labels[i].value = xdup(kv[2 * i + 1]);
        }
        p->nmatch_labels = n;
    }
    return p;
}

static int
teardown(void **state)
{
    policy_set_clear(*state);
    free(*state);
    return 0;
}

static int
setup(void **state)
{
    *state = calloc(1, sizeof(struct policy_set));
    return *state ? 0 : -1;
}

#define L(k, v)                                                               \
    {                                                                         \
        (char *)(k), (char *)(v)                                              \
    }

static void
test_label_exact(void **state)
{
    struct policy_set *set = *state;
    static const char *const kv[] = {"reapd.managed", "true", NULL};
    struct policy_label yes[] = {L("a", "b"), L("reapd.managed", "true")};
    struct policy_label other[] = {L("reapd.managed", "false")};
    struct policy_label prefix[] = {L("reapd.managed", "truex")};

    add(set, "managed", POLICY_REMOVE, NULL, NULL, kv);
    assert_ptr_equal(policy_match(set, "/x", "img", yes, 2), &set->items[0]);
    assert_null(policy_match(set, "/x", "img", other, 1));
    assert_null(policy_match(set, "/x", "img", prefix, 1));
    assert_null(policy_match(set, "/x", "img", NULL, 0));
}

static void
test_label_any(void **state)
{
    struct policy_set *set = *state;
    static const char *const kv[] = {"titus.task_id", "*", NULL};
    struct policy_label some[] = {L("titus.task_id", "abc")};
    struct policy_label empty[] = {L("titus.task_id", "")};
    struct policy_label star[] = {L("titus.task_id", "*")};
    struct policy_label missing[] = {L("titus.task", "abc")};

    add(set, "titus", POLICY_REMOVE, NULL, NULL, kv);
    assert_non_null(policy_match(set, NULL, NULL, some, 1));
    assert_non_null(policy_match(set, NULL, NULL, empty, 1));
    assert_non_null(policy_match(set, NULL, NULL, star, 1));
    assert_null(policy_match(set, NULL, NULL, missing, 1));
    assert_null(policy_match(set, NULL, NULL, NULL, 0));
}

static void
test_label_exact_star_is_literal_in_container(void **state)
{
    struct policy_set *set = *state;
    static const char *const kv[] = {"k", "v", NULL};
    struct policy_label star[] = {L("k", "*")};

    /* Only the policy's "*" is a wildcard, never the container's. */
    add(set, "p", POLICY_REMOVE, NULL, NULL, kv);
    assert_null(policy_match(set, NULL, NULL, star, 1));
}

static void
test_name_glob(void **state)
{
    struct policy_set *set = *state;

    add(set, "web", POLICY_REMOVE, "web-*", NULL, NULL);
    assert_non_null(policy_match(set, "/web-1", NULL, NULL, 0));
    assert_non_null(policy_match(set, "web-1", NULL, NULL, 0));
    assert_null(policy_match(set, "/db-1", NULL, NULL, 0));
    assert_null(policy_match(set, "//web-1", NULL, NULL, 0));
    assert_null(policy_match(set, "xweb-1", NULL, NULL, 0));
    /* A glob on a name that is unknown does not match. */
    assert_null(policy_match(set, NULL, NULL, NULL, 0));
}

static void
test_name_glob_classes(void **state)
{
    struct policy_set *set = *state;

    add(set, "n", POLICY_KEEP, "job-[0-9]?", NULL, NULL);
    assert_non_null(policy_match(set, "/job-1a", NULL, NULL, 0));
    assert_null(policy_match(set, "/job-a1", NULL, NULL, 0));
    assert_null(policy_match(set, "/job-1", NULL, NULL, 0));
}

static void
test_image_glob(void **state)
{
    struct policy_set *set = *state;

    add(set, "img", POLICY_REMOVE, NULL, "registry.example/batch/*", NULL);
    assert_non_null(
        policy_match(set, NULL, "registry.example/batch/job:1", NULL, 0));
    /* '*' crosses '/', as people expect of image references. */
    assert_non_null(
        policy_match(set, NULL, "registry.example/batch/a/b:2", NULL, 0));
    assert_null(policy_match(set, NULL, "registry.example/web:1", NULL, 0));
    assert_null(policy_match(set, NULL, NULL, NULL, 0));
    /* The leading-slash rule is for names only. */
    assert_null(policy_match(set, NULL, "/registry.example/batch/x", NULL, 0));
}

static void
test_all_conditions(void **state)
{
    struct policy_set *set = *state;
    static const char *const kv[] = {"a", "1", "b", "*", NULL};
    struct policy_label both[] = {L("b", "x"), L("a", "1")};
    struct policy_label only_a[] = {L("a", "1")};

    add(set, "all", POLICY_REMOVE, "web-*", "nginx:*", kv);
    assert_non_null(policy_match(set, "/web-1", "nginx:1", both, 2));
    assert_null(policy_match(set, "/web-1", "nginx:1", only_a, 1));
    assert_null(policy_match(set, "/db-1", "nginx:1", both, 2));
    assert_null(policy_match(set, "/web-1", "redis:1", both, 2));
}

static void
test_first_match_wins(void **state)
{
    struct policy_set *set = *state;
    static const char *const debug[] = {"debug", "true", NULL};
    static const char *const task[] = {"task", "*", NULL};
    struct policy_label dbg[] = {L("task", "t1"), L("debug", "true")};
    struct policy_label plain[] = {L("task", "t1")};
    const struct policy *m = NULL;

    add(set, "keep-debug", POLICY_KEEP, NULL, NULL, debug);
    add(set, "tasks", POLICY_REMOVE, NULL, NULL, task);
    add(set, "tasks-again", POLICY_IGNORE, NULL, NULL, task);

    assert_int_equal(policy_decide(set, "/x", "i", dbg, 2, &m), POLICY_KEEP);
    assert_string_equal(m->name, "keep-debug");
    assert_int_equal(policy_decide(set, "/x", "i", plain, 1, &m),
                     POLICY_REMOVE);
    assert_string_equal(m->name, "tasks");
}

static void
test_default_action(void **state)
{
    struct policy_set *set = *state;
    static const char *const kv[] = {"k", "v", NULL};
    const struct policy *m = (const struct policy *)1;

    add(set, "p", POLICY_REMOVE, NULL, NULL, kv);
    assert_int_equal(policy_decide(set, "/x", "i", NULL, 0, &m),
                     POLICY_IGNORE);
    assert_null(m);
    set->default_action = POLICY_KEEP;
    assert_int_equal(policy_decide(set, "/x", "i", NULL, 0, NULL),
                     POLICY_KEEP);
}

static void
test_empty_match_matches_all(void **state)
{
    struct policy_set *set = *state;

    add(set, "everything", POLICY_REMOVE, NULL, NULL, NULL);
    assert_non_null(policy_match(set, NULL, NULL, NULL, 0));
    assert_non_null(policy_match(set, "/a", "b", NULL, 0));
}

static void
test_empty_set(void **state)
{
    struct policy_set empty = {NULL, 0, POLICY_REMOVE};

    (void)state;
    assert_null(policy_match(&empty, "/a", "b", NULL, 0));
    assert_int_equal(policy_decide(&empty, "/a", "b", NULL, 0, NULL),
                     POLICY_REMOVE);
    assert_null(policy_match(NULL, "/a", "b", NULL, 0));
}

static void
test_action_names(void **state)
{
    enum policy_action a = POLICY_IGNORE;

    (void)state;
    assert_int_equal(policy_action_parse("remove", &a), 0);
    assert_int_equal(a, POLICY_REMOVE);
    assert_int_equal(policy_action_parse("keep", &a), 0);
    assert_int_equal(a, POLICY_KEEP);
    assert_int_equal(policy_action_parse("ignore", &a), 0);
    assert_int_equal(a, POLICY_IGNORE);
    assert_int_equal(policy_action_parse("Remove", &a), -1);
    assert_int_equal(policy_action_parse("", &a), -1);
    assert_int_equal(policy_action_parse(NULL, &a), -1);
    assert_string_equal(policy_action_name(POLICY_REMOVE), "remove");
    assert_string_equal(policy_action_name(POLICY_KEEP), "keep");
    assert_string_equal(policy_action_name(POLICY_IGNORE), "ignore");
    assert_string_equal(policy_action_name((enum policy_action)42), "unknown");
}

static void
test_clear_resets(void **state)
{
    struct policy_set *set = *state;
    static const char *const kv[] = {"k", "v", NULL};

    add(set, "p", POLICY_REMOVE, "n*", "i*", kv);
    policy_clear(&set->items[0]);
    assert_null(set->items[0].name);
    assert_int_equal(set->items[0].nmatch_labels, 0);
    /* Clearing twice (here, again in teardown) must be harmless. */
    policy_clear(&set->items[0]);
    policy_clear(NULL);
    policy_set_clear(NULL);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_label_exact, setup, teardown),
        cmocka_unit_test_setup_teardown(test_label_any, setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_label_exact_star_is_literal_in_container, setup, teardown),
        cmocka_unit_test_setup_teardown(test_name_glob, setup, teardown),
        cmocka_unit_test_setup_teardown(test_name_glob_classes, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_image_glob, setup, teardown),
        cmocka_unit_test_setup_teardown(test_all_conditions, setup, teardown),
        cmocka_unit_test_setup_teardown(test_first_match_wins, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_default_action, setup, teardown),
        cmocka_unit_test_setup_teardown(test_empty_match_matches_all, setup,
                                        teardown),
        cmocka_unit_test(test_empty_set),
        cmocka_unit_test(test_action_names),
        cmocka_unit_test_setup_teardown(test_clear_resets, setup, teardown),
    };

    tu_test_filters(); /* REAPD_TEST_ONLY, TEST_FILTER */
    return cmocka_run_group_tests(tests, NULL, NULL);
}
