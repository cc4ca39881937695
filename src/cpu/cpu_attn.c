/* cpu_attn.c: the CPU backend's attention: softmax(q.K^T * scale) . V over the cells each token
 * sees, its sequence's cells at positions <= its own in position order (the KV cache's view, kv.h;
 * layouts in cpu.h, tiling in cpu_attn.h), for an F16 or F32 KV cache. A blockwise kernel with an
 * online softmax (AVX-512, AVX2 or portable C) serves the F16 cache and MINFER_ORDER=fast; an F32
 * cache with the ordered kernels on repeats llama.cpp's order. */
#include "cpu/cpu_attn.h"
#include "cpu/cpu_dispatch.h"
#include "cpu/cpu_dot_order.h"
#include "simd/simd.h"

#include <math.h>
#include <pthread.h>
#include <string.h>

/* Every half value as a float (256 KiB), for the portable kernel's F16 tiles. Filled once. */
static float fp16_table[1 << 16];
static pthread_once_t fp16_once = PTHREAD_ONCE_INIT;

static void fill_fp16_table(void) {
    for (uint32_t i = 0; i < (1u << 16); i++) fp16_table[i] = mf_fp16_to_f32((mf_fp16)i);
}

void mf_cpu_init_tables(void) { pthread_once(&fp16_once, fill_fp16_table); }

/* Rows per tile: 32 (two 16-lane vectors) while 32 rows of hd floats (rounded up to 16) fit a
 * tile buffer, else 16; wide: the same up to 64. */
int mf_cpu_attn_tile_rows(int64_t hd) {
    return (int)MF_MIN(32, (MF_ATTN_TILE_FLOATS / ((hd + 15) & ~(int64_t)15)) & ~(int64_t)15);
}

int mf_cpu_attn_tile_rows_wide(int64_t hd) {
    return (int)MF_MIN(MF_ATTN_MAX_ROWS, (MF_ATTN_TILE_FLOATS / ((hd + 15) & ~(int64_t)15)) & ~(int64_t)15);
}

/* Cells per tile: 64, fewer (a multiple of 16) where 64 rows of hd floats (rounded up to 16)
 * would not fit a tile buffer. */
int mf_cpu_attn_tile_cells(int64_t hd) {
    return (int)MF_MIN(64, (MF_ATTN_TILE_FLOATS / ((hd + 15) & ~(int64_t)15)) & ~(int64_t)15);
}

void mf_cpu_attention_flash(const mf_attn_params *ap, const mf_kv_cache *kv, const float *q, float *out, int64_t u0,
                            int64_t u1, mf_cpu_attn_tile_fn tile) {
    mf_cpu_attention_flash_rows(ap, kv, q, out, u0, u1, tile, mf_cpu_attn_tile_rows(ap->head_dim));
}

void mf_cpu_attention_flash_rows(const mf_attn_params *ap, const mf_kv_cache *kv, const float *q, float *out,
                                 int64_t u0, int64_t u1, mf_cpu_attn_tile_fn tile, int max_rows) {
    MF_ASSERT(max_rows >= 1 && max_rows <= MF_ATTN_MAX_ROWS);
    const int64_t hd = ap->head_dim, nh = ap->n_head, group = nh / ap->n_head_kv;
    int64_t rows[MF_ATTN_MAX_ROWS];
    for (int32_t kvh = 0; kvh < ap->n_head_kv; kvh++) {
        int nr = 0;
        const int32_t *list = NULL; /* the sequence the rows of the tile being filled belong to */
        for (int64_t u = u0; u < u1; u++) {
            if ((u % nh) / group != kvh) continue;
            const int64_t t = u / nh;
            if (kv->view.n[t] <= 0) {
                memset(out + u * hd, 0, (size_t)hd * sizeof(float));
                continue;
            }
            if (nr && (nr == max_rows || kv->view.list[t] != list)) {
                tile(ap, kv, q, out, kvh, rows, nr);
                nr = 0;
            }
            list = kv->view.list[t];
            rows[nr++] = u;
        }
        if (nr) tile(ap, kv, q, out, kvh, rows, nr);
    }
}

/* Portable tile, the AVX-512 tile's scheme in loops a compiler vectorizes: the rows' queries d-major
 * (rw lanes, nr rounded up to 8), scores s[c][r] over the lanes, an online softmax per lane (running
 * max m, sum l, accumulators o rescaled by exp(m_old - m_new)), then o[r][:] += p[c][r] * v[c][:]. */
void mf_cpu_attn_tile_c(const mf_attn_params *ap, const mf_kv_cache *kv, const float *q, float *out, int32_t kvh,
                        const int64_t *rows, int nr) {
    mf_cpu_init_tables();
    const int64_t hd = ap->head_dim, nh = ap->n_head;
    const int bc = mf_cpu_attn_tile_cells(hd), rw = (nr + 7) & ~7;
    const int32_t *list = kv->view.list[rows[0] / nh];
    const uint8_t *K = kv->k[ap->layer], *V = kv->v[ap->layer];
    _Alignas(64) float kf[MF_ATTN_TILE_FLOATS], vf[MF_ATTN_TILE_FLOATS], qt[MF_ATTN_TILE_FLOATS],
        o[MF_ATTN_TILE_FLOATS], s[64 * MF_ATTN_MAX_ROWS];
    float m[MF_ATTN_MAX_ROWS], l[MF_ATTN_MAX_ROWS], mu[MF_ATTN_MAX_ROWS], alpha[MF_ATTN_MAX_ROWS],
        sum[MF_ATTN_MAX_ROWS], acc[MF_ATTN_MAX_ROWS];
    int32_t rn[MF_ATTN_MAX_ROWS], nmax = 0; /* row r sees list entries [0, rn[r]) */
    for (int r = 0; r < rw; r++) {
        m[r] = -INFINITY, l[r] = 0.0f;
        rn[r] = r < nr ? kv->view.n[rows[r] / nh] : 0; /* padding rows see nothing */
        nmax = MF_MAX(nmax, rn[r]);
        for (int64_t d = 0; d < hd; d++) qt[d * rw + r] = r < nr ? q[rows[r] * hd + d] * ap->scale : 0.0f;
    }
    memset(o, 0, (size_t)rw * (size_t)hd * sizeof(float));
    for (int32_t j0 = 0; j0 < nmax; j0 += bc) {
        const int ce = (int)MF_MIN(bc, nmax - j0); /* the longest row sees all of them */
        for (int c = 0; c < ce; c++) {
            const size_t off = (size_t)list[j0 + c] * kv->row_bytes;
            if (kv->type == MF_TYPE_F32) {
                memcpy(kf + c * hd, (const float *)(K + off) + kvh * hd, (size_t)hd * sizeof(float));
                memcpy(vf + c * hd, (const float *)(V + off) + kvh * hd, (size_t)hd * sizeof(float));
            } else {
                const mf_fp16 *kh = (const mf_fp16 *)(K + off) + kvh * hd, *vh = (const mf_fp16 *)(V + off) + kvh * hd;
                for (int64_t d = 0; d < hd; d++) kf[c * hd + d] = fp16_table[kh[d]], vf[c * hd + d] = fp16_table[vh[d]];
            }
        }
        for (int c = 0; c < ce; c++) {
            for (int r = 0; r < rw; r++) acc[r] = 0.0f;
            for (int64_t d = 0; d < hd; d++) {
                const float k = kf[c * hd + d];
                for (int r = 0; r < rw; r++) acc[r] += k * qt[d * rw + r];
            }
            for (int r = 0; r < rw; r++) s[c * rw + r] = j0 + c < rn[r] ? acc[r] : -INFINITY;
        }
        for (int r = 0; r < rw; r++) acc[r] = -INFINITY, sum[r] = 0.0f;
        for (int c = 0; c < ce; c++)
            for (int r = 0; r < rw; r++) acc[r] = s[c * rw + r] > acc[r] ? s[c * rw + r] : acc[r];
        for (int r = 0; r < rw; r++) {
            const float mn = acc[r] > m[r] ? acc[r] : m[r];
            mu[r] = mn == -INFINITY ? 0.0f : mn; /* nothing seen yet: p stays 0 */
            alpha[r] = expf(m[r] - mu[r]);      /* 1 where the max did not grow, 0 from -inf */
            m[r] = mn;
        }
        for (int c = 0; c < ce; c++)
            for (int r = 0; r < rw; r++) {
                const float p = expf(s[c * rw + r] - mu[r]);
                s[c * rw + r] = p;
                sum[r] += p;
            }
        for (int r = 0; r < nr; r++) {
            l[r] = l[r] * alpha[r] + sum[r];
            float *orow = o + r * hd;
            if (alpha[r] != 1.0f)
                for (int64_t d = 0; d < hd; d++) orow[d] *= alpha[r];
            for (int c = 0; c < ce; c++) {
                const float p = s[c * rw + r];
                if (p == 0.0f) continue;
                for (int64_t d = 0; d < hd; d++) orow[d] += p * vf[c * hd + d];
            }
        }
    }
    for (int r = 0; r < nr; r++) {
        const float inv = l[r] > 0.0f ? 1.0f / l[r] : 0.0f;
        for (int64_t d = 0; d < hd; d++) out[rows[r] * hd + d] = o[r * hd + d] * inv;
    }
}

#if defined(__x86_64__)
/* F32 cache, llama.cpp's order (no flash attention): scores K.q as its F32 dot, softmax with its
 * vector exp and per-16 sums, then V^T . p as its F32 GEMM. One head at a time. */
void mf_cpu_attention_ordered_ref(const mf_attn_params *ap, const mf_kv_cache *kv, const float *q, float *out,
                                  int64_t u0, int64_t u1, float *scores) {
    const int64_t hd = ap->head_dim, nh = ap->n_head, group = ap->n_head / ap->n_head_kv;
    const size_t stride = kv->row_bytes / sizeof(float);
    float acc[16 * MF_MAX_HEAD_DIM];
    for (int64_t u = u0; u < u1; u++) {
        const int64_t t = u / nh, h = u % nh, kvh = h / group;
        const int32_t *list = kv->view.list[t], nc = kv->view.n[t];
        float *o = out + u * hd;
        if (nc <= 0) { /* padding, or nothing stored for this token: zeros, not NaN */
            memset(o, 0, (size_t)hd * sizeof(float));
            continue;
        }
        const float *qh = q + u * hd;
        const float *K = (const float *)kv->k[ap->layer] + (size_t)kvh * hd;
        const float *V = (const float *)kv->v[ap->layer] + (size_t)kvh * hd;
        float mx = -INFINITY;
        for (int32_t j = 0; j < nc; j++) {
            scores[j] = mf_cpu_dot_f32_ord_avx2(K + (size_t)list[j] * stride, qh, hd) * ap->scale;
            if (scores[j] > mx) mx = scores[j];
        }
        if (mx == -INFINITY) { /* every score -inf (infinite K or q): zeros, not NaN */
            memset(o, 0, (size_t)hd * sizeof(float));
            continue;
        }
        double sum = mf_cpu_softmax_exp_ord_avx2(scores, nc, mx);
        const float inv = sum > 0.0 ? (float)(1.0 / sum) : 0.0f;
        for (int32_t j = 0; j < nc; j++) scores[j] *= inv;
        mf_cpu_pv_ord_avx2(scores, nc, V, list, stride, hd, acc, o);
    }
}
#endif

void mf_cpu_attention(const mf_cpu_cfg *cfg, const mf_attn_params *ap, const mf_kv_cache *kv, const float *q,
                      float *out, int64_t u0, int64_t u1, float *scores) {
    const mf_cpu_kernels *k = cfg->k;
    if (kv->type == MF_TYPE_F32 && k->attn_f32_ordered)
        k->attn_f32_ordered(ap, kv, q, out, u0, u1, scores);
    else if (k->attn_wide_rows)
        mf_cpu_attention_flash_rows(ap, kv, q, out, u0, u1, k->attn_tile, mf_cpu_attn_tile_rows_wide(ap->head_dim));
    else
        mf_cpu_attention_flash(ap, kv, q, out, u0, u1, k->attn_tile);
}
