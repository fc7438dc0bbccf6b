/*
 * test_outage — the engine's outage spans and how dies and exits are
 * dated against them.
 *
 * A span runs from the stream lost to the reconnect; a die counts as the
 * restarted engine's from the first refusal on (a restore's die is made
 * while the API still refuses, and may fall before the last refusal),
 * not before it (the engine may still have been up), and not after the
 * reconnect. FinishedAt gets a second of slack each side. The span going
 * on and the last one ended survive a restart through the store; one
 * going on counts as down from its start in the next run.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "outage.h"
#include "store.h"
#include "store_fx.h"

#define MS(t) ((int64_t)(t)*1000000) /* wall ms → an event's time_nano */

/* An outage as reapd lives it: lost at `lost`, refused at each of
 * `refused` (n of them), back at `back`. */
static struct outage_span
live_span(struct outages *o, int64_t lost, const int64_t *refused, size_t n,
          int64_t back)
{
    struct outage_span ended;
    size_t i;

    memset(&ended, 0, sizeof(ended));
    assert_false(outage_lost(o, lost, false));
    for (i = 0; i < n; i++)
        assert_true(outage_lost(o, refused[i], true) == (i == 0));
    assert_true(outage_back(o, back, n > 0, &ended));
    return ended;
}

static void
t_span_dates(void **state)
{
    struct outages o;
    const int64_t refused[] = {10100, 10350, 10850, 11850, 13850, 17850};
    struct outage_span s;

    (void)state;
    memset(&o, 0, sizeof(o));
    s = live_span(&o, 10000, refused, 6, 20000);
    assert_int_equal(s.from, 10000);
    assert_int_equal(s.to, 20000);
    assert_int_equal(s.down, 10100);
    assert_int_equal(o.since_ms, 0);
    assert_int_equal(o.lost_at_ms, 0);
    assert_int_equal(o.n, 1);
}

/* The restarted engine restores a container while its API still refuses
 * (between two refusals): its die proves nothing. Before the first
 * refusal the engine that saw the exit may still have been up; after the
 * reconnect a die is the live engine's. */
static void
t_die_within_from_first_refusal(void **state)
{
    struct outages o;
    const int64_t refused[] = {10100, 10350, 10850, 11850, 13850, 17850};

    (void)state;
    memset(&o, 0, sizeof(o));
    live_span(&o, 10000, refused, 6, 20000);
    assert_false(outage_die_within(&o, MS(9999)));
    assert_false(outage_die_within(&o, MS(10050)));
    assert_false(outage_die_within(&o, MS(10099)));
    assert_true(outage_die_within(&o, MS(10100)));
    assert_true(outage_die_within(&o, MS(12480))); /* restore, mid-span */
    assert_true(outage_die_within(&o, MS(17850)));
    assert_true(outage_die_within(&o, MS(19000))); /* after the last */
    assert_true(outage_die_within(&o, MS(20000)));
    assert_false(outage_die_within(&o, MS(20001)));
    /* Sub-millisecond dates within the ms the span ends. */
    assert_true(outage_die_within(&o, MS(20000) + 999999));
    assert_false(outage_die_within(&o, MS(20001) + 1));
}

/* A cut stream with the engine answering all along is no outage: no span,
 * nothing dated within. */
static void
t_stream_cut_only(void **state)
{
    struct outages o;
    struct outage_span ended;

    (void)state;
    memset(&o, 0, sizeof(o));
    memset(&ended, 0, sizeof(ended));
    assert_false(outage_lost(&o, 5000, false));
    assert_false(outage_lost(&o, 5250, false));
    assert_false(outage_back(&o, 6000, false, &ended));
    assert_int_equal(o.n, 0);
    assert_false(outage_die_within(&o, MS(5500)));
    assert_false(outage_finished_within(&o, "1970-01-01T00:00:05.500Z"));
    /* The next outage starts afresh: its first refusal, not this one's. */
    {
        const int64_t refused[] = {30400};
        struct outage_span s = live_span(&o, 30000, refused, 1, 31000);

        assert_int_equal(s.from, 30000);
        assert_int_equal(s.down, 30400);
        assert_false(outage_die_within(&o, MS(30399)));
        assert_true(outage_die_within(&o, MS(30400)));
    }
}

/* The engine says it was down (after_outage) though reapd never saw a
 * refusal (it came back within one reconnect delay): the span is the
 * reconnect's instant, down at its start. */
static void
t_back_without_refusal(void **state)
{
    struct outages o;
    struct outage_span ended;

    (void)state;
    memset(&o, 0, sizeof(o));
    assert_false(outage_lost(&o, 1000, false));
    assert_true(outage_back(&o, 1200, true, &ended));
    assert_int_equal(ended.from, 1200);
    assert_int_equal(ended.to, 1200);
    assert_int_equal(ended.down, 1200);
    assert_false(outage_die_within(&o, MS(1100)));
    assert_true(outage_die_within(&o, MS(1200)));
}

/* Two outages in a row, the second's refusals apart from the first's;
 * then more than the ring holds: the oldest spans are forgotten. */
static void
t_spans_ring(void **state)
{
    struct outages o;
    const int64_t r1[] = {1100, 1500}, r2[] = {5100, 5600};
    int64_t i;

    (void)state;
    memset(&o, 0, sizeof(o));
    live_span(&o, 1000, r1, 2, 2000);
    live_span(&o, 5000, r2, 2, 6000);
    assert_true(outage_die_within(&o, MS(1300)));
    assert_false(outage_die_within(&o, MS(3000)));
    assert_false(outage_die_within(&o, MS(5050)));
    assert_true(outage_die_within(&o, MS(5300)));
    for (i = 0; i < OUTAGE_SPANS; i++) {
        const int64_t r[] = {100000 + i * 10000 + 100};

        live_span(&o, 100000 + i * 10000, r, 1, 100000 + i * 10000 + 1000);
    }
    assert_false(outage_die_within(&o, MS(1300)));
    assert_false(outage_die_within(&o, MS(5300)));
    assert_true(outage_die_within(&o, MS(100000 + 7 * 10000 + 500)));
}

/* FinishedAt, RFC 3339: a second of slack each side of the whole span
 * (from the stream lost, not the first refusal: an exit then was not
 * seen by anyone reapd heard). Bad or absent dates are never within. */
static void
t_finished_within(void **state)
{
    struct outages o;
    const int64_t refused[] = {1796000010100, 1796000015000};
    char at[64];
    struct {
        int64_t ms;
        bool within;
    } cases[] = {
        {1796000010000 - 1001, false}, {1796000010000 - 1000, true},
        {1796000010050, true},         {1796000020000 + 1000, true},
        {1796000020000 + 1001, false},
    };
    size_t i;

    (void)state;
    memset(&o, 0, sizeof(o));
    assert_false(outage_finished_within(&o, "2026-12-01T00:00:00Z"));
    live_span(&o, 1796000010000, refused, 2, 1796000020000);
    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        time_t secs = (time_t)(cases[i].ms / 1000);
        struct tm tm;

        gmtime_r(&secs, &tm);
        strftime(at, sizeof(at), "%Y-%m-%dT%H:%M:%S", &tm);
        snprintf(at + strlen(at), sizeof(at) - strlen(at), ".%03dZ",
                 (int)(cases[i].ms % 1000));
        assert_true(outage_finished_within(&o, at) == cases[i].within);
    }
    assert_false(outage_finished_within(&o, NULL));
    assert_false(outage_finished_within(&o, ""));
    assert_false(outage_finished_within(&o, "not a date"));
    assert_false(outage_finished_within(&o, "0001-01-01T00:00:00Z"));
}

/* The outage going on is saved at its start, and the one ended at its
 * end: a reapd started after either knows. A loaded span counts as down
 * from its start (when reapd first found it down is not kept). */
static void
t_saved_and_loaded(void **state)
{
    struct sfx *f = *state;
    struct outages o, back;
    struct outage_span ended;

    memset(&o, 0, sizeof(o));
    memset(&back, 0, sizeof(back));
    outage_load(&back, f->st);
    assert_int_equal(back.n, 0);
    assert_int_equal(back.since_ms, 0);

    assert_false(outage_lost(&o, 1000, false));
    assert_true(outage_lost(&o, 1300, true));
    assert_int_equal(outage_save_begin(f->st, &o), STORE_OK);
    sfx_reopen(f);
    outage_load(&back, f->st);
    assert_int_equal(back.since_ms, 1000);
    assert_int_equal(back.n, 0);
    /* A reapd started during the outage counts it as down from its start:
     * its own first refusal is later than the engine's restore. */
    {
        struct outages mid = back;
        struct outage_span s;

        assert_false(outage_lost(&mid, 4000, true));
        assert_false(outage_lost(&mid, 4500, true));
        assert_true(outage_back(&mid, 8000, true, &s));
        assert_int_equal(s.from, 1000);
        assert_int_equal(s.down, 1000);
        assert_true(outage_die_within(&mid, MS(2000)));
    }

    assert_true(outage_back(&o, 9000, true, &ended));
    assert_int_equal(outage_save_end(f->st, &ended), STORE_OK);
    sfx_reopen(f);
    memset(&back, 0, sizeof(back));
    outage_load(&back, f->st);
    assert_int_equal(back.since_ms, 0);
    assert_int_equal(back.n, 1);
    assert_int_equal(back.spans[0].from, 1000);
    assert_int_equal(back.spans[0].to, 9000);
    assert_int_equal(back.spans[0].down, 1000);
    assert_true(outage_die_within(&back, MS(1000)));
    assert_false(outage_die_within(&back, MS(999)));
}

/* A span the store holds upside down (to before from) is not loaded. */
static void
t_load_rejects_bad_span(void **state)
{
    struct sfx *f = *state;
    struct outages o;

    memset(&o, 0, sizeof(o));
    assert_int_equal(
        store_set_checkpoint(f->st, "docker.last_outage_from_ms", 5000),
        STORE_OK);
    assert_int_equal(
        store_set_checkpoint(f->st, "docker.last_outage_to_ms", 4000),
        STORE_OK);
    assert_int_equal(store_set_checkpoint(f->st, "docker.outage_since_ms", -7),
                     STORE_OK);
    sfx_reopen(f);
    outage_load(&o, f->st);
    assert_int_equal(o.n, 0);
    assert_int_equal(o.since_ms, 0);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(t_span_dates),
        cmocka_unit_test(t_die_within_from_first_refusal),
        cmocka_unit_test(t_stream_cut_only),
        cmocka_unit_test(t_back_without_refusal),
        cmocka_unit_test(t_spans_ring),
        cmocka_unit_test(t_finished_within),
        cmocka_unit_test_setup_teardown(t_saved_and_loaded, sfx_setup,
                                        sfx_teardown),
        cmocka_unit_test_setup_teardown(t_load_rejects_bad_span, sfx_setup,
                                        sfx_teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
