/*
 * bio — one thread for the disk work the loop must not wait for.
 *
 * Copying the state database's WAL into the database ends with two
 * syncs, which on an ordinary disk take longer than the loop may wait:
 * it is to answer within a few milliseconds. So that work runs here (as
 * Redis's bio.c runs its fsyncs): one job at a time, and the loop is told
 * of its end through a pipe, so the job's callback runs on the loop, in a
 * turn of its own.
 */
#ifndef REAPD_BIO_H
#define REAPD_BIO_H

#include <stdbool.h>

struct event_base;
struct bio;

/* Runs on the bio thread: only what the submitter handed it, nothing the
 * loop touches meanwhile. Its return value reaches bio_done_cb. */
typedef int (*bio_job_fn)(void *arg);
/* Runs on the loop, after the job. */
typedef void (*bio_done_cb)(int result, void *arg);

/* NULL when the thread, the pipe or memory cannot be had (the caller
 * does the work on the loop instead). */
struct bio *bio_new(struct event_base *base);
/* Waits for a job in flight (its done callback is not called), then
 * stops the thread and frees everything. NULL is fine. */
void bio_free(struct bio *b);

/* Hands `fn(arg)` to the thread; `done(result, arg)` follows on the
 * loop. 0, or -1 when a job is in flight already. */
int bio_run(struct bio *b, bio_job_fn fn, bio_done_cb done, void *arg);
/* A job is in flight: its done callback has not run yet. */
bool bio_busy(const struct bio *b);

#endif
