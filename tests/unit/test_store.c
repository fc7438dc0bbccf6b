/*
 * test_store — reapd's durable state (agent/store.c) on real files.
 *
 * Every test opens a real reapd.db in its own temporary directory and,
 * where it matters, looks at the file behind the store's back with a
 * second SQLite connection: the schema version, what is really on disk
 * after a reopen. The failure tests make SQLite fail the way a full disk
 * does (a size cap, and RLIMIT_FSIZE in a child, where writes really
 * fail) and check that nothing committed is lost and writes work again
 * afterwards. The durability test SIGKILLs a writer at random instants and
 * checks that every write it had seen committed is there.
 *
 * TEST_SEED=n replays the kill test's random instants.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "store.h"
#include "testutil.h"

struct fx {
    char dir[64];
    struct store *st;
};

static void
tmpdir_new(char *dir, size_t len)
{
    snprintf(dir, len, "/tmp/reapd-store-XXXXXX");
    assert_non_null(mkdtemp(dir));
}

static void
tmpdir_free(const char *dir)
{
    char path[128];

    tu_rm_store(dir);
    snprintf(path, sizeof(path), "%s/reapd.db", dir);
    rmdir(path); /* the test that made it a directory */
    assert_int_equal(rmdir(dir), 0);
}

/* The stores open now, by directory (raw_open). */
#define NOPENED 4
static struct {
    char dir[128];
    struct store *st;
} opened[NOPENED];

static int
open_store(const char *dir, struct store **out, char *err, size_t errlen)
{
    int r = store_open(dir, out, err, errlen);
    size_t i;

    for (i = 0; r == STORE_OK && i < NOPENED; i++)
        if (opened[i].st == NULL) {
            snprintf(opened[i].dir, sizeof(opened[i].dir), "%s", dir);
            opened[i].st = *out;
            return r;
        }
    assert_true(r != STORE_OK);
    return r;
}

static int
close_store(struct store *st)
{
    size_t i;

    for (i = 0; st != NULL && i < NOPENED; i++)
        if (opened[i].st == st)
            opened[i].st = NULL;
    return store_close(st);
}

static struct store *
must_open(const char *dir)
{
    struct store *st = NULL;
    char err[512];
    int r = open_store(dir, &st, err, sizeof(err));

    if (r != STORE_OK)
        fail_msg("open_store(%s): %d %s", dir, r, err);
    return st;
}

static int
setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));

    assert_non_null(f);
    tmpdir_new(f->dir, sizeof(f->dir));
    f->st = must_open(f->dir);
    *state = f;
    return 0;
}

static int
teardown(void **state)
{
    struct fx *f = *state;

    assert_int_equal(close_store(f->st), STORE_OK);
    tmpdir_free(f->dir);
    free(f);
    return 0;
}

static void
reopen(struct fx *f)
{
    assert_int_equal(close_store(f->st), STORE_OK);
    f->st = must_open(f->dir);
}

/* ---- behind the store's back ----------------------------------------- */

/* A second connection, even while a store is open. */
static sqlite3 *
raw_second(const char *dir)
{
    char path[128];
    sqlite3 *db = NULL;

    snprintf(path, sizeof(path), "%s/reapd.db", dir);
    assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL),
                     SQLITE_OK);
    return db;
}

/* While a store is open its file is locked exclusively: a look behind its
 * back goes through its own connection (store_sqlite); otherwise through
 * a second one. */
static sqlite3 *
raw_open(const char *dir)
{
    size_t i;

    for (i = 0; i < NOPENED; i++)
        if (opened[i].st != NULL && strcmp(opened[i].dir, dir) == 0)
            return store_sqlite(opened[i].st);
    return raw_second(dir);
}

static void
raw_close(sqlite3 *db)
{
    size_t i;

    for (i = 0; i < NOPENED; i++)
        if (opened[i].st != NULL && store_sqlite(opened[i].st) == db)
            return;
    sqlite3_close(db);
}

static int64_t
raw_int(const char *dir, const char *sql)
{
    sqlite3 *db = raw_open(dir);
    sqlite3_stmt *s = NULL;
    int64_t v;

    assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &s, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(s), SQLITE_ROW);
    v = sqlite3_column_int64(s, 0);
    sqlite3_finalize(s);
    raw_close(db);
    return v;
}

static void
raw_text(const char *dir, const char *sql, char *buf, size_t len)
{
    sqlite3 *db = raw_open(dir);
    sqlite3_stmt *s = NULL;

    assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &s, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(s), SQLITE_ROW);
    snprintf(buf, len, "%s", (const char *)sqlite3_column_text(s, 0));
    sqlite3_finalize(s);
    raw_close(db);
}

static void
raw_exec(const char *dir, const char *sql)
{
    sqlite3 *db = raw_open(dir);
    char *msg = NULL;

    if (sqlite3_exec(db, sql, NULL, NULL, &msg) != SQLITE_OK)
        fail_msg("%s: %s", sql, msg);
    raw_close(db);
}

/* ---- helpers ---------------------------------------------------------- */

static int
add(struct store *st, unsigned r, unsigned c, int64_t now)
{
    char id[STORE_REPORT_ID_MAX + 1], ctr[STORE_ID_MAX + 1], body[128];
    int n;

    tu_report_id(id, r);
    tu_container_id(ctr, c);
    n = snprintf(body, sizeof(body), "{\"report_id\":\"%s\",\"n\":%u}", id, r);
    return store_add_report(st, id, ctr, body, (size_t)n, now);
}

static int
mark_delivered(struct store *st, unsigned r, int64_t now)
{
    char id[STORE_REPORT_ID_MAX + 1];

    tu_report_id(id, r);
    return store_mark_delivered(st, id, now);
}

static int
mark_dead(struct store *st, unsigned r, const char *error)
{
    char id[STORE_REPORT_ID_MAX + 1];

    tu_report_id(id, r);
    return store_mark_dead(st, id, error);
}

static int
mark_retry(struct store *st, unsigned r, int64_t next, const char *error)
{
    char id[STORE_REPORT_ID_MAX + 1];

    tu_report_id(id, r);
    return store_mark_retry(st, id, next, error);
}

static int
get(struct store *st, unsigned r, struct store_report *out)
{
    char id[STORE_REPORT_ID_MAX + 1];

    tu_report_id(id, r);
    return store_get_report(st, id, true, out);
}

/* The due list as report numbers, "1,2,4", for one readable assert. */
static void
due_str(struct store *st, int64_t now, size_t max, char *buf, size_t len)
{
    struct store_reports l;
    size_t i, o = 0;

    assert_int_equal(store_due(st, now, max, &l), STORE_OK);
    buf[0] = '\0';
    for (i = 0; i < l.n; i++) {
        unsigned n = (unsigned)strtoul(l.v[i].report_id, NULL, 16);

        assert_non_null(l.v[i].body);
        assert_int_equal(l.v[i].state, STORE_PENDING);
        o += (size_t)snprintf(buf + o, len - o, "%s%u", i ? "," : "", n);
    }
    store_reports_free(&l);
}

/* What the writer tells the parent, after each write has returned: a
 * kind and a report number. */
enum { ACK_OPEN = 'O', ACK_REPORT = 'R', ACK_FLUSH = 'F' };

static void
ack(int fd, uint32_t what, uint32_t n)
{
    uint32_t a[2] = {what, n};

    if (write(fd, a, sizeof(a)) != sizeof(a))
        _exit(4);
}

/* Reads one ack, which must be `what`. */
static void
wait_ack(int fd, uint32_t what)
{
    uint32_t a[2];

    assert_int_equal(read(fd, a, sizeof(a)), sizeof(a));
    assert_int_equal(a[0], what);
}

static int64_t
now_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* ---- opening and the schema ------------------------------------------- */

static void
t_open_empty_file(void **state)
{
    char dir[64], path[128], mode[16];
    struct store_report r;
    struct store *st;
    struct stat sb;
    int fd;

    (void)state;
    tmpdir_new(dir, sizeof(dir));
    /* An empty file is an empty database: migrated from version 0. */
    snprintf(path, sizeof(path), "%s/reapd.db", dir);
    fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0);
    close(fd);
    st = must_open(dir);
    assert_string_equal(store_path(st), path);
    assert_int_equal(add(st, 1, 1, 1000), STORE_OK);
    assert_int_equal(close_store(st), STORE_OK);

    assert_int_equal(raw_int(dir, "PRAGMA user_version"),
                     STORE_SCHEMA_VERSION);
    raw_text(dir, "PRAGMA journal_mode", mode, sizeof(mode));
    assert_string_equal(mode, "wal");
    assert_int_equal(raw_int(dir, "SELECT count(*) FROM sqlite_schema"
                                  " WHERE type = 'table' AND name IN"
                                  " ('reports', 'containers',"
                                  " 'checkpoints', 'meta')"),
                     4);

    /* Reopened: no migration runs again, the data and the sequence go on. */
    st = must_open(dir);
    assert_int_equal(get(st, 1, &r), STORE_OK);
    assert_int_equal(r.seq, 1);
    store_report_clear(&r);
    assert_int_equal(add(st, 2, 1, 1000), STORE_OK);
    assert_int_equal(get(st, 2, &r), STORE_OK);
    assert_int_equal(r.seq, 2);
    store_report_clear(&r);
    assert_int_equal(close_store(st), STORE_OK);
    assert_int_equal(raw_int(dir, "PRAGMA user_version"),
                     STORE_SCHEMA_VERSION);
    tmpdir_free(dir);

    /* A file the store creates is not world-readable. */
    tmpdir_new(dir, sizeof(dir));
    st = must_open(dir);
    assert_int_equal(stat(store_path(st), &sb), 0);
    assert_int_equal(sb.st_mode & 07777, 0640);
    assert_int_equal(close_store(st), STORE_OK);
    tmpdir_free(dir);
}

static void
t_open_bad_paths(void **state)
{
    char dir[64], sub[128], err[512];
    struct store *st = (struct store *)&st;
    int r;

    (void)state;
    tmpdir_new(dir, sizeof(dir));
    snprintf(sub, sizeof(sub), "%s/missing", dir);
    r = open_store(sub, &st, err, sizeof(err));
    assert_int_equal(r, STORE_ERROR);
    assert_null(st);
    assert_non_null(strstr(err, sub));
    assert_non_null(strstr(err, strerror(ENOENT)));

    /* reapd.db is a directory. */
    snprintf(sub, sizeof(sub), "%s/reapd.db", dir);
    assert_int_equal(mkdir(sub, 0700), 0);
    r = open_store(dir, &st, err, sizeof(err));
    assert_int_equal(r, STORE_ERROR);
    assert_non_null(strstr(err, "reapd.db"));
    assert_non_null(strstr(err, strerror(EISDIR)));
    assert_int_equal(rmdir(sub), 0);

    /* reapd.db is a symlink: not followed. */
    assert_int_equal(symlink("/etc/passwd", sub), 0);
    r = open_store(dir, &st, err, sizeof(err));
    assert_true(r < 0);
    assert_non_null(strstr(err, "reapd.db"));
    unlink(sub);

    r = open_store("", &st, err, sizeof(err));
    assert_int_equal(r, STORE_INVALID);
    assert_true(strlen(err) > 0);
    r = open_store(dir, &st, NULL, 0); /* no buffer is fine */
    assert_int_equal(r, STORE_OK);
    assert_int_equal(close_store(st), STORE_OK);
    assert_int_equal(close_store(NULL), STORE_OK);
    tmpdir_free(dir);
}

static void
t_newer_version_refused(void **state)
{
    char dir[64], err[512];
    struct store *st;

    (void)state;
    tmpdir_new(dir, sizeof(dir));
    st = must_open(dir);
    assert_int_equal(add(st, 1, 1, 1), STORE_OK);
    assert_int_equal(close_store(st), STORE_OK);
    raw_exec(dir, "PRAGMA user_version = 99");

    assert_int_equal(open_store(dir, &st, err, sizeof(err)), STORE_TOO_NEW);
    assert_null(st);
    assert_non_null(strstr(err, "reapd.db"));
    assert_non_null(strstr(err, "schema version 99 is not one"));
    assert_non_null(strstr(err, "newer reapd"));
    /* Left untouched, for the newer reapd. */
    assert_int_equal(raw_int(dir, "PRAGMA user_version"), 99);
    assert_int_equal(raw_int(dir, "SELECT count(*) FROM reports"), 1);

    snprintf(err, sizeof(err), "PRAGMA user_version = %d",
             STORE_SCHEMA_VERSION);
    raw_exec(dir, err);
    st = must_open(dir);
    assert_int_equal(close_store(st), STORE_OK);
    tmpdir_free(dir);
}

static void
write_file(const char *dir, const void *buf, size_t len, off_t at, bool trunc)
{
    char path[128];
    int fd;

    snprintf(path, sizeof(path), "%s/reapd.db", dir);
    fd = open(path, O_WRONLY | O_CREAT | (trunc ? O_TRUNC : 0), 0600);
    assert_true(fd >= 0);
    assert_int_equal(pwrite(fd, buf, len, at), (ssize_t)len);
    close(fd);
}

static void
t_corrupt_file(void **state)
{
    char dir[64], err[512], garbage[8192], wal[128];
    struct store *st = NULL;
    struct store_report r;
    int64_t page_size;
    int fd, status, p[2];
    pid_t pid;
    size_t i;
    unsigned n;

    (void)state;
    for (i = 0; i < sizeof(garbage); i++)
        garbage[i] = (char)(i * 131 + 7);

    /* Not a database at all. */
    tmpdir_new(dir, sizeof(dir));
    write_file(dir, garbage, sizeof(garbage), 0, true);
    assert_int_equal(open_store(dir, &st, err, sizeof(err)), STORE_CORRUPT);
    assert_null(st);
    assert_non_null(strstr(err, "reapd.db"));
    assert_non_null(strstr(err, "not a database"));
    assert_non_null(strstr(err, "move it aside"));
    tu_rm_store(dir);

    /* A database whose pages were overwritten: the header is fine, the
     * b-trees are not. quick_check at open finds it. */
    st = must_open(dir);
    for (n = 0; n < 300; n++)
        assert_int_equal(add(st, n, n % 7, n), STORE_OK);
    assert_int_equal(close_store(st), STORE_OK); /* checkpoints the WAL */
    page_size = raw_int(dir, "PRAGMA page_size");
    write_file(dir, garbage, sizeof(garbage), (off_t)page_size * 3, false);
    st = NULL;
    assert_int_equal(open_store(dir, &st, err, sizeof(err)), STORE_CORRUPT);
    assert_null(st);
    assert_non_null(strstr(err, "reapd.db"));
    assert_non_null(strstr(err, "integrity check"));
    assert_non_null(strstr(err, "move it aside"));
    assert_null(strchr(err, '\n'));
    tu_rm_store(dir);

    /* Garbage after the last frame of the WAL a crashed writer left (a
     * torn write) is ignored. */
    assert_int_equal(pipe(p), 0);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        if (open_store(dir, &st, NULL, 0) != STORE_OK ||
            add(st, 1, 1, 1) != STORE_OK)
            _exit(1);
        ack(p[1], ACK_REPORT, 1);
        for (;;)
            pause(); /* until killed: no store_close, the WAL stays */
    }
    close(p[1]);
    wait_ack(p[0], ACK_REPORT);
    close(p[0]);
    assert_int_equal(kill(pid, SIGKILL), 0);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    snprintf(wal, sizeof(wal), "%s/reapd.db-wal", dir);
    fd = open(wal, O_WRONLY | O_APPEND);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, garbage, 1000), 1000);
    close(fd);
    st = must_open(dir);
    assert_int_equal(store_check(st), STORE_OK);
    assert_int_equal(get(st, 1, &r), STORE_OK);
    store_report_clear(&r);
    assert_int_equal(close_store(st), STORE_OK);
    tmpdir_free(dir);
}

/* A migration is one transaction: if it fails half-way, nothing of it
 * stays, and the version is not bumped. */
static void
t_migration_atomic(void **state)
{
    char dir[64], err[512];
    struct store *st = NULL;

    (void)state;
    tmpdir_new(dir, sizeof(dir));
    write_file(dir, "", 0, 0, true);
    /* A stray table that the migration's last CREATE collides with. */
    raw_exec(dir, "CREATE TABLE checkpoints (x)");
    assert_int_equal(open_store(dir, &st, err, sizeof(err)), STORE_ERROR);
    assert_null(st);
    assert_non_null(strstr(err, "migration to schema version 1"));
    assert_non_null(strstr(err, "checkpoints"));
    assert_int_equal(raw_int(dir, "PRAGMA user_version"), 0);
    assert_int_equal(raw_int(dir, "SELECT count(*) FROM sqlite_schema"
                                  " WHERE name IN ('meta', 'reports',"
                                  " 'containers')"),
                     0);

    raw_exec(dir, "DROP TABLE checkpoints");
    st = must_open(dir);
    assert_int_equal(close_store(st), STORE_OK);
    assert_int_equal(raw_int(dir, "PRAGMA user_version"),
                     STORE_SCHEMA_VERSION);
    tmpdir_free(dir);
}

/* The schema as version 1 shipped it, written out: what an existing
 * database looks like before this reapd migrates it. */
static const char SCHEMA_V1[] =
    "CREATE TABLE meta (name TEXT PRIMARY KEY NOT NULL,"
    " value INTEGER NOT NULL) WITHOUT ROWID;"
    "INSERT INTO meta(name, value) VALUES ('report_seq', 0);"
    "CREATE TABLE reports (report_id TEXT PRIMARY KEY NOT NULL,"
    " container_id TEXT NOT NULL, seq INTEGER NOT NULL UNIQUE,"
    " body TEXT NOT NULL, state TEXT NOT NULL DEFAULT 'pending'"
    " CHECK (state IN ('pending', 'delivered', 'dead')),"
    " attempts INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),"
    " next_attempt_ms INTEGER NOT NULL, last_error TEXT,"
    " created_ms INTEGER NOT NULL, delivered_ms INTEGER,"
    " head INTEGER NOT NULL DEFAULT 0 CHECK (head IN (0, 1)));"
    "CREATE INDEX reports_heads ON reports(seq, next_attempt_ms)"
    " WHERE head = 1;"
    "CREATE INDEX reports_pending ON reports(container_id, seq)"
    " WHERE state = 'pending';"
    "CREATE INDEX reports_state_seq ON reports(state, seq);"
    "CREATE TRIGGER reports_next_head AFTER UPDATE OF state ON reports"
    " WHEN OLD.state = 'pending' AND NEW.state <> 'pending'"
    " BEGIN"
    " UPDATE reports SET head = 0 WHERE report_id = NEW.report_id;"
    " UPDATE reports SET head = 1 WHERE seq = (SELECT min(seq)"
    " FROM reports WHERE container_id = NEW.container_id"
    " AND state = 'pending');"
    " END;"
    "CREATE TABLE containers (id TEXT PRIMARY KEY NOT NULL,"
    " record TEXT NOT NULL, updated_ms INTEGER NOT NULL);"
    "CREATE TABLE checkpoints (key TEXT PRIMARY KEY NOT NULL,"
    " value INTEGER NOT NULL);"
    /* A dead letter, a delivered report, two pending of one container
     * (the first is its head), a record and a checkpoint. */
    "INSERT INTO reports VALUES"
    " ('00000000000000000000000000000001', 'c1', 1, '{}', 'dead', 1, 0,"
    "  'HTTP 400: bad', 10, NULL, 0),"
    " ('00000000000000000000000000000002', 'c1', 2, '{}', 'delivered', 1,"
    "  0, NULL, 11, 12, 0),"
    " ('00000000000000000000000000000003', 'c2', 3, '{\"n\":3}', 'pending',"
    "  0, 0, NULL, 13, NULL, 1),"
    " ('00000000000000000000000000000004', 'c2', 4, '{\"n\":4}', 'pending',"
    "  0, 0, NULL, 14, NULL, 0);"
    "UPDATE meta SET value = 4 WHERE name = 'report_seq';"
    "INSERT INTO containers VALUES ('c9', '{\"v\":1}', 15);"
    "INSERT INTO checkpoints VALUES ('events', 42);"
    "PRAGMA user_version = 1;";

/* A version 1 database is migrated in place: nothing is lost, its dead
 * letter says it was rejected, and the outbox goes on as before. */
static void
t_migrate_v1(void **state)
{
    char dir[64];
    struct store_containers all;
    struct store_report r;
    struct store *st;
    int64_t v = 0;

    (void)state;
    tmpdir_new(dir, sizeof(dir));
    write_file(dir, "", 0, 0, true);
    raw_exec(dir, SCHEMA_V1);
    st = must_open(dir);
    assert_int_equal(raw_int(dir, "PRAGMA user_version"), 2);
    assert_int_equal(store_check(st), STORE_OK);

    assert_int_equal(get(st, 1, &r), STORE_OK);
    assert_int_equal(r.state, STORE_DEAD);
    assert_int_equal(r.dead_reason, STORE_DEAD_REJECTED);
    assert_string_equal(r.last_error, "HTTP 400: bad");
    store_report_clear(&r);
    assert_int_equal(get(st, 2, &r), STORE_OK);
    assert_int_equal(r.state, STORE_DELIVERED);
    assert_int_equal(r.dead_reason, STORE_DEAD_NONE);
    assert_int_equal(r.delivered_ms, 12);
    store_report_clear(&r);
    assert_int_equal(store_get_containers(st, &all), STORE_OK);
    assert_int_equal(all.n, 1);
    assert_string_equal(all.v[0].json, "{\"v\":1}");
    store_containers_free(&all);
    assert_int_equal(store_get_checkpoint(st, "events", &v), STORE_OK);
    assert_int_equal(v, 42);

    /* The outbox goes on: report 3 is due, then dead (a reason of the
     * new kind: no attempt counted); report 4 is due next. */
    {
        char due[64];

        due_str(st, 100, 10, due, sizeof(due));
        assert_string_equal(due, "3");
        assert_int_equal(
            store_mark_dead_reason(st, "00000000000000000000000000000003",
                                   STORE_DEAD_TOO_LARGE, "too big"),
            STORE_OK);
        due_str(st, 100, 10, due, sizeof(due));
        assert_string_equal(due, "4");
    }
    assert_int_equal(get(st, 3, &r), STORE_OK);
    assert_int_equal(r.dead_reason, STORE_DEAD_TOO_LARGE);
    assert_int_equal(r.attempts, 0);
    store_report_clear(&r);
    /* Sequence numbers go on from the old counter. */
    assert_int_equal(add(st, 5, 3, 200), STORE_OK);
    assert_int_equal(get(st, 5, &r), STORE_OK);
    assert_int_equal(r.seq, 5);
    store_report_clear(&r);
    assert_int_equal(store_check(st), STORE_OK);
    assert_int_equal(close_store(st), STORE_OK);

    /* Reopened: no migration runs again. */
    st = must_open(dir);
    assert_int_equal(raw_int(dir, "PRAGMA user_version"), 2);
    assert_int_equal(close_store(st), STORE_OK);
    tmpdir_free(dir);
}

/* The oldest pending report's time (for the metric of how far behind
 * delivery is): by its creation, whatever else is delivered or dead. */
static void
t_oldest_pending(void **state)
{
    struct fx *f = *state;
    struct store_counts c;

    assert_int_equal(store_counts(f->st, &c), STORE_OK);
    assert_int_equal(c.oldest_pending_ms, 0);
    assert_int_equal(add(f->st, 1, 1, 100), STORE_OK);
    assert_int_equal(add(f->st, 2, 2, 200), STORE_OK);
    assert_int_equal(add(f->st, 3, 1, 300), STORE_OK);
    assert_int_equal(store_counts(f->st, &c), STORE_OK);
    assert_int_equal(c.oldest_pending_ms, 100);
    assert_int_equal(mark_delivered(f->st, 1, 400), STORE_OK);
    assert_int_equal(store_counts(f->st, &c), STORE_OK);
    assert_int_equal(c.oldest_pending_ms, 200);
    assert_int_equal(mark_dead(f->st, 2, "HTTP 422: no"), STORE_OK);
    assert_int_equal(store_counts(f->st, &c), STORE_OK);
    assert_int_equal(c.oldest_pending_ms, 300);
    assert_int_equal(mark_delivered(f->st, 3, 500), STORE_OK);
    assert_int_equal(store_counts(f->st, &c), STORE_OK);
    assert_int_equal(c.oldest_pending_ms, 0);
    assert_int_equal(c.pending, 0);
}

/* Each reason a report can die for, as stored and listed; what the
 * operator's requeue (docs/runbook.md) does to it. */
static void
t_dead_reasons(void **state)
{
    struct fx *f = *state;
    char id[STORE_REPORT_ID_MAX + 1];
    struct store_reports l;
    struct store_counts c;
    struct store_report r;

    assert_string_equal(store_dead_reason_name(STORE_DEAD_REJECTED),
                        "rejected");
    assert_string_equal(store_dead_reason_name(STORE_DEAD_TOO_LARGE),
                        "too_large");
    assert_string_equal(store_dead_reason_name(STORE_DEAD_INVALID), "invalid");
    assert_null(store_dead_reason_name(STORE_DEAD_NONE));
    assert_int_equal(add(f->st, 1, 1, 10), STORE_OK);
    assert_int_equal(add(f->st, 2, 2, 10), STORE_OK);
    assert_int_equal(add(f->st, 3, 3, 10), STORE_OK);
    assert_int_equal(add(f->st, 4, 4, 10), STORE_OK);
    assert_int_equal(mark_dead(f->st, 1, "HTTP 422: no"), STORE_OK);
    tu_report_id(id, 2);
    assert_int_equal(
        store_mark_dead_reason(f->st, id, STORE_DEAD_TOO_LARGE, "big"),
        STORE_OK);
    tu_report_id(id, 3);
    assert_int_equal(
        store_mark_dead_reason(f->st, id, STORE_DEAD_INVALID, NULL), STORE_OK);
    /* No reason is no dead letter; a dead one stays as it is. */
    tu_report_id(id, 4);
    assert_int_equal(store_mark_dead_reason(f->st, id, STORE_DEAD_NONE, "x"),
                     STORE_INVALID);
    tu_report_id(id, 3);
    assert_int_equal(
        store_mark_dead_reason(f->st, id, STORE_DEAD_REJECTED, "again"),
        STORE_NOT_FOUND);

    assert_int_equal(store_recent(f->st, 10, false, &l), STORE_OK);
    assert_int_equal(l.n, 4);
    assert_int_equal(l.v[0].state, STORE_PENDING); /* newest first */
    assert_int_equal(l.v[0].dead_reason, STORE_DEAD_NONE);
    assert_int_equal(l.v[1].dead_reason, STORE_DEAD_INVALID);
    assert_null(l.v[1].last_error);
    assert_int_equal(l.v[1].attempts, 0);
    assert_int_equal(l.v[2].dead_reason, STORE_DEAD_TOO_LARGE);
    assert_string_equal(l.v[2].last_error, "big");
    assert_int_equal(l.v[2].attempts, 0);
    assert_int_equal(l.v[3].dead_reason, STORE_DEAD_REJECTED);
    assert_string_equal(l.v[3].last_error, "HTTP 422: no");
    assert_int_equal(l.v[3].attempts, 1);
    store_reports_free(&l);
    assert_int_equal(store_counts(f->st, &c), STORE_OK);
    assert_int_equal(c.dead, 3);
    assert_int_equal(c.pending, 1);
    assert_int_equal(store_check(f->st), STORE_OK);

    /* The runbook's requeue, behind the store's back: the reason goes
     * with the state, and the invariants hold. */
    reopen(f);
    raw_exec(f->dir,
             "BEGIN IMMEDIATE;"
             "UPDATE reports SET state = 'pending', next_attempt_ms = 0,"
             " last_error = NULL WHERE report_id ="
             " '00000000000000000000000000000002' AND state = 'dead';"
             "UPDATE reports SET head = coalesce(seq = (SELECT min(seq)"
             " FROM reports AS r WHERE r.container_id ="
             " reports.container_id AND r.state = 'pending'), 0)"
             " WHERE container_id = (SELECT container_id FROM reports"
             " WHERE report_id = '00000000000000000000000000000002');"
             "COMMIT;");
    /* An operator does it with reapd stopped: its counts are made at the
     * opening. */
    reopen(f);
    assert_int_equal(get(f->st, 2, &r), STORE_OK);
    assert_int_equal(r.state, STORE_PENDING);
    assert_int_equal(r.dead_reason, STORE_DEAD_NONE);
    store_report_clear(&r);
    assert_int_equal(store_check(f->st), STORE_OK);
    /* A dead letter without a reason is caught. */
    raw_exec(f->dir, "UPDATE reports SET dead_reason = NULL WHERE seq = 1");
    assert_int_equal(store_check(f->st), STORE_CORRUPT);
    assert_non_null(strstr(store_errmsg(f->st), "dead_reason"));
}

/* Every file of the database is opened close-on-exec and never through
 * a symlink: the WAL and shared-memory files either. */
static void
t_files_hardened(void **state)
{
    static const char *const names[] = {"reapd.db", "reapd.db-wal"};
    char dir[64], path[128], target[128], err[512];
    struct store *st;
    struct stat sb;
    bool found;
    size_t i;
    int r;

    (void)state;
    tmpdir_new(dir, sizeof(dir));
    st = must_open(dir);
    assert_int_equal(add(st, 1, 1, 1), STORE_OK);
    for (i = 0; i < 2; i++) {
        snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
        assert_true(tu_open_cloexec(path, &found));
        assert_true(found);
    }
    /* Exclusive locking mode: the WAL index is in memory, no -shm file. */
    snprintf(path, sizeof(path), "%s/reapd.db-shm", dir);
    assert_int_equal(lstat(path, &sb), -1);
    assert_int_equal(close_store(st), STORE_OK);

    snprintf(target, sizeof(target), "%s/target", dir);
    for (i = 1; i < 2; i++) {
        tu_rm_store(dir);
        st = must_open(dir);
        assert_int_equal(close_store(st), STORE_OK);
        snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
        unlink(path);
        assert_int_equal(symlink(target, path), 0);
        st = NULL;
        r = open_store(dir, &st, err, sizeof(err));
        if (r == STORE_OK) {
            /* Opened; then the first write must fail, not follow it. */
            r = add(st, 1, 1, 1);
            assert_int_equal(close_store(st), STORE_OK);
        }
        assert_true(r < 0);
        assert_int_equal(lstat(target, &sb), -1);
        unlink(path);
    }
    /* A -shm symlink is never followed: the file is not used at all. */
    tu_rm_store(dir);
    snprintf(path, sizeof(path), "%s/reapd.db-shm", dir);
    assert_int_equal(symlink(target, path), 0);
    st = must_open(dir);
    assert_int_equal(add(st, 1, 1, 1), STORE_OK);
    assert_int_equal(store_flush(st), STORE_OK);
    assert_int_equal(close_store(st), STORE_OK);
    assert_int_equal(lstat(target, &sb), -1);
    unlink(path);
    tu_rm_store(dir);
    tmpdir_free(dir);
}

/* Someone else holding the write lock at open: a clear error after a
 * short wait (the loop must not block), and all is well once the lock is
 * gone. Once open, the store holds the file. */
static void
t_busy(void **state)
{
    char dir[64], err[512];
    struct store *st = NULL;
    int64_t t0;
    sqlite3 *db;

    (void)state;
    tmpdir_new(dir, sizeof(dir));
    st = must_open(dir);
    assert_int_equal(close_store(st), STORE_OK);

    db = raw_open(dir);
    assert_int_equal(sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL),
                     SQLITE_OK);
    t0 = now_us();
    assert_int_equal(open_store(dir, &st, err, sizeof(err)), STORE_BUSY);
    assert_true(now_us() - t0 < 2000000);
    assert_null(st);
    assert_non_null(strstr(err, "reapd.db"));
    assert_non_null(strstr(err, "another reapd"));
    assert_int_equal(sqlite3_exec(db, "COMMIT", NULL, NULL, NULL), SQLITE_OK);

    /* A connection still open in WAL mode holds a shared lock: the store
     * cannot have the file to itself. */
    assert_int_equal(open_store(dir, &st, err, sizeof(err)), STORE_BUSY);
    sqlite3_close(db);

    /* Open, the store keeps its file locked (exclusive locking mode): a
     * second connection cannot even read, and the store's own writes
     * never wait for anyone. */
    st = must_open(dir);
    assert_int_equal(add(st, 1, 1, 1), STORE_OK);
    assert_int_equal(store_flush(st), STORE_OK);
    db = raw_second(dir);
    assert_int_equal(
        sqlite3_exec(db, "SELECT count(*) FROM reports", NULL, NULL, NULL),
        SQLITE_BUSY);
    assert_int_equal(sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL),
                     SQLITE_BUSY);
    assert_int_equal(add(st, 2, 1, 1), STORE_OK);
    assert_int_equal(store_flush(st), STORE_OK);
    assert_int_equal(close_store(st), STORE_OK);
    /* Closed, it is free again. */
    assert_int_equal(raw_int(dir, "SELECT count(*) FROM reports"), 2);
    sqlite3_close(db);
    tmpdir_free(dir);
}

/* ---- the outbox ------------------------------------------------------- */

static void
t_duplicate(void **state)
{
    struct fx *f = *state;
    struct store_report r;
    struct store_counts c;
    char id[STORE_REPORT_ID_MAX + 1], ctr[STORE_ID_MAX + 1];

    assert_int_equal(add(f->st, 7, 1, 100), STORE_OK);
    assert_int_equal(add(f->st, 7, 1, 200), STORE_DUPLICATE);
    /* Another body under the same id changes nothing either. */
    tu_report_id(id, 7);
    tu_container_id(ctr, 2);
    assert_int_equal(store_add_report(f->st, id, ctr, "{}", 2, 300),
                     STORE_DUPLICATE);
    assert_int_equal(get(f->st, 7, &r), STORE_OK);
    assert_non_null(strstr(r.body, "\"n\":7"));
    assert_int_equal(r.created_ms, 100);
    assert_int_equal(r.seq, 1);
    store_report_clear(&r);

    /* Delivered (or dead) does not let it in again; nor a reopen. */
    assert_int_equal(mark_delivered(f->st, 7, 400), STORE_OK);
    assert_int_equal(add(f->st, 7, 1, 500), STORE_DUPLICATE);
    reopen(f);
    assert_int_equal(add(f->st, 7, 1, 500), STORE_DUPLICATE);
    assert_int_equal(store_counts(f->st, &c), STORE_OK);
    assert_int_equal(c.pending + c.delivered + c.dead, 1);

    /* A refused duplicate did not use up a sequence number. */
    assert_int_equal(add(f->st, 8, 1, 600), STORE_OK);
    assert_int_equal(get(f->st, 8, &r), STORE_OK);
    assert_int_equal(r.seq, 2);
    store_report_clear(&r);
}

static void
t_invalid_input(void **state)
{
    struct fx *f = *state;
    char ctr[STORE_ID_MAX + 1], id[STORE_REPORT_ID_MAX + 1];
    char long_id[STORE_ID_MAX + 2], long_rid[STORE_REPORT_ID_MAX + 2];
    struct store_reports l;
    struct store_counts c;
    struct store_report r;
    char *big;
    int64_t v;

    tu_container_id(ctr, 1);
    tu_report_id(id, 1);
    memset(long_id, 'a', sizeof(long_id) - 1);
    long_id[sizeof(long_id) - 1] = '\0';
    memset(long_rid, 'a', sizeof(long_rid) - 1);
    long_rid[sizeof(long_rid) - 1] = '\0';
    big = malloc(STORE_BODY_MAX + 1);
    assert_non_null(big);
    memset(big, ' ', STORE_BODY_MAX + 1);

    assert_int_equal(store_add_report(f->st, "", ctr, "{}", 2, 1),
                     STORE_INVALID);
    assert_int_equal(store_add_report(f->st, NULL, ctr, "{}", 2, 1),
                     STORE_INVALID);
    assert_int_equal(store_add_report(f->st, "a b", ctr, "{}", 2, 1),
                     STORE_INVALID);
    assert_int_equal(store_add_report(f->st, "a\nb", ctr, "{}", 2, 1),
                     STORE_INVALID);
    assert_int_equal(store_add_report(f->st, "caf\xc3\xa9", ctr, "{}", 2, 1),
                     STORE_INVALID);
    assert_int_equal(store_add_report(f->st, long_rid, ctr, "{}", 2, 1),
                     STORE_INVALID);
    assert_non_null(strstr(store_errmsg(f->st), "add report"));
    assert_int_equal(store_add_report(f->st, id, long_id, "{}", 2, 1),
                     STORE_INVALID);
    assert_int_equal(store_add_report(f->st, id, ctr, NULL, 0, 1),
                     STORE_INVALID);
    assert_int_equal(store_add_report(f->st, id, ctr, "{\0}", 3, 1),
                     STORE_INVALID);
    assert_int_equal(
        store_add_report(f->st, id, ctr, big, STORE_BODY_MAX + 1, 1),
        STORE_INVALID);
    assert_int_equal(store_counts(f->st, &c), STORE_OK);
    assert_int_equal(c.pending, 0);
    /* The largest body allowed goes in, and comes back whole. */
    big[0] = '"';
    big[STORE_BODY_MAX - 1] = '"';
    assert_int_equal(store_add_report(f->st, id, ctr, big, STORE_BODY_MAX, 1),
                     STORE_OK);
    assert_int_equal(store_get_report(f->st, id, true, &r), STORE_OK);
    assert_int_equal(r.body_len, STORE_BODY_MAX);
    assert_memory_equal(r.body, big, STORE_BODY_MAX);
    store_report_clear(&r);

    assert_int_equal(store_put_container(f->st, long_id, "{}", 2, 1),
                     STORE_INVALID);
    assert_int_equal(
        store_put_container(f->st, ctr, big, STORE_RECORD_MAX + 1, 1),
        STORE_INVALID);
    assert_int_equal(store_put_container(f->st, ctr, "{\0}", 3, 1),
                     STORE_INVALID);
    assert_int_equal(store_delete_container(f->st, ""), STORE_INVALID);
    assert_int_equal(store_set_checkpoint(f->st, long_id, 1), STORE_INVALID);
    assert_int_equal(store_set_checkpoint(f->st, "has space", 1),
                     STORE_INVALID);
    assert_int_equal(store_get_checkpoint(f->st, NULL, &v), STORE_INVALID);
    assert_int_equal(store_pending(f->st), 0);
    assert_int_equal(store_mark_delivered(f->st, long_id, 1), STORE_INVALID);
    assert_int_equal(store_mark_dead(f->st, "", "x"), STORE_INVALID);
    assert_int_equal(store_mark_retry(f->st, NULL, 1, "x"), STORE_INVALID);
    assert_int_equal(store_get_report(f->st, long_id, false, &r),
                     STORE_INVALID);
    assert_int_equal(store_due(f->st, 0, STORE_LIST_MAX + 1, &l),
                     STORE_INVALID);
    assert_int_equal(l.n, 0);
    assert_int_equal(store_recent(f->st, STORE_LIST_MAX + 1, false, &l),
                     STORE_INVALID);
    free(big);
}

static void
t_due_order(void **state)
{
    struct fx *f = *state;
    char due[256];

    /* seq: A1=1 B1=2 A2=3 C1=4 B2=5 A3=6 (containers A=1 B=2 C=3). */
    assert_int_equal(add(f->st, 11, 1, 1000), STORE_OK);
    assert_int_equal(add(f->st, 21, 2, 1001), STORE_OK);
    assert_int_equal(add(f->st, 12, 1, 1002), STORE_OK);
    assert_int_equal(add(f->st, 31, 3, 1003), STORE_OK);
    assert_int_equal(add(f->st, 22, 2, 1004), STORE_OK);
    assert_int_equal(add(f->st, 13, 1, 1005), STORE_OK);

    /* Only the head of each container's queue, oldest first. */
    due_str(f->st, 2000, 100, due, sizeof(due));
    assert_string_equal(due, "11,21,31");
    /* A report is due once now reaches its creation time. */
    due_str(f->st, 1000, 100, due, sizeof(due));
    assert_string_equal(due, "11");
    due_str(f->st, 999, 100, due, sizeof(due));
    assert_string_equal(due, "");
    due_str(f->st, 2000, 2, due, sizeof(due));
    assert_string_equal(due, "11,21");
    due_str(f->st, 2000, 0, due, sizeof(due));
    assert_string_equal(due, "");

    assert_int_equal(mark_delivered(f->st, 11, 2000), STORE_OK);
    due_str(f->st, 2000, 100, due, sizeof(due));
    assert_string_equal(due, "21,12,31");

    /* A head waiting for its retry holds its container's queue. */
    assert_int_equal(mark_retry(f->st, 21, 3000, "503"), STORE_OK);
    due_str(f->st, 2000, 100, due, sizeof(due));
    assert_string_equal(due, "12,31");
    due_str(f->st, 3000, 100, due, sizeof(due));
    assert_string_equal(due, "21,12,31");

    /* The head flags are checked, and a wrong one is caught. */
    assert_int_equal(store_check(f->st), STORE_OK);
    raw_exec(f->dir, "UPDATE reports SET head = 1 WHERE report_id = '"
                     "00000000000000000000000000000016'");
    assert_int_equal(store_check(f->st), STORE_CORRUPT);
    assert_non_null(strstr(store_errmsg(f->st), "head"));
    raw_exec(f->dir, "UPDATE reports SET head = 0 WHERE report_id = '"
                     "00000000000000000000000000000016'");
    assert_int_equal(store_check(f->st), STORE_OK);

    /* Dead lets the next one through. */
    assert_int_equal(mark_dead(f->st, 21, "400 bad request"), STORE_OK);
    due_str(f->st, 3000, 100, due, sizeof(due));
    assert_string_equal(due, "12,31,22");

    /* Survives a reopen, as the daemon finds it after a restart. */
    reopen(f);
    due_str(f->st, 3000, 100, due, sizeof(due));
    assert_string_equal(due, "12,31,22");
    assert_int_equal(mark_delivered(f->st, 12, 3000), STORE_OK);
    assert_int_equal(mark_delivered(f->st, 31, 3000), STORE_OK);
    assert_int_equal(mark_delivered(f->st, 22, 3000), STORE_OK);
    due_str(f->st, 3000, 100, due, sizeof(due));
    assert_string_equal(due, "13");
    assert_int_equal(mark_delivered(f->st, 13, 3000), STORE_OK);
    due_str(f->st, INT64_MAX, 100, due, sizeof(due));
    assert_string_equal(due, "");
}

/* Many containers, interleaved at random: the due list always holds
 * exactly the oldest pending report of each container whose turn it is,
 * checked against a model. */
static void
t_due_model(void **state)
{
    enum { NC = 23, NR = 600 };
    struct fx *f = *state;
    static unsigned ctr_of[NR];
    static int st_of[NR]; /* 0 pending, 1 delivered, 2 dead */
    static int64_t next_of[NR];
    unsigned seed = 12345, i, round;
    struct store_reports l;

    for (i = 0; i < NR; i++) {
        seed = seed * 1103515245u + 12345u;
        ctr_of[i] = (seed >> 16) % NC;
        next_of[i] = 0;
        assert_int_equal(add(f->st, i, ctr_of[i], 0), STORE_OK);
    }
    for (round = 0; round < 200; round++) {
        int64_t now = round;
        bool head_seen[NC] = {false};
        size_t k = 0;

        assert_int_equal(store_due(f->st, now, STORE_LIST_MAX, &l), STORE_OK);
        /* The model: walk in seq order; each container's first pending
         * report is its head; it is due if its time has come. */
        for (i = 0; i < NR; i++) {
            if (st_of[i] != 0 || head_seen[ctr_of[i]])
                continue;
            head_seen[ctr_of[i]] = true;
            if (next_of[i] > now)
                continue;
            assert_true(k < l.n);
            assert_int_equal(strtoul(l.v[k].report_id, NULL, 16), i);
            k++;
        }
        assert_int_equal(k, l.n);
        if (round % 20 == 0) /* the head flags, checked the long way */
            assert_int_equal(store_check(f->st), STORE_OK);
        /* Deliver, kill or postpone each due report at random. */
        for (k = 0; k < l.n; k++) {
            unsigned n = (unsigned)strtoul(l.v[k].report_id, NULL, 16);

            seed = seed * 1103515245u + 12345u;
            switch ((seed >> 16) % 4) {
            case 0:
                assert_int_equal(mark_delivered(f->st, n, now), STORE_OK);
                st_of[n] = 1;
                break;
            case 1:
                assert_int_equal(mark_dead(f->st, n, "x"), STORE_OK);
                st_of[n] = 2;
                break;
            default:
                next_of[n] = now + 1 + (seed >> 20) % 5;
                assert_int_equal(mark_retry(f->st, n, next_of[n], "y"),
                                 STORE_OK);
                break;
            }
        }
        store_reports_free(&l);
    }
}

static void
t_transitions(void **state)
{
    struct fx *f = *state;
    char longerr[STORE_ERRTEXT_MAX + 100];
    struct store_report r;
    size_t i;

    assert_int_equal(add(f->st, 1, 1, 100), STORE_OK);
    assert_int_equal(get(f->st, 1, &r), STORE_OK);
    assert_int_equal(r.state, STORE_PENDING);
    assert_int_equal(r.attempts, 0);
    assert_int_equal(r.next_attempt_ms, 100);
    assert_int_equal(r.created_ms, 100);
    assert_int_equal(r.delivered_ms, 0);
    assert_null(r.last_error);
    store_report_clear(&r);

    assert_int_equal(mark_retry(f->st, 1, 5000, "connect: refused"), STORE_OK);
    assert_int_equal(mark_retry(f->st, 1, 9000, "HTTP 503"), STORE_OK);
    assert_int_equal(get(f->st, 1, &r), STORE_OK);
    assert_int_equal(r.state, STORE_PENDING);
    assert_int_equal(r.attempts, 2);
    assert_int_equal(r.next_attempt_ms, 9000);
    assert_string_equal(r.last_error, "HTTP 503");
    store_report_clear(&r);

    assert_int_equal(mark_delivered(f->st, 1, 9100), STORE_OK);
    assert_int_equal(get(f->st, 1, &r), STORE_OK);
    assert_int_equal(r.state, STORE_DELIVERED);
    assert_int_equal(r.attempts, 3);
    assert_int_equal(r.delivered_ms, 9100);
    assert_null(r.last_error);
    store_report_clear(&r);
    /* Delivered is final. */
    assert_int_equal(mark_delivered(f->st, 1, 9200), STORE_NOT_FOUND);
    assert_int_equal(mark_dead(f->st, 1, "x"), STORE_NOT_FOUND);
    assert_int_equal(mark_retry(f->st, 1, 1, "x"), STORE_NOT_FOUND);
    assert_int_equal(get(f->st, 1, &r), STORE_OK);
    assert_int_equal(r.attempts, 3);
    assert_int_equal(r.delivered_ms, 9100);
    store_report_clear(&r);

    /* Dead is final too, and keeps its reason. */
    assert_int_equal(add(f->st, 2, 1, 100), STORE_OK);
    assert_int_equal(mark_dead(f->st, 2, "HTTP 400: bad report"), STORE_OK);
    assert_int_equal(mark_delivered(f->st, 2, 1), STORE_NOT_FOUND);
    assert_int_equal(mark_retry(f->st, 2, 1, "x"), STORE_NOT_FOUND);
    assert_int_equal(get(f->st, 2, &r), STORE_OK);
    assert_int_equal(r.state, STORE_DEAD);
    assert_int_equal(r.attempts, 1);
    assert_string_equal(r.last_error, "HTTP 400: bad report");
    assert_string_equal(store_state_name(r.state), "dead");
    store_report_clear(&r);

    /* Unknown ids. */
    assert_int_equal(mark_delivered(f->st, 99, 1), STORE_NOT_FOUND);
    assert_int_equal(mark_retry(f->st, 99, 1, NULL), STORE_NOT_FOUND);
    assert_int_equal(get(f->st, 99, &r), STORE_NOT_FOUND);

    /* A long error is cut, on a character boundary; NULL is no error. */
    assert_int_equal(add(f->st, 3, 1, 100), STORE_OK);
    for (i = 0; i + 1 < sizeof(longerr); i += 2) {
        longerr[i] = '\xc3'; /* 'é', two bytes, straddling the limit */
        longerr[i + 1] = '\xa9';
    }
    longerr[0] = 'x'; /* shift by one: the limit falls mid-character */
    longerr[sizeof(longerr) - 1] = '\0';
    assert_int_equal(mark_retry(f->st, 3, 200, longerr), STORE_OK);
    assert_int_equal(get(f->st, 3, &r), STORE_OK);
    assert_true(strlen(r.last_error) <= STORE_ERRTEXT_MAX);
    assert_true(strlen(r.last_error) >= STORE_ERRTEXT_MAX - 1);
    assert_int_equal(((unsigned char)r.last_error[strlen(r.last_error) - 1]),
                     0xa9);
    store_report_clear(&r);
    assert_int_equal(mark_retry(f->st, 3, 300, NULL), STORE_OK);
    assert_int_equal(get(f->st, 3, &r), STORE_OK);
    assert_null(r.last_error);
    store_report_clear(&r);
}

static void
t_retention(void **state)
{
    struct fx *f = *state;
    struct store_counts c;
    struct store_report r;
    uint64_t n;
    unsigned i;

    /* 1..6 delivered at 100..600; 7, 8 pending; 9, 10 dead. */
    for (i = 1; i <= 10; i++)
        assert_int_equal(add(f->st, i, i, 10), STORE_OK);
    for (i = 1; i <= 6; i++)
        assert_int_equal(mark_delivered(f->st, i, i * 100), STORE_OK);
    assert_int_equal(mark_dead(f->st, 9, "x"), STORE_OK);
    assert_int_equal(mark_dead(f->st, 10, "x"), STORE_OK);

    assert_int_equal(store_prune(f->st, 1000, -1, -1, &n), STORE_OK);
    assert_int_equal(n, 0);
    /* By age: delivered before 1000 - 500. */
    assert_int_equal(store_prune(f->st, 1000, 500, -1, &n), STORE_OK);
    assert_int_equal(n, 4);
    for (i = 1; i <= 4; i++)
        assert_int_equal(get(f->st, i, &r), STORE_NOT_FOUND);
    /* By count: the newest one delivered stays. */
    assert_int_equal(store_prune(f->st, 1000, -1, 1, &n), STORE_OK);
    assert_int_equal(n, 1);
    assert_int_equal(get(f->st, 5, &r), STORE_NOT_FOUND);
    assert_int_equal(get(f->st, 6, &r), STORE_OK);
    store_report_clear(&r);
    assert_int_equal(store_prune(f->st, 1000, -1, 1, &n), STORE_OK);
    assert_int_equal(n, 0);
    /* Everything delivered, but never pending or dead. */
    assert_int_equal(store_prune(f->st, INT64_MAX, 0, 0, NULL), STORE_OK);
    assert_int_equal(store_counts(f->st, &c), STORE_OK);
    assert_int_equal(c.delivered, 0);
    assert_int_equal(c.pending, 2);
    assert_int_equal(c.dead, 2);
    assert_int_equal(store_prune(f->st, INT64_MIN, INT64_MAX, -1, &n),
                     STORE_OK); /* no overflow */
    assert_int_equal(n, 0);

    /* Batches: 2500 delivered, put there behind the store's back. */
    raw_exec(f->dir, "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL"
                     " SELECT i + 1 FROM n WHERE i < 2500)"
                     " INSERT INTO reports(report_id, container_id, seq,"
                     " body, state, next_attempt_ms, created_ms,"
                     " delivered_ms) SELECT 'x' || i, 'c', 100 + i, '{}',"
                     " 'delivered', 0, 0, i FROM n;"
                     "UPDATE meta SET value = 2600;");
    reopen(f); /* its counts are made at the opening */
    assert_int_equal(store_check(f->st), STORE_OK);
    assert_int_equal(store_prune(f->st, 5000, 0, -1, &n), STORE_OK);
    assert_int_equal(n, STORE_PRUNE_BATCH);
    assert_int_equal(raw_int(f->dir, "SELECT min(delivered_ms) FROM reports"
                                     " WHERE state = 'delivered'"),
                     STORE_PRUNE_BATCH + 1); /* oldest first */
    assert_int_equal(store_prune(f->st, 5000, -1, 0, &n), STORE_OK);
    assert_int_equal(n, STORE_PRUNE_BATCH);
    assert_int_equal(store_prune(f->st, 5000, 0, 0, &n), STORE_OK);
    assert_int_equal(n, 500);
    assert_int_equal(store_prune(f->st, 5000, 0, 0, &n), STORE_OK);
    assert_int_equal(n, 0);

    /* A pruned id is forgotten (store.h says so); its seq is not reused. */
    assert_int_equal(add(f->st, 1, 1, 2000), STORE_OK);
    assert_int_equal(get(f->st, 1, &r), STORE_OK);
    assert_int_equal(r.seq, 2601);
    store_report_clear(&r);
}

static void
t_counts_and_size(void **state)
{
    struct fx *f = *state;
    struct store_counts c;
    char id[STORE_REPORT_ID_MAX + 1], ctr[STORE_ID_MAX + 1];
    static char body[20000];
    uint64_t before;
    unsigned i;

    assert_int_equal(store_counts(f->st, &c), STORE_OK);
    assert_int_equal(c.pending + c.delivered + c.dead, 0);
    assert_true(c.db_bytes > 0);
    before = c.db_bytes;

    memset(body, 'x', sizeof(body));
    body[0] = '"';
    body[sizeof(body) - 1] = '"';
    tu_container_id(ctr, 1);
    for (i = 0; i < 20; i++) {
        tu_report_id(id, i);
        assert_int_equal(
            store_add_report(f->st, id, ctr, body, sizeof(body), i), STORE_OK);
    }
    for (i = 0; i < 5; i++)
        assert_int_equal(mark_delivered(f->st, i, 1), STORE_OK);
    for (i = 5; i < 8; i++)
        assert_int_equal(mark_dead(f->st, i, NULL), STORE_OK);
    assert_int_equal(store_counts(f->st, &c), STORE_OK);
    assert_int_equal(c.pending, 12);
    assert_int_equal(c.delivered, 5);
    assert_int_equal(c.dead, 3);
    assert_true(c.db_bytes >= before + 20 * sizeof(body));
    /* What the file itself says, through another connection. */
    assert_int_equal(c.db_bytes, raw_int(f->dir, "SELECT page_count *"
                                                 " page_size FROM"
                                                 " pragma_page_count(),"
                                                 " pragma_page_size()"));
}

static void
t_recent(void **state)
{
    struct fx *f = *state;
    struct store_reports l;
    unsigned i;

    assert_int_equal(store_recent(f->st, 10, true, &l), STORE_OK);
    assert_int_equal(l.n, 0);
    store_reports_free(&l);
    for (i = 1; i <= 8; i++)
        assert_int_equal(add(f->st, i, i % 3, i), STORE_OK);
    assert_int_equal(mark_delivered(f->st, 8, 100), STORE_OK);
    assert_int_equal(mark_dead(f->st, 7, "gone"), STORE_OK);

    assert_int_equal(store_recent(f->st, 3, false, &l), STORE_OK);
    assert_int_equal(l.n, 3);
    assert_int_equal(strtoul(l.v[0].report_id, NULL, 16), 8);
    assert_int_equal(l.v[0].state, STORE_DELIVERED);
    assert_int_equal(l.v[0].delivered_ms, 100);
    assert_int_equal(strtoul(l.v[1].report_id, NULL, 16), 7);
    assert_int_equal(l.v[1].state, STORE_DEAD);
    assert_string_equal(l.v[1].last_error, "gone");
    assert_int_equal(strtoul(l.v[2].report_id, NULL, 16), 6);
    assert_int_equal(l.v[2].state, STORE_PENDING);
    assert_null(l.v[0].body);
    store_reports_free(&l);
    assert_null(l.v);

    assert_int_equal(store_recent(f->st, 100, true, &l), STORE_OK);
    assert_int_equal(l.n, 8);
    assert_non_null(strstr(l.v[7].body, "\"n\":1}"));
    assert_int_equal(l.v[7].body_len, strlen(l.v[7].body));
    assert_int_equal(l.v[7].seq, 1);
    store_reports_free(&l);
}

/* The cursor: after a seq, oldest first, by container and by state;
 * the latest report of a container with its body. */
static void
t_after(void **state)
{
    struct fx *f = *state;
    struct store_query q = {.after = 0, .max = 100, .state = -1};
    char ctr[STORE_ID_MAX + 1];
    struct store_reports l;
    struct store_report r;
    unsigned i;

    for (i = 1; i <= 9; i++)
        assert_int_equal(add(f->st, i, i % 3, i), STORE_OK);
    assert_int_equal(mark_delivered(f->st, 3, 100), STORE_OK);
    assert_int_equal(mark_dead(f->st, 6, "no"), STORE_OK);

    assert_int_equal(store_after(f->st, &q, &l), STORE_OK);
    assert_int_equal(l.n, 9);
    for (i = 0; i < 9; i++)
        assert_int_equal(l.v[i].seq, i + 1);
    assert_null(l.v[0].body);
    store_reports_free(&l);

    q.after = 4;
    q.max = 2;
    q.with_body = true;
    assert_int_equal(store_after(f->st, &q, &l), STORE_OK);
    assert_int_equal(l.n, 2);
    assert_int_equal(l.v[0].seq, 5);
    assert_int_equal(l.v[1].seq, 6);
    assert_non_null(l.v[0].body);
    store_reports_free(&l);

    /* Reports 3, 6 and 9 are container 0's. */
    tu_container_id(ctr, 0);
    q.after = 0;
    q.max = 100;
    q.container_id = ctr;
    assert_int_equal(store_after(f->st, &q, &l), STORE_OK);
    assert_int_equal(l.n, 3);
    assert_int_equal(l.v[0].seq, 3);
    assert_int_equal(l.v[2].seq, 9);
    store_reports_free(&l);
    q.state = STORE_DEAD;
    assert_int_equal(store_after(f->st, &q, &l), STORE_OK);
    assert_int_equal(l.n, 1);
    assert_int_equal(l.v[0].seq, 6);
    store_reports_free(&l);
    q.container_id = NULL;
    q.state = STORE_PENDING;
    assert_int_equal(store_after(f->st, &q, &l), STORE_OK);
    assert_int_equal(l.n, 7);
    store_reports_free(&l);
    /* The statement keeps no filter of the last call. */
    q.state = -1;
    q.after = 8;
    assert_int_equal(store_after(f->st, &q, &l), STORE_OK);
    assert_int_equal(l.n, 1);
    store_reports_free(&l);

    /* Newest first, from the top (a filter without a cursor). */
    q.after = 0;
    q.max = 2;
    q.newest_first = true;
    q.state = STORE_PENDING;
    assert_int_equal(store_after(f->st, &q, &l), STORE_OK);
    assert_int_equal(l.n, 2);
    assert_int_equal(l.v[0].seq, 9);
    assert_int_equal(l.v[1].seq, 8);
    store_reports_free(&l);
    q.newest_first = false;
    q.state = -1;
    {
        int64_t last = -1;

        assert_int_equal(store_last_seq(f->st, &last), STORE_OK);
        assert_int_equal(last, 9);
    }

    q.after = -1;
    assert_int_equal(store_after(f->st, &q, &l), STORE_INVALID);
    q.after = 0;
    q.max = STORE_LIST_MAX + 1;
    assert_int_equal(store_after(f->st, &q, &l), STORE_INVALID);
    q.max = 1;
    q.container_id = "bad id";
    assert_int_equal(store_after(f->st, &q, &l), STORE_INVALID);
    assert_int_equal(l.n, 0);

    assert_int_equal(store_latest_report_body(f->st, ctr, &r), STORE_OK);
    assert_int_equal(r.seq, 9);
    assert_non_null(strstr(r.body, "\"n\":9}"));
    store_report_clear(&r);
    tu_container_id(ctr, 7);
    assert_int_equal(store_latest_report_body(f->st, ctr, &r),
                     STORE_NOT_FOUND);
}

/* The operator's requeue: dead and pending reports go back to pending
 * with their attempts at 0 and the head where it belongs; a delivered
 * one is a conflict, an unknown one not found. */
static void
t_requeue(void **state)
{
    struct fx *f = *state;
    char id[STORE_REPORT_ID_MAX + 1];
    struct store_reports due;
    struct store_counts c;
    struct store_report r;
    uint64_t n = 99;

    /* Container 1: reports 1 (dead), 2 (pending, the head now). */
    assert_int_equal(add(f->st, 1, 1, 10), STORE_OK);
    assert_int_equal(add(f->st, 2, 1, 10), STORE_OK);
    assert_int_equal(add(f->st, 3, 2, 10), STORE_OK);
    assert_int_equal(add(f->st, 4, 3, 10), STORE_OK);
    assert_int_equal(mark_retry(f->st, 1, 50, "HTTP 503"), STORE_OK);
    assert_int_equal(mark_dead(f->st, 1, "HTTP 422"), STORE_OK);
    assert_int_equal(mark_delivered(f->st, 3, 20), STORE_OK);
    assert_int_equal(mark_retry(f->st, 4, 1000000, "HTTP 500"), STORE_OK);

    tu_report_id(id, 1);
    assert_int_equal(store_requeue(f->st, id, 30), STORE_OK);
    assert_int_equal(get(f->st, 1, &r), STORE_OK);
    assert_int_equal(r.state, STORE_PENDING);
    assert_int_equal(r.attempts, 0);
    assert_int_equal(r.next_attempt_ms, 30);
    assert_null(r.last_error);
    assert_int_equal(r.dead_reason, STORE_DEAD_NONE);
    store_report_clear(&r);
    assert_int_equal(store_check(f->st), STORE_OK);
    /* Report 1 is its container's head again, and due: before 2. */
    assert_int_equal(store_due(f->st, 40, 10, &due), STORE_OK);
    assert_int_equal(due.n, 1);
    assert_int_equal(due.v[0].seq, 1);
    store_reports_free(&due);

    /* A pending report waiting for its retry is due now. */
    tu_report_id(id, 4);
    assert_int_equal(store_requeue(f->st, id, 40), STORE_OK);
    assert_int_equal(get(f->st, 4, &r), STORE_OK);
    assert_int_equal(r.attempts, 0);
    assert_int_equal(r.next_attempt_ms, 40);
    store_report_clear(&r);

    tu_report_id(id, 3);
    assert_int_equal(store_requeue(f->st, id, 40), STORE_CONFLICT);
    assert_string_equal(store_strerror(STORE_CONFLICT), "already delivered");
    tu_report_id(id, 77);
    assert_int_equal(store_requeue(f->st, id, 40), STORE_NOT_FOUND);
    assert_int_equal(store_requeue(f->st, "bad id", 40), STORE_INVALID);

    /* All dead letters at once; none is a count of 0. */
    assert_int_equal(mark_dead(f->st, 1, "HTTP 422"), STORE_OK);
    assert_int_equal(mark_dead(f->st, 4, "HTTP 400"), STORE_OK);
    assert_int_equal(store_counts(f->st, &c), STORE_OK);
    assert_int_equal(c.dead, 2);
    assert_int_equal(store_requeue_dead(f->st, 60, &n), STORE_OK);
    assert_int_equal(n, 2);
    assert_int_equal(store_counts(f->st, &c), STORE_OK);
    assert_int_equal(c.dead, 0);
    assert_int_equal(c.pending, 3);
    assert_int_equal(store_check(f->st), STORE_OK);
    assert_int_equal(store_due(f->st, 60, 10, &due), STORE_OK);
    assert_int_equal(due.n, 2); /* 1 (container 1's head) and 4 */
    assert_int_equal(due.v[0].seq, 1);
    assert_int_equal(due.v[1].seq, 4);
    store_reports_free(&due);
    assert_int_equal(store_requeue_dead(f->st, 70, &n), STORE_OK);
    assert_int_equal(n, 0);
    /* Kept across a reopen: it was committed. */
    reopen(f);
    assert_int_equal(store_counts(f->st, &c), STORE_OK);
    assert_int_equal(c.pending, 3);
    assert_int_equal(store_check(f->st), STORE_OK);
}

struct made {
    unsigned n;
    char report_id[STORE_REPORT_ID_MAX + 1];
    char container_id[STORE_ID_MAX + 1];
};

static void
on_made(const char *report_id, const char *container_id, void *arg)
{
    struct made *m = arg;

    m->n++;
    snprintf(m->report_id, sizeof(m->report_id), "%s", report_id);
    snprintf(m->container_id, sizeof(m->container_id), "%s", container_id);
}

/* Reports added together: one transaction, each with its container's
 * record however many others wait; a duplicate or an invalid one among
 * them is refused alone; the hook runs for each stored; a batch of
 * duplicates only commits nothing; more than STORE_REPORTS_MAX at once
 * is refused whole. */
static void
t_add_reports(void **state)
{
    struct fx *f = *state;
    struct store_new_report v[STORE_REPORTS_MAX + 1];
    char ids[6][STORE_REPORT_ID_MAX + 1], ctrs[6][STORE_ID_MAX + 1];
    char ctr[STORE_ID_MAX + 1], sql[256];
    struct made m = {0};
    struct store_counts c;
    uint64_t commits;
    unsigned i;

    assert_int_equal(add(f->st, 1, 1, 5), STORE_OK); /* ids[1], below */
    for (i = 0; i < 300; i++) { /* others waiting: more than a slice */
        tu_container_id(ctr, 1000 + i);
        assert_int_equal(store_put_container(f->st, ctr, "{}", 2, 1),
                         STORE_OK);
    }
    memset(v, 0, sizeof(v));
    for (i = 0; i < 6; i++) {
        tu_report_id(ids[i], i);
        tu_container_id(ctrs[i], i);
        assert_int_equal(
            store_put_container(f->st, ctrs[i], "{\"s\":9}", 7, 2), STORE_OK);
        v[i].report_id = ids[i];
        v[i].container_id = ctrs[i];
        v[i].body = "{\"r\":1}";
        v[i].len = 7;
    }
    v[4].report_id = "not an id"; /* invalid */
    store_on_report(f->st, on_made, &m);
    commits = store_commits(f->st);
    assert_int_equal(store_add_reports(f->st, v, 6, 20, false), STORE_OK);
    assert_int_equal(store_commits(f->st), commits + 1);
    assert_int_equal(v[0].result, STORE_OK);
    assert_int_equal(v[1].result, STORE_DUPLICATE);
    assert_int_equal(v[2].result, STORE_OK);
    assert_int_equal(v[3].result, STORE_OK);
    assert_true(v[4].result < 0);
    assert_int_equal(v[5].result, STORE_OK);
    assert_int_equal(m.n, 4);
    assert_string_equal(m.report_id, ids[5]);
    assert_int_equal(store_counts(f->st, &c), STORE_OK);
    assert_int_equal(c.pending, 5);
    /* Each report's record is on disk with it (the invalid one's need
     * not be), the others a slice. */
    for (i = 0; i < 6; i++) {
        if (i == 4)
            continue;
        snprintf(sql, sizeof(sql),
                 "SELECT count(*) FROM containers WHERE id = '%s'", ctrs[i]);
        assert_int_equal(raw_int(f->dir, sql), 1);
    }
    assert_true(raw_int(f->dir, "SELECT count(*) FROM containers") <= 6 + 32);
    /* Only duplicates: nothing committed, nothing called. */
    commits = store_commits(f->st);
    assert_int_equal(store_add_reports(f->st, v, 2, 30, true), STORE_OK);
    assert_int_equal(v[0].result, STORE_DUPLICATE);
    assert_int_equal(v[1].result, STORE_DUPLICATE);
    assert_int_equal(store_commits(f->st), commits);
    assert_int_equal(m.n, 4);
    /* Too many at once. */
    for (i = 0; i <= STORE_REPORTS_MAX; i++)
        v[i] = v[0];
    assert_true(store_add_reports(f->st, v, STORE_REPORTS_MAX + 1, 40, false) <
                0);
    store_on_report(f->st, NULL, NULL);
    assert_int_equal(store_check(f->st), STORE_OK);
}

/* While on, the database refuses to delete a container record (a write
 * that fails inside a transaction). */
static void
refuse_deletes(struct fx *f, bool on)
{
    assert_int_equal(
        sqlite3_exec(store_sqlite(f->st),
                     on ? "CREATE TRIGGER refuse BEFORE DELETE ON containers"
                          " BEGIN SELECT RAISE(ABORT, 'refused by the test');"
                          " END;"
                        : "DROP TRIGGER refuse",
                     NULL, NULL, NULL),
        SQLITE_OK);
}

/* A report with `forget` deletes its container's record in its own
 * transaction: one commit for both, the record's pending change gone
 * with it (never written), a duplicate's record too; an invalid one's
 * record stays, and a refused transaction leaves the record and its
 * pending change as they were. */
static int
ctr_rows(struct fx *f, const char *id)
{
    char sql[256];

    snprintf(sql, sizeof(sql),
             "SELECT count(*) FROM containers WHERE id = '%s'", id);
    return raw_int(f->dir, sql);
}

static void
t_add_reports_forget(void **state)
{
    struct fx *f = *state;
    struct store_new_report v[3];
    char ids[3][STORE_REPORT_ID_MAX + 1], ctrs[3][STORE_ID_MAX + 1];
    char ctr[STORE_ID_MAX + 1];
    struct store_counts c;
    uint64_t commits, w0;
    unsigned i;

    memset(v, 0, sizeof(v));
    for (i = 0; i < 3; i++) {
        tu_report_id(ids[i], 10 + i);
        tu_container_id(ctrs[i], 10 + i);
        assert_int_equal(store_put_container(f->st, ctrs[i], "{}", 2, 1),
                         STORE_OK);
        v[i].report_id = ids[i];
        v[i].container_id = ctrs[i];
        v[i].body = "{\"r\":1}";
        v[i].len = 7;
        v[i].forget = true;
    }
    assert_int_equal(store_flush(f->st), STORE_OK);
    /* Others waiting, more than a transaction takes: it writes the named
     * records and a slice, and the rest stay pending. */
    for (i = 0; i < 300; i++) {
        tu_container_id(ctr, 1000 + i);
        assert_int_equal(store_put_container(f->st, ctr, "{}", 2, 1),
                         STORE_OK);
    }
    /* Changed since: pending, and the transaction must not write it. */
    for (i = 0; i < 3; i++)
        assert_int_equal(
            store_put_container(f->st, ctrs[i], "{\"s\":9}", 7, 2), STORE_OK);
    v[2].report_id = "not an id"; /* invalid: its record stays */
    commits = store_commits(f->st);
    w0 = store_record_writes(f->st);
    assert_int_equal(store_add_reports(f->st, v, 3, 20, false), STORE_OK);
    assert_int_equal(store_commits(f->st), commits + 1);
    assert_int_equal(v[0].result, STORE_OK);
    assert_true(v[0].forgotten);
    assert_int_equal(v[1].result, STORE_OK);
    assert_true(v[1].forgotten);
    assert_true(v[2].result < 0);
    assert_false(v[2].forgotten);
    assert_int_equal(ctr_rows(f, ctrs[0]), 0);
    assert_int_equal(ctr_rows(f, ctrs[1]), 0);
    /* The two deletes, the invalid one's record (a named one) and a
     * slice of the others; what stays pending is none of the two. */
    assert_true(store_record_writes(f->st) >= w0 + 3);
    assert_true(store_pending(f->st) > 0);
    assert_int_equal(ctr_rows(f, ctrs[2]), 1);
    assert_int_equal(store_flush(f->st), STORE_OK);
    assert_int_equal(ctr_rows(f, ctrs[0]), 0);
    assert_int_equal(ctr_rows(f, ctrs[1]), 0);

    /* A duplicate: nothing stored, its record forgotten all the same, in
     * a commit of its own. */
    assert_int_equal(store_put_container(f->st, ctrs[0], "{}", 2, 3),
                     STORE_OK);
    assert_int_equal(store_flush(f->st), STORE_OK);
    assert_int_equal(ctr_rows(f, ctrs[0]), 1);
    commits = store_commits(f->st);
    assert_int_equal(store_add_reports(f->st, v, 1, 30, false), STORE_OK);
    assert_int_equal(v[0].result, STORE_DUPLICATE);
    assert_true(v[0].forgotten);
    assert_int_equal(store_commits(f->st), commits + 1);
    assert_int_equal(ctr_rows(f, ctrs[0]), 0);
    /* Without `forget`, a duplicate commits nothing. */
    assert_int_equal(store_put_container(f->st, ctrs[0], "{}", 2, 4),
                     STORE_OK);
    assert_int_equal(store_flush(f->st), STORE_OK);
    v[0].forget = false;
    commits = store_commits(f->st);
    assert_int_equal(store_add_reports(f->st, v, 1, 40, false), STORE_OK);
    assert_false(v[0].forgotten);
    assert_int_equal(store_commits(f->st), commits);
    assert_int_equal(ctr_rows(f, ctrs[0]), 1);

    /* Refused: the record and its pending change stay, written later. */
    tu_report_id(ids[0], 20);
    v[0].forget = true;
    assert_int_equal(store_put_container(f->st, ctrs[0], "{\"s\":5}", 7, 5),
                     STORE_OK);
    refuse_deletes(f, true);
    assert_true(store_add_reports(f->st, v, 1, 50, false) < 0);
    assert_false(v[0].forgotten);
    refuse_deletes(f, false);
    assert_int_equal(store_pending(f->st), 1);
    assert_int_equal(store_counts(f->st, &c), STORE_OK);
    assert_int_equal(store_flush(f->st), STORE_OK);
    assert_int_equal(raw_int(f->dir, "SELECT count(*) FROM containers WHERE "
                                     "record = '{\"s\":5}'"),
                     1);
    assert_int_equal(store_check(f->st), STORE_OK);
}

/* store_set_reports_checkpoint: the checkpoint goes in the next
 * store_add_reports' transaction, only when every report of it is stored
 * (or was already), and a pending older value of it goes with it; the
 * next call without it writes none. */
static void
t_reports_checkpoint(void **state)
{
    struct fx *f = *state;
    struct store_new_report v[2];
    char ids[4][STORE_REPORT_ID_MAX + 1], ctr[STORE_ID_MAX + 1];
    uint64_t commits;
    int64_t got = 0;
    unsigned i;

    for (i = 0; i < 4; i++)
        tu_report_id(ids[i], 40 + i);
    tu_container_id(ctr, 40);
    memset(v, 0, sizeof(v));
    for (i = 0; i < 2; i++) {
        v[i].report_id = ids[i];
        v[i].container_id = ctr;
        v[i].body = "{}";
        v[i].len = 2;
    }
    /* An older value waits to be flushed: it goes with the new one. */
    assert_int_equal(store_set_checkpoint(f->st, "j", 10), STORE_OK);
    assert_int_equal(store_pending(f->st), 1);
    commits = store_commits(f->st);
    store_set_reports_checkpoint(f->st, "j", 100);
    assert_int_equal(store_add_reports(f->st, v, 2, 1, false), STORE_OK);
    assert_true(store_reports_checkpoint_written(f->st));
    assert_int_equal(store_commits(f->st), commits + 1);
    assert_int_equal(store_get_checkpoint(f->st, "j", &got), STORE_OK);
    assert_int_equal(got, 100);
    assert_int_equal(store_pending(f->st), 0);
    assert_int_equal(store_flush(f->st), STORE_OK);
    assert_int_equal(store_get_checkpoint(f->st, "j", &got), STORE_OK);
    assert_int_equal(got, 100);

    /* The next call, without it: no checkpoint. */
    v[0].report_id = ids[2];
    assert_int_equal(store_add_reports(f->st, v, 1, 2, false), STORE_OK);
    assert_false(store_reports_checkpoint_written(f->st));
    assert_int_equal(store_get_checkpoint(f->st, "j", &got), STORE_OK);
    assert_int_equal(got, 100);

    /* One of them refused: not written; a pending value stays pending. */
    assert_int_equal(store_set_checkpoint(f->st, "j", 150), STORE_OK);
    v[0].report_id = ids[3];
    v[1].report_id = "not an id";
    store_set_reports_checkpoint(f->st, "j", 200);
    assert_int_equal(store_add_reports(f->st, v, 2, 3, false), STORE_OK);
    assert_int_equal(v[0].result, STORE_OK);
    assert_false(store_reports_checkpoint_written(f->st));
    assert_int_equal(store_get_checkpoint(f->st, "j", &got), STORE_OK);
    assert_true(got == 100 || got == 150);
    assert_int_equal(store_flush(f->st), STORE_OK);
    assert_int_equal(store_get_checkpoint(f->st, "j", &got), STORE_OK);
    assert_int_equal(got, 150);

    /* Only duplicates: nothing stored, nothing committed, not written. */
    v[1] = v[0];
    store_set_reports_checkpoint(f->st, "j", 300);
    commits = store_commits(f->st);
    assert_int_equal(store_add_reports(f->st, v, 2, 4, false), STORE_OK);
    assert_false(store_reports_checkpoint_written(f->st));
    assert_int_equal(store_commits(f->st), commits);
    assert_int_equal(store_get_checkpoint(f->st, "j", &got), STORE_OK);
    assert_int_equal(got, 150);
    assert_int_equal(store_check(f->st), STORE_OK);
}

/* The hook runs once per report made durable, never for a duplicate or
 * a failed add. */
static void
t_report_hook(void **state)
{
    struct fx *f = *state;
    char id[STORE_REPORT_ID_MAX + 1], ctr[STORE_ID_MAX + 1];
    struct made m = {0};
    uint64_t eff;

    store_on_report(f->st, on_made, &m);
    assert_int_equal(add(f->st, 1, 5, 10), STORE_OK);
    assert_int_equal(m.n, 1);
    tu_report_id(id, 1);
    tu_container_id(ctr, 5);
    assert_string_equal(m.report_id, id);
    assert_string_equal(m.container_id, ctr);
    assert_int_equal(add(f->st, 1, 5, 10), STORE_DUPLICATE);
    assert_int_equal(m.n, 1);
    assert_int_equal(store_add_delivered(f->st, "r2", ctr, "{}", 2, 10),
                     STORE_OK);
    assert_int_equal(m.n, 2);
    assert_string_equal(m.report_id, "r2");
    /* A full store: no report, no call. */
    assert_int_equal(store_set_size_limit(f->st, 1, &eff), STORE_OK);
    for (unsigned i = 10; i < 200; i++)
        if (add(f->st, i, i, 10) != STORE_OK)
            break;
    assert_int_equal(store_set_size_limit(f->st, 0, NULL), STORE_OK);
    {
        unsigned before = m.n;
        struct store_counts c;

        assert_int_equal(store_counts(f->st, &c), STORE_OK);
        assert_int_equal(c.pending + c.delivered, before);
    }
    store_on_report(f->st, NULL, NULL);
    assert_int_equal(add(f->st, 300, 5, 10), STORE_OK);
}

/* ---- checkpoints and container records -------------------------------- */

static void
t_checkpoints(void **state)
{
    struct fx *f = *state;
    int64_t v = 42;

    assert_int_equal(store_get_checkpoint(f->st, "docker.events", &v),
                     STORE_NOT_FOUND);
    assert_int_equal(v, 42);
    assert_int_equal(
        store_set_checkpoint(f->st, "docker.events", 1764678177864550554LL),
        STORE_OK);
    assert_int_equal(store_set_checkpoint(f->st, "containerd.reconcile", -5),
                     STORE_OK);
    /* Seen before the flush, and after it. */
    assert_int_equal(store_get_checkpoint(f->st, "docker.events", &v),
                     STORE_OK);
    assert_int_equal(v, 1764678177864550554LL);
    assert_int_equal(store_pending(f->st), 2);
    assert_int_equal(store_flush(f->st), STORE_OK);
    assert_int_equal(store_pending(f->st), 0);
    assert_int_equal(raw_int(f->dir, "SELECT value FROM checkpoints"
                                     " WHERE key = 'docker.events'"),
                     1764678177864550554LL);
    assert_int_equal(store_set_checkpoint(f->st, "docker.events", INT64_MAX),
                     STORE_OK);
    assert_int_equal(store_flush(f->st), STORE_OK);
    reopen(f);
    assert_int_equal(store_get_checkpoint(f->st, "docker.events", &v),
                     STORE_OK);
    assert_int_equal(v, INT64_MAX);
    assert_int_equal(store_get_checkpoint(f->st, "containerd.reconcile", &v),
                     STORE_OK);
    assert_int_equal(v, -5);
}

/* The records as "id=json;..." sorted by id, for one readable assert. */
static int
cmp_ctr(const void *a, const void *b)
{
    return strcmp(((const struct store_container *)a)->id,
                  ((const struct store_container *)b)->id);
}

static void
ctr_str(struct store *st, char *buf, size_t len)
{
    struct store_containers l;
    size_t i, o = 0;

    assert_int_equal(store_get_containers(st, &l), STORE_OK);
    if (l.n > 0)
        qsort(l.v, l.n, sizeof(*l.v), cmp_ctr);
    buf[0] = '\0';
    for (i = 0; i < l.n; i++) {
        assert_int_equal(strlen(l.v[i].json), l.v[i].len);
        o += (size_t)snprintf(buf + o, len - o, "%s=%s@%lld;", l.v[i].id,
                              l.v[i].json, (long long)l.v[i].updated_ms);
    }
    store_containers_free(&l);
}

static void
t_containers(void **state)
{
    struct fx *f = *state;
    char buf[512];

    ctr_str(f->st, buf, sizeof(buf));
    assert_string_equal(buf, "");
    assert_int_equal(store_put_container(f->st, "a", "{\"s\":1}", 7, 10),
                     STORE_OK);
    assert_int_equal(store_put_container(f->st, "b", "{\"s\":2}", 7, 11),
                     STORE_OK);
    /* Not yet written, but listed. */
    assert_int_equal(raw_int(f->dir, "SELECT count(*) FROM containers"), 0);
    ctr_str(f->st, buf, sizeof(buf));
    assert_string_equal(buf, "a={\"s\":1}@10;b={\"s\":2}@11;");
    assert_int_equal(store_flush(f->st), STORE_OK);
    assert_int_equal(raw_int(f->dir, "SELECT count(*) FROM containers"), 2);
    reopen(f);
    ctr_str(f->st, buf, sizeof(buf));
    assert_string_equal(buf, "a={\"s\":1}@10;b={\"s\":2}@11;");

    /* Pending changes win over the rows: a newer a, b gone, c new. */
    assert_int_equal(store_put_container(f->st, "a", "{\"s\":3}", 7, 20),
                     STORE_OK);
    assert_int_equal(store_delete_container(f->st, "b"), STORE_OK);
    assert_int_equal(store_put_container(f->st, "c", "{}", 2, 21), STORE_OK);
    assert_int_equal(store_delete_container(f->st, "nobody"), STORE_OK);
    /* Put then deleted in the same turn: never written. */
    assert_int_equal(store_put_container(f->st, "d", "{}", 2, 22), STORE_OK);
    assert_int_equal(store_delete_container(f->st, "d"), STORE_OK);
    ctr_str(f->st, buf, sizeof(buf));
    assert_string_equal(buf, "a={\"s\":3}@20;c={}@21;");
    assert_int_equal(store_flush(f->st), STORE_OK);
    ctr_str(f->st, buf, sizeof(buf));
    assert_string_equal(buf, "a={\"s\":3}@20;c={}@21;");
    /* Deleted, then put again before the flush: the put wins. */
    assert_int_equal(store_delete_container(f->st, "c"), STORE_OK);
    assert_int_equal(store_put_container(f->st, "c", "{\"x\":1}", 7, 30),
                     STORE_OK);
    /* store_close flushes. */
    assert_int_equal(close_store(f->st), STORE_OK);
    f->st = must_open(f->dir);
    ctr_str(f->st, buf, sizeof(buf));
    assert_string_equal(buf, "a={\"s\":3}@20;c={\"x\":1}@30;");
}

/* Many updates, one transaction: coalesced per key, and all or nothing. */
static void
t_batch(void **state)
{
    struct fx *f = *state;
    struct store_containers l;
    char ctr[STORE_ID_MAX + 1], json[64], key[16];
    int64_t v;
    unsigned i;
    int n;

    for (i = 0; i < 5000; i++) {
        tu_container_id(ctr, i % 100);
        n = snprintf(json, sizeof(json), "{\"step\":%u}", i);
        assert_int_equal(store_put_container(f->st, ctr, json, (size_t)n, i),
                         STORE_OK);
        snprintf(key, sizeof(key), "k%u", i % 10);
        assert_int_equal(store_set_checkpoint(f->st, key, i), STORE_OK);
    }
    assert_int_equal(store_pending(f->st), 110);
    assert_int_equal(store_flush(f->st), STORE_OK);
    assert_int_equal(store_pending(f->st), 0);
    assert_int_equal(store_flush(f->st), STORE_OK); /* nothing to do */
    assert_int_equal(raw_int(f->dir, "SELECT count(*) FROM containers"), 100);
    assert_int_equal(raw_int(f->dir,
                             "SELECT sum(json_extract(record, '$.step'))"
                             " FROM containers"),
                     (4900 + 4999) * 100 / 2); /* the last value of each */
    assert_int_equal(store_get_checkpoint(f->st, "k3", &v), STORE_OK);
    assert_int_equal(v, 4993);
    /* The table grew past its first size and still finds everything. */
    assert_int_equal(store_get_containers(f->st, &l), STORE_OK);
    assert_int_equal(l.n, 100);
    store_containers_free(&l);
}

/* A flush of some: the named record first, at most `max` records, the
 * checkpoints only with the last of them; what is left stays pending and
 * is found, changed and written later as if nothing had left the table
 * (entries leave it by backward shift). */
static void
t_flush_some(void **state)
{
    struct fx *f = *state;
    struct store_containers l;
    char ctr[STORE_ID_MAX + 1], json[64], sql[256];
    int64_t v;
    unsigned i;
    int n, rounds = 0;

    for (i = 0; i < 300; i++) {
        tu_container_id(ctr, i);
        n = snprintf(json, sizeof(json), "{\"n\":%u}", i);
        assert_int_equal(store_put_container(f->st, ctr, json, (size_t)n, i),
                         STORE_OK);
    }
    assert_int_equal(store_set_checkpoint(f->st, "k", 7), STORE_OK);
    tu_container_id(ctr, 277);
    assert_int_equal(store_flush_some(f->st, ctr, 10), STORE_OK);
    assert_int_equal(store_pending(f->st), 291);
    assert_int_equal(raw_int(f->dir, "SELECT count(*) FROM containers"), 10);
    snprintf(sql, sizeof(sql),
             "SELECT count(*) FROM containers WHERE id = '%s'", ctr);
    assert_int_equal(raw_int(f->dir, sql), 1);
    assert_int_equal(raw_int(f->dir, "SELECT count(*) FROM checkpoints"), 0);
    /* Every one still found: changed, deleted, listed. */
    for (i = 0; i < 300; i += 3) {
        tu_container_id(ctr, i);
        n = snprintf(json, sizeof(json), "{\"n\":%u}", i + 1000);
        assert_int_equal(store_put_container(f->st, ctr, json, (size_t)n, i),
                         STORE_OK);
    }
    tu_container_id(ctr, 1);
    assert_int_equal(store_delete_container(f->st, ctr), STORE_OK);
    assert_int_equal(store_get_containers(f->st, &l), STORE_OK);
    assert_int_equal(l.n, 299);
    store_containers_free(&l);
    while (store_pending(f->st) > 0) {
        assert_int_equal(raw_int(f->dir, "SELECT count(*) FROM checkpoints"),
                         0);
        assert_int_equal(store_flush_some(f->st, NULL, 16), STORE_OK);
        assert_true(++rounds <= 300 / 16 + 2);
    }
    assert_true(rounds >= 300 / 16);
    assert_int_equal(raw_int(f->dir, "SELECT count(*) FROM checkpoints"), 1);
    assert_int_equal(store_get_checkpoint(f->st, "k", &v), STORE_OK);
    assert_int_equal(v, 7);
    assert_int_equal(raw_int(f->dir, "SELECT count(*) FROM containers"), 299);
    /* The last value of each: 1000 more for every third, 1 gone. */
    assert_int_equal(raw_int(f->dir, "SELECT sum(json_extract(record, '$.n'))"
                                     " FROM containers"),
                     299 * 300 / 2 - 1 + 100 * 1000);
    /* All that waits fits: one flush takes it, checkpoints too. */
    assert_int_equal(store_set_checkpoint(f->st, "k", 8), STORE_OK);
    tu_container_id(ctr, 2);
    assert_int_equal(store_put_container(f->st, ctr, "{}", 2, 5), STORE_OK);
    assert_int_equal(store_flush_some(f->st, NULL, 1), STORE_OK);
    assert_int_equal(store_pending(f->st), 0);
    assert_int_equal(raw_int(f->dir, "SELECT value FROM checkpoints"), 8);
    assert_int_equal(store_check(f->st), STORE_OK);
}

/* A report's transaction takes its container's record and a bounded
 * slice of what else waits, not everything. */
static void
t_report_carries_some(void **state)
{
    struct fx *f = *state;
    char id[STORE_REPORT_ID_MAX + 1], ctr[STORE_ID_MAX + 1], sql[256];
    unsigned i;

    for (i = 0; i < 200; i++) {
        tu_container_id(ctr, i);
        assert_int_equal(store_put_container(f->st, ctr, "{}", 2, i),
                         STORE_OK);
    }
    tu_report_id(id, 1);
    tu_container_id(ctr, 150);
    assert_int_equal(store_add_report(f->st, id, ctr, "{}", 2, 20), STORE_OK);
    assert_int_equal(raw_int(f->dir, "SELECT count(*) FROM containers"), 32);
    snprintf(sql, sizeof(sql),
             "SELECT count(*) FROM containers WHERE id = '%s'", ctr);
    assert_int_equal(raw_int(f->dir, sql), 1);
    assert_int_equal(store_pending(f->st), 168);
    assert_int_equal(store_flush(f->st), STORE_OK);
    assert_int_equal(raw_int(f->dir, "SELECT count(*) FROM containers"), 200);
}

static void
t_pending_bounds(void **state)
{
    struct fx *f = *state;
    const size_t rec = (size_t)1 << 20;
    char key[32];
    char *big;
    unsigned i;

    for (i = 0; i < STORE_PENDING_MAX; i++) {
        snprintf(key, sizeof(key), "k%u", i);
        assert_int_equal(store_set_checkpoint(f->st, key, i), STORE_OK);
    }
    /* A new key is refused; an update of a pending one is not. */
    assert_int_equal(store_set_checkpoint(f->st, "one-more", 1), STORE_FULL);
    assert_non_null(strstr(store_errmsg(f->st), "flush"));
    assert_int_equal(store_put_container(f->st, "c", "{}", 2, 1), STORE_FULL);
    assert_int_equal(store_set_checkpoint(f->st, "k7", -7), STORE_OK);
    assert_int_equal(store_flush(f->st), STORE_OK);
    assert_int_equal(store_set_checkpoint(f->st, "one-more", 1), STORE_OK);
    assert_int_equal(store_flush(f->st), STORE_OK);
    assert_int_equal(raw_int(f->dir, "SELECT count(*) FROM checkpoints"),
                     STORE_PENDING_MAX + 1);

    /* The bytes bound: 1 MiB records until 64 MiB are waiting (a size
     * that divides the bound, so it is reached exactly). */
    assert_true(rec <= STORE_RECORD_MAX);
    assert_int_equal(STORE_PENDING_BYTES_MAX % rec, 0);
    big = malloc(rec);
    assert_non_null(big);
    memset(big, '1', rec);
    for (i = 0; i < STORE_PENDING_BYTES_MAX / rec; i++) {
        snprintf(key, sizeof(key), "c%u", i);
        assert_int_equal(store_put_container(f->st, key, big, rec, 1),
                         STORE_OK);
    }
    assert_int_equal(store_put_container(f->st, "c-last", big, 1, 1),
                     STORE_FULL);
    /* Replacing a record with a smaller one makes room. */
    assert_int_equal(store_put_container(f->st, "c0", "{}", 2, 1), STORE_OK);
    assert_int_equal(store_put_container(f->st, "c-last", big, 1, 1),
                     STORE_OK);
    free(big);
    /* Not flushed: teardown's store_close writes 65 MiB. Drop them. */
    for (i = 0; i < STORE_PENDING_BYTES_MAX / rec; i++) {
        snprintf(key, sizeof(key), "c%u", i);
        assert_int_equal(store_delete_container(f->st, key), STORE_OK);
    }
}

/* ---- a full disk ------------------------------------------------------ */

static void
t_full_size_limit(void **state)
{
    struct fx *f = *state;
    char id[STORE_REPORT_ID_MAX + 1], ctr[STORE_ID_MAX + 1], key[16];
    static char body[16384];
    struct store_counts c, c2;
    struct store_report r;
    uint64_t eff;
    unsigned i, ok = 0;
    int res = STORE_OK;
    int64_t v;

    memset(body, 'b', sizeof(body));
    body[0] = '"';
    body[sizeof(body) - 1] = '"';
    tu_container_id(ctr, 1);
    for (i = 0; i < 10; i++)
        assert_int_equal(add(f->st, i, i, 1), STORE_OK);
    assert_int_equal(store_put_container(f->st, ctr, "{\"v\":1}", 7, 1),
                     STORE_OK);
    assert_int_equal(store_set_checkpoint(f->st, "events", 1), STORE_OK);
    assert_int_equal(store_flush(f->st), STORE_OK);

    /* Capped at (about) the current size: the next pages are refused. */
    assert_int_equal(store_counts(f->st, &c), STORE_OK);
    assert_int_equal(store_set_size_limit(f->st, c.db_bytes + 65536, &eff),
                     STORE_OK);
    assert_true(eff >= c.db_bytes && eff <= c.db_bytes + 65536);
    for (i = 100; i < 200; i++) {
        tu_report_id(id, i);
        res = store_add_report(f->st, id, ctr, body, sizeof(body), i);
        if (res != STORE_OK)
            break;
        ok++;
    }
    assert_int_equal(res, STORE_FULL);
    assert_non_null(strstr(store_errmsg(f->st), "full"));
    assert_true(ok >= 1 && ok < 10); /* the cap allowed about 4 */
    /* The refused report is not there, and did not use up a seq. */
    assert_int_equal(store_get_report(f->st, id, false, &r), STORE_NOT_FOUND);
    assert_int_equal(store_counts(f->st, &c2), STORE_OK);
    assert_int_equal(c2.pending, 10 + ok);

    /* Container records and checkpoints: the flush fails whole, and
     * everything stays pending, readable, for the next try. */
    for (i = 0; i < 30; i++) {
        snprintf(key, sizeof(key), "c%u", i);
        assert_int_equal(
            store_put_container(f->st, key, body, sizeof(body), 2), STORE_OK);
    }
    assert_int_equal(store_set_checkpoint(f->st, "events", 2), STORE_OK);
    assert_int_equal(store_flush(f->st), STORE_FULL);
    assert_int_equal(store_pending(f->st), 31);
    assert_int_equal(store_flush(f->st), STORE_FULL); /* still */
    assert_int_equal(store_get_checkpoint(f->st, "events", &v), STORE_OK);
    assert_int_equal(v, 2);
    assert_int_equal(raw_int(f->dir, "SELECT value FROM checkpoints"), 1);
    assert_int_equal(raw_int(f->dir, "SELECT count(*) FROM containers"), 1);
    /* What needs no new page still works: reads, marks, retention. */
    assert_int_equal(mark_delivered(f->st, 0, 5), STORE_OK);
    assert_int_equal(store_prune(f->st, 10, 0, -1, NULL), STORE_OK);
    assert_int_equal(store_check(f->st), STORE_OK);

    /* Room again: everything that waited goes in, new reports too. */
    assert_int_equal(store_set_size_limit(f->st, 0, &eff), STORE_OK);
    assert_true(eff > 1000000000ull);
    assert_int_equal(store_flush(f->st), STORE_OK);
    assert_int_equal(store_pending(f->st), 0);
    assert_int_equal(store_add_report(f->st, id, ctr, body, sizeof(body), 9),
                     STORE_OK);
    reopen(f);
    assert_int_equal(store_check(f->st), STORE_OK);
    for (i = 1; i < 10; i++) {
        assert_int_equal(get(f->st, i, &r), STORE_OK);
        store_report_clear(&r);
    }
    assert_int_equal(get(f->st, 0, &r), STORE_NOT_FOUND); /* pruned */
    for (i = 100; i <= 100 + ok; i++) {
        assert_int_equal(get(f->st, i, &r), STORE_OK);
        store_report_clear(&r);
    }
    assert_int_equal(store_get_checkpoint(f->st, "events", &v), STORE_OK);
    assert_int_equal(v, 2);
    assert_int_equal(raw_int(f->dir, "SELECT count(*) FROM containers"), 31);
}

/*
 * Real write errors: a child (RLIMIT_FSIZE is per process) lets its files
 * grow only a little, so SQLite's writes to the WAL really fail (a short
 * write is SQLITE_FULL, EFBIG after it SQLITE_IOERR). Returns the first
 * failed check's line, 0 if all passed.
 */
static int
fsize_child(const char *dir)
{
    char id[STORE_REPORT_ID_MAX + 1], ctr[STORE_ID_MAX + 1], path[128];
    static char body[16384];
    struct store_report r;
    struct rlimit rl;
    struct store *st;
    struct stat sb;
    unsigned i, ok = 0;
    int res = STORE_OK, res2, line = 0;

#define CHECK(c)                                                              \
    do {                                                                      \
        if (!(c)) {                                                           \
            line = __LINE__;                                                  \
            goto out;                                                         \
        }                                                                     \
    } while (0)

    memset(body, 'b', sizeof(body));
    body[0] = '"';
    body[sizeof(body) - 1] = '"';
    tu_container_id(ctr, 1);
    CHECK(open_store(dir, &st, NULL, 0) == STORE_OK);
    for (i = 0; i < 5; i++)
        CHECK(add(st, i, 1, 1) == STORE_OK);
    snprintf(path, sizeof(path), "%s/reapd.db-wal", dir);
    CHECK(stat(path, &sb) == 0);
    CHECK(getrlimit(RLIMIT_FSIZE, &rl) == 0);
    rl.rlim_cur = (rlim_t)sb.st_size + 40000;
    CHECK(setrlimit(RLIMIT_FSIZE, &rl) == 0);
    for (i = 100; i < 200; i++) {
        tu_report_id(id, i);
        res = store_add_report(st, id, ctr, body, sizeof(body), i);
        if (res != STORE_OK)
            break;
        ok++;
    }
    /* ENOSPC is SQLITE_FULL; EFBIG here, like EDQUOT, SQLITE_IOERR. */
    CHECK(res == STORE_FULL || res == STORE_IOERR);
    CHECK(store_get_report(st, id, false, &r) == STORE_NOT_FOUND);
    /* Again: a second error in a row is handled the same way. */
    CHECK(store_add_report(st, id, ctr, body, sizeof(body), i) < 0);
    for (i = 0; i < 4; i++) { /* more than one report's worth */
        tu_container_id(ctr, i);
        CHECK(store_put_container(st, ctr, body, sizeof(body), 1) == STORE_OK);
    }
    res2 = store_flush(st);
    CHECK(res2 == STORE_FULL || res2 == STORE_IOERR);
    CHECK(store_pending(st) == 4);
    print_message("write errors: report insert -> %s, flush -> %s (%s)\n",
                  store_strerror(res), store_strerror(res2), store_errmsg(st));

    rl.rlim_cur = rl.rlim_max;
    CHECK(setrlimit(RLIMIT_FSIZE, &rl) == 0);
    CHECK(store_flush(st) == STORE_OK);
    CHECK(store_add_report(st, id, ctr, body, sizeof(body), 1) == STORE_OK);
    CHECK(store_check(st) == STORE_OK);
    CHECK(close_store(st) == STORE_OK);
    CHECK(open_store(dir, &st, NULL, 0) == STORE_OK);
    CHECK(store_check(st) == STORE_OK);
    for (i = 0; i < 5; i++) {
        CHECK(get(st, i, &r) == STORE_OK);
        store_report_clear(&r);
    }
    for (i = 100; i <= 100 + ok; i++) {
        CHECK(get(st, i, &r) == STORE_OK);
        store_report_clear(&r);
    }
    CHECK(close_store(st) == STORE_OK);
    st = NULL;
out:
    if (st != NULL)
        close_store(st);
    return line;
#undef CHECK
}

static void
t_write_errors(void **state)
{
    char dir[64];
    pid_t pid;
    int status;

    (void)state;
    tmpdir_new(dir, sizeof(dir));
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int line = fsize_child(dir);

        if (line != 0)
            fprintf(stderr, "fsize_child: check at line %d failed\n", line);
        _exit(line != 0);
    }
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    tmpdir_free(dir);
}

/* ---- kill -9 ---------------------------------------------------------- */

static void
kill_child(const char *dir, int fd, unsigned first)
{
    char json[64];
    struct store *st;
    unsigned n;
    int r, len;

    if (open_store(dir, &st, NULL, 0) != STORE_OK)
        _exit(3);
    ack(fd, ACK_OPEN, 0);
    for (n = first;; n++) {
        r = add(st, n, n % 5, n);
        /* A duplicate is the report the last child committed but was
         * killed before it could tell. */
        if (r != STORE_OK && r != STORE_DUPLICATE)
            _exit(5);
        ack(fd, ACK_REPORT, n);
        len = snprintf(json, sizeof(json), "{\"n\":%u}", n);
        if (store_put_container(st, "c", json, (size_t)len, n) != STORE_OK ||
            store_set_checkpoint(st, "events", n) != STORE_OK ||
            store_flush(st) != STORE_OK)
            _exit(6);
        ack(fd, ACK_FLUSH, n);
    }
}

static void
t_kill9(void **state)
{
    enum { ITERATIONS = 40 };
    unsigned seed = (unsigned)time(NULL), next = 0, iter, i, unacked = 0;
    unsigned forced = 0;
    int64_t last_flush = -1, v, t0 = now_us();
    struct store_counts c;
    struct store_report r;
    struct store *st;
    char dir[64];

    (void)state;
    if (getenv("TEST_SEED") != NULL)
        seed = (unsigned)strtoul(getenv("TEST_SEED"), NULL, 10);
    print_message("kill -9 test: TEST_SEED=%u\n", seed);
    srand(seed);
    tmpdir_new(dir, sizeof(dir));
    for (iter = 0; iter < ITERATIONS; iter++) {
        uint32_t a[2];
        int p[2], status, mode;
        bool got_r = false;
        unsigned last_r = 0;
        pid_t pid;

        assert_int_equal(pipe(p), 0);
        pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            close(p[0]);
            kill_child(dir, p[1], next);
        }
        close(p[1]);
        /* A third of the kills land anywhere, opening and migrating
         * included; a third once the writer has opened; a third once it
         * has committed something (so the test is never vacuous, however
         * slow the writer runs, e.g. under valgrind). */
        mode = rand() % 3;
        if (mode >= 1)
            wait_ack(p[0], ACK_OPEN);
        if (mode == 2) {
            wait_ack(p[0], ACK_REPORT);
            got_r = true;
            last_r = next;
            forced++;
        }
        usleep((useconds_t)(rand() % 20000));
        assert_int_equal(kill(pid, SIGKILL), 0);
        assert_int_equal(waitpid(pid, &status, 0), pid);
        if (!WIFSIGNALED(status))
            fail_msg("writer exited by itself: status %d", status);
        while (read(p[0], a, sizeof(a)) == sizeof(a)) {
            if (a[0] == ACK_REPORT) {
                assert_int_equal(a[1], got_r ? last_r + 1 : next);
                last_r = a[1];
                got_r = true;
            } else if (a[0] == ACK_FLUSH) {
                last_flush = a[1];
            }
        }
        close(p[0]);

        /* The file opens and checks fine, whatever the instant. */
        st = must_open(dir);
        assert_int_equal(store_check(st), STORE_OK);
        if (got_r) {
            for (i = next; i <= last_r; i++) {
                if (get(st, i, &r) != STORE_OK)
                    fail_msg("iteration %u: report %u was committed but is"
                             " gone (TEST_SEED=%u)",
                             iter, i, seed);
                store_report_clear(&r);
            }
            next = last_r + 1;
        }
        /* Committed but killed before it said so: allowed, and the next
         * writer meets it as a duplicate. */
        if (get(st, next, &r) == STORE_OK) {
            store_report_clear(&r);
            unacked++;
        }
        if (last_flush >= 0) {
            assert_int_equal(store_get_checkpoint(st, "events", &v), STORE_OK);
            assert_true(v >= last_flush);
        }
        assert_int_equal(close_store(st), STORE_OK);
    }

    /* All of it, once more, at the end. */
    st = must_open(dir);
    assert_int_equal(store_check(st), STORE_OK);
    for (i = 0; i < next; i++) {
        assert_int_equal(get(st, i, &r), STORE_OK);
        assert_int_equal(r.seq, i + 1); /* no gaps, no doubles */
        store_report_clear(&r);
    }
    assert_int_equal(store_counts(st, &c), STORE_OK);
    assert_true(c.pending == next || c.pending == next + 1);
    assert_int_equal(close_store(st), STORE_OK);
    print_message("kill -9 test: %u kills, %u reports acknowledged and all"
                  " present, %u committed unacknowledged, %.1f s\n",
                  ITERATIONS, next, unacked, (double)(now_us() - t0) / 1e6);
    /* Not vacuous: the writers did write. */
    assert_true(forced > 0);
    assert_true(next >= forced);
    tmpdir_free(dir);
}

/* ---- cost ------------------------------------------------------------- */

static void
t_timing(void **state)
{
    struct fx *f = *state;
    char id[STORE_REPORT_ID_MAX + 1], ctr[STORE_ID_MAX + 1];
    static char body[1500], rec[400];
    int64_t t0, t_add, t_put, t_flush, t_single;
    const unsigned nadd = 200, nput = 10000, nsingle = 200;
    unsigned i;

    memset(body, 'r', sizeof(body));
    body[0] = '"';
    body[sizeof(body) - 1] = '"';
    memset(rec, 'c', sizeof(rec));
    rec[0] = '"';
    rec[sizeof(rec) - 1] = '"';

    t0 = now_us();
    for (i = 0; i < nadd; i++) {
        tu_report_id(id, i);
        tu_container_id(ctr, i % 50);
        assert_int_equal(
            store_add_report(f->st, id, ctr, body, sizeof(body), i), STORE_OK);
    }
    t_add = now_us() - t0;

    /* A loop turn's worth of lifecycle steps: 200 containers, 50 updates
     * each, then one flush. */
    t0 = now_us();
    for (i = 0; i < nput; i++) {
        tu_container_id(ctr, i % 200);
        assert_int_equal(store_put_container(f->st, ctr, rec, sizeof(rec), i),
                         STORE_OK);
    }
    t_put = now_us() - t0;
    t0 = now_us();
    assert_int_equal(store_flush(f->st), STORE_OK);
    t_flush = now_us() - t0;

    /* One update per flush: the worst case, a quiet loop. */
    t0 = now_us();
    for (i = 0; i < nsingle; i++) {
        tu_container_id(ctr, i % 200);
        assert_int_equal(store_put_container(f->st, ctr, rec, sizeof(rec), i),
                         STORE_OK);
        assert_int_equal(store_flush(f->st), STORE_OK);
    }
    t_single = now_us() - t0;

    print_message("timing (%s): durable report insert %.1f us;"
                  " batched container update %.2f us"
                  " (%u puts %.2f us each + one flush of 200 rows %.0f us);"
                  " one update + flush %.1f us\n",
                  f->dir, (double)t_add / nadd,
                  (double)(t_put + t_flush) / nput, nput, (double)t_put / nput,
                  (double)t_flush, (double)t_single / nsingle);
    /* What the batching is for, as a ratio (robust to a loaded machine,
     * unlike a time): an update batched with a loop turn's others costs
     * a fraction of one committed alone. Measured: 20-60x. */
    assert_true((t_put + t_flush) * 5 * (int64_t)nsingle <
                t_single * (int64_t)nput);
    /* And the batch wrote what it was given: one row per container. */
    {
        struct store_containers all = {0};

        assert_int_equal(store_get_containers(f->st, &all), 0);
        assert_int_equal(all.n, 200);
        store_containers_free(&all);
    }
}

/* Added as delivered in one transaction: delivered at once, the head of
 * its container moves on as for a mark (store_check agrees), a duplicate
 * is refused either way. */
static void
t_add_delivered(void **state)
{
    struct fx *f = *state;
    struct store_report r;
    struct store_counts c;
    char id[STORE_REPORT_ID_MAX + 1], ctr[STORE_ID_MAX + 1];

    tu_report_id(id, 1);
    tu_container_id(ctr, 1);
    assert_int_equal(store_add_delivered(f->st, id, ctr, "{\"n\":1}", 7, 50),
                     STORE_OK);
    assert_int_equal(store_get_report(f->st, id, false, &r), STORE_OK);
    assert_int_equal(r.state, STORE_DELIVERED);
    assert_int_equal(r.delivered_ms, 50);
    assert_int_equal(r.seq, 1);
    assert_int_equal(r.attempts, 1);
    store_report_clear(&r);
    assert_int_equal(store_add_delivered(f->st, id, ctr, "{}", 2, 60),
                     STORE_DUPLICATE);
    assert_int_equal(store_add_report(f->st, id, ctr, "{}", 2, 60),
                     STORE_DUPLICATE);
    /* A pending report of the same container after it, and one before a
     * delivered one: heads stay right. */
    assert_int_equal(add(f->st, 2, 1, 70), STORE_OK);
    tu_report_id(id, 3);
    assert_int_equal(store_add_delivered(f->st, id, ctr, "{\"n\":3}", 7, 80),
                     STORE_OK);
    assert_int_equal(store_check(f->st), STORE_OK);
    assert_int_equal(store_counts(f->st, &c), STORE_OK);
    assert_int_equal(c.delivered, 2);
    assert_int_equal(c.pending, 1);
    reopen(f);
    assert_int_equal(store_check(f->st), STORE_OK);
}

/* Records waiting for the group commit go with a report, in its one
 * transaction (a report is never on disk ahead of the steps before it);
 * a report refused as a duplicate leaves them waiting. */
static void
t_report_carries_pending(void **state)
{
    struct fx *f = *state;
    struct store_containers all;
    char id[STORE_REPORT_ID_MAX + 1], ctr[STORE_ID_MAX + 1];
    uint64_t commits;
    size_t i;

    tu_report_id(id, 1);
    tu_container_id(ctr, 1);
    assert_int_equal(store_put_container(f->st, ctr, "{\"s\":1}", 7, 10),
                     STORE_OK);
    assert_int_equal(store_set_checkpoint(f->st, "docker.events", 42),
                     STORE_OK);
    assert_int_equal(store_pending(f->st), 2);
    commits = store_commits(f->st);
    assert_int_equal(store_add_delivered(f->st, id, ctr, "{}", 2, 20),
                     STORE_OK);
    assert_int_equal(store_commits(f->st), commits + 1);
    assert_int_equal(store_pending(f->st), 0);
    for (i = 0; i < 2; i++) {
        int64_t v = 0;

        if (i == 1)
            reopen(f);
        assert_int_equal(store_get_containers(f->st, &all), STORE_OK);
        assert_int_equal(all.n, 1);
        assert_string_equal(all.v[0].json, "{\"s\":1}");
        store_containers_free(&all);
        assert_int_equal(store_get_checkpoint(f->st, "docker.events", &v),
                         STORE_OK);
        assert_int_equal(v, 42);
    }

    /* A duplicate commits nothing: the record waits for its flush. */
    assert_int_equal(store_put_container(f->st, ctr, "{\"s\":2}", 7, 30),
                     STORE_OK);
    assert_int_equal(store_add_report(f->st, id, ctr, "{}", 2, 40),
                     STORE_DUPLICATE);
    assert_int_equal(store_pending(f->st), 1);
    assert_int_equal(store_flush(f->st), STORE_OK);
    assert_int_equal(store_get_containers(f->st, &all), STORE_OK);
    assert_string_equal(all.v[0].json, "{\"s\":2}");
    store_containers_free(&all);
    assert_int_equal(store_check(f->st), STORE_OK);
}

static void
count_wal_full(void *arg)
{
    (*(unsigned *)arg)++;
}

/* The WAL header's checkpoint sequence number: one more each time the
 * WAL starts over from its beginning. */
static uint32_t
wal_seq(const char *dir)
{
    unsigned char h[16];
    char path[128];
    int fd;

    snprintf(path, sizeof(path), "%s/reapd.db-wal", dir);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    assert_int_equal(pread(fd, h, sizeof(h), 0), (ssize_t)sizeof(h));
    close(fd);
    return (uint32_t)h[12] << 24 | (uint32_t)h[13] << 16 |
           (uint32_t)h[14] << 8 | h[15];
}

/* No commit checkpoints: the WAL grows past SQLite's automatic bound
 * (1,000 pages) until the caller copies it, told by the hook once past
 * its own bound. The checkpoint itself starts the WAL over (with a row
 * of its own), so that the sync of its new header is not the next
 * commit's, which is the loop's. */
static void
t_checkpoint_by_caller(void **state)
{
    struct fx *f = *state;
    unsigned full = 0, i;
    char id[CTR_ID_SIZE], json[512];
    uint32_t seq;
    int64_t n = 0;

    store_on_wal(f->st, 64, count_wal_full, &full);
    memset(json, 'x', sizeof(json) - 1);
    json[sizeof(json) - 1] = '\0';
    for (i = 0; store_wal_pages(f->st) <= 1200; i++) {
        assert_true(i < 20000);
        snprintf(id, sizeof(id), "%064u", i);
        assert_int_equal(
            store_put_container(f->st, id, json, strlen(json), (int64_t)i),
            STORE_OK);
        assert_int_equal(store_flush(f->st), STORE_OK);
        if (store_wal_pages(f->st) < 64)
            assert_int_equal(full, 0);
    }
    assert_true(full > 0);
    assert_int_equal(store_checkpoints(f->st), 0);
    seq = wal_seq(f->dir);
    assert_int_equal(store_checkpoint(f->st), STORE_OK);
    assert_int_equal(store_checkpoints(f->st), 1);
    assert_int_equal(wal_seq(f->dir), seq + 1);
    assert_int_equal(store_get_checkpoint(f->st, "store.wal_restarts", &n),
                     STORE_OK);
    assert_int_equal(n, 1);
    assert_int_equal(store_wal_pages(f->st), 1);
    full = 0;
    assert_int_equal(store_put_container(f->st, id, "{}", 2, 1), STORE_OK);
    assert_int_equal(store_flush(f->st), STORE_OK);
    assert_int_equal(wal_seq(f->dir), seq + 1);
    assert_true(store_wal_pages(f->st) > 1 && store_wal_pages(f->st) < 64);
    assert_int_equal(full, 0);
    /* Inside a transaction of the caller's (the loop's, between two of
     * its statements): the copy, but no row of its own in that
     * transaction, and the transaction left as it was. */
    assert_int_equal(
        sqlite3_exec(store_sqlite(f->st), "BEGIN", NULL, NULL, NULL),
        SQLITE_OK);
    assert_int_equal(store_checkpoint(f->st), STORE_OK);
    assert_false(sqlite3_get_autocommit(store_sqlite(f->st)));
    assert_int_equal(
        sqlite3_exec(store_sqlite(f->st), "ROLLBACK", NULL, NULL, NULL),
        SQLITE_OK);
    assert_int_equal(store_get_checkpoint(f->st, "store.wal_restarts", &n),
                     STORE_OK);
    assert_int_equal(n, 1);
    store_on_wal(f->st, 0, NULL, NULL);
    /* Everything is where a restart reads it. */
    reopen(f);
    {
        struct store_containers l;

        assert_int_equal(store_get_containers(f->st, &l), STORE_OK);
        assert_int_equal(l.n, i);
        store_containers_free(&l);
    }
}

/* The report counts store_counts gives without a scan follow every
 * change, a failed transaction's (nothing) included, and a reopening
 * counts the same: a model run of random changes, store_check (which
 * compares them with the table's) after each. */
static void
t_counts_follow_changes(void **state)
{
    struct fx *f = *state;
    struct store_counts before, after;
    uint64_t n, eff;
    unsigned next = 1, i, seed = 12345, last_dead = 0;
    int rc;

    for (i = 0; i < 600; i++) {
        unsigned op, r, k;

        seed = seed * 1103515245u + 12345u;
        op = (seed >> 16) % 9;
        r = next > 1 ? 1 + (seed >> 8) % (next - 1) : 1;
        switch (op) {
        case 0:
        case 1:
            assert_int_equal(add(f->st, next, next % 7, 1000 + i), STORE_OK);
            next++;
            break;
        case 2: {
            char id[STORE_REPORT_ID_MAX + 1], ctr[STORE_ID_MAX + 1];

            tu_report_id(id, next);
            tu_container_id(ctr, next % 7);
            assert_int_equal(
                store_add_delivered(f->st, id, ctr, "{}", 2, 1000 + i),
                STORE_OK);
            next++;
            break;
        }
        case 3:
            rc = add(f->st, r, r % 7, 1000 + i); /* an id taken: no change */
            assert_true(rc == STORE_DUPLICATE || rc == STORE_OK);
            break;
        case 4:
            rc = mark_delivered(f->st, r, 2000 + i);
            assert_true(rc == STORE_OK || rc == STORE_NOT_FOUND);
            break;
        case 5:
            rc = mark_dead(f->st, r, "no");
            assert_true(rc == STORE_OK || rc == STORE_NOT_FOUND);
            if (rc == STORE_OK)
                last_dead = r;
            break;
        case 6: {
            char id[STORE_REPORT_ID_MAX + 1];

            /* Half the time the last one marked dead: most are not. */
            tu_report_id(id, (seed >> 4) % 2 && last_dead ? last_dead : r);
            rc = (seed >> 4) % 8 == 0
                     ? store_requeue_dead(f->st, 3000 + i, NULL)
                     : store_requeue(f->st, id, 3000 + i);
            assert_true(rc == STORE_OK || rc == STORE_NOT_FOUND ||
                        rc == STORE_CONFLICT);
            break;
        }
        case 7:
            assert_int_equal(store_prune(f->st, 2000 + i, 400,
                                         (int64_t)((seed >> 3) % 6), &n),
                             STORE_OK);
            break;
        default: {
            /* A batch the full database refuses halfway: none of it is
             * counted. */
            struct store_new_report v[16];
            char ids[16][STORE_REPORT_ID_MAX + 1], ctr[STORE_ID_MAX + 1];
            static char body[3000];

            memset(body, 'x', sizeof(body));
            tu_container_id(ctr, 3);
            for (k = 0; k < 16; k++) {
                tu_report_id(ids[k], next + k);
                v[k] = (struct store_new_report){.report_id = ids[k],
                                                 .container_id = ctr,
                                                 .body = body,
                                                 .len = sizeof(body)};
            }
            assert_int_equal(store_counts(f->st, &before), STORE_OK);
            assert_int_equal(
                store_set_size_limit(f->st, before.db_bytes, &eff), STORE_OK);
            rc = store_add_reports(f->st, v, 16, 1000 + i, k % 2);
            assert_int_equal(store_set_size_limit(f->st, 0, NULL), STORE_OK);
            assert_int_not_equal(rc, STORE_OK);
            assert_int_equal(store_counts(f->st, &after), STORE_OK);
            assert_int_equal(after.pending, before.pending);
            assert_int_equal(after.delivered, before.delivered);
            next += 16; /* not stored: never reused either */
            break;
        }
        }
        if (store_check(f->st) != STORE_OK)
            fail_msg("step %u (op %u): %s", i, op, store_errmsg(f->st));
    }
    assert_int_equal(store_counts(f->st, &before), STORE_OK);
    /* One of each state at the end, whatever the run left. */
    assert_int_equal(add(f->st, next, 1, 5000), STORE_OK);
    assert_int_equal(mark_dead(f->st, next, "no"), STORE_OK);
    assert_int_equal(add(f->st, next + 1, 1, 5000), STORE_OK);
    assert_int_equal(add(f->st, next + 2, 2, 5000), STORE_OK);
    assert_int_equal(mark_delivered(f->st, next + 2, 5000), STORE_OK);
    assert_int_equal(store_check(f->st), STORE_OK);
    assert_int_equal(store_counts(f->st, &before), STORE_OK);
    assert_true(before.pending > 0 && before.delivered > 0 && before.dead > 0);
    reopen(f);
    assert_int_equal(store_counts(f->st, &after), STORE_OK);
    assert_int_equal(after.pending, before.pending);
    assert_int_equal(after.delivered, before.delivered);
    assert_int_equal(after.dead, before.dead);
}

/* While the WAL's copy holds the connection (from store_checkpoint_begin
 * to _end; here a thread holds it), store_counts answers without it: the
 * counts as kept, the oldest pending and the size as last read. */
static void
t_counts_while_copying(void **state)
{
    struct fx *f = *state;
    struct store_counts before, during, after;
    struct tu_holder ho;
    struct timespec t0, t1;

    assert_int_equal(add(f->st, 1, 1, 1000), STORE_OK);
    assert_int_equal(add(f->st, 2, 2, 2000), STORE_OK);
    assert_int_equal(mark_delivered(f->st, 2, 3000), STORE_OK);
    assert_int_equal(store_counts(f->st, &before), STORE_OK);
    tu_hold(&ho, sqlite3_db_mutex(store_sqlite(f->st)));
    store_checkpoint_begin(f->st);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    assert_int_equal(store_counts(f->st, &during), STORE_OK);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    tu_release(&ho);
    /* Not a wait for the holder (released after 3 s at most). */
    assert_true((t1.tv_sec - t0.tv_sec) * 1000 +
                    (t1.tv_nsec - t0.tv_nsec) / 1000000 <
                500);
    assert_int_equal(during.pending, 1);
    assert_int_equal(during.delivered, 1);
    assert_int_equal(during.oldest_pending_ms, before.oldest_pending_ms);
    assert_int_equal(during.db_bytes, before.db_bytes);
    assert_int_equal(store_checkpoint_end(f->st, store_checkpoint_bg(f->st)),
                     STORE_OK);
    assert_int_equal(store_counts(f->st, &after), STORE_OK);
    assert_int_equal(after.oldest_pending_ms, before.oldest_pending_ms);
    assert_true(after.oldest_pending_ms > 0);
}

struct copier {
    struct store *st;
    int rc;
    struct timespec done;
};

static void *
copier_run(void *arg)
{
    struct copier *c = arg;

    c->rc = store_checkpoint_bg(c->st);
    clock_gettime(CLOCK_MONOTONIC, &c->done);
    return NULL;
}

/* The copy starts while the loop's connection is inside a transaction
 * (the mutex is free between its statements): it waits for the commit
 * instead of failing with "database table is locked". */
static void
t_copy_waits_for_transaction(void **state)
{
    struct fx *f = *state;
    sqlite3 *db = store_sqlite(f->st);
    struct copier c = {.st = f->st, .rc = -1};
    struct timespec committed;
    pthread_t th;

    assert_int_equal(add(f->st, 1, 1, 1000), STORE_OK);
    assert_int_equal(add(f->st, 2, 2, 2000), STORE_OK);
    assert_int_equal(sqlite3_exec(db,
                                  "BEGIN IMMEDIATE;"
                                  "INSERT INTO checkpoints(key, value)"
                                  " VALUES ('test.open', 1)",
                                  NULL, NULL, NULL),
                     SQLITE_OK);
    store_checkpoint_begin(f->st);
    assert_int_equal(pthread_create(&th, NULL, copier_run, &c), 0);
    usleep(100 * 1000);
    clock_gettime(CLOCK_MONOTONIC, &committed);
    assert_int_equal(sqlite3_exec(db, "COMMIT", NULL, NULL, NULL), SQLITE_OK);
    assert_int_equal(pthread_join(th, NULL), 0);
    assert_int_equal(c.rc, SQLITE_OK);
    assert_true(c.done.tv_sec > committed.tv_sec ||
                (c.done.tv_sec == committed.tv_sec &&
                 c.done.tv_nsec >= committed.tv_nsec));
    assert_int_equal(store_checkpoint_end(f->st, c.rc), STORE_OK);
    assert_int_equal(store_checkpoints(f->st), 1);
    assert_int_equal(store_check(f->st), STORE_OK);
}

/* reapd_state_record_writes_total: container records put or deleted, as
 * committed. A record changed twice before a commit is one write; a
 * checkpoint is none; a transaction refused and rolled back counts
 * nothing, and its rows count once when a later commit writes them. */
static void
t_record_writes_counted(void **state)
{
    struct fx *f = *state;
    char a[65], b[65];
    uint64_t w0 = store_record_writes(f->st);

    tu_container_id(a, 1);
    tu_container_id(b, 2);
    assert_int_equal(store_put_container(f->st, a, "{}", 2, 1), STORE_OK);
    assert_int_equal(store_put_container(f->st, a, "{\"s\":1}", 7, 2),
                     STORE_OK);
    assert_int_equal(store_put_container(f->st, b, "{}", 2, 3), STORE_OK);
    assert_int_equal(store_set_checkpoint(f->st, "k", 5), STORE_OK);
    assert_int_equal(store_record_writes(f->st), w0);
    assert_int_equal(store_flush(f->st), STORE_OK);
    assert_int_equal(store_record_writes(f->st), w0 + 2);

    /* Refused: nothing counted, the change still pending. */
    refuse_deletes(f, true);
    assert_int_equal(store_delete_container(f->st, a), STORE_OK);
    assert_true(store_flush(f->st) < 0);
    assert_int_equal(store_record_writes(f->st), w0 + 2);
    refuse_deletes(f, false);
    assert_int_equal(store_flush(f->st), STORE_OK);
    assert_int_equal(store_record_writes(f->st), w0 + 3);
    /* Nothing pending: no write. */
    assert_int_equal(store_flush(f->st), STORE_OK);
    assert_int_equal(store_record_writes(f->st), w0 + 3);
}

int
main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
    const struct CMUnitTest tests[] = {
        /* First: under the sanitizers every malloc and free costs more
         * once the allocator's quarantine has filled (the tests before
         * made the batched updates ten times dearer, on a ratio that
         * must measure SQLite, not the allocator). */
        T(t_timing),
        cmocka_unit_test(t_open_empty_file),
        cmocka_unit_test(t_open_bad_paths),
        cmocka_unit_test(t_newer_version_refused),
        cmocka_unit_test(t_corrupt_file),
        cmocka_unit_test(t_migration_atomic),
        cmocka_unit_test(t_migrate_v1),
        cmocka_unit_test(t_files_hardened),
        cmocka_unit_test(t_busy),
        T(t_duplicate),
        T(t_record_writes_counted),
        T(t_oldest_pending),
        T(t_dead_reasons),
        T(t_add_delivered),
        T(t_report_carries_pending),
        T(t_invalid_input),
        T(t_due_order),
        T(t_due_model),
        T(t_transitions),
        T(t_retention),
        T(t_counts_and_size),
        T(t_counts_follow_changes),
        T(t_counts_while_copying),
        T(t_copy_waits_for_transaction),
        T(t_recent),
        T(t_after),
        T(t_requeue),
        T(t_report_hook),
        T(t_checkpoints),
        T(t_containers),
        T(t_batch),
        T(t_flush_some),
        T(t_report_carries_some),
        T(t_add_reports),
        T(t_add_reports_forget),
        T(t_reports_checkpoint),
        T(t_pending_bounds),
        T(t_full_size_limit),
        cmocka_unit_test(t_write_errors),
        cmocka_unit_test(t_kill9),
        T(t_checkpoint_by_caller),
    };
#undef T

    signal(SIGPIPE, SIG_IGN);
    /* Going over RLIMIT_FSIZE must fail a write, not kill the test. */
    signal(SIGXFSZ, SIG_IGN);
    tu_test_filters();
    return cmocka_run_group_tests(tests, NULL, NULL);
}
