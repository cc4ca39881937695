/* viz_run.c: live runs. One thread owns the live context; GET /api/run hands it a prompt and a
 * stream, and it streams the run as server-sent events (docs/viz.md):
 *   start     {prompt, tokens: [{id, text}], n_predict}
 *   graph     {stage: prefill|decode, n_tokens, graph: <the export>} for each graph size the run uses
 *   pass      {pass, kind, n_tokens, graph_tokens} before a forward pass's first node
 *   node      {pass, id, t (s), bytes, macs, ne, count, min, max, mean, rms, nan, inf, heat: {r, c, v}}
 *   pass_end  {pass, seconds, top5: [{token, text, logit}]}
 *   token     {index, id, text}
 *   done      {reason, n_generated, text, seconds}     or   error {message}
 * A node event is written into a fixed buffer (no allocation per node); a client that leaves or reads
 * too slowly ends the run at its next node. */
#include "viz_internal.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HEAT_ROWS 8
#define HEAT_COLS 32

/* Append printf output to v->event at *at; false once it no longer fits. */
static bool put(viz *v, size_t *at, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static bool put(viz *v, size_t *at, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(v->event + *at, VIZ_EVENT_CAP - *at, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= VIZ_EVENT_CAP - *at) return false;
    *at += (size_t)n;
    return true;
}

/* A number as JSON (NaN and infinities have no JSON form: null). */
static bool put_num(viz *v, size_t *at, const char *prefix, double x) {
    return isfinite(x) ? put(v, at, "%s%.5g", prefix, x) : put(v, at, "%snull", prefix);
}

/* The output as a HEAT_ROWS x HEAT_COLS grid of block means: rows are tokens (or the outer
 * dimensions), columns the fastest dimension ne[0]. */
static bool put_heat(viz *v, size_t *at, const mf_node_event *ev) {
    const int64_t cols = ev->ne[0], rows = cols > 0 ? ev->count / cols : 0;
    if (!ev->data || rows <= 0) return put(v, at, ",\"heat\":null");
    const int64_t R = rows < HEAT_ROWS ? rows : HEAT_ROWS, C = cols < HEAT_COLS ? cols : HEAT_COLS;
    if (!put(v, at, ",\"heat\":{\"r\":%lld,\"c\":%lld,\"v\":[", (long long)R, (long long)C)) return false;
    for (int64_t i = 0; i < R; i++)
        for (int64_t j = 0; j < C; j++) {
            const int64_t r0 = i * rows / R, r1 = (i + 1) * rows / R, c0 = j * cols / C, c1 = (j + 1) * cols / C;
            double sum = 0;
            int64_t n = 0;
            for (int64_t r = r0; r < r1; r++)
                for (int64_t c = c0; c < c1; c++) {
                    const float x = ev->data[r * cols + c];
                    if (isfinite(x)) sum += x, n++;
                }
            if (!put_num(v, at, i || j ? "," : "", n ? sum / (double)n : NAN)) return false;
        }
    return put(v, at, "]}");
}

static void push(viz *v, const char *type, json_t *o) {
    json_object_set_new(o, "type", json_string(type));
    if (v->stream) mf_http_stream_push_json(v->stream, o);
    json_decref(o);
}

void viz_on_node(const mf_node_event *ev, void *user) {
    viz *v = user;
    if (!v->stream || mf_http_stream_closed(v->stream)) return;
    if (ev->pass != v->last_pass) {
        v->last_pass = ev->pass;
        push(v, "pass", json_pack("{s:i,s:s,s:i,s:i}", "pass", (int)ev->pass, "kind", ev->decode ? "decode" : "prefill",
                                  "n_tokens", (int)ev->n_tokens, "graph_tokens", (int)ev->graph_tokens));
    }
    size_t at = 0;
    bool ok = put(v, &at,
                  "{\"type\":\"node\",\"pass\":%d,\"id\":%d,\"t\":%.4g,\"bytes\":%llu,\"macs\":%llu,"
                  "\"ne\":[%lld,%lld,%lld,%lld],\"count\":%lld,\"nan\":%lld,\"inf\":%lld",
                  (int)ev->pass, (int)ev->id, ev->seconds, (unsigned long long)ev->bytes,
                  (unsigned long long)ev->macs, (long long)ev->ne[0], (long long)ev->ne[1], (long long)ev->ne[2],
                  (long long)ev->ne[3], (long long)ev->count, (long long)ev->n_nan, (long long)ev->n_inf) &&
              put_num(v, &at, ",\"min\":", ev->min) && put_num(v, &at, ",\"max\":", ev->max) &&
              put_num(v, &at, ",\"mean\":", ev->mean) && put_num(v, &at, ",\"rms\":", ev->rms) &&
              put_heat(v, &at, ev) && put(v, &at, "}");
    if (ok) mf_http_stream_push_data(v->stream, v->event, at);
}

/* A token's text for the page (control tokens shown by their piece). */
static json_t *token_text(const viz *v, int32_t id) {
    const uint8_t *b;
    size_t n;
    if (mf_tokenizer_token_to_bytes(v->tok, id, MF_TOK_DECODE_SPECIAL, &b, &n)) return json_string("");
    json_t *s = json_stringn((const char *)b, n); /* NULL for a piece that ends inside a UTF-8 character */
    return s ? s : json_string("\xef\xbf\xbd");
}

static json_t *top5(const viz *v, const float *logits) {
    const int32_t V = mf_model_n_vocab(v->model);
    int32_t top[5];
    int k = 0;
    for (int32_t i = 0; i < V; i++) {
        int pos = k < 5 ? k++ : 5;
        while (pos > 0 && logits[i] > logits[top[pos - 1]]) {
            if (pos < 5) top[pos] = top[pos - 1];
            pos--;
        }
        if (pos < 5) top[pos] = i;
    }
    json_t *a = json_array();
    for (int i = 0; i < k; i++)
        json_array_append_new(a, json_pack("{s:i,s:o,s:f}", "token", (int)top[i], "text", token_text(v, top[i]),
                                           "logit", (double)logits[top[i]]));
    return a;
}

static void push_graph(viz *v, const char *stage, int32_t n_tokens) {
    size_t len;
    char *text = viz_export(v, n_tokens, "json", &len);
    json_t *g = text ? json_loadb(text, len, 0, NULL) : NULL;
    free(text);
    if (g) push(v, "graph", json_pack("{s:s,s:i,s:o}", "stage", stage, "n_tokens", (int)n_tokens, "graph", g));
}

/* One forward pass and its pass_end event. */
static mf_status decode(viz *v, const int32_t *ids, int32_t n) {
    const double t0 = mf_time_s();
    const mf_batch b = {.n_tokens = n, .tokens = ids};
    mf_status st = mf_context_decode(v->live_ctx, &b);
    if (st) return st;
    push(v, "pass_end", json_pack("{s:i,s:f,s:o}", "pass", (int)v->last_pass, "seconds", mf_time_s() - t0, "top5",
                                  top5(v, mf_context_logits(v->live_ctx, 0))));
    return MF_OK;
}

static void run_job(viz *v, const char *prompt, int32_t n_predict, float temp, bool chat) {
    const double t0 = mf_time_s();
    int32_t *ids = NULL;
    size_t n_ids = 0;
    mf_gen *gen = NULL;
    mf_status st;
    if ((st = viz_prompt_tokens(mf_model_gguf(v->model), v->tok, prompt, chat, &ids, &n_ids))) goto fail;
    if (n_ids == 0 || (int64_t)n_ids + n_predict > v->p.n_ctx) {
        st = mf_set_error(MF_ERR_ARG, "a prompt of %zu tokens and %d to generate: need 1 to %d in all", n_ids,
                          (int)n_predict, (int)v->p.n_ctx);
        goto fail;
    }
    mf_sampler_params sp = mf_sampler_default_params();
    sp.temp = temp;
    sp.seed = 42;
    const mf_sampler_vocab voc = mf_sampler_vocab_from_tokenizer(v->tok, mf_model_n_vocab(v->model), v->p.n_ctx);
    if ((st = mf_gen_create(&sp, NULL, 0, n_predict, &voc, &gen)) || (st = mf_gen_prompt(gen, ids, n_ids))) goto fail;
    json_t *toks = json_array();
    for (size_t i = 0; i < n_ids; i++)
        json_array_append_new(toks, json_pack("{s:i,s:o}", "id", (int)ids[i], "text", token_text(v, ids[i])));
    push(v, "start", json_pack("{s:s,s:o,s:i,s:i}", "prompt", prompt, "tokens", toks, "n_predict", (int)n_predict,
                               "n_layer", (int)mf_model_n_layer(v->model)));
    const int32_t ub = mf_context_n_ubatch(v->live_ctx);
    push_graph(v, "prefill", n_ids > 1 ? (int32_t)(n_ids < (size_t)ub ? n_ids : (size_t)ub) : 2);
    push_graph(v, "decode", 1);
    mf_context_clear(v->live_ctx);
    for (size_t at = 0; at < n_ids && !st;) { /* the prompt in chunks of the context's ubatch */
        const int32_t n = (int32_t)(n_ids - at < (size_t)ub ? n_ids - at : (size_t)ub);
        st = decode(v, ids + at, n);
        at += (size_t)n;
    }
    mf_stop_reason reason = MF_STOP_NONE;
    char *out = NULL; /* the generated text */
    size_t out_len = 0, out_cap = 0;
    for (int32_t i = 0; !st && reason == MF_STOP_NONE; i++) {
        if (mf_http_stream_closed(v->stream)) break;
        int32_t tok;
        const char *piece;
        size_t len;
        if ((st = mf_gen_next(gen, mf_context_logits(v->live_ctx, 0), &tok, &piece, &len, &reason))) break;
        push(v, "token", json_pack("{s:i,s:i,s:o}", "index", (int)i, "id", (int)tok, "text", token_text(v, tok)));
        if (out_len + len + 1 > out_cap) {
            char *p = realloc(out, out_cap = 2 * (out_len + len + 1));
            if (!p) {
                st = MF_ERR_NOMEM;
                break;
            }
            out = p;
        }
        memcpy(out + out_len, piece, len);
        out_len += len;
        if (reason == MF_STOP_NONE) st = decode(v, &tok, 1);
    }
    if (!st) {
        json_t *shown = json_stringn(out ? out : "", out_len);
        push(v, "done", json_pack("{s:s,s:I,s:o,s:f}", "reason", mf_stop_reason_str(reason), "n_generated",
                                  (json_int_t)mf_gen_n_generated(gen), "text", shown ? shown : json_string(""),
                                  "seconds", mf_time_s() - t0));
    }
    free(out);
    if (!st) goto out;
fail:
    push(v, "error", json_pack("{s:s}", "message", mf_last_error()));
out:
    mf_gen_free(gen);
    free(ids);
}

static void *run_thread(void *arg) {
    viz *v = arg;
    pthread_mutex_lock(&v->lock);
    for (;;) {
        while (!v->stopping && !v->job_stream) pthread_cond_wait(&v->wake, &v->lock);
        if (v->stopping) { /* a job handed over as the server stops is not run */
            if (v->job_stream) mf_http_stream_release(v->job_stream);
            v->job_stream = NULL;
            break;
        }
        v->stream = v->job_stream;
        v->job_stream = NULL;
        char *prompt = strdup(v->job_prompt);
        const int32_t n = v->job_n;
        const float temp = v->job_temp;
        const bool chat = v->job_chat;
        pthread_mutex_unlock(&v->lock);
        v->last_pass = -1;
        if (prompt) run_job(v, prompt, n, temp, chat);
        else push(v, "error", json_pack("{s:s}", "message", "out of memory"));
        free(prompt);
        pthread_mutex_lock(&v->lock); /* viz_run_stop aborts v->stream under the lock: drop it first */
        mf_http_stream *st = v->stream;
        v->stream = NULL;
        pthread_mutex_unlock(&v->lock);
        mf_http_stream_end(st);
        mf_http_stream_release(st);
        pthread_mutex_lock(&v->lock);
        v->busy = false;
    }
    pthread_mutex_unlock(&v->lock);
    return NULL;
}

mf_status viz_run_start(viz *v) {
    if (pthread_create(&v->thread, NULL, run_thread, v)) return mf_set_error(MF_ERR_INTERNAL, "viz: no run thread");
    v->thread_started = true;
    return MF_OK;
}

void viz_run_stop(viz *v) {
    if (!v->thread_started) return;
    pthread_mutex_lock(&v->lock);
    v->stopping = true;
    if (v->stream) mf_http_stream_abort(v->stream); /* the run sees it closed at its next node */
    pthread_cond_signal(&v->wake);
    pthread_mutex_unlock(&v->lock);
    pthread_join(v->thread, NULL);
    v->thread_started = false;
}

/* GET /api/run?prompt=TEXT[&n=N][&temp=T][&chat=0|1]: parse and validate (viz_req.c), claim the run
 * thread, stream. */
void viz_h_run(mf_http_request *r, void *user) {
    viz *v = user;
    viz_run_req q;
    viz_refusal why;
    if (!viz_parse_run(mf_http_request_query(r, "prompt"), mf_http_request_query(r, "n"), mf_http_request_query(r, "temp"),
                       mf_http_request_query(r, "chat"), v->p.max_tokens, &q, &why)) {
        mf_http_respond_error(r, 400, why.param, NULL, "%s", why.msg);
        return;
    }
    pthread_mutex_lock(&v->lock);
    if (v->busy || v->stopping) {
        pthread_mutex_unlock(&v->lock);
        mf_http_respond_busy(r, 429, 1, "a run is streaming already; one at a time");
        return;
    }
    mf_http_stream *st = mf_http_respond_stream(r, NULL);
    if (st) {
        v->busy = true;
        v->job_stream = st;
        snprintf(v->job_prompt, sizeof v->job_prompt, "%s", q.prompt);
        v->job_n = q.n;
        v->job_temp = q.temp;
        v->job_chat = q.chat;
        pthread_cond_signal(&v->wake);
    }
    pthread_mutex_unlock(&v->lock);
}
