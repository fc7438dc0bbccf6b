/*
 * backoff — capped exponential delays with jitter, as a pure function.
 *
 * Every retry in reapd (engine calls, the events stream, upstream delivery)
 * spaces its attempts with this one rule, so a fleet of agents that lost
 * the same engine or upstream at the same moment does not come back in
 * lockstep. The randomness is an argument, which keeps callers testable.
 */
#ifndef REAPD_BACKOFF_H
#define REAPD_BACKOFF_H

#include <stdint.h>

/*
 * Delay before retry number `attempt` (1 = first retry): the capped value
 * d = min(cap_ms, base_ms * 2^(attempt-1)), then "equal jitter": a value
 * uniformly drawn from [d/2, d] using `rnd`. Never more than cap_ms, never
 * less than base_ms/2 (when cap_ms >= base_ms).
 */
uint64_t backoff_delay_ms(unsigned attempt, uint64_t base_ms, uint64_t cap_ms,
                          uint32_t rnd);

/* A fast non-cryptographic generator for jitter (xorshift32); the state
 * must be seeded non-zero. */
uint32_t backoff_rand(uint32_t *state);

#endif
