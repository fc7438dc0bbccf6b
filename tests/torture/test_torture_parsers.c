/*
 * test_torture_parsers — every parser and generator reapd runs on outside
 * input, with each of their allocations failed in turn (torture.h).
 *
 * A run that succeeds must produce exactly the output written down here;
 * a run that fails must say so through the function's own error channel
 * (NULL, -1, a message naming the lack of memory) and leave nothing
 * behind. Output is compared through a canonical text of our own (no
 * blanks, keys in document order), never through the code under test.
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

#include "config.h"
#include "containerd.h"
#include "docker.h"
#include "events.h"
#include "grpc.h"
#include "json.h"
#include "lifecycle.h"
#include "log.h"
#include "record.h"
#include "report.h"
#include "testutil.h"
#include "torture.h"

/* ---- test-side helpers (no allocation inside a run) ------------------- */

/* A fixed text buffer: the canonical forms are built here. */
struct out {
    char buf[64 * 1024];
    size_t len;
    int overflow;
};

static void
out_put(struct out *o, const char *s, size_t n)
{
    if (o->len + n >= sizeof(o->buf)) {
        o->overflow = 1;
        return;
    }
    memcpy(o->buf + o->len, s, n);
    o->len += n;
    o->buf[o->len] = '\0';
}

__attribute__((format(printf, 2, 3))) static void
out_fmt(struct out *o, const char *fmt, ...)
{
    char tmp[1024];
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof(tmp)) {
        o->overflow = 1;
        return;
    }
    out_put(o, tmp, (size_t)n);
}

static void
out_reset(struct out *o)
{
    o->len = 0;
    o->overflow = 0;
    o->buf[0] = '\0';
}

/* A JSON string: '"', '\\' and control bytes escaped, the rest as is. */
static void
canon_str(struct out *o, const char *s, size_t n)
{
    size_t i;

    out_put(o, "\"", 1);
    for (i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];

        if (ch == '"' || ch == '\\')
            out_fmt(o, "\\%c", ch);
        else if (ch == '\n')
            out_put(o, "\\n", 2);
        else if (ch < 0x20)
            out_fmt(o, "\\u%04x", ch);
        else
            out_put(o, s + i, 1);
    }
    out_put(o, "\"", 1);
}

/* The document as compact JSON, members in document order. */
static void
canon(struct out *o, const struct json_node *n)
{
    size_t i;

    switch (n->type) {
    case JSON_NULL:
        out_put(o, "null", 4);
        break;
    case JSON_BOOL:
        out_fmt(o, "%s", n->boolean ? "true" : "false");
        break;
    case JSON_NUMBER:
        out_put(o, n->str, n->len);
        break;
    case JSON_STRING:
        canon_str(o, n->str, n->len);
        break;
    case JSON_OBJECT:
    case JSON_ARRAY:
        out_put(o, n->type == JSON_OBJECT ? "{" : "[", 1);
        for (i = 0; i < n->count; i++) {
            if (i > 0)
                out_put(o, ",", 1);
            if (n->type == JSON_OBJECT) {
                canon_str(o, n->items[i]->key, n->items[i]->key_len);
                out_put(o, ":", 1);
            }
            canon(o, n->items[i]);
        }
        out_put(o, n->type == JSON_OBJECT ? "}" : "]", 1);
        break;
    }
}

static int
says_oom(const char *msg)
{
    return msg != NULL && strstr(msg, "out of memory") != NULL;
}

static void
sweep(const char *name, torture_fn fn, void *arg)
{
    struct torture_sweep sw;
    struct torture_summary sum;

    memset(&sw, 0, sizeof(sw));
    sw.name = name;
    sw.run = fn;
    sw.arg = arg;
    torture_sweep(&sw, &sum);
    assert_true(sum.allocs > 0);
    assert_true(sum.runs > 0);
    if (sum.wrong > 0)
        fail_msg("%s: %lu runs went wrong (see above)", name, sum.wrong);
}

/* ---- json_parse -------------------------------------------------------- */

struct doc {
    const char *text;
    size_t len;
    int flags;
    const char *want; /* its canonical form */
};

#define BIG_ITEMS 300

/* Documents of every shape, and two that need several arena chunks. */
static struct doc docs[4];
static char big_text[BIG_ITEMS * 64];
static char *inspect_text;
static size_t inspect_len;

static void
docs_setup(void)
{
    size_t i, n = 0;

    docs[0].text = "{\"a\":[1,2.5,-3e2,{\"b\":\"x\\u00e9y\\n\",\"c\":[]}],"
                   "\"d\":null,\"e\":true,\"f\":false,\"g\":{}}";
    docs[0].want = "{\"a\":[1,2.5,-3e2,{\"b\":\"x\xc3\xa9y\\n\",\"c\":[]}],"
                   "\"d\":null,\"e\":true,\"f\":false,\"g\":{}}";
    docs[1].text = "// a comment\n{\"k\": [true, /* x */ null],\n"
                   "  \"n\": -0, \"s\": \"q\\\"\\\\\"}";
    docs[1].flags = JSON_ALLOW_COMMENTS;
    docs[1].want = "{\"k\":[true,null],\"n\":-0,\"s\":\"q\\\"\\\\\"}";
    /* Already canonical: the text is its own expected form. */
    n += (size_t)snprintf(big_text + n, sizeof(big_text) - n, "[");
    for (i = 0; i < BIG_ITEMS; i++)
        n += (size_t)snprintf(big_text + n, sizeof(big_text) - n,
                              "%s{\"i\":%zu,\"s\":\"item-%zu\",\"t\":[%zu]}",
                              i ? "," : "", i, i, i * 7);
    snprintf(big_text + n, sizeof(big_text) - n, "]");
    docs[2].text = big_text;
    docs[2].want = big_text;
    /* Recorded from dockerd, compact and escape-free: its canonical form
     * is the file without its final newline. */
    docs[3].text = inspect_text;
    docs[3].want = inspect_text;
    for (i = 0; i < 4; i++)
        docs[i].len = strlen(docs[i].text);
    while (inspect_len > 0 && inspect_text[inspect_len - 1] == '\n')
        inspect_text[--inspect_len] = '\0';
    docs[3].len = inspect_len;
}

static struct out o1;

static enum torture_outcome
run_json_parse(void *arg)
{
    enum torture_outcome res = TORTURE_OK;
    size_t i;

    (void)arg;
    for (i = 0; i < sizeof(docs) / sizeof(docs[0]); i++) {
        char err[256] = "";
        size_t off = 0;
        struct json_node *root;

        root = json_parse(docs[i].text, docs[i].len, NULL, docs[i].flags, err,
                          sizeof(err), &off);
        if (root == NULL) {
            if (!says_oom(err))
                return torture_wrong("doc %zu: NULL with \"%s\"", i, err);
            res = TORTURE_FAILED;
            continue;
        }
        out_reset(&o1);
        canon(&o1, root);
        json_free(root);
        if (o1.overflow || strcmp(o1.buf, docs[i].want) != 0)
            return torture_wrong("doc %zu parsed as %.300s", i, o1.buf);
    }
    return res;
}

static void
t_json_parse(void **state)
{
    (void)state;
    sweep("json_parse", run_json_parse, NULL);
}

/* ---- json_stream ------------------------------------------------------- */

/* Several documents, one of them large, in 7-byte chunks: documents and
 * tokens straddle chunks, and the stream's recycled arena chunk is used
 * and outgrown. */
#define STREAM_DOCS 7
static char stream_text[BIG_ITEMS * 64 + 256];
static const char *stream_want[STREAM_DOCS];

struct collect {
    const char *const *want;
    size_t nwant;
    size_t got;
    int bad;
    char bad_text[320];
    void *stream; /* for json_stream_release */
};

static int
on_doc(struct json_node *root, void *arg)
{
    struct collect *c = arg;

    out_reset(&o1);
    canon(&o1, root);
    /* Alternate the two ways a callback may give a document back. */
    if (c->got % 2 == 0)
        json_stream_release(c->stream, root);
    else
        json_free(root);
    if (c->got >= c->nwant || o1.overflow ||
        strcmp(o1.buf, c->want[c->got]) != 0) {
        if (!c->bad)
            snprintf(c->bad_text, sizeof(c->bad_text), "doc %zu: %.300s",
                     c->got, o1.buf);
        c->bad = 1;
    }
    c->got++;
    return 0;
}

static void
stream_setup(void)
{
    snprintf(stream_text, sizeof(stream_text),
             "{\"x\":1} [1,2,3]\n\"s\"\t42 {\"n\":{\"a\":[{\"b\":null}]}}\n"
             "%s true",
             big_text);
    stream_want[0] = "{\"x\":1}";
    stream_want[1] = "[1,2,3]";
    stream_want[2] = "\"s\"";
    stream_want[3] = "42";
    stream_want[4] = "{\"n\":{\"a\":[{\"b\":null}]}}";
    stream_want[5] = big_text;
    stream_want[6] = "true";
}

static enum torture_outcome
run_json_stream(void *arg)
{
    struct collect c;
    struct json_stream *s;
    size_t len = strlen(stream_text), at, n;
    int rc = 0;

    (void)arg;
    memset(&c, 0, sizeof(c));
    c.want = stream_want;
    c.nwant = STREAM_DOCS;
    s = json_stream_new(NULL, JSON_MULTIPLE, on_doc, &c);
    if (s == NULL)
        return TORTURE_FAILED;
    c.stream = s;
    for (at = 0; at < len && rc == 0; at += n) {
        n = len - at < 7 ? len - at : 7;
        rc = json_stream_feed(s, stream_text + at, n);
    }
    if (rc == 0)
        rc = json_stream_finish(s);
    if (c.bad) {
        json_stream_free(s);
        return torture_wrong("%s", c.bad_text);
    }
    if (rc != 0) {
        const char *e = json_stream_error(s);
        int oom = says_oom(e);
        char msg[128];

        snprintf(msg, sizeof(msg), "%s", e ? e : "(no error)");
        json_stream_free(s);
        if (!oom)
            return torture_wrong("failed with \"%s\"", msg);
        return TORTURE_FAILED;
    }
    json_stream_free(s);
    if (c.got != STREAM_DOCS)
        return torture_wrong("%zu documents instead of %d", c.got,
                             STREAM_DOCS);
    return TORTURE_OK;
}

static void
t_json_stream(void **state)
{
    (void)state;
    sweep("json_stream", run_json_stream, NULL);
}

/* ---- events_parser ----------------------------------------------------- */

static char *events_text;
static size_t events_len;

#define ID42 "d3da67e34a052e59c56d92b96b973c5a93d0ac1f50cf3af8ad65f37d3b4ad769"
#define T42A "image=reapd-test:1,name=t42,reapd.managed=true"

/* tests/fixtures/events/dockerd-20.10.24-run-exit42.jsonl, event by event
 * (the two network events are skipped). Action as its enum value. */
static const char *const events_want[] = {
    "create/1 " ID42 " 1796213266871302151 - t42 reapd-test:1 [" T42A "]",
    "attach/0 " ID42 " 1796213266874433705 - t42 reapd-test:1 [" T42A "]",
    "start/2 " ID42 " 1796213267127539672 - t42 reapd-test:1 [" T42A "]",
    "die/4 " ID42 " 1796213267253993408 42 t42 reapd-test:1 "
    "[exitCode=42," T42A "]",
    "destroy/6 " ID42 " 1796213267372551033 - t42 reapd-test:1 [" T42A "]",
};
#define NEVENTS (sizeof(events_want) / sizeof(events_want[0]))

struct ev_collect {
    size_t got;
    int bad;
    char bad_text[400];
};

static void
on_event(const struct docker_event *ev, void *arg)
{
    struct ev_collect *c = arg;
    struct out *o = &o1;
    size_t i;

    out_reset(o);
    out_fmt(o, "%s/%d %s %lld ", ev->action_text, (int)ev->action, ev->id,
            (long long)ev->time_nano);
    if (ev->has_exit_code)
        out_fmt(o, "%d ", ev->exit_code);
    else
        out_fmt(o, "- ");
    out_fmt(o, "%s %s [", ev->name ? ev->name : "(null)",
            ev->image ? ev->image : "(null)");
    for (i = 0; i < ev->nattrs; i++)
        out_fmt(o, "%s%s=%s", i ? "," : "", ev->attrs[i].key,
                ev->attrs[i].value);
    out_fmt(o, "]");
    if (c->got >= NEVENTS || o->overflow ||
        strcmp(o->buf, events_want[c->got]) != 0) {
        if (!c->bad)
            snprintf(c->bad_text, sizeof(c->bad_text), "event %zu: %.300s",
                     c->got, o->buf);
        c->bad = 1;
    }
    c->got++;
}

static enum torture_outcome
run_events(void *arg)
{
    struct ev_collect c;
    struct events_parser *p;
    size_t at, n;
    int rc = 0;

    (void)arg;
    memset(&c, 0, sizeof(c));
    p = events_parser_new(NULL, on_event, &c);
    if (p == NULL)
        return TORTURE_FAILED;
    for (at = 0; at < events_len && rc == 0; at += n) {
        n = events_len - at < 13 ? events_len - at : 13;
        rc = events_parser_feed(p, events_text + at, n);
    }
    if (c.bad) {
        events_parser_free(p);
        return torture_wrong("%s", c.bad_text);
    }
    if (rc != 0) {
        char msg[200];
        int oom = says_oom(events_parser_error(p));

        snprintf(msg, sizeof(msg), "%s",
                 events_parser_error(p) ? events_parser_error(p) : "(none)");
        events_parser_free(p);
        return oom ? TORTURE_FAILED : torture_wrong("failed: \"%s\"", msg);
    }
    if (c.got != NEVENTS || events_parser_count(p) != NEVENTS ||
        events_parser_skipped(p) != 2 || events_parser_pending(p) != 0) {
        unsigned long long cnt = events_parser_count(p),
                           sk = events_parser_skipped(p);

        events_parser_free(p);
        return torture_wrong("%zu events (count %llu, skipped %llu)", c.got,
                             cnt, sk);
    }
    events_parser_free(p);
    return TORTURE_OK;
}

static void
t_events_parser(void **state)
{
    (void)state;
    sweep("events_parser", run_events, NULL);
}

/* ---- docker_parse_inspect / docker_parse_list --------------------------- */

#define ID_EXITED                                                             \
    "02e6f886fdb89aa74ddf893246272aa1971447d17bc86439e1de5be123cef255"
#define ID_RUNNING                                                            \
    "6b58212b04353bfc0aeb1a7e3de4108ed439022ae532e97bef08c36a2b06b190"
#define ID_UN1                                                                \
    "e1703e4cce5ae81f179a9dd3f7b5b3152035a4300013b7ad5bc44a252e85027b"

static char *running_text, *list_text;
static size_t running_len, list_len;

/* One container as a line: every field the reaper uses. */
static void
container_line(struct out *o, const struct docker_container *c)
{
    size_t i;

    out_fmt(o, "%s %s %s run=%d code=", c->id, c->name ? c->name : "(null)",
            c->image ? c->image : "(null)", (int)c->state.run);
    if (c->state.has_exit_code)
        out_fmt(o, "%d", c->state.exit_code);
    else
        out_fmt(o, "-");
    out_fmt(o, " fin=%d oom=%d %s %s [", c->state.finished,
            c->state.oom_killed, c->started_at ? c->started_at : "(null)",
            c->finished_at ? c->finished_at : "(null)");
    for (i = 0; i < c->nlabels; i++)
        out_fmt(o, "%s%s=%s", i ? "," : "", c->labels[i].key,
                c->labels[i].value);
    out_fmt(o, "]");
}

/* lc_run: created 0, running 1, ..., exited 5. */
static const char *const inspect_want[] = {
    ID_EXITED " fx-exited reapd-test:1 run=5 code=7 fin=1 oom=0 "
              "2026-12-02T12:27:21.398675775Z 2026-12-02T12:27:21.395600727Z "
              "[reapd.managed=true,team=infra]",
    ID_RUNNING " fx-running reapd-test:1 run=1 code=0 fin=0 oom=0 "
               "2026-12-02T12:27:22.696728253Z (null) []",
};

static enum torture_outcome
run_inspect(void *arg)
{
    const char *bodies[2];
    size_t lens[2], i;
    enum torture_outcome res = TORTURE_OK;

    (void)arg;
    bodies[0] = inspect_text;
    lens[0] = inspect_len;
    bodies[1] = running_text;
    lens[1] = running_len;
    for (i = 0; i < 2; i++) {
        struct docker_parsed *ctx = (void *)1;
        const struct docker_container *c = NULL;
        char err[256] = "";

        if (docker_parse_inspect(bodies[i], lens[i], &ctx, &c, err,
                                 sizeof(err)) != 0) {
            if (ctx != NULL || !says_oom(err))
                return torture_wrong("inspect %zu: -1, ctx %p, \"%s\"", i,
                                     (void *)ctx, err);
            res = TORTURE_FAILED;
            continue;
        }
        out_reset(&o1);
        container_line(&o1, c);
        docker_parsed_free(ctx);
        if (strcmp(o1.buf, inspect_want[i]) != 0)
            return torture_wrong("inspect %zu: %.300s", i, o1.buf);
    }
    return res;
}

static void
t_docker_parse_inspect(void **state)
{
    (void)state;
    sweep("docker_parse_inspect", run_inspect, NULL);
}

static const char *const list_want[] = {
    ID_RUNNING " fx-running reapd-test:1 run=1 code=- fin=0 oom=0 "
               "(null) (null) []",
    ID_EXITED " fx-exited reapd-test:1 run=5 code=- fin=0 oom=0 "
              "(null) (null) [reapd.managed=true,team=infra]",
    ID_UN1 " un1 reapd-test:1 run=5 code=- fin=0 oom=0 (null) (null) []",
};

static enum torture_outcome
run_list(void *arg)
{
    struct docker_parsed *ctx = (void *)1;
    const struct docker_container *cs = NULL;
    char err[256] = "";
    size_t n = 0, i;

    (void)arg;
    if (docker_parse_list(list_text, list_len, &ctx, &cs, &n, err,
                          sizeof(err)) != 0) {
        if (ctx != NULL || !says_oom(err))
            return torture_wrong("-1, ctx %p, \"%s\"", (void *)ctx, err);
        return TORTURE_FAILED;
    }
    if (n != 3) {
        docker_parsed_free(ctx);
        return torture_wrong("%zu containers", n);
    }
    for (i = 0; i < n; i++) {
        out_reset(&o1);
        container_line(&o1, &cs[i]);
        if (strcmp(o1.buf, list_want[i]) != 0) {
            docker_parsed_free(ctx);
            return torture_wrong("container %zu: %.300s", i, o1.buf);
        }
    }
    docker_parsed_free(ctx);
    return TORTURE_OK;
}

static void
t_docker_parse_list(void **state)
{
    (void)state;
    sweep("docker_parse_list", run_list, NULL);
}

/* ---- record ------------------------------------------------------------ */

static const struct policy_label rec_labels[] = {
    {"reapd.managed", "true"},
    {"team", "infra"},
    {"quote\"d", "a\\b"},
};

/* Written down from the format record.c documents, field by field. */
/* What record_to_json writes: fields at their zero left out. */
static const char record_want[] =
    "{\"v\":1,\"state\":\"confirming\",\"action\":2,"
    "\"poll_interval_ms\":500,\"warn_after_ms\":60000,"
    "\"retry_base_ms\":500,\"retry_max_ms\":30000,"
    "\"reap_leaked_tasks\":true,\"ran\":true,"
    "\"exited\":true,\"die_seen\":true,\"die_has_code\":true,"
    "\"die_after_outage\":true,\"die_code\":255,\"exit_known\":true,"
    "\"exit_code\":7,\"source\":2,\"destroy_seen\":true,"
    "\"removed_by_us\":true,\"delete_attempts\":2,\"anomalies\":9,"
    "\"cleanup_ms\":1234,\"task_deleted\":-1,\"name\":\"web-1\","
    "\"image\":\"img:1\","
    "\"labels\":{\"reapd.managed\":\"true\",\"team\":\"infra\","
    "\"quote\\\"d\":\"a\\\\b\"},\"policy\":\"managed\",\"force\":true,"
    "\"report_on\":true,"
    "\"started_at\":\"2026-12-02T10:00:00.000000000Z\","
    "\"finished_at\":\"2026-12-02T10:00:01.000000000Z\","
    "\"die_nano\":1796213267253993408,\"exited_wall_ms\":1796213267300}";

/* As records were written before zeros were left out: every field. */
static const char record_full[] =
    "{\"v\":1,\"state\":\"confirming\",\"action\":2,\"delay_ms\":0,"
    "\"poll_interval_ms\":500,\"warn_after_ms\":60000,"
    "\"give_up_after_ms\":0,\"retry_base_ms\":500,\"retry_max_ms\":30000,"
    "\"containerd\":false,\"reap_leaked_tasks\":true,\"ran\":true,"
    "\"exited\":true,\"die_seen\":true,\"die_has_code\":true,"
    "\"die_after_outage\":true,\"die_code\":255,\"exit_known\":true,\"exit_"
    "code\":7,\"source\":2,"
    "\"oom_killed\":false,\"destroy_seen\":true,\"gone_polled\":false,"
    "\"removed_by_us\":true,\"delete_attempts\":2,\"anomalies\":9,"
    "\"removed\":false,\"cleanup_ms\":1234,\"task_exit_seen\":false,"
    "\"task_exit_code\":0,\"task_delete_seen\":false,"
    "\"task_gone_polled\":false,\"task_reaped_done\":false,"
    "\"task_deleted\":-1,\"name\":\"web-1\",\"image\":\"img:1\","
    "\"labels\":{\"reapd.managed\":\"true\",\"team\":\"infra\","
    "\"quote\\\"d\":\"a\\\\b\"},\"policy\":\"managed\",\"force\":true,"
    "\"volumes\":false,\"report_on\":true,"
    "\"started_at\":\"2026-12-02T10:00:00.000000000Z\","
    "\"finished_at\":\"2026-12-02T10:00:01.000000000Z\","
    "\"die_nano\":1796213267253993408,\"exited_wall_ms\":1796213267300}";

static void
record_fill(struct lc *lc, struct record_meta *m)
{
    memset(lc, 0, sizeof(*lc));
    memset(m, 0, sizeof(*m));
    lc->state = LC_CONFIRMING;
    lc->p.action = POLICY_REMOVE;
    lc->p.poll_interval_ms = 500;
    lc->p.warn_after_ms = 60000;
    lc->p.retry_base_ms = 500;
    lc->p.retry_max_ms = 30000;
    lc->p.reap_leaked_tasks = true;
    lc->ran = lc->exited = lc->die_seen = lc->die_has_code = true;
    lc->die_after_outage = true;
    lc->die_code = 255;
    lc->exit_known = true;
    lc->exit_code = 7;
    lc->source = LC_SRC_INSPECT;
    lc->destroy_seen = true;
    lc->removed_by_us = true;
    lc->delete_attempts = 2;
    lc->anomalies = LC_AN_EXIT_CODE_MISMATCH | LC_AN_DELETE_RETRIED;
    lc->cleanup_ms = 1234;
    lc->task_deleted = -1;
    m->name = "web-1";
    m->image = "img:1";
    m->labels = rec_labels;
    m->nlabels = 3;
    m->policy = "managed";
    m->force = true;
    m->report_on = true;
    m->started_at = "2026-12-02T10:00:00.000000000Z";
    m->finished_at = "2026-12-02T10:00:01.000000000Z";
    m->die_nano = INT64_C(1796213267253993408);
    m->exited_wall_ms = INT64_C(1796213267300);
}

static enum torture_outcome
run_record_to_json(void *arg)
{
    struct lc lc;
    struct record_meta m;
    size_t len = 0;
    char *json;
    int same;

    (void)arg;
    record_fill(&lc, &m);
    json = record_to_json(&lc, &m, &len);
    if (json == NULL)
        return TORTURE_FAILED;
    same = len == strlen(record_want) && strcmp(json, record_want) == 0;
    if (!same) {
        enum torture_outcome r = torture_wrong("got %.600s", json);

        free(json);
        return r;
    }
    free(json);
    return TORTURE_OK;
}

static void
t_record_to_json(void **state)
{
    (void)state;
    sweep("record_to_json", run_record_to_json, NULL);
}

static enum torture_outcome
run_record_parse(void *arg)
{
    const char *text = arg;
    struct lc want;
    struct record_meta wm;
    const struct record_meta *m;
    const struct lc *c;
    struct record *r;
    char err[256] = "";
    size_t i;

    record_fill(&want, &wm);
    r = record_parse(text, strlen(text), err, sizeof(err));
    if (r == NULL)
        return says_oom(err) ? TORTURE_FAILED
                             : torture_wrong("NULL with \"%s\"", err);
    c = record_lc(r);
    m = record_meta(r);
#define SAME(f) (c->f == want.f)
    if (!(SAME(state) && SAME(p.action) && SAME(p.delay_ms) &&
          SAME(p.poll_interval_ms) && SAME(p.warn_after_ms) &&
          SAME(p.give_up_after_ms) && SAME(p.retry_base_ms) &&
          SAME(p.retry_max_ms) && SAME(p.containerd) &&
          SAME(p.reap_leaked_tasks) && SAME(ran) && SAME(exited) &&
          SAME(die_seen) && SAME(die_has_code) && SAME(die_after_outage) &&
          SAME(die_code) && SAME(exit_known) && SAME(exit_code) &&
          SAME(source) && SAME(oom_killed) && SAME(destroy_seen) &&
          SAME(gone_polled) && SAME(removed_by_us) && SAME(delete_attempts) &&
          SAME(anomalies) && SAME(removed) && SAME(cleanup_ms) &&
          SAME(task_exit_seen) && SAME(task_exit_code) &&
          SAME(task_delete_seen) && SAME(task_gone_polled) &&
          SAME(task_reaped_done) && SAME(task_deleted))) {
        record_free(r);
        return torture_wrong("the lifecycle record differs");
    }
#undef SAME
    if (strcmp(m->name, "web-1") != 0 || strcmp(m->image, "img:1") != 0 ||
        strcmp(m->policy, "managed") != 0 || !m->force || m->volumes ||
        !m->report_on || strcmp(m->started_at, wm.started_at) != 0 ||
        strcmp(m->finished_at, wm.finished_at) != 0 ||
        m->die_nano != wm.die_nano || m->exited_wall_ms != wm.exited_wall_ms ||
        m->nlabels != 3) {
        record_free(r);
        return torture_wrong("the metadata differs (%zu labels)", m->nlabels);
    }
    for (i = 0; i < 3; i++) {
        if (strcmp(m->labels[i].key, rec_labels[i].key) != 0 ||
            strcmp(m->labels[i].value, rec_labels[i].value) != 0) {
            record_free(r);
            return torture_wrong("label %zu differs", i);
        }
    }
    record_free(r);
    return TORTURE_OK;
}

static void
t_record_parse(void **state)
{
    (void)state;
    sweep("record_parse", run_record_parse, (void *)record_want);
    /* Records written before zeros were left out read the same. */
    sweep("record_parse(full)", run_record_parse, (void *)record_full);
}

/* ---- report ------------------------------------------------------------ */

static const char report_want[] =
    "{\"report_id\":\"0123456789abcdef0123456789abcdef\",\"schema_version\":1,"
    "\"node\":\"n1\","
    "\"container_id\":\"" ID_EXITED "\",\"name\":\"fx-exited\","
    "\"image\":\"reapd-test:1\","
    "\"labels\":{\"reapd.managed\":\"true\",\"team\":\"infra\"},"
    "\"policy\":\"managed\",\"action\":\"remove\",\"exit_code\":7,"
    "\"exit_code_source\":\"inspect\",\"engine_exit_code\":255,"
    "\"oom_killed\":false,"
    "\"started_at\":\"2026-12-02T12:27:21.398675775Z\","
    "\"finished_at\":\"2026-12-02T12:27:21.395600727Z\",\"removed\":true,"
    "\"task_deleted\":null,\"cleanup_ms\":1500,\"delete_attempts\":1,"
    "\"anomalies\":[\"engine_exit_code_mismatch\"],\"removed_by\":\"reapd\","
    "\"reported_at\":\"2026-12-02T12:27:23.000Z\"}";

static enum torture_outcome
run_report(void *arg)
{
    static const char *const anomalies[] = {"engine_exit_code_mismatch"};
    enum torture_outcome res = TORTURE_OK;
    struct report rep;
    char id[33] = "", cid[65] = "";
    size_t len = 0;
    char *json;

    (void)arg;
    memset(&rep, 0, sizeof(rep));
    snprintf(rep.report_id, sizeof(rep.report_id), "%s",
             "0123456789abcdef0123456789abcdef");
    rep.node = "n1";
    rep.container_id = ID_EXITED;
    rep.name = "fx-exited";
    rep.image = "reapd-test:1";
    rep.labels = rec_labels;
    rep.nlabels = 2;
    rep.policy = "managed";
    rep.action = "remove";
    rep.exit_known = true;
    rep.exit_code = 7;
    rep.exit_code_source = "inspect";
    rep.has_engine_exit_code = true;
    rep.engine_exit_code = 255;
    rep.started_at = "2026-12-02T12:27:21.398675775Z";
    rep.finished_at = "2026-12-02T12:27:21.395600727Z";
    rep.removed = true;
    rep.task_deleted = -1;
    rep.cleanup_ms = 1500;
    rep.delete_attempts = 1;
    rep.anomalies = anomalies;
    rep.nanomalies = 1;
    rep.removed_by = "reapd";
    rep.reported_at = "2026-12-02T12:27:23.000Z";
    json = report_to_json(&rep, &len);
    if (json == NULL) {
        res = TORTURE_FAILED;
    } else {
        int same =
            len == strlen(report_want) && strcmp(json, report_want) == 0;

        if (!same) {
            res = torture_wrong("got %.600s", json);
            free(json);
            return res;
        }
        free(json);
    }
    /* report_line_ids says -1 for "not a report" and for "out of
     * memory" alike: with a failure injected, -1 is all it can say. */
    if (report_line_ids(report_want, strlen(report_want), id, cid) != 0) {
        if (!torture_hit())
            return torture_wrong("report_line_ids: -1");
        return TORTURE_FAILED;
    }
    if (strcmp(id, "0123456789abcdef0123456789abcdef") != 0 ||
        strcmp(cid, ID_EXITED) != 0)
        return torture_wrong("report_line_ids: %s %s", id, cid);
    return res;
}

static void
t_report(void **state)
{
    (void)state;
    sweep("report_to_json+report_line_ids", run_report, NULL);
}

/* ---- config_parse ------------------------------------------------------ */

struct cfg_case {
    const char *name;
    char *text;
    size_t len;
    int titus;
};

static struct cfg_case cfg_cases[2];
static char hostname[256];

static int
streq(const char *a, const char *b)
{
    if (a == NULL || b == NULL)
        return a == b;
    return strcmp(a, b) == 0;
}

/* Every field of one policy. */
static int
policy_is(const struct policy *p, const char *name, const char *const *kv,
          size_t nkv, const char *glob_name, const char *glob_image,
          enum policy_action a, int64_t delay, bool force, bool volumes,
          bool reap, bool report)
{
    size_t i;

    if (!streq(p->name, name) || p->nmatch_labels != nkv ||
        !streq(p->match_name, glob_name) ||
        !streq(p->match_image, glob_image) || p->action != a ||
        p->delay_ms != delay || p->force != force ||
        p->remove_volumes != volumes || p->reap_leaked_tasks != reap ||
        p->report != report)
        return 0;
    for (i = 0; i < nkv; i++)
        if (!streq(p->match_labels[i].key, kv[2 * i]) ||
            !streq(p->match_labels[i].value, kv[2 * i + 1]))
            return 0;
    return 1;
}

/* config/reapd.json says the defaults; titus-example.json changes what
 * its comments say. Written down from the two files. */
static const char *
config_differs(const struct config *c, int titus)
{
    static const char *const managed[] = {"reapd.managed", "true"};
    static const char *const debug[] = {"titus.task_id", "*", "titus.debug",
                                        "true"};
    static const char *const task[] = {"titus.task_id", "*"};

    if (!streq(c->node, titus ? "titus-agent-example" : hostname))
        return "node";
    if (!streq(c->state_dir, "/var/lib/reapd") ||
        !streq(c->docker_socket, "/var/run/docker.sock") ||
        c->docker_request_timeout_ms != 30000 ||
        c->docker_reconnect_max_ms != 30000)
        return "docker";
    if (!streq(c->containerd_socket, "auto") ||
        !streq(c->containerd_namespace, "moby") ||
        c->containerd_audit_interval_ms != 60000 ||
        !c->containerd_reap_orphans)
        return "containerd";
    if (!streq(c->status_listen, "127.0.0.1:9323") ||
        c->status_token_file != NULL || c->status_max_connections != 64)
        return "status";
    if (!streq(c->upstream_url,
               titus ? "http://127.0.0.1:8080/reports" : NULL) ||
        c->upstream_timeout_ms != 5000 || c->upstream_token_file != NULL ||
        c->upstream_ca_file != NULL || c->upstream_client_cert != NULL ||
        c->upstream_client_key != NULL || c->upstream_max_in_flight != 4 ||
        c->upstream_retry_base_ms != 1000 ||
        c->upstream_retry_max_ms != 300000)
        return "upstream";
    if (c->nupstream_headers != (titus ? 2u : 0u))
        return "upstream.headers count";
    if (titus && (!streq(c->upstream_headers[0].name, "Authorization") ||
                  !streq(c->upstream_headers[0].value, "Bearer REPLACE-ME") ||
                  !streq(c->upstream_headers[1].name, "X-Titus-Agent") ||
                  !streq(c->upstream_headers[1].value, "reapd")))
        return "upstream.headers";
    if (c->delete_max_in_flight != (titus ? 16 : 8) ||
        c->delete_poll_interval_ms != 500 ||
        c->delete_warn_after_ms != (titus ? 120000 : 60000) ||
        c->delete_give_up_after_ms != (titus ? 3600000 : 0) ||
        c->delete_retry_base_ms != 500 || c->delete_retry_max_ms != 30000)
        return "delete";
    if (c->retention_delivered_max_age_ms != INT64_C(604800000) ||
        c->retention_delivered_max_count != 100000 ||
        c->retention_max_db_bytes != INT64_C(1073741824))
        return "retention";
    if (c->reports_log_max_bytes != INT64_C(67108864) ||
        c->reports_log_keep != 5)
        return "reports_log";
    if (c->policies.default_action != POLICY_IGNORE)
        return "default_action";
    if (!titus) {
        if (c->policies.count != 1 ||
            !policy_is(&c->policies.items[0], "managed", managed, 1, NULL,
                       NULL, POLICY_REMOVE, 0, true, false, true, true))
            return "policies";
    } else {
        if (c->policies.count != 3 ||
            !policy_is(&c->policies.items[0], "debug-keep", debug, 2, NULL,
                       NULL, POLICY_KEEP, 0, true, false, true, true) ||
            !policy_is(&c->policies.items[1], "titus-tasks", task, 1, NULL,
                       NULL, POLICY_REMOVE, 5000, true, true, true, true) ||
            !policy_is(&c->policies.items[2], "titus-sidecars", NULL, 0,
                       "titus-sidecar-*", "*titus*", POLICY_REMOVE, 0, true,
                       false, true, false))
            return "policies";
    }
    if (c->log_level != LOG_LEVEL_INFO ||
        c->log_format != (titus ? LOG_FORMAT_JSON : LOG_FORMAT_TEXT))
        return "log";
    if (!streq(c->source, titus ? "titus-example.json" : "reapd.json"))
        return "source";
    return NULL;
}

static enum torture_outcome
run_config(void *arg)
{
    enum torture_outcome res = TORTURE_OK;
    size_t i, j;

    (void)arg;
    for (i = 0; i < 2; i++) {
        struct config_errors errs = {0};
        struct config *cfg = (void *)1;
        const char *diff;
        int oom = 0;

        if (config_parse(cfg_cases[i].name, cfg_cases[i].text,
                         cfg_cases[i].len, &cfg, &errs) != 0) {
            for (j = 0; j < errs.count; j++)
                oom |= says_oom(errs.lines[j]);
            if (cfg != NULL || !oom) {
                enum torture_outcome r =
                    torture_wrong("%s: -1, cfg %p, %zu errors, first \"%s\"",
                                  cfg_cases[i].name, (void *)cfg, errs.count,
                                  errs.count ? errs.lines[0] : "");

                config_errors_clear(&errs);
                return r;
            }
            config_errors_clear(&errs);
            res = TORTURE_FAILED;
            continue;
        }
        diff = config_differs(cfg, cfg_cases[i].titus);
        config_free(cfg);
        if (errs.count != 0) {
            config_errors_clear(&errs);
            return torture_wrong("%s: accepted with errors",
                                 cfg_cases[i].name);
        }
        if (diff != NULL)
            return torture_wrong("%s: %s differs", cfg_cases[i].name, diff);
    }
    return res;
}

static void
t_config_parse(void **state)
{
    (void)state;
    sweep("config_parse", run_config, NULL);
}

/* ---- containerd decoders ----------------------------------------------- */

#define ID_SLEEP                                                              \
    "a066dabeadf3d46aa9d0619fd87707c126a36cb45a42e5a0178258309a441386"
#define ID_EXIT7                                                              \
    "c4f5ba50cafc05d0a85e38fc96254b9165e4b745de4b7792a0d81627a07f925e"

static uint8_t *tasks_bin, *events_bin;
static size_t tasks_bin_len, events_bin_len;

static void
task_line(struct out *o, const struct ctrd_task *t)
{
    out_fmt(o, "%s %s pid=%u status=%d exit=%u at=%lld", t->container_id,
            t->id, t->pid, (int)t->status, t->exit_status,
            (long long)t->exited_at_ns);
}

/* Decoded by hand from the capture (README.md there): containerd 1.6
 * leaves container_id out, exited_at is Go's zero time. */
static const char task_want[] =
    ID_SLEEP " " ID_SLEEP " pid=5216 status=2 exit=0 at=0";

static enum torture_outcome
run_ctrd_tasks(void *arg)
{
    enum torture_outcome res = TORTURE_OK;
    const uint8_t *msg;
    size_t mlen, n = 9;
    struct ctrd_decoded *d = (void *)1;
    const struct ctrd_task *ts = NULL, *t = NULL;

    (void)arg;
    if (grpc_unframe(tasks_bin, tasks_bin_len, 0, &msg, &mlen) != 0)
        return torture_wrong("the fixture does not unframe");
    if (ctrd_decode_list(msg, mlen, &d, &ts, &n) != 0) {
        if (d != NULL || n != 0)
            return torture_wrong("list: -1 with ctx %p, n %zu", (void *)d, n);
        res = TORTURE_FAILED;
    } else {
        out_reset(&o1);
        if (n == 1)
            task_line(&o1, &ts[0]);
        ctrd_decoded_free(d);
        if (n != 1 || strcmp(o1.buf, task_want) != 0)
            return torture_wrong("list: %zu tasks, %s", n, o1.buf);
    }
    /* A GetResponse carries its Process in field 1, as a one-entry
     * ListTasksResponse does: the same bytes serve. */
    d = (void *)1;
    if (ctrd_decode_get(msg, mlen, &d, &t) != 0) {
        if (d != NULL)
            return torture_wrong("get: -1 with ctx %p", (void *)d);
        return TORTURE_FAILED;
    }
    out_reset(&o1);
    task_line(&o1, t);
    ctrd_decoded_free(d);
    if (strcmp(o1.buf, task_want) != 0)
        return torture_wrong("get: %s", o1.buf);
    return res;
}

static void
t_ctrd_decode_tasks(void **state)
{
    (void)state;
    sweep("ctrd_decode_list+get", run_ctrd_tasks, NULL);
}

/* The nine envelopes of events-subscribe-1.6.20.bin, decoded by hand:
 * three topics we do not act on, then two containers' exit, task delete
 * and container delete (not acted on either). Kind: exit 0, delete 1. */
static const char *const env_want[] = {
    "ignored",
    "ignored",
    "ignored",
    "0 " ID_EXIT7 " " ID_EXIT7 " pid=6142 exit=7 at=1796215315446856751 "
    "ts=1796215315448559720",
    "1 " ID_EXIT7 "  pid=6142 exit=7 at=1796215315446856751 "
    "ts=1796215315496570158",
    "ignored",
    "0 " ID_SLEEP " " ID_SLEEP " pid=5216 exit=137 at=1796215317636797736 "
    "ts=1796215317636883740",
    "1 " ID_SLEEP "  pid=5216 exit=137 at=1796215317636797736 "
    "ts=1796215317662269258",
    "ignored",
};
#define NENV (sizeof(env_want) / sizeof(env_want[0]))

struct env_collect {
    size_t got;
    int failed; /* a decode said -1: the stream stops there */
    int bad;
    char bad_text[400];
};

static int
on_envelope(const uint8_t *msg, size_t len, void *arg)
{
    struct env_collect *c = arg;
    struct ctrd_decoded *d = NULL;
    struct ctrd_event ev;
    int rc = ctrd_decode_envelope(msg, len, &d, &ev);

    out_reset(&o1);
    if (rc < 0) {
        /* As containerd.c does: the stream is resynchronised. */
        if (d != NULL && !c->bad) {
            snprintf(c->bad_text, sizeof(c->bad_text),
                     "envelope %zu: -1 with a context", c->got);
            c->bad = 1;
        }
        c->failed = 1;
        return 1;
    }
    if (rc == 1)
        out_fmt(&o1, "ignored");
    else
        out_fmt(&o1, "%d %s %s pid=%u exit=%u at=%lld ts=%lld", (int)ev.kind,
                ev.container_id, ev.id, ev.pid, ev.exit_status,
                (long long)ev.exited_at_ns, (long long)ev.timestamp_ns);
    ctrd_decoded_free(d);
    if (c->got >= NENV || strcmp(o1.buf, env_want[c->got]) != 0) {
        if (!c->bad)
            snprintf(c->bad_text, sizeof(c->bad_text), "envelope %zu: %.300s",
                     c->got, o1.buf);
        c->bad = 1;
    }
    c->got++;
    return 0;
}

static enum torture_outcome
run_ctrd_events(void *arg)
{
    struct env_collect c;
    struct grpc_reader *r;
    size_t at, n;
    int rc = 0;

    (void)arg;
    memset(&c, 0, sizeof(c));
    r = grpc_reader_new(0, on_envelope, &c);
    if (r == NULL)
        return TORTURE_FAILED;
    for (at = 0; at < events_bin_len && rc == 0; at += n) {
        n = events_bin_len - at < 100 ? events_bin_len - at : 100;
        rc = grpc_reader_feed(r, events_bin + at, n);
    }
    if (c.bad) {
        grpc_reader_free(r);
        return torture_wrong("%s", c.bad_text);
    }
    if (rc != 0) {
        char msg[160];
        int oom = says_oom(grpc_reader_error(r));

        snprintf(msg, sizeof(msg), "%s",
                 grpc_reader_error(r) ? grpc_reader_error(r) : "(none)");
        grpc_reader_free(r);
        if (c.failed || oom)
            return TORTURE_FAILED;
        return torture_wrong("grpc_reader_feed: \"%s\"", msg);
    }
    grpc_reader_free(r);
    if (c.got != NENV)
        return torture_wrong("%zu envelopes", c.got);
    return TORTURE_OK;
}

static void
t_ctrd_decode_envelope(void **state)
{
    (void)state;
    sweep("grpc_reader+ctrd_decode_envelope", run_ctrd_events, NULL);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(t_json_parse),
        cmocka_unit_test(t_json_stream),
        cmocka_unit_test(t_events_parser),
        cmocka_unit_test(t_docker_parse_inspect),
        cmocka_unit_test(t_docker_parse_list),
        cmocka_unit_test(t_record_to_json),
        cmocka_unit_test(t_record_parse),
        cmocka_unit_test(t_report),
        cmocka_unit_test(t_config_parse),
        cmocka_unit_test(t_ctrd_decode_tasks),
        cmocka_unit_test(t_ctrd_decode_envelope),
    };
    int rc;

    /* A list entry the parser skips is logged; keep the output short. */
    log_setup(LOG_LEVEL_ERROR, LOG_FORMAT_TEXT);
    inspect_text = tu_read_text(
        FIXTURES_DIR, "docker/inspect-exited-1.41.json", &inspect_len);
    running_text = tu_read_text(
        FIXTURES_DIR, "docker/inspect-running-1.41.json", &running_len);
    list_text = tu_read_text(FIXTURES_DIR, "docker/list-1.41.json", &list_len);
    events_text = tu_read_text(
        FIXTURES_DIR, "events/dockerd-20.10.24-run-exit42.jsonl", &events_len);
    tasks_bin = (uint8_t *)tu_read_text(
        FIXTURES_DIR, "containerd/tasks-list-1.6.20.bin", &tasks_bin_len);
    events_bin = (uint8_t *)tu_read_text(
        FIXTURES_DIR, "containerd/events-subscribe-1.6.20.bin",
        &events_bin_len);
    cfg_cases[0].name = "reapd.json";
    cfg_cases[0].text =
        tu_read_text(CONFIG_DIR, "reapd.json", &cfg_cases[0].len);
    cfg_cases[1].name = "titus-example.json";
    cfg_cases[1].text =
        tu_read_text(CONFIG_DIR, "titus-example.json", &cfg_cases[1].len);
    cfg_cases[1].titus = 1;
    if (gethostname(hostname, sizeof(hostname) - 1) != 0)
        hostname[0] = '\0';
    docs_setup();
    stream_setup();
    tu_test_filters();
    rc = cmocka_run_group_tests(tests, NULL, NULL);
    free(inspect_text);
    free(running_text);
    free(list_text);
    free(events_text);
    free(tasks_bin);
    free(events_bin);
    free(cfg_cases[0].text);
    free(cfg_cases[1].text);
    return rc;
}
