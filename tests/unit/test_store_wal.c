/*
 * test_store_wal — the WAL and its checkpoints (agent/store_wal.c): no
 * commit copies the WAL, the caller does past its bound, the WAL starts
 * over after a copy that caught up; the copy, on a connection of its own,
 * runs while the loop commits, neither waiting for the other.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
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

/* Opens a write transaction on `db`, left open for the caller. */
static void
begin_write(sqlite3 *db)
{
    assert_int_equal(sqlite3_exec(db,
                                  "BEGIN IMMEDIATE;"
                                  "INSERT INTO checkpoints(key, value)"
                                  " VALUES ('test.open', 1)",
                                  NULL, NULL, NULL),
                     SQLITE_OK);
}

/* Fills the WAL past `pages` pages with container records, one commit
 * each, one at least; how many records. */
static unsigned
fill_wal(struct store *st, unsigned first, int pages)
{
    char id[CTR_ID_SIZE], json[512];
    unsigned i;

    memset(json, 'x', sizeof(json) - 1);
    json[sizeof(json) - 1] = '\0';
    for (i = 0; i == 0 || store_wal_pages(st) <= pages; i++) {
        assert_true(i < 20000);
        snprintf(id, sizeof(id), "%064u", first + i);
        assert_int_equal(store_put_container(st, id, json, strlen(json),
                                             (int64_t)(first + i)),
                         STORE_OK);
        assert_int_equal(store_flush(st), STORE_OK);
    }
    return i;
}

/* No commit checkpoints: the WAL grows past SQLite's automatic bound
 * (1,000 pages) until the caller copies it, told by the hook once past
 * its own bound. A copy that catches up leaves no page to copy, and the
 * next commit starts the WAL over from its beginning; what the WAL holds
 * is counted again from there. */
static void
t_checkpoint_by_caller(void **state)
{
    struct sfx *f = *state;
    unsigned full = 0, i, n;
    char id[CTR_ID_SIZE];
    uint32_t seq;

    store_on_wal(f->st, 64, count_wal_full, &full);
    for (n = 0; store_wal_pages(f->st) < 64; n += fill_wal(f->st, n, 0))
        assert_int_equal(full, 0);
    assert_int_equal(full, 1);
    n += fill_wal(f->st, n, 1200);
    assert_true(full > 1);
    assert_int_equal(store_checkpoints(f->st), 0);
    seq = wal_seq(f->dir);
    assert_int_equal(store_checkpoint(f->st), STORE_OK);
    assert_int_equal(store_checkpoints(f->st), 1);
    assert_int_equal(store_wal_pages(f->st), 0);
    assert_int_equal(wal_seq(f->dir), seq);
    full = 0;
    for (i = 0; i < 3; i++) {
        snprintf(id, sizeof(id), "%064u", i);
        assert_int_equal(store_put_container(f->st, id, "{}", 2, 1), STORE_OK);
        assert_int_equal(store_flush(f->st), STORE_OK);
        /* Started over at the first commit, once. */
        assert_int_equal(wal_seq(f->dir), seq + 1);
        assert_true(store_wal_pages(f->st) > 0 && store_wal_pages(f->st) < 64);
    }
    assert_int_equal(full, 0);
    store_on_wal(f->st, 0, NULL, NULL);
    /* Everything is where a restart reads it. */
    sfx_reopen(f);
    {
        struct store_containers l;

        assert_int_equal(store_get_containers(f->st, &l), STORE_OK);
        assert_int_equal(l.n, n);
        store_containers_free(&l);
    }
}

/* The copy meets a write transaction of the loop's, open between two of
 * its statements: it copies what is committed, neither waiting for the
 * transaction nor failing, and leaves it as it was; the transaction then
 * commits as ever. The WAL cannot start over under it: what it committed
 * is what is left to copy. */
static void
t_copy_meets_open_transaction(void **state)
{
    struct sfx *f = *state;
    sqlite3 *db = store_sqlite(f->st);
    uint32_t seq;
    int64_t v = 0;
    int left;

    fill_wal(f->st, 0, 200);
    seq = wal_seq(f->dir);
    begin_write(db);
    assert_int_equal(store_checkpoint(f->st), STORE_OK);
    assert_int_equal(store_checkpoints(f->st), 1);
    assert_int_equal(store_wal_pages(f->st), 0);
    assert_false(sqlite3_get_autocommit(db));
    assert_int_equal(sqlite3_exec(db, "COMMIT", NULL, NULL, NULL), SQLITE_OK);
    assert_int_equal(store_get_checkpoint(f->st, "test.open", &v), STORE_OK);
    assert_int_equal(v, 1);
    assert_int_equal(wal_seq(f->dir), seq);
    /* The hook counts the commits made outside the store's own calls
     * too: left to copy is this transaction's. */
    left = store_wal_pages(f->st);
    assert_true(left > 0 && left < 8);
    assert_int_equal(store_checkpoint(f->st), STORE_OK);
    assert_int_equal(store_wal_pages(f->st), 0);
    assert_int_equal(store_check(f->st), STORE_OK);
}

struct in_busy {
    struct store *st;
    int result;
    uint64_t checkpoints;
};

/* A busy handler that, called once, runs the store's copy while its own
 * connection holds the WAL's checkpoint lock, and gives up. */
static int
copy_while_held(void *arg, int n)
{
    struct in_busy *b = arg;

    if (n == 0) {
        b->result = store_checkpoint(b->st);
        b->checkpoints = store_checkpoints(b->st);
    }
    return 0;
}

/* A copy that finds the WAL busy (here another connection of the process
 * inside a checkpoint of its own, waiting for the loop's write
 * transaction; in reapd, the loop writing the WAL index's header as the
 * copy reads it) copies nothing and is no error: the next one tries
 * again. */
static void
t_copy_finds_the_wal_busy(void **state)
{
    struct sfx *f = *state;
    sqlite3 *db = store_sqlite(f->st), *other = NULL;
    struct in_busy b = {.st = f->st, .result = -100};
    char path[128];

    fill_wal(f->st, 0, 100);
    snprintf(path, sizeof(path), "%s/reapd.db", f->dir);
    assert_int_equal(
        sqlite3_open_v2(path, &other, SQLITE_OPEN_READWRITE, "unix-excl"),
        SQLITE_OK);
    /* A first read finds the WAL, for the checkpoint to have one. */
    assert_int_equal(sqlite3_exec(other, "SELECT count(*) FROM sqlite_schema",
                                  NULL, NULL, NULL),
                     SQLITE_OK);
    sqlite3_busy_handler(other, copy_while_held, &b);
    begin_write(db);
    assert_int_equal(sqlite3_wal_checkpoint_v2(
                         other, NULL, SQLITE_CHECKPOINT_FULL, NULL, NULL),
                     SQLITE_BUSY);
    assert_int_equal(b.result, STORE_OK);
    assert_int_equal(b.checkpoints, 0);
    assert_true(store_wal_pages(f->st) > 100);
    assert_int_equal(sqlite3_exec(db, "COMMIT", NULL, NULL, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_close(other), SQLITE_OK);
    assert_int_equal(store_checkpoint(f->st), STORE_OK);
    assert_int_equal(store_checkpoints(f->st), 1);
    assert_int_equal(store_wal_pages(f->st), 0);
}

struct copier {
    struct store *st;
    atomic_bool stop;
    unsigned copies, busy;
    int rc;
};

static void *
copier_run(void *arg)
{
    struct copier *c = arg;

    while (!atomic_load(&c->stop)) {
        int rc = store_checkpoint_bg(c->st);

        /* Met a commit halfway (store_checkpoint_end): again. */
        if (rc == SQLITE_BUSY) {
            c->busy++;
            continue;
        }
        if (rc != SQLITE_OK) {
            c->rc = rc;
            break;
        }
        c->copies++;
        usleep(1000);
    }
    return NULL;
}

/* The loop commits while copies run on another thread, one after another
 * (store_checkpoint_bg): no commit is refused (SQLITE_BUSY,
 * SQLITE_LOCKED), no copy fails, and the WAL starts over behind them
 * (the commits pause now and then, so that a copy catches up). */
static void
t_copy_while_loop_commits(void **state)
{
    struct sfx *f = *state;
    struct copier c = {.st = f->st, .rc = SQLITE_OK};
    char id[CTR_ID_SIZE];
    uint32_t seq;
    pthread_t th;
    int64_t t0, worst = 0;
    unsigned i;

    atomic_init(&c.stop, false);
    fill_wal(f->st, 0, 100);
    seq = wal_seq(f->dir);
    assert_int_equal(pthread_create(&th, NULL, copier_run, &c), 0);
    for (i = 0; i < 3000; i++) {
        int64_t dt;

        snprintf(id, sizeof(id), "%064u", i % 500);
        t0 = sfx_now_us();
        assert_int_equal(
            store_put_container(f->st, id, "{\"a\":1}", 7, (int64_t)i),
            STORE_OK);
        assert_int_equal(store_flush(f->st), STORE_OK);
        dt = sfx_now_us() - t0;
        if (dt > worst)
            worst = dt;
        if (i % 500 == 499)
            usleep(30 * 1000);
    }
    atomic_store(&c.stop, true);
    assert_int_equal(pthread_join(th, NULL), 0);
    print_message("%u copies (%u met a commit) during 3000 commits; the "
                  "longest commit %lld us\n",
                  c.copies, c.busy, (long long)worst);
    assert_int_equal(c.rc, SQLITE_OK);
    assert_true(c.copies >= 2);
    assert_true(wal_seq(f->dir) > seq);
    assert_int_equal(store_checkpoint(f->st), STORE_OK);
    assert_int_equal(store_check(f->st), STORE_OK);
}

/* One commit of a record, to see where the WAL goes on. */
static void
commit_one(struct store *st, unsigned n)
{
    char id[CTR_ID_SIZE];

    snprintf(id, sizeof(id), "%064u", n);
    assert_int_equal(store_put_container(st, id, "{\"a\":1}", 7, (int64_t)n),
                     STORE_OK);
    assert_int_equal(store_flush(st), STORE_OK);
}

/*
 * A reader of an old snapshot stands for copies that never catch up
 * (commits all through them): each copy stops at it, the WAL is never
 * started over, and it grows. store_wal_restart does not wait for that
 * reader (STORE_OK, the WAL goes on); once it is gone, it copies the rest
 * and the next commit starts the WAL over.
 */
static void
t_restart_bounds_the_wal(void **state)
{
    struct sfx *f = *state;
    sqlite3 *rd = NULL;
    char path[128];
    uint32_t seq;
    int frames;

    fill_wal(f->st, 0, 10);
    snprintf(path, sizeof(path), "%s/reapd.db", f->dir);
    assert_int_equal(
        sqlite3_open_v2(path, &rd, SQLITE_OPEN_READONLY, "unix-excl"),
        SQLITE_OK);
    assert_int_equal(sqlite3_exec(rd,
                                  "BEGIN; SELECT count(*) FROM containers;",
                                  NULL, NULL, NULL),
                     SQLITE_OK);
    seq = wal_seq(f->dir);
    fill_wal(f->st, 1000, 300);
    assert_int_equal(store_checkpoint(f->st), STORE_OK);
    commit_one(f->st, 5000);
    frames = store_wal_frames(f->st);
    assert_true(frames > 300);
    assert_int_equal(wal_seq(f->dir), seq);

    assert_int_equal(store_wal_restart(f->st), STORE_OK);
    commit_one(f->st, 5001);
    assert_true(store_wal_frames(f->st) > frames);
    assert_int_equal(wal_seq(f->dir), seq);

    assert_int_equal(sqlite3_exec(rd, "COMMIT", NULL, NULL, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_close(rd), SQLITE_OK);
    assert_int_equal(store_wal_restart(f->st), STORE_OK);
    assert_int_equal(store_wal_pages(f->st), 0);
    commit_one(f->st, 5002);
    assert_true(store_wal_frames(f->st) < 10);
    assert_true(wal_seq(f->dir) > seq);
    assert_int_equal(store_check(f->st), STORE_OK);
}

int
main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, sfx_setup, sfx_teardown)
    const struct CMUnitTest tests[] = {
        T(t_checkpoint_by_caller),    T(t_copy_meets_open_transaction),
        T(t_copy_finds_the_wal_busy), T(t_copy_while_loop_commits),
        T(t_restart_bounds_the_wal),
    };
#undef T

    tu_test_filters();
    return cmocka_run_group_tests(tests, NULL, NULL);
}
