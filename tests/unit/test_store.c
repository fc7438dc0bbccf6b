/*
 * test_store — the store as a whole, on real files: the input every call
 * refuses; a full disk (a size cap, and RLIMIT_FSIZE in a child, where
 * writes really fail), after which nothing committed is lost and writes
 * work again; a writer SIGKILLed at random instants, after which every
 * write it had seen committed is there; what a batch of updates costs
 * against single commits. Each part of the store has its own test
 * (test_store_<part>.c); what they share is tests/fake/store_fx.h.
 *
 * TEST_SEED=n replays the kill test's random instants.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
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
t_invalid_input(void **state)
{
    struct sfx *f = *state;
    char ctr[STORE_ID_MAX + 1], id[STORE_REPORT_ID_MAX + 1];
    char long_id[STORE_ID_MAX + 2], long_rid[STORE_REPORT_ID_MAX + 2];
    struct store_reports l;
    struct store_counts c;
    struct store_report r;
    char *big;
    int64_t v;

    tu_container_id(ctr, 1);
    tu_report_id(id, 1);
    memset(long_id, 'a', sizeof(long_id) - 1);
    long_id[sizeof(long_id) - 1] = '\0';
    memset(long_rid, 'a', sizeof(long_rid) - 1);
    long_rid[sizeof(long_rid) - 1] = '\0';
    big = malloc(STORE_BODY_MAX + 1);
    assert_non_null(big);
    memset(big, ' ', STORE_BODY_MAX + 1);

    assert_int_equal(store_add_report(f->st, "", ctr, "{}", 2, 1),
                     STORE_INVALID);
    assert_int_equal(store_add_report(f->st, NULL, ctr, "{}", 2, 1),
                     STORE_INVALID);
    assert_int_equal(store_add_report(f->st, "a b", ctr, "{}", 2, 1),
                     STORE_INVALID);
    assert_int_equal(store_add_report(f->st, "a\nb", ctr, "{}", 2, 1),
                     STORE_INVALID);
    assert_int_equal(store_add_report(f->st, "caf\xc3\xa9", ctr, "{}", 2, 1),
                     STORE_INVALID);
    assert_int_equal(store_add_report(f->st, long_rid, ctr, "{}", 2, 1),
                     STORE_INVALID);
    assert_non_null(strstr(store_errmsg(f->st), "add report"));
    assert_int_equal(store_add_report(f->st, id, long_id, "{}", 2, 1),
                     STORE_INVALID);
    assert_int_equal(store_add_report(f->st, id, ctr, NULL, 0, 1),
                     STORE_INVALID);
    assert_int_equal(store_add_report(f->st, id, ctr, "{\0}", 3, 1),
                     STORE_INVALID);
    assert_int_equal(
        store_add_report(f->st, id, ctr, big, STORE_BODY_MAX + 1, 1),
        STORE_INVALID);
    assert_int_equal(store_counts(f->st, &c), STORE_OK);
    assert_int_equal(c.pending, 0);
    /* The largest body allowed goes in, and comes back whole. */
    big[0] = '"';
    big[STORE_BODY_MAX - 1] = '"';
    assert_int_equal(store_add_report(f->st, id, ctr, big, STORE_BODY_MAX, 1),
                     STORE_OK);
    assert_int_equal(store_get_report(f->st, id, true, &r), STORE_OK);
    assert_int_equal(r.body_len, STORE_BODY_MAX);
    assert_memory_equal(r.body, big, STORE_BODY_MAX);
    store_report_clear(&r);

    assert_int_equal(store_put_container(f->st, long_id, "{}", 2, 1),
                     STORE_INVALID);
    assert_int_equal(
        store_put_container(f->st, ctr, big, STORE_RECORD_MAX + 1, 1),
        STORE_INVALID);
    assert_int_equal(store_put_container(f->st, ctr, "{\0}", 3, 1),
                     STORE_INVALID);
    assert_int_equal(store_delete_container(f->st, ""), STORE_INVALID);
    assert_int_equal(store_set_checkpoint(f->st, long_id, 1), STORE_INVALID);
    assert_int_equal(store_set_checkpoint(f->st, "has space", 1),
                     STORE_INVALID);
    assert_int_equal(store_get_checkpoint(f->st, NULL, &v), STORE_INVALID);
    assert_int_equal(store_pending(f->st), 0);
    assert_int_equal(store_mark_delivered(f->st, long_id, 1), STORE_INVALID);
    assert_int_equal(store_mark_dead(f->st, "", "x"), STORE_INVALID);
    assert_int_equal(store_mark_retry(f->st, NULL, 1, "x"), STORE_INVALID);
    assert_int_equal(store_get_report(f->st, long_id, false, &r),
                     STORE_INVALID);
    assert_int_equal(store_due(f->st, 0, STORE_LIST_MAX + 1, &l),
                     STORE_INVALID);
    assert_int_equal(l.n, 0);
    assert_int_equal(store_recent(f->st, STORE_LIST_MAX + 1, false, &l),
                     STORE_INVALID);
    free(big);
}

static void
t_full_size_limit(void **state)
{
    struct sfx *f = *state;
    char id[STORE_REPORT_ID_MAX + 1], ctr[STORE_ID_MAX + 1], key[16];
    static char body[16384];
    struct store_counts c, c2;
    struct store_report r;
    uint64_t eff;
    unsigned i, ok = 0;
    int res = STORE_OK;
    int64_t v;

    memset(body, 'b', sizeof(body));
    body[0] = '"';
    body[sizeof(body) - 1] = '"';
    tu_container_id(ctr, 1);
    for (i = 0; i < 10; i++)
        assert_int_equal(sfx_add(f->st, i, i, 1), STORE_OK);
    assert_int_equal(store_put_container(f->st, ctr, "{\"v\":1}", 7, 1),
                     STORE_OK);
    assert_int_equal(store_set_checkpoint(f->st, "events", 1), STORE_OK);
    assert_int_equal(store_flush(f->st), STORE_OK);

    /* Capped at (about) the current size: the next pages are refused. */
    assert_int_equal(store_counts(f->st, &c), STORE_OK);
    assert_int_equal(store_set_size_limit(f->st, c.db_bytes + 65536, &eff),
                     STORE_OK);
    assert_true(eff >= c.db_bytes && eff <= c.db_bytes + 65536);
    for (i = 100; i < 200; i++) {
        tu_report_id(id, i);
        res = store_add_report(f->st, id, ctr, body, sizeof(body), i);
        if (res != STORE_OK)
            break;
        ok++;
    }
    assert_int_equal(res, STORE_FULL);
    assert_non_null(strstr(store_errmsg(f->st), "full"));
    assert_true(ok >= 1 && ok < 10); /* the cap allowed about 4 */
    /* The refused report is not there, and did not use up a seq. */
    assert_int_equal(store_get_report(f->st, id, false, &r), STORE_NOT_FOUND);
    assert_int_equal(store_counts(f->st, &c2), STORE_OK);
    assert_int_equal(c2.pending, 10 + ok);

    /* Container records and checkpoints: the flush fails whole, and
     * everything stays pending, readable, for the next try. */
    for (i = 0; i < 30; i++) {
        snprintf(key, sizeof(key), "c%u", i);
        assert_int_equal(
            store_put_container(f->st, key, body, sizeof(body), 2), STORE_OK);
    }
    assert_int_equal(store_set_checkpoint(f->st, "events", 2), STORE_OK);
    assert_int_equal(store_flush(f->st), STORE_FULL);
    assert_int_equal(store_pending(f->st), 31);
    assert_int_equal(store_flush(f->st), STORE_FULL); /* still */
    assert_int_equal(store_get_checkpoint(f->st, "events", &v), STORE_OK);
    assert_int_equal(v, 2);
    assert_int_equal(sfx_raw_int(f->dir, "SELECT value FROM checkpoints"), 1);
    assert_int_equal(sfx_raw_int(f->dir, "SELECT count(*) FROM containers"),
                     1);
    /* What needs no new page still works: reads, marks, retention. */
    assert_int_equal(sfx_mark_delivered(f->st, 0, 5), STORE_OK);
    assert_int_equal(store_prune(f->st, 10, 0, -1, NULL), STORE_OK);
    assert_int_equal(store_check(f->st), STORE_OK);

    /* Room again: everything that waited goes in, new reports too. */
    assert_int_equal(store_set_size_limit(f->st, 0, &eff), STORE_OK);
    assert_true(eff > 1000000000ull);
    assert_int_equal(store_flush(f->st), STORE_OK);
    assert_int_equal(store_pending(f->st), 0);
    assert_int_equal(store_add_report(f->st, id, ctr, body, sizeof(body), 9),
                     STORE_OK);
    sfx_reopen(f);
    assert_int_equal(store_check(f->st), STORE_OK);
    for (i = 1; i < 10; i++) {
        assert_int_equal(sfx_get(f->st, i, &r), STORE_OK);
        store_report_clear(&r);
    }
    assert_int_equal(sfx_get(f->st, 0, &r), STORE_NOT_FOUND); /* pruned */
    for (i = 100; i <= 100 + ok; i++) {
        assert_int_equal(sfx_get(f->st, i, &r), STORE_OK);
        store_report_clear(&r);
    }
    assert_int_equal(store_get_checkpoint(f->st, "events", &v), STORE_OK);
    assert_int_equal(v, 2);
    assert_int_equal(sfx_raw_int(f->dir, "SELECT count(*) FROM containers"),
                     31);
}

/*
 * Real write errors: a child (RLIMIT_FSIZE is per process) lets its files
 * grow only a little, so SQLite's writes to the WAL really fail (a short
 * write is SQLITE_FULL, EFBIG after it SQLITE_IOERR). Returns the first
 * failed check's line, 0 if all passed.
 */
static int
fsize_child(const char *dir)
{
    char id[STORE_REPORT_ID_MAX + 1], ctr[STORE_ID_MAX + 1], path[128];
    static char body[16384];
    struct store_report r;
    struct rlimit rl;
    struct store *st;
    struct stat sb;
    unsigned i, ok = 0;
    int res = STORE_OK, res2, line = 0;

#define CHECK(c)                                                              \
    do {                                                                      \
        if (!(c)) {                                                           \
            line = __LINE__;                                                  \
            goto out;                                                         \
        }                                                                     \
    } while (0)

    memset(body, 'b', sizeof(body));
    body[0] = '"';
    body[sizeof(body) - 1] = '"';
    tu_container_id(ctr, 1);
    CHECK(sfx_open(dir, &st, NULL, 0) == STORE_OK);
    for (i = 0; i < 5; i++)
        CHECK(sfx_add(st, i, 1, 1) == STORE_OK);
    snprintf(path, sizeof(path), "%s/reapd.db-wal", dir);
    CHECK(stat(path, &sb) == 0);
    CHECK(getrlimit(RLIMIT_FSIZE, &rl) == 0);
    rl.rlim_cur = (rlim_t)sb.st_size + 40000;
    CHECK(setrlimit(RLIMIT_FSIZE, &rl) == 0);
    for (i = 100; i < 200; i++) {
        tu_report_id(id, i);
        res = store_add_report(st, id, ctr, body, sizeof(body), i);
        if (res != STORE_OK)
            break;
        ok++;
    }
    /* ENOSPC is SQLITE_FULL; EFBIG here, like EDQUOT, SQLITE_IOERR. */
    CHECK(res == STORE_FULL || res == STORE_IOERR);
    CHECK(store_get_report(st, id, false, &r) == STORE_NOT_FOUND);
    /* Again: a second error in a row is handled the same way. */
    CHECK(store_add_report(st, id, ctr, body, sizeof(body), i) < 0);
    for (i = 0; i < 4; i++) { /* more than one report's worth */
        tu_container_id(ctr, i);
        CHECK(store_put_container(st, ctr, body, sizeof(body), 1) == STORE_OK);
    }
    res2 = store_flush(st);
    CHECK(res2 == STORE_FULL || res2 == STORE_IOERR);
    CHECK(store_pending(st) == 4);
    print_message("write errors: report insert -> %s, flush -> %s (%s)\n",
                  store_strerror(res), store_strerror(res2), store_errmsg(st));

    rl.rlim_cur = rl.rlim_max;
    CHECK(setrlimit(RLIMIT_FSIZE, &rl) == 0);
    CHECK(store_flush(st) == STORE_OK);
    CHECK(store_add_report(st, id, ctr, body, sizeof(body), 1) == STORE_OK);
    CHECK(store_check(st) == STORE_OK);
    CHECK(sfx_close(st) == STORE_OK);
    CHECK(sfx_open(dir, &st, NULL, 0) == STORE_OK);
    CHECK(store_check(st) == STORE_OK);
    for (i = 0; i < 5; i++) {
        CHECK(sfx_get(st, i, &r) == STORE_OK);
        store_report_clear(&r);
    }
    for (i = 100; i <= 100 + ok; i++) {
        CHECK(sfx_get(st, i, &r) == STORE_OK);
        store_report_clear(&r);
    }
    CHECK(sfx_close(st) == STORE_OK);
    st = NULL;
out:
    if (st != NULL)
        sfx_close(st);
    return line;
#undef CHECK
}

static void
t_write_errors(void **state)
{
    char dir[64];
    pid_t pid;
    int status;

    (void)state;
    sfx_tmpdir_new(dir, sizeof(dir));
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int line = fsize_child(dir);

        if (line != 0)
            fprintf(stderr, "fsize_child: check at line %d failed\n", line);
        _exit(line != 0);
    }
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    sfx_tmpdir_free(dir);
}

static void
kill_child(const char *dir, int fd, unsigned first)
{
    char json[64];
    struct store *st;
    unsigned n;
    int r, len;

    if (sfx_open(dir, &st, NULL, 0) != STORE_OK)
        _exit(3);
    sfx_ack(fd, SFX_ACK_OPEN, 0);
    for (n = first;; n++) {
        r = sfx_add(st, n, n % 5, n);
        /* A duplicate is the report the last child committed but was
         * killed before it could tell. */
        if (r != STORE_OK && r != STORE_DUPLICATE)
            _exit(5);
        sfx_ack(fd, SFX_ACK_REPORT, n);
        len = snprintf(json, sizeof(json), "{\"n\":%u}", n);
        if (store_put_container(st, "c", json, (size_t)len, n) != STORE_OK ||
            store_set_checkpoint(st, "events", n) != STORE_OK ||
            store_flush(st) != STORE_OK)
            _exit(6);
        sfx_ack(fd, SFX_ACK_FLUSH, n);
    }
}

static void
t_kill9(void **state)
{
    enum { ITERATIONS = 40 };
    unsigned seed = (unsigned)time(NULL), next = 0, iter, i, unacked = 0;
    unsigned forced = 0;
    int64_t last_flush = -1, v, t0 = sfx_now_us();
    struct store_counts c;
    struct store_report r;
    struct store *st;
    char dir[64];

    (void)state;
    if (getenv("TEST_SEED") != NULL)
        seed = (unsigned)strtoul(getenv("TEST_SEED"), NULL, 10);
    print_message("kill -9 test: TEST_SEED=%u\n", seed);
    srand(seed);
    sfx_tmpdir_new(dir, sizeof(dir));
    for (iter = 0; iter < ITERATIONS; iter++) {
        uint32_t a[2];
        int p[2], status, mode;
        bool got_r = false;
        unsigned last_r = 0;
        pid_t pid;

        assert_int_equal(pipe(p), 0);
        pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            close(p[0]);
            kill_child(dir, p[1], next);
        }
        close(p[1]);
        /* A third of the kills land anywhere, opening and migrating
         * included; a third once the writer has opened; a third once it
         * has committed something (so the test is never vacuous, however
         * slow the writer runs, e.g. under valgrind). */
        mode = rand() % 3;
        if (mode >= 1)
            sfx_wait_ack(p[0], SFX_ACK_OPEN);
        if (mode == 2) {
            sfx_wait_ack(p[0], SFX_ACK_REPORT);
            got_r = true;
            last_r = next;
            forced++;
        }
        usleep((useconds_t)(rand() % 20000));
        assert_int_equal(kill(pid, SIGKILL), 0);
        assert_int_equal(waitpid(pid, &status, 0), pid);
        if (!WIFSIGNALED(status))
            fail_msg("writer exited by itself: status %d", status);
        while (read(p[0], a, sizeof(a)) == sizeof(a)) {
            if (a[0] == SFX_ACK_REPORT) {
                assert_int_equal(a[1], got_r ? last_r + 1 : next);
                last_r = a[1];
                got_r = true;
            } else if (a[0] == SFX_ACK_FLUSH) {
                last_flush = a[1];
            }
        }
        close(p[0]);

        /* The file opens and checks fine, whatever the instant. */
        st = sfx_must_open(dir);
        assert_int_equal(store_check(st), STORE_OK);
        if (got_r) {
            for (i = next; i <= last_r; i++) {
                if (sfx_get(st, i, &r) != STORE_OK)
                    fail_msg("iteration %u: report %u was committed but is"
                             " gone (TEST_SEED=%u)",
                             iter, i, seed);
                store_report_clear(&r);
            }
            next = last_r + 1;
        }
        /* Committed but killed before it said so: allowed, and the next
         * writer meets it as a duplicate. */
        if (sfx_get(st, next, &r) == STORE_OK) {
            store_report_clear(&r);
            unacked++;
        }
        if (last_flush >= 0) {
            assert_int_equal(store_get_checkpoint(st, "events", &v), STORE_OK);
            assert_true(v >= last_flush);
        }
        assert_int_equal(sfx_close(st), STORE_OK);
    }

    /* All of it, once more, at the end. */
    st = sfx_must_open(dir);
    assert_int_equal(store_check(st), STORE_OK);
    for (i = 0; i < next; i++) {
        assert_int_equal(sfx_get(st, i, &r), STORE_OK);
        assert_int_equal(r.seq, i + 1); /* no gaps, no doubles */
        store_report_clear(&r);
    }
    assert_int_equal(store_counts(st, &c), STORE_OK);
    assert_true(c.pending == next || c.pending == next + 1);
    assert_int_equal(sfx_close(st), STORE_OK);
    print_message("kill -9 test: %u kills, %u reports acknowledged and all"
                  " present, %u committed unacknowledged, %.1f s\n",
                  ITERATIONS, next, unacked,
                  (double)(sfx_now_us() - t0) / 1e6);
    /* Not vacuous: the writers did write. */
    assert_true(forced > 0);
    assert_true(next >= forced);
    sfx_tmpdir_free(dir);
}

static void
t_timing(void **state)
{
    struct sfx *f = *state;
    char id[STORE_REPORT_ID_MAX + 1], ctr[STORE_ID_MAX + 1];
    static char body[1500], rec[400];
    int64_t t0, t_add, t_put, t_flush, t_single;
    const unsigned nadd = 200, nput = 10000, nsingle = 200;
    unsigned i;

    memset(body, 'r', sizeof(body));
    body[0] = '"';
    body[sizeof(body) - 1] = '"';
    memset(rec, 'c', sizeof(rec));
    rec[0] = '"';
    rec[sizeof(rec) - 1] = '"';

    t0 = sfx_now_us();
    for (i = 0; i < nadd; i++) {
        tu_report_id(id, i);
        tu_container_id(ctr, i % 50);
        assert_int_equal(
            store_add_report(f->st, id, ctr, body, sizeof(body), i), STORE_OK);
    }
    t_add = sfx_now_us() - t0;

    /* A loop turn's worth of lifecycle steps: 200 containers, 50 updates
     * each, then one flush. */
    t0 = sfx_now_us();
    for (i = 0; i < nput; i++) {
        tu_container_id(ctr, i % 200);
        assert_int_equal(store_put_container(f->st, ctr, rec, sizeof(rec), i),
                         STORE_OK);
    }
    t_put = sfx_now_us() - t0;
    t0 = sfx_now_us();
    assert_int_equal(store_flush(f->st), STORE_OK);
    t_flush = sfx_now_us() - t0;

    /* One update per flush: the worst case, a quiet loop. */
    t0 = sfx_now_us();
    for (i = 0; i < nsingle; i++) {
        tu_container_id(ctr, i % 200);
        assert_int_equal(store_put_container(f->st, ctr, rec, sizeof(rec), i),
                         STORE_OK);
        assert_int_equal(store_flush(f->st), STORE_OK);
    }
    t_single = sfx_now_us() - t0;

    print_message("timing (%s): durable report insert %.1f us;"
                  " batched container update %.2f us"
                  " (%u puts %.2f us each + one flush of 200 rows %.0f us);"
                  " one update + flush %.1f us\n",
                  f->dir, (double)t_add / nadd,
                  (double)(t_put + t_flush) / nput, nput, (double)t_put / nput,
                  (double)t_flush, (double)t_single / nsingle);
    /* What the batching is for, as a ratio (robust to a loaded machine,
     * unlike a time): an update batched with a loop turn's others costs
     * a fraction of one committed alone. Measured: 20-60x. */
    assert_true((t_put + t_flush) * 5 * (int64_t)nsingle <
                t_single * (int64_t)nput);
    /* And the batch wrote what it was given: one row per container. */
    {
        struct store_containers all = {0};

        assert_int_equal(store_get_containers(f->st, &all), 0);
        assert_int_equal(all.n, 200);
        store_containers_free(&all);
    }
}

int
main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, sfx_setup, sfx_teardown)
    const struct CMUnitTest tests[] = {
        /* First: under the sanitizers every malloc and free costs more
         * once the allocator's quarantine has filled, and the ratio it
         * checks must measure SQLite, not the allocator. */
        T(t_timing),
        T(t_invalid_input),
        T(t_full_size_limit),
        cmocka_unit_test(t_write_errors),
        cmocka_unit_test(t_kill9),
    };
#undef T

    signal(SIGPIPE, SIG_IGN);
    /* Going over RLIMIT_FSIZE must fail a write, not kill the test. */
    signal(SIGXFSZ, SIG_IGN);
    tu_test_filters();
    return cmocka_run_group_tests(tests, NULL, NULL);
}
