/* cpu_attn.c: the CPU backend's attention: softmax(q.K^T * scale) . V over the cells of each
 * token's sequence with position <= its own (layouts in cpu.h), for an F16 or F32 KV cache. */
#include "cpu/cpu.h"
#include "cpu/cpu_dot_order.h"

#include <math.h>
#include <pthread.h>
#include <string.h>

/* q.k with 8 independent partial sums (the compiler keeps them in one vector register), summed
 * pairwise at the end; head_dim is even, any tail is summed in order. */
static float dot_lanes(const float *x, const float *y, int64_t n) {
    float acc[8] = {0};
    int64_t n8 = n & ~(int64_t)7;
    for (int64_t i = 0; i < n8; i += 8)
        for (int l = 0; l < 8; l++) acc[l] += x[i + l] * y[i + l];
    float s = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
    for (int64_t i = n8; i < n; i++) s += x[i] * y[i];
    return s;
}

/* Every half value as a float (256 KiB): the F16 cache is read once per (query, head, cell), so a
 * table load beats converting bits each time. Filled once, before the first backend exists. */
static float fp16_table[1 << 16];
static pthread_once_t fp16_once = PTHREAD_ONCE_INIT;

static void fill_fp16_table(void) {
    for (uint32_t i = 0; i < (1u << 16); i++) fp16_table[i] = mf_fp16_to_f32((mf_fp16)i);
}

void mf_cpu_init_tables(void) { pthread_once(&fp16_once, fill_fp16_table); }

/* K/V head row of a cell as floats: F32 rows are used in place, F16 rows converted into buf. */
static const float *kv_head_row(const mf_kv_cache *kv, const uint8_t *region, int32_t cell, int32_t kvh,
                                float *buf) {
    size_t off = (size_t)cell * kv->row_bytes;
    int64_t hd = kv->head_dim;
    if (kv->type == MF_TYPE_F32) return (const float *)(region + off) + (size_t)kvh * hd;
    const mf_fp16 *h = (const mf_fp16 *)(region + off) + (size_t)kvh * hd;
    for (int64_t d = 0; d < hd; d++) buf[d] = fp16_table[h[d]];
    return buf;
}

#if defined(__x86_64__)
/* F32 cache, llama.cpp's order (no flash attention): scores K.q as its F32 dot, softmax with its
 * vector exp and per-16 sums, then V^T . p as its F32 GEMM. One head at a time. */
static void attention_ordered(const mf_attn_params *ap, const mf_kv_cache *kv, const float *q, const int32_t *pos,
                              const int32_t *seq, float *out, int64_t u0, int64_t u1, float *scores) {
    const int64_t hd = ap->head_dim, nh = ap->n_head, group = ap->n_head / ap->n_head_kv;
    const int32_t nc = kv->n_active;
    const size_t stride = kv->row_bytes / sizeof(float);
    float acc[16 * MF_MAX_HEAD_DIM];
    for (int64_t u = u0; u < u1; u++) {
        const int64_t t = u / nh, h = u % nh, kvh = h / group;
        float *o = out + u * hd;
        if (seq[t] < 0) {
            memset(o, 0, (size_t)hd * sizeof(float));
            continue;
        }
        const float *qh = q + u * hd;
        const float *K = (const float *)kv->k[ap->layer] + (size_t)kvh * hd;
        const float *V = (const float *)kv->v[ap->layer] + (size_t)kvh * hd;
        float mx = -INFINITY;
        for (int32_t c = 0; c < nc; c++) {
            bool vis = kv->cell_seq[c] == seq[t] && kv->cell_pos[c] <= pos[t];
            scores[c] = vis ? mf_cpu_dot_f32_ord_avx2(K + (size_t)c * stride, qh, hd) * ap->scale : -INFINITY;
            if (scores[c] > mx) mx = scores[c];
        }
        if (mx == -INFINITY) { /* nothing visible (no cell stored for this token): zeros, not NaN */
            memset(o, 0, (size_t)hd * sizeof(float));
            continue;
        }
        double sum = mf_cpu_softmax_exp_ord_avx2(scores, nc, mx);
        const float inv = sum > 0.0 ? (float)(1.0 / sum) : 0.0f;
        for (int32_t c = 0; c < nc; c++) scores[c] *= inv;
        mf_cpu_pv_ord_avx2(scores, nc, V, stride, hd, acc, o);
    }
}
#endif

void mf_cpu_attention(const mf_attn_params *ap, const mf_kv_cache *kv, const float *q, const int32_t *pos,
                      const int32_t *seq, float *out, int64_t u0, int64_t u1, float *scores) {
#if defined(__x86_64__)
    if (kv->type == MF_TYPE_F32 && mf_cpu_ordered_float()) {
        attention_ordered(ap, kv, q, pos, seq, out, u0, u1, scores);
        return;
    }
#endif
    mf_cpu_init_tables();
    const int64_t hd = ap->head_dim, nh = ap->n_head, group = ap->n_head / ap->n_head_kv;
    const uint8_t *K = kv->k[ap->layer], *V = kv->v[ap->layer];
    const int32_t nc = kv->n_active, stride = kv->n_cells;
    /* With an F16 cache llama.cpp multiplies in F16: q is rounded to F16 for q.k and the
     * probabilities are rounded to F16 for the sum over V. Doing the same keeps us close to it. */
    const bool f16 = kv->type == MF_TYPE_F16;
    float buf[MF_MAX_HEAD_DIM];
    float *q16 = scores + (size_t)MF_MIN(group, u1 - u0) * (size_t)stride; /* F16-rounded q per head */
    /* The query heads of one token that share a KV head are done together, so each K and V row
     * is read (and converted from F16) once per group: scores holds one row per head. */
    for (int64_t u = u0; u < u1;) {
        const int64_t t = u / nh, h0 = u % nh, ng = MF_MIN(group - h0 % group, u1 - u);
        const int32_t kvh = (int32_t)(h0 / group);
        u += ng;
        for (int64_t j = 0; j < ng; j++) memset(out + (t * nh + h0 + j) * hd, 0, (size_t)hd * sizeof(float));
        if (seq[t] < 0) continue;
        float mx[MF_MAX_GQA_GROUP];
        for (int64_t j = 0; j < ng; j++) {
            mx[j] = -INFINITY;
            const float *qh = q + (t * nh + h0 + j) * hd;
            for (int64_t d = 0; f16 && d < hd; d++) q16[j * hd + d] = fp16_table[mf_f32_to_fp16(qh[d])];
        }
        for (int32_t c = 0; c < nc; c++) {
            bool vis = kv->cell_seq[c] == seq[t] && kv->cell_pos[c] <= pos[t];
            const float *kr = vis ? kv_head_row(kv, K, c, kvh, buf) : NULL;
            for (int64_t j = 0; j < ng; j++) {
                float *sc = scores + j * stride;
                if (!vis) {
                    sc[c] = -INFINITY;
                    continue;
                }
                const float *qh = f16 ? q16 + j * hd : q + (t * nh + h0 + j) * hd;
                sc[c] = dot_lanes(qh, kr, hd) * ap->scale;
                if (sc[c] > mx[j]) mx[j] = sc[c];
            }
        }
        float inv[MF_MAX_GQA_GROUP];
        for (int64_t j = 0; j < ng; j++) {
            float *sc = scores + j * stride;
            double sum = 0.0;
            for (int32_t c = 0; c < nc; c++) {
                float e = sc[c] == -INFINITY ? 0.0f : expf(sc[c] - mx[j]);
                sc[c] = e;
                sum += e;
            }
            inv[j] = sum > 0.0 ? (float)(1.0 / sum) : 0.0f;
        }
        for (int32_t c = 0; c < nc; c++) {
            if (scores[c] == 0.0f && ng == 1) continue;
            const float *vr = NULL;
            for (int64_t j = 0; j < ng; j++) {
                float p = scores[j * stride + c] * inv[j];
                if (p == 0.0f) continue;
                if (f16) p = fp16_table[mf_f32_to_fp16(p)];
                if (!vr) vr = kv_head_row(kv, V, c, kvh, buf);
                float *o = out + (t * nh + h0 + j) * hd;
                for (int64_t d = 0; d < hd; d++) o[d] += p * vr[d];
            }
        }
    }
}
