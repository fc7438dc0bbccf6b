/*
 * feed — tells the read API's held requests that a report has become
 * durable: an executor's wait for one container (GET
 * /v1/containers/{id}/report?wait=S) and the subscribers of the report
 * stream (GET /v1/reports/stream).
 *
 * The store calls feed_publish from inside the commit that made the
 * report; subscribers hear of it on the next loop turn, never from that
 * call, so an HTTP answer is never written from the middle of the
 * reaper's own work. What a subscriber learns is only "look again": the
 * report itself is read back from the store, which is what makes a
 * report seen by a waiter exactly the durable one.
 */
#ifndef REAPD_FEED_H
#define REAPD_FEED_H

#include <stddef.h>

struct event_base;
struct feed;
struct feed_sub;

/* Containers remembered between two loop turns; beyond this many, every
 * subscriber is told to look (a burst costs a few extra store reads). */
#define FEED_IDS_MAX 64

/* Called on the loop when a report that may concern `sub` is durable.
 * It may free `sub` or any other subscription, and make new ones (they
 * hear of later reports only). */
typedef void (*feed_cb)(struct feed_sub *sub, void *arg);

/* NULL when out of memory. */
struct feed *feed_new(struct event_base *base);
/* Frees every subscription left, without calling anyone. NULL is fine. */
void feed_free(struct feed *f);

/* A report for container `container_id` (copied) is durable. */
void feed_publish(struct feed *f, const char *container_id);

/* Hears of reports for `container_id` (copied; NULL: every report).
 * NULL when out of memory or the id is longer than 128 bytes. Freed by
 * feed_sub_free or feed_free. */
struct feed_sub *feed_sub_new(struct feed *f, const char *container_id,
                              feed_cb cb, void *arg);
void feed_sub_free(struct feed_sub *sub);

/* Subscriptions alive now. */
size_t feed_subs(const struct feed *f);

#endif
