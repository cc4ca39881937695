/* qmodel.c: the model quantizer behind `minfer quantize`: plans every tensor's type (qmodel_plan.c),
 * copies the metadata, then converts tensor by tensor (in llama.cpp's output order) with a pool of
 * threads over chunks of rows and streams each result into the GGUF writer, which renames its
 * temporary file over the output only when everything is written. */
#include "quant/qmodel.h"
#include "core/core.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#define MAX_THREADS 512

/* One tensor's conversion, shared by the workers: rows [0, nrows) in chunks claimed atomically. */
typedef struct {
    const uint8_t *src; /* input rows, src_row_bytes each */
    uint8_t *dst;       /* output rows, dst_row_bytes each */
    size_t src_row_bytes, dst_row_bytes;
    int64_t row_len, nrows, rows_per_chunk, nchunks;
    mf_dequantize_fn to_f32; /* NULL when the input is F32 */
    mf_quantize_fn quantize;
    atomic_int_fast64_t next_chunk;
    const volatile sig_atomic_t *cancel;
} convert_job;

typedef struct {
    convert_job *job;
    float *scratch; /* one f32 row, for F16/BF16 input */
    pthread_t thread;
} worker;

static void *convert_worker(void *arg) {
    worker *w = arg;
    convert_job *j = w->job;
    for (;;) {
        const int64_t c = atomic_fetch_add(&j->next_chunk, 1);
        if (c >= j->nchunks || (j->cancel && *j->cancel)) break;
        const int64_t r1 = MF_MIN(j->nrows, (c + 1) * j->rows_per_chunk);
        for (int64_t r = c * j->rows_per_chunk; r < r1; r++) {
            const uint8_t *src = j->src + (size_t)r * j->src_row_bytes;
            const float *x = (const float *)src;
            if (j->to_f32) {
                j->to_f32(src, w->scratch, j->row_len);
                x = w->scratch;
            }
            j->quantize(x, j->dst + (size_t)r * j->dst_row_bytes, j->row_len);
        }
    }
    return NULL;
}

/* Convert t into type `to` in dst using up to n_threads threads (the caller's thread included). */
static mf_status convert_tensor(const mf_gguf_tensor *t, mf_type to, uint8_t *dst, worker *workers, int n_threads,
                                const volatile sig_atomic_t *cancel) {
    convert_job job = {
        .src = t->data,
        .dst = dst,
        .src_row_bytes = mf_row_size(t->type, t->ne[0]),
        .dst_row_bytes = mf_row_size(to, t->ne[0]),
        .row_len = t->ne[0],
        .nrows = t->ne[1] * t->ne[2] * t->ne[3],
        .to_f32 = t->type == MF_TYPE_F32 ? NULL : mf_type_get_traits(t->type)->dequantize,
        .quantize = mf_quant_file_quantizer(to),
        .cancel = cancel,
    };
    MF_ASSERT(job.quantize && job.src_row_bytes && job.dst_row_bytes);
    /* chunks of about 64K values: small enough to balance threads, large enough to be cheap */
    job.rows_per_chunk = MF_MAX(1, 65536 / MF_MAX(1, job.row_len));
    job.nchunks = (job.nrows + job.rows_per_chunk - 1) / job.rows_per_chunk;
    atomic_init(&job.next_chunk, 0);
    const int use = (int)MF_MIN((int64_t)n_threads, MF_MAX(1, job.nchunks));
    int started = 0;
    for (int i = 1; i < use; i++) {
        workers[i].job = &job;
        if (pthread_create(&workers[i].thread, NULL, convert_worker, &workers[i]) != 0) break;
        started++;
    }
    workers[0].job = &job;
    convert_worker(&workers[0]);
    for (int i = 1; i <= started; i++) pthread_join(workers[i].thread, NULL);
    if (cancel && *cancel) return mf_fail(MF_ERR_IO, "interrupted");
    return MF_OK;
}

static int default_threads(void) {
    const long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)MF_MIN(n, MAX_THREADS) : 1;
}

static bool is_split_key(const char *key) {
    return !strcmp(key, "split.no") || !strcmp(key, "split.count") || !strcmp(key, "split.tensors.count");
}

static uint64_t tensor_rows(const mf_gguf_tensor *t) { return (uint64_t)(t->ne[1] * t->ne[2] * t->ne[3]); }

/* Dimensions as GGUF writers count them (ggml_n_dims): trailing sizes of 1 are dropped, at least 1. */
static uint32_t written_dims(const mf_gguf_tensor *t) {
    uint32_t n = 1;
    for (uint32_t d = 1; d < MF_GGUF_MAX_DIMS; d++)
        if (t->ne[d] != 1) n = d + 1;
    return n;
}

mf_status mf_quant_model(const char *in_path, const char *out_path, const mf_quant_params *p, mf_quant_stats *stats) {
    if (!p || !p->ftype || !in_path || !out_path) return mf_fail(MF_ERR_ARG, "mf_quant_model: missing argument");
    const double t0 = mf_time_s();
    mf_quant_stats st = {0};
    mf_gguf *g = NULL;
    mf_gguf_writer *w = NULL;
    mf_type *types = NULL;
    int64_t *order = NULL;
    uint8_t *buf = NULL;
    worker *workers = NULL;
    int n_threads = p->n_threads > 0 ? MF_MIN(p->n_threads, MAX_THREADS) : default_threads();

    mf_status s = mf_gguf_open(in_path, &g);
    if (s != MF_OK) {
        mf_fail_context(s, "%s", in_path);
        goto done;
    }
    const int64_t n = mf_gguf_n_tensors(g);
    types = mf_malloc((size_t)(n > 0 ? n : 1) * sizeof *types);
    order = mf_malloc((size_t)(n > 0 ? n : 1) * sizeof *order);
    if (!types || !order) {
        s = MF_ERR_NOMEM;
        goto done;
    }
    if ((s = mf_quant_plan(g, p->ftype, &p->rules, types, order)) != MF_OK) goto done;

    /* output buffer for the largest converted tensor, one f32 row of scratch per thread */
    size_t max_out = 0;
    int64_t max_row = 1;
    for (int64_t i = 0; i < n; i++) {
        const mf_gguf_tensor *t = mf_gguf_tensor_at(g, i);
        if (types[i] == t->type) continue;
        uint64_t bytes;
        if (!mf_mul_u64(mf_row_size(types[i], t->ne[0]), tensor_rows(t), &bytes) || bytes > SIZE_MAX) {
            s = mf_fail(MF_ERR_RANGE, "tensor '%s' is too large to convert", t->name);
            goto done;
        }
        max_out = MF_MAX(max_out, (size_t)bytes);
        max_row = MF_MAX(max_row, t->ne[0]);
    }
    workers = mf_calloc((size_t)n_threads, sizeof *workers);
    buf = max_out ? mf_malloc(max_out) : NULL;
    if (!workers || (max_out && !buf)) {
        s = MF_ERR_NOMEM;
        goto done;
    }
    for (int i = 0; i < n_threads; i++) {
        workers[i].scratch = mf_malloc((size_t)max_row * sizeof(float));
        if (!workers[i].scratch) {
            s = MF_ERR_NOMEM;
            goto done;
        }
    }

    if ((s = mf_gguf_writer_create(&w)) != MF_OK) goto done;
    for (int64_t i = 0; i < mf_gguf_n_kv(g) && s == MF_OK; i++) {
        const mf_gguf_kv *kv = mf_gguf_kv_at(g, i);
        if (!is_split_key(kv->key)) s = mf_gguf_writer_set_value(w, kv->key, &kv->value);
    }
    if (s == MF_OK) s = mf_gguf_writer_set_u32(w, "general.quantization_version", 2);
    if (s == MF_OK) s = mf_gguf_writer_set_u32(w, "general.file_type", p->ftype->file_type);
    for (int64_t k = 0; k < n && s == MF_OK; k++) {
        const mf_gguf_tensor *t = mf_gguf_tensor_at(g, order[k]);
        s = mf_gguf_writer_add_tensor(w, t->name, types[order[k]], written_dims(t), t->ne);
    }
    if (s == MF_OK) s = mf_gguf_writer_begin(w, out_path);
    if (s != MF_OK) goto done;

    for (int64_t k = 0; k < n; k++) {
        const int64_t i = order[k];
        const mf_gguf_tensor *t = mf_gguf_tensor_at(g, i);
        mf_quant_progress pr = {k, n, t->name, t->type, types[i], t->ne, false};
        if (p->progress) p->progress(p->user, &pr);
        if (p->cancel && *p->cancel) {
            s = mf_fail(MF_ERR_IO, "interrupted");
            goto done;
        }
        const void *data = t->data;
        size_t nbytes = (size_t)t->nbytes;
        if (types[i] != t->type) {
            if ((s = convert_tensor(t, types[i], buf, workers, n_threads, p->cancel)) != MF_OK) goto done;
            data = buf;
            nbytes = mf_row_size(types[i], t->ne[0]) * (size_t)tensor_rows(t);
            st.n_quantized++;
            st.values_converted += (uint64_t)t->ne[0] * tensor_rows(t);
        } else {
            st.n_copied++;
        }
        if ((s = mf_gguf_writer_write_tensor_data(w, k, data, nbytes)) != MF_OK) goto done;
        st.bytes_in += t->nbytes;
        st.bytes_out += nbytes;
        pr.done = true;
        if (p->progress) p->progress(p->user, &pr);
    }
    s = mf_gguf_writer_finish(w);

done:
    mf_gguf_writer_free(w); /* after a failure this removes the temporary file */
    if (workers)
        for (int i = 0; i < n_threads; i++) free(workers[i].scratch);
    free(workers);
    free(buf);
    free(types);
    free(order);
    mf_gguf_free(g);
    st.seconds = mf_time_s() - t0;
    st.n_threads = n_threads;
    if (stats) *stats = st;
    return s;
}
