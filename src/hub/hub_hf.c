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

static bool is_commit(const char *s) { return hub_is_hex(s, 40); }

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

/* The snapshots of a repository folder: the commit refs/REV names first, then the newest; with
 * only, that one alone (REV a commit: itself). */
static mf_status snapshots(const char *rdir, const char *rev, bool only, char ***names, size_t *n) {
    *names = NULL;
    *n = 0;
    char *sdir = hub_fmt("%s/snapshots", rdir), *refp = hub_fmt("%s/refs/%s", rdir, rev);
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
    if (is_commit(rev)) snprintf(commit, sizeof commit, "%s", rev);
    DIR *d = opendir(sdir);
    struct dirent *e;
    size_t cap = 0;
    double *times = NULL;
    while (d && (e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char *p = hub_fmt("%s/%s", sdir, e->d_name);
        struct stat st;
        if (p && stat(p, &st) == 0 && S_ISDIR(st.st_mode) && (!only || !strcmp(commit, e->d_name))) {
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
    mf_status s = rdir ? snapshots(rdir, r->rev, r->rev_given, &snaps, &n_snaps) : MF_ERR_NOMEM, first = MF_ERR_NOT_FOUND;
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

static mf_status push_file(hub_file **files, size_t *n, size_t *cap, const char *what, hub_file f) {
    if (*n == *cap) {
        hub_file *g = *n < 1000000 ? realloc(*files, (*cap = *cap ? 2 * *cap : 32) * sizeof *g) : NULL;
        if (!g) {
            free(f.path), free(f.oid);
            return mf_fail(MF_ERR_NOMEM, "%s: out of memory, or more than a million files, listing it", what);
        }
        *files = g;
    }
    (*files)[(*n)++] = f;
    if (!f.path || (f.known && !f.oid)) return MF_ERR_NOMEM;
    for (char *c = f.oid; c && *c; c++) *c = (char)(*c >= 'A' && *c <= 'F' ? *c + 32 : *c);
    hub_split_part(f.path, &(*files)[*n - 1].part, &(*files)[*n - 1].n_parts, NULL);
    return MF_OK;
}

/* A file of a listing: its path checked, then its digest and size when given: lfs_oid (a SHA-256)
 * else oid (a git SHA-1). Present but malformed is refused; absent leaves it unknown. */
static mf_status listed_file(hub_file **files, size_t *n, size_t *cap, const char *what, const char *path, const char *oid,
                             json_t *size, bool lfs, bool dir) {
    if (!path || !hub_safe_relpath(path))
        return mf_fail(MF_ERR_FORMAT, "%s: the server lists a file named '%s', which would land outside the cache folder: refused",
                       what, path ? path : "(none)");
    hub_file f = {.path = mf_strdup(path), .dir = dir};
    if (!dir && (oid || size)) {
        if ((oid && !hub_is_hex(oid, lfs ? 64 : 40)) || (size && (!json_is_integer(size) || json_integer_value(size) < 0))) {
            free(f.path);
            return mf_fail(MF_ERR_FORMAT, "%s: the listing of '%s' has no valid digest and size: refused", what, path);
        }
        if (oid && size) {
            f.known = true;
            f.oid = mf_strdup(oid);
            f.size = (uint64_t)json_integer_value(size);
        }
    }
    return push_file(files, n, cap, what, f);
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
        json_t *lfs = json_object_get(e, "lfs");
        if (!json_is_object(lfs)) lfs = NULL;
        const bool dir = type && strcmp(type, "file");
        s = listed_file(files, n, cap, what, path, json_string_value(json_object_get(lfs ? lfs : e, "oid")),
                        json_object_get(lfs ? lfs : e, "size"), lfs != NULL, dir);
    }
    json_decref(j);
    return s;
}

/* The files of a model info answer's "siblings" (rfilename; with ?blobs=true also size, blobId and
 * lfs.sha256), for a server without the tree API. */
static mf_status sibling_files(json_t *info, const char *what, hub_file **files, size_t *n, size_t *cap) {
    json_t *sib = json_object_get(info, "siblings"), *e;
    size_t i;
    mf_status s = MF_OK;
    json_array_foreach(sib, i, e) {
        if (s != MF_OK) break;
        json_t *lfs = json_object_get(e, "lfs");
        if (!json_is_object(lfs)) lfs = NULL;
        s = listed_file(files, n, cap, what, json_string_value(json_object_get(e, "rfilename")),
                        json_string_value(json_object_get(lfs ? lfs : e, lfs ? "sha256" : "blobId")),
                        json_object_get(lfs ? lfs : e, "size"), lfs != NULL, false);
    }
    return s;
}

/* Pages of one tree listing (Link: rel="next", maybe relative) appended to *files. *missing: the
 * server has no such API (hub_route_missing of its answer). */
static mf_status tree_pages(mf_hub *h, const char *what, char *url, hub_file **files, size_t *n, size_t *cap, bool *missing) {
    mf_status s = url ? MF_OK : MF_ERR_NOMEM;
    *missing = false;
    for (int page = 0; s == MF_OK && url; page++) {
        if (page == 1000) {
            s = mf_fail(MF_ERR_FORMAT, "%s: the file list goes on past 1000 pages: refused", what);
            break;
        }
        const hub_request rq = {.site = HUB_SITE_HF, .url = url, .accept = "application/json", .what = what};
        hub_headers hd;
        char *body;
        size_t len;
        if ((s = hub_fetch(h, &rq, 64u << 20, &body, &len, &hd)) != MF_OK) {
            *missing = page == 0 && hub_route_missing(&hd);
            break;
        }
        s = hub_hf_parse_tree(body, len, what, files, n, cap);
        free(body);
        char *next = s == MF_OK && hd.link_next[0] ? hub_url_join(url, hd.link_next) : NULL;
        if (next && !strcmp(next, url)) {
            s = mf_fail(MF_ERR_FORMAT, "%s: the file list's next page is the page itself: refused", what);
            free(next);
            next = NULL;
        }
        free(url);
        url = next;
    }
    free(url);
    return s;
}

/* Every file of the revision (the tree API, recursive), each name and digest checked. A folder the
 * answer lists without its files (a server that does not recurse) is listed on its own. */
static mf_status list_tree(mf_hub *h, const hub_ref *r, const char *what, const char *rev, hub_file **files, size_t *n,
                           bool *missing) {
    *files = NULL;
    *n = 0;
    *missing = false;
    size_t cap = 0;
    char *erev = hub_url_escape(rev, false);
    mf_status s = erev ? tree_pages(h, what, hub_fmt("%s/api/models/%s/tree/%s?recursive=true", h->hf_endpoint, r->repo, erev),
                                    files, n, &cap, missing)
                       : MF_ERR_NOMEM;
    for (size_t i = 0, asked = 0; s == MF_OK && i < *n; i++) {
        if (!(*files)[i].dir) continue;
        const char *d = (*files)[i].path;
        const size_t dl = strlen(d);
        bool has = false;
        for (size_t k = 0; k < *n && !has; k++) has = !strncmp((*files)[k].path, d, dl) && (*files)[k].path[dl] == '/';
        if (has) continue;
        if (++asked > 256) {
            s = mf_fail(MF_ERR_FORMAT, "%s: more than 256 folders to list one by one: refused", what);
            break;
        }
        char *ed = hub_url_escape(d, false);
        hub_file *sub = NULL;
        size_t n_sub = 0, sub_cap = 0;
        bool m = false;
        s = ed ? tree_pages(h, what, hub_fmt("%s/api/models/%s/tree/%s/%s?recursive=true", h->hf_endpoint, r->repo, erev, ed),
                            &sub, &n_sub, &sub_cap, &m)
               : MF_ERR_NOMEM;
        free(ed);
        if (s != MF_OK && m) s = MF_OK; /* no listing by folder either: what the root listed is all */
        for (size_t k = 0; s == MF_OK && k < n_sub; k++) { /* only what lies in that folder is taken */
            if (strncmp(sub[k].path, d, dl) || sub[k].path[dl] != '/') continue;
            bool dup = false;
            for (size_t q = 0; q < *n && !dup; q++) dup = !strcmp((*files)[q].path, sub[k].path);
            if (dup) continue;
            s = push_file(files, n, &cap, what, sub[k]);
            d = (*files)[i].path;
            memset(&sub[k], 0, sizeof sub[k]);
        }
        hub_files_free(sub, n_sub);
    }
    free(erev);
    if (s != MF_OK) {
        hub_files_free(*files, *n);
        *files = NULL;
        *n = 0;
    }
    return s;
}

/* The commit a revision names, asked as huggingface_hub's snapshot_download asks it (the model info
 * of the revision), else from the refs API, else (for main) the model info of the repository. *info:
 * a model info answer when one came (its siblings list the files). An empty commit: no route told
 * it; the HEAD of a file will (X-Repo-Commit). */
static mf_status revision_commit(mf_hub *h, const hub_ref *r, const char *what, char commit[41], json_t **info) {
    commit[0] = 0;
    *info = NULL;
    char *erev = hub_url_escape(r->rev, false);
    if (!erev) return MF_ERR_NOMEM;
    hub_headers hd;
    json_t *j = NULL;
    const char *sha = NULL;
    for (int route = 0; route < 3 && !sha; route++) {
        char *url = route == 0   ? hub_fmt("%s/api/models/%s/revision/%s?blobs=true", h->hf_endpoint, r->repo, erev)
                    : route == 1 ? hub_fmt("%s/api/models/%s/refs", h->hf_endpoint, r->repo)
                    : !strcmp(r->rev, "main") && !*info ? hub_fmt("%s/api/models/%s?blobs=true", h->hf_endpoint, r->repo)
                                                         : NULL;
        if (!url) break;
        mf_status s = fetch_json(h, url, what, &j, &hd);
        free(url);
        if (s != MF_OK) {
            if (hub_route_missing(&hd)) continue;
            free(erev);
            json_decref(*info);
            *info = NULL;
            return s;
        }
        if (route == 1) { /* {"branches": [{"name", "targetCommit"}], "tags": [...]} */
            static const char *const kinds[] = {"branches", "tags", "converts"};
            for (size_t k = 0; k < 3 && !sha; k++) {
                json_t *b;
                size_t i;
                json_array_foreach(json_object_get(j, kinds[k]), i, b) {
                    const char *name = json_string_value(json_object_get(b, "name"));
                    const char *ref = json_string_value(json_object_get(b, "ref")); /* refs/heads/NAME */
                    if ((name && !strcmp(name, r->rev)) || (ref && !strcmp(ref, r->rev))) {
                        sha = json_string_value(json_object_get(b, "targetCommit"));
                        if (!sha) sha = "";
                        break;
                    }
                }
            }
        } else {
            sha = json_string_value(json_object_get(j, "sha"));
        }
        if (sha && !is_commit(sha)) {
            mf_status s2 = mf_fail(MF_ERR_FORMAT, "%s: the commit of '%s' is '%s', not 40 hex digits: refused", what, r->rev, sha);
            json_decref(j);
            json_decref(*info);
            *info = NULL;
            free(erev);
            return s2;
        }
        if (sha) snprintf(commit, 41, "%s", sha);
        if (route != 1 && !*info) *info = j;
        else json_decref(j);
        j = NULL;
    }
    free(erev);
    return MF_OK;
}

/* huggingface_hub's get_hf_file_metadata: a HEAD of the file's resolve URL, following redirects on
 * the endpoint's own host only (a renamed repository), read as it reads it: X-Repo-Commit,
 * X-Linked-Etag else ETag (W/ and quotes dropped), X-Linked-Size else (not redirected)
 * Content-Length. The tag must be a SHA-256 or git SHA-1 to be checked; anything else is refused. */
static mf_status file_metadata(mf_hub *h, const char *url, const char *what, char commit[41], hub_file *f) {
    char *u = mf_strdup(url);
    hub_headers hd;
    mf_status s = u ? MF_OK : MF_ERR_NOMEM;
    int hops = 0;
    for (; s == MF_OK; hops++) {
        if (hops > 10) {
            s = mf_fail(MF_ERR_IO, "%s: %s redirects in a loop (more than 10 redirects): the server or a proxy is misconfigured",
                        what, url);
            break;
        }
        const hub_request rq = {.site = HUB_SITE_HF, .url = u, .what = what, .head = true, .no_redirects = true};
        if ((s = hub_fetch(h, &rq, 0, NULL, NULL, &hd)) != MF_OK) break;
        if (hd.status < 300) break;
        char *next = hub_url_join(u, hd.location);
        if (!next) {
            s = mf_fail(MF_ERR_FORMAT, "%s: the server redirects to '%s', which is not a URL", what, hd.location);
            break;
        }
        if (!hub_same_host(next, h->hf_endpoint)) { /* the storage host: the answer in hand is the metadata */
            free(next);
            break;
        }
        free(u);
        u = next;
    }
    free(u);
    if (s != MF_OK) return s;
    if (!commit[0] && is_commit(hd.repo_commit)) memcpy(commit, hd.repo_commit, 41);
    const char *tag = hd.linked_etag[0] ? hd.linked_etag : hd.etag;
    const int64_t size = hd.linked_size >= 0 ? hd.linked_size : hd.status < 300 ? hd.content_length : -1;
    if (!hub_is_hex(tag, 64) && !hub_is_hex(tag, 40))
        return mf_fail(MF_ERR_FORMAT, "%s: the server names the file by the ETag '%s', not a SHA-256 or git SHA-1 that minfer can "
                       "check: refused", what, tag);
    if (size < 0)
        return mf_fail(MF_ERR_FORMAT, "%s: the server tells no size (no X-Linked-Size or Content-Length): refused", what);
    if (f->known && (strcasecmp(f->oid, tag) || f->size != (uint64_t)size))
        return mf_fail(MF_ERR_FORMAT, "%s: the server's ETag %s and size %lld disagree with its listing (%s, %llu): refused", what,
                       tag, (long long)size, f->oid, (unsigned long long)f->size);
    free(f->oid);
    if (!(f->oid = mf_strdup(tag))) return MF_ERR_NOMEM;
    for (char *c = f->oid; *c; c++) *c = (char)(*c >= 'A' && *c <= 'F' ? *c + 32 : *c);
    f->size = (uint64_t)size;
    f->known = true;
    return MF_OK;
}

/* The files of the revision: the tree API, else the model info's siblings, else (a server with only
 * the resolve route, as hf_hub_download needs) the file the selector names, with its split parts. */
static mf_status list_files(mf_hub *h, const hub_ref *r, const char *what, const char *rev, bool info_tried, json_t **info,
                            hub_file **files, size_t *n) {
    bool missing;
    mf_status s = list_tree(h, r, what, rev, files, n, &missing);
    if (s == MF_OK || !missing) return s;
    size_t cap = 0;
    if (!*info && !info_tried) { /* the model info, for its siblings */
        char *erev = hub_url_escape(r->rev, false);
        char *url = erev ? hub_fmt("%s/api/models/%s/revision/%s?blobs=true", h->hf_endpoint, r->repo, erev) : NULL;
        hub_headers hd;
        s = url ? fetch_json(h, url, what, info, &hd) : MF_ERR_NOMEM;
        free(erev), free(url);
        if (s != MF_OK && !hub_route_missing(&hd)) return s;
    }
    if (*info && json_is_array(json_object_get(*info, "siblings"))) {
        s = sibling_files(*info, what, files, n, &cap);
    } else if (strlen(r->sel) > 5 && !strcasecmp(r->sel + strlen(r->sel) - 5, ".gguf")) {
        uint32_t part, n_parts;
        size_t base;
        hub_split_part(r->sel, &part, &n_parts, &base);
        s = MF_OK;
        for (uint32_t k = 1; s == MF_OK && k <= n_parts; k++) {
            char *p = n_parts > 1 ? hub_fmt("%.*s-%05u-of-%05u.gguf", (int)base, r->sel, k, n_parts) : mf_strdup(r->sel);
            s = p ? listed_file(files, n, &cap, what, p, NULL, NULL, false, false) : MF_ERR_NOMEM;
            free(p);
        }
    } else {
        s = mf_fail(MF_ERR_NOT_FOUND,
                    "%s: 404 Not Found for its file list (the tree and model info routes): no such repository or revision "
                    "(or a private one: set HF_TOKEN), or a server that only serves files: then name the file, as %s:FILE.gguf",
                    what, what);
    }
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
    char what[700];
    snprintf(what, sizeof what, "hf:%s%s%s", r->repo, r->rev_given ? "@" : "", r->rev_given ? r->rev : "");
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
    char commit[41] = "";
    json_t *info = NULL;
    if (is_commit(r->rev)) memcpy(commit, r->rev, 41);
    else if ((s = revision_commit(h, r, what, commit, &info)) != MF_OK) return s;
    hub_file *files = NULL;
    size_t n_files = 0, *idx = NULL, n = 0;
    s = list_files(h, r, what, commit[0] ? commit : r->rev, !is_commit(r->rev), &info, &files, &n_files);
    json_decref(info);
    if (s != MF_OK) return s;
    if ((s = hub_select(files, n_files, r->sel, what, &idx, &n)) != MF_OK) {
        hub_files_free(files, n_files);
        return s;
    }
    char *erev = hub_url_escape(r->rev, false);
    for (size_t k = 0; s == MF_OK && k < n; k++) { /* what the listing did not tell, and the commit, from HEAD */
        hub_file *f = &files[idx[k]];
        if (f->known && commit[0]) continue;
        char *esc = hub_url_escape(f->path, true);
        char *url = esc && erev ? hub_fmt("%s/%s/resolve/%s/%s", h->hf_endpoint, r->repo, commit[0] ? commit : erev, esc) : NULL;
        char *fwhat = hub_fmt("%s:%s", what, f->path);
        s = url && fwhat ? file_metadata(h, url, fwhat, commit, f) : MF_ERR_NOMEM;
        free(esc), free(url), free(fwhat);
    }
    free(erev);
    if (s == MF_OK && !commit[0])
        s = mf_fail(MF_ERR_FORMAT, "%s: the server tells no commit for the revision '%s' (no X-Repo-Commit): refused", what, r->rev);
    char *rdir = s == MF_OK ? repo_dir(h, r->repo) : NULL;
    char *rname = rdir ? strrchr(rdir, '/') + 1 : NULL;
    if (s == MF_OK && !rdir) s = MF_ERR_NOMEM;
    uint64_t missing = 0;
    int n_missing = 0;
    for (size_t k = 0; s == MF_OK && k < n; k++) {
        const hub_file *f = &files[idx[k]];
        char *blob = hub_fmt("%s/blobs/%s", rdir, f->oid);
        uint64_t have;
        if (blob && !(hub_file_size(blob, &have) && have == f->size)) missing += f->size, n_missing++;
        free(blob);
    }
    if (s == MF_OK && n_missing) {
        char sz[32];
        hub_note(h, "%s%s%s is not cached; downloading %d file%s (%s) from %s into %s", what, r->sel[0] ? ":" : "", r->sel,
                 n_missing, n_missing == 1 ? "" : "s", hub_bytes_str(missing, sz, sizeof sz), h->hf_endpoint, rdir);
    }
    for (size_t k = 0; s == MF_OK && k < n; k++) {
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
    if (s == MF_OK && strcmp(r->rev, commit)) { /* refs/REV holds its commit, as huggingface_hub writes it */
        char *ref = hub_fmt("%s/refs/%s", rdir, r->rev);
        s = ref ? hub_write_atomic(ref, commit, 40) : MF_ERR_NOMEM;
        free(ref);
    }
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
        if (!rdir || snapshots(rdir, "main", false, &snaps, &n_snaps) != MF_OK) s = MF_ERR_NOMEM;
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

/* Remove the ref files under dir (refs/main, refs/v2, refs/refs/pr/1) and then the folders. */
static void remove_refs(const char *dir, int depth) {
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        char *p = hub_fmt("%s/%s", dir, e->d_name);
        struct stat st;
        if (p && lstat(p, &st) == 0) {
            if (S_ISDIR(st.st_mode) && depth < 8) remove_refs(p, depth + 1);
            else if (S_ISREG(st.st_mode)) unlink(p);
        }
        free(p);
    }
    if (d) closedir(d);
    rmdir(dir);
}

mf_status hub_hf_remove(mf_hub *h, const mf_hub_model *m, uint64_t *freed) {
    hub_ref r;
    mf_status s = hub_ref_parse(m->ref, &r);
    if (s != MF_OK) return s;
    char *rdir = repo_dir(h, r.repo), **snaps = NULL, *sdir = rdir ? hub_fmt("%s/snapshots", rdir) : NULL;
    size_t n_snaps = 0;
    if (!sdir || snapshots(rdir, "main", false, &snaps, &n_snaps) != MF_OK) s = MF_ERR_NOMEM;
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
    if (sdir && rmdir(sdir) == 0) { /* nothing of the repository is left: its folder goes, refs of every revision too */
        char *refd = hub_fmt("%s/refs", rdir);
        if (refd) remove_refs(refd, 0);
        if (bdir) rmdir(bdir);
        rmdir(rdir);
        free(refd);
    }
    for (size_t u = 0; u < n_used; u++) free(used[u]);
    free(used);
    free(bdir);
    free_names(snaps, n_snaps);
    free(sdir);
    free(rdir);
    return s;
}
