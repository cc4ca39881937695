/* hub.c: the handle (settings from params or the environment), and what a reference resolves to:
 * hf:/ollama: go to their protocols, an existing file is itself, anything else is looked up among
 * the names of cached models (exact, then a unique prefix). Also list and remove. */
#include "hub/hub_internal.h"

#include <pthread.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc;
static void init_curl(void) { curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT); }

mf_hub_params mf_hub_default_params(void) { return (mf_hub_params){.connections = 4, .retry_delay_s = 1.0}; }

static const char *env(const char *name) {
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

void mf_hub_params_from_env(mf_hub_params *p) {
    p->hf_endpoint = env("HF_ENDPOINT");
    p->hf_token = env("HF_TOKEN") ? env("HF_TOKEN") : env("HUGGING_FACE_HUB_TOKEN"); /* the older name huggingface_hub reads */
    p->hf_token_path = env("HF_TOKEN_PATH");
    p->hf_hub_cache = env("HF_HUB_CACHE") ? env("HF_HUB_CACHE") : env("HUGGINGFACE_HUB_CACHE");
    p->hf_home = env("HF_HOME");
    p->xdg_cache_home = env("XDG_CACHE_HOME");
    p->home = env("HOME");
    const char *off = env("HF_HUB_OFFLINE");
    p->offline = off && (!strcasecmp(off, "1") || !strcasecmp(off, "on") || !strcasecmp(off, "yes") || !strcasecmp(off, "true"));
    p->ollama_registry = env("MINFER_OLLAMA_REGISTRY");
    p->ollama_models = env("OLLAMA_MODELS");
    p->ollama_system_models = env("MINFER_OLLAMA_SYSTEM_MODELS");
    const char *c = env("MINFER_PULL_CONNECTIONS");
    char *end;
    const long n = c ? strtol(c, &end, 10) : 0;
    if (c && !*end && n >= 1 && n <= 16) p->connections = (int)n;
}

/* The token of a token file: its first line, trimmed; NULL when there is none. */
static char *read_token(const char *path) {
    uint8_t *data;
    size_t len;
    if (!path || mf_read_file(path, 4096, &data, &len) != MF_OK) return NULL;
    char *s = (char *)data, *e = s + len;
    while (s < e && (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r')) s++;
    char *t = s;
    while (t < e && *t != '\n' && *t != '\r' && *t != ' ' && *t != '\t') t++;
    char *tok = t > s ? mf_strndup(s, (size_t)(t - s)) : NULL;
    free(data);
    return tok;
}

static void trim_slashes(char *u) {
    size_t n = u ? strlen(u) : 0;
    while (n > 8 && u[n - 1] == '/') u[--n] = 0;
}

mf_status mf_hub_open(const mf_hub_params *p, mf_hub **out) {
    *out = NULL;
    pthread_once(&curl_once, init_curl);
    if (curl_init_rc != CURLE_OK) return mf_fail(MF_ERR_INTERNAL, "libcurl: %s", curl_easy_strerror(curl_init_rc));
    if (p->connections < 1 || p->connections > 16)
        return mf_fail(MF_ERR_ARG, "connections: %d is not in 1..16", p->connections);
    const char *ep = p->hf_endpoint ? p->hf_endpoint : "https://huggingface.co";
    if (strncmp(ep, "http://", 7) && strncmp(ep, "https://", 8))
        return mf_fail(MF_ERR_ARG, "HF_ENDPOINT '%s' is not an http:// or https:// URL", ep);
    if (p->ollama_registry && strncmp(p->ollama_registry, "http://", 7) && strncmp(p->ollama_registry, "https://", 8))
        return mf_fail(MF_ERR_ARG, "MINFER_OLLAMA_REGISTRY '%s' is not an http:// or https:// URL", p->ollama_registry);
    const char *home = p->home ? p->home : "/";
    mf_hub *h = mf_calloc(1, sizeof *h);
    if (!h) return MF_ERR_NOMEM;
    char *hf_home = p->hf_home ? mf_strdup(p->hf_home)
                    : p->xdg_cache_home ? hub_fmt("%s/huggingface", p->xdg_cache_home)
                                        : hub_fmt("%s/.cache/huggingface", home);
    char *token_path = p->hf_token_path ? mf_strdup(p->hf_token_path) : hf_home ? hub_fmt("%s/token", hf_home) : NULL;
    h->hf_endpoint = mf_strdup(ep);
    h->hf_cache = p->hf_hub_cache ? mf_strdup(p->hf_hub_cache) : hf_home ? hub_fmt("%s/hub", hf_home) : NULL;
    h->hf_token = p->hf_token ? mf_strdup(p->hf_token) : read_token(token_path);
    h->ollama_registry = p->ollama_registry ? mf_strdup(p->ollama_registry) : NULL;
    h->ollama_models = p->ollama_models ? mf_strdup(p->ollama_models) : hub_fmt("%s/.ollama/models", home);
    const char *sys = p->ollama_system_models ? p->ollama_system_models : "/usr/share/ollama/.ollama/models";
    if (!p->ollama_models && *sys && !(h->ollama_system = mf_strdup(sys))) {
        mf_hub_free(h);
        free(hf_home);
        free(token_path);
        return MF_ERR_NOMEM;
    }
    h->offline = p->offline;
    h->connections = p->connections;
    h->retry_delay_s = p->retry_delay_s >= 0 ? p->retry_delay_s : 1.0;
    h->progress = p->progress;
    h->progress_user = p->progress_user;
    free(hf_home);
    free(token_path);
    if (!h->hf_endpoint || !h->hf_cache || !h->ollama_models || (p->ollama_registry && !h->ollama_registry)) {
        mf_hub_free(h);
        return MF_ERR_NOMEM;
    }
    trim_slashes(h->hf_endpoint);
    trim_slashes(h->ollama_registry);
    *out = h;
    return MF_OK;
}

void mf_hub_free(mf_hub *h) {
    if (!h) return;
    free(h->hf_endpoint);
    if (h->hf_token) memset(h->hf_token, 0, strlen(h->hf_token));
    free(h->hf_token);
    free(h->hf_cache);
    free(h->ollama_registry);
    free(h->ollama_models);
    free(h->ollama_system);
    if (h->ollama_token) memset(h->ollama_token, 0, strlen(h->ollama_token));
    free(h->ollama_token);
    free(h->ollama_token_url);
    free(h);
}

const char *mf_hub_hf_cache_dir(const mf_hub *h) { return h->hf_cache; }
const char *mf_hub_ollama_dir(const mf_hub *h) { return h->ollama_models; }

/* ---- the list of cached models ---- */

void mf_hub_model_clear(mf_hub_model *m) {
    if (!m) return;
    free(m->name), free(m->ref), free(m->source), free(m->path), free(m->type);
    memset(m, 0, sizeof *m);
}

void mf_hub_models_free(mf_hub_model *models, size_t n) {
    for (size_t i = 0; models && i < n; i++) mf_hub_model_clear(&models[i]);
    free(models);
}

mf_status hub_models_push(mf_hub_model **models, size_t *n, size_t *cap, const char *name, const char *ref,
                          const char *source, const char *path, uint32_t n_parts, uint64_t size) {
    if (*n == *cap) {
        const size_t c = *cap ? 2 * *cap : 16;
        mf_hub_model *m = realloc(*models, c * sizeof *m);
        if (!m) return mf_fail(MF_ERR_NOMEM, "out of memory listing the cached models");
        *models = m;
        *cap = c;
    }
    mf_hub_model *m = &(*models)[*n];
    char q[32];
    hub_quant_of_name(!strcmp(source, "ollama") && strchr(name, ':') ? strrchr(name, ':') + 1 : name, q, sizeof q);
    *m = (mf_hub_model){.name = mf_strdup(name), .ref = mf_strdup(ref), .source = mf_strdup(source), .path = mf_strdup(path),
                        .type = mf_strdup(q), .n_parts = n_parts, .size = size};
    if (!m->name || !m->ref || !m->source || !m->path || !m->type) {
        mf_hub_model_clear(m);
        return MF_ERR_NOMEM;
    }
    (*n)++;
    return MF_OK;
}

mf_status mf_hub_list(mf_hub *h, mf_hub_model **models, size_t *n) {
    *models = NULL;
    *n = 0;
    size_t cap = 0;
    mf_status s = hub_hf_list(h, models, n, &cap);
    if (s == MF_OK) s = hub_ollama_list(h, models, n, &cap);
    if (s != MF_OK) {
        mf_hub_models_free(*models, *n);
        *models = NULL;
        *n = 0;
    }
    return s;
}

/* Whether a reference names a cached model exactly: its name, the name without .gguf, an Ollama
 * name without :latest, the file name of any part of a split model, or its full reference. */
static bool names_exactly(const mf_hub_model *m, const char *s) {
    const size_t k = strlen(s), n = strlen(m->name);
    if (!strcmp(m->name, s) || !strcmp(m->ref, s)) return true;
    if (n == k + 5 && !strncmp(m->name, s, k) && !strcmp(m->name + k, ".gguf")) return true;
    if (!strcmp(m->source, "ollama") && n == k + 7 && !strncmp(m->name, s, k) && !strcmp(m->name + k, ":latest")) return true;
    uint32_t part, n_parts, p2, c2;
    size_t base, b2;
    if (m->n_parts > 1 && hub_split_part(m->name, &part, &n_parts, &base) && hub_split_part(s, &p2, &c2, &b2))
        return base == b2 && c2 == n_parts && !strncmp(m->name, s, base);
    return false;
}

/* The cached model a name or prefix names; *which: its index. MF_ERR_NOT_FOUND lists the ones a
 * prefix fits when it fits several. */
static mf_status find_cached(mf_hub *h, const char *s, mf_hub_model **models, size_t *n, size_t *which) {
    mf_status st = mf_hub_list(h, models, n);
    if (st != MF_OK) return st;
    size_t hits = 0, hit = 0;
    for (size_t i = 0; i < *n; i++)
        if (names_exactly(&(*models)[i], s)) hits++, hit = i;
    if (hits == 0)
        for (size_t i = 0; i < *n; i++)
            if (!strncmp((*models)[i].name, s, strlen(s))) hits++, hit = i;
    if (hits == 1) {
        *which = hit;
        return MF_OK;
    }
    if (hits == 0)
        return mf_fail(MF_ERR_NOT_FOUND,
                       "no file '%s', and no cached model of that name (`minfer list` shows them; hf:ORG/REPO[:QUANT] or "
                       "ollama:NAME[:TAG] downloads one)",
                       s);
    char msg[2048];
    size_t k = (size_t)snprintf(msg, sizeof msg, "'%s' names %zu cached models; say which:", s, hits);
    for (size_t i = 0, shown = 0; i < *n && k < sizeof msg - 100; i++)
        if (names_exactly(&(*models)[i], s) || !strncmp((*models)[i].name, s, strlen(s)))
            k += (size_t)snprintf(msg + k, sizeof msg - k, "%s %s", shown++ ? "," : "", (*models)[i].ref);
    return mf_fail(MF_ERR_NOT_FOUND, "%s", msg);
}

mf_status mf_hub_resolve(mf_hub *h, const char *ref, unsigned flags, char **path) {
    *path = NULL;
    if (!ref || !*ref) return mf_fail(MF_ERR_ARG, "an empty model reference");
    hub_ref r;
    mf_status s = hub_ref_parse(ref, &r);
    if (s != MF_OK) return s;
    if (r.kind == HUB_REF_HF) return hub_hf_resolve(h, &r, flags, path);
    if (r.kind == HUB_REF_OLLAMA) return hub_ollama_resolve(h, &r, flags, path);
    /* Something on disk, or a path (a '/' and no ':'): itself, for the caller's own open to judge. */
    struct stat st;
    if (stat(ref, &st) == 0 || (strchr(ref, '/') && !strchr(ref, ':'))) return (*path = mf_strdup(ref)) ? MF_OK : MF_ERR_NOMEM;
    mf_hub_model *models;
    size_t n, i;
    s = find_cached(h, ref, &models, &n, &i);
    if (s == MF_OK && !(*path = mf_strdup(models[i].path))) s = MF_ERR_NOMEM;
    mf_hub_models_free(models, n);
    return s;
}

mf_status mf_hub_remove(mf_hub *h, const char *ref, mf_hub_model *removed, uint64_t *freed) {
    if (removed) memset(removed, 0, sizeof *removed);
    if (freed) *freed = 0;
    hub_ref r;
    mf_status s = hub_ref_parse(ref, &r);
    if (s != MF_OK) return s;
    char *path = NULL;
    if (r.kind != HUB_REF_PATH && (s = mf_hub_resolve(h, ref, MF_HUB_NO_DOWNLOAD, &path)) != MF_OK) return s;
    mf_hub_model *models;
    size_t n, i = 0;
    if ((s = mf_hub_list(h, &models, &n)) != MF_OK) {
        free(path);
        return s;
    }
    if (path) { /* the model whose file the reference resolved to */
        while (i < n && strcmp(models[i].path, path)) i++;
        if (i == n) s = mf_fail(MF_ERR_NOT_FOUND, "'%s' is not a model of the caches", ref);
    } else {
        mf_hub_models_free(models, n);
        s = find_cached(h, ref, &models, &n, &i);
        if (s != MF_OK && access(ref, F_OK) == 0)
            s = mf_fail(MF_ERR_ARG, "'%s' is a file, not a cached model: delete it yourself if you mean to", ref);
    }
    if (s == MF_OK) s = !strcmp(models[i].source, "hf") ? hub_hf_remove(h, &models[i], freed) : hub_ollama_remove(h, &models[i], freed);
    if (s == MF_OK && removed) {
        *removed = models[i];
        memset(&models[i], 0, sizeof models[i]);
    }
    mf_hub_models_free(models, n);
    free(path);
    return s;
}
