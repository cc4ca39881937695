/* cmd_list.c: `minfer list [--json]`: the models in the Hugging Face cache and Ollama's models
 * folder, with the names a reference may use. */
#include "cli.h"

#include <jansson.h>

/* The file type a GGUF says it is (general.file_type, as llama-quantize names it); "" if unknown. */
static void gguf_type(const char *path, char *out, size_t size) {
    out[0] = 0;
    mf_gguf *g = NULL;
    uint32_t ft;
    if (mf_gguf_open(path, &g) == MF_OK && mf_gguf_get_u32(g, "general.file_type", &ft) == MF_OK) {
        char names[512];
        snprintf(names, sizeof names, "%s", mf_quant_ftype_names());
        for (char *t = strtok(names, " "); t; t = strtok(NULL, " ")) {
            const mf_quant_ftype *q = mf_quant_ftype_find(t);
            if (q && q->file_type == ft) {
                snprintf(out, size, "%s", q->name);
                break;
            }
        }
    }
    mf_gguf_free(g);
}

int cmd_list(int argc, char **argv) {
    bool json = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            printf("usage: minfer list [--json]\n"
                   "The cached models: name (what a reference may say), source, type, size, path. The caches are\n"
                   "Hugging Face's ($HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub) and Ollama's\n"
                   "($OLLAMA_MODELS, else ~/.ollama/models).\n");
            return 0;
        } else if (!strcmp(argv[i], "--json")) {
            json = true;
        } else {
            cli_error("list: unexpected argument '%s' (see minfer list --help)", argv[i]);
            return 2;
        }
    }
    mf_hub *h = cli_hub_open(0, true);
    if (!h) return 1;
    mf_hub_model *m = NULL;
    size_t n = 0;
    mf_status s = mf_hub_list(h, &m, &n);
    if (s != MF_OK) {
        cli_error_status(s, "list");
        mf_hub_free(h);
        return 1;
    }
    json_t *arr = json ? json_array() : NULL;
    size_t w_name = 4, w_src = 6;
    char (*types)[32] = calloc(n + 1, sizeof *types);
    char (*srcs)[300] = calloc(n + 1, sizeof *srcs);
    for (size_t i = 0; types && srcs && i < n; i++) {
        snprintf(types[i], sizeof types[i], "%s", m[i].type);
        if (!types[i][0]) gguf_type(m[i].path, types[i], sizeof types[i]);
        /* the source: hf:ORG/REPO, or ollama */
        const char *colon = !strcmp(m[i].source, "hf") ? strchr(m[i].ref + 3, ':') : NULL;
        snprintf(srcs[i], sizeof srcs[i], "%.*s", colon ? (int)(colon - m[i].ref) : (int)strlen(m[i].source),
                 colon ? m[i].ref : m[i].source);
        w_name = CLI_MAX(w_name, strlen(m[i].name));
        w_src = CLI_MAX(w_src, strlen(srcs[i]));
    }
    if (!json) printf("%-*s  %-*s  %-8s  %10s  %s\n", (int)w_name, "NAME", (int)w_src, "SOURCE", "TYPE", "SIZE", "PATH");
    for (size_t i = 0; types && srcs && i < n; i++) {
        if (json) {
            json_array_append_new(arr, json_pack("{s:s, s:s, s:s, s:s, s:s, s:I, s:i, s:s}", "name", m[i].name, "ref", m[i].ref,
                                                 "source", m[i].source, "repo", srcs[i], "type", types[i], "size",
                                                 (json_int_t)m[i].size, "parts", (int)m[i].n_parts, "path", m[i].path));
        } else {
            char size[32];
            snprintf(size, sizeof size, "%.1f MB", (double)m[i].size / 1e6);
            printf("%-*s  %-*s  %-8s  %10s  %s%s\n", (int)w_name, m[i].name, (int)w_src, srcs[i], types[i][0] ? types[i] : "-",
                   size, m[i].path, m[i].n_parts > 1 ? " (+ parts)" : "");
        }
    }
    if (json) {
        char *out = json_dumps(arr, JSON_INDENT(2));
        if (out) printf("%s\n", out);
        free(out);
        json_decref(arr);
    } else if (n == 0) {
        printf("(no models in %s or %s)\n", mf_hub_hf_cache_dir(h), mf_hub_ollama_dir(h));
    }
    free(types);
    free(srcs);
    mf_hub_models_free(m, n);
    mf_hub_free(h);
    return 0;
}
