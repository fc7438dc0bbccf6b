/*
 * Unit tests for the config file: defaults, every key, and every class of
 * problem reported at its exact FILE:LINE:COL, several at once. Also
 * checks that the shipped config/ JSON files load and that
 * config/reapd.json says exactly what config_default() does.
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
#include "testutil.h"

#define FIX     FIXTURES_DIR "/config/"
#define SHIPPED FIXTURES_DIR "/../../config/"

static struct config *
parse_ok(const char *text)
{
    struct config_errors errs = {0};
    struct config *cfg = NULL;
    size_t i;

    if (config_parse("t.json", text, strlen(text), &cfg, &errs) != 0) {
        for (i = 0; i < errs.count; i++)
            print_error("%s\n", errs.lines[i]);
        config_errors_clear(&errs);
        fail_msg("config did not parse");
    }
    assert_non_null(cfg);
    assert_int_equal(errs.count, 0);
    return cfg;
}

/* Asserts that the problems are exactly `want` (NULL-terminated). */
static void
assert_lines(int rc, struct config *cfg, struct config_errors *errs,
             const char *const *want)
{
    size_t n = 0, i;
    bool same;

    while (want[n])
        n++;
    same = rc == -1 && cfg == NULL && errs->count == n;
    for (i = 0; same && i < n; i++)
        same = strcmp(errs->lines[i], want[i]) == 0;
    if (!same) {
        print_error("rc %d, want:\n", rc);
        for (i = 0; i < n; i++)
            print_error("  %s\n", want[i]);
        print_error("got:\n");
        for (i = 0; i < errs->count; i++)
            print_error("  %s\n", errs->lines[i]);
        config_free(cfg);
        config_errors_clear(errs);
        fail_msg("problems differ");
    }
    config_errors_clear(errs);
    assert_null(errs->lines);
    assert_int_equal(errs->count, 0);
}

static void
expect_errors(const char *text, const char *const *want)
{
    struct config_errors errs = {0};
    struct config *cfg = (struct config *)&errs; /* must be reset */
    int rc;

    rc = config_parse("t.json", text, strlen(text), &cfg, &errs);
    assert_lines(rc, cfg, &errs, want);
}

/* The one problem `text` has, without its location. */
static void
expect_message(const char *text, const char *msg)
{
    struct config_errors errs = {0};
    struct config *cfg = NULL;
    const char *p;
    int rc;

    rc = config_parse("t.json", text, strlen(text), &cfg, &errs);
    if (rc != -1 || errs.count != 1) {
        print_error("input: %s\n", text);
        config_free(cfg);
        config_errors_clear(&errs);
        fail_msg("want exactly one problem, got %zu (rc %d)", errs.count, rc);
    }
    /* Skip "t.json:LINE:COL: ". */
    p = strchr(errs.lines[0], ' ');
    assert_non_null(p);
    if (strcmp(p + 1, msg) != 0) {
        print_error("input: %s\n", text);
        print_error("want: %s\ngot:  %s\n", msg, p + 1);
        config_errors_clear(&errs);
        fail_msg("wrong message");
    }
    config_errors_clear(&errs);
}

static void
assert_default_values(const struct config *cfg)
{
    char host[256] = "";
    const struct policy *p;

    assert_int_equal(gethostname(host, sizeof(host) - 1), 0);
    assert_string_equal(cfg->node, host);
    assert_string_equal(cfg->state_dir, "/var/lib/reapd");
    assert_string_equal(cfg->docker_socket, "/var/run/docker.sock");
    assert_int_equal(cfg->docker_request_timeout_ms, 30000);
    assert_int_equal(cfg->docker_reconnect_max_ms, 30000);
    assert_string_equal(cfg->containerd_socket, "auto");
    assert_string_equal(cfg->containerd_namespace, "moby");
    assert_string_equal(cfg->status_listen, "127.0.0.1:9323");
    assert_string_equal(cfg->admin_socket, "/run/reapd/admin.sock");
    assert_null(cfg->upstream_url);
    assert_int_equal(cfg->upstream_timeout_ms, 5000);
    assert_int_equal(cfg->nupstream_headers, 0);
    assert_int_equal(cfg->delete_max_in_flight, 8);
    assert_int_equal(cfg->delete_poll_interval_ms, 500);
    assert_int_equal(cfg->delete_warn_after_ms, 60000);
    assert_int_equal(cfg->delete_give_up_after_ms, 0);
    assert_int_equal(cfg->delete_retry_base_ms, 500);
    assert_int_equal(cfg->delete_retry_max_ms, 30000);
    assert_int_equal(cfg->reports_log_max_bytes, 64 << 20);
    assert_int_equal(cfg->reports_log_keep, 5);
    assert_int_equal(cfg->policies.default_action, POLICY_IGNORE);
    assert_int_equal(cfg->policies.count, 1);
    p = &cfg->policies.items[0];
    assert_string_equal(p->name, "managed");
    assert_int_equal(p->nmatch_labels, 1);
    assert_string_equal(p->match_labels[0].key, "reapd.managed");
    assert_string_equal(p->match_labels[0].value, "true");
    assert_null(p->match_name);
    assert_null(p->match_image);
    assert_int_equal(p->action, POLICY_REMOVE);
    assert_int_equal(p->delay_ms, 0);
    assert_true(p->force);
    assert_false(p->remove_volumes);
    assert_true(p->reap_leaked_tasks);
    assert_true(p->report);
    assert_int_equal(cfg->log_level, LOG_LEVEL_INFO);
    assert_int_equal(cfg->log_format, LOG_FORMAT_TEXT);
}

static void
test_defaults(void **state)
{
    struct config *cfg = config_default();

    (void)state;
    assert_non_null(cfg);
    assert_default_values(cfg);
    assert_string_equal(cfg->source, "<default>");
    config_free(cfg);
}

static void
test_empty_object_is_default(void **state)
{
    struct config *cfg = parse_ok("{}");

    (void)state;
    assert_default_values(cfg);
    assert_string_equal(cfg->source, "t.json");
    config_free(cfg);
}

static void
test_every_key(void **state)
{
    struct config_errors errs = {0};
    struct config *cfg = NULL;
    const struct policy *p;

    (void)state;
    assert_int_equal(config_load(FIX "good-full.json", &cfg, &errs), 0);
    assert_int_equal(errs.count, 0);
    assert_string_equal(cfg->source, FIX "good-full.json");
    assert_string_equal(cfg->node, "node-7");
    assert_string_equal(cfg->state_dir, "/srv/reapd");
    assert_string_equal(cfg->docker_socket, "/run/docker.sock");
    assert_int_equal(cfg->docker_request_timeout_ms, 1000);
    assert_int_equal(cfg->docker_reconnect_max_ms, 2000);
    assert_string_equal(cfg->containerd_socket,
                        "/run/containerd/containerd.sock");
    assert_string_equal(cfg->containerd_namespace, "k8s.io");
    assert_string_equal(cfg->status_listen, "unix:/run/reapd/status.sock");
    assert_string_equal(cfg->upstream_url, "https://reports.example/v1/in");
    assert_int_equal(cfg->upstream_timeout_ms, 750);
    assert_int_equal(cfg->nupstream_headers, 2);
    assert_string_equal(cfg->upstream_headers[0].name, "Authorization");
    assert_string_equal(cfg->upstream_headers[0].value, "Bearer t0k3n");
    assert_string_equal(cfg->upstream_headers[1].name, "X-Node");
    assert_string_equal(cfg->upstream_headers[1].value, "n7");
    assert_int_equal(cfg->delete_max_in_flight, 3);
    assert_int_equal(cfg->delete_poll_interval_ms, 20);
    assert_int_equal(cfg->delete_warn_after_ms, 0);
    assert_int_equal(cfg->delete_give_up_after_ms, 90000);
    assert_int_equal(cfg->delete_retry_base_ms, 50);
    assert_int_equal(cfg->delete_retry_max_ms, 5000);
    assert_int_equal(cfg->reports_log_max_bytes, 1048576);
    assert_int_equal(cfg->reports_log_keep, 0);
    assert_int_equal(cfg->policies.default_action, POLICY_KEEP);
    assert_int_equal(cfg->policies.count, 2);

    p = &cfg->policies.items[0];
    assert_string_equal(p->name, "debug");
    assert_int_equal(p->nmatch_labels, 2);
    assert_string_equal(p->match_labels[0].key, "team");
    assert_string_equal(p->match_labels[0].value, "infra");
    assert_string_equal(p->match_labels[1].key, "debug");
    assert_string_equal(p->match_labels[1].value, "*");
    assert_string_equal(p->match_name, "web-[0-9]*");
    assert_string_equal(p->match_image, "registry.example/*:*");
    assert_int_equal(p->action, POLICY_KEEP);
    assert_int_equal(p->delay_ms, 1500);
    assert_false(p->force);
    assert_true(p->remove_volumes);
    assert_false(p->reap_leaked_tasks);
    assert_false(p->report);

    p = &cfg->policies.items[1];
    assert_string_equal(p->name, "everything-else");
    assert_int_equal(p->nmatch_labels, 0);
    assert_null(p->match_name);
    assert_null(p->match_image);
    assert_int_equal(p->action, POLICY_REMOVE);
    assert_true(p->force);
    assert_false(p->remove_volumes);
    assert_true(p->reap_leaked_tasks);
    assert_true(p->report);

    assert_int_equal(cfg->log_level, LOG_LEVEL_DEBUG);
    assert_int_equal(cfg->log_format, LOG_FORMAT_JSON);
    config_free(cfg);
}

static void
test_policy_list_replaces_default(void **state)
{
    struct config *cfg;

    (void)state;
    cfg = parse_ok("{\"default_action\": \"keep\", \"policies\": []}");
    assert_int_equal(cfg->policies.count, 0);
    /* default_action given before the list survives it. */
    assert_int_equal(cfg->policies.default_action, POLICY_KEEP);
    config_free(cfg);

    cfg = parse_ok("{\"policies\": [{\"name\": \"k\", \"action\": "
                   "\"keep\"}]}");
    assert_int_equal(cfg->policies.count, 1);
    assert_string_equal(cfg->policies.items[0].name, "k");
    assert_int_equal(cfg->policies.items[0].nmatch_labels, 0);
    config_free(cfg);
}

static void
test_null_url_and_comments(void **state)
{
    struct config *cfg;

    (void)state;
    cfg = parse_ok("// leading\n"
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
    expect_errors("{\n"
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
    expect_errors("{\n  \"a\": 1\n  3\n}\n", want);

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
    expect_errors("// a list is not a config\n[1, 2]\n", want);
}

static void
test_invalid_glob(void **state)
{
    static const char *const want[] = {
        "t.json:3:24: policies[0].match.name: invalid glob \"web-[0-9\": "
        "unbalanced '[' (no closing ']')",
        "t.json:4:25: policies[0].match.image: invalid glob \"img\\\": "
        "ends with a lone '\\'",
        NULL,
    };

    (void)state;
    expect_errors("{\"policies\": [\n"
                  "  { \"name\": \"p\", \"action\": \"keep\",\n"
                  "    \"match\": { \"name\": \"web-[0-9\",\n"
                  "               \"image\": \"img\\\\\" } }\n"
                  "]}\n",
                  want);
}

static void
test_glob_classes_accepted(void **state)
{
    static const char *const good[] = {
        "[[:alpha:]]*", "[]x]", "[!]]", "x\\[", "[a-z\\]]", "*", "[^0-9]",
    };
    char text[256];
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        struct config *cfg;
        char esc[64];
        size_t j, k = 0;

        for (j = 0; good[i][j]; j++) {
            if (good[i][j] == '\\')
                esc[k++] = '\\';
            esc[k++] = good[i][j];
        }
        esc[k] = '\0';
        snprintf(text, sizeof(text),
                 "{\"policies\": [{\"name\": \"p\", \"action\": \"keep\", "
                 "\"match\": {\"name\": \"%s\"}}]}",
                 esc);
        cfg = parse_ok(text);
        assert_string_equal(cfg->policies.items[0].match_name, good[i]);
        config_free(cfg);
    }
    expect_message("{\"policies\": [{\"name\": \"p\", \"action\": \"keep\", "
                   "\"match\": {\"image\": \"[[:alpha:]\"}}]}",
                   "policies[0].match.image: invalid glob \"[[:alpha:]\": "
                   "unbalanced '[' (no closing ']')");
    /* A ']' right after '[' is a member, so "[]" is still open. */
    expect_message("{\"policies\": [{\"name\": \"p\", \"action\": \"keep\", "
                   "\"match\": {\"name\": \"web-[]\"}}]}",
                   "policies[0].match.name: invalid glob \"web-[]\": "
                   "unbalanced '[' (no closing ']')");
    expect_message("{\"policies\": [{\"name\": \"p\", \"action\": \"keep\", "
                   "\"match\": {\"name\": \"\"}}]}",
                   "policies[0].match.name: invalid glob \"\": must not be "
                   "empty");
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
    expect_errors(
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
    expect_errors("{\"policies\": [\n"
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
    cfg = parse_ok("{\"policies\": ["
                   "{\"name\": \"a\", \"action\": \"remove\", "
                   "\"allow_match_all\": true},"
                   "{\"name\": \"k\", \"action\": \"keep\"},"
                   "{\"name\": \"i\", \"action\": \"ignore\", \"match\": {}},"
                   "{\"name\": \"r\", \"action\": \"remove\", "
                   "\"match\": {\"image\": \"*\"}}]}");
    assert_int_equal(cfg->policies.count, 4);
    config_free(cfg);
}

#define LISTEN(v) "{\"status\": {\"listen\": \"" v "\"}}"

static void
test_listen(void **state)
{
    static const char *const good[] = {
        "off",
        "127.0.0.1:9323",
        "0.0.0.0:1",
        "localhost:65535",
        "[::1]:80",
        "[::]:9323",
        "unix:/run/r.sock",
        "my-host.lan:80",
        /* 107 bytes of path, the most a sockaddr_un holds */
        ("unix:/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
         "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"),
    };
    char text[256];
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        struct config *cfg;

        snprintf(text, sizeof(text), LISTEN("%s"), good[i]);
        cfg = parse_ok(text);
        assert_string_equal(cfg->status_listen, good[i]);
        config_free(cfg);
    }
    expect_message(LISTEN("9323"), "status.listen: expected \"HOST:PORT\", "
                                   "\"unix:/path\" or \"off\"");
    expect_message(LISTEN(":9323"),
                   "status.listen: expected \"HOST:PORT\": the host is "
                   "missing");
    expect_message(LISTEN("h:0"),
                   "status.listen: port must be between 1 and 65535");
    expect_message(LISTEN("h:65536"),
                   "status.listen: port must be between 1 and 65535");
    expect_message(LISTEN("h:"),
                   "status.listen: port must be between 1 and 65535");
    expect_message(LISTEN("h:12a"),
                   "status.listen: port must be between 1 and 65535");
    expect_message(LISTEN("h:99999999999999999999"),
                   "status.listen: port must be between 1 and 65535");
    expect_message(LISTEN("::1:80"), "status.listen: invalid host (use "
                                     "[ADDR] for IPv6)");
    expect_message(LISTEN("[::1:80"), "status.listen: an IPv6 host must be "
                                      "written \"[ADDR]:PORT\"");
    expect_message(LISTEN("[zz]:80"), "status.listen: invalid IPv6 address");
    expect_message(LISTEN("unix:run/r.sock"),
                   "status.listen: unix socket path must be absolute "
                   "(\"unix:/path\")");
    expect_message(
        LISTEN("unix:/" /* 108 bytes of path: no room left for the NUL */
               "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
               "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
               "aa"),
        "status.listen: unix socket path is too long (at most 107 bytes)");
    expect_message("{\"status\": {\"listen\": 9323}}",
                   "status.listen: expected a string, got number");
}

static void
test_sockets(void **state)
{
    struct config *cfg;

    (void)state;
    cfg = parse_ok("{\"containerd\": {\"socket\": \"off\"}}");
    assert_string_equal(cfg->containerd_socket, "off");
    config_free(cfg);
    cfg = parse_ok("{\"containerd\": {\"socket\": \"/run/c.sock\"}}");
    assert_string_equal(cfg->containerd_socket, "/run/c.sock");
    config_free(cfg);

    expect_message("{\"containerd\": {\"socket\": \"on\"}}",
                   "containerd.socket: must be \"auto\", \"off\" or an "
                   "absolute path");
    expect_message("{\"containerd\": {\"namespace\": \"\"}}",
                   "containerd.namespace: must start with a letter or "
                   "digit");
    expect_message("{\"containerd\": {\"namespace\": \"a/b\"}}",
                   "containerd.namespace: may hold only letters, digits, "
                   "'.', '_' and '-'");
    expect_message("{\"docker\": {\"socket\": \"tcp://h:2375\"}}",
                   "docker.socket: must be an absolute path");
    expect_message("{\"state_dir\": \"var/lib\"}",
                   "state_dir: must be an absolute path");
    expect_message("{\"node\": \"a\\u0000b\"}",
                   "node: must not contain NUL characters");
    expect_message("{\"docker\": {\"request_timeout_ms\": 99}}",
                   "docker.request_timeout_ms: must be between 100 and "
                   "3600000");
}

static void
test_upstream(void **state)
{
    struct config *cfg;

    (void)state;
    cfg = parse_ok("{\"upstream\": {\"url\": \"http://127.0.0.1:8080/r\","
                   " \"headers\": {\"X-A\": \"1\", \"x-b\": \"\"}}}");
    assert_string_equal(cfg->upstream_url, "http://127.0.0.1:8080/r");
    assert_int_equal(cfg->nupstream_headers, 2);
    assert_string_equal(cfg->upstream_headers[1].name, "x-b");
    assert_string_equal(cfg->upstream_headers[1].value, "");
    config_free(cfg);

    expect_message("{\"upstream\": {\"url\": \"ftp://h/\"}}",
                   "upstream.url: must start with http:// or https://");
    expect_message("{\"upstream\": {\"url\": \"https://\"}}",
                   "upstream.url: has no host");
    expect_message("{\"upstream\": {\"url\": \"http://h/a b\"}}",
                   "upstream.url: must not contain spaces or control "
                   "characters");
    expect_message("{\"upstream\": {\"url\": 1}}",
                   "upstream.url: expected a string, got number");
    expect_message("{\"upstream\": {\"headers\": []}}",
                   "upstream.headers: expected an object, got array");
    expect_message("{\"upstream\": {\"headers\": {\"X:Y\": \"v\"}}}",
                   "upstream.headers: \"X:Y\" is not a valid header name");
    expect_message("{\"upstream\": {\"headers\": {\"\": \"v\"}}}",
                   "upstream.headers: \"\" is not a valid header name");
    expect_message("{\"upstream\": {\"headers\": {\"X\": \"a\\r\\nB: c\"}}}",
                   "upstream.headers.X: must not contain CR, LF or NUL");
    expect_message("{\"upstream\": {\"headers\": {\"X\": \"a\\rb\"}}}",
                   "upstream.headers.X: must not contain CR, LF or NUL");
    expect_message("{\"upstream\": {\"headers\": {\"X\": \"a\\u0000\"}}}",
                   "upstream.headers.X: must not contain CR, LF or NUL");
    expect_message("{\"upstream\": {\"headers\": {\"X\": 5}}}",
                   "upstream.headers.X: expected a string, got number");
    expect_message("{\"upstream\": {\"headers\": {\"idempotency-key\": "
                   "\"v\"}}}",
                   "upstream.headers: \"idempotency-key\" is set by reapd "
                   "itself");
    expect_message("{\"upstream\": {\"headers\": {\"X-A\": \"1\", "
                   "\"x-a\": \"2\"}}}",
                   "duplicate key \"x-a\" in upstream.headers");
    expect_message("{\"upstream\": {\"timeout_ms\": 600001}}",
                   "upstream.timeout_ms: must be between 100 and 600000");
}

static void
test_delete_and_log(void **state)
{
    struct config *cfg;

    (void)state;
    cfg = parse_ok("{\"delete\": {\"max_in_flight\": 1024, "
                   "\"give_up_after_ms\": 604800000, "
                   "\"retry_base_ms\": 7000, \"retry_max_ms\": 7000}, "
                   "\"log\": {\"level\": \"error\"}}");
    assert_int_equal(cfg->delete_max_in_flight, 1024);
    assert_int_equal(cfg->delete_give_up_after_ms, 604800000);
    assert_int_equal(cfg->log_level, LOG_LEVEL_ERROR);
    assert_int_equal(cfg->log_format, LOG_FORMAT_TEXT);
    config_free(cfg);

    expect_message("{\"delete\": {\"max_in_flight\": 1025}}",
                   "delete.max_in_flight: must be between 1 and 1024");
    expect_message("{\"delete\": {\"max_in_flight\": 1e2}}",
                   "delete.max_in_flight: expected an integer, got 1e2");
    expect_message(
        "{\"delete\": {\"max_in_flight\": 99999999999999999999999}}",
        "delete.max_in_flight: expected an integer, got "
        "99999999999999999999999");
    expect_message("{\"delete\": {\"warn_after_ms\": null}}",
                   "delete.warn_after_ms: expected an integer, got null");
    expect_message("{\"delete\": {\"retry_base_ms\": 40000}}",
                   "delete.retry_base_ms: must not exceed "
                   "delete.retry_max_ms (40000 > 30000)");
    expect_message("{\"log\": {\"format\": \"xml\"}}",
                   "log.format: must be \"text\" or \"json\"");
    expect_message("{\"log\": {\"level\": 3}}",
                   "log.level: expected a string, got number");
    expect_message("{\"log\": {\"colour\": true}}",
                   "unknown key \"colour\" in log");
    expect_message("{\"node\": \"a\", \"node\": \"b\"}",
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
    cfg = parse_ok("{\"reports_log\": {\"max_bytes\": 0, \"keep\": 0}}");
    assert_int_equal(cfg->reports_log_max_bytes, 0);
    assert_int_equal(cfg->reports_log_keep, 0);
    config_free(cfg);
    cfg = parse_ok("{\"reports_log\": {\"max_bytes\": 65536, "
                   "\"keep\": 100}}");
    assert_int_equal(cfg->reports_log_max_bytes, 65536);
    assert_int_equal(cfg->reports_log_keep, 100);
    json = config_to_json(cfg, true, NULL);
    assert_non_null(json);
    assert_non_null(
        strstr(json, "\"reports_log\":{\"max_bytes\":65536,\"keep\":100}"));
    free(json);
    config_free(cfg);
    cfg = parse_ok("{\"reports_log\": {\"max_bytes\": 1099511627776}}");
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

    expect_message("{\"reports_log\": {\"max_bytes\": 65535}}",
                   "reports_log.max_bytes: must be 0 (never rotate) or "
                   "between 65536 and 1099511627776");
    expect_message("{\"reports_log\": {\"max_bytes\": 1}}",
                   "reports_log.max_bytes: must be 0 (never rotate) or "
                   "between 65536 and 1099511627776");
    expect_message("{\"reports_log\": {\"max_bytes\": 1099511627777}}",
                   "reports_log.max_bytes: must be between 0 and "
                   "1099511627776");
    expect_message("{\"reports_log\": {\"max_bytes\": -1}}",
                   "reports_log.max_bytes: must be between 0 and "
                   "1099511627776");
    expect_message("{\"reports_log\": {\"max_bytes\": \"64M\"}}",
                   "reports_log.max_bytes: expected an integer, got string");
    expect_message("{\"reports_log\": {\"keep\": 101}}",
                   "reports_log.keep: must be between 0 and 100");
    expect_message("{\"reports_log\": {\"keep\": -1}}",
                   "reports_log.keep: must be between 0 and 100");
    expect_message("{\"reports_log\": {\"max_files\": 3}}",
                   "unknown key \"max_files\" in reports_log");
    expect_message("{\"reports_log\": 5}",
                   "reports_log: expected an object, got number");
}

static void
test_key_shown_safely(void **state)
{
    (void)state;
    /* A key with a newline must not break the one-line-per-problem rule. */
    expect_message("{\"a\\nb\": 1}", "unknown key \"a?b\"");
    expect_message("{\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
                   "xxxxxxxxxxxxxxxxxxxxxxxxxx\": 1}",
                   "unknown key \"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
                   "xxxxxxxxxxxxxxxxxxxxxxxx...\"");
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
    expect_errors(text, want);

    /* Without the two over their bounds: accepted, kept whole. */
    n = 0;
    n += (size_t)sprintf(text + n, "{\"policies\": [\n");
    n += label_policy(text + n, "a", 1024, 512);
    n += (size_t)sprintf(text + n, "\n]}\n");
    text[n] = '\0';
    cfg = parse_ok(text);
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
        cfg = parse_ok(ok);
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
    expect_errors(text, want);
    free(text);
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
    assert_lines(rc, cfg, &errs, want);

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
    assert_default_values(file);
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

/* The node's name from the environment (a DaemonSet's downward API):
 * the default, which a "node" in the file still overrides; an empty
 * value is no value. admin.socket takes an absolute path or "off". */
static void
t_node_from_env(void **state)
{
    struct config *cfg;
    char host[256] = "";

    (void)state;
    assert_int_equal(gethostname(host, sizeof(host) - 1), 0);
    assert_int_equal(setenv("REAPD_NODE_NAME", "node-from-env", 1), 0);
    cfg = config_default();
    assert_non_null(cfg);
    assert_string_equal(cfg->node, "node-from-env");
    config_free(cfg);
    cfg = tu_config("{\"node\": \"in-file\"}");
    assert_string_equal(cfg->node, "in-file");
    config_free(cfg);
    cfg = tu_config("{\"state_dir\": \"/x\"}");
    assert_string_equal(cfg->node, "node-from-env");
    config_free(cfg);
    assert_int_equal(setenv("REAPD_NODE_NAME", "", 1), 0);
    cfg = config_default();
    assert_string_equal(cfg->node, host);
    config_free(cfg);
    assert_int_equal(unsetenv("REAPD_NODE_NAME"), 0);

    cfg = tu_config("{\"admin\": {\"socket\": \"off\"}}");
    assert_string_equal(cfg->admin_socket, "off");
    config_free(cfg);
    {
        struct config_errors errs = {0};
        struct config *bad = NULL;
        static const char text[] = "{\"admin\": {\"socket\": \"rel/x\"}}";

        assert_int_not_equal(
            config_parse("t", text, sizeof(text) - 1, &bad, &errs), 0);
        assert_null(bad);
        assert_true(errs.count >= 1);
        assert_non_null(strstr(errs.lines[0], "admin.socket"));
        config_errors_clear(&errs);
    }
}

/* One integer setting at `value`: parsed, it is `*out`. */
static void
int_accepted(const char *section, const char *key, long long value,
             const int64_t *(*field)(const struct config *))
{
    char text[256];
    struct config *cfg;

    snprintf(text, sizeof(text), "{\"%s\": {\"%s\": %lld}}", section, key,
             value);
    cfg = parse_ok(text);
    assert_int_equal(*field(cfg), value);
    config_free(cfg);
}

/* One integer setting at `value`: refused, saying its range. */
static void
int_refused(const char *section, const char *key, long long value,
            long long min, long long max)
{
    char text[256], msg[256];

    snprintf(text, sizeof(text), "{\"%s\": {\"%s\": %lld}}", section, key,
             value);
    snprintf(msg, sizeof(msg), "%s.%s: must be between %lld and %lld", section,
             key, min, max);
    expect_message(text, msg);
}

static const int64_t *
f_delete_max_in_flight(const struct config *c)
{
    return &c->delete_max_in_flight;
}

static const int64_t *
f_status_max_connections(const struct config *c)
{
    return &c->status_max_connections;
}

static const int64_t *
f_delete_poll_interval_ms(const struct config *c)
{
    return &c->delete_poll_interval_ms;
}

/* An integer setting's range at its edges: its minimum and maximum are
 * taken, one below and one above are refused. */
static void
test_corner_int_range_edges(void **state)
{
    static const struct {
        const char *section, *key;
        long long min, max;
        const int64_t *(*field)(const struct config *);
    } f[] = {
        {"delete", "max_in_flight", 1, 1024, f_delete_max_in_flight},
        {"status", "max_connections", 1, 65536, f_status_max_connections},
        {"delete", "poll_interval_ms", 10, 3600000, f_delete_poll_interval_ms},
    };
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(f) / sizeof(f[0]); i++) {
        int_accepted(f[i].section, f[i].key, f[i].min, f[i].field);
        int_accepted(f[i].section, f[i].key, f[i].min + 1, f[i].field);
        int_accepted(f[i].section, f[i].key, f[i].max, f[i].field);
        int_refused(f[i].section, f[i].key, f[i].min - 1, f[i].min, f[i].max);
        int_refused(f[i].section, f[i].key, f[i].max + 1, f[i].min, f[i].max);
    }
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

    cfg = parse_ok("{\"labels\": {\"allow\": [], \"deny\": []}}");
    assert_true(keeps(cfg, "anything"));
    config_free(cfg);

    cfg = parse_ok("{\"labels\": {\"allow\": [\"app.*\", \"team\"]}}");
    assert_true(keeps(cfg, "app.tier"));
    assert_true(keeps(cfg, "app.a/b.c")); /* '*' spans '.' and '/' */
    assert_true(keeps(cfg, "team"));
    assert_false(keeps(cfg, "teams"));
    assert_false(keeps(cfg, "com.example.db-password"));
    config_free(cfg);

    cfg = parse_ok("{\"labels\": {\"deny\": [\"*password*\", "
                   "\"secret.[0-9]\"]}}");
    assert_false(keeps(cfg, "com.example.db-password"));
    assert_false(keeps(cfg, "secret.7"));
    assert_true(keeps(cfg, "secret.x"));
    assert_true(keeps(cfg, "app.tier"));
    config_free(cfg);

    cfg = parse_ok("{\"labels\": {\"allow\": [\"com.example.*\"],\n"
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
    expect_errors("{\"labels\": {\n"
                  "  \"allow\": \"app.*\",\n"
                  "  \"deny\": [\"ok*\", \"db-[0-9\", 7, \"\"],\n"
                  "  \"keep\": []\n"
                  "}}\n",
                  want);
    expect_message("{\"labels\": []}",
                   "labels: expected an object, got array");
    expect_message("{\"labels\": {\"deny\": [\"a\\u0000b\"]}}",
                   "labels.deny[0]: must not contain NUL characters");
    expect_message("{\"labels\": {\"deny\": [\"a\"], \"deny\": [\"b\"]}}",
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
            cfg = parse_ok(t);
            assert_int_equal(i ? cfg->labels.ndeny : cfg->labels.nallow, n);
            config_free(cfg);
            free(t);
        }
        t = globs_text(lists[i], CONFIG_LABEL_GLOBS + 1, 3);
        snprintf(msg, sizeof(msg), "labels.%s: more than 64 globs", lists[i]);
        expect_message(t, msg);
        free(t);

        for (n = CONFIG_LABEL_GLOB_MAX - 1; n <= CONFIG_LABEL_GLOB_MAX; n++) {
            t = globs_text(lists[i], 1, n);
            cfg = parse_ok(t);
            assert_int_equal(
                strlen(i ? cfg->labels.deny[0] : cfg->labels.allow[0]), n);
            config_free(cfg);
            free(t);
        }
        t = globs_text(lists[i], 1, CONFIG_LABEL_GLOB_MAX + 1);
        snprintf(msg, sizeof(msg), "labels.%s[0]: glob longer than 256 bytes",
                 lists[i]);
        expect_message(t, msg);
        free(t);
    }
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(t_node_from_env),
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_empty_object_is_default),
        cmocka_unit_test(test_every_key),
        cmocka_unit_test(test_policy_list_replaces_default),
        cmocka_unit_test(test_null_url_and_comments),
        cmocka_unit_test(test_unknown_type_range_at_once),
        cmocka_unit_test(test_corner_int_range_edges),
        cmocka_unit_test(test_malformed_json),
        cmocka_unit_test(test_unterminated_comment),
        cmocka_unit_test(test_not_an_object),
        cmocka_unit_test(test_invalid_glob),
        cmocka_unit_test(test_glob_classes_accepted),
        cmocka_unit_test(test_policy_problems),
        cmocka_unit_test(test_policy_label_sizes),
        cmocka_unit_test(test_policy_label_count),
        cmocka_unit_test(test_remove_all_refused),
        cmocka_unit_test(test_remove_all_allowed),
        cmocka_unit_test(test_listen),
        cmocka_unit_test(test_sockets),
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
        cmocka_unit_test(test_label_filter),
        cmocka_unit_test(test_label_filter_problems),
        cmocka_unit_test(test_corner_label_glob_bounds),
    };

    tu_test_filters(); /* REAPD_TEST_ONLY, TEST_FILTER */
    return cmocka_run_group_tests(tests, NULL, NULL);
}
