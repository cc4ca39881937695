/* kv.h: the KV cache a context owns: per layer, a K region and a V region of n_cells rows, each
 * row all KV heads of one token, memory [cell][kv_head][head_dim] (F16 or F32). Every cell is
 * tagged with the (sequence, position) of the token stored there, or empty (seq -1); attention
 * masks by these tags, so several sequences can share one cache and one forward pass. */
#ifndef MF_KV_H
#define MF_KV_H

#include "core/core.h"
#include "quant/quant.h"

typedef struct mf_kv_cache {
    int32_t n_layer, n_cells, n_head_kv, head_dim;
    mf_type type;       /* MF_TYPE_F16 or MF_TYPE_F32 */
    size_t row_bytes;   /* n_head_kv * head_dim * element size */
    uint8_t **k, **v;   /* [n_layer] regions of n_cells * row_bytes */
    int32_t *cell_pos;  /* [n_cells] */
    int32_t *cell_seq;  /* [n_cells], -1: empty */
    int32_t n_active;   /* cells [0, n_active) may be occupied; attention scans only these */
} mf_kv_cache;

/* Allocate the regions (zero-filled; pages are committed lazily by the OS). */
mf_status mf_kv_init(mf_kv_cache *kv, int32_t n_layer, int32_t n_cells, int32_t n_head_kv, int32_t head_dim,
                     mf_type type);
void mf_kv_free(mf_kv_cache *kv); /* accepts NULL and a zeroed cache */
/* Empty every cell. */
void mf_kv_clear(mf_kv_cache *kv);
/* Choose a cell for each of n tokens (seq[i] -1 means padding: cell -1) and tag it with
 * (seq[i], pos[i]). A cell already holding the same (seq, pos) is reused; otherwise the first
 * empty one. MF_ERR_RANGE when the cache is full (message names the context size). */
mf_status mf_kv_find_cells(mf_kv_cache *kv, int32_t n, const int32_t *pos, const int32_t *seq, int32_t *cells);
/* Empty the cells of sequence seq (-1: every sequence) with position in [p0, p1) (p1 < 0: to the end). */
void mf_kv_seq_rm(mf_kv_cache *kv, int32_t seq, int32_t p0, int32_t p1);
/* Number of occupied cells of sequence seq. */
int32_t mf_kv_seq_count(const mf_kv_cache *kv, int32_t seq);

#endif /* MF_KV_H */
