/*
 * test_record — the durable form of a tracked container: a full round
 * trip keeps every fact the report and the resumed wait need; anything
 * malformed, truncated or of another version is refused, never guessed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "record.h"

static void
sample(struct lc *c, struct record_meta *m, struct label *labels)
{
    struct lc_params p = {
        .action = POLICY_REMOVE,
        .delay_ms = 5,
        .poll_interval_ms = 500,
        .warn_after_ms = 60000,
        .give_up_after_ms = 0,
        .retry_base_ms = 500,
        .retry_max_ms = 30000,
        .containerd = true,
        .reap_leaked_tasks = true,
    };

    lc_init(c, &p);
    c->state = LC_TASK_REAPING;
    c->ran = c->exited = true;
    c->exited_at_ms = 123456; /* monotonic: not kept */
    c->die_seen = c->die_has_code = true;
    c->die_code = 255;
    c->exit_known = true;
    c->exit_code = 7;
    c->source = LC_SRC_CONTAINERD;
    c->destroy_seen = c->gone_polled = true;
    c->removed_by_us = true;
    c->delete_attempts = 3;
    c->anomalies = LC_AN_EXIT_CODE_MISMATCH | LC_AN_TASK_DELETE_TIMEOUT;
    c->task_exit_seen = true;
    c->task_exit_code = 7;
    c->task_delete_seen = true;
    c->task_reaped_done = true;
    c->delete_inflight = true; /* in flight: not kept */
    labels[0].key = "reapd.managed";
    labels[0].value = "true";
    labels[1].key = "quote\"d";
    labels[1].value = "new\nline";
    memset(m, 0, sizeof(*m));
    m->name = "web-1";
    m->image = "img:1";
    m->labels = labels;
    m->nlabels = 2;
    m->policy = "managed";
    m->force = true;
    m->report_on = true;
    m->finished_at = "2026-12-02T12:22:57.864550554Z";
    m->die_nano = 1796213267253993408LL;
    m->exited_wall_ms = 1796213267253LL;
}

static void
t_round_trip(void **state)
{
    struct lc c;
    struct record_meta m;
    struct label labels[2];
    char err[256];
    size_t len;
    char *json;
    struct record *r;
    const struct lc *b;
    const struct record_meta *bm;

    (void)state;
    sample(&c, &m, labels);
    json = record_to_json(&c, &m, &len);
    assert_non_null(json);
    r = record_parse(json, len, err, sizeof(err));
    assert_non_null(r);
    b = record_lc(r);
    bm = record_meta(r);
    assert_int_equal(b->state, LC_TASK_REAPING);
    assert_int_equal(b->p.action, POLICY_REMOVE);
    assert_int_equal(b->p.delay_ms, 5);
    assert_true(b->p.containerd && b->p.reap_leaked_tasks);
    assert_true(b->ran && b->exited);
    assert_int_equal(b->exited_at_ms, 0);
    assert_int_equal(b->die_code, 255);
    assert_int_equal(b->exit_code, 7);
    assert_int_equal(b->source, LC_SRC_CONTAINERD);
    assert_true(b->destroy_seen && b->gone_polled && b->removed_by_us);
    assert_int_equal(b->delete_attempts, 3);
    assert_int_equal(b->anomalies,
                     LC_AN_EXIT_CODE_MISMATCH | LC_AN_TASK_DELETE_TIMEOUT);
    assert_true(b->task_exit_seen && b->task_delete_seen);
    assert_true(b->task_reaped_done);
    assert_int_equal(b->task_deleted, 0);
    assert_false(b->delete_inflight);
    assert_string_equal(bm->name, "web-1");
    assert_string_equal(bm->image, "img:1");
    assert_string_equal(bm->policy, "managed");
    assert_int_equal(bm->nlabels, 2);
    assert_string_equal(bm->labels[1].key, "quote\"d");
    assert_string_equal(bm->labels[1].value, "new\nline");
    assert_true(bm->force && bm->report_on && !bm->volumes);
    assert_null(bm->started_at);
    assert_string_equal(bm->finished_at, "2026-12-02T12:22:57.864550554Z");
    assert_true(bm->die_nano == 1796213267253993408LL);
    assert_true(bm->exited_wall_ms == 1796213267253LL);
    record_free(r);
    free(json);
}

static void
expect_refused(const char *text)
{
    char err[256] = "";
    struct record *r = record_parse(text, strlen(text), err, sizeof(err));

    if (r != NULL)
        fail_msg("accepted: %s", text);
    assert_true(err[0] != '\0');
}

static void
t_refused(void **state)
{
    (void)state;
    expect_refused("");
    expect_refused("[]");
    expect_refused("{}");
    expect_refused("{\"v\":2,\"state\":\"running\"}");
    expect_refused("{\"v\":1,\"state\":\"sleeping\"}");
    expect_refused("{\"v\":1}");
    expect_refused("{\"v\":1,\"state\":\"running\",\"exit_code\":\"7\"}");
    expect_refused("{\"v\":1,\"state\":\"running\",\"ran\":1}");
    expect_refused("{\"v\":1,\"state\":\"running\",\"source\":9}");
    expect_refused("{\"v\":1,\"state\":\"running\",\"action\":3}");
    expect_refused("{\"v\":1,\"state\":\"running\",\"name\":\"a\\u0000b\"}");
    expect_refused("{\"v\":1,\"state\":\"running\",\"task_deleted\":2}");
}

static void
t_every_prefix_refused(void **state)
{
    struct lc c;
    struct record_meta m;
    struct label labels[2];
    char err[256];
    size_t len, i;
    char *json;

    (void)state;
    sample(&c, &m, labels);
    json = record_to_json(&c, &m, &len);
    assert_non_null(json);
    for (i = 0; i < len; i++) {
        /* An exact-size copy, so an over-read would show under ASan. */
        char *cut = malloc(i ? i : 1);
        struct record *r;

        assert_non_null(cut);
        memcpy(cut, json, i);
        r = record_parse(cut, i, err, sizeof(err));
        free(cut);
        if (r != NULL)
            fail_msg("a %zu-byte prefix of %zu was accepted", i, len);
    }
    free(json);
}

static void
t_minimal_record(void **state)
{
    const char *text = "{\"v\":1,\"state\":\"running\",\"poll_interval_ms\":"
                       "500,\"retry_base_ms\":10,\"retry_max_ms\":20}";
    char err[256];
    struct record *r = record_parse(text, strlen(text), err, sizeof(err));

    (void)state;
    assert_non_null(r);
    /* Absent fields keep their zero: a field added later stays readable
     * in older records. */
    assert_int_equal(record_lc(r)->state, LC_RUNNING);
    assert_false(record_lc(r)->exit_known);
    assert_int_equal(record_meta(r)->nlabels, 0);
    assert_null(record_meta(r)->name);
    record_free(r);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(t_round_trip),
        cmocka_unit_test(t_refused),
        cmocka_unit_test(t_every_prefix_refused),
        cmocka_unit_test(t_minimal_record),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
