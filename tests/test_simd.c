/* test_simd.c: every SIMD kernel against its scalar reference twin, at every level this CPU runs:
 * dots of each weight type on random blocks at every block-multiple length up to several blocks
 * and on large rows (within a tight bound relative to sum |w_i a_i|: the integer sums are exact,
 * only the float summation order differs), activation quantizers byte for byte (rounding ties, zero
 * blocks, signed maxima, NaN and overflow for the float formats), the multi-row tile entry (bit for
 * bit equal to the dot), and the MINFER_ISA override (in a child process, since the level is chosen
 * once per process). */
#include "test.h"
#include "simd/simd.h"
#include "cpu/cpu.h"
#include "cpu/cpu_dot_order.h"
#include "cpu/cpu_gemm.h"
#include "core/core.h"

#include <stdint.h>

/* The kernels under test (MINFER_ISA / MINFER_ORDER; test.h). */
static mf_cpu_cfg cfg;

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 32);
}
static float rndf(void) { return (float)rnd() / 2147483648.0f - 1.0f; } /* [-1, 1) */

static const mf_type weight_types[] = {MF_TYPE_F32,  MF_TYPE_F16,  MF_TYPE_BF16, MF_TYPE_Q4_0,
                                       MF_TYPE_Q4_1, MF_TYPE_Q5_0, MF_TYPE_Q5_1, MF_TYPE_Q8_0,
                                       MF_TYPE_Q4_K, MF_TYPE_Q5_K, MF_TYPE_Q6_K};
static const mf_type act_types[] = {MF_TYPE_Q8_0, MF_TYPE_Q8_1, MF_TYPE_Q8_K, MF_TYPE_F16, MF_TYPE_BF16, MF_TYPE_F32};

static uint16_t rnd_h(float scale) { return mf_f32_to_fp16(rndf() * scale); }

/* A weight row of n values: random bytes everywhere (every nibble, high bit and packed scale
 * pattern), then finite random fp16 block scales. */
static void random_weights(mf_type t, void *dst, int64_t n) {
    const size_t size = mf_row_size(t, n);
    uint8_t *p = dst;
    for (size_t i = 0; i < size; i++) p[i] = (uint8_t)rnd();
    const int64_t nb = n / mf_type_get_traits(t)->blck_size;
    for (int64_t i = 0; i < nb; i++) {
        switch (t) {
        case MF_TYPE_F32: ((float *)dst)[i] = rndf(); break;
        case MF_TYPE_F16: ((uint16_t *)dst)[i] = rnd_h(1.0f); break;
        case MF_TYPE_BF16: ((uint16_t *)dst)[i] = mf_f32_to_bf16(rndf()); break;
        case MF_TYPE_Q4_0: ((mf_block_q4_0 *)dst)[i].d = rnd_h(0.1f); break;
        case MF_TYPE_Q4_1: ((mf_block_q4_1 *)dst)[i].d = rnd_h(0.1f), ((mf_block_q4_1 *)dst)[i].m = rnd_h(1.0f); break;
        case MF_TYPE_Q5_0: ((mf_block_q5_0 *)dst)[i].d = rnd_h(0.1f); break;
        case MF_TYPE_Q5_1: ((mf_block_q5_1 *)dst)[i].d = rnd_h(0.1f), ((mf_block_q5_1 *)dst)[i].m = rnd_h(1.0f); break;
        case MF_TYPE_Q8_0: ((mf_block_q8_0 *)dst)[i].d = rnd_h(0.01f); break;
        case MF_TYPE_Q4_K: ((mf_block_q4_K *)dst)[i].d = rnd_h(0.01f), ((mf_block_q4_K *)dst)[i].dmin = rnd_h(0.01f); break;
        case MF_TYPE_Q5_K: ((mf_block_q5_K *)dst)[i].d = rnd_h(0.01f), ((mf_block_q5_K *)dst)[i].dmin = rnd_h(0.01f); break;
        case MF_TYPE_Q6_K: ((mf_block_q6_K *)dst)[i].d = rnd_h(0.01f); break;
        case MF_TYPE_Q2_K: ((mf_block_q2_K *)dst)[i].d = rnd_h(0.01f), ((mf_block_q2_K *)dst)[i].dmin = rnd_h(0.01f); break;
        case MF_TYPE_Q3_K: ((mf_block_q3_K *)dst)[i].d = rnd_h(0.01f); break;
        case MF_TYPE_IQ4_NL: ((mf_block_iq4_nl *)dst)[i].d = rnd_h(0.01f); break;
        case MF_TYPE_IQ4_XS: ((mf_block_iq4_xs *)dst)[i].d = rnd_h(0.01f); break;
        default: break;
        }
    }
}

/* Activation floats: a random magnitude per 32 values (from 1e-3 to 1e2), some all-zero stretches. */
static void random_acts(float *x, int64_t n) {
    float scale = 1.0f;
    for (int64_t i = 0; i < n; i++) {
        if (i % 32 == 0) scale = (rnd() % 16 == 0) ? 0.0f : powf(10.0f, 5.0f * (float)(rnd() % 1000) / 1000.0f - 3.0f);
        x[i] = rndf() * scale;
    }
}

/* sum |w_i a_i| over the dequantized rows, in double: the scale of the float rounding error. */
static double abs_dot(mf_type wt, const void *w, mf_type at, const void *a, int64_t n, float *tw, float *ta) {
    mf_type_get_traits(wt)->dequantize(w, tw, n);
    mf_type_get_traits(at)->dequantize(a, ta, n);
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += fabs((double)tw[i] * (double)ta[i]);
    return s;
}

static bool close_enough(float got, float want, double bound) {
    return fabs((double)got - (double)want) <= 2e-6 * bound + 1e-30 && got == got;
}

/* Lengths to test for a block size: every multiple up to 9 blocks, and large rows. */
static int lengths(int64_t bs, int64_t *out) {
    int k = 0;
    if (bs == 1)
        for (int64_t i = 1; i <= 80; i++) out[k++] = i;
    else
        for (int64_t i = 1; i <= 9; i++) out[k++] = i * bs;
    out[k++] = 4096;
    out[k++] = bs == 1 ? 4099 : 11008;
    out[k++] = bs == 1 ? 14336 + 5 : 14336;
    return k;
}

static void test_dots(mf_simd_level lv, int64_t max_n, uint8_t *w, uint8_t *a, float *x, float *tw, float *ta) {
    for (size_t ti = 0; ti < MF_ARRAY_LEN(weight_types); ti++) {
        const mf_type t = weight_types[ti];
        const mf_type_traits *tr = mf_type_get_traits(t);
        const mf_type at = tr->vec_dot_type;
        mf_vec_dot_fn ref = tr->vec_dot, dot = mf_simd_vec_dot_at(lv, t);
        CHECKF(ref && dot, "%s: no dot at level %s", tr->name, mf_simd_level_name(lv));
        if (!ref || !dot) continue;
        if (lv != MF_SIMD_SCALAR) CHECKF(mf_simd_has_vec_dot(lv, t), "%s has no %s kernel", tr->name, mf_simd_level_name(lv));
        int64_t ns[128];
        const int nn = lengths(tr->blck_size, ns);
        int bad = 0;
        for (int k = 0; k < nn; k++) {
            const int64_t n = ns[k];
            if (n > max_n) continue;
            for (int rep = 0; rep < 3; rep++) {
                random_weights(t, w, n);
                random_acts(x, n);
                mf_type_get_traits(at)->quantize(x, a, n);
                const float want = ref(n, w, a), got = dot(n, w, a);
                const double bound = abs_dot(t, w, at, a, n, tw, ta);
                if (!close_enough(got, want, bound) && bad++ < 3)
                    CHECKF(0, "%s %s n=%lld: %.9g vs reference %.9g (sum|wa| %.4g)", mf_simd_level_name(lv), tr->name,
                           (long long)n, got, want, bound);
                test_checks++;
            }
        }
    }
}

/* Float rows with the cases the rounding and the scale choice must agree on. */
static void special_acts(int variant, float *x, int64_t n) {
    random_acts(x, n);
    for (int64_t b = 0; b < n / 32; b++) {
        float *y = x + 32 * b;
        /* variants 8..11 leave out the NaN/inf and tiny blocks, so that whole Q8_K blocks take the fast path */
        switch (variant < 8 ? (b + variant) % 8 : (b + variant) % 4) {
        case 0: /* amax 127 gives multiplier 1 (Q8_0) and iscale +-1 (Q8_K): exact .5 ties */
            for (int j = 0; j < 32; j++) y[j] = (float)((int)(rnd() % 254) - 127) + 0.5f;
            y[rnd() % 32] = (b & 1) ? -127.0f : 127.0f;
            break;
        case 1: memset(y, 0, 32 * sizeof *y); break;
        case 2: /* equal magnitudes of both signs: the first one decides the sign of Q8_K's scale */
            y[3] = (b & 2) ? 5.0f : -5.0f;
            y[9] = -y[3];
            for (int j = 0; j < 32; j++)
                if (j != 3 && j != 9) y[j] = rndf() * 4.0f;
            break;
        case 3: /* tiny and huge magnitudes */
            for (int j = 0; j < 32; j++) y[j] = rndf() * ((b & 1) ? 1e-30f : 3e5f);
            break;
        case 4: /* so tiny that 127 / amax is infinite, with zeros (0 * inf = NaN) */
            for (int j = 0; j < 32; j++) y[j] = (j % 3) ? rndf() * 1e-38f : 0.0f;
            break;
        case 5: /* a broken activation: one infinity or NaN in the block */
            y[rnd() % 32] = (b & 1) ? -INFINITY : NAN;
            break;
        default: break;
        }
    }
    if (variant >= 8) /* Q8_K: a zero block; the largest magnitude first and last with opposite signs; only last */
        for (int64_t k = 0; k + 256 <= n; k += 256) {
            const int64_t c = (k / 256 + variant) % 4;
            if (c == 0) memset(x + k, 0, 256 * sizeof *x);
            if (c == 1 || c == 2) x[k + 255] = (k & 512) ? 2e6f : -2e6f;
            if (c == 1) x[k] = -x[k + 255];
        }
}

static void test_quantizers(mf_simd_level lv, int64_t max_n, uint8_t *o1, uint8_t *o2, float *x) {
    for (size_t ti = 0; ti < MF_ARRAY_LEN(act_types); ti++) {
        const mf_type t = act_types[ti];
        const mf_type_traits *tr = mf_type_get_traits(t);
        mf_quantize_fn ref = tr->quantize, q = mf_simd_quantize_row_at(lv, t);
        CHECKF(ref && q, "%s: no quantizer at level %s", tr->name, mf_simd_level_name(lv));
        if (!ref || !q) continue;
        int64_t ns[128];
        const int nn = lengths(tr->blck_size, ns);
        int bad = 0;
        for (int k = 0; k < nn; k++) {
            const int64_t n = ns[k];
            if (n > max_n) continue;
            for (int variant = 0; variant < 12; variant++) {
                special_acts(variant, x, n);
                if (tr->blck_size == 1 && variant == 7 && n >= 8) { /* float formats: NaN, inf, overflow, subnormal */
                    const uint32_t nan_payload = 0x7f8001a5u, neg_qnan = 0xffc00000u;
                    memcpy(&x[0], &nan_payload, 4);
                    memcpy(&x[n - 1], &neg_qnan, 4);
                    x[1] = 65520.0f, x[2] = -65519.0f, x[3] = 1e-7f, x[4] = -3e-41f, x[5] = INFINITY;
                    x[6] = 3.4e38f, x[7] = 5.9604645e-8f * 0.5f;
                }
                const size_t size = mf_row_size(t, n);
                memset(o1, 0xA5, size + 16);
                memset(o2, 0xA5, size + 16);
                ref(x, o1, n);
                q(x, o2, n);
                if (memcmp(o1, o2, size + 16) && bad++ < 3) {
                    size_t at = 0;
                    while (o1[at] == o2[at]) at++;
                    CHECKF(0, "%s quantize %s n=%lld variant %d: byte %zu of %zu differs (%02x vs reference %02x)",
                           mf_simd_level_name(lv), tr->name, (long long)n, variant, at, size, o2[at], o1[at]);
                }
                test_checks++;
            }
        }
    }
}

/* The tile entry on NR weight rows of n values against 1..9 activation rows: every (row, column)
 * result equals the level's single dot bit for bit; nothing outside the nr x nc block of out is
 * written. */
enum { NR = 3, PAD = 2 };
static void test_gemm_shape(mf_simd_level lv, mf_type t, int64_t n, const uint8_t *w, size_t ws, uint8_t *a, size_t as,
                            float *x) {
    const mf_type_traits *tr = mf_type_get_traits(t);
    const mf_type at = tr->vec_dot_type;
    mf_gemm_fn gemm = mf_simd_gemm_at(lv, t);
    mf_vec_dot_fn dot = mf_simd_vec_dot_at(lv, t);
    const int ncs[] = {1, 2, 3, 4, 5, 7, 9};
    for (size_t ci = 0; ci < MF_ARRAY_LEN(ncs); ci++) {
        const int nc = ncs[ci];
        for (int c = 0; c < nc; c++) {
            random_acts(x, n);
            mf_type_get_traits(at)->quantize(x, a + c * as, n);
        }
        float out[9 * (NR + PAD)];
        for (size_t k = 0; k < MF_ARRAY_LEN(out); k++) out[k] = -12345.0f;
        gemm(n, NR, nc, w, ws, a, as, out, NR + PAD);
        int bad = 0;
        for (int c = 0; c < 9; c++)
            for (int r = 0; r < NR + PAD; r++) {
                const float got = out[c * (NR + PAD) + r];
                if (c >= nc || r >= NR) {
                    if (got != -12345.0f) bad++;
                    continue;
                }
                const float want = dot(n, w + r * ws, a + c * as);
                if (memcmp(&got, &want, sizeof got)) bad++; /* bit for bit (simd.h) */
            }
        CHECKF(bad == 0, "%s tile %s n=%lld nc=%d: %d wrong entries", mf_simd_level_name(lv), tr->name, (long long)n,
               nc, bad);
    }
}

static void test_gemm(mf_simd_level lv, uint8_t *w, uint8_t *a, float *x) {
    for (size_t ti = 0; ti < MF_ARRAY_LEN(weight_types); ti++) {
        const mf_type t = weight_types[ti];
        const mf_type_traits *tr = mf_type_get_traits(t);
        CHECKF(mf_simd_gemm_at(lv, t) != NULL, "%s: no tile kernel at %s", tr->name, mf_simd_level_name(lv));
        if (!mf_simd_gemm_at(lv, t) || !mf_simd_vec_dot_at(lv, t)) continue;
        /* block counts with every remainder mod 4 (the AVX-512 tiles take four blocks at a time) */
        const int64_t nbs[] = {1, 2, 3, 4, 9};
        for (size_t ni = 0; ni < MF_ARRAY_LEN(nbs); ni++) {
            const int64_t n = nbs[ni] * (tr->blck_size == 1 ? 19 : tr->blck_size);
            const size_t ws = mf_row_size(t, n) + 8, as = mf_row_size(tr->vec_dot_type, n) + 40;
            for (int r = 0; r < NR; r++) random_weights(t, w + r * ws, n);
            test_gemm_shape(lv, t, n, w, ws, a, as, x);
        }
    }
}

#if defined(__x86_64__)
/* The IQ4_NL GEMM g on w against 1 to 17 of the activation rows at a, every output its twin's */
static void iq4_nl_gemm_runs(const mf_cpu_gemm *g, const mf_weight *w, const uint8_t *a, size_t as, void *scratch,
                             float *y, const char *what) {
    const int64_t K = w->ne[0], N = w->ne[1], nts[] = {1, 2, 3, 4, 5, 8, 9, 17};
    for (size_t k = 0; k < MF_ARRAY_LEN(nts); k++) {
        g->run(w, 0, N, a, as, nts[k], y, (size_t)N, scratch);
        int wrong = 0;
        for (int64_t t = 0; t < nts[k]; t++)
            for (int64_t r = 0; r < N; r++) {
                const float want = mf_cpu_dot_iq4_nl_x86_ref(K, (const uint8_t *)w->data + r * w->row_bytes, a + t * as);
                wrong += memcmp(&y[t * N + r], &want, sizeof want) != 0;
            }
        CHECKF(wrong == 0, "IQ4_NL GEMM (%s), %lld tokens: %d outputs differ from the twin", what, (long long)nts[k], wrong);
    }
}

/* IQ4_NL's ordered dots (the dispatch's decode: eight and four rows a call) and its GEMM on the
 * file's layout and on its packed copy, each output bit for bit its scalar twin's, on 19 rows (two
 * panels of eight and three more; packed: 24) and 1 to 17 tokens */
static void test_iq4_nl_ordered(uint8_t *w, uint8_t *a, float *x) {
    const int64_t K = 9 * 32, N = 19, T = 17;
    const size_t ws = mf_row_size(MF_TYPE_IQ4_NL, K), as = mf_row_size(MF_TYPE_Q8_0, K);
    for (int r = 0; r < N; r++) random_weights(MF_TYPE_IQ4_NL, w + r * ws, K);
    for (int t = 0; t < T; t++) {
        random_acts(x, K);
        mf_type_get_traits(MF_TYPE_Q8_0)->quantize(x, a + t * as, K);
    }
    const mf_cpu_ordered_dots d = mf_cpu_ordered_dots_iq4_nl_avx2();
    int wrong = 0;
    for (int r0 = 0; r0 + 8 <= N; r0 += 4) {
        float y[8];
        d.dot8(K, w + r0 * ws, ws, a, y);
        for (int r = 0; r < 8; r++) {
            const float want = mf_cpu_dot_iq4_nl_x86_ref(K, w + (r0 + r) * ws, a);
            wrong += memcmp(&y[r], &want, sizeof want) != 0;
        }
        d.dot4(K, w + r0 * ws, ws, a, y);
        for (int r = 0; r < 4; r++) {
            const float want = mf_cpu_dot_iq4_nl_x86_ref(K, w + (r0 + r) * ws, a);
            wrong += memcmp(&y[r], &want, sizeof want) != 0;
        }
    }
    CHECKF(wrong == 0, "IQ4_NL eight- and four-row dots: %d outputs differ from the twin", wrong);
    const mf_cpu_gemm *g = mf_cpu_gemm_iq4_nl_avx2();
    mf_weight wt = {.type = MF_TYPE_IQ4_NL, .ne = {K, N}, .data = w, .row_bytes = ws};
    void *scratch = aligned_alloc(64, (g->scratch_size(K) + 63) & ~(size_t)63);
    float *y = malloc(sizeof(float) * (size_t)(24 * T));
    CHECK(scratch && y);
    if (scratch && y) iq4_nl_gemm_runs(g, &wt, a, as, scratch, y, "file layout");
    /* packed at load (24 rows: a panel and a half; the file's rows must come back from it) */
    for (int r = 0; r < 24; r++) random_weights(MF_TYPE_IQ4_NL, w + r * ws, K);
    wt.ne[1] = 24;
    const size_t pb = g->packed_size ? g->packed_size(&wt) : 0;
    CHECKF(pb > 0, "IQ4_NL: no packed layout");
    uint8_t *packed = pb ? aligned_alloc(64, (pb + 63) & ~(size_t)63) : NULL, *row = malloc(ws);
    if (packed && row && y && scratch) {
        g->pack(&wt, packed);
        wt.packed = packed, wt.packed_for = g;
        int bad_rows = 0;
        for (int64_t r = 0; r < 24; r++) {
            g->packed_row(&wt, r, row);
            bad_rows += memcmp(row, w + r * ws, ws) != 0;
        }
        CHECKF(bad_rows == 0, "IQ4_NL packed rows: %d differ from the file's", bad_rows);
        iq4_nl_gemm_runs(g, &wt, a, as, scratch, y, "packed");
    }
    free(packed), free(row);
    free(scratch), free(y);
}
#endif

/* Q2_K, Q3_K, IQ4_NL and IQ4_XS: the x86 levels' kernels follow llama.cpp's x86 orders, bit for bit
 * their scalar twins (mf_cpu_dot_q2_K_x86_ref ...), and within the float bound of the portable
 * reference (llama.cpp's generic order), on random blocks with activations quantized from floats and
 * with random activation bytes (every q8 from -127 to 127, -128 too for Q2_K and Q3_K, and bsums
 * unrelated to them, which Q2_K reads), at every length of up to nine blocks and on large rows; their tiles as the other types'.
 * NEON's kernels (minfer's order) within the float bound, -128 included; the scalar level runs the
 * reference itself. */
static void test_x86_orders(mf_simd_level lv, int64_t max_n, uint8_t *w, uint8_t *a, float *x, float *tw, float *ta) {
    static const mf_type types[] = {MF_TYPE_Q2_K, MF_TYPE_Q3_K, MF_TYPE_IQ4_NL, MF_TYPE_IQ4_XS};
    static const mf_vec_dot_fn twins[] = {mf_cpu_dot_q2_K_x86_ref, mf_cpu_dot_q3_K_x86_ref, mf_cpu_dot_iq4_nl_x86_ref,
                                          mf_cpu_dot_iq4_xs_x86_ref};
    const bool x86 = lv == MF_SIMD_AVX2 || lv == MF_SIMD_AVX512;
    for (size_t ti = 0; ti < MF_ARRAY_LEN(types); ti++) {
        const mf_type t = types[ti];
        const mf_type_traits *tr = mf_type_get_traits(t);
        if (lv == MF_SIMD_SCALAR) {
            printf("  %s at %s: the reference itself (skipped)\n", tr->name, mf_simd_level_name(lv));
            continue;
        }
        CHECKF(mf_simd_has_vec_dot(lv, t), "%s has no %s kernel", tr->name, mf_simd_level_name(lv));
        const mf_vec_dot_fn ref = tr->vec_dot, dot = mf_simd_vec_dot_at(lv, t);
        /* NEON: no twin (minfer's own order there); within the float bound of the reference */
        const mf_vec_dot_fn twin = x86 ? twins[ti] : NULL;
        const mf_type at = tr->vec_dot_type;
        int64_t ns[16];
        const int nn = lengths(tr->blck_size, ns);
        int bad = 0, far = 0;
        for (int k = 0; k < nn; k++) {
            const int64_t n = ns[k];
            if (n > max_n) continue;
            for (int rep = 0; rep < 6; rep++) {
                random_weights(t, w, n);
                if (rep % 2) {
                    const size_t size = mf_row_size(at, n);
                    /* the IQ4 kernels sign the activations by the weights (vpsignb): -128, which no
                     * quantizer makes, would not negate */
                    const bool sign_trick = x86 && (t == MF_TYPE_IQ4_NL || t == MF_TYPE_IQ4_XS);
                    for (size_t i = 0; i < size; i++) {
                        a[i] = (uint8_t)rnd();
                        if (sign_trick && a[i] == 0x80) a[i] = 0x81;
                    }
                    for (int64_t b = 0; b < n / mf_type_get_traits(at)->blck_size; b++) {
                        if (at == MF_TYPE_Q8_K) ((mf_block_q8_K *)a)[b].d = rndf() * 0.01f;
                        else ((mf_block_q8_0 *)a)[b].d = rnd_h(0.01f);
                    }
                } else {
                    random_acts(x, n);
                    mf_type_get_traits(at)->quantize(x, a, n);
                }
                const float got = dot(n, w, a), generic = ref(n, w, a), want = twin ? twin(n, w, a) : got;
                if (memcmp(&got, &want, sizeof got) && bad++ < 3)
                    CHECKF(0, "%s %s n=%lld: %.9g vs its twin %.9g", mf_simd_level_name(lv), tr->name, (long long)n, got,
                           want);
                /* the bound of the dequantized rows holds for quantized activations (and, with no
                 * twin, for random activation bytes too: the integer sums are exact) */
                if ((rep % 2 == 0 || !twin) && !close_enough(got, generic, abs_dot(t, w, at, a, n, tw, ta)) && far++ < 3)
                    CHECKF(0, "%s %s n=%lld: %.9g vs reference %.9g", mf_simd_level_name(lv), tr->name, (long long)n,
                           got, generic);
                test_checks += 2;
            }
        }
        const int64_t nbs[] = {1, 2, 9};
        for (size_t ni = 0; ni < MF_ARRAY_LEN(nbs); ni++) {
            const int64_t n = nbs[ni] * tr->blck_size;
            const size_t ws = mf_row_size(t, n) + 8, as = mf_row_size(at, n) + 40;
            for (int r = 0; r < NR; r++) random_weights(t, w + r * ws, n);
            test_gemm_shape(lv, t, n, w, ws, a, as, x);
        }
#if defined(__x86_64__)
        if (t == MF_TYPE_IQ4_NL) test_iq4_nl_ordered(w, a, x);
#endif
    }
}

/* MINFER_ISA in a child process (the level is chosen once per process). */
static void test_isa_override(const char *self) {
    mf_simd_level best = MF_SIMD_SCALAR;
    for (int l = 0; l < MF_SIMD_LEVEL_COUNT; l++)
        if (mf_simd_level_supported((mf_simd_level)l)) best = (mf_simd_level)l;
    CHECK(cfg.level == best || getenv("MINFER_ISA"));
    const char *asks[] = {"scalar", "avx2", "avx512", "neon", "bogus"};
    for (size_t i = 0; i < MF_ARRAY_LEN(asks); i++) {
        mf_simd_level want = best;
        for (int l = 0; l < MF_SIMD_LEVEL_COUNT; l++)
            if (!strcmp(asks[i], mf_simd_level_name((mf_simd_level)l)) && mf_simd_level_supported((mf_simd_level)l))
                want = (mf_simd_level)l;
        char cmd[4200], got[64] = "";
        /* MINFER_TEST_WRAPPER runs the child under an emulator (qemu) when cross-testing */
        const char *wrap = getenv("MINFER_TEST_WRAPPER");
        snprintf(cmd, sizeof cmd, "MINFER_ISA=%s MINFER_LOG=error %s '%s' --print-level", asks[i], wrap ? wrap : "", self);
        FILE *p = popen(cmd, "r");
        CHECK(p != NULL);
        if (!p) continue;
        if (!fgets(got, sizeof got, p)) got[0] = 0;
        pclose(p);
        got[strcspn(got, "\n")] = 0;
        CHECKF(!strcmp(got, mf_simd_level_name(want)), "MINFER_ISA=%s: child uses '%s', want '%s'", asks[i], got,
               mf_simd_level_name(want));
    }
}

int main(int argc, char **argv) {
    cfg = mf_cpu_cfg_for(test_isa(), test_order());
    if (argc > 1 && !strcmp(argv[1], "--print-level")) {
        printf("%s\n", mf_simd_level_name(cfg.level));
        return 0;
    }
    const bool sanitized = getenv("MINFER_SANITIZED") != NULL;
    const int64_t max_n = sanitized ? 4096 : 14336 + 5;
    const size_t cap = (size_t)max_n * 4 + 65536; /* also 9 activation rows of 9 Q8_K blocks (tiles) */
    uint8_t *w = malloc(cap), *a = malloc(cap), *o = malloc(cap);
    float *x = malloc(cap), *tw = malloc(cap), *ta = malloc(cap);
    CHECK(w && a && o && x && tw && ta);
    if (!(w && a && o && x && tw && ta)) return test_summary("test_simd");

    printf("cpu level: %s (%s)\n", mf_simd_level_name(cfg.level), mf_isa_kernels_name((mf_isa)(cfg.level + 1)));
    for (int l = 0; l < MF_SIMD_LEVEL_COUNT; l++) {
        const mf_simd_level lv = (mf_simd_level)l;
        if (!mf_simd_level_supported(lv)) continue;
        printf("testing level %s\n", mf_simd_level_name(lv));
        test_dots(lv, max_n, w, a, x, tw, ta);
        test_quantizers(lv, max_n, a, o, x);
        test_gemm(lv, w, a, x);
        test_x86_orders(lv, max_n, w, a, x, tw, ta);
    }
    test_isa_override(argv[0]);
    free(w), free(a), free(o), free(x), free(tw), free(ta);
    return test_summary("test_simd");
}
