/* cpu_ref.c: plain reference twins of the CPU kernels: float weights dequantized row by row,
 * activations never quantized, double accumulation, direct formulas. Slow and obviously right;
 * tests hold the fast kernels to them. */
#include "cpu/cpu.h"

#include <math.h>
#include <stdlib.h>

void mf_cpu_matmul_ref(const mf_weight *w, const mf_weight *b, const float *x, float *y, int64_t nt) {
    int64_t K = w->ne[0], N = w->ne[1];
    float *row = malloc((size_t)K * sizeof(float));
    MF_ASSERT(row);
    for (int64_t o = 0; o < N; o++) {
        int32_t id = (int32_t)o;
        mf_cpu_get_rows(w, &id, 1, row);
        for (int64_t t = 0; t < nt; t++) {
            double s = 0.0;
            for (int64_t k = 0; k < K; k++) s += (double)row[k] * x[t * K + k];
            if (b) s += ((const float *)b->data)[o];
            y[t * N + o] = (float)s;
        }
    }
    free(row);
}

void mf_cpu_rms_norm_row_ref(const float *x, const float *w, float *y, int64_t n, float eps) {
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) sum += (double)x[i] * x[i];
    double scale = 1.0 / sqrt(sum / (double)n + eps);
    for (int64_t i = 0; i < n; i++) y[i] = (float)(x[i] * scale * (w ? w[i] : 1.0));
}

void mf_cpu_rope_head_ref(const mf_rope_params *rp, int32_t pos, const float *x, float *y, int64_t hd) {
    memcpy(y, x, (size_t)hd * sizeof(float));
    int32_t half = rp->n_dims / 2;
    for (int32_t i = 0; i < half; i++) {
        double theta = pos * (double)rp->freq_scale * pow(rp->freq_base, -2.0 * i / rp->n_dims);
        if (rp->freq_factors) theta /= rp->freq_factors[i];
        int32_t a = rp->mode == MF_ROPE_NEOX ? i : 2 * i;
        int32_t b = rp->mode == MF_ROPE_NEOX ? i + half : 2 * i + 1;
        y[a] = (float)(x[a] * cos(theta) - x[b] * sin(theta));
        y[b] = (float)(x[a] * sin(theta) + x[b] * cos(theta));
    }
}

static double kv_at(const mf_kv_cache *kv, const uint8_t *region, int32_t cell, int64_t i) {
    const uint8_t *row = region + (size_t)cell * kv->row_bytes;
    return kv->type == MF_TYPE_F32 ? ((const float *)row)[i] : mf_fp16_to_f32(((const mf_fp16 *)row)[i]);
}

void mf_cpu_attention_ref(const mf_attn_params *ap, const mf_kv_cache *kv, const float *q, float *out, int64_t nt) {
    int64_t hd = ap->head_dim, nh = ap->n_head;
    double *p = malloc((size_t)MF_MAX(kv->n_cells, 1) * sizeof(double));
    MF_ASSERT(p);
    for (int64_t t = 0; t < nt; t++) {
        const int32_t *list = kv->view.list[t], nc = kv->view.n[t];
        for (int64_t h = 0; h < nh; h++) {
            int64_t kvh = h / (nh / ap->n_head_kv);
            const float *qh = q + (t * nh + h) * hd;
            double mx = -INFINITY, sum = 0.0;
            for (int32_t j = 0; j < nc; j++) {
                double s = 0.0;
                for (int64_t d = 0; d < hd; d++) s += qh[d] * kv_at(kv, kv->k[ap->layer], list[j], kvh * hd + d);
                p[j] = s * ap->scale;
                if (p[j] > mx) mx = p[j];
            }
            for (int32_t j = 0; j < nc; j++) {
                p[j] = exp(p[j] - mx);
                sum += p[j];
            }
            for (int64_t d = 0; d < hd; d++) {
                double acc = 0.0;
                for (int32_t j = 0; j < nc; j++)
                    if (p[j] != 0.0) acc += p[j] * kv_at(kv, kv->v[ap->layer], list[j], kvh * hd + d);
                out[(t * nh + h) * hd + d] = sum > 0.0 ? (float)(acc / sum) : 0.0f;
            }
        }
    }
    free(p);
}
