/* test_quant.c: the reference quantizers, dequantizers and dot products of every weight and
 * activation format: hand-made blocks encoded from the documented layouts, round trips on random
 * data with per-type error bounds, vec_dot against the dot of the dequantized rows at every length
 * the block size allows, and the activation quantizers' exact rounding semantics. */
#include "test.h"
#include "core/core.h"
#include "quant/quant.h"
#include "simd/simd.h"
#include "cpu/cpu.h"

#include <stdint.h>

/* The kernels under test (MINFER_ISA / MINFER_ORDER; test.h). */
static mf_cpu_cfg cfg;

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint32_t rng_u32(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 32);
}
static float rng_uniform(void) { return (rng_u32() >> 8) * (1.0f / 16777216.0f) * 2.0f - 1.0f; }
/* Roughly Gaussian (sum of 4 uniforms) with occasional outliers, like real weights. */
static float rng_weight(void) {
    float v = (rng_uniform() + rng_uniform() + rng_uniform() + rng_uniform()) * 0.5f;
    if ((rng_u32() & 255) == 0) v *= 6.0f;
    return v;
}

static const mf_type weight_types[] = {MF_TYPE_Q4_0, MF_TYPE_Q4_1, MF_TYPE_Q5_0, MF_TYPE_Q5_1, MF_TYPE_Q8_0,
                                       MF_TYPE_Q2_K, MF_TYPE_Q3_K, MF_TYPE_Q4_K, MF_TYPE_Q5_K, MF_TYPE_Q6_K,
                                       MF_TYPE_F16,  MF_TYPE_BF16, MF_TYPE_F32};

/* ---- hand-made blocks: fields written from the layout comments in quant.h ---- */

static void test_known_blocks(void) {
    float out[256];
    const mf_fp16 one = mf_f32_to_fp16(1.0f), half = mf_f32_to_fp16(0.5f);

    /* Q4_0: element j < 16 is the low nibble of qs[j], element j + 16 the high nibble; x = (q - 8) d */
    mf_block_q4_0 b40 = {.d = half};
    for (int j = 0; j < 16; j++) b40.qs[j] = (uint8_t)(j | (15 - j) << 4);
    mf_type_get_traits(MF_TYPE_Q4_0)->dequantize(&b40, out, 32);
    for (int j = 0; j < 16; j++) {
        CHECK_NEAR(out[j], (j - 8) * 0.5, 0);
        CHECK_NEAR(out[j + 16], (7 - j) * 0.5, 0);
    }

    /* Q4_1: x = q d + m */
    mf_block_q4_1 b41 = {.d = half, .m = mf_f32_to_fp16(-2.0f)};
    for (int j = 0; j < 16; j++) b41.qs[j] = (uint8_t)(j | (15 - j) << 4);
    mf_type_get_traits(MF_TYPE_Q4_1)->dequantize(&b41, out, 32);
    for (int j = 0; j < 16; j++) {
        CHECK_NEAR(out[j], j * 0.5 - 2, 0);
        CHECK_NEAR(out[j + 16], (15 - j) * 0.5 - 2, 0);
    }

    /* Q5_0/Q5_1: bit 4 of element j is bit j of qh (little-endian u32). Set it for odd j only. */
    mf_block_q5_0 b50 = {.d = one};
    mf_block_q5_1 b51 = {.d = one, .m = mf_f32_to_fp16(1.0f)};
    for (int j = 0; j < 16; j++) b50.qs[j] = b51.qs[j] = (uint8_t)(j | (15 - j) << 4);
    for (int j = 1; j < 32; j += 2) {
        b50.qh[j / 8] |= (uint8_t)(1u << (j % 8));
        b51.qh[j / 8] |= (uint8_t)(1u << (j % 8));
    }
    mf_type_get_traits(MF_TYPE_Q5_0)->dequantize(&b50, out, 32);
    for (int e = 0; e < 32; e++) {
        const int lo = e < 16 ? e : 15 - (e - 16), q = lo | (e & 1) << 4;
        CHECKF(out[e] == (float)(q - 16), "q5_0 element %d: %g, want %d", e, out[e], q - 16);
    }
    mf_type_get_traits(MF_TYPE_Q5_1)->dequantize(&b51, out, 32);
    for (int e = 0; e < 32; e++) {
        const int lo = e < 16 ? e : 15 - (e - 16), q = lo | (e & 1) << 4;
        CHECKF(out[e] == (float)(q + 1), "q5_1 element %d: %g, want %d", e, out[e], q + 1);
    }

    /* Q8_0 */
    mf_block_q8_0 b80 = {.d = half};
    for (int j = 0; j < 32; j++) b80.qs[j] = (int8_t)(j * 8 - 128);
    mf_type_get_traits(MF_TYPE_Q8_0)->dequantize(&b80, out, 32);
    for (int j = 0; j < 32; j++) CHECK_NEAR(out[j], (j * 8 - 128) * 0.5, 0);

    /* Q4_K: sub-block s has scale s+1 and min 2s (6-bit packing as documented for
     * mf_get_scale_min_k4); element e of sub-block s has level (e + s) % 16. Chunk c of qs holds
     * sub-block 2c in its low nibbles and 2c+1 in its high nibbles. */
    mf_block_q4_K b4k = {.d = half, .dmin = one};
    int sc[8], mn[8];
    for (int s = 0; s < 8; s++) sc[s] = s + 1 + (s >= 4 ? 40 : 0), mn[s] = 2 * s + (s >= 4 ? 33 : 0);
    for (int s = 0; s < 8; s++) {
        if (s < 4) {
            b4k.scales[s] = (uint8_t)sc[s];
            b4k.scales[s + 4] = (uint8_t)mn[s];
        } else {
            b4k.scales[s + 4] = (uint8_t)((sc[s] & 15) | (mn[s] & 15) << 4);
            b4k.scales[s - 4] |= (uint8_t)((sc[s] >> 4) << 6);
            b4k.scales[s] |= (uint8_t)((mn[s] >> 4) << 6);
        }
    }
    for (int s = 0; s < 8; s++) {
        uint8_t d6, m6;
        mf_get_scale_min_k4(s, b4k.scales, &d6, &m6);
        CHECKF(d6 == sc[s] && m6 == mn[s], "scale/min %d: %d/%d want %d/%d", s, d6, m6, sc[s], mn[s]);
    }
    for (int s = 0; s < 8; s++)
        for (int l = 0; l < 32; l++) b4k.qs[32 * (s / 2) + l] |= (uint8_t)(((l + s) % 16) << (4 * (s % 2)));
    mf_type_get_traits(MF_TYPE_Q4_K)->dequantize(&b4k, out, 256);
    int bad = 0;
    for (int e = 0; e < 256; e++) {
        const int s = e / 32, l = e % 32;
        bad += out[e] != 0.5f * sc[s] * ((l + s) % 16) - 1.0f * mn[s];
    }
    CHECKF(bad == 0, "q4_K: %d of 256 elements wrong", bad);

    /* Q5_K: as Q4_K plus bit 4 of element l of sub-block s in bit s of qh[l]; set it when (l+s) odd */
    mf_block_q5_K b5k = {.d = b4k.d, .dmin = b4k.dmin};
    memcpy(b5k.scales, b4k.scales, sizeof b5k.scales);
    memcpy(b5k.qs, b4k.qs, sizeof b5k.qs);
    for (int s = 0; s < 8; s++)
        for (int l = 0; l < 32; l++)
            if ((l + s) & 1) b5k.qh[l] |= (uint8_t)(1u << s);
    mf_type_get_traits(MF_TYPE_Q5_K)->dequantize(&b5k, out, 256);
    bad = 0;
    for (int e = 0; e < 256; e++) {
        const int s = e / 32, l = e % 32, q = (l + s) % 16 + ((l + s) & 1 ? 16 : 0);
        bad += out[e] != 0.5f * sc[s] * q - 1.0f * mn[s];
    }
    CHECKF(bad == 0, "q5_K: %d of 256 elements wrong", bad);

    /* Q2_K: group g has scale g and min 15 - g; element e = 128h + 32k + l is bits 2k..2k+1 of
     * qs[32h + l] */
    mf_block_q2_K b2k = {.d = half, .dmin = mf_f32_to_fp16(0.25f)};
    for (int g = 0; g < 16; g++) b2k.scales[g] = (uint8_t)(g | (15 - g) << 4);
    for (int e = 0; e < 256; e++) b2k.qs[32 * (e / 128) + e % 32] |= (uint8_t)(((e * 5) % 4) << (2 * ((e % 128) / 32)));
    mf_type_get_traits(MF_TYPE_Q2_K)->dequantize(&b2k, out, 256);
    bad = 0;
    for (int e = 0; e < 256; e++) bad += out[e] != 0.5f * (e / 16) * ((e * 5) % 4) - 0.25f * (15 - e / 16);
    CHECKF(bad == 0, "q2_K: %d of 256 elements wrong", bad);

    /* Q3_K: 6-bit stored scale s_g = (3g + 5) % 64 (low nibbles in bytes 0..7, two per byte by g / 8;
     * high 2 bits in byte 8 + g % 4 at bit 2 (g / 4)); level q = (3e) % 8 - 4, whose low 2 bits are
     * stored as in Q2_K and whose bit 2 is bit e / 32 of hmask[e % 32] */
    mf_block_q3_K b3k = {.d = half};
    for (int g = 0; g < 16; g++) {
        const int sg = (3 * g + 5) % 64;
        b3k.scales[g % 8] |= (uint8_t)((sg & 15) << (4 * (g / 8)));
        b3k.scales[8 + g % 4] |= (uint8_t)((sg >> 4) << (2 * (g / 4)));
    }
    for (int e = 0; e < 256; e++) {
        const int u = (3 * e) % 8; /* q + 4 */
        b3k.qs[32 * (e / 128) + e % 32] |= (uint8_t)((u & 3) << (2 * ((e % 128) / 32)));
        b3k.hmask[e % 32] |= (uint8_t)((u >> 2) << (e / 32));
    }
    mf_type_get_traits(MF_TYPE_Q3_K)->dequantize(&b3k, out, 256);
    bad = 0;
    for (int e = 0; e < 256; e++) bad += out[e] != 0.5f * ((3 * (e / 16) + 5) % 64 - 32) * ((3 * e) % 8 - 4);
    CHECKF(bad == 0, "q3_K: %d of 256 elements wrong", bad);

    /* Q6_K: element e of half h = e / 128, r = e % 128, l = r % 32, quarter k = r / 32 lives in
     * ql[64h + l + 32 (k & 1)] (low nibble for k < 2, high for k >= 2) and bits 2k..2k+1 of qh[32h + l];
     * x = d * scales[e / 16] * (q - 32). */
    mf_block_q6_K b6k = {.d = half};
    for (int g = 0; g < 16; g++) b6k.scales[g] = (int8_t)(g - 8);
    for (int e = 0; e < 256; e++) {
        const int h = e / 128, r = e % 128, l = r % 32, k = r / 32, q = (e * 7) % 64;
        b6k.ql[64 * h + l + 32 * (k & 1)] |= (uint8_t)((q & 15) << (k >= 2 ? 4 : 0));
        b6k.qh[32 * h + l] |= (uint8_t)((q >> 4) << (2 * k));
    }
    mf_type_get_traits(MF_TYPE_Q6_K)->dequantize(&b6k, out, 256);
    bad = 0;
    for (int e = 0; e < 256; e++) bad += out[e] != 0.5f * (e / 16 - 8) * ((e * 7) % 64 - 32);
    CHECKF(bad == 0, "q6_K: %d of 256 elements wrong", bad);
}

/* ---- round trips ---- */

/* Max |x - dequant(quant(x))| over each block must stay under bound * (block amax or range). The
 * bounds are the rounding step of each format plus scale-rounding slack; a misplaced nibble or
 * scale gives errors of the order of the data itself. */
static double roundtrip_bound(mf_type t) {
    switch (t) {
    /* symmetric formats map the signed max to -8 (-16) d, so the opposite extreme clamps at +7 (+15):
     * up to a whole step there */
    case MF_TYPE_Q4_0: return 1.0 / 8 + 0.01;
    case MF_TYPE_Q4_1: return 1.0 / 30 + 0.005; /* half step of range / 15 */
    case MF_TYPE_Q5_0: return 1.0 / 16 + 0.005;
    case MF_TYPE_Q5_1: return 1.0 / 62 + 0.003;
    case MF_TYPE_Q8_0: return 1.0 / 254 + 0.001;
    case MF_TYPE_Q8_1: return 1.0 / 254 + 0.001;
    case MF_TYPE_Q8_K: return 1.0 / 254 + 1e-6;
    case MF_TYPE_Q2_K: return 0.25; /* 4 levels per 16 values with 4-bit scales and mins */
    case MF_TYPE_Q3_K: return 0.22;
    case MF_TYPE_Q4_K: return 0.045; /* per 32-value sub-block with a 6-bit scale and min */
    case MF_TYPE_Q5_K: return 0.025;
    case MF_TYPE_Q6_K: return 0.02;
    case MF_TYPE_F16: return 1.0 / 1024;
    case MF_TYPE_BF16: return 1.0 / 250;
    default: return 0;
    }
}

static void roundtrip(mf_type t, mf_quantize_fn q, const char *what, const float *x, int64_t n, float *y,
                      uint8_t *buf) {
    const mf_type_traits *tr = mf_type_get_traits(t);
    q(x, buf, n);
    tr->dequantize(buf, y, n);
    const int64_t blk = tr->blck_size > 1 ? tr->blck_size : 32;
    const double bound = roundtrip_bound(t);
    double worst = 0;
    for (int64_t b0 = 0; b0 < n; b0 += blk) {
        float lo = x[b0], hi = x[b0], amax = 0, err = 0;
        for (int64_t i = b0; i < b0 + blk; i++) {
            lo = MF_MIN(lo, x[i]);
            hi = MF_MAX(hi, x[i]);
            amax = MF_MAX(amax, fabsf(x[i]));
            err = MF_MAX(err, fabsf(x[i] - y[i]));
        }
        /* asymmetric formats are bounded by the range (with the min clamped to <= 0 for K-quants) */
        const bool asym = t == MF_TYPE_Q4_1 || t == MF_TYPE_Q5_1 || t == MF_TYPE_Q2_K || t == MF_TYPE_Q4_K ||
                          t == MF_TYPE_Q5_K;
        const float scale = asym ? hi - MF_MIN(lo, 0.f) : amax;
        if (scale > 0) worst = MF_MAX(worst, err / scale);
    }
    CHECKF(worst <= bound, "%s %s round trip: worst block error %.5f of the block scale > %.5f", tr->name, what,
           worst, bound);
}

static void test_roundtrips(int reps) {
    enum { N = 4096 };
    static float x[N], y[N];
    static uint8_t buf[N * 4];
    for (int r = 0; r < reps; r++) {
        /* amplitudes that keep the fp16 scales normal: tiny data has subnormal fp16 scales and
         * coarser steps, which is the format, not a bug */
        const float amp = r == 0 ? 1.0f : r == 1 ? 8.0f : 50.0f;
        for (int i = 0; i < N; i++) x[i] = amp * rng_weight();
        if (r == 0)
            for (int i = 0; i < 256; i++) x[i] = 0; /* a whole zero super-block */
        for (size_t k = 0; k < MF_ARRAY_LEN(weight_types); k++) {
            const mf_type t = weight_types[k];
            if (t == MF_TYPE_F32) continue;
            roundtrip(t, mf_quant_file_quantizer(t), "file", x, N, y, buf);
            if (r == 0) {
                bool zeros = true;
                for (int i = 0; i < 256; i++) zeros &= y[i] == 0.0f;
                CHECKF(zeros, "%s: zero input does not come back as zeros", mf_type_name(t));
            }
        }
        roundtrip(MF_TYPE_Q8_0, mf_type_get_traits(MF_TYPE_Q8_0)->quantize, "activation", x, N, y, buf);
        roundtrip(MF_TYPE_Q8_1, mf_type_get_traits(MF_TYPE_Q8_1)->quantize, "activation", x, N, y, buf);
        roundtrip(MF_TYPE_Q8_K, mf_type_get_traits(MF_TYPE_Q8_K)->quantize, "activation", x, N, y, buf);
    }
    /* F32 is exact */
    for (int i = 0; i < 64; i++) x[i] = rng_weight();
    mf_type_get_traits(MF_TYPE_F32)->quantize(x, buf, 64);
    mf_type_get_traits(MF_TYPE_F32)->dequantize(buf, y, 64);
    CHECK(memcmp(x, y, 64 * sizeof(float)) == 0);
}

/* ---- dot products ---- */

/* vec_dot(w, a) against sum(dequant(w) * dequant(a)) in double, for n = 1..max_blocks blocks: the
 * integer/float structure must reproduce the dot of the dequantized rows to float rounding. Also
 * against the float activations x with the looser bound of activation quantization. */
static void test_vec_dots(int max_blocks) {
    enum { NMAX = 256 * 8 };
    static float w[NMAX], x[NMAX], wd[NMAX], ad[NMAX];
    static uint8_t wq[NMAX * 4], aq[NMAX * 4];
    for (size_t k = 0; k < MF_ARRAY_LEN(weight_types); k++) {
        const mf_type t = weight_types[k];
        const mf_type_traits *tr = mf_type_get_traits(t);
        const mf_type at = tr->vec_dot_type;
        const mf_type_traits *atr = mf_type_get_traits(at);
        CHECKF(tr->vec_dot && atr->quantize && atr->dequantize, "%s: missing dot or activation functions", tr->name);
        if (!tr->vec_dot || !atr->quantize) continue;
        const int64_t blk = MF_MAX(tr->blck_size, atr->blck_size) > 1 ? MF_MAX(tr->blck_size, atr->blck_size) : 32;
        double worst_exact = 0, worst_float = 0;
        for (int nb = 1; nb <= max_blocks && nb * blk <= NMAX; nb++) {
            const int64_t n = nb * blk;
            for (int64_t i = 0; i < n; i++) {
                w[i] = rng_weight();
                x[i] = rng_weight() * 3.0f;
            }
            mf_quant_file_quantizer(t)(w, wq, n);
            atr->quantize(x, aq, n);
            tr->dequantize(wq, wd, n);
            atr->dequantize(aq, ad, n);
            double exact = 0, flt = 0, mag = 0;
            for (int64_t i = 0; i < n; i++) {
                exact += (double)wd[i] * ad[i];
                flt += (double)wd[i] * x[i];
                mag += fabs((double)wd[i] * x[i]);
            }
            const float got = tr->vec_dot(n, wq, aq);
            worst_exact = MF_MAX(worst_exact, fabs(got - exact) / mag);
            worst_float = MF_MAX(worst_float, fabs(got - flt) / mag);
        }
        /* Q4_1/Q5_1 use s = fp16(d * sum q) in place of the exact sum, so allow the fp16 rounding */
        const double exact_tol = (t == MF_TYPE_Q4_1 || t == MF_TYPE_Q5_1) ? 1e-3 : 2e-6;
        const double float_tol = at == MF_TYPE_F32 ? 1e-6 : at == MF_TYPE_BF16 ? 1e-2 : at == MF_TYPE_F16 ? 2e-3 : 1e-2;
        CHECKF(worst_exact <= exact_tol, "%s . %s: vec_dot vs dequantized dot: %.3g > %.3g", tr->name, atr->name,
               worst_exact, exact_tol);
        CHECKF(worst_float <= float_tol, "%s . %s: vec_dot vs float activations: %.3g > %.3g", tr->name, atr->name,
               worst_float, float_tol);
        /* the dispatcher returns a function that agrees (the reference or a SIMD twin) */
        const mf_vec_dot_fn fast = mf_simd_vec_dot_at(cfg.level, t);
        const mf_quantize_fn fastq = mf_simd_quantize_row_at(cfg.level, at);
        CHECK(fast != NULL && fastq != NULL);
        if (fast && fastq) {
            const int64_t n = blk * MF_MIN(max_blocks, NMAX / blk);
            mf_quant_file_quantizer(t)(w, wq, n);
            fastq(x, aq, n);
            const float ref = tr->vec_dot(n, wq, aq), got = fast(n, wq, aq);
            CHECKF(fabsf(ref - got) <= 1e-4f * (1.0f + fabsf(ref)), "%s: dispatched dot %g vs reference %g", tr->name,
                   got, ref);
        }
    }
}

/* ---- activation quantizers: exact rounding semantics ---- */

static void test_activation_semantics(void) {
    float x[256];
    /* amax 127 makes the multiplier exactly 1: 2.5 and -3.5 are ties. Activations round to even
     * (2, -4); the Q8_0 file quantizer rounds away from zero (3, -4). */
    for (int i = 0; i < 32; i++) x[i] = 0.0f;
    x[0] = 127.0f;
    x[1] = 2.5f;
    x[2] = -3.5f;
    x[3] = 0.5f;
    mf_block_q8_0 a, wq;
    mf_type_get_traits(MF_TYPE_Q8_0)->quantize(x, &a, 32);
    mf_quant_file_quantizer(MF_TYPE_Q8_0)(x, &wq, 32);
    CHECK(a.qs[0] == 127 && a.qs[1] == 2 && a.qs[2] == -4 && a.qs[3] == 0);
    CHECK(wq.qs[0] == 127 && wq.qs[1] == 3 && wq.qs[2] == -4 && wq.qs[3] == 1);
    CHECK(mf_fp16_to_f32(a.d) == 1.0f);

    /* Q8_1: s = d * sum(q) */
    mf_block_q8_1 a1;
    for (int i = 0; i < 32; i++) x[i] = rng_uniform();
    mf_type_get_traits(MF_TYPE_Q8_1)->quantize(x, &a1, 32);
    int sum = 0;
    float amax = 0;
    for (int i = 0; i < 32; i++) sum += a1.qs[i], amax = MF_MAX(amax, fabsf(x[i]));
    CHECK(a1.s == mf_f32_to_fp16(amax / 127.f * (float)sum));
    CHECK(a1.d == mf_f32_to_fp16(amax / 127.f));

    /* Q8_K: the largest magnitude is positive here, so d = 1 / (-127 / max) < 0 and that element
     * becomes -127; bsums are the sums of each 16 */
    for (int i = 0; i < 256; i++) x[i] = rng_uniform();
    x[77] = 4.0f;
    mf_block_q8_K k8;
    mf_type_get_traits(MF_TYPE_Q8_K)->quantize(x, &k8, 256);
    CHECK(k8.d == 1 / (-127.f / 4.0f));
    CHECK(k8.qs[77] == -127);
    int bs_ok = 1;
    for (int g = 0; g < 16; g++) {
        int s = 0;
        for (int l = 0; l < 16; l++) s += k8.qs[16 * g + l];
        bs_ok &= s == k8.bsums[g];
    }
    CHECK(bs_ok);
    /* ties to even in Q8_K too: with max -127 the scale is exactly 1 */
    for (int i = 0; i < 256; i++) x[i] = 0;
    x[0] = -127.0f;
    x[1] = 2.5f;
    x[2] = 3.5f;
    mf_type_get_traits(MF_TYPE_Q8_K)->quantize(x, &k8, 256);
    CHECK(k8.d == 1.0f && k8.qs[0] == -127 && k8.qs[1] == 2 && k8.qs[2] == 4);

    /* all-zero input: zero scales, no NaN */
    for (int i = 0; i < 256; i++) x[i] = 0;
    mf_type_get_traits(MF_TYPE_Q8_K)->quantize(x, &k8, 256);
    CHECK(k8.d == 0.0f && k8.bsums[3] == 0);
    mf_type_get_traits(MF_TYPE_Q8_0)->quantize(x, &a, 32);
    CHECK(a.d == 0 && a.qs[5] == 0);
}

/* ---- IQ4_NL / IQ4_XS (read-only formats): hand-made blocks and dots on random blocks ---- */

static const int iq4_levels[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

static void random_iq4_blocks(mf_type t, void *dst, int64_t nblocks) {
    const size_t bs = mf_type_get_traits(t)->type_size;
    uint8_t *p = dst;
    for (size_t i = 0; i < (size_t)nblocks * bs; i++) p[i] = (uint8_t)rng_u32();
    for (int64_t b = 0; b < nblocks; b++) {
        const mf_fp16 d = mf_f32_to_fp16(0.001f + 0.01f * fabsf(rng_uniform()));
        memcpy(p + (size_t)b * bs, &d, sizeof d); /* d is the first field of both blocks */
    }
}

static void test_iq4(int max_blocks) {
    float out[256];
    mf_block_iq4_nl nl = {.d = mf_f32_to_fp16(0.5f)};
    for (int j = 0; j < 16; j++) nl.qs[j] = (uint8_t)(j | (15 - j) << 4);
    mf_type_get_traits(MF_TYPE_IQ4_NL)->dequantize(&nl, out, 32);
    int bad = 0;
    for (int j = 0; j < 16; j++) bad += out[j] != 0.5f * iq4_levels[j] || out[j + 16] != 0.5f * iq4_levels[15 - j];
    CHECKF(bad == 0, "iq4_nl: %d wrong", bad);

    /* IQ4_XS: sub-block b has stored scale (5b + 3) % 64: low nibble in scales_l[b / 2] (nibble b % 2),
     * high 2 bits at bit 2b of scales_h; qs[16b + j] holds levels (j + b) % 16 and 15 - j */
    mf_block_iq4_xs xs = {.d = mf_f32_to_fp16(0.25f)};
    for (int b = 0; b < 8; b++) {
        const int sc = (5 * b + 3) % 64;
        xs.scales_l[b / 2] |= (uint8_t)((sc & 15) << (4 * (b % 2)));
        xs.scales_h |= (uint16_t)((sc >> 4) << (2 * b));
        for (int j = 0; j < 16; j++) xs.qs[16 * b + j] = (uint8_t)((j + b) % 16 | (15 - j) << 4);
    }
    mf_type_get_traits(MF_TYPE_IQ4_XS)->dequantize(&xs, out, 256);
    bad = 0;
    for (int e = 0; e < 256; e++) {
        const int b = e / 32, j = e % 32, sc = (5 * b + 3) % 64 - 32;
        const int q = j < 16 ? (j + b) % 16 : 15 - (j - 16);
        bad += out[e] != 0.25f * sc * iq4_levels[q];
    }
    CHECKF(bad == 0, "iq4_xs: %d of 256 wrong", bad);

    /* vec_dot against the dot of the dequantized rows */
    static uint8_t wq[8 * 136], aq[8 * 292];
    static float wd[2048], ad[2048], x[2048];
    const mf_type types[] = {MF_TYPE_IQ4_NL, MF_TYPE_IQ4_XS};
    for (int k = 0; k < 2; k++) {
        const mf_type_traits *tr = mf_type_get_traits(types[k]), *atr = mf_type_get_traits(tr->vec_dot_type);
        double worst = 0;
        for (int nb = 1; nb <= max_blocks; nb++) {
            const int64_t n = nb * tr->blck_size;
            random_iq4_blocks(types[k], wq, nb);
            for (int64_t i = 0; i < n; i++) x[i] = rng_weight();
            atr->quantize(x, aq, n);
            tr->dequantize(wq, wd, n);
            atr->dequantize(aq, ad, n);
            double exact = 0, mag = 0;
            for (int64_t i = 0; i < n; i++) exact += (double)wd[i] * ad[i], mag += fabs((double)wd[i] * ad[i]);
            worst = MF_MAX(worst, fabs(tr->vec_dot(n, wq, aq) - exact) / mag);
        }
        CHECKF(worst <= 2e-6, "%s: vec_dot vs dequantized dot %.3g", tr->name, worst);
    }
}

/* Table sanity: every type with a dot has a dequantize and an activation quantizer, names parse. */
static void test_table(void) {
    for (uint32_t t = 0; t < MF_TYPE_COUNT; t++) {
        const mf_type_traits *tr = mf_type_get_traits(t);
        if (!tr->name) continue;
        mf_type back;
        CHECKF(mf_type_from_name(tr->name, &back) && back == t, "name %s", tr->name);
        if (tr->vec_dot) {
            const mf_type_traits *a = mf_type_get_traits(tr->vec_dot_type);
            CHECKF(tr->dequantize && a->quantize && a->dequantize, "%s", tr->name);
        }
    }
    CHECK(mf_quant_file_quantizer(MF_TYPE_Q8_K) == NULL);
    CHECK(mf_quant_file_quantizer(MF_TYPE_IQ4_NL) == NULL);
    CHECK(mf_row_size(MF_TYPE_Q4_K, 512) == 288);
    CHECK(mf_row_size(MF_TYPE_Q4_K, 300) == 0);
}

int main(void) {
    cfg = mf_cpu_cfg_for(test_isa(), test_order());
    const bool sanitized = getenv("MINFER_SANITIZED") != NULL;
    test_table();
    test_known_blocks();
    test_roundtrips(sanitized ? 1 : 3);
    test_vec_dots(sanitized ? 4 : 8);
    test_activation_semantics();
    test_iq4(sanitized ? 3 : 8);
    return test_summary("test_quant");
}
