/*
 * outbox — delivers the stored reports upstream, at least once.
 *
 * The store holds every report (pending, delivered, dead); the upstream
 * module makes the HTTP attempts and owns a report's retries once it has
 * it. This module joins the two: it hands upstream the reports the store
 * says are due (the oldest pending one of each container, so delivery is
 * in order per container) and writes each outcome back. After a restart
 * the store still says which reports are pending, so they go out again,
 * with the same report_id as Idempotency-Key.
 *
 * A report that can never be delivered as it is (larger than upstream
 * takes, or ids upstream does not take) is never sent: it becomes a dead
 * letter with its reason (store_dead_reason) as soon as it is due, so it
 * holds back neither the reports after it nor anybody else's.
 */
#ifndef REAPD_OUTBOX_H
#define REAPD_OUTBOX_H

#include <stddef.h>
#include <stdint.h>

struct loop;
struct store;
struct upstream;
struct outbox;

/* Both borrowed; they must outlive the outbox. NULL when out of memory. */
struct outbox *outbox_new(struct loop *l, struct store *st,
                          struct upstream *u);
void outbox_free(struct outbox *ob);

/* Something may be due now (a report was just stored). Cheap; the work
 * happens on the next loop turn. */
void outbox_kick(struct outbox *ob);

/* The upstream callbacks to give upstream_new, with the outbox as `arg`. */
struct upstream_cbs;
const struct upstream_cbs *outbox_upstream_cbs(void);

/* Binds the upstream made with outbox_upstream_cbs (it needs the outbox
 * as its callback argument, so it is created after it). */
void outbox_set_upstream(struct outbox *ob, struct upstream *u);

struct outbox_stats {
    uint64_t delivered; /* since start */
    uint64_t retries;
    uint64_t dead; /* refused upstream, or never deliverable */
    uint64_t store_errors;
    /* Outcomes (delivered, dead) held in memory because the state could
     * not be written (disk full); not sent again meanwhile. */
    size_t unrecorded;
};
void outbox_stats(const struct outbox *ob, struct outbox_stats *out);

#endif
