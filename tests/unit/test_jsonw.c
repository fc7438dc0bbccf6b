/*
 * test_jsonw — the writing helpers: integers come out as printf's %lld
 * would write them (jw_int does its own digits), at both ends of the
 * range and around every power of ten; strings escaped, NULL as null;
 * a value out of place is left out, not written.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jsonw.h"
#include "testutil.h"

static void
expect_int(long long v)
{
    yajl_gen g = yajl_gen_alloc(NULL);
    char want[32];
    char *out;

    assert_non_null(g);
    jw_int(g, v);
    out = jw_finish(g, NULL);
    assert_non_null(out);
    snprintf(want, sizeof(want), "%lld", v);
    assert_string_equal(out, want);
    free(out);
}

static void
t_int_digits(void **state)
{
    long long p = 1;
    int i;
    uint64_t x = 0x9e3779b97f4a7c15ull;

    (void)state;
    expect_int(0);
    expect_int(LLONG_MAX);
    expect_int(LLONG_MIN);
    expect_int(LLONG_MIN + 1);
    for (i = 0; i < 18; i++) {
        p *= 10;
        expect_int(p);
        expect_int(p - 1);
        expect_int(p + 1);
        expect_int(-p);
        expect_int(-(p - 1));
    }
    for (i = 0; i < 2000; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        expect_int((long long)x);
        expect_int((long long)(x >> (i % 64)));
    }
}

static void
t_object(void **state)
{
    yajl_gen g = yajl_gen_alloc(NULL);
    size_t len = 0;
    char *out;

    (void)state;
    assert_non_null(g);
    yajl_gen_map_open(g);
    jw_key_int(g, "n", -42);
    jw_key_int_or_null(g, "some", true, 7);
    jw_key_int_or_null(g, "none", false, 7);
    jw_key_bool(g, "b", true);
    jw_key_str(g, "s", "a\"b\n");
    jw_key_str(g, "null", NULL);
    jw_str(g, "cut");
    jw_strn(g, "abcdef", 3);
    yajl_gen_map_close(g);
    out = jw_finish(g, &len);
    assert_non_null(out);
    assert_string_equal(out, "{\"n\":-42,\"some\":7,\"none\":null,\"b\":true,"
                             "\"s\":\"a\\\"b\\n\",\"null\":null,"
                             "\"cut\":\"abc\"}");
    assert_int_equal(len, strlen(out));
    free(out);
}

/* An integer where a key must be: yajl refuses it and writes nothing. */
static void
t_misplaced_fails(void **state)
{
    yajl_gen g = yajl_gen_alloc(NULL);
    char *out;

    (void)state;
    assert_non_null(g);
    yajl_gen_map_open(g);
    jw_int(g, 1);
    yajl_gen_map_close(g);
    out = jw_finish(g, NULL);
    assert_non_null(out);
    assert_string_equal(out, "{}");
    free(out);
    assert_null(jw_finish(NULL, NULL));
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(t_int_digits),
        cmocka_unit_test(t_object),
        cmocka_unit_test(t_misplaced_fails),
    };

    tu_test_filters(); /* REAPD_TEST_ONLY, TEST_FILTER */
    return cmocka_run_group_tests(tests, NULL, NULL);
}
