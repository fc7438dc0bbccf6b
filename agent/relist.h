/*
 * relist — the engine's whole container list, asked for and taken in a
 * slice per loop turn.
 *
 * A relist reconciles the reaper with the engine after every
 * (re)subscription and after events were lost. Its answer can hold
 * 100,000 containers: the entries are handed to `take` a slice of time
 * per loop turn, so that probes and events are answered meanwhile, and
 * the answer is given back to the system a slice per turn too. One relist
 * at a time: a newer one drops the answer still being taken in. A
 * container destroyed after the list was sent is tombstoned and its
 * entry skipped (the snapshot predates its destroy). A list that fails is
 * sent again after a backoff.
 *
 * Owns the request, the answer and its timers; calls down only (docker,
 * loop). What it finds goes to its owner (the reaper's driver) through
 * the callbacks given at relist_new.
 */
#ifndef REAPD_RELIST_H
#define REAPD_RELIST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct docker;
struct docker_container;
struct loop;
struct relist;

struct relist_cbs {
    /* The list call sent at `t0` (loop_now_ms) was answered (`ok`, with
     * `n` entries to come) or failed. */
    void (*answered)(void *arg, uint64_t t0, bool ok, size_t n);
    /* Entry e of relist `gen` (valid during the call): 0, or -1 when it
     * could not be taken in (out of memory; the relist is then
     * incomplete). */
    int (*take)(void *arg, const struct docker_container *e, uint32_t gen);
    /* Every entry of relist `gen` (n of them) is taken in; `incomplete`:
     * some could not be. */
    void (*finish)(void *arg, uint32_t gen, size_t n, bool incomplete);
    /* What is taken in cannot be written now: the entries wait (NULL:
     * never). */
    bool (*behind)(void *arg);
};

/* NULL when out of memory. `cb` is static, borrowed; `d` borrowed. */
struct relist *relist_new(struct loop *l, struct docker *d,
                          const struct relist_cbs *cb, void *arg);
/* Cancels the request, frees the answer; callbacks are not called. */
void relist_free(struct relist *rl);

/* Sends a relist now; one in flight or half taken in is dropped. */
void relist_send(struct relist *rl);
/* Sends one in `ms`, replacing any already scheduled. */
void relist_after(struct relist *rl, uint64_t ms);
/* Sends one in `ms` unless one is already scheduled: bursts share it. */
void relist_soon(struct relist *rl, uint64_t ms);
/* Container `id` was destroyed: an answer sent before may still list it. */
void relist_tombstone(struct relist *rl, const char *id);

/* The generation of the last relist sent (bumped at each send). */
uint32_t relist_gen(const struct relist *rl);
/* Relists answered. */
uint64_t relist_count(const struct relist *rl);
/* The retry backoff's cap (docker.reconnect_max_ms). */
void relist_set_retry_max_ms(struct relist *rl, uint64_t ms);
/* How long entries are taken in per loop turn (tests make it tiny). */
void relist_set_slice_ns(struct relist *rl, uint64_t ns);

#endif
