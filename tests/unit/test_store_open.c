/*
 * test_store_open — opening reapd.db (agent/store_open.c) and its schema
 * (agent/store_schema.c), on real files: an empty or missing file, bad
 * paths, a database from a newer reapd, a corrupt file, a migration that
 * fails half-way, a version 1 database migrated in place, the files'
 * modes and flags, another process holding the lock.
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
#include "store_fx.h"
#include "testutil.h"

static void
t_open_empty_file(void **state)
{
    char dir[64], path[128], mode[16];
    struct store_report r;
    struct store *st;
    struct stat sb;
    int fd;

    (void)state;
    sfx_tmpdir_new(dir, sizeof(dir));
    /* An empty file is an empty database: migrated from version 0. */
    snprintf(path, sizeof(path), "%s/reapd.db", dir);
    fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0);
    close(fd);
    st = sfx_must_open(dir);
    assert_string_equal(store_path(st), path);
    assert_int_equal(sfx_add(st, 1, 1, 1000), STORE_OK);
    assert_int_equal(sfx_close(st), STORE_OK);

    assert_int_equal(sfx_raw_int(dir, "PRAGMA user_version"),
                     STORE_SCHEMA_VERSION);
    sfx_raw_text(dir, "PRAGMA journal_mode", mode, sizeof(mode));
    assert_string_equal(mode, "wal");
    assert_int_equal(sfx_raw_int(dir, "SELECT count(*) FROM sqlite_schema"
                                      " WHERE type = 'table' AND name IN"
                                      " ('reports', 'containers',"
                                      " 'checkpoints', 'meta')"),
                     4);

    /* Reopened: no migration runs again, the data and the sequence go on. */
    st = sfx_must_open(dir);
    assert_int_equal(sfx_get(st, 1, &r), STORE_OK);
    assert_int_equal(r.seq, 1);
    store_report_clear(&r);
    assert_int_equal(sfx_add(st, 2, 1, 1000), STORE_OK);
    assert_int_equal(sfx_get(st, 2, &r), STORE_OK);
    assert_int_equal(r.seq, 2);
    store_report_clear(&r);
    assert_int_equal(sfx_close(st), STORE_OK);
    assert_int_equal(sfx_raw_int(dir, "PRAGMA user_version"),
                     STORE_SCHEMA_VERSION);
    sfx_tmpdir_free(dir);

    /* A file the store creates is not world-readable. */
    sfx_tmpdir_new(dir, sizeof(dir));
    st = sfx_must_open(dir);
    assert_int_equal(stat(store_path(st), &sb), 0);
    assert_int_equal(sb.st_mode & 07777, 0640);
    assert_int_equal(sfx_close(st), STORE_OK);
    sfx_tmpdir_free(dir);
}

static void
t_open_bad_paths(void **state)
{
    char dir[64], sub[128], err[512];
    struct store *st = (struct store *)&st;
    int r;

    (void)state;
    sfx_tmpdir_new(dir, sizeof(dir));
    snprintf(sub, sizeof(sub), "%s/missing", dir);
    r = sfx_open(sub, &st, err, sizeof(err));
    assert_int_equal(r, STORE_ERROR);
    assert_null(st);
    assert_non_null(strstr(err, sub));
    assert_non_null(strstr(err, strerror(ENOENT)));

    /* reapd.db is a directory. */
    snprintf(sub, sizeof(sub), "%s/reapd.db", dir);
    assert_int_equal(mkdir(sub, 0700), 0);
    r = sfx_open(dir, &st, err, sizeof(err));
    assert_int_equal(r, STORE_ERROR);
    assert_non_null(strstr(err, "reapd.db"));
    assert_non_null(strstr(err, strerror(EISDIR)));
    assert_int_equal(rmdir(sub), 0);

    /* reapd.db is a symlink: not followed. */
    assert_int_equal(symlink("/etc/passwd", sub), 0);
    r = sfx_open(dir, &st, err, sizeof(err));
    assert_true(r < 0);
    assert_non_null(strstr(err, "reapd.db"));
    unlink(sub);

    r = sfx_open("", &st, err, sizeof(err));
    assert_int_equal(r, STORE_INVALID);
    assert_true(strlen(err) > 0);
    r = sfx_open(dir, &st, NULL, 0); /* no buffer is fine */
    assert_int_equal(r, STORE_OK);
    assert_int_equal(sfx_close(st), STORE_OK);
    assert_int_equal(sfx_close(NULL), STORE_OK);
    sfx_tmpdir_free(dir);
}

static void
t_newer_version_refused(void **state)
{
    char dir[64], err[512];
    struct store *st;

    (void)state;
    sfx_tmpdir_new(dir, sizeof(dir));
    st = sfx_must_open(dir);
    assert_int_equal(sfx_add(st, 1, 1, 1), STORE_OK);
    assert_int_equal(sfx_close(st), STORE_OK);
    sfx_raw_exec(dir, "PRAGMA user_version = 99");

    assert_int_equal(sfx_open(dir, &st, err, sizeof(err)), STORE_TOO_NEW);
    assert_null(st);
    assert_non_null(strstr(err, "reapd.db"));
    assert_non_null(strstr(err, "schema version 99 is not one"));
    assert_non_null(strstr(err, "newer reapd"));
    /* Left untouched, for the newer reapd. */
    assert_int_equal(sfx_raw_int(dir, "PRAGMA user_version"), 99);
    assert_int_equal(sfx_raw_int(dir, "SELECT count(*) FROM reports"), 1);

    snprintf(err, sizeof(err), "PRAGMA user_version = %d",
             STORE_SCHEMA_VERSION);
    sfx_raw_exec(dir, err);
    st = sfx_must_open(dir);
    assert_int_equal(sfx_close(st), STORE_OK);
    sfx_tmpdir_free(dir);
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
    sfx_tmpdir_new(dir, sizeof(dir));
    write_file(dir, garbage, sizeof(garbage), 0, true);
    assert_int_equal(sfx_open(dir, &st, err, sizeof(err)), STORE_CORRUPT);
    assert_null(st);
    assert_non_null(strstr(err, "reapd.db"));
    assert_non_null(strstr(err, "not a database"));
    assert_non_null(strstr(err, "move it aside"));
    tu_rm_store(dir);

    /* A database whose pages were overwritten: the header is fine, the
     * b-trees are not. quick_check at open finds it. */
    st = sfx_must_open(dir);
    for (n = 0; n < 300; n++)
        assert_int_equal(sfx_add(st, n, n % 7, n), STORE_OK);
    assert_int_equal(sfx_close(st), STORE_OK); /* checkpoints the WAL */
    page_size = sfx_raw_int(dir, "PRAGMA page_size");
    write_file(dir, garbage, sizeof(garbage), (off_t)page_size * 3, false);
    st = NULL;
    assert_int_equal(sfx_open(dir, &st, err, sizeof(err)), STORE_CORRUPT);
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
        if (sfx_open(dir, &st, NULL, 0) != STORE_OK ||
            sfx_add(st, 1, 1, 1) != STORE_OK)
            _exit(1);
        sfx_ack(p[1], SFX_ACK_REPORT, 1);
        for (;;)
            pause(); /* until killed: no store_close, the WAL stays */
    }
    close(p[1]);
    sfx_wait_ack(p[0], SFX_ACK_REPORT);
    close(p[0]);
    assert_int_equal(kill(pid, SIGKILL), 0);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    snprintf(wal, sizeof(wal), "%s/reapd.db-wal", dir);
    fd = open(wal, O_WRONLY | O_APPEND);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, garbage, 1000), 1000);
    close(fd);
    st = sfx_must_open(dir);
    assert_int_equal(store_check(st), STORE_OK);
    assert_int_equal(sfx_get(st, 1, &r), STORE_OK);
    store_report_clear(&r);
    assert_int_equal(sfx_close(st), STORE_OK);
    sfx_tmpdir_free(dir);
}

/* A migration is one transaction: if it fails half-way, nothing of it
 * stays, and the version is not bumped. */
static void
t_migration_atomic(void **state)
{
    char dir[64], err[512];
    struct store *st = NULL;

    (void)state;
    sfx_tmpdir_new(dir, sizeof(dir));
    write_file(dir, "", 0, 0, true);
    /* A stray table that the migration's last CREATE collides with. */
    sfx_raw_exec(dir, "CREATE TABLE checkpoints (x)");
    assert_int_equal(sfx_open(dir, &st, err, sizeof(err)), STORE_ERROR);
    assert_null(st);
    assert_non_null(strstr(err, "migration to schema version 1"));
    assert_non_null(strstr(err, "checkpoints"));
    assert_int_equal(sfx_raw_int(dir, "PRAGMA user_version"), 0);
    assert_int_equal(sfx_raw_int(dir, "SELECT count(*) FROM sqlite_schema"
                                      " WHERE name IN ('meta', 'reports',"
                                      " 'containers')"),
                     0);

    sfx_raw_exec(dir, "DROP TABLE checkpoints");
    st = sfx_must_open(dir);
    assert_int_equal(sfx_close(st), STORE_OK);
    assert_int_equal(sfx_raw_int(dir, "PRAGMA user_version"),
                     STORE_SCHEMA_VERSION);
    sfx_tmpdir_free(dir);
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
    sfx_tmpdir_new(dir, sizeof(dir));
    write_file(dir, "", 0, 0, true);
    sfx_raw_exec(dir, SCHEMA_V1);
    st = sfx_must_open(dir);
    assert_int_equal(sfx_raw_int(dir, "PRAGMA user_version"), 2);
    assert_int_equal(store_check(st), STORE_OK);

    assert_int_equal(sfx_get(st, 1, &r), STORE_OK);
    assert_int_equal(r.state, STORE_DEAD);
    assert_int_equal(r.dead_reason, STORE_DEAD_REJECTED);
    assert_string_equal(r.last_error, "HTTP 400: bad");
    store_report_clear(&r);
    assert_int_equal(sfx_get(st, 2, &r), STORE_OK);
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

        sfx_due_str(st, 100, 10, due, sizeof(due));
        assert_string_equal(due, "3");
        assert_int_equal(
            store_mark_dead_reason(st, "00000000000000000000000000000003",
                                   STORE_DEAD_TOO_LARGE, "too big"),
            STORE_OK);
        sfx_due_str(st, 100, 10, due, sizeof(due));
        assert_string_equal(due, "4");
    }
    assert_int_equal(sfx_get(st, 3, &r), STORE_OK);
    assert_int_equal(r.dead_reason, STORE_DEAD_TOO_LARGE);
    assert_int_equal(r.attempts, 0);
    store_report_clear(&r);
    /* Sequence numbers go on from the old counter. */
    assert_int_equal(sfx_add(st, 5, 3, 200), STORE_OK);
    assert_int_equal(sfx_get(st, 5, &r), STORE_OK);
    assert_int_equal(r.seq, 5);
    store_report_clear(&r);
    assert_int_equal(store_check(st), STORE_OK);
    assert_int_equal(sfx_close(st), STORE_OK);

    /* Reopened: no migration runs again. */
    st = sfx_must_open(dir);
    assert_int_equal(sfx_raw_int(dir, "PRAGMA user_version"), 2);
    assert_int_equal(sfx_close(st), STORE_OK);
    sfx_tmpdir_free(dir);
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
    sfx_tmpdir_new(dir, sizeof(dir));
    st = sfx_must_open(dir);
    assert_int_equal(sfx_add(st, 1, 1, 1), STORE_OK);
    for (i = 0; i < 2; i++) {
        snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
        assert_true(tu_open_cloexec(path, &found));
        assert_true(found);
    }
    /* The process's lock held (unix-excl): the WAL index is in memory,
     * no -shm file. */
    snprintf(path, sizeof(path), "%s/reapd.db-shm", dir);
    assert_int_equal(lstat(path, &sb), -1);
    assert_int_equal(sfx_close(st), STORE_OK);

    snprintf(target, sizeof(target), "%s/target", dir);
    for (i = 1; i < 2; i++) {
        tu_rm_store(dir);
        st = sfx_must_open(dir);
        assert_int_equal(sfx_close(st), STORE_OK);
        snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
        unlink(path);
        assert_int_equal(symlink(target, path), 0);
        st = NULL;
        r = sfx_open(dir, &st, err, sizeof(err));
        if (r == STORE_OK) {
            /* Opened; then the first write must fail, not follow it. */
            r = sfx_add(st, 1, 1, 1);
            assert_int_equal(sfx_close(st), STORE_OK);
        }
        assert_true(r < 0);
        assert_int_equal(lstat(target, &sb), -1);
        unlink(path);
    }
    /* A -shm symlink is never followed: the file is not used at all. */
    tu_rm_store(dir);
    snprintf(path, sizeof(path), "%s/reapd.db-shm", dir);
    assert_int_equal(symlink(target, path), 0);
    st = sfx_must_open(dir);
    assert_int_equal(sfx_add(st, 1, 1, 1), STORE_OK);
    assert_int_equal(store_flush(st), STORE_OK);
    assert_int_equal(sfx_close(st), STORE_OK);
    assert_int_equal(lstat(target, &sb), -1);
    unlink(path);
    tu_rm_store(dir);
    sfx_tmpdir_free(dir);
}

/* Another process, holding the database with `sql` run (a write lock, or
 * a WAL connection's shared lock), until told to let go (holder_free). */
struct holder {
    pid_t pid;
    int go;
};

static struct holder
holder_new(const char *dir, const char *sql)
{
    struct holder h;
    int p[2], go[2];

    assert_int_equal(pipe(p), 0);
    assert_int_equal(pipe(go), 0);
    h.pid = fork();
    assert_true(h.pid >= 0);
    if (h.pid == 0) {
        sqlite3 *db = sfx_raw_second(dir);

        close(p[0]);
        close(go[1]);
        if (sqlite3_exec(db, sql, NULL, NULL, NULL) != SQLITE_OK)
            _exit(1);
        sfx_ack(p[1], SFX_ACK_OPEN, 0);
        sfx_wait_ack(go[0], SFX_ACK_FLUSH);
        sqlite3_close(db);
        _exit(0);
    }
    close(p[1]);
    close(go[0]);
    sfx_wait_ack(p[0], SFX_ACK_OPEN);
    close(p[0]);
    h.go = go[1];
    return h;
}

static void
holder_free(struct holder *h)
{
    int status;

    sfx_ack(h->go, SFX_ACK_FLUSH, 0);
    close(h->go);
    assert_int_equal(waitpid(h->pid, &status, 0), h->pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

/* Another process holding the write lock at open: a clear error after a
 * short wait (the loop must not block), and all is well once the lock is
 * gone. Once open, the store holds the file: no other process can read
 * it, and it makes no -shm file. */
static void
t_busy(void **state)
{
    char dir[64], err[512], path[128];
    struct store *st = NULL;
    struct holder h;
    struct stat sb;
    int64_t t0;
    sqlite3 *db;
    int p[2], go[2], status;
    pid_t pid;

    (void)state;
    sfx_tmpdir_new(dir, sizeof(dir));
    st = sfx_must_open(dir);
    assert_int_equal(sfx_close(st), STORE_OK);

    h = holder_new(dir, "BEGIN IMMEDIATE");
    t0 = sfx_now_us();
    assert_int_equal(sfx_open(dir, &st, err, sizeof(err)), STORE_BUSY);
    assert_true(sfx_now_us() - t0 < 2000000);
    assert_null(st);
    assert_non_null(strstr(err, "reapd.db"));
    assert_non_null(strstr(err, "another reapd"));
    holder_free(&h);

    /* A connection open in WAL mode holds a shared lock: the store
     * cannot have the file to itself. */
    h = holder_new(dir, "SELECT count(*) FROM reports");
    assert_int_equal(sfx_open(dir, &st, err, sizeof(err)), STORE_BUSY);
    assert_null(st);
    holder_free(&h);

    /* Open (here in a child: locks are the process's), the store keeps
     * its file locked: another process cannot even read it, and the
     * store's own writes never wait for anyone; no -shm file either. */
    assert_int_equal(pipe(p), 0);
    assert_int_equal(pipe(go), 0);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(p[0]);
        close(go[1]);
        if (sfx_open(dir, &st, NULL, 0) != STORE_OK ||
            sfx_add(st, 1, 1, 1) != STORE_OK || store_flush(st) != STORE_OK)
            _exit(1);
        sfx_ack(p[1], SFX_ACK_REPORT, 1);
        sfx_wait_ack(go[0], SFX_ACK_FLUSH);
        if (sfx_add(st, 2, 1, 1) != STORE_OK || store_flush(st) != STORE_OK ||
            sfx_close(st) != STORE_OK)
            _exit(1);
        _exit(0);
    }
    close(p[1]);
    close(go[0]);
    sfx_wait_ack(p[0], SFX_ACK_REPORT);
    close(p[0]);
    db = sfx_raw_second(dir);
    assert_int_equal(
        sqlite3_exec(db, "SELECT count(*) FROM reports", NULL, NULL, NULL),
        SQLITE_BUSY);
    assert_int_equal(sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL),
                     SQLITE_BUSY);
    sqlite3_close(db);
    snprintf(path, sizeof(path), "%s/reapd.db-shm", dir);
    assert_int_equal(lstat(path, &sb), -1);
    sfx_ack(go[1], SFX_ACK_FLUSH, 0);
    close(go[1]);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    /* Closed, it is free again. */
    assert_int_equal(sfx_raw_int(dir, "SELECT count(*) FROM reports"), 2);
    sfx_tmpdir_free(dir);
}

int
main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, sfx_setup, sfx_teardown)
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(t_open_empty_file),
        cmocka_unit_test(t_open_bad_paths),
        cmocka_unit_test(t_newer_version_refused),
        cmocka_unit_test(t_corrupt_file),
        cmocka_unit_test(t_migration_atomic),
        cmocka_unit_test(t_migrate_v1),
        cmocka_unit_test(t_files_hardened),
        cmocka_unit_test(t_busy),
    };
#undef T

    signal(SIGPIPE, SIG_IGN);
    tu_test_filters();
    return cmocka_run_group_tests(tests, NULL, NULL);
}
