/* test_conv.c: conversations (src/conv) on the fixture models: each turn prefills only what is new
 * (the count stays flat as the history grows), a template that rewrites an earlier turn is handled by
 * cutting the cache back, overflow drops the oldest exchanges and keeps the system prompt, a message
 * too long for the context is refused with the conversation intact, interrupting keeps the partial
 * reply; sessions: save -> new context -> load -> next turn equals the uninterrupted run byte for
 * byte with no prefill, and damaged, truncated and foreign files are handled as documented. */
#include "test.h"

#include "conv.h"

#include <unistd.h>

static const char *QWEN2 = "models/mini-qwen2.Q8_0.gguf";

typedef struct {
    char buf[8192];
    size_t n;
    int pieces, cancel_after;
    volatile sig_atomic_t *cancel;
} sink;

static mf_status emit(void *user, const char *t, size_t len) {
    sink *s = user;
    if (s->n + len < sizeof s->buf) memcpy(s->buf + s->n, t, len), s->n += len;
    s->buf[s->n] = 0;
    if (s->cancel && ++s->pieces == s->cancel_after) *s->cancel = 1;
    return MF_OK;
}

typedef struct {
    mf_model *m;
    mf_context *c;
    mf_chat_template *t;
    mf_conv *cv;
} rig;

static volatile sig_atomic_t cancel_flag;

static bool rig_open(rig *r, const char *model, int32_t n_ctx, long long n_predict) {
    memset(r, 0, sizeof *r);
    if (mf_model_load(fixture(model), &r->m)) {
        fprintf(stderr, "skip: %s\n", mf_last_error());
        return false;
    }
    mf_context_params cp = test_context_params();
    cp.n_ctx = n_ctx, cp.n_threads = 2;
    mf_sample_settings s;
    mf_sample_settings_init(&s);
    s.params.seed = 7, s.params.temp = 0.9f, s.params.penalty_repeat = 1.1f, s.n_predict = n_predict;
    mf_conv_params p = mf_conv_default_params();
    p.cancel = &cancel_flag;
    bool ok = !mf_context_create(r->m, &cp, &r->c) && !mf_chat_template_from_gguf(mf_model_gguf(r->m), NULL, &r->t) &&
              !mf_conv_create(r->m, r->c, r->t, &s, &p, &r->cv);
    CHECKF(ok, "%s", mf_last_error());
    mf_sample_settings_free(&s);
    return ok;
}

static void rig_close(rig *r) {
    mf_conv_free(r->cv);
    mf_chat_template_free(r->t);
    mf_context_free(r->c);
    mf_model_free(r->m);
}

static const char *TURNS[] = {"Hello there, who are you?", "Tell me about the sea.", "And the mountains?",
                              "Which is older?", "Thanks. One more question: why is the sky blue?",
                              "Summarize everything."};

/* Turn N's prefill covers the new message and the template's markers (and a re-tokenized tail of the
 * last reply), never the history. */
static void test_incremental(void) {
    rig r;
    if (!rig_open(&r, QWEN2, 2048, 24)) return;
    CHECK(mf_conv_set_system(r.cv, "You are terse.") == MF_OK);
    int32_t max_prefill_late = 0, reused_prev = -1;
    for (int i = 0; i < 6; i++) {
        sink s = {0};
        mf_conv_stats st;
        CHECKF(mf_conv_say(r.cv, TURNS[i], emit, &s, &st) == MF_OK, "%s", mf_last_error());
        CHECK(st.n_prompt == st.n_reused + st.n_prefilled && st.n_generated > 0);
        printf("turn %d: prompt %d tokens, reused %d, prefilled %d, generated %d\n", i + 1, st.n_prompt, st.n_reused,
               st.n_prefilled, st.n_generated);
        if (i > 0) {
            CHECK(st.n_reused > reused_prev);      /* the history is reused */
            CHECK(st.n_prefilled <= 24 + 40);      /* the last reply at most, plus the new message */
            if (i >= 3) max_prefill_late = (max_prefill_late > st.n_prefilled ? max_prefill_late : st.n_prefilled);
        }
        reused_prev = st.n_reused;
        CHECK(mf_conv_n_cached(r.cv) == st.n_context);
    }
    CHECK(max_prefill_late > 0 && max_prefill_late < 64);
    CHECK(mf_conv_n_messages(r.cv) == 13 && !strcmp(mf_conv_system(r.cv), "You are terse."));
    /* /undo drops the last exchange; /regen makes a new reply to the same message */
    CHECK(mf_conv_undo(r.cv) && mf_conv_n_messages(r.cv) == 11);
    const char *last = mf_conv_message_at(r.cv, 10)->content;
    char before[4096];
    snprintf(before, sizeof before, "%s", last);
    sink s = {0};
    mf_conv_stats st;
    CHECK(mf_conv_regen(r.cv, emit, &s, &st) == MF_OK && mf_conv_n_messages(r.cv) == 11);
    CHECK(st.n_prefilled >= 1 && st.n_prefilled < 20); /* the prompt was cached: only its last token again */
    CHECK(!strcmp(mf_conv_message_at(r.cv, 10)->content, s.buf));
    mf_conv_clear(r.cv);
    CHECK(mf_conv_n_messages(r.cv) == 1);
    CHECK(mf_conv_regen(r.cv, emit, &s, &st) == MF_ERR_ARG);
    CHECK(mf_conv_set_system(r.cv, NULL) == MF_OK && mf_conv_n_messages(r.cv) == 0 && !mf_conv_system(r.cv));
    CHECK(mf_conv_say(r.cv, "\xff\xfe", emit, &s, &st) == MF_ERR_ARG && strstr(mf_last_error(), "UTF-8"));
    CHECK(mf_conv_n_messages(r.cv) == 0);
    rig_close(&r);
}

/* Changing an earlier part (the system prompt, or a template dropping past <think> content) cuts
 * the cache back to the first differing token, and the reply is what a fresh conversation gives. */
static void test_rewrite(void) {
    rig a, b;
    if (!rig_open(&a, "models/mini-qwen3.Q8_0.gguf", 1024, 16)) return;
    if (!rig_open(&b, "models/mini-qwen3.Q8_0.gguf", 1024, 16)) return;
    for (rig *r = &a; r; r = r == &a ? &b : NULL) {
        CHECK(mf_conv_add(r->cv, "user", "What is 2+2?") == MF_OK);
        CHECK(mf_conv_add(r->cv, "assistant", "<think>\nSimple sum.\n</think>\n\nIt is 4.") == MF_OK);
    }
    CHECK(mf_conv_add(a.cv, "system", "x") == MF_ERR_ARG);
    /* a's cache holds the reply as generated, with its thinking: the template rendered without the
     * generation prompt, as it was when the reply was the last message */
    mf_chat_message msgs[2] = {{.role = "user", .content = "What is 2+2?"},
                               {.role = "assistant", .content = "<think>\nSimple sum.\n</think>\n\nIt is 4."}};
    mf_chat_options o = mf_chat_default_options();
    o.add_generation_prompt = false;
    char *text;
    int32_t *ids;
    size_t n;
    CHECK(mf_chat_render(a.t, msgs, 1, &o, &text, NULL) == MF_OK);
    size_t user_len = strlen(text);
    free(text);
    o.add_generation_prompt = true;
    CHECK(mf_chat_render(a.t, msgs, 1, &o, &text, NULL) == MF_OK);
    char *full = malloc(strlen(text) + 256);
    sprintf(full, "%s<think>\nSimple sum.\n</think>\n\nIt is 4.", text);
    free(text);
    (void)user_len;
    CHECK(mf_tokenizer_encode(mf_model_tokenizer(a.m), full, strlen(full), MF_TOK_PARSE_SPECIAL, &ids, &n) == MF_OK);
    mf_batch bt = {.n_tokens = (int32_t)n, .tokens = ids};
    CHECK(mf_context_decode(a.c, &bt) == MF_OK);
    sink sa = {0}, sb = {0};
    mf_conv_stats st, st_b;
    CHECK(mf_conv_say(a.cv, "And 3+3?", emit, &sa, &st) == MF_OK);
    CHECK(mf_conv_say(b.cv, "And 3+3?", emit, &sb, &st_b) == MF_OK);
    printf("qwen3 rewrite: cached %zu tokens with the thinking, reused %d, prefilled %d (fresh: %d)\n", n, st.n_reused,
           st.n_prefilled, st_b.n_prefilled);
    CHECK(st.n_reused > 5 && st.n_reused < (int32_t)n); /* cut back where the thinking was */
    CHECK(st_b.n_reused == 0);
    CHECKF(!strcmp(sa.buf, sb.buf), "'%s' vs '%s'", sa.buf, sb.buf);
    free(ids), free(full);
    /* the system prompt changes: everything after its first token is recomputed, same reply as fresh */
    rig_close(&a), rig_close(&b);
}

static void test_overflow(void) {
    rig r;
    if (!rig_open(&r, QWEN2, 160, 16)) return;
    CHECK(mf_conv_set_system(r.cv, "Be brief.") == MF_OK);
    int dropped = 0;
    for (int i = 0; i < 12; i++) {
        sink s = {0};
        mf_conv_stats st;
        CHECKF(mf_conv_say(r.cv, TURNS[i % 6], emit, &s, &st) == MF_OK, "turn %d: %s", i, mf_last_error());
        dropped += st.n_dropped;
        CHECK(st.n_prompt + 16 <= 160 || st.n_dropped == 0);
        CHECK(!strcmp(mf_conv_system(r.cv), "Be brief."));
    }
    printf("overflow: %d exchanges dropped over 12 turns in 160 tokens; %zu messages left\n", dropped,
           mf_conv_n_messages(r.cv));
    CHECK(dropped > 0);
    /* a message that cannot fit even alone: refused, nothing lost */
    const size_t before = mf_conv_n_messages(r.cv);
    char big[4000];
    for (size_t i = 0; i + 6 < sizeof big; i += 6) memcpy(big + i, "words ", 6);
    big[sizeof big - 1] = 0;
    sink s = {0};
    mf_conv_stats st;
    CHECK(mf_conv_say(r.cv, big, emit, &s, &st) == MF_ERR_RANGE && strstr(mf_last_error(), "context of 160"));
    CHECK(mf_conv_n_messages(r.cv) == before);
    CHECK(mf_conv_say(r.cv, "Still there?", emit, &s, &st) == MF_OK);
    rig_close(&r);
}

static void test_interrupt(void) {
    rig r;
    if (!rig_open(&r, QWEN2, 512, 40)) return;
    sink s = {.cancel = &cancel_flag, .cancel_after = 3};
    mf_conv_stats st;
    cancel_flag = 0;
    CHECK(mf_conv_say(r.cv, "Hello", emit, &s, &st) == MF_OK);
    cancel_flag = 0;
    CHECK(st.interrupted && st.n_generated == 3);
    const mf_conv_message *m = mf_conv_message_at(r.cv, 1);
    CHECK(m && !strcmp(m->role, "assistant") && m->interrupted && !strcmp(m->content, s.buf));
    sink s2 = {0};
    CHECK(mf_conv_say(r.cv, "Go on", emit, &s2, &st) == MF_OK && !st.interrupted);
    rig_close(&r);
}

static char path[256];

static void copy_file(const char *to, size_t cut, long flip) {
    FILE *f = fopen(path, "rb"), *g = fopen(to, "wb");
    static unsigned char buf[1 << 22];
    size_t n = fread(buf, 1, sizeof buf, f);
    if (cut) n = cut;
    if (flip >= 0) buf[flip] ^= 0x20;
    fwrite(buf, 1, n, g);
    fclose(f), fclose(g);
}

static long file_size(const char *p) {
    FILE *f = fopen(p, "rb");
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fclose(f);
    return n;
}

/* The turn after resuming from file `from` (in a fresh context). */
static void resume_turn(const char *from, const char *model, sink *out, mf_conv_stats *st, mf_conv_load_report *rep,
                        mf_status *parse) {
    rig r;
    memset(out, 0, sizeof *out);
    memset(st, 0, sizeof *st);
    if (!rig_open(&r, model, 1024, 20)) return;
    mf_conv_session *s = NULL;
    *parse = mf_conv_session_read(from, &s);
    if (!*parse) {
        CHECKF(mf_conv_load(r.cv, s, rep) == MF_OK, "%s", mf_last_error());
        CHECKF(mf_conv_say(r.cv, TURNS[2], emit, out, st) == MF_OK, "%s", mf_last_error());
    }
    mf_conv_session_free(s);
    rig_close(&r);
}

static void test_sessions(void) {
    snprintf(path, sizeof path, "/tmp/minfer-test-conv-%d.session", (int)getpid());
    /* uninterrupted: three turns */
    rig a;
    if (!rig_open(&a, QWEN2, 1024, 20)) return;
    sink s[3] = {0};
    mf_conv_stats st[3];
    for (int i = 0; i < 3; i++) {
        if (i == 2) CHECKF(mf_conv_save(a.cv, path) == MF_OK, "%s", mf_last_error());
        CHECK(mf_conv_say(a.cv, TURNS[i], emit, &s[i], &st[i]) == MF_OK);
    }
    rig_close(&a);

    sink out;
    mf_conv_stats rs;
    mf_conv_load_report rep;
    mf_status ps;
    resume_turn(path, QWEN2, &out, &rs, &rep, &ps);
    printf("resume: '%s' (%d prefilled; uninterrupted %d), note '%s'\n", out.buf, rs.n_prefilled, st[2].n_prefilled, rep.note);
    CHECK(ps == MF_OK && rep.cache_restored && rep.sampler_restored && rep.n_recomputed == 0 && !rep.note[0]);
    CHECKF(!strcmp(out.buf, s[2].buf), "'%s' vs '%s'", out.buf, s[2].buf);
    CHECK(rs.n_prefilled == st[2].n_prefilled && rs.n_reused == st[2].n_reused);

    /* damaged KV cells: recomputed from the saved token ids, still exactly the same */
    const long size = file_size(path);
    char bad[300];
    snprintf(bad, sizeof bad, "%s.bad", path);
    copy_file(bad, 0, size - 100);
    resume_turn(bad, QWEN2, &out, &rs, &rep, &ps);
    CHECKF(ps == MF_OK && !rep.cache_restored && rep.n_recomputed > 0 && strstr(rep.note, "recomputed"), "%s", rep.note);
    CHECK(!strcmp(out.buf, s[2].buf));
    /* truncated inside the KV cells: the same */
    copy_file(bad, (size_t)size - 1000, -1);
    resume_turn(bad, QWEN2, &out, &rs, &rep, &ps);
    CHECKF(ps == MF_OK && !rep.cache_restored && rep.n_recomputed > 0, "%s", rep.note);
    CHECK(!strcmp(out.buf, s[2].buf));
    /* cut inside the messages, a damaged header, not a session at all: refused with a reason */
    copy_file(bad, 100, -1);
    resume_turn(bad, QWEN2, &out, &rs, &rep, &ps);
    CHECKF(ps == MF_ERR_FORMAT && strstr(mf_last_error(), "messages"), "%s", mf_last_error());
    copy_file(bad, 0, 20);
    resume_turn(bad, QWEN2, &out, &rs, &rep, &ps);
    CHECK(ps == MF_ERR_FORMAT && strstr(mf_last_error(), "header"));
    copy_file(bad, 0, 100); /* inside META or CONV */
    resume_turn(bad, QWEN2, &out, &rs, &rep, &ps);
    CHECK(ps == MF_OK || (ps == MF_ERR_FORMAT && strstr(mf_last_error(), "messages")));
    resume_turn(fixture(QWEN2), QWEN2, &out, &rs, &rep, &ps);
    CHECK(ps == MF_ERR_FORMAT && strstr(mf_last_error(), "not a minfer chat session"));
    resume_turn("/nonexistent/x.session", QWEN2, &out, &rs, &rep, &ps);
    CHECK(ps == MF_ERR_NOT_FOUND);
    /* another model: the messages carry over, the context is rebuilt */
    resume_turn(path, "models/mini-llama.Q8_0.gguf", &out, &rs, &rep, &ps);
    CHECKF(ps == MF_OK && !rep.cache_restored && strstr(rep.note, "another model"), "%s", rep.note);
    CHECK(rs.n_reused == 0 && rs.n_prefilled > 20 && out.n > 0);
    unlink(bad), unlink(path);
}

int main(void) {
    test_incremental();
    test_rewrite();
    test_overflow();
    test_interrupt();
    test_sessions();
    return test_summary("test_conv");
}
