/*
 * test_bio — the background thread (agent/bio.c) with a real event_base:
 * a job runs off the loop while the loop goes on, its end runs on the
 * loop, one job at a time, and freeing waits for a job in flight.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <event2/event.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <time.h>

#include "bio.h"
#include "loop.h"
#include "testutil.h"

struct job {
    atomic_int release; /* the job spins until the test sets it */
    atomic_int ran;
    pthread_t on;
    int term_blocked; /* SIGTERM blocked on the job's thread */
    int done, result;
    pthread_t done_on;
    unsigned ticks_while_running;
};

static int
job_fn(void *arg)
{
    struct job *j = arg;

    sigset_t mask;

    j->on = pthread_self();
    pthread_sigmask(SIG_BLOCK, NULL, &mask);
    j->term_blocked = sigismember(&mask, SIGTERM);
    while (!atomic_load(&j->release))
        ;
    atomic_fetch_add(&j->ran, 1);
    return 42;
}

static void
job_done(int result, void *arg)
{
    struct job *j = arg;

    j->done++;
    j->result = result;
    j->done_on = pthread_self();
}

struct ticker {
    struct event *ev;
    struct job *j;
    unsigned n;
};

/* A timer of the loop: runs while the job holds the thread, then lets
 * the job end. */
static void
on_tick(evutil_socket_t fd, short what, void *arg)
{
    struct ticker *t = arg;

    (void)fd;
    (void)what;
    t->n++;
    if (t->n == 20)
        atomic_store(&t->j->release, 1);
    if (!t->j->done)
        loop_timer_ms(t->ev, 1);
}

static void
t_job_off_the_loop(void **state)
{
    struct event_base *base = event_base_new();
    struct bio *b = bio_new(base);
    struct job j = {0};
    struct ticker t = {0};
    struct timespec deadline;

    (void)state;
    assert_non_null(b);
    t.j = &j;
    t.ev = evtimer_new(base, on_tick, &t);
    assert_false(bio_busy(b));
    assert_int_equal(bio_run(b, job_fn, job_done, &j), 0);
    assert_true(bio_busy(b));
    /* One at a time. */
    assert_int_equal(bio_run(b, job_fn, job_done, &j), -1);
    loop_timer_ms(t.ev, 1);
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    while (!j.done) {
        struct timespec now;

        event_base_loop(base, EVLOOP_ONCE);
        clock_gettime(CLOCK_MONOTONIC, &now);
        assert_true(now.tv_sec - deadline.tv_sec < 10);
    }
    /* The loop ticked while the job ran (it could not end before the
     * 20th tick), the job ran on another thread, its end on the loop's. */
    assert_true(t.n >= 20);
    assert_int_equal(atomic_load(&j.ran), 1);
    assert_int_equal(j.done, 1);
    assert_int_equal(j.result, 42);
    assert_false(pthread_equal(j.on, pthread_self()));
    /* Signals are the loop's: the thread blocks them all. */
    assert_int_equal(j.term_blocked, 1);
    assert_true(pthread_equal(j.done_on, pthread_self()));
    assert_false(bio_busy(b));
    /* Free again for the next. */
    j.done = 0;
    assert_int_equal(bio_run(b, job_fn, job_done, &j), 0);
    while (!j.done)
        event_base_loop(base, EVLOOP_ONCE);
    assert_int_equal(atomic_load(&j.ran), 2);
    event_free(t.ev);
    bio_free(b);
    event_base_free(base);
}

/* bio_free with a job in flight waits for it; its end is not called. */
static void
t_free_waits_for_the_job(void **state)
{
    struct event_base *base = event_base_new();
    struct bio *b = bio_new(base);
    struct job j = {0};

    (void)state;
    assert_non_null(b);
    atomic_store(&j.release, 1);
    assert_int_equal(bio_run(b, job_fn, job_done, &j), 0);
    bio_free(b);
    assert_int_equal(atomic_load(&j.ran), 1);
    assert_int_equal(j.done, 0);
    bio_free(NULL);
    event_base_free(base);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(t_job_off_the_loop),
        cmocka_unit_test(t_free_waits_for_the_job),
    };

    tu_test_filters(); /* REAPD_TEST_ONLY, TEST_FILTER */
    return cmocka_run_group_tests(tests, NULL, NULL);
}
