/*
 * store_counts — what the outbox holds, without a scan: the reports by
 * state, counted once at the opening and then kept as they change (by the
 * transactions, store_db.c), the oldest pending report and the file's
 * size (store_counts); and store_check, which holds the file, the
 * outbox's own invariants and those counts against the table.
 */
#include "store_counts.h"

#include <sqlite3.h>
#include <stdio.h>
#include <string.h>

#include "store_db.h"

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
            result = sdb_fail(st, rc, "counts");
            break;
        }
        if (sdb_state_parse((const char *)sqlite3_column_text(s, 0), &state) !=
            0)
            continue; /* the CHECK constraint makes this impossible */
        n[state] = sqlite3_column_int64(s, 1);
    }
    sdb_done(s);
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
    s = st->stmt[S_OLDEST_PENDING];
    rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) {
        out->oldest_pending_ms = sqlite3_column_int64(s, 0);
    } else if (rc != SQLITE_DONE) {
        result = sdb_fail(st, rc, "oldest pending report");
        goto out;
    }
    sdb_done(s);
    s = st->stmt[S_SIZE];
    rc = sqlite3_step(s);
    if (rc != SQLITE_ROW) {
        result =
            sdb_fail(st, rc == SQLITE_DONE ? SQLITE_ERROR : rc, "db size");
        goto out;
    }
    out->db_bytes = (uint64_t)sqlite3_column_int64(s, 0);
out:
    sdb_done(s);
    return result;
}

int
store_check(struct store *st)
{
    char msg[200];
    int64_t bad = 0, n[3];
    int rc;

    rc =
        sdb_query_check(st->db, "PRAGMA integrity_check(1)", msg, sizeof(msg));
    if (rc != SQLITE_OK)
        return sdb_fail(st, rc, "integrity check");
    if (strcmp(msg, "ok") != 0) {
        snprintf(st->errmsg, sizeof(st->errmsg), "integrity check: %s", msg);
        return STORE_CORRUPT;
    }
    /* Our own invariant: the head flag is on the oldest pending report
     * of each container, and nowhere else. */
    rc = sdb_query_int(st->db,
                       "SELECT count(*) FROM reports AS r WHERE head <>"
                       " (state = 'pending' AND seq = (SELECT min(seq)"
                       "  FROM reports WHERE container_id = r.container_id"
                       "  AND state = 'pending'))",
                       &bad);
    if (rc != SQLITE_OK)
        return sdb_fail(st, rc, "integrity check");
    if (bad != 0) {
        snprintf(st->errmsg, sizeof(st->errmsg),
                 "integrity check: %lld reports with a wrong head flag",
                 (long long)bad);
        return STORE_CORRUPT;
    }
    /* A dead letter says why, and nothing else does. */
    rc = sdb_query_int(st->db,
                       "SELECT count(*) FROM reports"
                       " WHERE (dead_reason IS NULL) = (state = 'dead')",
                       &bad);
    if (rc != SQLITE_OK)
        return sdb_fail(st, rc, "integrity check");
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

int
store_counts_init(struct store *st)
{
    struct store_counts sc;
    int result = count_reports(st, st->nreports);

    if (result == STORE_OK)
        result = store_counts(st, &sc); /* what a copy's time says */
    return result;
}
