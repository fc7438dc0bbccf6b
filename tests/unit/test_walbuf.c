/*
 * test_walbuf — the WAL write-gathering VFS (agent/walbuf.c) under real
 * SQLite databases: a commit's frames reach the file in one write (or one
 * per buffer's worth), a committed transaction is in the file when COMMIT
 * returns (a process that dies right after loses nothing), transactions
 * that spill pages mid-way and rewrite them read back what they wrote,
 * and a write the disk refuses fails its transaction and nothing else.
 *
 * The parent the writes reach is itself counted: a second walbuf with a
 * one-byte buffer gathers nothing and counts each write it passes on.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"
#include "walbuf.h"

#define FRAME (4096 + 24)

struct fx {
    char dir[64];
    char path[96];
    struct walbuf *under; /* counts what reaches the file */
    struct walbuf *wb;    /* the one under test */
    sqlite3 *db;
    int wal_pages; /* frames in the WAL, from the WAL hook */
};

static int
on_wal(void *arg, sqlite3 *db, const char *name, int pages)
{
    struct fx *fx = arg;

    (void)db;
    (void)name;
    fx->wal_pages = pages;
    return SQLITE_OK;
}

static int
exec(sqlite3 *db, const char *sql)
{
    return sqlite3_exec(db, sql, NULL, NULL, NULL);
}

static long long
query_ll(sqlite3 *db, const char *sql)
{
    sqlite3_stmt *s = NULL;
    long long v = -1;

    if (sqlite3_prepare_v2(db, sql, -1, &s, NULL) == SQLITE_OK &&
        sqlite3_step(s) == SQLITE_ROW)
        v = sqlite3_column_int64(s, 0);
    sqlite3_finalize(s);
    return v;
}

/* The settings reapd's store runs with. */
static int
db_open(struct fx *fx, const char *vfs)
{
    int rc = sqlite3_open_v2(fx->path, &fx->db,
                             SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, vfs);

    if (rc != SQLITE_OK)
        return rc;
    rc = exec(fx->db, "PRAGMA locking_mode = EXCLUSIVE;"
                      "PRAGMA journal_mode = WAL;"
                      "PRAGMA synchronous = NORMAL;"
                      "PRAGMA wal_autocheckpoint = 0;");
    /* After the pragmas: wal_autocheckpoint sets a hook of its own. */
    sqlite3_wal_hook(fx->db, on_wal, fx);
    return rc;
}

static void
fx_open(struct fx *fx, size_t cap)
{
    memset(fx, 0, sizeof(*fx));
    snprintf(fx->dir, sizeof(fx->dir), "/tmp/test_walbuf.XXXXXX");
    assert_non_null(mkdtemp(fx->dir));
    snprintf(fx->path, sizeof(fx->path), "%s/t.db", fx->dir);
    fx->under = walbuf_new(NULL, 1);
    assert_non_null(fx->under);
    fx->wb = walbuf_new(walbuf_name(fx->under), cap);
    assert_non_null(fx->wb);
    assert_int_equal(db_open(fx, walbuf_name(fx->wb)), SQLITE_OK);
}

static void
fx_close(struct fx *fx)
{
    char wal[sizeof(fx->path) + 4];

    sqlite3_close(fx->db);
    fx->db = NULL;
    walbuf_free(fx->wb);
    walbuf_free(fx->under);
    snprintf(wal, sizeof(wal), "%s-wal", fx->path);
    unlink(wal);
    unlink(fx->path);
    assert_int_equal(rmdir(fx->dir), 0);
}

/* Opens the file again with SQLite's own VFS: what a restart reads. */
static sqlite3 *
plain_open(const char *path)
{
    sqlite3 *db = NULL;

    assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL),
                     SQLITE_OK);
    return db;
}

static void
assert_intact(sqlite3 *db)
{
    sqlite3_stmt *s = NULL;

    assert_int_equal(
        sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &s, NULL),
        SQLITE_OK);
    assert_int_equal(sqlite3_step(s), SQLITE_ROW);
    assert_string_equal((const char *)sqlite3_column_text(s, 0), "ok");
    sqlite3_finalize(s);
}

/* ---- tests ------------------------------------------------------------ */

static void
t_unknown_parent(void **state)
{
    (void)state;
    assert_null(walbuf_new("no-such-vfs", 0));
    walbuf_free(NULL);
}

/* Each commit: SQLite's two writes per frame, one write to the file. */
static void
t_commit_in_one_write(void **state)
{
    struct walbuf_stats a, b, ua, ub;
    struct fx fx;
    int frames, i;

    (void)state;
    fx_open(&fx, 0);
    /* The first commit writes the WAL's header too, at 0, and syncs it
     * before any frame: two writes, the header's and the frames'. */
    walbuf_stats(fx.wb, &a);
    walbuf_stats(fx.under, &ua);
    assert_int_equal(exec(fx.db, "CREATE TABLE t(a INTEGER PRIMARY KEY, b)"),
                     SQLITE_OK);
    walbuf_stats(fx.wb, &b);
    walbuf_stats(fx.under, &ub);
    assert_true(fx.wal_pages > 0);
    assert_int_equal(b.writes - a.writes, 1 + 2 * (unsigned)fx.wal_pages);
    assert_int_equal(b.flushes - a.flushes, 2);
    assert_int_equal(b.commit_flushes - a.commit_flushes, 1);
    assert_int_equal(ub.writes - ua.writes, 2);

    for (i = 0; i < 5; i++) {
        frames = fx.wal_pages;
        walbuf_stats(fx.wb, &a);
        walbuf_stats(fx.under, &ua);
        assert_int_equal(exec(fx.db, "BEGIN;"
                                     "INSERT INTO t(b) VALUES(zeroblob(3000));"
                                     "INSERT INTO t(b) VALUES(zeroblob(3000));"
                                     "INSERT INTO t(b) VALUES(zeroblob(3000));"
                                     "COMMIT"),
                         SQLITE_OK);
        walbuf_stats(fx.wb, &b);
        walbuf_stats(fx.under, &ub);
        frames = fx.wal_pages - frames;
        assert_true(frames >= 3);
        assert_true(frames * FRAME <= WALBUF_CAP);
        assert_int_equal(b.writes - a.writes, 2 * (unsigned)frames);
        assert_int_equal(b.flushes - a.flushes, 1);
        assert_int_equal(b.commit_flushes - a.commit_flushes, 1);
        assert_int_equal(ub.writes - ua.writes, 1);
    }
    assert_int_equal(query_ll(fx.db, "SELECT count(*) FROM t"), 15);
    fx_close(&fx);
}

/* A commit larger than the buffer: one write per buffer's worth, the
 * last at the commit frame. */
static void
t_commit_larger_than_buffer(void **state)
{
    struct walbuf_stats a, b, ua, ub;
    struct fx fx;
    int frames;

    (void)state;
    fx_open(&fx, 3 * FRAME);
    assert_int_equal(exec(fx.db, "CREATE TABLE t(a INTEGER PRIMARY KEY, b)"),
                     SQLITE_OK);
    frames = fx.wal_pages;
    walbuf_stats(fx.wb, &a);
    walbuf_stats(fx.under, &ua);
    assert_int_equal(exec(fx.db,
                          "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL"
                          " SELECT i + 1 FROM n WHERE i < 10)"
                          " INSERT INTO t(b) SELECT zeroblob(3500) FROM n"),
                     SQLITE_OK);
    walbuf_stats(fx.wb, &b);
    walbuf_stats(fx.under, &ub);
    frames = fx.wal_pages - frames;
    assert_true(frames >= 10);
    assert_int_equal(b.flushes - a.flushes, (unsigned)(frames + 2) / 3);
    assert_int_equal(b.commit_flushes - a.commit_flushes, 1);
    assert_int_equal(ub.writes - ua.writes, b.flushes - a.flushes);
    fx_close(&fx);
}

/* What a crash right after COMMIT returns leaves: the child commits and
 * exits at once, without closing (no flush of any kind). */
static int
commit_and_die(void *arg)
{
    struct fx *fx = arg;
    int i;

    if (db_open(fx, walbuf_name(fx->wb)) != SQLITE_OK)
        return 10;
    for (i = 0; i < 3; i++) {
        char sql[128];

        snprintf(sql, sizeof(sql), "INSERT INTO t(b) VALUES('committed %d')",
                 i);
        if (exec(fx->db, sql) != SQLITE_OK)
            return 11;
    }
    _exit(0);
}

static void
t_commit_survives_crash(void **state)
{
    struct fx fx;
    sqlite3 *db;

    (void)state;
    fx_open(&fx, 0);
    assert_int_equal(exec(fx.db, "CREATE TABLE t(a INTEGER PRIMARY KEY, b)"),
                     SQLITE_OK);
    sqlite3_close(fx.db);
    fx.db = NULL;
    assert_int_equal(tu_fork(commit_and_die, &fx), 0);
    db = plain_open(fx.path);
    assert_int_equal(query_ll(db, "SELECT count(*) FROM t"), 3);
    assert_int_equal(
        query_ll(db, "SELECT count(*) FROM t WHERE b = 'committed 2'"), 1);
    assert_intact(db);
    sqlite3_close(db);
    fx_close(&fx);
}

/* A transaction larger than the page cache writes frames before its
 * commit (a spill), reads them back, and rewrites in place a page it
 * changes again: every read sees what was written before it. */
static void
t_spill_read_back(void **state)
{
    struct walbuf_stats a, b;
    struct fx fx;
    sqlite3 *db;

    (void)state;
    fx_open(&fx, 0);
    assert_int_equal(exec(fx.db, "PRAGMA cache_size = 5;"
                                 "CREATE TABLE t(a INTEGER PRIMARY KEY, b);"
                                 "CREATE INDEX t_b ON t(b)"),
                     SQLITE_OK);
    walbuf_stats(fx.wb, &a);
    assert_int_equal(
        exec(fx.db,
             "BEGIN;"
             "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL"
             " SELECT i + 1 FROM n WHERE i < 400)"
             " INSERT INTO t(b) SELECT printf('%0500d', i) FROM n;"
             "UPDATE t SET b = printf('%0400d', a * 7) WHERE a % 3 = 0;"),
        SQLITE_OK);
    assert_int_equal(query_ll(fx.db, "SELECT count(*) FROM t"), 400);
    assert_int_equal(query_ll(fx.db, "SELECT sum(length(b)) FROM t"),
                     (long long)(400 - 133) * 500 + 133 * 400);
    assert_int_equal(
        query_ll(fx.db, "SELECT count(*) FROM t WHERE b = printf('%0400d', "
                        "21)"),
        1);
    assert_int_equal(exec(fx.db, "COMMIT"), SQLITE_OK);
    walbuf_stats(fx.wb, &b);
    /* It did spill: writes went out before the commit's. */
    assert_true(b.flushes - a.flushes > b.commit_flushes - a.commit_flushes);
    assert_intact(fx.db);
    sqlite3_close(fx.db);
    fx.db = NULL;

    db = plain_open(fx.path);
    assert_intact(db);
    assert_int_equal(query_ll(db, "SELECT sum(length(b)) FROM t"),
                     (long long)(400 - 133) * 500 + 133 * 400);
    sqlite3_close(db);
    fx_close(&fx);
}

/* The disk refuses the commit's write: the transaction fails, nothing
 * of it is seen, and once there is room the next one commits. Twice:
 * a commit within the buffer, and one that spills before its commit. */
static int
full_disk(void *arg)
{
    struct fx *fx = arg;
    struct rlimit saved;
    static const char *big[] = {
        "INSERT INTO t(b) VALUES(zeroblob(3000))",
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL"
        " SELECT i + 1 FROM n WHERE i < 300)"
        " INSERT INTO t(b) SELECT randomblob(1000) FROM n",
    };
    int i, rc;

    if (db_open(fx, walbuf_name(fx->wb)) != SQLITE_OK)
        return 10;
    if (exec(fx->db, "PRAGMA cache_size = 5") != SQLITE_OK)
        return 11;
    for (i = 0; i < 2; i++) {
        if (tu_disk_full(&saved) != 0)
            return 12;
        rc = exec(fx->db, big[i]);
        setrlimit(RLIMIT_FSIZE, &saved);
        if (rc == SQLITE_OK)
            return 20 + i; /* the write should have failed */
        if (!sqlite3_get_autocommit(fx->db))
            exec(fx->db, "ROLLBACK");
        if (query_ll(fx->db, "SELECT count(*) FROM t") != 1 + i)
            return 30 + i;
        if (exec(fx->db, "INSERT INTO t(b) VALUES('after')") != SQLITE_OK)
            return 40 + i;
    }
    sqlite3_close(fx->db);
    return 0;
}

static void
t_full_disk_fails_the_transaction(void **state)
{
    struct fx fx;
    sqlite3 *db;

    (void)state;
    fx_open(&fx, 0);
    assert_int_equal(exec(fx.db, "CREATE TABLE t(a INTEGER PRIMARY KEY, b);"
                                 "INSERT INTO t(b) VALUES('before')"),
                     SQLITE_OK);
    sqlite3_close(fx.db);
    fx.db = NULL;
    assert_int_equal(tu_fork(full_disk, &fx), 0);
    db = plain_open(fx.path);
    assert_intact(db);
    assert_int_equal(query_ll(db, "SELECT count(*) FROM t"), 3);
    assert_int_equal(query_ll(db, "SELECT count(*) FROM t WHERE b = 'after'"),
                     2);
    sqlite3_close(db);
    fx_close(&fx);
}

/* Only the WAL is wrapped: the database file is SQLite's own. */
static void
t_only_the_wal(void **state)
{
    struct fx fx;
    sqlite3_file *wal = NULL;
    char *name = NULL;

    (void)state;
    fx_open(&fx, 0);
    assert_int_equal(exec(fx.db, "CREATE TABLE t(a)"), SQLITE_OK);
    assert_int_equal(
        sqlite3_file_control(fx.db, "main", SQLITE_FCNTL_VFSNAME, &name),
        SQLITE_OK);
    assert_string_equal(name, "unix");
    sqlite3_free(name);
    name = NULL;
    assert_int_equal(sqlite3_file_control(fx.db, "main",
                                          SQLITE_FCNTL_JOURNAL_POINTER, &wal),
                     SQLITE_OK);
    assert_non_null(wal);
    assert_int_equal(
        wal->pMethods->xFileControl(wal, SQLITE_FCNTL_VFSNAME, &name),
        SQLITE_OK);
    assert_string_equal(name, "walbuf/walbuf/unix");
    sqlite3_free(name);
    fx_close(&fx);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(t_unknown_parent),
        cmocka_unit_test(t_commit_in_one_write),
        cmocka_unit_test(t_commit_larger_than_buffer),
        cmocka_unit_test(t_commit_survives_crash),
        cmocka_unit_test(t_spill_read_back),
        cmocka_unit_test(t_full_disk_fails_the_transaction),
        cmocka_unit_test(t_only_the_wal),
    };

    tu_test_filters();
    return cmocka_run_group_tests(tests, NULL, NULL);
}
