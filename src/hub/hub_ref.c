/* hub_ref.c: model references taken apart (hf:ORG/REPO[:SEL], ollama:[HOST/][NS/]MODEL[:TAG]),
 * the names they may contain, and which files of a repository listing one model is: split parts
 * (-NNNNN-of-MMMMM.gguf) grouped, a quantization matched in the file names. */
#include "hub/hub_internal.h"

#include <ctype.h>
#include <stdlib.h>

static bool word_char(char c) { return isalnum((unsigned char)c) || c == '_'; }

static bool repo_part_ok(const char *s, size_t n) {
    if (n == 0 || n > 96 || !word_char(s[0]) || !word_char(s[n - 1])) return false;
    for (size_t i = 0; i < n; i++) {
        const char c = s[i];
        if (!(word_char(c) || c == '-' || c == '.')) return false;
        if ((c == '-' || c == '.') && s[i + 1] == c) return false; /* "--" and ".." */
    }
    return !(n >= 4 && !strncasecmp(s + n - 4, ".git", 4));
}

bool hub_valid_repo_id(const char *s) {
    const char *slash = strchr(s, '/');
    return slash && !strchr(slash + 1, '/') && repo_part_ok(s, (size_t)(slash - s)) && repo_part_ok(slash + 1, strlen(slash + 1));
}

/* A revision: a branch or tag name (may hold '/', as refs/pr/1), or a commit. It names a file
 * under refs/ of the cache, so it must be a safe relative path too. */
static bool rev_ok(const char *s) {
    if (!hub_safe_relpath(s) || strlen(s) > 200) return false;
    for (const char *c = s; *c; c++)
        if (*c == ':' || *c == '@' || *c == ' ' || *c == '~' || *c == '^' || *c == '?' || *c == '*' || *c == '[') return false;
    return true;
}

/* An Ollama name part: [A-Za-z0-9_][A-Za-z0-9_.-]*, at most max bytes (host parts may have ':'). */
static bool ollama_part_ok(const char *s, size_t max, bool host) {
    const size_t n = strlen(s);
    if (n == 0 || n > max || !(isalnum((unsigned char)s[0]) || s[0] == '_')) return false;
    for (size_t i = 0; i < n; i++) {
        const char c = s[i];
        if (!(isalnum((unsigned char)c) || c == '_' || c == '-' || c == '.' || (host && c == ':'))) return false;
    }
    return !strstr(s, "..");
}

/* Copy a part that must fit; false when it does not. */
static bool copy_part(char *dst, size_t size, const char *src) {
    const size_t n = strlen(src);
    if (n >= size) return false;
    memcpy(dst, src, n + 1);
    return true;
}

mf_status hub_ref_parse(const char *s, hub_ref *r) {
    memset(r, 0, sizeof *r);
    if (!strncmp(s, "hf:", 3)) {
        r->kind = HUB_REF_HF;
        const char *p = s + 3, *colon = strchr(p, ':'), *at = strchr(p, '@');
        if (at && colon && at > colon) at = NULL; /* an '@' in the file name */
        const size_t n = at ? (size_t)(at - p) : colon ? (size_t)(colon - p) : strlen(p);
        if (n >= sizeof r->repo) return mf_fail(MF_ERR_ARG, "'%s': the repository name is too long", s);
        memcpy(r->repo, p, n);
        snprintf(r->rev, sizeof r->rev, "main");
        if (at) {
            const size_t k = colon ? (size_t)(colon - at - 1) : strlen(at + 1);
            if (k == 0 || k >= sizeof r->rev) return mf_fail(MF_ERR_ARG, "'%s': after '@' comes a revision (a branch, tag or commit)", s);
            memcpy(r->rev, at + 1, k);
            r->rev[k] = 0;
            r->rev_given = true;
            if (!rev_ok(r->rev))
                return mf_fail(MF_ERR_ARG, "'%s': '%s' is not a revision (a branch, tag or commit: no '..', ':', spaces)", s, r->rev);
        }
        if (!hub_valid_repo_id(r->repo))
            return mf_fail(MF_ERR_ARG, "'%s': '%s' is not a Hugging Face repository id (ORG/NAME: letters, digits, '_', '-', '.')", s,
                           r->repo);
        if (colon) {
            if (strlen(colon + 1) >= sizeof r->sel || !hub_safe_relpath(colon + 1))
                return mf_fail(MF_ERR_ARG, "'%s': after ':' comes a quantization (Q4_K_M) or a file of the repository", s);
            snprintf(r->sel, sizeof r->sel, "%s", colon + 1);
        }
        return MF_OK;
    }
    if (!strncmp(s, "ollama:", 7)) {
        r->kind = HUB_REF_OLLAMA;
        char buf[800];
        const char *name = s + 7;
        snprintf(r->scheme, sizeof r->scheme, "https");
        if (!strncmp(name, "http://", 7) || !strncmp(name, "https://", 8)) { /* as `ollama pull http://HOST/NS/MODEL` */
            snprintf(r->scheme, sizeof r->scheme, "%s", name[4] == 's' ? "https" : "http");
            name = strstr(name, "://") + 3;
            if (!strchr(name, '/')) return mf_fail(MF_ERR_ARG, "'%s': after %s:// come HOST/[NAMESPACE/]MODEL", s, r->scheme);
        }
        if (strlen(name) >= sizeof buf) return mf_fail(MF_ERR_ARG, "'%s': too long for an Ollama name", s);
        snprintf(buf, sizeof buf, "%s", name);
        char *parts[4];
        int np = 0;
        for (char *p = buf, *e; np < 4; p = e + 1) {
            parts[np++] = p;
            if (!(e = strchr(p, '/'))) break;
            *e = 0;
        }
        char *last = parts[np - 1], *tag = strrchr(last, ':');
        if (tag) *tag++ = 0;
        const bool host_first = np == 3 || (np == 2 && name != s + 7); /* after a scheme, a host comes first */
        const bool fits = copy_part(r->host, sizeof r->host, host_first ? parts[0] : "registry.ollama.ai") &&
                          copy_part(r->ns, sizeof r->ns, np == 3 || (np == 2 && !host_first) ? parts[np - 2] : "library") &&
                          copy_part(r->model, sizeof r->model, last) && copy_part(r->tag, sizeof r->tag, tag ? tag : "latest");
        if (!fits || np > 3 || strchr(last, '/') || !ollama_part_ok(r->host, 253, true) || !ollama_part_ok(r->ns, 80, false) ||
            !ollama_part_ok(r->model, 80, false) || !ollama_part_ok(r->tag, 128, false))
            return mf_fail(MF_ERR_ARG,
                           "'%s' is not an Ollama name: [HOST/][NAMESPACE/]MODEL[:TAG] of letters, digits, '_', '-', '.' "
                           "(e.g. ollama:llama3.2 or ollama:qwen2.5:0.5b)",
                           s);
        return MF_OK;
    }
    r->kind = HUB_REF_PATH;
    return MF_OK;
}

bool hub_split_part(const char *path, uint32_t *part, uint32_t *n_parts, size_t *base_len) {
    static const char tail[] = "-00000-of-00000.gguf";
    const size_t n = strlen(path), k = sizeof tail - 1;
    *part = *n_parts = 1;
    if (base_len) *base_len = n >= 5 && !strcasecmp(path + n - 5, ".gguf") ? n - 5 : n;
    if (n <= k) return false;
    const char *t = path + n - k;
    for (size_t i = 0; i < k; i++) {
        const bool digit = tail[i] == '0';
        if (digit ? !isdigit((unsigned char)t[i]) : tolower((unsigned char)t[i]) != tail[i]) return false;
    }
    const uint32_t p = (uint32_t)strtoul(t + 1, NULL, 10), c = (uint32_t)strtoul(t + 10, NULL, 10);
    if (p < 1 || c < 1 || p > c) return false;
    *part = p;
    *n_parts = c;
    if (base_len) *base_len = n - k;
    return true;
}

/* The quantizations llama.cpp names files by, longer names first where one is the other's prefix. */
static const char *const quant_names[] = {
    "Q2_K_S", "Q2_K_L", "Q2_K", "Q3_K_S", "Q3_K_M", "Q3_K_L", "Q3_K_XL", "Q3_K", "Q4_K_S", "Q4_K_M", "Q4_K_L", "Q4_K_XL",
    "Q4_K",   "Q5_K_S", "Q5_K_M", "Q5_K_L", "Q5_K_XL", "Q5_K", "Q6_K_L", "Q6_K_XL", "Q6_K", "Q4_0_4_4", "Q4_0_4_8",
    "Q4_0_8_8", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q8_K_XL", "IQ1_S", "IQ1_M", "IQ2_XXS", "IQ2_XS", "IQ2_S",
    "IQ2_M",  "IQ3_XXS", "IQ3_XS", "IQ3_S", "IQ3_M", "IQ4_NL", "IQ4_XS", "TQ1_0", "TQ2_0", "MXFP4", "BF16", "F16", "F32",
};

static bool is_sep(char c) { return c == '-' || c == '.' || c == '_' || c == '/'; }

void hub_quant_of_name(const char *name, char *out, size_t size) {
    out[0] = 0;
    uint32_t part, n_parts;
    size_t base;
    hub_split_part(name, &part, &n_parts, &base);
    size_t best_at = 0, best_len = 0;
    const char *best = NULL;
    for (size_t q = 0; q < MF_ARRAY_LEN(quant_names); q++) {
        const size_t k = strlen(quant_names[q]);
        for (size_t i = 0; i + k <= base; i++) {
            if (strncasecmp(name + i, quant_names[q], k) || (i > 0 && !is_sep(name[i - 1])) ||
                (i + k < base && !is_sep(name[i + k])))
                continue;
            if (!best || i > best_at || (i == best_at && k > best_len)) best = quant_names[q], best_at = i, best_len = k;
        }
    }
    if (best) snprintf(out, size, "%s", best);
}

void hub_files_free(hub_file *f, size_t n) {
    for (size_t i = 0; f && i < n; i++) {
        free(f[i].path);
        free(f[i].oid);
    }
    free(f);
}

/* Groups of a listing: one per model, keyed by the path without its split suffix. */
typedef struct group {
    size_t first;   /* index of a file of the group (its key) */
    size_t key_len; /* path bytes that name the group */
    uint32_t n_parts;
    bool aux;       /* mmproj / imatrix: not a model to run */
} group;

static bool contains_ci(const char *s, const char *w) {
    for (; *s; s++)
        if (!strncasecmp(s, w, strlen(w))) return true;
    return false;
}

static bool same_group(const hub_file *files, const group *g, size_t i) {
    uint32_t part, n;
    size_t len;
    hub_split_part(files[i].path, &part, &n, &len);
    return len == g->key_len && n == g->n_parts && !strncmp(files[i].path, files[g->first].path, len);
}

/* How the error messages suggest a group: its quantization where that names it alone. */
static void suggestion(const hub_file *files, const group *gs, size_t n_g, size_t g, char *out, size_t size) {
    char q[32], q2[32];
    hub_quant_of_name(files[gs[g].first].path, q, sizeof q);
    bool unique = q[0] != 0;
    for (size_t j = 0; j < n_g && unique; j++) {
        hub_quant_of_name(files[gs[j].first].path, q2, sizeof q2);
        if (j != g && !strcasecmp(q, q2)) unique = false;
    }
    if (unique) snprintf(out, size, "%s", q);
    else snprintf(out, size, "%.*s%s", (int)gs[g].key_len, files[gs[g].first].path, gs[g].n_parts > 1 ? "-00001-of-N.gguf" : ".gguf");
}

static mf_status list_choices(const hub_file *files, const group *gs, size_t n_g, const bool *take, const char *what,
                              const char *lead) {
    char msg[2048];
    size_t n = (size_t)snprintf(msg, sizeof msg, "%s", lead);
    int shown = 0;
    for (size_t g = 0; g < n_g && n < sizeof msg - 200; g++) {
        if (take && !take[g]) continue;
        if (gs[g].aux) continue;
        char s[1100];
        suggestion(files, gs, n_g, g, s, sizeof s);
        n += (size_t)snprintf(msg + n, sizeof msg - n, "%s%s:%s", shown++ ? ", " : " ", what, s);
    }
    if (!shown) n += (size_t)snprintf(msg + n, sizeof msg - n, " (none)");
    return mf_fail(MF_ERR_NOT_FOUND, "%s", msg);
}

mf_status hub_select(const hub_file *files, size_t n_files, const char *sel, const char *what, size_t **idx, size_t *n) {
    *idx = NULL;
    *n = 0;
    group *gs = mf_calloc(n_files + 1, sizeof *gs);
    bool *take = mf_calloc(n_files + 1, 1);
    mf_status s = MF_OK;
    if (!gs || !take) {
        s = MF_ERR_NOMEM;
        goto out;
    }
    size_t n_g = 0;
    for (size_t i = 0; i < n_files; i++) {
        const char *p = files[i].path;
        const size_t len = strlen(p);
        if (files[i].dir || len < 5 || strcasecmp(p + len - 5, ".gguf")) continue;
        size_t g = 0;
        while (g < n_g && !same_group(files, &gs[g], i)) g++;
        if (g == n_g) {
            uint32_t part;
            hub_split_part(p, &part, &gs[g].n_parts, &gs[g].key_len);
            gs[g].first = i;
            const char *base = strrchr(p, '/') ? strrchr(p, '/') + 1 : p;
            gs[g].aux = contains_ci(base, "mmproj") || contains_ci(base, "imatrix");
            n_g++;
        }
    }
    size_t chosen = SIZE_MAX;
    char lead[1400];
    if (sel && *sel) {
        for (size_t i = 0; i < n_files && chosen == SIZE_MAX; i++) /* a file of the repository, by path */
            for (size_t g = 0; g < n_g; g++)
                if (!files[i].dir && !strcmp(files[i].path, sel) && same_group(files, &gs[g], i)) chosen = g;
        size_t hits = 0, k;
        uint32_t sp, sn;
        hub_split_part(sel, &sp, &sn, &k); /* a file name stands for its model: no .gguf, no split suffix */
        for (size_t g = 0; g < n_g && chosen == SIZE_MAX; g++) { /* a quantization, or the model's name */
            const size_t len = gs[g].key_len;
            const char *key = files[gs[g].first].path;
            const bool ends = k <= len && !strncasecmp(key + len - k, sel, k) && (k == len || is_sep(key[len - k - 1]));
            char q[32];
            hub_quant_of_name(key, q, sizeof q);
            if ((ends || (q[0] && !strcasecmp(q, sel))) && (!gs[g].aux || contains_ci(sel, "mmproj"))) {
                take[g] = true;
                hits++;
            }
        }
        if (chosen == SIZE_MAX && hits == 1)
            for (size_t g = 0; g < n_g; g++)
                if (take[g]) chosen = g;
        if (chosen == SIZE_MAX) {
            snprintf(lead, sizeof lead, hits ? "%s: '%s' matches several models; choose one:" : "%s: no file or quantization '%s'; the models are:",
                     what, sel);
            s = list_choices(files, gs, n_g, hits ? take : NULL, what, lead);
            goto out;
        }
    } else {
        size_t models = 0;
        for (size_t g = 0; g < n_g; g++)
            if (!gs[g].aux) models++, chosen = g;
        if (models != 1) {
            snprintf(lead, sizeof lead, models ? "%s holds %zu GGUF models; name one:" : "%s has no GGUF model", what, models);
            s = models ? list_choices(files, gs, n_g, NULL, what, lead) : mf_fail(MF_ERR_NOT_FOUND, "%s", lead);
            goto out;
        }
    }
    const group *g = &gs[chosen];
    if (!(*idx = mf_calloc(g->n_parts, sizeof **idx))) {
        s = MF_ERR_NOMEM;
        goto out;
    }
    for (size_t i = 0; i < g->n_parts; i++) (*idx)[i] = SIZE_MAX;
    for (size_t i = 0; i < n_files; i++) {
        if (files[i].dir || !same_group(files, g, i)) continue;
        uint32_t part, np;
        hub_split_part(files[i].path, &part, &np, NULL);
        (*idx)[part - 1] = i;
    }
    for (uint32_t p = 0; p < g->n_parts; p++)
        if ((*idx)[p] == SIZE_MAX) {
            s = mf_fail(MF_ERR_NOT_FOUND, "%s: part %u of %u of %.*s is missing", what, p + 1, g->n_parts, (int)g->key_len,
                        files[g->first].path);
            free(*idx);
            *idx = NULL;
            goto out;
        }
    *n = g->n_parts;
out:
    free(gs);
    free(take);
    return s;
}
