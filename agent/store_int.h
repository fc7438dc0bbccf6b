/*
 * store_int — the store's private parts, shared by the files that make it
 * up: the connection and its prepared statements (store_db.c, opened by
 * store_open.c from the SQL in store_schema.c), the pending records and
 * checkpoints (store_records.c), the outbox (store_outbox.c,
 * store_reports.c), the report counts (store_counts.c) and the WAL's
 * checkpoints (store_wal.c). Nothing outside them includes this header;
 * the store's interface is store.h.
 *
 * One owner, several files: struct store is the store's one object, freed
 * by store_close. Each file keeps the fields of its own part; all of them
 * go through store_db.h for statements and transactions.
 */
#ifndef REAPD_STORE_INT_H
#define REAPD_STORE_INT_H

#include <sqlite3.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* At the opening, the loop waits at most this long for a lock another
 * process holds (an operator's sqlite3 shell in a write transaction).
 * Once open, no other process can take one, and the checkpoint's
 * connection takes none the loop's needs. */
#define STORE_BUSY_TIMEOUT_MS 100

#include "store.h"

struct pend;
struct walbuf;

/* Every statement the store runs, prepared once at open; their SQL is
 * store_schema_sql[], by the same ids. */
enum stmt_id {
    S_BEGIN,
    S_COMMIT,
    S_ROLLBACK,
    S_REPORT_INSERT,
    S_REPORT_INSERT_DELIVERED,
    S_HEAD_FREE,
    S_SEQ_BUMP,
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

struct store {
    sqlite3 *db; /* the loop's */
    /* The WAL's copy's own (store_wal.c): used by one thread at a time,
     * agent/bio.c's or the caller's of store_checkpoint. */
    sqlite3 *ckpt_db;
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
     * scrape, and counting them would scan the table): what is
     * committed, and what the open transaction would add. */
    int64_t nreports[3], nreports_tx[3];
    uint64_t checkpoints;
    /* The WAL: frames in it after the last commit, of them copied into
     * the database, and how many times it started over (store_wal.c). */
    int wal_pages, wal_copied;
    uint64_t wal_restarts;
    /* store_checkpoint_bg's, for store_checkpoint_end: */
    int bg_log, bg_done;
    uint64_t bg_restarts; /* wal_restarts when it began */
    int wal_bound;
    store_wal_cb on_wal_full;
    void *on_wal_arg;
    store_report_cb on_report;
    void *on_report_arg;
    store_record_source_cb record_src; /* store_mark_container's */
    void *record_src_arg;

    /* Pending changes (store_records.c): open addressing, linear probing,
     * never more than half full; entries leave all at once (pend_clear) or
     * by backward shift (pend_remove), never a hole in a probe run. */
    struct pend *pend;
    size_t pend_cap; /* a power of two */
    size_t npend;
    size_t nckpt; /* of them P_CHECKPOINT */
    size_t pend_bytes;

    char errmsg[1024];
};

#endif
