/* model.c: loading a model: architecture dispatch, hyper-parameters from `<arch>.*` metadata (with
 * clear errors for missing ones), and every weight checked for presence, shape and a usable type
 * before any graph is built. Weights stay in the read-only mapping, but for the matrices some
 * kernels keep in a layout of their own (pack_weights). */
#include "model/model.h"
#include "cpu/cpu.h"

#include "tok/tokenizer.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static const char *const arch_names[MF_ARCH_COUNT] = {"llama", "qwen2", "qwen3"};

const mf_gguf *mf_model_gguf(const mf_model *m) { return m->gguf; }
const mf_hparams *mf_model_hparams(const mf_model *m) { return &m->hp; }
const char *mf_model_arch(const mf_model *m) { return m->arch_name; }
const char *mf_model_fingerprint(const mf_model *m) { return m->fingerprint; }
int32_t mf_model_n_vocab(const mf_model *m) { return m->hp.n_vocab; }
int32_t mf_model_n_ctx_train(const mf_model *m) { return m->hp.n_ctx_train; }
int32_t mf_model_n_layer(const mf_model *m) { return m->hp.n_layer; }
double mf_model_load_seconds(const mf_model *m) { return m->load_s; }

void mf_model_get_info(const mf_model *m, mf_model_info *mi) {
    const mf_hparams *hp = &m->hp;
    memset(mi, 0, sizeof *mi);
    mi->arch = m->arch_name;
    mi->name = m->name ? m->name : "";
    mi->n_vocab = hp->n_vocab, mi->n_ctx_train = hp->n_ctx_train, mi->n_embd = hp->n_embd;
    mi->n_layer = hp->n_layer, mi->n_head = hp->n_head, mi->n_head_kv = hp->n_head_kv;
    mi->head_dim = hp->head_dim, mi->n_ff = hp->n_ff;
    mi->rope_freq_base = hp->rope.freq_base, mi->rope_dims = hp->rope.n_dims, mi->norm_eps = hp->norm_eps;
    mi->tied_embeddings = m->tied;
    for (int64_t i = 0; i < m->n_weights; i++) {
        const mf_weight *w = &m->weights[i];
        const uint64_t rows = (uint64_t)(w->ne[1] * w->ne[2] * w->ne[3]), nb = (uint64_t)w->row_bytes * rows;
        mi->n_params += (uint64_t)w->ne[0] * rows;
        mi->weight_bytes += nb;
        if ((unsigned)w->type < MF_TYPE_COUNT && rows > 1) mi->type_bytes[w->type] += nb;
        if (w == m->tok_embd && w != m->output) continue; /* one row per token, not streamed */
        mi->decode_bytes += nb;
        if (rows > 1) mi->macs_per_token += (uint64_t)w->ne[0] * rows;
        if (w == m->output) mi->macs_output = (uint64_t)w->ne[0] * rows;
    }
    for (int t = 0; t < MF_TYPE_COUNT; t++)
        if (mi->type_bytes[t] > mi->type_bytes[mi->main_type]) mi->main_type = (mf_type)t;
    mi->file_size = mf_gguf_file_size(m->gguf);
    mi->n_parts = mf_gguf_n_parts(m->gguf);
    mi->pages = m->no_mmap ? "read" : mf_gguf_pages_name(m->pages);
    mi->packed_bytes = m->packed_bytes;
    mi->n_packed = m->n_packed;
}

const mf_tokenizer *mf_model_tokenizer(const mf_model *cm) {
    mf_model *m = (mf_model *)cm; /* the tokenizer is built once, under the model's lock */
    pthread_mutex_lock(&m->tok_lock);
    if (!m->tok && m->tok_status == MF_OK) {
        m->tok_status = mf_tokenizer_load(m->gguf, &m->tok);
        if (m->tok_status) {
            snprintf(m->tok_error, sizeof m->tok_error, "%s", mf_last_error());
        }
    }
    const mf_tokenizer *t = m->tok;
    if (!t) mf_fail(m->tok_status, "%s", m->tok_error);
    pthread_mutex_unlock(&m->tok_lock);
    return t;
}

uint64_t mf_model_size_bytes(const mf_model *m) {
    uint64_t s = 0;
    for (int64_t i = 0; i < m->n_weights; i++) s += m->weights[i].row_bytes * (uint64_t)(m->weights[i].ne[1] *
                                                  m->weights[i].ne[2] * m->weights[i].ne[3]);
    return s;
}

/* `<arch>.<key>` as a u32 in [lo, hi]; def < 0 means required. */
static mf_status get_u32(const mf_model *m, const char *key, int64_t def, int64_t lo, int64_t hi, int32_t *out) {
    char full[128];
    snprintf(full, sizeof full, "%s.%s", m->arch_name, key);
    uint32_t v;
    mf_status st;
    if (def < 0) {
        st = mf_gguf_get_u32(m->gguf, full, &v);
        if (st == MF_ERR_NOT_FOUND)
            return mf_fail(MF_ERR_FORMAT, "model metadata '%s' is missing (required for architecture %s)", full,
                           m->arch_name);
    } else {
        st = mf_gguf_find_u32(m->gguf, full, &v, (uint32_t)def);
    }
    if (st) return st;
    if (v < lo || v > hi)
        return mf_fail(MF_ERR_FORMAT, "model metadata '%s' = %u: must be in [%lld, %lld]", full, v, (long long)lo,
                       (long long)hi);
    *out = (int32_t)v;
    return MF_OK;
}

static mf_status get_f32(const mf_model *m, const char *key, float def, float *out) {
    char full[128];
    snprintf(full, sizeof full, "%s.%s", m->arch_name, key);
    mf_status st = mf_gguf_find_f32(m->gguf, full, out, def);
    if (!st && !isfinite(*out)) return mf_fail(MF_ERR_FORMAT, "model metadata '%s' is not finite", full);
    return st;
}

static mf_status read_hparams(mf_model *m) {
    mf_hparams *hp = &m->hp;
    mf_status st;
    if ((st = get_u32(m, "embedding_length", -1, 1, 1 << 20, &hp->n_embd)) ||
        (st = get_u32(m, "block_count", -1, 1, 4096, &hp->n_layer)) ||
        (st = get_u32(m, "attention.head_count", -1, 1, 4096, &hp->n_head)) ||
        (st = get_u32(m, "attention.head_count_kv", hp->n_head, 1, hp->n_head, &hp->n_head_kv)) ||
        (st = get_u32(m, "feed_forward_length", -1, 1, 1 << 24, &hp->n_ff)) ||
        (st = get_u32(m, "context_length", 4096, 1, 1 << 24, &hp->n_ctx_train)))
        return st;
    if (hp->n_head % hp->n_head_kv)
        return mf_fail(MF_ERR_FORMAT, "attention.head_count %d is not a multiple of head_count_kv %d", hp->n_head,
                       hp->n_head_kv);
    if (hp->n_head / hp->n_head_kv > MF_MAX_GQA_GROUP)
        return mf_fail(MF_ERR_UNSUPPORTED, "%d query heads per KV head: at most %d are supported",
                       hp->n_head / hp->n_head_kv, MF_MAX_GQA_GROUP);
    /* Qwen3 decouples the head size from n_embd / n_head (key_length); others may carry it too. */
    int32_t def_hd = hp->n_embd % hp->n_head == 0 ? hp->n_embd / hp->n_head : -1;
    int32_t hd_v;
    if ((st = get_u32(m, "attention.key_length", def_hd, 2, MF_MAX_HEAD_DIM, &hp->head_dim)) ||
        (st = get_u32(m, "attention.value_length", hp->head_dim, 2, MF_MAX_HEAD_DIM, &hd_v)))
        return st;
    if (hd_v != hp->head_dim)
        return mf_fail(MF_ERR_UNSUPPORTED, "attention.value_length %d differs from key_length %d", hd_v,
                       hp->head_dim);
    if ((st = get_f32(m, "attention.layer_norm_rms_epsilon", 1e-6f, &hp->norm_eps))) return st;
    hp->rope.mode = m->arch == MF_ARCH_LLAMA ? MF_ROPE_NORMAL : MF_ROPE_NEOX;
    if ((st = get_f32(m, "rope.freq_base", 10000.0f, &hp->rope.freq_base)) ||
        (st = get_u32(m, "rope.dimension_count", hp->head_dim, 2, hp->head_dim, &hp->rope.n_dims)))
        return st;
    if (hp->rope.n_dims % 2) return mf_fail(MF_ERR_FORMAT, "rope.dimension_count %d is odd", hp->rope.n_dims);
    float factor;
    if ((st = get_f32(m, "rope.scaling.factor", 1.0f, &factor))) return st;
    char *type = NULL;
    char key[96];
    snprintf(key, sizeof key, "%s.rope.scaling.type", m->arch_name);
    if ((st = mf_gguf_find_str_dup(m->gguf, key, &type))) return st;
    hp->rope.freq_scale = 1.0f;
    if (type && strcmp(type, "none") && strcmp(type, "linear")) {
        mf_log(MF_LOG_WARN, "rope scaling '%s' is not implemented; using plain RoPE (fine within the original "
               "context length)", type);
    } else if (factor > 0.0f) {
        hp->rope.freq_scale = 1.0f / factor;
    }
    free(type);
    hp->attn_scale = 1.0f / sqrtf((float)hp->head_dim);
    return MF_OK;
}

/* The weight called name with exactly the shape {ne0, ne1} (ne1 = 0: a vector). */
static mf_status find_weight(mf_model *m, const char *name, int64_t ne0, int64_t ne1, bool required,
                             const mf_weight **out) {
    *out = NULL;
    for (int64_t i = 0; i < m->n_weights; i++) {
        const mf_weight *w = &m->weights[i];
        if (strcmp(w->name, name)) continue;
        int64_t want1 = ne1 ? ne1 : 1;
        if (w->ne[0] != ne0 || w->ne[1] != want1 || w->ne[2] != 1 || w->ne[3] != 1)
            return mf_fail(MF_ERR_FORMAT, "tensor '%s' has shape [%lld, %lld, %lld, %lld], expected [%lld, %lld]",
                           name, (long long)w->ne[0], (long long)w->ne[1], (long long)w->ne[2],
                           (long long)w->ne[3], (long long)ne0, (long long)want1);
        if (ne1 == 0 && w->type != MF_TYPE_F32)
            return mf_fail(MF_ERR_UNSUPPORTED, "tensor '%s' (a norm or bias) has type %s; only F32 is supported",
                           name, mf_type_name(w->type));
        if (ne1 != 0 && !mf_cpu_type_supported(w->type))
            return mf_fail(MF_ERR_UNSUPPORTED, "tensor '%s' has type %s, which minfer cannot compute with", name,
                           mf_type_name(w->type));
        m->used[i] = true;
        *out = w;
        return MF_OK;
    }
    if (required) return mf_fail(MF_ERR_FORMAT, "tensor '%s' is missing from the model", name);
    return MF_OK;
}

/* Every tensor of the file must be one the architecture uses, as llama.cpp checks: a tensor whose
 * name was damaged (output.weight with one byte changed) would otherwise be ignored silently and
 * the tied embedding used in its place. Tensors some converters add that minfer can do without are
 * named with what is lost. */
static mf_status check_unused(mf_model *m) {
    int64_t n_unused = 0, first = -1;
    for (int64_t i = 0; i < m->n_weights; i++) {
        if (m->used[i]) continue;
        if (n_unused++ == 0) first = i;
    }
    if (n_unused)
        return mf_fail(MF_ERR_FORMAT,
                       "%lld of the file's %lld tensors are not part of a %s model, the first '%s' (a damaged or "
                       "unsupported file)",
                       (long long)n_unused, (long long)m->n_weights, m->arch_name, m->weights[first].name);
    return MF_OK;
}

static mf_status load_weights(mf_model *m) {
    const mf_hparams *hp = &m->hp;
    mf_status st;
    int64_t E = hp->n_embd, Q = (int64_t)hp->n_head * hp->head_dim, KV = (int64_t)hp->n_head_kv * hp->head_dim;
    /* n_vocab comes from the embedding matrix; the output matrix must agree. */
    for (int64_t i = 0; i < m->n_weights; i++)
        if (!strcmp(m->weights[i].name, "token_embd.weight")) {
            if (m->weights[i].ne[1] > (1 << 24))
                return mf_fail(MF_ERR_FORMAT, "tensor 'token_embd.weight': %lld rows; at most %d tokens are supported",
                               (long long)m->weights[i].ne[1], 1 << 24);
            m->hp.n_vocab = (int32_t)m->weights[i].ne[1];
        }
    if (m->hp.n_vocab <= 0) return mf_fail(MF_ERR_FORMAT, "tensor 'token_embd.weight' is missing from the model");
    int64_t V = m->hp.n_vocab;
    if ((st = find_weight(m, "token_embd.weight", E, V, true, &m->tok_embd)) ||
        (st = find_weight(m, "output_norm.weight", E, 0, true, &m->output_norm)) ||
        (st = find_weight(m, "output.weight", E, V, false, &m->output)) ||
        (st = find_weight(m, "output.bias", V, 0, false, &m->output_b)))
        return st;
    /* Llama 3.1+ files carry the llama3 rope scaling as one divisor per rotated pair. */
    const mf_weight *ff = NULL;
    if ((st = find_weight(m, "rope_freqs.weight", hp->rope.n_dims / 2, 0, false, &ff))) return st;
    if (ff) {
        const float *f = ff->data;
        for (int32_t i = 0; i < hp->rope.n_dims / 2; i++)
            if (!(f[i] > 0.0f) || !isfinite(f[i]))
                return mf_fail(MF_ERR_FORMAT, "tensor 'rope_freqs.weight': factor %d is %g; factors must be finite "
                               "and positive", i, (double)f[i]);
        m->hp.rope.freq_factors = f;
    }
    if (!m->output) m->output = m->tok_embd; /* tied embeddings: lm_head in the embedding's type */
    m->tied = m->output == m->tok_embd;
    m->layers = mf_calloc((size_t)hp->n_layer, sizeof *m->layers);
    if (!m->layers) return MF_ERR_NOMEM;
    bool biases = m->arch == MF_ARCH_QWEN2, qk_norm = m->arch == MF_ARCH_QWEN3;
    for (int32_t l = 0; l < hp->n_layer; l++) {
        mf_layer *L = &m->layers[l];
        char n[96];
#define W(field, suffix, ne0, ne1, req)                                                                    \
    snprintf(n, sizeof n, "blk.%d.%s", l, suffix);                                                         \
    if ((st = find_weight(m, n, ne0, ne1, req, &L->field))) return st;
        W(attn_norm, "attn_norm.weight", E, 0, true)
        W(wq, "attn_q.weight", E, Q, true)
        W(wk, "attn_k.weight", E, KV, true)
        W(wv, "attn_v.weight", E, KV, true)
        W(wo, "attn_output.weight", Q, E, true)
        W(bq, "attn_q.bias", Q, 0, biases)
        W(bk, "attn_k.bias", KV, 0, biases)
        W(bv, "attn_v.bias", KV, 0, biases)
        W(q_norm, "attn_q_norm.weight", hp->head_dim, 0, qk_norm)
        W(k_norm, "attn_k_norm.weight", hp->head_dim, 0, qk_norm)
        W(ffn_norm, "ffn_norm.weight", E, 0, true)
        W(ffn_gate, "ffn_gate.weight", E, hp->n_ff, true)
        W(ffn_up, "ffn_up.weight", E, hp->n_ff, true)
        W(ffn_down, "ffn_down.weight", hp->n_ff, E, true)
#undef W
    }
    return check_unused(m);
}

/* The matrices the graph multiplies by, each once (a tied output is the embedding table). */
static int64_t matmul_weights(mf_model *m, mf_weight **out) {
    int64_t n = 0;
    for (int32_t l = 0; l < m->hp.n_layer; l++) {
        const mf_layer *L = &m->layers[l];
        const mf_weight *ws[] = {L->wq, L->wk, L->wv, L->wo, L->ffn_gate, L->ffn_up, L->ffn_down};
        for (size_t i = 0; i < sizeof ws / sizeof ws[0]; i++)
            if (ws[i]) out[n++] = (mf_weight *)ws[i]; /* they point into m->weights */
    }
    if (m->output) out[n++] = (mf_weight *)m->output;
    return n;
}

static bool is_vector(const mf_weight *w) { return w->ne[1] * w->ne[2] * w->ne[3] <= 1; }

static size_t weight_bytes(const mf_weight *w) { return w->row_bytes * (size_t)(w->ne[1] * w->ne[2] * w->ne[3]); }

/* The file's pages of weight i, whose bytes in the file are at file, handed back to the kernel, but
 * for a first or last page shared with a weight that is still read there (moved[j]: j's bytes in
 * the file where j moved too, else NULL), or, with moved NULL, with any other weight at all (their
 * data still in the file). Should anything touch them later, they are read again from the file. */
static void release_file_pages(const mf_model *m, const uint8_t *file, int64_t i, const uint8_t *const *moved) {
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t a = (uintptr_t)file & ~(page - 1);
    uintptr_t b = ((uintptr_t)file + weight_bytes(&m->weights[i]) + page - 1) & ~(page - 1);
    for (int64_t j = 0; j < m->n_weights; j++) {
        if (j == i || (moved && (moved[j] || !m->used[j]))) continue;
        const uintptr_t s = (uintptr_t)m->weights[j].data, e = s + weight_bytes(&m->weights[j]);
        if (s < a + page && e > a) a += page;
        if (b > a && s < b && e > b - page) b -= page;
    }
    if (b > a) madvise((void *)a, b - a, MADV_DONTNEED);
}

/* Packing on several threads: job k packs the matrices i = k, k + n_jobs, ... that have a dst. */
typedef struct {
    mf_model *m;
    mf_weight *const *ws;
    uint8_t *const *dst;
    int64_t n;
    int k, n_jobs;
} pack_job;

/* w's packed copy at dst, written in runs of about 8 MiB of rows (multiples of 64 rows, so every run
 * starts a panel and stays 64-byte aligned), each run's pages of the mapped file handed back as soon
 * as it is copied: a matrix as large as a vocabulary's output (Qwen2 0.5B: 145 MB in Q8_0) would
 * otherwise hold its file pages and its copy at once. The pages inside a run belong to this matrix
 * alone; its first and last pages are release_file_pages' to judge. */
/* The pages of the mapped file that lie wholly inside [p, p + n), handed back to the kernel. */
static void release_inside(const void *p, size_t n) {
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    const uintptr_t a = ((uintptr_t)p + page - 1) & ~(page - 1), b = ((uintptr_t)p + n) & ~(page - 1);
    if (b > a) madvise((void *)a, b - a, MADV_DONTNEED);
}

static void pack_matrix(const mf_model *m, mf_weight *w, uint8_t *dst) {
    const int64_t N = w->ne[1], step = MF_MAX(64, (int64_t)((8u << 20) / w->row_bytes) / 64 * 64);
    if (m->no_mmap || N <= step) {
        mf_cpu_pack(w, dst);
        return;
    }
    mf_weight run = *w;
    for (int64_t r0 = 0; r0 < N; r0 += step) {
        run.data = (const uint8_t *)w->data + (size_t)r0 * w->row_bytes;
        run.ne[1] = MF_MIN(step, N - r0);
        mf_cpu_pack(&run, dst + (size_t)r0 * w->row_bytes);
        release_inside(run.data, (size_t)run.ne[1] * w->row_bytes);
    }
    w->packed = dst;
    w->packed_for = run.packed_for;
}

static void *pack_some(void *arg) {
    const pack_job *j = arg;
    for (int64_t i = j->k; i < j->n; i += j->n_jobs) {
        if (!j->dst[i]) continue;
        const uint8_t *file = j->ws[i]->data;
        pack_matrix(j->m, j->ws[i], j->dst[i]);
        /* now, so that the file's pages and the copy are not both held: the peak stays a matrix a
         * thread */
        if (!j->m->no_mmap) release_file_pages(j->m, file, j->ws[i] - j->m->weights, NULL);
    }
    return NULL;
}

/* Copies of the matrices whose best kernels have a layout of their own (mf_cpu_pack), in one
 * anonymous mapping in 2 MiB pages where the kernel gives them (every decoded token streams it),
 * written by one thread a core, read-only once written. Where the file is mapped, the model's vectors (norms, biases) are copied
 * there too, and the file's pages of all that moved are released: the vectors lie between the
 * matrices, and reading one would map the 2 MiB page around it again. no_mmap: the copy read into
 * memory stays, as other kernels may read it. */
static mf_status pack_weights(mf_model *m) {
    if (!m->layers) return MF_OK;
    mf_weight **ws = mf_calloc((size_t)m->hp.n_layer * 7 + 1, sizeof *ws);
    const uint8_t **moved = mf_calloc((size_t)MF_MAX(m->n_weights, 1), sizeof *moved);
    if (!ws || !moved) {
        free(ws), free(moved);
        return MF_ERR_NOMEM;
    }
    const int64_t n = matmul_weights(m, ws);
    size_t total = 0;
    for (int64_t i = 0; i < n; i++) total += (mf_cpu_packed_size(ws[i]) + 63) & ~(size_t)63;
    if (total && !m->no_mmap)
        for (int64_t i = 0; i < m->n_weights; i++)
            if (m->used[i] && is_vector(&m->weights[i])) total += (weight_bytes(&m->weights[i]) + 63) & ~(size_t)63;
    if (!total) {
        free(ws), free(moved);
        return MF_OK;
    }
    const size_t huge = (size_t)2 << 20, len = (total + huge - 1) & ~(huge - 1);
    void *base = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED) {
        /* the weights work in the file's layout too: slower with few tokens, not wrong */
        mf_log(MF_LOG_WARN, "no memory for the packed weights (%llu bytes: %s); they stay in the file's layout",
               (unsigned long long)len, strerror(errno));
        free(ws), free(moved);
        return MF_OK;
    }
#if defined(MADV_HUGEPAGE)
    madvise(base, len, MADV_HUGEPAGE); /* a hint */
#endif
    uint8_t *at = base, **dst = mf_calloc((size_t)MF_MAX(n, 1), sizeof *dst);
    if (!dst) {
        munmap(base, len);
        free(ws), free(moved);
        return MF_ERR_NOMEM;
    }
    for (int64_t i = 0; i < n; i++) {
        const size_t sz = mf_cpu_packed_size(ws[i]);
        const int64_t k = ws[i] - m->weights;
        if (!sz || moved[k]) continue; /* a matrix listed twice is packed once */
        dst[i] = at;
        moved[k] = ws[i]->data;
        at += (sz + 63) & ~(size_t)63;
        m->packed_bytes += sz;
        m->n_packed++;
    }
    /* the vectors first, then every page of the file mapped so far that holds only what moved is
     * handed back (the fingerprint reads parts of the file, and a vector faults in the 2 MiB page
     * around it where the cache holds the file so: 130 MB for a 0.5B model), each matrix's read
     * again as it is copied, so that the file's pages and the copies are never both held */
    for (int64_t i = 0; i < m->n_weights && !m->no_mmap; i++) {
        mf_weight *w = &m->weights[i];
        if (!m->used[i] || !is_vector(w)) continue;
        memcpy(at, w->data, weight_bytes(w));
        moved[i] = w->data;
        w->data = at;
        at += (weight_bytes(w) + 63) & ~(size_t)63;
    }
    for (int64_t i = 0; i < m->n_weights && !m->no_mmap; i++)
        if (moved[i]) release_file_pages(m, moved[i], i, moved);
    /* one thread a core, up to 8 (the copy is bound by memory), each on every n_jobs-th matrix;
     * what a thread that cannot start would have packed, this one packs */
    const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    const int n_jobs = (int)MF_MAX(1, MF_MIN(8, MF_MIN(cpus, n)));
    pack_job jobs[8];
    pthread_t threads[8];
    bool started[8] = {false};
    for (int k = 0; k < n_jobs; k++) {
        jobs[k] = (pack_job){.m = m, .ws = ws, .dst = dst, .n = n, .k = k, .n_jobs = n_jobs};
        if (k > 0) started[k] = pthread_create(&threads[k], NULL, pack_some, &jobs[k]) == 0;
    }
    for (int k = 0; k < n_jobs; k++)
        if (!started[k]) pack_some(&jobs[k]);
    for (int k = 1; k < n_jobs; k++)
        if (started[k]) pthread_join(threads[k], NULL);
    free(dst);
    mprotect(base, len, PROT_READ);
    for (int64_t i = 0; i < m->n_weights && !m->no_mmap; i++)
        if (moved[i]) release_file_pages(m, moved[i], i, moved); /* the pages shared with what moved */
    m->packed = base;
    m->packed_len = len;
    free(ws), free(moved);
    return MF_OK;
}

mf_status mf_model_load(const char *path, mf_model **out) { return mf_model_load_ex(path, NULL, out); }

mf_status mf_model_load_ex(const char *path, const mf_model_load_params *params, mf_model **out) {
    *out = NULL;
    double t0 = mf_time_s();
    mf_model *m = mf_calloc(1, sizeof *m);
    if (!m) return MF_ERR_NOMEM;
    pthread_mutex_init(&m->tok_lock, NULL);
    m->no_mmap = params && params->no_mmap;
    mf_status st = mf_gguf_open_ex(path, params && params->no_mmap ? MF_GGUF_OPEN_READ : 0, &m->gguf);
    if (st) goto fail;
    mf_str arch;
    if ((st = mf_gguf_get_str(m->gguf, "general.architecture", &arch))) goto fail;
    m->arch = MF_ARCH_COUNT;
    for (int a = 0; a < MF_ARCH_COUNT; a++)
        if (arch.len == strlen(arch_names[a]) && !memcmp(arch.ptr, arch_names[a], arch.len)) m->arch = (mf_arch)a;
    if (m->arch == MF_ARCH_COUNT) {
        st = mf_fail(MF_ERR_UNSUPPORTED, "architecture '%.*s' is not supported (supported: llama, qwen2, qwen3)",
                     (int)MF_MIN(arch.len, 64), arch.ptr);
        goto fail;
    }
    m->arch_name = arch_names[m->arch];
    if ((st = mf_gguf_find_str_dup(m->gguf, "general.name", &m->name))) goto fail;
    if ((st = read_hparams(m))) goto fail;
    m->n_weights = mf_gguf_n_tensors(m->gguf);
    m->weights = mf_calloc((size_t)MF_MAX(m->n_weights, 1), sizeof *m->weights);
    m->used = mf_calloc((size_t)MF_MAX(m->n_weights, 1), sizeof *m->used);
    if (!m->weights || !m->used) {
        st = MF_ERR_NOMEM;
        goto fail;
    }
    for (int64_t i = 0; i < m->n_weights; i++) {
        const mf_gguf_tensor *t = mf_gguf_tensor_at(m->gguf, i);
        mf_weight *w = &m->weights[i];
        w->name = t->name;
        w->type = t->type;
        memcpy(w->ne, t->ne, sizeof w->ne);
        w->row_bytes = mf_row_size(t->type, t->ne[0]);
        if (!w->row_bytes) {
            st = mf_fail(MF_ERR_UNSUPPORTED, "tensor '%s': type %s with rows of %lld values has no row size",
                         t->name, mf_type_name(t->type), (long long)t->ne[0]);
            goto fail;
        }
        w->data = t->data;
    }
    if ((st = load_weights(m))) goto fail;
    m->pages = mf_gguf_settle_pages(m->gguf);
    mf_gguf_fingerprint(m->gguf, m->fingerprint);
    if (!(params && params->no_repack) && (st = pack_weights(m))) goto fail;
    m->load_s = mf_time_s() - t0;
    *out = m;
    return MF_OK;
fail:
    mf_fail_context(st, "loading model '%s'", path);
    mf_model_free(m);
    return st;
}

void mf_model_free(mf_model *m) {
    if (!m) return;
    if (m->packed) munmap(m->packed, m->packed_len);
    free(m->layers);
    free(m->weights);
    free(m->used);
    free(m->name);
    mf_tokenizer_free(m->tok);
    pthread_mutex_destroy(&m->tok_lock);
    mf_gguf_free(m->gguf);
    free(m);
}
