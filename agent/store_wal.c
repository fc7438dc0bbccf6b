/*
 * store_wal — the write-ahead log and its checkpoints: SQLite's WAL hook
 * counts the pages each commit leaves, and the caller copies the WAL into
 * the database when it chooses (store_checkpoint, or in three parts with
 * the copy on agent/bio.c's thread), never as part of a commit; see
 * store.h.
 *
 * The copy runs on a connection of its own (st->ckpt_db, opened with the
 * loop's), as a PASSIVE checkpoint: it takes no lock a writer needs, so
 * the loop commits while it runs, and the frames committed meanwhile wait
 * for the next copy. Once every frame is copied, the loop's next write
 * transaction starts the WAL over from its beginning.
 */
#include "store_wal.h"

#include <sqlite3.h>
#include <stdio.h>

#include "store_db.h"

/* SQLite's WAL hook, after each commit of the loop's connection: only
 * counts. Checkpointing here, as the default hook does, would make
 * whichever commit crosses the bound pay for the copy. */
int
store_wal_hook(void *arg, sqlite3 *db, const char *name, int pages)
{
    struct store *st = arg;

    (void)db;
    (void)name;
    /* Fewer frames than the last commit left: the WAL started over, and
     * nothing of it is copied yet. */
    if (pages < st->wal_pages) {
        st->wal_copied = 0;
        st->wal_restarts++;
    }
    st->wal_pages = pages;
    if (st->on_wal_full != NULL && store_wal_pages(st) >= st->wal_bound)
        st->on_wal_full(st->on_wal_arg);
    return SQLITE_OK;
}

int
store_wal_pages(const struct store *st)
{
    return st->wal_pages > st->wal_copied ? st->wal_pages - st->wal_copied : 0;
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
    st->bg_restarts = st->wal_restarts;
    st->bg_log = st->bg_done = 0;
}

/* On the checkpoint's own connection, which nothing else uses
 * meanwhile: the loop's is not touched. */
int
store_checkpoint_bg(struct store *st)
{
    return sqlite3_wal_checkpoint_v2(st->ckpt_db, NULL,
                                     SQLITE_CHECKPOINT_PASSIVE, &st->bg_log,
                                     &st->bg_done);
}

int
store_checkpoint_end(struct store *st, int rc)
{
    /* The copy read the WAL index's header while the loop was writing
     * it (SQLite's SQLITE_BUSY): nothing copied, nothing wrong; the WAL
     * is still past the caller's bound, and the caller tries again. */
    if (rc == SQLITE_BUSY)
        return STORE_OK;
    if (rc != SQLITE_OK) {
        snprintf(st->errmsg, sizeof(st->errmsg), "checkpoint: %s",
                 sqlite3_errmsg(st->ckpt_db));
        return sdb_map_rc(rc) != STORE_OK ? sdb_map_rc(rc) : STORE_ERROR;
    }
    st->checkpoints++;
    /* The frames it copied are of this WAL unless it started over since
     * (then the count is the new one's, from 0). */
    if (st->wal_restarts == st->bg_restarts && st->bg_done > st->wal_copied)
        st->wal_copied = st->bg_done;
    return STORE_OK;
}

int
store_wal_frames(const struct store *st)
{
    return st->wal_pages;
}

int
store_wal_restart(struct store *st)
{
    int log = 0, done = 0, rc;

    /* No busy handler: a reader of the WAL (a copy on the other
     * connection) is not waited for. */
    sqlite3_busy_timeout(st->db, 0);
    rc = sqlite3_wal_checkpoint_v2(st->db, NULL, SQLITE_CHECKPOINT_RESTART,
                                   &log, &done);
    sqlite3_busy_timeout(st->db, STORE_BUSY_TIMEOUT_MS);
    if (rc == SQLITE_BUSY)
        return STORE_OK;
    if (rc != SQLITE_OK)
        return sdb_fail(st, rc, "restarting the WAL");
    st->checkpoints++;
    st->wal_copied = done;
    return STORE_OK;
}

int
store_checkpoint(struct store *st)
{
    store_checkpoint_begin(st);
    return store_checkpoint_end(st, store_checkpoint_bg(st));
}
