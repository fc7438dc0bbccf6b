/*
 * store_reports — reading the outbox: the reports due for delivery, one
 * report by id or the latest of a container, the most recent, and a
 * cursor by seq; see store.h. Writes nothing. Each list is one prepared
 * query bounded by an index and a LIMIT (STORE_LIST_MAX rows at most).
 */
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store.h"
#include "store_db.h"

void
store_report_clear(struct store_report *r)
{
    if (r == NULL)
        return;
    free(r->body);
    free(r->last_error);
    memset(r, 0, sizeof(*r));
}

void
store_reports_free(struct store_reports *l)
{
    size_t i;

    if (l == NULL)
        return;
    for (i = 0; i < l->n; i++)
        store_report_clear(&l->v[i]);
    free(l->v);
    l->v = NULL;
    l->n = 0;
}

/* A text column as a malloc'd string; *ok false on allocation failure. */
static char *
column_dup(sqlite3_stmt *s, int col, size_t *len, bool *ok)
{
    const unsigned char *t = sqlite3_column_text(s, col);
    size_t n = (size_t)sqlite3_column_bytes(s, col);
    char *d;

    *ok = true;
    if (t == NULL)
        return NULL;
    d = malloc(n + 1);
    if (d == NULL) {
        *ok = false;
        return NULL;
    }
    memcpy(d, t, n);
    d[n] = '\0';
    if (len != NULL)
        *len = n;
    return d;
}

/* A dead_reason column (NULL: none); -1 for a value this reapd does not
 * know, which the schema's CHECK rules out. */
static int
dead_reason_parse(const char *s, enum store_dead_reason *out)
{
    enum store_dead_reason r;

    *out = STORE_DEAD_NONE;
    if (s == NULL)
        return 0;
    for (r = STORE_DEAD_REJECTED; r <= STORE_DEAD_INVALID; r++) {
        if (strcmp(s, store_dead_reason_name(r)) == 0) {
            *out = r;
            return 0;
        }
    }
    return -1;
}

/* One row of REPORT_COLS plus the body column (maybe NULL) into r. The
 * file is ours, but a row that breaks the bounds is refused, not
 * trusted. */
static int
read_report(struct store *st, sqlite3_stmt *s, struct store_report *r)
{
    bool ok;

    memset(r, 0, sizeof(*r));
    if (!sdb_column_id(s, 0, r->report_id, sizeof(r->report_id)) ||
        !sdb_column_id(s, 1, r->container_id, sizeof(r->container_id)) ||
        sdb_state_parse((const char *)sqlite3_column_text(s, 3), &r->state) !=
            0 ||
        dead_reason_parse((const char *)sqlite3_column_text(s, 9),
                          &r->dead_reason) != 0) {
        snprintf(st->errmsg, sizeof(st->errmsg), "report: malformed row");
        return STORE_CORRUPT;
    }
    r->seq = sqlite3_column_int64(s, 2);
    r->attempts = sqlite3_column_int64(s, 4);
    r->next_attempt_ms = sqlite3_column_int64(s, 5);
    r->created_ms = sqlite3_column_int64(s, 6);
    r->delivered_ms = sqlite3_column_int64(s, 7);
    r->last_error = column_dup(s, 8, NULL, &ok);
    if (ok)
        r->body = column_dup(s, 10, &r->body_len, &ok);
    if (!ok) {
        store_report_clear(r);
        return STORE_NOMEM;
    }
    return STORE_OK;
}

/* Steps a bound report query to its end into out, and resets it. */
static int
list_reports(struct store *st, sqlite3_stmt *s, struct store_reports *out,
             const char *what)
{
    struct store_report *v;
    size_t cap = 0;
    int rc, result = STORE_OK;

    for (;;) {
        rc = sqlite3_step(s);
        if (rc == SQLITE_DONE)
            break;
        if (rc != SQLITE_ROW) {
            result = sdb_fail(st, rc, what);
            goto out;
        }
        if (out->n == cap) {
            cap = cap == 0 ? 16 : cap * 2;
            v = realloc(out->v, cap * sizeof(*v));
            if (v == NULL) {
                result = STORE_NOMEM;
                goto out;
            }
            out->v = v;
        }
        result = read_report(st, s, &out->v[out->n]);
        if (result != STORE_OK)
            goto out;
        out->n++;
    }
out:
    sdb_done(s);
    if (result != STORE_OK)
        store_reports_free(out);
    return result;
}

/* Lists at most `max` reports with statement `id`, whose parameters
 * are `p1` and `p2`. */
static int
list_with(struct store *st, enum stmt_id id, int64_t p1, int64_t p2,
          size_t max, const char *what, struct store_reports *out)
{
    sqlite3_stmt *s = st->stmt[id];
    int result;

    out->v = NULL;
    out->n = 0;
    if (max > STORE_LIST_MAX)
        return sdb_invalid(st, what);
    result = sdb_bind_int(st, s, 1, p1, what);
    if (result == STORE_OK)
        result = sdb_bind_int(st, s, 2, p2, what);
    if (result != STORE_OK) {
        sdb_done(s);
        return result;
    }
    return list_reports(st, s, out, what);
}

int
store_due(struct store *st, int64_t now_ms, size_t max,
          struct store_reports *out)
{
    return list_with(st, S_DUE, now_ms, (int64_t)max, max, "due reports", out);
}

int
store_recent(struct store *st, size_t max, bool with_body,
             struct store_reports *out)
{
    struct store_query q = {.after = 0,
                            .newest_first = true,
                            .max = max,
                            .state = -1,
                            .with_body = with_body};

    return store_after(st, &q, out);
}

/* The one report statement `id` finds for `key` (?1; ?2: with_body). */
static int
one_report(struct store *st, enum stmt_id id, const char *key, size_t maxlen,
           bool with_body, const char *what, struct store_report *out)
{
    sqlite3_stmt *s = st->stmt[id];
    struct store_reports l = {NULL, 0};
    int result;

    memset(out, 0, sizeof(*out));
    if (!sdb_valid_id(key, maxlen))
        return sdb_invalid(st, what);
    result = sdb_bind_text(st, s, 1, key, strlen(key), what);
    if (result == STORE_OK)
        result = sdb_bind_int(st, s, 2, with_body, what);
    if (result != STORE_OK) {
        sdb_done(s);
        return result;
    }
    result = list_reports(st, s, &l, what);
    if (result != STORE_OK)
        return result;
    if (l.n == 0)
        return STORE_NOT_FOUND;
    *out = l.v[0]; /* one row at most: a primary key, or LIMIT 1 */
    free(l.v);
    return STORE_OK;
}

int
store_get_report(struct store *st, const char *report_id, bool with_body,
                 struct store_report *out)
{
    return one_report(st, S_REPORT_GET, report_id, STORE_REPORT_ID_MAX,
                      with_body, "get report", out);
}

int
store_latest_report(struct store *st, const char *container_id,
                    struct store_report *out)
{
    return one_report(st, S_REPORT_LATEST, container_id, STORE_ID_MAX, false,
                      "latest report", out);
}

int
store_latest_report_body(struct store *st, const char *container_id,
                         struct store_report *out)
{
    return one_report(st, S_REPORT_LATEST, container_id, STORE_ID_MAX, true,
                      "latest report", out);
}

int
store_after(struct store *st, const struct store_query *q,
            struct store_reports *out)
{
    static const char what[] = "reports after";
    sqlite3_stmt *s = st->stmt[q->newest_first ? S_AFTER_DESC : S_AFTER];
    const char *state = q->state >= 0 ? store_state_name(q->state) : NULL;
    int result;

    out->v = NULL;
    out->n = 0;
    if (q->max > STORE_LIST_MAX || q->after < 0 ||
        (q->container_id != NULL &&
         !sdb_valid_id(q->container_id, STORE_ID_MAX)) ||
        (q->state >= 0 && state == NULL))
        return sdb_invalid(st, what);
    result = sdb_bind_int(st, s, 1, q->after, what);
    if (result == STORE_OK)
        result = sdb_bind_int(st, s, 2, (int64_t)q->max, what);
    if (result == STORE_OK && q->container_id != NULL)
        result = sdb_bind_text(st, s, 3, q->container_id,
                               strlen(q->container_id), what);
    if (result == STORE_OK && state != NULL)
        result = sdb_bind_text(st, s, 4, state, strlen(state), what);
    if (result == STORE_OK)
        result = sdb_bind_int(st, s, 5, q->with_body, what);
    if (result != STORE_OK) {
        sdb_done(s);
        return result;
    }
    /* Unbound parameters are NULL; sdb_done() clears them all after. */
    return list_reports(st, s, out, what);
}

int
store_last_seq(struct store *st, int64_t *seq)
{
    static const char what[] = "last seq";
    sqlite3_stmt *s = st->stmt[S_LAST_SEQ];
    int rc = sqlite3_step(s), result = STORE_OK;

    if (rc == SQLITE_ROW)
        *seq = sqlite3_column_int64(s, 0);
    else if (rc == SQLITE_DONE) {
        snprintf(st->errmsg, sizeof(st->errmsg),
                 "%s: the report sequence is missing", what);
        result = STORE_CORRUPT;
    } else
        result = sdb_fail(st, rc, what);
    sdb_done(s);
    return result;
}
