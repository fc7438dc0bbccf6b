/*
 * test_report — the report JSON (the contract downstream consumers read)
 * and the reports.jsonl appender in agent/report.c.
 *
 * Every report is parsed back with agent/json.c and checked key by key,
 * value by value and type by type, because a consumer breaks as easily on
 * a number where it expects null as on a missing key. The appender is
 * checked for what a crash-safe log promises: whole lines only, even when
 * the disk fills up mid-line.
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
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "json.h"
#include "log.h"
#include "report.h"
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
        cmocka_unit_test(t_log_replay),
        cmocka_unit_test(t_log_replay_torn_and_bad),
        cmocka_unit_test(t_journal_at_bounds),
        cmocka_unit_test(t_journal_over_bounds),
        cmocka_unit_test(t_journal_many_labels),
    };

    signal(SIGPIPE, SIG_IGN);
    /* Going over RLIMIT_FSIZE must fail a write, not kill the test. */
    signal(SIGXFSZ, SIG_IGN);
    tu_test_filters();
    log_setup(getenv("TEST_DEBUG") ? LOG_LEVEL_DEBUG : LOG_LEVEL_ERROR,
              LOG_FORMAT_TEXT);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
