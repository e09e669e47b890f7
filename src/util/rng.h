/* A small seeded random number generator (xoshiro256**, seeded through
 * splitmix64): the engine's sampling and the load generator's prompts and
 * arrivals both draw from it, so a seed gives the same numbers everywhere. */
#ifndef CLLM_UTIL_RNG_H
#define CLLM_UTIL_RNG_H

#include <stdint.h>

typedef struct {
    uint64_t s[4];
} rng_state;

void rng_seed(rng_state *r, uint64_t seed);
uint64_t rng_next(rng_state *r);
/* Uniform in [0, 1). */
double rng_uniform(rng_state *r);

#endif
