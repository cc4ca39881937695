/* kv.c: KV cache regions and cell bookkeeping (see kv.h for the layout). */
#include "graph/kv.h"

#include <stdlib.h>

mf_status mf_kv_init(mf_kv_cache *kv, int32_t n_layer, int32_t n_cells, int32_t n_head_kv, int32_t head_dim,
                     mf_type type) {
    memset(kv, 0, sizeof *kv);
    if (type != MF_TYPE_F16 && type != MF_TYPE_F32)
        return mf_fail(MF_ERR_ARG, "KV cache type %s: only F16 and F32 are supported", mf_type_name(type));
    if (n_layer <= 0 || n_cells <= 0 || n_head_kv <= 0 || head_dim <= 0)
        return mf_fail(MF_ERR_ARG, "KV cache shape %d layers x %d cells x %d heads x %d: all must be positive",
                       n_layer, n_cells, n_head_kv, head_dim);
    kv->n_layer = n_layer;
    kv->n_cells = n_cells;
    kv->n_head_kv = n_head_kv;
    kv->head_dim = head_dim;
    kv->type = type;
    kv->row_bytes = (size_t)n_head_kv * (size_t)head_dim * (type == MF_TYPE_F16 ? 2 : 4);
    size_t region;
    if (!mf_mul_size(kv->row_bytes, (size_t)n_cells, &region))
        return mf_fail(MF_ERR_RANGE, "KV cache of %d cells overflows size_t", n_cells);
    kv->k = mf_calloc((size_t)n_layer, sizeof *kv->k);
    kv->v = mf_calloc((size_t)n_layer, sizeof *kv->v);
    kv->cell_pos = mf_calloc((size_t)n_cells, sizeof *kv->cell_pos);
    kv->cell_seq = mf_calloc((size_t)n_cells, sizeof *kv->cell_seq);
    if (!kv->k || !kv->v || !kv->cell_pos || !kv->cell_seq) goto nomem;
    for (int32_t l = 0; l < n_layer; l++) {
        kv->k[l] = mf_calloc(1, region);
        kv->v[l] = mf_calloc(1, region);
        if (!kv->k[l] || !kv->v[l]) goto nomem;
    }
    mf_kv_clear(kv);
    return MF_OK;
nomem:
    mf_kv_free(kv);
    return mf_fail(MF_ERR_NOMEM, "KV cache: cannot allocate %d layers x 2 x %zu bytes (reduce the context size)",
                   n_layer, region);
}

void mf_kv_free(mf_kv_cache *kv) {
    if (!kv) return;
    for (int32_t l = 0; l < kv->n_layer; l++) {
        if (kv->k) free(kv->k[l]);
        if (kv->v) free(kv->v[l]);
    }
    free(kv->k);
    free(kv->v);
    free(kv->cell_pos);
    free(kv->cell_seq);
    memset(kv, 0, sizeof *kv);
}

void mf_kv_clear(mf_kv_cache *kv) {
    for (int32_t c = 0; c < kv->n_cells; c++) {
        kv->cell_seq[c] = -1;
        kv->cell_pos[c] = -1;
    }
    kv->n_active = 0;
}

mf_status mf_kv_find_cells(mf_kv_cache *kv, int32_t n, const int32_t *pos, const int32_t *seq, int32_t *cells) {
    int32_t next_free = 0;
    for (int32_t i = 0; i < n; i++) {
        cells[i] = -1;
        if (seq[i] < 0) continue;
        int32_t found = -1;
        for (int32_t c = 0; c < kv->n_active; c++)
            if (kv->cell_seq[c] == seq[i] && kv->cell_pos[c] == pos[i]) {
                found = c;
                break;
            }
        if (found < 0) {
            while (next_free < kv->n_cells && kv->cell_seq[next_free] >= 0) next_free++;
            if (next_free == kv->n_cells)
                return mf_fail(MF_ERR_RANGE, "KV cache full: all %d cells of the context are in use "
                               "(token %d of %d at position %d); use a larger context",
                               kv->n_cells, i, n, pos[i]);
            found = next_free;
        }
        kv->cell_seq[found] = seq[i];
        kv->cell_pos[found] = pos[i];
        if (found >= kv->n_active) kv->n_active = found + 1;
        cells[i] = found;
    }
    return MF_OK;
}

void mf_kv_seq_rm(mf_kv_cache *kv, int32_t seq, int32_t p0, int32_t p1) {
    for (int32_t c = 0; c < kv->n_active; c++) {
        if (kv->cell_seq[c] < 0 || (seq >= 0 && kv->cell_seq[c] != seq)) continue;
        if (kv->cell_pos[c] >= p0 && (p1 < 0 || kv->cell_pos[c] < p1)) {
            kv->cell_seq[c] = -1;
            kv->cell_pos[c] = -1;
        }
    }
    while (kv->n_active > 0 && kv->cell_seq[kv->n_active - 1] < 0) kv->n_active--;
}

int32_t mf_kv_seq_count(const mf_kv_cache *kv, int32_t seq) {
    int32_t n = 0;
    for (int32_t c = 0; c < kv->n_active; c++) n += kv->cell_seq[c] == seq;
    return n;
}
