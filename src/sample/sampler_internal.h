/* sampler_internal.h: the sampler's state shared by sampler.c (chain, draw, API), sampler_stages.c
 * (truncation stages and selection) and sampler_history.c (penalties and DRY). Not for other
 * modules. */
#ifndef MF_SAMPLER_INTERNAL_H
#define MF_SAMPLER_INTERNAL_H

#include "sample/rng.h"
#include "sample/sampler.h"

/* A token that ends with the first `len` bytes of DRY breaker `breaker` (len < its length): the
 * breaker may continue in the next tokens. Sorted by token. */
typedef struct mf_dry_head {
    int32_t token;
    uint16_t breaker;
    uint16_t len;
} mf_dry_head;

/* A candidate's position with a sort key, for the typical stage's reorder. */
typedef struct mf_scored {
    float score;
    int32_t pos;
} mf_scored;

/* A fixed-capacity history of the last `cap` tokens; at(i) is the i-th most recent. */
typedef struct mf_ring {
    int32_t *data;
    size_t cap, len, head; /* head: where the next token goes */
} mf_ring;

static inline int32_t mf_ring_at(const mf_ring *r, size_t i) {
    return r->data[(r->head + r->cap - 1 - i) % r->cap];
}

/* The candidate set moves through two representations. Dense: every token, logits in wl[n_vocab]
 * indexed by id (what the chain starts with; stages that touch a few ids work here in O(touched)).
 * Sparse: cand[0..n_cand) holds explicit (id, logit) pairs, and `sorted` says whether they are in
 * decreasing logit order with ties by increasing id. Tokens with logit -inf never enter cand. */
struct mf_sampler {
    mf_sampler_params p; /* a copy; its array pointers are not used after creation */
    int32_t n_vocab;
    uint32_t seed;
    mf_rng rng;
    float mu; /* Mirostat's running maximum surprise */

    mf_sampler_stage stages[MF_SAMPLER_MAX_STAGES];
    size_t n_stages;

    int32_t *bias_id; /* resolved logit biases (text -> ids, ignore_eos -> -inf) */
    float *bias_val;
    size_t n_bias;

    float *wl;                     /* [n_vocab] dense logits */
    mf_sampler_candidate *cand;    /* [n_vocab] */
    mf_sampler_candidate *tmp;     /* [n_vocab] scratch for typical's reorder, NULL without it */
    mf_scored *scored;             /* [n_vocab] scratch for typical, NULL without it */
    size_t n_cand;
    bool dense, sorted;
    bool dist_pending; /* cand holds a normalized distribution not yet drawn from */

    /* penalties: counts over the window, and the distinct tokens in it with their positions. */
    bool pen_on;
    mf_ring pen;
    int32_t *pen_count;    /* [n_vocab] */
    int32_t *pen_pos;      /* [n_vocab] index into pen_distinct, valid while count > 0 */
    int32_t *pen_distinct; /* [pen.cap] */
    size_t n_distinct;

    /* DRY */
    bool dry_on;
    mf_ring dry;
    int32_t *dry_rev;     /* [dry.cap] the window, most recent first */
    int32_t *dry_z;       /* [dry.cap] Z-function of dry_rev */
    int32_t *dry_maxrep;  /* [n_vocab] 0 or 1 + longest repeat the token would extend */
    int32_t *dry_touched; /* [dry.cap] tokens with dry_maxrep set */
    uint8_t *dry_full;    /* [n_vocab] 1: the token's text contains a whole breaker */
    mf_dry_head *dry_heads;
    size_t n_dry_heads;
    char **breakers;
    size_t *breaker_len;
    size_t n_breakers;
    const char *(*piece)(void *user, int32_t token, size_t *len);
    void *piece_user;
};

/* GCC if-converts (and so vectorizes) float selects only without trapping math; clang's default
 * already is. Functions with loops over mf_exp_neg carry this. */
#if defined(__GNUC__) && !defined(__clang__)
#define MF_VECTOR_MATH __attribute__((optimize("no-trapping-math")))
#else
#define MF_VECTOR_MATH
#endif

/* e^x for x <= 0, the arguments of every softmax here (logit - max): Cody-Waite reduction
 * x = n ln2 + r, |r| <= ln2/2, and a degree-7 polynomial for e^r (Cephes' coefficients), relative
 * error below 2e-7; exactly 0 below -87 (and for -inf and NaN), 1 above 0. Branch-free and call-free, so loops over
 * it vectorize, unlike libm's expf; the result does not depend on the platform's libm. */
MF_VECTOR_MATH static inline float mf_exp_neg(float x) {
    float xc = x >= -87.0f ? x : -87.0f; /* NaN too */
    xc = xc > 0.0f ? 0.0f : xc;
    int32_t n = (int32_t)(xc * 1.44269504088896341f - 0.5f); /* round to nearest, xc <= 0 */
    float fn = (float)n;
    float r = xc - fn * 0.693359375f - fn * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    union {
        int32_t i;
        float f;
    } scale = {.i = (n + 127) << 23};
    return x >= -87.0f ? p * scale.f : 0.0f;
}

/* sampler_stages.c */
void mf_sampler_materialize(mf_sampler *s);
void mf_sampler_sort_top(mf_sampler *s, size_t m);
/* Softmax over cand[0..n_cand) into .p (sum in double). */
void mf_sampler_softmax(mf_sampler *s);
/* w[i] = e^(w[i] - mx) for i < n; returns the sum (in double). */
double mf_sampler_exp_dense(float *w, size_t n, float mx);
void mf_stage_top_k(mf_sampler *s, int32_t k);
void mf_stage_top_p(mf_sampler *s);
void mf_stage_min_p(mf_sampler *s);
void mf_stage_typical(mf_sampler *s);
void mf_stage_top_n_sigma(mf_sampler *s);
void mf_stage_xtc(mf_sampler *s);
void mf_stage_temperature(mf_sampler *s, float temp);
/* The temperature stage of the chain: plain, or dynamic when dynatemp_range > 0. */
void mf_stage_dynatemp(mf_sampler *s);
/* Mirostat's truncation; the update after the draw is mf_mirostat_update. */
void mf_stage_mirostat(mf_sampler *s);
void mf_mirostat_update(mf_sampler *s, float p_chosen);

/* sampler_history.c */
mf_status mf_history_init(mf_sampler *s, const mf_sampler_params *p, const mf_sampler_vocab *v);
void mf_history_free(mf_sampler *s);
void mf_history_accept(mf_sampler *s, int32_t token);
void mf_history_reset(mf_sampler *s);
/* Refill the windows with the last tokens of pen[0..n_pen) and dry[0..n_dry) (oldest first). */
void mf_history_restore(mf_sampler *s, const int32_t *pen, size_t n_pen, const int32_t *dry, size_t n_dry);
void mf_stage_penalties(mf_sampler *s);
void mf_stage_dry(mf_sampler *s);

#endif /* MF_SAMPLER_INTERNAL_H */
