/*
 * test_reapctl_out — what reapctl writes: a document reapd sent comes out
 * on stdout as one line of compact JSON, written from the parsed tree
 * (escapes redone, numbers as sent); reapd's strings are made fit for a
 * terminal before they reach stderr; answers are read under reapctl's
 * bounds. The expected texts are written out by hand.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "json.h"
#include "reapctl_out.h"
#include "testutil.h"

/* What out_json writes for `text` (parsed with out_parse), read back from
 * stdout sent to a temporary file; `rc` gets out_json's result. */
static char *
written(const char *text, int *rc)
{
    char err[256] = "", *buf;
    struct json_node *root;
    FILE *f = tmpfile();
    int saved;
    long n;

    assert_non_null(f);
    root = out_parse(text, strlen(text), err, sizeof(err));
    if (root == NULL)
        fail_msg("out_parse: %s", err);
    fflush(stdout);
    saved = dup(STDOUT_FILENO);
    assert_true(saved >= 0);
    assert_true(dup2(fileno(f), STDOUT_FILENO) >= 0);
    *rc = out_json(root, true, err, sizeof(err));
    fflush(stdout);
    assert_true(dup2(saved, STDOUT_FILENO) >= 0);
    close(saved);
    json_free(root);
    n = ftell(f);
    assert_true(n >= 0);
    buf = calloc(1, (size_t)n + 1);
    assert_non_null(buf);
    rewind(f);
    assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    return buf;
}

static void
t_json_one_line(void **state)
{
    int rc;
    char *out;

    (void)state;
    out = written("{ \"a\" : [1, true, null, \"x\\ny\"],\n"
                  "  \"b\": {\"c\": -1.5e3, \"d\": \"\\u00e9\"}, \"e\": [] }",
                  &rc);
    assert_int_equal(rc, 0);
    assert_string_equal(out, "{\"a\":[1,true,null,\"x\\ny\"],"
                             "\"b\":{\"c\":-1.5e3,\"d\":\"\xc3\xa9\"},"
                             "\"e\":[]}\n");
    free(out);
    /* A control byte reapd sent escaped stays escaped. */
    out = written("[\"\\u0001\", \"tab\\t\"]", &rc);
    assert_int_equal(rc, 0);
    assert_string_equal(out, "[\"\\u0001\",\"tab\\t\"]\n");
    free(out);
}

static void
t_tame(void **state)
{
    char out[8];

    (void)state;
    out_tame("a\x01"
             "b\x7f"
             "c\n",
             6, out, sizeof(out));
    assert_string_equal(out, "a?b?c?");
    /* Cut to fit, always terminated. */
    out_tame("0123456789", 10, out, sizeof(out));
    assert_string_equal(out, "0123456");
    /* Only `len` bytes are read. */
    out_tame("abcdef", 3, out, sizeof(out));
    assert_string_equal(out, "abc");
    out_tame("", 0, out, sizeof(out));
    assert_string_equal(out, "");
}

/* Nesting: 64 levels are read, 65 refused with a message. */
static void
t_parse_depth(void **state)
{
    char text[2 * 65 + 1], err[256] = "";
    struct json_node *root;
    size_t i;

    (void)state;
    for (i = 0; i < 64; i++) {
        text[i] = '[';
        text[64 + i] = ']';
    }
    root = out_parse(text, 128, err, sizeof(err));
    assert_non_null(root);
    json_free(root);
    for (i = 0; i < 65; i++) {
        text[i] = '[';
        text[65 + i] = ']';
    }
    assert_null(out_parse(text, 130, err, sizeof(err)));
    assert_true(err[0] != '\0');
    /* Without a place for the message. */
    assert_null(out_parse("{", 1, NULL, 0));
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(t_json_one_line),
        cmocka_unit_test(t_tame),
        cmocka_unit_test(t_parse_depth),
    };

    tu_test_filters();
    return cmocka_run_group_tests(tests, NULL, NULL);
}
