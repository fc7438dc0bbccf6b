/*
 * test_ctable — the reaper's table of records (agent/ctable.c): lookups
 * through growth and reservation, the walk, and the order of touch that
 * lets a relist find what it did not list without a walk of them all.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctable.h"
#include "reaper_int.h"
#include "testutil.h"

#define N 3000

static struct rec *
mk(unsigned i)
{
    struct rec *c = calloc(1, sizeof(*c));

    assert_non_null(c);
    /* Random-looking leading digits, as the engine's ids have. */
    snprintf(c->id, sizeof(c->id), "%016llx%048u",
             (unsigned long long)(i * 0x9e3779b97f4a7c15ull), i);
    return c;
}

static bool
is_flagged(const struct rec *c, const void *arg)
{
    (void)arg;
    return c->listed_relist == 1;
}

static bool
pick_all(const struct rec *c, const void *arg)
{
    (void)c;
    (void)arg;
    return true;
}

static void
t_find_through_growth_and_reserve(void **state)
{
    struct ctable t;
    struct rec *v[N];
    struct ctable_iter it;
    struct rec *c;
    unsigned i, walked = 0;

    (void)state;
    assert_int_equal(ctable_init(&t), 0);
    for (i = 0; i < N / 2; i++)
        ctable_add(&t, v[i] = mk(i));
    ctable_reserve(&t, 40000);
    assert_true(t.nbuckets >= 40000);
    for (; i < N; i++)
        ctable_add(&t, v[i] = mk(i));
    assert_int_equal(t.n, N);
    for (i = 0; i < N; i++)
        assert_ptr_equal(ctable_find(&t, v[i]->id), v[i]);
    for (c = ctable_first(&t, &it); c != NULL; c = ctable_next(&t, &it))
        walked++;
    assert_int_equal(walked, N);
    /* A smaller reservation never shrinks the table. */
    i = (unsigned)t.nbuckets;
    ctable_reserve(&t, 10);
    assert_int_equal(t.nbuckets, i);
    for (i = 0; i < N; i++) {
        ctable_remove(&t, v[i]);
        assert_null(ctable_find(&t, v[i]->id));
        free(v[i]);
    }
    assert_int_equal(t.n, 0);
    assert_null(t.thead);
    assert_null(t.ttail);
    ctable_cleanup(&t);
}

/* What was not touched since a point is in front, whatever was added or
 * removed meanwhile; the walk stops at the first touched one. */
static void
t_touch_order(void **state)
{
    struct ctable t;
    struct rec *v[N], **got, *late;
    size_t n, i, j;

    (void)state;
    assert_int_equal(ctable_init(&t), 0);
    for (i = 0; i < N; i++)
        ctable_add(&t, v[i] = mk((unsigned)i));
    /* A relist lists all but every seventh; one record is removed and
     * one added while it runs. */
    late = mk(N + 1);
    for (i = 0; i < N; i++) {
        if (i == N / 2)
            ctable_add(&t, late);
        if (i == 10)
            ctable_remove(&t, v[11]);
        if (i == 11 || i % 7 == 0)
            continue;
        v[i]->listed_relist = 1;
        ctable_touch(&t, v[i]);
    }
    got = ctable_collect_front(&t, is_flagged, pick_all, NULL, &n);
    assert_non_null(got);
    /* The unlisted ones and `late` (added after the first touch: it is
     * behind it, so not even looked at), in order of addition. */
    assert_int_equal(n, (N + 6) / 7);
    for (i = 0, j = 0; i < N; i += 7, j++)
        assert_ptr_equal(got[j], v[i]);
    free(got);
    /* Touching the last one again changes nothing; the order holds all. */
    ctable_touch(&t, t.ttail);
    for (i = 0, late = t.thead; late != NULL; late = late->tnext)
        i++;
    assert_int_equal(i, t.n);
    /* Nothing flagged: the walk goes through all. */
    for (late = t.thead; late != NULL; late = late->tnext)
        late->listed_relist = 0;
    got = ctable_collect_front(&t, is_flagged, pick_all, NULL, &n);
    assert_non_null(got);
    assert_int_equal(n, t.n);
    free(got);
    while (t.thead != NULL) {
        struct rec *c = t.thead;

        ctable_remove(&t, c);
        free(c);
    }
    free(v[11]);
    ctable_cleanup(&t);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(t_find_through_growth_and_reserve),
        cmocka_unit_test(t_touch_order),
    };

    tu_test_filters(); /* REAPD_TEST_ONLY, TEST_FILTER */
    return cmocka_run_group_tests(tests, NULL, NULL);
}
