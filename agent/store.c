/*
 * store — reapd's durable state in one SQLite database; see store.h.
 *
 * WAL mode, so a commit appends to one file and a kill -9 at any instant
 * leaves the last committed transaction readable at the next open.
 * Every statement is prepared once at open and bound with parameters;
 * the only SQL text formatted at run time carries integers we computed
 * (PRAGMA takes no parameters). Every write runs in an explicit
 * transaction that is rolled back on any error, so a failed call leaves
 * the database exactly as it was.
 *
 * Container records and checkpoints wait in a small hash table (the
 * latest value per key) until store_flush writes them all at once; they
 * leave it only once their transaction has committed.
 */
#include "store.h"
#include "walbuf.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* The loop thread waits at most this long for a lock someone else holds
 * (an operator's sqlite3 shell in a write transaction). */
#define BUSY_TIMEOUT_MS 100
#define PEND_MIN_CAP    64
/* Pending records a report's transaction takes along (add_report). */
#define STORE_REPORT_ROWS 32
/* store_checkpoint_bg's wait for the loop's transaction to end. */
#define STORE_CKPT_TXN_WAIT_MS 1000

/*
 * The schema, as an ordered list: migrations[v] takes user_version v to
 * v + 1, in one transaction with the version bump. Never edit one that
 * has shipped; append.
 */
static const char *const migrations[] = {
    /* 0 -> 1: the outbox, container records, checkpoints. */
    "CREATE TABLE meta ("
    "  name TEXT PRIMARY KEY NOT NULL,"
    "  value INTEGER NOT NULL"
    ") WITHOUT ROWID;"
    "INSERT INTO meta(name, value) VALUES ('report_seq', 0);"
    "CREATE TABLE reports ("
    "  report_id TEXT PRIMARY KEY NOT NULL,"
    "  container_id TEXT NOT NULL,"
    "  seq INTEGER NOT NULL UNIQUE,"
    "  body TEXT NOT NULL,"
    "  state TEXT NOT NULL DEFAULT 'pending'"
    "    CHECK (state IN ('pending', 'delivered', 'dead')),"
    "  attempts INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),"
    "  next_attempt_ms INTEGER NOT NULL,"
    "  last_error TEXT,"
    "  created_ms INTEGER NOT NULL,"
    "  delivered_ms INTEGER,"
    /* 1 for the oldest pending report of its container, the only one
     * that can be due: so finding the due ones reads one row per
     * container, not every pending report. Set by the insert, moved on
     * by the trigger below; store_check verifies it. */
    "  head INTEGER NOT NULL DEFAULT 0 CHECK (head IN (0, 1))"
    ");"
    "CREATE INDEX reports_heads ON reports(seq, next_attempt_ms)"
    "  WHERE head = 1;"
    "CREATE INDEX reports_pending ON reports(container_id, seq)"
    "  WHERE state = 'pending';"
    "CREATE INDEX reports_state_seq ON reports(state, seq);"
    /* Delivered or dead: the next report of that container is the head.
     * A trigger, so no way of changing the state can forget it. */
    "CREATE TRIGGER reports_next_head AFTER UPDATE OF state ON reports"
    "  WHEN OLD.state = 'pending' AND NEW.state <> 'pending'"
    "BEGIN"
    "  UPDATE reports SET head = 0 WHERE report_id = NEW.report_id;"
    "  UPDATE reports SET head = 1 WHERE seq = (SELECT min(seq)"
    "    FROM reports WHERE container_id = NEW.container_id"
    "    AND state = 'pending');"
    "END;"
    "CREATE TABLE containers ("
    "  id TEXT PRIMARY KEY NOT NULL,"
    "  record TEXT NOT NULL,"
    "  updated_ms INTEGER NOT NULL"
    ");"
    "CREATE TABLE checkpoints ("
    "  key TEXT PRIMARY KEY NOT NULL,"
    "  value INTEGER NOT NULL"
    ");",
    /* 1 -> 2: why a dead letter is dead. Version 1 knew one way to die,
     * the upstream's refusal. A dead letter requeued by hand (docs/
     * runbook.md sets its state back to pending) loses its reason. */
    "ALTER TABLE reports ADD COLUMN dead_reason TEXT"
    "  CHECK (dead_reason IN ('rejected', 'too_large', 'invalid'));"
    "UPDATE reports SET dead_reason = 'rejected' WHERE state = 'dead';"
    "CREATE TRIGGER reports_requeued AFTER UPDATE OF state ON reports"
    "  WHEN OLD.state = 'dead' AND NEW.state <> 'dead'"
    "BEGIN"
    "  UPDATE reports SET dead_reason = NULL"
    "    WHERE report_id = NEW.report_id;"
    "END;",
};

_Static_assert(sizeof(migrations) / sizeof(migrations[0]) ==
                   STORE_SCHEMA_VERSION,
               "one migration per schema version");

#define REPORT_COLS                                                           \
    "report_id, container_id, seq, state, attempts, next_attempt_ms, "        \
    "created_ms, delivered_ms, last_error, dead_reason"

enum stmt_id {
    S_BEGIN,
    S_COMMIT,
    S_ROLLBACK,
    S_REPORT_INSERT,
    S_REPORT_INSERT_DELIVERED,
    S_SEQ_BUMP,
    S_REPORT_EXISTS,
    S_REPORT_GET,
    S_REPORT_LATEST,
    S_DUE,
    S_AFTER,
    S_AFTER_DESC,
    S_LAST_SEQ,
    S_REQUEUE_STATE,
    S_REQUEUE,
    S_REQUEUE_DEAD,
    S_HEADS_ONE,
    S_HEADS_ALL,
    S_MARK_DELIVERED,
    S_MARK_DEAD,
    S_MARK_RETRY,
    S_COUNTS,
    S_OLDEST_PENDING,
    S_SIZE,
    S_PRUNE_AGE,
    S_PRUNE_COUNT,
    S_CTR_PUT,
    S_CTR_DELETE,
    S_CTR_ALL,
    S_CKPT_SET,
    S_CKPT_GET,
    S_COUNT
};

static const char *const stmt_sql[S_COUNT] = {
    [S_BEGIN] = "BEGIN IMMEDIATE",
    [S_COMMIT] = "COMMIT",
    [S_ROLLBACK] = "ROLLBACK",
    /* seq from the counter in meta, never reused even after pruning. The
     * WHERE clause also keeps the upsert's ON from reading as a join. */
    [S_REPORT_INSERT] =
        "INSERT INTO reports(report_id, container_id, seq, body, state,"
        " attempts, next_attempt_ms, created_ms, head)"
        " SELECT ?1, ?2, value + 1, ?3, 'pending', 0, ?4, ?4,"
        " NOT EXISTS (SELECT 1 FROM reports"
        "  WHERE container_id = ?2 AND state = 'pending')"
        " FROM meta WHERE name = 'report_seq'"
        " ON CONFLICT(report_id) DO NOTHING",
    /* Delivered as it is stored (no upstream): written so at once, not
     * as pending then marked, which ran the head trigger and wrote and
     * removed two index entries for nothing. Never pending, so never a
     * head; a pending report of the same container keeps its own. */
    [S_REPORT_INSERT_DELIVERED] =
        "INSERT INTO reports(report_id, container_id, seq, body, state,"
        " attempts, next_attempt_ms, created_ms, delivered_ms, head)"
        " SELECT ?1, ?2, value + 1, ?3, 'delivered', 1, ?4, ?4, ?4, 0"
        " FROM meta WHERE name = 'report_seq'"
        " ON CONFLICT(report_id) DO NOTHING",
    [S_SEQ_BUMP] = "UPDATE meta SET value = value + 1"
                   " WHERE name = 'report_seq'",
    [S_REPORT_EXISTS] = "SELECT 1 FROM reports WHERE report_id = ?1",
    [S_REPORT_GET] = "SELECT " REPORT_COLS ", CASE WHEN ?2 THEN body END"
                     " FROM reports WHERE report_id = ?1",
    [S_REPORT_LATEST] = "SELECT " REPORT_COLS ", CASE WHEN ?2 THEN body END"
                        " FROM reports WHERE container_id = ?1"
                        " ORDER BY seq DESC LIMIT 1",
    /* Only the oldest pending report of a container can be due. */
    [S_DUE] = "SELECT " REPORT_COLS ", body FROM reports"
              " WHERE head = 1 AND next_attempt_ms <= ?1"
              " ORDER BY seq LIMIT ?2",
    /* ?3 NULL: any container; ?4 NULL: any state. */
    [S_AFTER] = "SELECT " REPORT_COLS ", CASE WHEN ?5 THEN body END"
                " FROM reports WHERE seq > ?1"
                " AND (?3 IS NULL OR container_id = ?3)"
                " AND (?4 IS NULL OR state = ?4)"
                " ORDER BY seq LIMIT ?2",
    [S_AFTER_DESC] = "SELECT " REPORT_COLS ", CASE WHEN ?5 THEN body END"
                     " FROM reports WHERE seq > ?1"
                     " AND (?3 IS NULL OR container_id = ?3)"
                     " AND (?4 IS NULL OR state = ?4)"
                     " ORDER BY seq DESC LIMIT ?2",
    [S_LAST_SEQ] = "SELECT value FROM meta WHERE name = 'report_seq'",
    [S_REQUEUE_STATE] = "SELECT state, container_id FROM reports"
                        " WHERE report_id = ?1",
    [S_REQUEUE] = "UPDATE reports SET state = 'pending', attempts = 0,"
                  " next_attempt_ms = ?2, last_error = NULL"
                  " WHERE report_id = ?1 AND state <> 'delivered'",
    [S_REQUEUE_DEAD] = "UPDATE reports SET state = 'pending', attempts = 0,"
                       " next_attempt_ms = ?1, last_error = NULL"
                       " WHERE state = 'dead'",
    /* A report back to pending may be older than its container's head:
     * the head is the oldest pending one again (the trigger only moves
     * it on when a report leaves pending). */
    [S_HEADS_ONE] = "UPDATE reports SET head = (seq = (SELECT min(seq)"
                    " FROM reports WHERE container_id = ?1"
                    " AND state = 'pending'))"
                    " WHERE container_id = ?1"
                    " AND (state = 'pending' OR head = 1)",
    [S_HEADS_ALL] = "UPDATE reports SET head = (seq = (SELECT min(r.seq)"
                    " FROM reports AS r WHERE r.container_id ="
                    " reports.container_id AND r.state = 'pending'))"
                    " WHERE state = 'pending' OR head = 1",
    [S_MARK_DELIVERED] =
        "UPDATE reports SET state = 'delivered', attempts = attempts + 1,"
        " delivered_ms = ?2, last_error = NULL"
        " WHERE report_id = ?1 AND state = 'pending'",
    [S_MARK_DEAD] = "UPDATE reports SET state = 'dead',"
                    " attempts = attempts + ?3, last_error = ?2,"
                    " dead_reason = ?4"
                    " WHERE report_id = ?1 AND state = 'pending'",
    [S_MARK_RETRY] = "UPDATE reports SET attempts = attempts + 1,"
                     " next_attempt_ms = ?2, last_error = ?3"
                     " WHERE report_id = ?1 AND state = 'pending'",
    [S_COUNTS] = "SELECT state, count(*) FROM reports GROUP BY state",
    /* seq grows with each report: the first pending by seq is the
     * oldest, found through reports_state_seq without a scan. */
    [S_OLDEST_PENDING] = "SELECT created_ms FROM reports"
                         " WHERE state = 'pending' ORDER BY seq LIMIT 1",
    [S_SIZE] = "SELECT page_count * page_size"
               " FROM pragma_page_count(), pragma_page_size()",
    /* Oldest first, at most ?2 rows at a time. */
    [S_PRUNE_AGE] = "DELETE FROM reports WHERE rowid IN (SELECT rowid"
                    " FROM reports WHERE state = 'delivered'"
                    " AND delivered_ms < ?1 ORDER BY seq LIMIT ?2)",
    [S_PRUNE_COUNT] = "DELETE FROM reports WHERE rowid IN (SELECT rowid"
                      " FROM reports WHERE state = 'delivered'"
                      " AND seq <= (SELECT seq FROM reports"
                      "  WHERE state = 'delivered'"
                      "  ORDER BY seq DESC LIMIT 1 OFFSET ?1)"
                      " ORDER BY seq LIMIT ?2)",
    [S_CTR_PUT] = "INSERT INTO containers(id, record, updated_ms)"
                  " VALUES (?1, ?2, ?3) ON CONFLICT(id) DO UPDATE"
                  " SET record = excluded.record,"
                  " updated_ms = excluded.updated_ms",
    [S_CTR_DELETE] = "DELETE FROM containers WHERE id = ?1",
    [S_CTR_ALL] = "SELECT id, record, updated_ms FROM containers",
    [S_CKPT_SET] = "INSERT INTO checkpoints(key, value) VALUES (?1, ?2)"
                   " ON CONFLICT(key) DO UPDATE SET value = excluded.value",
    [S_CKPT_GET] = "SELECT value FROM checkpoints WHERE key = ?1",
};

enum pend_kind { P_CONTAINER, P_CHECKPOINT };

/* One change waiting for store_flush. */
struct pend {
    char *key; /* NULL: a free slot */
    enum pend_kind kind;
    bool del; /* P_CONTAINER: delete the record */
    /* P_CONTAINER: its report's transaction deletes the record
     * (store_add_reports, `forget`): not written by it. */
    bool forgotten;
    char *json; /* P_CONTAINER put: the record */
    size_t len;
    int64_t value; /* P_CHECKPOINT: the value; P_CONTAINER: updated_ms */
};

struct store {
    sqlite3 *db;
    struct walbuf *walbuf; /* the VFS the database is opened through */
    char *path;
    bool journaled; /* reports: no FULL sync (store_set_journaled) */
    sqlite3_stmt *stmt[S_COUNT];
    int64_t page_size;
    int64_t default_max_pages;
    uint64_t commits; /* write transactions committed */
    /* A checkpoint the next store_add_reports writes in its transaction
     * (store_set_reports_checkpoint); key NULL: none. */
    const char *rckpt_key;
    int64_t rckpt_value;
    bool rckpt_written; /* the last store_add_reports wrote it */
    /* Container records put or deleted by committed transactions, and
     * by the one open. */
    uint64_t record_writes, record_writes_tx;
    /* Reports by state, kept as they change (/metrics asks at every
     * scrape; counting 100,000 rows took 4.4 ms of the loop): what is
     * committed, and what the open transaction would add. */
    int64_t nreports[3], nreports_tx[3];
    /* store_counts' other two, as last read: what it says while the WAL
     * copy holds the connection (bg_running). */
    int64_t oldest_pending_ms, db_bytes;
    bool bg_running; /* from store_checkpoint_begin to _end */
    uint64_t checkpoints;
    int wal_pages; /* frames in the WAL since its last reset (on_wal) */
    /* store_checkpoint_bg's, for store_checkpoint_end: */
    int bg_log, bg_done;
    uint64_t bg_commits; /* commits when it began */
    bool bg_restarted;   /* it started the WAL over */
    bool in_bg;          /* on_wal: the commit is store_checkpoint_bg's */
    int wal_bound;
    store_wal_cb on_wal_full;
    void *on_wal_arg;
    store_report_cb on_report;
    void *on_report_arg;

    /* Pending changes: open addressing, linear probing, never more than
     * half full; entries leave all at once (pend_clear) or by backward
     * shift (pend_remove), never leaving a hole in a probe run. */
    struct pend *pend;
    size_t pend_cap; /* a power of two */
    size_t npend;
    size_t nckpt; /* of them P_CHECKPOINT */
    size_t pend_bytes;

    char errmsg[1024];
};

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

static int
map_rc(int rc)
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
static int
store_fail(struct store *st, int rc, const char *what)
{
    const char *msg = sqlite3_errmsg(st->db);
    int result = map_rc(rc);

    /* The handle's message may belong to another call (bind errors leave
     * it alone); the code's own text is always right. */
    if (sqlite3_extended_errcode(st->db) != rc)
        msg = sqlite3_errstr(rc);
    snprintf(st->errmsg, sizeof(st->errmsg), "%s: %s", what, msg);
    return result != STORE_OK ? result : STORE_ERROR;
}

static int
invalid(struct store *st, const char *what)
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

/* A dead_reason column (NULL: none); -1 for a value this reapd does not
 * know, which the schema's CHECK rules out. */
static int
dead_reason_parse(const char *s, enum store_dead_reason *out)
{
    enum store_dead_reason r;

    *out = STORE_DEAD_NONE;
    if (s == NULL)
        return 0;
    for (r = STORE_DEAD_REJECTED; r <= STORE_DEAD_INVALID; r++) {
        if (strcmp(s, store_dead_reason_name(r)) == 0) {
            *out = r;
            return 0;
        }
    }
    return -1;
}

static int
state_parse(const char *s, enum store_state *out)
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
static bool
store_valid_id(const char *s, size_t max)
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

static bool
valid_body(const char *s, size_t len, size_t max)
{
    return s != NULL && len <= max && memchr(s, '\0', len) == NULL;
}

/* The length of `s` cut to STORE_ERRTEXT_MAX bytes, on a UTF-8
 * character boundary so the cut text stays valid. */
static size_t
errtext_len(const char *s)
{
    size_t n = strnlen(s, STORE_ERRTEXT_MAX + 1);

    if (n > STORE_ERRTEXT_MAX) {
        n = STORE_ERRTEXT_MAX;
        while (n > 0 && ((unsigned char)s[n] & 0xc0) == 0x80)
            n--;
    }
    return n;
}

/* ---- statements and transactions ------------------------------------- */

static void
done(sqlite3_stmt *s)
{
    sqlite3_reset(s);
    sqlite3_clear_bindings(s);
}

/* Steps a statement whose rows (if any) do not matter, and resets it. */
static int
run(struct store *st, enum stmt_id id, const char *what)
{
    sqlite3_stmt *s = st->stmt[id];
    int rc, result = STORE_OK;

    rc = sqlite3_step(s);
    if (rc != SQLITE_DONE && rc != SQLITE_ROW)
        result = store_fail(st, rc, what);
    done(s);
    return result;
}

static int
bind_text(struct store *st, sqlite3_stmt *s, int i, const char *v, size_t n,
          const char *what)
{
    int rc;

    if (v == NULL)
        rc = sqlite3_bind_null(s, i);
    else
        rc = sqlite3_bind_text64(s, i, v, n, SQLITE_STATIC, SQLITE_UTF8);
    return rc == SQLITE_OK ? STORE_OK : store_fail(st, rc, what);
}

static int
bind_int(struct store *st, sqlite3_stmt *s, int i, int64_t v, const char *what)
{
    int rc = sqlite3_bind_int64(s, i, v);

    return rc == SQLITE_OK ? STORE_OK : store_fail(st, rc, what);
}

/* Ends a failed transaction. SQLite may already have rolled it back
 * itself (disk full, I/O error), and then there is nothing to do. */
static void
rollback(struct store *st)
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

static int
begin(struct store *st, const char *what)
{
    rollback(st); /* one an earlier failure could not end */
    return run(st, S_BEGIN, what);
}

static int
commit(struct store *st, const char *what)
{
    int result = run(st, S_COMMIT, what);
    int i;

    if (result != STORE_OK) {
        rollback(st);
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
static void
count_moved(struct store *st, int from, int to, int64_t n)
{
    int64_t *c =
        sqlite3_get_autocommit(st->db) ? st->nreports : st->nreports_tx;

    if (from >= 0)
        c[from] -= n;
    if (to >= 0)
        c[to] += n;
}

/* synchronous=FULL makes COMMIT fsync the WAL: for reports only. */
static int
set_full_sync(struct store *st, bool full, const char *what)
{
    int rc = sqlite3_exec(st->db,
                          full ? "PRAGMA synchronous = FULL"
                               : "PRAGMA synchronous = NORMAL",
                          NULL, NULL, NULL);

    return rc == SQLITE_OK ? STORE_OK : store_fail(st, rc, what);
}

/* ---- opening ---------------------------------------------------------- */

/* SQLite's WAL hook, after each commit: only counts. Checkpointing here,
 * as the default hook does, would make whichever commit crosses the bound
 * pay for the copy. */
static int
on_wal(void *arg, sqlite3 *db, const char *name, int pages)
{
    struct store *st = arg;

    (void)db;
    (void)name;
    /* On the checkpoint's thread: store_checkpoint_end counts it, on the
     * loop. */
    if (st->in_bg)
        return SQLITE_OK;
    st->wal_pages = pages;
    if (st->on_wal_full != NULL && pages >= st->wal_bound)
        st->on_wal_full(st->on_wal_arg);
    return SQLITE_OK;
}

/* The single integer a PRAGMA (or any one-value query) answers. */
static int
query_int(sqlite3 *db, const char *sql, int64_t *v)
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
static int
query_check(sqlite3 *db, const char *sql, char *buf, size_t len)
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

/* A message for a failed open that says what to do about it. */
static int
open_fail(struct store *st, int result, const char *what, const char *detail)
{
    int n; /* a long path may cut the message; that is fine */

    switch (result) {
    case STORE_CORRUPT:
        n = snprintf(st->errmsg, sizeof(st->errmsg),
                     "%.400s: %.100s: %.300s; the file is not a usable reapd "
                     "database: move it aside to start with an empty state",
                     st->path, what, detail);
        break;
    case STORE_BUSY:
        n = snprintf(st->errmsg, sizeof(st->errmsg),
                     "%.400s: %.100s: %.300s; is another reapd using this "
                     "state_dir?",
                     st->path, what, detail);
        break;
    default:
        n = snprintf(st->errmsg, sizeof(st->errmsg), "%.400s: %.100s: %.300s",
                     st->path, what, detail);
        break;
    }
    (void)n;
    return result;
}

static int
open_fail_rc(struct store *st, int rc, const char *what)
{
    int result = map_rc(rc);

    return open_fail(st, result != STORE_OK ? result : STORE_ERROR, what,
                     sqlite3_errmsg(st->db));
}

/* Creates the file ourselves for its mode (SQLite would make it 0644, and
 * the -wal and -shm files copy the main file's mode), and makes a new
 * file's directory entry durable. */
static int
create_file(struct store *st, const char *dir)
{
    int fd, dfd, result;

    fd = open(st->path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW,
              0640);
    if (fd >= 0) {
        close(fd);
        dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        if (dfd >= 0) {
            fsync(dfd);
            close(dfd);
        }
        return STORE_OK;
    }
    if (errno == EEXIST) {
        /* Is it something we can open read-write (not a directory, not a
         * symlink)? Say so now, in the words of the system. */
        fd = open(st->path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
        if (fd >= 0) {
            close(fd);
            return STORE_OK;
        }
    }
    result = errno == ENOSPC   ? STORE_FULL
             : errno == EIO    ? STORE_IOERR
             : errno == ENOMEM ? STORE_NOMEM
                               : STORE_ERROR;
    return open_fail(st, result, "open", strerror(errno));
}

static int
too_new(struct store *st, int64_t v)
{
    char detail[160];

    snprintf(detail, sizeof(detail),
             "schema version %lld is not one this reapd (version %d) knows:"
             " written by a newer reapd? refusing to use it",
             (long long)v, STORE_SCHEMA_VERSION);
    return open_fail(st, STORE_TOO_NEW, "open", detail);
}

/* Brings the schema up to date: one transaction per migration, the
 * version re-read inside it (another process might have migrated). */
static int
migrate(struct store *st)
{
    char sql[64], what[64] = "schema migration";
    int64_t v = -1;
    int rc, result = STORE_OK;

    for (;;) {
        rc = sqlite3_exec(st->db, "BEGIN IMMEDIATE", NULL, NULL, NULL);
        if (rc == SQLITE_OK)
            rc = query_int(st->db, "PRAGMA user_version", &v);
        if (rc != SQLITE_OK)
            break;
        if (v == STORE_SCHEMA_VERSION) {
            /* Finding reports by container (an executor's wait, a
             * cursor filtered by container) without a scan. Not a
             * migration: an index changes nothing an older reapd reads,
             * so a database that has it opens there all the same. */
            rc = sqlite3_exec(st->db,
                              "CREATE INDEX IF NOT EXISTS reports_container"
                              " ON reports(container_id, seq);"
                              "COMMIT",
                              NULL, NULL, NULL);
            break;
        }
        if (v < 0 || v > STORE_SCHEMA_VERSION) {
            result = too_new(st, v);
            goto out;
        }
        snprintf(what, sizeof(what), "migration to schema version %lld",
                 (long long)v + 1);
        rc = sqlite3_exec(st->db, migrations[v], NULL, NULL, NULL);
        if (rc == SQLITE_OK) {
            /* An integer we computed: PRAGMA takes no parameters. */
            snprintf(sql, sizeof(sql), "PRAGMA user_version = %lld",
                     (long long)v + 1);
            rc = sqlite3_exec(st->db, sql, NULL, NULL, NULL);
        }
        if (rc == SQLITE_OK)
            rc = sqlite3_exec(st->db, "COMMIT", NULL, NULL, NULL);
        if (rc != SQLITE_OK)
            break;
    }
    if (rc != SQLITE_OK)
        result = open_fail_rc(st, rc, what);
out:
    rollback(st); /* a migration that failed leaves nothing behind */
    return result;
}

static void store_free(struct store *st);
static int count_reports(struct store *st, int64_t n[3]);

int
store_open(const char *state_dir, struct store **out, char *err, size_t errlen)
{
    struct store *st = NULL;
    char check[200], mode[16];
    size_t n;
    int64_t v = 0;
    int rc, i, result = STORE_ERROR;

    *out = NULL;
    if (err != NULL && errlen > 0)
        err[0] = '\0';
    if (state_dir == NULL || state_dir[0] == '\0' ||
        strlen(state_dir) > PATH_MAX) {
        if (err != NULL && errlen > 0)
            snprintf(err, errlen, "state_dir: invalid path");
        return STORE_INVALID;
    }
    st = calloc(1, sizeof(*st));
    if (st == NULL)
        return STORE_NOMEM;
    n = strlen(state_dir) + sizeof("/reapd.db");
    st->path = malloc(n);
    if (st->path == NULL) {
        result = STORE_NOMEM;
        goto out;
    }
    snprintf(st->path, n, "%s/reapd.db", state_dir);

    result = create_file(st, state_dir);
    if (result != STORE_OK)
        goto out;
    /* A WAL frame in one write rather than two (agent/walbuf.h); without
     * it (no memory), SQLite's own VFS does the same work. */
    st->walbuf = walbuf_new(NULL, 0);
    rc = sqlite3_open_v2(st->path, &st->db,
                         /* Serialized: the checkpoint runs on agent/bio.c's
                          * thread, and a loop call meanwhile waits for it
                          * rather than racing it. */
                         SQLITE_OPEN_READWRITE | SQLITE_OPEN_FULLMUTEX |
                             SQLITE_OPEN_NOFOLLOW,
                         st->walbuf != NULL ? walbuf_name(st->walbuf) : NULL);
    if (rc != SQLITE_OK) {
        result = st->db != NULL
                     ? open_fail_rc(st, rc, "open")
                     : open_fail(st, STORE_NOMEM, "open", sqlite3_errstr(rc));
        goto out;
    }
    sqlite3_extended_result_codes(st->db, 1);
    sqlite3_busy_timeout(st->db, BUSY_TIMEOUT_MS);
    /* reapd owns its file (reapd.lock: one reapd per state_dir), so the
     * locks are taken once and kept: otherwise every transaction took and
     * released POSIX locks (44 fcntl calls per exit, docs/performance.md).
     * Set before the first read, so that the WAL index lives in memory,
     * not in a -shm file. No other process can read the database while
     * reapd runs; the status endpoint answers what it holds. */
    rc = query_check(st->db, "PRAGMA locking_mode = EXCLUSIVE", mode,
                     sizeof(mode));
    if (rc != SQLITE_OK) {
        result = open_fail_rc(st, rc, "locking_mode=EXCLUSIVE");
        goto out;
    }
    /* No tricks a hostile file could play through its schema. */
    sqlite3_db_config(st->db, SQLITE_DBCONFIG_DEFENSIVE, 1, NULL);
    sqlite3_db_config(st->db, SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0, NULL);

    /* Read-only questions first: a file that is not a database, or one
     * from a newer reapd, is refused before anything is written to it. */
    rc = query_int(st->db, "PRAGMA user_version", &v);
    if (rc != SQLITE_OK) {
        result = open_fail_rc(st, rc, "reading the schema version");
        goto out;
    }
    if (v < 0 || v > STORE_SCHEMA_VERSION) {
        result = too_new(st, v);
        goto out;
    }
    rc = query_check(st->db, "PRAGMA quick_check(1)", check, sizeof(check));
    if (rc != SQLITE_OK) {
        result = open_fail_rc(st, rc, "integrity check");
        goto out;
    }
    if (strcmp(check, "ok") != 0) {
        result = open_fail(st, STORE_CORRUPT, "integrity check", check);
        goto out;
    }

    rc = query_check(st->db, "PRAGMA journal_mode = WAL", mode, sizeof(mode));
    if (rc != SQLITE_OK) {
        result = open_fail_rc(st, rc, "journal_mode=WAL");
        goto out;
    }
    if (strcmp(mode, "wal") != 0) {
        result = open_fail(st, STORE_ERROR, "journal_mode=WAL",
                           "the file system does not support WAL");
        goto out;
    }
    rc = sqlite3_exec(st->db,
                      "PRAGMA foreign_keys = ON;"
                      "PRAGMA synchronous = NORMAL;"
                      /* No commit checkpoints (on_wal replaces the
                       * automatic hook): the caller copies the WAL past
                       * its own bound (persist.c, on agent/bio.c's
                       * thread), so a commit (often a report's) never
                       * carries the copy and its syncs
                       * (docs/performance.md). */
                      "PRAGMA wal_autocheckpoint = 0;"
                      /* the WAL is cut back to 4 MiB after a checkpoint */
                      "PRAGMA journal_size_limit = 4194304;"
                      /* The page cache: 1 MiB rather than SQLite's
                       * 2 MiB. The database is written far more than it
                       * is read (records at each step, reports once), and
                       * what a write needs is the B-trees' upper pages
                       * and the leaves a burst keeps coming back to: from
                       * 512 KiB, a burst's reads fell by a third (39,000
                       * to 27,000 per 3,000 exits) for 60-80 bytes more
                       * per tracked container at 10,000; 2 MiB took that
                       * past 1 KiB (docs/performance.md). */
                      "PRAGMA cache_size = -1024;"
                      /* A statement in a transaction that may write
                       * more than one B-tree and fail halfway (a record's
                       * upsert, a report's insert) keeps the pages it
                       * changes in a statement journal, a temporary
                       * file: 7 system calls per exit in a burst. In
                       * memory, it costs the few pages one statement
                       * changes (every query here is bounded by an index
                       * and a LIMIT, so no large sort lands there
                       * either). */
                      "PRAGMA temp_store = MEMORY;",
                      NULL, NULL, NULL);
    if (rc != SQLITE_OK) {
        result = open_fail_rc(st, rc, "settings");
        goto out;
    }
    sqlite3_wal_hook(st->db, on_wal, st);
    result = migrate(st);
    if (result != STORE_OK)
        goto out;

    rc = query_int(st->db, "PRAGMA page_size", &st->page_size);
    if (rc == SQLITE_OK)
        rc =
            query_int(st->db, "PRAGMA max_page_count", &st->default_max_pages);
    if (rc != SQLITE_OK) {
        result = open_fail_rc(st, rc, "page size");
        goto out;
    }
    for (i = 0; i < S_COUNT; i++) {
        rc = sqlite3_prepare_v3(st->db, stmt_sql[i], -1,
                                SQLITE_PREPARE_PERSISTENT, &st->stmt[i], NULL);
        if (rc != SQLITE_OK) {
            result = open_fail_rc(st, rc, "preparing statements");
            goto out;
        }
    }
    result = count_reports(st, st->nreports);
    if (result == STORE_OK) {
        struct store_counts sc;

        result = store_counts(st, &sc); /* what a copy's time says */
    }
    if (result != STORE_OK)
        goto out;
    st->errmsg[0] = '\0';
    *out = st;
    st = NULL;
    result = STORE_OK;
out:
    if (st != NULL) {
        if (err != NULL && errlen > 0)
            snprintf(err, errlen, "%s",
                     st->errmsg[0] != '\0' ? st->errmsg
                                           : store_strerror(result));
        store_free(st);
    }
    return result;
}

/* ---- pending changes -------------------------------------------------- */

static uint64_t
pend_hash(enum pend_kind kind, const char *key)
{
    uint64_t h = 0xcbf29ce484222325ull ^ (uint64_t)kind;

    for (; *key != '\0'; key++) {
        h ^= (unsigned char)*key;
        h *= 0x100000001b3ull;
    }
    return h;
}

/* The slot holding (kind, key), or the free slot where it would go. */
static struct pend *
pend_slot(struct pend *tab, size_t cap, enum pend_kind kind, const char *key)
{
    size_t i = (size_t)pend_hash(kind, key) & (cap - 1);

    while (tab[i].key != NULL &&
           (tab[i].kind != kind || strcmp(tab[i].key, key) != 0))
        i = (i + 1) & (cap - 1);
    return &tab[i];
}

static void
pend_clear(struct store *st)
{
    size_t i;

    for (i = 0; i < st->pend_cap; i++) {
        free(st->pend[i].key);
        free(st->pend[i].json);
    }
    /* A table grown while flushes failed shrinks back. */
    if (st->pend_cap > 16 * PEND_MIN_CAP) {
        free(st->pend);
        st->pend = NULL;
        st->pend_cap = 0;
    } else if (st->pend != NULL) {
        memset(st->pend, 0, st->pend_cap * sizeof(*st->pend));
    }
    st->npend = 0;
    st->nckpt = 0;
    st->pend_bytes = 0;
}

static int
pend_grow(struct store *st)
{
    size_t cap = st->pend_cap == 0 ? PEND_MIN_CAP : st->pend_cap * 2, i;
    struct pend *tab;

    tab = calloc(cap, sizeof(*tab));
    if (tab == NULL)
        return STORE_NOMEM;
    for (i = 0; i < st->pend_cap; i++) {
        if (st->pend[i].key != NULL)
            *pend_slot(tab, cap, st->pend[i].kind, st->pend[i].key) =
                st->pend[i];
    }
    free(st->pend);
    st->pend = tab;
    st->pend_cap = cap;
    return STORE_OK;
}

/* Takes one entry out of the table, by backward shift: the entries
 * after it in its probe run move up, so no lookup ever stops short. */
static void
pend_remove(struct store *st, struct pend *p)
{
    size_t mask = st->pend_cap - 1, i = (size_t)(p - st->pend), j = i, home;

    st->pend_bytes -= p->len;
    st->npend--;
    if (p->kind == P_CHECKPOINT)
        st->nckpt--;
    free(p->key);
    free(p->json);
    memset(p, 0, sizeof(*p));
    for (;;) {
        j = (j + 1) & mask;
        if (st->pend[j].key == NULL)
            return;
        home = (size_t)pend_hash(st->pend[j].kind, st->pend[j].key) & mask;
        /* Stays when its home is cyclically within (i, j]. */
        if (i <= j ? (i < home && home <= j) : (i < home || home <= j))
            continue;
        st->pend[i] = st->pend[j];
        memset(&st->pend[j], 0, sizeof(st->pend[j]));
        i = j;
    }
}

/*
 * The entry for (kind, key), made if new, for a value of `bytes` bytes
 * replacing the entry's current one. Refuses (STORE_FULL) to grow past
 * the bounds: the caller's loop must not eat memory while the disk is
 * full.
 */
static int
pend_get(struct store *st, enum pend_kind kind, const char *key, size_t bytes,
         struct pend **out)
{
    struct pend *p = NULL;
    char *k;
    int result;

    if (st->pend_cap > 0)
        p = pend_slot(st->pend, st->pend_cap, kind, key);
    if (p != NULL && p->key != NULL) {
        if (st->pend_bytes - p->len + bytes > STORE_PENDING_BYTES_MAX)
            goto full;
        *out = p;
        return STORE_OK;
    }
    if (st->npend >= STORE_PENDING_MAX ||
        st->pend_bytes + bytes > STORE_PENDING_BYTES_MAX)
        goto full;
    if ((st->npend + 1) * 2 > st->pend_cap) {
        result = pend_grow(st);
        if (result != STORE_OK)
            return result;
    }
    k = strdup(key);
    if (k == NULL)
        return STORE_NOMEM;
    p = pend_slot(st->pend, st->pend_cap, kind, key);
    p->key = k;
    p->kind = kind;
    st->npend++;
    if (kind == P_CHECKPOINT)
        st->nckpt++;
    *out = p;
    return STORE_OK;
full:
    snprintf(st->errmsg, sizeof(st->errmsg),
             "too many changes waiting for a flush (%zu, %zu bytes)",
             st->npend, st->pend_bytes);
    return STORE_FULL;
}

size_t
store_pending(const struct store *st)
{
    return st->npend;
}

int
store_put_container(struct store *st, const char *id, const char *json,
                    size_t len, int64_t now_ms)
{
    struct pend *p;
    char *copy;
    int result;

    if (!store_valid_id(id, STORE_ID_MAX) ||
        !valid_body(json, len, STORE_RECORD_MAX))
        return invalid(st, "put container");
    copy = malloc(len + 1);
    if (copy == NULL)
        return STORE_NOMEM;
    memcpy(copy, json, len);
    copy[len] = '\0';
    result = pend_get(st, P_CONTAINER, id, len, &p);
    if (result != STORE_OK) {
        free(copy);
        return result;
    }
    st->pend_bytes = st->pend_bytes - p->len + len;
    free(p->json);
    p->json = copy;
    p->len = len;
    p->del = false;
    p->value = now_ms;
    return STORE_OK;
}

int
store_delete_container(struct store *st, const char *id)
{
    struct pend *p;
    int result;

    if (!store_valid_id(id, STORE_ID_MAX))
        return invalid(st, "delete container");
    result = pend_get(st, P_CONTAINER, id, 0, &p);
    if (result != STORE_OK)
        return result;
    st->pend_bytes -= p->len;
    free(p->json);
    p->json = NULL;
    p->len = 0;
    p->del = true;
    return STORE_OK;
}

int
store_set_checkpoint(struct store *st, const char *key, int64_t value)
{
    struct pend *p;
    int result;

    if (!store_valid_id(key, STORE_KEY_MAX))
        return invalid(st, "set checkpoint");
    result = pend_get(st, P_CHECKPOINT, key, 0, &p);
    if (result != STORE_OK)
        return result;
    p->value = value;
    return STORE_OK;
}

int
store_get_checkpoint(struct store *st, const char *key, int64_t *value)
{
    sqlite3_stmt *s = st->stmt[S_CKPT_GET];
    struct pend *p;
    int rc, result;

    if (!store_valid_id(key, STORE_KEY_MAX))
        return invalid(st, "get checkpoint");
    if (st->pend_cap > 0) {
        p = pend_slot(st->pend, st->pend_cap, P_CHECKPOINT, key);
        if (p->key != NULL) {
            *value = p->value;
            return STORE_OK;
        }
    }
    result = bind_text(st, s, 1, key, strlen(key), "get checkpoint");
    if (result != STORE_OK)
        goto out;
    rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) {
        *value = sqlite3_column_int64(s, 0);
        result = STORE_OK;
    } else if (rc == SQLITE_DONE) {
        result = STORE_NOT_FOUND;
    } else {
        result = store_fail(st, rc, "get checkpoint");
    }
out:
    done(s);
    return result;
}

static int
flush_one(struct store *st, const struct pend *p)
{
    static const char what[] = "flush";
    sqlite3_stmt *s;
    int result;

    if (p->kind == P_CHECKPOINT) {
        s = st->stmt[S_CKPT_SET];
        result = bind_text(st, s, 1, p->key, strlen(p->key), what);
        if (result == STORE_OK)
            result = bind_int(st, s, 2, p->value, what);
        if (result != STORE_OK) {
            done(s);
            return result;
        }
        return run(st, S_CKPT_SET, what);
    }
    st->record_writes_tx++;
    if (p->del) {
        s = st->stmt[S_CTR_DELETE];
        result = bind_text(st, s, 1, p->key, strlen(p->key), what);
        if (result != STORE_OK) {
            done(s);
            return result;
        }
        return run(st, S_CTR_DELETE, what);
    }
    s = st->stmt[S_CTR_PUT];
    result = bind_text(st, s, 1, p->key, strlen(p->key), what);
    if (result == STORE_OK)
        result = bind_text(st, s, 2, p->json, p->len, what);
    if (result == STORE_OK)
        result = bind_int(st, s, 3, p->value, what);
    if (result != STORE_OK) {
        done(s);
        return result;
    }
    return run(st, S_CTR_PUT, what);
}

/*
 * What one transaction writes of the pending changes (write_some): all of
 * them, or at most STORE_FLUSH_MAX container records (checkpoints only
 * with all: one must never be on disk ahead of a record changed before
 * it). The keys are the entries' own, valid until `written` removes them.
 */
struct pick {
    bool all;
    size_t n;
    const char *ids[STORE_FLUSH_MAX];
};

static int
write_pick(struct store *st, struct pick *pk, struct pend *p)
{
    int result = flush_one(st, p);

    if (result == STORE_OK && !pk->all)
        pk->ids[pk->n++] = p->key;
    return result;
}

/* Whether entry `p` was picked already (the keys are the entries' own). */
static bool
picked(const struct pick *pk, const struct pend *p)
{
    size_t i;

    for (i = 0; i < pk->n; i++)
        if (pk->ids[i] == p->key)
            return true;
    return false;
}

/*
 * The pending changes into the transaction begun: every one when no more
 * than `max` wait, else the records of the `nids` containers `ids` (those
 * pending; at most STORE_REPORTS_MAX) and other records, up to `max` in
 * all (the named ones are written whatever `max`). They leave memory only once
 * the transaction commits (written).
 */
static int
write_some(struct store *st, const char *const *ids, size_t nids, size_t max,
           struct pick *pk)
{
    struct pend *p;
    size_t i, nnamed;
    int result;

    pk->n = 0;
    pk->all = st->npend - st->nckpt <= max;
    if (pk->all)
        nids = 0;
    if (nids > STORE_REPORTS_MAX)
        nids = STORE_REPORTS_MAX;
    if (max > STORE_FLUSH_MAX)
        max = STORE_FLUSH_MAX;
    for (i = 0; i < nids; i++) {
        p = pend_slot(st->pend, st->pend_cap, P_CONTAINER, ids[i]);
        if (p->key == NULL || p->forgotten || picked(pk, p))
            continue;
        result = write_pick(st, pk, p);
        if (result != STORE_OK)
            return result;
    }
    nnamed = pk->n;
    for (i = 0; i < st->pend_cap && (pk->all || pk->n < max); i++) {
        p = &st->pend[i];
        if (p->key == NULL || p->forgotten ||
            (!pk->all && p->kind != P_CONTAINER))
            continue;
        if (nnamed > 0 && !pk->all) {
            size_t j;

            for (j = 0; j < nnamed && pk->ids[j] != p->key; j++)
                ;
            if (j < nnamed)
                continue;
        }
        result = write_pick(st, pk, p);
        if (result != STORE_OK)
            return result;
    }
    return STORE_OK;
}

/* After the commit: what write_some wrote leaves memory. */
static void
written(struct store *st, const struct pick *pk)
{
    size_t i;

    if (pk->all) {
        pend_clear(st);
        return;
    }
    for (i = 0; i < pk->n; i++)
        pend_remove(
            st, pend_slot(st->pend, st->pend_cap, P_CONTAINER, pk->ids[i]));
}

int
store_flush_ids(struct store *st, const char *const *ids, size_t nids,
                size_t max)
{
    struct pick pk;
    int result;

    if (st->npend == 0 || max == 0)
        return STORE_OK;
    result = begin(st, "flush");
    if (result != STORE_OK)
        return result;
    result = write_some(st, ids, nids, max, &pk);
    if (result != STORE_OK) {
        rollback(st);
        return result;
    }
    result = commit(st, "flush");
    if (result != STORE_OK)
        return result;
    /* Only now, committed, may the changes leave memory. */
    written(st, &pk);
    return STORE_OK;
}

int
store_flush_some(struct store *st, const char *id, size_t max)
{
    return store_flush_ids(st, &id, id != NULL ? 1 : 0, max);
}

int
store_flush(struct store *st)
{
    return store_flush_some(st, NULL, SIZE_MAX);
}

int
store_flush_synced(struct store *st)
{
    int result;

    if (st->npend == 0)
        return STORE_OK;
    result = set_full_sync(st, true, "flush");
    if (result != STORE_OK)
        return result;
    result = store_flush(st);
    /* Back to cheap commits; if that fails, FULL stays: slower, safe. */
    set_full_sync(st, false, "flush");
    return result;
}

static int
container_append(struct store *st, struct store_containers *l, size_t *cap,
                 const char *id, const char *json, size_t len,
                 int64_t updated_ms)
{
    struct store_container *c;

    if (strlen(id) > STORE_ID_MAX || json == NULL) {
        snprintf(st->errmsg, sizeof(st->errmsg),
                 "container record: malformed row");
        return STORE_CORRUPT;
    }
    if (l->n == *cap) {
        size_t ncap = *cap == 0 ? 16 : *cap * 2;

        c = realloc(l->v, ncap * sizeof(*c));
        if (c == NULL)
            return STORE_NOMEM;
        l->v = c;
        *cap = ncap;
    }
    c = &l->v[l->n];
    memset(c, 0, sizeof(*c));
    c->json = malloc(len + 1);
    if (c->json == NULL)
        return STORE_NOMEM;
    memcpy(c->json, json, len);
    c->json[len] = '\0';
    c->len = len;
    snprintf(c->id, sizeof(c->id), "%s", id);
    c->updated_ms = updated_ms;
    l->n++;
    return STORE_OK;
}

void
store_containers_free(struct store_containers *l)
{
    size_t i;

    if (l == NULL)
        return;
    for (i = 0; i < l->n; i++)
        free(l->v[i].json);
    free(l->v);
    l->v = NULL;
    l->n = 0;
}

int
store_get_containers(struct store *st, struct store_containers *out)
{
    sqlite3_stmt *s = st->stmt[S_CTR_ALL];
    size_t cap = 0, i;
    const char *id;
    int rc, result = STORE_OK;

    out->v = NULL;
    out->n = 0;
    for (;;) {
        rc = sqlite3_step(s);
        if (rc == SQLITE_DONE)
            break;
        if (rc != SQLITE_ROW) {
            result = store_fail(st, rc, "get containers");
            goto out;
        }
        id = (const char *)sqlite3_column_text(s, 0);
        if (id == NULL) {
            result = container_append(st, out, &cap, "", NULL, 0, 0);
            goto out;
        }
        /* A pending change (put or delete) is newer than the row. */
        if (st->pend_cap > 0 &&
            pend_slot(st->pend, st->pend_cap, P_CONTAINER, id)->key != NULL)
            continue;
        result = container_append(
            st, out, &cap, id, (const char *)sqlite3_column_text(s, 1),
            (size_t)sqlite3_column_bytes(s, 1), sqlite3_column_int64(s, 2));
        if (result != STORE_OK)
            goto out;
    }
    for (i = 0; i < st->pend_cap; i++) {
        const struct pend *p = &st->pend[i];

        if (p->key == NULL || p->kind != P_CONTAINER || p->del)
            continue;
        result =
            container_append(st, out, &cap, p->key, p->json, p->len, p->value);
        if (result != STORE_OK)
            goto out;
    }
out:
    done(s);
    if (result != STORE_OK)
        store_containers_free(out);
    return result;
}

/* ---- the outbox ------------------------------------------------------- */

/* Binds S_MARK_DELIVERED (reset again if that fails). */
static int
bind_delivered(struct store *st, const char *report_id, int64_t now_ms,
               const char *what)
{
    sqlite3_stmt *s = st->stmt[S_MARK_DELIVERED];
    int result = bind_text(st, s, 1, report_id, strlen(report_id), what);

    if (result == STORE_OK)
        result = bind_int(st, s, 2, now_ms, what);
    if (result != STORE_OK)
        done(s);
    return result;
}

/* Inserts one report into the transaction begun: STORE_OK, or
 * STORE_DUPLICATE (nothing changed), or an error. */
static int
insert_report(struct store *st, enum stmt_id ins,
              const struct store_new_report *v, int64_t now_ms)
{
    static const char what[] = "add report";
    sqlite3_stmt *s = st->stmt[ins];
    int result, rc;

    result = bind_text(st, s, 1, v->report_id, strlen(v->report_id), what);
    if (result == STORE_OK)
        result = bind_text(st, s, 2, v->container_id, strlen(v->container_id),
                           what);
    if (result == STORE_OK)
        result = bind_text(st, s, 3, v->body, v->len, what);
    if (result == STORE_OK)
        result = bind_int(st, s, 4, now_ms, what);
    if (result != STORE_OK) {
        done(s);
        return result;
    }
    result = run(st, ins, what);
    if (result != STORE_OK)
        return result;
    if (sqlite3_changes(st->db) == 0) {
        /* Either the id is taken, or the counter row is gone. */
        s = st->stmt[S_REPORT_EXISTS];
        result = bind_text(st, s, 1, v->report_id, strlen(v->report_id), what);
        if (result == STORE_OK) {
            rc = sqlite3_step(s);
            result = rc == SQLITE_ROW    ? STORE_DUPLICATE
                     : rc == SQLITE_DONE ? STORE_CORRUPT
                                         : store_fail(st, rc, what);
            if (rc == SQLITE_DONE)
                snprintf(st->errmsg, sizeof(st->errmsg),
                         "%s: the report sequence is missing", what);
        }
        done(s);
        return result;
    }
    result = run(st, S_SEQ_BUMP, what);
    if (result == STORE_OK)
        count_moved(st, -1,
                    ins == S_REPORT_INSERT_DELIVERED ? STORE_DELIVERED
                                                     : STORE_PENDING,
                    1);
    return result;
}

/*
 * store_add_reports, or with `delivered` reports delivered as they are
 * stored. The pending changes go in the same transaction, each report's
 * container record first: it is due before the report (a report must
 * never be on disk ahead of the steps that led to it), and one commit
 * costs less than two. Only STORE_REPORT_ROWS others: thousands pending
 * after a burst of new containers made one report's commit 150 ms of a
 * loop turn; the rest go with the next flush.
 */
/* The pending change of record `id`, or NULL. */
static struct pend *
pend_find(struct store *st, enum pend_kind kind, const char *id)
{
    struct pend *p;

    if (st->pend_cap == 0)
        return NULL;
    p = pend_slot(st->pend, st->pend_cap, kind, id);
    return p->key != NULL ? p : NULL;
}

/* Deletes the records of the reports stored with `forget`, in the
 * transaction begun; their pending changes were left out of it. */
static int
forget_records(struct store *st, struct store_new_report *v, size_t n)
{
    sqlite3_stmt *s = st->stmt[S_CTR_DELETE];
    size_t i;
    int result = STORE_OK;

    for (i = 0; result == STORE_OK && i < n; i++) {
        if (!v[i].forget ||
            (v[i].result != STORE_OK && v[i].result != STORE_DUPLICATE))
            continue;
        st->record_writes_tx++;
        result = bind_text(st, s, 1, v[i].container_id,
                           strlen(v[i].container_id), "forget record");
        if (result != STORE_OK) {
            done(s);
            break;
        }
        result = run(st, S_CTR_DELETE, "forget record");
        if (result == STORE_OK)
            v[i].forgotten = true;
    }
    return result;
}

/* The checkpoint set by store_set_reports_checkpoint, in the
 * transaction begun, when every report of it was stored (or was already);
 * a pending older value of it is left out of later flushes. */
static int
reports_checkpoint(struct store *st, const struct store_new_report *v,
                   size_t n)
{
    sqlite3_stmt *s = st->stmt[S_CKPT_SET];
    struct pend *p;
    size_t i;
    int result;

    if (st->rckpt_key == NULL)
        return STORE_OK;
    for (i = 0; i < n; i++)
        if (v[i].result != STORE_OK && v[i].result != STORE_DUPLICATE)
            return STORE_OK;
    result = bind_text(st, s, 1, st->rckpt_key, strlen(st->rckpt_key),
                       "reports checkpoint");
    if (result == STORE_OK)
        result = bind_int(st, s, 2, st->rckpt_value, "reports checkpoint");
    if (result != STORE_OK) {
        done(s);
        return result;
    }
    result = run(st, S_CKPT_SET, "reports checkpoint");
    st->rckpt_written = result == STORE_OK;
    p = pend_find(st, P_CHECKPOINT, st->rckpt_key);
    if (result == STORE_OK && p != NULL && p->value <= st->rckpt_value)
        p->forgotten = true; /* dropped once this commits */
    return result;
}

/* After the transaction: the forgotten records' pending changes go with
 * them (committed), or are written as ever (not). */
static void
forgotten_done(struct store *st, struct store_new_report *v, size_t n,
               bool committed)
{
    struct pend *p;
    size_t i;

    if (st->rckpt_key != NULL &&
        (p = pend_find(st, P_CHECKPOINT, st->rckpt_key)) != NULL &&
        p->forgotten) {
        p->forgotten = false;
        if (committed)
            pend_remove(st, p);
    }

    for (i = 0; i < n; i++) {
        if (!v[i].forget)
            continue;
        if (!committed)
            v[i].forgotten = false;
        p = pend_find(st, P_CONTAINER, v[i].container_id);
        if (p == NULL)
            continue;
        p->forgotten = false;
        if (committed && v[i].forgotten)
            pend_remove(st, p);
    }
}

static int
add_reports(struct store *st, struct store_new_report *v, size_t n,
            int64_t now_ms, bool delivered)
{
    static const char what[] = "add report";
    enum stmt_id ins = delivered ? S_REPORT_INSERT_DELIVERED : S_REPORT_INSERT;
    struct pick pk = {.all = false, .n = 0};
    const char *ids[STORE_REPORTS_MAX];
    size_t i, nids = 0, nstored = 0, nforgot = 0;
    int result;

    st->rckpt_written = false;
    if (n > STORE_REPORTS_MAX)
        return invalid(st, "add reports: too many at once");
    for (i = 0; i < n; i++) {
        struct pend *p;

        v[i].result = STORE_OK;
        v[i].forgotten = false;
        if (!store_valid_id(v[i].report_id, STORE_REPORT_ID_MAX) ||
            !store_valid_id(v[i].container_id, STORE_ID_MAX) ||
            !valid_body(v[i].body, v[i].len, STORE_BODY_MAX)) {
            v[i].result = invalid(st, what);
            continue;
        }
        ids[nids++] = v[i].container_id;
        if (v[i].forget &&
            (p = pend_find(st, P_CONTAINER, v[i].container_id)) != NULL)
            p->forgotten = true;
    }
    if (nids == 0)
        return STORE_OK;
    if (!st->journaled) {
        result = set_full_sync(st, true, what);
        if (result != STORE_OK)
            return result;
    }
    result = begin(st, what);
    if (result == STORE_OK && st->npend > 0)
        result = write_some(st, ids, nids, STORE_REPORT_ROWS, &pk);
    for (i = 0; result == STORE_OK && i < n; i++) {
        if (v[i].result != STORE_OK)
            continue;
        result = insert_report(st, ins, &v[i], now_ms);
        if (result == STORE_DUPLICATE) {
            /* The others go on: its insert changed nothing. */
            v[i].result = STORE_DUPLICATE;
            result = STORE_OK;
        } else if (result == STORE_OK) {
            nstored++;
        }
    }
    if (result == STORE_OK)
        result = forget_records(st, v, n);
    if (result == STORE_OK && nstored > 0)
        result = reports_checkpoint(st, v, n);
    for (i = 0; i < n; i++)
        nforgot += v[i].forgotten;
    /* Nothing stored or forgotten, nothing committed: the records wait
     * for a flush. */
    if (result == STORE_OK && nstored + nforgot > 0)
        result = commit(st, what);
    if (result == STORE_OK && nstored + nforgot > 0)
        written(st, &pk);
    forgotten_done(st, v, n, result == STORE_OK && nstored + nforgot > 0);
    if (result != STORE_OK)
        st->rckpt_written = false;
    rollback(st); /* nothing to undo once committed */
    /* Back to cheap commits; if that fails, FULL stays: slower, safe. */
    if (!st->journaled)
        set_full_sync(st, false, what);
    if (result != STORE_OK)
        return result;
    for (i = 0; i < n && st->on_report != NULL; i++)
        if (v[i].result == STORE_OK)
            st->on_report(v[i].report_id, v[i].container_id,
                          st->on_report_arg);
    return STORE_OK;
}

void
store_set_reports_checkpoint(struct store *st, const char *key, int64_t value)
{
    st->rckpt_key = key;
    st->rckpt_value = value;
}

bool
store_reports_checkpoint_written(const struct store *st)
{
    return st->rckpt_written;
}

int
store_add_reports(struct store *st, struct store_new_report *v, size_t n,
                  int64_t now_ms, bool delivered)
{
    int result = add_reports(st, v, n, now_ms, delivered);

    st->rckpt_key = NULL; /* for this call only, whatever became of it */
    return result;
}

static int
add_report(struct store *st, const char *report_id, const char *container_id,
           const char *body, size_t len, int64_t now_ms, bool delivered)
{
    struct store_new_report v = {.report_id = report_id,
                                 .container_id = container_id,
                                 .body = body,
                                 .len = len};
    int result = add_reports(st, &v, 1, now_ms, delivered);

    st->rckpt_key = NULL;
    return result != STORE_OK ? result : v.result;
}

int
store_add_report(struct store *st, const char *report_id,
                 const char *container_id, const char *body, size_t len,
                 int64_t now_ms)
{
    return add_report(st, report_id, container_id, body, len, now_ms, false);
}

int
store_add_delivered(struct store *st, const char *report_id,
                    const char *container_id, const char *body, size_t len,
                    int64_t now_ms)
{
    return add_report(st, report_id, container_id, body, len, now_ms, true);
}

void
store_set_journaled(struct store *st, bool on)
{
    st->journaled = on;
}

void
store_on_report(struct store *st, store_report_cb cb, void *arg)
{
    st->on_report = cb;
    st->on_report_arg = arg;
}

void
store_report_clear(struct store_report *r)
{
    if (r == NULL)
        return;
    free(r->body);
    free(r->last_error);
    memset(r, 0, sizeof(*r));
}

void
store_reports_free(struct store_reports *l)
{
    size_t i;

    if (l == NULL)
        return;
    for (i = 0; i < l->n; i++)
        store_report_clear(&l->v[i]);
    free(l->v);
    l->v = NULL;
    l->n = 0;
}

/* A text column into a fixed buffer; false if absent or too long. */
static bool
column_id(sqlite3_stmt *s, int col, char *buf, size_t size)
{
    const unsigned char *t = sqlite3_column_text(s, col);
    size_t n = (size_t)sqlite3_column_bytes(s, col);

    if (t == NULL || n == 0 || n >= size)
        return false;
    memcpy(buf, t, n);
    buf[n] = '\0';
    return strlen(buf) == n;
}

/* A text column as a malloc'd string; *ok false on allocation failure. */
static char *
column_dup(sqlite3_stmt *s, int col, size_t *len, bool *ok)
{
    const unsigned char *t = sqlite3_column_text(s, col);
    size_t n = (size_t)sqlite3_column_bytes(s, col);
    char *d;

    *ok = true;
    if (t == NULL)
        return NULL;
    d = malloc(n + 1);
    if (d == NULL) {
        *ok = false;
        return NULL;
    }
    memcpy(d, t, n);
    d[n] = '\0';
    if (len != NULL)
        *len = n;
    return d;
}

/* One row of REPORT_COLS plus the body column (maybe NULL) into r. The
 * file is ours, but a row that breaks the bounds is refused, not
 * trusted. */
static int
read_report(struct store *st, sqlite3_stmt *s, struct store_report *r)
{
    bool ok;

    memset(r, 0, sizeof(*r));
    if (!column_id(s, 0, r->report_id, sizeof(r->report_id)) ||
        !column_id(s, 1, r->container_id, sizeof(r->container_id)) ||
        state_parse((const char *)sqlite3_column_text(s, 3), &r->state) != 0 ||
        dead_reason_parse((const char *)sqlite3_column_text(s, 9),
                          &r->dead_reason) != 0) {
        snprintf(st->errmsg, sizeof(st->errmsg), "report: malformed row");
        return STORE_CORRUPT;
    }
    r->seq = sqlite3_column_int64(s, 2);
    r->attempts = sqlite3_column_int64(s, 4);
    r->next_attempt_ms = sqlite3_column_int64(s, 5);
    r->created_ms = sqlite3_column_int64(s, 6);
    r->delivered_ms = sqlite3_column_int64(s, 7);
    r->last_error = column_dup(s, 8, NULL, &ok);
    if (ok)
        r->body = column_dup(s, 10, &r->body_len, &ok);
    if (!ok) {
        store_report_clear(r);
        return STORE_NOMEM;
    }
    return STORE_OK;
}

/* Steps a bound report query to its end into out, and resets it. */
static int
list_reports(struct store *st, sqlite3_stmt *s, struct store_reports *out,
             const char *what)
{
    struct store_report *v;
    size_t cap = 0;
    int rc, result = STORE_OK;

    for (;;) {
        rc = sqlite3_step(s);
        if (rc == SQLITE_DONE)
            break;
        if (rc != SQLITE_ROW) {
            result = store_fail(st, rc, what);
            goto out;
        }
        if (out->n == cap) {
            cap = cap == 0 ? 16 : cap * 2;
            v = realloc(out->v, cap * sizeof(*v));
            if (v == NULL) {
                result = STORE_NOMEM;
                goto out;
            }
            out->v = v;
        }
        result = read_report(st, s, &out->v[out->n]);
        if (result != STORE_OK)
            goto out;
        out->n++;
    }
out:
    done(s);
    if (result != STORE_OK)
        store_reports_free(out);
    return result;
}

/* Lists at most `max` reports with statement `id`, whose parameters
 * are `p1` and `p2`. */
static int
list_with(struct store *st, enum stmt_id id, int64_t p1, int64_t p2,
          size_t max, const char *what, struct store_reports *out)
{
    sqlite3_stmt *s = st->stmt[id];
    int result;

    out->v = NULL;
    out->n = 0;
    if (max > STORE_LIST_MAX)
        return invalid(st, what);
    result = bind_int(st, s, 1, p1, what);
    if (result == STORE_OK)
        result = bind_int(st, s, 2, p2, what);
    if (result != STORE_OK) {
        done(s);
        return result;
    }
    return list_reports(st, s, out, what);
}

int
store_due(struct store *st, int64_t now_ms, size_t max,
          struct store_reports *out)
{
    return list_with(st, S_DUE, now_ms, (int64_t)max, max, "due reports", out);
}

int
store_recent(struct store *st, size_t max, bool with_body,
             struct store_reports *out)
{
    struct store_query q = {.after = 0,
                            .newest_first = true,
                            .max = max,
                            .state = -1,
                            .with_body = with_body};

    return store_after(st, &q, out);
}

/* The one report statement `id` finds for `key` (?1; ?2: with_body). */
static int
one_report(struct store *st, enum stmt_id id, const char *key, size_t maxlen,
           bool with_body, const char *what, struct store_report *out)
{
    sqlite3_stmt *s = st->stmt[id];
    struct store_reports l = {NULL, 0};
    int result;

    memset(out, 0, sizeof(*out));
    if (!store_valid_id(key, maxlen))
        return invalid(st, what);
    result = bind_text(st, s, 1, key, strlen(key), what);
    if (result == STORE_OK)
        result = bind_int(st, s, 2, with_body, what);
    if (result != STORE_OK) {
        done(s);
        return result;
    }
    result = list_reports(st, s, &l, what);
    if (result != STORE_OK)
        return result;
    if (l.n == 0)
        return STORE_NOT_FOUND;
    *out = l.v[0]; /* one row at most: a primary key, or LIMIT 1 */
    free(l.v);
    return STORE_OK;
}

int
store_get_report(struct store *st, const char *report_id, bool with_body,
                 struct store_report *out)
{
    return one_report(st, S_REPORT_GET, report_id, STORE_REPORT_ID_MAX,
                      with_body, "get report", out);
}

int
store_latest_report(struct store *st, const char *container_id,
                    struct store_report *out)
{
    return one_report(st, S_REPORT_LATEST, container_id, STORE_ID_MAX, false,
                      "latest report", out);
}

int
store_latest_report_body(struct store *st, const char *container_id,
                         struct store_report *out)
{
    return one_report(st, S_REPORT_LATEST, container_id, STORE_ID_MAX, true,
                      "latest report", out);
}

int
store_after(struct store *st, const struct store_query *q,
            struct store_reports *out)
{
    static const char what[] = "reports after";
    sqlite3_stmt *s = st->stmt[q->newest_first ? S_AFTER_DESC : S_AFTER];
    const char *state = q->state >= 0 ? store_state_name(q->state) : NULL;
    int result;

    out->v = NULL;
    out->n = 0;
    if (q->max > STORE_LIST_MAX || q->after < 0 ||
        (q->container_id != NULL &&
         !store_valid_id(q->container_id, STORE_ID_MAX)) ||
        (q->state >= 0 && state == NULL))
        return invalid(st, what);
    result = bind_int(st, s, 1, q->after, what);
    if (result == STORE_OK)
        result = bind_int(st, s, 2, (int64_t)q->max, what);
    if (result == STORE_OK && q->container_id != NULL)
        result = bind_text(st, s, 3, q->container_id, strlen(q->container_id),
                           what);
    if (result == STORE_OK && state != NULL)
        result = bind_text(st, s, 4, state, strlen(state), what);
    if (result == STORE_OK)
        result = bind_int(st, s, 5, q->with_body, what);
    if (result != STORE_OK) {
        done(s);
        return result;
    }
    /* Unbound parameters are NULL; done() clears them all after. */
    return list_reports(st, s, out, what);
}

int
store_last_seq(struct store *st, int64_t *seq)
{
    static const char what[] = "last seq";
    sqlite3_stmt *s = st->stmt[S_LAST_SEQ];
    int rc = sqlite3_step(s), result = STORE_OK;

    if (rc == SQLITE_ROW)
        *seq = sqlite3_column_int64(s, 0);
    else if (rc == SQLITE_DONE) {
        snprintf(st->errmsg, sizeof(st->errmsg),
                 "%s: the report sequence is missing", what);
        result = STORE_CORRUPT;
    } else
        result = store_fail(st, rc, what);
    done(s);
    return result;
}

int
store_requeue(struct store *st, const char *report_id, int64_t now_ms)
{
    static const char what[] = "requeue";
    sqlite3_stmt *s = st->stmt[S_REQUEUE_STATE];
    char cid[STORE_ID_MAX + 1];
    enum store_state state = STORE_PENDING;
    int result, rc;

    if (!store_valid_id(report_id, STORE_REPORT_ID_MAX))
        return invalid(st, what);
    result = begin(st, what);
    if (result != STORE_OK)
        goto out;
    result = bind_text(st, s, 1, report_id, strlen(report_id), what);
    if (result != STORE_OK) {
        done(s);
        goto out;
    }
    rc = sqlite3_step(s);
    if (rc == SQLITE_DONE) {
        result = STORE_NOT_FOUND;
    } else if (rc != SQLITE_ROW) {
        result = store_fail(st, rc, what);
    } else if (state_parse((const char *)sqlite3_column_text(s, 0), &state) !=
                   0 ||
               !column_id(s, 1, cid, sizeof(cid))) {
        snprintf(st->errmsg, sizeof(st->errmsg), "%s: malformed row", what);
        result = STORE_CORRUPT;
    } else if (state == STORE_DELIVERED) {
        result = STORE_CONFLICT;
    }
    done(s);
    if (result != STORE_OK)
        goto out;
    s = st->stmt[S_REQUEUE];
    result = bind_text(st, s, 1, report_id, strlen(report_id), what);
    if (result == STORE_OK)
        result = bind_int(st, s, 2, now_ms, what);
    if (result == STORE_OK)
        result = run(st, S_REQUEUE, what);
    else
        done(s);
    if (result != STORE_OK)
        goto out;
    if (state == STORE_DEAD)
        count_moved(st, STORE_DEAD, STORE_PENDING, sqlite3_changes(st->db));
    s = st->stmt[S_HEADS_ONE];
    result = bind_text(st, s, 1, cid, strlen(cid), what);
    if (result == STORE_OK)
        result = run(st, S_HEADS_ONE, what);
    else
        done(s);
    if (result == STORE_OK)
        result = commit(st, what);
out:
    rollback(st); /* nothing to undo once committed */
    return result;
}

int
store_requeue_dead(struct store *st, int64_t now_ms, uint64_t *nrequeued)
{
    static const char what[] = "requeue dead letters";
    sqlite3_stmt *s = st->stmt[S_REQUEUE_DEAD];
    uint64_t n = 0;
    int result;

    result = begin(st, what);
    if (result != STORE_OK)
        goto out;
    result = bind_int(st, s, 1, now_ms, what);
    if (result == STORE_OK)
        result = run(st, S_REQUEUE_DEAD, what);
    else
        done(s);
    if (result != STORE_OK)
        goto out;
    n = (uint64_t)sqlite3_changes(st->db);
    count_moved(st, STORE_DEAD, STORE_PENDING, (int64_t)n);
    if (n > 0)
        result = run(st, S_HEADS_ALL, what);
    if (result == STORE_OK)
        result = commit(st, what);
out:
    rollback(st);
    if (nrequeued != NULL)
        *nrequeued = result == STORE_OK ? n : 0;
    return result;
}

/* An UPDATE of one pending report, bound by the caller: autocommit, one
 * statement, so it is its own transaction. */
static int
mark(struct store *st, enum stmt_id id, const char *what)
{
    int result = run(st, id, what);
    int64_t n;

    if (result != STORE_OK)
        return result;
    n = sqlite3_changes(st->db);
    if (id == S_MARK_DELIVERED)
        count_moved(st, STORE_PENDING, STORE_DELIVERED, n);
    else if (id == S_MARK_DEAD)
        count_moved(st, STORE_PENDING, STORE_DEAD, n);
    return n == 0 ? STORE_NOT_FOUND : STORE_OK;
}

int
store_mark_delivered(struct store *st, const char *report_id, int64_t now_ms)
{
    static const char what[] = "mark delivered";
    int result;

    if (!store_valid_id(report_id, STORE_REPORT_ID_MAX))
        return invalid(st, what);
    rollback(st);
    result = bind_delivered(st, report_id, now_ms, what);
    return result != STORE_OK ? result : mark(st, S_MARK_DELIVERED, what);
}

int
store_mark_dead_reason(struct store *st, const char *report_id,
                       enum store_dead_reason reason, const char *error)
{
    static const char what[] = "mark dead";
    sqlite3_stmt *s = st->stmt[S_MARK_DEAD];
    const char *name = store_dead_reason_name(reason);
    int result;

    if (!store_valid_id(report_id, STORE_REPORT_ID_MAX) || name == NULL)
        return invalid(st, what);
    rollback(st);
    result = bind_text(st, s, 1, report_id, strlen(report_id), what);
    if (result == STORE_OK)
        result = bind_text(st, s, 2, error,
                           error != NULL ? errtext_len(error) : 0, what);
    /* Only the upstream's refusal was an attempt; the others were never
     * sent. */
    if (result == STORE_OK)
        result = bind_int(st, s, 3, reason == STORE_DEAD_REJECTED, what);
    if (result == STORE_OK)
        result = bind_text(st, s, 4, name, strlen(name), what);
    if (result != STORE_OK) {
        done(s);
        return result;
    }
    return mark(st, S_MARK_DEAD, what);
}

int
store_mark_dead(struct store *st, const char *report_id, const char *error)
{
    return store_mark_dead_reason(st, report_id, STORE_DEAD_REJECTED, error);
}

int
store_mark_retry(struct store *st, const char *report_id,
                 int64_t next_attempt_ms, const char *error)
{
    static const char what[] = "mark retry";
    sqlite3_stmt *s = st->stmt[S_MARK_RETRY];
    int result;

    if (!store_valid_id(report_id, STORE_REPORT_ID_MAX))
        return invalid(st, what);
    rollback(st);
    result = bind_text(st, s, 1, report_id, strlen(report_id), what);
    if (result == STORE_OK)
        result = bind_int(st, s, 2, next_attempt_ms, what);
    if (result == STORE_OK)
        result = bind_text(st, s, 3, error,
                           error != NULL ? errtext_len(error) : 0, what);
    if (result != STORE_OK) {
        done(s);
        return result;
    }
    return mark(st, S_MARK_RETRY, what);
}

/* Counts the reports by state: a scan of reports_state_seq, for the
 * opening and store_check only. */
static int
count_reports(struct store *st, int64_t n[3])
{
    sqlite3_stmt *s = st->stmt[S_COUNTS];
    enum store_state state;
    int rc, result = STORE_OK;

    n[STORE_PENDING] = n[STORE_DELIVERED] = n[STORE_DEAD] = 0;
    for (;;) {
        rc = sqlite3_step(s);
        if (rc == SQLITE_DONE)
            break;
        if (rc != SQLITE_ROW) {
            result = store_fail(st, rc, "counts");
            break;
        }
        if (state_parse((const char *)sqlite3_column_text(s, 0), &state) != 0)
            continue; /* the CHECK constraint makes this impossible */
        n[state] = sqlite3_column_int64(s, 1);
    }
    done(s);
    return result;
}

int
store_counts(struct store *st, struct store_counts *out)
{
    sqlite3_stmt *s;
    int rc, result = STORE_OK;

    memset(out, 0, sizeof(*out));
    out->pending = (uint64_t)st->nreports[STORE_PENDING];
    out->delivered = (uint64_t)st->nreports[STORE_DELIVERED];
    out->dead = (uint64_t)st->nreports[STORE_DEAD];
    /* A scrape during the WAL's copy would wait for its end on the loop:
     * these two as they were a moment ago do. */
    out->oldest_pending_ms = st->oldest_pending_ms;
    out->db_bytes = (uint64_t)st->db_bytes;
    if (st->bg_running)
        return STORE_OK;
    s = st->stmt[S_OLDEST_PENDING];
    rc = sqlite3_step(s);
    out->oldest_pending_ms = 0;
    if (rc == SQLITE_ROW) {
        out->oldest_pending_ms = sqlite3_column_int64(s, 0);
    } else if (rc != SQLITE_DONE) {
        result = store_fail(st, rc, "oldest pending report");
        goto out;
    }
    done(s);
    s = st->stmt[S_SIZE];
    rc = sqlite3_step(s);
    if (rc != SQLITE_ROW) {
        result =
            store_fail(st, rc == SQLITE_DONE ? SQLITE_ERROR : rc, "db size");
        goto out;
    }
    out->db_bytes = (uint64_t)sqlite3_column_int64(s, 0);
    st->oldest_pending_ms = out->oldest_pending_ms;
    st->db_bytes = (int64_t)out->db_bytes;
out:
    done(s);
    return result;
}

/* One of the two prune statements, bound to (arg, what is left of the
 * batch); adds what it deleted to *n. */
static int
prune_step(struct store *st, enum stmt_id id, int64_t arg, uint64_t *n)
{
    sqlite3_stmt *s = st->stmt[id];
    int result;

    result = bind_int(st, s, 1, arg, "prune");
    if (result == STORE_OK)
        result =
            bind_int(st, s, 2, (int64_t)(STORE_PRUNE_BATCH - *n), "prune");
    if (result != STORE_OK) {
        done(s);
        return result;
    }
    result = run(st, id, "prune");
    if (result == STORE_OK) {
        *n += (uint64_t)sqlite3_changes(st->db);
        count_moved(st, STORE_DELIVERED, -1, sqlite3_changes(st->db));
    }
    return result;
}

int
store_prune(struct store *st, int64_t now_ms, int64_t max_age_ms,
            int64_t max_count, uint64_t *ndeleted)
{
    uint64_t n = 0;
    int64_t cutoff;
    int result;

    if (ndeleted != NULL)
        *ndeleted = 0;
    if (max_age_ms < 0 && max_count < 0)
        return STORE_OK;
    result = begin(st, "prune");
    if (result != STORE_OK)
        return result;
    if (max_age_ms >= 0) {
        cutoff =
            now_ms >= INT64_MIN + max_age_ms ? now_ms - max_age_ms : INT64_MIN;
        result = prune_step(st, S_PRUNE_AGE, cutoff, &n);
        if (result != STORE_OK)
            goto out;
    }
    if (max_count >= 0 && n < STORE_PRUNE_BATCH) {
        result = prune_step(st, S_PRUNE_COUNT, max_count, &n);
        if (result != STORE_OK)
            goto out;
    }
    result = commit(st, "prune");
    if (result == STORE_OK && ndeleted != NULL)
        *ndeleted = n;
out:
    rollback(st);
    return result;
}

/* ---- the whole file --------------------------------------------------- */

int
store_set_size_limit(struct store *st, uint64_t max_bytes, uint64_t *effective)
{
    char sql[64];
    uint64_t pages;
    int64_t got = 0;
    int rc;

    pages = max_bytes == 0 ? (uint64_t)st->default_max_pages
                           : max_bytes / (uint64_t)st->page_size;
    if (pages == 0)
        pages = 1; /* 0 would ask, not set; SQLite raises it to the size */
    if (pages > (uint64_t)st->default_max_pages)
        pages = (uint64_t)st->default_max_pages;
    /* An integer we computed: PRAGMA takes no parameters. */
    snprintf(sql, sizeof(sql), "PRAGMA max_page_count = %llu",
             (unsigned long long)pages);
    rc = query_int(st->db, sql, &got);
    if (rc != SQLITE_OK)
        return store_fail(st, rc, "size limit");
    if (effective != NULL)
        *effective = (uint64_t)got * (uint64_t)st->page_size;
    return STORE_OK;
}

int
store_check(struct store *st)
{
    char msg[200];
    int64_t bad = 0, n[3];
    int rc;

    rc = query_check(st->db, "PRAGMA integrity_check(1)", msg, sizeof(msg));
    if (rc != SQLITE_OK)
        return store_fail(st, rc, "integrity check");
    if (strcmp(msg, "ok") != 0) {
        snprintf(st->errmsg, sizeof(st->errmsg), "integrity check: %s", msg);
        return STORE_CORRUPT;
    }
    /* Our own invariant: the head flag is on the oldest pending report
     * of each container, and nowhere else. */
    rc = query_int(st->db,
                   "SELECT count(*) FROM reports AS r WHERE head <>"
                   " (state = 'pending' AND seq = (SELECT min(seq)"
                   "  FROM reports WHERE container_id = r.container_id"
                   "  AND state = 'pending'))",
                   &bad);
    if (rc != SQLITE_OK)
        return store_fail(st, rc, "integrity check");
    if (bad != 0) {
        snprintf(st->errmsg, sizeof(st->errmsg),
                 "integrity check: %lld reports with a wrong head flag",
                 (long long)bad);
        return STORE_CORRUPT;
    }
    /* A dead letter says why, and nothing else does. */
    rc = query_int(st->db,
                   "SELECT count(*) FROM reports"
                   " WHERE (dead_reason IS NULL) = (state = 'dead')",
                   &bad);
    if (rc != SQLITE_OK)
        return store_fail(st, rc, "integrity check");
    if (bad != 0) {
        snprintf(st->errmsg, sizeof(st->errmsg),
                 "integrity check: %lld reports with a wrong dead_reason",
                 (long long)bad);
        return STORE_CORRUPT;
    }
    /* The counts kept as reports change are the table's. */
    rc = count_reports(st, n);
    if (rc != STORE_OK)
        return rc;
    if (memcmp(n, st->nreports, sizeof(n)) != 0) {
        snprintf(st->errmsg, sizeof(st->errmsg),
                 "integrity check: reports counted pending/delivered/dead"
                 " %lld/%lld/%lld, the table holds %lld/%lld/%lld",
                 (long long)st->nreports[STORE_PENDING],
                 (long long)st->nreports[STORE_DELIVERED],
                 (long long)st->nreports[STORE_DEAD],
                 (long long)n[STORE_PENDING], (long long)n[STORE_DELIVERED],
                 (long long)n[STORE_DEAD]);
        return STORE_CORRUPT;
    }
    return STORE_OK;
}

static void
store_free(struct store *st)
{
    int i;

    for (i = 0; i < S_COUNT; i++)
        sqlite3_finalize(st->stmt[i]);
    /* All statements are finalized, so close cannot be refused. */
    sqlite3_close(st->db);
    walbuf_free(st->walbuf);
    pend_clear(st);
    free(st->pend);
    free(st->path);
    free(st);
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

int
store_wal_pages(const struct store *st)
{
    return st->wal_pages;
}

void
store_on_wal(struct store *st, int bound, store_wal_cb cb, void *arg)
{
    st->wal_bound = bound;
    st->on_wal_full = cb;
    st->on_wal_arg = arg;
}

uint64_t
store_checkpoints(const struct store *st)
{
    return st->checkpoints;
}

void
store_checkpoint_begin(struct store *st)
{
    st->bg_commits = st->commits;
    st->bg_log = st->bg_done = 0;
    st->bg_restarted = false;
    st->bg_running = true;
}

/*
 * The copy, then the WAL's start over, both here. Once every frame is
 * copied, the next write transaction starts the WAL from its beginning,
 * and SQLite syncs the WAL's new header before that transaction's frames
 * (its ticket ff5be73dee; synchronous=NORMAL too). Left to the next
 * commit, that sync was the loop's: 188 per sustained run, 9-20 per
 * 3,000-exit burst, up to 107 ms when it met the copy's own syncs on this
 * machine's disk (docs/performance.md). So one row is written here,
 * right after the copy and under the connection's mutex, unless the loop
 * is inside a transaction of its own (it then starts the WAL over
 * itself): how many times the WAL was started over this way, under the
 * checkpoint key "store.wal_restarts". A row whose value is unchanged
 * would not do: SQLite writes no page for it.
 */
int
store_checkpoint_bg(struct store *st)
{
    sqlite3_mutex *mu = sqlite3_db_mutex(st->db);
    char wal[PATH_MAX + 8];
    int rc, fd, waited;

    /* The copy begins with a sync of the WAL (synchronous=NORMAL syncs no
     * commit, so that is every frame since the last copy) and ends with
     * one of the database: 19 ms each on average in a burst here (perf
     * trace of this thread), all of it with the connection held. Synced
     * first, outside it, the copy's own sync of the WAL finds little or
     * nothing left to write. An optimisation only: SQLite's sync is
     * still what the copy relies on. */
    snprintf(wal, sizeof(wal), "%s-wal", st->path);
    fd = open(wal, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd >= 0) {
        (void)fdatasync(fd);
        close(fd);
    }
    /* SQLite refuses the copy (SQLITE_LOCKED, "database table is
     * locked") on a connection inside a transaction, and the mutex
     * serializes the loop's transactions call by call, not whole: taken
     * between two statements of one, it would find it open. The loop's
     * transactions never outlast a loop turn, so the copy waits here, on
     * its own thread, for the connection to be out of one (up to
     * STORE_CKPT_TXN_WAIT_MS, then tried anyway: it fails and is tried
     * again later). */
    for (waited = 0;; waited++) {
        sqlite3_mutex_enter(mu);
        if (sqlite3_get_autocommit(st->db) || waited >= STORE_CKPT_TXN_WAIT_MS)
            break;
        sqlite3_mutex_leave(mu);
        nanosleep(&(struct timespec){0, 1000000}, NULL);
    }
    rc = sqlite3_wal_checkpoint_v2(st->db, NULL, SQLITE_CHECKPOINT_PASSIVE,
                                   &st->bg_log, &st->bg_done);
    if (rc == SQLITE_OK && st->bg_log > 0 && st->bg_done >= st->bg_log &&
        sqlite3_get_autocommit(st->db)) {
        st->in_bg = true;
        st->bg_restarted =
            sqlite3_exec(st->db,
                         "BEGIN IMMEDIATE;"
                         "INSERT INTO checkpoints(key, value)"
                         " VALUES ('store.wal_restarts', 1)"
                         " ON CONFLICT(key) DO UPDATE SET value = value + 1;"
                         "COMMIT",
                         NULL, NULL, NULL) == SQLITE_OK;
        if (!st->bg_restarted && !sqlite3_get_autocommit(st->db))
            sqlite3_exec(st->db, "ROLLBACK", NULL, NULL, NULL);
        st->in_bg = false;
    }
    sqlite3_mutex_leave(mu);
    return rc;
}

int
store_checkpoint_end(struct store *st, int rc)
{
    st->bg_running = false;
    if (rc != SQLITE_OK)
        return store_fail(st, rc, "checkpoint");
    st->checkpoints++;
    /* Every frame copied and nothing committed since: the WAL starts
     * over, with store_checkpoint_bg's row, or at the next commit (one
     * since has set wal_pages itself). */
    if (st->bg_done >= st->bg_log && st->commits == st->bg_commits)
        st->wal_pages = st->bg_restarted ? 1 : 0;
    return STORE_OK;
}

int
store_checkpoint(struct store *st)
{
    store_checkpoint_begin(st);
    return store_checkpoint_end(st, store_checkpoint_bg(st));
}

struct sqlite3 *
store_sqlite(struct store *st)
{
    return st->db;
}

int
store_close(struct store *st)
{
    int result;

    if (st == NULL)
        return STORE_OK;
    result = store_flush(st);
    store_free(st);
    return result;
}
