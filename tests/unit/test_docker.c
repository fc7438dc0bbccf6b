/*
 * test_docker — the Docker Engine API client in agent/docker.c.
 *
 * The parsers run on real answers captured from dockerd 20.10.24 (API
 * 1.41) in tests/fixtures/docker/, on handmade answers of engines we
 * cannot run here (a newer API, one too old), and on hostile input: every
 * truncation of a capture, wrong types, bad ids, deep nesting. Engine
 * answers are untrusted, so the rule is "fail cleanly or parse right,
 * never crash"; each input sits in a buffer of exactly its length, so an
 * over-read shows under ASan and valgrind.
 *
 * The calls then run end to end against the fake engine (tests/fake/) on
 * a unix socket, where HTTP statuses can be injected on demand.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <signal.h>
#include <sys/wait.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bounds.h"
#include "docker.h"
#include "fake_engine.h"
#include "lifecycle.h"
#include "log.h"
#include "loop.h"
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

static const char *A =
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa1";
static const char *B =
    "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb2";

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

/* ---- end to end, against the fake engine ----------------------------- */

struct e2e {
    char dir[64];
    char sock[96];
    struct loop *l;
    struct fake_engine *fe;
    struct docker *d;
    int subscribed;
    int lost;
    char lost_why[256];
    int events;
    char last_action[32];
    int stop_in_event;
};

/* The result of one call. */
struct res {
    int done;
    enum docker_status st;
    long http;
    char msg[512];
    int has_c;
    char id[65];
    char name[64];
    char image[64];
    char managed[16];
    enum lc_run run;
    bool finished;
    bool has_exit;
    int exit_code;
    size_t n;
    char ids[8][65];
};

static void
w_subscribed(void *arg)
{
    struct e2e *e = arg;

    e->subscribed++;
}

static void
w_event(const struct docker_event *ev, void *arg)
{
    struct e2e *e = arg;

    (void)ev;
    e->events++;
    if (e->stop_in_event)
        docker_watch_stop(e->d);
}

static void
w_lost(const char *why, uint64_t retry_ms, void *arg)
{
    struct e2e *e = arg;

    e->lost++;
    snprintf(e->lost_why, sizeof(e->lost_why), "%s", why);
    assert_true(retry_ms <= 200 * 2); /* capped by reconnect_max_ms */
}

static const struct docker_watch_cbs WCBS = {w_subscribed, w_event, w_lost,
                                             NULL};

/* A client whose calls time out after `req_ms`. */
static struct e2e *
e2e_new_timeout(int with_engine, long req_ms)
{
    struct e2e *e = calloc(1, sizeof(*e));

    assert_non_null(e);
    snprintf(e->dir, sizeof(e->dir), "/tmp/reapd-docker-XXXXXX");
    assert_non_null(mkdtemp(e->dir));
    snprintf(e->sock, sizeof(e->sock), "%s/docker.sock", e->dir);
    e->l = loop_new();
    assert_non_null(e->l);
    if (with_engine) {
        e->fe = fake_engine_new(loop_base(e->l), e->sock);
        assert_non_null(e->fe);
    }
    e->d = docker_new(e->l, e->sock, req_ms, 200);
    assert_non_null(e->d);
    return e;
}

static struct e2e *
e2e_new(int with_engine)
{
    return e2e_new_timeout(with_engine, 2000);
}

static void
e2e_free(struct e2e *e)
{
    docker_free(e->d);
    fake_engine_free(e->fe);
    loop_free(e->l);
    unlink(e->sock);
    rmdir(e->dir);
    free(e);
}

static void
copy_container(struct res *r, const struct docker_container *c)
{
    const char *m = label(c, "reapd.managed");

    r->has_c = 1;
    snprintf(r->id, sizeof(r->id), "%s", c->id);
    snprintf(r->name, sizeof(r->name), "%s", c->name ? c->name : "(null)");
    snprintf(r->image, sizeof(r->image), "%s", c->image ? c->image : "(null)");
    snprintf(r->managed, sizeof(r->managed), "%s", m ? m : "(none)");
    r->run = c->state.run;
    r->finished = c->state.finished;
    r->has_exit = c->state.has_exit_code;
    r->exit_code = c->state.exit_code;
}

static void
cb_inspect(enum docker_status st, const struct docker_container *c,
           const char *msg, void *arg)
{
    struct res *r = arg;

    r->done++;
    r->st = st;
    snprintf(r->msg, sizeof(r->msg), "%s", msg ? msg : "");
    if (c != NULL)
        copy_container(r, c);
}

static void
cb_list(enum docker_status st, const struct docker_container *cs, size_t n,
        const char *msg, void *arg)
{
    struct res *r = arg;
    size_t i;

    r->done++;
    r->st = st;
    r->n = n;
    r->has_c = cs != NULL;
    snprintf(r->msg, sizeof(r->msg), "%s", msg ? msg : "");
    for (i = 0; i < n && i < 8; i++)
        snprintf(r->ids[i], sizeof(r->ids[i]), "%s", cs[i].id);
    if (n > 0)
        copy_container(r, &cs[0]);
}

static void
cb_delete(enum docker_status st, long http_status, const char *msg, void *arg)
{
    struct res *r = arg;

    r->done++;
    r->st = st;
    r->http = http_status;
    snprintf(r->msg, sizeof(r->msg), "%s", msg ? msg : "");
}

static struct e2e *
e2e_subscribed_timeout(long req_ms)
{
    struct e2e *e = e2e_new_timeout(1, req_ms);

    assert_int_equal(docker_watch_start(e->d, &WCBS, e, 0), 0);
    TU_RUN_UNTIL(e->l, e->subscribed > 0, 3000);
    return e;
}

static struct e2e *
e2e_subscribed(void)
{
    return e2e_subscribed_timeout(2000);
}

static void
do_inspect(struct e2e *e, const char *id, struct res *r)
{
    memset(r, 0, sizeof(*r));
    assert_non_null(docker_inspect(e->d, id, cb_inspect, r));
    TU_RUN_UNTIL(e->l, r->done > 0, 3000);
    assert_int_equal(r->done, 1);
}

static void
do_list(struct e2e *e, const char *id, struct res *r)
{
    memset(r, 0, sizeof(*r));
    assert_non_null(docker_list(e->d, id, cb_list, r));
    TU_RUN_UNTIL(e->l, r->done > 0, 3000);
    assert_int_equal(r->done, 1);
}

static void
do_delete(struct e2e *e, const char *id, struct res *r)
{
    memset(r, 0, sizeof(*r));
    assert_non_null(docker_delete(e->d, id, true, false, cb_delete, r));
    TU_RUN_UNTIL(e->l, r->done > 0, 3000);
    assert_int_equal(r->done, 1);
}

static void
t_e2e_not_negotiated(void **state)
{
    struct e2e *e = e2e_new(1);
    struct res r = {0};

    (void)state;
    /* No version yet: no call can start. */
    assert_null(docker_api_version(e->d));
    assert_null(docker_inspect(e->d, A, cb_inspect, &r));
    assert_null(docker_list(e->d, NULL, cb_list, &r));
    assert_null(docker_delete(e->d, A, true, true, cb_delete, &r));
    assert_false(docker_watch_connected(e->d));
    assert_int_equal(docker_watch_start(e->d, &WCBS, e, 0), 0);
    /* Idempotent. */
    assert_int_equal(docker_watch_start(e->d, &WCBS, e, 0), 0);
    TU_RUN_UNTIL(e->l, e->subscribed > 0, 3000);
    assert_int_equal(e->subscribed, 1);
    assert_int_equal(e->lost, 0);
    assert_true(docker_watch_connected(e->d));
    assert_string_equal(docker_api_version(e->d), "1.41");
    assert_int_equal(fake_engine_count(e->fe, FAKE_VERSION), 1);
    assert_int_equal(fake_engine_count(e->fe, FAKE_EVENTS), 1);
    assert_int_equal(fake_engine_open_streams(e->fe), 1);
    assert_int_equal(docker_watch_reconnects(e->d), 0);
    assert_int_equal(r.done, 0);
    e2e_free(e);
}

static void
t_e2e_inspect(void **state)
{
    struct e2e *e = e2e_subscribed();
    struct res r;

    (void)state;
    fake_engine_add(e->fe, A, "web-1", "{\"reapd.managed\":\"true\"}", NULL,
                    1);
    do_inspect(e, A, &r);
    assert_int_equal(r.st, DOCKER_OK);
    assert_true(r.has_c);
    assert_string_equal(r.id, A);
    assert_string_equal(r.name, "web-1");
    assert_string_equal(r.image, "img:1");
    assert_string_equal(r.managed, "true");
    assert_int_equal(r.run, LC_RUN_RUNNING);
    assert_false(r.finished);

    fake_engine_exit(e->fe, A, 42, 42);
    do_inspect(e, A, &r);
    assert_int_equal(r.st, DOCKER_OK);
    assert_int_equal(r.run, LC_RUN_EXITED);
    assert_true(r.finished);
    assert_true(r.has_exit);
    assert_int_equal(r.exit_code, 42);

    do_inspect(e, B, &r);
    assert_int_equal(r.st, DOCKER_NOT_FOUND);
    assert_false(r.has_c);
    assert_non_null(strstr(r.msg, "No such container"));

    fake_engine_fail(e->fe, FAKE_INSPECT, 500, 1, "engine on fire");
    do_inspect(e, A, &r);
    assert_int_equal(r.st, DOCKER_FAILED);
    assert_false(r.has_c);
    assert_non_null(strstr(r.msg, "500"));
    assert_non_null(strstr(r.msg, "engine on fire"));

    /* Other 4xx: failed, not "not found". */
    fake_engine_fail(e->fe, FAKE_INSPECT, 400, 1, "bad parameter");
    do_inspect(e, A, &r);
    assert_int_equal(r.st, DOCKER_FAILED);

    /* The fault was used up; the real answer is back. */
    do_inspect(e, A, &r);
    assert_int_equal(r.st, DOCKER_OK);

    /* Ids are checked before anything is sent. */
    assert_null(docker_inspect(e->d, "abc", cb_inspect, &r));
    assert_null(docker_inspect(e->d, NULL, cb_inspect, &r));
    assert_null(docker_inspect(e->d, "../version", cb_inspect, &r));
    e2e_free(e);
}

static void
t_e2e_list(void **state)
{
    struct e2e *e = e2e_subscribed();
    struct res r;

    (void)state;
    do_list(e, NULL, &r);
    assert_int_equal(r.st, DOCKER_OK);
    assert_int_equal(r.n, 0);

    fake_engine_add(e->fe, A, "a", "{\"reapd.managed\":\"true\"}", NULL, 0);
    fake_engine_add(e->fe, B, "b", NULL, "exited", 0);
    do_list(e, NULL, &r);
    assert_int_equal(r.st, DOCKER_OK);
    assert_int_equal(r.n, 2);
    assert_string_equal(r.ids[0], A);
    assert_string_equal(r.ids[1], B);
    assert_string_equal(r.name, "a");
    assert_string_equal(r.managed, "true");
    assert_false(r.has_exit); /* a list carries no exit code */

    /* Filtered by id. */
    do_list(e, B, &r);
    assert_int_equal(r.st, DOCKER_OK);
    assert_int_equal(r.n, 1);
    assert_string_equal(r.ids[0], B);
    assert_int_equal(r.run, LC_RUN_EXITED);

    fake_engine_fail(e->fe, FAKE_LIST, 500, 1, "list broke");
    do_list(e, NULL, &r);
    assert_int_equal(r.st, DOCKER_FAILED);
    assert_int_equal(r.n, 0);
    assert_false(r.has_c);
    assert_non_null(strstr(r.msg, "list broke"));

    assert_null(docker_list(e->d, "nothex", cb_list, &r));
    e2e_free(e);
}

static void
t_e2e_delete(void **state)
{
    struct e2e *e = e2e_subscribed();
    struct res r;

    (void)state;
    fake_engine_add(e->fe, A, "a", NULL, "exited", 0);

    fake_engine_fail(e->fe, FAKE_DELETE, 409, 1,
                     "removal of container is already in progress");
    do_delete(e, A, &r);
    assert_int_equal(r.st, DOCKER_CONFLICT);
    assert_int_equal(r.http, 409);
    assert_non_null(strstr(r.msg, "already in progress"));

    fake_engine_fail(e->fe, FAKE_DELETE, 500, 1, "failed to delete task");
    do_delete(e, A, &r);
    assert_int_equal(r.st, DOCKER_FAILED);
    assert_int_equal(r.http, 500);
    assert_non_null(strstr(r.msg, "failed to delete task"));
    assert_true(fake_engine_has(e->fe, A));

    do_delete(e, A, &r);
    assert_int_equal(r.st, DOCKER_OK);
    assert_int_equal(r.http, 204);
    assert_false(fake_engine_has(e->fe, A));

    do_delete(e, A, &r);
    assert_int_equal(r.st, DOCKER_NOT_FOUND);
    assert_int_equal(r.http, 404);
    assert_int_equal(fake_engine_count(e->fe, FAKE_DELETE), 4);

    assert_null(docker_delete(e->d, "A", true, false, cb_delete, &r));
    e2e_free(e);
}

/* docker_list_all hands its answer over: it stays readable after the
 * call is done, an entry at a time, until the caller frees it (a relist
 * takes it in over several loop turns); a bad entry is skipped, not the
 * answer; an error hands nothing. */
struct kept {
    int done;
    enum docker_status st;
    struct docker_list *ans;
    size_t n;
};

static void
cb_list_kept(enum docker_status st, struct docker_list *ans, size_t n,
             const char *msg, void *arg)
{
    struct kept *k = arg;

    (void)msg;
    k->done++;
    k->st = st;
    k->ans = ans;
    k->n = n;
}

static void
t_e2e_list_all_handed_over(void **state)
{
    struct e2e *e = e2e_subscribed();
    const struct docker_container *c;
    struct kept k = {0};

    (void)state;
    fake_engine_add(e->fe, A, "a", "{\"k\":\"v\",\"k2\":\"v2\"}", "exited", 0);
    fake_engine_add(e->fe, B, "b", NULL, NULL, 0);
    assert_non_null(docker_list_all(e->d, cb_list_kept, &k));
    TU_RUN_UNTIL(e->l, k.done == 1, 3000);
    tu_run_for(e->l, 20); /* the call's own memory is long gone */
    assert_int_equal(k.st, DOCKER_OK);
    assert_non_null(k.ans);
    assert_int_equal(k.n, 2);
    assert_int_equal(docker_list_entry(k.ans, 0, &c), 0);
    assert_string_equal(c->id, A);
    assert_string_equal(c->name, "a");
    assert_int_equal(c->state.run, LC_RUN_EXITED);
    assert_int_equal(c->nlabels, 2);
    assert_string_equal(c->labels[1].value, "v2");
    assert_int_equal(docker_list_entry(k.ans, 1, &c), 0);
    assert_string_equal(c->id, B);
    assert_int_equal(c->nlabels, 0);
    assert_int_equal(docker_list_entry(k.ans, 2, &c), 1);
    assert_null(c);
    docker_list_free(k.ans);

    /* An entry without a valid Id is skipped; the others are read. */
    memset(&k, 0, sizeof(k));
    fake_engine_add(e->fe, "zz", "bad", NULL, NULL, 0);
    assert_non_null(docker_list_all(e->d, cb_list_kept, &k));
    TU_RUN_UNTIL(e->l, k.done == 1, 3000);
    assert_int_equal(k.st, DOCKER_OK);
    assert_int_equal(k.n, 3);
    assert_int_equal(docker_list_entry(k.ans, 0, &c), 0);
    assert_int_equal(docker_list_entry(k.ans, 2, &c), 1);
    assert_int_equal(docker_list_entry(k.ans, 1, &c), 0);
    assert_string_equal(c->id, B);
    assert_int_equal(docker_list_free_some(k.ans, 1), 1); /* one piece */
    assert_int_equal(docker_list_free_some(NULL, 1), 1);

    memset(&k, 0, sizeof(k));
    fake_engine_fail(e->fe, FAKE_LIST, 500, 1, "list broken");
    assert_non_null(docker_list_all(e->d, cb_list_kept, &k));
    TU_RUN_UNTIL(e->l, k.done == 1, 3000);
    assert_int_equal(k.st, DOCKER_FAILED);
    assert_null(k.ans);
    assert_int_equal(k.n, 0);
    e2e_free(e);
}

/* A big answer lives in pieces of its own, given back a few at a time:
 * entries stay readable until the first piece goes. Its 2.9 MB take
 * more than the usual 2 s under valgrind on a busy machine: the call's
 * timeout is not what is tested here. */
static void
t_e2e_list_all_freed_in_pieces(void **state)
{
    struct e2e *e = e2e_subscribed_timeout(30000);
    const struct docker_container *c;
    struct kept k = {0};
    struct tu_sbuf labels = {0};
    char id[65], name[32];
    size_t calls = 0;
    int i;

    (void)state;
    tu_sb_printf(&labels, "{");
    for (i = 0; i < 6; i++)
        tu_sb_printf(&labels, "%s\"label.%d\":\"%04000d\"", i ? "," : "", i,
                     i);
    tu_sb_printf(&labels, "}");
    for (i = 0; i < 120; i++) {
        snprintf(id, sizeof(id), "%064x", i + 1);
        snprintf(name, sizeof(name), "c%d", i);
        fake_engine_add(e->fe, id, name, labels.p, "exited", 0);
    }
    assert_non_null(docker_list_all(e->d, cb_list_kept, &k));
    TU_RUN_UNTIL(e->l, k.done == 1, 30000);
    assert_int_equal(k.st, DOCKER_OK);
    assert_int_equal(k.n, 120);
    assert_int_equal(docker_list_entry(k.ans, 119, &c), 0);
    assert_string_equal(c->name, "c119");
    assert_int_equal(c->nlabels, 6);
    /* 120 entries of 6 labels of 4,000 bytes: more than one piece. */
    while (docker_list_free_some(k.ans, 1) == 0)
        calls++;
    assert_true(calls >= 1);
    free(labels.p);
    e2e_free(e);
}

static void
t_e2e_cancel(void **state)
{
    struct e2e *e = e2e_subscribed();
    struct res ri = {0}, rl = {0}, rd = {0};
    struct docker_req *qi, *ql, *qd;

    (void)state;
    fake_engine_add(e->fe, A, "a", NULL, "exited", 0);
    fake_engine_delay(e->fe, FAKE_INSPECT, 150, NULL);
    fake_engine_delay(e->fe, FAKE_DELETE, 150, NULL);
    qi = docker_inspect(e->d, A, cb_inspect, &ri);
    ql = docker_list(e->d, NULL, cb_list, &rl);
    qd = docker_delete(e->d, A, true, true, cb_delete, &rd);
    assert_non_null(qi);
    assert_non_null(ql);
    assert_non_null(qd);
    /* The list is cancelled at once, the others once the engine has
     * them. */
    docker_cancel(ql);
    tu_run_for(e->l, 50);
    assert_int_equal(fake_engine_count(e->fe, FAKE_INSPECT), 1);
    docker_cancel(qi);
    docker_cancel(qd);
    docker_cancel(NULL);
    tu_run_for(e->l, 400);
    assert_int_equal(ri.done, 0);
    assert_int_equal(rl.done, 0);
    assert_int_equal(rd.done, 0);
    /* The engine still carried out the DELETE it had received. */
    assert_false(fake_engine_has(e->fe, A));
    e2e_free(e);
}

/* docker_free with calls in flight: no callback, nothing leaks. */
static void
t_e2e_free_in_flight(void **state)
{
    struct e2e *e = e2e_subscribed();
    struct res ri = {0}, rd = {0};

    (void)state;
    fake_engine_add(e->fe, A, "a", NULL, NULL, 0);
    fake_engine_delay(e->fe, FAKE_INSPECT, 200, NULL);
    fake_engine_delay(e->fe, FAKE_DELETE, 200, NULL);
    assert_non_null(docker_inspect(e->d, A, cb_inspect, &ri));
    assert_non_null(docker_delete(e->d, A, false, false, cb_delete, &rd));
    /* Freed once the engine has the DELETE, before its answer. */
    TU_RUN_UNTIL(e->l, fake_engine_count(e->fe, FAKE_DELETE) == 1, 3000);
    docker_free(e->d);
    e->d = NULL;
    /* Past the engine's late answer (the fake keeps it until sent). */
    tu_run_for(e->l, 350);
    assert_int_equal(ri.done, 0);
    assert_int_equal(rd.done, 0);
    e2e_free(e);
}

static void
t_e2e_version_fault_retried(void **state)
{
    struct e2e *e = e2e_new(1);

    (void)state;
    fake_engine_fail(e->fe, FAKE_VERSION, 500, 2, "not yet");
    assert_int_equal(docker_watch_start(e->d, &WCBS, e, 0), 0);
    TU_RUN_UNTIL(e->l, e->subscribed > 0, 5000);
    assert_int_equal(e->lost, 2);
    assert_non_null(strstr(e->lost_why, "500"));
    assert_int_equal(fake_engine_count(e->fe, FAKE_VERSION), 3);
    assert_string_equal(docker_api_version(e->d), "1.41");
    e2e_free(e);
}

static void
t_e2e_no_engine(void **state)
{
    struct e2e *e = e2e_new(0);

    (void)state;
    assert_int_equal(docker_watch_start(e->d, &WCBS, e, 0), 0);
    TU_RUN_UNTIL(e->l, e->lost > 0, 3000);
    assert_int_equal(e->subscribed, 0);
    assert_false(docker_watch_connected(e->d));
    assert_null(docker_api_version(e->d));
    assert_non_null(strstr(e->lost_why, "version"));
    docker_watch_stop(e->d);
    e2e_free(e);
}

static void
t_e2e_events_and_reconnect(void **state)
{
    struct e2e *e = e2e_subscribed();
    int64_t cp;

    (void)state;
    fake_engine_add(e->fe, A, "a", NULL, NULL, 1);
    TU_RUN_UNTIL(e->l, e->events >= 2, 3000);
    assert_int_equal(e->events, 2); /* create, start */
    assert_int_equal(docker_watch_events(e->d), 2);
    cp = docker_watch_checkpoint(e->d);
    assert_true(cp > 0);
    fake_engine_cut_streams(e->fe);
    /* Happens while the stream is down; the engine keeps the events. */
    fake_engine_add(e->fe, B, "b", NULL, NULL, 1);
    TU_RUN_UNTIL(e->l, e->subscribed >= 2, 3000);
    assert_int_equal(e->lost, 1);
    assert_int_equal(docker_watch_reconnects(e->d), 1);
    assert_true(docker_watch_connected(e->d));
    /* Resumed just after the checkpoint: B's two events come, A's are
     * not replayed. */
    tu_run_for(e->l, 200);
    assert_int_equal(e->events, 4);
    assert_true(docker_watch_checkpoint(e->d) > cp);
    e2e_free(e);
}

/* A flood of bad events: each stepped over, the stream never reconnected,
 * the checkpoint moved past those with a time, one log line at most. */
static void
t_e2e_rejected_events(void **state)
{
    struct e2e *e = e2e_subscribed();
    char path[] = "/tmp/reapd-log-XXXXXX", line[4096];
    int fd = mkstemp(path), i, lines = 0;
    enum log_level was = log_get_level();
    FILE *f;

    (void)state;
    assert_true(fd >= 0);
    log_setup(LOG_LEVEL_WARN, LOG_FORMAT_TEXT);
    log_set_fd(fd);
    for (i = 0; i < 200; i++)
        fake_engine_stream_raw(e->fe, "{\"Type\":\"container\",,}\n");
    fake_engine_stream_raw(e->fe, "{\"Type\":\"network\",\"timeNano\":"
                                  "4000000000000000000}\n");
    fake_engine_add(e->fe, A, "a", NULL, NULL, 1);
    TU_RUN_UNTIL(e->l, e->events >= 2, 3000);
    log_set_fd(-1);
    log_setup(was, LOG_FORMAT_TEXT);
    assert_int_equal(docker_watch_rejected(e->d), 200);
    assert_int_equal(docker_watch_reconnects(e->d), 0);
    assert_int_equal(e->events, 2);
    assert_true(docker_watch_checkpoint(e->d) >= INT64_C(4000000000000000000));
    f = fdopen(fd, "r");
    assert_non_null(f);
    rewind(f);
    while (fgets(line, sizeof line, f) != NULL)
        if (strstr(line, "stepped over") != NULL)
            lines++;
    fclose(f);
    unlink(path);
    assert_int_equal(lines, 1);
    e2e_free(e);
}

/*
 * The subscriber stops the watch from inside its own on_event. The call
 * stack then is loop's on_data -> events_parser_feed -> json_stream_feed
 * -> yajl -> on_event, and docker_watch_stop frees the events parser (and
 * its yajl handle) under all of them. It runs in a child process, so a
 * crash there fails this test instead of ending the whole run; no cmocka
 * assertion may run in the child (it would resume the test runner there).
 */
static int
stop_from_event_child(void *arg)
{
    const char *dir = arg;
    struct e2e e;
    uint64_t deadline;
    int rc = 0;

    memset(&e, 0, sizeof(e));
    snprintf(e.dir, sizeof(e.dir), "%s", dir);
    snprintf(e.sock, sizeof(e.sock), "%s/docker.sock", e.dir);
    e.l = loop_new();
    if (e.l == NULL)
        return 11;
    e.fe = fake_engine_new(loop_base(e.l), e.sock);
    e.d = docker_new(e.l, e.sock, 2000, 200);
    if (e.fe == NULL || e.d == NULL)
        return 12;
    docker_watch_start(e.d, &WCBS, &e, 0);
    deadline = tu_deadline(3000);
    while (e.subscribed == 0 && tu_turn(e.l, deadline))
        ;
    if (e.subscribed == 0)
        return 13;
    e.stop_in_event = 1;
    fake_engine_add(e.fe, A, "a", NULL, NULL, 1);
    tu_run_for(e.l, 200);
    /* Stopped after the first event; the second never delivered. */
    if (e.events != 1 || docker_watch_connected(e.d))
        rc = 14;
    docker_free(e.d);
    fake_engine_free(e.fe);
    loop_free(e.l);
    return rc;
}

static void
t_regress_stop_watch_from_on_event(void **state)
{
    int st;
    char dir[64], sock[96];

    (void)state;
    /* Made and removed here: the child may not live to clean up. */
    snprintf(dir, sizeof(dir), "/tmp/reapd-docker-XXXXXX");
    assert_non_null(mkdtemp(dir));
    snprintf(sock, sizeof(sock), "%s/docker.sock", dir);
    st = tu_fork_status(stop_from_event_child, dir);
    unlink(sock);
    rmdir(dir);
    if (WIFSIGNALED(st))
        fail_msg("docker_watch_stop from on_event: the process died of "
                 "signal %d (use after free of the events parser)",
                 WTERMSIG(st));
    if (WEXITSTATUS(st) != 0)
        fail_msg("docker_watch_stop from on_event: child failed with %d",
                 WEXITSTATUS(st));
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
        cmocka_unit_test(t_e2e_not_negotiated),
        cmocka_unit_test(t_e2e_inspect),
        cmocka_unit_test(t_e2e_list),
        cmocka_unit_test(t_e2e_delete),
        cmocka_unit_test(t_e2e_list_all_handed_over),
        cmocka_unit_test(t_e2e_list_all_freed_in_pieces),
        cmocka_unit_test(t_e2e_cancel),
        cmocka_unit_test(t_e2e_free_in_flight),
        cmocka_unit_test(t_e2e_version_fault_retried),
        cmocka_unit_test(t_e2e_no_engine),
        cmocka_unit_test(t_e2e_events_and_reconnect),
        cmocka_unit_test(t_e2e_rejected_events),
        cmocka_unit_test(t_regress_stop_watch_from_on_event),
    };

    signal(SIGPIPE, SIG_IGN); /* the fake engine writes to closed peers */
    tu_test_filters();
    log_setup(getenv("TEST_DEBUG") ? LOG_LEVEL_DEBUG : LOG_LEVEL_ERROR,
              LOG_FORMAT_TEXT);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
