/*
 * config_fx — what the config's unit tests (tests/unit/test_config*.c)
 * share; see config_fx.h.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "config.h"
#include "config_fx.h"

struct config *
cfx_parse_ok(const char *text)
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
void
cfx_assert_lines(int rc, struct config *cfg, struct config_errors *errs,
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

void
cfx_expect_errors(const char *text, const char *const *want)
{
    struct config_errors errs = {0};
    struct config *cfg = (struct config *)&errs; /* must be reset */
    int rc;

    rc = config_parse("t.json", text, strlen(text), &cfg, &errs);
    cfx_assert_lines(rc, cfg, &errs, want);
}

/* The one problem `text` has, without its location. */
void
cfx_expect_message(const char *text, const char *msg)
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

void
cfx_assert_default_values(const struct config *cfg)
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
