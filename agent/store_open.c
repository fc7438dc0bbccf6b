/*
 * store_open — opening and closing reapd.db: the file created with
 * reapd's mode, checked before anything is written to it, switched to WAL
 * and set up, its schema migrated (store_schema.c), its statements
 * prepared; store_close flushes what is pending and frees it all. Also
 * the file's size cap (store_set_size_limit). See store.h.
 *
 * WAL mode, so a commit appends to one file and a kill -9 at any instant
 * leaves the last committed transaction readable at the next open.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "store.h"
#include "store_counts.h"
#include "store_db.h"
#include "store_records.h"
#include "store_schema.h"
#include "store_wal.h"
#include "walbuf.h"

/* SQLite's VFS the store's is over (open_one). */
#define STORE_VFS "unix-excl"

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
    int result = sdb_map_rc(rc);

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
            rc = sdb_query_int(st->db, "PRAGMA user_version", &v);
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
        rc =
            sqlite3_exec(st->db, store_schema_migrations[v], NULL, NULL, NULL);
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
    sdb_rollback(st); /* a migration that failed leaves nothing behind */
    return result;
}

/*
 * A connection to the file, through walbuf over SQLite's "unix-excl" VFS:
 * the process's first lock on the file is one exclusive POSIX lock, kept
 * until the last connection closes, and every later lock, of this
 * connection or the checkpoint's, is taken in the process's memory, not
 * by a system call per transaction. With that lock held, the WAL index
 * lives in memory the process's connections share, not in a -shm file.
 * reapd owns its file (reapd.lock: one reapd per state_dir): no other
 * process can read the database while reapd runs; the status endpoint
 * answers what it holds. Each connection is used by one thread at a
 * time, so SQLite's own mutex for it is not wanted.
 */
static int
open_one(struct store *st, sqlite3 **db)
{
    int rc;

    rc = sqlite3_open_v2(
        st->path, db,
        SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_NOFOLLOW,
        st->walbuf != NULL ? walbuf_name(st->walbuf) : STORE_VFS);
    if (rc != SQLITE_OK)
        return rc;
    sqlite3_extended_result_codes(*db, 1);
    /* No tricks a hostile file could play through its schema. */
    sqlite3_db_config(*db, SQLITE_DBCONFIG_DEFENSIVE, 1, NULL);
    sqlite3_db_config(*db, SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0, NULL);
    return SQLITE_OK;
}

/* The loop's connection, the file created first with reapd's mode.
 * Nothing is read yet. */
static int
open_connection(struct store *st, const char *state_dir)
{
    int rc, result;

    result = create_file(st, state_dir);
    if (result != STORE_OK)
        return result;
    /* A WAL frame in one write rather than two (agent/walbuf.h); without
     * it (no memory), SQLite's own VFS does the same work. */
    st->walbuf = walbuf_new(STORE_VFS, 0);
    rc = open_one(st, &st->db);
    if (rc != SQLITE_OK)
        return st->db != NULL
                   ? open_fail_rc(st, rc, "open")
                   : open_fail(st, STORE_NOMEM, "open", sqlite3_errstr(rc));
    sqlite3_busy_timeout(st->db, STORE_BUSY_TIMEOUT_MS);
    return STORE_OK;
}

/* The checkpoint's connection (store_wal.c), once the loop's holds the
 * file and its WAL: the same file, VFS and settings. Its first read opens
 * the WAL here, not on the checkpoint's thread. PASSIVE checkpoints wait
 * for no lock, so it has no busy timeout. */
static int
open_ckpt_connection(struct store *st)
{
    static const char what[] = "opening the checkpoint's connection";
    int64_t v = 0;
    int rc;

    rc = open_one(st, &st->ckpt_db);
    if (rc == SQLITE_OK)
        rc = sqlite3_exec(st->ckpt_db,
                          "PRAGMA synchronous = NORMAL;"
                          "PRAGMA wal_autocheckpoint = 0;"
                          "PRAGMA journal_size_limit = 25165824;",
                          NULL, NULL, NULL);
    if (rc == SQLITE_OK)
        rc = sdb_query_int(st->ckpt_db, "PRAGMA user_version", &v);
    if (rc == SQLITE_OK)
        return STORE_OK;
    if (st->ckpt_db == NULL)
        return open_fail(st, STORE_NOMEM, what, sqlite3_errstr(rc));
    return open_fail(st,
                     sdb_map_rc(rc) != STORE_OK ? sdb_map_rc(rc) : STORE_ERROR,
                     what, sqlite3_errmsg(st->ckpt_db));
}

/* Read-only questions first: a file that is not a database, or one from
 * a newer reapd, is refused before anything is written to it. */
static int
open_check(struct store *st)
{
    char check[200];
    int64_t v = 0;
    int rc;

    rc = sdb_query_int(st->db, "PRAGMA user_version", &v);
    if (rc != SQLITE_OK)
        return open_fail_rc(st, rc, "reading the schema version");
    if (v < 0 || v > STORE_SCHEMA_VERSION)
        return too_new(st, v);
    rc =
        sdb_query_check(st->db, "PRAGMA quick_check(1)", check, sizeof(check));
    if (rc != SQLITE_OK)
        return open_fail_rc(st, rc, "integrity check");
    if (strcmp(check, "ok") != 0)
        return open_fail(st, STORE_CORRUPT, "integrity check", check);
    return STORE_OK;
}

/* WAL mode and the connection's settings; the WAL hook. */
static int
open_settings(struct store *st)
{
    char mode[16];
    int rc;

    rc = sdb_query_check(st->db, "PRAGMA journal_mode = WAL", mode,
                         sizeof(mode));
    if (rc != SQLITE_OK)
        return open_fail_rc(st, rc, "journal_mode=WAL");
    if (strcmp(mode, "wal") != 0)
        return open_fail(st, STORE_ERROR, "journal_mode=WAL",
                         "the file system does not support WAL");
    rc = sqlite3_exec(st->db,
                      "PRAGMA foreign_keys = ON;"
                      "PRAGMA synchronous = NORMAL;"
                      /* No commit checkpoints (store_wal_hook replaces the
                       * automatic hook): the caller copies the WAL past
                       * its own bound (groupcommit.c, on agent/bio.c's
                       * thread), so a commit (often a report's) never
                       * carries the copy and its syncs. */
                      "PRAGMA wal_autocheckpoint = 0;"
                      /* A WAL that starts over is cut back to 24 MiB:
                       * more than groupcommit.c lets it grow to, so that
                       * a WAL it keeps to its bound is reused, not cut on
                       * the loop (a cut frees megabytes of the file
                       * system's blocks while the loop waits). */
                      "PRAGMA journal_size_limit = 25165824;"
                      /* The page cache: 1 MiB rather than SQLite's
                       * 2 MiB. The database is written far more than it
                       * is read (records at each step, reports once), and
                       * what a write needs is the B-trees' upper pages
                       * and the leaves a burst keeps coming back to: this
                       * holds them, and more would cost memory for each
                       * tracked container for little. */
                      "PRAGMA cache_size = -1024;"
                      /* A statement in a transaction that may write
                       * more than one B-tree and fail halfway (a record's
                       * upsert, a report's insert) keeps the pages it
                       * changes in a statement journal: in a temporary
                       * file, system calls at every exit. In memory, it
                       * costs the few pages one statement changes (every
                       * query here is bounded by an index and a LIMIT, so
                       * no large sort lands there either). */
                      "PRAGMA temp_store = MEMORY;",
                      NULL, NULL, NULL);
    if (rc != SQLITE_OK)
        return open_fail_rc(st, rc, "settings");
    sqlite3_wal_hook(st->db, store_wal_hook, st);
    return STORE_OK;
}

/* The page size and SQLite's own cap (store_set_size_limit), and every
 * statement, prepared once for the store's life. */
static int
open_prepare(struct store *st)
{
    int rc, i;

    rc = sdb_query_int(st->db, "PRAGMA page_size", &st->page_size);
    if (rc == SQLITE_OK)
        rc = sdb_query_int(st->db, "PRAGMA max_page_count",
                           &st->default_max_pages);
    if (rc != SQLITE_OK)
        return open_fail_rc(st, rc, "page size");
    for (i = 0; i < S_COUNT; i++) {
        rc = sqlite3_prepare_v3(st->db, store_schema_sql[i], -1,
                                SQLITE_PREPARE_PERSISTENT, &st->stmt[i], NULL);
        if (rc != SQLITE_OK)
            return open_fail_rc(st, rc, "preparing statements");
    }
    return STORE_OK;
}

static void
store_free(struct store *st)
{
    int i;

    for (i = 0; i < S_COUNT; i++)
        sqlite3_finalize(st->stmt[i]);
    /* The checkpoint's first: the last one closed copies the WAL into
     * the database and removes it, as a clean stop should. All
     * statements are finalized, so close cannot be refused. */
    sqlite3_close(st->ckpt_db);
    sqlite3_close(st->db);
    walbuf_free(st->walbuf);
    pend_clear(st);
    free(st->pend);
    free(st->path);
    free(st);
}

int
store_open(const char *state_dir, struct store **out, char *err, size_t errlen)
{
    struct store *st = NULL;
    size_t n;
    int result = STORE_ERROR;

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

    result = open_connection(st, state_dir);
    if (result == STORE_OK)
        result = open_check(st);
    if (result == STORE_OK)
        result = open_settings(st);
    if (result == STORE_OK)
        result = migrate(st);
    if (result == STORE_OK)
        result = open_prepare(st);
    if (result == STORE_OK)
        result = open_ckpt_connection(st);
    if (result == STORE_OK)
        result = store_counts_init(st);
    if (result != STORE_OK)
        goto out;
    st->errmsg[0] = '\0';
    *out = st;
    st = NULL;
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
    rc = sdb_query_int(st->db, sql, &got);
    if (rc != SQLITE_OK)
        return sdb_fail(st, rc, "size limit");
    if (effective != NULL)
        *effective = (uint64_t)got * (uint64_t)st->page_size;
    return STORE_OK;
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
