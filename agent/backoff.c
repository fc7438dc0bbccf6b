/*
 * backoff — see backoff.h. Pure arithmetic; no clock, no global state.
 */
#include "backoff.h"

uint64_t
backoff_delay_ms(unsigned attempt, uint64_t base_ms, uint64_t cap_ms,
                 uint32_t rnd)
{
    uint64_t d = base_ms;
    unsigned i;

    if (attempt == 0)
        attempt = 1;
    for (i = 1; i < attempt && d < cap_ms && d != 0; i++) {
        if (d > UINT64_MAX / 2) {
            d = cap_ms; /* doubling would pass any cap */
            break;
        }
        d *= 2;
    }
    if (d > cap_ms)
        d = cap_ms;
    return d / 2 + (uint64_t)rnd % (d - d / 2 + 1);
}

uint32_t
backoff_rand(uint32_t *state)
{
    uint32_t x = *state ? *state : 0x9e3779b9u;

    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    *state = x;
    return x;
}
