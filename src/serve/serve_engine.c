/* serve_engine.c: the engine thread. It owns the context; each slot is one sequence of it. A step
 * builds one batch: first the next token of every generating slot, then prompt tokens of the slots
 * still prefilling, round-robin, within a budget of time: a step that prefills takes about 2.2x a
 * decode-only step, whatever the prompt's depth (so one long prompt adds a bounded, steady amount
 * to the others' inter-token latency, and it gets about 55 % of the machine); with nothing
 * generating a step takes a whole n_batch of prompt. After the decode each slot with logits samples with its own settings
 * and seed and streams its text. Requests whose client left are dropped before the next step.
 *
 * Prompt cache: a slot keeps the tokens its sequence holds after a request. A new request takes
 * the idle slot whose tokens share the longest prefix with its prompt (the least recently used
 * otherwise); when another slot, busy or not, shares a longer prefix, its cells are shared into the
 * chosen slot (mf_context_seq_cp, nothing recomputed). The last prompt token is always computed
 * again, for its logits. Since decoding is batch invariant, a request gives the same bytes alone or
 * beside others, in any slot, with or without a cache hit.
 *
 * Speculative decoding (--lookup, -md): each slot has an mf_spec on its sequence (and, with a draft
 * model, on the same sequence of one shared draft context). A generating slot then puts its last
 * token and its drafted ones into the step's batch, all with logits, and after the decode keeps what
 * the target agrees with (mf_spec_accept rolls its sequences back past the first rejection); the
 * slot's token list follows the rollback, so the prompt cache stays exact. Greedy requests give the
 * bytes plain decoding gives; a sampled request's depths and acceptance draws depend only on its
 * seed and tokens, so it too gives the same bytes alone or beside others. */
#include "serve_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef enum { SLOT_IDLE, SLOT_PREFILL, SLOT_GEN } slot_state;

typedef struct slot {
    int32_t id; /* its sequence */
    slot_state state;
    serve_task *task;
    int32_t *cache; /* the tokens the sequence holds, positions 0..n_cache-1 */
    int32_t n_cache;
    int32_t n_hit;  /* prompt tokens the cache already held */
    mf_gen *gen;
    int32_t next;   /* sampled, decoded by the next step */
    mf_spec *spec;  /* speculative decoder of this sequence (NULL: none configured) */
    bool spec_on;   /* this request decodes speculatively (not with Mirostat) */
    int32_t r0;     /* the step's first logits row of its round; -1: none */
    int64_t n_drafted, n_accepted; /* this request's */
    int64_t n_gen;
    char *text;     /* a non-streamed answer so far */
    size_t n_text, cap_text;
    json_t *logprobs; /* chat: array of entries; completion: the legacy object */
    /* logprob entries of tokens whose text is still held back (it may end in a stop string, which
     * is not sent, and then neither are they), with where each token's text starts in the shown
     * text of the answer's tokens; shown: that text's bytes so far */
    json_t *lp_wait;
    size_t *lp_off, n_wait, cap_wait, shown;
    double t_start, t_first;
    uint64_t last_used;
} slot;

struct serve_engine {
    serve *s;
    mf_context *ctx;
    mf_context *dctx; /* the draft model's context (-md): sequence i drafts for slot i */
    mf_sampler_vocab voc; /* each token's shown text (the generators' pieces) */
    slot *slots;
    int32_t n_slots;
    pthread_t thread;
    bool thread_started;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    serve_task *head, *tail; /* waiting for a slot */
    int32_t n_queued, n_reserved;
    int32_t n_holding; /* slots with a task (taken from the queue, not yet done) */
    bool stopping; /* no new tasks; accepted ones finish until the deadline */
    double deadline;
    serve_stats stats;
    uint64_t tick;
    int32_t *b_tok, *b_pos, *b_seq, *row_slot;
    int8_t *b_logits;
    double decode_s;      /* running estimate of a decode-only step */
    double prefill_s_tok; /* running estimate of one prompt token's cost */
    int32_t rr;
    /* what /slots shows, copied from the slots under the lock after every step */
    struct slot_view {
        slot_state state;
        int32_t n_cache;
        int64_t n_gen, n_drafted, n_accepted;
    } *view;
};

void serve_task_free(serve_task *t) {
    if (!t) return;
    free(t->prompt);
    mf_sample_settings_free(&t->settings);
    mf_gen_free(t->gen);
    mf_http_stream_release(t->stream_h);
    mf_http_deferred_release(t->deferred);
    free(t);
}

static bool task_gone(const serve_task *t) {
    return t->stream_h ? mf_http_stream_closed(t->stream_h) : mf_http_deferred_closed(t->deferred);
}

/* Answer a task that will not run (queue full at shutdown, an engine error) and free it. */
static void task_fail(serve_engine *e, serve_task *t, int status, const char *msg) {
    if (t->stream_h) {
        json_t *err = mf_http_error_json(status, msg, NULL, NULL); /* {"error": {...}} */
        if (err) mf_http_stream_push_json(t->stream_h, err);
        json_decref(err);
        mf_http_stream_push_data(t->stream_h, "[DONE]", 6);
        mf_http_stream_end(t->stream_h);
    } else {
        mf_http_deferred_respond_error(t->deferred, status, NULL, NULL, "%s", msg);
    }
    pthread_mutex_lock(&e->lock);
    e->stats.requests_rejected++;
    pthread_mutex_unlock(&e->lock);
    serve_task_free(t);
}

/* ---- slots ---- */

static int32_t common_prefix(const int32_t *a, int32_t na, const int32_t *b, int32_t nb) {
    int32_t n = 0;
    while (n < na && n < nb && a[n] == b[n]) n++;
    return n;
}

static void slot_reset(slot *sl) {
    mf_gen_free(sl->gen);
    sl->gen = NULL;
    json_decref(sl->logprobs);
    sl->logprobs = NULL;
    json_decref(sl->lp_wait);
    sl->lp_wait = NULL;
    sl->n_wait = sl->shown = 0;
    sl->task = NULL;
    sl->state = SLOT_IDLE;
    sl->n_text = 0;
    sl->n_gen = 0;
    sl->spec_on = false;
    sl->r0 = -1;
}

/* Choose the slot for a task (an idle one exists) and set its sequence to the longest cached
 * prefix of the prompt it can have. */
static slot *pick_slot(serve_engine *e, const serve_task *t) {
    slot *best = NULL;
    int32_t best_len = -1;
    for (int32_t i = 0; i < e->n_slots; i++) {
        slot *sl = &e->slots[i];
        if (sl->state != SLOT_IDLE) continue;
        const int32_t l = common_prefix(sl->cache, sl->n_cache, t->prompt, t->n_prompt);
        if (l > best_len || (l == best_len && sl->last_used < best->last_used)) best = sl, best_len = l;
    }
    if (best_len == 0) /* no slot shares anything: the least recently used one */
        for (int32_t i = 0; i < e->n_slots; i++)
            if (e->slots[i].state == SLOT_IDLE && e->slots[i].last_used < best->last_used) best = &e->slots[i];
    return best;
}

static void slot_start(serve_engine *e, slot *sl, serve_task *t) {
    const int32_t limit = t->n_prompt - 1; /* the last prompt token is computed again, for its logits */
    int32_t keep = MF_SERVE_MIN(common_prefix(sl->cache, sl->n_cache, t->prompt, t->n_prompt), limit);
    const slot *donor = NULL;
    for (int32_t i = 0; i < e->n_slots; i++) {
        const slot *o = &e->slots[i];
        if (o == sl) continue;
        const int32_t l = MF_SERVE_MIN(common_prefix(o->cache, o->n_cache, t->prompt, t->n_prompt), limit);
        if (l > keep) keep = l, donor = o;
    }
    if (donor) {
        mf_context_seq_cp(e->ctx, donor->id, sl->id, 0, -1); /* drops sl's own cells first */
        mf_context_seq_rm(e->ctx, sl->id, keep, -1);
        if (e->dctx) /* the draft shares the donor's cells too (mf_spec_begin keeps what agrees) */
            mf_context_seq_cp(e->dctx, donor->id, sl->id, 0, -1);
    } else {
        mf_context_seq_rm(e->ctx, sl->id, keep, -1);
    }
    memcpy(sl->cache, t->prompt, (size_t)keep * sizeof *sl->cache);
    sl->n_cache = keep;
    sl->n_hit = keep;
    sl->task = t;
    sl->state = SLOT_PREFILL;
    sl->t_start = mf_time_s();
    sl->n_gen = 0;
    sl->n_text = 0;
    sl->n_drafted = sl->n_accepted = 0;
    sl->last_used = ++e->tick;
}

/* The slot takes the task's generator (made by the HTTP thread) and its logprob collector. */
static mf_status slot_gen(serve_engine *e, slot *sl) {
    (void)e;
    serve_task *t = sl->task;
    sl->gen = t->gen;
    t->gen = NULL;
    sl->n_wait = sl->shown = 0;
    if (t->logprobs) {
        sl->logprobs = t->kind == TASK_CHAT ? json_array()
                                            : json_pack("{s:[],s:[],s:[],s:[]}", "tokens", "token_logprobs",
                                                        "top_logprobs", "text_offset");
        sl->lp_wait = json_array();
        if (!sl->logprobs || !sl->lp_wait) return mf_set_error(MF_ERR_NOMEM, "out of memory");
    }
    return MF_OK;
}

static void append_text(slot *sl, const char *text, size_t len) {
    if (sl->n_text + len + 1 > sl->cap_text) {
        size_t cap = MF_SERVE_MAX(sl->cap_text * 2, sl->n_text + len + 1024);
        char *p = realloc(sl->text, cap);
        if (!p) return; /* out of memory: the answer is cut, never corrupt */
        sl->text = p, sl->cap_text = cap;
    }
    memcpy(sl->text + sl->n_text, text, len);
    sl->n_text += len;
    sl->text[sl->n_text] = 0;
}

/* A legacy completion's logprobs for one token, added to the running object. */
static void add_legacy_logprob(json_t *acc, json_t *entry, size_t offset) {
    json_array_append(json_object_get(acc, "tokens"), json_object_get(entry, "token"));
    json_array_append(json_object_get(acc, "token_logprobs"), json_object_get(entry, "logprob"));
    json_array_append(json_object_get(acc, "top_logprobs"), json_object_get(entry, "top"));
    json_array_append_new(json_object_get(acc, "text_offset"), json_integer((json_int_t)offset));
}

/* A drawn token's logprob entry (taken), waiting until its text is sent; off: where its text starts. */
static void lp_wait_push(slot *sl, json_t *lp, size_t off) {
    if (sl->n_wait == sl->cap_wait) {
        const size_t cap = sl->cap_wait ? 2 * sl->cap_wait : 16;
        size_t *p = realloc(sl->lp_off, cap * sizeof *p);
        if (!p) { /* out of memory: the entry is lost, never misplaced */
            json_decref(lp);
            return;
        }
        sl->lp_off = p, sl->cap_wait = cap;
    }
    if (json_array_append_new(sl->lp_wait, lp)) return;
    sl->lp_off[sl->n_wait++] = off;
}

/* Send a piece of the answer: a chunk for a stream (false when the client is gone), text for a
 * deferred answer; with it the logprobs of the tokens whose text begins before its end (a token
 * whose text ends up cut by a stop string never has its logprob sent). */
static bool emit(serve_engine *e, slot *sl, const char *text, size_t len) {
    serve_task *t = sl->task;
    const size_t upto = sl->n_text + len;
    size_t k = 0;
    while (k < sl->n_wait && sl->lp_off[k] < upto) k++;
    json_t *lps = NULL;
    if (k && t->kind == TASK_CHAT) {
        json_t *c = t->stream ? json_array() : sl->logprobs;
        for (size_t i = 0; c && i < k; i++) json_array_append(c, json_array_get(sl->lp_wait, i));
        if (t->stream) lps = json_pack("{s:o*,s:n}", "content", c, "refusal");
    } else if (k) {
        json_t *c = t->stream ? json_pack("{s:[],s:[],s:[],s:[]}", "tokens", "token_logprobs", "top_logprobs",
                                          "text_offset")
                              : sl->logprobs;
        for (size_t i = 0; c && i < k; i++) add_legacy_logprob(c, json_array_get(sl->lp_wait, i), sl->lp_off[i]);
        if (t->stream) lps = c;
    }
    if (k) {
        for (size_t i = 0; i < k; i++) json_array_remove(sl->lp_wait, 0);
        memmove(sl->lp_off, sl->lp_off + k, (sl->n_wait - k) * sizeof *sl->lp_off);
        sl->n_wait -= k;
    }
    if (!t->stream) {
        append_text(sl, text, len);
        return true;
    }
    if (!len && !lps) return true;
    sl->n_text += len;
    json_t *c = serve_chunk(e->s, t, text, len, lps, NULL, false);
    const bool ok = c && mf_http_stream_push_json(t->stream_h, c) == MF_HTTP_PUSH_OK;
    json_decref(c);
    return ok;
}

/* The request of slot sl ends (ok: answered in full): counted, and the slot shown idle in /slots,
 * before its client hears the end, so that a client that asks /metrics or /slots next sees it. */
static void slot_mark_done(serve_engine *e, slot *sl, bool ok) {
    pthread_mutex_lock(&e->lock);
    if (ok) {
        e->stats.requests_ok++;
        if (sl->t_first > 0) e->stats.gen_seconds += mf_time_s() - sl->t_first;
    } else {
        e->stats.requests_cancelled++;
    }
    e->stats.gen_tokens += (uint64_t)sl->n_gen;
    e->n_holding--;
    e->view[sl - e->slots] = (struct slot_view){SLOT_IDLE, sl->n_cache, 0, sl->n_drafted, sl->n_accepted};
    pthread_mutex_unlock(&e->lock);
}

/* The answer is complete: the last chunks or the whole body; the slot becomes idle. */
static void slot_finish(serve_engine *e, slot *sl, mf_stop_reason reason) {
    serve_task *t = sl->task;
    const char *finish = reason == MF_STOP_LENGTH ? "length" : "stop";
    slot_mark_done(e, sl, true);
    if (t->stream) {
        json_t *c = serve_chunk(e->s, t, NULL, 0, NULL, finish, false);
        if (c) mf_http_stream_push_json(t->stream_h, c);
        json_decref(c);
        if (t->include_usage) {
            json_t *u = serve_chunk(e->s, t, NULL, 0, NULL, NULL, false);
            if (u) {
                json_object_set_new(u, "choices", json_array());
                json_object_set_new(u, "usage", serve_usage(t->n_prompt, sl->n_gen, sl->n_hit));
                mf_http_stream_push_json(t->stream_h, u);
            }
            json_decref(u);
        }
        mf_http_stream_push_data(t->stream_h, "[DONE]", 6);
        mf_http_stream_end(t->stream_h);
    } else {
        json_t *body = serve_final(e->s, t, sl->text ? sl->text : "", sl->n_text, sl->logprobs, finish, sl->n_hit,
                                   sl->n_gen);
        if (body)
            mf_http_deferred_respond_json(t->deferred, 200, body);
        else
            mf_http_deferred_respond_error(t->deferred, 500, NULL, NULL, "out of memory building the answer");
        json_decref(body);
    }
    serve_task_free(t);
    slot_reset(sl);
    sl->last_used = ++e->tick;
}

static void slot_cancel(serve_engine *e, slot *sl, const char *why) {
    serve_task *t = sl->task;
    slot_mark_done(e, sl, false);
    if (t->stream && mf_http_stream_close_reason(t->stream_h) == MF_HTTP_CLOSE_TOO_SLOW)
        mf_log_message(MF_LOG_WARN,
                       "slot %d: its client stopped reading the stream (the stream's queue is full): dropped after "
                       "%lld tokens",
                       (int)(sl - e->slots), (long long)sl->n_gen);
    if (why) { /* the server's reason (shutdown, an engine error): the client hears it */
        if (t->stream) {
            json_t *err = mf_http_error_json(503, why, NULL, NULL);
            if (err) mf_http_stream_push_json(t->stream_h, err);
            json_decref(err);
            mf_http_stream_push_data(t->stream_h, "[DONE]", 6);
            mf_http_stream_end(t->stream_h);
        } else {
            mf_http_deferred_respond_error(t->deferred, 503, NULL, NULL, "%s", why);
        }
    }
    serve_task_free(t);
    slot_reset(sl);
    sl->last_used = ++e->tick;
}

/* One drawn token: count it, send its text (and logprob); false when the answer ended with it. */
static bool slot_token(serve_engine *e, slot *sl, int32_t tok, const char *text, size_t len, mf_stop_reason reason,
                       const float *logits) {
    const serve_task *t = sl->task;
    sl->n_gen++;
    json_t *lp = t->logprobs && reason != MF_STOP_EOG ? serve_logprob(e->s, logits, tok, t->top_logprobs, t->kind) : NULL;
    if (lp) lp_wait_push(sl, lp, sl->shown);
    size_t pl = 0;
    (e->voc.show ? e->voc.show : e->voc.piece)(e->voc.user, tok, &pl);
    sl->shown += pl;
    const bool ok = emit(e, sl, text, len);
    if (!ok) {
        slot_cancel(e, sl, NULL);
        return false;
    }
    if (reason != MF_STOP_NONE) {
        slot_finish(e, sl, reason);
        return false;
    }
    return true;
}

/* The prompt is in the cache: count it, open a chat stream, start the speculative decoder. false
 * when the answer ended here. */
static bool slot_prompt_done(serve_engine *e, slot *sl) {
    serve_task *t = sl->task;
    sl->state = SLOT_GEN;
    sl->t_first = mf_time_s();
    pthread_mutex_lock(&e->lock);
    e->stats.prompt_tokens += (uint64_t)t->n_prompt;
    e->stats.prompt_tokens_cached += (uint64_t)sl->n_hit;
    e->stats.prompt_seconds += sl->t_first - sl->t_start;
    pthread_mutex_unlock(&e->lock);
    if (t->stream && t->kind == TASK_CHAT) { /* the role chunk opens a chat stream */
        json_t *c = serve_chunk(e->s, t, "", 0, NULL, NULL, true);
        const bool ok = c && mf_http_stream_push_json(t->stream_h, c) == MF_HTTP_PUSH_OK;
        json_decref(c);
        if (!ok) {
            slot_cancel(e, sl, NULL);
            return false;
        }
    }
    if (t->settings.n_predict == 0) { /* max_tokens 0: the prompt is in the cache, nothing more */
        slot_finish(e, sl, MF_STOP_LENGTH);
        return false;
    }
    /* Mirostat (whose running target follows every drawn token) decodes plainly */
    sl->spec_on = sl->spec && !t->settings.params.mirostat && !mf_spec_set_sampling(sl->spec, &t->settings.params);
    if (sl->spec_on && mf_spec_begin(sl->spec, sl->gen, e->s->n_ctx_slot)) {
        slot_cancel(e, sl, mf_last_error());
        return false;
    }
    return true;
}

/* A speculative round's outcome, from logits rows r0 ...: the tokens drawn, their text. */
static void slot_round(serve_engine *e, slot *sl, int32_t r0) {
    mf_spec_round rd;
    if (mf_spec_accept(sl->spec, r0, &rd)) {
        slot_cancel(e, sl, mf_last_error());
        return;
    }
    sl->n_cache = mf_context_seq_pos_max(e->ctx, sl->id) + 1; /* the token list follows the rollback */
    sl->n_drafted += rd.n_drafted, sl->n_accepted += rd.n_accepted;
    if (rd.n_drafted) {
        pthread_mutex_lock(&e->lock);
        e->stats.draft_tokens += (uint64_t)rd.n_drafted;
        e->stats.draft_accepted += (uint64_t)rd.n_accepted;
        pthread_mutex_unlock(&e->lock);
    }
    for (int32_t i = 0; i < rd.n_tokens; i++) {
        const size_t from = i ? rd.text_end[i - 1] : 0;
        const mf_stop_reason reason = i == rd.n_tokens - 1 ? rd.reason : MF_STOP_NONE;
        if (!slot_token(e, sl, rd.tokens[i], rd.text + from, rd.text_end[i] - from, reason,
                        mf_context_logits(e->ctx, r0 + i)))
            return;
    }
    if (rd.context_full) { /* cannot happen with n_predict clamped to the room; end it as plain decoding would */
        const char *text;
        size_t len;
        if (!mf_gen_finish(sl->gen, &text, &len) && !emit(e, sl, text, len)) {
            slot_cancel(e, sl, NULL);
            return;
        }
        slot_finish(e, sl, MF_STOP_LENGTH);
    }
}

/* Sample the slot's next token from logits row `row` and send what it adds to the answer. */
static void slot_sample(serve_engine *e, slot *sl, int32_t row) {
    if (sl->state == SLOT_PREFILL && !slot_prompt_done(e, sl)) return;
    if (sl->spec_on) { /* the first token, through the decoder */
        slot_round(e, sl, row);
        return;
    }
    const float *logits = mf_context_logits(e->ctx, row);
    int32_t tok;
    const char *text;
    size_t len;
    mf_stop_reason reason;
    if (mf_gen_next(sl->gen, logits, &tok, &text, &len, &reason)) {
        slot_cancel(e, sl, mf_last_error());
        return;
    }
    if (slot_token(e, sl, tok, text, len, reason, logits)) sl->next = tok;
}

/* ---- the step ---- */

static int32_t active_slots(const serve_engine *e) {
    int32_t n = 0;
    for (int32_t i = 0; i < e->n_slots; i++) n += e->slots[i].state != SLOT_IDLE;
    return n;
}

/* Take queued tasks into idle slots; drop those whose client left while they waited. */
static void admit(serve_engine *e) {
    for (;;) {
        pthread_mutex_lock(&e->lock);
        serve_task *t = NULL;
        bool idle = false, gone = false;
        for (int32_t i = 0; i < e->n_slots; i++) idle |= e->slots[i].state == SLOT_IDLE;
        if (e->head && (idle || task_gone(e->head))) {
            t = e->head;
            e->head = t->next;
            if (!e->head) e->tail = NULL;
            e->n_queued--;
            gone = task_gone(t);
            if (gone) e->stats.requests_cancelled++;
            else e->n_holding++;
        }
        pthread_mutex_unlock(&e->lock);
        if (!t) return;
        if (gone) {
            serve_task_free(t);
            continue;
        }
        slot *sl = pick_slot(e, t);
        slot_start(e, sl, t);
        if (slot_gen(e, sl)) slot_cancel(e, sl, mf_last_error());
    }
}

/* The prompt budget of a step beside generating slots: PROMPT_SHARE decode-only steps' worth of
 * prompt work, at the running cost of a prompt token (which grows with the prompt's depth: 1.4 ms
 * at depth 0, 3.6 ms at depth 2000 for the 0.5B shape on 2 threads), and at least PROMPT_FLOOR
 * tokens (a prompt moves while the estimates settle). So every such step takes about 1 +
 * PROMPT_SHARE decode-only steps: the streams' inter-token latency p99 while a long prompt
 * prefills stays near 1.8x their decode-only step (their quiet p99 is already 1.2-1.9x it), and the
 * prompt gets 45 % of the machine, its first token at about 1.6x its time alone (its tokens cost
 * more in small chunks). A fixed count of tokens (12, earlier) made the steps at depth 2000 take
 * 4.5x a decode-only step. Measured (docs/server.md, 0.5B Q4_0, 2 threads, a 2,000-token newcomer
 * beside 3 streams): with 1.5 the streams' p99 ratio exceeded 2x in 5 of 17 runs (1.46-2.76x),
 * with 1.2 in none of 10 one session (1.30-1.88x) and in 4 of 8 another (1.38-2.60x); with 0.9 in
 * none of 8 (1.54-1.95x), 0.75 in none of 4 (1.39-1.78x), the newcomer's first token at 1.25-1.90x
 * its idle time with either (1.50-1.75x with 1.2). */
#define PROMPT_SHARE 0.8
/* STREAM_SETTLED: tokens a stream has sent before the budget protects it (step) */
enum { PROMPT_FLOOR = 4, STREAM_SETTLED = 4 };

static void step(serve_engine *e) {
    const int32_t n_batch = e->s->p->n_batch;
    int32_t n = 0, n_dec = 0;
    bool settled = false; /* a generating slot has streamed STREAM_SETTLED tokens */
    for (int32_t i = 0; i < e->n_slots; i++) {
        slot *sl = &e->slots[i];
        if (sl->state != SLOT_GEN) continue;
        settled |= sl->n_gen >= STREAM_SETTLED;
        if (!sl->spec_on) {
            e->b_tok[n] = sl->next, e->b_pos[n] = sl->n_cache, e->b_seq[n] = sl->id, e->b_logits[n] = 1;
            e->row_slot[n++] = i;
            continue;
        }
        /* its last token and its drafts (at most n_batch / n_parallel tokens: serve.c checks) */
        const int32_t *toks;
        int32_t k;
        if (mf_spec_draft(sl->spec, &toks, &k)) {
            slot_cancel(e, sl, mf_last_error());
            continue;
        }
        sl->r0 = n; /* every token so far asks for logits: batch index = logits row */
        for (int32_t j = 0; j < k; j++) {
            e->b_tok[n] = toks[j], e->b_pos[n] = sl->n_cache + j, e->b_seq[n] = sl->id, e->b_logits[n] = 1;
            e->row_slot[n++] = i;
        }
    }
    n_dec = n;
    /* prompt budget beside generating slots that have streamed a few tokens (above); the whole batch
     * otherwise (the estimates start at 0: the first steps take what fits). Requests that arrive
     * together are admitted a step apart (the first alone, its HTTP parsed first); beside a stream
     * that has sent its first token only, the others' prompts had come in at ~10 tokens a step over
     * 8 steps (4 streams of the 0.5B shape: first tokens p50 168-255 -> 160-187 ms, aggregate
     * 164-217 -> 200-237 tokens/s, docs/server.md) */
    int32_t budget = n_batch - n;
    if (settled && e->prefill_s_tok > 0)
        budget = MF_SERVE_MIN(budget,
                              MF_SERVE_MAX(PROMPT_FLOOR, (int32_t)(PROMPT_SHARE * e->decode_s / e->prefill_s_tok)));
    int32_t n_pre = 0;
    for (int32_t k = 0; k < e->n_slots && budget > 0; k++) {
        const int32_t i = (e->rr + k) % e->n_slots;
        slot *sl = &e->slots[i];
        if (sl->state != SLOT_PREFILL) continue;
        const serve_task *t = sl->task;
        const int32_t take = MF_SERVE_MIN(t->n_prompt - sl->n_cache, budget);
        for (int32_t j = 0; j < take; j++) {
            const int32_t p = sl->n_cache + j;
            e->b_tok[n] = t->prompt[p], e->b_pos[n] = p, e->b_seq[n] = sl->id;
            e->b_logits[n] = p == t->n_prompt - 1;
            e->row_slot[n++] = i;
        }
        budget -= take;
        n_pre += take;
    }
    e->rr = (e->rr + 1) % e->n_slots;
    if (n == 0) return;
    const double t0 = mf_time_s();
    mf_batch b = {.n_tokens = n, .tokens = e->b_tok, .pos = e->b_pos, .seq = e->b_seq, .logits = e->b_logits};
    mf_status st = mf_context_decode(e->ctx, &b);
    const double dt = mf_time_s() - t0;
    if (st) { /* nothing is stored (atomic): fail every request in the batch */
        char msg[512];
        snprintf(msg, sizeof msg, "decoding failed: %s", mf_last_error());
        for (int32_t i = 0; i < e->n_slots; i++)
            if (e->slots[i].state != SLOT_IDLE) slot_cancel(e, &e->slots[i], msg);
        return;
    }
    /* running estimates (weight 0.2 for the newest): a decode-only step, and a prompt token's share
     * of a step that prefilled (what the step took beyond its decode tokens) */
    if (n_pre == 0) {
        e->decode_s = e->decode_s > 0 ? 0.8 * e->decode_s + 0.2 * dt : dt;
    } else {
        const double per_tok = MF_SERVE_MAX(dt - (n_dec ? e->decode_s : 0.0), 0.0) / n_pre;
        if (per_tok > 0) e->prefill_s_tok = e->prefill_s_tok > 0 ? 0.8 * e->prefill_s_tok + 0.2 * per_tok : per_tok;
    }
    pthread_mutex_lock(&e->lock);
    e->stats.n_decode++;
    pthread_mutex_unlock(&e->lock);
    /* the batch is in the cache: the slots' token lists follow it */
    for (int32_t r = 0; r < n; r++) {
        slot *sl = &e->slots[e->row_slot[r]];
        sl->cache[sl->n_cache++] = e->b_tok[r];
    }
    int32_t out = 0;
    for (int32_t r = 0; r < n; r++) {
        if (!e->b_logits[r]) continue;
        slot *sl = &e->slots[e->row_slot[r]];
        const int32_t row = out++;
        if (sl->state == SLOT_IDLE || !mf_context_logits(e->ctx, row)) continue;
        if (sl->state == SLOT_GEN && sl->spec_on) { /* a round: all its rows at once, from its first */
            if (row == sl->r0) sl->r0 = -1, slot_round(e, sl, row);
            continue;
        }
        slot_sample(e, sl, row);
    }
}

/* Fail every queued task (the grace of a stop ran out). */
static void fail_queue(serve_engine *e, const char *why) {
    pthread_mutex_lock(&e->lock);
    serve_task *q = e->head;
    e->head = e->tail = NULL;
    e->n_queued = 0;
    pthread_mutex_unlock(&e->lock);
    while (q) {
        serve_task *next = q->next;
        task_fail(e, q, 503, why);
        q = next;
    }
}

static void *engine_main(void *arg) {
    serve_engine *e = arg;
    for (;;) {
        pthread_mutex_lock(&e->lock);
        while (!e->stopping && !e->head && active_slots(e) == 0) pthread_cond_wait(&e->cond, &e->lock);
        const bool stopping = e->stopping;
        const double deadline = e->deadline;
        pthread_mutex_unlock(&e->lock);
        /* A stop lets what was accepted (running or queued) finish until the deadline. */
        if (stopping && mf_time_s() > deadline) {
            for (int32_t i = 0; i < e->n_slots; i++)
                if (e->slots[i].state != SLOT_IDLE) slot_cancel(e, &e->slots[i], "the server is shutting down");
            fail_queue(e, "the server is shutting down");
        }
        admit(e);
        for (int32_t i = 0; i < e->n_slots; i++) { /* clients that left: their slots are free now */
            slot *sl = &e->slots[i];
            if (sl->state != SLOT_IDLE && task_gone(sl->task)) slot_cancel(e, sl, NULL);
        }
        step(e);
        pthread_mutex_lock(&e->lock);
        const int32_t busy = active_slots(e);
        e->stats.busy_slots = busy;
        e->stats.queued = e->n_queued;
        e->stats.kv_used = mf_context_n_used(e->ctx);
        for (int32_t i = 0; i < e->n_slots; i++)
            e->view[i] = (struct slot_view){e->slots[i].state, e->slots[i].n_cache, e->slots[i].n_gen,
                                            e->slots[i].n_drafted, e->slots[i].n_accepted};
        const bool done = e->stopping && busy == 0 && !e->head;
        pthread_mutex_unlock(&e->lock);
        if (done) break;
    }
    return NULL;
}

/* ---- life ---- */

mf_status serve_engine_create(serve *s, serve_engine **out) {
    *out = NULL;
    serve_engine *e = calloc(1, sizeof *e);
    if (!e) return MF_ERR_NOMEM;
    e->s = s;
    e->voc = mf_sampler_vocab_from_tokenizer(s->tok, s->n_vocab, s->n_ctx_slot);
    e->n_slots = s->p->n_parallel;
    pthread_mutex_init(&e->lock, NULL);
    pthread_cond_init(&e->cond, NULL);
    mf_context_params cp = s->p->ctx;
    cp.n_ctx = s->n_ctx_slot * e->n_slots;
    cp.n_threads = s->p->n_threads;
    cp.n_ubatch = s->p->n_batch;
    cp.kv_f32 = s->p->kv_f32;
    mf_status st = mf_context_create(s->model, &cp, &e->ctx);
    if (!st && s->draft) { /* the draft's context: one sequence per slot, the same room */
        mf_context_params dp = cp;
        if (s->p->spec.draft_threads > 0) dp.n_threads = s->p->spec.draft_threads;
        /* the engine's threads where as many are asked for (the engine runs one model at a time) */
        if (dp.n_threads == 0 || dp.n_threads == mf_context_n_threads(e->ctx)) dp.threads_of = e->ctx;
        st = mf_context_create(s->draft, &dp, &e->dctx);
    }
    const size_t nb = (size_t)s->p->n_batch;
    e->slots = calloc((size_t)e->n_slots, sizeof *e->slots);
    e->view = calloc((size_t)e->n_slots, sizeof *e->view);
    e->b_tok = malloc(nb * sizeof *e->b_tok), e->b_pos = malloc(nb * sizeof *e->b_pos);
    e->b_seq = malloc(nb * sizeof *e->b_seq), e->row_slot = malloc(nb * sizeof *e->row_slot);
    e->b_logits = malloc(nb);
    if (!st && (!e->slots || !e->view || !e->b_tok || !e->b_pos || !e->b_seq || !e->row_slot || !e->b_logits)) st = MF_ERR_NOMEM;
    for (int32_t i = 0; !st && i < e->n_slots; i++) {
        e->slots[i].id = i;
        e->slots[i].r0 = -1;
        if (!(e->slots[i].cache = malloc((size_t)s->n_ctx_slot * sizeof(int32_t)))) st = MF_ERR_NOMEM;
        if (!st && (s->draft || s->p->spec.lookup)) {
            mf_spec_params sp = s->p->spec;
            sp.draft = s->draft, sp.draft_ctx = e->dctx, sp.draft_seq = s->draft ? i : 0;
            const mf_sampler_params greedy = mf_sampler_default_params(); /* each request sets its own */
            st = mf_spec_create(s->model, e->ctx, i, &greedy, &sp, &e->slots[i].spec);
        }
    }
    if (!st && pthread_create(&e->thread, NULL, engine_main, e) != 0) st = MF_ERR_INTERNAL;
    if (st) {
        serve_engine_free(e);
        return st;
    }
    e->thread_started = true;
    *out = e;
    return MF_OK;
}

bool serve_engine_reserve(serve_engine *e) {
    pthread_mutex_lock(&e->lock);
    /* max_queue requests may wait beside those the idle slots will take (slots the engine has not
     * given a task yet, which it may not have had time to take from the queue) */
    const bool ok = !e->stopping && e->n_queued + e->n_reserved < e->s->p->max_queue + e->n_slots - e->n_holding;
    if (ok)
        e->n_reserved++;
    else
        e->stats.requests_rejected++;
    pthread_mutex_unlock(&e->lock);
    return ok;
}

void serve_engine_unreserve(serve_engine *e) {
    pthread_mutex_lock(&e->lock);
    e->n_reserved--;
    pthread_mutex_unlock(&e->lock);
}

void serve_engine_submit(serve_engine *e, serve_task *t) {
    pthread_mutex_lock(&e->lock);
    e->n_reserved--;
    const bool ok = !e->stopping;
    if (ok) {
        t->t_queued = mf_time_s();
        t->next = NULL;
        if (e->tail) e->tail->next = t;
        else e->head = t;
        e->tail = t;
        e->n_queued++;
        e->stats.requests++;
        pthread_cond_signal(&e->cond);
    }
    pthread_mutex_unlock(&e->lock);
    if (!ok) task_fail(e, t, 503, "the server is shutting down");
}

void serve_engine_stop(serve_engine *e, double grace_s) {
    if (!e) return;
    pthread_mutex_lock(&e->lock);
    if (!e->stopping) { /* the first stop sets the deadline */
        e->stopping = true;
        e->deadline = mf_time_s() + grace_s;
    }
    pthread_cond_signal(&e->cond);
    pthread_mutex_unlock(&e->lock);
    if (e->thread_started) {
        pthread_join(e->thread, NULL);
        e->thread_started = false;
    }
    fail_queue(e, "the server is shutting down"); /* a submit that raced the thread's end */
}

void serve_engine_free(serve_engine *e) {
    if (!e) return;
    serve_engine_stop(e, 0);
    for (int32_t i = 0; e->slots && i < e->n_slots; i++) {
        if (e->slots[i].task) slot_cancel(e, &e->slots[i], "the server is shutting down");
        free(e->slots[i].cache);
        free(e->slots[i].text);
        free(e->slots[i].lp_off);
        json_decref(e->slots[i].lp_wait);
        mf_spec_free(e->slots[i].spec);
    }
    free(e->slots);
    free(e->view);
    free(e->b_tok), free(e->b_pos), free(e->b_seq), free(e->row_slot), free(e->b_logits);
    mf_context_free(e->dctx);
    mf_context_free(e->ctx);
    pthread_mutex_destroy(&e->lock);
    pthread_cond_destroy(&e->cond);
    free(e);
}

void serve_engine_stats(serve_engine *e, serve_stats *out) {
    pthread_mutex_lock(&e->lock);
    *out = e->stats;
    pthread_mutex_unlock(&e->lock);
}

json_t *serve_engine_slots_json(serve_engine *e) {
    json_t *a = json_array();
    pthread_mutex_lock(&e->lock);
    for (int32_t i = 0; a && i < e->n_slots; i++) {
        const struct slot_view *v = &e->view[i];
        const char *state = v->state == SLOT_IDLE ? "idle" : v->state == SLOT_PREFILL ? "prefill" : "generating";
        json_array_append_new(a, json_pack("{s:i,s:i,s:b,s:s,s:i,s:I,s:I,s:I}", "id", (int)i, "n_ctx",
                                           (int)e->s->n_ctx_slot, "is_processing", v->state != SLOT_IDLE, "state",
                                           state, "n_cached_tokens", (int)v->n_cache, "n_decoded",
                                           (json_int_t)v->n_gen, "n_draft_total", (json_int_t)v->n_drafted,
                                           "n_draft_accepted", (json_int_t)v->n_accepted));
    }
    pthread_mutex_unlock(&e->lock);
    return a;
}
