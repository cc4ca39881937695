/* hub_hf.c: Hugging Face: the Hub's HTTP API (refs, the file tree of a commit, files by
 * /resolve/COMMIT/PATH with redirects to the storage host) and huggingface_hub's cache layout:
 *   $HF_HUB_CACHE/models--ORG--REPO/blobs/OID            the bytes (OID: sha256 for LFS files)
 *                                  /snapshots/COMMIT/PATH relative symlink to ../../blobs/OID
 *                                  /refs/main            the commit of the branch
 *   $HF_HUB_CACHE/.locks/models--ORG--REPO/OID.lock       the lock huggingface_hub takes too
 * Pinning the commit of main for every file keeps two revisions from mixing. */
#include "hub/hub_internal.h"

#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static char *repo_dir(const mf_hub *h, const char *repo) {
    const char *slash = strchr(repo, '/');
    return hub_fmt("%s/models--%.*s--%s", h->hf_cache, (int)(slash - repo), repo, slash + 1);
}

/* The GGUF files of a snapshot folder, recursively (symlinks followed; dangling ones skipped). */
static mf_status walk_snapshot(const char *root, const char *rel, hub_file **files, size_t *n, size_t *cap, int depth) {
    char *dir = rel[0] ? hub_fmt("%s/%s", root, rel) : mf_strdup(root);
    if (!dir) return MF_ERR_NOMEM;
    DIR *d = opendir(dir);
    free(dir);
    if (!d) return MF_OK;
    mf_status s = MF_OK;
    struct dirent *e;
    while (s == MF_OK && (e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char *r = rel[0] ? hub_fmt("%s/%s", rel, e->d_name) : mf_strdup(e->d_name);
        char *full = r ? hub_fmt("%s/%s", root, r) : NULL;
        struct stat st;
        if (!r || !full) s = MF_ERR_NOMEM;
        else if (stat(full, &st) == 0 && S_ISDIR(st.st_mode) && depth < 8) s = walk_snapshot(root, r, files, n, cap, depth + 1);
        else if (stat(full, &st) == 0 && S_ISREG(st.st_mode) && strlen(r) > 5 && !strcasecmp(r + strlen(r) - 5, ".gguf")) {
            if (*n == *cap) {
                hub_file *f = realloc(*files, (*cap = *cap ? 2 * *cap : 16) * sizeof *f);
                if (!f) s = mf_fail(MF_ERR_NOMEM, "out of memory listing '%s'", root);
                else *files = f;
            }
            if (s == MF_OK) {
                hub_file *f = &(*files)[(*n)++];
                memset(f, 0, sizeof *f);
                f->path = r;
                r = NULL;
                f->size = (uint64_t)st.st_size;
                hub_split_part(f->path, &f->part, &f->n_parts, NULL);
            }
        }
        free(r);
        free(full);
    }
    closedir(d);
    return s;
}

/* The snapshots of a repository folder: the commit refs/main names first, then the newest. */
static mf_status snapshots(const char *rdir, char ***names, size_t *n) {
    *names = NULL;
    *n = 0;
    char *sdir = hub_fmt("%s/snapshots", rdir), *refp = hub_fmt("%s/refs/main", rdir);
    uint8_t *ref = NULL;
    size_t ref_len = 0;
    if (!sdir || !refp) {
        free(sdir), free(refp);
        return MF_ERR_NOMEM;
    }
    char commit[64] = ""; /* the file holds the commit, maybe with a newline (not NUL-terminated) */
    if (mf_read_file(refp, 256, &ref, &ref_len) == MF_OK && ref_len < sizeof commit) {
        memcpy(commit, ref, ref_len);
        while (ref_len && (commit[ref_len - 1] == '\n' || commit[ref_len - 1] == ' ')) ref_len--;
        commit[ref_len] = 0;
    }
    DIR *d = opendir(sdir);
    struct dirent *e;
    size_t cap = 0;
    double *times = NULL;
    while (d && (e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char *p = hub_fmt("%s/%s", sdir, e->d_name);
        struct stat st;
        if (p && stat(p, &st) == 0 && S_ISDIR(st.st_mode)) {
            if (*n == cap) {
                cap = cap ? 2 * cap : 8;
                *names = realloc(*names, cap * sizeof **names);
                times = realloc(times, cap * sizeof *times);
            }
            (*names)[*n] = mf_strdup(e->d_name);
            times[*n] = commit[0] && !strcmp(commit, e->d_name) ? 1e30 : (double)st.st_mtime;
            (*n)++;
        }
        free(p);
    }
    if (d) closedir(d);
    for (size_t i = 1; i < *n; i++) /* newest first */
        for (size_t j = i; j > 0 && times[j] > times[j - 1]; j--) {
            const double t = times[j];
            times[j] = times[j - 1], times[j - 1] = t;
            char *s = (*names)[j];
            (*names)[j] = (*names)[j - 1], (*names)[j - 1] = s;
        }
    free(times);
    free(ref);
    free(sdir);
    free(refp);
    return MF_OK;
}

static void free_names(char **names, size_t n) {
    for (size_t i = 0; i < n; i++) free(names[i]);
    free(names);
}

/* The model sel names among the cached snapshots of a repository; MF_ERR_NOT_FOUND when none. */
static mf_status resolve_cached(mf_hub *h, const hub_ref *r, const char *what, char **path) {
    char *rdir = repo_dir(h, r->repo);
    char **snaps = NULL;
    size_t n_snaps = 0;
    mf_status s = rdir ? snapshots(rdir, &snaps, &n_snaps) : MF_ERR_NOMEM, first = MF_ERR_NOT_FOUND;
    char msg[2048] = "";
    for (size_t i = 0; s == MF_OK && i < n_snaps && !*path; i++) {
        char *root = hub_fmt("%s/snapshots/%s", rdir, snaps[i]);
        hub_file *files = NULL;
        size_t n = 0, cap = 0, *idx = NULL, n_idx = 0;
        if (!root || walk_snapshot(root, "", &files, &n, &cap, 0) != MF_OK) s = MF_ERR_NOMEM;
        else if (hub_select(files, n, r->sel, what, &idx, &n_idx) == MF_OK) *path = hub_fmt("%s/%s", root, files[idx[0]].path);
        else if (!msg[0] && n) snprintf(msg, sizeof msg, "%s", mf_last_error());
        free(idx);
        hub_files_free(files, n);
        free(root);
    }
    free_names(snaps, n_snaps);
    free(rdir);
    if (s != MF_OK) return s;
    if (*path) return MF_OK;
    return msg[0] ? mf_fail(first, "%s", msg) : mf_fail(first, "%s is not in the cache %s", what, h->hf_cache);
}

/* ---- the Hub's API ---- */

static mf_status fetch_json(mf_hub *h, const char *url, const char *what, json_t **out, hub_headers *hd) {
    const hub_request rq = {.site = HUB_SITE_HF, .url = url, .accept = "application/json", .what = what};
    char *body;
    size_t len;
    mf_status s = hub_fetch(h, &rq, 64u << 20, &body, &len, hd);
    if (s != MF_OK) return s;
    json_error_t je;
    *out = json_loadb(body, len, 0, &je);
    free(body);
    if (!*out) return mf_fail(MF_ERR_FORMAT, "%s: %s did not answer JSON (%s)", what, url, je.text);
    return MF_OK;
}

static mf_status main_commit(mf_hub *h, const hub_ref *r, const char *what, char commit[41]) {
    char *url = hub_fmt("%s/api/models/%s/refs", h->hf_endpoint, r->repo);
    json_t *j = NULL;
    hub_headers hd;
    mf_status s = url ? fetch_json(h, url, what, &j, &hd) : MF_ERR_NOMEM;
    free(url);
    if (s != MF_OK) return s;
    json_t *br = json_object_get(j, "branches"), *b;
    size_t i;
    s = mf_fail(MF_ERR_NOT_FOUND, "%s: the repository has no branch 'main'", what);
    json_array_foreach(br, i, b) {
        const char *name = json_string_value(json_object_get(b, "name"));
        const char *c = json_string_value(json_object_get(b, "targetCommit"));
        if (!name || strcmp(name, "main")) continue;
        if (!c || !hub_is_hex(c, 40)) {
            s = mf_fail(MF_ERR_FORMAT, "%s: the commit of main is '%s', not 40 hex digits: refused", what, c ? c : "(none)");
            break;
        }
        snprintf(commit, 41, "%s", c);
        s = MF_OK;
        break;
    }
    json_decref(j);
    return s;
}

mf_status hub_hf_parse_tree(const char *body, size_t len, const char *what, hub_file **files, size_t *n, size_t *cap) {
    json_error_t je;
    json_t *j = json_loadb(body, len, 0, &je), *e;
    if (!j) return mf_fail(MF_ERR_FORMAT, "%s: the file list is not JSON (%s)", what, je.text);
    mf_status s = json_is_array(j) ? MF_OK : mf_fail(MF_ERR_FORMAT, "%s: the file list is not a JSON array", what);
    size_t i;
    json_array_foreach(j, i, e) {
        if (s != MF_OK) break;
        const char *type = json_string_value(json_object_get(e, "type"));
        const char *path = json_string_value(json_object_get(e, "path"));
        if (type && strcmp(type, "file")) continue; /* folders */
        if (!path || !hub_safe_relpath(path)) {
            s = mf_fail(MF_ERR_FORMAT, "%s: the server lists a file named '%s', which would land outside the cache folder: refused",
                        what, path ? path : "(none)");
            break;
        }
        json_t *lfs = json_object_get(e, "lfs");
        const char *oid = json_string_value(json_object_get(lfs ? lfs : e, "oid"));
        json_t *size = json_object_get(lfs ? lfs : e, "size");
        if (!oid || !(lfs ? hub_is_hex(oid, 64) : hub_is_hex(oid, 40)) || !json_is_integer(size) || json_integer_value(size) < 0) {
            s = mf_fail(MF_ERR_FORMAT, "%s: the listing of '%s' has no valid digest and size: refused", what, path);
            break;
        }
        if (*n == *cap) {
            hub_file *f = *n < 1000000 ? realloc(*files, (*cap = *cap ? 2 * *cap : 32) * sizeof *f) : NULL;
            if (!f) {
                s = mf_fail(MF_ERR_NOMEM, "%s: out of memory, or more than a million files, listing it", what);
                break;
            }
            *files = f;
        }
        hub_file *f = &(*files)[(*n)++];
        memset(f, 0, sizeof *f);
        f->path = mf_strdup(path);
        f->oid = mf_strdup(oid);
        for (char *c = f->oid; c && *c; c++) *c = (char)(*c >= 'A' && *c <= 'F' ? *c + 32 : *c);
        f->size = (uint64_t)json_integer_value(size);
        hub_split_part(path, &f->part, &f->n_parts, NULL);
        if (!f->path || !f->oid) s = MF_ERR_NOMEM;
    }
    json_decref(j);
    return s;
}

/* Every file of the commit (the tree API, paged by Link: rel="next"), each name and digest checked. */
static mf_status list_tree(mf_hub *h, const hub_ref *r, const char *what, const char *commit, hub_file **files, size_t *n) {
    *files = NULL;
    *n = 0;
    size_t cap = 0;
    char *url = hub_fmt("%s/api/models/%s/tree/%s?recursive=true", h->hf_endpoint, r->repo, commit);
    mf_status s = url ? MF_OK : MF_ERR_NOMEM;
    for (int page = 0; s == MF_OK && url; page++) {
        if (page == 1000) {
            s = mf_fail(MF_ERR_FORMAT, "%s: the file list goes on past 1000 pages: refused", what);
            break;
        }
        const hub_request rq = {.site = HUB_SITE_HF, .url = url, .accept = "application/json", .what = what};
        hub_headers hd;
        char *body;
        size_t len;
        if ((s = hub_fetch(h, &rq, 64u << 20, &body, &len, &hd)) != MF_OK) break;
        free(url);
        url = NULL;
        s = hub_hf_parse_tree(body, len, what, files, n, &cap);
        free(body);
        if (s == MF_OK && hd.link_next[0]) url = mf_strdup(hd.link_next);
    }
    free(url);
    if (s != MF_OK) {
        hub_files_free(*files, *n);
        *files = NULL;
        *n = 0;
    }
    return s;
}

/* ../../ up to the repository folder from snapshots/COMMIT/PATH, then blobs/OID. */
static char *blob_link_target(const char *path, const char *oid) {
    size_t depth = 0;
    for (const char *c = path; *c; c++) depth += *c == '/';
    char *up = mf_malloc(3 * depth + 1);
    if (!up) return NULL;
    up[0] = 0;
    for (size_t i = 0; i < depth; i++) strcat(up, "../");
    char *t = hub_fmt("../../%sblobs/%s", up, oid);
    free(up);
    return t;
}

static int file_done(mf_hub *h, int file, int n_files, const char *name, uint64_t size, bool cached) {
    if (!h->progress) return 0;
    mf_hub_progress p = {.event = MF_HUB_FILE_DONE, .file = file, .n_files = n_files, .file_name = name, .done = size,
                         .total = size, .cached = cached};
    return h->progress(&p, h->progress_user);
}

mf_status hub_hf_resolve(mf_hub *h, const hub_ref *r, unsigned flags, char **path) {
    *path = NULL;
    char what[400];
    snprintf(what, sizeof what, "hf:%s", r->repo);
    mf_status s;
    if (!(flags & MF_HUB_UPDATE) || h->offline) {
        s = resolve_cached(h, r, what, path);
        if (s != MF_ERR_NOT_FOUND) return s;
        if (h->offline || (flags & MF_HUB_NO_DOWNLOAD)) {
            char msg[2048];
            snprintf(msg, sizeof msg, "%s", mf_last_error());
            return mf_fail(MF_ERR_NOT_FOUND, "%s%s", msg, h->offline ? " (HF_HUB_OFFLINE is set: nothing is downloaded)" : "");
        }
    }
    char commit[41];
    if ((s = main_commit(h, r, what, commit)) != MF_OK) return s;
    hub_file *files = NULL;
    size_t n_files = 0, *idx = NULL, n = 0;
    if ((s = list_tree(h, r, what, commit, &files, &n_files)) != MF_OK) return s;
    if ((s = hub_select(files, n_files, r->sel, what, &idx, &n)) != MF_OK) {
        hub_files_free(files, n_files);
        return s;
    }
    char *rdir = repo_dir(h, r->repo);
    char *rname = rdir ? strrchr(rdir, '/') + 1 : NULL;
    uint64_t missing = 0;
    int n_missing = 0;
    for (size_t k = 0; rdir && k < n; k++) {
        const hub_file *f = &files[idx[k]];
        char *blob = hub_fmt("%s/blobs/%s", rdir, f->oid);
        uint64_t have;
        if (blob && !(hub_file_size(blob, &have) && have == f->size)) missing += f->size, n_missing++;
        free(blob);
    }
    if (n_missing) {
        char sz[32];
        hub_note(h, "%s%s%s is not cached; downloading %d file%s (%s) from %s into %s", what, r->sel[0] ? ":" : "", r->sel,
                 n_missing, n_missing == 1 ? "" : "s", hub_bytes_str(missing, sz, sizeof sz), h->hf_endpoint, rdir);
    }
    for (size_t k = 0; s == MF_OK && rdir && k < n; k++) {
        const hub_file *f = &files[idx[k]];
        char *blob = hub_fmt("%s/blobs/%s", rdir, f->oid), *link = hub_fmt("%s/snapshots/%s/%s", rdir, commit, f->path);
        char *lock = hub_fmt("%s/.locks/%s/%s.lock", h->hf_cache, rname, f->oid);
        char *esc = hub_url_escape(f->path, true), *url = esc ? hub_fmt("%s/%s/resolve/%s/%s", h->hf_endpoint, r->repo, commit, esc) : NULL;
        char *fwhat = hub_fmt("%s:%s", what, f->path), *target = blob_link_target(f->path, f->oid);
        const char *name = strrchr(f->path, '/') ? strrchr(f->path, '/') + 1 : f->path;
        uint64_t have;
        bool cached = true;
        if (!blob || !link || !lock || !url || !fwhat || !target) s = MF_ERR_NOMEM;
        else if (hub_file_size(link, &have) && have == f->size) {
        } else {
            if (!(hub_file_size(blob, &have) && have == f->size)) {
                const hub_blob b = {.site = HUB_SITE_HF, .url = url, .what = fwhat, .name = name, .final_path = blob,
                                    .lock_path = lock, .digest = f->oid, .size = f->size, .file = (int)k, .n_files = (int)n};
                s = hub_download(h, &b, &cached);
            }
            if (s == MF_OK) s = hub_symlink_atomic(target, link);
        }
        if (s == MF_OK && file_done(h, (int)k, (int)n, name, f->size, cached)) s = mf_fail(MF_ERR_IO, "%s: cancelled", what);
        if (s == MF_OK && k == 0) *path = mf_strdup(link);
        free(blob), free(link), free(lock), free(esc), free(url), free(fwhat), free(target);
    }
    if (s == MF_OK && rdir) {
        char *ref = hub_fmt("%s/refs/main", rdir);
        s = ref ? hub_write_atomic(ref, commit, 40) : MF_ERR_NOMEM;
        free(ref);
    }
    if (!rdir) s = MF_ERR_NOMEM;
    if (s != MF_OK) {
        free(*path);
        *path = NULL;
    }
    free(rdir);
    free(idx);
    hub_files_free(files, n_files);
    return s;
}

/* ---- list and remove ---- */

/* The path of part k (1-based) of a split model whose first part is path. */
static char *part_path(const char *path, uint32_t k, uint32_t n) {
    size_t base;
    uint32_t p, c;
    if (!hub_split_part(path, &p, &c, &base)) return mf_strdup(path);
    return hub_fmt("%.*s-%05u-of-%05u.gguf", (int)base, path, k, n);
}

mf_status hub_hf_list(mf_hub *h, mf_hub_model **models, size_t *n, size_t *cap) {
    DIR *d = opendir(h->hf_cache);
    if (!d) return MF_OK;
    struct dirent *e;
    mf_status s = MF_OK;
    while (s == MF_OK && (e = readdir(d))) {
        const char *sep;
        if (strncmp(e->d_name, "models--", 8) || !(sep = strstr(e->d_name + 8, "--"))) continue;
        char repo[300];
        snprintf(repo, sizeof repo, "%.*s/%s", (int)(sep - e->d_name - 8), e->d_name + 8, sep + 2);
        char *rdir = hub_fmt("%s/%s", h->hf_cache, e->d_name), **snaps = NULL;
        size_t n_snaps = 0, first = *n;
        if (!rdir || snapshots(rdir, &snaps, &n_snaps) != MF_OK) s = MF_ERR_NOMEM;
        for (size_t i = 0; s == MF_OK && i < n_snaps; i++) {
            char *root = hub_fmt("%s/snapshots/%s", rdir, snaps[i]);
            hub_file *files = NULL;
            size_t nf = 0, fcap = 0;
            if (!root || walk_snapshot(root, "", &files, &nf, &fcap, 0) != MF_OK) s = MF_ERR_NOMEM;
            for (size_t f = 0; s == MF_OK && f < nf; f++) {
                if (files[f].part != 1) continue;
                uint64_t total = 0, sz;
                uint32_t k = 1;
                for (; k <= files[f].n_parts; k++) {
                    char *pp = part_path(files[f].path, k, files[f].n_parts), *full = pp ? hub_fmt("%s/%s", root, pp) : NULL;
                    const bool ok = full && hub_file_size(full, &sz);
                    free(pp), free(full);
                    if (!ok) break;
                    total += sz;
                }
                if (k <= files[f].n_parts) continue; /* incomplete */
                char *ref = hub_fmt("hf:%s:%s", repo, files[f].path), *full = hub_fmt("%s/%s", root, files[f].path);
                bool seen = false;
                for (size_t m = first; ref && m < *n; m++) seen |= !strcmp((*models)[m].ref, ref);
                const char *name = strrchr(files[f].path, '/') ? strrchr(files[f].path, '/') + 1 : files[f].path;
                if (!ref || !full) s = MF_ERR_NOMEM;
                else if (!seen) s = hub_models_push(models, n, cap, name, ref, "hf", full, files[f].n_parts, total);
                free(ref), free(full);
            }
            hub_files_free(files, nf);
            free(root);
        }
        free_names(snaps, n_snaps);
        free(rdir);
    }
    closedir(d);
    return s;
}

/* Remove empty folders from dir up to (not including) stop. */
static void prune_dirs(const char *path, const char *stop) {
    char *p = mf_strdup(path);
    for (char *slash; p && (slash = strrchr(p, '/')) && strlen(p) > strlen(stop);) {
        *slash = 0;
        if (strlen(p) <= strlen(stop) || rmdir(p) != 0) break;
    }
    free(p);
}

/* Collect the blob names the snapshot links of a repository point at. */
static void linked_blobs(const char *dir, char ***names, size_t *n, int depth) {
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        char *p = hub_fmt("%s/%s", dir, e->d_name), t[4096];
        struct stat st;
        if (p && lstat(p, &st) == 0) {
            ssize_t k;
            if (S_ISDIR(st.st_mode) && depth < 10) linked_blobs(p, names, n, depth + 1);
            else if (S_ISLNK(st.st_mode) && (k = readlink(p, t, sizeof t - 1)) > 0) {
                t[k] = 0;
                char **g = realloc(*names, (*n + 1) * sizeof *g);
                if (g) {
                    *names = g;
                    g[(*n)++] = mf_strdup(strrchr(t, '/') ? strrchr(t, '/') + 1 : t);
                }
            }
        }
        free(p);
    }
    if (d) closedir(d);
}

mf_status hub_hf_remove(mf_hub *h, const mf_hub_model *m, uint64_t *freed) {
    hub_ref r;
    mf_status s = hub_ref_parse(m->ref, &r);
    if (s != MF_OK) return s;
    char *rdir = repo_dir(h, r.repo), **snaps = NULL, *sdir = rdir ? hub_fmt("%s/snapshots", rdir) : NULL;
    size_t n_snaps = 0;
    if (!sdir || snapshots(rdir, &snaps, &n_snaps) != MF_OK) s = MF_ERR_NOMEM;
    uint32_t part, n_parts;
    hub_split_part(r.sel, &part, &n_parts, NULL);
    for (size_t i = 0; s == MF_OK && i < n_snaps; i++)
        for (uint32_t k = 1; k <= n_parts; k++) {
            char *pp = part_path(r.sel, k, n_parts), *full = pp ? hub_fmt("%s/%s/%s", sdir, snaps[i], pp) : NULL;
            if (full && unlink(full) == 0) prune_dirs(full, sdir);
            free(pp), free(full);
        }
    char **used = NULL;
    size_t n_used = 0;
    linked_blobs(sdir, &used, &n_used, 0);
    char *bdir = rdir ? hub_fmt("%s/blobs", rdir) : NULL;
    DIR *d = bdir ? opendir(bdir) : NULL;
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (!hub_is_hex(e->d_name, 64) && !hub_is_hex(e->d_name, 40)) continue; /* partial downloads stay */
        bool in_use = false;
        for (size_t u = 0; u < n_used && !in_use; u++) in_use = used[u] && !strcmp(used[u], e->d_name);
        char *p = hub_fmt("%s/%s", bdir, e->d_name);
        uint64_t sz = 0;
        if (p && !in_use && hub_file_size(p, &sz) && unlink(p) == 0 && freed) *freed += sz;
        free(p);
    }
    if (d) closedir(d);
    if (sdir && rmdir(sdir) == 0) { /* nothing of the repository is left: its folder goes */
        char *refs = hub_fmt("%s/refs/main", rdir), *refd = hub_fmt("%s/refs", rdir);
        if (refs) unlink(refs);
        if (refd) rmdir(refd);
        if (bdir) rmdir(bdir);
        rmdir(rdir);
        free(refs), free(refd);
    }
    for (size_t u = 0; u < n_used; u++) free(used[u]);
    free(used);
    free(bdir);
    free_names(snaps, n_snaps);
    free(sdir);
    free(rdir);
    return s;
}
