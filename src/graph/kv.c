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
    kv->cell_seqs = mf_calloc((size_t)n_cells, sizeof *kv->cell_seqs);
    kv->cell_pos = mf_calloc((size_t)n_cells, sizeof *kv->cell_pos);
    kv->cell_tok = mf_calloc((size_t)n_cells, sizeof *kv->cell_tok);
    kv->sort_tmp = mf_calloc((size_t)n_cells, sizeof *kv->sort_tmp);
    if (!kv->k || !kv->v || !kv->cell_seqs || !kv->cell_pos || !kv->cell_tok || !kv->sort_tmp) goto nomem;
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
    free(kv->cell_seqs);
    free(kv->cell_pos);
    free(kv->cell_tok);
    free(kv->sort_tmp);
    memset(kv, 0, sizeof *kv);
}

static void empty_cell(mf_kv_cache *kv, int32_t c) {
    kv->cell_seqs[c] = 0;
    kv->cell_pos[c] = -1;
    kv->cell_tok[c] = -1;
}

/* n_active shrinks past trailing empty cells. */
static void trim(mf_kv_cache *kv) {
    while (kv->n_active > 0 && kv->cell_seqs[kv->n_active - 1] == 0) kv->n_active--;
}

void mf_kv_clear(mf_kv_cache *kv) {
    for (int32_t c = 0; c < kv->n_cells; c++) empty_cell(kv, c);
    kv->n_active = 0;
    kv->n_used = 0;
}

static uint64_t seq_bit(int32_t seq) {
    MF_ASSERT(seq >= 0 && seq < MF_MAX_SEQ);
    return (uint64_t)1 << seq;
}

mf_status mf_kv_reserve(mf_kv_cache *kv, int32_t n, const int32_t *pos, const int32_t *seq, const int32_t *tok,
                        int32_t *cells) {
    if (n > kv->n_cells - kv->n_used)
        return mf_fail(MF_ERR_RANGE,
                       "KV cache full: %d tokens do not fit in the %d free cells of a context of %d; use a larger "
                       "context or remove tokens (mf_context_seq_rm)",
                       n, kv->n_cells - kv->n_used, kv->n_cells);
    int32_t c = 0;
    for (int32_t i = 0; i < n; i++) {
        while (kv->cell_seqs[c]) c++; /* there are enough empty cells */
        kv->cell_seqs[c] = seq_bit(seq[i]);
        kv->cell_pos[c] = pos[i];
        kv->cell_tok[c] = tok[i];
        if (c >= kv->n_active) kv->n_active = c + 1;
        cells[i] = c++;
    }
    kv->n_used += n;
    return MF_OK;
}

void mf_kv_release(mf_kv_cache *kv, int32_t n, const int32_t *cells) {
    for (int32_t i = 0; i < n; i++) {
        MF_ASSERT(cells[i] >= 0 && cells[i] < kv->n_cells && kv->cell_seqs[cells[i]]);
        empty_cell(kv, cells[i]);
    }
    kv->n_used -= n;
    trim(kv);
}

bool mf_kv_has(const mf_kv_cache *kv, int32_t seq, int32_t pos) {
    const uint64_t b = seq_bit(seq);
    for (int32_t c = 0; c < kv->n_active; c++)
        if ((kv->cell_seqs[c] & b) && kv->cell_pos[c] == pos) return true;
    return false;
}

static bool in_range(int32_t p, int32_t p0, int32_t p1) { return p >= p0 && (p1 < 0 || p < p1); }

void mf_kv_seq_rm(mf_kv_cache *kv, int32_t seq, int32_t p0, int32_t p1) {
    const uint64_t keep = seq < 0 ? 0 : ~seq_bit(seq);
    for (int32_t c = 0; c < kv->n_active; c++) {
        if (!kv->cell_seqs[c] || !in_range(kv->cell_pos[c], p0, p1)) continue;
        kv->cell_seqs[c] &= keep;
        if (!kv->cell_seqs[c]) {
            empty_cell(kv, c);
            kv->n_used--;
        }
    }
    trim(kv);
}

void mf_kv_seq_cp(mf_kv_cache *kv, int32_t src, int32_t dst, int32_t p0, int32_t p1) {
    if (src == dst) return;
    mf_kv_seq_rm(kv, dst, p0, p1);
    const uint64_t s = seq_bit(src), d = seq_bit(dst);
    for (int32_t c = 0; c < kv->n_active; c++)
        if ((kv->cell_seqs[c] & s) && in_range(kv->cell_pos[c], p0, p1)) kv->cell_seqs[c] |= d;
}

void mf_kv_seq_keep(mf_kv_cache *kv, int32_t seq) {
    const uint64_t b = seq_bit(seq);
    for (int32_t c = 0; c < kv->n_active; c++) {
        if (!kv->cell_seqs[c]) continue;
        kv->cell_seqs[c] &= b;
        if (!kv->cell_seqs[c]) {
            empty_cell(kv, c);
            kv->n_used--;
        }
    }
    trim(kv);
}

int32_t mf_kv_seq_count(const mf_kv_cache *kv, int32_t seq) {
    const uint64_t b = seq_bit(seq);
    int32_t n = 0;
    for (int32_t c = 0; c < kv->n_active; c++) n += (kv->cell_seqs[c] & b) != 0;
    return n;
}

int32_t mf_kv_seq_pos_min(const mf_kv_cache *kv, int32_t seq) {
    const uint64_t b = seq_bit(seq);
    int32_t m = -1;
    for (int32_t c = 0; c < kv->n_active; c++)
        if ((kv->cell_seqs[c] & b) && (m < 0 || kv->cell_pos[c] < m)) m = kv->cell_pos[c];
    return m;
}

int32_t mf_kv_seq_pos_max(const mf_kv_cache *kv, int32_t seq) {
    const uint64_t b = seq_bit(seq);
    int32_t m = -1;
    for (int32_t c = 0; c < kv->n_active; c++)
        if ((kv->cell_seqs[c] & b) && kv->cell_pos[c] > m) m = kv->cell_pos[c];
    return m;
}

/* Sort cells[0..n) by their positions (unique within a sequence): a bottom-up merge sort through
 * the cache's scratch, after a linear check for the usual case of cells already in order. */
static void sort_by_pos(const int32_t *cell_pos, int32_t *cells, int32_t n, int32_t *tmp) {
    int32_t i = 1;
    while (i < n && cell_pos[cells[i - 1]] < cell_pos[cells[i]]) i++;
    if (i >= n) return;
    int32_t *a = cells, *b = tmp;
    for (int32_t w = 1; w < n; w *= 2) {
        for (int32_t lo = 0; lo < n; lo += 2 * w) {
            const int32_t mid = MF_MIN(lo + w, n), hi = MF_MIN(lo + 2 * w, n);
            int32_t x = lo, y = mid, k = lo;
            while (x < mid && y < hi) b[k++] = cell_pos[a[x]] < cell_pos[a[y]] ? a[x++] : a[y++];
            while (x < mid) b[k++] = a[x++];
            while (y < hi) b[k++] = a[y++];
        }
        int32_t *t = a;
        a = b, b = t;
    }
    if (a != cells) memcpy(cells, a, (size_t)n * sizeof *cells);
}

int32_t mf_kv_seq_cells(const mf_kv_cache *kv, int32_t seq, int32_t *cells) {
    const uint64_t b = seq_bit(seq);
    int32_t n = 0;
    for (int32_t c = 0; c < kv->n_active; c++)
        if (kv->cell_seqs[c] & b) cells[n++] = c;
    sort_by_pos(kv->cell_pos, cells, n, kv->sort_tmp);
    return n;
}

mf_status mf_kv_view_build(mf_kv_cache *kv, mf_kv_view_buf *vb, int32_t nt, const int32_t *pos, const int32_t *seq) {
    if (nt > vb->cap) {
        const int32_t **l = mf_realloc(vb->list, (size_t)nt * sizeof *l);
        if (!l) return MF_ERR_NOMEM;
        vb->list = l;
        int32_t *n = mf_realloc(vb->n, (size_t)nt * sizeof *n);
        if (!n) return MF_ERR_NOMEM;
        vb->n = n;
        vb->cap = nt;
    }
    int32_t slot_seq[MF_MAX_SEQ], slot_len[MF_MAX_SEQ], n_slots = 0;
    for (int32_t t = 0; t < nt; t++) {
        if (seq[t] < 0) {
            vb->list[t] = NULL;
            vb->n[t] = 0;
            continue;
        }
        int32_t k = 0;
        while (k < n_slots && slot_seq[k] != seq[t]) k++;
        if (k == n_slots) {
            if (!vb->lists[k] && !(vb->lists[k] = mf_malloc((size_t)kv->n_cells * sizeof(int32_t)))) return MF_ERR_NOMEM;
            slot_seq[k] = seq[t];
            slot_len[k] = mf_kv_seq_cells(kv, seq[t], vb->lists[k]);
            n_slots++;
        }
        /* visible: the leading entries at positions <= pos[t] */
        const int32_t *list = vb->lists[k];
        int32_t lo = 0, hi = slot_len[k];
        while (lo < hi) {
            const int32_t mid = lo + (hi - lo) / 2;
            if (kv->cell_pos[list[mid]] <= pos[t]) lo = mid + 1;
            else hi = mid;
        }
        vb->list[t] = list;
        vb->n[t] = lo;
    }
    kv->view = (mf_kv_view){vb->list, vb->n};
    return MF_OK;
}

void mf_kv_view_buf_free(mf_kv_view_buf *vb) {
    for (int i = 0; i < MF_MAX_SEQ; i++) free(vb->lists[i]);
    free(vb->list);
    free(vb->n);
    memset(vb, 0, sizeof *vb);
}
