/* conv.c: a conversation's turns (see conv.h): the messages, rendering them with the template,
 * the incremental prefill against the cache (longest common prefix), the overflow policy and the
 * generation of a reply. */
#include "conv_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

mf_conv_params mf_conv_default_params(void) {
    return (mf_conv_params){.seq = 0, .reserve = 0, .enable_thinking = -1, .cancel = NULL};
}

static char *dup_str(const char *s) {
    char *d = s ? strdup(s) : NULL;
    return d;
}

void mf_conv_msg_free(conv_msg *m) {
    free(m->role);
    free(m->content);
    memset(m, 0, sizeof *m);
}

static bool is_system(const mf_conv *cv) { return cv->n_msgs && !strcmp(cv->msgs[0].role, "system"); }

/* Insert a message at index at (copies the strings). */
static mf_status insert_msg(mf_conv *cv, size_t at, const char *role, const char *content, bool interrupted) {
    if (cv->n_msgs == cv->cap_msgs) {
        size_t cap = cv->cap_msgs ? cv->cap_msgs * 2 : 16;
        conv_msg *nm = realloc(cv->msgs, cap * sizeof *nm);
        if (!nm) return MF_ERR_NOMEM;
        cv->msgs = nm, cv->cap_msgs = cap;
    }
    conv_msg m = {.role = dup_str(role), .content = dup_str(content ? content : ""), .interrupted = interrupted};
    if (!m.role || !m.content) {
        mf_conv_msg_free(&m);
        return MF_ERR_NOMEM;
    }
    memmove(cv->msgs + at + 1, cv->msgs + at, (cv->n_msgs - at) * sizeof *cv->msgs);
    cv->msgs[at] = m;
    cv->n_msgs++;
    return MF_OK;
}

/* Remove messages [from, to). */
static void remove_msgs(mf_conv *cv, size_t from, size_t to) {
    if (from >= to) return;
    for (size_t i = from; i < to; i++) mf_conv_msg_free(&cv->msgs[i]);
    memmove(cv->msgs + from, cv->msgs + to, (cv->n_msgs - to) * sizeof *cv->msgs);
    cv->n_msgs -= to - from;
}

void mf_conv_take_messages(mf_conv *cv, conv_msg *msgs, size_t n) {
    remove_msgs(cv, 0, cv->n_msgs);
    free(cv->msgs);
    cv->msgs = msgs;
    cv->n_msgs = cv->cap_msgs = n;
}

static mf_status check_utf8(const char *what, const char *text) {
    const size_t n = strlen(text), ok = mf_utf8_valid_len(text, n);
    if (ok != n) return mf_set_error(MF_ERR_ARG, "%s is not valid UTF-8 (byte %zu of %zu)", what, ok + 1, n);
    return MF_OK;
}

mf_status mf_conv_make_gen(mf_conv *cv, const mf_sample_settings *s, mf_gen **out) {
    return mf_gen_create(&s->params, (const char *const *)s->stop, s->n_stop, s->n_predict, &cv->vocab, out);
}

mf_status mf_conv_create(const mf_model *m, mf_context *c, const mf_chat_template *t, const mf_sample_settings *s,
                         const mf_conv_params *p, mf_conv **out) {
    *out = NULL;
    mf_conv_params dp = mf_conv_default_params();
    if (!p) p = &dp;
    if (p->seq < 0 || p->seq >= MF_MAX_SEQ)
        return mf_set_error(MF_ERR_ARG, "conversation: sequence %d is not in [0, %d)", p->seq, MF_MAX_SEQ);
    const mf_tokenizer *tok = mf_model_tokenizer(m);
    if (!tok) return MF_ERR_FORMAT;
    mf_conv *cv = calloc(1, sizeof *cv);
    if (!cv) return MF_ERR_NOMEM;
    cv->model = m, cv->ctx = c, cv->tmpl = t, cv->tok = tok, cv->p = *p;
    cv->n_ctx = mf_context_n_ctx(c);
    cv->n_vocab = mf_model_n_vocab(m);
    cv->vocab = mf_sampler_vocab_from_tokenizer(tok, cv->n_vocab, cv->n_ctx);
    mf_status st = mf_sample_settings_copy(&cv->settings, s);
    if (!st && !(cv->toks = malloc((size_t)cv->n_ctx * sizeof *cv->toks))) st = MF_ERR_NOMEM;
    if (!st) st = mf_conv_make_gen(cv, &cv->settings, &cv->gen);
    if (st) {
        mf_conv_free(cv);
        return st;
    }
    /* a random seed is chosen once: the session keeps it, so a resumed conversation repeats it */
    cv->settings.params.seed = mf_sampler_seed(mf_gen_sampler(cv->gen));
    cv->settings.seed_given = true;
    mf_context_seq_rm(c, p->seq, 0, -1);
    *out = cv;
    return MF_OK;
}

void mf_conv_free(mf_conv *cv) {
    if (!cv) return;
    remove_msgs(cv, 0, cv->n_msgs);
    free(cv->msgs);
    mf_sample_settings_free(&cv->settings);
    mf_gen_free(cv->gen);
    free(cv->toks);
    free(cv);
}

size_t mf_conv_n_messages(const mf_conv *cv) { return cv->n_msgs; }

const mf_conv_message *mf_conv_message_at(const mf_conv *cv, size_t i) {
    /* conv_msg and mf_conv_message have the same members in the same order */
    _Static_assert(sizeof(conv_msg) == sizeof(mf_conv_message), "message layouts");
    return i < cv->n_msgs ? (const mf_conv_message *)&cv->msgs[i] : NULL;
}

const char *mf_conv_system(const mf_conv *cv) { return is_system(cv) ? cv->msgs[0].content : NULL; }

mf_status mf_conv_set_system(mf_conv *cv, const char *text) {
    if (!text || !text[0]) {
        if (is_system(cv)) remove_msgs(cv, 0, 1);
        return MF_OK;
    }
    mf_status st = check_utf8("the system prompt", text);
    if (st) return st;
    if (is_system(cv)) {
        char *c = strdup(text);
        if (!c) return MF_ERR_NOMEM;
        free(cv->msgs[0].content);
        cv->msgs[0].content = c;
        return MF_OK;
    }
    return insert_msg(cv, 0, "system", text, false);
}

mf_status mf_conv_add(mf_conv *cv, const char *role, const char *content) {
    if (!role || (strcmp(role, "user") && strcmp(role, "assistant")))
        return mf_set_error(MF_ERR_ARG, "message role '%s': use user or assistant", role ? role : "(null)");
    mf_status st = check_utf8("the message", content ? content : "");
    return st ? st : insert_msg(cv, cv->n_msgs, role, content, false);
}

void mf_conv_clear(mf_conv *cv) { remove_msgs(cv, is_system(cv) ? 1 : 0, cv->n_msgs); }

bool mf_conv_undo(mf_conv *cv) {
    for (size_t i = cv->n_msgs; i-- > (is_system(cv) ? 1u : 0u);)
        if (!strcmp(cv->msgs[i].role, "user")) {
            remove_msgs(cv, i, cv->n_msgs);
            return true;
        }
    return false;
}

const mf_conv_stats *mf_conv_last_stats(const mf_conv *cv) { return &cv->last; }
int32_t mf_conv_n_cached(const mf_conv *cv) { return mf_context_seq_len(cv->ctx, cv->p.seq); }
const mf_sample_settings *mf_conv_settings(const mf_conv *cv) { return &cv->settings; }
const mf_sampler *mf_conv_sampler(const mf_conv *cv) { return mf_gen_sampler(cv->gen); }
void mf_conv_set_thinking(mf_conv *cv, int enable_thinking) {
    cv->p.enable_thinking = enable_thinking < 0 ? -1 : enable_thinking > 0;
}

mf_status mf_conv_set_settings(mf_conv *cv, const mf_sample_settings *s) {
    mf_sample_settings copy;
    mf_status st = mf_sample_settings_copy(&copy, s);
    if (st) return st;
    mf_gen *g = NULL;
    const bool same_seed = copy.params.seed == cv->settings.params.seed;
    if ((st = mf_conv_make_gen(cv, &copy, &g))) {
        mf_sample_settings_free(&copy);
        return st;
    }
    if (same_seed) { /* carry the random stream (and Mirostat's mu) over */
        const mf_sampler *old = mf_gen_sampler(cv->gen);
        size_t n = mf_sampler_state_size(old), w;
        void *img = malloc(n);
        st = img ? mf_sampler_state_save(old, img, n, &w) : MF_ERR_NOMEM;
        if (!st) st = mf_sampler_state_load(mf_gen_sampler(g), img, w);
        free(img);
        if (st) {
            mf_gen_free(g);
            mf_sample_settings_free(&copy);
            return st;
        }
    }
    copy.params.seed = mf_sampler_seed(mf_gen_sampler(g));
    copy.seed_given = true;
    mf_gen_free(cv->gen);
    cv->gen = g;
    mf_sample_settings_free(&cv->settings);
    cv->settings = copy;
    return MF_OK;
}

/* ---- rendering and the cache ---- */

/* The tokens of msgs[0..n) rendered with the generation prompt. */
static mf_status render(const mf_conv *cv, const conv_msg *msgs, size_t n, int32_t **ids, size_t *n_ids) {
    *ids = NULL, *n_ids = 0;
    mf_chat_message *cm = calloc(n ? n : 1, sizeof *cm);
    if (!cm) return MF_ERR_NOMEM;
    for (size_t i = 0; i < n; i++) cm[i] = (mf_chat_message){.role = msgs[i].role, .content = msgs[i].content};
    mf_chat_options o = mf_chat_default_options();
    o.enable_thinking = cv->p.enable_thinking;
    char *text = NULL;
    size_t len = 0;
    mf_status st = mf_chat_render(cv->tmpl, cm, n, &o, &text, &len);
    free(cm);
    /* the template writes BOS itself when the model wants it, and its control tokens as text */
    if (!st) st = mf_tokenizer_encode(cv->tok, text, len, MF_TOK_PARSE_SPECIAL, ids, n_ids);
    free(text);
    return st;
}

mf_status mf_conv_sync_cache(mf_conv *cv, const int32_t *toks, int32_t n, int32_t *reused) {
    *reused = 0;
    mf_context *c = cv->ctx;
    const int32_t seq = cv->p.seq;
    int32_t nc = mf_context_seq_tokens(c, seq, cv->toks, NULL, cv->n_ctx);
    /* the conversation's cells are positions 0..nc-1; anything else (a foreign state) starts over */
    if (nc > 0 && (mf_context_seq_pos_min(c, seq) != 0 || mf_context_seq_pos_max(c, seq) != nc - 1 || nc > cv->n_ctx)) {
        mf_context_seq_rm(c, seq, 0, -1);
        nc = 0;
    }
    int32_t k = 0;
    while (k < nc && k < n && cv->toks[k] == toks[k]) k++;
    /* at least the last token is computed again, so the logits to sample from are its own */
    const int32_t keep = k < n ? k : n - 1;
    mf_status st = mf_context_seq_rm(c, seq, keep, -1);
    if (st) return st;
    const int32_t m = n - keep;
    int32_t *seqs = seq ? malloc((size_t)m * sizeof *seqs) : NULL;
    if (seq && !seqs) return MF_ERR_NOMEM;
    for (int32_t i = 0; seqs && i < m; i++) seqs[i] = seq;
    mf_batch b = {.n_tokens = m, .tokens = toks + keep, .seq = seqs};
    st = mf_context_decode(c, &b);
    free(seqs);
    if (!st) *reused = keep;
    return st;
}

/* Room kept for the reply when deciding whether a turn fits. */
static int32_t reserve(const mf_conv *cv) {
    if (cv->p.reserve > 0) return cv->p.reserve < cv->n_ctx ? cv->p.reserve : cv->n_ctx - 1;
    long long r = cv->settings.n_predict > 0 ? cv->settings.n_predict : 256;
    if (r > cv->n_ctx / 4) r = cv->n_ctx / 4;
    return (int32_t)(r > 1 ? r : 1);
}

/* The oldest exchange: [first, next user message); false when the newest user message is first. */
static bool oldest_exchange(const mf_conv *cv, size_t *from, size_t *to) {
    const size_t first = is_system(cv) ? 1 : 0;
    for (size_t i = first + 1; i < cv->n_msgs; i++)
        if (!strcmp(cv->msgs[i].role, "user")) {
            *from = first, *to = i;
            return true;
        }
    return false;
}

/* Render the conversation (ending in a user message), drop the oldest exchanges while it does not
 * fit, bring the cache up to date and give the sampler the context's tokens as its history. */
static mf_status prepare_turn(mf_conv *cv, mf_conv_stats *s) {
    int32_t *ids = NULL;
    size_t n = 0;
    mf_status st = render(cv, cv->msgs, cv->n_msgs, &ids, &n);
    const int32_t room = reserve(cv);
    if (!st && n + (size_t)room > (size_t)cv->n_ctx) {
        /* would the newest message fit alone (with the system prompt)? if not, keep everything */
        conv_msg alone[2];
        size_t k = 0;
        if (is_system(cv)) alone[k++] = cv->msgs[0];
        alone[k++] = cv->msgs[cv->n_msgs - 1];
        int32_t *a_ids = NULL;
        size_t a_n = 0;
        st = render(cv, alone, k, &a_ids, &a_n);
        free(a_ids);
        if (!st && a_n + 1 > (size_t)cv->n_ctx)
            st = mf_set_error(MF_ERR_RANGE,
                              "this message is %zu tokens as the template renders it%s, more than the context of %d "
                              "tokens holds (start with a larger -c, or send a shorter message)",
                              a_n, is_system(cv) ? " with the system prompt" : "", cv->n_ctx);
        size_t from, to;
        while (!st && n + (size_t)room > (size_t)cv->n_ctx && oldest_exchange(cv, &from, &to)) {
            remove_msgs(cv, from, to);
            s->n_dropped++;
            free(ids);
            st = render(cv, cv->msgs, cv->n_msgs, &ids, &n);
        }
    }
    if (!st && n == 0) st = mf_set_error(MF_ERR_ARG, "the conversation renders to no tokens");
    if (!st && n >= (size_t)cv->n_ctx)
        st = mf_set_error(MF_ERR_RANGE, "the conversation is %zu tokens, more than the context of %d", n, cv->n_ctx);
    double t0 = mf_time_s();
    if (!st) st = mf_conv_sync_cache(cv, ids, (int32_t)n, &s->n_reused);
    s->prefill_s = mf_time_s() - t0;
    if (!st) {
        s->n_prompt = (int32_t)n;
        s->n_prefilled = (int32_t)n - s->n_reused;
        mf_sampler_clear_history(mf_gen_sampler(cv->gen));
        st = mf_gen_prompt(cv->gen, ids, n);
    }
    free(ids);
    return st;
}

typedef struct {
    char *p;
    size_t n, cap;
} text_buf;

static mf_status put(text_buf *b, const char *s, size_t n) {
    if (b->n + n + 1 > b->cap) {
        size_t cap = (b->n + n + 1) * 2;
        char *np = realloc(b->p, cap);
        if (!np) return MF_ERR_NOMEM;
        b->p = np, b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
    return MF_OK;
}

void mf_conv_set_spec(mf_conv *cv, mf_spec *spec) { cv->spec = spec; }

/* Generate the reply after the prepared prompt and add it as the assistant's message. */
static mf_status reply(mf_conv *cv, mf_conv_emit_fn emit, void *user, mf_conv_stats *s) {
    mf_context *c = cv->ctx;
    const int32_t seq = cv->p.seq;
    mf_gen_restart(cv->gen);
    text_buf b = {0};
    mf_status st = put(&b, "", 0), out_st = MF_OK;
    const char *text;
    size_t len;
    const double t0 = mf_time_s();
    mf_spec *sp = cv->spec;
    if (sp && (mf_spec_set_sampling(sp, &cv->settings.params) || mf_spec_begin(sp, cv->gen, cv->n_ctx))) sp = NULL;
    while (!st) {
        if (cv->p.cancel && *cv->p.cancel) {
            s->interrupted = true;
            if (!(st = mf_gen_finish(cv->gen, &text, &len)) && !(st = put(&b, text, len)) && emit)
                out_st = emit(user, text, len);
            s->reason = MF_STOP_NONE;
            break;
        }
        int32_t t = 0;
        bool full = false;
        if (sp) { /* one or more tokens, the text plain decoding gives */
            if ((st = mf_spec_next(sp, &text, &len, &s->reason, &full))) break;
        } else if ((st = mf_gen_next(cv->gen, mf_context_logits(c, 0), &t, &text, &len, &s->reason))) {
            break;
        }
        if ((st = put(&b, text, len))) break;
        if (emit && len && (out_st = emit(user, text, len))) {
            s->interrupted = true;
            break;
        }
        if (s->reason != MF_STOP_NONE) break;
        if (full || (!sp && mf_context_n_used(c) >= cv->n_ctx)) {
            s->context_full = s->interrupted = true;
            s->reason = MF_STOP_LENGTH;
            if (!(st = mf_gen_finish(cv->gen, &text, &len)) && !(st = put(&b, text, len)) && emit)
                out_st = emit(user, text, len);
            break;
        }
        if (sp) continue;
        mf_batch one = {.n_tokens = 1, .tokens = &t, .seq = &seq};
        st = mf_context_decode(c, &one);
    }
    s->gen_s = mf_time_s() - t0;
    s->n_generated = (int32_t)mf_gen_n_generated(cv->gen);
    /* what was shown is kept, even after an error: the messages stay true to the screen */
    if (b.p) {
        mf_status add = insert_msg(cv, cv->n_msgs, "assistant", b.p, s->interrupted);
        if (!st) st = add;
    }
    free(b.p);
    s->n_context = mf_context_seq_len(c, seq);
    return st ? st : out_st;
}

mf_status mf_conv_say(mf_conv *cv, const char *text, mf_conv_emit_fn emit, void *user, mf_conv_stats *stats) {
    mf_conv_stats s = {0};
    mf_status st = check_utf8("the message", text);
    if (!st) st = insert_msg(cv, cv->n_msgs, "user", text, false);
    if (st) return st;
    if ((st = prepare_turn(cv, &s))) {
        remove_msgs(cv, cv->n_msgs - 1, cv->n_msgs);
        s.n_context = mf_context_seq_len(cv->ctx, cv->p.seq);
    } else {
        st = reply(cv, emit, user, &s);
    }
    cv->last = s;
    if (stats) *stats = s;
    return st;
}

mf_status mf_conv_regen(mf_conv *cv, mf_conv_emit_fn emit, void *user, mf_conv_stats *stats) {
    const size_t n = cv->n_msgs;
    if (n < 2 || strcmp(cv->msgs[n - 1].role, "assistant") || strcmp(cv->msgs[n - 2].role, "user"))
        return mf_set_error(MF_ERR_ARG, "there is no reply to generate again (the conversation does not end with one)");
    conv_msg saved = cv->msgs[n - 1];
    cv->n_msgs--;
    mf_conv_stats s = {0};
    mf_status st = prepare_turn(cv, &s);
    if (st) {
        cv->msgs[cv->n_msgs++] = saved; /* the old reply stays */
    } else {
        mf_conv_msg_free(&saved);
        st = reply(cv, emit, user, &s);
    }
    cv->last = s;
    if (stats) *stats = s;
    return st;
}
