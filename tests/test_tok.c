/* test_tok.c: the tokenizer against its references: llama.cpp's Qwen2 test vectors, 420 strings
 * encoded by Hugging Face tokenizers with the Qwen3 tokenizer.json (tests/data/tok/gen_cases.py)
 * under each supported pre-tokenizer, decode(encode(s)) == NFC(s), the Unicode normalization
 * conformance file, the end-of-generation set, error paths, the streaming decoder and linear time
 * on long runs. */
#include "test.h"
#include "tok/tokenizer.h"
#include "tok/unicode.h"

#include <jansson.h>
#include <stdlib.h>
#include <unistd.h>

static char tmpdir[64];

static mf_tokenizer *load_tok(const char *path) {
    mf_gguf *g = NULL;
    mf_tokenizer *t = NULL;
    mf_status s = mf_gguf_open(path, &g);
    CHECKF(s == MF_OK, "open %s: %s", path, mf_last_error());
    if (s) return NULL;
    s = mf_tokenizer_load(g, &t);
    CHECKF(s == MF_OK, "load %s: %s", path, mf_last_error());
    mf_gguf_free(g);
    return t;
}

/* Copy of the GGUF at src with tokenizer.ggml.pre set to pre (NULL: removed) and, if key is not
 * NULL, the integer key set to val, written to dst. */
static bool write_variant_kv(const char *src, const char *dst, const char *pre, const char *key, int32_t val) {
    mf_gguf *g = NULL;
    mf_gguf_writer *w = NULL;
    bool ok = mf_gguf_open(src, &g) == MF_OK && mf_gguf_writer_create(&w) == MF_OK;
    for (int64_t i = 0; ok && i < mf_gguf_n_kv(g); i++) {
        const mf_gguf_kv *kv = mf_gguf_kv_at(g, i);
        ok = mf_gguf_writer_set_value(w, kv->key, &kv->value) == MF_OK;
    }
    if (ok) ok = (pre ? mf_gguf_writer_set_str(w, "tokenizer.ggml.pre", pre)
                      : mf_gguf_writer_remove(w, "tokenizer.ggml.pre")) == MF_OK;
    if (ok && key) ok = mf_gguf_writer_set_i32(w, key, val) == MF_OK;
    if (ok) ok = mf_gguf_writer_begin(w, dst) == MF_OK && mf_gguf_writer_finish(w) == MF_OK;
    CHECKF(ok, "writing %s: %s", dst, mf_last_error());
    mf_gguf_writer_free(w);
    mf_gguf_free(g);
    return ok;
}

static bool valid_utf8(const void *p, size_t n) {
    json_t *j = json_stringn(p, n); /* jansson validates UTF-8 */
    json_decref(j);
    return j != NULL;
}

static bool write_variant(const char *src, const char *dst, const char *pre) {
    return write_variant_kv(src, dst, pre, NULL, 0);
}

static bool ids_equal(const int32_t *a, size_t na, const json_t *expected) {
    if (na != json_array_size(expected)) return false;
    for (size_t i = 0; i < na; i++)
        if (a[i] != json_integer_value(json_array_get(expected, i))) return false;
    return true;
}

static void print_ids(const char *what, const int32_t *a, size_t n) {
    fprintf(stderr, "  %s:", what);
    for (size_t i = 0; i < n && i < 40; i++) fprintf(stderr, " %d", a[i]);
    fprintf(stderr, n > 40 ? " ...\n" : "\n");
}

/* Every case of the JSON file, encoded with flags, must give the ids under key. */
static void check_cases(const mf_tokenizer *t, const json_t *cases, const char *key, unsigned flags, bool check_nfc) {
    size_t bad = 0, idx;
    json_t *c;
    json_array_foreach(cases, idx, c) {
        const json_t *js = json_object_get(c, "text");
        const char *text = json_string_value(js);
        size_t len = json_string_length(js);
        int32_t *ids = NULL;
        size_t n = 0;
        mf_status s = mf_tokenizer_encode(t, text, len, flags, &ids, &n);
        const json_t *exp = json_object_get(c, key);
        if (s || !ids_equal(ids, n, exp)) {
            if (bad++ < 5) {
                fprintf(stderr, "%s mismatch on case %zu (%.60s): %s\n", key, idx, text, s ? mf_last_error() : "");
                print_ids("got", ids, n);
            }
        } else if (check_nfc) {
            char *dec;
            size_t dlen;
            const json_t *jn = json_object_get(c, "nfc");
            s = mf_tokenizer_decode(t, ids, n, MF_TOK_DECODE_SPECIAL, &dec, &dlen);
            if (s || dlen != json_string_length(jn) || memcmp(dec, json_string_value(jn), dlen) != 0) {
                if (bad++ < 5) fprintf(stderr, "decode(encode(s)) != NFC(s) on case %zu (%.60s)\n", idx, text);
            }
            free(dec);
        }
        free(ids);
    }
    CHECKF(bad == 0, "%zu of %zu cases differ from Hugging Face (%s)", bad, json_array_size(cases), key);
    printf("%s: %zu cases checked\n", key, json_array_size(cases));
}

static void test_llama_cpp_vectors(const mf_tokenizer *t) {
    char *inp = NULL, *out = NULL;
    size_t ni = 0, no = 0;
    FILE *f = fopen(fixture("tokenizer-tests/ggml-vocab-qwen2.gguf.inp"), "rb");
    if (f) {
        inp = malloc(1 << 20);
        ni = fread(inp, 1, (1 << 20) - 1, f);
        inp[ni] = 0;
        fclose(f);
    }
    f = fopen(fixture("tokenizer-tests/ggml-vocab-qwen2.gguf.out"), "rb");
    if (f) {
        out = malloc(1 << 20);
        no = fread(out, 1, (1 << 20) - 1, f);
        out[no] = 0;
        fclose(f);
    }
    CHECK(inp && out);
    if (!inp || !out) return;
    const char *sep = "\n__ggml_vocab_test__\n";
    char *p = inp, *line = out;
    int n_cases = 0, bad = 0;
    while (*p || *line) {
        char *e = strstr(p, sep);
        size_t len = e ? (size_t)(e - p) : strlen(p);
        char *eol = strchr(line, '\n');
        if (eol) *eol = 0;
        int32_t *ids = NULL;
        size_t n = 0;
        CHECK(mf_tokenizer_encode(t, p, len, 0, &ids, &n) == MF_OK);
        /* Expected: whitespace-separated ids. */
        size_t k = 0;
        bool ok = true;
        for (char *q = line; *q;) {
            char *end;
            long v = strtol(q, &end, 10);
            if (end == q) break;
            ok = ok && k < n && ids[k] == v;
            k++;
            q = end;
        }
        if (!ok || k != n) {
            bad++;
            fprintf(stderr, "llama.cpp vector %d (%.*s) differs\n", n_cases, (int)MF_MIN(len, 40), p);
        }
        free(ids);
        n_cases++;
        if (!e) break;
        p = e + strlen(sep);
        line = eol ? eol + 1 : line + strlen(line);
    }
    CHECKF(bad == 0 && n_cases >= 40, "%d of %d llama.cpp vectors differ", bad, n_cases);
    printf("llama.cpp qwen2 vectors: %d checked\n", n_cases);
    free(inp);
    free(out);
}

static void test_specials(const mf_tokenizer *t) {
    CHECK(mf_tokenizer_n_vocab(t) == 151936);
    CHECK(!strcmp(mf_tokenizer_pre(t), "qwen2"));
    CHECK(mf_tokenizer_bos(t) == 151643 && mf_tokenizer_eos(t) == 151645 && mf_tokenizer_pad(t) == 151643);
    CHECK(mf_tokenizer_eot(t) == 151645); /* <|im_end|> by text */
    CHECK(!mf_tokenizer_add_bos(t) && !mf_tokenizer_add_eos(t));
    size_t n;
    const int32_t *eog = mf_tokenizer_eog_ids(t, &n);
    /* <|endoftext|>, <|im_end|>, <|fim_pad|>, <|repo_name|>, <|file_sep|>, as llama.cpp derives them. */
    static const int32_t want[] = {151643, 151645, 151662, 151663, 151664};
    CHECKF(n == 5 && !memcmp(eog, want, sizeof want), "eog set has %zu ids", n);
    CHECK(mf_tokenizer_is_eog(t, 151645) && !mf_tokenizer_is_eog(t, 151644) && !mf_tokenizer_is_eog(t, -1));
    CHECK(mf_tokenizer_is_control(t, 151644) && !mf_tokenizer_is_control(t, 151667) && !mf_tokenizer_is_control(t, 100));
    CHECK(mf_tokenizer_token_type(t, 151667) == MF_TOKEN_USER_DEFINED);
    CHECK(mf_tokenizer_token_type(t, 151936) == MF_TOKEN_UNDEFINED);
    CHECK(!strcmp(mf_tokenizer_piece(t, 21927), "ĠHello") && mf_tokenizer_piece(t, 999999) == NULL);
    CHECK(mf_tokenizer_find(t, "ĠHello", strlen("ĠHello")) == 21927);
    const uint8_t *b;
    size_t len;
    CHECK(mf_tokenizer_token_to_bytes(t, 21927, 0, &b, &len) == MF_OK && len == 6 && !memcmp(b, " Hello", 6));
    CHECK(mf_tokenizer_token_to_bytes(t, 151644, 0, &b, &len) == MF_OK && len == 0);
    CHECK(mf_tokenizer_token_to_bytes(t, 151644, MF_TOK_DECODE_SPECIAL, &b, &len) == MF_OK && len == 12);
    CHECK(mf_tokenizer_token_to_bytes(t, 151667, 0, &b, &len) == MF_OK && len == 7); /* <think> always shown */
    CHECK(mf_tokenizer_token_to_bytes(t, -3, 0, &b, &len) == MF_ERR_RANGE && strstr(mf_last_error(), "-3"));
    /* Caller-buffer variant: too small reports the full count. */
    int32_t buf[2];
    size_t nn;
    CHECK(mf_tokenizer_encode_into(t, "Hello world again", 17, 0, buf, 2, &nn) == MF_ERR_RANGE && nn == 3 &&
          buf[0] == 9707);
    CHECK(mf_tokenizer_encode_into(t, "Hello world", 11, 0, buf, 2, &nn) == MF_OK && nn == 2 && buf[1] == 1879);
    int32_t *ids;
    CHECK(mf_tokenizer_encode(t, "", 0, MF_TOK_ADD_SPECIAL, &ids, &nn) == MF_OK && nn == 0 && ids == NULL);
}

/* Streaming: output is the decoded text in complete characters, whatever the token boundaries. */
static void test_stream(const mf_tokenizer *t) {
    const char *text = "Hé 🦙 中文 😶‍🌫️ done<|im_end|>";
    int32_t *ids;
    size_t n;
    CHECK(mf_tokenizer_encode(t, text, strlen(text), MF_TOK_PARSE_SPECIAL, &ids, &n) == MF_OK);
    mf_tok_stream *s;
    CHECK(mf_tok_stream_create(t, 0, &s) == MF_OK);
    char got[256] = {0};
    size_t gl = 0;
    bool partial_seen = false;
    for (size_t i = 0; i < n; i++) {
        const char *o;
        size_t l;
        CHECK(mf_tok_stream_push(s, ids[i], &o, &l) == MF_OK);
        const uint8_t *b;
        size_t bl;
        mf_tokenizer_token_to_bytes(t, ids[i], 0, &b, &bl);
        if (bl && !valid_utf8(b, bl)) partial_seen = true;
        CHECKF(l == 0 || valid_utf8(o, l), "stream emitted invalid UTF-8 at token %zu", i);
        memcpy(got + gl, o, l);
        gl += l;
    }
    const char *o;
    size_t l;
    CHECK(mf_tok_stream_flush(s, &o, &l) == MF_OK && l == 0);
    const char *want = "Hé 🦙 中文 😶‍🌫️ done";
    CHECKF(gl == strlen(want) && !memcmp(got, want, gl), "stream gave '%.*s'", (int)gl, got);
    CHECK(partial_seen); /* the text really has tokens that end inside a character */

    /* Stop strings: "END" split across tokens is held back, and the text before it is released. */
    const char *stops[] = {"END", "\n\n"};
    CHECK(mf_tok_stream_set_stops(s, stops, 2) == MF_OK);
    mf_tok_stream_reset(s);
    const char *t2 = "abc EN";
    free(ids);
    CHECK(mf_tokenizer_encode(t, t2, strlen(t2), 0, &ids, &n) == MF_OK);
    gl = 0;
    for (size_t i = 0; i < n; i++) {
        CHECK(mf_tok_stream_push(s, ids[i], &o, &l) == MF_OK);
        memcpy(got + gl, o, l);
        gl += l;
    }
    CHECKF(gl == 4 && !memcmp(got, "abc ", 4), "held back wrong: '%.*s'", (int)gl, got);
    CHECK(mf_tok_stream_stopped(s) == -1);
    int32_t d_id = mf_tokenizer_find(t, "D", 1), x_id = mf_tokenizer_find(t, "x", 1);
    CHECK(mf_tok_stream_push(s, d_id, &o, &l) == MF_OK && l == 0 && mf_tok_stream_stopped(s) == 0);
    CHECK(mf_tok_stream_push(s, x_id, &o, &l) == MF_OK && l == 0);
    /* A false start is released once it cannot be a stop string any more. */
    mf_tok_stream_reset(s);
    free(ids);
    CHECK(mf_tokenizer_encode(t, "x EN", 4, 0, &ids, &n) == MF_OK);
    gl = 0;
    for (size_t i = 0; i < n; i++) {
        mf_tok_stream_push(s, ids[i], &o, &l);
        memcpy(got + gl, o, l);
        gl += l;
    }
    mf_tok_stream_push(s, x_id, &o, &l);
    memcpy(got + gl, o, l);
    gl += l;
    CHECKF(gl == 5 && !memcmp(got, "x ENx", 5), "false start: '%.*s'", (int)gl, got);
    /* An incomplete character at the end is flushed as U+FFFD. */
    mf_tok_stream_reset(s);
    int32_t half = mf_tokenizer_find(t, "ðŁ", strlen("ðŁ")); /* bytes F0 9F: the start of an emoji */
    CHECK(half >= 0);
    CHECK(mf_tok_stream_push(s, half, &o, &l) == MF_OK && l == 0);
    CHECK(mf_tok_stream_flush(s, &o, &l) == MF_OK && l == 3 && !memcmp(o, "\xEF\xBF\xBD", 3));
    mf_tok_stream_free(s);
    mf_tok_stream_free(NULL);
    free(ids);
}

/* Unicode tables and NFC against the conformance file (when the unicode-data package is there). */
static void test_unicode(void) {
    CHECK(mf_uc_flags('a') & MF_UC_LETTER && mf_uc_flags(0x4E2D) & MF_UC_LETTER && mf_uc_flags('7') & MF_UC_NUMBER);
    CHECK(mf_uc_flags(0x0663) & MF_UC_NUMBER && mf_uc_flags(0xB2) & MF_UC_NUMBER && mf_uc_flags(0x2167) & MF_UC_NUMBER);
    CHECK(mf_uc_flags(0x3000) & MF_UC_SPACE && mf_uc_flags(0x85) & MF_UC_SPACE && !(mf_uc_flags(0x200B) & MF_UC_SPACE));
    CHECK(mf_uc_flags(0x301) & MF_UC_MARK && !(mf_uc_flags(0x1F999) & (MF_UC_LETTER | MF_UC_NUMBER)));
    CHECK(mf_uc_ccc_of(0x301) == 230 && mf_uc_ccc_of(0x323) == 220 && mf_uc_ccc_of('a') == 0);
    uint32_t cp;
    CHECK(mf_utf8_decode((const uint8_t *)"\xC0\x80", 2, &cp) == 1 && cp == MF_UC_INVALID); /* overlong */
    CHECK(mf_utf8_decode((const uint8_t *)"\xED\xA0\x80", 3, &cp) == 1 && cp == MF_UC_INVALID); /* surrogate */
    CHECK(mf_utf8_decode((const uint8_t *)"\xF0\x9F\xA6\x99", 4, &cp) == 4 && cp == 0x1F999);
    CHECK(mf_utf8_decode((const uint8_t *)"\xF0\x9F\xA6", 3, &cp) == 1 && cp == MF_UC_INVALID); /* truncated */

    FILE *f = popen("bzip2 -dc /usr/share/unicode/NormalizationTest.txt.bz2 2>/dev/null", "r");
    char line[1024];
    size_t n_lines = 0, bad = 0;
    uint8_t *out = NULL;
    size_t cap = 0;
    while (f && fgets(line, sizeof line, f)) {
        if (line[0] == '#' || line[0] == '@' || line[0] == '\n') continue;
        /* c1;c2;c3;c4;c5: NFC(c1) = NFC(c2) = NFC(c3) = c2. */
        uint8_t col[3][256];
        size_t cl[3] = {0};
        char *p = line;
        for (int c = 0; c < 3; c++) {
            while (*p && *p != ';') {
                char *end;
                unsigned long v = strtoul(p, &end, 16);
                if (end == p) {
                    p++;
                    continue;
                }
                cl[c] += mf_utf8_encode((uint32_t)v, col[c] + cl[c]);
                p = end;
            }
            if (*p == ';') p++;
        }
        n_lines++;
        for (int c = 0; c < 3; c += 2) {
            size_t ol;
            int src = c == 0 ? 0 : 2;
            if (mf_nfc(col[src], cl[src], &out, &cap, &ol) || ol != cl[1] || memcmp(out, col[1], ol)) {
                if (bad++ < 5) fprintf(stderr, "NFC conformance line differs: %s", line);
            }
        }
        if (mf_nfc_is_stable(col[1], cl[1])) {
            /* A string the quick check passes must already be NFC. */
            size_t ol;
            if (mf_nfc(col[1], cl[1], &out, &cap, &ol) || ol != cl[1] || memcmp(out, col[1], ol)) bad++;
        }
    }
    if (f) pclose(f);
    free(out);
    if (n_lines == 0) printf("NormalizationTest.txt.bz2 not readable (install unicode-data and bzip2): skipped\n");
    else printf("NFC conformance: %zu lines (Unicode %s)\n", n_lines, mf_unicode_version);
    CHECKF(bad == 0, "%zu NFC conformance failures", bad);
}

/* Hostile metadata: each mutation of vocab-qwen3.gguf must fail to load with the status and a
 * message naming the problem. */
enum { MUT_NO_TOKENS, MUT_MODEL, MUT_TYPE_RANGE, MUT_TYPE_SHORT, MUT_MERGE, MUT_DUPLICATE, MUT_COUNT, MUT_NO_BYTE };

static bool mutate(mf_gguf_writer *w, const mf_gguf *g, int mut) {
    const mf_gguf_kv *tokens = mf_gguf_find_kv(g, "tokenizer.ggml.tokens");
    const mf_gguf_kv *types = mf_gguf_find_kv(g, "tokenizer.ggml.token_type");
    const mf_gguf_kv *merges = mf_gguf_find_kv(g, "tokenizer.ggml.merges");
    mf_gguf_value v;
    bool ok = true;
    switch (mut) {
    case MUT_NO_TOKENS: return mf_gguf_writer_remove(w, "tokenizer.ggml.tokens") == MF_OK;
    case MUT_MODEL: return mf_gguf_writer_set_str(w, "tokenizer.ggml.model", "llama") == MF_OK;
    case MUT_TYPE_RANGE:
    case MUT_TYPE_SHORT: {
        v = types->value;
        int32_t *d = malloc(v.arr.n * 4);
        memcpy(d, v.arr.data, v.arr.n * 4);
        d[5] = 9;
        if (mut == MUT_TYPE_SHORT) d[5] = 1, v.arr.n -= 1;
        v.arr.data = d;
        ok = mf_gguf_writer_set_value(w, "tokenizer.ggml.token_type", &v) == MF_OK;
        free(d);
        return ok;
    }
    default: {
        const mf_gguf_kv *kv = mut == MUT_MERGE ? merges : tokens;
        v = kv->value;
        mf_str *strs = malloc(v.arr.n * sizeof *strs);
        memcpy(strs, v.arr.strs, v.arr.n * sizeof *strs);
        if (mut == MUT_MERGE) strs[3] = (mf_str){"nospace", 7};
        if (mut == MUT_DUPLICATE) strs[10] = strs[11];
        if (mut == MUT_NO_BYTE) strs[0] = (mf_str){"!?!?!", 5}; /* token 0 is the byte '!' */
        v.arr.strs = strs;
        ok = mf_gguf_writer_set_value(w, kv->key, &v) == MF_OK;
        free(strs);
        return ok;
    }
    }
}

static void test_hostile_metadata(void) {
    static const struct { mf_status st; const char *msg; } want[MUT_COUNT] = {
        {MF_ERR_NOT_FOUND, "tokenizer.ggml.tokens"}, {MF_ERR_UNSUPPORTED, "'llama'"},
        {MF_ERR_FORMAT, "token_type[5] = 9"},        {MF_ERR_FORMAT, "151935 entries"},
        {MF_ERR_FORMAT, "merges[3]"},                {MF_ERR_FORMAT, "duplicates token 10"},
    };
    char path[128];
    snprintf(path, sizeof path, "%s/hostile.gguf", tmpdir);
    for (int mut = 0; mut < MUT_COUNT; mut++) {
        mf_gguf *src = NULL, *g = NULL;
        mf_gguf_writer *w = NULL;
        bool ok = mf_gguf_open(fixture("models/vocab-qwen3.gguf"), &src) == MF_OK && mf_gguf_writer_create(&w) == MF_OK;
        for (int64_t i = 0; ok && i < mf_gguf_n_kv(src); i++) {
            const mf_gguf_kv *kv = mf_gguf_kv_at(src, i);
            ok = mf_gguf_writer_set_value(w, kv->key, &kv->value) == MF_OK;
        }
        ok = ok && mutate(w, src, mut) && mf_gguf_writer_begin(w, path) == MF_OK && mf_gguf_writer_finish(w) == MF_OK;
        CHECKF(ok, "writing mutation %d: %s", mut, mf_last_error());
        if (ok && mf_gguf_open(path, &g) == MF_OK) {
            mf_tokenizer *t = NULL;
            mf_status s = mf_tokenizer_load(g, &t);
            CHECKF(s == want[mut].st && t == NULL && strstr(mf_last_error(), want[mut].msg),
                   "mutation %d: status %d, message '%s'", mut, (int)s, mf_last_error());
            mf_tokenizer_free(t);
        }
        mf_gguf_free(g);
        mf_gguf_writer_free(w);
        mf_gguf_free(src);
        unlink(path);
    }
    /* A vocabulary without a token for some byte (SmolLM2 has such gaps) loads; the byte is skipped
     * and its neighbours merge across it, as in Hugging Face's BPE without an unknown token. */
    mf_gguf *src = NULL, *g = NULL;
    mf_gguf_writer *w = NULL;
    bool ok = mf_gguf_open(fixture("models/vocab-qwen3.gguf"), &src) == MF_OK && mf_gguf_writer_create(&w) == MF_OK;
    for (int64_t i = 0; ok && i < mf_gguf_n_kv(src); i++) {
        const mf_gguf_kv *kv = mf_gguf_kv_at(src, i);
        ok = mf_gguf_writer_set_value(w, kv->key, &kv->value) == MF_OK;
    }
    ok = ok && mutate(w, src, MUT_NO_BYTE) && mf_gguf_writer_begin(w, path) == MF_OK && mf_gguf_writer_finish(w) == MF_OK;
    mf_tokenizer *t = NULL;
    if (ok && mf_gguf_open(path, &g) == MF_OK && mf_tokenizer_load(g, &t) == MF_OK) {
        int32_t *ids;
        size_t n;
        CHECK(mf_tokenizer_encode(t, "!", 1, 0, &ids, &n) == MF_OK && n == 0);
        free(ids);
        /* "x!y" is the pieces "x", "!y": the second is "y" once '!' is gone. */
        CHECK(mf_tokenizer_encode(t, "x!y", 3, 0, &ids, &n) == MF_OK && n == 2 && ids[0] == 87 && ids[1] == 88);
        free(ids);
        /* Neighbours merge across the missing byte: the piece "=!=" becomes the token "==". */
        int32_t eqeq = mf_tokenizer_find(t, "==", 2);
        CHECK(eqeq >= 0 && mf_tokenizer_encode(t, "=!=", 3, 0, &ids, &n) == MF_OK && n == 1 && ids[0] == eqeq);
        free(ids);
    } else {
        CHECKF(false, "vocabulary without the byte '!': %s", mf_last_error());
    }
    mf_tokenizer_free(t);
    mf_gguf_free(g);
    mf_gguf_writer_free(w);
    mf_gguf_free(src);
    unlink(path);
}

static void test_errors(void) {
    char path[128];
    snprintf(path, sizeof path, "%s/badpre.gguf", tmpdir);
    mf_gguf *g = NULL;
    mf_tokenizer *t = NULL;
    if (write_variant(fixture("models/vocab-qwen3.gguf"), path, "no-such-pre") && mf_gguf_open(path, &g) == MF_OK) {
        mf_status s = mf_tokenizer_load(g, &t);
        CHECKF(s == MF_ERR_UNSUPPORTED && strstr(mf_last_error(), "no-such-pre"), "unknown pre: %s", mf_last_error());
        CHECK(t == NULL);
    }
    mf_gguf_free(g);
    g = NULL;
    if (write_variant_kv(fixture("models/vocab-qwen3.gguf"), path, "qwen2", "tokenizer.ggml.eos_token_id", 151936) &&
        mf_gguf_open(path, &g) == MF_OK) {
        mf_status s = mf_tokenizer_load(g, &t);
        CHECKF(s == MF_ERR_FORMAT && strstr(mf_last_error(), "151936") && strstr(mf_last_error(), "eos_token_id"),
               "eos out of range: %s", mf_last_error());
    }
    mf_gguf_free(g);
    g = NULL;
    /* -1 means "none". */
    if (write_variant_kv(fixture("models/vocab-qwen3.gguf"), path, "qwen2", "tokenizer.ggml.padding_token_id", -1) &&
        mf_gguf_open(path, &g) == MF_OK) {
        CHECK(mf_tokenizer_load(g, &t) == MF_OK && mf_tokenizer_pad(t) == MF_TOKEN_NULL);
        mf_tokenizer_free(t);
    }
    mf_gguf_free(g);
    unlink(path);
    mf_tokenizer_free(NULL);
}

/* Long runs must cost linear time: these would take seconds each if any step were quadratic. */
static void test_long_runs(const mf_tokenizer *t) {
    size_t n = getenv("MINFER_SANITIZED") ? 100000 : 1000000;
    char *buf = malloc(n);
    const char fills[] = {' ', '7', 'a', '\n', '!'};
    for (size_t k = 0; k < sizeof fills; k++) {
        memset(buf, fills[k], n);
        double t0 = mf_time_s();
        int32_t *ids;
        size_t m;
        CHECK(mf_tokenizer_encode(t, buf, n, 0, &ids, &m) == MF_OK && m > 0);
        char *dec;
        size_t dl;
        CHECK(mf_tokenizer_decode(t, ids, m, 0, &dec, &dl) == MF_OK && dl == n && !memcmp(dec, buf, n));
        double dt = mf_time_s() - t0;
        printf("run of %zu x '%c': %zu tokens in %.3f s\n", n, fills[k] == '\n' ? 'n' : fills[k], m, dt);
        CHECKF(dt < 5.0, "run of '%c' took %.2f s", fills[k], dt);
        free(ids);
        free(dec);
    }
    free(buf);
}

/* Arbitrary bytes (mostly invalid UTF-8) encode without error, decode to their NFC form exactly, and
 * stream as valid UTF-8 only. */
static void test_random_bytes(const mf_tokenizer *t) {
    uint64_t x = 0x9E3779B97F4A7C15ull;
    uint8_t text[96];
    uint8_t *norm = NULL;
    size_t cap = 0, bad = 0;
    mf_tok_stream *s;
    CHECK(mf_tok_stream_create(t, MF_TOK_DECODE_SPECIAL, &s) == MF_OK);
    for (int iter = 0; iter < 3000; iter++) {
        size_t n = (size_t)(iter % 96);
        for (size_t i = 0; i < n; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            /* Bias toward UTF-8 lead/continuation bytes, ASCII and '<' so every path is hit. */
            static const uint8_t pick[] = {'<', '|', ' ', 'a', '1', '\n', 0x80, 0xBF, 0xC3, 0xE4, 0xF0, 0x9F, 0xCC, 0x81};
            text[i] = (x >> 40) % 3 ? pick[(x >> 20) % sizeof pick] : (uint8_t)(x >> 8);
        }
        int32_t *ids;
        size_t m, nl;
        char *dec;
        size_t dl;
        if (mf_tokenizer_encode(t, (const char *)text, n, MF_TOK_PARSE_SPECIAL, &ids, &m) != MF_OK ||
            mf_tokenizer_decode(t, ids, m, MF_TOK_DECODE_SPECIAL, &dec, &dl) != MF_OK) {
            bad++;
            continue;
        }
        /* Text is normalized between special tokens, not across them; these inputs never put a mark
         * that composes with '>' right after one, so NFC of the whole is the same. */
        CHECK(mf_nfc(text, n, &norm, &cap, &nl) == MF_OK);
        if (dl != nl || memcmp(dec, norm, nl) != 0) bad++;
        mf_tok_stream_reset(s);
        for (size_t i = 0; i < m; i++) {
            const char *o;
            size_t l;
            if (mf_tok_stream_push(s, ids[i], &o, &l) != MF_OK || (l && !valid_utf8(o, l))) bad++;
        }
        const char *o;
        size_t l;
        if (mf_tok_stream_flush(s, &o, &l) != MF_OK || (l && !valid_utf8(o, l))) bad++;
        free(ids);
        free(dec);
    }
    CHECKF(bad == 0, "%zu random byte strings failed", bad);
    mf_tok_stream_free(s);
    free(norm);
}

/* mf_utf8_valid_len: the valid prefix, up to the first bad byte. */
static void test_utf8_valid_len(void) {
    static const struct {
        const char *s;
        size_t n, want;
    } c[] = {{"", 0, 0}, {"abc", 3, 3}, {"caf\xc3\xa9", 5, 5}, {"caf\xe9 x", 6, 3}, {"\xf0\x9f\x98\x80!", 5, 5},
             {"a\xf0\x9f\x98", 4, 1}, {"\xc0\xaf", 2, 0}, {"\xed\xa0\x80", 3, 0}, {"ok\xff", 3, 2},
             {"a\0b", 3, 3}};
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++)
        CHECKF(mf_utf8_valid_len(c[i].s, c[i].n) == c[i].want, "case %zu: %zu", i, mf_utf8_valid_len(c[i].s, c[i].n));
}

int main(void) {
    test_utf8_valid_len();
    snprintf(tmpdir, sizeof tmpdir, "/tmp/minfer-tok-XXXXXX");
    CHECK(mkdtemp(tmpdir) != NULL);
    test_unicode();

    mf_tokenizer *q3 = load_tok(fixture("models/vocab-qwen3.gguf"));
    mf_tokenizer *q25 = load_tok(fixture("models/vocab-qwen2.5.gguf"));
    char path[4096];
    const char *src = getenv("MINFER_SOURCE");
    snprintf(path, sizeof path, "%s/tests/data/tok/qwen3_cases.json", src ? src : ".");
    json_error_t err;
    json_t *cases = json_load_file(path, JSON_ALLOW_NUL, &err);
    CHECKF(cases && json_array_size(cases) >= 300, "%s: %s", path, err.text);
    if (q25) test_llama_cpp_vectors(q25);
    if (q3) {
        test_specials(q3);
        test_stream(q3);
        test_long_runs(q3);
        test_random_bytes(q3);
        if (cases) {
            check_cases(q3, cases, "ids", MF_TOK_PARSE_SPECIAL | MF_TOK_ADD_SPECIAL, true);
            check_cases(q3, cases, "ids_plain", 0, false);
        }
    }
    /* The other pre-tokenizers, on the same vocabulary. */
    static const char *const variants[][2] = {{"llama-bpe", "ids_llama3"}, {"gpt2", "ids_gpt2"}, {"smollm", "ids_smollm"}};
    for (size_t v = 0; cases && v < MF_ARRAY_LEN(variants); v++) {
        snprintf(path, sizeof path, "%s/%s.gguf", tmpdir, variants[v][0]);
        if (!write_variant(fixture("models/vocab-qwen3.gguf"), path, variants[v][0])) continue;
        mf_tokenizer *t = load_tok(path);
        if (t) {
            CHECK(!mf_tokenizer_add_bos(t)); /* llama-bpe would add BOS, but the file says false */
            check_cases(t, cases, variants[v][1], MF_TOK_PARSE_SPECIAL, false);
        }
        mf_tokenizer_free(t);
        unlink(path);
    }
    test_errors();
    test_hostile_metadata();
    json_decref(cases);
    mf_tokenizer_free(q3);
    mf_tokenizer_free(q25);
    rmdir(tmpdir);
    return test_summary("test_tok");
}
