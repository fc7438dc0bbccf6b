/*
 * Unit tests for events.c: which objects become events, what they carry,
 * and that chunking, cut streams and oversized objects behave.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "bounds.h"
#include "events.h"
#include "policy.h"
#include "testutil.h"

#define ID  "d3da67e34a052e59c56d92b96b973c5a93d0ac1f50cf3af8ad65f37d3b4ad769"
#define ID2 "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

/* Streams recorded from dockerd (tu_read_text). */
#define EVENTS_FIXTURES FIXTURES_DIR "/events"

/* An API 1.44+ event: no status/id/from. */
#define EVENT(type, action, id, attrs, tail)                                  \
    "{\"Type\":\"" type "\",\"Action\":\"" action                             \
    "\",\"Actor\":{\"ID\":\"" id "\",\"Attributes\":{" attrs                  \
    "}},\"scope\":\"local\"" tail "}\n"

/* ---- helpers --------------------------------------------------------- */

/* A copy of what the callback saw, since the event dies with it. */
struct seen {
    enum event_action action;
    char action_text[64];
    char id[65];
    int64_t time_nano;
    int has_exit_code;
    int exit_code;
    char name[32];
    char image[32];
    int has_name, has_image;
    size_t nattrs;
};

#define MAX_SEEN 16

struct record {
    struct tu_sbuf log;
    struct seen seen[MAX_SEEN];
    size_t nseen;
};

static void
record_cb(const struct docker_event *ev, void *arg)
{
    struct record *r = arg;
    struct seen *s;
    size_t i;

    tu_sb_printf(&r->log, "%d '%s' %s t=%lld", (int)ev->action,
                 ev->action_text, ev->id, (long long)ev->time_nano);
    if (ev->has_exit_code)
        tu_sb_printf(&r->log, " exit=%d", ev->exit_code);
    tu_sb_printf(&r->log, " name=%s image=%s", ev->name ? ev->name : "-",
                 ev->image ? ev->image : "-");
    for (i = 0; i < ev->nattrs; i++)
        tu_sb_printf(&r->log, " [%s=%s%s]", ev->attrs[i].key,
                     ev->attrs[i].value, ev->attrs[i].truncated ? "~" : "");
    if (ev->attrs_dropped > 0)
        tu_sb_printf(&r->log, " dropped=%zu", ev->attrs_dropped);
    tu_sb_printf(&r->log, "\n");
    if (r->nseen == MAX_SEEN)
        return;
    s = &r->seen[r->nseen++];
    memset(s, 0, sizeof *s);
    s->action = ev->action;
    snprintf(s->action_text, sizeof s->action_text, "%s", ev->action_text);
    snprintf(s->id, sizeof s->id, "%s", ev->id);
    s->time_nano = ev->time_nano;
    s->has_exit_code = ev->has_exit_code;
    s->exit_code = ev->exit_code;
    s->has_name = ev->name != NULL;
    s->has_image = ev->image != NULL;
    snprintf(s->name, sizeof s->name, "%s", ev->name ? ev->name : "");
    snprintf(s->image, sizeof s->image, "%s", ev->image ? ev->image : "");
    s->nattrs = ev->nattrs;
}

/* When set, run() parses with the operator's filter `run_filter` and
 * reapd.managed as the label a policy names. */
static const struct label_filter *run_filter;

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

/* Feeds `text` in chunks of `chunk` (0: at once) and returns the events
 * seen and the parser's state as text; the caller frees it. */
static char *
run(const char *text, size_t len, size_t chunk,
    const struct events_limits *lim, struct record *out)
{
    struct record r;
    struct events_parser *p;
    size_t off;
    int rc = 0;

    memset(&r, 0, sizeof r);
    p = events_parser_new(lim, record_cb, &r);
    assert_non_null(p);
    if (run_filter != NULL) {
        events_parser_set_labels(p, names_managed, NULL);
        events_parser_set_filter(p, filter_keeps, (void *)run_filter);
    }
    if (chunk == 0)
        chunk = len ? len : 1;
    for (off = 0; off < len && rc == 0; off += chunk)
        rc = events_parser_feed(p, text + off,
                                len - off < chunk ? len - off : chunk);
    tu_sb_printf(&r.log, "count=%llu skipped=%llu pending=%zu",
                 (unsigned long long)events_parser_count(p),
                 (unsigned long long)events_parser_skipped(p),
                 events_parser_pending(p));
    if (events_parser_rejected(p) > 0)
        tu_sb_printf(&r.log, " rejected=%llu '%s'",
                     (unsigned long long)events_parser_rejected(p),
                     events_parser_last_rejection(p));
    if (rc != 0)
        tu_sb_printf(&r.log, " error '%s'", events_parser_error(p));
    else
        assert_null(events_parser_error(p));
    events_parser_free(p);
    if (out != NULL)
        *out = r;
    return r.log.p;
}

/* Every chunk size must give what one chunk gives; returns that (caller
 * frees) and the one-chunk record in `out`. */
static char *
run_all_chunks(const char *text, const struct events_limits *lim,
               struct record *out)
{
    size_t len = strlen(text), k;
    char *whole = run(text, len, 0, lim, out);
    char *part;

    for (k = 1; k <= len; k++) {
        part = run(text, len, k, lim, NULL);
        if (strcmp(part, whole) != 0)
            fail_msg("chunk size %zu:\n%s\nwhole:\n%s", k, part, whole);
        free(part);
    }
    return whole;
}

/* The concatenation of `n` strings; the caller frees it. Keeps long
 * streams readable as one line per event. */
static char *
join(const char *const *parts, size_t n)
{
    size_t i, len = 0;
    char *p;

    for (i = 0; i < n; i++)
        len += strlen(parts[i]);
    p = malloc(len + 1);
    assert_non_null(p);
    p[0] = '\0';
    for (i = 0; i < n; i++)
        strcat(p, parts[i]);
    return p;
}

#define JOIN(a) join(a, sizeof a / sizeof a[0])

static void
expect_tail(const char *r, const char *tail)
{
    size_t rl = strlen(r), tl = strlen(tail);

    if (rl < tl || strcmp(r + rl - tl, tail) != 0)
        fail_msg("expected to end with '%s':\n%s", tail, r);
}

/* ---- tests ----------------------------------------------------------- */

static void
test_action_from_string(void **state)
{
    static const struct {
        const char *s;
        enum event_action a;
    } t[] = {
        {"create", DOCKER_EV_CREATE},
        {"start", DOCKER_EV_START},
        {"restart", DOCKER_EV_RESTART},
        {"die", DOCKER_EV_DIE},
        {"rename", DOCKER_EV_RENAME},
        {"destroy", DOCKER_EV_DESTROY},
        {"oom", DOCKER_EV_OTHER},
        {"kill", DOCKER_EV_OTHER},
        {"stop", DOCKER_EV_OTHER},
        {"pause", DOCKER_EV_OTHER},
        {"update", DOCKER_EV_OTHER},
        {"attach", DOCKER_EV_OTHER},
        {"exec_start: sh", DOCKER_EV_OTHER},
        {"health_status: healthy", DOCKER_EV_OTHER},
        {"Die", DOCKER_EV_OTHER},
        {"die ", DOCKER_EV_OTHER},
        {"", DOCKER_EV_OTHER},
    };
    size_t i;

    for (i = 0; i < sizeof t / sizeof t[0]; i++)
        assert_int_equal(events_action_from_string(t[i].s), t[i].a);
    assert_int_equal(events_action_from_string(NULL), DOCKER_EV_OTHER);
}

static void
test_recorded_stream(void **state)
{
    char *text = tu_read_text(EVENTS_FIXTURES,
                              "dockerd-20.10.24-run-exit42.jsonl", NULL);
    struct record rec;
    char *r = run_all_chunks(text, NULL, &rec);
    const struct seen *die;

    expect_tail(r, "count=5 skipped=2 pending=0");
    assert_int_equal(rec.nseen, 5);
    assert_int_equal(rec.seen[0].action, DOCKER_EV_CREATE);
    assert_int_equal(rec.seen[1].action, DOCKER_EV_OTHER);
    assert_string_equal(rec.seen[1].action_text, "attach");
    assert_int_equal(rec.seen[2].action, DOCKER_EV_START);
    assert_int_equal(rec.seen[3].action, DOCKER_EV_DIE);
    assert_int_equal(rec.seen[4].action, DOCKER_EV_DESTROY);
    die = &rec.seen[3];
    assert_string_equal(die->id, ID);
    assert_string_equal(die->action_text, "die");
    assert_int_equal(die->has_exit_code, 1);
    assert_int_equal(die->exit_code, 42);
    assert_string_equal(die->name, "t42");
    assert_string_equal(die->image, "reapd-test:1");
    assert_true(die->time_nano == INT64_C(1796213267253993408));
    assert_int_equal(die->nattrs, 4);
    assert_non_null(strstr(r, " exit=42 name=t42 image=reapd-test:1 "
                              "[exitCode=42] [image=reapd-test:1] "
                              "[name=t42] [reapd.managed=true]\n"));
    /* No exit code on the others. */
    assert_int_equal(rec.seen[0].has_exit_code, 0);
    assert_int_equal(rec.seen[4].has_exit_code, 0);
    assert_int_equal(rec.seen[4].nattrs, 3);
    free(r);
    free(text);
}

static void
test_new_api_shape(void **state)
{
    static const char *const events[] = {
        EVENT("container", "exec_start: sh -c true", ID,
              "\"execID\":\"abc\",\"image\":\"alpine\",\"name\":\"x\"",
              ",\"time\":1700000000,\"timeNano\":1700000000000000001"),
        EVENT("container", "health_status: healthy", ID, "",
              ",\"timeNano\":5"),
        EVENT("container", "kill", ID2, "\"signal\":\"15\"", ""),
    };
    char *text = JOIN(events);
    struct record rec;
    char *r = run_all_chunks(text, NULL, &rec);

    expect_tail(r, "count=3 skipped=0 pending=0");
    assert_int_equal(rec.seen[0].action, DOCKER_EV_OTHER);
    assert_string_equal(rec.seen[0].action_text, "exec_start: sh -c true");
    assert_true(rec.seen[0].time_nano == INT64_C(1700000000000000001));
    assert_int_equal(rec.seen[0].nattrs, 3);
    assert_string_equal(rec.seen[0].image, "alpine");
    assert_int_equal(rec.seen[1].action, DOCKER_EV_OTHER);
    assert_string_equal(rec.seen[1].action_text, "health_status: healthy");
    assert_int_equal(rec.seen[1].nattrs, 0);
    assert_int_equal(rec.seen[1].has_name, 0);
    assert_int_equal(rec.seen[1].has_image, 0);
    assert_int_equal(rec.seen[2].action, DOCKER_EV_OTHER);
    assert_string_equal(rec.seen[2].id, ID2);
    free(r);
    free(text);
}

/* Legacy fields say one thing, the current ones another: current win. */
static void
test_legacy_fields_ignored(void **state)
{
    const char *text =
        "{\"status\":\"die\",\"id\":\"" ID2 "\",\"from\":\"x\","
        "\"Type\":\"container\",\"Action\":\"start\",\"Actor\":{\"ID\":\"" ID
        "\"}}"
        "{\"status\":\"die\",\"id\":\"" ID "\",\"from\":\"x\"}";
    struct record rec;
    char *r = run_all_chunks(text, NULL, &rec);

    expect_tail(r, "count=1 skipped=1 pending=0");
    assert_int_equal(rec.seen[0].action, DOCKER_EV_START);
    assert_string_equal(rec.seen[0].id, ID);
    assert_int_equal(rec.seen[0].nattrs, 0);
    free(r);
}

static void
test_type_filter(void **state)
{
    static const char *const events[] = {
        EVENT("network", "connect", ID, "\"container\":\"" ID "\"", ""),
        EVENT("image", "pull", ID, "", ""),
        EVENT("volume", "mount", ID, "", ""),
        EVENT("Container", "die", ID, "", ""),
        EVENT("container", "die", ID, "", ""),
        "{\"Action\":\"die\",\"Actor\":{\"ID\":\"" ID "\"}}",
        "{\"Type\":7,\"Action\":\"die\",\"Actor\":{\"ID\":\"" ID "\"}}",
        "[1,2] \"str\" 3 null\n",
    };
    char *text = JOIN(events);
    char *r = run_all_chunks(text, NULL, NULL);

    /* One container event; 4 other types, 2 objects without a proper
     * Type and 4 values that are no objects at all. */
    expect_tail(r, "count=1 skipped=10 pending=0");
    free(r);
    free(text);
}

static void
test_invalid_ids(void **state)
{
    static const char *const events[] = {
        /* 63 and 65 characters, upper case, not hex, a NUL, empty */
        EVENT(
            "container", "die",
            "d3da67e34a052e59c56d92b96b973c5a93d0ac1f50cf3af8ad65f37d3b4ad76",
            "", ""),
        EVENT("container", "die", ID "0", "", ""),
        EVENT(
            "container", "die",
            "D3DA67E34A052E59C56D92B96B973C5A93D0AC1F50CF3AF8AD65F37D3B4AD769",
            "", ""),
        EVENT(
            "container", "die",
            "g3da67e34a052e59c56d92b96b973c5a93d0ac1f50cf3af8ad65f37d3b4ad769",
            "", ""),
        EVENT("container", "die",
              "d3da67e34a052e59c56d92b96b973c5a93d0ac1f50cf3af8ad65f37d3b4ad76"
              "\\u0000",
              "", ""),
        EVENT("container", "die", "", "", ""),
        /* no Actor, Actor not an object, ID not a string */
        "{\"Type\":\"container\",\"Action\":\"die\"}",
        "{\"Type\":\"container\",\"Action\":\"die\",\"Actor\":\"x\"}",
        "{\"Type\":\"container\",\"Action\":\"die\",\"Actor\":{\"ID\":12}}",
        /* no Action, an empty one, one that is not a string */
        "{\"Type\":\"container\",\"Actor\":{\"ID\":\"" ID "\"}}",
        "{\"Type\":\"container\",\"Action\":\"\",\"Actor\":{\"ID\":\"" ID
        "\"}}",
        "{\"Type\":\"container\",\"Action\":[],\"Actor\":{\"ID\":\"" ID "\"}}",
        EVENT("container", "die", ID, "", ""),
    };
    char *text = JOIN(events);
    struct record rec;
    char *r = run_all_chunks(text, NULL, &rec);

    expect_tail(r, "count=1 skipped=12 pending=0");
    assert_string_equal(rec.seen[0].id, ID);
    free(r);
    free(text);
}

static void
test_exit_codes(void **state)
{
    static const struct {
        const char *attr;
        int has;
        int code;
    } t[] = {
        {"\"exitCode\":\"0\"", 1, 0},
        {"\"exitCode\":\"137\"", 1, 137},
        {"\"exitCode\":\"-1\"", 1, -1},
        {"\"exitCode\":\"2147483647\"", 1, 2147483647},
        {"\"exitCode\":\"-2147483648\"", 1, -2147483647 - 1},
        {"\"exitCode\":\"2147483648\"", 0, 0},
        {"\"exitCode\":\"-2147483649\"", 0, 0},
        {"\"exitCode\":\"99999999999\"", 0, 0},
        {"\"exitCode\":\"abc\"", 0, 0},
        {"\"exitCode\":\"\"", 0, 0},
        {"\"exitCode\":\"-\"", 0, 0},
        {"\"exitCode\":\" 1\"", 0, 0},
        {"\"exitCode\":\"1 \"", 0, 0},
        {"\"exitCode\":\"+1\"", 0, 0},
        {"\"exitCode\":\"1.0\"", 0, 0},
        {"\"exitCode\":\"1\\u0000\"", 0, 0},
        {"\"exitCode\":42", 0, 0},
        {"\"name\":\"no-code\"", 0, 0},
        {"\"exitCode\":\"3\",\"exitCode\":\"4\"", 1, 4},
    };
    char text[512];
    size_t i;

    for (i = 0; i < sizeof t / sizeof t[0]; i++) {
        struct record rec;
        char *r;

        snprintf(text, sizeof text, EVENT("container", "die", ID, "%s", ""),
                 t[i].attr);
        r = run_all_chunks(text, NULL, &rec);
        expect_tail(r, "count=1 skipped=0 pending=0");
        if (rec.seen[0].has_exit_code != t[i].has)
            fail_msg("%s: has_exit_code %d", t[i].attr,
                     rec.seen[0].has_exit_code);
        if (t[i].has)
            assert_int_equal(rec.seen[0].exit_code, t[i].code);
        free(r);
    }
    /* Only die carries one. */
    {
        struct record rec;
        const char *kill =
            EVENT("container", "kill", ID, "\"exitCode\":\"1\"", "");
        char *r = run(kill, strlen(kill), 0, NULL, &rec);

        expect_tail(r, "count=1 skipped=0 pending=0");

        assert_int_equal(rec.seen[0].has_exit_code, 0);
        free(r);
    }
}

static void
test_attributes(void **state)
{
    static const char *const events[] = {
        EVENT("container", "start", ID,
              "\"a\":\"1\",\"n\":5,\"b\":null,\"c\":{\"d\":\"e\"},"
              "\"f\":[\"g\"],\"t\":true,\"nul\":\"x\\u0000y\","
              "\"k\\u0000\":\"v\",\"name\":\"first\",\"image\":\"img\","
              "\"name\":\"second\"",
              ""),
        EVENT("container", "start", ID2, "\"only\":\"one\"", ""),
        EVENT("container", "start", ID2, "\"name\":7", ""),
        "{\"Type\":\"container\",\"Action\":\"stop\",\"Actor\":{\"ID\":\"" ID
        "\",\"Attributes\":\"none\"}}",
    };
    char *text = JOIN(events);
    struct record rec;
    char *r = run_all_chunks(text, NULL, &rec);

    expect_tail(r, "count=4 skipped=0 pending=0");
    /* Non-strings and strings with NUL are left out; order is kept. */
    assert_non_null(strstr(r, "name=second image=img [a=1] [name=first] "
                              "[image=img] [name=second]\n"));
    assert_int_equal(rec.seen[0].nattrs, 4);
    /* The buffer is reused: the next event sees only its own. */
    assert_non_null(strstr(r, "name=- image=- [only=one]\n"));
    assert_int_equal(rec.seen[1].nattrs, 1);
    /* A non-string name is no name. */
    assert_int_equal(rec.seen[2].has_name, 0);
    assert_int_equal(rec.seen[2].nattrs, 0);
    assert_int_equal(rec.seen[3].action, DOCKER_EV_OTHER);
    assert_int_equal(rec.seen[3].nattrs, 0);
    free(r);
    free(text);
}

static void
test_attributes_limit(void **state)
{
    struct events_limits lim = {.max_attrs = 4};
    const char *five =
        EVENT("container", "die", ID,
              "\"a\":\"1\",\"b\":\"2\",\"c\":\"3\",\"d\":\"4\",\"e\":\"5\","
              "\"name\":\"n\",\"x\":6",
              "");
    char *r;

    (void)state;
    /* Labels past the limit are dropped and counted, the engine's own
     * attributes kept; nothing fails and the next event is read. */
    r = run_all_chunks(five, &lim, NULL);
    expect_tail(r, "name=n image=- [a=1] [b=2] [c=3] [d=4] [name=n] "
                   "dropped=2\ncount=1 skipped=0 pending=0");
    free(r);
}

static bool
wants_managed(const char *key, size_t len, void *arg)
{
    (void)arg;
    return len == 13 && memcmp(key, "reapd.managed", 13) == 0;
}

/* Thousands of labels and values of hundreds of KB: the event is read,
 * what a policy names is kept whatever its place, the rest is bounded. */
static void
test_huge_event(void **state)
{
    struct tu_sbuf b;
    struct record rec;
    struct events_parser *p;
    size_t i, kept_bytes = 0;
    char *big = malloc(300 * 1024 + 1);

    (void)state;
    assert_non_null(big);
    memset(big, 'v', 300 * 1024);
    big[300 * 1024] = '\0';
    memset(&b, 0, sizeof b);
    tu_sb_printf(&b, "{\"Type\":\"container\",\"Action\":\"die\",\"Actor\":{"
                     "\"ID\":\"" ID "\",\"Attributes\":{\"exitCode\":\"3\"");
    for (i = 0; i < 5000; i++)
        tu_sb_printf(&b, ",\"label%zu\":\"%s\"", i, i < 3 ? big : "x");
    tu_sb_printf(&b, ",\"reapd.managed\":\"true\"}},\"timeNano\":5}\n");
    tu_sb_printf(&b, "%s", EVENT("container", "destroy", ID, "", ""));
    memset(&rec, 0, sizeof rec);
    p = events_parser_new(NULL, record_cb, &rec);
    assert_non_null(p);
    events_parser_set_labels(p, wants_managed, NULL);
    for (i = 0; i < b.len; i += 4096)
        assert_int_equal(events_parser_feed(
                             p, b.p + i, b.len - i < 4096 ? b.len - i : 4096),
                         0);
    assert_int_equal(events_parser_count(p), 2);
    assert_int_equal(events_parser_rejected(p), 0);
    assert_true(rec.seen[0].has_exit_code);
    assert_int_equal(rec.seen[0].exit_code, 3);
    assert_int_equal(rec.seen[0].time_nano, 5);
    /* The policy's label survives although it is number 5001. */
    assert_non_null(strstr(rec.log.p, " [reapd.managed=true]"));
    /* Values are cut to LIMIT_LABEL_VALUE and flagged. */
    assert_non_null(strstr(rec.log.p, " [label0=vvvv"));
    assert_non_null(strstr(rec.log.p, "v~] [label1="));
    /* 256 labels kept (all within LIMIT_LABEL_BYTES), exitCode and
     * reapd.managed too: 5002 attributes less 258. */
    assert_non_null(strstr(rec.log.p, "dropped=4744\n"));
    (void)kept_bytes;
    assert_int_equal(rec.seen[0].nattrs, 258);
    events_parser_free(p);
    free(rec.log.p);
    free(b.p);
    free(big);
}

/* Labels few enough for the count limit but big: those no policy names
 * share LIMIT_LABEL_BYTES (keys and values) and the rest are dropped and
 * counted; the policy's label is kept past the limit. */
static void
test_label_bytes_bounded(void **state)
{
    struct tu_sbuf b;
    struct record rec;
    struct events_parser *p;
    char value[4001];
    size_t i, per = strlen("label00") + sizeof(value) - 1;
    size_t fit = LIMIT_LABEL_BYTES / per;

    (void)state;
    memset(value, 'v', sizeof(value) - 1);
    value[sizeof(value) - 1] = '\0';
    memset(&b, 0, sizeof b);
    tu_sb_printf(&b, "{\"Type\":\"container\",\"Action\":\"die\",\"Actor\":{"
                     "\"ID\":\"" ID "\",\"Attributes\":{\"exitCode\":\"3\"");
    for (i = 0; i < 40; i++)
        tu_sb_printf(&b, ",\"label%02zu\":\"%s\"", i, value);
    tu_sb_printf(&b, ",\"reapd.managed\":\"true\"}},\"timeNano\":5}\n");
    memset(&rec, 0, sizeof rec);
    p = events_parser_new(NULL, record_cb, &rec);
    assert_non_null(p);
    events_parser_set_labels(p, wants_managed, NULL);
    assert_int_equal(events_parser_feed(p, b.p, b.len), 0);
    assert_int_equal(events_parser_count(p), 1);
    assert_true(fit < 40);
    /* The labels that fit, exitCode and the policy's label. */
    assert_int_equal(rec.seen[0].nattrs, fit + 2);
    assert_non_null(strstr(rec.log.p, " [reapd.managed=true]"));
    {
        char want[32];

        snprintf(want, sizeof(want), "dropped=%zu\n", 40 - fit);
        assert_non_null(strstr(rec.log.p, want));
    }
    events_parser_free(p);
    free(rec.log.p);
    free(b.p);
}

/* "été" with the escapes cut at every possible place. */
static void
test_split_escapes(void **state)
{
    const char *text =
        EVENT("container", "create", ID,
              "\"name\":\"\\u00e9t\\u00e9\",\"q\":\"a\\\"b\"", "");
    size_t len = strlen(text), cut;
    struct record rec;
    char *whole = run_all_chunks(text, NULL, &rec);

    assert_string_equal(rec.seen[0].name, "\xc3\xa9t\xc3\xa9");
    assert_non_null(strstr(whole, "[q=a\"b]"));
    /* Every cut inside the object (the text ends with "}\n"). */
    for (cut = 1; cut < len - 1; cut++) {
        struct record r2;
        struct events_parser *p;

        memset(&r2, 0, sizeof r2);
        p = events_parser_new(NULL, record_cb, &r2);
        assert_non_null(p);
        assert_int_equal(events_parser_feed(p, text, cut), 0);
        assert_int_equal(events_parser_count(p), 0);
        assert_int_equal(events_parser_pending(p), cut);
        assert_int_equal(events_parser_feed(p, text + cut, len - cut), 0);
        assert_int_equal(events_parser_count(p), 1);
        assert_int_equal(events_parser_pending(p), 0);
        assert_string_equal(r2.seen[0].name, "\xc3\xa9t\xc3\xa9");
        /* The same event line as in one piece. */
        assert_int_equal(strncmp(whole, r2.log.p, strlen(r2.log.p)), 0);
        assert_string_equal(whole + strlen(r2.log.p),
                            "count=1 skipped=0 pending=0");
        events_parser_free(p);
        free(r2.log.p);
    }
    free(whole);
}

static void
test_time_fallback(void **state)
{
    static const char *const events[] = {
        EVENT("container", "start", ID, "", ",\"time\":5,\"timeNano\":6"),
        EVENT("container", "start", ID, "", ",\"time\":5"),
        EVENT("container", "start", ID, "", ",\"time\":5,\"timeNano\":1.5"),
        EVENT("container", "start", ID, "", ",\"time\":5,\"timeNano\":\"7\""),
        EVENT("container", "start", ID, "", ""),
        EVENT("container", "start", ID, "", ",\"time\":1.5"),
        EVENT("container", "start", ID, "", ",\"time\":9223372037"),
        EVENT("container", "start", ID, "",
              ",\"timeNano\":99999999999999999999,\"time\":-2"),
    };
    char *text = JOIN(events);
    struct record rec;
    char *r = run_all_chunks(text, NULL, &rec);

    expect_tail(r, "count=8 skipped=0 pending=0");
    assert_true(rec.seen[0].time_nano == 6);
    assert_true(rec.seen[1].time_nano == INT64_C(5000000000));
    assert_true(rec.seen[2].time_nano == INT64_C(5000000000));
    assert_true(rec.seen[3].time_nano == INT64_C(5000000000));
    assert_true(rec.seen[4].time_nano == 0);
    assert_true(rec.seen[5].time_nano == 0);
    assert_true(rec.seen[6].time_nano == 0); /* would overflow */
    assert_true(rec.seen[7].time_nano == 0); /* before 1970: no time */
    free(r);
    free(text);
}

static void
test_cut_stream(void **state)
{
    char *text = tu_read_text(EVENTS_FIXTURES,
                              "dockerd-20.10.24-run-exit42.jsonl", NULL);
    const char *die = strstr(text, "{\"status\":\"die\"");
    size_t keep = (size_t)(die - text) + 100;
    struct record rec;
    char *r;

    r = run(text, keep, 0, NULL, &rec);
    /* create, attach, start; connect skipped; die held back. */
    expect_tail(r, "count=3 skipped=1 pending=100");
    free(r);
    /* Cut right after a newline: nothing pending. */
    r = run(text, (size_t)(die - text), 7, NULL, NULL);
    expect_tail(r, "count=3 skipped=1 pending=0");
    free(r);
    free(text);
}

static void
test_no_separators(void **state)
{
    const char *text =
        "{\"Type\":\"container\",\"Action\":\"start\",\"Actor\":{\"ID\":\"" ID
        "\"}}{\"Type\":\"container\",\"Action\":\"die\",\"Actor\":{\"ID\":"
        "\"" ID "\"}}  \r\n\t{\"Type\":\"container\",\"Action\":\"destroy\","
        "\"Actor\":{\"ID\":\"" ID "\"}}";
    char *r = run_all_chunks(text, NULL, NULL);

    expect_tail(r, "count=3 skipped=0 pending=0");
    free(r);
}

static void
test_malformed(void **state)
{
    static const char *const events[] = {
        EVENT("container", "start", ID, "", ""),
        "{\"Type\":\"container\",,}\n",
        EVENT("container", "die", ID, "", ""),
    };
    char *text = JOIN(events);
    struct events_parser *p;
    char *r = run_all_chunks(text, NULL, NULL);

    /* The second ',' (offset 172) is where it breaks; the line is stepped
     * over and the event after it is read. */
    expect_tail(r, "count=2 skipped=0 pending=0 rejected=1 'parse error: "
                   "invalid object key (must be a string) at byte 173'");
    free(r);
    free(text);
    p = events_parser_new(NULL, NULL, NULL);
    assert_non_null(p);
    assert_null(events_parser_last_rejection(p));
    /* Garbage without a newline: everything up to the next one goes. */
    assert_int_equal(events_parser_feed(p, "]", 1), 0);
    assert_int_equal(events_parser_rejected(p), 1);
    assert_null(strchr(events_parser_last_rejection(p), '\n'));
    assert_int_equal(events_parser_feed(p, "{}", 2), 0);
    assert_int_equal(events_parser_feed(p, "x\n{}", 4), 0);
    assert_int_equal(events_parser_skipped(p), 1);
    assert_int_equal(events_parser_rejected(p), 1);
    assert_null(events_parser_error(p));
    events_parser_free(p);
}

static void
test_event_limits(void **state)
{
    char *text = tu_read_text(EVENTS_FIXTURES,
                              "dockerd-20.10.24-run-exit42.jsonl", NULL);
    struct events_limits small = {.max_event_bytes = 300};
    struct events_limits shallow = {.max_depth = 3};
    char *r;

    /* The die line is the longest: 381 bytes. Over the limit, an event
     * is rejected and the ones after it still read. */
    r = run_all_chunks(text, &small, NULL);
    assert_non_null(strstr(r, "count=0 skipped=0 pending=0 rejected=7 "
                              "'document exceeds 300 bytes at byte"));
    free(r);
    small.max_event_bytes = 381;
    r = run_all_chunks(text, &small, NULL);
    expect_tail(r, "count=5 skipped=2 pending=0");
    free(r);
    small.max_event_bytes = 380;
    r = run_all_chunks(text, &small, NULL);
    assert_non_null(strstr(r, "count=4 skipped=2 pending=0 rejected=1 "
                              "'document exceeds 380 bytes"));
    free(r);
    /* Attributes sit at depth 3; one more level is refused. */
    r = run_all_chunks(text, &shallow, NULL);
    expect_tail(r, "count=5 skipped=2 pending=0");
    free(r);
    r = run_all_chunks(
        EVENT("container", "die", ID, "\"x\":{\"y\":\"z\"}", ""), &shallow,
        NULL);
    assert_non_null(strstr(r, "rejected=1 'nesting deeper than 3 at byte"));
    free(r);
    /* Defaults: no size limit, depth 8. */
    r = run_all_chunks("[[[[[[[[1]]]]]]]]", NULL, NULL);
    expect_tail(r, "count=0 skipped=1 pending=0");
    free(r);
    r = run_all_chunks("[[[[[[[[[1]]]]]]]]]", NULL, NULL);
    assert_non_null(strstr(r, "rejected=1 'nesting deeper than 8"));
    free(r);
    free(text);
}

/* A value of any size costs LIMIT_LABEL_VALUE; only an event bigger than
 * max_event_bytes as sent is rejected, and the stream goes on. */
static void
test_default_size_limit(void **state)
{
    static const char head[] = "{\"Type\":\"container\",\"Action\":\"start\","
                               "\"Actor\":{\"ID\":\"" ID "\"},\"pad\":\"";
    size_t n = 1024 * 1024, fill = n - (sizeof head - 1) - 3, i;
    char *text = malloc(n + 1);
    struct events_limits lim = {.max_event_bytes = n - 2};
    const char *small = EVENT("container", "die", ID, "", "");
    struct events_parser *p;

    (void)state;
    assert_non_null(text);
    memcpy(text, head, sizeof head - 1);
    for (i = 0; i < fill; i++)
        text[sizeof head - 1 + i] = 'x';
    memcpy(text + n - 3, "\"}\n", 4);
    p = events_parser_new(NULL, NULL, NULL);
    assert_int_equal(events_parser_feed(p, text, n), 0);
    assert_int_equal(events_parser_count(p), 1);
    events_parser_free(p);
    p = events_parser_new(&lim, NULL, NULL);
    assert_int_equal(events_parser_feed(p, text, n), 0);
    assert_int_equal(events_parser_count(p), 0);
    assert_int_equal(events_parser_rejected(p), 1);
    assert_non_null(
        strstr(events_parser_last_rejection(p), "exceeds 1048574 bytes"));
    assert_int_equal(events_parser_feed(p, small, strlen(small)), 0);
    assert_int_equal(events_parser_count(p), 1);
    events_parser_free(p);
    free(text);
}

/* A value cut to LIMIT_LABEL_VALUE whose kept part holds a UTF-8 lead
 * byte followed by escapes: the sequence is broken at the backslash, so
 * yajl sees it and the line is rejected whatever the chunking (fuzz
 * finding broken-utf8-then-escapes-rejected-only-chunked: in small chunks
 * the scanner's carry overflowed, in one piece the cut fell before the
 * lead byte and the event was kept). */
static void
test_broken_utf8_in_long_value(void **state)
{
    static const char head[] =
        "{\"Type\":\"container\",\"Action\":\"start\",\"Actor\":{\"ID\":"
        "\"" ID "\",\"Attributes\":{\"big\":\"";
    const char *good = EVENT("container", "die", ID, "", "");
    struct tu_sbuf b = {0};
    struct record rec;
    size_t i;
    char *r;

    (void)state;
    tu_sb_printf(&b, "%s", head);
    for (i = 0; i < 4000; i++)
        tu_sb_printf(&b, "x");
    tu_sb_printf(&b, "\xf8");
    for (i = 0; i < 100; i++)
        tu_sb_printf(&b, "\\\\");
    tu_sb_printf(&b, "\"}}}\n%s", good);
    r = run_all_chunks(b.p, NULL, &rec);
    assert_int_equal(rec.nseen, 1);
    assert_int_equal(rec.seen[0].action, DOCKER_EV_DIE);
    expect_tail(r, "count=1 skipped=0 pending=0 rejected=1 'lexical error: "
                   "invalid bytes in UTF8 string. at byte 4140'");
    free(r);
    free(b.p);
}

/* Times a checkpoint is built from: never negative, never INT64_MAX (the
 * resume point is one past it); skipped objects move it too. */
static void
test_time_guard(void **state)
{
    static const char *const events[] = {
        EVENT("container", "start", ID, "", ",\"timeNano\":-5"),
        EVENT("container", "start", ID, "",
              ",\"timeNano\":9223372036854775807"),
        EVENT("container", "start", ID, "", ",\"time\":9223372036"),
        EVENT("network", "connect", ID, "", ",\"timeNano\":77"),
    };
    char *text = JOIN(events);
    struct record rec;
    struct events_parser *p;

    (void)state;
    memset(&rec, 0, sizeof rec);
    p = events_parser_new(NULL, record_cb, &rec);
    assert_non_null(p);
    assert_int_equal(events_parser_feed(p, text, strlen(text)), 0);
    assert_int_equal(rec.nseen, 3);
    assert_int_equal(rec.seen[0].time_nano, 0);
    assert_int_equal(rec.seen[1].time_nano, 0);
    assert_int_equal(rec.seen[2].time_nano, 0);
    assert_int_equal(events_parser_last_time(p), 77);
    events_parser_free(p);
    free(rec.log.p);
    free(text);
}

/* A stream recorded byte for byte from dockerd 20.10.24 (API 1.41):
 * docker run --label reapd.managed=true ... sh -c 'exit 42'; docker rm. */
static void
test_real_capture(void **state)
{
    char *text = tu_read_text(EVENTS_FIXTURES,
                              "dockerd-20.10.24-real-capture.jsonl", NULL);
    struct record rec;
    char *r = run_all_chunks(text, NULL, &rec);

    (void)state;
    expect_tail(r, "count=5 skipped=0 pending=0");
    assert_int_equal(rec.seen[0].action, DOCKER_EV_CREATE);
    assert_int_equal(rec.seen[2].action, DOCKER_EV_START);
    assert_int_equal(rec.seen[3].action, DOCKER_EV_DIE);
    assert_int_equal(rec.seen[3].has_exit_code, 1);
    assert_int_equal(rec.seen[3].exit_code, 42);
    assert_string_equal(rec.seen[3].id, ID);
    assert_int_equal(rec.seen[4].action, DOCKER_EV_DESTROY);
    free(r);
    free(text);
}

/* Parses one die event whose labels are `n` of "label%02zu" with values
 * of `vlen` bytes, then `lastkey` with a value of `lastlen`; the event
 * is in rec->seen[0], its log line in rec->log. */
static void
labels_event(struct record *rec, size_t n, size_t vlen, const char *lastkey,
             size_t lastlen)
{
    struct tu_sbuf b;
    struct events_parser *p;
    char *value = malloc(vlen > lastlen ? vlen + 1 : lastlen + 1);
    size_t i;

    assert_non_null(value);
    memset(&b, 0, sizeof b);
    tu_sb_printf(&b, "{\"Type\":\"container\",\"Action\":\"die\",\"Actor\":{"
                     "\"ID\":\"" ID "\",\"Attributes\":{\"exitCode\":\"3\"");
    memset(value, 'v', vlen);
    value[vlen] = '\0';
    for (i = 0; i < n; i++)
        tu_sb_printf(&b, ",\"label%02zu\":\"%s\"", i, value);
    memset(value, 'w', lastlen);
    value[lastlen] = '\0';
    tu_sb_printf(&b, ",\"%s\":\"%s\"", lastkey, value);
    tu_sb_printf(&b, ",\"reapd.managed\":\"true\"}},\"timeNano\":5}\n");
    memset(rec, 0, sizeof *rec);
    p = events_parser_new(NULL, record_cb, rec);
    assert_non_null(p);
    events_parser_set_labels(p, wants_managed, NULL);
    assert_int_equal(events_parser_feed(p, b.p, b.len), 0);
    assert_int_equal(events_parser_count(p), 1);
    events_parser_free(p);
    free(value);
    free(b.p);
}

/* The labels no policy names share exactly LIMIT_LABEL_BYTES (keys and
 * values): that many are all kept, a byte more drops the last one alone
 * (a smaller one after it still fits); a key of LIMIT_LABEL_KEY bytes is
 * kept, one of a byte more dropped. exitCode and the policy's label are
 * kept besides. */
static void
test_corner_label_bounds(void **state)
{
    struct record rec;
    char key[LIMIT_LABEL_KEY + 2];
    /* 15 labels of 7 + 4089 bytes (4096), a last of 5 + `rest`. */
    size_t rest = LIMIT_LABEL_BYTES - 15 * 4096 - 5;

    (void)state;
    labels_event(&rec, 15, 4089, "lastk", rest);
    assert_int_equal(rec.seen[0].nattrs, 16 + 2);
    assert_null(strstr(rec.log.p, "dropped="));
    free(rec.log.p);
    labels_event(&rec, 15, 4089, "lastk", rest + 1);
    assert_int_equal(rec.seen[0].nattrs, 15 + 2);
    assert_non_null(strstr(rec.log.p, " dropped=1\n"));
    assert_null(strstr(rec.log.p, "[lastk="));
    free(rec.log.p);
    /* 16 of 4095 bytes fit (65520); the 17th does not; "z" does. */
    labels_event(&rec, 17, 4088, "z", 1);
    assert_int_equal(rec.seen[0].nattrs, 17 + 2);
    assert_non_null(strstr(rec.log.p, " dropped=1\n"));
    assert_non_null(strstr(rec.log.p, " [z=w]"));
    assert_null(strstr(rec.log.p, "[label16="));
    free(rec.log.p);

    memset(key, 'K', LIMIT_LABEL_KEY);
    key[LIMIT_LABEL_KEY] = '\0';
    labels_event(&rec, 1, 1, key, 1);
    assert_int_equal(rec.seen[0].nattrs, 2 + 2);
    assert_null(strstr(rec.log.p, "dropped="));
    free(rec.log.p);
    key[LIMIT_LABEL_KEY] = 'K';
    key[LIMIT_LABEL_KEY + 1] = '\0';
    labels_event(&rec, 1, 1, key, 1);
    assert_int_equal(rec.seen[0].nattrs, 1 + 2);
    assert_non_null(strstr(rec.log.p, " dropped=1\n"));
    free(rec.log.p);
}

/* The labels of the filter tests: a policy's, two the operator wants,
 * a secret; the die repeats them, with its exit code. */
#define FILTER_ATTRS                                                          \
    "\"name\":\"web\",\"image\":\"img\",\"reapd.managed\":\"true\","          \
    "\"app.tier\":\"front\",\"com.example.db-password\":\"hunter2\","         \
    "\"team\":\"a\""

/* Every chunk size under filter {allow, deny}; the events as text. */
static char *
filtered(const char *const *allow, size_t nallow, const char *const *deny,
         size_t ndeny, const struct events_limits *lim, struct record *rec)
{
    const char *text = EVENT("container", "create", ID, FILTER_ATTRS, "")
        EVENT("container", "die", ID, FILTER_ATTRS ",\"exitCode\":\"3\"", "");
    struct label_filter f = {(char **)allow, nallow, (char **)deny, ndeny};
    char *r;

    run_filter = &f;
    r = run_all_chunks(text, lim, rec);
    run_filter = NULL;
    return r;
}

/* The operator's filter: allow only, deny only, both, empty lists; a
 * label a policy names is kept though denied; what is filtered out is
 * not counted as dropped (that says the limits cut something), and the
 * exit code, an attribute of the engine's, is never filtered. */
static void
test_label_filter(void **state)
{
    static const char *const app[] = {"app.*"};
    static const char *const pw[] = {"*password*"};
    static const char *const both_allow[] = {"app.*", "com.example.*"};
    static const char *const policy_deny[] = {"reapd.*", "*password*"};
    static const char *const exit_deny[] = {"exitCode", "name", "image"};
    struct record rec;
    char *r;

    (void)state;
    r = filtered(NULL, 0, NULL, 0, NULL, &rec);
    assert_non_null(strstr(r, "[com.example.db-password=hunter2]"));
    assert_non_null(strstr(r, "[team=a]"));
    assert_int_equal(rec.seen[0].nattrs, 6);
    free(r);

    r = filtered(app, 1, NULL, 0, NULL, &rec);
    assert_null(strstr(r, "hunter2"));
    assert_null(strstr(r, "[team="));
    assert_non_null(strstr(r, "[app.tier=front]"));
    assert_non_null(strstr(r, "[reapd.managed=true]"));
    assert_null(strstr(r, "dropped="));
    assert_int_equal(rec.seen[0].nattrs, 4); /* name image managed tier */
    assert_int_equal(rec.seen[1].exit_code, 3);
    free(r);

    r = filtered(NULL, 0, pw, 1, NULL, &rec);
    assert_null(strstr(r, "hunter2"));
    assert_null(strstr(r, "password"));
    assert_non_null(strstr(r, "[team=a]"));
    assert_non_null(strstr(r, "[app.tier=front]"));
    assert_null(strstr(r, "dropped="));
    assert_int_equal(rec.seen[0].nattrs, 5);
    free(r);

    r = filtered(both_allow, 2, pw, 1, NULL, &rec);
    assert_null(strstr(r, "hunter2"));
    assert_null(strstr(r, "[team="));
    assert_non_null(strstr(r, "[app.tier=front]"));
    assert_int_equal(rec.seen[0].nattrs, 4);
    free(r);

    r = filtered(NULL, 0, policy_deny, 2, NULL, &rec);
    assert_non_null(strstr(r, "[reapd.managed=true]"));
    assert_null(strstr(r, "hunter2"));
    free(r);

    r = filtered(NULL, 0, exit_deny, 3, NULL, &rec);
    assert_true(rec.seen[1].has_exit_code);
    assert_int_equal(rec.seen[1].exit_code, 3);
    assert_string_equal(rec.seen[1].name, "web");
    assert_string_equal(rec.seen[1].image, "img");
    free(r);
}

/* What the filter leaves out takes no room under the limits: with room
 * for two labels, the two after a denied one are kept. */
static void
test_label_filter_before_limits(void **state)
{
    static const char *const pw[] = {"*password*"};
    struct events_limits lim = {.max_attrs = 2};
    struct record rec;
    char *r;

    (void)state;
    r = filtered(NULL, 0, pw, 1, &lim, &rec);
    assert_non_null(strstr(r, "[app.tier=front]"));
    assert_non_null(strstr(r, "[team=a]"));
    assert_non_null(strstr(r, "[reapd.managed=true]"));
    assert_null(strstr(r, "dropped="));
    free(r);
    /* Without the filter, the third is over the limit, and said so. */
    r = filtered(NULL, 0, NULL, 0, &lim, &rec);
    assert_non_null(strstr(r, "[com.example.db-password=hunter2]"));
    assert_null(strstr(r, "[team="));
    assert_non_null(strstr(r, " dropped=1\n"));
    free(r);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_action_from_string),
        cmocka_unit_test(test_recorded_stream),
        cmocka_unit_test(test_real_capture),
        cmocka_unit_test(test_new_api_shape),
        cmocka_unit_test(test_legacy_fields_ignored),
        cmocka_unit_test(test_type_filter),
        cmocka_unit_test(test_invalid_ids),
        cmocka_unit_test(test_exit_codes),
        cmocka_unit_test(test_attributes),
        cmocka_unit_test(test_attributes_limit),
        cmocka_unit_test(test_huge_event),
        cmocka_unit_test(test_time_guard),
        cmocka_unit_test(test_label_bytes_bounded),
        cmocka_unit_test(test_corner_label_bounds),
        cmocka_unit_test(test_split_escapes),
        cmocka_unit_test(test_broken_utf8_in_long_value),
        cmocka_unit_test(test_time_fallback),
        cmocka_unit_test(test_cut_stream),
        cmocka_unit_test(test_no_separators),
        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_event_limits),
        cmocka_unit_test(test_default_size_limit),
        cmocka_unit_test(test_label_filter),
        cmocka_unit_test(test_label_filter_before_limits),
    };

    tu_test_filters(); /* REAPD_TEST_ONLY, TEST_FILTER */
    return cmocka_run_group_tests(tests, NULL, NULL);
}
