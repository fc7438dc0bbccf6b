/*
 * test_store_outbox — the outbox's writes (agent/store_outbox.c) on a real
 * reapd.db: reports added alone and in bursts, with the pending records
 * they carry along or forget; duplicates; delivery outcomes and the
 * reasons a report dies for; an operator's requeue; retention; the hook
 * that runs once a report is durable.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "store.h"
#include "store_fx.h"
#include "testutil.h"

/* Each reason a report can die for, as stored and listed; what the
 * operator's requeue (docs/runbook.md) does to it. */
static void
t_dead_reasons(void **state)
{
    struct sfx *f = *state;
    char id[STORE_REPORT_ID_MAX + 1];
    struct store_reports l;
    struct store_counts c;
    struct store_report r;

    assert_string_equal(store_dead_reason_name(STORE_DEAD_REJECTED),
                        "rejected");
    assert_string_equal(store_dead_reason_name(STORE_DEAD_TOO_LARGE),
                        "too_large");
    assert_string_equal(store_dead_reason_name(STORE_DEAD_INVALID), "invalid");
    assert_null(store_dead_reason_name(STORE_DEAD_NONE));
    assert_int_equal(sfx_add(f->st, 1, 1, 10), STORE_OK);
    assert_int_equal(sfx_add(f->st, 2, 2, 10), STORE_OK);
    assert_int_equal(sfx_add(f->st, 3, 3, 10), STORE_OK);
    assert_int_equal(sfx_add(f->st, 4, 4, 10), STORE_OK);
    assert_int_equal(sfx_mark_dead(f->st, 1, "HTTP 422: no"), STORE_OK);
    tu_report_id(id, 2);
    assert_int_equal(
        store_mark_dead_reason(f->st, id, STORE_DEAD_TOO_LARGE, "big"),
        STORE_OK);
    tu_report_id(id, 3);
    assert_int_equal(
        store_mark_dead_reason(f->st, id, STORE_DEAD_INVALID, NULL), STORE_OK);
    /* No reason is no dead letter; a dead one stays as it is. */
    tu_report_id(id, 4);
    assert_int_equal(store_mark_dead_reason(f->st, id, STORE_DEAD_NONE, "x"),
                     STORE_INVALID);
    tu_report_id(id, 3);
    assert_int_equal(
        store_mark_dead_reason(f->st, id, STORE_DEAD_REJECTED, "again"),
        STORE_NOT_FOUND);

    assert_int_equal(store_recent(f->st, 10, false, &l), STORE_OK);
    assert_int_equal(l.n, 4);
    assert_int_equal(l.v[0].state, STORE_PENDING); /* newest first */
    assert_int_equal(l.v[0].dead_reason, STORE_DEAD_NONE);
    assert_int_equal(l.v[1].dead_reason, STORE_DEAD_INVALID);
    assert_null(l.v[1].last_error);
    assert_int_equal(l.v[1].attempts, 0);
    assert_int_equal(l.v[2].dead_reason, STORE_DEAD_TOO_LARGE);
    assert_string_equal(l.v[2].last_error, "big");
    assert_int_equal(l.v[2].attempts, 0);
    assert_int_equal(l.v[3].dead_reason, STORE_DEAD_REJECTED);
    assert_string_equal(l.v[3].last_error, "HTTP 422: no");
    assert_int_equal(l.v[3].attempts, 1);
    store_reports_free(&l);
    assert_int_equal(store_counts(f->st, &c), STORE_OK);
    assert_int_equal(c.dead, 3);
    assert_int_equal(c.pending, 1);
    assert_int_equal(store_check(f->st), STORE_OK);

    /* The runbook's requeue, behind the store's back: the reason goes
     * with the state, and the invariants hold. */
    sfx_reopen(f);
    sfx_raw_exec(f->dir,
                 "BEGIN IMMEDIATE;"
                 "UPDATE reports SET state = 'pending', next_attempt_ms = 0,"
                 " last_error = NULL WHERE report_id ="
                 " '00000000000000000000000000000002' AND state = 'dead';"
                 "UPDATE reports SET head = coalesce(seq = (SELECT min(seq)"
                 " FROM reports AS r WHERE r.container_id ="
                 " reports.container_id AND r.state = 'pending'), 0)"
                 " WHERE container_id = (SELECT container_id FROM reports"
                 " WHERE report_id = '00000000000000000000000000000002');"
                 "COMMIT;");
    /* An operator does it with reapd stopped: its counts are made at the
     * opening. */
    sfx_reopen(f);
    assert_int_equal(sfx_get(f->st, 2, &r), STORE_OK);
    assert_int_equal(r.state, STORE_PENDING);
    assert_int_equal(r.dead_reason, STORE_DEAD_NONE);
    store_report_clear(&r);
    assert_int_equal(store_check(f->st), STORE_OK);
    /* A dead letter without a reason is caught. */
    sfx_raw_exec(f->dir,
                 "UPDATE reports SET dead_reason = NULL WHERE seq = 1");
    assert_int_equal(store_check(f->st), STORE_CORRUPT);
    assert_non_null(strstr(store_errmsg(f->st), "dead_reason"));
}

static void
t_duplicate(void **state)
{
    struct sfx *f = *state;
    struct store_report r;
    struct store_counts c;
    char id[STORE_REPORT_ID_MAX + 1], ctr[STORE_ID_MAX + 1];

    assert_int_equal(sfx_add(f->st, 7, 1, 100), STORE_OK);
    assert_int_equal(sfx_add(f->st, 7, 1, 200), STORE_DUPLICATE);
    /* Another body under the same id changes nothing either. */
    tu_report_id(id, 7);
    tu_container_id(ctr, 2);
    assert_int_equal(store_add_report(f->st, id, ctr, "{}", 2, 300),
                     STORE_DUPLICATE);
    assert_int_equal(sfx_get(f->st, 7, &r), STORE_OK);
    assert_non_null(strstr(r.body, "\"n\":7"));
    assert_int_equal(r.created_ms, 100);
    assert_int_equal(r.seq, 1);
    store_report_clear(&r);

    /* Delivered (or dead) does not let it in again; nor a reopen. */
    assert_int_equal(sfx_mark_delivered(f->st, 7, 400), STORE_OK);
    assert_int_equal(sfx_add(f->st, 7, 1, 500), STORE_DUPLICATE);
    sfx_reopen(f);
    assert_int_equal(sfx_add(f->st, 7, 1, 500), STORE_DUPLICATE);
    assert_int_equal(store_counts(f->st, &c), STORE_OK);
    assert_int_equal(c.pending + c.delivered + c.dead, 1);

    /* A refused duplicate did not use up a sequence number. */
    assert_int_equal(sfx_add(f->st, 8, 1, 600), STORE_OK);
    assert_int_equal(sfx_get(f->st, 8, &r), STORE_OK);
    assert_int_equal(r.seq, 2);
    store_report_clear(&r);
}

static void
t_transitions(void **state)
{
    struct sfx *f = *state;
    char longerr[STORE_ERRTEXT_MAX + 100];
    struct store_report r;
    size_t i;

    assert_int_equal(sfx_add(f->st, 1, 1, 100), STORE_OK);
    assert_int_equal(sfx_get(f->st, 1, &r), STORE_OK);
    assert_int_equal(r.state, STORE_PENDING);
    assert_int_equal(r.attempts, 0);
    assert_int_equal(r.next_attempt_ms, 100);
    assert_int_equal(r.created_ms, 100);
    assert_int_equal(r.delivered_ms, 0);
    assert_null(r.last_error);
    store_report_clear(&r);

    assert_int_equal(sfx_mark_retry(f->st, 1, 5000, "connect: refused"),
                     STORE_OK);
    assert_int_equal(sfx_mark_retry(f->st, 1, 9000, "HTTP 503"), STORE_OK);
    assert_int_equal(sfx_get(f->st, 1, &r), STORE_OK);
    assert_int_equal(r.state, STORE_PENDING);
    assert_int_equal(r.attempts, 2);
    assert_int_equal(r.next_attempt_ms, 9000);
    assert_string_equal(r.last_error, "HTTP 503");
    store_report_clear(&r);

    assert_int_equal(sfx_mark_delivered(f->st, 1, 9100), STORE_OK);
    assert_int_equal(sfx_get(f->st, 1, &r), STORE_OK);
    assert_int_equal(r.state, STORE_DELIVERED);
    assert_int_equal(r.attempts, 3);
    assert_int_equal(r.delivered_ms, 9100);
    assert_null(r.last_error);
    store_report_clear(&r);
    /* Delivered is final. */
    assert_int_equal(sfx_mark_delivered(f->st, 1, 9200), STORE_NOT_FOUND);
    assert_int_equal(sfx_mark_dead(f->st, 1, "x"), STORE_NOT_FOUND);
    assert_int_equal(sfx_mark_retry(f->st, 1, 1, "x"), STORE_NOT_FOUND);
    assert_int_equal(sfx_get(f->st, 1, &r), STORE_OK);
    assert_int_equal(r.attempts, 3);
    assert_int_equal(r.delivered_ms, 9100);
    store_report_clear(&r);

    /* Dead is final too, and keeps its reason. */
    assert_int_equal(sfx_add(f->st, 2, 1, 100), STORE_OK);
    assert_int_equal(sfx_mark_dead(f->st, 2, "HTTP 400: bad report"),
                     STORE_OK);
    assert_int_equal(sfx_mark_delivered(f->st, 2, 1), STORE_NOT_FOUND);
    assert_int_equal(sfx_mark_retry(f->st, 2, 1, "x"), STORE_NOT_FOUND);
    assert_int_equal(sfx_get(f->st, 2, &r), STORE_OK);
    assert_int_equal(r.state, STORE_DEAD);
    assert_int_equal(r.attempts, 1);
    assert_string_equal(r.last_error, "HTTP 400: bad report");
    assert_string_equal(store_state_name(r.state), "dead");
    store_report_clear(&r);

    /* Unknown ids. */
    assert_int_equal(sfx_mark_delivered(f->st, 99, 1), STORE_NOT_FOUND);
    assert_int_equal(sfx_mark_retry(f->st, 99, 1, NULL), STORE_NOT_FOUND);
    assert_int_equal(sfx_get(f->st, 99, &r), STORE_NOT_FOUND);

    /* A long error is cut, on a character boundary; NULL is no error. */
    assert_int_equal(sfx_add(f->st, 3, 1, 100), STORE_OK);
    for (i = 0; i + 1 < sizeof(longerr); i += 2) {
        longerr[i] = '\xc3'; /* 'é', two bytes, straddling the limit */
        longerr[i + 1] = '\xa9';
    }
    longerr[0] = 'x'; /* shift by one: the limit falls mid-character */
    longerr[sizeof(longerr) - 1] = '\0';
    assert_int_equal(sfx_mark_retry(f->st, 3, 200, longerr), STORE_OK);
    assert_int_equal(sfx_get(f->st, 3, &r), STORE_OK);
    assert_true(strlen(r.last_error) <= STORE_ERRTEXT_MAX);
    assert_true(strlen(r.last_error) >= STORE_ERRTEXT_MAX - 1);
    assert_int_equal(((unsigned char)r.last_error[strlen(r.last_error) - 1]),
                     0xa9);
    store_report_clear(&r);
    assert_int_equal(sfx_mark_retry(f->st, 3, 300, NULL), STORE_OK);
    assert_int_equal(sfx_get(f->st, 3, &r), STORE_OK);
    assert_null(r.last_error);
    store_report_clear(&r);
}

static void
t_retention(void **state)
{
    struct sfx *f = *state;
    struct store_counts c;
    struct store_report r;
    uint64_t n;
    unsigned i;

    /* 1..6 delivered at 100..600; 7, 8 pending; 9, 10 dead. */
    for (i = 1; i <= 10; i++)
        assert_int_equal(sfx_add(f->st, i, i, 10), STORE_OK);
    for (i = 1; i <= 6; i++)
        assert_int_equal(sfx_mark_delivered(f->st, i, i * 100), STORE_OK);
    assert_int_equal(sfx_mark_dead(f->st, 9, "x"), STORE_OK);
    assert_int_equal(sfx_mark_dead(f->st, 10, "x"), STORE_OK);

    assert_int_equal(store_prune(f->st, 1000, -1, -1, &n), STORE_OK);
    assert_int_equal(n, 0);
    /* By age: delivered before 1000 - 500. */
    assert_int_equal(store_prune(f->st, 1000, 500, -1, &n), STORE_OK);
    assert_int_equal(n, 4);
    for (i = 1; i <= 4; i++)
        assert_int_equal(sfx_get(f->st, i, &r), STORE_NOT_FOUND);
    /* By count: the newest one delivered stays. */
    assert_int_equal(store_prune(f->st, 1000, -1, 1, &n), STORE_OK);
    assert_int_equal(n, 1);
    assert_int_equal(sfx_get(f->st, 5, &r), STORE_NOT_FOUND);
    assert_int_equal(sfx_get(f->st, 6, &r), STORE_OK);
    store_report_clear(&r);
    assert_int_equal(store_prune(f->st, 1000, -1, 1, &n), STORE_OK);
    assert_int_equal(n, 0);
    /* Everything delivered, but never pending or dead. */
    assert_int_equal(store_prune(f->st, INT64_MAX, 0, 0, NULL), STORE_OK);
    assert_int_equal(store_counts(f->st, &c), STORE_OK);
    assert_int_equal(c.delivered, 0);
    assert_int_equal(c.pending, 2);
    assert_int_equal(c.dead, 2);
    assert_int_equal(store_prune(f->st, INT64_MIN, INT64_MAX, -1, &n),
                     STORE_OK); /* no overflow */
    assert_int_equal(n, 0);

    /* Batches: 2500 delivered, put there behind the store's back. */
    sfx_raw_exec(f->dir, "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL"
                         " SELECT i + 1 FROM n WHERE i < 2500)"
                         " INSERT INTO reports(report_id, container_id, seq,"
                         " body, state, next_attempt_ms, created_ms,"
                         " delivered_ms) SELECT 'x' || i, 'c', 100 + i, '{}',"
                         " 'delivered', 0, 0, i FROM n;"
                         "UPDATE meta SET value = 2600;");
    sfx_reopen(f); /* its counts are made at the opening */
    assert_int_equal(store_check(f->st), STORE_OK);
    assert_int_equal(store_prune(f->st, 5000, 0, -1, &n), STORE_OK);
    assert_int_equal(n, STORE_PRUNE_BATCH);
    assert_int_equal(sfx_raw_int(f->dir,
                                 "SELECT min(delivered_ms) FROM reports"
                                 " WHERE state = 'delivered'"),
                     STORE_PRUNE_BATCH + 1); /* oldest first */
    assert_int_equal(store_prune(f->st, 5000, -1, 0, &n), STORE_OK);
    assert_int_equal(n, STORE_PRUNE_BATCH);
    assert_int_equal(store_prune(f->st, 5000, 0, 0, &n), STORE_OK);
    assert_int_equal(n, 500);
    assert_int_equal(store_prune(f->st, 5000, 0, 0, &n), STORE_OK);
    assert_int_equal(n, 0);

    /* A pruned id is forgotten (store.h says so); its seq is not reused. */
    assert_int_equal(sfx_add(f->st, 1, 1, 2000), STORE_OK);
    assert_int_equal(sfx_get(f->st, 1, &r), STORE_OK);
    assert_int_equal(r.seq, 2601);
    store_report_clear(&r);
}

/* The operator's requeue: dead and pending reports go back to pending
 * with their attempts at 0 and the head where it belongs; a delivered
 * one is a conflict, an unknown one not found. */
static void
t_requeue(void **state)
{
    struct sfx *f = *state;
    char id[STORE_REPORT_ID_MAX + 1];
    struct store_reports due;
    struct store_counts c;
    struct store_report r;
    uint64_t n = 99;

    /* Container 1: reports 1 (dead), 2 (pending, the head now). */
    assert_int_equal(sfx_add(f->st, 1, 1, 10), STORE_OK);
    assert_int_equal(sfx_add(f->st, 2, 1, 10), STORE_OK);
    assert_int_equal(sfx_add(f->st, 3, 2, 10), STORE_OK);
    assert_int_equal(sfx_add(f->st, 4, 3, 10), STORE_OK);
    assert_int_equal(sfx_mark_retry(f->st, 1, 50, "HTTP 503"), STORE_OK);
    assert_int_equal(sfx_mark_dead(f->st, 1, "HTTP 422"), STORE_OK);
    assert_int_equal(sfx_mark_delivered(f->st, 3, 20), STORE_OK);
    assert_int_equal(sfx_mark_retry(f->st, 4, 1000000, "HTTP 500"), STORE_OK);

    tu_report_id(id, 1);
    assert_int_equal(store_requeue(f->st, id, 30), STORE_OK);
    assert_int_equal(sfx_get(f->st, 1, &r), STORE_OK);
    assert_int_equal(r.state, STORE_PENDING);
    assert_int_equal(r.attempts, 0);
    assert_int_equal(r.next_attempt_ms, 30);
    assert_null(r.last_error);
    assert_int_equal(r.dead_reason, STORE_DEAD_NONE);
    store_report_clear(&r);
    assert_int_equal(store_check(f->st), STORE_OK);
    /* Report 1 is its container's head again, and due: before 2. */
    assert_int_equal(store_due(f->st, 40, 10, &due), STORE_OK);
    assert_int_equal(due.n, 1);
    assert_int_equal(due.v[0].seq, 1);
    store_reports_free(&due);

    /* A pending report waiting for its retry is due now. */
    tu_report_id(id, 4);
    assert_int_equal(store_requeue(f->st, id, 40), STORE_OK);
    assert_int_equal(sfx_get(f->st, 4, &r), STORE_OK);
    assert_int_equal(r.attempts, 0);
    assert_int_equal(r.next_attempt_ms, 40);
    store_report_clear(&r);

    tu_report_id(id, 3);
    assert_int_equal(store_requeue(f->st, id, 40), STORE_CONFLICT);
    assert_string_equal(store_strerror(STORE_CONFLICT), "already delivered");
    tu_report_id(id, 77);
    assert_int_equal(store_requeue(f->st, id, 40), STORE_NOT_FOUND);
    assert_int_equal(store_requeue(f->st, "bad id", 40), STORE_INVALID);

    /* All dead letters at once; none is a count of 0. */
    assert_int_equal(sfx_mark_dead(f->st, 1, "HTTP 422"), STORE_OK);
    assert_int_equal(sfx_mark_dead(f->st, 4, "HTTP 400"), STORE_OK);
    assert_int_equal(store_counts(f->st, &c), STORE_OK);
    assert_int_equal(c.dead, 2);
    assert_int_equal(store_requeue_dead(f->st, 60, &n), STORE_OK);
    assert_int_equal(n, 2);
    assert_int_equal(store_counts(f->st, &c), STORE_OK);
    assert_int_equal(c.dead, 0);
    assert_int_equal(c.pending, 3);
    assert_int_equal(store_check(f->st), STORE_OK);
    assert_int_equal(store_due(f->st, 60, 10, &due), STORE_OK);
    assert_int_equal(due.n, 2); /* 1 (container 1's head) and 4 */
    assert_int_equal(due.v[0].seq, 1);
    assert_int_equal(due.v[1].seq, 4);
    store_reports_free(&due);
    assert_int_equal(store_requeue_dead(f->st, 70, &n), STORE_OK);
    assert_int_equal(n, 0);
    /* Kept across a reopen: it was committed. */
    sfx_reopen(f);
    assert_int_equal(store_counts(f->st, &c), STORE_OK);
    assert_int_equal(c.pending, 3);
    assert_int_equal(store_check(f->st), STORE_OK);
}

struct made {
    unsigned n;
    char report_id[STORE_REPORT_ID_MAX + 1];
    char container_id[STORE_ID_MAX + 1];
};

static void
on_made(const char *report_id, const char *container_id, void *arg)
{
    struct made *m = arg;

    m->n++;
    snprintf(m->report_id, sizeof(m->report_id), "%s", report_id);
    snprintf(m->container_id, sizeof(m->container_id), "%s", container_id);
}

/* Reports added together: one transaction, each with its container's
 * record however many others wait; a duplicate or an invalid one among
 * them is refused alone; the hook runs for each stored; a batch of
 * duplicates only commits nothing; more than STORE_REPORTS_MAX at once
 * is refused whole. */
static void
t_add_reports(void **state)
{
    struct sfx *f = *state;
    struct store_new_report v[STORE_REPORTS_MAX + 1];
    char ids[6][STORE_REPORT_ID_MAX + 1], ctrs[6][STORE_ID_MAX + 1];
    char ctr[STORE_ID_MAX + 1], sql[256];
    struct made m = {0};
    struct store_counts c;
    uint64_t commits;
    unsigned i;

    assert_int_equal(sfx_add(f->st, 1, 1, 5), STORE_OK); /* ids[1], below */
    for (i = 0; i < 300; i++) { /* others waiting: more than a slice */
        tu_container_id(ctr, 1000 + i);
        assert_int_equal(store_put_container(f->st, ctr, "{}", 2, 1),
                         STORE_OK);
    }
    memset(v, 0, sizeof(v));
    for (i = 0; i < 6; i++) {
        tu_report_id(ids[i], i);
        tu_container_id(ctrs[i], i);
        assert_int_equal(
            store_put_container(f->st, ctrs[i], "{\"s\":9}", 7, 2), STORE_OK);
        v[i].report_id = ids[i];
        v[i].container_id = ctrs[i];
        v[i].body = "{\"r\":1}";
        v[i].len = 7;
    }
    v[4].report_id = "not an id"; /* invalid */
    store_on_report(f->st, on_made, &m);
    commits = store_commits(f->st);
    assert_int_equal(store_add_reports(f->st, v, 6, 20, false), STORE_OK);
    assert_int_equal(store_commits(f->st), commits + 1);
    assert_int_equal(v[0].result, STORE_OK);
    assert_int_equal(v[1].result, STORE_DUPLICATE);
    assert_int_equal(v[2].result, STORE_OK);
    assert_int_equal(v[3].result, STORE_OK);
    assert_true(v[4].result < 0);
    assert_int_equal(v[5].result, STORE_OK);
    assert_int_equal(m.n, 4);
    assert_string_equal(m.report_id, ids[5]);
    assert_int_equal(store_counts(f->st, &c), STORE_OK);
    assert_int_equal(c.pending, 5);
    /* Each report's record is on disk with it (the invalid one's need
     * not be), the others a slice. */
    for (i = 0; i < 6; i++) {
        if (i == 4)
            continue;
        snprintf(sql, sizeof(sql),
                 "SELECT count(*) FROM containers WHERE id = '%s'", ctrs[i]);
        assert_int_equal(sfx_raw_int(f->dir, sql), 1);
    }
    assert_true(sfx_raw_int(f->dir, "SELECT count(*) FROM containers") <=
                6 + 32);
    /* Only duplicates: nothing committed, nothing called. */
    commits = store_commits(f->st);
    assert_int_equal(store_add_reports(f->st, v, 2, 30, true), STORE_OK);
    assert_int_equal(v[0].result, STORE_DUPLICATE);
    assert_int_equal(v[1].result, STORE_DUPLICATE);
    assert_int_equal(store_commits(f->st), commits);
    assert_int_equal(m.n, 4);
    /* Too many at once. */
    for (i = 0; i <= STORE_REPORTS_MAX; i++)
        v[i] = v[0];
    assert_true(store_add_reports(f->st, v, STORE_REPORTS_MAX + 1, 40, false) <
                0);
    store_on_report(f->st, NULL, NULL);
    assert_int_equal(store_check(f->st), STORE_OK);
}

/* The rows of container `id` on disk. */
static int
ctr_rows(struct sfx *f, const char *id)
{
    char sql[256];

    snprintf(sql, sizeof(sql),
             "SELECT count(*) FROM containers WHERE id = '%s'", id);
    return sfx_raw_int(f->dir, sql);
}

/* A report with `forget` deletes its container's record in its own
 * transaction: one commit for both, the record's pending change gone
 * with it (never written), a duplicate's record too; an invalid one's
 * record stays, and a refused transaction leaves the record and its
 * pending change as they were. */
static void
t_add_reports_forget(void **state)
{
    struct sfx *f = *state;
    struct store_new_report v[3];
    char ids[3][STORE_REPORT_ID_MAX + 1], ctrs[3][STORE_ID_MAX + 1];
    char ctr[STORE_ID_MAX + 1];
    struct store_counts c;
    uint64_t commits, w0;
    unsigned i;

    memset(v, 0, sizeof(v));
    for (i = 0; i < 3; i++) {
        tu_report_id(ids[i], 10 + i);
        tu_container_id(ctrs[i], 10 + i);
        assert_int_equal(store_put_container(f->st, ctrs[i], "{}", 2, 1),
                         STORE_OK);
        v[i].report_id = ids[i];
        v[i].container_id = ctrs[i];
        v[i].body = "{\"r\":1}";
        v[i].len = 7;
        v[i].forget = true;
    }
    assert_int_equal(store_flush(f->st), STORE_OK);
    /* Others waiting, more than a transaction takes: it writes the named
     * records and a slice, and the rest stay pending. */
    for (i = 0; i < 300; i++) {
        tu_container_id(ctr, 1000 + i);
        assert_int_equal(store_put_container(f->st, ctr, "{}", 2, 1),
                         STORE_OK);
    }
    /* Changed since: pending, and the transaction must not write it. */
    for (i = 0; i < 3; i++)
        assert_int_equal(
            store_put_container(f->st, ctrs[i], "{\"s\":9}", 7, 2), STORE_OK);
    v[2].report_id = "not an id"; /* invalid: its record stays */
    commits = store_commits(f->st);
    w0 = store_record_writes(f->st);
    assert_int_equal(store_add_reports(f->st, v, 3, 20, false), STORE_OK);
    assert_int_equal(store_commits(f->st), commits + 1);
    assert_int_equal(v[0].result, STORE_OK);
    assert_true(v[0].forgotten);
    assert_int_equal(v[1].result, STORE_OK);
    assert_true(v[1].forgotten);
    assert_true(v[2].result < 0);
    assert_false(v[2].forgotten);
    assert_int_equal(ctr_rows(f, ctrs[0]), 0);
    assert_int_equal(ctr_rows(f, ctrs[1]), 0);
    /* The two deletes, the invalid one's record (a named one) and a
     * slice of the others; what stays pending is none of the two. */
    assert_true(store_record_writes(f->st) >= w0 + 3);
    assert_true(store_pending(f->st) > 0);
    assert_int_equal(ctr_rows(f, ctrs[2]), 1);
    assert_int_equal(store_flush(f->st), STORE_OK);
    assert_int_equal(ctr_rows(f, ctrs[0]), 0);
    assert_int_equal(ctr_rows(f, ctrs[1]), 0);

    /* A duplicate: nothing stored, its record forgotten all the same, in
     * a commit of its own. */
    assert_int_equal(store_put_container(f->st, ctrs[0], "{}", 2, 3),
                     STORE_OK);
    assert_int_equal(store_flush(f->st), STORE_OK);
    assert_int_equal(ctr_rows(f, ctrs[0]), 1);
    commits = store_commits(f->st);
    assert_int_equal(store_add_reports(f->st, v, 1, 30, false), STORE_OK);
    assert_int_equal(v[0].result, STORE_DUPLICATE);
    assert_true(v[0].forgotten);
    assert_int_equal(store_commits(f->st), commits + 1);
    assert_int_equal(ctr_rows(f, ctrs[0]), 0);
    /* Without `forget`, a duplicate commits nothing. */
    assert_int_equal(store_put_container(f->st, ctrs[0], "{}", 2, 4),
                     STORE_OK);
    assert_int_equal(store_flush(f->st), STORE_OK);
    v[0].forget = false;
    commits = store_commits(f->st);
    assert_int_equal(store_add_reports(f->st, v, 1, 40, false), STORE_OK);
    assert_false(v[0].forgotten);
    assert_int_equal(store_commits(f->st), commits);
    assert_int_equal(ctr_rows(f, ctrs[0]), 1);

    /* Refused: the record and its pending change stay, written later. */
    tu_report_id(ids[0], 20);
    v[0].forget = true;
    assert_int_equal(store_put_container(f->st, ctrs[0], "{\"s\":5}", 7, 5),
                     STORE_OK);
    sfx_refuse_deletes(f, true);
    assert_true(store_add_reports(f->st, v, 1, 50, false) < 0);
    assert_false(v[0].forgotten);
    sfx_refuse_deletes(f, false);
    assert_int_equal(store_pending(f->st), 1);
    assert_int_equal(store_counts(f->st, &c), STORE_OK);
    assert_int_equal(store_flush(f->st), STORE_OK);
    assert_int_equal(sfx_raw_int(f->dir,
                                 "SELECT count(*) FROM containers WHERE "
                                 "record = '{\"s\":5}'"),
                     1);
    assert_int_equal(store_check(f->st), STORE_OK);
}

/* store_set_reports_checkpoint: the checkpoint goes in the next
 * store_add_reports' transaction, only when every report of it is stored
 * (or was already), and a pending older value of it goes with it; the
 * next call without it writes none. */
static void
t_reports_checkpoint(void **state)
{
    struct sfx *f = *state;
    struct store_new_report v[2];
    char ids[4][STORE_REPORT_ID_MAX + 1], ctr[STORE_ID_MAX + 1];
    uint64_t commits;
    int64_t got = 0;
    unsigned i;

    for (i = 0; i < 4; i++)
        tu_report_id(ids[i], 40 + i);
    tu_container_id(ctr, 40);
    memset(v, 0, sizeof(v));
    for (i = 0; i < 2; i++) {
        v[i].report_id = ids[i];
        v[i].container_id = ctr;
        v[i].body = "{}";
        v[i].len = 2;
    }
    /* An older value waits to be flushed: it goes with the new one. */
    assert_int_equal(store_set_checkpoint(f->st, "j", 10), STORE_OK);
    assert_int_equal(store_pending(f->st), 1);
    commits = store_commits(f->st);
    store_set_reports_checkpoint(f->st, "j", 100);
    assert_int_equal(store_add_reports(f->st, v, 2, 1, false), STORE_OK);
    assert_true(store_reports_checkpoint_written(f->st));
    assert_int_equal(store_commits(f->st), commits + 1);
    assert_int_equal(store_get_checkpoint(f->st, "j", &got), STORE_OK);
    assert_int_equal(got, 100);
    assert_int_equal(store_pending(f->st), 0);
    assert_int_equal(store_flush(f->st), STORE_OK);
    assert_int_equal(store_get_checkpoint(f->st, "j", &got), STORE_OK);
    assert_int_equal(got, 100);

    /* The next call, without it: no checkpoint. */
    v[0].report_id = ids[2];
    assert_int_equal(store_add_reports(f->st, v, 1, 2, false), STORE_OK);
    assert_false(store_reports_checkpoint_written(f->st));
    assert_int_equal(store_get_checkpoint(f->st, "j", &got), STORE_OK);
    assert_int_equal(got, 100);

    /* One of them refused: not written; a pending value stays pending. */
    assert_int_equal(store_set_checkpoint(f->st, "j", 150), STORE_OK);
    v[0].report_id = ids[3];
    v[1].report_id = "not an id";
    store_set_reports_checkpoint(f->st, "j", 200);
    assert_int_equal(store_add_reports(f->st, v, 2, 3, false), STORE_OK);
    assert_int_equal(v[0].result, STORE_OK);
    assert_false(store_reports_checkpoint_written(f->st));
    assert_int_equal(store_get_checkpoint(f->st, "j", &got), STORE_OK);
    assert_true(got == 100 || got == 150);
    assert_int_equal(store_flush(f->st), STORE_OK);
    assert_int_equal(store_get_checkpoint(f->st, "j", &got), STORE_OK);
    assert_int_equal(got, 150);

    /* Only duplicates: nothing stored, nothing committed, not written. */
    v[1] = v[0];
    store_set_reports_checkpoint(f->st, "j", 300);
    commits = store_commits(f->st);
    assert_int_equal(store_add_reports(f->st, v, 2, 4, false), STORE_OK);
    assert_false(store_reports_checkpoint_written(f->st));
    assert_int_equal(store_commits(f->st), commits);
    assert_int_equal(store_get_checkpoint(f->st, "j", &got), STORE_OK);
    assert_int_equal(got, 150);
    assert_int_equal(store_check(f->st), STORE_OK);
}

/* The hook runs once per report made durable, never for a duplicate or
 * a failed add. */
static void
t_report_hook(void **state)
{
    struct sfx *f = *state;
    char id[STORE_REPORT_ID_MAX + 1], ctr[STORE_ID_MAX + 1];
    struct made m = {0};
    uint64_t eff;

    store_on_report(f->st, on_made, &m);
    assert_int_equal(sfx_add(f->st, 1, 5, 10), STORE_OK);
    assert_int_equal(m.n, 1);
    tu_report_id(id, 1);
    tu_container_id(ctr, 5);
    assert_string_equal(m.report_id, id);
    assert_string_equal(m.container_id, ctr);
    assert_int_equal(sfx_add(f->st, 1, 5, 10), STORE_DUPLICATE);
    assert_int_equal(m.n, 1);
    assert_int_equal(store_add_delivered(f->st, "r2", ctr, "{}", 2, 10),
                     STORE_OK);
    assert_int_equal(m.n, 2);
    assert_string_equal(m.report_id, "r2");
    /* A full store: no report, no call. */
    assert_int_equal(store_set_size_limit(f->st, 1, &eff), STORE_OK);
    for (unsigned i = 10; i < 200; i++)
        if (sfx_add(f->st, i, i, 10) != STORE_OK)
            break;
    assert_int_equal(store_set_size_limit(f->st, 0, NULL), STORE_OK);
    {
        unsigned before = m.n;
        struct store_counts c;

        assert_int_equal(store_counts(f->st, &c), STORE_OK);
        assert_int_equal(c.pending + c.delivered, before);
    }
    store_on_report(f->st, NULL, NULL);
    assert_int_equal(sfx_add(f->st, 300, 5, 10), STORE_OK);
}

/* A report's transaction takes its container's record and a bounded
 * slice of what else waits, not everything. */
static void
t_report_carries_some(void **state)
{
    struct sfx *f = *state;
    char id[STORE_REPORT_ID_MAX + 1], ctr[STORE_ID_MAX + 1], sql[256];
    unsigned i;

    for (i = 0; i < 200; i++) {
        tu_container_id(ctr, i);
        assert_int_equal(store_put_container(f->st, ctr, "{}", 2, i),
                         STORE_OK);
    }
    tu_report_id(id, 1);
    tu_container_id(ctr, 150);
    assert_int_equal(store_add_report(f->st, id, ctr, "{}", 2, 20), STORE_OK);
    assert_int_equal(sfx_raw_int(f->dir, "SELECT count(*) FROM containers"),
                     32);
    snprintf(sql, sizeof(sql),
             "SELECT count(*) FROM containers WHERE id = '%s'", ctr);
    assert_int_equal(sfx_raw_int(f->dir, sql), 1);
    assert_int_equal(store_pending(f->st), 168);
    assert_int_equal(store_flush(f->st), STORE_OK);
    assert_int_equal(sfx_raw_int(f->dir, "SELECT count(*) FROM containers"),
                     200);
}

/* Added as delivered in one transaction: delivered at once, the head of
 * its container moves on as for a mark (store_check agrees), a duplicate
 * is refused either way. */
static void
t_add_delivered(void **state)
{
    struct sfx *f = *state;
    struct store_report r;
    struct store_counts c;
    char id[STORE_REPORT_ID_MAX + 1], ctr[STORE_ID_MAX + 1];

    tu_report_id(id, 1);
    tu_container_id(ctr, 1);
    assert_int_equal(store_add_delivered(f->st, id, ctr, "{\"n\":1}", 7, 50),
                     STORE_OK);
    assert_int_equal(store_get_report(f->st, id, false, &r), STORE_OK);
    assert_int_equal(r.state, STORE_DELIVERED);
    assert_int_equal(r.delivered_ms, 50);
    assert_int_equal(r.seq, 1);
    assert_int_equal(r.attempts, 1);
    store_report_clear(&r);
    assert_int_equal(store_add_delivered(f->st, id, ctr, "{}", 2, 60),
                     STORE_DUPLICATE);
    assert_int_equal(store_add_report(f->st, id, ctr, "{}", 2, 60),
                     STORE_DUPLICATE);
    /* A pending report of the same container after it, and one before a
     * delivered one: heads stay right. */
    assert_int_equal(sfx_add(f->st, 2, 1, 70), STORE_OK);
    tu_report_id(id, 3);
    assert_int_equal(store_add_delivered(f->st, id, ctr, "{\"n\":3}", 7, 80),
                     STORE_OK);
    assert_int_equal(store_check(f->st), STORE_OK);
    assert_int_equal(store_counts(f->st, &c), STORE_OK);
    assert_int_equal(c.delivered, 2);
    assert_int_equal(c.pending, 1);
    sfx_reopen(f);
    assert_int_equal(store_check(f->st), STORE_OK);
}

/* Records waiting for the group commit go with a report, in its one
 * transaction (a report is never on disk ahead of the steps before it);
 * a report refused as a duplicate leaves them waiting. */
static void
t_report_carries_pending(void **state)
{
    struct sfx *f = *state;
    struct store_containers all;
    char id[STORE_REPORT_ID_MAX + 1], ctr[STORE_ID_MAX + 1];
    uint64_t commits;
    size_t i;

    tu_report_id(id, 1);
    tu_container_id(ctr, 1);
    assert_int_equal(store_put_container(f->st, ctr, "{\"s\":1}", 7, 10),
                     STORE_OK);
    assert_int_equal(store_set_checkpoint(f->st, "docker.events", 42),
                     STORE_OK);
    assert_int_equal(store_pending(f->st), 2);
    commits = store_commits(f->st);
    assert_int_equal(store_add_delivered(f->st, id, ctr, "{}", 2, 20),
                     STORE_OK);
    assert_int_equal(store_commits(f->st), commits + 1);
    assert_int_equal(store_pending(f->st), 0);
    for (i = 0; i < 2; i++) {
        int64_t v = 0;

        if (i == 1)
            sfx_reopen(f);
        assert_int_equal(store_get_containers(f->st, &all), STORE_OK);
        assert_int_equal(all.n, 1);
        assert_string_equal(all.v[0].json, "{\"s\":1}");
        store_containers_free(&all);
        assert_int_equal(store_get_checkpoint(f->st, "docker.events", &v),
                         STORE_OK);
        assert_int_equal(v, 42);
    }

    /* A duplicate commits nothing: the record waits for its flush. */
    assert_int_equal(store_put_container(f->st, ctr, "{\"s\":2}", 7, 30),
                     STORE_OK);
    assert_int_equal(store_add_report(f->st, id, ctr, "{}", 2, 40),
                     STORE_DUPLICATE);
    assert_int_equal(store_pending(f->st), 1);
    assert_int_equal(store_flush(f->st), STORE_OK);
    assert_int_equal(store_get_containers(f->st, &all), STORE_OK);
    assert_string_equal(all.v[0].json, "{\"s\":2}");
    store_containers_free(&all);
    assert_int_equal(store_check(f->st), STORE_OK);
}

int
main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, sfx_setup, sfx_teardown)
    const struct CMUnitTest tests[] = {
        T(t_duplicate),
        T(t_dead_reasons),
        T(t_add_delivered),
        T(t_report_carries_pending),
        T(t_transitions),
        T(t_retention),
        T(t_requeue),
        T(t_report_hook),
        T(t_report_carries_some),
        T(t_add_reports),
        T(t_add_reports_forget),
        T(t_reports_checkpoint),
    };
#undef T

    tu_test_filters();
    return cmocka_run_group_tests(tests, NULL, NULL);
}
