/* sampler_stages.c: the truncation and shaping stages of the sampler (top-k, top-p, min-p, typical,
 * top-n-sigma, XTC, temperature, Mirostat) with llama.cpp's semantics, and the partial selection
 * that lets them avoid sorting the whole vocabulary.
 *
 * Order convention: "better" means a higher logit, ties broken by the lower token id, a total order,
 * so every selection and sort here is deterministic. */
#include "sample/sampler_internal.h"

#include "core/core.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef mf_sampler_candidate cand_t;

static inline bool better(const cand_t *a, const cand_t *b) {
    return a->logit > b->logit || (a->logit == b->logit && a->id < b->id);
}

static int cmp_better(const void *pa, const void *pb) {
    const cand_t *a = pa, *b = pb;
    return better(a, b) ? -1 : better(b, a) ? 1 : 0;
}

static inline void swap_cand(cand_t *a, cand_t *b) {
    cand_t t = *a;
    *a = *b;
    *b = t;
}

/* Rearrange a[0..n) so that a[0..m) holds its m best entries (in no particular order): quickselect
 * with a median-of-three pivot, falling back to a full sort of the remaining range when the depth
 * budget runs out, so the worst case stays O(n log n). */
static void select_top(cand_t *a, size_t n, size_t m) {
    size_t lo = 0, hi = n;
    int budget = 16;
    for (size_t t = n; t > 1; t >>= 1) budget += 2;
    while (hi - lo > 16) {
        if (budget-- == 0) {
            qsort(a + lo, hi - lo, sizeof *a, cmp_better);
            return;
        }
        size_t mid = lo + (hi - lo) / 2;
        /* Median of a[lo], a[mid], a[hi-1] moved to a[hi-1] as the pivot. */
        if (better(&a[mid], &a[lo])) swap_cand(&a[mid], &a[lo]);
        if (better(&a[hi - 1], &a[lo])) swap_cand(&a[hi - 1], &a[lo]);
        if (better(&a[mid], &a[hi - 1])) swap_cand(&a[mid], &a[hi - 1]);
        cand_t pivot = a[hi - 1];
        size_t store = lo;
        for (size_t i = lo; i < hi - 1; i++)
            if (better(&a[i], &pivot)) swap_cand(&a[i], &a[store++]);
        swap_cand(&a[store], &a[hi - 1]);
        if (m == store || m == store + 1) return;
        if (m < store) hi = store;
        else lo = store + 1;
    }
    qsort(a + lo, hi - lo, sizeof *a, cmp_better);
}

void mf_sampler_materialize(mf_sampler *s) {
    if (!s->dense) return;
    size_t n = 0;
    for (int32_t i = 0; i < s->n_vocab; i++) {
        float v = s->wl[i];
        if (v != -INFINITY) s->cand[n++] = (cand_t){i, v, 0.0f};
    }
    s->n_cand = n;
    s->dense = false;
    s->sorted = false;
}

/* Make cand[0..m) the m best candidates in sorted order; the rest stay behind, unordered. */
void mf_sampler_sort_top(mf_sampler *s, size_t m) {
    MF_ASSERT(!s->dense);
    size_t n = s->n_cand;
    if (m > n) m = n;
    if (s->sorted || m == 0) return;
    if (m < n) select_top(s->cand, n, m);
    qsort(s->cand, m, sizeof *s->cand, cmp_better);
    if (m == n) s->sorted = true;
}

MF_VECTOR_MATH static void exp_cand(cand_t *c, size_t n, float mx) {
    for (size_t i = 0; i < n; i++) c[i].p = mf_exp_neg(c[i].logit - mx);
}

MF_VECTOR_MATH double mf_sampler_exp_dense(float *w, size_t n, float mx) {
    for (size_t i = 0; i < n; i++) w[i] = mf_exp_neg(w[i] - mx);
    double sum = 0.0;
    for (size_t i = 0; i < n; i++) sum += w[i];
    return sum;
}

/* The sum of e^(l[i] - mx) over [0, n) in a fixed order: blocks of 8 lanes, each lane a chain in
 * float over a block of up to 4096 values, the block's lanes summed in order into a double. */
MF_VECTOR_MATH static double exp_sum(const float *l, size_t n, float mx) {
    double sum = 0.0;
    for (size_t b = 0; b < n; b += 4096) {
        const size_t e = n - b < 4096 ? n : b + 4096;
        float acc[8] = {0};
        size_t i = b;
        for (; i + 8 <= e; i += 8)
            for (int j = 0; j < 8; j++) acc[j] += mf_exp_neg(l[i + j] - mx);
        for (; i < e; i++) acc[i % 8] += mf_exp_neg(l[i] - mx);
        for (int j = 0; j < 8; j++) sum += acc[j];
    }
    return sum;
}

/* The largest logit that is not NaN (-inf if none): eight running maxima, element-wise so that
 * they become packed max operations (a NaN never wins a comparison). */
MF_VECTOR_MATH static float max_not_nan(const float *l, int32_t n) {
    float m8[8] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY};
    int32_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++) m8[j] = l[i + j] > m8[j] ? l[i + j] : m8[j];
    float mx = -INFINITY;
    for (int j = 0; j < 8; j++) mx = m8[j] > mx ? m8[j] : mx;
    for (; i < n; i++) mx = l[i] > mx ? l[i] : mx;
    return mx;
}

int32_t mf_logits_top(const float *l, int32_t n, float *p) {
    if (p) *p = 0.0f;
    if (!l || n < 1) return -1;
    /* the first index of that maximum (the lowest id on ties); 0 when every logit is NaN. A speculative
     * decoder asks this per drafted token: one pass in packed maxima, then a scan that stops at the
     * first match, against a branch per logit before (SmolLM2's 49,152 logits 56 -> 12 us) */
    const float mx = max_not_nan(l, n);
    int32_t best = 0;
    while (best < n && !(l[best] == mx)) best++;
    if (best == n) best = 0;
    if (!p || !(mx > -INFINITY)) return best; /* every logit -inf or NaN: p = 0 */
    if (mx == INFINITY) {
        int32_t c = 0;
        for (int32_t i = best; i < n; i++) c += l[i] == INFINITY;
        *p = 1.0f / (float)c;
        return best;
    }
    *p = (float)(1.0 / exp_sum(l, (size_t)n, mx));
    return best;
}

void mf_sampler_softmax(mf_sampler *s) {
    MF_ASSERT(!s->dense);
    size_t n = s->n_cand;
    if (n == 0) return;
    float mx = s->cand[0].logit;
    if (!s->sorted)
        for (size_t i = 1; i < n; i++) mx = s->cand[i].logit > mx ? s->cand[i].logit : mx;
    if (mx == INFINITY) { /* overflowed logits (a tiny temperature): the limit, uniform over the +inf */
        size_t c = 0;
        for (size_t i = 0; i < n; i++) c += s->cand[i].logit == INFINITY;
        for (size_t i = 0; i < n; i++) s->cand[i].p = s->cand[i].logit == INFINITY ? 1.0f / (float)c : 0.0f;
        return;
    }
    exp_cand(s->cand, n, mx);
    double sum = 0.0;
    for (size_t i = 0; i < n; i++) sum += s->cand[i].p;
    float inv = (float)(1.0 / sum);
    for (size_t i = 0; i < n; i++) s->cand[i].p *= inv;
}

/* Dense top-k for small k: one pass over the logits keeping a min-heap (root = worst kept) of k
 * candidates in cand[0..k); most tokens cost a single comparison with the root. */
static void top_k_dense_heap(mf_sampler *s, size_t k) {
    cand_t *h = s->cand;
    size_t n = 0;
    const float *wl = s->wl;
    for (int32_t i = 0; i < s->n_vocab; i++) {
        /* Once the heap is full, skip blocks of 64 whose maximum cannot enter it (a reduction the
         * compiler vectorizes), so most of the vocabulary costs one vector compare per value. */
        if ((i & 63) == 0 && n == k && i + 64 <= s->n_vocab) {
            float m8[8]; /* eight running maxima: element-wise, so it becomes packed max */
            memcpy(m8, wl + i, sizeof m8);
            for (int32_t j = i + 8; j < i + 64; j += 8)
                for (int l = 0; l < 8; l++) m8[l] = wl[j + l] > m8[l] ? wl[j + l] : m8[l];
            float mx = m8[0];
            for (int l = 1; l < 8; l++) mx = m8[l] > mx ? m8[l] : mx;
            if (!(mx > h[0].logit)) {
                i += 63;
                continue;
            }
        }
        float v = wl[i];
        if (v == -INFINITY) continue;
        if (n < k) {
            /* Sift up: the root must be the worst entry. */
            size_t c = n++;
            h[c] = (cand_t){i, v, 0.0f};
            while (c > 0) {
                size_t par = (c - 1) / 2;
                if (!better(&h[par], &h[c])) break;
                swap_cand(&h[par], &h[c]);
                c = par;
            }
        } else if (v > h[0].logit) { /* ids grow, so a tie with the root never wins */
            h[0] = (cand_t){i, v, 0.0f};
            size_t c = 0;
            for (;;) {
                size_t l = 2 * c + 1, r = l + 1, w = c;
                if (l < n && better(&h[w], &h[l])) w = l;
                if (r < n && better(&h[w], &h[r])) w = r;
                if (w == c) break;
                swap_cand(&h[w], &h[c]);
                c = w;
            }
        }
    }
    qsort(h, n, sizeof *h, cmp_better);
    s->n_cand = n;
    s->dense = false;
    s->sorted = true;
}

void mf_stage_top_k(mf_sampler *s, int32_t k) {
    if (k <= 0) return;
    if (s->dense && k <= 1024) {
        top_k_dense_heap(s, (size_t)k);
        return;
    }
    mf_sampler_materialize(s);
    size_t kk = MF_MIN((size_t)k, s->n_cand);
    mf_sampler_sort_top(s, kk);
    s->n_cand = kk;
    s->sorted = true;
}

/* Within a[lo..hi), every entry worse than everything in a[0..lo) whose mass is acc: rearrange so
 * that a[0..K) holds the K best entries, K the smallest count whose probabilities sum to at least
 * target (hi when none does in this range); returns K. A quickselect on mass: each partition sums
 * the better side and recurses into the side holding the crossing point, without sorting. */
static size_t select_mass(cand_t *a, size_t lo, size_t hi, double acc, double target) {
    size_t end = hi;
    int budget = 16;
    for (size_t t = hi - lo; t > 1; t >>= 1) budget += 2;
    while (hi - lo > 32 && budget-- > 0) {
        size_t mid = lo + (hi - lo) / 2;
        if (better(&a[mid], &a[lo])) swap_cand(&a[mid], &a[lo]);
        if (better(&a[hi - 1], &a[lo])) swap_cand(&a[hi - 1], &a[lo]);
        if (better(&a[mid], &a[hi - 1])) swap_cand(&a[mid], &a[hi - 1]);
        cand_t pivot = a[hi - 1];
        size_t store = lo;
        double left = 0.0;
        for (size_t i = lo; i < hi - 1; i++)
            if (better(&a[i], &pivot)) left += a[i].p, swap_cand(&a[i], &a[store++]);
        swap_cand(&a[store], &a[hi - 1]);
        if (acc + left >= target) {
            hi = store;
        } else if (acc + left + pivot.p >= target) {
            return store + 1;
        } else {
            acc += left + pivot.p;
            lo = store + 1;
        }
    }
    qsort(a + lo, hi - lo, sizeof *a, cmp_better);
    for (size_t i = lo; i < hi; i++) {
        acc += a[i].p;
        if (acc >= target) return i + 1;
    }
    return hi == end ? end : hi; /* rounding: the whole range up to where the mass was reached */
}

/* The same over all of a[0..n), first narrowed by a histogram: NB buckets of equal logit width from
 * the maximum down (monotone, so every bucket is better than the next), the bucket where the
 * cumulative mass crosses target found from the per-bucket sums, the buckets above it moved to the
 * front and the crossing bucket after them. Only that bucket is then selected on, so a flat
 * distribution where top-p keeps most of the vocabulary costs a few linear passes. */
static size_t select_mass_hist(cand_t *a, size_t n, double target) {
    enum { NB = 512 };
    float mx = a[0].logit, mn = a[0].logit;
    for (size_t i = 1; i < n; i++) {
        mx = a[i].logit > mx ? a[i].logit : mx;
        mn = a[i].logit < mn ? a[i].logit : mn;
    }
    float range = mx - mn; /* finite and positive, or the buckets are meaningless */
    if (n < 4096 || !(range > 0.0f) || !isfinite(range)) return select_mass(a, 0, n, 0.0, target);
    const float scale = (float)NB / range;
#define BUCKET(c) MF_MIN((size_t)((mx - (c).logit) * scale), (size_t)NB - 1)
    double mass[NB] = {0};
    for (size_t i = 0; i < n; i++) mass[BUCKET(a[i])] += a[i].p;
    size_t cb = 0;
    double acc = 0.0;
    while (cb + 1 < NB && acc + mass[cb] < target) acc += mass[cb++];
    size_t head = 0;
    for (size_t i = 0; i < n; i++)
        if (BUCKET(a[i]) < cb) swap_cand(&a[i], &a[head++]);
    size_t tail = head;
    for (size_t i = head; i < n; i++)
        if (BUCKET(a[i]) == cb) swap_cand(&a[i], &a[tail++]);
#undef BUCKET
    return select_mass(a, head, tail, acc, target);
}

/* Keep the most likely tokens until their probabilities sum to at least top_p (the token that
 * crosses it stays), and at least min_keep. Sorted input is scanned; otherwise the kept set is
 * found by select_mass_hist and sorted only when small. */
void mf_stage_top_p(mf_sampler *s) {
    float top_p = s->p.top_p;
    if (top_p >= 1.0f) return;
    mf_sampler_materialize(s);
    size_t n = s->n_cand;
    if (n == 0) return;
    mf_sampler_softmax(s);
    size_t min_keep = (size_t)s->p.min_keep, last = n;
    if (s->sorted) {
        double cum = 0.0;
        for (size_t i = 0; i < n; i++) {
            cum += s->cand[i].p;
            if (cum >= top_p && i + 1 >= min_keep) {
                last = i + 1;
                break;
            }
        }
        s->n_cand = last;
        return;
    }
    last = select_mass_hist(s->cand, n, top_p);
    if (last < min_keep) {
        last = MF_MIN(min_keep, n);
        select_top(s->cand, n, last);
    }
    s->n_cand = last;
    if (last <= 1024) {
        qsort(s->cand, last, sizeof *s->cand, cmp_better);
        s->sorted = true;
    }
}

/* Keep tokens with p >= min_p * p_max, i.e. logit >= max_logit + log(min_p); at least min_keep. */
void mf_stage_min_p(mf_sampler *s) {
    float min_p = s->p.min_p;
    if (min_p <= 0.0f) return;
    size_t need = (size_t)MF_MAX(s->p.min_keep, 1);
    if (s->dense) {
        float mx = -INFINITY;
        for (int32_t i = 0; i < s->n_vocab; i++) mx = s->wl[i] > mx ? s->wl[i] : mx;
        if (mx == -INFINITY) {
            s->n_cand = 0, s->dense = false, s->sorted = true;
            return;
        }
        float thr = mx + logf(min_p);
        size_t c = 0;
        for (int32_t i = 0; i < s->n_vocab; i++)
            if (s->wl[i] >= thr) s->cand[c++] = (cand_t){i, s->wl[i], 0.0f};
        if (c >= need) {
            s->n_cand = c, s->dense = false, s->sorted = false;
            return;
        }
        mf_sampler_materialize(s);
    }
    size_t n = s->n_cand;
    if (n == 0) return;
    float mx = s->cand[0].logit;
    if (!s->sorted)
        for (size_t i = 1; i < n; i++) mx = s->cand[i].logit > mx ? s->cand[i].logit : mx;
    float thr = mx + logf(min_p);
    size_t c = 0;
    for (size_t i = 0; i < n; i++) c += s->cand[i].logit >= thr;
    if (c >= need) {
        size_t w = 0;
        for (size_t i = 0; i < n; i++)
            if (s->cand[i].logit >= thr) s->cand[w++] = s->cand[i];
        s->n_cand = w;
        return;
    }
    /* Too few pass: keep the min_keep best (the passing ones are among them). */
    size_t keep = MF_MIN(need, n);
    mf_sampler_sort_top(s, keep);
    s->n_cand = keep;
    s->sorted = true;
}

static int cmp_scored(const void *pa, const void *pb) {
    const mf_scored *a = pa, *b = pb;
    if (a->score != b->score) return a->score < b->score ? -1 : 1;
    return (a->pos > b->pos) - (a->pos < b->pos);
}

/* Locally typical sampling: order tokens by |-log p - H| (H the entropy), keep them in that order
 * until their probabilities sum to more than typ_p, and at least min_keep. */
void mf_stage_typical(mf_sampler *s) {
    float typ_p = s->p.typ_p;
    if (typ_p >= 1.0f) return;
    MF_ASSERT(s->scored);
    mf_sampler_materialize(s);
    size_t n = s->n_cand;
    if (n == 0) return;
    mf_sampler_sort_top(s, n);
    mf_sampler_softmax(s);
    double h = 0.0;
    for (size_t i = 0; i < n; i++) {
        float p = s->cand[i].p;
        if (p > 0.0f) h -= (double)p * log(p);
    }
    for (size_t i = 0; i < n; i++) {
        float p = s->cand[i].p;
        s->scored[i].score = p > 0.0f ? fabsf(-logf(p) - (float)h) : INFINITY;
        s->scored[i].pos = (int32_t)i;
    }
    qsort(s->scored, n, sizeof *s->scored, cmp_scored);
    double cum = 0.0;
    size_t last = n;
    size_t min_keep = (size_t)s->p.min_keep;
    for (size_t i = 0; i < n; i++) {
        cum += s->cand[s->scored[i].pos].p;
        if (cum > typ_p && (min_keep == 0 || i + 1 >= min_keep)) {
            last = i + 1;
            break;
        }
    }
    for (size_t i = 0; i < last; i++) s->tmp[i] = s->cand[s->scored[i].pos];
    memcpy(s->cand, s->tmp, last * sizeof *s->cand);
    s->n_cand = last;
    s->sorted = false;
}

/* Keep tokens whose logit is within n standard deviations of the maximum (over finite logits). */
void mf_stage_top_n_sigma(mf_sampler *s) {
    float nsig = s->p.top_n_sigma;
    if (nsig <= 0.0f) return;
    double sum = 0.0, sq = 0.0;
    float mx = -INFINITY;
    size_t cnt = 0;
    if (s->dense) {
        for (int32_t i = 0; i < s->n_vocab; i++) {
            float v = s->wl[i];
            if (v == -INFINITY) continue;
            mx = fmaxf(mx, v), sum += v, cnt++;
        }
    } else {
        for (size_t i = 0; i < s->n_cand; i++) {
            float v = s->cand[i].logit;
            mx = fmaxf(mx, v), sum += v, cnt++;
        }
    }
    if (cnt <= 1) return;
    double mean = sum / (double)cnt;
    if (s->dense) {
        for (int32_t i = 0; i < s->n_vocab; i++)
            if (s->wl[i] != -INFINITY) sq += (s->wl[i] - mean) * (s->wl[i] - mean);
    } else {
        for (size_t i = 0; i < s->n_cand; i++) sq += (s->cand[i].logit - mean) * (s->cand[i].logit - mean);
    }
    float thr = mx - nsig * (float)sqrt(sq / (double)cnt);
    size_t w = 0;
    if (s->dense) {
        for (int32_t i = 0; i < s->n_vocab; i++)
            if (s->wl[i] != -INFINITY && s->wl[i] >= thr) s->cand[w++] = (cand_t){i, s->wl[i], 0.0f};
        s->dense = false, s->sorted = false;
    } else {
        for (size_t i = 0; i < s->n_cand; i++)
            if (s->cand[i].logit >= thr) s->cand[w++] = s->cand[i];
    }
    s->n_cand = w;
}

/* Exclude Top Choices: with probability xtc_probability, drop every token with p >= threshold
 * except the least likely of them (only when at least two pass, and min_keep tokens remain). */
void mf_stage_xtc(mf_sampler *s) {
    float prob = s->p.xtc_probability, thr = s->p.xtc_threshold;
    if (prob <= 0.0f || thr > 0.5f) return;
    mf_sampler_materialize(s);
    size_t n = s->n_cand;
    if (n < 2) return;
    float chance = (float)(mf_rng_next(&s->rng) >> 40) * 0x1.0p-24f;
    if (chance > prob) return;
    mf_sampler_softmax(s);
    size_t c = 0;
    for (size_t i = 0; i < n; i++) c += s->cand[i].p >= thr;
    if (c < 2) return;
    size_t drop = c - 1;
    if (n - drop < (size_t)s->p.min_keep) return;
    mf_sampler_sort_top(s, c);
    memmove(s->cand, s->cand + drop, (n - drop) * sizeof *s->cand);
    s->n_cand = n - drop;
}

/* temp > 0 divides the logits; temp <= 0 keeps only the most likely token (greedy; on a tie the
 * lowest id). */
void mf_stage_temperature(mf_sampler *s, float temp) {
    if (temp > 0.0f) {
        if (temp == 1.0f) return;
        if (s->dense) {
            for (int32_t i = 0; i < s->n_vocab; i++) s->wl[i] /= temp;
        } else {
            for (size_t i = 0; i < s->n_cand; i++) s->cand[i].logit /= temp;
        }
        return;
    }
    if (s->dense) {
        int32_t best = -1;
        float mx = -INFINITY;
        for (int32_t i = 0; i < s->n_vocab; i++)
            if (s->wl[i] > mx) mx = s->wl[i], best = i;
        s->dense = false, s->sorted = true;
        s->n_cand = 0;
        if (best >= 0) s->cand[0] = (cand_t){best, mx, 0.0f}, s->n_cand = 1;
        return;
    }
    if (s->n_cand == 0) return;
    size_t best = 0; /* the highest logit, the lowest id among equals: independent of the order */
    if (!s->sorted)
        for (size_t i = 1; i < s->n_cand; i++)
            if (better(&s->cand[i], &s->cand[best])) best = i;
    s->cand[0] = s->cand[best];
    s->n_cand = 1;
    s->sorted = true;
}

/* Dynamic temperature: t = min + (max - min) * (H / H_max)^exponent over [temp - range, temp + range]
 * (the lower end clamped at 0), H the entropy of the current candidates and H_max = ln(count). */
void mf_stage_dynatemp(mf_sampler *s) {
    float range = s->p.dynatemp_range, temp = s->p.temp;
    if (range <= 0.0f) {
        mf_stage_temperature(s, temp);
        return;
    }
    mf_sampler_materialize(s);
    size_t n = s->n_cand;
    if (n <= 1) return;
    float lo = fmaxf(0.0f, temp - range), hi = temp + range;
    float h_max = -logf(1.0f / (float)n);
    mf_sampler_softmax(s);
    float h = 0.0f;
    for (size_t i = 0; i < n; i++) {
        float p = s->cand[i].p;
        if (p > 0.0f) h -= p * logf(p);
    }
    mf_stage_temperature(s, lo + (hi - lo) * powf(h / h_max, s->p.dynatemp_exponent));
}

/* Mirostat v1 estimates the Zipf exponent s_hat from the top 100 probabilities and keeps the k
 * tokens that make the expected surprise mu; v2 keeps the tokens whose surprise -log2 p is at most
 * mu. Both renormalize; the draw and the update of mu follow in the caller. */
void mf_stage_mirostat(mf_sampler *s) {
    mf_sampler_materialize(s);
    size_t n = s->n_cand;
    if (n == 0) return;
    if (s->p.mirostat == 1) {
        const size_t m = 100;
        mf_sampler_sort_top(s, m);
        mf_sampler_softmax(s);
        float sum_tb = 0.0f, sum_tt = 0.0f;
        for (size_t i = 0; i + 1 < m && i + 1 < n; i++) {
            float t = logf((float)(i + 2) / (float)(i + 1));
            float b = logf(s->cand[i].p / s->cand[i + 1].p);
            sum_tb += t * b;
            sum_tt += t * t;
        }
        size_t keep = 1;
        if (n > 1) {
            float s_hat = sum_tb / sum_tt;
            float eps = s_hat - 1.0f;
            float k = powf((eps * powf(2.0f, s->mu)) / (1.0f - powf((float)s->n_vocab, -eps)), 1.0f / s_hat);
            if (k != k || k < 1.0f) keep = 1;
            else if (k >= (float)n) keep = n;
            else keep = (size_t)k;
        }
        mf_sampler_sort_top(s, keep);
        s->n_cand = keep;
        s->sorted = true;
    } else {
        mf_sampler_softmax(s);
        /* -log2 p <= mu  <=>  p >= 2^-mu */
        float pmin = exp2f(-s->mu);
        size_t w = 0;
        for (size_t i = 0; i < n; i++)
            if (s->cand[i].p >= pmin) s->cand[w++] = s->cand[i];
        if (w == 0) { /* nothing was moved: keep the most likely token */
            size_t best = 0;
            for (size_t i = 1; i < n; i++)
                if (better(&s->cand[i], &s->cand[best])) best = i;
            s->cand[w++] = s->cand[best];
        }
        s->n_cand = w;
    }
    mf_sampler_softmax(s);
}

void mf_mirostat_update(mf_sampler *s, float p_chosen) {
    float surprise = -log2f(p_chosen);
    s->mu -= s->p.mirostat_eta * (surprise - s->p.mirostat_tau);
}
