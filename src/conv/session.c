/* session.c: a conversation saved to a file and restored from it (see conv.h; docs/chat.md has the
 * format). The messages are the source of truth; the token ids, KV cells and sampler state beside
 * them are a cache that is used only when it is intact and was made for this model file, template
 * and KV type by this version of minfer. Every count, size and checksum (XXH3-64 from libxxhash) is
 * checked before use, and nothing is applied until the whole file has been read. */
#include "conv_impl.h"

#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <xxhash.h>

#define SESSION_MAGIC "MFCHAT\0"
#define SESSION_VERSION 1u
#define FILE_HEADER 32u
#define SECTION_HEADER 24u
#define MAX_SECTIONS 64u
#define MAX_MESSAGES 100000u
#define MAX_FILE (16ull << 30) /* a session is at most 16 GiB (the KV cells of a long context) */

/* The sections, in the order they are written (the small, precious ones first, so a file cut short
 * keeps its messages). */
enum { SEC_META, SEC_CONV, SEC_TOKS, SEC_SMPL, SEC_KVST, SEC_COUNT };
static const char sec_tags[SEC_COUNT][5] = {"META", "CONV", "TOKS", "SMPL", "KVST"};

typedef struct {
    const uint8_t *data;
    uint64_t size;
    bool present, ok;
} section;

struct mf_conv_session {
    uint8_t *image;
    size_t size;
    uint32_t version;
    section sec[SEC_COUNT];
    /* CONV */
    conv_msg *msgs;
    size_t n_msgs;
    char *settings_json; /* NULL when absent */
    int enable_thinking;
    /* META */
    bool meta_ok;
    char fingerprint[40], template_hash[40], kv_type[16], minfer[32];
    int32_t n_ctx;
    char problems[512];
};

static void put32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static void put64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static uint32_t get32(const uint8_t *p) {
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) v |= (uint32_t)p[i] << (8 * i);
    return v;
}
static uint64_t get64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

/* A section's checksum covers its header's first 16 bytes (tag, flags, size), through the seed, and
 * its payload: XXH3-64(payload, seed = XXH3-64(header[0..16))). */
static uint64_t section_hash(const uint8_t *head16, const uint8_t *data, uint64_t size) {
    return XXH3_64bits_withSeed(data, (size_t)size, XXH3_64bits(head16, 16));
}

/* 32 hex digits naming the template: XXH3-128 of its source, BOS and EOS texts, each with its NUL. */
static mf_status template_hash(const mf_chat_template *t, char out[40]) {
    const char *parts[3] = {mf_chat_template_source(t), mf_chat_template_bos(t), mf_chat_template_eos(t)};
    size_t len[3], total = 0;
    for (int i = 0; i < 3; i++) total += len[i] = strlen(parts[i]) + 1;
    char *buf = malloc(total), *w = buf;
    if (!buf) return MF_ERR_NOMEM;
    for (int i = 0; i < 3; i++) memcpy(w, parts[i], len[i]), w += len[i];
    XXH128_hash_t h = XXH3_128bits(buf, total);
    free(buf);
    snprintf(out, 40, "%016llx%016llx", (unsigned long long)h.high64, (unsigned long long)h.low64);
    return MF_OK;
}

static const char *kv_type_name(const mf_context *c) { return mf_context_kv_type(c) == MF_TYPE_F32 ? "f32" : "f16"; }

static void problem(mf_conv_session *s, const char *fmt, ...) {
    size_t n = strlen(s->problems);
    if (n + 3 >= sizeof s->problems) return;
    if (n) s->problems[n++] = ';', s->problems[n++] = ' ';
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->problems + n, sizeof s->problems - n, fmt, ap);
    va_end(ap);
}

/* ---- saving ---- */

static char *meta_json(mf_conv *cv) {
    mf_model_info mi;
    mf_model_get_info(cv->model, &mi);
    char th[40];
    if (template_hash(cv->tmpl, th)) return NULL;
    json_t *o = json_pack("{s:s, s:s, s:{s:s, s:s, s:s, s:I}, s:s, s:s, s:i, s:s, s:I}", "format",
                          "minfer chat session", "minfer", MINFER_VERSION, "model", "fingerprint",
                          mf_model_fingerprint(cv->model), "name", mi.name ? mi.name : "", "arch", mi.arch,
                          "file_size", (json_int_t)mi.file_size, "template", th, "kv_type", kv_type_name(cv->ctx),
                          "n_ctx", (int)cv->n_ctx, "kernels", mf_isa_kernels_name(mf_context_isa(cv->ctx)),
                          "saved_at", (json_int_t)time(NULL));
    char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    return text;
}

static char *conv_json(mf_conv *cv, mf_status *st) {
    *st = MF_OK;
    char *settings = NULL;
    if ((*st = mf_sample_settings_to_json(&cv->settings, &settings))) return NULL;
    json_t *set = json_loads(settings, 0, NULL), *msgs = json_array();
    free(settings);
    json_t *o = json_object();
    int bad = !set || !msgs || !o;
    bad |= o ? json_object_set_new(o, "messages", msgs) : -1;
    bad |= o ? json_object_set_new(o, "settings", set) : -1;
    bad |= o ? json_object_set_new(o, "enable_thinking", json_integer(cv->p.enable_thinking)) : -1;
    for (size_t i = 0; !bad && i < cv->n_msgs; i++) {
        json_t *m = json_pack("{s:s, s:s}", "role", cv->msgs[i].role, "content", cv->msgs[i].content);
        if (m && cv->msgs[i].interrupted) json_object_set_new(m, "interrupted", json_true());
        bad |= json_array_append_new(msgs, m);
    }
    char *text = bad ? NULL : json_dumps(o, JSON_COMPACT);
    json_decref(o);
    if (!text) *st = MF_ERR_NOMEM;
    return text;
}

typedef struct {
    const void *data;
    uint64_t size;
} blob;

mf_status mf_conv_save(mf_conv *cv, const char *path) {
    mf_status st = MF_OK;
    char *meta = meta_json(cv), *conv = meta ? conv_json(cv, &st) : NULL;
    if (!meta) st = MF_ERR_NOMEM;
    const int32_t seq = cv->p.seq;
    /* the cache's tokens, sampler state and KV cells */
    const int32_t n_tok = mf_context_seq_tokens(cv->ctx, seq, NULL, NULL, 0);
    uint8_t *toks = !st ? malloc((size_t)n_tok * 4 + 1) : NULL;
    if (!st && !toks) st = MF_ERR_NOMEM;
    if (!st) {
        mf_context_seq_tokens(cv->ctx, seq, cv->toks, NULL, cv->n_ctx);
        for (int32_t i = 0; i < n_tok; i++) put32(toks + 4 * i, (uint32_t)cv->toks[i]);
    }
    const mf_sampler *smp = mf_gen_sampler(cv->gen);
    size_t smpl_size = mf_sampler_state_size(smp), kv_size = 0, w;
    uint8_t *smpl = !st ? malloc(smpl_size) : NULL, *kv = NULL;
    if (!st) st = smpl ? mf_sampler_state_save(smp, smpl, smpl_size, &w) : MF_ERR_NOMEM;
    if (!st) st = mf_context_seq_state_size(cv->ctx, seq, &kv_size);
    if (!st && !(kv = malloc(kv_size))) st = MF_ERR_NOMEM;
    if (!st) st = mf_context_seq_state_save(cv->ctx, seq, kv, kv_size, &kv_size);

    mf_file_writer *fw = NULL;
    if (!st) {
        const blob b[SEC_COUNT] = {{meta, strlen(meta)}, {conv, strlen(conv)}, {toks, (uint64_t)n_tok * 4},
                                   {smpl, smpl_size}, {kv, kv_size}};
        uint64_t total = FILE_HEADER;
        for (int i = 0; i < SEC_COUNT; i++) total += SECTION_HEADER + b[i].size;
        uint8_t head[FILE_HEADER] = {0};
        memcpy(head, SESSION_MAGIC, 8);
        put32(head + 8, SESSION_VERSION);
        put32(head + 12, SEC_COUNT);
        put64(head + 16, total);
        put64(head + 24, XXH3_64bits(head, 24));
        st = mf_file_writer_open(path, &fw);
        if (!st) st = mf_file_writer_write(fw, head, sizeof head);
        for (int i = 0; i < SEC_COUNT && !st; i++) {
            uint8_t sh[SECTION_HEADER] = {0};
            memcpy(sh, sec_tags[i], 4);
            put64(sh + 8, b[i].size);
            put64(sh + 16, section_hash(sh, b[i].data, b[i].size));
            st = mf_file_writer_write(fw, sh, sizeof sh);
            if (!st && b[i].size) st = mf_file_writer_write(fw, b[i].data, (size_t)b[i].size);
        }
        if (!st) {
            st = mf_file_writer_commit(fw);
        } else {
            mf_file_writer_abort(fw);
        }
    }
    free(meta), free(conv), free(toks), free(smpl), free(kv);
    return st;
}

/* ---- reading ---- */

static mf_status parse_conv(mf_conv_session *s, const section *sec) {
    json_error_t err;
    json_t *o = json_loadb((const char *)sec->data, (size_t)sec->size, 0, &err);
    if (!o) return mf_set_error(MF_ERR_FORMAT, "session: the messages are not valid JSON (%s, line %d)", err.text, err.line);
    mf_status st = MF_OK;
    json_t *msgs = json_object_get(o, "messages"), *set = json_object_get(o, "settings"),
           *think = json_object_get(o, "enable_thinking");
    if (!json_is_array(msgs) || json_array_size(msgs) > MAX_MESSAGES) {
        st = mf_set_error(MF_ERR_FORMAT, "session: 'messages' is not an array of at most %u messages", MAX_MESSAGES);
        goto done;
    }
    s->n_msgs = json_array_size(msgs);
    s->msgs = calloc(s->n_msgs ? s->n_msgs : 1, sizeof *s->msgs);
    if (!s->msgs) {
        st = MF_ERR_NOMEM;
        goto done;
    }
    for (size_t i = 0; i < s->n_msgs && !st; i++) {
        json_t *m = json_array_get(msgs, i);
        const char *role = json_string_value(json_object_get(m, "role"));
        const char *content = json_string_value(json_object_get(m, "content"));
        json_t *intr = json_object_get(m, "interrupted");
        const bool known = role && (!strcmp(role, "user") || !strcmp(role, "assistant") || !strcmp(role, "system"));
        if (!json_is_object(m) || !known || !content || (intr && !json_is_boolean(intr)))
            st = mf_set_error(MF_ERR_FORMAT, "session: message %zu needs a role (system, user or assistant) and a "
                                             "content string", i);
        else if (!strcmp(role, "system") && i != 0)
            st = mf_set_error(MF_ERR_FORMAT, "session: message %zu is a system prompt, which only the first may be", i);
        else if (!(s->msgs[i].role = strdup(role)) || !(s->msgs[i].content = strdup(content)))
            st = MF_ERR_NOMEM;
        s->msgs[i].interrupted = json_is_true(intr);
    }
    if (!st && set && !json_is_null(set)) {
        if (!json_is_object(set)) st = mf_set_error(MF_ERR_FORMAT, "session: 'settings' is not an object");
        else if (!(s->settings_json = json_dumps(set, JSON_COMPACT))) st = MF_ERR_NOMEM;
    }
    s->enable_thinking = -1;
    if (!st && json_is_integer(think) && json_integer_value(think) >= -1 && json_integer_value(think) <= 1)
        s->enable_thinking = (int)json_integer_value(think);
done:
    json_decref(o);
    return st;
}

static void parse_meta(mf_conv_session *s, const section *sec) {
    json_t *o = json_loadb((const char *)sec->data, (size_t)sec->size, 0, NULL);
    const char *fp = json_string_value(json_object_get(json_object_get(o, "model"), "fingerprint"));
    const char *th = json_string_value(json_object_get(o, "template"));
    const char *kv = json_string_value(json_object_get(o, "kv_type"));
    const char *ver = json_string_value(json_object_get(o, "minfer"));
    json_t *n_ctx = json_object_get(o, "n_ctx");
    if (fp && th && kv && ver && json_is_integer(n_ctx) && json_integer_value(n_ctx) > 0 &&
        json_integer_value(n_ctx) <= (1 << 24)) {
        snprintf(s->fingerprint, sizeof s->fingerprint, "%s", fp);
        snprintf(s->template_hash, sizeof s->template_hash, "%s", th);
        snprintf(s->kv_type, sizeof s->kv_type, "%s", kv);
        snprintf(s->minfer, sizeof s->minfer, "%s", ver);
        s->n_ctx = (int32_t)json_integer_value(n_ctx);
        s->meta_ok = true;
    } else {
        problem(s, "its description of the model (META) is unreadable");
    }
    json_decref(o);
}

mf_status mf_conv_session_parse(const void *data, size_t size, mf_conv_session **out) {
    *out = NULL;
    const uint8_t *p = data;
    if (size < FILE_HEADER || memcmp(p, SESSION_MAGIC, 8) != 0)
        return mf_set_error(MF_ERR_FORMAT, "not a minfer chat session file (%zu bytes, no MFCHAT header)", size);
    if (get64(p + 24) != XXH3_64bits(p, 24))
        return mf_set_error(MF_ERR_FORMAT, "session: the file header is corrupted (checksum mismatch)");
    const uint32_t version = get32(p + 8), n_sec = get32(p + 12);
    const uint64_t total = get64(p + 16);
    if (version == 0) return mf_set_error(MF_ERR_FORMAT, "session: format version 0 is not valid");
    if (n_sec > MAX_SECTIONS) return mf_set_error(MF_ERR_FORMAT, "session: %u sections, at most %u", n_sec, MAX_SECTIONS);
    mf_conv_session *s = calloc(1, sizeof *s);
    if (!s || !(s->image = malloc(size ? size : 1))) {
        free(s);
        return MF_ERR_NOMEM;
    }
    memcpy(s->image, data, size);
    s->size = size;
    s->version = version;
    s->enable_thinking = -1;
    p = s->image;
    if (version > SESSION_VERSION)
        problem(s, "it was written by a newer minfer (session format %u; this one reads %u)", version, SESSION_VERSION);
    if (total != size)
        problem(s, "it is %zu bytes but says %llu (%s)", size, (unsigned long long)total,
                size < total ? "truncated" : "extra bytes at the end");
    /* walk the sections; the layout of the container is the same in every format version */
    uint64_t off = FILE_HEADER;
    bool cut = false; /* the walk stopped early: later sections cannot be found */
    for (uint32_t i = 0; i < n_sec && !cut; i++) {
        if (size - off < SECTION_HEADER) {
            problem(s, "it ends inside section %u of %u", i + 1, n_sec);
            cut = true;
            break;
        }
        const uint8_t *h = p + off;
        const uint64_t len = get64(h + 8);
        if (len > size - off - SECTION_HEADER) {
            problem(s, "section '%.4s' runs past the end of the file", (const char *)h);
            cut = true;
            break;
        }
        int k = -1;
        for (int j = 0; j < SEC_COUNT; j++)
            if (!memcmp(h, sec_tags[j], 4)) k = j;
        const bool intact = get64(h + 16) == section_hash(h, h + SECTION_HEADER, len);
        if (k >= 0 && s->sec[k].present) {
            problem(s, "section '%s' appears twice", sec_tags[k]);
        } else if (k >= 0) {
            s->sec[k] = (section){.data = h + SECTION_HEADER, .size = len, .present = true, .ok = intact};
            if (!intact) problem(s, "section '%s' is corrupted (checksum mismatch)", sec_tags[k]);
        }
        off += SECTION_HEADER + len;
    }
    mf_status st = MF_OK;
    if (!s->sec[SEC_CONV].ok)
        st = mf_set_error(MF_ERR_FORMAT, "session: the messages cannot be read: %s",
                          s->sec[SEC_CONV].present ? "section CONV is corrupted (checksum mismatch)"
                          : s->problems[0]           ? s->problems
                                                     : "the file has no CONV section");
    if (!st) st = parse_conv(s, &s->sec[SEC_CONV]);
    if (st) {
        mf_conv_session_free(s);
        return st;
    }
    if (s->sec[SEC_META].ok) parse_meta(s, &s->sec[SEC_META]);
    if (s->sec[SEC_TOKS].ok && s->sec[SEC_TOKS].size % 4) {
        s->sec[SEC_TOKS].ok = false;
        problem(s, "section 'TOKS' is not a whole number of token ids");
    }
    for (int k = 0; k < SEC_COUNT; k++)
        if (!s->sec[k].present && !cut && version <= SESSION_VERSION) problem(s, "section '%s' is missing", sec_tags[k]);
    *out = s;
    return MF_OK;
}

mf_status mf_conv_session_read(const char *path, mf_conv_session **out) {
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f)
        return mf_set_error(errno == ENOENT ? MF_ERR_NOT_FOUND : MF_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
    struct stat stt;
    if (fstat(fileno(f), &stt) != 0 || !S_ISREG(stt.st_mode)) {
        fclose(f);
        return mf_set_error(MF_ERR_IO, "'%s' is not a regular file", path);
    }
    if ((uint64_t)stt.st_size > MAX_FILE) {
        fclose(f);
        return mf_set_error(MF_ERR_RANGE, "'%s' is %lld bytes, more than a session can be", path, (long long)stt.st_size);
    }
    const size_t n = (size_t)stt.st_size;
    uint8_t *buf = malloc(n ? n : 1);
    size_t got = buf ? fread(buf, 1, n, f) : 0;
    const bool err = ferror(f);
    fclose(f);
    if (!buf) return MF_ERR_NOMEM;
    mf_status st = err || got != n ? mf_set_error(MF_ERR_IO, "reading '%s': got %zu of %zu bytes", path, got, n)
                                   : mf_conv_session_parse(buf, n, out);
    free(buf);
    if (st && st != MF_ERR_IO && st != MF_ERR_NOMEM) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", mf_last_error());
        mf_set_error(st, "'%s': %s", path, msg);
    }
    return st;
}

void mf_conv_session_free(mf_conv_session *s) {
    if (!s) return;
    for (size_t i = 0; s->msgs && i < s->n_msgs; i++) mf_conv_msg_free(&s->msgs[i]);
    free(s->msgs);
    free(s->settings_json);
    free(s->image);
    free(s);
}

int32_t mf_conv_session_n_ctx(const mf_conv_session *s) { return s->meta_ok ? s->n_ctx : 0; }
size_t mf_conv_session_n_messages(const mf_conv_session *s) { return s->n_msgs; }
const char *mf_conv_session_problems(const mf_conv_session *s) { return s->problems; }

/* ---- applying ---- */

static void note(mf_conv_load_report *r, const char *fmt, ...) {
    size_t n = strlen(r->note);
    if (n + 3 >= sizeof r->note) return;
    if (n) r->note[n++] = ';', r->note[n++] = ' ';
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->note + n, sizeof r->note - n, fmt, ap);
    va_end(ap);
}

/* Why the saved cache cannot be used with this conversation's model, template and context; NULL
 * when it can. */
static const char *foreign(const mf_conv *cv, const mf_conv_session *s, char *buf, size_t size) {
    char th[40] = "";
    template_hash(cv->tmpl, th); /* out of memory: "" matches no file, so the cache is rebuilt */
    if (s->version != SESSION_VERSION) snprintf(buf, size, "it is session format %u", s->version);
    else if (!s->meta_ok) snprintf(buf, size, "it does not say which model wrote it");
    else if (strcmp(s->fingerprint, mf_model_fingerprint(cv->model)))
        snprintf(buf, size, "it was saved with another model file (fingerprint %.12s..., this one %.12s...)",
                 s->fingerprint, mf_model_fingerprint(cv->model));
    else if (strcmp(s->template_hash, th)) snprintf(buf, size, "it was saved with another chat template");
    else if (strcmp(s->kv_type, kv_type_name(cv->ctx)))
        snprintf(buf, size, "its KV cache is %s, this one %s", s->kv_type, kv_type_name(cv->ctx));
    else if (strcmp(s->minfer, MINFER_VERSION))
        snprintf(buf, size, "it was written by minfer %s, this is %s", s->minfer, MINFER_VERSION);
    else return NULL;
    return buf;
}

mf_status mf_conv_load(mf_conv *cv, const mf_conv_session *s, mf_conv_load_report *rep) {
    mf_conv_load_report dummy;
    if (!rep) rep = &dummy;
    memset(rep, 0, sizeof *rep);
    /* everything into scratch first: the messages, the settings and a generator for them */
    conv_msg *msgs = calloc(s->n_msgs ? s->n_msgs : 1, sizeof *msgs);
    if (!msgs) return MF_ERR_NOMEM;
    mf_status st = MF_OK;
    for (size_t i = 0; i < s->n_msgs && !st; i++) {
        msgs[i].role = strdup(s->msgs[i].role);
        msgs[i].content = strdup(s->msgs[i].content);
        msgs[i].interrupted = s->msgs[i].interrupted;
        if (!msgs[i].role || !msgs[i].content) st = MF_ERR_NOMEM;
    }
    mf_sample_settings set;
    mf_sample_settings_init(&set);
    if (!st && s->settings_json && mf_sample_settings_from_json(&set, s->settings_json)) {
        note(rep, "its sampling settings are not valid here (%s): the current ones stay", mf_last_error());
        mf_sample_settings_free(&set);
        st = mf_sample_settings_copy(&set, &cv->settings);
    } else if (!st && !s->settings_json) {
        mf_sample_settings_free(&set);
        st = mf_sample_settings_copy(&set, &cv->settings);
    }
    mf_gen *gen = NULL;
    if (!st && (st = mf_conv_make_gen(cv, &set, &gen)) && s->settings_json) {
        /* settings this model cannot take (a logit bias by a text no token has): keep the current */
        note(rep, "its sampling settings do not fit this model (%s): the current ones stay", mf_last_error());
        mf_sample_settings_free(&set);
        st = mf_sample_settings_copy(&set, &cv->settings);
        if (!st) st = mf_conv_make_gen(cv, &set, &gen);
    }
    if (st) {
        for (size_t i = 0; i < s->n_msgs; i++) mf_conv_msg_free(&msgs[i]);
        free(msgs);
        mf_sample_settings_free(&set);
        mf_gen_free(gen);
        return st;
    }
    char why[256];
    const char *bad = foreign(cv, s, why, sizeof why);
    const section *smpl = &s->sec[SEC_SMPL], *kv = &s->sec[SEC_KVST], *tk = &s->sec[SEC_TOKS];
    if (!bad && smpl->ok) {
        rep->sampler_restored = mf_sampler_state_load(mf_gen_sampler(gen), smpl->data, (size_t)smpl->size) == MF_OK;
        if (!rep->sampler_restored) note(rep, "its sampler state is not usable (%s)", mf_last_error());
    } else if (!bad) {
        note(rep, "its sampler state is %s: the random stream starts again from the seed",
             smpl->present ? "corrupted" : "missing");
    }
    /* the cache: the saved cells, else the saved token ids prefilled again, else the next turn rebuilds */
    const int32_t seq = cv->p.seq;
    mf_context_seq_rm(cv->ctx, seq, 0, -1);
    const bool toks_fit = tk->ok && tk->size / 4 <= (uint64_t)cv->n_ctx;
    const int32_t n_tok = toks_fit ? (int32_t)(tk->size / 4) : 0;
    int32_t *ids = toks_fit ? malloc(((size_t)n_tok + 1) * sizeof *ids) : NULL;
    for (int32_t i = 0; ids && i < n_tok; i++) ids[i] = (int32_t)get32(tk->data + 4 * i);
    bool ids_ok = ids != NULL;
    for (int32_t i = 0; ids && i < n_tok; i++) ids_ok &= ids[i] >= 0 && ids[i] < cv->n_vocab;
    if (bad) {
        note(rep, "%s: the context is rebuilt from the messages", bad);
    } else if (kv->ok && mf_context_seq_state_load(cv->ctx, seq, kv->data, (size_t)kv->size) == MF_OK) {
        /* the cells must hold exactly the saved token ids at positions 0..n-1 */
        const int32_t n = mf_context_seq_tokens(cv->ctx, seq, cv->toks, NULL, cv->n_ctx);
        bool same = ids_ok && n == n_tok && (n == 0 || mf_context_seq_pos_max(cv->ctx, seq) == n - 1);
        for (int32_t i = 0; same && i < n; i++) same = cv->toks[i] == ids[i];
        rep->cache_restored = same;
        if (!same) {
            mf_context_seq_rm(cv->ctx, seq, 0, -1);
            note(rep, "its KV cells do not match its token ids");
        }
    } else if (kv->present) {
        note(rep, "its KV cells are not usable (%s)", kv->ok ? mf_last_error() : "corrupted");
    }
    if (!bad && !rep->cache_restored && ids_ok && n_tok > 0) {
        int32_t *seqs = seq ? malloc((size_t)n_tok * sizeof *seqs) : NULL;
        for (int32_t i = 0; seqs && i < n_tok; i++) seqs[i] = seq;
        mf_batch b = {.n_tokens = n_tok, .tokens = ids, .seq = seqs};
        if ((!seq || seqs) && mf_context_decode(cv->ctx, &b) == MF_OK) {
            rep->n_recomputed = n_tok;
            note(rep, "recomputed %d tokens from its token ids", n_tok);
        } else {
            mf_context_seq_rm(cv->ctx, seq, 0, -1);
            note(rep, "the context is rebuilt from the messages");
        }
        free(seqs);
    } else if (!bad && !rep->cache_restored && !ids_ok && s->n_msgs) {
        note(rep, "its token ids are not usable: the context is rebuilt from the messages");
    }
    free(ids);
    if (s->meta_ok && s->n_ctx != cv->n_ctx)
        note(rep, "it was saved with a context of %d tokens, this one has %d", s->n_ctx, cv->n_ctx);
    /* commit */
    mf_conv_take_messages(cv, msgs, s->n_msgs);
    mf_gen_free(cv->gen);
    cv->gen = gen;
    set.params.seed = mf_sampler_seed(mf_gen_sampler(gen));
    set.seed_given = true;
    mf_sample_settings_free(&cv->settings);
    cv->settings = set;
    cv->p.enable_thinking = s->enable_thinking;
    memset(&cv->last, 0, sizeof cv->last);
    return MF_OK;
}
