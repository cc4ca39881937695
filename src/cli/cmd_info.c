/* cmd_info.c: `minfer info MODEL [--tensors] [--json]`: what a GGUF model is: architecture, size,
 * hyperparameters, tokenizer and special tokens, chat template, split parts, and optionally every
 * tensor. All facts are gathered once into a JSON object (jansson); text output prints from it. */
#include "cli.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

static void info_usage(FILE *f) {
    fprintf(f,
            "usage: minfer info MODEL [--tensors] [--json]\n"
            "  MODEL      a .gguf file (for a split model, its -00001-of-N part)\n"
            "  --tensors  list every tensor: name, shape, type, data offset, bytes\n"
            "  --json     print everything (tensors included) as one JSON object\n");
}

/* A JSON string from bytes that may not be UTF-8: invalid bytes become '?'. */
static json_t *jstr(const char *p, size_t n) {
    json_t *j = json_stringn(p, n);
    if (j) return j;
    char *copy = malloc(n + 1);
    if (!copy) return json_null();
    for (size_t i = 0; i < n; i++) copy[i] = (unsigned char)p[i] < 0x80 && p[i] ? p[i] : '?';
    j = json_stringn(copy, n);
    free(copy);
    return j ? j : json_null();
}

static const mf_gguf_kv *arch_kv(const mf_gguf *g, const char *arch, const char *suffix) {
    char key[256];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    return mf_gguf_find_kv(g, key);
}

static json_t *kv_number(const mf_gguf_kv *kv) {
    if (!kv) return NULL;
    const mf_gguf_value *v = &kv->value;
    switch (v->type) {
    case MF_GGUF_UINT8: case MF_GGUF_UINT16: case MF_GGUF_UINT32: case MF_GGUF_UINT64:
        return v->u64 <= (uint64_t)INT64_MAX ? json_integer((json_int_t)v->u64) : json_real((double)v->u64);
    case MF_GGUF_INT8: case MF_GGUF_INT16: case MF_GGUF_INT32: case MF_GGUF_INT64: return json_integer((json_int_t)v->i64);
    case MF_GGUF_FLOAT32: case MF_GGUF_FLOAT64: return json_real(v->f64);
    default: return NULL;
    }
}

static void set_opt(json_t *o, const char *name, json_t *v) {
    if (v) json_object_set_new(o, name, v);
}

static json_t *kv_string(const mf_gguf *g, const char *key) {
    const mf_gguf_kv *kv = mf_gguf_find_kv(g, key);
    return kv && kv->value.type == MF_GGUF_STRING ? jstr(kv->value.str.ptr, (size_t)kv->value.str.len) : NULL;
}

static const char *rope_mode(const char *arch) {
    static const char *const neox[] = {"qwen2", "qwen2moe", "qwen2vl", "qwen3", "qwen3moe", "phi2", "phi3", "gemma",
                                       "gemma2", "gemma3", "stablelm", "gptneox", "falcon", "starcoder2", "olmo2"};
    static const char *const normal[] = {"llama", "mistral", "granite", "deepseek", "deepseek2", "baichuan", "minicpm"};
    for (size_t i = 0; i < CLI_ARRAY_LEN(neox); i++)
        if (!strcmp(arch, neox[i])) return "neox";
    for (size_t i = 0; i < CLI_ARRAY_LEN(normal); i++)
        if (!strcmp(arch, normal[i])) return "normal";
    return "unknown";
}

static json_t *shape_json(const mf_gguf_tensor *t) {
    json_t *a = json_array();
    for (uint32_t d = 0; d < t->n_dims; d++) json_array_append_new(a, json_integer(t->ne[d]));
    return a;
}

static json_t *gather(const mf_gguf *g) {
    json_t *o = json_object();
    json_t *parts = json_array();
    for (uint32_t i = 0; i < mf_gguf_n_parts(g); i++) json_array_append_new(parts, json_string(mf_gguf_part_path(g, i)));
    json_object_set_new(o, "path", json_string(mf_gguf_part_path(g, 0)));
    json_object_set_new(o, "parts", parts);
    json_object_set_new(o, "gguf_version", json_integer(mf_gguf_version(g)));
    json_object_set_new(o, "file_size", json_integer((json_int_t)mf_gguf_file_size(g)));
    json_object_set_new(o, "alignment", json_integer(mf_gguf_alignment(g)));
    json_object_set_new(o, "metadata_count", json_integer(mf_gguf_n_kv(g)));

    const mf_gguf_kv *akv = mf_gguf_find_kv(g, "general.architecture");
    char arch[128] = "";
    if (akv && akv->value.type == MF_GGUF_STRING)
        snprintf(arch, sizeof arch, "%.*s", (int)CLI_MIN(akv->value.str.len, 127), akv->value.str.ptr);
    set_opt(o, "architecture", kv_string(g, "general.architecture"));
    set_opt(o, "name", kv_string(g, "general.name"));

    /* Parameters and tensor types. */
    int64_t n = mf_gguf_n_tensors(g);
    uint64_t params = 0, type_count[MF_TYPE_COUNT] = {0}, type_bytes[MF_TYPE_COUNT] = {0};
    json_t *tensors = json_array();
    for (int64_t i = 0; i < n; i++) {
        const mf_gguf_tensor *t = mf_gguf_tensor_at(g, i);
        params += (uint64_t)(t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3]);
        type_count[t->type]++;
        type_bytes[t->type] += t->nbytes;
        json_t *tj = json_object();
        json_object_set_new(tj, "name", json_string(t->name));
        json_object_set_new(tj, "shape", shape_json(t));
        json_object_set_new(tj, "type", json_string(mf_type_name(t->type)));
        json_object_set_new(tj, "offset", json_integer((json_int_t)t->offset));
        json_object_set_new(tj, "bytes", json_integer((json_int_t)t->nbytes));
        json_object_set_new(tj, "part", json_integer(t->part));
        json_array_append_new(tensors, tj);
    }
    json_t *types = json_object();
    for (int t = 0; t < MF_TYPE_COUNT; t++) {
        if (!type_count[t]) continue;
        json_t *tj = json_object();
        json_object_set_new(tj, "count", json_integer((json_int_t)type_count[t]));
        json_object_set_new(tj, "bytes", json_integer((json_int_t)type_bytes[t]));
        json_object_set_new(types, mf_type_name((uint32_t)t), tj);
    }
    json_object_set_new(o, "parameters", json_integer((json_int_t)params));
    json_object_set_new(o, "tensor_count", json_integer(n));
    json_object_set_new(o, "tensor_types", types);

    /* Hyperparameters under "<arch>.*". */
    json_t *hp = json_object();
    if (arch[0]) {
        set_opt(hp, "context_length", kv_number(arch_kv(g, arch, "context_length")));
        set_opt(hp, "embedding_length", kv_number(arch_kv(g, arch, "embedding_length")));
        set_opt(hp, "block_count", kv_number(arch_kv(g, arch, "block_count")));
        set_opt(hp, "head_count", kv_number(arch_kv(g, arch, "attention.head_count")));
        set_opt(hp, "head_count_kv", kv_number(arch_kv(g, arch, "attention.head_count_kv")));
        json_t *hs = kv_number(arch_kv(g, arch, "attention.key_length"));
        if (!hs) {
            json_t *e = json_object_get(hp, "embedding_length"), *h = json_object_get(hp, "head_count");
            if (json_is_integer(e) && json_is_integer(h) && json_integer_value(h) > 0)
                hs = json_integer(json_integer_value(e) / json_integer_value(h));
        }
        set_opt(hp, "head_size", hs);
        set_opt(hp, "feed_forward_length", kv_number(arch_kv(g, arch, "feed_forward_length")));
        json_t *base = kv_number(arch_kv(g, arch, "rope.freq_base"));
        set_opt(hp, "rope_freq_base", base ? base : json_real(10000.0));
        json_object_set_new(hp, "rope_mode", json_string(rope_mode(arch)));
        set_opt(hp, "rms_norm_eps", kv_number(arch_kv(g, arch, "attention.layer_norm_rms_epsilon")));
    }
    json_object_set_new(o, "hparams", hp);

    /* Tokenizer. */
    json_t *tok = json_object();
    const mf_gguf_kv *tkv = mf_gguf_find_kv(g, "tokenizer.ggml.tokens");
    const mf_gguf_value *toks = tkv && tkv->value.type == MF_GGUF_ARRAY && tkv->value.arr.type == MF_GGUF_STRING ? &tkv->value : NULL;
    if (toks) json_object_set_new(tok, "vocab_size", json_integer((json_int_t)toks->arr.n));
    set_opt(tok, "model", kv_string(g, "tokenizer.ggml.model"));
    set_opt(tok, "pre", kv_string(g, "tokenizer.ggml.pre"));
    static const char *const specials[][2] = {{"bos", "tokenizer.ggml.bos_token_id"}, {"eos", "tokenizer.ggml.eos_token_id"},
                                              {"eot", "tokenizer.ggml.eot_token_id"}, {"pad", "tokenizer.ggml.padding_token_id"},
                                              {"unk", "tokenizer.ggml.unknown_token_id"}};
    json_t *sp = json_object();
    for (size_t i = 0; i < CLI_ARRAY_LEN(specials); i++) {
        uint32_t id;
        const mf_gguf_kv *kv = mf_gguf_find_kv(g, specials[i][1]);
        if (!kv || mf_gguf_get_u32(g, specials[i][1], &id) != MF_OK) continue;
        json_t *sj = json_object();
        json_object_set_new(sj, "id", json_integer(id));
        if (toks && id < toks->arr.n) json_object_set_new(sj, "text", jstr(toks->arr.strs[id].ptr, (size_t)toks->arr.strs[id].len));
        json_object_set_new(sp, specials[i][0], sj);
    }
    json_object_set_new(tok, "special", sp);
    const mf_gguf_kv *ct = mf_gguf_find_kv(g, "tokenizer.chat_template");
    json_object_set_new(tok, "chat_template", json_boolean(ct && ct->value.type == MF_GGUF_STRING));
    if (ct && ct->value.type == MF_GGUF_STRING) json_object_set_new(tok, "chat_template_bytes", json_integer((json_int_t)ct->value.str.len));
    json_object_set_new(o, "tokenizer", tok);
    json_object_set_new(o, "tensors", tensors);
    return o;
}

static void human_bytes(char *buf, size_t n, double b) {
    const char *unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    while (b >= 1024 && u < 4) b /= 1024, u++;
    snprintf(buf, n, u ? "%.2f %s" : "%.0f %s", b, unit[u]);
}

static void print_field(const char *label, json_t *v) {
    printf("%-16s", label);
    if (json_is_integer(v)) printf("%lld\n", (long long)json_integer_value(v));
    else if (json_is_real(v)) printf("%g\n", json_real_value(v));
    else if (json_is_string(v)) printf("%s\n", json_string_value(v));
    else printf("-\n");
}

static void print_text(json_t *o, bool with_tensors) {
    char buf[64];
    print_field("file:", json_object_get(o, "path"));
    print_field("architecture:", json_object_get(o, "architecture"));
    print_field("name:", json_object_get(o, "name"));
    double params = (double)json_integer_value(json_object_get(o, "parameters"));
    printf("%-16s%.2f M (%lld)\n", "parameters:", params / 1e6, (long long)params);
    human_bytes(buf, sizeof buf, (double)json_integer_value(json_object_get(o, "file_size")));
    printf("%-16s%s (%lld bytes)\n", "file size:", buf, (long long)json_integer_value(json_object_get(o, "file_size")));
    printf("%-16s%lld (", "tensors:", (long long)json_integer_value(json_object_get(o, "tensor_count")));
    const char *k;
    json_t *v;
    bool first = true;
    json_object_foreach(json_object_get(o, "tensor_types"), k, v) {
        printf("%s%s: %lld", first ? "" : ", ", k, (long long)json_integer_value(json_object_get(v, "count")));
        first = false;
    }
    printf(")\n");
    json_t *hp = json_object_get(o, "hparams");
    print_field("context length:", json_object_get(hp, "context_length"));
    print_field("embedding:", json_object_get(hp, "embedding_length"));
    print_field("layers:", json_object_get(hp, "block_count"));
    print_field("heads:", json_object_get(hp, "head_count"));
    print_field("KV heads:", json_object_get(hp, "head_count_kv"));
    print_field("head size:", json_object_get(hp, "head_size"));
    print_field("FFN size:", json_object_get(hp, "feed_forward_length"));
    if (json_object_get(hp, "rope_mode"))
        printf("%-16sbase %.10g, mode %s\n", "RoPE:", json_number_value(json_object_get(hp, "rope_freq_base")),
               !strcmp(json_string_value(json_object_get(hp, "rope_mode")), "neox") ? "NEOX"
                                                                                    : json_string_value(json_object_get(hp, "rope_mode")));
    json_t *tok = json_object_get(o, "tokenizer");
    print_field("vocabulary:", json_object_get(tok, "vocab_size"));
    json_t *tm = json_object_get(tok, "model"), *tp = json_object_get(tok, "pre");
    printf("%-16s%s (pre: %s)\n", "tokenizer:", tm ? json_string_value(tm) : "-", tp ? json_string_value(tp) : "-");
    json_object_foreach(json_object_get(tok, "special"), k, v) {
        char label[32];
        snprintf(label, sizeof label, "%s token:", k);
        json_t *text = json_object_get(v, "text");
        printf("%-16s%lld", label, (long long)json_integer_value(json_object_get(v, "id")));
        if (json_is_string(text)) {
            fputs(" '", stdout);
            for (const char *p = json_string_value(text); *p; p++) {
                if ((unsigned char)*p < 0x20) printf("\\x%02X", (unsigned char)*p);
                else putchar(*p);
            }
            fputs("'", stdout);
        }
        putchar('\n');
    }
    json_t *ctb = json_object_get(tok, "chat_template_bytes");
    if (ctb) printf("%-16syes (%lld bytes)\n", "chat template:", (long long)json_integer_value(ctb));
    else printf("%-16sno\n", "chat template:");
    json_t *parts = json_object_get(o, "parts");
    printf("%-16s%zu\n", "split parts:", json_array_size(parts));
    if (json_array_size(parts) > 1) {
        size_t i;
        json_array_foreach(parts, i, v) printf("  %zu: %s\n", i + 1, json_string_value(v));
    }
    if (!with_tensors) return;
    printf("\n%-48s %-24s %-8s %12s %12s%s\n", "tensor", "shape", "type", "offset", "bytes", json_array_size(parts) > 1 ? "  part" : "");
    size_t i;
    json_array_foreach(json_object_get(o, "tensors"), i, v) {
        char shape[96] = "";
        size_t d;
        json_t *e;
        json_array_foreach(json_object_get(v, "shape"), d, e) {
            size_t len = strlen(shape);
            snprintf(shape + len, sizeof shape - len, "%s%lld", d ? " x " : "", (long long)json_integer_value(e));
        }
        printf("%-48s %-24s %-8s %12lld %12lld", json_string_value(json_object_get(v, "name")), shape,
               json_string_value(json_object_get(v, "type")), (long long)json_integer_value(json_object_get(v, "offset")),
               (long long)json_integer_value(json_object_get(v, "bytes")));
        if (json_array_size(parts) > 1) printf("  %lld", (long long)json_integer_value(json_object_get(v, "part")) + 1);
        putchar('\n');
    }
}

int cmd_info(int argc, char **argv) {
    const char *path = NULL;
    bool tensors = false, as_json = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            info_usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--tensors")) {
            tensors = true;
        } else if (!strcmp(argv[i], "--json")) {
            as_json = true;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            cli_error("info: unknown option '%s' (see minfer info --help)", argv[i]);
            return 2;
        } else if (path) {
            cli_error("info: more than one model given ('%s' and '%s')", path, argv[i]);
            return 2;
        } else {
            path = argv[i];
        }
    }
    if (!path) {
        info_usage(stderr);
        return 2;
    }
    if (!(path = cli_model(path))) return 1;
    mf_gguf *g = NULL;
    mf_status s = mf_gguf_open(path, &g);
    if (s != MF_OK) {
        cli_error("info: %s", mf_last_error()[0] ? mf_last_error() : mf_status_str(s));
        return 1;
    }
    json_t *o = gather(g);
    int rc = 0;
    if (as_json) {
        if (json_dumpf(o, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER) != 0) rc = 1;
        putchar('\n');
    } else {
        print_text(o, tensors);
    }
    json_decref(o);
    mf_gguf_free(g);
    if (fflush(stdout) != 0) {
        cli_error("info: cannot write the output");
        rc = 1;
    }
    return rc;
}
