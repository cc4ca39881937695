/* fuzz_hub.c: libFuzzer target for what src/hub reads from servers and from its own state files:
 * the tree API's JSON (then a model chosen from it by a selector), Ollama manifests, Content-Range
 * values, the state file of a partial download, model references, and response header lines. The first byte picks the
 * parser; the rest is its input. Seeds: tests/data/fuzz/hub. */
#include "hub/hub_internal.h"

#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1 || size > 1 << 16) return 0;
    char *s = malloc(size);
    if (!s) return 0;
    memcpy(s, data + 1, size - 1);
    s[size - 1] = 0;
    const size_t n = size - 1;
    switch (data[0] % 5) {
    case 0: { /* a tree page, then the model its last line names */
        hub_file *f = NULL;
        size_t nf = 0, cap = 0, *idx = NULL, k = 0;
        const char *sel = strrchr(s, '\n') ? strrchr(s, '\n') + 1 : "";
        if (hub_hf_parse_tree(s, n, "fuzz", &f, &nf, &cap) == MF_OK && hub_select(f, nf, sel, "hf:o/r", &idx, &k) == MF_OK)
            for (size_t i = 0; i < k; i++) MF_ASSERT(idx[i] < nf);
        free(idx);
        hub_files_free(f, nf);
        break;
    }
    case 1: {
        hub_layer ls[HUB_MAX_LAYERS];
        int nl, model;
        if (hub_ollama_parse_manifest(s, n, "fuzz", ls, &nl, &model) == MF_OK) MF_ASSERT(model > 0 && model < nl);
        break;
    }
    case 2: {
        uint64_t a, b, t;
        if (hub_parse_content_range(s, &a, &b, &t)) MF_ASSERT(a <= b && b < t);
        break;
    }
    case 3: {
        static uint64_t done[4096];
        uint64_t chunk;
        uint32_t nc;
        char *copy = malloc(n + 1);
        if (copy) {
            memcpy(copy, s, n + 1);
            if (hub_parse_state(copy, n, 1000000, "0123456789012345678901234567890123456789012345678901234567890123", &chunk,
                                done, &nc))
                MF_ASSERT(nc <= 4096 && chunk >= 1);
            free(copy);
        }
        break;
    }
    default: {
        hub_ref r;
        if (hub_ref_parse(s, &r) == MF_OK && r.kind == HUB_REF_HF) MF_ASSERT(hub_valid_repo_id(r.repo) && hub_safe_relpath(r.rev));
        hub_headers hd; /* the same bytes as response header lines */
        hub_headers_reset(&hd);
        for (char *line = s, *e; line && *line; line = e ? e + 1 : NULL) {
            e = strchr(line, '\n');
            hub_header_cb(line, 1, e ? (size_t)(e - line + 1) : strlen(line), &hd);
        }
        MF_ASSERT(strlen(hd.etag) < sizeof hd.etag && strlen(hd.link_next) < sizeof hd.link_next &&
                  strlen(hd.location) < sizeof hd.location);
        char q[32];
        hub_quant_of_name(s, q, sizeof q);
        (void)hub_safe_relpath(s);
        break;
    }
    }
    free(s);
    return 0;
}
