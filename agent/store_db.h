/*
 * store_db — what each part of the store does with SQLite: result codes
 * and the message of the last failure, stepping and binding the prepared
 * statements, transactions (rolled back on any error; a commit adds what
 * it wrote to the store's counters), and the checks of ids and bodies
 * before they are bound. Its functions carry the prefix sdb_.
 *
 * Private to the store's files (store_int.h); it calls nothing of theirs.
 * Every int function returns a store_result; an error's text is in
 * st->errmsg (store_errmsg).
 */
#ifndef REAPD_STORE_DB_H
#define REAPD_STORE_DB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store_int.h"

/* SQLite's result code `rc` as a store_result (STORE_OK for OK, ROW and
 * DONE). */
int sdb_map_rc(int rc);
/* Records in st->errmsg why SQLite said `rc` while doing `what`; the
 * mapped code, never STORE_OK. */
int sdb_fail(struct store *st, int rc, const char *what);
/* Records "`what`: invalid argument"; STORE_INVALID. */
int sdb_invalid(struct store *st, const char *what);

/* A state column's text as the enum: 0, or -1 for text it is not. */
int sdb_state_parse(const char *s, enum store_state *out);
/* Whether `s` is an id or key: 1..max bytes of printable ASCII, no
 * space. */
bool sdb_valid_id(const char *s, size_t max);
/* Whether `s` is a body: at most `max` bytes, no NUL among them. */
bool sdb_valid_body(const char *s, size_t len, size_t max);

/* Resets statement `s` and clears its bindings. */
void sdb_done(sqlite3_stmt *s);
/* Steps statement `id` once (its rows, if any, do not matter) and resets
 * it. */
int sdb_run(struct store *st, enum stmt_id id, const char *what);
/* Binds parameter `i` of `s` (`v` NULL: NULL). The text is not copied:
 * it must live until the statement is reset. */
int sdb_bind_text(struct store *st, sqlite3_stmt *s, int i, const char *v,
                  size_t n, const char *what);
int sdb_bind_int(struct store *st, sqlite3_stmt *s, int i, int64_t v,
                 const char *what);

/* BEGIN IMMEDIATE, after ending any transaction an earlier failure left
 * open. */
int sdb_begin(struct store *st, const char *what);
/* COMMIT; on failure the transaction is rolled back. */
int sdb_commit(struct store *st, const char *what);
/* Ends the open transaction, if any, undoing it and what it counted. */
void sdb_rollback(struct store *st);
/* `n` reports went from state `from` to `to` (-1: none, an insert or a
 * delete): counted at once, or at the commit of the transaction open. */
void sdb_count_moved(struct store *st, int from, int to, int64_t n);
/* synchronous=FULL (`full`) or NORMAL for the commits that follow. */
int sdb_set_full_sync(struct store *st, bool full, const char *what);

/* The one integer `sql` answers into *v; an SQLite result code. */
int sdb_query_int(sqlite3 *db, const char *sql, int64_t *v);
/* The first line a check PRAGMA answers ("ok" when all is well) into
 * `buf`; an SQLite result code. */
int sdb_query_check(sqlite3 *db, const char *sql, char *buf, size_t len);
/* Text column `col` of the current row into `buf` (`size` bytes); false
 * if absent, empty or too long. */
bool sdb_column_id(sqlite3_stmt *s, int col, char *buf, size_t size);

#endif
