/*
 * store_records — container records and checkpoints, pending in memory
 * until a flush writes them; see store_records.h.
 *
 * Records and checkpoints change on the hot path (every lifecycle step,
 * every event); each put or set only replaces the key's entry in the
 * table (the latest value wins), and one transaction writes them all.
 */
#include "store_records.h"

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store_db.h"

#define PEND_MIN_CAP 64

/* ---- the table -------------------------------------------------------- */

static uint64_t
pend_hash(enum pend_kind kind, const char *key)
{
    uint64_t h = 0xcbf29ce484222325ull ^ (uint64_t)kind;

    for (; *key != '\0'; key++) {
        h ^= (unsigned char)*key;
        h *= 0x100000001b3ull;
    }
    return h;
}

/* The slot holding (kind, key), or the free slot where it would go. */
struct pend *
pend_slot(struct pend *tab, size_t cap, enum pend_kind kind, const char *key)
{
    size_t i = (size_t)pend_hash(kind, key) & (cap - 1);

    while (tab[i].key != NULL &&
           (tab[i].kind != kind || strcmp(tab[i].key, key) != 0))
        i = (i + 1) & (cap - 1);
    return &tab[i];
}

/* The pending change of record `id`, or NULL. */
struct pend *
pend_find(struct store *st, enum pend_kind kind, const char *id)
{
    struct pend *p;

    if (st->pend_cap == 0)
        return NULL;
    p = pend_slot(st->pend, st->pend_cap, kind, id);
    return p->key != NULL ? p : NULL;
}

void
pend_clear(struct store *st)
{
    size_t i;

    for (i = 0; i < st->pend_cap; i++) {
        free(st->pend[i].key);
        free(st->pend[i].json);
    }
    /* A table grown while flushes failed shrinks back. */
    if (st->pend_cap > 16 * PEND_MIN_CAP) {
        free(st->pend);
        st->pend = NULL;
        st->pend_cap = 0;
    } else if (st->pend != NULL) {
        memset(st->pend, 0, st->pend_cap * sizeof(*st->pend));
    }
    st->npend = 0;
    st->nckpt = 0;
    st->pend_bytes = 0;
}

static int
pend_grow(struct store *st)
{
    size_t cap = st->pend_cap == 0 ? PEND_MIN_CAP : st->pend_cap * 2, i;
    struct pend *tab;

    tab = calloc(cap, sizeof(*tab));
    if (tab == NULL)
        return STORE_NOMEM;
    for (i = 0; i < st->pend_cap; i++) {
        if (st->pend[i].key != NULL)
            *pend_slot(tab, cap, st->pend[i].kind, st->pend[i].key) =
                st->pend[i];
    }
    free(st->pend);
    st->pend = tab;
    st->pend_cap = cap;
    return STORE_OK;
}

/* Takes one entry out of the table, by backward shift: the entries
 * after it in its probe run move up, so no lookup ever stops short. */
void
pend_remove(struct store *st, struct pend *p)
{
    size_t mask = st->pend_cap - 1, i = (size_t)(p - st->pend), j = i, home;

    st->pend_bytes -= p->len;
    st->npend--;
    if (p->kind == P_CHECKPOINT)
        st->nckpt--;
    free(p->key);
    free(p->json);
    memset(p, 0, sizeof(*p));
    for (;;) {
        j = (j + 1) & mask;
        if (st->pend[j].key == NULL)
            return;
        home = (size_t)pend_hash(st->pend[j].kind, st->pend[j].key) & mask;
        /* Stays when its home is cyclically within (i, j]. */
        if (i <= j ? (i < home && home <= j) : (i < home || home <= j))
            continue;
        st->pend[i] = st->pend[j];
        memset(&st->pend[j], 0, sizeof(st->pend[j]));
        i = j;
    }
}

/*
 * The entry for (kind, key), made if new, for a value of `bytes` bytes
 * replacing the entry's current one. Refuses (STORE_FULL) to grow past
 * the bounds: the caller's loop must not eat memory while the disk is
 * full.
 */
static int
pend_get(struct store *st, enum pend_kind kind, const char *key, size_t bytes,
         struct pend **out)
{
    struct pend *p = NULL;
    char *k;
    int result;

    if (st->pend_cap > 0)
        p = pend_slot(st->pend, st->pend_cap, kind, key);
    if (p != NULL && p->key != NULL) {
        if (st->pend_bytes - p->len + bytes > STORE_PENDING_BYTES_MAX)
            goto full;
        *out = p;
        return STORE_OK;
    }
    if (st->npend >= STORE_PENDING_MAX ||
        st->pend_bytes + bytes > STORE_PENDING_BYTES_MAX)
        goto full;
    if ((st->npend + 1) * 2 > st->pend_cap) {
        result = pend_grow(st);
        if (result != STORE_OK)
            return result;
    }
    k = strdup(key);
    if (k == NULL)
        return STORE_NOMEM;
    p = pend_slot(st->pend, st->pend_cap, kind, key);
    p->key = k;
    p->kind = kind;
    st->npend++;
    if (kind == P_CHECKPOINT)
        st->nckpt++;
    *out = p;
    return STORE_OK;
full:
    snprintf(st->errmsg, sizeof(st->errmsg),
             "too many changes waiting for a flush (%zu, %zu bytes)",
             st->npend, st->pend_bytes);
    return STORE_FULL;
}

size_t
store_pending(const struct store *st)
{
    return st->npend;
}

/* ---- records and checkpoints ------------------------------------------ */

int
store_put_container(struct store *st, const char *id, const char *json,
                    size_t len, int64_t now_ms)
{
    struct pend *p;
    char *copy;
    int result;

    if (!sdb_valid_id(id, STORE_ID_MAX) ||
        !sdb_valid_body(json, len, STORE_RECORD_MAX))
        return sdb_invalid(st, "put container");
    copy = malloc(len + 1);
    if (copy == NULL)
        return STORE_NOMEM;
    memcpy(copy, json, len);
    copy[len] = '\0';
    result = pend_get(st, P_CONTAINER, id, len, &p);
    if (result != STORE_OK) {
        free(copy);
        return result;
    }
    st->pend_bytes = st->pend_bytes - p->len + len;
    free(p->json);
    p->json = copy;
    p->len = len;
    p->del = false;
    p->marked = false;
    p->value = now_ms;
    return STORE_OK;
}

int
store_set_record_source(struct store *st, store_record_source_cb cb, void *arg)
{
    int result = STORE_OK;
    size_t i;

    if (st->record_src != NULL)
        result = store_fill_marked(st, NULL);
    /* What could not be read goes: no source is left to read it. */
    for (i = 0; i < st->pend_cap;) {
        if (st->pend[i].key != NULL && st->pend[i].marked)
            pend_remove(st, &st->pend[i]);
        else
            i++;
    }
    st->record_src = cb;
    st->record_src_arg = arg;
    return result;
}

/* Container `id`'s entry, without JSON: a delete, or a mark. */
static int
container_change(struct store *st, const char *id, bool del, int64_t now_ms)
{
    struct pend *p;
    int result = pend_get(st, P_CONTAINER, id, 0, &p);

    if (result != STORE_OK)
        return result;
    st->pend_bytes -= p->len;
    free(p->json);
    p->json = NULL;
    p->len = 0;
    p->del = del;
    p->marked = !del;
    if (!del)
        p->value = now_ms;
    return STORE_OK;
}

int
store_mark_container(struct store *st, const char *id, int64_t now_ms)
{
    if (!sdb_valid_id(id, STORE_ID_MAX) || st->record_src == NULL)
        return sdb_invalid(st, "mark container");
    return container_change(st, id, false, now_ms);
}

/* The JSON of marked entry `p`, from the source: STORE_OK (*json is the
 * caller's), STORE_NOT_FOUND (nothing to write), or an error. */
static int
source_read(struct store *st, const struct pend *p, char **json, size_t *len)
{
    int result = st->record_src(p->key, json, len, st->record_src_arg);

    if (result == STORE_NOT_FOUND)
        return result;
    if (result != STORE_OK) {
        snprintf(st->errmsg, sizeof(st->errmsg), "record %.64s: not made (%d)",
                 p->key, result);
        return result < 0 ? result : STORE_ERROR;
    }
    if (!sdb_valid_body(*json, *len, STORE_RECORD_MAX)) {
        free(*json);
        *json = NULL;
        return sdb_invalid(st, "record source");
    }
    return STORE_OK;
}

/* Marked entry `p` read now and kept as a put, or dropped (nothing to
 * write); the entries after it may move when it is dropped. */
static int
fill_one(struct store *st, struct pend *p)
{
    char *json;
    size_t len;
    int result = source_read(st, p, &json, &len);

    if (result == STORE_NOT_FOUND) {
        pend_remove(st, p);
        return STORE_OK;
    }
    if (result != STORE_OK)
        return result;
    p->json = json;
    p->len = len;
    p->marked = false;
    st->pend_bytes += len;
    return STORE_OK;
}

int
store_fill_marked(struct store *st, const char *id)
{
    struct pend *p;
    size_t i;
    int result;

    if (id != NULL) {
        p = pend_find(st, P_CONTAINER, id);
        return p != NULL && p->marked ? fill_one(st, p) : STORE_OK;
    }
    /* A drop shifts later entries back into slot i: look at it again. */
    for (i = 0; i < st->pend_cap;) {
        p = &st->pend[i];
        if (p->key == NULL || !p->marked) {
            i++;
            continue;
        }
        result = fill_one(st, p);
        if (result != STORE_OK)
            return result;
    }
    return STORE_OK;
}

int
store_delete_container(struct store *st, const char *id)
{
    if (!sdb_valid_id(id, STORE_ID_MAX))
        return sdb_invalid(st, "delete container");
    return container_change(st, id, true, 0);
}

int
store_set_checkpoint(struct store *st, const char *key, int64_t value)
{
    struct pend *p;
    int result;

    if (!sdb_valid_id(key, STORE_KEY_MAX))
        return sdb_invalid(st, "set checkpoint");
    result = pend_get(st, P_CHECKPOINT, key, 0, &p);
    if (result != STORE_OK)
        return result;
    p->value = value;
    return STORE_OK;
}

int
store_get_checkpoint(struct store *st, const char *key, int64_t *value)
{
    sqlite3_stmt *s = st->stmt[S_CKPT_GET];
    struct pend *p;
    int rc, result;

    if (!sdb_valid_id(key, STORE_KEY_MAX))
        return sdb_invalid(st, "get checkpoint");
    if (st->pend_cap > 0) {
        p = pend_slot(st->pend, st->pend_cap, P_CHECKPOINT, key);
        if (p->key != NULL) {
            *value = p->value;
            return STORE_OK;
        }
    }
    result = sdb_bind_text(st, s, 1, key, strlen(key), "get checkpoint");
    if (result != STORE_OK)
        goto out;
    rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) {
        *value = sqlite3_column_int64(s, 0);
        result = STORE_OK;
    } else if (rc == SQLITE_DONE) {
        result = STORE_NOT_FOUND;
    } else {
        result = sdb_fail(st, rc, "get checkpoint");
    }
out:
    sdb_done(s);
    return result;
}

/* ---- flushes ---------------------------------------------------------- */

static int
put_row(struct store *st, const char *id, const char *json, size_t len,
        int64_t updated_ms)
{
    static const char what[] = "flush";
    sqlite3_stmt *s = st->stmt[S_CTR_PUT];
    int result;

    st->record_writes_tx++;
    result = sdb_bind_text(st, s, 1, id, strlen(id), what);
    if (result == STORE_OK)
        result = sdb_bind_text(st, s, 2, json, len, what);
    if (result == STORE_OK)
        result = sdb_bind_int(st, s, 3, updated_ms, what);
    if (result != STORE_OK) {
        sdb_done(s);
        return result;
    }
    return sdb_run(st, S_CTR_PUT, what);
}

/* A marked record, read from the source as it is now; nothing is written
 * when the source has nothing (the entry still leaves with the commit). */
static int
flush_marked(struct store *st, const struct pend *p)
{
    char *json;
    size_t len;
    int result = source_read(st, p, &json, &len);

    if (result == STORE_NOT_FOUND)
        return STORE_OK;
    if (result != STORE_OK)
        return result;
    result = put_row(st, p->key, json, len, p->value);
    free(json);
    return result;
}

static int
flush_one(struct store *st, const struct pend *p)
{
    static const char what[] = "flush";
    sqlite3_stmt *s;
    int result;

    if (p->kind == P_CHECKPOINT) {
        s = st->stmt[S_CKPT_SET];
        result = sdb_bind_text(st, s, 1, p->key, strlen(p->key), what);
        if (result == STORE_OK)
            result = sdb_bind_int(st, s, 2, p->value, what);
        if (result != STORE_OK) {
            sdb_done(s);
            return result;
        }
        return sdb_run(st, S_CKPT_SET, what);
    }
    if (p->marked)
        return flush_marked(st, p);
    if (!p->del)
        return put_row(st, p->key, p->json, p->len, p->value);
    st->record_writes_tx++;
    s = st->stmt[S_CTR_DELETE];
    result = sdb_bind_text(st, s, 1, p->key, strlen(p->key), what);
    if (result != STORE_OK) {
        sdb_done(s);
        return result;
    }
    return sdb_run(st, S_CTR_DELETE, what);
}

static int
write_pick(struct store *st, struct pend_pick *pk, struct pend *p)
{
    int result = flush_one(st, p);

    if (result == STORE_OK && !pk->all)
        pk->ids[pk->n++] = p->key;
    return result;
}

/* Whether entry `p` was picked already (the keys are the entries' own). */
static bool
picked(const struct pend_pick *pk, const struct pend *p)
{
    size_t i;

    for (i = 0; i < pk->n; i++)
        if (pk->ids[i] == p->key)
            return true;
    return false;
}

/*
 * The pending changes into the transaction begun: every one when no more
 * than `max` wait, else the records of the `nids` containers `ids` (those
 * pending; at most STORE_REPORTS_MAX) and other records, up to `max` in
 * all (the named ones are written whatever `max`). They leave memory only
 * once the transaction commits (pend_written).
 */
int
pend_write(struct store *st, const char *const *ids, size_t nids, size_t max,
           struct pend_pick *pk)
{
    struct pend *p;
    size_t i, nnamed;
    int result;

    pk->n = 0;
    pk->all = st->npend - st->nckpt <= max;
    if (pk->all)
        nids = 0;
    if (nids > STORE_REPORTS_MAX)
        nids = STORE_REPORTS_MAX;
    if (max > STORE_FLUSH_MAX)
        max = STORE_FLUSH_MAX;
    for (i = 0; i < nids; i++) {
        p = pend_slot(st->pend, st->pend_cap, P_CONTAINER, ids[i]);
        if (p->key == NULL || p->forgotten || picked(pk, p))
            continue;
        result = write_pick(st, pk, p);
        if (result != STORE_OK)
            return result;
    }
    nnamed = pk->n;
    for (i = 0; i < st->pend_cap && (pk->all || pk->n < max); i++) {
        p = &st->pend[i];
        if (p->key == NULL || p->forgotten ||
            (!pk->all && p->kind != P_CONTAINER))
            continue;
        if (nnamed > 0 && !pk->all) {
            size_t j;

            for (j = 0; j < nnamed && pk->ids[j] != p->key; j++)
                ;
            if (j < nnamed)
                continue;
        }
        result = write_pick(st, pk, p);
        if (result != STORE_OK)
            return result;
    }
    return STORE_OK;
}

/* After the commit: what pend_write wrote leaves memory. */
void
pend_written(struct store *st, const struct pend_pick *pk)
{
    size_t i;

    if (pk->all) {
        pend_clear(st);
        return;
    }
    for (i = 0; i < pk->n; i++)
        pend_remove(
            st, pend_slot(st->pend, st->pend_cap, P_CONTAINER, pk->ids[i]));
}

int
store_flush_ids(struct store *st, const char *const *ids, size_t nids,
                size_t max)
{
    struct pend_pick pk;
    int result;

    if (st->npend == 0 || max == 0)
        return STORE_OK;
    result = sdb_begin(st, "flush");
    if (result != STORE_OK)
        return result;
    result = pend_write(st, ids, nids, max, &pk);
    if (result != STORE_OK) {
        sdb_rollback(st);
        return result;
    }
    result = sdb_commit(st, "flush");
    if (result != STORE_OK)
        return result;
    /* Only now, committed, may the changes leave memory. */
    pend_written(st, &pk);
    return STORE_OK;
}

int
store_flush_some(struct store *st, const char *id, size_t max)
{
    return store_flush_ids(st, &id, id != NULL ? 1 : 0, max);
}

int
store_flush(struct store *st)
{
    return store_flush_some(st, NULL, SIZE_MAX);
}

int
store_flush_synced(struct store *st)
{
    int result;

    if (st->npend == 0)
        return STORE_OK;
    result = sdb_set_full_sync(st, true, "flush");
    if (result != STORE_OK)
        return result;
    result = store_flush(st);
    /* Back to cheap commits; if that fails, FULL stays: slower, safe. */
    sdb_set_full_sync(st, false, "flush");
    return result;
}

/* ---- reading the records back ---------------------------------------- */

static int
container_append(struct store *st, struct store_containers *l, size_t *cap,
                 const char *id, const char *json, size_t len,
                 int64_t updated_ms)
{
    struct store_container *c;

    if (strlen(id) > STORE_ID_MAX || json == NULL) {
        snprintf(st->errmsg, sizeof(st->errmsg),
                 "container record: malformed row");
        return STORE_CORRUPT;
    }
    if (l->n == *cap) {
        size_t ncap = *cap == 0 ? 16 : *cap * 2;

        c = realloc(l->v, ncap * sizeof(*c));
        if (c == NULL)
            return STORE_NOMEM;
        l->v = c;
        *cap = ncap;
    }
    c = &l->v[l->n];
    memset(c, 0, sizeof(*c));
    c->json = malloc(len + 1);
    if (c->json == NULL)
        return STORE_NOMEM;
    memcpy(c->json, json, len);
    c->json[len] = '\0';
    c->len = len;
    snprintf(c->id, sizeof(c->id), "%s", id);
    c->updated_ms = updated_ms;
    l->n++;
    return STORE_OK;
}

void
store_containers_free(struct store_containers *l)
{
    size_t i;

    if (l == NULL)
        return;
    for (i = 0; i < l->n; i++)
        free(l->v[i].json);
    free(l->v);
    l->v = NULL;
    l->n = 0;
}

int
store_get_containers(struct store *st, struct store_containers *out)
{
    sqlite3_stmt *s = st->stmt[S_CTR_ALL];
    size_t cap = 0, i;
    const char *id;
    int rc, result = STORE_OK;

    out->v = NULL;
    out->n = 0;
    result = store_fill_marked(st, NULL);
    if (result != STORE_OK)
        goto out;
    for (;;) {
        rc = sqlite3_step(s);
        if (rc == SQLITE_DONE)
            break;
        if (rc != SQLITE_ROW) {
            result = sdb_fail(st, rc, "get containers");
            goto out;
        }
        id = (const char *)sqlite3_column_text(s, 0);
        if (id == NULL) {
            result = container_append(st, out, &cap, "", NULL, 0, 0);
            goto out;
        }
        /* A pending change (put or delete) is newer than the row. */
        if (st->pend_cap > 0 &&
            pend_slot(st->pend, st->pend_cap, P_CONTAINER, id)->key != NULL)
            continue;
        result = container_append(
            st, out, &cap, id, (const char *)sqlite3_column_text(s, 1),
            (size_t)sqlite3_column_bytes(s, 1), sqlite3_column_int64(s, 2));
        if (result != STORE_OK)
            goto out;
    }
    for (i = 0; i < st->pend_cap; i++) {
        const struct pend *p = &st->pend[i];

        if (p->key == NULL || p->kind != P_CONTAINER || p->del)
            continue;
        result =
            container_append(st, out, &cap, p->key, p->json, p->len, p->value);
        if (result != STORE_OK)
            goto out;
    }
out:
    sdb_done(s);
    if (result != STORE_OK)
        store_containers_free(out);
    return result;
}
