/*
 * test_store_records — container records and checkpoints, pending in
 * memory until a flush (agent/store_records.c): what reads see before and
 * after, a flush all or nothing, a flush of some, the bounds on what may
 * wait, and the record writes counted by what commits.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdbool.h>
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
t_checkpoints(void **state)
{
    struct sfx *f = *state;
    int64_t v = 42;

    assert_int_equal(store_get_checkpoint(f->st, "docker.events", &v),
                     STORE_NOT_FOUND);
    assert_int_equal(v, 42);
    assert_int_equal(
        store_set_checkpoint(f->st, "docker.events", 1764678177864550554LL),
        STORE_OK);
    assert_int_equal(store_set_checkpoint(f->st, "containerd.reconcile", -5),
                     STORE_OK);
    /* Seen before the flush, and after it. */
    assert_int_equal(store_get_checkpoint(f->st, "docker.events", &v),
                     STORE_OK);
    assert_int_equal(v, 1764678177864550554LL);
    assert_int_equal(store_pending(f->st), 2);
    assert_int_equal(store_flush(f->st), STORE_OK);
    assert_int_equal(store_pending(f->st), 0);
    assert_int_equal(sfx_raw_int(f->dir, "SELECT value FROM checkpoints"
                                         " WHERE key = 'docker.events'"),
                     1764678177864550554LL);
    assert_int_equal(store_set_checkpoint(f->st, "docker.events", INT64_MAX),
                     STORE_OK);
    assert_int_equal(store_flush(f->st), STORE_OK);
    sfx_reopen(f);
    assert_int_equal(store_get_checkpoint(f->st, "docker.events", &v),
                     STORE_OK);
    assert_int_equal(v, INT64_MAX);
    assert_int_equal(store_get_checkpoint(f->st, "containerd.reconcile", &v),
                     STORE_OK);
    assert_int_equal(v, -5);
}

/* The records as "id=json;..." sorted by id, for one readable assert. */
static int
cmp_ctr(const void *a, const void *b)
{
    return strcmp(((const struct store_container *)a)->id,
                  ((const struct store_container *)b)->id);
}

static void
ctr_str(struct store *st, char *buf, size_t len)
{
    struct store_containers l;
    size_t i, o = 0;

    assert_int_equal(store_get_containers(st, &l), STORE_OK);
    if (l.n > 0)
        qsort(l.v, l.n, sizeof(*l.v), cmp_ctr);
    buf[0] = '\0';
    for (i = 0; i < l.n; i++) {
        assert_int_equal(strlen(l.v[i].json), l.v[i].len);
        o += (size_t)snprintf(buf + o, len - o, "%s=%s@%lld;", l.v[i].id,
                              l.v[i].json, (long long)l.v[i].updated_ms);
    }
    store_containers_free(&l);
}

static void
t_containers(void **state)
{
    struct sfx *f = *state;
    char buf[512];

    ctr_str(f->st, buf, sizeof(buf));
    assert_string_equal(buf, "");
    assert_int_equal(store_put_container(f->st, "a", "{\"s\":1}", 7, 10),
                     STORE_OK);
    assert_int_equal(store_put_container(f->st, "b", "{\"s\":2}", 7, 11),
                     STORE_OK);
    /* Not yet written, but listed. */
    assert_int_equal(sfx_raw_int(f->dir, "SELECT count(*) FROM containers"),
                     0);
    ctr_str(f->st, buf, sizeof(buf));
    assert_string_equal(buf, "a={\"s\":1}@10;b={\"s\":2}@11;");
    assert_int_equal(store_flush(f->st), STORE_OK);
    assert_int_equal(sfx_raw_int(f->dir, "SELECT count(*) FROM containers"),
                     2);
    sfx_reopen(f);
    ctr_str(f->st, buf, sizeof(buf));
    assert_string_equal(buf, "a={\"s\":1}@10;b={\"s\":2}@11;");

    /* Pending changes win over the rows: a newer a, b gone, c new. */
    assert_int_equal(store_put_container(f->st, "a", "{\"s\":3}", 7, 20),
                     STORE_OK);
    assert_int_equal(store_delete_container(f->st, "b"), STORE_OK);
    assert_int_equal(store_put_container(f->st, "c", "{}", 2, 21), STORE_OK);
    assert_int_equal(store_delete_container(f->st, "nobody"), STORE_OK);
    /* Put then deleted in the same turn: never written. */
    assert_int_equal(store_put_container(f->st, "d", "{}", 2, 22), STORE_OK);
    assert_int_equal(store_delete_container(f->st, "d"), STORE_OK);
    ctr_str(f->st, buf, sizeof(buf));
    assert_string_equal(buf, "a={\"s\":3}@20;c={}@21;");
    assert_int_equal(store_flush(f->st), STORE_OK);
    ctr_str(f->st, buf, sizeof(buf));
    assert_string_equal(buf, "a={\"s\":3}@20;c={}@21;");
    /* Deleted, then put again before the flush: the put wins. */
    assert_int_equal(store_delete_container(f->st, "c"), STORE_OK);
    assert_int_equal(store_put_container(f->st, "c", "{\"x\":1}", 7, 30),
                     STORE_OK);
    /* store_close flushes. */
    assert_int_equal(sfx_close(f->st), STORE_OK);
    f->st = sfx_must_open(f->dir);
    ctr_str(f->st, buf, sizeof(buf));
    assert_string_equal(buf, "a={\"s\":3}@20;c={\"x\":1}@30;");
}

/* Many updates, one transaction: coalesced per key, and all or nothing. */
static void
t_batch(void **state)
{
    struct sfx *f = *state;
    struct store_containers l;
    char ctr[STORE_ID_MAX + 1], json[64], key[16];
    int64_t v;
    unsigned i;
    int n;

    for (i = 0; i < 5000; i++) {
        tu_container_id(ctr, i % 100);
        n = snprintf(json, sizeof(json), "{\"step\":%u}", i);
        assert_int_equal(store_put_container(f->st, ctr, json, (size_t)n, i),
                         STORE_OK);
        snprintf(key, sizeof(key), "k%u", i % 10);
        assert_int_equal(store_set_checkpoint(f->st, key, i), STORE_OK);
    }
    assert_int_equal(store_pending(f->st), 110);
    assert_int_equal(store_flush(f->st), STORE_OK);
    assert_int_equal(store_pending(f->st), 0);
    assert_int_equal(store_flush(f->st), STORE_OK); /* nothing to do */
    assert_int_equal(sfx_raw_int(f->dir, "SELECT count(*) FROM containers"),
                     100);
    assert_int_equal(sfx_raw_int(f->dir,
                                 "SELECT sum(json_extract(record, '$.step'))"
                                 " FROM containers"),
                     (4900 + 4999) * 100 / 2); /* the last value of each */
    assert_int_equal(store_get_checkpoint(f->st, "k3", &v), STORE_OK);
    assert_int_equal(v, 4993);
    /* The table grew past its first size and still finds everything. */
    assert_int_equal(store_get_containers(f->st, &l), STORE_OK);
    assert_int_equal(l.n, 100);
    store_containers_free(&l);
}

/* A flush of some: the named record first, at most `max` records, the
 * checkpoints only with the last of them; what is left stays pending and
 * is found, changed and written later as if nothing had left the table
 * (entries leave it by backward shift). */
static void
t_flush_some(void **state)
{
    struct sfx *f = *state;
    struct store_containers l;
    char ctr[STORE_ID_MAX + 1], json[64], sql[256];
    int64_t v;
    unsigned i;
    int n, rounds = 0;

    for (i = 0; i < 300; i++) {
        tu_container_id(ctr, i);
        n = snprintf(json, sizeof(json), "{\"n\":%u}", i);
        assert_int_equal(store_put_container(f->st, ctr, json, (size_t)n, i),
                         STORE_OK);
    }
    assert_int_equal(store_set_checkpoint(f->st, "k", 7), STORE_OK);
    tu_container_id(ctr, 277);
    assert_int_equal(store_flush_some(f->st, ctr, 10), STORE_OK);
    assert_int_equal(store_pending(f->st), 291);
    assert_int_equal(sfx_raw_int(f->dir, "SELECT count(*) FROM containers"),
                     10);
    snprintf(sql, sizeof(sql),
             "SELECT count(*) FROM containers WHERE id = '%s'", ctr);
    assert_int_equal(sfx_raw_int(f->dir, sql), 1);
    assert_int_equal(sfx_raw_int(f->dir, "SELECT count(*) FROM checkpoints"),
                     0);
    /* Every one still found: changed, deleted, listed. */
    for (i = 0; i < 300; i += 3) {
        tu_container_id(ctr, i);
        n = snprintf(json, sizeof(json), "{\"n\":%u}", i + 1000);
        assert_int_equal(store_put_container(f->st, ctr, json, (size_t)n, i),
                         STORE_OK);
    }
    tu_container_id(ctr, 1);
    assert_int_equal(store_delete_container(f->st, ctr), STORE_OK);
    assert_int_equal(store_get_containers(f->st, &l), STORE_OK);
    assert_int_equal(l.n, 299);
    store_containers_free(&l);
    while (store_pending(f->st) > 0) {
        assert_int_equal(
            sfx_raw_int(f->dir, "SELECT count(*) FROM checkpoints"), 0);
        assert_int_equal(store_flush_some(f->st, NULL, 16), STORE_OK);
        assert_true(++rounds <= 300 / 16 + 2);
    }
    assert_true(rounds >= 300 / 16);
    assert_int_equal(sfx_raw_int(f->dir, "SELECT count(*) FROM checkpoints"),
                     1);
    assert_int_equal(store_get_checkpoint(f->st, "k", &v), STORE_OK);
    assert_int_equal(v, 7);
    assert_int_equal(sfx_raw_int(f->dir, "SELECT count(*) FROM containers"),
                     299);
    /* The last value of each: 1000 more for every third, 1 gone. */
    assert_int_equal(sfx_raw_int(f->dir,
                                 "SELECT sum(json_extract(record, '$.n'))"
                                 " FROM containers"),
                     299 * 300 / 2 - 1 + 100 * 1000);
    /* All that waits fits: one flush takes it, checkpoints too. */
    assert_int_equal(store_set_checkpoint(f->st, "k", 8), STORE_OK);
    tu_container_id(ctr, 2);
    assert_int_equal(store_put_container(f->st, ctr, "{}", 2, 5), STORE_OK);
    assert_int_equal(store_flush_some(f->st, NULL, 1), STORE_OK);
    assert_int_equal(store_pending(f->st), 0);
    assert_int_equal(sfx_raw_int(f->dir, "SELECT value FROM checkpoints"), 8);
    assert_int_equal(store_check(f->st), STORE_OK);
}

static void
t_pending_bounds(void **state)
{
    struct sfx *f = *state;
    const size_t rec = (size_t)1 << 20;
    char key[32];
    char *big;
    unsigned i;

    for (i = 0; i < STORE_PENDING_MAX; i++) {
        snprintf(key, sizeof(key), "k%u", i);
        assert_int_equal(store_set_checkpoint(f->st, key, i), STORE_OK);
    }
    /* A new key is refused; an update of a pending one is not. */
    assert_int_equal(store_set_checkpoint(f->st, "one-more", 1), STORE_FULL);
    assert_non_null(strstr(store_errmsg(f->st), "flush"));
    assert_int_equal(store_put_container(f->st, "c", "{}", 2, 1), STORE_FULL);
    assert_int_equal(store_set_checkpoint(f->st, "k7", -7), STORE_OK);
    assert_int_equal(store_flush(f->st), STORE_OK);
    assert_int_equal(store_set_checkpoint(f->st, "one-more", 1), STORE_OK);
    assert_int_equal(store_flush(f->st), STORE_OK);
    assert_int_equal(sfx_raw_int(f->dir, "SELECT count(*) FROM checkpoints"),
                     STORE_PENDING_MAX + 1);

    /* The bytes bound: 1 MiB records until 64 MiB are waiting (a size
     * that divides the bound, so it is reached exactly). */
    assert_true(rec <= STORE_RECORD_MAX);
    assert_int_equal(STORE_PENDING_BYTES_MAX % rec, 0);
    big = malloc(rec);
    assert_non_null(big);
    memset(big, '1', rec);
    for (i = 0; i < STORE_PENDING_BYTES_MAX / rec; i++) {
        snprintf(key, sizeof(key), "c%u", i);
        assert_int_equal(store_put_container(f->st, key, big, rec, 1),
                         STORE_OK);
    }
    assert_int_equal(store_put_container(f->st, "c-last", big, 1, 1),
                     STORE_FULL);
    /* Replacing a record with a smaller one makes room. */
    assert_int_equal(store_put_container(f->st, "c0", "{}", 2, 1), STORE_OK);
    assert_int_equal(store_put_container(f->st, "c-last", big, 1, 1),
                     STORE_OK);
    free(big);
    /* Not flushed: teardown's store_close writes 65 MiB. Drop them. */
    for (i = 0; i < STORE_PENDING_BYTES_MAX / rec; i++) {
        snprintf(key, sizeof(key), "c%u", i);
        assert_int_equal(store_delete_container(f->st, key), STORE_OK);
    }
}

/* reapd_state_record_writes_total: container records put or deleted, as
 * committed. A record changed twice before a commit is one write; a
 * checkpoint is none; a transaction refused and rolled back counts
 * nothing, and its rows count once when a later commit writes them. */
static void
t_record_writes_counted(void **state)
{
    struct sfx *f = *state;
    char a[65], b[65];
    uint64_t w0 = store_record_writes(f->st);

    tu_container_id(a, 1);
    tu_container_id(b, 2);
    assert_int_equal(store_put_container(f->st, a, "{}", 2, 1), STORE_OK);
    assert_int_equal(store_put_container(f->st, a, "{\"s\":1}", 7, 2),
                     STORE_OK);
    assert_int_equal(store_put_container(f->st, b, "{}", 2, 3), STORE_OK);
    assert_int_equal(store_set_checkpoint(f->st, "k", 5), STORE_OK);
    assert_int_equal(store_record_writes(f->st), w0);
    assert_int_equal(store_flush(f->st), STORE_OK);
    assert_int_equal(store_record_writes(f->st), w0 + 2);

    /* Refused: nothing counted, the change still pending. */
    sfx_refuse_deletes(f, true);
    assert_int_equal(store_delete_container(f->st, a), STORE_OK);
    assert_true(store_flush(f->st) < 0);
    assert_int_equal(store_record_writes(f->st), w0 + 2);
    sfx_refuse_deletes(f, false);
    assert_int_equal(store_flush(f->st), STORE_OK);
    assert_int_equal(store_record_writes(f->st), w0 + 3);
    /* Nothing pending: no write. */
    assert_int_equal(store_flush(f->st), STORE_OK);
    assert_int_equal(store_record_writes(f->st), w0 + 3);
}

/* A source for store_mark_container: every record reads {"v":N}, N the
 * version at the time of the read; counts the reads. */
struct src {
    int version;
    int reads;
    int answer; /* what it says: STORE_OK, STORE_NOT_FOUND or an error */
    bool nul;   /* answers JSON with a NUL inside */
};

static int
src_read(const char *id, char **json, size_t *len, void *arg)
{
    struct src *s = arg;
    char buf[64];

    assert_non_null(id);
    s->reads++;
    if (s->answer != STORE_OK)
        return s->answer;
    if (s->nul) {
        *json = malloc(3);
        assert_non_null(*json);
        memcpy(*json, "{\0}", 3);
        *len = 3;
        return STORE_OK;
    }
    *len = (size_t)snprintf(buf, sizeof(buf), "{\"v\":%d}", s->version);
    *json = strdup(buf);
    assert_non_null(*json);
    return STORE_OK;
}

static void
row_of(struct sfx *f, const char *id, char *buf, size_t len)
{
    char sql[160];

    snprintf(sql, sizeof(sql),
             "SELECT coalesce((SELECT record FROM containers"
             " WHERE id = '%s'), '(none)')",
             id);
    sfx_raw_text(f->dir, sql, buf, len);
}

/* A marked record is made into JSON once, when its commit comes, as it is
 * then; the latest change of a key wins whichever kind it is. */
static void
t_marked_read_once_at_commit(void **state)
{
    struct sfx *f = *state;
    struct src s = {.version = 1};
    char buf[512];
    uint64_t w0 = store_record_writes(f->st);

    assert_int_equal(store_mark_container(f->st, "a", 1), STORE_INVALID);
    assert_int_equal(store_set_record_source(f->st, src_read, &s), STORE_OK);
    assert_int_equal(store_mark_container(f->st, "a", 1), STORE_OK);
    s.version = 2;
    assert_int_equal(store_mark_container(f->st, "a", 2), STORE_OK);
    s.version = 3;
    assert_int_equal(store_mark_container(f->st, "a", 3), STORE_OK);
    assert_int_equal(s.reads, 0);
    assert_int_equal(store_pending(f->st), 1);
    assert_int_equal(store_flush(f->st), STORE_OK);
    assert_int_equal(s.reads, 1);
    assert_int_equal(store_record_writes(f->st), w0 + 1);
    assert_int_equal(store_pending(f->st), 0);
    row_of(f, "a", buf, sizeof(buf));
    assert_string_equal(buf, "{\"v\":3}");

    /* Listed before its commit: read then, and kept as read. */
    s.version = 4;
    assert_int_equal(store_mark_container(f->st, "b", 7), STORE_OK);
    ctr_str(f->st, buf, sizeof(buf));
    assert_string_equal(buf, "a={\"v\":3}@3;b={\"v\":4}@7;");
    assert_int_equal(s.reads, 2);
    s.version = 5;
    assert_int_equal(store_flush(f->st), STORE_OK);
    assert_int_equal(s.reads, 2);
    row_of(f, "b", buf, sizeof(buf));
    assert_string_equal(buf, "{\"v\":4}");

    /* A put after a mark wins, a mark after a put, a delete after a mark. */
    assert_int_equal(store_mark_container(f->st, "a", 8), STORE_OK);
    assert_int_equal(store_put_container(f->st, "a", "{\"p\":1}", 7, 9),
                     STORE_OK);
    assert_int_equal(store_put_container(f->st, "b", "{\"p\":2}", 7, 9),
                     STORE_OK);
    assert_int_equal(store_mark_container(f->st, "b", 10), STORE_OK);
    assert_int_equal(store_mark_container(f->st, "c", 10), STORE_OK);
    assert_int_equal(store_delete_container(f->st, "c"), STORE_OK);
    s.version = 6;
    assert_int_equal(store_flush(f->st), STORE_OK);
    assert_int_equal(s.reads, 3); /* b only */
    ctr_str(f->st, buf, sizeof(buf));
    assert_string_equal(buf, "a={\"p\":1}@9;b={\"v\":6}@10;");
    assert_int_equal(store_set_record_source(f->st, NULL, NULL), STORE_OK);
}

/* The source has nothing to write (its record waits for a report, or is
 * gone): the stored record stays as it was, and the mark leaves with the
 * commit. A source that fails fails the flush, and the mark waits. */
static void
t_marked_nothing_or_failing(void **state)
{
    struct sfx *f = *state;
    struct src s = {.version = 1};
    char buf[128];
    uint64_t w0;

    assert_int_equal(store_set_record_source(f->st, src_read, &s), STORE_OK);
    assert_int_equal(store_put_container(f->st, "a", "{\"v\":0}", 7, 1),
                     STORE_OK);
    assert_int_equal(store_flush(f->st), STORE_OK);
    w0 = store_record_writes(f->st);
    assert_int_equal(store_mark_container(f->st, "a", 2), STORE_OK);
    s.answer = STORE_NOT_FOUND;
    assert_int_equal(store_flush(f->st), STORE_OK);
    assert_int_equal(s.reads, 1);
    assert_int_equal(store_pending(f->st), 0);
    assert_int_equal(store_record_writes(f->st), w0);
    row_of(f, "a", buf, sizeof(buf));
    assert_string_equal(buf, "{\"v\":0}");

    assert_int_equal(store_mark_container(f->st, "a", 3), STORE_OK);
    s.answer = STORE_NOMEM;
    assert_int_equal(store_flush(f->st), STORE_NOMEM);
    assert_int_equal(store_pending(f->st), 1);
    row_of(f, "a", buf, sizeof(buf));
    assert_string_equal(buf, "{\"v\":0}");
    s.answer = STORE_OK;
    s.nul = true; /* what a record may not hold: refused, still waiting */
    assert_int_equal(store_flush(f->st), STORE_INVALID);
    assert_int_equal(store_pending(f->st), 1);
    s.nul = false;
    s.version = 9;
    assert_int_equal(store_flush(f->st), STORE_OK);
    assert_int_equal(store_pending(f->st), 0);
    row_of(f, "a", buf, sizeof(buf));
    assert_string_equal(buf, "{\"v\":9}");
    assert_int_equal(store_record_writes(f->st), w0 + 1);
    assert_int_equal(store_set_record_source(f->st, NULL, NULL), STORE_OK);
}

/* An owner about to go has its marks read first (one, or all when it
 * leaves as the source); one the source cannot read is dropped then. */
static void
t_marked_filled_before_owner_goes(void **state)
{
    struct sfx *f = *state;
    struct src s = {.version = 5};
    char buf[256];

    assert_int_equal(store_set_record_source(f->st, src_read, &s), STORE_OK);
    assert_int_equal(store_mark_container(f->st, "a", 1), STORE_OK);
    assert_int_equal(store_mark_container(f->st, "b", 1), STORE_OK);
    assert_int_equal(store_fill_marked(f->st, "a"), STORE_OK);
    assert_int_equal(store_fill_marked(f->st, "nobody"), STORE_OK);
    assert_int_equal(s.reads, 1);
    s.version = 6;
    assert_int_equal(store_mark_container(f->st, "c", 1), STORE_OK);
    assert_int_equal(store_mark_container(f->st, "d", 1), STORE_OK);
    /* Read, then marked again: marked. */
    assert_int_equal(store_fill_marked(f->st, "d"), STORE_OK);
    assert_int_equal(s.reads, 2);
    assert_int_equal(store_mark_container(f->st, "d", 1), STORE_OK);
    s.version = 7;
    assert_int_equal(store_fill_marked(f->st, "b"), STORE_OK);
    /* The source leaves: c and d read now, and have nothing: dropped. */
    s.answer = STORE_NOT_FOUND;
    assert_int_equal(store_set_record_source(f->st, NULL, NULL), STORE_OK);
    assert_int_equal(s.reads, 5);
    assert_int_equal(store_pending(f->st), 2);
    assert_int_equal(store_mark_container(f->st, "e", 1), STORE_INVALID);
    assert_int_equal(store_flush(f->st), STORE_OK);
    ctr_str(f->st, buf, sizeof(buf));
    assert_string_equal(buf, "a={\"v\":5}@1;b={\"v\":7}@1;");
}

/* A report's transaction takes marked records along, and one it ends is
 * deleted without being read. */
static void
t_marked_in_report_transaction(void **state)
{
    struct sfx *f = *state;
    struct src s = {.version = 3};
    char a[65], b[65], rid[40], buf[256];
    struct store_new_report v = {.body = "{}", .len = 2, .forget = true};

    tu_container_id(a, 1);
    tu_container_id(b, 2);
    tu_report_id(rid, 1);
    assert_int_equal(store_set_record_source(f->st, src_read, &s), STORE_OK);
    assert_int_equal(store_put_container(f->st, a, "{}", 2, 1), STORE_OK);
    assert_int_equal(store_flush(f->st), STORE_OK);
    assert_int_equal(store_mark_container(f->st, a, 2), STORE_OK);
    assert_int_equal(store_mark_container(f->st, b, 2), STORE_OK);
    v.report_id = rid;
    v.container_id = a;
    assert_int_equal(store_add_reports(f->st, &v, 1, 5, false), STORE_OK);
    assert_int_equal(v.result, STORE_OK);
    assert_true(v.forgotten);
    assert_int_equal(s.reads, 1); /* b's */
    assert_int_equal(store_pending(f->st), 0);
    ctr_str(f->st, buf, sizeof(buf));
    assert_null(strstr(buf, a));
    assert_non_null(strstr(buf, "={\"v\":3}@2;"));
    assert_int_equal(store_set_record_source(f->st, NULL, NULL), STORE_OK);
}

int
main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, sfx_setup, sfx_teardown)
    const struct CMUnitTest tests[] = {
        T(t_record_writes_counted),
        T(t_checkpoints),
        T(t_containers),
        T(t_batch),
        T(t_flush_some),
        T(t_pending_bounds),
        T(t_marked_read_once_at_commit),
        T(t_marked_nothing_or_failing),
        T(t_marked_filled_before_owner_goes),
        T(t_marked_in_report_transaction),
    };
#undef T

    tu_test_filters();
    return cmocka_run_group_tests(tests, NULL, NULL);
}
