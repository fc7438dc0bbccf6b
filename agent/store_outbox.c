/*
 * store_outbox — the outbox's writes: reports added (alone or a burst in
 * one transaction, with the pending records they carry along), delivery
 * outcomes, an operator's requeue, and retention's pruning; see store.h.
 * Reading reports back is store_reports.c.
 *
 * A report is made once it is committed: its transaction is synced
 * (synchronous=FULL) unless the caller keeps a journal of its own
 * (store_set_journaled). Outcomes and pruning are small transactions of
 * their own, synchronous=NORMAL.
 */
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>

#include "store.h"
#include "store_db.h"
#include "store_records.h"

/* Pending records a report's transaction takes along (add_reports). */
#define STORE_REPORT_ROWS 32

/* ---- adding reports --------------------------------------------------- */

/* Whether a new pending report of `container_id` is its head: no other
 * of the container is pending. */
static int
head_free(struct store *st, const char *container_id, int64_t *head)
{
    static const char what[] = "add report";
    sqlite3_stmt *s = st->stmt[S_HEAD_FREE];
    int rc, result;

    result = sdb_bind_text(st, s, 1, container_id, strlen(container_id), what);
    if (result == STORE_OK) {
        rc = sqlite3_step(s);
        if (rc == SQLITE_ROW)
            *head = sqlite3_column_int64(s, 0);
        else
            result = sdb_fail(st, rc == SQLITE_DONE ? SQLITE_ERROR : rc, what);
    }
    sdb_done(s);
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
    int64_t seq = 0, head = 0;
    int result;

    result = store_last_seq(st, &seq);
    if (result == STORE_OK && ins == S_REPORT_INSERT)
        result = head_free(st, v->container_id, &head);
    if (result == STORE_OK)
        result =
            sdb_bind_text(st, s, 1, v->report_id, strlen(v->report_id), what);
    if (result == STORE_OK)
        result = sdb_bind_text(st, s, 2, v->container_id,
                               strlen(v->container_id), what);
    if (result == STORE_OK)
        result = sdb_bind_text(st, s, 3, v->body, v->len, what);
    if (result == STORE_OK)
        result = sdb_bind_int(st, s, 4, now_ms, what);
    if (result == STORE_OK)
        result = sdb_bind_int(st, s, 5, seq + 1, what);
    if (result == STORE_OK && ins == S_REPORT_INSERT)
        result = sdb_bind_int(st, s, 6, head, what);
    if (result != STORE_OK) {
        sdb_done(s);
        return result;
    }
    result = sdb_run(st, ins, what);
    if (result != STORE_OK)
        return result;
    /* Its id is taken: the same report, made again. */
    if (sqlite3_changes(st->db) == 0)
        return STORE_DUPLICATE;
    result = sdb_run(st, S_SEQ_BUMP, what);
    if (result == STORE_OK)
        sdb_count_moved(st, -1,
                        ins == S_REPORT_INSERT_DELIVERED ? STORE_DELIVERED
                                                         : STORE_PENDING,
                        1);
    return result;
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
        result = sdb_bind_text(st, s, 1, v[i].container_id,
                               strlen(v[i].container_id), "forget record");
        if (result != STORE_OK) {
            sdb_done(s);
            break;
        }
        result = sdb_run(st, S_CTR_DELETE, "forget record");
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
    result = sdb_bind_text(st, s, 1, st->rckpt_key, strlen(st->rckpt_key),
                           "reports checkpoint");
    if (result == STORE_OK)
        result = sdb_bind_int(st, s, 2, st->rckpt_value, "reports checkpoint");
    if (result != STORE_OK) {
        sdb_done(s);
        return result;
    }
    result = sdb_run(st, S_CKPT_SET, "reports checkpoint");
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

/*
 * store_add_reports, or with `delivered` reports delivered as they are
 * stored. The pending changes go in the same transaction, each report's
 * container record first: it is due before the report (a report must
 * never be on disk ahead of the steps that led to it), and one commit
 * costs less than two. Only STORE_REPORT_ROWS others, so that a report's
 * commit never waits for the thousands a burst of new containers leaves
 * pending; the rest go with the next flush.
 */
static int
add_reports(struct store *st, struct store_new_report *v, size_t n,
            int64_t now_ms, bool delivered)
{
    static const char what[] = "add report";
    enum stmt_id ins = delivered ? S_REPORT_INSERT_DELIVERED : S_REPORT_INSERT;
    struct pend_pick pk = {.all = false, .n = 0};
    const char *ids[STORE_REPORTS_MAX];
    size_t i, nids = 0, nstored = 0, nforgot = 0;
    int result;

    st->rckpt_written = false;
    if (n > STORE_REPORTS_MAX)
        return sdb_invalid(st, "add reports: too many at once");
    for (i = 0; i < n; i++) {
        struct pend *p;

        v[i].result = STORE_OK;
        v[i].forgotten = false;
        if (!sdb_valid_id(v[i].report_id, STORE_REPORT_ID_MAX) ||
            !sdb_valid_id(v[i].container_id, STORE_ID_MAX) ||
            !sdb_valid_body(v[i].body, v[i].len, STORE_BODY_MAX)) {
            v[i].result = sdb_invalid(st, what);
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
        result = sdb_set_full_sync(st, true, what);
        if (result != STORE_OK)
            return result;
    }
    result = sdb_begin(st, what);
    if (result == STORE_OK && st->npend > 0)
        result = pend_write(st, ids, nids, STORE_REPORT_ROWS, &pk);
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
        result = sdb_commit(st, what);
    if (result == STORE_OK && nstored + nforgot > 0)
        pend_written(st, &pk);
    forgotten_done(st, v, n, result == STORE_OK && nstored + nforgot > 0);
    if (result != STORE_OK)
        st->rckpt_written = false;
    sdb_rollback(st); /* nothing to undo once committed */
    /* Back to cheap commits; if that fails, FULL stays: slower, safe. */
    if (!st->journaled)
        sdb_set_full_sync(st, false, what);
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

/* ---- delivery outcomes ----------------------------------------------- */

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

/* Binds S_MARK_DELIVERED (reset again if that fails). */
static int
bind_delivered(struct store *st, const char *report_id, int64_t now_ms,
               const char *what)
{
    sqlite3_stmt *s = st->stmt[S_MARK_DELIVERED];
    int result = sdb_bind_text(st, s, 1, report_id, strlen(report_id), what);

    if (result == STORE_OK)
        result = sdb_bind_int(st, s, 2, now_ms, what);
    if (result != STORE_OK)
        sdb_done(s);
    return result;
}

/* An UPDATE of one pending report, bound by the caller: autocommit, one
 * statement, so it is its own transaction. */
static int
mark(struct store *st, enum stmt_id id, const char *what)
{
    int result = sdb_run(st, id, what);
    int64_t n;

    if (result != STORE_OK)
        return result;
    n = sqlite3_changes(st->db);
    if (id == S_MARK_DELIVERED)
        sdb_count_moved(st, STORE_PENDING, STORE_DELIVERED, n);
    else if (id == S_MARK_DEAD)
        sdb_count_moved(st, STORE_PENDING, STORE_DEAD, n);
    return n == 0 ? STORE_NOT_FOUND : STORE_OK;
}

int
store_mark_delivered(struct store *st, const char *report_id, int64_t now_ms)
{
    static const char what[] = "mark delivered";
    int result;

    if (!sdb_valid_id(report_id, STORE_REPORT_ID_MAX))
        return sdb_invalid(st, what);
    sdb_rollback(st);
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

    if (!sdb_valid_id(report_id, STORE_REPORT_ID_MAX) || name == NULL)
        return sdb_invalid(st, what);
    sdb_rollback(st);
    result = sdb_bind_text(st, s, 1, report_id, strlen(report_id), what);
    if (result == STORE_OK)
        result = sdb_bind_text(st, s, 2, error,
                               error != NULL ? errtext_len(error) : 0, what);
    /* Only the upstream's refusal was an attempt; the others were never
     * sent. */
    if (result == STORE_OK)
        result = sdb_bind_int(st, s, 3, reason == STORE_DEAD_REJECTED, what);
    if (result == STORE_OK)
        result = sdb_bind_text(st, s, 4, name, strlen(name), what);
    if (result != STORE_OK) {
        sdb_done(s);
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

    if (!sdb_valid_id(report_id, STORE_REPORT_ID_MAX))
        return sdb_invalid(st, what);
    sdb_rollback(st);
    result = sdb_bind_text(st, s, 1, report_id, strlen(report_id), what);
    if (result == STORE_OK)
        result = sdb_bind_int(st, s, 2, next_attempt_ms, what);
    if (result == STORE_OK)
        result = sdb_bind_text(st, s, 3, error,
                               error != NULL ? errtext_len(error) : 0, what);
    if (result != STORE_OK) {
        sdb_done(s);
        return result;
    }
    return mark(st, S_MARK_RETRY, what);
}

/* ---- an operator's requeue ------------------------------------------- */

int
store_requeue(struct store *st, const char *report_id, int64_t now_ms)
{
    static const char what[] = "requeue";
    sqlite3_stmt *s = st->stmt[S_REQUEUE_STATE];
    char cid[STORE_ID_MAX + 1];
    enum store_state state = STORE_PENDING;
    int result, rc;

    if (!sdb_valid_id(report_id, STORE_REPORT_ID_MAX))
        return sdb_invalid(st, what);
    result = sdb_begin(st, what);
    if (result != STORE_OK)
        goto out;
    result = sdb_bind_text(st, s, 1, report_id, strlen(report_id), what);
    if (result != STORE_OK) {
        sdb_done(s);
        goto out;
    }
    rc = sqlite3_step(s);
    if (rc == SQLITE_DONE) {
        result = STORE_NOT_FOUND;
    } else if (rc != SQLITE_ROW) {
        result = sdb_fail(st, rc, what);
    } else if (sdb_state_parse((const char *)sqlite3_column_text(s, 0),
                               &state) != 0 ||
               !sdb_column_id(s, 1, cid, sizeof(cid))) {
        snprintf(st->errmsg, sizeof(st->errmsg), "%s: malformed row", what);
        result = STORE_CORRUPT;
    } else if (state == STORE_DELIVERED) {
        result = STORE_CONFLICT;
    }
    sdb_done(s);
    if (result != STORE_OK)
        goto out;
    s = st->stmt[S_REQUEUE];
    result = sdb_bind_text(st, s, 1, report_id, strlen(report_id), what);
    if (result == STORE_OK)
        result = sdb_bind_int(st, s, 2, now_ms, what);
    if (result == STORE_OK)
        result = sdb_run(st, S_REQUEUE, what);
    else
        sdb_done(s);
    if (result != STORE_OK)
        goto out;
    if (state == STORE_DEAD)
        sdb_count_moved(st, STORE_DEAD, STORE_PENDING,
                        sqlite3_changes(st->db));
    s = st->stmt[S_HEADS_ONE];
    result = sdb_bind_text(st, s, 1, cid, strlen(cid), what);
    if (result == STORE_OK)
        result = sdb_run(st, S_HEADS_ONE, what);
    else
        sdb_done(s);
    if (result == STORE_OK)
        result = sdb_commit(st, what);
out:
    sdb_rollback(st); /* nothing to undo once committed */
    return result;
}

int
store_requeue_dead(struct store *st, int64_t now_ms, uint64_t *nrequeued)
{
    static const char what[] = "requeue dead letters";
    sqlite3_stmt *s = st->stmt[S_REQUEUE_DEAD];
    uint64_t n = 0;
    int result;

    result = sdb_begin(st, what);
    if (result != STORE_OK)
        goto out;
    result = sdb_bind_int(st, s, 1, now_ms, what);
    if (result == STORE_OK)
        result = sdb_run(st, S_REQUEUE_DEAD, what);
    else
        sdb_done(s);
    if (result != STORE_OK)
        goto out;
    n = (uint64_t)sqlite3_changes(st->db);
    sdb_count_moved(st, STORE_DEAD, STORE_PENDING, (int64_t)n);
    if (n > 0)
        result = sdb_run(st, S_HEADS_ALL, what);
    if (result == STORE_OK)
        result = sdb_commit(st, what);
out:
    sdb_rollback(st);
    if (nrequeued != NULL)
        *nrequeued = result == STORE_OK ? n : 0;
    return result;
}

/* ---- retention ------------------------------------------------------- */

/* One of the two prune statements, bound to (arg, what is left of the
 * batch); adds what it deleted to *n. */
static int
prune_step(struct store *st, enum stmt_id id, int64_t arg, uint64_t *n)
{
    sqlite3_stmt *s = st->stmt[id];
    int result;

    result = sdb_bind_int(st, s, 1, arg, "prune");
    if (result == STORE_OK)
        result =
            sdb_bind_int(st, s, 2, (int64_t)(STORE_PRUNE_BATCH - *n), "prune");
    if (result != STORE_OK) {
        sdb_done(s);
        return result;
    }
    result = sdb_run(st, id, "prune");
    if (result == STORE_OK) {
        *n += (uint64_t)sqlite3_changes(st->db);
        sdb_count_moved(st, STORE_DELIVERED, -1, sqlite3_changes(st->db));
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
    result = sdb_begin(st, "prune");
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
    result = sdb_commit(st, "prune");
    if (result == STORE_OK && ndeleted != NULL)
        *ndeleted = n;
out:
    sdb_rollback(st);
    return result;
}
