/*
 * store_db — the store's SQLite layer, under all its other files: result
 * codes and messages, statements, transactions; see store_db.h.
 *
 * Every statement is prepared once at open (store_open.c) and bound with
 * parameters. Every write runs in an explicit transaction that is rolled
 * back on any error, so a failed call leaves the database exactly as it
 * was; the counters a transaction moves (reports by state, record
 * writes) count only once it commits.
 */
#include "store_db.h"

#include <sqlite3.h>
#include <stdio.h>
#include <string.h>

/* ---- results and messages -------------------------------------------- */

const char *
store_strerror(int result)
{
    switch (result) {
    case STORE_OK:
        return "ok";
    case STORE_DUPLICATE:
        return "duplicate";
    case STORE_NOT_FOUND:
        return "not found";
    case STORE_CONFLICT:
        return "already delivered";
    case STORE_FULL:
        return "disk full";
    case STORE_IOERR:
        return "I/O error";
    case STORE_CORRUPT:
        return "database corrupt";
    case STORE_BUSY:
        return "database locked by another process";
    case STORE_NOMEM:
        return "out of memory";
    case STORE_INVALID:
        return "invalid argument";
    case STORE_TOO_NEW:
        return "database schema too new";
    default:
        return "database error";
    }
}

int
sdb_map_rc(int rc)
{
    if (rc == SQLITE_IOERR_NOMEM)
        return STORE_NOMEM;
    switch (rc & 0xff) {
    case SQLITE_OK:
    case SQLITE_ROW:
    case SQLITE_DONE:
        return STORE_OK;
    case SQLITE_FULL:
        return STORE_FULL;
    case SQLITE_IOERR:
        return STORE_IOERR;
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
        return STORE_CORRUPT;
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
        return STORE_BUSY;
    case SQLITE_NOMEM:
        return STORE_NOMEM;
    case SQLITE_TOOBIG:
    case SQLITE_RANGE:
        return STORE_INVALID;
    default:
        return STORE_ERROR;
    }
}

/* Records why SQLite said `rc` while doing `what`; the mapped code. */
int
sdb_fail(struct store *st, int rc, const char *what)
{
    const char *msg = sqlite3_errmsg(st->db);
    int result = sdb_map_rc(rc);

    /* The handle's message may belong to another call (bind errors leave
     * it alone); the code's own text is always right. */
    if (sqlite3_extended_errcode(st->db) != rc)
        msg = sqlite3_errstr(rc);
    snprintf(st->errmsg, sizeof(st->errmsg), "%s: %s", what, msg);
    return result != STORE_OK ? result : STORE_ERROR;
}

int
sdb_invalid(struct store *st, const char *what)
{
    snprintf(st->errmsg, sizeof(st->errmsg), "%s: invalid argument", what);
    return STORE_INVALID;
}

const char *
store_errmsg(const struct store *st)
{
    return st->errmsg;
}

const char *
store_path(const struct store *st)
{
    return st->path;
}

const char *
store_state_name(enum store_state s)
{
    switch (s) {
    case STORE_PENDING:
        return "pending";
    case STORE_DELIVERED:
        return "delivered";
    case STORE_DEAD:
        return "dead";
    }
    return "?";
}

const char *
store_dead_reason_name(enum store_dead_reason r)
{
    switch (r) {
    case STORE_DEAD_NONE:
        return NULL;
    case STORE_DEAD_REJECTED:
        return "rejected";
    case STORE_DEAD_TOO_LARGE:
        return "too_large";
    case STORE_DEAD_INVALID:
        return "invalid";
    }
    return NULL;
}

int
sdb_state_parse(const char *s, enum store_state *out)
{
    if (s == NULL)
        return -1;
    if (strcmp(s, "pending") == 0)
        *out = STORE_PENDING;
    else if (strcmp(s, "delivered") == 0)
        *out = STORE_DELIVERED;
    else if (strcmp(s, "dead") == 0)
        *out = STORE_DEAD;
    else
        return -1;
    return 0;
}

/* 1..max bytes of printable ASCII, no space: what ids and keys look like,
 * and nothing that could confuse a log line or a URL. */
bool
sdb_valid_id(const char *s, size_t max)
{
    size_t i;

    if (s == NULL)
        return false;
    for (i = 0; s[i] != '\0'; i++) {
        if (i >= max || s[i] < 0x21 || s[i] > 0x7e)
            return false;
    }
    return i > 0;
}

bool
sdb_valid_body(const char *s, size_t len, size_t max)
{
    return s != NULL && len <= max && memchr(s, '\0', len) == NULL;
}

/* ---- statements and transactions ------------------------------------- */

void
sdb_done(sqlite3_stmt *s)
{
    sqlite3_reset(s);
    sqlite3_clear_bindings(s);
}

/* Steps a statement whose rows (if any) do not matter, and resets it. */
int
sdb_run(struct store *st, enum stmt_id id, const char *what)
{
    sqlite3_stmt *s = st->stmt[id];
    int rc, result = STORE_OK;

    rc = sqlite3_step(s);
    if (rc != SQLITE_DONE && rc != SQLITE_ROW)
        result = sdb_fail(st, rc, what);
    sdb_done(s);
    return result;
}

int
sdb_bind_text(struct store *st, sqlite3_stmt *s, int i, const char *v,
              size_t n, const char *what)
{
    int rc;

    if (v == NULL)
        rc = sqlite3_bind_null(s, i);
    else
        rc = sqlite3_bind_text64(s, i, v, n, SQLITE_STATIC, SQLITE_UTF8);
    return rc == SQLITE_OK ? STORE_OK : sdb_fail(st, rc, what);
}

int
sdb_bind_int(struct store *st, sqlite3_stmt *s, int i, int64_t v,
             const char *what)
{
    int rc = sqlite3_bind_int64(s, i, v);

    return rc == SQLITE_OK ? STORE_OK : sdb_fail(st, rc, what);
}

/* Ends a failed transaction. SQLite may already have rolled it back
 * itself (disk full, I/O error), and then there is nothing to do. */
void
sdb_rollback(struct store *st)
{
    memset(st->nreports_tx, 0, sizeof(st->nreports_tx));
    st->record_writes_tx = 0;
    if (sqlite3_get_autocommit(st->db))
        return;
    if (st->stmt[S_ROLLBACK] == NULL) { /* opening: not prepared yet */
        sqlite3_exec(st->db, "ROLLBACK", NULL, NULL, NULL);
        return;
    }
    sqlite3_step(st->stmt[S_ROLLBACK]);
    sqlite3_reset(st->stmt[S_ROLLBACK]);
}

int
sdb_begin(struct store *st, const char *what)
{
    sdb_rollback(st); /* one an earlier failure could not end */
    return sdb_run(st, S_BEGIN, what);
}

int
sdb_commit(struct store *st, const char *what)
{
    int result = sdb_run(st, S_COMMIT, what);
    int i;

    if (result != STORE_OK) {
        sdb_rollback(st);
        return result;
    }
    st->commits++;
    st->record_writes += st->record_writes_tx;
    st->record_writes_tx = 0;
    for (i = 0; i < 3; i++) {
        st->nreports[i] += st->nreports_tx[i];
        st->nreports_tx[i] = 0;
    }
    return result;
}

/* `n` reports went from state `from` to `to` (-1: none, an insert or a
 * delete): counted at once, or at the commit of the transaction open. */
void
sdb_count_moved(struct store *st, int from, int to, int64_t n)
{
    int64_t *c =
        sqlite3_get_autocommit(st->db) ? st->nreports : st->nreports_tx;

    if (from >= 0)
        c[from] -= n;
    if (to >= 0)
        c[to] += n;
}

/* synchronous=FULL makes COMMIT fsync the WAL: for reports only. */
int
sdb_set_full_sync(struct store *st, bool full, const char *what)
{
    int rc = sqlite3_exec(st->db,
                          full ? "PRAGMA synchronous = FULL"
                               : "PRAGMA synchronous = NORMAL",
                          NULL, NULL, NULL);

    return rc == SQLITE_OK ? STORE_OK : sdb_fail(st, rc, what);
}

/* The single integer a PRAGMA (or any one-value query) answers. */
int
sdb_query_int(sqlite3 *db, const char *sql, int64_t *v)
{
    sqlite3_stmt *s = NULL;
    int rc;

    rc = sqlite3_prepare_v2(db, sql, -1, &s, NULL);
    if (rc != SQLITE_OK)
        goto out;
    rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) {
        *v = sqlite3_column_int64(s, 0);
        rc = SQLITE_OK;
    } else if (rc == SQLITE_DONE) {
        rc = SQLITE_ERROR;
    }
out:
    sqlite3_finalize(s);
    return rc;
}

/* The first line a check PRAGMA answers, "ok" when all is well, into
 * buf; or an SQLite error code when it could not even run. */
int
sdb_query_check(sqlite3 *db, const char *sql, char *buf, size_t len)
{
    sqlite3_stmt *s = NULL;
    const unsigned char *t;
    int rc;

    rc = sqlite3_prepare_v2(db, sql, -1, &s, NULL);
    if (rc != SQLITE_OK)
        goto out;
    rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) {
        char *p;

        t = sqlite3_column_text(s, 0);
        snprintf(buf, len, "%s", t != NULL ? (const char *)t : "?");
        /* One line, for the log. */
        for (p = buf; *p != '\0'; p++) {
            if ((unsigned char)*p < 0x20)
                *p = ' ';
        }
        rc = SQLITE_OK;
    } else if (rc == SQLITE_DONE) {
        snprintf(buf, len, "no answer");
        rc = SQLITE_OK;
    }
out:
    sqlite3_finalize(s);
    return rc;
}

/* A text column into a fixed buffer; false if absent or too long. */
bool
sdb_column_id(sqlite3_stmt *s, int col, char *buf, size_t size)
{
    const unsigned char *t = sqlite3_column_text(s, col);
    size_t n = (size_t)sqlite3_column_bytes(s, col);

    if (t == NULL || n == 0 || n >= size)
        return false;
    memcpy(buf, t, n);
    buf[n] = '\0';
    return strlen(buf) == n;
}

uint64_t
store_commits(const struct store *st)
{
    return st->commits;
}

uint64_t
store_record_writes(const struct store *st)
{
    return st->record_writes;
}

struct sqlite3 *
store_sqlite(struct store *st)
{
    return st->db;
}
