/*
 * test_report — the report JSON (the contract downstream consumers read)
 * and the reports.jsonl appender in agent/report.c.
 *
 * Every report is parsed back with agent/json.c and checked key by key,
 * value by value and type by type, because a consumer breaks as easily on
 * a number where it expects null as on a missing key. The appender is
 * checked for what a crash-safe log promises: whole lines only, even when
 * the disk fills up mid-line. Its rotation is checked on its own (shifts,
 * keep, modes, a symlink in the way) and inside reapd against the fake
 * engine: only once the store holds the file, the checkpoint reset before
 * any append, and a kill -9 at every step of it, after which the next
 * start neither loses a report nor stores one twice.
 */
#define _GNU_SOURCE /* unshare */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sqlite3.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "docker.h"
#include "fake_engine.h"
#include "json.h"
#include "log.h"
#include "loop.h"
#include "reaper.h"
#include "report.h"
#include "store.h"
#include "testutil.h"

#define CID "02e6f886fdb89aa74ddf893246272aa1971447d17bc86439e1de5be123cef255"

/* Every key the report contract defines, in no particular order. */
static const char *const CONTRACT_KEYS[] = {
    "report_id",
    "schema_version",
    "node",
    "container_id",
    "name",
    "image",
    "labels",
    "policy",
    "exit_code",
    "exit_code_source",
    "engine_exit_code",
    "oom_killed",
    "started_at",
    "finished_at",
    "removed",
    "task_deleted",
    "cleanup_ms",
    "delete_attempts",
    "anomalies",
};

static const struct policy_label LABELS[] = {
    {"reapd.managed", "true"},
    {"team", "infra"},
};

static const char *const ANOMALIES[] = {"engine_exit_code_mismatch",
                                        "delete_retried"};

/* A fully known exit: every field set. */
static struct report
full_report(void)
{
    struct report r;

    memset(&r, 0, sizeof(r));
    r.node = "node-1";
    r.container_id = CID;
    r.name = "web-1";
    r.image = "reapd-test:1";
    r.labels = LABELS;
    r.nlabels = 2;
    r.policy = "managed";
    r.action = "remove";
    r.exit_known = true;
    r.exit_code = 7;
    r.exit_code_source = "inspect";
    r.has_engine_exit_code = true;
    r.engine_exit_code = 255;
    r.oom_killed = true;
    r.started_at = "2026-12-02T12:27:21.398675775Z";
    r.finished_at = "2026-12-02T12:27:21.395600727Z";
    r.removed = true;
    r.task_deleted = 1;
    r.cleanup_ms = 1234;
    r.delete_attempts = 3;
    r.anomalies = ANOMALIES;
    r.nanomalies = 2;
    r.removed_by = "reapd";
    r.reported_at = "2026-12-02T12:27:22.000Z";
    report_make_id(&r, r.finished_at);
    return r;
}

/* report_to_json, then parse it back; the text must be one line. */
static struct json_node *
to_tree(const struct report *r)
{
    size_t len = 0;
    char *s = report_to_json(r, &len);
    struct json_node *root;
    char err[256] = "";

    assert_non_null(s);
    assert_int_equal(len, strlen(s));
    /* jsonl: a raw newline inside would split the record. */
    assert_null(memchr(s, '\n', len));
    assert_null(memchr(s, '\r', len));
    root = json_parse(s, len, NULL, 0, err, sizeof(err), NULL);
    if (root == NULL)
        fail_msg("report is not JSON (%s): %s", err, s);
    free(s);
    assert_int_equal(root->type, JSON_OBJECT);
    return root;
}

static const struct json_node *
member(const struct json_node *root, const char *key, enum json_type type)
{
    const struct json_node *n = json_get(root, key);

    if (n == NULL)
        fail_msg("key \"%s\" missing", key);
    if (n->type != type)
        fail_msg("key \"%s\": type %d, want %d", key, n->type, type);
    return n;
}

static const char *
str_of(const struct json_node *root, const char *key)
{
    return json_string(member(root, key, JSON_STRING));
}

static int64_t
int_of(const struct json_node *root, const char *key)
{
    int64_t v = 0;

    assert_int_equal(json_int64(member(root, key, JSON_NUMBER), &v), 0);
    return v;
}

static int
bool_of(const struct json_node *root, const char *key)
{
    return member(root, key, JSON_BOOL)->boolean;
}

static void
t_full_report(void **state)
{
    struct report r = full_report();
    struct json_node *root = to_tree(&r);
    const struct json_node *labels, *an;
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(CONTRACT_KEYS) / sizeof(CONTRACT_KEYS[0]); i++)
        if (json_get(root, CONTRACT_KEYS[i]) == NULL)
            fail_msg("contract key \"%s\" missing", CONTRACT_KEYS[i]);
    assert_string_equal(str_of(root, "report_id"), r.report_id);
    assert_int_equal(int_of(root, "schema_version"), REPORT_SCHEMA_VERSION);
    assert_int_equal(REPORT_SCHEMA_VERSION, 1);
    assert_string_equal(str_of(root, "node"), "node-1");
    assert_string_equal(str_of(root, "container_id"), CID);
    assert_string_equal(str_of(root, "name"), "web-1");
    assert_string_equal(str_of(root, "image"), "reapd-test:1");
    labels = member(root, "labels", JSON_OBJECT);
    assert_int_equal(labels->count, 2);
    assert_string_equal(json_string(json_get(labels, "reapd.managed")),
                        "true");
    assert_string_equal(json_string(json_get(labels, "team")), "infra");
    assert_string_equal(str_of(root, "policy"), "managed");
    assert_string_equal(str_of(root, "action"), "remove");
    assert_int_equal(int_of(root, "exit_code"), 7);
    assert_string_equal(str_of(root, "exit_code_source"), "inspect");
    assert_int_equal(int_of(root, "engine_exit_code"), 255);
    assert_true(bool_of(root, "oom_killed"));
    assert_string_equal(str_of(root, "started_at"),
                        "2026-12-02T12:27:21.398675775Z");
    assert_string_equal(str_of(root, "finished_at"),
                        "2026-12-02T12:27:21.395600727Z");
    assert_true(bool_of(root, "removed"));
    assert_true(bool_of(root, "task_deleted"));
    assert_int_equal(int_of(root, "cleanup_ms"), 1234);
    assert_int_equal(int_of(root, "delete_attempts"), 3);
    an = member(root, "anomalies", JSON_ARRAY);
    assert_int_equal(an->count, 2);
    assert_string_equal(json_string(an->items[0]),
                        "engine_exit_code_mismatch");
    assert_string_equal(json_string(an->items[1]), "delete_retried");
    assert_string_equal(str_of(root, "removed_by"), "reapd");
    assert_string_equal(str_of(root, "reported_at"),
                        "2026-12-02T12:27:22.000Z");
    /* The 19 contract keys, plus action, removed_by and reported_at,
     * each once: a consumer taking the first must see the same. */
    assert_int_equal(root->count, 22);
    for (i = 0; i < root->count; i++) {
        size_t j;

        for (j = i + 1; j < root->count; j++)
            assert_string_not_equal(root->items[i]->key, root->items[j]->key);
    }
    json_free(root);
}

/* What is unknown is null, never a made-up value. */
static void
t_unknowns_are_null(void **state)
{
    struct report r = full_report();
    struct json_node *root;
    size_t i;

    (void)state;
    r.name = NULL;
    r.image = NULL;
    r.labels = NULL;
    r.nlabels = 0;
    r.exit_known = false;
    r.exit_code = 99;               /* ignored: not known */
    r.exit_code_source = "inspect"; /* ignored too */
    r.has_engine_exit_code = false;
    r.engine_exit_code = 42;
    r.oom_killed = false;
    r.started_at = NULL;
    r.finished_at = NULL;
    r.removed = false;
    r.task_deleted = -1;
    r.cleanup_ms = 0;
    r.delete_attempts = 0;
    r.anomalies = NULL;
    r.nanomalies = 0;
    r.removed_by = NULL;
    r.reported_at = NULL;
    root = to_tree(&r);
    for (i = 0; i < sizeof(CONTRACT_KEYS) / sizeof(CONTRACT_KEYS[0]); i++)
        if (json_get(root, CONTRACT_KEYS[i]) == NULL)
            fail_msg("contract key \"%s\" missing", CONTRACT_KEYS[i]);
    member(root, "name", JSON_NULL);
    member(root, "image", JSON_NULL);
    assert_int_equal(member(root, "labels", JSON_OBJECT)->count, 0);
    member(root, "exit_code", JSON_NULL);
    member(root, "exit_code_source", JSON_NULL);
    member(root, "engine_exit_code", JSON_NULL);
    assert_false(bool_of(root, "oom_killed"));
    member(root, "started_at", JSON_NULL);
    member(root, "finished_at", JSON_NULL);
    assert_false(bool_of(root, "removed"));
    member(root, "task_deleted", JSON_NULL);
    assert_int_equal(int_of(root, "cleanup_ms"), 0);
    assert_int_equal(int_of(root, "delete_attempts"), 0);
    assert_int_equal(member(root, "anomalies", JSON_ARRAY)->count, 0);
    member(root, "removed_by", JSON_NULL);
    member(root, "reported_at", JSON_NULL);
    json_free(root);

    /* Known exit, no source given: the source is null, the code is not. */
    r.exit_known = true;
    r.exit_code = 0;
    r.exit_code_source = NULL;
    r.task_deleted = 0;
    root = to_tree(&r);
    assert_int_equal(int_of(root, "exit_code"), 0);
    member(root, "exit_code_source", JSON_NULL);
    assert_false(bool_of(root, "task_deleted"));
    json_free(root);
}

static void
t_number_edges(void **state)
{
    struct report r = full_report();
    struct json_node *root;

    (void)state;
    r.exit_code = -1;
    r.engine_exit_code = 2147483647;
    r.cleanup_ms = 86400000ull * 365;
    r.delete_attempts = 4000000000u;
    root = to_tree(&r);
    assert_int_equal(int_of(root, "exit_code"), -1);
    assert_int_equal(int_of(root, "engine_exit_code"), 2147483647);
    assert_int_equal(int_of(root, "cleanup_ms"), 86400000ll * 365);
    assert_int_equal(int_of(root, "delete_attempts"), 4000000000ll);
    json_free(root);
    r.task_deleted = 2; /* any non-zero is true */
    root = to_tree(&r);
    assert_true(bool_of(root, "task_deleted"));
    json_free(root);
}

static void
t_escaping(void **state)
{
    static const char *nasty[] = {
        "quote\"in\"side",
        "back\\slash",
        "new\nline\r\n",
        "tab\there",
        "ctl\x01\x02\x1f\x7f",
        "caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x90\xb3",
        "</script><!--",
        "\\u0041 is not decoded twice",
        "{\"looks\":\"like json\"}",
        "",
    };
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(nasty) / sizeof(nasty[0]); i++) {
        struct report r = full_report();
        struct policy_label lab[2] = {{(char *)nasty[i], (char *)nasty[i]},
                                      {"plain", (char *)nasty[i]}};
        const char *an[1] = {nasty[i]};
        struct json_node *root;
        const struct json_node *l;

        r.node = nasty[i];
        r.name = nasty[i];
        r.image = nasty[i];
        r.policy = nasty[i];
        r.started_at = nasty[i];
        r.labels = lab;
        r.nlabels = i == sizeof(nasty) / sizeof(nasty[0]) - 1 ? 1 : 2;
        r.anomalies = an;
        r.nanomalies = 1;
        root = to_tree(&r);
        assert_string_equal(str_of(root, "node"), nasty[i]);
        assert_string_equal(str_of(root, "name"), nasty[i]);
        assert_string_equal(str_of(root, "image"), nasty[i]);
        assert_string_equal(str_of(root, "policy"), nasty[i]);
        assert_string_equal(str_of(root, "started_at"), nasty[i]);
        l = member(root, "labels", JSON_OBJECT);
        assert_string_equal(json_string(json_get(l, nasty[i])), nasty[i]);
        if (r.nlabels == 2)
            assert_string_equal(json_string(json_get(l, "plain")), nasty[i]);
        assert_string_equal(
            json_string(member(root, "anomalies", JSON_ARRAY)->items[0]),
            nasty[i]);
        json_free(root);
    }
}

static void
t_many_labels(void **state)
{
    struct report r = full_report();
    struct policy_label *lab = calloc(300, sizeof(*lab));
    char(*keys)[16] = calloc(300, 16);
    struct json_node *root;
    const struct json_node *l;
    size_t i;

    (void)state;
    assert_non_null(lab);
    assert_non_null(keys);
    for (i = 0; i < 300; i++) {
        snprintf(keys[i], 16, "k%zu", i);
        lab[i].key = keys[i];
        lab[i].value = keys[i];
    }
    r.labels = lab;
    r.nlabels = 300;
    root = to_tree(&r);
    l = member(root, "labels", JSON_OBJECT);
    assert_int_equal(l->count, 300);
    for (i = 0; i < 300; i++) {
        assert_string_equal(l->items[i]->key, keys[i]);
        assert_string_equal(json_string(l->items[i]), keys[i]);
    }
    json_free(root);
    free(lab);
    free(keys);
}

/* ---- report ids ------------------------------------------------------- */

static void
id_of(const char *node, const char *cid, const char *key, char out[40])
{
    struct report r;

    memset(&r, 0, sizeof(r));
    r.node = node;
    r.container_id = cid;
    report_make_id(&r, key);
    memcpy(out, r.report_id, 40);
}

static void
t_report_id(void **state)
{
    char a[40], b[40];
    size_t i;

    (void)state;
    id_of("n", CID, "2026-12-02T12:27:21.395600727Z", a);
    assert_int_equal(strlen(a), 32);
    for (i = 0; i < 32; i++)
        if (!((a[i] >= '0' && a[i] <= '9') || (a[i] >= 'a' && a[i] <= 'f')))
            fail_msg("report_id char %zu is '%c'", i, a[i]);
    /* Deterministic: the same exit, the same id, every time. */
    id_of("n", CID, "2026-12-02T12:27:21.395600727Z", b);
    assert_string_equal(a, b);
    /* Each fact counts. */
    id_of("m", CID, "2026-12-02T12:27:21.395600727Z", b);
    assert_string_not_equal(a, b);
    id_of("n",
          "12e6f886fdb89aa74ddf893246272aa1971447d17bc86439e1de5be123cef255",
          "2026-12-02T12:27:21.395600727Z", b);
    assert_string_not_equal(a, b);
    id_of("n", CID, "2026-12-02T12:27:21.395600728Z", b);
    assert_string_not_equal(a, b);
    /* Field boundaries count: ("ab","c") is not ("a","bc"). */
    id_of("ab", "c", "k", a);
    id_of("a", "bc", "k", b);
    assert_string_not_equal(a, b);
    id_of("n", "ab", "c", a);
    id_of("n", "a", "bc", b);
    assert_string_not_equal(a, b);
    /* The same bytes in both field orders; only separators tell them
     * apart. */
    id_of("a", "", "a", a);
    id_of("", "a", "a", b);
    assert_string_not_equal(a, b);
    /* And order: node and container swapped is another exit. */
    id_of("x", "y", "k", a);
    id_of("y", "x", "k", b);
    assert_string_not_equal(a, b);
    /* Empty and missing exit keys still make a full id. */
    id_of("n", CID, "", a);
    assert_int_equal(strlen(a), 32);
    id_of("n", CID, NULL, b);
    assert_int_equal(strlen(b), 32);
}

/* A known value, so a change to the hash (which would break dedup across
 * an upgrade) does not go unnoticed. */
static void
t_report_id_stable(void **state)
{
    char a[40];
    struct report r = full_report();
    char b[40];

    /* Literal ids, computed apart from reapd (FNV-1a 64 as published, in
     * a few lines of Python): a changed hash, order of fields or
     * separator changes every id a fleet's upstream has folded on. */
    static const struct {
        const char *node, *cid, *key, *want;
    } pinned[] = {
        {"node-1", CID, "2026-12-02T12:27:21.395600727Z",
         "178df29e5dd015485eb085037179fadb"},
        {"node-1", CID, "die:1796297421000000000",
         "fa2be226a056a66942118e1ee30ed822"},
        {"node-2", CID, "2026-12-02T12:27:21.395600727Z",
         "acf2acb0c1e91cbf5eae850371797804"},
        {"node-1", CID, "unknown", "da47e16412c799e328e6470a0cac3010"},
        {"ab", "c", "", "45ca90cffdab553a14e9b2e49d1c8021"},
        {"a", "bc", "", "ae885aefb55b8ebcd2bf55e3a6b89fdb"},
    };
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(pinned) / sizeof(pinned[0]); i++) {
        id_of(pinned[i].node, pinned[i].cid, pinned[i].key, a);
        assert_string_equal(a, pinned[i].want);
    }
    /* A whole report's id is the same function of the same fields. */
    memcpy(b, r.report_id, 40);
    assert_string_equal(b, pinned[0].want);
    id_of("", "", "", a);
    /* FNV-1a 64 of three separators, from the two offset bases. */
    {
        uint64_t h1 = 0xcbf29ce484222325ull, h2 = 0x84222325cbf29ce4ull;
        char want[40];
        int k;

        for (k = 0; k < 3; k++) {
            h1 = (h1 ^ 0xff) * 0x100000001b3ull;
            h2 = (h2 ^ 0xff) * 0x100000001b3ull;
        }
        snprintf(want, sizeof(want), "%016llx%016llx", (unsigned long long)h1,
                 (unsigned long long)h2);
        assert_string_equal(a, want);
    }
}

static void
t_many_ids_distinct(void **state)
{
    char(*ids)[40] = calloc(2000, 40);
    char key[64];
    size_t i, j;

    (void)state;
    assert_non_null(ids);
    for (i = 0; i < 2000; i++) {
        snprintf(key, sizeof(key), "2026-12-02T12:27:%02zu.%09zuZ", i % 60, i);
        id_of("n", CID, key, ids[i]);
    }
    for (i = 0; i < 2000; i++)
        for (j = i + 1; j < 2000; j++)
            if (strcmp(ids[i], ids[j]) == 0)
                fail_msg("ids %zu and %zu collide", i, j);
    free(ids);
}

static void
t_now_rfc3339(void **state)
{
    char buf[64];
    struct tm tm;
    time_t now = time(NULL), t;
    int ms = -1;
    char z = 0;

    (void)state;
    memset(buf, 'X', sizeof(buf));
    report_now_rfc3339(buf, sizeof(buf));
    /* 2026-12-02T12:27:21.123Z */
    assert_int_equal(strlen(buf), 24);
    assert_int_equal(buf[4], '-');
    assert_int_equal(buf[10], 'T');
    assert_int_equal(buf[19], '.');
    assert_int_equal(buf[23], 'Z');
    memset(&tm, 0, sizeof(tm));
    assert_int_equal(sscanf(buf, "%4d-%2d-%2dT%2d:%2d:%2d.%3d%c", &tm.tm_year,
                            &tm.tm_mon, &tm.tm_mday, &tm.tm_hour, &tm.tm_min,
                            &tm.tm_sec, &ms, &z),
                     8);
    assert_int_equal(z, 'Z');
    assert_true(ms >= 0 && ms <= 999);
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    t = timegm(&tm);
    /* UTC, and now. */
    assert_true(t >= now - 5 && t <= now + 5);
}

/* ---- reports.jsonl ---------------------------------------------------- */

struct tmp {
    char dir[64];
    char path[128];
};

static void
tmp_new(struct tmp *t)
{
    snprintf(t->dir, sizeof(t->dir), "/tmp/reapd-report-XXXXXX");
    assert_non_null(mkdtemp(t->dir));
    snprintf(t->path, sizeof(t->path), "%s/reports.jsonl", t->dir);
}

static void
tmp_free(struct tmp *t)
{
    unlink(t->path);
    rmdir(t->dir);
}

/* Every line of t's journal is one whole report; returns how many. */
static size_t
check_lines(const struct tmp *t)
{
    size_t len, n = 0;
    char *buf = tu_read_text(t->dir, "reports.jsonl", &len);
    char *p = buf, *nl;

    if (len > 0)
        assert_int_equal(buf[len - 1], '\n');
    while ((nl = strchr(p, '\n')) != NULL) {
        struct json_node *root =
            json_parse(p, (size_t)(nl - p), NULL, 0, NULL, 0, NULL);

        if (root == NULL)
            fail_msg("line %zu is not JSON: %.*s", n + 1, (int)(nl - p), p);
        assert_non_null(json_get(root, "report_id"));
        json_free(root);
        n++;
        p = nl + 1;
    }
    assert_int_equal(*p, '\0');
    free(buf);
    return n;
}

static void
t_log_append(void **state)
{
    struct tmp t;
    struct report_log *rl;
    struct stat st;
    mode_t old = umask(022);
    int i;

    (void)state;
    tmp_new(&t);
    rl = report_log_open(t.dir);
    umask(old);
    assert_non_null(rl);
    assert_string_equal(report_log_path(rl), t.path);
    /* Created at once, private to the group, not world-readable. */
    assert_int_equal(stat(t.path, &st), 0);
    assert_true(S_ISREG(st.st_mode));
    assert_int_equal(st.st_mode & 07777, 0640);
    assert_int_equal(st.st_size, 0);
    for (i = 0; i < 200; i++) {
        struct report r = full_report();
        char key[32];
        size_t len;
        char *s;

        snprintf(key, sizeof(key), "exit-%d", i);
        report_make_id(&r, key);
        r.name = i % 2 ? "multi\nline\nname" : "plain";
        s = report_to_json(&r, &len);
        assert_non_null(s);
        assert_int_equal(report_log_append(rl, s, len), 0);
        free(s);
    }
    assert_int_equal(check_lines(&t), 200);
    report_log_close(rl);

    /* Reopening appends; it never truncates. */
    rl = report_log_open(t.dir);
    assert_non_null(rl);
    {
        struct report r = full_report();
        size_t len;
        char *s = report_to_json(&r, &len);

        assert_int_equal(report_log_append(rl, s, len), 0);
        free(s);
    }
    report_log_close(rl);
    assert_int_equal(check_lines(&t), 201);
    report_log_close(NULL);
    tmp_free(&t);
}

/* Two handles on one file (a restart overlapping the old process): each
 * append lands whole, none overwrites another. */
static void
t_log_two_writers(void **state)
{
    struct tmp t;
    struct report_log *a, *b;
    int i;

    (void)state;
    tmp_new(&t);
    a = report_log_open(t.dir);
    b = report_log_open(t.dir);
    assert_non_null(a);
    assert_non_null(b);
    for (i = 0; i < 50; i++) {
        struct report r = full_report();
        size_t len;
        char *s = report_to_json(&r, &len);

        assert_int_equal(report_log_append(i % 2 ? a : b, s, len), 0);
        free(s);
    }
    report_log_close(a);
    report_log_close(b);
    assert_int_equal(check_lines(&t), 50);
    tmp_free(&t);
}

/* As root: a directory `nobody` owns but may not write (0500); a child
 * that is `nobody` opens the log in it. 0, or what went wrong. */
static int
eacces_as_nobody(void)
{
    char dir[] = "/tmp/reapd-ro-XXXXXX", ro[64];
    pid_t pid;
    int st = 0, rc = 0;

    if (mkdtemp(dir) == NULL || chmod(dir, 0755) != 0)
        return 1;
    snprintf(ro, sizeof(ro), "%s/ro", dir);
    if (mkdir(ro, 0500) != 0 || chown(ro, 65534, 65534) != 0) {
        rc = 2;
        goto out;
    }
    fflush(NULL);
    pid = fork();
    if (pid < 0) {
        rc = 3;
        goto out;
    }
    if (pid == 0) {
        struct report_log *rl;

        if (setgroups(0, NULL) != 0 || setgid(65534) != 0 ||
            setuid(65534) != 0)
            _exit(4);
        errno = 0;
        rl = report_log_open(ro);
        _exit(rl == NULL && errno == EACCES ? 0 : 5);
    }
    if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st))
        rc = 6;
    else
        rc = WEXITSTATUS(st);
out:
    rmdir(ro);
    rmdir(dir);
    return rc;
}

static void
t_log_open_fails(void **state)
{
    struct tmp t;
    char path[160];
    int fd;

    (void)state;
    tmp_new(&t);
    snprintf(path, sizeof(path), "%s/does/not/exist", t.dir);
    errno = 0;
    assert_null(report_log_open(path));
    assert_int_equal(errno, ENOENT);

    /* A file where the directory should be. */
    snprintf(path, sizeof(path), "%s/file", t.dir);
    fd = open(path, O_CREAT | O_WRONLY, 0600);
    assert_true(fd >= 0);
    close(fd);
    errno = 0;
    assert_null(report_log_open(path));
    assert_int_equal(errno, ENOTDIR);
    unlink(path);

    /* A directory we may not write to. Root may write anywhere: as root
     * the check runs in a child that is `nobody`, in a directory of its
     * own. */
    if (geteuid() != 0) {
        snprintf(path, sizeof(path), "%s/ro", t.dir);
        assert_int_equal(mkdir(path, 0500), 0);
        errno = 0;
        assert_null(report_log_open(path));
        assert_int_equal(errno, EACCES);
        rmdir(path);
    } else {
        assert_int_equal(eacces_as_nobody(), 0);
    }
    /* reports.jsonl itself a directory. */
    assert_int_equal(mkdir(t.path, 0700), 0);
    errno = 0;
    assert_null(report_log_open(t.dir));
    assert_int_equal(errno, EISDIR);
    rmdir(t.path);
    tmp_free(&t);
}

/* report_state_dir_check refuses `dir` with `e`, in a message that names
 * the directory and says `why`. */
static void
expect_dir_refused(const char *dir, int e, const char *why)
{
    char err[512] = "";

    errno = 0;
    assert_int_equal(report_state_dir_check(dir, err, sizeof(err)), -1);
    assert_int_equal(errno, e);
    if (strstr(err, dir) == NULL || strstr(err, why) == NULL)
        fail_msg("state_dir message \"%s\", want \"%s\"", err, why);
}

/* reports.jsonl is never reached through a symlink, and the state
 * directory must be reapd's own: not a symlink, not writable by others,
 * owned by the effective user. */
static void
t_log_open_hardened(void **state)
{
    struct tmp t;
    struct report_log *rl;
    char other[128], link[160];
    struct stat st;
    bool found;
    int fd;

    (void)state;
    tmp_new(&t);
    snprintf(other, sizeof(other), "%s/elsewhere", t.dir);
    fd = open(other, O_CREAT | O_WRONLY, 0600);
    assert_true(fd >= 0);
    close(fd);

    /* reports.jsonl a symlink: refused, its target left alone. */
    assert_int_equal(symlink(other, t.path), 0);
    errno = 0;
    assert_null(report_log_open(t.dir));
    assert_int_equal(errno, ELOOP);
    assert_int_equal(stat(other, &st), 0);
    assert_int_equal(st.st_size, 0);
    unlink(t.path);
    /* A dangling one too: nothing is created where it points. */
    snprintf(link, sizeof(link), "%s/nowhere", t.dir);
    assert_int_equal(symlink(link, t.path), 0);
    errno = 0;
    assert_null(report_log_open(t.dir));
    assert_int_equal(errno, ELOOP);
    assert_int_equal(access(link, F_OK), -1);
    unlink(t.path);

    /* The state directory a symlink to a good one: refused. */
    snprintf(link, sizeof(link), "%s.link", t.dir);
    assert_int_equal(symlink(t.dir, link), 0);
    errno = 0;
    assert_null(report_log_open(link));
    assert_int_equal(errno, ELOOP);
    assert_int_equal(access(t.path, F_OK), -1);
    expect_dir_refused(link, ELOOP, "is a symlink");
    unlink(link);
    expect_dir_refused(link, ENOENT, strerror(ENOENT));

    /* Writable by the group or by everyone (even with the sticky bit,
     * as /tmp is): refused. */
    assert_int_equal(chmod(t.dir, 0770), 0);
    errno = 0;
    assert_null(report_log_open(t.dir));
    assert_int_equal(errno, EPERM);
    expect_dir_refused(t.dir, EPERM, "writable by its group (mode 0770)");
    assert_int_equal(chmod(t.dir, 01777), 0);
    errno = 0;
    assert_null(report_log_open(t.dir));
    assert_int_equal(errno, EPERM);
    expect_dir_refused(t.dir, EPERM, "writable by everyone (mode 1777)");
    assert_int_equal(chmod(t.dir, 0702), 0);
    errno = 0;
    assert_null(report_log_open(t.dir));
    assert_int_equal(errno, EPERM);
    expect_dir_refused(t.dir, EPERM, "writable by everyone (mode 0702)");
    assert_int_equal(access(t.path, F_OK), -1);

    /* Owned by another user: refused. Only root can give it away. */
    if (geteuid() == 0) {
        assert_int_equal(chmod(t.dir, 0750), 0);
        assert_int_equal(chown(t.dir, 65534, 65534), 0);
        errno = 0;
        assert_null(report_log_open(t.dir));
        assert_int_equal(errno, EPERM);
        expect_dir_refused(t.dir, EPERM, "owned by uid 65534");
        assert_int_equal(chown(t.dir, 0, 0), 0);
    }

    /* Readable by others is fine (0755, 0750), and the file is opened
     * close-on-exec. */
    assert_int_equal(chmod(t.dir, 0755), 0);
    rl = report_log_open(t.dir);
    assert_non_null(rl);
    assert_true(tu_open_cloexec(t.path, &found));
    assert_true(found);
    report_log_close(rl);
    assert_int_equal(chmod(t.dir, 0750), 0);
    rl = report_log_open(t.dir);
    assert_non_null(rl);
    report_log_close(rl);
    assert_int_equal(report_state_dir_check(t.dir, link, sizeof(link)), 0);
    /* A trailing slash names the same directory. */
    snprintf(link, sizeof(link), "%s/", t.dir);
    rl = report_log_open(link);
    assert_non_null(rl);
    assert_string_equal(report_log_path(rl), t.path);
    report_log_close(rl);
    /* reports.jsonl something else than a file (a FIFO would take the
     * lines and lose them). */
    unlink(t.path);
    assert_int_equal(mkfifo(t.path, 0600), 0);
    errno = 0;
    assert_null(report_log_open(t.dir));
    assert_int_equal(errno, EINVAL);
    unlink(other);
    tmp_free(&t);
}

/* In a child: a tiny file system of its own on t->dir (a private mount
 * namespace), filled up; then an append must fail with ENOSPC and leave
 * no partial line behind. 0 if so, 77 if no file system could be
 * mounted, else what went wrong. */
static int
disk_full_child(void *arg)
{
    const struct tmp *t = arg;
    static char fill[4096];
    struct report r = full_report();
    struct report_log *rl;
    char path[160];
    struct stat st;
    size_t len;
    char *s;
    int fd, rc;

    /* Root has its own mount namespace to take; any other user a user
     * namespace (where the kernel allows it), in which it may mount. */
    if (unshare(CLONE_NEWNS) != 0 && unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0)
        return 77;
    if (mount("none", "/", "none", MS_REC | MS_PRIVATE, NULL) != 0 ||
        mount("tmpfs", t->dir, "tmpfs", 0, "size=64k,mode=0700") != 0)
        return 78;
    snprintf(path, sizeof(path), "%s/fill", t->dir);
    fd = open(path, O_CREAT | O_WRONLY, 0600);
    if (fd < 0)
        return 10;
    while (write(fd, fill, sizeof(fill)) > 0)
        ;
    close(fd);
    rl = report_log_open(t->dir);
    if (rl == NULL)
        return 11;
    s = report_to_json(&r, &len);
    errno = 0;
    rc = report_log_append(rl, s, len);
    free(s);
    if (rc != -1)
        return 12;
    if (errno != ENOSPC)
        return 13;
    report_log_close(rl);
    if (stat(t->path, &st) != 0 || st.st_size != 0)
        return 14;
    return 0;
}

/* The disk is full: the append fails with ENOSPC. */
static void
t_log_disk_full(void **state)
{
    struct tmp t;
    int status;

    (void)state;
    tmp_new(&t);
    status = tu_fork(disk_full_child, &t);
    tmp_free(&t);
    /* Not a skip: a pass that checked nothing would say ENOSPC is
     * handled. */
    if (status == 77 || status == 78)
        fail_msg("cannot make a small file system for the full disk (%s): "
                 "run as root, or where user namespaces are allowed",
                 status == 77 ? "unshare" : "mount");
    assert_int_equal(status, 0);
}

/*
 * The file may grow only so far (RLIMIT_FSIZE stands in for a filling
 * disk): the write of the next line is cut short. The torn tail must be
 * cut off again, so the file still holds whole lines only.
 */
static void
t_log_torn_line_cut(void **state)
{
    struct tmp t;
    struct report_log *rl;
    struct report r = full_report();
    struct rlimit old, lim;
    struct stat st;
    size_t len;
    char *s;
    int rc, e;

    (void)state;
    tmp_new(&t);
    rl = report_log_open(t.dir);
    assert_non_null(rl);
    s = report_to_json(&r, &len);
    assert_int_equal(report_log_append(rl, s, len), 0);
    assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
    lim = old;
    /* Room for half of the next line. */
    lim.rlim_cur = (rlim_t)(len + 1 + len / 2);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
    errno = 0;
    rc = report_log_append(rl, s, len);
    e = errno;
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
    assert_int_equal(rc, -1);
    assert_true(e != 0);
    assert_int_equal(stat(t.path, &st), 0);
    assert_int_equal((size_t)st.st_size, len + 1);
    assert_int_equal(check_lines(&t), 1);
    /* And the log goes on once there is room again. */
    assert_int_equal(report_log_append(rl, s, len), 0);
    assert_int_equal(check_lines(&t), 2);
    free(s);
    report_log_close(rl);
    tmp_free(&t);
}

/*
 * Lines appended together: one write, all or none. Cut short (the file
 * may grow only so far), none of them stays, and the file still holds
 * whole lines only; the log goes on once there is room. More than
 * REPORT_LOG_LINES_MAX at once is refused; none at all is nothing.
 */
static void
t_log_append_many(void **state)
{
    struct tmp t;
    struct report_log *rl;
    struct report r = full_report();
    struct report_line v[REPORT_LOG_LINES_MAX + 1];
    struct rlimit old, lim;
    struct stat st;
    size_t len, i;
    char *s;
    int rc, e;

    (void)state;
    tmp_new(&t);
    rl = report_log_open(t.dir);
    assert_non_null(rl);
    s = report_to_json(&r, &len);
    for (i = 0; i <= REPORT_LOG_LINES_MAX; i++) {
        v[i].json = s;
        v[i].len = len;
    }
    assert_int_equal(report_log_append_many(rl, v, 3), 0);
    assert_int_equal(check_lines(&t), 3);
    assert_int_equal(report_log_end(rl), (int64_t)(3 * (len + 1)));
    assert_int_equal(report_log_append_many(rl, v, 0), 0);
    assert_int_equal(check_lines(&t), 3);
    errno = 0;
    assert_int_equal(report_log_append_many(rl, v, REPORT_LOG_LINES_MAX + 1),
                     -1);
    assert_int_equal(errno, EINVAL);
    assert_int_equal(check_lines(&t), 3);
    /* Room for one and a half of the next three. */
    assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
    lim = old;
    lim.rlim_cur = (rlim_t)(3 * (len + 1) + len + 1 + len / 2);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
    errno = 0;
    rc = report_log_append_many(rl, v, 3);
    e = errno;
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
    assert_int_equal(rc, -1);
    assert_true(e != 0);
    assert_int_equal(stat(t.path, &st), 0);
    assert_int_equal((size_t)st.st_size, 3 * (len + 1));
    assert_int_equal(check_lines(&t), 3);
    assert_int_equal(report_log_end(rl), (int64_t)(3 * (len + 1)));
    assert_int_equal(report_log_append_many(rl, v, REPORT_LOG_LINES_MAX), 0);
    assert_int_equal(check_lines(&t), 3 + REPORT_LOG_LINES_MAX);
    free(s);
    report_log_close(rl);
    tmp_free(&t);
}

/* ---- the journal: replay --------------------------------------------- */

struct seen {
    size_t n;
    char ids[8][33];
    size_t lens[8];
};

static void
on_line(const char *line, size_t len, void *arg)
{
    struct seen *sn = arg;
    char cid[65];

    assert_true(sn->n < 8);
    assert_int_equal(report_line_ids(line, len, sn->ids[sn->n], cid), 0);
    assert_string_equal(cid, full_report().container_id);
    sn->lens[sn->n++] = len;
}

/* Appends the report with id key `key`; returns its line length. */
static size_t
append_one(struct report_log *rl, const char *key, char id[33])
{
    struct report r = full_report();
    size_t len;
    char *s;

    report_make_id(&r, key);
    memcpy(id, r.report_id, 33);
    s = report_to_json(&r, &len);
    assert_non_null(s);
    assert_int_equal(report_log_append(rl, s, len), 0);
    free(s);
    return len;
}

/* From any line boundary, the lines after it, in order; the end offset
 * tracks every append. */
static void
t_log_replay(void **state)
{
    struct tmp t;
    struct report_log *rl;
    struct seen sn;
    char ids[3][33];
    int64_t at[4], end;
    int i;

    (void)state;
    tmp_new(&t);
    rl = report_log_open(t.dir);
    assert_non_null(rl);
    at[0] = report_log_end(rl);
    assert_int_equal(at[0], 0);
    for (i = 0; i < 3; i++) {
        char key[16];

        snprintf(key, sizeof(key), "k%d", i);
        at[i + 1] = at[i] + (int64_t)append_one(rl, key, ids[i]) + 1;
        assert_int_equal(report_log_end(rl), at[i + 1]);
    }
    for (i = 0; i <= 3; i++) {
        int j;

        memset(&sn, 0, sizeof(sn));
        assert_int_equal(report_log_replay(rl, at[i], on_line, &sn, &end), 0);
        assert_int_equal(end, at[3]);
        assert_int_equal(sn.n, (size_t)(3 - i));
        for (j = 0; j < 3 - i; j++)
            assert_string_equal(sn.ids[j], ids[i + j]);
    }
    /* Past the end is refused. */
    assert_int_equal(report_log_replay(rl, at[3] + 1, on_line, &sn, &end), -1);
    report_log_close(rl);
    /* Reopened: the end is the file's size. */
    rl = report_log_open(t.dir);
    assert_int_equal(report_log_end(rl), at[3]);
    report_log_close(rl);
    tmp_free(&t);
}

/* A torn last line (power loss mid-write) is cut off by the replay, so
 * the next append starts a line of its own; a line that is not a report
 * is handed over too (the caller skips it), and an over-long one is
 * skipped whole. */
static void
t_log_replay_torn_and_bad(void **state)
{
    struct tmp t;
    struct report_log *rl;
    struct seen sn = {0};
    char id[33], id2[33], cid[65];
    int64_t end, good;
    size_t big = 3 * REPORT_LINE_MAX + 100, i; /* past the buffer too */
    char *junk;
    FILE *f;

    (void)state;
    tmp_new(&t);
    rl = report_log_open(t.dir);
    assert_non_null(rl);
    good = (int64_t)append_one(rl, "a", id) + 1;
    report_log_close(rl);
    /* An over-long line, then a torn one, written behind its back. */
    f = fopen(t.path, "a");
    assert_non_null(f);
    junk = malloc(big);
    assert_non_null(junk);
    for (i = 0; i < big; i++)
        junk[i] = 'x';
    assert_int_equal(fwrite(junk, 1, big, f), big);
    fputs("\n{\"report_id\":\"0123", f);
    fclose(f);
    free(junk);
    assert_false(report_line_ids("{\"report_id\":1}", 16, id2, cid) == 0);
    assert_false(report_line_ids("not json", 8, id2, cid) == 0);

    rl = report_log_open(t.dir);
    assert_non_null(rl);
    assert_int_equal(report_log_replay(rl, 0, on_line, &sn, &end), 0);
    assert_int_equal(sn.n, 1);
    assert_string_equal(sn.ids[0], id);
    assert_int_equal(end, good + (int64_t)big + 1);
    assert_int_equal(report_log_end(rl), end);
    /* The torn tail is gone; the next line stands on its own. */
    append_one(rl, "b", id2);
    memset(&sn, 0, sizeof(sn));
    assert_int_equal(report_log_replay(rl, end, on_line, &sn, &end), 0);
    assert_int_equal(sn.n, 1);
    assert_string_equal(sn.ids[0], id2);
    report_log_close(rl);
    tmp_free(&t);
}

/* ---- the journal at its bounds -------------------------------------- */

/* The reader's view of a line: bounded as a reader of bounds.h's
 * records must be, never more. */
static struct json_node *
parse_line(const char *line, size_t len)
{
    struct json_limits lim = {.max_bytes = LIMIT_RECORD_BYTES,
                              .max_depth = 8,
                              .max_items = 4096,
                              .max_string = 64 * 1024};
    char err[256] = "";
    struct json_node *root =
        json_parse(line, len, &lim, 0, err, sizeof(err), NULL);

    if (root == NULL)
        fail_msg("line not readable: %s", err);
    return root;
}

/* Writes `r` to a fresh reports.jsonl and reads it back as a restart
 * does; the line (caller frees) and its length. */
static char *
journal_round_trip(const struct report *r, size_t *len)
{
    struct tmp t;
    struct report_log *rl;
    struct seen sn = {0};
    int64_t end;
    size_t flen;
    char *s = report_to_json(r, len), *back;

    assert_non_null(s);
    assert_true(*len <= LIMIT_RECORD_BYTES);
    tmp_new(&t);
    rl = report_log_open(t.dir);
    assert_non_null(rl);
    assert_int_equal(report_log_append(rl, s, *len), 0);
    report_log_close(rl);
    rl = report_log_open(t.dir);
    assert_non_null(rl);
    assert_int_equal(report_log_replay(rl, 0, on_line, &sn, &end), 0);
    assert_int_equal(sn.n, 1); /* not skipped as over-long */
    assert_int_equal(sn.lens[0], *len);
    assert_string_equal(sn.ids[0], r->report_id);
    assert_int_equal(end, (int64_t)*len + 1);
    report_log_close(rl);
    back = tu_read_text(t.dir, "reports.jsonl", &flen);
    tmp_free(&t);
    assert_int_equal(flen, *len + 1);
    assert_memory_equal(back, s, *len);
    free(back);
    return s;
}

/* The label `key` of a parsed line, with its value, or fail. */
static const struct json_node *
label_of(const struct json_node *labels, const char *key)
{
    const struct json_node *v = json_get(labels, key);

    if (v == NULL || v->type != JSON_STRING)
        fail_msg("label %.16s... missing", key);
    return v;
}

/* Everything at its bound at once, and every byte escaped six-fold: the
 * line fits LIMIT_RECORD_BYTES, goes through the journal and comes back
 * byte for byte, every label intact. */
static void
t_journal_at_bounds(void **state)
{
    struct report r = full_report();
    struct tu_labset ls = {0};
    const char *anomalies[32];
    struct json_node *root;
    const struct json_node *l;
    char *text, *s;
    size_t len, i;

    (void)state;
    tu_labset_max(&ls);
    r.labels = ls.v;
    r.nlabels = ls.n;
    r.name = tu_labset_text(&ls, LIMIT_NAME_BYTES, 0x01);
    r.image = tu_labset_text(&ls, LIMIT_IMAGE_BYTES, 0x1f);
    text = tu_labset_text(&ls, REPORT_TEXT_MAX, 0x01);
    r.node = r.policy = r.started_at = r.finished_at = text;
    r.action = r.exit_code_source = r.removed_by = r.reported_at = text;
    for (i = 0; i < 32; i++)
        anomalies[i] = tu_labset_text(&ls, REPORT_ANOMALY_MAX, 0x01);
    r.anomalies = anomalies;
    r.nanomalies = 32;
    report_make_id(&r, "at-bounds");
    s = journal_round_trip(&r, &len);
    /* Nearly all of the bound is used: the test is at the edge. */
    assert_true(len > LIMIT_RECORD_BYTES - 64 * 1024);
    root = parse_line(s, len);
    l = member(root, "labels", JSON_OBJECT);
    assert_int_equal(l->count, 320);
    for (i = 0; i < ls.n; i++) {
        const struct json_node *v = label_of(l, ls.v[i].key);

        assert_int_equal(v->len, strlen(ls.v[i].value));
        assert_memory_equal(v->str, ls.v[i].value, v->len);
    }
    assert_string_equal(str_of(root, "name"), r.name);
    assert_string_equal(str_of(root, "image"), r.image);
    assert_string_equal(str_of(root, "node"), text);
    assert_int_equal(member(root, "anomalies", JSON_ARRAY)->count, 32);
    json_free(root);
    free(s);
    tu_labset_free(&ls);
}

/*
 * Past every bound, through the writer: the line is still one a reader
 * takes, cut as bounds.h says. Written out: a key over LIMIT_LABEL_KEY
 * (1024) and a key that is not UTF-8 are dropped; a value is cut before
 * its first byte that is not UTF-8 ("ok"); values of 1700 three-byte
 * characters (5100 bytes) are cut to 1365 of them (4095 bytes, the last
 * whole one within LIMIT_LABEL_VALUE), so with "cut"="ok" (5 bytes) and
 * keys of 5 bytes, 95 of them fit LIMIT_LABELS_STORED_BYTES (393216):
 * 5 + 95 * 4100 = 389505, one more would be 393605. The name is cut like
 * those values, the image to 4096 bytes, other texts to 512, and 32 of
 * 40 anomalies are kept.
 */
static void
t_journal_over_bounds(void **state)
{
    struct report r = full_report();
    struct tu_labset ls = {0};
    const char *anomalies[40];
    struct json_node *root;
    const struct json_node *l, *v;
    char *euro, *s, key[16];
    size_t len, i;

    (void)state;
    euro = tu_labset_over(&ls);
    r.labels = ls.v;
    r.nlabels = ls.n;
    r.name = euro;
    r.image = tu_labset_text(&ls, 5000, 'i');
    r.node = tu_labset_text(&ls, 600, 'n');
    for (i = 0; i < 40; i++)
        anomalies[i] = "delete_retried";
    r.anomalies = anomalies;
    r.nanomalies = 40;
    report_make_id(&r, "over-bounds");
    s = journal_round_trip(&r, &len);
    root = parse_line(s, len);
    l = member(root, "labels", JSON_OBJECT);
    assert_int_equal(l->count, 96);
    assert_string_equal(l->items[0]->key, "cut");
    assert_string_equal(json_string(l->items[0]), "ok");
    for (i = 1; i < 96; i++) {
        snprintf(key, sizeof(key), "l%04zu", i + 2);
        assert_string_equal(l->items[i]->key, key);
        v = l->items[i];
        assert_int_equal(v->len, 4095);
        assert_memory_equal(v->str, euro, 4095);
    }
    assert_int_equal(strlen(str_of(root, "name")), 4095);
    assert_memory_equal(str_of(root, "name"), euro, 4095);
    assert_int_equal(strlen(str_of(root, "image")), 4096);
    assert_int_equal(strlen(str_of(root, "node")), 512);
    assert_int_equal(member(root, "anomalies", JSON_ARRAY)->count, 32);
    json_free(root);
    free(s);
    tu_labset_free(&ls);
}

/* More labels than a container keeps (the 4096 an earlier reader could
 * not get past, and more): the first LIMIT_LABELS_STORED (320) are
 * written, the line is readable. */
static void
t_journal_many_labels(void **state)
{
    struct report r = full_report();
    struct tu_labset ls = {0};
    struct json_node *root;
    const struct json_node *l;
    char key[16], *s;
    size_t len, i;

    (void)state;
    ls.n = 5000;
    ls.v = calloc(ls.n, sizeof(*ls.v));
    assert_non_null(ls.v);
    for (i = 0; i < ls.n; i++) {
        char *k = tu_labset_text(&ls, 5, 'k');

        snprintf(k, 6, "k%04u", (unsigned)(i % 10000));
        ls.v[i].key = k;
        ls.v[i].value = "v";
    }
    r.labels = ls.v;
    r.nlabels = ls.n;
    report_make_id(&r, "many");
    s = journal_round_trip(&r, &len);
    root = parse_line(s, len);
    l = member(root, "labels", JSON_OBJECT);
    assert_int_equal(l->count, 320);
    for (i = 0; i < 320; i++) {
        snprintf(key, sizeof(key), "k%04zu", i);
        assert_string_equal(l->items[i]->key, key);
    }
    json_free(root);
    free(s);
    tu_labset_free(&ls);
}

/* ---- the journal: rotation ------------------------------------------- */

/* Whether dir/name exists (lstat: a symlink counts). */
static bool
exists(const char *dir, const char *name)
{
    char path[160];
    struct stat st;

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    return lstat(path, &st) == 0;
}

/* The report ids of dir/name's lines, in order, into ids (room for
 * `max`); how many, or -1 if there is no such file. */
static int
file_ids(const char *dir, const char *name, char (*ids)[33], int max)
{
    char cid[65], *buf, *p, *nl;
    size_t len;
    int n = 0;

    if (!exists(dir, name))
        return -1;
    buf = tu_read_text(dir, name, &len);
    for (p = buf; (nl = strchr(p, '\n')) != NULL; p = nl + 1) {
        assert_true(n < max);
        if (report_line_ids(p, (size_t)(nl - p), ids[n], cid) != 0)
            fail_msg("%s/%s: line %d is not a report", dir, name, n + 1);
        n++;
    }
    assert_int_equal(*p, '\0'); /* whole lines only */
    free(buf);
    return n;
}

/* dir/name's single line is the report with id `id`. */
static void
assert_holds_one(const char *dir, const char *name, const char *id)
{
    char ids[4][33];

    assert_int_equal(file_ids(dir, name, ids, 4), 1);
    assert_string_equal(ids[0], id);
}

static mode_t
mode_of(const char *dir, const char *name)
{
    char path[160];
    struct stat st;

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    assert_int_equal(lstat(path, &st), 0);
    assert_true(S_ISREG(st.st_mode));
    return st.st_mode & 07777;
}

/* Removes reports.jsonl.1 .. .REPORT_LOG_KEEP_MAX from `dir`. */
static void
rm_rotated(const char *dir)
{
    char path[160];
    unsigned i;

    for (i = 1; i <= REPORT_LOG_KEEP_MAX; i++) {
        snprintf(path, sizeof(path), "%s/reports.jsonl.%u", dir, i);
        unlink(path);
    }
}

struct steps {
    enum report_rotate_step v[16];
    int n;
};

static void
record_step(enum report_rotate_step step, void *arg)
{
    struct steps *s = arg;

    assert_true(s->n < 16);
    s->v[s->n++] = step;
}

/*
 * Rotation shifts the files and keeps `keep` of them: .1 the newest, the
 * oldest deleted; the new reports.jsonl is empty, 0640 like the first,
 * close-on-exec, and takes the appends (the old descriptor is closed);
 * the rotated files keep their mode. A keep lowered since deletes what
 * lies beyond it, a number missing (a crash mid-shift) is stepped over,
 * keep 0 keeps nothing, and a keep beyond the bound is refused.
 */
static void
t_log_rotate(void **state)
{
    static const enum report_rotate_step full[] = {
        REPORT_ROTATE_BEGIN,   REPORT_ROTATE_DROPPED, REPORT_ROTATE_SHIFTED,
        REPORT_ROTATE_RENAMED, REPORT_ROTATE_CREATED, REPORT_ROTATE_SYNCED,
    };
    struct tmp t;
    struct report_log *rl;
    struct steps steps = {0};
    char ids[6][33], path[160];
    mode_t old = umask(022);
    struct stat st;
    bool found;
    int i;

    (void)state;
    tmp_new(&t);
    rl = report_log_open(t.dir);
    assert_non_null(rl);
    /* One line per file, rotated three times with keep 2. */
    for (i = 0; i < 4; i++) {
        char key[16];

        snprintf(key, sizeof(key), "rot-%d", i);
        append_one(rl, key, ids[i]);
        if (i == 3)
            break;
        if (i == 2)
            report_log_set_rotate_hook(record_step, &steps);
        assert_int_equal(report_log_rotate(rl, 2), 0);
        report_log_set_rotate_hook(NULL, NULL);
        assert_int_equal(report_log_end(rl), 0);
        assert_int_equal(mode_of(t.dir, "reports.jsonl"), 0640);
        assert_int_equal(file_ids(t.dir, "reports.jsonl", ids + 4, 1), 0);
    }
    umask(old);
    /* The third rotation, with .1 and .2 there: every step, in order. */
    assert_int_equal(steps.n, 6);
    assert_memory_equal(steps.v, full, sizeof(full));
    /* The line appended after it went to the new file, its end too. */
    assert_holds_one(t.dir, "reports.jsonl", ids[3]);
    assert_int_equal(lstat(t.path, &st), 0);
    assert_int_equal(report_log_end(rl), st.st_size);
    assert_holds_one(t.dir, "reports.jsonl.1", ids[2]);
    assert_holds_one(t.dir, "reports.jsonl.2", ids[1]);
    assert_false(exists(t.dir, "reports.jsonl.3"));
    assert_int_equal(mode_of(t.dir, "reports.jsonl.1"), 0640);
    assert_int_equal(mode_of(t.dir, "reports.jsonl.2"), 0640);
    assert_true(tu_open_cloexec(t.path, &found));
    assert_true(found);
    snprintf(path, sizeof(path), "%s.1", t.path);
    tu_open_cloexec(path, &found);
    assert_false(found); /* the rotated file's descriptor is closed */

    /* Keep lowered to 1: the old .1 and .2 go, and so does a .7 that an
     * older keep left. */
    snprintf(path, sizeof(path), "%s.7", t.path);
    tu_write_file(path, "", 0);
    assert_int_equal(report_log_rotate(rl, 1), 0);
    assert_holds_one(t.dir, "reports.jsonl.1", ids[3]);
    assert_false(exists(t.dir, "reports.jsonl.2"));
    assert_false(exists(t.dir, "reports.jsonl.7"));

    /* A gap (.2 missing, .3 there: a crash mid-shift) is stepped over. */
    snprintf(path, sizeof(path), "%s.3", t.path);
    tu_write_file(path, "", 0);
    append_one(rl, "rot-4", ids[4]);
    assert_int_equal(report_log_rotate(rl, 3), 0);
    assert_holds_one(t.dir, "reports.jsonl.1", ids[4]);
    assert_holds_one(t.dir, "reports.jsonl.2", ids[3]);
    assert_false(exists(t.dir, "reports.jsonl.3")); /* was the oldest */

    /* Keep 0: the old file is gone once the new one is in place. */
    append_one(rl, "rot-5", ids[5]);
    assert_int_equal(report_log_rotate(rl, 0), 0);
    assert_false(exists(t.dir, "reports.jsonl.1"));
    assert_false(exists(t.dir, "reports.jsonl.2"));
    assert_int_equal(file_ids(t.dir, "reports.jsonl", ids, 1), 0);

    /* Beyond the bound: refused, nothing touched. */
    append_one(rl, "rot-6", ids[0]);
    errno = 0;
    assert_int_equal(report_log_rotate(rl, REPORT_LOG_KEEP_MAX + 1), -1);
    assert_int_equal(errno, EINVAL);
    assert_holds_one(t.dir, "reports.jsonl", ids[0]);
    report_log_close(rl);
    rm_rotated(t.dir);
    tmp_free(&t);
}

struct plant {
    const char *link, *target;
};

/* At the rename, something takes the name reports.jsonl: a symlink. */
static void
plant_symlink(enum report_rotate_step step, void *arg)
{
    const struct plant *p = arg;

    if (step == REPORT_ROTATE_RENAMED)
        assert_int_equal(symlink(p->target, p->link), 0);
}

/*
 * The new reports.jsonl is made, never opened: a symlink that took the
 * name between the rename and the open is refused (EEXIST), its target is
 * left alone, and the rotation is undone: reports.jsonl is the old file
 * again, under its name, and appends go on to it. A reports.jsonl that is
 * no longer the file appended to (moved by hand) is not rotated (ESTALE).
 */
static void
t_log_rotate_refuses_symlink(void **state)
{
    struct tmp t;
    struct report_log *rl;
    struct plant p;
    char target[160], moved[160], ids[2][33], got[2][33];
    struct stat st;

    (void)state;
    tmp_new(&t);
    snprintf(target, sizeof(target), "%s/target", t.dir);
    tu_write_file(target, "", 0);
    p.link = t.path;
    p.target = target;
    rl = report_log_open(t.dir);
    assert_non_null(rl);
    append_one(rl, "sym-0", ids[0]);
    report_log_set_rotate_hook(plant_symlink, &p);
    errno = 0;
    assert_int_equal(report_log_rotate(rl, 2), -1);
    assert_int_equal(errno, EEXIST);
    report_log_set_rotate_hook(NULL, NULL);
    assert_int_equal(lstat(target, &st), 0);
    assert_int_equal(st.st_size, 0);
    assert_false(exists(t.dir, "reports.jsonl.1"));
    assert_int_equal(mode_of(t.dir, "reports.jsonl"), 0640); /* no link */
    append_one(rl, "sym-1", ids[1]);
    assert_int_equal(file_ids(t.dir, "reports.jsonl", got, 2), 2);
    assert_string_equal(got[0], ids[0]);
    assert_string_equal(got[1], ids[1]);
    assert_int_equal(lstat(t.path, &st), 0);
    assert_int_equal(report_log_end(rl), st.st_size);

    /* Moved away by hand: whatever has the name now is not rotated. */
    snprintf(moved, sizeof(moved), "%s/moved", t.dir);
    assert_int_equal(rename(t.path, moved), 0);
    tu_write_file(t.path, "", 0);
    errno = 0;
    assert_int_equal(report_log_rotate(rl, 2), -1);
    assert_int_equal(errno, ESTALE);
    assert_false(exists(t.dir, "reports.jsonl.1"));
    report_log_close(rl);
    unlink(moved);
    unlink(target);
    tmp_free(&t);
}

/* ---- rotation in reapd: the store, a kill -9 ------------------------- */

/* Rotation every other report: a report here is about 40 KiB (ten labels
 * of 4000 bytes), the smallest max_bytes 64 KiB. */
#define ROT_CONFIG      ",\"reports_log\":{\"max_bytes\":65536,\"keep\":2}"
#define ROT_LABEL_BYTES 4000

/* A container's labels: managed, and ten big ones. Caller frees. */
static char *
big_labels(void)
{
    struct tu_sbuf b = {0};
    int i;

    tu_sb_printf(&b, "{\"reapd.managed\":\"true\"");
    for (i = 0; i < 10; i++)
        tu_sb_printf(&b, ",\"big%d\":\"%0*d\"", i, ROT_LABEL_BYTES, i);
    tu_sb_printf(&b, "}");
    return b.p;
}

/* Container number `n` runs and exits with `n % 200`. */
static void
exit_one(struct tu_reapd *h, unsigned n, const char *labels)
{
    char id[STORE_ID_MAX + 1], name[32];

    tu_container_id(id, n);
    snprintf(name, sizeof(name), "big-%u", n);
    fake_engine_add(h->fe, id, name, labels, NULL, 1);
    tu_run_for(h->l, 20);
    fake_engine_exit(h->fe, id, (int)(n % 200), (int)(n % 200));
}

static uint64_t
rotations(const struct tu_reapd *h)
{
    struct reaper_stats rs;

    reaper_stats(h->r, &rs);
    return rs.reports_log_rotations;
}

static size_t
unsaved(const struct tu_reapd *h)
{
    struct reaper_stats rs;

    reaper_stats(h->r, &rs);
    return rs.reports_unsaved;
}

/* reapd on the fake engine with ROT_CONFIG and a store, started. */
static struct store *
rot_start(struct tu_reapd *h)
{
    struct store *st = NULL;
    char err[256];

    memset(h, 0, sizeof(*h));
    tu_reapd_open(h, "rot", "", ROT_CONFIG);
    assert_int_equal(store_open(h->dir, &st, err, sizeof(err)), STORE_OK);
    reaper_set_store(h->r, st);
    assert_int_equal(reaper_start(h->r), 0);
    TU_RUN_UNTIL(h->l, reaper_ready(h->r, NULL), 3000);
    return st;
}

static void
rot_stop(struct tu_reapd *h, struct store *st)
{
    report_log_set_rotate_hook(NULL, NULL);
    reaper_free(h->r);
    h->r = NULL;
    assert_int_equal(store_close(st), STORE_OK);
    tu_rm_store(h->dir);
    rm_rotated(h->dir);
    tu_reapd_close(h);
}

static int64_t
journal_checkpoint(struct store *st)
{
    int64_t v = -1;

    assert_int_equal(store_get_checkpoint(st, "reports.jsonl.end", &v),
                     STORE_OK);
    return v;
}

/* The store's database can take no page more: capped at its size, and
 * every free page taken. */
static void
store_fill(struct store *st)
{
    sqlite3 *db = store_sqlite(st);
    int rc;

    /* The table first: capped with no free page left (how many there
     * are depends on what was written so far, the WAL copy's own row
     * included), it could not be made. */
    assert_int_equal(sqlite3_exec(db,
                                  "CREATE TABLE IF NOT EXISTS ballast(b BLOB)",
                                  NULL, NULL, NULL),
                     SQLITE_OK);
    assert_int_equal(store_set_size_limit(st, 1, NULL), STORE_OK);
    do
        rc = sqlite3_exec(db, "INSERT INTO ballast VALUES (zeroblob(512))",
                          NULL, NULL, NULL);
    while (rc == SQLITE_OK);
    assert_int_equal(rc, SQLITE_FULL);
}

/* Appends a report of about 40 KiB (ten big labels) with id key `key`
 * straight to the journal, as the store never saw it. */
static void
append_big(struct report_log *rl, const char *key, char id[33])
{
    static char value[ROT_LABEL_BYTES + 1];
    struct policy_label labels[10];
    struct report r = full_report();
    char keys[10][8];
    size_t len, i;
    char *s;

    memset(value, 'v', ROT_LABEL_BYTES);
    for (i = 0; i < 10; i++) {
        snprintf(keys[i], sizeof(keys[i]), "big%zu", i);
        labels[i].key = keys[i];
        labels[i].value = value;
    }
    r.labels = labels;
    r.nlabels = 10;
    report_make_id(&r, key);
    memcpy(id, r.report_id, 33);
    s = report_to_json(&r, &len);
    assert_non_null(s);
    assert_int_equal(report_log_append(rl, s, len), 0);
    free(s);
}

/*
 * A file is rotated only once the store holds every line of it: while a
 * report it holds waits in memory (the store full), the file grows past
 * max_bytes unrotated, since nothing would replay that report from a
 * rotated file; once the store takes it, the file is rotated, and the
 * checkpoint restarts at 0 with the new one. The same at a start, for
 * lines the replay could not store (a power loss took them from the
 * store, and its disk is full now).
 */
static void
t_rotation_waits_for_store(void **state)
{
    struct tu_reapd h;
    struct store *st = rot_start(&h);
    char *labels = big_labels(), ids[4][33], lost[2][33];
    struct store_report sr;
    int i;

    (void)state;
    exit_one(&h, 1, labels);
    TU_RUN_UNTIL(h.l, h.nreports == 1, 5000);
    assert_int_equal(rotations(&h), 0);
    /* The next one's DELETE is on its way when the store fills up. */
    fake_engine_delay(h.fe, FAKE_DELETE, 300, NULL);
    exit_one(&h, 2, labels);
    TU_RUN_UNTIL(h.l, fake_engine_count(h.fe, FAKE_DELETE) == 2, 5000);
    store_fill(st);
    TU_RUN_UNTIL(h.l, unsaved(&h) == 1, 5000);
    tu_run_for(h.l, 1500); /* the store's retries fail meanwhile */
    assert_int_equal(unsaved(&h), 1);
    assert_true(report_log_end(h.rl) >= 65536);
    assert_int_equal(rotations(&h), 0);
    assert_false(exists(h.dir, "reports.jsonl.1"));

    assert_int_equal(store_set_size_limit(st, 0, NULL), STORE_OK);
    TU_RUN_UNTIL(h.l, rotations(&h) == 1, 5000);
    assert_int_equal(unsaved(&h), 0);
    assert_int_equal(h.nreports, 2);
    assert_int_equal(file_ids(h.dir, "reports.jsonl.1", ids, 4), 2);
    assert_int_equal(file_ids(h.dir, "reports.jsonl", ids + 2, 2), 0);
    assert_int_equal(report_log_end(h.rl), 0);
    assert_int_equal(journal_checkpoint(st), 0);

    /* Stopped; two lines the store lost; it starts again, full. */
    reaper_free(h.r);
    docker_free(h.d);
    for (i = 0; i < 2; i++)
        append_big(h.rl, i == 0 ? "lost-0" : "lost-1", lost[i]);
    store_fill(st);
    tu_reapd_new_reaper(&h);
    reaper_set_store(h.r, st);
    assert_int_equal(reaper_start(h.r), 0);
    assert_int_equal(unsaved(&h), 2);
    TU_RUN_UNTIL(h.l, reaper_ready(h.r, NULL), 3000);
    tu_run_for(h.l, 1200);
    assert_int_equal(rotations(&h), 0);
    assert_int_equal(file_ids(h.dir, "reports.jsonl", ids, 4), 2);
    assert_false(exists(h.dir, "reports.jsonl.2"));

    assert_int_equal(store_set_size_limit(st, 0, NULL), STORE_OK);
    TU_RUN_UNTIL(h.l, rotations(&h) == 1, 5000);
    assert_int_equal(file_ids(h.dir, "reports.jsonl.1", ids, 4), 2);
    assert_string_equal(ids[0], lost[0]);
    assert_string_equal(ids[1], lost[1]);
    assert_int_equal(file_ids(h.dir, "reports.jsonl.2", ids, 4), 2);
    for (i = 0; i < 2; i++) {
        assert_int_equal(store_get_report(st, lost[i], false, &sr), STORE_OK);
        store_report_clear(&sr);
    }
    assert_int_equal(journal_checkpoint(st), 0);
    free(labels);
    rot_stop(&h, st);
}

/* At the end of a rotation, the state database takes no write: the
 * checkpoint's reset to 0 fails. */
static void
store_read_only_at_synced(enum report_rotate_step step, void *arg)
{
    if (step == REPORT_ROTATE_SYNCED)
        assert_int_equal(sqlite3_exec(store_sqlite(arg),
                                      "PRAGMA query_only = 1", NULL, NULL,
                                      NULL),
                         SQLITE_OK);
}

/*
 * Rotated, but the checkpoint's reset could not be written: the stored
 * checkpoint is past the new file's end, so a line appended now would be
 * one the next start never replays (the file shorter than the
 * checkpoint), lost with a kill if the store does not have it either.
 * No line is appended until the reset is written: the report made
 * meanwhile waits in memory as one in no journal (its container's record
 * stays), and is stored once the store takes writes again; then the
 * checkpoint is 0 and the next report is appended.
 */
static void
t_rotation_checkpoint_first(void **state)
{
    struct tu_reapd h;
    struct store *st = rot_start(&h);
    char *labels = big_labels(), ids[4][33], cid[STORE_ID_MAX + 1];
    struct store_report sr;
    int64_t end;

    (void)state;
    exit_one(&h, 1, labels);
    TU_RUN_UNTIL(h.l, h.nreports == 1, 5000);
    /* Container 2's DELETE is answered slowly: it goes out, and 2's
     * report comes after 3's, whose report makes the rotation. */
    tu_container_id(cid, 2);
    fake_engine_delay(h.fe, FAKE_DELETE, 800, cid);
    exit_one(&h, 2, labels);
    TU_RUN_UNTIL(h.l, fake_engine_count(h.fe, FAKE_DELETE) == 2, 5000);
    report_log_set_rotate_hook(store_read_only_at_synced, st);
    exit_one(&h, 3, labels);
    TU_RUN_UNTIL(h.l, rotations(&h) == 1, 5000);
    assert_int_equal(h.nreports, 2);
    TU_RUN_UNTIL(h.l, unsaved(&h) == 1, 5000);
    assert_int_equal(report_log_end(h.rl), 0);
    assert_int_equal(file_ids(h.dir, "reports.jsonl", ids, 4), 0);
    assert_int_equal(file_ids(h.dir, "reports.jsonl.1", ids, 4), 2);

    assert_int_equal(sqlite3_exec(store_sqlite(st), "PRAGMA query_only = 0",
                                  NULL, NULL, NULL),
                     SQLITE_OK);
    TU_RUN_UNTIL(h.l, unsaved(&h) == 0, 5000);
    assert_int_equal(h.nreports, 3);
    assert_int_equal(store_latest_report(st, cid, &sr), STORE_OK);
    store_report_clear(&sr);
    assert_int_equal(journal_checkpoint(st), 0);
    assert_int_equal(file_ids(h.dir, "reports.jsonl", ids, 4), 0);
    exit_one(&h, 4, labels);
    TU_RUN_UNTIL(h.l, h.nreports == 4, 5000);
    assert_int_equal(file_ids(h.dir, "reports.jsonl", ids, 4), 1);
    end = report_log_end(h.rl);
    assert_true(end > 0);
    assert_int_equal(journal_checkpoint(st), end);
    free(labels);
    rot_stop(&h, st);
}

/* What the child killed at a step of a rotation shares with the test. */
#define KILL_MAX_ACKED 64
struct kill_plan {
    unsigned target; /* the hook call to die at (1: the first) */
    bool armed;      /* two rotations done: .1 and .2 exist */
    unsigned calls;  /* hook calls since armed */
    bool fired;      /* died at `step` */
    enum report_rotate_step step;
    char dir[64];
    unsigned nacked; /* reports handed on: durable */
    char acked[KILL_MAX_ACKED][33];
};

static void
kill_at_target(enum report_rotate_step step, void *arg)
{
    struct kill_plan *kp = arg;

    if (!kp->armed || ++kp->calls != kp->target)
        return;
    kp->fired = true;
    kp->step = step;
    raise(SIGKILL);
}

static void
on_acked(const char *json, size_t len, void *arg)
{
    struct kill_plan *kp = arg;
    char cid[65];

    if (kp->nacked < KILL_MAX_ACKED &&
        report_line_ids(json, len, kp->acked[kp->nacked], cid) == 0)
        kp->nacked++;
}

/* reapd making reports, rotating every other one with keep 2; killed at
 * the plan's hook call of its third rotation (.1 and .2 there), or, past
 * the last, after one more report. Never returns but on failure. */
static int
rotate_until_killed(void *arg)
{
    struct kill_plan *kp = arg;
    struct tu_reapd h;
    struct store *st = NULL;
    char err[256], *labels = big_labels();
    unsigned n, after = 0;

    memset(&h, 0, sizeof(h));
    tu_reapd_open(&h, "rotkill", "", ROT_CONFIG);
    snprintf(kp->dir, sizeof(kp->dir), "%s", h.dir);
    reaper_on_report(h.r, on_acked, kp);
    if (store_open(h.dir, &st, err, sizeof(err)) != STORE_OK)
        return 10;
    reaper_set_store(h.r, st);
    if (reaper_start(h.r) != 0)
        return 11;
    TU_RUN_UNTIL(h.l, reaper_ready(h.r, NULL), 3000);
    report_log_set_rotate_hook(kill_at_target, kp);
    for (n = 1; n < 30; n++) {
        unsigned before = kp->nacked;

        kp->armed = rotations(&h) >= 2;
        if (rotations(&h) >= 3 && after++ == 1)
            raise(SIGKILL); /* plain running, the rotations behind */
        exit_one(&h, n, labels);
        TU_RUN_UNTIL(h.l, kp->nacked > before, 5000);
    }
    return 12;
}

/* The ids of every report line in reports.jsonl, .1 and .2 of `dir`
 * (none beyond keep 2), each checked to be in the store; how many. */
static int
ids_in_files(const char *dir, struct store *st, char (*ids)[33], int max)
{
    static const char *const names[] = {"reports.jsonl", "reports.jsonl.1",
                                        "reports.jsonl.2"};
    struct store_report sr;
    size_t i;
    int n = 0, k, j;

    assert_false(exists(dir, "reports.jsonl.3"));
    for (i = 0; i < 3; i++) {
        k = file_ids(dir, names[i], ids + n, max - n);
        for (j = 0; j < k; j++) {
            if (store_get_report(st, ids[n + j], false, &sr) != STORE_OK)
                fail_msg("%s: report %s is not in the store", names[i],
                         ids[n + j]);
            store_report_clear(&sr);
        }
        n += k > 0 ? k : 0;
    }
    return n;
}

struct count {
    size_t n;
};

static void
count_line(const char *line, size_t len, void *arg)
{
    (void)line;
    (void)len;
    ((struct count *)arg)->n++;
}

/*
 * The next start after the kill (reports.jsonl replayed into the store,
 * as reapd does): every report handed on before the kill is in the store,
 * every line of every kept file is too (no rotated file holds a report
 * the store lacks), the store holds nothing else (nothing stored twice),
 * and the stored checkpoint is the end of reports.jsonl, from where the
 * replay finds nothing.
 */
static void
check_restart(const struct kill_plan *kp)
{
    char text[512], sock[96], ids[2 * KILL_MAX_ACKED][33], err[256];
    struct config *cfg;
    struct loop *l;
    struct docker *d;
    struct report_log *rl;
    struct store *st = NULL;
    struct reaper *r;
    struct store_report sr;
    struct store_counts sc;
    struct count c = {0};
    struct stat fst;
    int64_t end = -1;
    unsigned i;
    int n, j, distinct;

    snprintf(sock, sizeof(sock), "%s/docker.sock", kp->dir);
    snprintf(text, sizeof(text),
             "{\"node\":\"t\",\"state_dir\":\"%s\",\"docker\":{\"socket\":"
             "\"%s\"}" ROT_CONFIG "}",
             kp->dir, sock);
    cfg = tu_config(text);
    l = loop_new();
    assert_non_null(l);
    rl = report_log_open(kp->dir);
    assert_non_null(rl);
    assert_int_equal(store_open(kp->dir, &st, err, sizeof(err)), STORE_OK);
    d = docker_new(l, sock, 2000, 200);
    assert_non_null(d);
    r = reaper_new(l, d, cfg, rl);
    assert_non_null(r);
    reaper_set_store(r, st);
    assert_int_equal(reaper_start(r), 0);

    for (i = 0; i < kp->nacked; i++) {
        if (store_get_report(st, kp->acked[i], false, &sr) != STORE_OK)
            fail_msg("report %s, made before the kill, is lost", kp->acked[i]);
        store_report_clear(&sr);
    }
    n = ids_in_files(kp->dir, st, ids, KILL_MAX_ACKED);
    /* Those of the files and those handed on, each once. */
    for (i = 0; i < kp->nacked; i++)
        memcpy(ids[n + (int)i], kp->acked[i], 33);
    distinct = 0;
    for (j = 0; j < n + (int)kp->nacked; j++) {
        int k;

        for (k = 0; k < j && strcmp(ids[k], ids[j]) != 0; k++)
            ;
        distinct += k == j;
    }
    assert_int_equal(store_counts(st, &sc), STORE_OK);
    assert_int_equal(sc.pending + sc.delivered + sc.dead, distinct);

    assert_int_equal(store_flush(st), STORE_OK);
    assert_int_equal(mode_of(kp->dir, "reports.jsonl"), 0640);
    assert_int_equal(lstat(report_log_path(rl), &fst), 0);
    assert_int_equal(journal_checkpoint(st), fst.st_size);
    assert_int_equal(report_log_end(rl), fst.st_size);
    assert_int_equal(report_log_replay(rl, fst.st_size, count_line, &c, &end),
                     0);
    assert_int_equal(c.n, 0);
    assert_int_equal(end, fst.st_size);

    reaper_free(r);
    docker_free(d);
    assert_int_equal(store_close(st), STORE_OK);
    report_log_close(rl);
    loop_free(l);
    config_free(cfg);
    tu_rm_store(kp->dir);
    rm_rotated(kp->dir);
    unlink(sock);
    snprintf(text, sizeof(text), "%s/reports.jsonl", kp->dir);
    unlink(text);
    assert_int_equal(rmdir(kp->dir), 0);
}

/*
 * kill -9 at each step of a rotation in turn (and once after it, in plain
 * running): a child makes reports until its third rotation and dies at
 * the n-th step of it; the next start on what it left must neither lose
 * a report nor store one twice (check_restart), and does not replay the
 * rotated file. Every step must have been reached once.
 */
static void
t_rotation_kill9(void **state)
{
    struct kill_plan *kp;
    unsigned seen = 0;
    int status;

    (void)state;
    kp = mmap(NULL, sizeof(*kp), PROT_READ | PROT_WRITE,
              MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    assert_true(kp != MAP_FAILED);
    do {
        unsigned target = kp->target + 1;

        memset(kp, 0, sizeof(*kp));
        kp->target = target;
        status = tu_fork_status(rotate_until_killed, kp);
        if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGKILL)
            fail_msg("the child at step %u ended with status %#x", target,
                     (unsigned)status);
        assert_true(kp->dir[0] != '\0');
        assert_true(kp->nacked >= 5);
        check_restart(kp);
        if (kp->fired)
            seen |= 1u << kp->step;
    } while (kp->fired && kp->target < 20);
    assert_false(kp->fired);
    assert_int_equal(kp->target, 7); /* six steps, then past them */
    assert_int_equal(seen, (1u << (REPORT_ROTATE_SYNCED + 1)) - 1);
    munmap(kp, sizeof(*kp));
}

/* report_line_removed reads only a real `removed: true`: not a string,
 * not the word inside a label, not a line that is not an object. */
static void
t_line_removed(void **state)
{
    static const struct {
        const char *line;
        int want;
    } cases[] = {
        {"{\"removed\":true}", 1},
        {"{\"removed\":false}", 0},
        {"{\"removed\":null}", 0},
        {"{\"removed\":\"true\"}", 0},
        {"{\"labels\":{\"x\":\"\\\"removed\\\":true\"}}", 0},
        {"{\"labels\":{\"removed\":true}}", 0},
        {"{}", 0},
        {"[true]", -1},
        {"not json", -1},
        {"{\"removed\":tru", -1},
    };
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int got = report_line_removed(cases[i].line, strlen(cases[i].line));

        if (got != cases[i].want)
            fail_msg("%s: %d, want %d", cases[i].line, got, cases[i].want);
    }
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(t_full_report),
        cmocka_unit_test(t_line_removed),
        cmocka_unit_test(t_unknowns_are_null),
        cmocka_unit_test(t_number_edges),
        cmocka_unit_test(t_escaping),
        cmocka_unit_test(t_many_labels),
        cmocka_unit_test(t_report_id),
        cmocka_unit_test(t_report_id_stable),
        cmocka_unit_test(t_many_ids_distinct),
        cmocka_unit_test(t_now_rfc3339),
        cmocka_unit_test(t_log_append),
        cmocka_unit_test(t_log_two_writers),
        cmocka_unit_test(t_log_open_fails),
        cmocka_unit_test(t_log_open_hardened),
        cmocka_unit_test(t_log_disk_full),
        cmocka_unit_test(t_log_torn_line_cut),
        cmocka_unit_test(t_log_append_many),
        cmocka_unit_test(t_log_replay),
        cmocka_unit_test(t_log_replay_torn_and_bad),
        cmocka_unit_test(t_journal_at_bounds),
        cmocka_unit_test(t_journal_over_bounds),
        cmocka_unit_test(t_journal_many_labels),
        cmocka_unit_test(t_log_rotate),
        cmocka_unit_test(t_log_rotate_refuses_symlink),
        cmocka_unit_test(t_rotation_waits_for_store),
        cmocka_unit_test(t_rotation_checkpoint_first),
        cmocka_unit_test(t_rotation_kill9),
    };

    signal(SIGPIPE, SIG_IGN);
    /* Going over RLIMIT_FSIZE must fail a write, not kill the test. */
    signal(SIGXFSZ, SIG_IGN);
    tu_test_filters();
    log_setup(getenv("TEST_DEBUG") ? LOG_LEVEL_DEBUG : LOG_LEVEL_ERROR,
              LOG_FORMAT_TEXT);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
