/*
 * Unit tests for reading the config file (agent/config.c,
 * agent/config_values.c): every class of problem reported at its exact
 * FILE:LINE:COL, several at once; the sections with keys of their own;
 * loading a file. Also checks that the shipped config/ JSON files load
 * and that config/reapd.json says exactly what config_default() does.
 * The keys, the checks of string values and the policies have tests of
 * their own (test_config_<part>.c); what they share is
 * tests/fake/config_fx.h.
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

#define FIX     FIXTURES_DIR "/config/"
#define SHIPPED FIXTURES_DIR "/../../config/"

static void
test_null_url_and_comments(void **state)
{
    struct config *cfg;

    (void)state;
    cfg = cfx_parse_ok("// leading\n"
                       "/* block\n   comment */ {\n"
                       "  \"upstream\": { \"url\": null }, // trailing\n"
                       "  /* inside */ \"node\": \"n\" /* after */\n"
                       "}\n// at the end\n");
    assert_null(cfg->upstream_url);
    assert_string_equal(cfg->node, "n");
    config_free(cfg);
}

static void
test_unknown_type_range_at_once(void **state)
{
    static const char *const want[] = {
        "t.json:2:3: unknown key \"nodes\"",
        "t.json:4:22: delete.max_in_flight: expected an integer, got "
        "string",
        "t.json:5:25: delete.poll_interval_ms: must be between 10 and "
        "3600000",
        "t.json:6:5: unknown key \"foo\" in delete",
        "t.json:8:13: docker: expected an object, got array",
        NULL,
    };

    (void)state;
    cfx_expect_errors("{\n"
                      "  \"nodes\": \"x\",\n"
                      "  \"delete\": {\n"
                      "    \"max_in_flight\": \"8\",\n"
                      "    \"poll_interval_ms\": 5,\n"
                      "    \"foo\": 1\n"
                      "  },\n"
                      "  \"docker\": []\n"
                      "}\n",
                      want);
}

/*
 * yajl says where it stopped reading, which for a bad token may be a byte
 * or two into it; the line is always right. Asserts LINE exactly and COL
 * within [first, last] column of the offending token.
 */
static void
assert_near(const char *line, const char *source, unsigned want_line,
            unsigned first, unsigned last, const char *msg_prefix)
{
    size_t n = strlen(source);
    unsigned l = 0, c = 0;
    int used = 0;

    if (strncmp(line, source, n) != 0 ||
        sscanf(line + n, ":%u:%u: %n", &l, &c, &used) != 2 || used == 0 ||
        l != want_line || c < first || c > last ||
        strncmp(line + n + used, msg_prefix, strlen(msg_prefix)) != 0)
        fail_msg("\"%s\": want %s:%u:%u..%u: %s...", line, source, want_line,
                 first, last, msg_prefix);
}

static void
test_malformed_json(void **state)
{
    static const char *const want[] = {
        "t.json:3:3: invalid JSON: parse error: after key and value, "
        "inside map, I expect ',' or '}'",
        NULL,
    };
    static const char missing_comma[] = "{\n  \"a\": 1\n  \"b\": 2\n}\n";
    static const char bad_literal[] = "{\n  \"node\": tru\n}";
    struct config_errors errs = {0};
    struct config *cfg = NULL;
    int rc;

    (void)state;
    /* A one-byte token: where yajl stops is where it starts. */
    cfx_expect_errors("{\n  \"a\": 1\n  3\n}\n", want);

    rc = config_parse("t.json", missing_comma, strlen(missing_comma), &cfg,
                      &errs);
    assert_int_equal(rc, -1);
    assert_null(cfg);
    assert_int_equal(errs.count, 1);
    assert_near(errs.lines[0], "t.json", 3, 3, 5, "invalid JSON: ");
    config_errors_clear(&errs);

    rc = config_parse("t.json", bad_literal, strlen(bad_literal), &cfg, &errs);
    assert_int_equal(rc, -1);
    assert_int_equal(errs.count, 1);
    assert_near(errs.lines[0], "t.json", 2, 13, 16, "invalid JSON: ");
    config_errors_clear(&errs);
}

static void
test_unterminated_comment(void **state)
{
    (void)state;
    /* An unterminated comment is still an error. */
    struct config_errors errs = {0};
    struct config *cfg = NULL;

    assert_int_equal(config_parse("t.json", "{ /* no end }", 13, &cfg, &errs),
                     -1);
    assert_int_equal(errs.count, 1);
    assert_near(errs.lines[0], "t.json", 1, 1, 14, "invalid JSON: ");
    config_errors_clear(&errs);
}

static void
test_not_an_object(void **state)
{
    static const char *const want[] = {
        "t.json:2:1: the configuration must be a JSON object, got array",
        NULL,
    };

    (void)state;
    cfx_expect_errors("// a list is not a config\n[1, 2]\n", want);
}

static void
test_upstream(void **state)
{
    struct config *cfg;

    (void)state;
    cfg = cfx_parse_ok("{\"upstream\": {\"url\": \"http://127.0.0.1:8080/r\","
                       " \"headers\": {\"X-A\": \"1\", \"x-b\": \"\"}}}");
    assert_string_equal(cfg->upstream_url, "http://127.0.0.1:8080/r");
    assert_int_equal(cfg->nupstream_headers, 2);
    assert_string_equal(cfg->upstream_headers[1].name, "x-b");
    assert_string_equal(cfg->upstream_headers[1].value, "");
    config_free(cfg);

    cfx_expect_message("{\"upstream\": {\"url\": \"ftp://h/\"}}",
                       "upstream.url: must start with http:// or https://");
    cfx_expect_message("{\"upstream\": {\"url\": \"https://\"}}",
                       "upstream.url: has no host");
    cfx_expect_message("{\"upstream\": {\"url\": \"http://h/a b\"}}",
                       "upstream.url: must not contain spaces or control "
                       "characters");
    cfx_expect_message("{\"upstream\": {\"url\": 1}}",
                       "upstream.url: expected a string, got number");
    cfx_expect_message("{\"upstream\": {\"headers\": []}}",
                       "upstream.headers: expected an object, got array");
    cfx_expect_message("{\"upstream\": {\"headers\": {\"X:Y\": \"v\"}}}",
                       "upstream.headers: \"X:Y\" is not a valid header name");
    cfx_expect_message("{\"upstream\": {\"headers\": {\"\": \"v\"}}}",
                       "upstream.headers: \"\" is not a valid header name");
    cfx_expect_message(
        "{\"upstream\": {\"headers\": {\"X\": \"a\\r\\nB: c\"}}}",
        "upstream.headers.X: must not contain CR, LF or NUL");
    cfx_expect_message("{\"upstream\": {\"headers\": {\"X\": \"a\\rb\"}}}",
                       "upstream.headers.X: must not contain CR, LF or NUL");
    cfx_expect_message("{\"upstream\": {\"headers\": {\"X\": \"a\\u0000\"}}}",
                       "upstream.headers.X: must not contain CR, LF or NUL");
    cfx_expect_message("{\"upstream\": {\"headers\": {\"X\": 5}}}",
                       "upstream.headers.X: expected a string, got number");
    cfx_expect_message("{\"upstream\": {\"headers\": {\"idempotency-key\": "
                       "\"v\"}}}",
                       "upstream.headers: \"idempotency-key\" is set by reapd "
                       "itself");
    cfx_expect_message("{\"upstream\": {\"headers\": {\"X-A\": \"1\", "
                       "\"x-a\": \"2\"}}}",
                       "duplicate key \"x-a\" in upstream.headers");
    cfx_expect_message("{\"upstream\": {\"timeout_ms\": 600001}}",
                       "upstream.timeout_ms: must be between 100 and 600000");
}

static void
test_delete_and_log(void **state)
{
    struct config *cfg;

    (void)state;
    cfg = cfx_parse_ok("{\"delete\": {\"max_in_flight\": 1024, "
                       "\"give_up_after_ms\": 604800000, "
                       "\"retry_base_ms\": 7000, \"retry_max_ms\": 7000}, "
                       "\"log\": {\"level\": \"error\"}}");
    assert_int_equal(cfg->delete_max_in_flight, 1024);
    assert_int_equal(cfg->delete_give_up_after_ms, 604800000);
    assert_int_equal(cfg->log_level, LOG_LEVEL_ERROR);
    assert_int_equal(cfg->log_format, LOG_FORMAT_TEXT);
    config_free(cfg);

    cfx_expect_message("{\"delete\": {\"max_in_flight\": 1025}}",
                       "delete.max_in_flight: must be between 1 and 1024");
    cfx_expect_message("{\"delete\": {\"max_in_flight\": 1e2}}",
                       "delete.max_in_flight: expected an integer, got 1e2");
    cfx_expect_message(
        "{\"delete\": {\"max_in_flight\": 99999999999999999999999}}",
        "delete.max_in_flight: expected an integer, got "
        "99999999999999999999999");
    cfx_expect_message("{\"delete\": {\"warn_after_ms\": null}}",
                       "delete.warn_after_ms: expected an integer, got null");
    cfx_expect_message("{\"delete\": {\"retry_base_ms\": 40000}}",
                       "delete.retry_base_ms: must not exceed "
                       "delete.retry_max_ms (40000 > 30000)");
    cfx_expect_message("{\"log\": {\"format\": \"xml\"}}",
                       "log.format: must be \"text\" or \"json\"");
    cfx_expect_message("{\"log\": {\"level\": 3}}",
                       "log.level: expected a string, got number");
    cfx_expect_message("{\"log\": {\"colour\": true}}",
                       "unknown key \"colour\" in log");
    cfx_expect_message("{\"node\": \"a\", \"node\": \"b\"}",
                       "duplicate key \"node\" in the configuration");
}

/* reports_log: sizes from 64 KiB to 1 TiB, or 0 to never rotate; up to
 * 100 files kept, or none; both shown in the config in force. */
static void
test_reports_log(void **state)
{
    struct config *cfg;
    char *json;

    (void)state;
    cfg = cfx_parse_ok("{\"reports_log\": {\"max_bytes\": 0, \"keep\": 0}}");
    assert_int_equal(cfg->reports_log_max_bytes, 0);
    assert_int_equal(cfg->reports_log_keep, 0);
    config_free(cfg);
    cfg = cfx_parse_ok("{\"reports_log\": {\"max_bytes\": 65536, "
                       "\"keep\": 100}}");
    assert_int_equal(cfg->reports_log_max_bytes, 65536);
    assert_int_equal(cfg->reports_log_keep, 100);
    json = config_to_json(cfg, true, NULL);
    assert_non_null(json);
    assert_non_null(
        strstr(json, "\"reports_log\":{\"max_bytes\":65536,\"keep\":100}"));
    free(json);
    config_free(cfg);
    cfg = cfx_parse_ok("{\"reports_log\": {\"max_bytes\": 1099511627776}}");
    assert_int_equal(cfg->reports_log_max_bytes, INT64_C(1099511627776));
    assert_int_equal(cfg->reports_log_keep, 5);
    config_free(cfg);
    cfg = config_default();
    json = config_to_json(cfg, true, NULL);
    assert_non_null(json);
    assert_non_null(
        strstr(json, "\"reports_log\":{\"max_bytes\":67108864,\"keep\":5}"));
    free(json);
    config_free(cfg);

    cfx_expect_message("{\"reports_log\": {\"max_bytes\": 65535}}",
                       "reports_log.max_bytes: must be 0 (never rotate) or "
                       "between 65536 and 1099511627776");
    cfx_expect_message("{\"reports_log\": {\"max_bytes\": 1}}",
                       "reports_log.max_bytes: must be 0 (never rotate) or "
                       "between 65536 and 1099511627776");
    cfx_expect_message("{\"reports_log\": {\"max_bytes\": 1099511627777}}",
                       "reports_log.max_bytes: must be between 0 and "
                       "1099511627776");
    cfx_expect_message("{\"reports_log\": {\"max_bytes\": -1}}",
                       "reports_log.max_bytes: must be between 0 and "
                       "1099511627776");
    cfx_expect_message(
        "{\"reports_log\": {\"max_bytes\": \"64M\"}}",
        "reports_log.max_bytes: expected an integer, got string");
    cfx_expect_message("{\"reports_log\": {\"keep\": 101}}",
                       "reports_log.keep: must be between 0 and 100");
    cfx_expect_message("{\"reports_log\": {\"keep\": -1}}",
                       "reports_log.keep: must be between 0 and 100");
    cfx_expect_message("{\"reports_log\": {\"max_files\": 3}}",
                       "unknown key \"max_files\" in reports_log");
    cfx_expect_message("{\"reports_log\": 5}",
                       "reports_log: expected an object, got number");
}

static void
test_key_shown_safely(void **state)
{
    (void)state;
    /* A key with a newline must not break the one-line-per-problem rule. */
    cfx_expect_message("{\"a\\nb\": 1}", "unknown key \"a?b\"");
    cfx_expect_message(
        "{\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
        "xxxxxxxxxxxxxxxxxxxxxxxxxx\": 1}",
        "unknown key \"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
        "xxxxxxxxxxxxxxxxxxxxxxxx...\"");
}

static void
test_many_problems_capped(void **state)
{
    struct config_errors errs = {0};
    struct config *cfg = NULL;
    char *text = malloc(300 * 12 + 16);
    size_t i, n = 0;

    (void)state;
    assert_non_null(text);
    n += (size_t)sprintf(text + n, "{");
    for (i = 0; i < 300; i++)
        n += (size_t)sprintf(text + n, "%s\"k%03zu\": 1", i ? ", " : "", i);
    n += (size_t)sprintf(text + n, "}");
    assert_int_equal(config_parse("t.json", text, n, &cfg, &errs), -1);
    assert_int_equal(errs.count, 101);
    assert_string_equal(errs.lines[0], "t.json:1:2: unknown key \"k000\"");
    assert_string_equal(errs.lines[100],
                        "t.json: too many problems; giving up after 100");
    config_errors_clear(&errs);
    free(text);
}

static void
test_load_file_problems(void **state)
{
    static const char *const want[] = {
        FIX "bad-many.json:2:13: node: must not be empty",
        FIX "bad-many.json:3:27: docker.socket: must be an absolute path",
        FIX "bad-many.json:4:27: status.listen: port must be between 1 "
            "and 65535",
        FIX "bad-many.json:5:26: upstream.url: must start with http:// or "
            "https://",
        FIX "bad-many.json:5:50: upstream.headers: \"Bad Name\" is not a "
            "valid header name",
        FIX "bad-many.json:6:34: delete.max_in_flight: must be between 1 "
            "and 1024",
        FIX "bad-many.json:6:57: delete.poll_interval_ms: expected an "
            "integer, got 1.5",
        FIX "bad-many.json:8:9: policies[0]: a remove policy with an empty "
            "match would remove every container; set \"allow_match_all\": "
            "true to mean it",
        FIX "bad-many.json:10:23: log.level: must be \"debug\", \"info\", "
            "\"warn\" or \"error\"",
        FIX "bad-many.json:11:5: unknown key \"extra\"",
        NULL,
    };
    struct config_errors errs = {0};
    struct config *cfg = NULL;
    int rc;

    (void)state;
    rc = config_load(FIX "bad-many.json", &cfg, &errs);
    cfx_assert_lines(rc, cfg, &errs, want);

    rc = config_load(FIX "bad-syntax.json", &cfg, &errs);
    assert_int_equal(rc, -1);
    assert_int_equal(errs.count, 1);
    /* The missing ',' shows at the next key, "delete", columns 5..12. */
    assert_near(errs.lines[0], FIX "bad-syntax.json", 4, 5, 12,
                "invalid JSON: ");
    config_errors_clear(&errs);

    rc = config_load(FIX "empty.json", &cfg, &errs);
    assert_int_equal(rc, -1);
    assert_int_equal(errs.count, 1);
    assert_string_equal(errs.lines[0], FIX "empty.json:1:1: invalid JSON: "
                                           "empty document");
    config_errors_clear(&errs);
}

static void
test_load_unreadable(void **state)
{
    struct config_errors errs = {0};
    struct config *cfg = (struct config *)&errs;

    (void)state;
    assert_int_equal(config_load(FIX "does-not-exist.json", &cfg, &errs), -1);
    assert_null(cfg);
    assert_int_equal(errs.count, 1);
    assert_string_equal(errs.lines[0], FIX "does-not-exist.json: No such "
                                           "file or directory");
    config_errors_clear(&errs);

    assert_int_equal(config_load(FIX, &cfg, &errs), -1);
    assert_int_equal(errs.count, 1);
    assert_string_equal(errs.lines[0], FIX ": Is a directory");
    config_errors_clear(&errs);
}

static void
test_errors_accumulate(void **state)
{
    struct config_errors errs = {0};
    struct config *cfg = NULL;

    (void)state;
    /* A caller may collect problems of two files in one list. */
    assert_int_equal(config_parse("a", "{\"x\": 1}", 8, &cfg, &errs), -1);
    assert_int_equal(config_parse("b", "{\"y\": 1}", 8, &cfg, &errs), -1);
    assert_int_equal(errs.count, 2);
    assert_string_equal(errs.lines[0], "a:1:2: unknown key \"x\"");
    assert_string_equal(errs.lines[1], "b:1:2: unknown key \"y\"");
    config_errors_clear(&errs);
    config_errors_clear(&errs);
    config_errors_clear(NULL);
    config_free(NULL);
    /* errs may be NULL: the caller only wants to know. */
    assert_int_equal(config_parse("c", "{\"x\": 1}", 8, &cfg, NULL), -1);
    assert_null(cfg);
}

static void
assert_same_config(const struct config *a, const struct config *b)
{
    size_t i, j;

    assert_string_equal(a->node, b->node);
    assert_string_equal(a->state_dir, b->state_dir);
    assert_string_equal(a->docker_socket, b->docker_socket);
    assert_int_equal(a->docker_request_timeout_ms,
                     b->docker_request_timeout_ms);
    assert_int_equal(a->docker_reconnect_max_ms, b->docker_reconnect_max_ms);
    assert_string_equal(a->containerd_socket, b->containerd_socket);
    assert_string_equal(a->containerd_namespace, b->containerd_namespace);
    assert_string_equal(a->status_listen, b->status_listen);
    if (a->upstream_url || b->upstream_url)
        assert_string_equal(a->upstream_url ? a->upstream_url : "(null)",
                            b->upstream_url ? b->upstream_url : "(null)");
    assert_int_equal(a->upstream_timeout_ms, b->upstream_timeout_ms);
    assert_int_equal(a->nupstream_headers, b->nupstream_headers);
    for (i = 0; i < a->nupstream_headers; i++) {
        assert_string_equal(a->upstream_headers[i].name,
                            b->upstream_headers[i].name);
        assert_string_equal(a->upstream_headers[i].value,
                            b->upstream_headers[i].value);
    }
    assert_int_equal(a->delete_max_in_flight, b->delete_max_in_flight);
    assert_int_equal(a->delete_poll_interval_ms, b->delete_poll_interval_ms);
    assert_int_equal(a->delete_warn_after_ms, b->delete_warn_after_ms);
    assert_int_equal(a->delete_give_up_after_ms, b->delete_give_up_after_ms);
    assert_int_equal(a->delete_retry_base_ms, b->delete_retry_base_ms);
    assert_int_equal(a->delete_retry_max_ms, b->delete_retry_max_ms);
    assert_int_equal(a->reports_log_max_bytes, b->reports_log_max_bytes);
    assert_int_equal(a->reports_log_keep, b->reports_log_keep);
    assert_int_equal(a->policies.default_action, b->policies.default_action);
    assert_int_equal(a->policies.count, b->policies.count);
    for (i = 0; i < a->policies.count; i++) {
        const struct policy *p = &a->policies.items[i];
        const struct policy *q = &b->policies.items[i];

        assert_string_equal(p->name, q->name);
        assert_int_equal(p->nmatch_labels, q->nmatch_labels);
        for (j = 0; j < p->nmatch_labels; j++) {
            assert_string_equal(p->match_labels[j].key,
                                q->match_labels[j].key);
            assert_string_equal(p->match_labels[j].value,
                                q->match_labels[j].value);
        }
        assert_true((p->match_name == NULL) == (q->match_name == NULL));
        assert_true((p->match_image == NULL) == (q->match_image == NULL));
        if (p->match_name)
            assert_string_equal(p->match_name, q->match_name);
        if (p->match_image)
            assert_string_equal(p->match_image, q->match_image);
        assert_int_equal(p->action, q->action);
        assert_int_equal(p->delay_ms, q->delay_ms);
        assert_int_equal(p->force, q->force);
        assert_int_equal(p->remove_volumes, q->remove_volumes);
        assert_int_equal(p->reap_leaked_tasks, q->reap_leaked_tasks);
        assert_int_equal(p->report, q->report);
    }
    assert_int_equal(a->labels.nallow, b->labels.nallow);
    for (i = 0; i < a->labels.nallow; i++)
        assert_string_equal(a->labels.allow[i], b->labels.allow[i]);
    assert_int_equal(a->labels.ndeny, b->labels.ndeny);
    for (i = 0; i < a->labels.ndeny; i++)
        assert_string_equal(a->labels.deny[i], b->labels.deny[i]);
    assert_int_equal(a->log_level, b->log_level);
    assert_int_equal(a->log_format, b->log_format);
}

static void
test_shipped_default_matches_embedded(void **state)
{
    struct config_errors errs = {0};
    struct config *file = NULL, *def = config_default();

    (void)state;
    assert_non_null(def);
    if (config_load(SHIPPED "reapd.json", &file, &errs) != 0) {
        print_error("%s\n", errs.count ? errs.lines[0] : "?");
        config_errors_clear(&errs);
        config_free(def);
        fail_msg("config/reapd.json does not load");
    }
    assert_same_config(file, def);
    cfx_assert_default_values(file);
    config_free(file);
    config_free(def);
}

static void
test_shipped_titus_example(void **state)
{
    struct config_errors errs = {0};
    struct config *cfg = NULL;
    const struct policy *m;
    struct policy_label task[] = {{(char *)"titus.task_id", (char *)"t-1"}};
    struct policy_label dbg[] = {{(char *)"titus.task_id", (char *)"t-1"},
                                 {(char *)"titus.debug", (char *)"true"}};

    (void)state;
    if (config_load(SHIPPED "titus-example.json", &cfg, &errs) != 0) {
        print_error("%s\n", errs.count ? errs.lines[0] : "?");
        config_errors_clear(&errs);
        fail_msg("config/titus-example.json does not load");
    }
    assert_string_equal(cfg->upstream_url, "http://127.0.0.1:8080/reports");
    assert_true(cfg->nupstream_headers > 0);
    assert_int_equal(cfg->policies.default_action, POLICY_IGNORE);
    assert_int_equal(policy_decide(&cfg->policies, "/x", "i", task, 1, &m),
                     POLICY_REMOVE);
    assert_int_equal(policy_decide(&cfg->policies, "/x", "i", dbg, 2, &m),
                     POLICY_KEEP);
    assert_int_equal(policy_decide(&cfg->policies, "/x", "i", NULL, 0, &m),
                     POLICY_IGNORE);
    assert_false(
        label_filter_keeps(&cfg->labels, "titus.env.DB_PASSWORD", 21));
    assert_true(label_filter_keeps(&cfg->labels, "titus.debug", 11));
    config_free(cfg);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_null_url_and_comments),
        cmocka_unit_test(test_unknown_type_range_at_once),
        cmocka_unit_test(test_malformed_json),
        cmocka_unit_test(test_unterminated_comment),
        cmocka_unit_test(test_not_an_object),
        cmocka_unit_test(test_upstream),
        cmocka_unit_test(test_delete_and_log),
        cmocka_unit_test(test_reports_log),
        cmocka_unit_test(test_key_shown_safely),
        cmocka_unit_test(test_many_problems_capped),
        cmocka_unit_test(test_load_file_problems),
        cmocka_unit_test(test_load_unreadable),
        cmocka_unit_test(test_errors_accumulate),
        cmocka_unit_test(test_shipped_default_matches_embedded),
        cmocka_unit_test(test_shipped_titus_example),
    };

    tu_test_filters(); /* REAPD_TEST_ONLY, TEST_FILTER */
    return cmocka_run_group_tests(tests, NULL, NULL);
}
