/*
 * store_records — container records and checkpoints, pending until a
 * flush: the latest change per key waits in a hash table in memory, and
 * store_flush and its variants write them (all, or a slice) in one
 * transaction; a change leaves the table only once its transaction has
 * committed. The functions of store.h for records and checkpoints are
 * here; this header is what the store's other files use of the table (a
 * report's transaction takes a slice along, store_outbox.c). Private to
 * the store's files (store_int.h); the prefix pend_.
 */
#ifndef REAPD_STORE_RECORDS_H
#define REAPD_STORE_RECORDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store_int.h"

enum pend_kind { P_CONTAINER, P_CHECKPOINT };

/* One change waiting for store_flush. */
struct pend {
    char *key; /* NULL: a free slot */
    enum pend_kind kind;
    bool del; /* P_CONTAINER: delete the record */
    /* P_CONTAINER: its report's transaction deletes the record
     * (store_add_reports, `forget`): not written by it. */
    bool forgotten;
    /* P_CONTAINER put whose JSON the record source gives when it is
     * written (store_mark_container); json is NULL meanwhile. */
    bool marked;
    char *json; /* P_CONTAINER put: the record */
    size_t len;
    int64_t value; /* P_CHECKPOINT: the value; P_CONTAINER: updated_ms */
};

/*
 * What one transaction writes of the pending changes (pend_write): all of
 * them, or at most STORE_FLUSH_MAX container records (checkpoints only
 * with all: one must never be on disk ahead of a record changed before
 * it). The keys are the entries' own, valid until pend_written removes them.
 */
struct pend_pick {
    bool all;
    size_t n;
    const char *ids[STORE_FLUSH_MAX];
};

/* The slot of `tab` (`cap` slots) holding (kind, key), or the free slot
 * where it would go. */
struct pend *pend_slot(struct pend *tab, size_t cap, enum pend_kind kind,
                       const char *key);
/* The pending change of (kind, id), or NULL. */
struct pend *pend_find(struct store *st, enum pend_kind kind, const char *id);
/* Empties the table (frees every entry; a table grown large shrinks). */
void pend_clear(struct store *st);
/* Takes entry `p` out of the table and frees it. */
void pend_remove(struct store *st, struct pend *p);

/*
 * Writes pending changes into the transaction begun: every one when no
 * more than `max` container records wait, else the records of the `nids`
 * containers `ids` and others, up to `max` in all; what it wrote is in
 * *pk. Nothing leaves the table until pend_written, after the commit.
 */
int pend_write(struct store *st, const char *const *ids, size_t nids,
               size_t max, struct pend_pick *pk);
/* After the commit: what pend_write wrote leaves the table. */
void pend_written(struct store *st, const struct pend_pick *pk);

#endif
