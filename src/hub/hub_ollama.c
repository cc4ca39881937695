/* hub_ollama.c: Ollama: the registry protocol (Docker's manifest v2 for NAME:TAG, blobs by
 * sha256 digest, redirects to storage) and Ollama's own models folder, used in place:
 *   $OLLAMA_MODELS/manifests/HOST/NAMESPACE/MODEL/TAG   the manifest, as the registry sent it
 *   $OLLAMA_MODELS/blobs/sha256-HEX                      every layer and the config
 *   $OLLAMA_MODELS/.minfer-locks/sha256-HEX.lock         minfer's download locks
 * so a model `ollama pull` fetched runs without a copy, and one minfer fetched is Ollama's too. */
#include "hub/hub_internal.h"

#include <dirent.h>
#include <jansson.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#define MODEL_MEDIA_TYPE "application/vnd.ollama.image.model"
#define MAX_LAYERS HUB_MAX_LAYERS

typedef hub_layer layer;

mf_status hub_ollama_parse_manifest(const char *body, size_t len, const char *what, layer *ls, int *n, int *model) {
    json_error_t je;
    json_t *j = json_loadb(body, len, 0, &je), *e;
    *n = 0;
    *model = -1;
    if (!j) return mf_fail(MF_ERR_FORMAT, "%s: the manifest is not JSON (%s)", what, je.text);
    mf_status s = MF_OK;
    json_t *config = json_object_get(j, "config"), *layers = json_object_get(j, "layers");
    if (json_integer_value(json_object_get(j, "schemaVersion")) != 2 || !json_is_object(config) || !json_is_array(layers) ||
        json_array_size(layers) >= MAX_LAYERS)
        s = mf_fail(MF_ERR_FORMAT, "%s: not a manifest of schema 2 with a config and at most %d layers", what, MAX_LAYERS - 1);
    for (size_t i = 0; s == MF_OK && i <= json_array_size(layers); i++) {
        e = i == 0 ? config : json_array_get(layers, i - 1);
        const char *dg = json_string_value(json_object_get(e, "digest"));
        const char *mt = json_string_value(json_object_get(e, "mediaType"));
        json_t *size = json_object_get(e, "size");
        if (!dg || strncmp(dg, "sha256:", 7) || !hub_is_hex(dg + 7, 64) || !json_is_integer(size) || json_integer_value(size) < 0) {
            s = mf_fail(MF_ERR_FORMAT, "%s: layer %zu of the manifest has no valid sha256 digest and size: refused", what, i);
            break;
        }
        layer *l = &ls[(*n)++];
        snprintf(l->digest, sizeof l->digest, "%s", dg);
        for (char *c = l->digest; *c; c++) *c = (char)(*c >= 'A' && *c <= 'F' ? *c + 32 : *c);
        const char *dot = mt ? strrchr(mt, '.') : NULL;
        snprintf(l->kind, sizeof l->kind, "%s", i == 0 ? "config" : dot ? dot + 1 : "layer");
        l->size = (uint64_t)json_integer_value(size);
        if (i > 0 && *model < 0 && mt && !strcmp(mt, MODEL_MEDIA_TYPE)) *model = *n - 1;
    }
    json_decref(j);
    if (s == MF_OK && *model < 0) s = mf_fail(MF_ERR_FORMAT, "%s: the manifest has no model layer (%s)", what, MODEL_MEDIA_TYPE);
    return s;
}

static char *blob_in(const char *root, const char *digest) { return hub_fmt("%s/blobs/sha256-%s", root, digest + 7); }
static char *blob_path(const mf_hub *h, const char *digest) { return blob_in(h->ollama_models, digest); }

/* The name `list` shows: MODEL:TAG for the library of the default registry. */
static void display_name(const char *host, const char *ns, const char *model, const char *tag, char *out, size_t size) {
    if (!strcmp(host, "registry.ollama.ai") && !strcmp(ns, "library")) snprintf(out, size, "%s:%s", model, tag);
    else if (!strcmp(host, "registry.ollama.ai")) snprintf(out, size, "%s/%s:%s", ns, model, tag);
    else snprintf(out, size, "%s/%s/%s:%s", host, ns, model, tag);
}

/* The model of a manifest on disk: its layers, and the model blob's path when it is complete. */
static mf_status read_store(const char *root, const char *mpath, const char *what, layer *ls, int *n, int *model, char **blob) {
    uint8_t *data;
    size_t len;
    *blob = NULL;
    if (mf_read_file(mpath, 1 << 20, &data, &len) != MF_OK) return mf_fail(MF_ERR_NOT_FOUND, "%s is not in %s", what, root);
    mf_status s = hub_ollama_parse_manifest((const char *)data, len, what, ls, n, model);
    free(data);
    if (s != MF_OK) return s;
    char *p = blob_in(root, ls[*model].digest);
    uint64_t have;
    if (p && hub_file_size(p, &have) && have == ls[*model].size) *blob = p;
    else free(p);
    return *blob ? MF_OK : mf_fail(MF_ERR_NOT_FOUND, "%s: its model blob is missing from %s/blobs", what, root);
}

static mf_status read_local(mf_hub *h, const char *mpath, const char *what, layer *ls, int *n, int *model, char **blob) {
    return read_store(h->ollama_models, mpath, what, ls, n, model, blob);
}

/* A model the system-wide Ollama service pulled (its store, read-only), used in place. */
static mf_status read_system(mf_hub *h, const hub_ref *r, const char *what, char **blob) {
    if (!h->ollama_system) return MF_ERR_NOT_FOUND;
    char *mpath = hub_fmt("%s/manifests/%s/%s/%s/%s", h->ollama_system, r->host, r->ns, r->model, r->tag);
    layer ls[MAX_LAYERS];
    int n, model;
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", mf_last_error()); /* the first store's message stays the one shown */
    mf_status s = mpath ? read_store(h->ollama_system, mpath, what, ls, &n, &model, blob) : MF_ERR_NOMEM;
    free(mpath);
    if (s == MF_ERR_NOT_FOUND) mf_fail(s, "%s", msg);
    return s;
}

mf_status hub_ollama_resolve(mf_hub *h, const hub_ref *r, unsigned flags, char **path) {
    *path = NULL;
    char name[700], what[720];
    display_name(r->host, r->ns, r->model, r->tag, name, sizeof name);
    snprintf(what, sizeof what, "ollama:%s", name);
    char *mpath = hub_fmt("%s/manifests/%s/%s/%s/%s", h->ollama_models, r->host, r->ns, r->model, r->tag);
    if (!mpath) return MF_ERR_NOMEM;
    layer ls[MAX_LAYERS];
    int n = 0, model = -1;
    mf_status s;
    if (!(flags & MF_HUB_UPDATE) || h->offline) {
        s = read_local(h, mpath, what, ls, &n, &model, path);
        if (s == MF_ERR_NOT_FOUND) s = read_system(h, r, what, path);
        if (s != MF_ERR_NOT_FOUND || h->offline || (flags & MF_HUB_NO_DOWNLOAD)) {
            free(mpath);
            if (s != MF_OK && h->offline) {
                char msg[1024];
                snprintf(msg, sizeof msg, "%s", mf_last_error());
                return mf_fail(s, "%s (HF_HUB_OFFLINE is set: nothing is downloaded)", msg);
            }
            return s;
        }
    }
    char *base = h->ollama_registry ? mf_strdup(h->ollama_registry) : hub_fmt("%s://%s", r->scheme, r->host);
    char *url = base ? hub_fmt("%s/v2/%s/%s/manifests/%s", base, r->ns, r->model, r->tag) : NULL, *body = NULL;
    size_t len = 0;
    hub_headers hd;
    const hub_request rq = {.site = HUB_SITE_OLLAMA, .url = url, .what = what,
                            .accept = "application/vnd.docker.distribution.manifest.v2+json, "
                                      "application/vnd.oci.image.manifest.v1+json"};
    s = url ? hub_fetch(h, &rq, 1 << 20, &body, &len, &hd) : MF_ERR_NOMEM;
    if (s == MF_OK) s = hub_ollama_parse_manifest(body, len, what, ls, &n, &model);
    uint64_t missing = 0;
    int n_missing = 0;
    for (int i = 0; s == MF_OK && i < n; i++) {
        char *p = blob_path(h, ls[i].digest);
        uint64_t have;
        if (p && !(hub_file_size(p, &have) && have == ls[i].size)) missing += ls[i].size, n_missing++;
        free(p);
    }
    if (s == MF_OK && n_missing) {
        char sz[32];
        hub_note(h, "%s is not cached; downloading %d blob%s (%s) from %s into %s", what, n_missing, n_missing == 1 ? "" : "s",
                 hub_bytes_str(missing, sz, sizeof sz), base, h->ollama_models);
    }
    for (int i = 0; s == MF_OK && i < n; i++) {
        bool dup = false; /* a digest twice in one manifest: fetched once */
        for (int j = 0; j < i; j++) dup |= !strcmp(ls[j].digest, ls[i].digest);
        if (dup) continue;
        char *final = blob_path(h, ls[i].digest), *burl = hub_fmt("%s/v2/%s/%s/blobs/%s", base, r->ns, r->model, ls[i].digest);
        char *lock = hub_fmt("%s/.minfer-locks/sha256-%s.lock", h->ollama_models, ls[i].digest + 7);
        char *label = hub_fmt("%s %s", name, ls[i].kind), *bwhat = hub_fmt("%s (%s blob)", what, ls[i].kind);
        uint64_t have;
        bool cached = true;
        if (!final || !burl || !lock || !label || !bwhat) s = MF_ERR_NOMEM;
        else if (!(hub_file_size(final, &have) && have == ls[i].size)) {
            const hub_blob b = {.site = HUB_SITE_OLLAMA, .url = burl, .what = bwhat, .name = label, .final_path = final,
                                .lock_path = lock, .digest = ls[i].digest + 7, .size = ls[i].size, .file = i, .n_files = n};
            s = hub_download(h, &b, &cached);
        }
        if (s == MF_OK && h->progress) {
            mf_hub_progress p = {.event = MF_HUB_FILE_DONE, .file = i, .n_files = n, .file_name = label, .done = ls[i].size,
                                 .total = ls[i].size, .cached = cached};
            if (h->progress(&p, h->progress_user)) s = mf_fail(MF_ERR_IO, "%s: cancelled", what);
        }
        if (s == MF_OK && i == model) *path = mf_strdup(final);
        free(final), free(burl), free(lock), free(label), free(bwhat);
    }
    if (s == MF_OK) s = hub_write_atomic(mpath, body, len); /* last: Ollama sees the model only when all is there */
    if (s != MF_OK) {
        free(*path);
        *path = NULL;
    }
    free(body);
    free(url);
    free(base);
    free(mpath);
    return s;
}

/* Call fn for every manifest file: manifests/HOST/NS/MODEL/TAG. */
typedef mf_status (*manifest_fn)(mf_hub *h, const char *mpath, const char *parts[4], void *user);

static mf_status walk_manifests(mf_hub *h, manifest_fn fn, void *user) {
    char *root = hub_fmt("%s/manifests", h->ollama_models);
    if (!root) return MF_ERR_NOMEM;
    char *dirs[5] = {root, NULL, NULL, NULL, NULL};
    const char *parts[4];
    DIR *ds[4] = {opendir(root), NULL, NULL, NULL};
    int depth = 0;
    mf_status s = MF_OK;
    while (depth >= 0 && s == MF_OK) {
        struct dirent *e = ds[depth] ? readdir(ds[depth]) : NULL;
        if (!e) {
            if (ds[depth]) closedir(ds[depth]);
            ds[depth] = NULL;
            if (depth > 0) free(dirs[depth]);
            depth--;
            continue;
        }
        if (e->d_name[0] == '.') continue;
        char *p = hub_fmt("%s/%s", dirs[depth], e->d_name);
        if (!p) {
            s = MF_ERR_NOMEM;
            break;
        }
        struct stat st;
        if (depth < 3 && stat(p, &st) == 0 && S_ISDIR(st.st_mode)) {
            dirs[depth + 1] = p;
            parts[depth] = strrchr(p, '/') + 1;
            ds[++depth] = opendir(p);
            continue;
        }
        if (depth == 3 && stat(p, &st) == 0 && S_ISREG(st.st_mode)) {
            parts[3] = e->d_name;
            s = fn(h, p, parts, user);
        }
        free(p);
    }
    for (; depth >= 0; depth--) {
        if (ds[depth]) closedir(ds[depth]);
        if (depth > 0) free(dirs[depth]);
    }
    free(root);
    return s;
}

typedef struct list_ctx {
    mf_hub_model **models;
    size_t *n, *cap;
} list_ctx;

static mf_status list_one(mf_hub *h, const char *mpath, const char *parts[4], void *user) {
    list_ctx *c = user;
    char name[700], ref[720];
    display_name(parts[0], parts[1], parts[2], parts[3], name, sizeof name);
    snprintf(ref, sizeof ref, "ollama:%s", name);
    layer ls[MAX_LAYERS];
    int n, model;
    char *blob = NULL;
    if (read_local(h, mpath, ref, ls, &n, &model, &blob) != MF_OK) return MF_OK; /* not complete, or not ours to judge */
    mf_status s = hub_models_push(c->models, c->n, c->cap, name, ref, "ollama", blob, 1, ls[model].size);
    free(blob);
    return s;
}

mf_status hub_ollama_list(mf_hub *h, mf_hub_model **models, size_t *n, size_t *cap) {
    list_ctx c = {models, n, cap};
    return walk_manifests(h, list_one, &c);
}

typedef struct used_ctx {
    const layer *ls;
    int n;
    bool *used;
} used_ctx;

static mf_status mark_used(mf_hub *h, const char *mpath, const char *parts[4], void *user) {
    used_ctx *c = user;
    uint8_t *data;
    size_t len;
    if (mf_read_file(mpath, 1 << 20, &data, &len) != MF_OK) return MF_OK;
    for (int i = 0; i < c->n; i++) /* a digest anywhere in another manifest keeps its blob */
        if (memmem(data, len, c->ls[i].digest, strlen(c->ls[i].digest))) c->used[i] = true;
    free(data);
    return MF_OK;
}

mf_status hub_ollama_remove(mf_hub *h, const mf_hub_model *m, uint64_t *freed) {
    hub_ref r;
    mf_status s = hub_ref_parse(m->ref, &r);
    if (s != MF_OK) return s;
    char *mpath = hub_fmt("%s/manifests/%s/%s/%s/%s", h->ollama_models, r.host, r.ns, r.model, r.tag);
    char *mroot = hub_fmt("%s/manifests", h->ollama_models);
    layer ls[MAX_LAYERS];
    int n = 0, model;
    uint8_t *data = NULL;
    size_t len;
    if (!mpath || !mroot) s = MF_ERR_NOMEM;
    else if ((s = mf_read_file(mpath, 1 << 20, &data, &len)) == MF_OK) s = hub_ollama_parse_manifest((char *)data, len, m->ref, ls, &n, &model);
    free(data);
    if (s == MF_OK && unlink(mpath) != 0) s = mf_fail(MF_ERR_IO, "cannot remove '%s'", mpath);
    if (s == MF_OK) {
        for (char *slash; (slash = strrchr(mpath, '/')) && strlen(mpath) > strlen(mroot);) { /* empty folders */
            *slash = 0;
            if (strlen(mpath) <= strlen(mroot) || rmdir(mpath) != 0) break;
        }
        bool used[MAX_LAYERS] = {false};
        used_ctx c = {ls, n, used};
        s = walk_manifests(h, mark_used, &c);
        for (int i = 0; s == MF_OK && i < n; i++) {
            char *p = blob_path(h, ls[i].digest);
            uint64_t sz = 0;
            if (p && !used[i] && hub_file_size(p, &sz) && unlink(p) == 0 && freed) *freed += sz;
            for (int j = i + 1; j < n; j++) used[j] |= !strcmp(ls[j].digest, ls[i].digest);
            free(p);
        }
    }
    free(mpath);
    free(mroot);
    return s;
}
