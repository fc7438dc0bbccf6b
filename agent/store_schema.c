/*
 * store_schema — the schema of reapd.db and the statements run on it;
 * see store_schema.h.
 *
 * The only SQL text formatted at run time is elsewhere and carries
 * integers the store computed (PRAGMA takes no parameters); everything
 * here is bound with parameters.
 */
#include "store_schema.h"

/*
 * The schema, as an ordered list: store_schema_migrations[v] takes
 * user_version v to v + 1, in one transaction with the version bump.
 * Never edit one that has shipped; append.
 */
const char *const store_schema_migrations[] = {
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

_Static_assert(sizeof(store_schema_migrations) /
                       sizeof(store_schema_migrations[0]) ==
                   STORE_SCHEMA_VERSION,
               "one migration per schema version");

#define REPORT_COLS                                                           \
    "report_id, container_id, seq, state, attempts, next_attempt_ms, "        \
    "created_ms, delivered_ms, last_error, dead_reason"

const char *const store_schema_sql[S_COUNT] = {
    [S_BEGIN] = "BEGIN IMMEDIATE",
    [S_COMMIT] = "COMMIT",
    [S_ROLLBACK] = "ROLLBACK",
    /* ?5: the seq, the counter in meta plus one (never reused even after
     * pruning); ?6: whether it is its container's head (S_HEAD_FREE).
     * Both read before by statements of their own: an INSERT whose SELECT
     * reads the table it inserts into has SQLite build a temporary table
     * for every row. */
    [S_REPORT_INSERT] =
        "INSERT INTO reports(report_id, container_id, seq, body, state,"
        " attempts, next_attempt_ms, created_ms, head)"
        " VALUES (?1, ?2, ?5, ?3, 'pending', 0, ?4, ?4, ?6)"
        " ON CONFLICT(report_id) DO NOTHING",
    /* Delivered as it is stored (no upstream): written so at once, not
     * as pending then marked, which would run the head trigger and write
     * and remove two index entries for nothing. Never pending, so never
     * a head; a pending report of the same container keeps its own. */
    [S_REPORT_INSERT_DELIVERED] =
        "INSERT INTO reports(report_id, container_id, seq, body, state,"
        " attempts, next_attempt_ms, created_ms, delivered_ms, head)"
        " VALUES (?1, ?2, ?5, ?3, 'delivered', 1, ?4, ?4, ?4, 0)"
        " ON CONFLICT(report_id) DO NOTHING",
    [S_HEAD_FREE] = "SELECT NOT EXISTS (SELECT 1 FROM reports"
                    " WHERE container_id = ?1 AND state = 'pending')",
    [S_SEQ_BUMP] = "UPDATE meta SET value = value + 1"
                   " WHERE name = 'report_seq'",
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
