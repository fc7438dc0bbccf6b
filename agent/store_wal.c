/*
 * store_wal — the write-ahead log and its checkpoints: SQLite's WAL hook
 * counts the pages each commit leaves, and the caller copies the WAL into
 * the database when it chooses (store_checkpoint, or in three parts with
 * the copy on agent/bio.c's thread), never as part of a commit; see
 * store.h.
 */
#include "store_wal.h"

#include <fcntl.h>
#include <limits.h>
#include <sqlite3.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "store_db.h"

/* store_checkpoint_bg's wait for the loop's transaction to end. */
#define STORE_CKPT_TXN_WAIT_MS 1000

/* SQLite's WAL hook, after each commit: only counts. Checkpointing here,
 * as the default hook does, would make whichever commit crosses the bound
 * pay for the copy. */
int
store_wal_hook(void *arg, sqlite3 *db, const char *name, int pages)
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
 * commit, that sync would be the loop's, and could meet the copy's own
 * syncs on the disk. So one row is written here, right after the copy
 * and under the connection's mutex, unless the loop is inside a
 * transaction of its own (it then starts the WAL over itself): how many
 * times the WAL was started over this way, under the checkpoint key
 * "store.wal_restarts". A row whose value is unchanged would not do:
 * SQLite writes no page for it.
 */
int
store_checkpoint_bg(struct store *st)
{
    sqlite3_mutex *mu = sqlite3_db_mutex(st->db);
    char wal[PATH_MAX + 8];
    int rc, fd, waited;

    /* The copy begins with a sync of the WAL (synchronous=NORMAL syncs no
     * commit, so that is every frame since the last copy) and ends with
     * one of the database, all of it with the connection held. Synced
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
        return sdb_fail(st, rc, "checkpoint");
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
