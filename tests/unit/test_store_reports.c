/*
 * test_store_reports — reading the outbox (agent/store_reports.c): the
 * reports due for delivery, against a model of many containers at random;
 * the most recent; the cursor by seq, container and state.
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

static void
t_due_order(void **state)
{
    struct sfx *f = *state;
    char due[256];

    /* seq: A1=1 B1=2 A2=3 C1=4 B2=5 A3=6 (containers A=1 B=2 C=3). */
    assert_int_equal(sfx_add(f->st, 11, 1, 1000), STORE_OK);
    assert_int_equal(sfx_add(f->st, 21, 2, 1001), STORE_OK);
    assert_int_equal(sfx_add(f->st, 12, 1, 1002), STORE_OK);
    assert_int_equal(sfx_add(f->st, 31, 3, 1003), STORE_OK);
    assert_int_equal(sfx_add(f->st, 22, 2, 1004), STORE_OK);
    assert_int_equal(sfx_add(f->st, 13, 1, 1005), STORE_OK);

    /* Only the head of each container's queue, oldest first. */
    sfx_due_str(f->st, 2000, 100, due, sizeof(due));
    assert_string_equal(due, "11,21,31");
    /* A report is due once now reaches its creation time. */
    sfx_due_str(f->st, 1000, 100, due, sizeof(due));
    assert_string_equal(due, "11");
    sfx_due_str(f->st, 999, 100, due, sizeof(due));
    assert_string_equal(due, "");
    sfx_due_str(f->st, 2000, 2, due, sizeof(due));
    assert_string_equal(due, "11,21");
    sfx_due_str(f->st, 2000, 0, due, sizeof(due));
    assert_string_equal(due, "");

    assert_int_equal(sfx_mark_delivered(f->st, 11, 2000), STORE_OK);
    sfx_due_str(f->st, 2000, 100, due, sizeof(due));
    assert_string_equal(due, "21,12,31");

    /* A head waiting for its retry holds its container's queue. */
    assert_int_equal(sfx_mark_retry(f->st, 21, 3000, "503"), STORE_OK);
    sfx_due_str(f->st, 2000, 100, due, sizeof(due));
    assert_string_equal(due, "12,31");
    sfx_due_str(f->st, 3000, 100, due, sizeof(due));
    assert_string_equal(due, "21,12,31");

    /* The head flags are checked, and a wrong one is caught. */
    assert_int_equal(store_check(f->st), STORE_OK);
    sfx_raw_exec(f->dir, "UPDATE reports SET head = 1 WHERE report_id = '"
                         "00000000000000000000000000000016'");
    assert_int_equal(store_check(f->st), STORE_CORRUPT);
    assert_non_null(strstr(store_errmsg(f->st), "head"));
    sfx_raw_exec(f->dir, "UPDATE reports SET head = 0 WHERE report_id = '"
                         "00000000000000000000000000000016'");
    assert_int_equal(store_check(f->st), STORE_OK);

    /* Dead lets the next one through. */
    assert_int_equal(sfx_mark_dead(f->st, 21, "400 bad request"), STORE_OK);
    sfx_due_str(f->st, 3000, 100, due, sizeof(due));
    assert_string_equal(due, "12,31,22");

    /* Survives a reopen, as the daemon finds it after a restart. */
    sfx_reopen(f);
    sfx_due_str(f->st, 3000, 100, due, sizeof(due));
    assert_string_equal(due, "12,31,22");
    assert_int_equal(sfx_mark_delivered(f->st, 12, 3000), STORE_OK);
    assert_int_equal(sfx_mark_delivered(f->st, 31, 3000), STORE_OK);
    assert_int_equal(sfx_mark_delivered(f->st, 22, 3000), STORE_OK);
    sfx_due_str(f->st, 3000, 100, due, sizeof(due));
    assert_string_equal(due, "13");
    assert_int_equal(sfx_mark_delivered(f->st, 13, 3000), STORE_OK);
    sfx_due_str(f->st, INT64_MAX, 100, due, sizeof(due));
    assert_string_equal(due, "");
}

/* Many containers, interleaved at random: the due list always holds
 * exactly the oldest pending report of each container whose turn it is,
 * checked against a model. */
static void
t_due_model(void **state)
{
    enum { NC = 23, NR = 600 };
    struct sfx *f = *state;
    static unsigned ctr_of[NR];
    static int st_of[NR]; /* 0 pending, 1 delivered, 2 dead */
    static int64_t next_of[NR];
    unsigned seed = 12345, i, round;
    struct store_reports l;

    for (i = 0; i < NR; i++) {
        seed = seed * 1103515245u + 12345u;
        ctr_of[i] = (seed >> 16) % NC;
        next_of[i] = 0;
        assert_int_equal(sfx_add(f->st, i, ctr_of[i], 0), STORE_OK);
    }
    for (round = 0; round < 200; round++) {
        int64_t now = round;
        bool head_seen[NC] = {false};
        size_t k = 0;

        assert_int_equal(store_due(f->st, now, STORE_LIST_MAX, &l), STORE_OK);
        /* The model: walk in seq order; each container's first pending
         * report is its head; it is due if its time has come. */
        for (i = 0; i < NR; i++) {
            if (st_of[i] != 0 || head_seen[ctr_of[i]])
                continue;
            head_seen[ctr_of[i]] = true;
            if (next_of[i] > now)
                continue;
            assert_true(k < l.n);
            assert_int_equal(strtoul(l.v[k].report_id, NULL, 16), i);
            k++;
        }
        assert_int_equal(k, l.n);
        if (round % 20 == 0) /* the head flags, checked the long way */
            assert_int_equal(store_check(f->st), STORE_OK);
        /* Deliver, kill or postpone each due report at random. */
        for (k = 0; k < l.n; k++) {
            unsigned n = (unsigned)strtoul(l.v[k].report_id, NULL, 16);

            seed = seed * 1103515245u + 12345u;
            switch ((seed >> 16) % 4) {
            case 0:
                assert_int_equal(sfx_mark_delivered(f->st, n, now), STORE_OK);
                st_of[n] = 1;
                break;
            case 1:
                assert_int_equal(sfx_mark_dead(f->st, n, "x"), STORE_OK);
                st_of[n] = 2;
                break;
            default:
                next_of[n] = now + 1 + (seed >> 20) % 5;
                assert_int_equal(sfx_mark_retry(f->st, n, next_of[n], "y"),
                                 STORE_OK);
                break;
            }
        }
        store_reports_free(&l);
    }
}

static void
t_recent(void **state)
{
    struct sfx *f = *state;
    struct store_reports l;
    unsigned i;

    assert_int_equal(store_recent(f->st, 10, true, &l), STORE_OK);
    assert_int_equal(l.n, 0);
    store_reports_free(&l);
    for (i = 1; i <= 8; i++)
        assert_int_equal(sfx_add(f->st, i, i % 3, i), STORE_OK);
    assert_int_equal(sfx_mark_delivered(f->st, 8, 100), STORE_OK);
    assert_int_equal(sfx_mark_dead(f->st, 7, "gone"), STORE_OK);

    assert_int_equal(store_recent(f->st, 3, false, &l), STORE_OK);
    assert_int_equal(l.n, 3);
    assert_int_equal(strtoul(l.v[0].report_id, NULL, 16), 8);
    assert_int_equal(l.v[0].state, STORE_DELIVERED);
    assert_int_equal(l.v[0].delivered_ms, 100);
    assert_int_equal(strtoul(l.v[1].report_id, NULL, 16), 7);
    assert_int_equal(l.v[1].state, STORE_DEAD);
    assert_string_equal(l.v[1].last_error, "gone");
    assert_int_equal(strtoul(l.v[2].report_id, NULL, 16), 6);
    assert_int_equal(l.v[2].state, STORE_PENDING);
    assert_null(l.v[0].body);
    store_reports_free(&l);
    assert_null(l.v);

    assert_int_equal(store_recent(f->st, 100, true, &l), STORE_OK);
    assert_int_equal(l.n, 8);
    assert_non_null(strstr(l.v[7].body, "\"n\":1}"));
    assert_int_equal(l.v[7].body_len, strlen(l.v[7].body));
    assert_int_equal(l.v[7].seq, 1);
    store_reports_free(&l);
}

/* The cursor: after a seq, oldest first, by container and by state;
 * the latest report of a container with its body. */
static void
t_after(void **state)
{
    struct sfx *f = *state;
    struct store_query q = {.after = 0, .max = 100, .state = -1};
    char ctr[STORE_ID_MAX + 1];
    struct store_reports l;
    struct store_report r;
    unsigned i;

    for (i = 1; i <= 9; i++)
        assert_int_equal(sfx_add(f->st, i, i % 3, i), STORE_OK);
    assert_int_equal(sfx_mark_delivered(f->st, 3, 100), STORE_OK);
    assert_int_equal(sfx_mark_dead(f->st, 6, "no"), STORE_OK);

    assert_int_equal(store_after(f->st, &q, &l), STORE_OK);
    assert_int_equal(l.n, 9);
    for (i = 0; i < 9; i++)
        assert_int_equal(l.v[i].seq, i + 1);
    assert_null(l.v[0].body);
    store_reports_free(&l);

    q.after = 4;
    q.max = 2;
    q.with_body = true;
    assert_int_equal(store_after(f->st, &q, &l), STORE_OK);
    assert_int_equal(l.n, 2);
    assert_int_equal(l.v[0].seq, 5);
    assert_int_equal(l.v[1].seq, 6);
    assert_non_null(l.v[0].body);
    store_reports_free(&l);

    /* Reports 3, 6 and 9 are container 0's. */
    tu_container_id(ctr, 0);
    q.after = 0;
    q.max = 100;
    q.container_id = ctr;
    assert_int_equal(store_after(f->st, &q, &l), STORE_OK);
    assert_int_equal(l.n, 3);
    assert_int_equal(l.v[0].seq, 3);
    assert_int_equal(l.v[2].seq, 9);
    store_reports_free(&l);
    q.state = STORE_DEAD;
    assert_int_equal(store_after(f->st, &q, &l), STORE_OK);
    assert_int_equal(l.n, 1);
    assert_int_equal(l.v[0].seq, 6);
    store_reports_free(&l);
    q.container_id = NULL;
    q.state = STORE_PENDING;
    assert_int_equal(store_after(f->st, &q, &l), STORE_OK);
    assert_int_equal(l.n, 7);
    store_reports_free(&l);
    /* The statement keeps no filter of the last call. */
    q.state = -1;
    q.after = 8;
    assert_int_equal(store_after(f->st, &q, &l), STORE_OK);
    assert_int_equal(l.n, 1);
    store_reports_free(&l);

    /* Newest first, from the top (a filter without a cursor). */
    q.after = 0;
    q.max = 2;
    q.newest_first = true;
    q.state = STORE_PENDING;
    assert_int_equal(store_after(f->st, &q, &l), STORE_OK);
    assert_int_equal(l.n, 2);
    assert_int_equal(l.v[0].seq, 9);
    assert_int_equal(l.v[1].seq, 8);
    store_reports_free(&l);
    q.newest_first = false;
    q.state = -1;
    {
        int64_t last = -1;

        assert_int_equal(store_last_seq(f->st, &last), STORE_OK);
        assert_int_equal(last, 9);
    }

    q.after = -1;
    assert_int_equal(store_after(f->st, &q, &l), STORE_INVALID);
    q.after = 0;
    q.max = STORE_LIST_MAX + 1;
    assert_int_equal(store_after(f->st, &q, &l), STORE_INVALID);
    q.max = 1;
    q.container_id = "bad id";
    assert_int_equal(store_after(f->st, &q, &l), STORE_INVALID);
    assert_int_equal(l.n, 0);

    assert_int_equal(store_latest_report_body(f->st, ctr, &r), STORE_OK);
    assert_int_equal(r.seq, 9);
    assert_non_null(strstr(r.body, "\"n\":9}"));
    store_report_clear(&r);
    tu_container_id(ctr, 7);
    assert_int_equal(store_latest_report_body(f->st, ctr, &r),
                     STORE_NOT_FOUND);
}

int
main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, sfx_setup, sfx_teardown)
    const struct CMUnitTest tests[] = {
        T(t_due_order),
        T(t_due_model),
        T(t_recent),
        T(t_after),
    };
#undef T

    tu_test_filters();
    return cmocka_run_group_tests(tests, NULL, NULL);
}
