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

#include "bounds.h"
#include "record.h"
#include "report.h"
#include "testutil.h"

static void
sample(struct lc *c, struct record_meta *m, struct policy_label *labels)
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
    struct policy_label labels[2];
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
    /* Every version wrote these; read as 0 they could not be written
     * back (0 is out of their range). */
    expect_refused("{\"v\":1,\"state\":\"running\"}");
    expect_refused("{\"v\":1,\"state\":\"running\",\"retry_base_ms\":10,"
                   "\"retry_max_ms\":20}");
    expect_refused("{\"v\":1,\"state\":\"running\",\"poll_interval_ms\":5,"
                   "\"retry_max_ms\":20}");
    expect_refused("{\"v\":1,\"state\":\"running\",\"poll_interval_ms\":5,"
                   "\"retry_base_ms\":10}");
    expect_refused("{\"v\":1,\"state\":\"running\",\"poll_interval_ms\":0,"
                   "\"retry_base_ms\":10,\"retry_max_ms\":20}");
}

static void
t_every_prefix_refused(void **state)
{
    struct lc c;
    struct record_meta m;
    struct policy_label labels[2];
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

/*
 * A running container's record: most fields at their zero, which are
 * left out (the database half the size). What is left reads back to the
 * same record, written again the same text.
 */
static void
t_zeros_left_out(void **state)
{
    struct lc_params p = {.action = POLICY_REMOVE,
                          .poll_interval_ms = 500,
                          .retry_base_ms = 500,
                          .retry_max_ms = 30000};
    struct policy_label label = {"reapd.managed", "true"};
    struct record_meta m = {.name = "web-1",
                            .image = "img:1",
                            .labels = &label,
                            .nlabels = 1,
                            .policy = "managed"};
    struct lc c;
    char err[256];
    size_t len, len2;
    char *json, *again;
    struct record *r;

    (void)state;
    lc_init(&c, &p);
    c.ran = true;
    json = record_to_json(&c, &m, &len);
    assert_non_null(json);
    if (strstr(json, "false") != NULL || strstr(json, "null") != NULL ||
        strstr(json, ":0,") != NULL || strstr(json, ":0}") != NULL)
        fail_msg("a zero written: %s", json);
    assert_non_null(strstr(json, "\"poll_interval_ms\":500"));
    assert_true(len < 300);
    r = record_parse(json, len, err, sizeof(err));
    if (r == NULL)
        fail_msg("not read back: %s", err);
    again = record_to_json(record_lc(r), record_meta(r), &len2);
    assert_non_null(again);
    assert_string_equal(again, json);
    assert_int_equal(record_lc(r)->task_deleted, c.task_deleted);
    free(again);
    record_free(r);
    free(json);
}

/* ---- at and past the bounds ------------------------------------------ */

/* A record written and read back; NULL (with the reason printed) when
 * the reader refuses what the writer wrote. */
static struct record *
write_read(const struct lc *c, const struct record_meta *m, size_t *len)
{
    char err[256] = "";
    char *json = record_to_json(c, m, len);
    struct record *r;

    assert_non_null(json);
    assert_true(*len <= LIMIT_RECORD_BYTES);
    r = record_parse(json, *len, err, sizeof(err));
    free(json);
    if (r == NULL)
        fail_msg("record of %zu bytes not readable: %s", *len, err);
    return r;
}

/*
 * The most bounds.h lets a container keep: 320 (LIMIT_LABELS_STORED)
 * labels of 393216 (LIMIT_LABELS_STORED_BYTES) bytes together, as 64
 * labels with the longest key and value (1024 + 4096) and 256 sharing
 * 65536 (16 + 240 each), the longest name and image; every byte one that
 * JSON escapes as \u00XX (six bytes for one). All of it comes back.
 */
static void
t_at_bounds(void **state)
{
    struct lc c;
    struct record_meta m;
    struct policy_label two[2];
    struct tu_labset ls = {0};
    struct record *r;
    const struct record_meta *bm;
    size_t len, i;

    (void)state;
    sample(&c, &m, two);
    tu_labset_max(&ls);
    m.labels = ls.v;
    m.nlabels = ls.n;
    m.name = tu_labset_text(&ls, LIMIT_NAME_BYTES, 0x01);
    m.image = tu_labset_text(&ls, LIMIT_IMAGE_BYTES, 0x1f);
    m.policy = m.started_at = m.finished_at =
        tu_labset_text(&ls, REPORT_TEXT_MAX, 0x01);
    r = write_read(&c, &m, &len);
    assert_true(len > LIMIT_RECORD_BYTES - 64 * 1024);
    bm = record_meta(r);
    assert_int_equal(bm->nlabels, 320);
    for (i = 0; i < 320; i++) {
        assert_string_equal(bm->labels[i].key, ls.v[i].key);
        assert_string_equal(bm->labels[i].value, ls.v[i].value);
    }
    assert_string_equal(bm->name, m.name);
    assert_string_equal(bm->image, m.image);
    assert_string_equal(bm->policy, m.policy);
    assert_string_equal(bm->finished_at, m.finished_at);
    assert_int_equal(record_lc(r)->state, LC_TASK_REAPING);
    record_free(r);
    tu_labset_free(&ls);
}

/*
 * Past every bound, through the writer: readable, cut as bounds.h says.
 * Written out: a key over 1024 bytes and one that is not UTF-8 are
 * dropped; "ok\xc3rest" is cut before its first byte that is not UTF-8;
 * values of 1700 three-byte characters (5100 bytes) are cut to 1365 of
 * them (4095 bytes, within LIMIT_LABEL_VALUE = 4096), so after
 * "cut"="ok" (5 bytes) 95 labels of 5 + 4095 bytes fit 393216 bytes (5 +
 * 95 * 4100 = 389505; one more: 393605). The name is cut like those
 * values (4096 bytes at most), the image to 4096, the policy to 512.
 * And 5000 small labels, more than any earlier reader could take: the
 * first 320.
 */
static void
t_over_bounds(void **state)
{
    struct lc c;
    struct record_meta m;
    struct policy_label two[2];
    struct tu_labset ls = {0};
    struct record *r;
    const struct record_meta *bm;
    char *euro, key[16];
    size_t len, i;

    (void)state;
    sample(&c, &m, two);
    euro = tu_labset_over(&ls);
    m.labels = ls.v;
    m.nlabels = ls.n;
    m.name = euro;
    m.image = tu_labset_text(&ls, 5000, 'i');
    m.policy = tu_labset_text(&ls, 600, 'p');
    r = write_read(&c, &m, &len);
    bm = record_meta(r);
    assert_int_equal(bm->nlabels, 96);
    assert_string_equal(bm->labels[0].key, "cut");
    assert_string_equal(bm->labels[0].value, "ok");
    for (i = 1; i < 96; i++) {
        snprintf(key, sizeof(key), "l%04u", (unsigned)(i + 2));
        assert_string_equal(bm->labels[i].key, key);
        assert_int_equal(strlen(bm->labels[i].value), 4095);
        assert_memory_equal(bm->labels[i].value, euro, 4095);
    }
    assert_int_equal(strlen(bm->name), 4095);
    assert_memory_equal(bm->name, euro, 4095);
    assert_int_equal(strlen(bm->image), 4096);
    assert_int_equal(strlen(bm->policy), 512);
    record_free(r);

    for (i = 0; i < ls.n; i++)
        ls.v[i].value = "v";
    ls.v[0].key = ls.v[1].key = ls.v[2].key = "same";
    m.name = "web-1";
    r = write_read(&c, &m, &len);
    bm = record_meta(r);
    assert_int_equal(bm->nlabels, 320);
    for (i = 0; i < 320; i++)
        assert_string_equal(bm->labels[i].key, ls.v[i].key);
    assert_string_equal(bm->labels[319].key, "l0319");
    record_free(r);
    tu_labset_free(&ls);
}

/* A record an earlier version wrote, with 4096 labels (the most its
 * reader took): still readable. */
static void
t_old_record_with_many_labels(void **state)
{
    size_t cap = 4096 * 32 + 256, n = 0, i;
    char *text = malloc(cap), err[256];
    struct record *r;

    (void)state;
    assert_non_null(text);
    n += (size_t)snprintf(text + n, cap - n,
                          "{\"v\":1,\"state\":\"confirming\","
                          "\"poll_interval_ms\":500,\"retry_base_ms\":10,"
                          "\"retry_max_ms\":20,\"labels\":{");
    for (i = 0; i < 4096; i++)
        n += (size_t)snprintf(text + n, cap - n, "%s\"k%zu\":\"v\"",
                              i ? "," : "", i);
    n += (size_t)snprintf(text + n, cap - n, "}}");
    assert_true(n < cap);
    r = record_parse(text, n, err, sizeof(err));
    if (r == NULL)
        fail_msg("refused: %s", err);
    assert_int_equal(record_meta(r)->nlabels, 4096);
    assert_string_equal(record_meta(r)->labels[4095].key, "k4095");
    record_free(r);
    free(text);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(t_round_trip),
        cmocka_unit_test(t_refused),
        cmocka_unit_test(t_every_prefix_refused),
        cmocka_unit_test(t_minimal_record),
        cmocka_unit_test(t_zeros_left_out),
        cmocka_unit_test(t_at_bounds),
        cmocka_unit_test(t_over_bounds),
        cmocka_unit_test(t_old_record_with_many_labels),
    };

    tu_test_filters(); /* REAPD_TEST_ONLY, TEST_FILTER */
    return cmocka_run_group_tests(tests, NULL, NULL);
}
