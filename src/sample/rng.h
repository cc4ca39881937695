/* rng.h: the portable pseudo-random generator behind sampling: xoshiro256** (Blackman and Vigna),
 * seeded by running splitmix64 over a 64-bit seed. The stream depends only on the seed, never on
 * the platform, compiler or libc, so a seed reproduces the same tokens everywhere. */
#ifndef MF_RNG_H
#define MF_RNG_H

#include <stdint.h>

typedef struct mf_rng {
    uint64_t s[4];
} mf_rng;

static inline uint64_t mf_rng_splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* The four state words are four consecutive splitmix64 outputs; they are never all zero. */
static inline void mf_rng_seed(mf_rng *r, uint64_t seed) {
    for (int i = 0; i < 4; i++) r->s[i] = mf_rng_splitmix64(&seed);
}

static inline uint64_t mf_rng_rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static inline uint64_t mf_rng_next(mf_rng *r) {
    uint64_t *s = r->s;
    uint64_t result = mf_rng_rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = mf_rng_rotl(s[3], 45);
    return result;
}

/* Uniform in [0, 1): the top 53 bits as a double, every value a multiple of 2^-53. */
static inline double mf_rng_uniform(mf_rng *r) { return (double)(mf_rng_next(r) >> 11) * 0x1.0p-53; }

#endif /* MF_RNG_H */
