/* state.c: saving and restoring one sequence's cells (positions, tokens, K and V of every layer) to
 * a buffer or a file, bound to the model file and the cache layout, so a conversation or a cached
 * prompt resumes without recomputing and gives the bits it would have given uninterrupted.
 *
 * Format (little-endian), version 1:
 *   header (struct state_header, 104 bytes): magic "MFKVSEQ\0", version, header size, the model's
 *     fingerprint (32 hex digits), KV type, layers, KV heads, head dim, cell count, the kernel
 *     instruction set that computed the K/V (informative), payload size and hash, header hash;
 *   payload: int32 positions[n] (increasing), int32 tokens[n], then per layer K rows [n][row_bytes]
 *     and V rows [n][row_bytes].
 * Restoring checks everything before it touches the cache: a corrupted, truncated or foreign file
 * gets an error naming what is wrong and leaves the cache as it was. */
#include "model/model.h"
#include "core/file.h"
#include "simd/simd.h"

#include <stdio.h>
#include <stdlib.h>

#define STATE_MAGIC "MFKVSEQ"
#define STATE_VERSION 1u

typedef struct state_header {
    char magic[8];
    uint32_t version, header_size;
    char fingerprint[32];
    uint32_t kv_type, n_layer, n_head_kv, head_dim;
    uint32_t n_cells;
    char isa[12];
    uint64_t payload_size, payload_hash, header_hash;
} state_header;
_Static_assert(sizeof(state_header) == 104, "state header layout");

static uint64_t payload_size(const mf_kv_cache *kv, uint64_t n) {
    return n * 8 + n * (uint64_t)kv->row_bytes * 2 * (uint64_t)kv->n_layer;
}

static uint64_t header_hash(const state_header *h) { return mf_hash_bytes(h, offsetof(state_header, header_hash), 1); }

/* The header and the cells of seq in position order (cells: room for n_cells). */
static mf_status prepare(mf_context *c, int32_t seq, int32_t *cells, int32_t *n, state_header *h) {
    if (seq < 0 || seq >= MF_MAX_SEQ) return mf_fail(MF_ERR_ARG, "sequence id %d: must be in [0, %d)", seq, MF_MAX_SEQ);
    const mf_kv_cache *kv = mf_context_kv(c);
    *n = mf_kv_seq_cells(kv, seq, cells);
    memset(h, 0, sizeof *h);
    memcpy(h->magic, STATE_MAGIC, 8);
    h->version = STATE_VERSION;
    h->header_size = sizeof *h;
    memcpy(h->fingerprint, mf_context_model(c)->fingerprint, 32);
    h->kv_type = (uint32_t)kv->type;
    h->n_layer = (uint32_t)kv->n_layer;
    h->n_head_kv = (uint32_t)kv->n_head_kv;
    h->head_dim = (uint32_t)kv->head_dim;
    h->n_cells = (uint32_t)*n;
    snprintf(h->isa, sizeof h->isa, "%s", mf_isa_kernels_name(mf_context_isa(c)));
    h->payload_size = payload_size(kv, (uint64_t)*n);
    return MF_OK;
}

/* Stream the payload through emit (a buffer copy or a file write), hashing it on the way. */
typedef mf_status (*emit_fn)(void *user, const void *data, size_t n);

static mf_status emit_payload(const mf_kv_cache *kv, const int32_t *cells, int32_t n, emit_fn emit, void *user,
                              mf_hash *hash) {
    mf_status st = MF_OK;
    int32_t buf[1024];
    for (int pass = 0; pass < 2 && !st; pass++)
        for (int32_t i0 = 0; i0 < n && !st; i0 += 1024) {
            const int32_t m = MF_MIN(1024, n - i0);
            for (int32_t i = 0; i < m; i++) buf[i] = pass ? kv->cell_tok[cells[i0 + i]] : kv->cell_pos[cells[i0 + i]];
            mf_hash_update(hash, buf, (size_t)m * 4);
            st = emit ? emit(user, buf, (size_t)m * 4) : MF_OK;
        }
    for (int32_t l = 0; l < kv->n_layer && !st; l++)
        for (int kv_i = 0; kv_i < 2 && !st; kv_i++) {
            const uint8_t *region = kv_i ? kv->v[l] : kv->k[l];
            for (int32_t i = 0; i < n && !st; i++) {
                const uint8_t *row = region + (size_t)cells[i] * kv->row_bytes;
                mf_hash_update(hash, row, kv->row_bytes);
                st = emit ? emit(user, row, kv->row_bytes) : MF_OK;
            }
        }
    return st;
}

mf_status mf_context_seq_state_size(mf_context *c, int32_t seq, size_t *size) {
    *size = 0;
    if (seq < 0 || seq >= MF_MAX_SEQ) return mf_fail(MF_ERR_ARG, "sequence id %d: must be in [0, %d)", seq, MF_MAX_SEQ);
    const mf_kv_cache *kv = mf_context_kv(c);
    *size = sizeof(state_header) + (size_t)payload_size(kv, (uint64_t)mf_kv_seq_count(kv, seq));
    return MF_OK;
}

typedef struct {
    uint8_t *p;
    size_t left;
} buf_sink;

static mf_status to_buffer(void *user, const void *data, size_t n) {
    buf_sink *b = user;
    MF_ASSERT(n <= b->left);
    memcpy(b->p, data, n);
    b->p += n, b->left -= n;
    return MF_OK;
}

static mf_status to_file(void *user, const void *data, size_t n) { return mf_atomic_write(user, data, n); }

/* Header then payload through emit; the payload hash goes into the header, so a buffer gets its
 * header written last, a file in a second write at offset 0 (see save_file). */
mf_status mf_context_seq_state_save(mf_context *c, int32_t seq, void *buf, size_t cap, size_t *written) {
    *written = 0;
    const mf_kv_cache *kv = mf_context_kv(c);
    int32_t *cells = mf_malloc((size_t)kv->n_cells * sizeof *cells), n;
    if (!cells) return MF_ERR_NOMEM;
    state_header h;
    mf_status st = prepare(c, seq, cells, &n, &h);
    if (!st && cap < sizeof h + h.payload_size)
        st = mf_fail(MF_ERR_RANGE, "state of sequence %d: needs %llu bytes, the buffer has %zu", seq,
                     (unsigned long long)(sizeof h + h.payload_size), cap);
    if (!st) {
        mf_hash hash;
        mf_hash_init(&hash, 2);
        buf_sink sink = {(uint8_t *)buf + sizeof h, cap - sizeof h};
        st = emit_payload(kv, cells, n, to_buffer, &sink, &hash);
        h.payload_hash = mf_hash_final(&hash);
        h.header_hash = header_hash(&h);
        memcpy(buf, &h, sizeof h);
        *written = sizeof h + (size_t)h.payload_size;
    }
    free(cells);
    return st;
}

mf_status mf_context_seq_state_save_file(mf_context *c, int32_t seq, const char *path) {
    const mf_kv_cache *kv = mf_context_kv(c);
    int32_t *cells = mf_malloc((size_t)kv->n_cells * sizeof *cells), n;
    if (!cells) return MF_ERR_NOMEM;
    state_header h;
    mf_status st = prepare(c, seq, cells, &n, &h);
    /* The payload hash is known only after the payload: hash it first (a pass over memory), then
     * write header and payload in order, so the file is written front to back once. */
    mf_hash hash;
    mf_hash_init(&hash, 2);
    if (!st) {
        mf_hash scratch;
        mf_hash_init(&scratch, 2);
        st = emit_payload(kv, cells, n, NULL, NULL, &scratch); /* hashing only: emit NULL */
        h.payload_hash = mf_hash_final(&scratch);
        h.header_hash = header_hash(&h);
    }
    mf_atomic_file f = {.fd = -1};
    if (!st) st = mf_atomic_begin(&f, path);
    if (!st) st = mf_atomic_write(&f, &h, sizeof h);
    if (!st) st = emit_payload(kv, cells, n, to_file, &f, &hash);
    if (!st) st = mf_atomic_commit(&f);
    free(cells);
    if (st) return mf_fail_context(st, "saving sequence %d to '%s'", seq, path);
    return MF_OK;
}

/* Everything about a state image that can be checked without the cache, then whether it fits. */
static mf_status check_image(mf_context *c, int32_t seq, const uint8_t *data, size_t size, state_header *h) {
    const mf_kv_cache *kv = mf_context_kv(c);
    if (seq < 0 || seq >= MF_MAX_SEQ) return mf_fail(MF_ERR_ARG, "sequence id %d: must be in [0, %d)", seq, MF_MAX_SEQ);
    if (size < sizeof *h) return mf_fail(MF_ERR_FORMAT, "not a minfer sequence state: %zu bytes, the header alone is %zu", size, sizeof *h);
    memcpy(h, data, sizeof *h);
    if (memcmp(h->magic, STATE_MAGIC, 8)) return mf_fail(MF_ERR_FORMAT, "not a minfer sequence state (bad magic)");
    if (h->version != STATE_VERSION)
        return mf_fail(MF_ERR_UNSUPPORTED, "sequence state version %u: this minfer reads version %u", h->version, STATE_VERSION);
    if (h->header_size != sizeof *h || h->header_hash != header_hash(h))
        return mf_fail(MF_ERR_FORMAT, "sequence state header is corrupted (checksum mismatch)");
    if (memcmp(h->fingerprint, mf_context_model(c)->fingerprint, 32))
        return mf_fail(MF_ERR_ARG, "sequence state was saved with another model (fingerprint %.32s, this model's is %s)",
                       h->fingerprint, mf_context_model(c)->fingerprint);
    if (h->kv_type != (uint32_t)kv->type || h->n_layer != (uint32_t)kv->n_layer ||
        h->n_head_kv != (uint32_t)kv->n_head_kv || h->head_dim != (uint32_t)kv->head_dim)
        return mf_fail(MF_ERR_ARG, "sequence state has a %s KV cache of %u layers x %u heads x %u; this context's is %s "
                       "%d x %d x %d (use the same KV cache type)",
                       mf_type_name((mf_type)MF_MIN(h->kv_type, MF_TYPE_COUNT)), h->n_layer, h->n_head_kv, h->head_dim,
                       mf_type_name(kv->type), kv->n_layer, kv->n_head_kv, kv->head_dim);
    if (h->n_cells > (uint32_t)kv->n_cells)
        return mf_fail(MF_ERR_RANGE, "sequence state holds %u tokens; the context has %d cells", h->n_cells, kv->n_cells);
    if (h->payload_size != payload_size(kv, h->n_cells) || size - sizeof *h != h->payload_size)
        return mf_fail(MF_ERR_FORMAT, "sequence state is truncated or padded: %zu payload bytes, %u tokens need %llu",
                       size - sizeof *h, h->n_cells, (unsigned long long)payload_size(kv, h->n_cells));
    if (mf_hash_bytes(data + sizeof *h, (size_t)h->payload_size, 2) != h->payload_hash)
        return mf_fail(MF_ERR_FORMAT, "sequence state data is corrupted (checksum mismatch)");
    const int32_t n = (int32_t)h->n_cells, V = mf_model_n_vocab(mf_context_model(c));
    const uint8_t *pos = data + sizeof *h, *tok = pos + (size_t)n * 4;
    int32_t prev = -1;
    for (int32_t i = 0; i < n; i++) {
        int32_t p, t;
        memcpy(&p, pos + 4 * (size_t)i, 4);
        memcpy(&t, tok + 4 * (size_t)i, 4);
        if (p <= prev || p == INT32_MAX) return mf_fail(MF_ERR_FORMAT, "sequence state: position %d after %d", p, prev);
        if (t < 0 || t >= V) return mf_fail(MF_ERR_FORMAT, "sequence state: token %d outside [0, %d)", t, V);
        prev = p;
    }
    const char *isa = mf_isa_kernels_name(mf_context_isa(c));
    if (strncmp(h->isa, isa, sizeof h->isa))
        mf_log(MF_LOG_INFO, "sequence state was computed with %.12s kernels, this machine uses %s: what follows may "
               "differ in the last bits from a run that never left this machine", h->isa, isa);
    /* room: the free cells plus those that only seq holds (they are replaced) */
    int32_t room = kv->n_cells - kv->n_used;
    const uint64_t b = (uint64_t)1 << seq;
    for (int32_t i = 0; i < kv->n_active; i++) room += kv->cell_seqs[i] == b;
    if (room < n)
        return mf_fail(MF_ERR_RANGE, "sequence state holds %d tokens; only %d cells are free for sequence %d", n, room, seq);
    return MF_OK;
}

mf_status mf_context_seq_state_load(mf_context *c, int32_t seq, const void *data, size_t size) {
    state_header h;
    mf_status st = check_image(c, seq, data, size, &h);
    if (st) return st;
    mf_kv_cache *kv = mf_context_kv(c);
    const int32_t n = (int32_t)h.n_cells;
    int32_t *buf = mf_malloc((size_t)MF_MAX(n, 1) * 3 * sizeof *buf);
    if (!buf) return MF_ERR_NOMEM;
    int32_t *pos = buf, *tok = buf + n, *cells = buf + 2 * n;
    const uint8_t *p = (const uint8_t *)data + sizeof h;
    memcpy(pos, p, (size_t)n * 4);
    memcpy(tok, p + (size_t)n * 4, (size_t)n * 4);
    p += (size_t)n * 8;
    mf_kv_seq_rm(kv, seq, 0, -1);
    int32_t *seqs = mf_malloc((size_t)MF_MAX(n, 1) * sizeof *seqs);
    if (!seqs) {
        free(buf);
        return MF_ERR_NOMEM;
    }
    for (int32_t i = 0; i < n; i++) seqs[i] = seq;
    st = mf_kv_reserve(kv, n, pos, seqs, tok, cells);
    MF_ASSERT(!st); /* check_image counted the room */
    for (int32_t l = 0; l < kv->n_layer; l++)
        for (int kv_i = 0; kv_i < 2; kv_i++) {
            uint8_t *region = kv_i ? kv->v[l] : kv->k[l];
            for (int32_t i = 0; i < n; i++, p += kv->row_bytes) memcpy(region + (size_t)cells[i] * kv->row_bytes, p, kv->row_bytes);
        }
    free(seqs);
    free(buf);
    return MF_OK;
}

mf_status mf_context_seq_state_load_file(mf_context *c, int32_t seq, const char *path) {
    const mf_kv_cache *kv = mf_context_kv(c);
    uint8_t *data;
    size_t size;
    mf_status st = mf_read_file(path, sizeof(state_header) + (size_t)payload_size(kv, (uint64_t)kv->n_cells), &data, &size);
    if (!st) st = mf_context_seq_state_load(c, seq, data, size);
    free(data);
    if (st) return mf_fail_context(st, "restoring sequence %d from '%s'", seq, path);
    return MF_OK;
}
