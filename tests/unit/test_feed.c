/*
 * test_feed — "a report is durable" reaches the subscriptions it concerns,
 * on the next loop turn (agent/feed.c), with a real event_base.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <event2/event.h>
#include <stdio.h>
#include <string.h>

#include "feed.h"
#include "testutil.h"

struct seen {
    unsigned n;
    struct feed_sub *self;
    struct feed_sub *victim; /* freed by this one's callback */
    struct feed *f;          /* subscribes anew from its callback */
    struct seen *fresh;
    struct feed_sub *fresh_sub;
};

static void
on_report(struct feed_sub *sub, void *arg)
{
    struct seen *s = arg;

    assert_ptr_equal(sub, s->self);
    s->n++;
    if (s->victim != NULL) {
        feed_sub_free(s->victim);
        s->victim = NULL;
    }
    if (s->f != NULL && s->fresh != NULL && s->fresh_sub == NULL) {
        s->fresh_sub = feed_sub_new(s->f, NULL, on_report, s->fresh);
        s->fresh->self = s->fresh_sub;
    }
}

static void
turn(struct event_base *base)
{
    event_base_loop(base, EVLOOP_NONBLOCK);
}

/* Waiters hear of their container only; stream subscribers of every
 * one; nobody hears from inside feed_publish. */
static void
t_by_container(void **state)
{
    struct event_base *base = event_base_new();
    struct feed *f = feed_new(base);
    struct seen a = {0}, b = {0}, all = {0};

    (void)state;
    a.self = feed_sub_new(f, "aaa", on_report, &a);
    b.self = feed_sub_new(f, "bbb", on_report, &b);
    all.self = feed_sub_new(f, NULL, on_report, &all);
    assert_int_equal(feed_subs(f), 3);
    feed_publish(f, "aaa");
    feed_publish(f, "aaa");
    assert_int_equal(a.n + b.n + all.n, 0);
    turn(base);
    assert_int_equal(a.n, 1);
    assert_int_equal(b.n, 0);
    assert_int_equal(all.n, 1);
    turn(base); /* nothing new */
    assert_int_equal(a.n + all.n, 2);
    feed_publish(f, "ccc");
    turn(base);
    assert_int_equal(a.n, 1);
    assert_int_equal(b.n, 0);
    assert_int_equal(all.n, 2);
    feed_sub_free(a.self);
    assert_int_equal(feed_subs(f), 2);
    feed_publish(f, "aaa");
    turn(base);
    assert_int_equal(a.n, 1);
    assert_null(feed_sub_new(f,
                             "0123456789012345678901234567890123456789"
                             "0123456789012345678901234567890123456789"
                             "0123456789012345678901234567890123456789"
                             "0123456789",
                             on_report, &a));
    feed_free(f); /* frees b and all, calls nobody */
    event_base_free(base);
}

/* More containers in one turn than are remembered: everyone looks. */
static void
t_overflow(void **state)
{
    struct event_base *base = event_base_new();
    struct feed *f = feed_new(base);
    struct seen w = {0};
    char id[16];
    int i;

    (void)state;
    w.self = feed_sub_new(f, "zzz", on_report, &w);
    for (i = 0; i < FEED_IDS_MAX; i++) {
        snprintf(id, sizeof(id), "c%d", i);
        feed_publish(f, id);
    }
    turn(base);
    assert_int_equal(w.n, 0);
    for (i = 0; i <= FEED_IDS_MAX; i++) {
        snprintf(id, sizeof(id), "c%d", i);
        feed_publish(f, id);
    }
    turn(base);
    assert_int_equal(w.n, 1);
    /* The next turn remembers afresh. */
    feed_publish(f, "c1");
    turn(base);
    assert_int_equal(w.n, 1);
    feed_free(f);
    event_base_free(base);
}

/* A callback frees another subscription (not called after) and itself,
 * and subscribes anew (heard from the next report on). */
static void
t_changes_in_callback(void **state)
{
    struct event_base *base = event_base_new();
    struct feed *f = feed_new(base);
    struct seen first = {0}, second = {0}, fresh = {0};

    (void)state;
    /* Subscriptions are walked newest first: `second` runs first. */
    first.self = feed_sub_new(f, NULL, on_report, &first);
    second.self = feed_sub_new(f, NULL, on_report, &second);
    second.victim = first.self;
    second.f = f;
    second.fresh = &fresh;
    feed_publish(f, "x");
    turn(base);
    assert_int_equal(second.n, 1);
    assert_int_equal(first.n, 0);
    assert_int_equal(fresh.n, 0);
    assert_int_equal(feed_subs(f), 2);
    feed_publish(f, "y");
    turn(base);
    assert_int_equal(second.n, 2);
    assert_int_equal(fresh.n, 1);
    feed_sub_free(second.self);
    feed_sub_free(NULL);
    feed_sub_free(fresh.self);
    assert_int_equal(feed_subs(f), 0);
    /* Nobody listens: nothing is kept for later subscribers. */
    feed_publish(f, "x");
    first.self = feed_sub_new(f, NULL, on_report, &first);
    first.n = 0;
    turn(base);
    assert_int_equal(first.n, 0);
    feed_free(f);
    feed_free(NULL);
    feed_publish(NULL, "x");
    assert_int_equal(feed_subs(NULL), 0);
    event_base_free(base);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(t_by_container),
        cmocka_unit_test(t_overflow),
        cmocka_unit_test(t_changes_in_callback),
    };

    tu_test_filters(); /* REAPD_TEST_ONLY, TEST_FILTER */
    return cmocka_run_group_tests(tests, NULL, NULL);
}
