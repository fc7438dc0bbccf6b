/*
 * store_fx — what the store's unit tests share (tests/unit/test_store*.c,
 * one per part of the store): a real reapd.db in a temporary directory
 * per test (the cmocka setup and teardown), a look at the file behind
 * the store's back (its own connection while it is open, the file being
 * locked; a second one otherwise), reports by number, and the pipe a
 * writer child tells its parent what it has done through. Each helper
 * fails the running test when something it needs goes wrong.
 */
#ifndef STORE_FX_H
#define STORE_FX_H

#include <sqlite3.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct store;
struct store_report;

/* A test's store: open in `dir` from sfx_setup to sfx_teardown. */
struct sfx {
    char dir[64];
    struct store *st;
};

/* A new temporary directory into `dir`; sfx_tmpdir_free removes it and
 * the store's files in it. */
void sfx_tmpdir_new(char *dir, size_t len);
void sfx_tmpdir_free(const char *dir);

/* store_open and store_close, keeping count of the stores open (for
 * sfx_raw_open); sfx_must_open fails the test when the open fails. */
int sfx_open(const char *dir, struct store **out, char *err, size_t errlen);
int sfx_close(struct store *st);
struct store *sfx_must_open(const char *dir);
/* cmocka's setup and teardown: *state is a struct sfx, its store open. */
int sfx_setup(void **state);
int sfx_teardown(void **state);
/* Closes the store and opens it again. */
void sfx_reopen(struct sfx *f);

/* A second connection to the database in `dir`, even while a store is
 * open there. */
sqlite3 *sfx_raw_second(const char *dir);
/* The connection to look behind the store's back with: the store's own
 * while one is open in `dir`, else a second one; sfx_raw_close closes
 * only the latter. */
sqlite3 *sfx_raw_open(const char *dir);
void sfx_raw_close(sqlite3 *db);
/* The one integer, or the text, `sql` answers; sfx_raw_exec runs it. */
int64_t sfx_raw_int(const char *dir, const char *sql);
void sfx_raw_text(const char *dir, const char *sql, char *buf, size_t len);
void sfx_raw_exec(const char *dir, const char *sql);

/* Report number `r` (tu_report_id) of container number `c`, added. */
int sfx_add(struct store *st, unsigned r, unsigned c, int64_t now);
int sfx_mark_delivered(struct store *st, unsigned r, int64_t now);
int sfx_mark_dead(struct store *st, unsigned r, const char *error);
int sfx_mark_retry(struct store *st, unsigned r, int64_t next,
                   const char *error);
/* Report number `r`, with its body. */
int sfx_get(struct store *st, unsigned r, struct store_report *out);
/* The due list as report numbers, "1,2,4", for one readable assert. */
void sfx_due_str(struct store *st, int64_t now, size_t max, char *buf,
                 size_t len);

/* What a writer child tells its parent, after each write has returned:
 * a kind and a report number. */
enum { SFX_ACK_OPEN = 'O', SFX_ACK_REPORT = 'R', SFX_ACK_FLUSH = 'F' };
void sfx_ack(int fd, uint32_t what, uint32_t n);
/* Reads one ack, which must be `what`. */
void sfx_wait_ack(int fd, uint32_t what);

/* CLOCK_MONOTONIC in microseconds. */
int64_t sfx_now_us(void);

/* While on, the database refuses to delete a container record (a write
 * that fails inside a transaction). */
void sfx_refuse_deletes(struct sfx *f, bool on);

#endif
