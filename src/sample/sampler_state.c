/* sampler_state.c: the sampler's mutable state as a byte image (random stream, Mirostat's mu, the
 * penalty and DRY windows), and forgetting the history alone, so a conversation saved to a file
 * continues with exactly the draws it would have made (layout in minfer/sample.h). */
#include "sample/sampler_internal.h"

#include "core/core.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define STATE_MAGIC "MFSMPL\0"
#define STATE_VERSION 1u
#define STATE_HEADER 64u

/* Little-endian fields at fixed offsets (the format is defined byte by byte, not by a struct). */
static void put32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static void put64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static uint32_t get32(const uint8_t *p) {
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) v |= (uint32_t)p[i] << (8 * i);
    return v;
}
static uint64_t get64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

void mf_sampler_clear_history(mf_sampler *s) { mf_history_reset(s); }

size_t mf_sampler_state_size(const mf_sampler *s) { return STATE_HEADER + 4 * (s->pen.len + s->dry.len); }

mf_status mf_sampler_state_save(const mf_sampler *s, void *buf, size_t cap, size_t *written) {
    *written = 0;
    const size_t need = mf_sampler_state_size(s);
    if (cap < need) return mf_fail(MF_ERR_RANGE, "sampler state: needs %zu bytes, the buffer has %zu", need, cap);
    uint8_t *p = buf;
    memset(p, 0, STATE_HEADER);
    memcpy(p, STATE_MAGIC, 8);
    put32(p + 8, STATE_VERSION);
    put32(p + 12, (uint32_t)s->n_vocab);
    put32(p + 16, s->seed);
    put32(p + 20, (uint32_t)s->pen.len);
    put32(p + 24, (uint32_t)s->dry.len);
    uint32_t mu;
    memcpy(&mu, &s->mu, 4);
    put32(p + 28, mu);
    for (int i = 0; i < 4; i++) put64(p + 32 + 8 * i, s->rng.s[i]);
    uint8_t *t = p + STATE_HEADER;
    for (size_t i = s->pen.len; i-- > 0; t += 4) put32(t, (uint32_t)mf_ring_at(&s->pen, i));
    for (size_t i = s->dry.len; i-- > 0; t += 4) put32(t, (uint32_t)mf_ring_at(&s->dry, i));
    *written = need;
    return MF_OK;
}

mf_status mf_sampler_state_load(mf_sampler *s, const void *data, size_t size) {
    const uint8_t *p = data;
    if (!p || size < STATE_HEADER || memcmp(p, STATE_MAGIC, 8) != 0)
        return mf_fail(MF_ERR_FORMAT, "sampler state: not a sampler state image (%zu bytes, no MFSMPL header)", size);
    const uint32_t version = get32(p + 8), n_vocab = get32(p + 12), n_pen = get32(p + 20), n_dry = get32(p + 24);
    if (version > STATE_VERSION)
        return mf_fail(MF_ERR_UNSUPPORTED, "sampler state: format version %u is newer than this minfer's (%u)", version,
                       STATE_VERSION);
    if (version == 0) return mf_fail(MF_ERR_FORMAT, "sampler state: format version 0 is not valid");
    if (n_vocab != (uint32_t)s->n_vocab)
        return mf_fail(MF_ERR_ARG, "sampler state: saved for a vocabulary of %u tokens, this sampler has %d", n_vocab,
                       (int)s->n_vocab);
    /* the sizes are 32-bit counts, so this sum cannot overflow 64 bits */
    const uint64_t want = STATE_HEADER + 4 * ((uint64_t)n_pen + n_dry);
    if (want != size)
        return mf_fail(MF_ERR_FORMAT, "sampler state: %zu bytes, but its %u + %u window tokens make %llu", size, n_pen, n_dry,
                       (unsigned long long)want);
    float mu;
    const uint32_t mu_bits = get32(p + 28);
    memcpy(&mu, &mu_bits, 4);
    if (!isfinite(mu)) return mf_fail(MF_ERR_FORMAT, "sampler state: Mirostat mu is not a finite number");
    mf_rng rng;
    for (int i = 0; i < 4; i++) rng.s[i] = get64(p + 32 + 8 * i);
    if (!(rng.s[0] | rng.s[1] | rng.s[2] | rng.s[3]))
        return mf_fail(MF_ERR_FORMAT, "sampler state: the random generator's state is all zero (never valid)");
    const size_t n_tok = (size_t)n_pen + n_dry;
    int32_t *tok = mf_malloc((n_tok ? n_tok : 1) * sizeof *tok);
    if (!tok) return MF_ERR_NOMEM;
    for (size_t i = 0; i < n_tok; i++) {
        const uint32_t t = get32(p + STATE_HEADER + 4 * i);
        if (t >= n_vocab) {
            free(tok);
            return mf_fail(MF_ERR_FORMAT, "sampler state: window token %zu is %u, outside the vocabulary 0..%u", i, t,
                           n_vocab - 1);
        }
        tok[i] = (int32_t)t;
    }
    s->seed = get32(p + 16);
    s->rng = rng;
    s->mu = mu;
    mf_history_restore(s, tok, n_pen, tok + n_pen, n_dry);
    free(tok);
    return MF_OK;
}
