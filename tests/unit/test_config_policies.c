/*
 * Unit tests for the policies and the labels filter of the config file
 * (agent/config_policies.c): the file's list replacing the default one,
 * every problem a policy can have, a remove policy that would match
 * everything, the bounds on label names and values, the labels kept and
 * the bounds on their globs.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "bounds.h"
#include "config.h"
#include "config_fx.h"
#include "testutil.h"

static void
test_policy_list_replaces_default(void **state)
{
    struct config *cfg;

    (void)state;
    cfg = cfx_parse_ok("{\"default_action\": \"keep\", \"policies\": []}");
    assert_int_equal(cfg->policies.count, 0);
    /* default_action given before the list survives it. */
    assert_int_equal(cfg->policies.default_action, POLICY_KEEP);
    config_free(cfg);

    cfg = cfx_parse_ok("{\"policies\": [{\"name\": \"k\", \"action\": "
                       "\"keep\"}]}");
    assert_int_equal(cfg->policies.count, 1);
    assert_string_equal(cfg->policies.items[0].name, "k");
    assert_int_equal(cfg->policies.items[0].nmatch_labels, 0);
    config_free(cfg);
}

static void
test_policy_problems(void **state)
{
    static const char *const want[] = {
        "t.json:2:28: policies[0].action: must be \"remove\", \"keep\" or "
        "\"ignore\"",
        "t.json:3:3: policies[1]: missing required key \"name\"",
        "t.json:3:3: policies[1]: missing required key \"action\"",
        "t.json:4:13: policies[2].name: must not be empty",
        "t.json:5:48: policies[3].delay_ms: must be between 0 and "
        "604800000",
        "t.json:5:61: policies[3].force: expected a boolean, got string",
        "t.json:5:68: unknown key \"colour\" in policies[3]",
        "t.json:6:13: policies[4].name: duplicate policy name \"a\" (also "
        "policies[0])",
        "t.json:7:3: policies[5]: expected an object, got string",
        "t.json:8:46: policies[6].match.labels.k: expected a string (a "
        "value, or \"*\" for any), got number",
        "t.json:8:51: unknown key \"names\" in policies[6].match",
        "t.json:10:19: default_action: must be \"remove\", \"keep\" or "
        "\"ignore\"",
        NULL,
    };

    (void)state;
    cfx_expect_errors(
        "{\"policies\": [\n"
        "  { \"name\": \"a\", \"action\": \"delete\" },\n"
        "  { \"match\": { \"name\": \"x\" } },\n"
        "  { \"name\": \"\", \"action\": \"keep\" },\n"
        "  { \"name\": \"b\", \"action\": \"keep\", \"delay_ms\": -1, "
        "\"force\": \"yes\", \"colour\": 1 },\n"
        "  { \"name\": \"a\", \"action\": \"keep\" },\n"
        "  \"c\",\n"
        "  { \"name\": \"d\", \"match\": { \"labels\": { \"k\": 1 }, "
        "\"names\": \"x\" }, \"action\": \"keep\" }\n"
        "],\n"
        "\"default_action\": \"drop\"}\n",
        want);
}

static void
test_remove_all_refused(void **state)
{
#define ALL_MSG                                                               \
    ": a remove policy with an empty match would remove every container; "    \
    "set \"allow_match_all\": true to mean it"
    static const char *const want[] = {
        "t.json:2:3: policies[0]" ALL_MSG,
        "t.json:3:47: policies[1]" ALL_MSG,
        "t.json:4:47: policies[2]" ALL_MSG,
        "t.json:5:3: policies[3]" ALL_MSG,
        NULL,
    };
#undef ALL_MSG

    (void)state;
    cfx_expect_errors(
        "{\"policies\": [\n"
        "  { \"name\": \"a\", \"action\": \"remove\" },\n"
        "  { \"name\": \"b\", \"action\": \"remove\", \"match\": "
        "{} },\n"
        "  { \"name\": \"c\", \"action\": \"remove\", \"match\": "
        "{ \"labels\": {} } },\n"
        "  { \"name\": \"d\", \"action\": \"remove\", "
        "\"allow_match_all\": false }\n"
        "]}\n",
        want);
}

static void
test_remove_all_allowed(void **state)
{
    struct config *cfg;

    (void)state;
    cfg = cfx_parse_ok(
        "{\"policies\": ["
        "{\"name\": \"a\", \"action\": \"remove\", "
        "\"allow_match_all\": true},"
        "{\"name\": \"k\", \"action\": \"keep\"},"
        "{\"name\": \"i\", \"action\": \"ignore\", \"match\": {}},"
        "{\"name\": \"r\", \"action\": \"remove\", "
        "\"match\": {\"image\": \"*\"}}]}");
    assert_int_equal(cfg->policies.count, 4);
    config_free(cfg);
}

/* A policy that matches label `key` (`klen` times 'k' if key is NULL)
 * with `vlen` times 'v', as one line of a config. */
static size_t
label_policy(char *out, const char *name, size_t klen, size_t vlen)
{
    size_t n = 0;

    n += (size_t)sprintf(out + n,
                         "{\"name\": \"%s\", \"action\": \"keep\", "
                         "\"match\": {\"labels\": {\"",
                         name);
    memset(out + n, 'k', klen);
    n += klen;
    n += (size_t)sprintf(out + n, "\": \"");
    memset(out + n, 'v', vlen);
    n += vlen;
    n += (size_t)sprintf(out + n, "\"}}}");
    return n;
}

/* Policy labels are held to bounds.h: a name of at most 1024 bytes
 * (LIMIT_LABEL_KEY), a value of at most 512 (LIMIT_POLICY_LABEL_VALUE). */
static void
test_policy_label_sizes(void **state)
{
    static const char *const want[] = {
        "t.json:3:54: policies[1].match.labels.kkkkkkkkkkkkkkkkkkkkkkkkkkkkk"
        "kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk...: label name longer than "
        "1024 bytes",
        "t.json:5:1082: policies[3].match.labels.kkkkkkkkkkkkkkkkkkkkkkkkkk"
        "kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk...: value longer than 512 "
        "bytes",
        NULL,
    };
    char *text = malloc(8 * 4096);
    struct config *cfg;
    size_t n = 0;

    (void)state;
    assert_int_equal(LIMIT_LABEL_KEY, 1024);
    assert_int_equal(LIMIT_POLICY_LABEL_VALUE, 512);
    assert_non_null(text);
    /* Line 2: both at their bound, fine. */
    n += (size_t)sprintf(text + n, "{\"policies\": [\n");
    n += label_policy(text + n, "a", 1024, 512);
    /* Line 3: a name one byte too long; line 4: fine; line 5: a value
     * one byte too long. */
    n += (size_t)sprintf(text + n, ",\n");
    n += label_policy(text + n, "b", 1025, 1);
    n += (size_t)sprintf(text + n, ",\n");
    n += label_policy(text + n, "c", 1, 512);
    n += (size_t)sprintf(text + n, ",\n");
    n += label_policy(text + n, "d", 1024, 513);
    n += (size_t)sprintf(text + n, "\n]}\n");
    text[n] = '\0';
    cfx_expect_errors(text, want);

    /* Without the two over their bounds: accepted, kept whole. */
    n = 0;
    n += (size_t)sprintf(text + n, "{\"policies\": [\n");
    n += label_policy(text + n, "a", 1024, 512);
    n += (size_t)sprintf(text + n, "\n]}\n");
    text[n] = '\0';
    cfg = cfx_parse_ok(text);
    assert_int_equal(cfg->policies.items[0].nmatch_labels, 1);
    assert_int_equal(strlen(cfg->policies.items[0].match_labels[0].key), 1024);
    assert_int_equal(strlen(cfg->policies.items[0].match_labels[0].value),
                     512);
    config_free(cfg);
    free(text);
}

/* At most 64 (LIMIT_POLICY_LABELS) distinct label names over all the
 * policies of a config; a name several policies use counts once. */
static void
test_policy_label_count(void **state)
{
    static const char *const want[] = {
        "t.json:4:66: policies[2].match.labels.l64: more than 64 distinct "
        "label names in all policies together",
        NULL,
    };
    char *text = malloc(64 * 1024);
    struct config *cfg;
    size_t n = 0, i;

    (void)state;
    assert_int_equal(LIMIT_POLICY_LABELS, 64);
    assert_non_null(text);
    /* Line 2: 40 names; line 3: the same 40 and 24 more (64 in all);
     * line 4: one of those, then a 65th, then a 66th (said once). */
    n += (size_t)sprintf(text + n, "{\"policies\": [\n"
                                   "{\"name\": \"a\", \"action\": \"keep\", "
                                   "\"match\": {\"labels\": {");
    for (i = 0; i < 40; i++)
        n +=
            (size_t)sprintf(text + n, "%s\"l%02zu\": \"*\"", i ? ", " : "", i);
    n += (size_t)sprintf(text + n, "}}},\n{\"name\": \"b\", \"action\": "
                                   "\"keep\", \"match\": {\"labels\": {");
    for (i = 0; i < 64; i++)
        n +=
            (size_t)sprintf(text + n, "%s\"l%02zu\": \"x\"", i ? ", " : "", i);
    n += (size_t)sprintf(text + n, "}}},\n");
    cfg = NULL;
    {
        /* Up to here (closed off): exactly 64, accepted. */
        char *ok = malloc(n + 16);

        assert_non_null(ok);
        memcpy(ok, text, n - 2);
        memcpy(ok + n - 2, "\n]}\n", 5);
        cfg = cfx_parse_ok(ok);
        assert_int_equal(cfg->policies.count, 2);
        assert_int_equal(cfg->policies.items[1].nmatch_labels, 64);
        config_free(cfg);
        free(ok);
    }
    n += (size_t)sprintf(text + n, "{\"name\": \"c\", \"action\": "
                                   "\"keep\", \"match\": {\"labels\": {"
                                   "\"l07\": \"y\", \"l64\": \"z\", "
                                   "\"l65\": \"z\"}}}\n]}\n");
    text[n] = '\0';
    cfx_expect_errors(text, want);
    free(text);
}

static bool
keeps(const struct config *cfg, const char *key)
{
    return label_filter_keeps(&cfg->labels, key, strlen(key));
}

/* "labels": the default keeps every label; allow alone keeps what it
 * matches, deny alone drops what it matches, both: allowed and not
 * denied; empty lists keep all. The effective config shows the lists. */
static void
test_label_filter(void **state)
{
    struct config *cfg;
    char *json;

    (void)state;
    cfg = config_default();
    assert_int_equal(cfg->labels.nallow + cfg->labels.ndeny, 0);
    assert_true(keeps(cfg, "com.example.db-password"));
    json = config_to_json(cfg, true, NULL);
    assert_non_null(strstr(json, "\"labels\":{\"allow\":[],\"deny\":[]}"));
    free(json);
    config_free(cfg);

    cfg = cfx_parse_ok("{\"labels\": {\"allow\": [], \"deny\": []}}");
    assert_true(keeps(cfg, "anything"));
    config_free(cfg);

    cfg = cfx_parse_ok("{\"labels\": {\"allow\": [\"app.*\", \"team\"]}}");
    assert_true(keeps(cfg, "app.tier"));
    assert_true(keeps(cfg, "app.a/b.c")); /* '*' spans '.' and '/' */
    assert_true(keeps(cfg, "team"));
    assert_false(keeps(cfg, "teams"));
    assert_false(keeps(cfg, "com.example.db-password"));
    config_free(cfg);

    cfg = cfx_parse_ok("{\"labels\": {\"deny\": [\"*password*\", "
                       "\"secret.[0-9]\"]}}");
    assert_false(keeps(cfg, "com.example.db-password"));
    assert_false(keeps(cfg, "secret.7"));
    assert_true(keeps(cfg, "secret.x"));
    assert_true(keeps(cfg, "app.tier"));
    config_free(cfg);

    cfg = cfx_parse_ok("{\"labels\": {\"allow\": [\"com.example.*\"],\n"
                       "  \"deny\": [\"*-password\"]}}");
    assert_true(keeps(cfg, "com.example.tier"));
    assert_false(keeps(cfg, "com.example.db-password"));
    assert_false(keeps(cfg, "other"));
    /* Not NUL-terminated where the length ends: only `len` counts. */
    assert_true(label_filter_keeps(&cfg->labels, "com.example.tierXX", 16));
    assert_false(
        label_filter_keeps(&cfg->labels, "com.example.db-passwordX", 23));
    json = config_to_json(cfg, false, NULL);
    assert_non_null(strstr(json, "\"labels\":{\"allow\":[\"com.example.*\"],"
                                 "\"deny\":[\"*-password\"]}"));
    free(json);
    config_free(cfg);
    assert_true(label_filter_keeps(NULL, "x", 1));
}

static void
test_label_filter_problems(void **state)
{
    static const char *const want[] = {
        "t.json:2:12: labels.allow: expected an array of globs, got string",
        "t.json:3:19: labels.deny[1]: invalid glob \"db-[0-9\": unbalanced "
        "'[' (no closing ']')",
        "t.json:3:30: labels.deny[2]: expected a string, got number",
        "t.json:3:33: labels.deny[3]: invalid glob \"\": must not be empty",
        "t.json:4:3: unknown key \"keep\" in labels",
        NULL,
    };

    (void)state;
    cfx_expect_errors("{\"labels\": {\n"
                      "  \"allow\": \"app.*\",\n"
                      "  \"deny\": [\"ok*\", \"db-[0-9\", 7, \"\"],\n"
                      "  \"keep\": []\n"
                      "}}\n",
                      want);
    cfx_expect_message("{\"labels\": []}",
                       "labels: expected an object, got array");
    cfx_expect_message("{\"labels\": {\"deny\": [\"a\\u0000b\"]}}",
                       "labels.deny[0]: must not contain NUL characters");
    cfx_expect_message("{\"labels\": {\"deny\": [\"a\"], \"deny\": [\"b\"]}}",
                       "duplicate key \"deny\" in labels");
}

/* A text with `n` globs of `len` bytes in labels.`list`; caller frees. */
static char *
globs_text(const char *list, size_t n, size_t len)
{
    size_t cap = 64 + n * (len + 4), i, off;
    char *t = malloc(cap);

    assert_non_null(t);
    off = (size_t)snprintf(t, cap, "{\"labels\": {\"%s\": [", list);
    for (i = 0; i < n; i++) {
        t[off++] = i ? ',' : ' ';
        t[off++] = '"';
        memset(t + off, 'g', len);
        /* distinct, so each counts */
        t[off] = (char)('A' + i % 26);
        off += len;
        t[off++] = '"';
    }
    snprintf(t + off, cap - off, "]}}");
    return t;
}

/* At most CONFIG_LABEL_GLOBS globs in a list, each at most
 * CONFIG_LABEL_GLOB_MAX bytes: limit-1 and limit are taken, limit+1 is
 * refused at the first one over. */
static void
test_corner_label_glob_bounds(void **state)
{
    static const char *const lists[] = {"allow", "deny"};
    struct config *cfg;
    char msg[96];
    size_t i, n;
    char *t;

    (void)state;
    assert_int_equal(CONFIG_LABEL_GLOBS, 64);
    assert_int_equal(CONFIG_LABEL_GLOB_MAX, 256);
    for (i = 0; i < 2; i++) {
        for (n = CONFIG_LABEL_GLOBS - 1; n <= CONFIG_LABEL_GLOBS; n++) {
            t = globs_text(lists[i], n, 3);
            cfg = cfx_parse_ok(t);
            assert_int_equal(i ? cfg->labels.ndeny : cfg->labels.nallow, n);
            config_free(cfg);
            free(t);
        }
        t = globs_text(lists[i], CONFIG_LABEL_GLOBS + 1, 3);
        snprintf(msg, sizeof(msg), "labels.%s: more than 64 globs", lists[i]);
        cfx_expect_message(t, msg);
        free(t);

        for (n = CONFIG_LABEL_GLOB_MAX - 1; n <= CONFIG_LABEL_GLOB_MAX; n++) {
            t = globs_text(lists[i], 1, n);
            cfg = cfx_parse_ok(t);
            assert_int_equal(
                strlen(i ? cfg->labels.deny[0] : cfg->labels.allow[0]), n);
            config_free(cfg);
            free(t);
        }
        t = globs_text(lists[i], 1, CONFIG_LABEL_GLOB_MAX + 1);
        snprintf(msg, sizeof(msg), "labels.%s[0]: glob longer than 256 bytes",
                 lists[i]);
        cfx_expect_message(t, msg);
        free(t);
    }
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_policy_list_replaces_default),
        cmocka_unit_test(test_policy_problems),
        cmocka_unit_test(test_policy_label_sizes),
        cmocka_unit_test(test_policy_label_count),
        cmocka_unit_test(test_remove_all_refused),
        cmocka_unit_test(test_remove_all_allowed),
        cmocka_unit_test(test_label_filter),
        cmocka_unit_test(test_label_filter_problems),
        cmocka_unit_test(test_corner_label_glob_bounds),
    };

    tu_test_filters(); /* REAPD_TEST_ONLY, TEST_FILTER */
    return cmocka_run_group_tests(tests, NULL, NULL);
}
