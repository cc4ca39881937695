/* test_sample_orders.c: random chains (any order of stages, repeats included, random parameters,
 * ties, banned tokens, a random history) against a plain reference that re-sorts the whole candidate
 * list after every stage, comparing the final distributions. This checks the fast paths (dense and
 * sparse sets, heap and quickselect, the top-p histogram, sortedness tracking) in every
 * combination a --samplers line can make. */
#include "sample/rng.h"
#include "sample/sampler.h"
#include "test.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int32_t id;
    float l;
    double p;
} ref_t;

static int ref_cmp(const void *pa, const void *pb) {
    const ref_t *a = pa, *b = pb;
    if (a->l != b->l) return a->l > b->l ? -1 : 1;
    return (a->id > b->id) - (a->id < b->id);
}

static void ref_sort(ref_t *c, size_t n) { qsort(c, n, sizeof *c, ref_cmp); }

static void ref_softmax(ref_t *c, size_t n) {
    double sum = 0;
    for (size_t i = 0; i < n; i++) sum += (c[i].p = exp((double)c[i].l - c[0].l));
    for (size_t i = 0; i < n; i++) c[i].p /= sum;
}

/* One stage on a list kept sorted by (logit desc, id asc); returns the new count. */
static size_t ref_stage(mf_sampler_stage st, const mf_sampler_params *p, ref_t *c, size_t n, const int32_t *hist,
                        size_t nh, int32_t nv) {
    size_t min_keep = (size_t)p->min_keep;
    switch (st) {
    case MF_STAGE_PENALTIES: {
        if (p->penalty_repeat == 1.0f && p->penalty_freq == 0.0f && p->penalty_present == 0.0f) break;
        size_t from = nh > (size_t)p->penalty_last_n ? nh - (size_t)p->penalty_last_n : 0;
        for (size_t i = 0; i < n; i++) {
            int32_t cnt = 0;
            for (size_t j = from; j < nh; j++) cnt += hist[j] == c[i].id;
            if (!cnt) continue;
            float l = c[i].l;
            l = l <= 0 ? l * p->penalty_repeat : l / p->penalty_repeat;
            c[i].l = l - ((float)cnt * p->penalty_freq + p->penalty_present);
        }
        break;
    }
    case MF_STAGE_DRY: {
        if (p->dry_multiplier == 0.0f || nh <= (size_t)p->dry_allowed_length) break;
        /* For each earlier end e: the common suffix of hist[0..e] and hist; the token after e gets
         * the longest. (No breakers in this test, window = whole history.) */
        int *best = calloc((size_t)nv, sizeof *best);
        for (size_t e = 0; e + 1 < nh; e++) {
            size_t len = 0;
            while (len <= e && hist[e - len] == hist[nh - 1 - len]) len++;
            if (len >= (size_t)p->dry_allowed_length && (int)len > best[hist[e + 1]]) best[hist[e + 1]] = (int)len;
        }
        for (size_t i = 0; i < n; i++)
            if (best[c[i].id]) c[i].l -= (float)(p->dry_multiplier * pow(p->dry_base, best[c[i].id] - p->dry_allowed_length));
        free(best);
        break;
    }
    case MF_STAGE_TOP_N_SIGMA: {
        if (p->top_n_sigma <= 0 || n <= 1) break;
        double mean = 0, sq = 0;
        for (size_t i = 0; i < n; i++) mean += c[i].l;
        mean /= (double)n;
        for (size_t i = 0; i < n; i++) sq += (c[i].l - mean) * (c[i].l - mean);
        float thr = c[0].l - p->top_n_sigma * (float)sqrt(sq / (double)n);
        size_t k = 0;
        while (k < n && c[k].l >= thr) k++;
        n = k;
        break;
    }
    case MF_STAGE_TOP_K:
        if (p->top_k > 0 && (size_t)p->top_k < n) n = (size_t)p->top_k;
        break;
    case MF_STAGE_TYPICAL: {
        if (p->typ_p >= 1.0f) break;
        ref_softmax(c, n);
        double h = 0;
        for (size_t i = 0; i < n; i++)
            if (c[i].p > 0) h -= c[i].p * log(c[i].p);
        /* insertion order by |-log p - H|, stable on the sorted order */
        size_t *ord = malloc(n * sizeof *ord);
        double *sc = malloc(n * sizeof *sc);
        for (size_t i = 0; i < n; i++) sc[i] = c[i].p > 0 ? fabs(-log(c[i].p) - h) : INFINITY, ord[i] = i;
        for (size_t i = 1; i < n; i++)
            for (size_t j = i; j > 0 && sc[ord[j]] < sc[ord[j - 1]]; j--) {
                size_t t = ord[j];
                ord[j] = ord[j - 1], ord[j - 1] = t;
            }
        double cum = 0;
        size_t last = n;
        for (size_t i = 0; i < n; i++) {
            cum += c[ord[i]].p;
            if (cum > p->typ_p && (min_keep == 0 || i + 1 >= min_keep)) {
                last = i + 1;
                break;
            }
        }
        ref_t *keep = malloc(last * sizeof *keep);
        for (size_t i = 0; i < last; i++) keep[i] = c[ord[i]];
        memcpy(c, keep, last * sizeof *c);
        n = last;
        free(keep), free(ord), free(sc);
        break;
    }
    case MF_STAGE_TOP_P: {
        if (p->top_p >= 1.0f) break;
        ref_softmax(c, n);
        double cum = 0;
        for (size_t i = 0; i < n; i++) {
            cum += c[i].p;
            if (cum >= p->top_p && i + 1 >= min_keep) {
                n = i + 1;
                break;
            }
        }
        break;
    }
    case MF_STAGE_MIN_P: {
        if (p->min_p <= 0.0f) break;
        float thr = c[0].l + logf(p->min_p);
        size_t k = 0;
        while (k < n && c[k].l >= thr) k++;
        size_t need = min_keep > 1 ? min_keep : 1;
        n = k >= need ? k : (need < n ? need : n);
        break;
    }
    case MF_STAGE_XTC: { /* probability 0 or 1 only here */
        if (p->xtc_probability <= 0.0f || p->xtc_threshold > 0.5f || n < 2) break;
        ref_softmax(c, n);
        size_t k = 0;
        while (k < n && c[k].p >= p->xtc_threshold) k++;
        if (k >= 2 && n - (k - 1) >= min_keep) memmove(c, c + k - 1, (n - (k - 1)) * sizeof *c), n -= k - 1;
        break;
    }
    case MF_STAGE_TEMPERATURE:
        if (p->dynatemp_range > 0) {
            if (n <= 1) break;
            ref_softmax(c, n);
            double h = 0;
            for (size_t i = 0; i < n; i++)
                if (c[i].p > 0) h -= c[i].p * log(c[i].p);
            float lo = fmaxf(0.0f, p->temp - p->dynatemp_range), hi = p->temp + p->dynatemp_range;
            float t = lo + (hi - lo) * powf((float)h / logf((float)n), p->dynatemp_exponent);
            if (t <= 0) n = 1;
            else
                for (size_t i = 0; i < n; i++) c[i].l /= t;
        } else if (p->temp <= 0) {
            n = n ? 1 : 0;
        } else {
            for (size_t i = 0; i < n; i++) c[i].l /= p->temp;
        }
        break;
    case MF_STAGE_COUNT: break;
    }
    ref_sort(c, n);
    return n;
}

static float urand(mf_rng *r) { return (float)mf_rng_uniform(r); }

int main(void) {
    const int32_t nv = 3000;
    const int iters = getenv("MINFER_SANITIZED") ? 120 : 400;
    float *l = malloc((size_t)nv * sizeof *l);
    ref_t *c = malloc((size_t)nv * sizeof *c);
    int32_t hist[48];
    mf_rng r;
    mf_rng_seed(&r, 2026);
    int bad = 0;
    for (int it = 0; it < iters; it++) {
        /* Logits: scale varies from flat to peaked; some quantized (ties), some banned. */
        float scale = 0.2f + urand(&r) * 8.0f;
        bool quant = mf_rng_next(&r) % 3 == 0;
        for (int32_t i = 0; i < nv; i++) {
            float g = (urand(&r) + urand(&r) + urand(&r) - 1.5f) * scale;
            l[i] = quant ? roundf(g * 2) / 2 : g;
            if (mf_rng_next(&r) % 50 == 0) l[i] = -INFINITY;
        }
        size_t nh = mf_rng_next(&r) % 48;
        for (size_t i = 0; i < nh; i++) hist[i] = (int32_t)(mf_rng_next(&r) % 24); /* repetitive */

        mf_sampler_params p = mf_sampler_default_params();
        p.seed = (uint32_t)it;
        p.top_k = (int32_t)(mf_rng_next(&r) % 3 ? mf_rng_next(&r) % 200 : 1500 + mf_rng_next(&r) % 1000);
        p.top_p = urand(&r) < 0.2f ? 1.0f : 0.3f + urand(&r) * 0.7f;
        p.min_p = urand(&r) < 0.3f ? 0 : urand(&r) * 0.3f;
        p.typ_p = urand(&r) < 0.5f ? 1.0f : 0.5f + urand(&r) * 0.5f;
        p.top_n_sigma = urand(&r) < 0.5f ? -1 : 0.5f + urand(&r) * 3;
        p.temp = urand(&r) < 0.1f ? 0 : 0.3f + urand(&r) * 1.5f;
        p.dynatemp_range = urand(&r) < 0.2f ? urand(&r) : 0;
        p.xtc_probability = mf_rng_next(&r) % 2 ? 1.0f : 0.0f;
        p.xtc_threshold = urand(&r) * 0.3f;
        p.min_keep = (int32_t)(mf_rng_next(&r) % 4);
        p.penalty_last_n = (int32_t)(1 + mf_rng_next(&r) % 64);
        p.penalty_repeat = 1.0f + urand(&r);
        p.penalty_freq = urand(&r) * 0.5f;
        p.penalty_present = urand(&r) * 0.5f;
        p.dry_multiplier = urand(&r) < 0.5f ? 0 : urand(&r);
        p.dry_penalty_last_n = 64;
        p.n_dry_breakers = 0;
        p.n_stages = 1 + mf_rng_next(&r) % 9;
        for (size_t i = 0; i < p.n_stages; i++) p.stages[i] = (mf_sampler_stage)(mf_rng_next(&r) % MF_STAGE_COUNT);

        mf_sampler_vocab v = {.n_vocab = nv, .n_ctx = 64};
        mf_sampler *s = NULL;
        if (mf_sampler_create(&p, &v, &s) != MF_OK) {
            CHECKF(0, "iteration %d: %s", it, mf_last_error());
            continue;
        }
        for (size_t i = 0; i < nh; i++) mf_sampler_accept(s, hist[i]);
        const mf_sampler_candidate *got;
        size_t ng;
        mf_status st = mf_sampler_dist(s, l, &got, &ng);

        size_t n = 0;
        for (int32_t i = 0; i < nv; i++)
            if (l[i] != -INFINITY) c[n++] = (ref_t){i, l[i], 0};
        ref_sort(c, n);
        for (size_t i = 0; i < p.n_stages && n; i++) n = ref_stage(p.stages[i], &p, c, n, hist, nh, nv);
        ref_softmax(c, n);

        bool ok = st == MF_OK && ng == n;
        for (size_t i = 0; ok && i < n; i++) {
            /* find c[i].id among got */
            size_t j = 0;
            while (j < ng && got[j].id != c[i].id) j++;
            ok = j < ng && fabs(got[j].p - c[i].p) <= 1e-5 + 1e-4 * c[i].p;
        }
        if (!ok) {
            bad++;
            if (bad <= 5) {
                fprintf(stderr, "iteration %d: %zu survivors, reference %zu; stages", it, ng, n);
                for (size_t i = 0; i < p.n_stages; i++) fprintf(stderr, " %s", mf_sampler_stage_name(p.stages[i]));
                fprintf(stderr, "\n");
            }
        }
        mf_sampler_free(s);
    }
    CHECKF(bad == 0, "%d of %d random chains differ from the reference", bad, iters);
    printf("%d random chains compared with the full-sort reference\n", iters);
    free(l);
    free(c);
    return test_summary("test_sample_orders");
}
