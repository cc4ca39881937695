/* kv.h: the KV cache a context owns: per layer, a K region and a V region of n_cells rows, each
 * row all KV heads of one token, memory [cell][kv_head][head_dim] (F16 or F32). Every cell carries
 * the position and token id stored there and the set of sequences it belongs to (a bit mask over
 * sequence ids 0..MF_MAX_SEQ-1; 0: empty). A cell shared by several sequences holds their common
 * prefix once (mf_kv_seq_cp), so another sequence (a request sharing a cached prompt, a draft
 * branch) reuses it without recomputing it.
 *
 * Attention never scans cells directly: before each forward pass the context builds a view
 * (mf_kv_view) that gives each token of the chunk the cells of its sequence sorted by position and
 * how many of them it sees (those at positions <= its own). Kernels sum over that list in order, so
 * a token's result depends only on its sequence's cells, never on where other sequences' cells lie
 * in the cache or which tokens share its batch. */
#ifndef MF_KV_H
#define MF_KV_H

#include "core/core.h"
#include "quant/quant.h"

/* Per token of a chunk: list[t] points to the cells of t's sequence in position order, n[t] of
 * them are visible to t (0 for padding tokens: their attention output is zeros). Tokens of one
 * sequence share one list pointer. */
typedef struct mf_kv_view {
    const int32_t *const *list;
    const int32_t *n;
} mf_kv_view;

/* Storage for views: per distinct sequence of a chunk its cell list (n_cells ints, allocated when
 * first needed), per token its list pointer and count (grown to the largest chunk). */
typedef struct mf_kv_view_buf {
    int32_t *lists[MF_MAX_SEQ];
    const int32_t **list;
    int32_t *n;
    int32_t cap;
} mf_kv_view_buf;

typedef struct mf_kv_cache {
    int32_t n_layer, n_cells, n_head_kv, head_dim;
    mf_type type;       /* MF_TYPE_F16 or MF_TYPE_F32 */
    size_t row_bytes;   /* n_head_kv * head_dim * element size */
    uint8_t **k, **v;   /* [n_layer] regions of n_cells * row_bytes */
    uint64_t *cell_seqs; /* [n_cells] bit s: the cell belongs to sequence s; 0: empty */
    int32_t *cell_pos;  /* [n_cells] */
    int32_t *cell_tok;  /* [n_cells] token id stored in the cell */
    int32_t *sort_tmp;  /* [n_cells] scratch of mf_kv_seq_cells (the context's thread only) */
    int32_t n_active;   /* cells [0, n_active) may be occupied */
    int32_t n_used;     /* occupied cells */
    mf_kv_view view;    /* set by the context for the forward pass in progress */
} mf_kv_cache;

/* Allocate the regions (zero-filled; pages are committed lazily by the OS). */
mf_status mf_kv_init(mf_kv_cache *kv, int32_t n_layer, int32_t n_cells, int32_t n_head_kv, int32_t head_dim,
                     mf_type type);
void mf_kv_free(mf_kv_cache *kv); /* accepts NULL and a zeroed cache */
/* Empty every cell. */
void mf_kv_clear(mf_kv_cache *kv);

/* Cells for the n tokens of one batch (seq[i] in [0, MF_MAX_SEQ), each sequence's positions
 * strictly increasing in batch order and none already in the cache for that sequence: the caller
 * checks that). Tags each chosen empty cell with (seq, pos, token) and writes its index to
 * cells[i]. All or nothing: when the cache has fewer than n empty cells nothing changes and
 * MF_ERR_RANGE names the context size. mf_kv_release undoes a reservation (a failed decode). */
mf_status mf_kv_reserve(mf_kv_cache *kv, int32_t n, const int32_t *pos, const int32_t *seq, const int32_t *tok,
                        int32_t *cells);
void mf_kv_release(mf_kv_cache *kv, int32_t n, const int32_t *cells);

/* Whether sequence seq has a cell at position pos. */
bool mf_kv_has(const mf_kv_cache *kv, int32_t seq, int32_t pos);
/* Remove sequence seq (-1: every sequence) from the cells with position in [p0, p1) (p1 < 0: to
 * the end); a cell left with no sequence is empty. */
void mf_kv_seq_rm(mf_kv_cache *kv, int32_t seq, int32_t p0, int32_t p1);
/* Make dst share src's cells with position in [p0, p1) (p1 < 0: to the end), after removing dst's
 * own cells in that range. No K/V is copied or recomputed. */
void mf_kv_seq_cp(mf_kv_cache *kv, int32_t src, int32_t dst, int32_t p0, int32_t p1);
/* Remove every sequence but seq from every cell. */
void mf_kv_seq_keep(mf_kv_cache *kv, int32_t seq);
/* Number of cells of sequence seq; its smallest and largest position (-1 when it has none). */
int32_t mf_kv_seq_count(const mf_kv_cache *kv, int32_t seq);
int32_t mf_kv_seq_pos_min(const mf_kv_cache *kv, int32_t seq);
int32_t mf_kv_seq_pos_max(const mf_kv_cache *kv, int32_t seq);
/* The cells of sequence seq sorted by position into cells (room for n_cells); returns the count. */
int32_t mf_kv_seq_cells(const mf_kv_cache *kv, int32_t seq, int32_t *cells);

/* Set kv->view for the nt tokens of a forward pass (seq[t] < 0: padding, sees nothing), whose
 * cells are reserved: each distinct sequence's cells sorted by position, each token seeing those at
 * positions <= pos[t]. Reserved cells of later chunks lie at higher positions (a sequence's
 * positions increase along a batch), so no token sees them. MF_ERR_NOMEM only. */
mf_status mf_kv_view_build(mf_kv_cache *kv, mf_kv_view_buf *vb, int32_t nt, const int32_t *pos, const int32_t *seq);
void mf_kv_view_buf_free(mf_kv_view_buf *vb); /* accepts a zeroed buffer */

#endif /* MF_KV_H */
