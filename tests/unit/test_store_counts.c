/*
 * test_store_counts — what store_counts says without a scan
 * (agent/store_counts.c): the oldest pending report, the size, the
 * report counts as every kind of change moves them (and a failed one
 * does not), and the answer while the WAL's copy holds the connection;
 * store_check holds them against the table.
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

/* The oldest pending report's time (for the metric of how far behind
 * delivery is): by its creation, whatever else is delivered or dead. */
static void
t_oldest_pending(void **state)
{
    struct sfx *f = *state;
    struct store_counts c;

    assert_int_equal(store_counts(f->st, &c), STORE_OK);
    assert_int_equal(c.oldest_pending_ms, 0);
    assert_int_equal(sfx_add(f->st, 1, 1, 100), STORE_OK);
    assert_int_equal(sfx_add(f->st, 2, 2, 200), STORE_OK);
    assert_int_equal(sfx_add(f->st, 3, 1, 300), STORE_OK);
    assert_int_equal(store_counts(f->st, &c), STORE_OK);
    assert_int_equal(c.oldest_pending_ms, 100);
    assert_int_equal(sfx_mark_delivered(f->st, 1, 400), STORE_OK);
    assert_int_equal(store_counts(f->st, &c), STORE_OK);
    assert_int_equal(c.oldest_pending_ms, 200);
    assert_int_equal(sfx_mark_dead(f->st, 2, "HTTP 422: no"), STORE_OK);
    assert_int_equal(store_counts(f->st, &c), STORE_OK);
    assert_int_equal(c.oldest_pending_ms, 300);
    assert_int_equal(sfx_mark_delivered(f->st, 3, 500), STORE_OK);
    assert_int_equal(store_counts(f->st, &c), STORE_OK);
    assert_int_equal(c.oldest_pending_ms, 0);
    assert_int_equal(c.pending, 0);
}

static void
t_counts_and_size(void **state)
{
    struct sfx *f = *state;
    struct store_counts c;
    char id[STORE_REPORT_ID_MAX + 1], ctr[STORE_ID_MAX + 1];
    static char body[20000];
    uint64_t before;
    unsigned i;

    assert_int_equal(store_counts(f->st, &c), STORE_OK);
    assert_int_equal(c.pending + c.delivered + c.dead, 0);
    assert_true(c.db_bytes > 0);
    before = c.db_bytes;

    memset(body, 'x', sizeof(body));
    body[0] = '"';
    body[sizeof(body) - 1] = '"';
    tu_container_id(ctr, 1);
    for (i = 0; i < 20; i++) {
        tu_report_id(id, i);
        assert_int_equal(
            store_add_report(f->st, id, ctr, body, sizeof(body), i), STORE_OK);
    }
    for (i = 0; i < 5; i++)
        assert_int_equal(sfx_mark_delivered(f->st, i, 1), STORE_OK);
    for (i = 5; i < 8; i++)
        assert_int_equal(sfx_mark_dead(f->st, i, NULL), STORE_OK);
    assert_int_equal(store_counts(f->st, &c), STORE_OK);
    assert_int_equal(c.pending, 12);
    assert_int_equal(c.delivered, 5);
    assert_int_equal(c.dead, 3);
    assert_true(c.db_bytes >= before + 20 * sizeof(body));
    /* What the file itself says, through another connection. */
    assert_int_equal(c.db_bytes, sfx_raw_int(f->dir, "SELECT page_count *"
                                                     " page_size FROM"
                                                     " pragma_page_count(),"
                                                     " pragma_page_size()"));
}

/* The report counts store_counts gives without a scan follow every
 * change, a failed transaction's (nothing) included, and a reopening
 * counts the same: a model run of random changes, store_check (which
 * compares them with the table's) after each. */
static void
t_counts_follow_changes(void **state)
{
    struct sfx *f = *state;
    struct store_counts before, after;
    uint64_t n, eff;
    unsigned next = 1, i, seed = 12345, last_dead = 0;
    int rc;

    for (i = 0; i < 600; i++) {
        unsigned op, r, k;

        seed = seed * 1103515245u + 12345u;
        op = (seed >> 16) % 9;
        r = next > 1 ? 1 + (seed >> 8) % (next - 1) : 1;
        switch (op) {
        case 0:
        case 1:
            assert_int_equal(sfx_add(f->st, next, next % 7, 1000 + i),
                             STORE_OK);
            next++;
            break;
        case 2: {
            char id[STORE_REPORT_ID_MAX + 1], ctr[STORE_ID_MAX + 1];

            tu_report_id(id, next);
            tu_container_id(ctr, next % 7);
            assert_int_equal(
                store_add_delivered(f->st, id, ctr, "{}", 2, 1000 + i),
                STORE_OK);
            next++;
            break;
        }
        case 3:
            rc = sfx_add(f->st, r, r % 7,
                         1000 + i); /* an id taken: no change */
            assert_true(rc == STORE_DUPLICATE || rc == STORE_OK);
            break;
        case 4:
            rc = sfx_mark_delivered(f->st, r, 2000 + i);
            assert_true(rc == STORE_OK || rc == STORE_NOT_FOUND);
            break;
        case 5:
            rc = sfx_mark_dead(f->st, r, "no");
            assert_true(rc == STORE_OK || rc == STORE_NOT_FOUND);
            if (rc == STORE_OK)
                last_dead = r;
            break;
        case 6: {
            char id[STORE_REPORT_ID_MAX + 1];

            /* Half the time the last one marked dead: most are not. */
            tu_report_id(id, (seed >> 4) % 2 && last_dead ? last_dead : r);
            rc = (seed >> 4) % 8 == 0
                     ? store_requeue_dead(f->st, 3000 + i, NULL)
                     : store_requeue(f->st, id, 3000 + i);
            assert_true(rc == STORE_OK || rc == STORE_NOT_FOUND ||
                        rc == STORE_CONFLICT);
            break;
        }
        case 7:
            assert_int_equal(store_prune(f->st, 2000 + i, 400,
                                         (int64_t)((seed >> 3) % 6), &n),
                             STORE_OK);
            break;
        default: {
            /* A batch the full database refuses halfway: none of it is
             * counted. */
            struct store_new_report v[16];
            char ids[16][STORE_REPORT_ID_MAX + 1], ctr[STORE_ID_MAX + 1];
            static char body[3000];

            memset(body, 'x', sizeof(body));
            tu_container_id(ctr, 3);
            for (k = 0; k < 16; k++) {
                tu_report_id(ids[k], next + k);
                v[k] = (struct store_new_report){.report_id = ids[k],
                                                 .container_id = ctr,
                                                 .body = body,
                                                 .len = sizeof(body)};
            }
            assert_int_equal(store_counts(f->st, &before), STORE_OK);
            assert_int_equal(
                store_set_size_limit(f->st, before.db_bytes, &eff), STORE_OK);
            rc = store_add_reports(f->st, v, 16, 1000 + i, k % 2);
            assert_int_equal(store_set_size_limit(f->st, 0, NULL), STORE_OK);
            assert_int_not_equal(rc, STORE_OK);
            assert_int_equal(store_counts(f->st, &after), STORE_OK);
            assert_int_equal(after.pending, before.pending);
            assert_int_equal(after.delivered, before.delivered);
            next += 16; /* not stored: never reused either */
            break;
        }
        }
        if (store_check(f->st) != STORE_OK)
            fail_msg("step %u (op %u): %s", i, op, store_errmsg(f->st));
    }
    assert_int_equal(store_counts(f->st, &before), STORE_OK);
    /* One of each state at the end, whatever the run left. */
    assert_int_equal(sfx_add(f->st, next, 1, 5000), STORE_OK);
    assert_int_equal(sfx_mark_dead(f->st, next, "no"), STORE_OK);
    assert_int_equal(sfx_add(f->st, next + 1, 1, 5000), STORE_OK);
    assert_int_equal(sfx_add(f->st, next + 2, 2, 5000), STORE_OK);
    assert_int_equal(sfx_mark_delivered(f->st, next + 2, 5000), STORE_OK);
    assert_int_equal(store_check(f->st), STORE_OK);
    assert_int_equal(store_counts(f->st, &before), STORE_OK);
    assert_true(before.pending > 0 && before.delivered > 0 && before.dead > 0);
    sfx_reopen(f);
    assert_int_equal(store_counts(f->st, &after), STORE_OK);
    assert_int_equal(after.pending, before.pending);
    assert_int_equal(after.delivered, before.delivered);
    assert_int_equal(after.dead, before.dead);
}

int
main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, sfx_setup, sfx_teardown)
    const struct CMUnitTest tests[] = {
        T(t_oldest_pending),
        T(t_counts_and_size),
        T(t_counts_follow_changes),
    };
#undef T

    tu_test_filters();
    return cmocka_run_group_tests(tests, NULL, NULL);
}
