/*
 * store_fx — what the store's unit tests (tests/unit/test_store*.c)
 * share; see store_fx.h.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "store.h"
#include "store_fx.h"
#include "testutil.h"

void
sfx_tmpdir_new(char *dir, size_t len)
{
    snprintf(dir, len, "/tmp/reapd-store-XXXXXX");
    assert_non_null(mkdtemp(dir));
}

void
sfx_tmpdir_free(const char *dir)
{
    char path[128];

    tu_rm_store(dir);
    snprintf(path, sizeof(path), "%s/reapd.db", dir);
    rmdir(path); /* the test that made it a directory */
    assert_int_equal(rmdir(dir), 0);
}

/* The stores open now, by directory (sfx_raw_open). */
#define NOPENED 4
static struct {
    char dir[128];
    struct store *st;
} opened[NOPENED];

int
sfx_open(const char *dir, struct store **out, char *err, size_t errlen)
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

int
sfx_close(struct store *st)
{
    size_t i;

    for (i = 0; st != NULL && i < NOPENED; i++)
        if (opened[i].st == st)
            opened[i].st = NULL;
    return store_close(st);
}

struct store *
sfx_must_open(const char *dir)
{
    struct store *st = NULL;
    char err[512];
    int r = sfx_open(dir, &st, err, sizeof(err));

    if (r != STORE_OK)
        fail_msg("sfx_open(%s): %d %s", dir, r, err);
    return st;
}

int
sfx_setup(void **state)
{
    struct sfx *f = calloc(1, sizeof(*f));

    assert_non_null(f);
    sfx_tmpdir_new(f->dir, sizeof(f->dir));
    f->st = sfx_must_open(f->dir);
    *state = f;
    return 0;
}

int
sfx_teardown(void **state)
{
    struct sfx *f = *state;

    assert_int_equal(sfx_close(f->st), STORE_OK);
    sfx_tmpdir_free(f->dir);
    free(f);
    return 0;
}

void
sfx_reopen(struct sfx *f)
{
    assert_int_equal(sfx_close(f->st), STORE_OK);
    f->st = sfx_must_open(f->dir);
}

/* A second connection, even while a store is open. */
sqlite3 *
sfx_raw_second(const char *dir)
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
sqlite3 *
sfx_raw_open(const char *dir)
{
    size_t i;

    for (i = 0; i < NOPENED; i++)
        if (opened[i].st != NULL && strcmp(opened[i].dir, dir) == 0)
            return store_sqlite(opened[i].st);
    return sfx_raw_second(dir);
}

void
sfx_raw_close(sqlite3 *db)
{
    size_t i;

    for (i = 0; i < NOPENED; i++)
        if (opened[i].st != NULL && store_sqlite(opened[i].st) == db)
            return;
    sqlite3_close(db);
}

int64_t
sfx_raw_int(const char *dir, const char *sql)
{
    sqlite3 *db = sfx_raw_open(dir);
    sqlite3_stmt *s = NULL;
    int64_t v;

    assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &s, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(s), SQLITE_ROW);
    v = sqlite3_column_int64(s, 0);
    sqlite3_finalize(s);
    sfx_raw_close(db);
    return v;
}

void
sfx_raw_text(const char *dir, const char *sql, char *buf, size_t len)
{
    sqlite3 *db = sfx_raw_open(dir);
    sqlite3_stmt *s = NULL;

    assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &s, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(s), SQLITE_ROW);
    snprintf(buf, len, "%s", (const char *)sqlite3_column_text(s, 0));
    sqlite3_finalize(s);
    sfx_raw_close(db);
}

void
sfx_raw_exec(const char *dir, const char *sql)
{
    sqlite3 *db = sfx_raw_open(dir);
    char *msg = NULL;

    if (sqlite3_exec(db, sql, NULL, NULL, &msg) != SQLITE_OK)
        fail_msg("%s: %s", sql, msg);
    sfx_raw_close(db);
}

int
sfx_add(struct store *st, unsigned r, unsigned c, int64_t now)
{
    char id[STORE_REPORT_ID_MAX + 1], ctr[STORE_ID_MAX + 1], body[128];
    int n;

    tu_report_id(id, r);
    tu_container_id(ctr, c);
    n = snprintf(body, sizeof(body), "{\"report_id\":\"%s\",\"n\":%u}", id, r);
    return store_add_report(st, id, ctr, body, (size_t)n, now);
}

int
sfx_mark_delivered(struct store *st, unsigned r, int64_t now)
{
    char id[STORE_REPORT_ID_MAX + 1];

    tu_report_id(id, r);
    return store_mark_delivered(st, id, now);
}

int
sfx_mark_dead(struct store *st, unsigned r, const char *error)
{
    char id[STORE_REPORT_ID_MAX + 1];

    tu_report_id(id, r);
    return store_mark_dead(st, id, error);
}

int
sfx_mark_retry(struct store *st, unsigned r, int64_t next, const char *error)
{
    char id[STORE_REPORT_ID_MAX + 1];

    tu_report_id(id, r);
    return store_mark_retry(st, id, next, error);
}

int
sfx_get(struct store *st, unsigned r, struct store_report *out)
{
    char id[STORE_REPORT_ID_MAX + 1];

    tu_report_id(id, r);
    return store_get_report(st, id, true, out);
}

/* The due list as report numbers, "1,2,4", for one readable assert. */
void
sfx_due_str(struct store *st, int64_t now, size_t max, char *buf, size_t len)
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

void
sfx_ack(int fd, uint32_t what, uint32_t n)
{
    uint32_t a[2] = {what, n};

    if (write(fd, a, sizeof(a)) != sizeof(a))
        _exit(4);
}

/* Reads one ack, which must be `what`. */
void
sfx_wait_ack(int fd, uint32_t what)
{
    uint32_t a[2];

    assert_int_equal(read(fd, a, sizeof(a)), sizeof(a));
    assert_int_equal(a[0], what);
}

int64_t
sfx_now_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* While on, the database refuses to delete a container record (a write
 * that fails inside a transaction). */
void
sfx_refuse_deletes(struct sfx *f, bool on)
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
