/*
 * store — reapd's durable state: one SQLite database,
 * <state_dir>/reapd.db, holding the outbox of reports waiting for upstream
 * delivery, the per-container lifecycle records and the stream
 * checkpoints, so that a restart (or a kill -9) loses nothing.
 *
 * Two kinds of write, with two costs:
 *
 *  - A report is "made" only once it is on disk: store_add_report commits
 *    it in its own transaction with synchronous=FULL (the WAL is fsynced)
 *    before it returns, unless the caller keeps a journal of its own that
 *    is synced first and replayed into the store at startup
 *    (store_set_journaled; reapd's is reports.jsonl): then the commit
 *    survives a process crash, and a power loss is repaired from the
 *    journal, for one sync per report instead of two. Its report_id is the
 * primary key, so a report made again after a restart (same exit, same id; see
 * report.h) is refused as STORE_DUPLICATE: each report is delivered at least
 * once, and a report missing after a crash is made once more at most.
 *
 *  - Container records and checkpoints change on the hot path (every
 *    lifecycle step, every event). store_put_container, store_delete_
 *    container and store_set_checkpoint only record the change in memory
 *    (the latest value per key wins); store_flush, which the caller runs
 *    every few milliseconds, writes all of them in one transaction. If that
 *    transaction fails (disk full) nothing is forgotten: the changes stay
 *    pending and the next flush writes them. Flushes use synchronous=
 *    NORMAL: they survive a process crash, and a power loss may undo the
 *    last few, which the relist after a restart repairs.
 *
 *  - Delivery outcomes (store_mark_*) and pruning are small transactions
 *    of their own, synchronous=NORMAL too: a power loss may undo the last
 *    few marks, and a report is then delivered again (at least once).
 *
 * Every int function returns STORE_OK (0), a positive answer
 * (STORE_DUPLICATE, STORE_NOT_FOUND) or a negative error. After an error
 * the database is as it was before the call (its transaction rolled back)
 * and store_errmsg says what failed; the store stays usable, and writes
 * succeed again once the cause (a full disk) is gone.
 *
 * Not thread-safe: one struct store belongs to the loop thread. Nobody
 * else is expected to write reapd.db while reapd runs; readers (an
 * operator's sqlite3 shell) are fine.
 *
 * This header is the store's whole interface. Its files, one part each,
 * share the private store_int.h: store_open.c (opening, closing, the size
 * cap), store_schema.c (the schema and the statements' SQL), store_db.c
 * (statements and transactions, under all the others), store_records.c
 * (records and checkpoints pending until a flush), store_outbox.c and
 * store_reports.c (the outbox's writes and reads), store_counts.c (the
 * report counts, store_check) and store_wal.c (the WAL's checkpoints).
 */
#ifndef REAPD_STORE_H
#define REAPD_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bounds.h"

enum store_result {
    STORE_OK = 0,
    STORE_DUPLICATE = 1, /* add_report: that report_id is already stored */
    STORE_NOT_FOUND = 2, /* no such row (or, for mark_*, not pending) */
    STORE_CONFLICT = 3,  /* requeue: the report is delivered already */
    STORE_ERROR = -1,    /* anything else SQLite refused */
    STORE_FULL = -2,     /* disk full, or the size limit reached */
    STORE_IOERR = -3,    /* a read, write or fsync failed */
    STORE_CORRUPT = -4,  /* not a database, or a damaged one */
    STORE_BUSY = -5,     /* another process holds the database locked */
    STORE_NOMEM = -6,
    STORE_INVALID = -7, /* bad argument: id, key or body out of bounds */
    STORE_TOO_NEW = -8, /* the schema is newer than this reapd knows */
};

/* Input bounds; longer input is refused with STORE_INVALID. Ids and keys
 * are printable ASCII without spaces. A report's JSON and a container
 * record's take whatever report.c and record.c write (bounds.h); a
 * report larger than upstream takes is stored all the same and becomes a
 * dead letter (STORE_DEAD_TOO_LARGE). */
#define STORE_REPORT_ID_MAX 64
#define STORE_ID_MAX        128                /* container ids */
#define STORE_KEY_MAX       64                 /* checkpoint keys */
#define STORE_BODY_MAX      LIMIT_RECORD_BYTES /* a report's JSON */
#define STORE_RECORD_MAX    LIMIT_RECORD_BYTES /* a container record's */
#define STORE_ERRTEXT_MAX   1024  /* last_error longer than this is cut */
#define STORE_LIST_MAX      10000 /* rows one list call returns at most */
#define STORE_PRUNE_BATCH   1000  /* rows one prune deletes at most */

/* Pending changes (store_flush) are bounded too; beyond these, put and
 * set answer STORE_FULL until a flush succeeds. */
#define STORE_PENDING_MAX       65536
#define STORE_PENDING_BYTES_MAX (64u << 20)

/* The schema version this reapd writes (PRAGMA user_version). Version 2
 * added the reports' dead_reason; a version 1 database is migrated at
 * open (its dead letters were all refused upstream: "rejected"). */
#define STORE_SCHEMA_VERSION 2

struct store;

/*
 * Opens (creating, mode 0640) <state_dir>/reapd.db, which must already
 * exist as a directory, brings its schema up to STORE_SCHEMA_VERSION (one
 * transaction per migration) and checks it (PRAGMA quick_check). On
 * success *out owns the store (store_close). On error *out is NULL and
 * `err` (if not NULL) holds a one-line message naming the file and what
 * to do: STORE_CORRUPT for a file that is not a database or fails the
 * check, STORE_TOO_NEW for a database written by a newer reapd (it is
 * left untouched), STORE_BUSY if another process holds it locked.
 */
int store_open(const char *state_dir, struct store **out, char *err,
               size_t errlen);

/*
 * Writes the pending changes (store_flush) and closes. The store is freed
 * whatever the result; an error means the pending changes were lost.
 * NULL is accepted.
 */
int store_close(struct store *st);

/* The store's own SQLite connection (the loop's), for tests that look
 * behind its back (the file is locked while the store is open: no other
 * process can read it). Owned by the store. */
struct sqlite3 *store_sqlite(struct store *st);

/* What the last failed call said, for the log ("" if nothing failed).
 * Owned by the store, valid until the next call. */
const char *store_errmsg(const struct store *st);

/* A static name for a result code ("disk full", ...). */
const char *store_strerror(int result);

/* The database file's path, owned by the store. */
const char *store_path(const struct store *st);

/*
 * Caps the database at `max_bytes` (rounded down to whole pages, and never
 * below its current size: SQLite does not shrink it); 0 lifts the cap.
 * Writes that would grow it beyond fail with STORE_FULL, which is how a
 * full disk looks too. The effective cap is in *effective (may be NULL).
 * This lasts until store_close; it is not stored.
 */
int store_set_size_limit(struct store *st, uint64_t max_bytes,
                         uint64_t *effective);

/* PRAGMA integrity_check, the thorough one (reads the whole file), the
 * outbox's own invariants, and the report counts store_counts keeps
 * against the table's: STORE_OK, or STORE_CORRUPT with the first problem
 * in store_errmsg. */
int store_check(struct store *st);

/* ---- the outbox ------------------------------------------------------ */

enum store_state {
    STORE_PENDING,   /* waiting for delivery (or a retry) */
    STORE_DELIVERED, /* upstream acknowledged it */
    STORE_DEAD,      /* given up on; kept for an operator to see */
};

/* "pending" | "delivered" | "dead" */
const char *store_state_name(enum store_state s);

/* Why a report is dead. */
enum store_dead_reason {
    STORE_DEAD_NONE,      /* not dead */
    STORE_DEAD_REJECTED,  /* the upstream refused it for good (a 4xx) */
    STORE_DEAD_TOO_LARGE, /* over what upstream takes: never sent */
    STORE_DEAD_INVALID,   /* its ids are not ones upstream takes */
};

/* "rejected" | "too_large" | "invalid"; NULL for STORE_DEAD_NONE. */
const char *store_dead_reason_name(enum store_dead_reason r);

/*
 * Adds report `report_id` (its JSON `body`, `len` bytes, no NUL inside)
 * for `container_id`, pending and due at once. It is durable when this
 * returns STORE_OK: committed, and the WAL fsynced. STORE_DUPLICATE if a
 * report with that id is already stored (in any state, until retention
 * prunes it): nothing changed. The store copies what it needs.
 *
 * The order that makes a restart safe: add the report, then delete the
 * container's record (store_delete_container). Killed in between, reapd
 * finds the record at restart, makes the same report again, and is told
 * it is a duplicate.
 *
 * The pending changes go in its transaction as store_flush_some(st,
 * container_id, 32) would write them: the container's record first.
 */
int store_add_report(struct store *st, const char *report_id,
                     const char *container_id, const char *body, size_t len,
                     int64_t now_ms);

/* As store_add_report, and delivered at once (store_mark_delivered with
 * `now_ms`) in the same transaction: for reports with nowhere else to go
 * (no upstream). */
int store_add_delivered(struct store *st, const char *report_id,
                        const char *container_id, const char *body, size_t len,
                        int64_t now_ms);

/* Most reports store_add_reports takes at once. */
#define STORE_REPORTS_MAX 64

/* One report of store_add_reports; the strings are the caller's. */
struct store_new_report {
    const char *report_id, *container_id, *body;
    size_t len;
    /* The container's record is deleted in the same transaction once the
     * report is stored (or was already): its pending change goes with it.
     * One commit for both, and never the record gone without its report. */
    bool forget;
    int result;     /* set: STORE_OK (stored), STORE_DUPLICATE or an error */
    bool forgotten; /* set: its record was deleted and that committed */
};

/*
 * store_add_report, or with `delivered` store_add_delivered, for `n`
 * reports (at most STORE_REPORTS_MAX) in one transaction, with the
 * pending changes as store_flush_ids(st, <their containers>, n, 32)
 * would write them: a burst's reports share a commit. STORE_OK once it
 * is committed: then each v[i].result says whether that report was
 * stored, was a duplicate, or was refused on its own (invalid); any
 * other result: none was stored.
 */
int store_add_reports(struct store *st, struct store_new_report *v, size_t n,
                      int64_t now_ms, bool delivered);

/* The next store_add_reports (only it) also sets checkpoint `key` (static
 * text, borrowed) to `value` in its transaction, when every report of it
 * is stored or was already: a value that is true only once they are (the
 * end of the journal they were appended to) is on disk with them, and no
 * commit of its own follows. A pending older value of it is dropped. */
void store_set_reports_checkpoint(struct store *st, const char *key,
                                  int64_t value);
/* Whether the last store_add_reports wrote that checkpoint (committed). */
bool store_reports_checkpoint_written(const struct store *st);

/* Reports are journaled by the caller (see the top of this file): their
 * commits skip the fsync. Off by default. */
void store_set_journaled(struct store *st, bool on);

/* Called after each report becomes durable (store_add_report or
 * store_add_delivered returned STORE_OK; never for a duplicate), from
 * inside that call; the strings are valid during the call only. One
 * callback; NULL removes it. */
typedef void (*store_report_cb)(const char *report_id,
                                const char *container_id, void *arg);
void store_on_report(struct store *st, store_report_cb cb, void *arg);

/* One report as listed. Owns body and last_error (store_report_clear). */
struct store_report {
    char report_id[STORE_REPORT_ID_MAX + 1];
    char container_id[STORE_ID_MAX + 1];
    int64_t seq; /* the database's order of arrival, from 1, never reused */
    enum store_state state;
    int64_t attempts; /* delivery attempts made (mark_* each count one) */
    int64_t next_attempt_ms;
    int64_t created_ms;
    int64_t delivered_ms; /* 0 unless delivered */
    char *body;           /* NUL-terminated; NULL unless asked for */
    size_t body_len;
    char *last_error; /* NULL if none */
    /* Why it is dead; STORE_DEAD_NONE unless it is. */
    enum store_dead_reason dead_reason;
};

struct store_reports {
    struct store_report *v;
    size_t n;
};

void store_report_clear(struct store_report *r);
/* Frees what a list call filled in and empties *l. */
void store_reports_free(struct store_reports *l);

/*
 * The reports due for delivery at `now_ms`, with their bodies, oldest
 * first, at most `max` (<= STORE_LIST_MAX): reports are delivered in
 * order per container, so only the oldest pending report of each
 * container can be due (when its next_attempt_ms <= now_ms); the later
 * ones wait until it is delivered or dead. *out is filled (n may be 0)
 * and owned by the caller (store_reports_free); on error it is empty.
 */
int store_due(struct store *st, int64_t now_ms, size_t max,
              struct store_reports *out);

/* The outcome of one delivery attempt of a pending report; each counts
 * one attempt. STORE_NOT_FOUND if the report is not (or no longer)
 * pending: a delivered or dead report never comes back (unless an
 * operator requeues it by hand, docs/runbook.md). `error` may be NULL;
 * longer than STORE_ERRTEXT_MAX it is cut. store_mark_dead is the
 * upstream's refusal: reason STORE_DEAD_REJECTED. */
int store_mark_delivered(struct store *st, const char *report_id,
                         int64_t now_ms);
int store_mark_dead(struct store *st, const char *report_id,
                    const char *error);
int store_mark_retry(struct store *st, const char *report_id,
                     int64_t next_attempt_ms, const char *error);

/* A pending report that can never be delivered as it is: dead at once,
 * with `reason` (not STORE_DEAD_NONE: STORE_INVALID) and `error` (as
 * above). No attempt is counted unless the reason is
 * STORE_DEAD_REJECTED. STORE_NOT_FOUND as above. */
int store_mark_dead_reason(struct store *st, const char *report_id,
                           enum store_dead_reason reason, const char *error);

/* One report, with its body if `with_body`. *out is the caller's to
 * clear (store_report_clear) when STORE_OK. */
int store_get_report(struct store *st, const char *report_id, bool with_body,
                     struct store_report *out);
/* The last report made for a container (without its body), or
 * STORE_NOT_FOUND. `out` as store_get_report's. */
int store_latest_report(struct store *st, const char *container_id,
                        struct store_report *out);

/* As store_latest_report, with the body. */
int store_latest_report_body(struct store *st, const char *container_id,
                             struct store_report *out);

/* The `max` (<= STORE_LIST_MAX) most recent reports, newest first, for
 * the status endpoint; bodies only if `with_body`. As store_due. */
int store_recent(struct store *st, size_t max, bool with_body,
                 struct store_reports *out);

/* A cursor: reports with seq > `after`, oldest first (or newest). */
struct store_query {
    int64_t after; /* >= 0 */
    bool newest_first;
    size_t max;               /* <= STORE_LIST_MAX */
    const char *container_id; /* NULL: any */
    int state;                /* an enum store_state, or -1: any */
    bool with_body;
};

/* The reports `q` asks for (found by seq, or by the container's index
 * with container_id). As store_due. */
int store_after(struct store *st, const struct store_query *q,
                struct store_reports *out);

/* The seq of the last report made (0: none yet); pruning never lowers
 * it. */
int store_last_seq(struct store *st, int64_t *seq);

/*
 * An operator's requeue: the dead or pending report `report_id` is
 * pending again, with its attempts at 0, due at `now_ms`, without its
 * last error or dead reason; its container's oldest pending report is
 * the one delivered first again. One transaction. STORE_NOT_FOUND (no
 * such report, or pruned), STORE_CONFLICT (delivered already: nothing
 * to do; upstream has it).
 */
int store_requeue(struct store *st, const char *report_id, int64_t now_ms);

/* Every dead letter back to pending, as store_requeue, in one
 * transaction; how many in *nrequeued (may be NULL). */
int store_requeue_dead(struct store *st, int64_t now_ms, uint64_t *nrequeued);

struct store_counts {
    uint64_t pending;
    uint64_t delivered;
    uint64_t dead;
    uint64_t db_bytes;         /* page_count * page_size of the main file */
    int64_t oldest_pending_ms; /* created_ms of the oldest pending; 0: none */
};

/* The report counts are kept as reports change (counted once at the
 * opening), so this costs two index lookups whatever the outbox holds. */
int store_counts(struct store *st, struct store_counts *out);

/* Write transactions committed since the store was opened. */
uint64_t store_commits(const struct store *st);

/* Container records put or deleted by the transactions committed since
 * the store was opened (a record changed twice before a commit is one
 * write). */
uint64_t store_record_writes(const struct store *st);

/* Pages in the write-ahead log not yet copied into the database. No
 * commit checkpoints: the caller runs store_checkpoint, in a loop turn of
 * its own, once this passes its bound, so no commit carries a copy of the
 * WAL into the database and no one copy is much longer than the bound. */
int store_wal_pages(const struct store *st);

/* Copies the WAL into the database and syncs both: a PASSIVE checkpoint,
 * on a connection of the store's own for it, so it takes no lock the
 * store's other calls need, and copies the frames committed before it
 * began. Once every frame is copied, the next commit starts the WAL over
 * from its beginning. STORE_OK (a copy that met a commit halfway copies
 * nothing, and is counted in store_checkpoints only once one does) or an
 * error; the next call tries again. */
int store_checkpoint(struct store *st);
uint64_t store_checkpoints(const struct store *st);
/* The same in three parts, the middle one on another thread (agent/
 * bio.c): begin and end on the loop, store_checkpoint_bg in between,
 * which returns SQLite's result code for store_checkpoint_end. The loop
 * goes on using the store meanwhile: the copy touches nothing of its
 * connection. One copy at a time. */
void store_checkpoint_begin(struct store *st);
int store_checkpoint_bg(struct store *st);
int store_checkpoint_end(struct store *st, int rc);

/* The WAL's length in frames, its copied part included. While commits
 * come all through the copies, no copy catches up and the WAL is never
 * started over: this grows. */
int store_wal_frames(const struct store *st);
/* On the store's own connection: copies every frame the copies left and
 * makes the next commit start the WAL over (SQLite's RESTART
 * checkpoint), for a WAL that commits never left a copy the time to
 * catch up with. Holds the caller for that copy and its sync. STORE_OK
 * also when a copy still running kept it from starting over (it never
 * waits for one; the caller tries again after), or an error. */
int store_wal_restart(struct store *st);

/* cb(arg) after each commit that leaves at least `bound` pages in the
 * WAL, from inside that commit: it may only schedule the checkpoint. One
 * callback; NULL removes it. */
typedef void (*store_wal_cb)(void *arg);
void store_on_wal(struct store *st, int bound, store_wal_cb cb, void *arg);

/*
 * Retention: deletes delivered reports delivered before
 * now_ms - max_age_ms (max_age_ms < 0: no age limit) and all but the
 * `max_count` most recent delivered ones (max_count < 0: no count limit),
 * oldest first and at most STORE_PRUNE_BATCH per call, so that one call
 * never holds the loop for long: call again while *ndeleted (may be NULL)
 * comes back as STORE_PRUNE_BATCH. Pending and dead reports are never
 * deleted. A pruned report_id is forgotten: the same report made again
 * afterwards would be accepted as new.
 */
int store_prune(struct store *st, int64_t now_ms, int64_t max_age_ms,
                int64_t max_count, uint64_t *ndeleted);

/* ---- container records and checkpoints (pending until store_flush) --- */

/* Records `json` (`len` bytes, no NUL inside; copied) as the record of
 * container `id`, replacing any earlier one. Written by store_flush. */
int store_put_container(struct store *st, const char *id, const char *json,
                        size_t len, int64_t now_ms);

/* Forgets the record of container `id` (none is fine). By store_flush. */
int store_delete_container(struct store *st, const char *id);

/*
 * Where a record marked with store_mark_container is read when a flush
 * writes it: *json (malloc'd, `*len` bytes, no NUL inside; the store
 * frees it) and STORE_OK; STORE_NOT_FOUND when there is nothing to write
 * any more (the mark is dropped, the stored record stays as it is); any
 * other error fails the flush, which is retried. Called only from the
 * store's own functions below, never re-entering the store.
 */
typedef int (*store_record_source_cb)(const char *id, char **json, size_t *len,
                                      void *arg);
/* The source (NULL: none). The marked records are read from the one it
 * replaces first, so that an owner going away leaves none to it: the
 * result of that (STORE_OK, or the first error: the marks it could not
 * read are dropped). */
int store_set_record_source(struct store *st, store_record_source_cb cb,
                            void *arg);
/* Container `id`'s record changed: the flush that writes it reads it
 * from the source then (a record that changes several times before a
 * commit is made into JSON once), replacing any earlier put. */
int store_mark_container(struct store *st, const char *id, int64_t now_ms);
/* The marked record of `id` (NULL: every one) read from the source now,
 * and kept as if put: for an owner about to go before the next flush. */
int store_fill_marked(struct store *st, const char *id);

struct store_container {
    char id[STORE_ID_MAX + 1];
    char *json; /* NUL-terminated */
    size_t len;
    int64_t updated_ms;
};

struct store_containers {
    struct store_container *v;
    size_t n;
};

/*
 * Every container record, including changes not yet flushed, in no
 * particular order. Writes nothing. *out is the caller's
 * (store_containers_free); on error it is empty.
 */
int store_get_containers(struct store *st, struct store_containers *out);
void store_containers_free(struct store_containers *l);

/* Sets checkpoint `key` (the Docker events timeNano, a containerd
 * reconcile mark, ...) to `value`. Written by store_flush. */
int store_set_checkpoint(struct store *st, const char *key, int64_t value);

/* The checkpoint's latest value (flushed or not) in *value, or
 * STORE_NOT_FOUND. */
int store_get_checkpoint(struct store *st, const char *key, int64_t *value);

/*
 * Writes every pending change in one transaction. On error they all stay
 * pending (nothing is half-written) and the next flush tries again.
 * Cheap when nothing is pending.
 */
int store_flush(struct store *st);

/* Most container records store_flush_some writes in one transaction. */
#define STORE_FLUSH_MAX 256

/*
 * As store_flush, but when more than `max` container records wait, only
 * the record of container `id` (NULL: none in particular) and others, up
 * to `max` (at most STORE_FLUSH_MAX) in all; the checkpoints wait for the
 * transaction that writes the last record, so none is on disk ahead of a
 * record changed before it. The rest stays pending (store_pending). So a
 * caller that needs one record on disk never waits for thousands.
 */
int store_flush_some(struct store *st, const char *id, size_t max);

/* As store_flush_some, for the records of `nids` containers `ids` (at
 * most STORE_REPORTS_MAX; an id twice, or not pending, is fine): DELETEs
 * sent in one loop turn share a commit. */
int store_flush_ids(struct store *st, const char *const *ids, size_t nids,
                    size_t max);

/* As store_flush, with its commit synced (synchronous=FULL): it survives
 * a power loss, and so does every commit before it (the WAL is one file,
 * written in order). For the few moments that must not be undone (the
 * journal's checkpoint around a rotation of reports.jsonl). With nothing
 * pending, nothing is written nor synced: set what must hold first. */
int store_flush_synced(struct store *st);

/* Changes waiting for store_flush. */
size_t store_pending(const struct store *st);

#endif
