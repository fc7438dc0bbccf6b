/*
 * test_docker_parse — the Docker Engine API's answers read by
 * agent/docker_parse.c.
 *
 * The parsers run on real answers captured from dockerd 20.10.24 (API
 * 1.41) in tests/fixtures/docker/, on handmade answers of engines we
 * cannot run here (a newer API, one too old), and on hostile input: every
 * truncation of a capture, wrong types, bad ids, deep nesting, the label
 * bounds at their edges, the operator's label filter. Engine answers are
 * untrusted, so the rule is "fail cleanly or parse right, never crash";
 * each input sits in a buffer of exactly its length, so an over-read
 * shows under ASan and valgrind.
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

#include "bounds.h"
#include "docker_parse.h"
#include "lifecycle.h"
#include "log.h"
#include "policy.h"
#include "testutil.h"

#define EXITED_ID                                                             \
    "02e6f886fdb89aa74ddf893246272aa1971447d17bc86439e1de5be123cef255"
#define RUNNING_ID                                                            \
    "6b58212b04353bfc0aeb1a7e3de4108ed439022ae532e97bef08c36a2b06b190"
#define UN1_ID                                                                \
    "e1703e4cce5ae81f179a9dd3f7b5b3152035a4300013b7ad5bc44a252e85027b"

/* Answers recorded from dockerd or made by hand, read whole with no NUL
 * after them (tu_read_file): the parsers get a length. */
#define DOCKER_FIXTURES FIXTURES_DIR "/docker"

/* ---- helpers ---------------------------------------------------------- */

/* A copy of `s` in a buffer of exactly strlen(s) bytes. */
static char *
exact(const char *s, size_t *len)
{
    size_t n = strlen(s);
    char *b = malloc(n ? n : 1);

    assert_non_null(b);
    memcpy(b, s, n);
    *len = n;
    return b;
}

static const char *
label(const struct docker_container *c, const char *key)
{
    size_t i;

    for (i = 0; i < c->nlabels; i++)
        if (strcmp(c->labels[i].key, key) == 0)
            return c->labels[i].value;
    return NULL;
}

/* Parses `s` as an inspect answer; fails the test unless it parses. */
static const struct docker_container *
inspect_ok(const char *s, struct docker_parsed **ctx)
{
    const struct docker_container *c = NULL;
    char err[256] = "";
    size_t n;
    char *b = exact(s, &n);

    int rc = docker_parse_inspect(b, n, ctx, &c, err, sizeof(err));

    free(b);
    if (rc != 0)
        fail_msg("inspect rejected: %s\n%s", err, s);
    assert_non_null(*ctx);
    assert_non_null(c);
    return c;
}

/* Asserts that `s` is rejected as an inspect answer, with a message. */
static void
inspect_bad(const char *s)
{
    struct docker_parsed *ctx = (struct docker_parsed *)1;
    const struct docker_container *c = NULL;
    char err[256] = "";
    size_t n;
    char *b = exact(s, &n);

    int rc = docker_parse_inspect(b, n, &ctx, &c, err, sizeof(err));

    free(b);
    if (rc == 0) {
        docker_parsed_free(ctx);
        fail_msg("inspect accepted: %s", s);
    }
    assert_null(ctx);
    assert_true(err[0] != '\0');
}

static int
version_of(const char *s, char *out, size_t outlen)
{
    char err[256] = "";
    size_t n;
    char *b = exact(s, &n);
    int rc = docker_parse_version(b, n, out, outlen, err, sizeof(err));

    free(b);
    if (rc != 0)
        assert_true(err[0] != '\0');
    return rc;
}

/* An inspect answer with `state` as the State member. */
static char *
inspect_with_state(const char *id, const char *state)
{
    char *s = malloc(4096);

    assert_non_null(s);
    snprintf(s, 4096,
             "{\"Id\":\"%s\",\"Name\":\"/n\",\"State\":%s,"
             "\"Config\":{\"Image\":\"i:1\",\"Labels\":{}}}",
             id, state);
    return s;
}

/* ---- parsers on the captures ----------------------------------------- */

static void
t_inspect_exited_capture(void **state)
{
    size_t len;
    char *body =
        tu_read_file(DOCKER_FIXTURES, "inspect-exited-1.41.json", &len);
    struct docker_parsed *ctx = NULL;
    const struct docker_container *c = NULL;
    char err[256] = "";

    (void)state;
    assert_int_equal(
        docker_parse_inspect(body, len, &ctx, &c, err, sizeof(err)), 0);
    assert_non_null(ctx);
    assert_non_null(c);
    assert_string_equal(c->id, EXITED_ID);
    assert_string_equal(c->name, "fx-exited");
    assert_string_equal(c->image, "reapd-test:1");
    assert_int_equal(c->state.run, LC_RUN_EXITED);
    assert_true(c->state.has_exit_code);
    assert_int_equal(c->state.exit_code, 7);
    assert_true(c->state.finished);
    assert_false(c->state.oom_killed);
    assert_int_equal(c->nlabels, 2);
    assert_string_equal(label(c, "reapd.managed"), "true");
    assert_string_equal(label(c, "team"), "infra");
    assert_null(label(c, "reapd"));
    assert_string_equal(c->started_at, "2026-12-02T12:27:21.398675775Z");
    assert_string_equal(c->finished_at, "2026-12-02T12:27:21.395600727Z");
    docker_parsed_free(ctx);
    free(body);
}

static void
t_inspect_running_capture(void **state)
{
    size_t len;
    char *body =
        tu_read_file(DOCKER_FIXTURES, "inspect-running-1.41.json", &len);
    struct docker_parsed *ctx = NULL;
    const struct docker_container *c = NULL;
    char err[256] = "";

    (void)state;
    assert_int_equal(
        docker_parse_inspect(body, len, &ctx, &c, err, sizeof(err)), 0);
    assert_string_equal(c->id, RUNNING_ID);
    assert_string_equal(c->name, "fx-running");
    assert_string_equal(c->image, "reapd-test:1");
    assert_int_equal(c->state.run, LC_RUN_RUNNING);
    /* Go's zero time "0001-01-01T00:00:00Z" means never finished. */
    assert_false(c->state.finished);
    assert_null(c->finished_at);
    assert_string_equal(c->started_at, "2026-12-02T12:27:22.696728253Z");
    assert_true(c->state.has_exit_code);
    assert_int_equal(c->state.exit_code, 0);
    assert_int_equal(c->nlabels, 0);
    docker_parsed_free(ctx);
    free(body);
}

/* The engine's 404 body is valid JSON but no container. */
static void
t_inspect_404_body(void **state)
{
    size_t len;
    char *body = tu_read_file(DOCKER_FIXTURES, "inspect-404.json", &len);
    struct docker_parsed *ctx = (struct docker_parsed *)1;
    const struct docker_container *c = NULL;
    char err[256] = "";

    (void)state;
    assert_int_equal(
        docker_parse_inspect(body, len, &ctx, &c, err, sizeof(err)), -1);
    assert_null(ctx);
    assert_true(err[0] != '\0');
    free(body);
}

static void
t_list_capture(void **state)
{
    size_t len, n = 99;
    char *body = tu_read_file(DOCKER_FIXTURES, "list-1.41.json", &len);
    struct docker_parsed *ctx = NULL;
    const struct docker_container *cs = NULL;
    char err[256] = "";
    size_t i;

    (void)state;
    assert_int_equal(
        docker_parse_list(body, len, &ctx, &cs, &n, err, sizeof(err)), 0);
    assert_int_equal(n, 3);
    assert_string_equal(cs[0].id, RUNNING_ID);
    assert_string_equal(cs[0].name, "fx-running");
    assert_int_equal(cs[0].state.run, LC_RUN_RUNNING);
    assert_int_equal(cs[0].nlabels, 0);
    assert_string_equal(cs[1].id, EXITED_ID);
    assert_string_equal(cs[1].name, "fx-exited");
    assert_int_equal(cs[1].state.run, LC_RUN_EXITED);
    assert_int_equal(cs[1].nlabels, 2);
    assert_string_equal(label(&cs[1], "reapd.managed"), "true");
    assert_string_equal(label(&cs[1], "team"), "infra");
    assert_string_equal(cs[2].id, UN1_ID);
    assert_string_equal(cs[2].name, "un1");
    assert_int_equal(cs[2].state.run, LC_RUN_EXITED);
    for (i = 0; i < n; i++) {
        assert_string_equal(cs[i].image, "reapd-test:1");
        /* A list carries no exit code and no times. */
        assert_false(cs[i].state.has_exit_code);
        assert_false(cs[i].state.finished);
        assert_null(cs[i].started_at);
        assert_null(cs[i].finished_at);
    }
    docker_parsed_free(ctx);
    free(body);
}

static void
t_list_empty_and_not_array(void **state)
{
    struct docker_parsed *ctx = NULL;
    const struct docker_container *cs = NULL;
    char err[256] = "";
    size_t n = 99, len;
    char *b = exact("[]", &len);

    (void)state;
    assert_int_equal(
        docker_parse_list(b, len, &ctx, &cs, &n, err, sizeof(err)), 0);
    assert_int_equal(n, 0);
    docker_parsed_free(ctx);
    free(b);

    b = exact("{\"Id\":\"" EXITED_ID "\",\"State\":\"exited\"}", &len);
    ctx = (struct docker_parsed *)1;
    assert_int_equal(
        docker_parse_list(b, len, &ctx, &cs, &n, err, sizeof(err)), -1);
    assert_null(ctx);
    assert_true(err[0] != '\0');
    free(b);

    b = exact("", &len);
    ctx = (struct docker_parsed *)1;
    assert_int_equal(
        docker_parse_list(b, len, &ctx, &cs, &n, err, sizeof(err)), -1);
    assert_null(ctx);
    free(b);
}

/* Bad entries are dropped, and the labels of the entries after them still
 * belong to the right container. */
static void
t_list_hostile(void **state)
{
    size_t len, n = 0;
    char *body =
        tu_read_file(DOCKER_FIXTURES, "list-hostile-handmade.json", &len);
    struct docker_parsed *ctx = NULL;
    const struct docker_container *cs = NULL;
    char err[256] = "";

    (void)state;
    assert_int_equal(
        docker_parse_list(body, len, &ctx, &cs, &n, err, sizeof(err)), 0);
    assert_int_equal(n, 5);

    assert_string_equal(cs[0].id, "1111111111111111111111111111111111111111"
                                  "111111111111111111111111");
    assert_string_equal(cs[0].name, "good-1");
    assert_int_equal(cs[0].nlabels, 2);
    assert_string_equal(label(&cs[0], "a"), "1");
    assert_string_equal(label(&cs[0], "b"), "2");

    /* Image not a string, Names empty, non-string label values skipped. */
    assert_string_equal(cs[1].id, "4444444444444444444444444444444444444444"
                                  "444444444444444444444444");
    assert_int_equal(cs[1].state.run, LC_RUN_EXITED);
    assert_null(cs[1].name);
    assert_null(cs[1].image);
    assert_int_equal(cs[1].nlabels, 1);
    assert_string_equal(label(&cs[1], "keep"), "yes");
    assert_null(label(&cs[1], "x")); /* not the dropped entry's */

    /* Names not an array, Labels an array. */
    assert_string_equal(cs[2].id, "5555555555555555555555555555555555555555"
                                  "555555555555555555555555");
    assert_int_equal(cs[2].state.run, LC_RUN_CREATED);
    assert_null(cs[2].name);
    assert_int_equal(cs[2].nlabels, 0);

    /* Names[0] not a string. */
    assert_string_equal(cs[3].id, "6666666666666666666666666666666666666666"
                                  "666666666666666666666666");
    assert_int_equal(cs[3].state.run, LC_RUN_DEAD);
    assert_null(cs[3].name);

    /* A name without the leading slash is taken as it is. */
    assert_string_equal(cs[4].id, "7777777777777777777777777777777777777777"
                                  "777777777777777777777777");
    assert_int_equal(cs[4].state.run, LC_RUN_PAUSED);
    assert_string_equal(cs[4].name, "no-slash");
    assert_int_equal(cs[4].nlabels, 1);
    assert_string_equal(label(&cs[4], "c"), "3");
    docker_parsed_free(ctx);
    free(body);
}

/* ---- version negotiation --------------------------------------------- */

static void
t_version_capture(void **state)
{
    size_t len;
    char *body = tu_read_file(DOCKER_FIXTURES, "version-20.10.24.json", &len);
    char out[16] = "", err[256] = "";

    (void)state;
    assert_int_equal(
        docker_parse_version(body, len, out, sizeof(out), err, sizeof(err)),
        0);
    assert_string_equal(out, "1.41");
    free(body);
}

/* Each engine the suite runs on, as it answered /version. */
static void
t_engine_info_captures(void **state)
{
    static const struct {
        const char *file, *api, *version, *containerd;
    } cases[] = {
        {"version-20.10.24.json", "1.41", "20.10.24+dfsg1", "1.6.20~ds1"},
        {"version-26.1.5.json", "1.45", "26.1.5+dfsg1", "1.7.24~ds1"},
        {"version-28.5.2.json", "1.51", "28.5.2+dfsg4", "2.1.9+unknown"},
    };
    size_t i, len;

    (void)state;
    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *body = tu_read_file(DOCKER_FIXTURES, cases[i].file, &len);
        struct docker_engine_info info;
        char err[256] = "";

        assert_int_equal(
            docker_parse_engine(body, len, &info, err, sizeof(err)), 0);
        assert_string_equal(info.api, cases[i].api);
        assert_string_equal(info.engine_api, cases[i].api);
        assert_string_equal(info.version, cases[i].version);
        assert_string_equal(info.containerd_version, cases[i].containerd);
        free(body);
    }
}

/* Versions go into logs and label values unescaped: anything that is
 * not version-like, or too long, is left out, never passed on. */
static void
t_engine_info_hostile(void **state)
{
    static const struct {
        const char *body, *version, *containerd;
    } cases[] = {
        {"{\"ApiVersion\":\"1.41\"}", "", ""},
        {"{\"ApiVersion\":\"1.41\",\"Version\":\"1\\\"} x{\"}", "", ""},
        {"{\"ApiVersion\":\"1.41\",\"Version\":\"a\\nb\"}", "", ""},
        {"{\"ApiVersion\":\"1.41\",\"Version\":\"1\\u0000x\"}", "", ""},
        {"{\"ApiVersion\":\"1.41\",\"Version\":7}", "", ""},
        /* 64 characters: one too many; 63: kept. */
        {"{\"ApiVersion\":\"1.41\",\"Version\":"
         "\"123456789012345678901234567890"
         "1234567890123456789012345678901234\"}",
         "", ""},
        {"{\"ApiVersion\":\"1.41\",\"Version\":"
         "\"123456789012345678901234567890"
         "123456789012345678901234567890123\"}",
         "123456789012345678901234567890123456789012345678901234567890123",
         ""},
        {"{\"ApiVersion\":\"1.41\",\"Version\":\"v\",\"Components\":{}}", "v",
         ""},
        {"{\"ApiVersion\":\"1.41\",\"Components\":[1,{\"Name\":3},"
         "{\"Name\":\"CONTAINERD\",\"Version\":\"2.0\"}]}",
         "", "2.0"},
        {"{\"ApiVersion\":\"1.41\",\"Components\":[{\"Name\":"
         "\"containerd\",\"Version\":\"<b>\"}]}",
         "", ""},
    };
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct docker_engine_info info;
        char err[256] = "";

        assert_int_equal(docker_parse_engine(cases[i].body,
                                             strlen(cases[i].body), &info, err,
                                             sizeof(err)),
                         0);
        assert_string_equal(info.api, "1.41");
        assert_string_equal(info.version, cases[i].version);
        assert_string_equal(info.containerd_version, cases[i].containerd);
    }
}

static void
t_version_newer_engine_clamps(void **state)
{
    size_t len;
    char *body =
        tu_read_file(DOCKER_FIXTURES, "version-1.52-handmade.json", &len);
    char out[16] = "", err[256] = "";

    (void)state;
    assert_int_equal(
        docker_parse_version(body, len, out, sizeof(out), err, sizeof(err)),
        0);
    assert_string_equal(out, DOCKER_API_MAX);
    free(body);
}

static void
t_version_min_above_max(void **state)
{
    size_t len;
    char *body = tu_read_file(DOCKER_FIXTURES,
                              "version-min-above-max-handmade.json", &len);
    char out[16] = "", err[256] = "";

    (void)state;
    assert_int_equal(
        docker_parse_version(body, len, out, sizeof(out), err, sizeof(err)),
        -1);
    assert_true(err[0] != '\0');
    free(body);
}

static void
t_version_too_old(void **state)
{
    size_t len;
    char *body =
        tu_read_file(DOCKER_FIXTURES, "version-1.12-handmade.json", &len);
    char out[16] = "", err[256] = "";

    (void)state;
    assert_int_equal(
        docker_parse_version(body, len, out, sizeof(out), err, sizeof(err)),
        -1);
    assert_non_null(strstr(err, "1.12"));
    free(body);
}

static void
t_version_edges(void **state)
{
    char out[16];

    (void)state;
    /* The bounds themselves are spoken. */
    assert_int_equal(version_of("{\"ApiVersion\":\"1.24\"}", out, sizeof(out)),
                     0);
    assert_string_equal(out, "1.24");
    assert_int_equal(version_of("{\"ApiVersion\":\"1.51\",\"MinAPIVersion\":"
                                "\"1.51\"}",
                                out, sizeof(out)),
                     0);
    assert_string_equal(out, "1.51");
    assert_int_equal(version_of("{\"ApiVersion\":\"1.23\"}", out, sizeof(out)),
                     -1);
    /* Minor versions compare as numbers: 1.100 is newer than 1.51. */
    assert_int_equal(version_of("{\"ApiVersion\":\"1.100\",\"MinAPIVersion\":"
                                "\"1.24\"}",
                                out, sizeof(out)),
                     0);
    assert_string_equal(out, DOCKER_API_MAX);
    /* 1.9 is older than 1.24, however it sorts as text. */
    assert_int_equal(version_of("{\"ApiVersion\":\"1.9\"}", out, sizeof(out)),
                     -1);
    /* A newer engine whose minimum is exactly our maximum. */
    assert_int_equal(version_of("{\"ApiVersion\":\"1.60\",\"MinAPIVersion\":"
                                "\"1.51\"}",
                                out, sizeof(out)),
                     0);
    assert_string_equal(out, "1.51");
    assert_int_equal(version_of("{\"ApiVersion\":\"1.60\",\"MinAPIVersion\":"
                                "\"1.52\"}",
                                out, sizeof(out)),
                     -1);
    /* Not versions. */
    assert_int_equal(version_of("{}", out, sizeof(out)), -1);
    assert_int_equal(version_of("{\"ApiVersion\":1.41}", out, sizeof(out)),
                     -1);
    assert_int_equal(
        version_of("{\"ApiVersion\":\"1.41.1\"}", out, sizeof(out)), -1);
    assert_int_equal(
        version_of("{\"ApiVersion\":\"v1.41\"}", out, sizeof(out)), -1);
    assert_int_equal(version_of("{\"ApiVersion\":\"\"}", out, sizeof(out)),
                     -1);
    assert_int_equal(version_of("{\"ApiVersion\":\"1.41\",\"MinAPIVersion\":"
                                "\"x\"}",
                                out, sizeof(out)),
                     -1);
    assert_int_equal(version_of("[\"1.41\"]", out, sizeof(out)), -1);
    assert_int_equal(version_of("1.41", out, sizeof(out)), -1);
    assert_int_equal(version_of("", out, sizeof(out)), -1);
    assert_int_equal(version_of("{\"ApiVersion\":\"1.41\"", out, sizeof(out)),
                     -1);
}

/* ---- hostile inspect answers ----------------------------------------- */

/* Length without trailing whitespace. */
static size_t
trimmed(const char *b, size_t n)
{
    while (n > 0 && (b[n - 1] == '\n' || b[n - 1] == ' ' || b[n - 1] == '\r' ||
                     b[n - 1] == '\t'))
        n--;
    return n;
}

/* Every prefix fails (a strict prefix of an object is never a document),
 * except those that only lack trailing whitespace. */
static void
every_prefix(const char *fixture, int is_list)
{
    size_t len, core, k;
    char *body = tu_read_file(DOCKER_FIXTURES, fixture, &len);

    core = trimmed(body, len);
    for (k = 0; k <= len; k++) {
        char *b = malloc(k ? k : 1);
        struct docker_parsed *ctx = NULL;
        const struct docker_container *c = NULL;
        char err[128] = "";
        size_t n = 0;
        int rc;

        assert_non_null(b);
        memcpy(b, body, k);
        if (is_list)
            rc = docker_parse_list(b, k, &ctx, &c, &n, err, sizeof(err));
        else
            rc = docker_parse_inspect(b, k, &ctx, &c, err, sizeof(err));
        if (k < core && rc == 0)
            fail_msg("%s: prefix of %zu bytes accepted", fixture, k);
        if (k >= core && rc != 0)
            fail_msg("%s: whole document (%zu) rejected: %s", fixture, k, err);
        if (rc != 0) {
            assert_null(ctx);
            assert_true(err[0] != '\0');
        }
        docker_parsed_free(ctx);
        free(b);
    }
    free(body);
}

static void
t_inspect_every_truncation(void **state)
{
    (void)state;
    every_prefix("inspect-exited-1.41.json", 0);
    every_prefix("inspect-running-1.41.json", 0);
}

static void
t_list_every_truncation(void **state)
{
    (void)state;
    every_prefix("list-1.41.json", 1);
}

static void
t_version_every_truncation(void **state)
{
    size_t len, core, k;
    char *body = tu_read_file(DOCKER_FIXTURES, "version-20.10.24.json", &len);

    (void)state;
    core = trimmed(body, len);
    for (k = 0; k <= len; k++) {
        char *b = malloc(k ? k : 1);
        char out[16], err[128] = "";
        int rc;

        memcpy(b, body, k);
        rc = docker_parse_version(b, k, out, sizeof(out), err, sizeof(err));
        assert_int_equal(rc, k >= core ? 0 : -1);
        free(b);
    }
    free(body);
}

/* Single bytes flipped into the capture: any verdict, no crash. */
static void
t_inspect_byte_flips(void **state)
{
    size_t len, i;
    char *body =
        tu_read_file(DOCKER_FIXTURES, "inspect-exited-1.41.json", &len);
    static const char junk[] = {'"', '{',  '}',  '[',    ']', ':',
                                ',', '\\', '\0', '\x80', 'x', '9'};
    int ok = 0, bad = 0;

    (void)state;
    for (i = 0; i < len; i += 7) {
        size_t j;

        for (j = 0; j < sizeof(junk); j++) {
            char *b = malloc(len);
            struct docker_parsed *ctx = NULL;
            const struct docker_container *c = NULL;
            char err[128];

            memcpy(b, body, len);
            b[i] = junk[j];
            if (docker_parse_inspect(b, len, &ctx, &c, err, sizeof(err)) ==
                0) {
                /* Whatever got through is still well-formed. */
                assert_true(docker_valid_id(c->id));
                ok++;
            } else {
                assert_null(ctx);
                bad++;
            }
            docker_parsed_free(ctx);
            free(b);
        }
    }
    assert_true(ok > 0);
    assert_true(bad > 0);
    free(body);
}

static void
t_inspect_wrong_types_fixture(void **state)
{
    size_t len;
    char *body = tu_read_file(DOCKER_FIXTURES,
                              "inspect-wrong-types-handmade.json", &len);
    struct docker_parsed *ctx = NULL;
    const struct docker_container *c = NULL;
    char err[256] = "";

    (void)state;
    /* The Id and the state word are good, so it is a container; every
     * mistyped field reads as "not known", never as a wrong value. */
    assert_int_equal(
        docker_parse_inspect(body, len, &ctx, &c, err, sizeof(err)), 0);
    assert_int_equal(c->state.run, LC_RUN_EXITED);
    assert_null(c->name);
    assert_null(c->image);
    assert_false(c->state.has_exit_code); /* "7", a string */
    assert_false(c->state.oom_killed);    /* "true", a string */
    assert_null(c->started_at);
    assert_null(c->finished_at);
    assert_false(c->state.finished);
    assert_int_equal(c->nlabels, 0); /* Labels an array */
    docker_parsed_free(ctx);
    free(body);
}

static void
t_inspect_state_not_object(void **state)
{
    static const char *states[] = {
        "\"exited\"", "[]", "null", "7", "true", "[{\"Status\":\"exited\"}]"};
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(states) / sizeof(states[0]); i++) {
        char *s = inspect_with_state(EXITED_ID, states[i]);

        inspect_bad(s);
        free(s);
    }
    /* No State at all. */
    inspect_bad("{\"Id\":\"" EXITED_ID "\"}");
    /* Not an object at the top. */
    inspect_bad("[{\"Id\":\"" EXITED_ID "\",\"State\":{\"Status\":"
                "\"exited\"}}]");
    inspect_bad("\"" EXITED_ID "\"");
    inspect_bad("null");
    inspect_bad("");
    inspect_bad("   ");
    /* Trailing garbage after the document. */
    inspect_bad("{\"Id\":\"" EXITED_ID "\",\"State\":{\"Status\":"
                "\"exited\"}} x");
}

static void
t_inspect_exit_codes(void **state)
{
    struct docker_parsed *ctx = NULL;
    const struct docker_container *c;
    char *s;

    (void)state;
    s = inspect_with_state(EXITED_ID, "{\"Status\":\"exited\","
                                      "\"ExitCode\":-1}");
    c = inspect_ok(s, &ctx);
    assert_true(c->state.has_exit_code);
    assert_int_equal(c->state.exit_code, -1);
    docker_parsed_free(ctx);
    free(s);

    s = inspect_with_state(EXITED_ID, "{\"Status\":\"exited\","
                                      "\"ExitCode\":2147483647}");
    c = inspect_ok(s, &ctx);
    assert_true(c->state.has_exit_code);
    assert_int_equal(c->state.exit_code, 2147483647);
    docker_parsed_free(ctx);
    free(s);

    /* Out of int range, fractional, exponent, null: not an exit code. */
    {
        static const char *codes[] = {
            "2147483648", "-2147483649", "99999999999999999999999",
            "7.5",        "1e2",         "null",
            "\"7\"",      "{}"};
        size_t i;

        for (i = 0; i < sizeof(codes) / sizeof(codes[0]); i++) {
            char st[128];

            snprintf(st, sizeof(st), "{\"Status\":\"exited\",\"ExitCode\":%s}",
                     codes[i]);
            s = inspect_with_state(EXITED_ID, st);
            c = inspect_ok(s, &ctx);
            if (c->state.has_exit_code)
                fail_msg("ExitCode %s taken as %d", codes[i],
                         c->state.exit_code);
            docker_parsed_free(ctx);
            free(s);
        }
    }

    /* OOMKilled true, times set. */
    s = inspect_with_state(EXITED_ID,
                           "{\"Status\":\"exited\",\"ExitCode\":137,"
                           "\"OOMKilled\":true,\"StartedAt\":\"2026-01-01T"
                           "00:00:00Z\",\"FinishedAt\":\"2026-01-01T00:00:"
                           "01Z\"}");
    c = inspect_ok(s, &ctx);
    assert_true(c->state.oom_killed);
    assert_int_equal(c->state.exit_code, 137);
    assert_true(c->state.finished);
    assert_string_equal(c->finished_at, "2026-01-01T00:00:01Z");
    docker_parsed_free(ctx);
    free(s);

    /* Empty times are "never" too. */
    s = inspect_with_state(EXITED_ID, "{\"Status\":\"created\","
                                      "\"StartedAt\":\"\",\"FinishedAt\":"
                                      "\"\"}");
    c = inspect_ok(s, &ctx);
    assert_int_equal(c->state.run, LC_RUN_CREATED);
    assert_null(c->started_at);
    assert_null(c->finished_at);
    assert_false(c->state.finished);
    docker_parsed_free(ctx);
    free(s);
}

static void
t_inspect_labels_and_names(void **state)
{
    struct docker_parsed *ctx = NULL;
    const struct docker_container *c;

    (void)state;
    /* Non-string label values are skipped, strings kept, with escapes
     * decoded. */
    c = inspect_ok("{\"Id\":\"" EXITED_ID "\",\"Name\":\"plain\","
                   "\"State\":{\"Status\":\"removing\"},\"Config\":{"
                   "\"Image\":\"i\",\"Labels\":{\"n\":1,\"s\":\"v\","
                   "\"q\":\"a\\\"b\\u00e9\",\"o\":{},\"z\":null}}}",
                   &ctx);
    assert_int_equal(c->state.run, LC_RUN_REMOVING);
    assert_string_equal(c->name, "plain");
    assert_int_equal(c->nlabels, 2);
    assert_string_equal(label(c, "s"), "v");
    assert_string_equal(label(c, "q"), "a\"b\xc3\xa9");
    docker_parsed_free(ctx);

    /* Config missing or mistyped: no image, no labels, still a
     * container. */
    c = inspect_ok("{\"Id\":\"" EXITED_ID "\",\"Name\":\"/\","
                   "\"State\":{\"Status\":\"restarting\"},\"Config\":7}",
                   &ctx);
    assert_int_equal(c->state.run, LC_RUN_RESTARTING);
    assert_string_equal(c->name, "");
    assert_null(c->image);
    assert_int_equal(c->nlabels, 0);
    docker_parsed_free(ctx);

    /* Many labels. */
    {
        size_t cap = 200000, off, i;
        char *s = malloc(cap);

        assert_non_null(s);
        off = (size_t)snprintf(s, cap,
                               "{\"Id\":\"" EXITED_ID "\",\"State\":{"
                               "\"Status\":\"exited\"},\"Config\":{"
                               "\"Labels\":{");
        for (i = 0; i < 5000; i++)
            off += (size_t)snprintf(s + off, cap - off, "%s\"k%zu\":\"v%zu\"",
                                    i ? "," : "", i, i);
        snprintf(s + off, cap - off, "}}}");
        /* LIMIT_LABELS are kept (in their order), and the loss said. */
        c = inspect_ok(s, &ctx);
        assert_int_equal(c->nlabels, 256);
        assert_true(c->labels_truncated);
        assert_null(label(c, "k4999"));
        assert_string_equal(label(c, "k255"), "v255");
        assert_string_equal(label(c, "k0"), "v0");
        docker_parsed_free(ctx);
        free(s);
    }
}

/* What reapd does not read may be of any size: megabytes of Env, a long
 * Cmd, a health log; a label value of 300 KB is cut and flagged. */
static void
t_inspect_bulky(void **state)
{
    size_t cap = 8u << 20, off = 0, i;
    char *s = malloc(cap);
    struct docker_parsed *ctx;
    const struct docker_container *c;
    const char *v;

    (void)state;
    assert_non_null(s);
    off += (size_t)snprintf(s + off, cap - off,
                            "{\"Id\":\"" EXITED_ID "\",\"Args\":[\"-c\",\"");
    for (i = 0; i < 200000; i++)
        s[off++] = 'a';
    off += (size_t)snprintf(s + off, cap - off,
                            "\"],\"State\":{\"Status\":\"exited\","
                            "\"ExitCode\":70,\"Health\":{\"Log\":[{\"Output\":"
                            "\"%s\"}]}},\"Config\":{\"Env\":[",
                            "ok");
    for (i = 0; off < (6u << 20); i++)
        off += (size_t)snprintf(s + off, cap - off, "%s\"E%zu=%0100zu\"",
                                i ? "," : "", i, i);
    off += (size_t)snprintf(s + off, cap - off,
                            "],\"Image\":\"img:1\",\"Labels\":{\"big\":\"");
    for (i = 0; i < 300 * 1024; i++)
        s[off++] = 'v';
    snprintf(s + off, cap - off, "\",\"small\":\"x\"}}}");
    c = inspect_ok(s, &ctx);
    assert_int_equal(c->state.exit_code, 70);
    assert_string_equal(c->image, "img:1");
    assert_int_equal(c->nlabels, 2);
    assert_true(c->labels_truncated);
    v = label(c, "big");
    assert_non_null(v);
    assert_int_equal(strlen(v), 4096);
    assert_string_equal(label(c, "small"), "x");
    docker_parsed_free(ctx);
    free(s);
}

/* The list's Command (a 100 KB script) is left out: the list parses. */
static void
t_list_bulky(void **state)
{
    size_t cap = 1u << 20, off = 0, i;
    char *s = malloc(cap);
    struct docker_parsed *ctx = NULL;
    const struct docker_container *cs;
    size_t n;
    char err[256];

    (void)state;
    assert_non_null(s);
    off += (size_t)snprintf(s + off, cap - off,
                            "[{\"Id\":\"" EXITED_ID "\",\"Names\":[\"/a\"],"
                            "\"Command\":\"sh -c '");
    for (i = 0; i < 100 * 1024; i++)
        s[off++] = i % 80 == 79 ? ';' : 'e';
    snprintf(s + off, cap - off,
             "'\",\"State\":\"created\",\"Labels\":{\"k\":\"v\"}}]");
    assert_int_equal(
        docker_parse_list(s, strlen(s), &ctx, &cs, &n, err, sizeof err), 0);
    assert_int_equal(n, 1);
    assert_string_equal(cs[0].name, "a");
    assert_false(cs[0].labels_truncated);
    assert_int_equal(cs[0].nlabels, 1);
    docker_parsed_free(ctx);
    free(s);
}

static void
t_inspect_bad_ids(void **state)
{
    static const char *ids[] = {
        /* 63 hex */
        "\"02e6f886fdb89aa74ddf893246272aa1971447d17bc86439e1de5be123cef25\"",
        /* 65 hex */
        "\"02e6f886fdb89aa74ddf893246272aa1971447d17bc86439e1de5be123cef2550"
        "\"",
        /* uppercase */
        "\"02E6F886FDB89AA74DDF893246272AA1971447D17BC86439E1DE5BE123CEF255\"",
        /* non-hex */
        "\"02e6f886fdb89aa74ddf893246272aa1971447d17bc86439e1de5be123cef25g\"",
        /* a path in disguise */
        "\"../../../../../../../../../../../../../../../../../../../../../"
        "..\"",
        "\"\"",
        "12345",
        "null",
        "[\"" EXITED_ID "\"]",
    };
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(ids) / sizeof(ids[0]); i++) {
        char s[512];

        snprintf(s, sizeof(s),
                 "{\"Id\":%s,\"State\":{\"Status\":\"exited\","
                 "\"ExitCode\":1}}",
                 ids[i]);
        inspect_bad(s);
    }
}

static void
t_inspect_unknown_status(void **state)
{
    static const char *st[] = {
        "{\"Status\":\"zombie\"}",
        "{\"Status\":\"Running\"}",
        "{\"Status\":\"\"}",
        "{\"Status\":\"exited \"}",
        "{\"Status\":null}",
        "{\"Status\":1}",
        "{}",
        "{\"Status\":[\"exited\"]}",
    };
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(st) / sizeof(st[0]); i++) {
        char *s = inspect_with_state(EXITED_ID, st[i]);

        inspect_bad(s);
        free(s);
    }
}

/*
 * json keeps a string's true length and documents that its C string stops
 * at an embedded NUL ("\u0000"), so a validator must look at the length.
 * An engine answer is untrusted: "<64 hex>\u0000junk" is not a valid id,
 * "exited\u0000junk" is not a state word, and a label key
 * "reapd.managed\u0000x" (legal for the API, which takes any string) is
 * not the reapd.managed label — reading it as such would make reapd
 * remove a container nobody marked for removal.
 */
static void
t_regress_inspect_nul_in_id(void **state)
{
    (void)state;
    inspect_bad("{\"Id\":\"" EXITED_ID "\\u0000x\",\"State\":{\"Status\":"
                "\"exited\"}}");
}

static void
t_regress_inspect_nul_in_status(void **state)
{
    (void)state;
    inspect_bad("{\"Id\":\"" EXITED_ID "\",\"State\":{\"Status\":"
                "\"exited\\u0000x\"}}");
}

static void
t_regress_inspect_nul_in_label(void **state)
{
    struct docker_parsed *ctx = NULL;
    const struct docker_container *c;
    const char *v;
    int key_taken, value_taken;

    (void)state;
    c = inspect_ok("{\"Id\":\"" EXITED_ID "\",\"State\":{\"Status\":"
                   "\"exited\"},\"Config\":{\"Labels\":{"
                   "\"reapd.managed\\u0000x\":\"true\"}}}",
                   &ctx);
    key_taken = label(c, "reapd.managed") != NULL;
    docker_parsed_free(ctx);

    c = inspect_ok("{\"Id\":\"" EXITED_ID "\",\"State\":{\"Status\":"
                   "\"exited\"},\"Config\":{\"Labels\":{"
                   "\"reapd.managed\":\"true\\u0000no\"}}}",
                   &ctx);
    v = label(c, "reapd.managed");
    value_taken = v != NULL && strcmp(v, "true") == 0;
    docker_parsed_free(ctx);

    if (key_taken)
        fail_msg("label key \"reapd.managed\\u0000x\" read as "
                 "\"reapd.managed\"%s",
                 value_taken ? "; value \"true\\u0000no\" read as \"true\""
                             : "");
    if (value_taken)
        fail_msg("label value \"true\\u0000no\" read as \"true\"");
}

static void
t_regress_list_nul(void **state)
{
    struct docker_parsed *ctx = NULL;
    const struct docker_container *cs = NULL;
    char err[256] = "", bad[256] = "";
    size_t n = 99, len, i;
    char *b = exact("[{\"Id\":\"" EXITED_ID "\\u0000x\",\"State\":"
                    "\"exited\"},{\"Id\":\"" RUNNING_ID "\",\"State\":"
                    "\"running\\u0000x\"},{\"Id\":\"" UN1_ID "\","
                    "\"State\":\"exited\",\"Labels\":{"
                    "\"reapd.managed\\u0000x\":\"true\"}}]",
                    &len);
    int rc = docker_parse_list(b, len, &ctx, &cs, &n, err, sizeof(err));

    (void)state;
    free(b);
    assert_int_equal(rc, 0);
    /* The first two are not valid entries; the third is, but without a
     * reapd.managed label. */
    for (i = 0; i < n; i++) {
        size_t o = strlen(bad);

        if (strcmp(cs[i].id, EXITED_ID) == 0)
            snprintf(bad + o, sizeof(bad) - o,
                     " [id \"<64 hex>\\u0000x\" "
                     "taken]");
        else if (strcmp(cs[i].id, RUNNING_ID) == 0)
            snprintf(bad + o, sizeof(bad) - o,
                     " [state "
                     "\"running\\u0000x\" taken]");
        else if (label(&cs[i], "reapd.managed") != NULL)
            snprintf(bad + o, sizeof(bad) - o,
                     " [label key "
                     "\"reapd.managed\\u0000x\" "
                     "taken]");
    }
    docker_parsed_free(ctx);
    if (bad[0] != '\0')
        fail_msg("list:%s", bad);
    assert_int_equal(n, 1);
}

static void
t_huge_nesting(void **state)
{
    size_t depth = 100000, i, n, len;
    char *s = malloc(2 * depth + 256);
    struct docker_parsed *ctx = NULL;
    const struct docker_container *c = NULL;
    char err[256], out[16];
    char *b;

    (void)state;
    assert_non_null(s);
    /* Bare nesting. */
    for (i = 0; i < depth; i++)
        s[i] = '[';
    for (i = 0; i < depth; i++)
        s[depth + i] = ']';
    s[2 * depth] = '\0';
    b = exact(s, &len);
    assert_int_equal(docker_parse_inspect(b, len, &ctx, &c, err, 256), -1);
    assert_int_equal(docker_parse_list(b, len, &ctx, &c, &n, err, 256), -1);
    assert_int_equal(docker_parse_version(b, len, out, 16, err, 256), -1);
    free(b);
    /* Unclosed nesting (the parser must stop early, not run out). */
    s[depth] = '\0';
    b = exact(s, &len);
    assert_int_equal(docker_parse_inspect(b, len, &ctx, &c, err, 256), -1);
    free(b);
    /* Deep inside an otherwise good answer. */
    n = (size_t)snprintf(s, 256,
                         "{\"Id\":\"" EXITED_ID "\",\"State\":{\"Status\":"
                         "\"exited\"},\"X\":");
    for (i = 0; i < 1000; i++)
        s[n++] = '{', s[n++] = '"', s[n++] = 'a', s[n++] = '"', s[n++] = ':';
    s[n++] = '1';
    for (i = 0; i < 1000; i++)
        s[n++] = '}';
    s[n++] = '}';
    s[n] = '\0';
    b = exact(s, &len);
    assert_int_equal(docker_parse_inspect(b, len, &ctx, &c, err, 256), -1);
    assert_null(ctx);
    free(b);
    free(s);
}

static void
t_valid_id(void **state)
{
    char id[80];

    (void)state;
    assert_true(docker_valid_id(EXITED_ID));
    assert_true(docker_valid_id("00000000000000000000000000000000"
                                "00000000000000000000000000000000"));
    assert_true(docker_valid_id("ffffffffffffffffffffffffffffffff"
                                "ffffffffffffffffffffffffffffffff"));
    assert_false(docker_valid_id(NULL));
    assert_false(docker_valid_id(""));
    assert_false(docker_valid_id("abc"));
    /* 63 and 65. */
    memcpy(id, EXITED_ID, 65);
    id[63] = '\0';
    assert_false(docker_valid_id(id));
    memcpy(id, EXITED_ID, 64);
    id[64] = '0';
    id[65] = '\0';
    assert_false(docker_valid_id(id));
    /* One bad character anywhere. */
    memcpy(id, EXITED_ID, 65);
    id[0] = 'A';
    assert_false(docker_valid_id(id));
    memcpy(id, EXITED_ID, 65);
    id[63] = 'g';
    assert_false(docker_valid_id(id));
    memcpy(id, EXITED_ID, 65);
    id[30] = ' ';
    assert_false(docker_valid_id(id));
    memcpy(id, EXITED_ID, 65);
    id[10] = '/';
    assert_false(docker_valid_id(id));
    memcpy(id, EXITED_ID, 65);
    id[64] = '\n';
    id[65] = '\0';
    assert_false(docker_valid_id(id));
    /* The characters just outside the ranges. */
    memcpy(id, EXITED_ID, 65);
    id[5] = '0' - 1;
    assert_false(docker_valid_id(id));
    id[5] = '9' + 1;
    assert_false(docker_valid_id(id));
    id[5] = 'a' - 1;
    assert_false(docker_valid_id(id));
    id[5] = 'f' + 1;
    assert_false(docker_valid_id(id));
    /* A short id stops at its NUL: no read past it (ASan checks). */
    {
        char *shortid = malloc(4);

        memcpy(shortid, "abc", 4);
        assert_false(docker_valid_id(shortid));
        free(shortid);
    }
}

/* ---- the label bounds at their edges ---------------------------------- */

/* An inspect answer whose labels are `n` of "kNNNN" with values of `vlen`
 * bytes, then one of key `lastkey` with a value of `lastlen` bytes. */
static char *
inspect_labels(size_t n, size_t vlen, const char *lastkey, size_t lastlen)
{
    size_t cap = (n + 1) * (vlen + 32) + strlen(lastkey) + lastlen + 256;
    size_t off, i;
    char *s = malloc(cap);

    assert_non_null(s);
    off = (size_t)snprintf(s, cap,
                           "{\"Id\":\"" EXITED_ID "\",\"State\":{"
                           "\"Status\":\"exited\"},\"Config\":{"
                           "\"Labels\":{");
    for (i = 0; i < n; i++) {
        off += (size_t)snprintf(s + off, cap - off, "\"k%04zu\":\"", i);
        memset(s + off, 'v', vlen);
        off += vlen;
        off += (size_t)snprintf(s + off, cap - off, "\",");
    }
    off += (size_t)snprintf(s + off, cap - off, "\"%s\":\"", lastkey);
    memset(s + off, 'w', lastlen);
    off += lastlen;
    snprintf(s + off, cap - off, "\"}}}");
    return s;
}

/* A label key of LIMIT_LABEL_KEY bytes is kept, one of a byte more is
 * dropped and the loss said; the labels no policy names share
 * LIMIT_LABEL_BYTES (keys and values): exactly that many are all kept,
 * one byte more drops the last. */
static void
t_corner_label_bounds(void **state)
{
    struct docker_parsed *ctx;
    const struct docker_container *c;
    char key[LIMIT_LABEL_KEY + 2];
    char *s;
    /* 15 labels of 5 + 4091 bytes, and a last of 5 + `rest`. */
    size_t rest = LIMIT_LABEL_BYTES - 15 * 4096 - 5;

    (void)state;
    memset(key, 'K', LIMIT_LABEL_KEY);
    key[LIMIT_LABEL_KEY] = '\0';
    s = inspect_labels(1, 1, key, 1);
    c = inspect_ok(s, &ctx);
    assert_int_equal(c->nlabels, 2);
    assert_false(c->labels_truncated);
    assert_string_equal(label(c, key), "w");
    docker_parsed_free(ctx);
    free(s);
    key[LIMIT_LABEL_KEY] = 'K';
    key[LIMIT_LABEL_KEY + 1] = '\0';
    s = inspect_labels(1, 1, key, 1);
    c = inspect_ok(s, &ctx);
    assert_int_equal(c->nlabels, 1);
    assert_true(c->labels_truncated);
    assert_string_equal(label(c, "k0000"), "v");
    docker_parsed_free(ctx);
    free(s);

    s = inspect_labels(15, 4091, "lastk", rest);
    c = inspect_ok(s, &ctx);
    assert_int_equal(c->nlabels, 16);
    assert_false(c->labels_truncated);
    assert_int_equal(strlen(label(c, "lastk")), rest);
    docker_parsed_free(ctx);
    free(s);
    s = inspect_labels(15, 4091, "lastk", rest + 1);
    c = inspect_ok(s, &ctx);
    assert_int_equal(c->nlabels, 15);
    assert_true(c->labels_truncated);
    assert_null(label(c, "lastk"));
    docker_parsed_free(ctx);
    free(s);
    /* Past the budget, a smaller label after still fits. */
    s = inspect_labels(16, 4090, "z", 1);
    c = inspect_ok(s, &ctx);
    assert_int_equal(c->nlabels, 17);
    assert_false(c->labels_truncated);
    docker_parsed_free(ctx);
    free(s);
    s = inspect_labels(17, 4090, "z", 1);
    c = inspect_ok(s, &ctx);
    assert_int_equal(c->nlabels, 17);
    assert_true(c->labels_truncated);
    assert_null(label(c, "k0016"));
    assert_string_equal(label(c, "z"), "w");
    docker_parsed_free(ctx);
    free(s);
}

/* ---- the operator's label filter -------------------------------------- */

static bool
names_managed(const char *key, size_t len, void *arg)
{
    (void)arg;
    return len == 13 && memcmp(key, "reapd.managed", 13) == 0;
}

static bool
filter_keeps(const char *key, size_t len, void *arg)
{
    return label_filter_keeps(arg, key, len);
}

#define FILTER_LABELS                                                         \
    "{\"reapd.managed\":\"true\",\"app.tier\":\"front\","                     \
    "\"com.example.db-password\":\"hunter2\",\"team\":\"a\"}"

/* The labels of `c` as "k=v k=v ...", and "~" if labels_truncated. */
static void
labels_text(const struct docker_container *c, char *out, size_t outlen)
{
    size_t i, off = 0;

    out[0] = '\0';
    for (i = 0; i < c->nlabels && off < outlen; i++)
        off +=
            (size_t)snprintf(out + off, outlen - off, "%s%s=%s", i ? " " : "",
                             c->labels[i].key, c->labels[i].value);
    if (c->labels_truncated && off < outlen)
        snprintf(out + off, outlen - off, "~");
}

/* An inspect and a list answer parsed under {allow, deny} (and
 * reapd.managed named by a policy), fed in every chunk size: each gives
 * the same labels, returned as labels_text (the list's second entry has
 * the same labels as the inspect). */
static void
filtered(const char *const *allow, size_t nallow, const char *const *deny,
         size_t ndeny, char *out, size_t outlen)
{
    static const char *inspect =
        "{\"Id\":\"" EXITED_ID "\",\"Name\":\"/web\",\"State\":{\"Status\":"
        "\"exited\",\"ExitCode\":3},\"Config\":{\"Image\":\"img\","
        "\"Labels\":" FILTER_LABELS "}}";
    static const char *list =
        "[{\"Id\":\"" RUNNING_ID "\",\"Names\":[\"/a\"],\"Image\":\"i\","
        "\"State\":\"running\",\"Labels\":{\"team\":\"b\"}},"
        "{\"Id\":\"" EXITED_ID "\",\"Names\":[\"/web\"],\"Image\":\"img\","
        "\"State\":\"exited\",\"Labels\":" FILTER_LABELS "}]";
    struct label_filter f = {(char **)allow, nallow, (char **)deny, ndeny};
    struct docker_label_rules rules = {names_managed, NULL, filter_keeps, &f};
    const struct docker_container *c;
    struct docker_parsed *ctx;
    char err[256], got[512];
    size_t k, n, len;
    char *b;

    out[0] = '\0';
    b = exact(inspect, &len);
    for (k = 0; k <= len; k++) {
        assert_int_equal(docker_parse_inspect_with(b, len, k, &rules, &ctx, &c,
                                                   err, sizeof(err)),
                         0);
        labels_text(c, got, sizeof(got));
        if (k == 0)
            snprintf(out, outlen, "%s", got);
        else if (strcmp(got, out) != 0)
            fail_msg("inspect, chunks of %zu: %s\nwhole: %s", k, got, out);
        docker_parsed_free(ctx);
    }
    free(b);
    b = exact(list, &len);
    for (k = 0; k <= len; k++) {
        assert_int_equal(docker_parse_list_with(b, len, k, &rules, &ctx, &c,
                                                &n, err, sizeof(err)),
                         0);
        assert_int_equal(n, 2);
        labels_text(&c[1], got, sizeof(got));
        if (strcmp(got, out) != 0)
            fail_msg("list, chunks of %zu: %s\ninspect: %s", k, got, out);
        docker_parsed_free(ctx);
    }
    free(b);
}

/* The operator's filter on inspect and list answers: allow only, deny
 * only, both, empty lists; a label a policy names is kept though denied;
 * what is filtered out does not set labels_truncated (the limits cut
 * nothing). */
static void
t_label_filter(void **state)
{
    static const char *const app[] = {"app.*"};
    static const char *const pw[] = {"*password*"};
    static const char *const both_allow[] = {"app.*", "com.example.*"};
    static const char *const policy_deny[] = {"reapd.*", "team"};
    char got[512];

    (void)state;
    filtered(NULL, 0, NULL, 0, got, sizeof(got));
    assert_string_equal(got, "reapd.managed=true app.tier=front "
                             "com.example.db-password=hunter2 team=a");
    filtered(app, 1, NULL, 0, got, sizeof(got));
    assert_string_equal(got, "reapd.managed=true app.tier=front");
    filtered(NULL, 0, pw, 1, got, sizeof(got));
    assert_string_equal(got, "reapd.managed=true app.tier=front team=a");
    filtered(both_allow, 2, pw, 1, got, sizeof(got));
    assert_string_equal(got, "reapd.managed=true app.tier=front");
    filtered(NULL, 0, policy_deny, 2, got, sizeof(got));
    assert_string_equal(got, "reapd.managed=true app.tier=front "
                             "com.example.db-password=hunter2");
}

/* What the filter leaves out takes no room under the limits: with
 * LIMIT_LABELS labels besides a denied one, all are kept and nothing is
 * flagged; without the filter, the last is over and flagged. */
static void
t_label_filter_before_limits(void **state)
{
    static const char *const deny[] = {"k0000"};
    struct label_filter f = {NULL, 0, (char **)deny, 1};
    struct docker_label_rules rules = {NULL, NULL, filter_keeps, &f};
    const struct docker_container *c;
    struct docker_parsed *ctx;
    char err[256];
    size_t len;
    char *s = inspect_labels(LIMIT_LABELS + 1, 1, "z", 1);
    char *b = exact(s, &len);

    (void)state;
    /* k0000 .. k0256 and z: 258 labels, k0000 denied. */
    assert_int_equal(
        docker_parse_inspect_with(b, len, 0, &rules, &ctx, &c, err, 256), 0);
    assert_int_equal(c->nlabels, LIMIT_LABELS);
    assert_true(c->labels_truncated);
    assert_null(label(c, "k0000"));
    docker_parsed_free(ctx);
    free(s);
    free(b);
    s = inspect_labels(LIMIT_LABELS, 1, "z", 1);
    b = exact(s, &len);
    assert_int_equal(
        docker_parse_inspect_with(b, len, 0, &rules, &ctx, &c, err, 256), 0);
    assert_int_equal(c->nlabels, LIMIT_LABELS);
    assert_false(c->labels_truncated);
    assert_null(label(c, "k0000"));
    assert_string_equal(label(c, "z"), "w");
    docker_parsed_free(ctx);
    assert_int_equal(docker_parse_inspect(b, len, &ctx, &c, err, 256), 0);
    assert_int_equal(c->nlabels, LIMIT_LABELS);
    assert_true(c->labels_truncated);
    assert_null(label(c, "z"));
    docker_parsed_free(ctx);
    free(s);
    free(b);
}
int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(t_inspect_exited_capture),
        cmocka_unit_test(t_inspect_running_capture),
        cmocka_unit_test(t_inspect_404_body),
        cmocka_unit_test(t_list_capture),
        cmocka_unit_test(t_list_empty_and_not_array),
        cmocka_unit_test(t_list_hostile),
        cmocka_unit_test(t_version_capture),
        cmocka_unit_test(t_engine_info_captures),
        cmocka_unit_test(t_engine_info_hostile),
        cmocka_unit_test(t_version_newer_engine_clamps),
        cmocka_unit_test(t_version_min_above_max),
        cmocka_unit_test(t_version_too_old),
        cmocka_unit_test(t_version_edges),
        cmocka_unit_test(t_inspect_every_truncation),
        cmocka_unit_test(t_list_every_truncation),
        cmocka_unit_test(t_version_every_truncation),
        cmocka_unit_test(t_inspect_byte_flips),
        cmocka_unit_test(t_inspect_wrong_types_fixture),
        cmocka_unit_test(t_inspect_state_not_object),
        cmocka_unit_test(t_inspect_exit_codes),
        cmocka_unit_test(t_inspect_labels_and_names),
        cmocka_unit_test(t_corner_label_bounds),
        cmocka_unit_test(t_label_filter),
        cmocka_unit_test(t_label_filter_before_limits),
        cmocka_unit_test(t_inspect_bulky),
        cmocka_unit_test(t_list_bulky),
        cmocka_unit_test(t_inspect_bad_ids),
        cmocka_unit_test(t_inspect_unknown_status),
        cmocka_unit_test(t_regress_inspect_nul_in_id),
        cmocka_unit_test(t_regress_inspect_nul_in_status),
        cmocka_unit_test(t_regress_inspect_nul_in_label),
        cmocka_unit_test(t_regress_list_nul),
        cmocka_unit_test(t_huge_nesting),
        cmocka_unit_test(t_valid_id),
    };

    tu_test_filters();
    log_setup(getenv("TEST_DEBUG") ? LOG_LEVEL_DEBUG : LOG_LEVEL_ERROR,
              LOG_FORMAT_TEXT);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
