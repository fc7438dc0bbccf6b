/*
 * test_store_wal — the WAL and its checkpoints (agent/store_wal.c): no
 * commit copies the WAL, the caller does past its bound, the WAL starts
 * over after the copy; a copy that meets the loop's open transaction
 * waits for it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
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

/* No commit checkpoints: the WAL grows past SQLite's automatic bound
 * (1,000 pages) until the caller copies it, told by the hook once past
 * its own bound. The checkpoint itself starts the WAL over (with a row
 * of its own), so that the sync of its new header is not the next
 * commit's, which is the loop's. */
static void
t_checkpoint_by_caller(void **state)
{
    struct sfx *f = *state;
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
    sfx_reopen(f);
    {
        struct store_containers l;

        assert_int_equal(store_get_containers(f->st, &l), STORE_OK);
        assert_int_equal(l.n, i);
        store_containers_free(&l);
    }
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
    struct sfx *f = *state;
    sqlite3 *db = store_sqlite(f->st);
    struct copier c = {.st = f->st, .rc = -1};
    struct timespec committed;
    pthread_t th;

    assert_int_equal(sfx_add(f->st, 1, 1, 1000), STORE_OK);
    assert_int_equal(sfx_add(f->st, 2, 2, 2000), STORE_OK);
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

int
main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, sfx_setup, sfx_teardown)
    const struct CMUnitTest tests[] = {
        T(t_copy_waits_for_transaction),
        T(t_checkpoint_by_caller),
    };
#undef T

    tu_test_filters();
    return cmocka_run_group_tests(tests, NULL, NULL);
}
