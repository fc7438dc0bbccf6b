/*
 * Unit tests for json.c: trees, limits, offsets and streaming. Most checks
 * run the same input in every chunk size, because a chunk boundary that
 * changes a result is exactly the kind of bug a streaming parser has.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "json.h"
#include "testutil.h"

/* ---- helpers --------------------------------------------------------- */

/* Everything about a tree, offsets included, as text to compare. */
static void
dump(struct tu_sbuf *b, const struct json_node *n)
{
    size_t i;

    if (n->key != NULL) {
        tu_sb_printf(b, "@%zu:", n->key_offset);
        tu_sb_bytes(b, n->key, n->key_len);
        tu_sb_printf(b, n->key_truncated ? "~=" : "=");
    }
    tu_sb_printf(b, "@%zu", n->offset);
    switch (n->type) {
    case JSON_NULL:
        tu_sb_printf(b, "null");
        break;
    case JSON_BOOL:
        tu_sb_printf(b, n->boolean ? "true" : "false");
        break;
    case JSON_NUMBER:
        tu_sb_printf(b, "#");
        tu_sb_bytes(b, n->str, n->len);
        break;
    case JSON_STRING:
        tu_sb_printf(b, "'");
        tu_sb_bytes(b, n->str, n->len);
        tu_sb_printf(b, "'");
        if (n->truncated)
            tu_sb_printf(b, "~%zu", n->raw_len);
        break;
    case JSON_OBJECT:
    case JSON_ARRAY:
        tu_sb_printf(b, n->type == JSON_OBJECT ? "{" : "[");
        for (i = 0; i < n->count; i++) {
            if (i > 0)
                tu_sb_printf(b, ",");
            dump(b, n->items[i]);
        }
        tu_sb_printf(b, n->type == JSON_OBJECT ? "}" : "]");
        if (n->truncated)
            tu_sb_printf(b, "-%zu", n->dropped);
        break;
    }
}

struct collect {
    struct tu_sbuf out;
    unsigned docs;
    unsigned stop_after;      /* 0: never stop */
    struct json_stream *keep; /* release documents to it (NULL: free) */
};

static int
collect_cb(struct json_node *root, void *arg)
{
    struct collect *c = arg;

    dump(&c->out, root);
    tu_sb_printf(&c->out, "\n");
    if (c->keep != NULL)
        json_stream_release(c->keep, root);
    else
        json_free(root);
    c->docs++;
    return c->stop_after != 0 && c->docs >= c->stop_after;
}

/* The filter run() installs, if any. */
static json_filter_cb run_filter;

/* Result of one streamed run: the dumps, then the outcome. */
static char *
run(const char *text, size_t len, size_t chunk, const struct json_limits *lim,
    int flags)
{
    struct collect c;
    struct json_stream *s;
    size_t off;
    int rc = 0;

    memset(&c, 0, sizeof c);
    s = json_stream_new(lim, flags, collect_cb, &c);
    assert_non_null(s);
    json_stream_set_filter(s, run_filter, NULL);
    /* Odd chunk sizes recycle each document's arena into the next. */
    if (chunk % 2 == 1)
        c.keep = s;
    if (chunk == 0)
        chunk = len ? len : 1;
    for (off = 0; off < len && rc == 0; off += chunk)
        rc = json_stream_feed(s, text + off,
                              len - off < chunk ? len - off : chunk);
    if (rc == 0)
        rc = json_stream_finish(s);
    if (rc == 0)
        tu_sb_printf(&c.out, "ok docs=%u", c.docs);
    else
        tu_sb_printf(&c.out, "error '%s' at %zu docs=%u", json_stream_error(s),
                     json_stream_error_offset(s), c.docs);
    json_stream_free(s);
    return c.out.p;
}

/* Feeds `text` in every chunk size from 1 to its length; each must give
 * what one chunk gives. Returns the one-chunk result (caller frees). */
static char *
run_all_chunks(const char *text, const struct json_limits *lim, int flags)
{
    size_t len = strlen(text), k;
    char *whole = run(text, len, 0, lim, flags);
    char *part;

    for (k = 1; k <= len; k++) {
        part = run(text, len, k, lim, flags);
        if (strcmp(part, whole) != 0)
            fail_msg("chunk size %zu:\n%s\nwhole:\n%s", k, part, whole);
        free(part);
    }
    return whole;
}

static void
expect_ok(const char *text, const struct json_limits *lim, int flags)
{
    char *r = run_all_chunks(text, lim, flags);

    if (strstr(r, "error '") != NULL || strstr(r, "ok docs=") == NULL)
        fail_msg("expected success: %s", r);
    free(r);
}

static void
expect_error(const char *text, const struct json_limits *lim, int flags,
             const char *msg)
{
    char *r = run_all_chunks(text, lim, flags);

    if (strstr(r, "error '") == NULL || strstr(r, msg) == NULL)
        fail_msg("expected error containing '%s': %s", msg, r);
    free(r);
}

static struct json_node *
parse(const char *text, int flags)
{
    char err[200];
    struct json_node *root;

    root = json_parse(text, strlen(text), NULL, flags, err, sizeof err, NULL);
    if (root == NULL)
        fail_msg("parse failed: %s", err);
    return root;
}

static char *
repeat(const char *head, const char *unit, size_t n, const char *tail)
{
    size_t hl = strlen(head), ul = strlen(unit), tl = strlen(tail), i;
    char *p = malloc(hl + ul * n + tl + 1);

    assert_non_null(p);
    memcpy(p, head, hl);
    for (i = 0; i < n; i++)
        memcpy(p + hl + i * ul, unit, ul);
    memcpy(p + hl + n * ul, tail, tl + 1);
    return p;
}

/* ---- trees ----------------------------------------------------------- */

static void
test_parse_basic(void **state)
{
    struct json_node *root = parse("{\"a\": [1, -2.5e3, true, false, null],"
                                   " \"b\": {\"c\": \"d\\n\\u00e9\"}}",
                                   0);
    const struct json_node *a, *c;
    int64_t v;

    assert_int_equal(root->type, JSON_OBJECT);
    assert_int_equal(root->count, 2);
    assert_null(root->key);
    a = json_get(root, "a");
    assert_non_null(a);
    assert_int_equal(a->type, JSON_ARRAY);
    assert_int_equal(a->count, 5);
    assert_int_equal(a->items[0]->type, JSON_NUMBER);
    assert_string_equal(a->items[0]->str, "1");
    assert_int_equal(json_int64(a->items[0], &v), 0);
    assert_int_equal(v, 1);
    assert_string_equal(a->items[1]->str, "-2.5e3");
    assert_int_equal(a->items[1]->len, 6);
    assert_int_equal(json_int64(a->items[1], &v), -1);
    assert_int_equal(a->items[2]->type, JSON_BOOL);
    assert_int_equal(a->items[2]->boolean, 1);
    assert_int_equal(a->items[3]->type, JSON_BOOL);
    assert_int_equal(a->items[3]->boolean, 0);
    assert_int_equal(a->items[4]->type, JSON_NULL);
    assert_null(a->items[0]->key);
    c = json_get(json_get(root, "b"), "c");
    assert_string_equal(json_string(c), "d\n\xc3\xa9");
    assert_int_equal(c->len, 4);
    assert_string_equal(c->key, "c");
    assert_int_equal(c->key_len, 1);
    assert_null(json_get(root, "missing"));
    assert_null(json_get(a, "a"));
    assert_null(json_get(NULL, "a"));
    assert_null(json_string(a));
    assert_null(json_string(NULL));
    json_free(root);
    json_free(NULL);
}

static void
test_duplicates_last_wins(void **state)
{
    struct json_node *root = parse("{\"k\": 1, \"x\": 2, \"k\": \"last\"}", 0);

    assert_int_equal(root->count, 3);
    assert_string_equal(json_string(json_get(root, "k")), "last");
    json_free(root);
}

static void
test_embedded_nul(void **state)
{
    struct json_node *root = parse("{\"a\\u0000b\": \"x\\u0000y\"}", 0);

    /* The length tells the truth; the C string stops early. */
    assert_int_equal(root->items[0]->key_len, 3);
    assert_int_equal(root->items[0]->len, 3);
    assert_memory_equal(root->items[0]->str, "x\0y", 4);
    assert_null(json_get(root, "a"));
    json_free(root);
}

static void
test_top_level_scalars(void **state)
{
    struct json_node *root = parse("  42  ", 0);
    int64_t v;

    assert_int_equal(root->type, JSON_NUMBER);
    assert_int_equal(root->offset, 2);
    assert_int_equal(json_int64(root, &v), 0);
    assert_int_equal(v, 42);
    json_free(root);
    root = parse("\"s\"", 0);
    assert_string_equal(json_string(root), "s");
    json_free(root);
    root = parse("false", 0);
    assert_int_equal(root->type, JSON_BOOL);
    assert_int_equal(root->boolean, 0);
    json_free(root);
}

/* Enough nodes to need many arena chunks and a large items array. */
static void
test_big_document(void **state)
{
    char *text =
        repeat("[", "{\"k\": \"vvvvvvvvvvvvvvvv\", \"n\": 7},", 3000, "{}]");
    struct json_node *root = parse(text, 0);
    size_t i;

    assert_int_equal(root->count, 3001);
    for (i = 0; i < 3000; i++) {
        assert_string_equal(json_string(json_get(root->items[i], "k")),
                            "vvvvvvvvvvvvvvvv");
        assert_string_equal(json_get(root->items[i], "n")->str, "7");
    }
    assert_int_equal(root->items[3000]->count, 0);
    json_free(root);
    free(text);
}

/* ---- streaming --------------------------------------------------------- */

static const char sample[] =
    "// config-ish, with comments\n"
    "{\"name\": \"reapd\", /* inline */ \"esc\": "
    "\"a\\\"b\\\\c\\u00e9\\n\",\r\n"
    "  \"n\": [0, -1, 12.5, 1e9, 123456789012345678901234567890],\n"
    "  \"ok\": true, \"no\": false, \"nil\": null,\n"
    "  \"deep\": {\"x\": [[], {}, [\"\\ud83d\\ude00\"]]}}\n"
    "[1,2]\"top\" 7 /**/ {\"k\"/*c*/:\"v\"}\n"
    "-12";

static void
test_every_chunk_size(void **state)
{
    char *r =
        run_all_chunks(sample, NULL, JSON_ALLOW_COMMENTS | JSON_MULTIPLE);

    assert_non_null(strstr(r, "ok docs=6"));
    /* Exact offsets survive any chunking, escaped strings included. */
    assert_non_null(strstr(r, "@60:esc=@67'a\"b\\x5cc\\xc3\\xa9\\x0a'"));
    assert_non_null(strstr(r, "\n@264#-12\n"));
    free(r);
}

static void
test_multiple_documents(void **state)
{
    char *r = run_all_chunks("1 2\n\"x\" true null [] {}{\"a\":[]}\n3", NULL,
                             JSON_MULTIPLE);

    assert_string_equal(r, "@0#1\n@2#2\n@4'x'\n@8true\n@13null\n@18[]\n"
                           "@21{}\n@23{@24:a=@28[]}\n@32#3\nok docs=9");
    free(r);
    r = run_all_chunks("  \n ", NULL, JSON_MULTIPLE);
    assert_string_equal(r, "ok docs=0");
    free(r);
    /* Without JSON_MULTIPLE a second document is trailing garbage. */
    expect_error("{} {}", NULL, 0, "trailing garbage");
    expect_error("1 2", NULL, 0, "trailing garbage");
    expect_error("", NULL, 0, "empty document");
    expect_error(" \n", NULL, 0, "empty document");
}

/* Recycled arenas: a big document (many chunks) then small ones; each
 * reads back whole, nothing stale, nothing leaked (valgrind, ASan). */
static void
test_release_reuses(void **state)
{
    struct collect c;
    struct json_stream *s;
    struct tu_sbuf big = {0};
    int i;

    (void)state;
    memset(&c, 0, sizeof c);
    s = json_stream_new(NULL, JSON_MULTIPLE, collect_cb, &c);
    assert_non_null(s);
    c.keep = s;
    tu_sb_printf(&big, "[");
    for (i = 0; i < 2000; i++)
        tu_sb_printf(&big, "%s\"s%d\"", i ? "," : "", i);
    tu_sb_printf(&big, "]\n");
    assert_int_equal(json_stream_feed(s, big.p, strlen(big.p)), 0);
    for (i = 0; i < 3; i++)
        assert_int_equal(json_stream_feed(s, "{\"k\":\"v\"} 7\n", 12), 0);
    json_stream_release(s, NULL); /* documented as fine */
    assert_int_equal(json_stream_finish(s), 0);
    assert_int_equal(c.docs, 7);
    assert_non_null(strstr(c.out.p, "s1999"));
    {
        const char *p = strstr(c.out.p, "]\n") + 2;
        int n = 0;

        /* After the big one: three {"k":"v"} and three 7s, intact. */
        while ((p = strstr(p, ":k=@")) != NULL) {
            assert_non_null(strchr(p, '\''));
            assert_int_equal(strncmp(strchr(p, '\''), "'v'}\n@", 6), 0);
            p++;
            n++;
        }
        assert_int_equal(n, 3);
        for (p = c.out.p, n = 0; (p = strstr(p, "#7\n")) != NULL; p++)
            n++;
        assert_int_equal(n, 3);
    }
    json_stream_free(s);
    free(c.out.p);
    free(big.p);
}

static void
test_pending(void **state)
{
    struct collect c;
    struct json_stream *s;

    memset(&c, 0, sizeof c);
    s = json_stream_new(NULL, JSON_MULTIPLE, collect_cb, &c);
    assert_non_null(s);
    assert_int_equal(json_stream_pending(s), 0);
    assert_int_equal(json_stream_feed(s, "{\"a\":1}\n  ", 10), 0);
    assert_int_equal(c.docs, 1);
    assert_int_equal(json_stream_pending(s), 0);
    assert_int_equal(json_stream_feed(s, "{\"b\":", 5), 0);
    assert_int_equal(json_stream_pending(s), 5);
    assert_int_equal(json_stream_feed(s, " \"cut", 5), 0);
    assert_int_equal(json_stream_pending(s), 10);
    assert_null(json_stream_error(s));
    assert_int_equal(json_stream_finish(s), -1);
    assert_string_equal(json_stream_error(s), "truncated document");
    assert_int_equal(json_stream_error_offset(s), 20);
    json_stream_free(s);
    free(c.out.p);
}

static void
test_stop(void **state)
{
    struct collect c;
    struct json_stream *s;

    memset(&c, 0, sizeof c);
    c.stop_after = 2;
    s = json_stream_new(NULL, JSON_MULTIPLE, collect_cb, &c);
    assert_non_null(s);
    assert_int_equal(json_stream_feed(s, "[1] [2] [3]", 11), -1);
    assert_string_equal(json_stream_error(s), "stopped");
    assert_int_equal(json_stream_error_offset(s), 7);
    assert_int_equal(c.docs, 2);
    /* Sticky. */
    assert_int_equal(json_stream_feed(s, "[4]", 3), -1);
    assert_int_equal(json_stream_finish(s), -1);
    assert_int_equal(c.docs, 2);
    json_stream_free(s);
    free(c.out.p);
}

static void
test_comments(void **state)
{
    const char *text = "/* lead */ {\"a\": 1 // tail\n, \"b\": /**/ 2}"
                       " // last, no newline";
    struct json_node *root;
    char err[200];

    root = parse(text, JSON_ALLOW_COMMENTS);
    assert_string_equal(json_get(root, "b")->str, "2");
    assert_int_equal(root->offset, 11);
    json_free(root);
    expect_ok(text, NULL, JSON_ALLOW_COMMENTS);
    expect_error(text, NULL, 0, "comment");
    assert_null(
        json_parse("{\"a\": /* no */ 1}", 17, NULL, 0, err, sizeof err, NULL));
    assert_non_null(strstr(err, "comments are not enabled"));
    expect_error("{\"a\": 1} /* open", NULL, JSON_ALLOW_COMMENTS,
                 "unterminated comment");
    expect_error("[1] /* open *", NULL, JSON_ALLOW_COMMENTS | JSON_MULTIPLE,
                 "unterminated comment");
    expect_error("{\"a\": 1 /* open", NULL, JSON_ALLOW_COMMENTS,
                 "truncated document");
    expect_error("{\"a\": / 1}", NULL, JSON_ALLOW_COMMENTS, "lexical error");
}

/* ---- limits ------------------------------------------------------------ */

static void
test_limit_bytes(void **state)
{
    struct json_limits lim = {.max_bytes = 16};
    /* Exactly 16 bytes; blanks around a document do not count. */
    const char *fits = "  {\"a\": \"0123456\"}  \n[\"0123456789ab\"] ";
    const char *over = "{\"a\": \"01234567\"}";
    char *r;

    expect_ok(fits, &lim, JSON_MULTIPLE);
    r = run_all_chunks(over, &lim, JSON_MULTIPLE);
    assert_string_equal(r, "error 'document exceeds 16 bytes' at 16 docs=0");
    free(r);
    /* The second document is counted from its own start. */
    r = run_all_chunks("{\"a\": \"0123456\"} [\"0123456789abcd\"]", &lim,
                       JSON_MULTIPLE);
    assert_non_null(
        strstr(r, "\nerror 'document exceeds 16 bytes' at 33 docs=1"));
    free(r);
    /* A long token still being lexed is caught before it ends. */
    lim.max_bytes = 1000;
    {
        char *big = repeat("\"", "x", 5000, "");
        struct json_stream *s = json_stream_new(&lim, 0, NULL, NULL);
        size_t off;
        int rc = 0;

        for (off = 0; off < 5001 && rc == 0; off += 100)
            rc = json_stream_feed(s, big + off, 100);
        assert_int_equal(rc, -1);
        assert_true(off <= 1100);
        assert_string_equal(json_stream_error(s),
                            "document exceeds 1000 bytes");
        assert_int_equal(json_stream_error_offset(s), 1000);
        json_stream_free(s);
        free(big);
    }
    /* Default: 1 MiB (items raised so that they are not hit first). */
    {
        struct json_limits many = {.max_items = 1 << 20};
        char *big = repeat("[", "1,", 524288, "1]");
        char err[100];
        size_t off = 0;

        assert_null(
            json_parse(big, strlen(big), &many, 0, err, sizeof err, &off));
        assert_string_equal(err, "document exceeds 1048576 bytes");
        assert_int_equal(off, 1048576);
        free(big);
        big = repeat("[", "1,", 524286, "12]");
        assert_int_equal(strlen(big), 1048576);
        {
            struct json_node *root =
                json_parse(big, strlen(big), &many, 0, NULL, 0, NULL);

            assert_non_null(root);
            assert_int_equal(root->count, 524287);
            json_free(root);
        }
        free(big);
    }
}

static void
test_limit_depth(void **state)
{
    struct json_limits lim = {.max_depth = 4};

    expect_ok("[{\"a\": [[1]]}]", &lim, 0);
    expect_ok("[[[[]]]] {\"a\":{\"b\":{\"c\":{}}}}", &lim, JSON_MULTIPLE);
    expect_error("[{\"a\": [[[1]]]}]", &lim, 0, "nesting deeper than 4");
    expect_error("{\"a\":{\"b\":{\"c\":{\"d\":{}}}}}", &lim, 0,
                 "nesting deeper than 4");
}

static void
test_deep_nesting(void **state)
{
    char *text = repeat("", "[", 100000, "");
    char err[100];
    size_t off = 0;
    clock_t t0 = clock();

    assert_null(json_parse(text, 100000, NULL, 0, err, sizeof err, &off));
    assert_string_equal(err, "nesting deeper than 32");
    assert_int_equal(off, 32);
    /* A raised limit still holds, and nothing recurses either way. */
    {
        struct json_limits lim = {.max_depth = 50000};
        char *ok = repeat("", "[", 50000, "");
        char *closing = repeat("", "]", 50000, "");
        struct json_stream *s = json_stream_new(&lim, 0, NULL, NULL);

        assert_int_equal(json_stream_feed(s, ok, 50000), 0);
        assert_int_equal(json_stream_feed(s, closing, 50000), 0);
        assert_int_equal(json_stream_finish(s), 0);
        json_stream_free(s);
        s = json_stream_new(&lim, 0, NULL, NULL);
        assert_int_equal(json_stream_feed(s, text, 100000), -1);
        assert_string_equal(json_stream_error(s), "nesting deeper than 50000");
        json_stream_free(s);
        free(ok);
        free(closing);
    }
    assert_true((double)(clock() - t0) / CLOCKS_PER_SEC < 5.0);
    free(text);
}

static void
test_limit_items(void **state)
{
    struct json_limits lim = {.max_items = 3};

    expect_ok("{\"a\":1,\"b\":2,\"c\":3} [1,2,3] [[1,2,3],[4,5,6]]", &lim,
              JSON_MULTIPLE);
    expect_error("{\"a\":1,\"b\":2,\"c\":3,\"d\":4}", &lim, 0,
                 "object has more than 3 members' at 19");
    expect_error("[1,2,3,4]", &lim, 0, "array has more than 3 elements' at 7");
    expect_error("[[], [], [], []]", &lim, 0, "array has more than 3");
}

static void
test_limit_string(void **state)
{
    struct json_limits lim = {.max_string = 4};

    expect_ok("[\"abcd\", \"\\u00e9\\u00e9\", \"\\n\\n\\n\\n\"] {\"wxyz\":1}",
              &lim, JSON_MULTIPLE);
    expect_error("[\"abcde\"]", &lim, 0, "string longer than 4 bytes' at 1");
    /* Decoded bytes count: e-acute is two. */
    expect_error("[\"\\u00e9\\u00e9a\"]", &lim, 0, "string longer than 4");
    expect_error("{\"vwxyz\": 1}", &lim, 0, "key longer than 4 bytes' at 1");
    /* Defaults: 64 KiB. */
    {
        char *fits = repeat("\"", "x", 65536, "\"");
        char *over = repeat("\"", "x", 65537, "\"");
        char err[100];

        json_free(parse(fits, 0));
        assert_null(
            json_parse(over, strlen(over), NULL, 0, err, sizeof err, NULL));
        assert_string_equal(err, "string longer than 65536 bytes");
        free(fits);
        free(over);
    }
}

/* ---- errors ------------------------------------------------------------ */

static void
test_truncated(void **state)
{
    static const char *const cut[] = {
        "{",       "{\"a\"", "{\"a\":",   "{\"a\": [1, 2",
        "[1, tru", "[\"abc", "[\"a\\u00", "-",
        "1.",      "[1e",    "{\"a\":1,",
    };
    size_t i;

    for (i = 0; i < sizeof cut / sizeof cut[0]; i++)
        expect_error(cut[i], NULL, 0, "'truncated document'");
    for (i = 0; i < sizeof cut / sizeof cut[0]; i++)
        expect_error(cut[i], NULL, JSON_MULTIPLE, "'truncated document'");
    expect_error("[1] [2", NULL, JSON_MULTIPLE, "truncated document' at 6");
}

static void
test_garbage(void **state)
{
    static const char *const bad[] = {
        "{]",     "nope", "{} x",      "[1 2]",    "{\"a\" 1}",
        "{1: 2}", "[01]", "\"\x01\"",  "\"\xff\"", "[1,]",
        "}",      ",",    "[\"\\q\"]",
    };
    struct json_stream *s;
    size_t i;

    for (i = 0; i < sizeof bad / sizeof bad[0]; i++)
        expect_error(bad[i], NULL, 0, "error");
    expect_error("{} x", NULL, 0, "trailing garbage");
    /* Errors are one line and sticky. */
    s = json_stream_new(NULL, JSON_MULTIPLE, NULL, NULL);
    assert_int_equal(json_stream_feed(s, "[1] [2 3]", 9), -1);
    assert_null(strchr(json_stream_error(s), '\n'));
    assert_non_null(strstr(json_stream_error(s), "parse error"));
    assert_int_equal(json_stream_feed(s, "[4]", 3), -1);
    assert_int_equal(json_stream_finish(s), -1);
    assert_non_null(strstr(json_stream_error(s), "parse error"));
    json_stream_free(s);
    /* Nothing after the end. */
    s = json_stream_new(NULL, JSON_MULTIPLE, NULL, NULL);
    assert_int_equal(json_stream_finish(s), 0);
    assert_int_equal(json_stream_finish(s), 0);
    assert_int_equal(json_stream_feed(s, "1", 1), -1);
    json_stream_free(s);
}

/* A broken document half built must be freed (valgrind checks). */
static void
test_partial_document_freed(void **state)
{
    struct json_stream *s = json_stream_new(NULL, 0, NULL, NULL);

    assert_int_equal(json_stream_feed(s, "{\"a\": [\"x\", {\"b\": 1", 19), 0);
    assert_int_equal(json_stream_feed(s, "]", 1), -1);
    json_stream_free(s);
    s = json_stream_new(NULL, 0, NULL, NULL);
    assert_int_equal(json_stream_feed(s, "{\"a\": [\"x\", {\"b\": 1", 19), 0);
    json_stream_free(s);
}

/* ---- offsets ----------------------------------------------------------- */

static const char config[] = "{\n"
                             "  \"log\": {\"level\": \"debug\",\n"
                             "\t\"format\": \"te\\u0078t\"},\n"
                             "  \"grace\": 30,\n"
                             "  \"labels\": [\"a\", \"\\\"q\\\"\", true],\n"
                             "  \"x\":null\n"
                             "}\n";

static void
expect_at(const struct json_node *n, size_t offset, unsigned line,
          unsigned col)
{
    unsigned l, c;

    assert_non_null(n);
    assert_int_equal(n->offset, offset);
    json_linecol(config, sizeof config - 1, n->offset, &l, &c);
    assert_int_equal(l, line);
    assert_int_equal(c, col);
}

static void
expect_key_at(const struct json_node *n, unsigned line, unsigned col)
{
    unsigned l, c;

    json_linecol(config, sizeof config - 1, n->key_offset, &l, &c);
    assert_int_equal(l, line);
    assert_int_equal(c, col);
    assert_int_equal(config[n->key_offset], '"');
}

static void
test_offsets(void **state)
{
    struct json_node *root = parse(config, 0);
    const struct json_node *log = json_get(root, "log");
    const struct json_node *labels = json_get(root, "labels");
    char *r;

    expect_at(root, 0, 1, 1);
    expect_at(log, 11, 2, 10);
    expect_key_at(log, 2, 3);
    expect_at(json_get(log, "level"), 21, 2, 20);
    expect_key_at(json_get(log, "level"), 2, 11);
    expect_at(json_get(log, "format"), 41, 3, 12);
    expect_key_at(json_get(log, "format"), 3, 2);
    assert_string_equal(json_string(json_get(log, "format")), "text");
    expect_at(json_get(root, "grace"), 66, 4, 12);
    expect_at(labels, 82, 5, 13);
    expect_at(labels->items[0], 83, 5, 14);
    expect_at(labels->items[1], 88, 5, 19);
    expect_at(labels->items[2], 97, 5, 28);
    expect_at(json_get(root, "x"), 110, 6, 7);
    expect_key_at(json_get(root, "x"), 6, 3);
    json_free(root);
    /* The same in every chunking. */
    r = run_all_chunks(config, NULL, 0);
    free(r);
}

static void
test_error_offset(void **state)
{
    const char *text = "[1,\n 2,\n  x]";
    char err[100];
    size_t off = 0;
    unsigned l, c;

    assert_null(
        json_parse(text, strlen(text), NULL, 0, err, sizeof err, &off));
    assert_non_null(strstr(err, "lexical error"));
    json_linecol(text, strlen(text), off, &l, &c);
    assert_int_equal(l, 3);
    assert_true(c >= 3 && c <= 4);
}

static void
test_linecol(void **state)
{
    const char *t = "ab\ncd\n\nx";
    unsigned l, c;

    json_linecol(t, 8, 0, &l, &c);
    assert_int_equal(l, 1);
    assert_int_equal(c, 1);
    json_linecol(t, 8, 2, &l, &c);
    assert_int_equal(l, 1);
    assert_int_equal(c, 3);
    json_linecol(t, 8, 3, &l, &c);
    assert_int_equal(l, 2);
    assert_int_equal(c, 1);
    json_linecol(t, 8, 6, &l, &c);
    assert_int_equal(l, 3);
    assert_int_equal(c, 1);
    json_linecol(t, 8, 7, &l, &c);
    assert_int_equal(l, 4);
    assert_int_equal(c, 1);
    json_linecol(t, 8, 100, &l, &c); /* clamped to the end */
    assert_int_equal(l, 4);
    assert_int_equal(c, 2);
}

/* ---- numbers ----------------------------------------------------------- */

static int
int64_of(const char *text, int64_t *v)
{
    char err[100];
    struct json_node *n =
        json_parse(text, strlen(text), NULL, 0, err, sizeof err, NULL);
    int rc;

    assert_non_null(n);
    rc = json_int64(n, v);
    json_free(n);
    return rc;
}

static void
test_int64(void **state)
{
    int64_t v = 99;

    assert_int_equal(int64_of("9223372036854775807", &v), 0);
    assert_true(v == INT64_MAX);
    assert_int_equal(int64_of("-9223372036854775808", &v), 0);
    assert_true(v == INT64_MIN);
    v = 99;
    assert_int_equal(int64_of("9223372036854775808", &v), -1);
    assert_int_equal(int64_of("-9223372036854775809", &v), -1);
    assert_int_equal(int64_of("99999999999999999999", &v), -1);
    assert_int_equal(int64_of("1.0", &v), -1);
    assert_int_equal(int64_of("1e3", &v), -1);
    assert_int_equal(int64_of("1E3", &v), -1);
    assert_int_equal(v, 99); /* untouched on failure */
    assert_int_equal(int64_of("-0", &v), 0);
    assert_int_equal(v, 0);
    assert_int_equal(int64_of("0", &v), 0);
    assert_int_equal(v, 0);
    assert_int_equal(int64_of("-1", &v), 0);
    assert_int_equal(v, -1);
    assert_int_equal(int64_of("\"5\"", &v), -1);
    assert_int_equal(int64_of("true", &v), -1);
    assert_int_equal(json_int64(NULL, &v), -1);
    {
        /* Hand-made nodes: the parser is not the only source. */
        struct json_node n;

        memset(&n, 0, sizeof n);
        n.type = JSON_NUMBER;
        n.str = "";
        assert_int_equal(json_int64(&n, &v), -1);
        n.str = "-";
        n.len = 1;
        assert_int_equal(json_int64(&n, &v), -1);
        n.str = "+1";
        n.len = 2;
        assert_int_equal(json_int64(&n, &v), -1);
        n.str = "12x";
        n.len = 2; /* the length rules, not the NUL */
        assert_int_equal(json_int64(&n, &v), 0);
        assert_int_equal(v, 12);
    }
}

/* ---- degrading instead of failing (JSON_TRUNCATE) --------------------- */

static void
expect_result(const char *text, const struct json_limits *lim, int flags,
              const char *want)
{
    char *r = run_all_chunks(text, lim, flags);

    if (strcmp(r, want) != 0)
        fail_msg("got:\n%s\nwant:\n%s", r, want);
    free(r);
}

static void
test_cut_strings(void **state)
{
    struct json_limits lim = {.max_string = 8};
    const int f = JSON_TRUNCATE;

    (void)state;
    expect_result("{\"a\":\"0123456789abc\",\"b\":\"short\"}", &lim, f,
                  "@0{@1:a=@5'01234567'~13,@21:b=@25'short'}\nok docs=1");
    /* Exactly at the limit: kept whole, not flagged. */
    expect_result("[\"01234567\"]", &lim, f, "@0[@1'01234567']\nok docs=1");
    /* The cut never splits an escape... */
    expect_result("[\"abcdef\\u00e9xyz\"]", &lim, f,
                  "@0[@1'abcdef'~15]\nok docs=1");
    expect_result("[\"abcdefg\\n\\n\"]", &lim, f,
                  "@0[@1'abcdefg'~11]\nok docs=1");
    /* ... nor a UTF-8 sequence. */
    expect_result("[\"abcdefg\xc3\xa9z\"]", &lim, f,
                  "@0[@1'abcdefg'~10]\nok docs=1");
    expect_result("[\"abcdef\xc3\xa9z\"]", &lim, f,
                  "@0[@1'abcdef\\xc3\\xa9'~9]\nok docs=1");
    /* Escaped quotes and backslashes in the stepped-over part. */
    expect_result("[\"0123456789\\\"x\\\\\", \"y\"]", &lim, f,
                  "@0[@1'01234567'~15,@20'y']\nok docs=1");
    expect_result("[\"01234567\\\"\\\"\\\"\", 1]", &lim, f,
                  "@0[@1'01234567'~14,@19#1]\nok docs=1");
    /* Keys too. */
    expect_result("{\"0123456789\":1}", &lim, f,
                  "@0{@1:01234567~=@14#1}\nok docs=1");
    /* Several documents, one cut across each boundary. */
    expect_result("[\"0123456789\"] [\"ab\"]\n[\"abcdefghij\"]", &lim,
                  f | JSON_MULTIPLE,
                  "@0[@1'01234567'~10]\n@15[@16'ab']\n"
                  "@22[@23'abcdefgh'~10]\nok docs=3");
    /* Without the flag the limit still fails the document. */
    expect_error("[\"0123456789\"]", &lim, 0, "string longer than 8 bytes");
}

static void
test_cut_errors(void **state)
{
    struct json_limits lim = {.max_string = 8};
    char *big;

    (void)state;
    expect_error("[\"0123456789", &lim, JSON_TRUNCATE, "truncated document");
    expect_error("[\"0123", &lim, JSON_TRUNCATE, "truncated document");
    /* A bad escape in the kept part is still an error. */
    expect_error("[\"ab\\qcd\"]", &lim, JSON_TRUNCATE, "lexical error");
    /* Numbers and literals cannot be cut: a long one fails. */
    big = repeat("[", "1", 1025, "]");
    expect_error(big, &lim, JSON_TRUNCATE, "token longer than 1024 bytes");
    free(big);
    big = repeat("[", "1", 1024, "]");
    expect_ok(big, &lim, JSON_TRUNCATE);
    free(big);
    /* What came before a bad token is read whatever the chunking (fuzz
     * finding bare-token-drops-earlier-event). */
    big = repeat("[1] ", "x", 1100, "");
    {
        char *r = run_all_chunks(big, &lim, JSON_TRUNCATE | JSON_MULTIPLE);

        assert_non_null(strstr(r, "@0[@1#1]\nerror '"));
        assert_non_null(strstr(r, "docs=1"));
        free(r);
    }
    free(big);
}

/* A UTF-8 sequence ends at the first byte that cannot continue it, so
 * escapes after a lead byte cannot keep the scanner's unsafe tail open:
 * the kept part reaches yajl, which refuses it, in every chunk size (fuzz
 * finding broken-utf8-then-escapes-rejected-only-chunked). */
static void
test_cut_broken_utf8(void **state)
{
    struct json_limits lim = {.max_string = 32};
    char *big;

    (void)state;
    big = repeat("[\"ab\xf8", "\\\\", 40, "\"]");
    expect_error(big, &lim, JSON_TRUNCATE, "invalid bytes in UTF8 string");
    free(big);
    big = repeat("[\"ab\xc3", "\\u00e9", 10, "\"]");
    expect_error(big, &lim, JSON_TRUNCATE, "invalid bytes in UTF8 string");
    free(big);
    /* Lead bytes one after another: each ends the one before. */
    big = repeat("[\"", "\xf0\x80\x80", 30, "\"]");
    expect_error(big, &lim, JSON_TRUNCATE, "invalid bytes in UTF8 string");
    free(big);
    /* Past the cut nothing is read: a broken sequence there is fine. */
    big = repeat("[\"0123456789abcdef0123456789abcdef\xf8", "\\\\", 40, "\"]");
    expect_result(big, &lim, JSON_TRUNCATE,
                  "@0[@1'0123456789abcdef0123456789abcdef'~113]\nok docs=1");
    free(big);
}

/* A string of megabytes costs neither a buffer nor a failure. */
static void
test_cut_huge(void **state)
{
    struct json_limits lim = {.max_string = 16, .max_bytes = SIZE_MAX};
    size_t n = 8u << 20, off, k;
    char *big = repeat("{\"Env\":[\"", "x\\\"y", n / 4, "\"],\"ok\":1}");
    struct json_node *root = NULL;
    const struct json_node *env, *ok;
    struct json_stream *js;
    int64_t v;

    (void)state;
    js = json_stream_new(&lim, JSON_TRUNCATE, NULL, NULL);
    assert_non_null(js);
    json_stream_free(js);
    root = json_parse(big, strlen(big), &lim, JSON_TRUNCATE, NULL, 0, NULL);
    assert_non_null(root);
    env = json_get(root, "Env");
    assert_non_null(env);
    assert_int_equal(env->count, 1);
    assert_true(env->items[0]->truncated);
    assert_int_equal(env->items[0]->raw_len, n);
    /* 16 raw bytes are four times x\"y: 12 decoded bytes. */
    assert_int_equal(env->items[0]->len, 12);
    assert_memory_equal(env->items[0]->str, "x\"yx\"yx\"yx\"y", 12);
    ok = json_get(root, "ok");
    assert_int_equal(json_int64(ok, &v), 0);
    assert_int_equal(v, 1);
    json_free(root);
    /* The same in 4 KiB chunks, through a stream. */
    for (k = 4096; k <= 65536; k *= 4) {
        struct collect c;

        memset(&c, 0, sizeof c);
        js = json_stream_new(&lim, JSON_TRUNCATE, collect_cb, &c);
        assert_non_null(js);
        for (off = 0; off < strlen(big); off += k)
            assert_int_equal(json_stream_feed(js, big + off,
                                              strlen(big) - off < k
                                                  ? strlen(big) - off
                                                  : k),
                             0);
        assert_int_equal(json_stream_finish(js), 0);
        assert_int_equal(c.docs, 1);
        free(c.out.p);
        json_stream_free(js);
    }
    free(big);
}

static void
test_drop_items(void **state)
{
    struct json_limits lim = {.max_items = 2};

    (void)state;
    expect_result("{\"a\":1,\"b\":2,\"c\":3,\"d\":[1,2,3]}", &lim,
                  JSON_TRUNCATE, "@0{@1:a=@5#1,@7:b=@11#2}-2\nok docs=1");
    expect_result("[1,2,3,[4,5,6]]", &lim, JSON_TRUNCATE,
                  "@0[@1#1,@3#2]-2\nok docs=1");
    expect_error("[1,2,3]", &lim, 0, "array has more than 2 elements");
}

static int
skip_all(int tag, const char *key, size_t len, int cut, size_t index,
         void *arg)
{
    (void)tag;
    (void)key;
    (void)len;
    (void)cut;
    (void)index;
    (void)arg;
    return JSON_SKIP;
}

/*
 * The string scanner of JSON_TRUNCATE looks at each byte a bounded number
 * of times whatever the input: a long run without a quote (numbers,
 * blanks), where it once started over at each byte, in one chunk and in
 * many; one with strings among it; and in a string far longer than
 * max_string, cut.
 */
static void
test_cut_scan_linear(void **state)
{
    static const size_t chunks[] = {SIZE_MAX, 4096, 7, 1};
    const size_t n = 20000;
    char *doc = malloc(4 * n + 64);
    size_t len, i, off, k, c;

    (void)state;
    assert_non_null(doc);
    for (c = 0; c < 3; c++) {
        len = 0;
        doc[len++] = '[';
        for (i = 0; i < n && c == 2; i++)
            doc[len++] = i == 0 || i == n - 1 ? '"' : 'a';
        if (c == 2)
            doc[len++] = ',';
        for (i = 0; i < n && c != 2; i++) {
            /* c == 1: a short string every 1000 numbers. */
            if (c == 1 && i % 1000 == 999) {
                memcpy(doc + len, "\"a\",", 4);
                len += 4;
            } else {
                doc[len++] = '0';
                doc[len++] = ',';
            }
        }
        doc[len++] = '0';
        doc[len++] = ']';
        for (k = 0; k < sizeof(chunks) / sizeof(chunks[0]); k++) {
            struct json_limits lim = {.max_string = 1024};
            struct json_stream *js =
                json_stream_new(&lim, JSON_TRUNCATE, NULL, NULL);

            assert_non_null(js);
            json_stream_set_filter(js, skip_all, NULL);
            for (off = 0; off < len; off += chunks[k])
                assert_int_equal(json_stream_feed(js, doc + off,
                                                  len - off < chunks[k]
                                                      ? len - off
                                                      : chunks[k]),
                                 0);
            assert_int_equal(json_stream_finish(js), 0);
            if (json_stream_scanned(js) > 2 * len)
                print_error("case %zu chunk %zu: %zu bytes scanned for %zu\n",
                            c, chunks[k], json_stream_scanned(js), len);
            assert_true(json_stream_scanned(js) <= 2 * len);
            json_stream_free(js);
        }
    }
    free(doc);
}

enum { T_ROOT, T_CONFIG, T_LABELS };

static int
schema(int tag, const char *key, size_t len, int cut, size_t index, void *arg)
{
    (void)cut;
    (void)index;
    (void)arg;
    if (key == NULL)
        return JSON_SKIP;
    switch (tag) {
    case T_ROOT:
        if (len == 2 && memcmp(key, "Id", 2) == 0)
            return T_ROOT;
        if (len == 6 && memcmp(key, "Config", 6) == 0)
            return T_CONFIG;
        return JSON_SKIP;
    case T_CONFIG:
        return len == 6 && memcmp(key, "Labels", 6) == 0 ? T_LABELS
                                                         : JSON_SKIP;
    default:
        return len > 0 && key[0] == 'k' ? T_LABELS : JSON_DROP;
    }
}

static void
test_filter(void **state)
{
    (void)state;
    run_filter = schema;
    expect_result("{\"Id\":\"x\",\"Env\":[\"A=1\",{\"deep\":[[[1]]]}],"
                  "\"Config\":{\"Cmd\":\"long\",\"Labels\":{\"k1\":\"v\","
                  "\"z\":\"w\",\"k2\":\"v2\"}}}",
                  NULL, 0,
                  "@0{@1:Id=@6'x',@41:Config=@50{@64:Labels=@73{@74:k1=@79"
                  "'v',@91:k2=@96'v2'}-1}}\nok docs=1");
    /* What is left out is still checked. */
    expect_error("{\"Env\":[1,}", NULL, 0, "parse error");
    expect_error("{\"Env\":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]"
                 "]]]]]]]]]]]]]]]]]]]]]]]}",
                 NULL, 0, "nesting deeper than 32");
    run_filter = NULL;
}

/* A document of several megabytes in mapped chunks: the same tree as
 * from the heap, given back a chunk per call (json_free_some), its own
 * chunk last; a document after it on the same stream is fine. */
struct keep_one {
    struct json_node *root;
    unsigned docs;
};

static int
keep_one_cb(struct json_node *root, void *arg)
{
    struct keep_one *k = arg;

    if (k->root != NULL)
        json_free(k->root);
    k->root = root;
    k->docs++;
    return 0;
}

static void
test_mapped_free_some(void **state)
{
    struct json_limits lim = {.max_bytes = 16u << 20,
                              .max_depth = 8,
                              .max_items = 100000,
                              .max_string = 2u << 20};
    struct tu_sbuf big = {0}, d1 = {0}, d2 = {0};
    struct keep_one heap = {0}, mapped = {0};
    struct json_stream *s;
    size_t off, len, calls = 0;
    char *huge;
    int i, rc = 0;

    (void)state;
    huge = malloc((3u << 19) + 1); /* 1.5 MiB: a chunk of its own */
    assert_non_null(huge);
    memset(huge, 'h', 3u << 19);
    huge[3u << 19] = '\0';
    tu_sb_printf(&big, "[");
    for (i = 0; i < 30000; i++)
        tu_sb_printf(&big, "%s\"s%d-0123456789012345678901234567890123\"",
                     i ? "," : "", i);
    tu_sb_printf(&big, ",\"%s\",{\"k\":[1,2.5,true,null]}]", huge);
    free(huge);
    len = strlen(big.p);

    s = json_stream_new(&lim, 0, keep_one_cb, &heap);
    assert_non_null(s);
    assert_int_equal(json_stream_feed(s, big.p, len), 0);
    assert_int_equal(json_stream_finish(s), 0);
    json_stream_free(s);

    s = json_stream_new(&lim, JSON_MULTIPLE, keep_one_cb, &mapped);
    assert_non_null(s);
    json_stream_set_mapped(s, true);
    for (off = 0; off < len && rc == 0; off += 4000)
        rc = json_stream_feed(s, big.p + off,
                              len - off < 4000 ? len - off : 4000);
    assert_int_equal(rc, 0);
    assert_non_null(mapped.root);
    assert_int_equal(mapped.root->count, 30002);

    dump(&d1, heap.root);
    dump(&d2, mapped.root);
    assert_string_equal(d1.p, d2.p);
    json_free(heap.root);

    /* At least three 1 MiB chunks and the big one: several calls. */
    while (json_free_some(mapped.root, 1) == 0)
        calls++;
    assert_true(calls >= 3);
    mapped.root = NULL;
    assert_int_equal(json_free_some(NULL, 1), 1);

    /* The stream goes on; a released mapped document is not kept. */
    assert_int_equal(json_stream_feed(s, " {\"a\":\"b\"}", 10), 0);
    assert_int_equal(json_stream_finish(s), 0);
    assert_int_equal(mapped.docs, 2);
    assert_non_null(json_get(mapped.root, "a"));
    json_stream_release(s, mapped.root);
    json_stream_free(s);
    free(big.p);
    free(d1.p);
    free(d2.p);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_basic),
        cmocka_unit_test(test_duplicates_last_wins),
        cmocka_unit_test(test_embedded_nul),
        cmocka_unit_test(test_top_level_scalars),
        cmocka_unit_test(test_big_document),
        cmocka_unit_test(test_every_chunk_size),
        cmocka_unit_test(test_multiple_documents),
        cmocka_unit_test(test_pending),
        cmocka_unit_test(test_release_reuses),
        cmocka_unit_test(test_mapped_free_some),
        cmocka_unit_test(test_stop),
        cmocka_unit_test(test_comments),
        cmocka_unit_test(test_limit_bytes),
        cmocka_unit_test(test_limit_depth),
        cmocka_unit_test(test_deep_nesting),
        cmocka_unit_test(test_limit_items),
        cmocka_unit_test(test_limit_string),
        cmocka_unit_test(test_truncated),
        cmocka_unit_test(test_garbage),
        cmocka_unit_test(test_partial_document_freed),
        cmocka_unit_test(test_offsets),
        cmocka_unit_test(test_error_offset),
        cmocka_unit_test(test_linecol),
        cmocka_unit_test(test_int64),
        cmocka_unit_test(test_cut_strings),
        cmocka_unit_test(test_cut_errors),
        cmocka_unit_test(test_cut_broken_utf8),
        cmocka_unit_test(test_cut_huge),
        cmocka_unit_test(test_cut_scan_linear),
        cmocka_unit_test(test_drop_items),
        cmocka_unit_test(test_filter),
    };

    tu_test_filters(); /* REAPD_TEST_ONLY, TEST_FILTER */
    return cmocka_run_group_tests(tests, NULL, NULL);
}
