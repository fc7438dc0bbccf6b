/*
 * Unit tests for log records: the text and JSON layouts, level filtering,
 * escaping, and that a runaway message still makes exactly one line. Each
 * test logs into its own temporary file and reads it back.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <regex.h>
#include <sys/stat.h>

#include <cmocka.h>

#include "json.h"
#include "log.h"
#include "testutil.h"

#define CID "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
#define TS_RE                                                                 \
    "[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{3}Z"

struct fixture {
    int fd;
    char path[64];
    char *text; /* what was logged, once read */
    size_t len;
};

static int
setup(void **state)
{
    struct fixture *f = calloc(1, sizeof(*f));

    if (!f)
        return -1;
    snprintf(f->path, sizeof(f->path), "/tmp/reapd-test-log-XXXXXX");
    f->fd = mkstemp(f->path);
    if (f->fd < 0) {
        free(f);
        return -1;
    }
    log_setup(LOG_LEVEL_DEBUG, LOG_FORMAT_TEXT);
    log_set_fd(f->fd);
    *state = f;
    return 0;
}

static int
teardown(void **state)
{
    struct fixture *f = *state;

    log_set_fd(-1);
    log_set_journal(false);
    log_setup(LOG_LEVEL_INFO, LOG_FORMAT_TEXT);
    close(f->fd);
    unlink(f->path);
    free(f->text);
    free(f);
    return 0;
}

/* Everything logged so far, NUL-terminated, owned by the fixture. */
static const char *
logged(struct fixture *f)
{
    struct stat st;
    ssize_t n;

    free(f->text);
    assert_int_equal(fstat(f->fd, &st), 0);
    f->len = (size_t)st.st_size;
    f->text = malloc(f->len + 1);
    assert_non_null(f->text);
    n = pread(f->fd, f->text, f->len, 0);
    assert_int_equal(n, (ssize_t)f->len);
    f->text[f->len] = '\0';
    return f->text;
}

static size_t
count_lines(const char *s)
{
    size_t n = 0;

    for (; *s; s++)
        if (*s == '\n')
            n++;
    return n;
}

static void
assert_matches(const char *s, const char *re)
{
    regex_t rx;
    int rc;

    assert_int_equal(regcomp(&rx, re, REG_EXTENDED | REG_NOSUB), 0);
    rc = regexec(&rx, s, 0, NULL, 0);
    regfree(&rx);
    if (rc != 0)
        fail_msg("\"%s\" does not match /%s/", s, re);
}

/* Parses one JSON line (without its '\n'); caller frees with json_free. */
static struct json_node *
parse_line(const char *s, size_t len)
{
    char err[256] = "";
    size_t off = 0;
    struct json_node *root;

    root = json_parse(s, len, NULL, 0, err, sizeof(err), &off);
    if (!root)
        fail_msg("invalid JSON at %zu: %s: %.*s", off, err, (int)len, s);
    assert_int_equal(root->type, JSON_OBJECT);
    return root;
}

static const char *
member(const struct json_node *obj, const char *key)
{
    const char *s = json_string(json_get(obj, key));

    if (!s)
        fail_msg("no string member \"%s\"", key);
    return s;
}

static void
test_text_record(void **state)
{
    struct fixture *f = *state;

    log_info(CID, "hello %d", 42);
    assert_matches(logged(f),
                   "^" TS_RE " INFO  \\[0123456789ab\\] hello 42\n$");
}

static void
test_text_without_container(void **state)
{
    struct fixture *f = *state;

    log_warn(NULL, "plain");
    log_error(NULL, "bad");
    log_debug("abc", "short id");
    assert_matches(logged(f),
                   "^" TS_RE " WARN  plain\n" TS_RE " ERROR bad\n" TS_RE
                   " DEBUG \\[abc\\] short id\n$");
}

static void
test_text_stays_one_line(void **state)
{
    struct fixture *f = *state;

    log_info(NULL, "a\nb\rc\td\001e");
    assert_matches(logged(f),
                   "^" TS_RE " INFO  a\\\\nb\\\\rc\\\\td\\\\x01e\n$");
}

static void
test_text_transition(void **state)
{
    struct fixture *f = *state;

    log_transition(CID, "exited", "removing", "policy managed");
    assert_matches(logged(f), "^" TS_RE " DEBUG \\[0123456789ab\\] transition "
                              "exited -> removing: policy managed\n$");
    /* Eight steps an exit: the diary of the lifecycle, not news. */
    log_setup(LOG_LEVEL_INFO, LOG_FORMAT_TEXT);
    log_transition(CID, "exited", "removing", "policy managed");
    assert_int_equal(count_lines(logged(f)), 1);
}

static void
test_timestamp_is_now_utc(void **state)
{
    struct fixture *f = *state;
    struct tm tm;
    int ms = -1;
    time_t t, now;

    log_info(NULL, "x");
    memset(&tm, 0, sizeof(tm));
    assert_int_equal(sscanf(logged(f), "%4d-%2d-%2dT%2d:%2d:%2d.%3dZ",
                            &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour,
                            &tm.tm_min, &tm.tm_sec, &ms),
                     7);
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    t = timegm(&tm);
    now = time(NULL);
    assert_true(t <= now && now - t <= 5);
    assert_in_range(ms, 0, 999);
}

static void
test_level_filter(void **state)
{
    struct fixture *f = *state;

    log_setup(LOG_LEVEL_WARN, LOG_FORMAT_TEXT);
    assert_int_equal(log_get_level(), LOG_LEVEL_WARN);
    log_debug(NULL, "no");
    log_info(CID, "no");
    log_transition(CID, "a", "b", "no");
    assert_int_equal(strlen(logged(f)), 0);
    log_warn(NULL, "yes");
    log_error(NULL, "yes");
    assert_int_equal(count_lines(logged(f)), 2);

    log_setup(LOG_LEVEL_ERROR, LOG_FORMAT_JSON);
    log_warn(NULL, "no");
    log_error(NULL, "yes");
    assert_int_equal(count_lines(logged(f)), 3);
}

static void
test_json_record(void **state)
{
    struct fixture *f = *state;
    struct json_node *root;
    const char *s;

    log_setup(LOG_LEVEL_DEBUG, LOG_FORMAT_JSON);
    log_warn(CID, "say \"%s\" \\ %s", "hi", "a\nb\t\001/é");
    s = logged(f);
    assert_int_equal(count_lines(s), 1);
    root = parse_line(s, f->len - 1);
    assert_int_equal(root->count, 4);
    assert_matches(member(root, "ts"), "^" TS_RE "$");
    assert_string_equal(member(root, "level"), "warn");
    assert_string_equal(member(root, "container"), CID);
    assert_string_equal(member(root, "msg"), "say \"hi\" \\ a\nb\t\001/é");
    json_free(root);
}

static void
test_json_levels_and_no_container(void **state)
{
    struct fixture *f = *state;
    static const char *const names[] = {"debug", "info", "warn", "error"};
    struct json_node *root;
    const char *line;
    int i;

    log_setup(LOG_LEVEL_DEBUG, LOG_FORMAT_JSON);
    for (i = LOG_LEVEL_DEBUG; i <= LOG_LEVEL_ERROR; i++)
        log_msg((enum log_level)i, NULL, "m%d", i);
    line = logged(f);
    for (i = 0; i < 4; i++) {
        const char *nl = strchr(line, '\n');
        char want[8];

        assert_non_null(nl);
        root = parse_line(line, (size_t)(nl - line));
        assert_string_equal(member(root, "level"), names[i]);
        assert_null(json_get(root, "container"));
        snprintf(want, sizeof(want), "m%d", i);
        assert_string_equal(member(root, "msg"), want);
        json_free(root);
        line = nl + 1;
    }
    assert_string_equal(line, "");
}

static void
test_json_transition(void **state)
{
    struct fixture *f = *state;
    struct json_node *root;

    log_setup(LOG_LEVEL_DEBUG, LOG_FORMAT_JSON);
    log_transition(CID, "exited", "removing", "policy \"managed\"");
    logged(f);
    root = parse_line(f->text, f->len - 1);
    assert_int_equal(root->count, 7);
    assert_string_equal(member(root, "level"), "debug");
    assert_string_equal(member(root, "container"), CID);
    assert_string_equal(member(root, "msg"), "transition");
    assert_string_equal(member(root, "from"), "exited");
    assert_string_equal(member(root, "to"), "removing");
    assert_string_equal(member(root, "reason"), "policy \"managed\"");
    json_free(root);
}

static void
test_json_invalid_utf8_still_valid(void **state)
{
    struct fixture *f = *state;
    struct json_node *root;

    log_setup(LOG_LEVEL_INFO, LOG_FORMAT_JSON);
    log_info("\xff\xfe", "bad \xc3 \xed\xa0\x80 ok \xc3\xa9");
    logged(f);
    root = parse_line(f->text, f->len - 1);
    assert_string_equal(member(root, "msg"), "bad ? ??? ok \xc3\xa9");
    assert_string_equal(member(root, "container"), "??");
    json_free(root);
}

/* A message far over the cap: cut, marked, one line, still valid. */
static char *
huge(size_t n, char fill)
{
    char *s = malloc(n + 1);

    assert_non_null(s);
    memset(s, fill, n);
    s[n] = '\0';
    return s;
}

static void
test_long_message_text(void **state)
{
    struct fixture *f = *state;
    char *big = huge(100000, 'x');
    const char *s;

    big[50] = '\n';
    log_info(CID, "%s", big);
    s = logged(f);
    assert_int_equal(count_lines(s), 1);
    assert_int_equal(s[f->len - 1], '\n');
    assert_true(f->len < 8192 + 128);
    assert_true(f->len > 8000);
    assert_memory_equal(s + f->len - 4, "...\n", 4);
    free(big);
}

static void
test_long_message_json(void **state)
{
    struct fixture *f = *state;
    struct json_node *root;
    char *big = huge(100000, '\001');
    const char *msg;

    /* Worst case for escaping: every byte becomes six. */
    log_setup(LOG_LEVEL_INFO, LOG_FORMAT_JSON);
    log_info(CID, "%s", big);
    logged(f);
    assert_int_equal(count_lines(f->text), 1);
    root = parse_line(f->text, f->len - 1);
    msg = member(root, "msg");
    assert_int_equal(strlen(msg), 8192 + 3);
    assert_string_equal(msg + 8192, "...");
    json_free(root);
    free(big);
}

static void
test_long_message_cut_inside_utf8(void **state)
{
    struct fixture *f = *state;
    struct json_node *root;
    char *big = huge(9000, 'a');
    size_t i;

    /* "é" straddles the cut at 8192 bytes. */
    for (i = 8191; i + 1 < 9000; i += 2)
        memcpy(big + i, "\xc3\xa9", 2);
    log_setup(LOG_LEVEL_INFO, LOG_FORMAT_JSON);
    log_info(NULL, "%s", big);
    logged(f);
    root = parse_line(f->text, f->len - 1);
    assert_string_equal(member(root, "msg") + 8191, "...");
    json_free(root);
    free(big);
}

static void
test_long_transition_fields(void **state)
{
    struct fixture *f = *state;
    struct json_node *root;
    char *big = huge(20000, '"');

    log_setup(LOG_LEVEL_DEBUG, LOG_FORMAT_JSON);
    log_transition(big, big, big, big);
    logged(f);
    assert_int_equal(count_lines(f->text), 1);
    root = parse_line(f->text, f->len - 1);
    assert_true(strlen(member(root, "reason")) < 2000);
    assert_true(strlen(member(root, "container")) < 200);
    json_free(root);
    free(big);
}

static void
test_parse_names(void **state)
{
    enum log_level l = LOG_LEVEL_INFO;
    enum log_format fm = LOG_FORMAT_TEXT;

    (void)state;
    assert_int_equal(log_level_parse("debug", &l), 0);
    assert_int_equal(l, LOG_LEVEL_DEBUG);
    assert_int_equal(log_level_parse("info", &l), 0);
    assert_int_equal(l, LOG_LEVEL_INFO);
    assert_int_equal(log_level_parse("warn", &l), 0);
    assert_int_equal(l, LOG_LEVEL_WARN);
    assert_int_equal(log_level_parse("error", &l), 0);
    assert_int_equal(l, LOG_LEVEL_ERROR);
    assert_int_equal(log_level_parse("warning", &l), -1);
    assert_int_equal(log_level_parse("INFO", &l), -1);
    assert_int_equal(log_level_parse(NULL, &l), -1);
    assert_int_equal(l, LOG_LEVEL_ERROR);

    assert_int_equal(log_format_parse("json", &fm), 0);
    assert_int_equal(fm, LOG_FORMAT_JSON);
    assert_int_equal(log_format_parse("text", &fm), 0);
    assert_int_equal(fm, LOG_FORMAT_TEXT);
    assert_int_equal(log_format_parse("yaml", &fm), -1);
    assert_int_equal(log_format_parse(NULL, &fm), -1);
}

static void
test_default_fd_is_stderr(void **state)
{
    struct fixture *f = *state;
    int saved = dup(2);

    assert_true(saved >= 0);
    assert_int_equal(dup2(f->fd, 2), 2);
    log_set_fd(-1);
    log_error(NULL, "to stderr");
    assert_int_equal(dup2(saved, 2), 2);
    close(saved);
    assert_matches(logged(f), "^" TS_RE " ERROR to stderr\n$");
}

/* Under journald: a priority prefix journald takes and strips, and no
 * timestamp of our own in text (journald stamps each entry). */
static void
test_journal_priorities(void **state)
{
    struct fixture *f = *state;
    const char *s;

    log_set_journal(true);
    log_debug(NULL, "d");
    log_info("0123456789abcdef", "i");
    log_warn(NULL, "w");
    log_error(NULL, "e");
    log_transition("0123456789abcdef", "removing", "confirming", "why");
    assert_string_equal(logged(f),
                        "<7>DEBUG d\n"
                        "<6>INFO  [0123456789ab] i\n"
                        "<4>WARN  w\n"
                        "<3>ERROR e\n"
                        "<7>DEBUG [0123456789ab] transition removing "
                        "-> confirming: why\n");
    /* JSON keeps its "ts": readers of the JSON rely on the key. */
    log_setup(LOG_LEVEL_DEBUG, LOG_FORMAT_JSON);
    log_warn(NULL, "j");
    s = strrchr(logged(f), '<');
    assert_non_null(s);
    assert_matches(s, "^<4>\\{\"ts\":\"" TS_RE "\",\"level\":\"warn\","
                      "\"msg\":\"j\"\\}\n$");
}

/* JOURNAL_STREAM names the stream by device and inode: on only when it
 * is stderr's own (a child whose stderr went elsewhere inherits the
 * variable). */
static void
test_journal_detected(void **state)
{
    struct fixture *f = *state;
    struct stat st;
    char v[64];
    int saved = dup(2);

    assert_true(saved >= 0);
    assert_int_equal(dup2(f->fd, 2), 2);
    assert_int_equal(fstat(2, &st), 0);
    snprintf(v, sizeof(v), "%llu:%llu", (unsigned long long)st.st_dev,
             (unsigned long long)st.st_ino);
    setenv("JOURNAL_STREAM", v, 1);
    assert_true(log_detect_journal());
    snprintf(v, sizeof(v), "%llu:%llu", (unsigned long long)st.st_dev,
             (unsigned long long)st.st_ino + 1);
    setenv("JOURNAL_STREAM", v, 1);
    assert_false(log_detect_journal());
    setenv("JOURNAL_STREAM", "garbage", 1);
    assert_false(log_detect_journal());
    snprintf(v, sizeof(v), "%llu:%llux", (unsigned long long)st.st_dev,
             (unsigned long long)st.st_ino);
    setenv("JOURNAL_STREAM", v, 1);
    assert_false(log_detect_journal());
    unsetenv("JOURNAL_STREAM");
    assert_false(log_detect_journal());
    assert_int_equal(dup2(saved, 2), 2);
    close(saved);
}

/* The stable keys of JSON records: report_id, state, http_status and
 * url, each where given, bounded like the rest; text records keep their
 * message as it is. */
static void
test_json_fields(void **state)
{
    struct fixture *f = *state;
    struct log_fields fl = {.report_id = "0123456789abcdef0123456789abcdef",
                            .state = "confirming",
                            .http_status = 503,
                            .url = "http://collector:8080/reports"};
    struct json_node *root;
    const char *text, *nl;
    char big[4096];

    log_setup(LOG_LEVEL_DEBUG, LOG_FORMAT_JSON);
    log_fields(LOG_LEVEL_WARN, CID, &fl, "report %s: HTTP %d", fl.report_id,
               fl.http_status);
    text = logged(f);
    nl = strchr(text, '\n');
    root = parse_line(text, (size_t)(nl - text));
    assert_string_equal(member(root, "container"), CID);
    assert_string_equal(member(root, "report_id"), fl.report_id);
    assert_string_equal(member(root, "state"), "confirming");
    assert_string_equal(member(root, "url"), fl.url);
    assert_int_equal(json_get(root, "http_status")->type, JSON_NUMBER);
    assert_int_equal(strtol(json_get(root, "http_status")->str, NULL, 10),
                     503);
    json_free(root);

    /* Absent ones are absent, not null; an oversized one is cut. */
    memset(big, 'u', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    log_fields(LOG_LEVEL_INFO, NULL,
               &(struct log_fields){.report_id = "r1", .url = big}, "x");
    log_fields(LOG_LEVEL_INFO, NULL, NULL, "y");
    text = logged(f);
    text = strchr(text, '\n') + 1;
    nl = strchr(text, '\n');
    root = parse_line(text, (size_t)(nl - text));
    assert_string_equal(member(root, "report_id"), "r1");
    assert_null(json_get(root, "state"));
    assert_null(json_get(root, "http_status"));
    assert_true(strlen(member(root, "url")) < 1100);
    json_free(root);
    text = nl + 1;
    nl = strchr(text, '\n');
    root = parse_line(text, (size_t)(nl - text));
    assert_null(json_get(root, "report_id"));
    assert_string_equal(member(root, "msg"), "y");
    json_free(root);

    log_setup(LOG_LEVEL_DEBUG, LOG_FORMAT_TEXT);
    log_fields(LOG_LEVEL_INFO, NULL, &fl, "plain %d", 1);
    text = logged(f);
    assert_non_null(strstr(text, "INFO  plain 1\n"));
    assert_null(strstr(strstr(text, "INFO  plain 1"), "report_id"));
}

int
main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_text_record),
        T(test_json_fields),
        T(test_text_without_container),
        T(test_text_stays_one_line),
        T(test_text_transition),
        T(test_timestamp_is_now_utc),
        T(test_level_filter),
        T(test_json_record),
        T(test_json_levels_and_no_container),
        T(test_json_transition),
        T(test_json_invalid_utf8_still_valid),
        T(test_long_message_text),
        T(test_long_message_json),
        T(test_long_message_cut_inside_utf8),
        T(test_long_transition_fields),
        cmocka_unit_test(test_parse_names),
        T(test_default_fd_is_stderr),
        T(test_journal_priorities),
        T(test_journal_detected),
    };
#undef T

    tu_test_filters(); /* REAPD_TEST_ONLY, TEST_FILTER */
    return cmocka_run_group_tests(tests, NULL, NULL);
}
