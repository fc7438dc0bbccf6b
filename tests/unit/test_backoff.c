/*
 * test_backoff — the retry spacing every reapd retry uses.
 *
 * backoff_delay_ms is checked against its own definition in backoff.h,
 * computed here independently with overflow-safe arithmetic: the value is
 * always in [d/2, d] for d = min(cap, base * 2^(attempt-1)), so never
 * above the cap and never below base/2. backoff_rand is checked for what
 * jitter needs: never stuck at 0, and values spread over the whole range
 * (low bits too, since callers reduce it with %).
 *
 * The "regressions" group holds a test for a case backoff.c once got
 * wrong (see its comment).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "backoff.h"
#include "testutil.h"

/* d = min(cap, base * 2^(attempt-1)), attempt 0 counted as 1, without
 * ever overflowing: the reference the function is checked against. */
static uint64_t
ideal(unsigned attempt, uint64_t base, uint64_t cap)
{
    unsigned shift = attempt == 0 ? 0 : attempt - 1;

    if (base == 0)
        return 0;
    if (shift >= 64 || base > (cap >> shift))
        return cap;
    return base << shift < cap ? base << shift : cap;
}

/* All that backoff.h promises for one call. */
static void
check_one(unsigned attempt, uint64_t base, uint64_t cap, uint32_t rnd)
{
    uint64_t d = ideal(attempt, base, cap);
    uint64_t v = backoff_delay_ms(attempt, base, cap, rnd);

    if (v > cap || v < d / 2 || v > d || (cap >= base && v < base / 2)) {
        print_error("backoff_delay_ms(%u, %llu, %llu, %u) = %llu, "
                    "want [%llu, %llu]\n",
                    attempt, (unsigned long long)base, (unsigned long long)cap,
                    (unsigned)rnd, (unsigned long long)v,
                    (unsigned long long)(d / 2), (unsigned long long)d);
        fail();
    }
    /* The lower edge of the jitter is exactly d/2. */
    if (rnd == 0)
        assert_int_equal(v, d / 2);
}

static const uint64_t bases[] = {1, 2, 3, 7, 100, 250, 1000, 65536};
static const uint64_t caps[] = {1, 3, 100, 3000, 30000, 1ull << 40};

static void
test_bounds_edges_of_rnd(void **state)
{
    static const uint32_t rnds[] = {0, 1, 2, 12345, 0x7fffffffu, UINT32_MAX};
    size_t b, c, r;
    unsigned a;

    (void)state;
    for (b = 0; b < sizeof(bases) / sizeof(bases[0]); b++)
        for (c = 0; c < sizeof(caps) / sizeof(caps[0]); c++)
            for (a = 1; a <= 64; a++)
                for (r = 0; r < sizeof(rnds) / sizeof(rnds[0]); r++)
                    check_one(a, bases[b], caps[c], rnds[r]);
}

/* The upper edge is reachable: rnd = d - d/2 gives d itself. */
static void
test_upper_edge_reached(void **state)
{
    size_t b, c;
    unsigned a;

    (void)state;
    for (b = 0; b < sizeof(bases) / sizeof(bases[0]); b++)
        for (c = 0; c < sizeof(caps) / sizeof(caps[0]); c++)
            for (a = 1; a <= 64; a++) {
                uint64_t d = ideal(a, bases[b], caps[c]);

                if (d - d / 2 > UINT32_MAX)
                    continue;
                assert_int_equal(backoff_delay_ms(a, bases[b], caps[c],
                                                  (uint32_t)(d - d / 2)),
                                 d);
            }
}

/* The range [d/2, d] never shrinks as attempts grow. */
static void
test_bounds_monotone(void **state)
{
    size_t b, c;
    unsigned a;

    (void)state;
    for (b = 0; b < sizeof(bases) / sizeof(bases[0]); b++)
        for (c = 0; c < sizeof(caps) / sizeof(caps[0]); c++) {
            uint64_t prev_lo = 0, prev_hi = 0;

            for (a = 1; a <= 64; a++) {
                uint64_t lo = backoff_delay_ms(a, bases[b], caps[c], 0);
                uint64_t d = ideal(a, bases[b], caps[c]);
                uint64_t hi = d - d / 2 <= UINT32_MAX
                                  ? backoff_delay_ms(a, bases[b], caps[c],
                                                     (uint32_t)(d - d / 2))
                                  : d;

                assert_true(lo >= prev_lo);
                assert_true(hi >= prev_hi);
                prev_lo = lo;
                prev_hi = hi;
            }
        }
}

/* The exact schedule of the lifecycle's defaults, at the low edge. */
static void
test_schedule(void **state)
{
    static const uint64_t want[] = {50, 100, 200, 400, 800, 1500, 1500, 1500};
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(want) / sizeof(want[0]); i++)
        assert_int_equal(backoff_delay_ms((unsigned)i + 1, 100, 3000, 0),
                         want[i]);
    /* And the high edge: 100 * 2^(n-1), capped at 3000. */
    assert_int_equal(backoff_delay_ms(1, 100, 3000, 50), 100);
    assert_int_equal(backoff_delay_ms(3, 100, 3000, 200), 400);
    assert_int_equal(backoff_delay_ms(9, 100, 3000, 1500), 3000);
    /* Past the range, rnd wraps around inside it. */
    assert_int_equal(backoff_delay_ms(1, 100, 3000, 51), 50);
}

/* Random arguments, many of them. */
static void
test_bounds_random(void **state)
{
    uint32_t s = 0x1234567u;
    int i;

    (void)state;
    for (i = 0; i < 200000; i++) {
        unsigned a = backoff_rand(&s) % 70;
        uint64_t base = 1 + backoff_rand(&s) % 5000;
        uint64_t cap = base + backoff_rand(&s) % 600000;
        uint32_t rnd = backoff_rand(&s);

        if (i % 7 == 0)
            cap = 1 + backoff_rand(&s) % 5000; /* may be below base */
        check_one(a, base, cap, rnd);
    }
}

/* attempt 0 is taken as the first retry. */
static void
test_attempt_zero_is_one(void **state)
{
    static const uint32_t rnds[] = {0, 1, 999, UINT32_MAX};
    size_t b, c, r;

    (void)state;
    for (b = 0; b < sizeof(bases) / sizeof(bases[0]); b++)
        for (c = 0; c < sizeof(caps) / sizeof(caps[0]); c++)
            for (r = 0; r < sizeof(rnds) / sizeof(rnds[0]); r++)
                assert_int_equal(
                    backoff_delay_ms(0, bases[b], caps[c], rnds[r]),
                    backoff_delay_ms(1, bases[b], caps[c], rnds[r]));
}

/* A cap below the base wins: never more than the cap. */
static void
test_cap_below_base(void **state)
{
    unsigned a;

    (void)state;
    for (a = 0; a <= 64; a++) {
        assert_true(backoff_delay_ms(a, 1000, 10, UINT32_MAX) <= 10);
        assert_true(backoff_delay_ms(a, 1000, 10, 0) >= 5);
    }
    assert_int_equal(backoff_delay_ms(1, 1000, 0, UINT32_MAX), 0);
    assert_int_equal(backoff_delay_ms(5, 0, 1000, UINT32_MAX), 0);
}

/*
 * Huge values within int64 (the lifecycle's parameters are int64_t ms):
 * no overflow, no wrap to a tiny delay, many attempts.
 */
static void
test_huge_within_int64(void **state)
{
    static const uint64_t big[] = {
        1,
        3,
        1000,
        (uint64_t)INT64_MAX / 3,
        (uint64_t)INT64_MAX / 2 + 1,
        (uint64_t)INT64_MAX - 1,
        (uint64_t)INT64_MAX,
    };
    static const uint32_t rnds[] = {0, 1, UINT32_MAX};
    size_t b, c, r;
    unsigned a;

    (void)state;
    for (b = 0; b < sizeof(big) / sizeof(big[0]); b++)
        for (c = 0; c < sizeof(big) / sizeof(big[0]); c++)
            for (a = 0; a <= 200; a++)
                for (r = 0; r < sizeof(rnds) / sizeof(rnds[0]); r++)
                    check_one(a, big[b], big[c], rnds[r]);
    /* Far past the doubling range, still capped. */
    check_one(100000, 100, (uint64_t)INT64_MAX, 7);
    check_one(UINT32_MAX, 100, 3000, UINT32_MAX);
    check_one(UINT32_MAX, 1, (uint64_t)INT64_MAX, UINT32_MAX);
}

static void
test_rand_never_zero(void **state)
{
    static const uint32_t seeds[] = {1,          2,          3,    0x80000000,
                                     0xdeadbeef, UINT32_MAX, 12345};
    size_t k;
    int i;

    (void)state;
    for (k = 0; k < sizeof(seeds) / sizeof(seeds[0]); k++) {
        uint32_t s = seeds[k];

        for (i = 0; i < 200000; i++) {
            uint32_t v = backoff_rand(&s);

            assert_int_not_equal(v, 0);
            assert_int_equal(v, s); /* the state is the last value */
            assert_int_not_equal(s, seeds[k]); /* no short cycle */
        }
    }
}

/* A zero state (forgotten seeding) does not get stuck at zero. */
static void
test_rand_zero_state(void **state)
{
    uint32_t s = 0;
    int i;

    (void)state;
    for (i = 0; i < 1000; i++)
        assert_int_not_equal(backoff_rand(&s), 0);
    assert_int_not_equal(s, 0);
}

/* The same seed gives the same sequence: callers can replay tests. */
static void
test_rand_deterministic(void **state)
{
    uint32_t a = 42, b = 42;
    int i;

    (void)state;
    for (i = 0; i < 1000; i++)
        assert_int_equal(backoff_rand(&a), backoff_rand(&b));
}

/* It is Marsaglia's xorshift32 (13, 17, 5), as backoff.h says: the first
 * values from seed 1 are the published ones. */
static void
test_rand_is_xorshift32(void **state)
{
    static const uint32_t want[] = {270369u, 67634689u, 2647435461u,
                                    307599695u};
    uint32_t s = 1;
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(want) / sizeof(want[0]); i++)
        assert_int_equal(backoff_rand(&s), want[i]);
}

/* Spread: high bits, low bits (jitter uses rnd % n), every bit. */
static void
test_rand_spread(void **state)
{
    enum { N = 160000 };
    unsigned hi[16] = {0}, lo[10] = {0}, bits[32] = {0};
    uint32_t s = 1;
    int i, k;

    (void)state;
    for (i = 0; i < N; i++) {
        uint32_t v = backoff_rand(&s);

        hi[v >> 28]++;
        lo[v % 10]++;
        for (k = 0; k < 32; k++)
            bits[k] += (v >> k) & 1;
    }
    for (k = 0; k < 16; k++)
        assert_true(hi[k] > N / 16 * 95 / 100 && hi[k] < N / 16 * 105 / 100);
    for (k = 0; k < 10; k++)
        assert_true(lo[k] > N / 10 * 95 / 100 && lo[k] < N / 10 * 105 / 100);
    for (k = 0; k < 32; k++)
        assert_true(bits[k] > N / 2 * 97 / 100 && bits[k] < N / 2 * 103 / 100);
}

/* The jitter it feeds fills the whole [d/2, d] range, evenly. */
static void
test_rand_fills_jitter_range(void **state)
{
    enum { N = 100000 };
    uint32_t s = 0xc0ffee;
    uint64_t min = UINT64_MAX, max = 0, sum = 0;
    int i;

    (void)state;
    for (i = 0; i < N; i++) {
        uint64_t v = backoff_delay_ms(3, 100, 3000, backoff_rand(&s));

        min = v < min ? v : min;
        max = v > max ? v : max;
        sum += v;
    }
    assert_int_equal(min, 200);
    assert_int_equal(max, 400);
    assert_true(sum / N >= 295 && sum / N <= 305);
}

/*
 * Was a bug (backoff.c): the doubling loop overflows when cap_ms is above
 * 2^63. "Doubling stops at the cap, so this never overflows" holds only
 * while 2*d fits in 64 bits: with base 2^63 and cap UINT64_MAX, attempt 2
 * doubles d to 2^64 = 0 and returns 0 (below base/2); with base 3,
 * attempt 65 also returns 0. Not reachable from the lifecycle's int64
 * parameters unless a negative value is cast, but backoff.h takes any
 * uint64_t.
 */
static void
test_regress_huge_cap_overflows(void **state)
{
    unsigned a;

    (void)state;
    for (a = 1; a <= 70; a++) {
        check_one(a, 3, UINT64_MAX, 0);
        check_one(a, 1ull << 63, UINT64_MAX, 0);
        check_one(a, UINT64_MAX / 3, UINT64_MAX - 1, UINT32_MAX);
    }
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bounds_edges_of_rnd),
        cmocka_unit_test(test_upper_edge_reached),
        cmocka_unit_test(test_bounds_monotone),
        cmocka_unit_test(test_schedule),
        cmocka_unit_test(test_bounds_random),
        cmocka_unit_test(test_attempt_zero_is_one),
        cmocka_unit_test(test_cap_below_base),
        cmocka_unit_test(test_huge_within_int64),
        cmocka_unit_test(test_rand_never_zero),
        cmocka_unit_test(test_rand_zero_state),
        cmocka_unit_test(test_rand_deterministic),
        cmocka_unit_test(test_rand_is_xorshift32),
        cmocka_unit_test(test_rand_spread),
        cmocka_unit_test(test_rand_fills_jitter_range),
    };
    const struct CMUnitTest regressions[] = {
        cmocka_unit_test(test_regress_huge_cap_overflows),
    };
    int failed = 0;

    tu_test_filters(); /* REAPD_TEST_ONLY, TEST_FILTER */
    failed += cmocka_run_group_tests_name("backoff", tests, NULL, NULL);
    failed += cmocka_run_group_tests_name("backoff regressions", regressions,
                                          NULL, NULL);
    return failed ? 1 : 0;
}
