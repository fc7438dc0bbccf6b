/*
 * Unit tests for the keys of the config file (agent/config_keys.c): the
 * embedded default, every key set at once, the node's name from the
 * environment, integer settings at their range's ends.
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

#define FIX FIXTURES_DIR "/config/"

static void
test_defaults(void **state)
{
    struct config *cfg = config_default();

    (void)state;
    assert_non_null(cfg);
    cfx_assert_default_values(cfg);
    assert_string_equal(cfg->source, "<default>");
    config_free(cfg);
}

static void
test_empty_object_is_default(void **state)
{
    struct config *cfg = cfx_parse_ok("{}");

    (void)state;
    cfx_assert_default_values(cfg);
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
    cfg = cfx_parse_ok(text);
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
    cfx_expect_message(text, msg);
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

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(t_node_from_env),
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_empty_object_is_default),
        cmocka_unit_test(test_every_key),
        cmocka_unit_test(test_corner_int_range_edges),
    };

    tu_test_filters(); /* REAPD_TEST_ONLY, TEST_FILTER */
    return cmocka_run_group_tests(tests, NULL, NULL);
}
