/* hub_internal.h: what the files of src/hub share: the handle, file-system helpers (paths, locks,
 * hashes, names from servers checked before use), HTTP requests to memory with retries and error
 * messages per site, the blob downloader, and the two protocols (hub_hf.c, hub_ollama.c). */
#ifndef MF_HUB_INTERNAL_H
#define MF_HUB_INTERNAL_H

#include "minfer/hub.h"
#include "core/core.h"
#include "core/file.h"

#include <curl/curl.h>
#include <stdio.h>

struct mf_hub {
    char *hf_endpoint;     /* no trailing slash */
    char *hf_token;        /* NULL: none */
    char *hf_cache;        /* .../hub */
    char *ollama_registry; /* NULL: https://HOST of the name */
    char *ollama_models;
    char *ollama_system;   /* read-only second store (the Linux service's); NULL: none */
    char *ollama_token;    /* a registry's anonymous Bearer token (WWW-Authenticate challenge), NULL: none */
    char *ollama_token_url; /* the URL whose host it is for */
    bool offline;
    int connections;
    double retry_delay_s;
    mf_hub_progress_fn progress;
    void *progress_user;
};

/* ---- hub_fs.c ---- */
/* printf into a new string (caller frees); NULL (MF_ERR_NOMEM recorded) on failure. */
char *hub_fmt(const char *fmt, ...) MF_PRINTF(1, 2);
/* mkdir -p. */
mf_status hub_mkdirs(const char *dir);
/* The parent folder of path, made (mkdir -p). */
mf_status hub_mkdirs_parent(const char *path);
/* Whether path is a regular file (symlinks followed), and its size. */
bool hub_file_size(const char *path, uint64_t *size);
/* Exclusive lock on a lock file (created with its folder). Tells the user (a NOTE) when another
 * process holds it, then waits. *fd: close with hub_unlock. */
mf_status hub_lock(mf_hub *h, const char *path, const char *what, int *fd);
void hub_unlock(int fd);
/* Replace path with data atomically (temporary file, fsync, rename). */
mf_status hub_write_atomic(const char *path, const void *data, size_t n);
/* Point link at target (a relative path) atomically: symlink to a temporary name, rename. */
mf_status hub_symlink_atomic(const char *target, const char *link);
/* An incremental digest: 64 hex digits are a SHA-256 of the bytes, 40 a git blob SHA-1 ("blob N\0"
 * then the bytes), as Hugging Face names its LFS and plain files (size: all bytes, for git's header).
 * hub_digest_end writes the lowercase hex (65 bytes) and frees; hub_digest_free drops it. */
typedef struct hub_digest {
    void *ctx;
    size_t hex_len;
} hub_digest;
mf_status hub_digest_begin(hub_digest *g, size_t hex_len, uint64_t size);
void hub_digest_update(hub_digest *g, const void *data, size_t n);
void hub_digest_end(hub_digest *g, char *out);
void hub_digest_free(hub_digest *g);
/* n hex digits (lowercase or upper) and nothing else. */
bool hub_is_hex(const char *s, size_t n);
/* A relative path from a server that may be used under a folder: no leading '/', no empty, "." or
 * ".." component, no backslash or control character, at most 1024 bytes. */
bool hub_safe_relpath(const char *p);
/* Format a byte count as "3.6 MB" into buf. */
const char *hub_bytes_str(uint64_t n, char *buf, size_t size);
/* Send a NOTE line to the progress callback (printf format). */
void hub_note(mf_hub *h, const char *fmt, ...) MF_PRINTF(2, 3);

/* ---- hub_http.c ---- */
typedef enum hub_site { HUB_SITE_HF, HUB_SITE_OLLAMA } hub_site;

/* What a response said that the protocols need. Strings are NUL-terminated, "" when absent. For a
 * redirected request, the first response's headers are in hub (the server that was asked) and the
 * last one's in the rest. */
typedef struct hub_headers {
    long status;
    char etag[80];             /* the final response's, normalized (no W/, no quotes) */
    char linked_etag[80];      /* X-Linked-Etag of any response in the chain, normalized */
    char repo_commit[48];      /* X-Repo-Commit */
    char error_code[64];       /* X-Error-Code */
    char error_message[256];   /* X-Error-Message */
    char content_range[96];
    char link_next[1024];      /* the URL of Link: <...>; rel="next" (as sent: maybe relative) */
    char location[2048];       /* Location of this response (as sent: maybe relative) */
    char www_auth[512];        /* WWW-Authenticate of this response */
    char accept_ranges[16];
    int64_t content_length;    /* -1 when absent */
    int64_t linked_size;       /* X-Linked-Size of any response in the chain; -1 when absent */
    int64_t retry_after_s;     /* -1 when absent */
    int n_responses;           /* 1 + redirects followed */
} hub_headers;

/* A request to be made. */
typedef struct hub_request {
    hub_site site;
    const char *url;
    const char *accept;   /* Accept header or NULL */
    const char *what;     /* for messages: "hf:org/repo", "ollama:llama3.2" */
    bool head;            /* HEAD instead of GET */
    bool no_redirects;    /* a 3xx is the answer (its Location in the headers), not followed */
    bool token_request;   /* to a registry's token service: a 401 there is final */
} hub_request;

/* Prepare an easy handle with minfer's settings: redirects (at most 10, http(s) only), timeouts, a
 * stall limit, and the token only for Hugging Face requests to the endpoint's own host (libcurl drops it on a
 * redirect to another host, and hub_curl_auth is consulted for every URL we pick ourselves). */
CURL *hub_curl_new(mf_hub *h, hub_site site, const char *url, char *errbuf, hub_headers *hd, struct curl_slist **list,
                   const char *accept);
/* Whether url is on the same scheme, host and port as the Hugging Face endpoint. */
bool hub_same_host(const char *url, const char *base);
/* Header callback state reset and parsing, for the downloader too. */
size_t hub_header_cb(char *buf, size_t size, size_t n, void *user);
void hub_headers_reset(hub_headers *hd);

/* GET (or HEAD) into memory, at most max bytes, retrying 408/429/5xx and transport errors with
 * backoff. Success is a 2xx answer (or a 3xx with no_redirects); anything else fails with a message
 * for the site (hub_http_error).
 * *body: caller frees (NUL-terminated), may be NULL for HEAD. */
mf_status hub_fetch(mf_hub *h, const hub_request *rq, size_t max, char **body, size_t *len, hub_headers *hd);
/* The message for a failed answer: status, the server's own words, and what to do. */
mf_status hub_http_error(mf_hub *h, hub_site site, const char *what, const hub_headers *hd, int tries);
/* Whether a status is worth retrying (408, 429, 5xx). */
bool hub_retryable(long status);
/* Wait before retry number `attempt` (1, 2, ...): retry_delay_s doubled each time, or the server's
 * Retry-After when given (at most 60 s). */
void hub_backoff(mf_hub *h, int attempt, int64_t retry_after_s);
/* Percent-encode a path for a URL, keeping '/' when keep_slash. Caller frees. */
char *hub_url_escape(const char *s, bool keep_slash);
/* The absolute URL a (maybe relative) reference ref names from the page base. Caller frees; NULL
 * when either is not a URL. */
char *hub_url_join(const char *base, const char *ref);
/* Whether a failed answer says "no such route here" rather than "no such repository": 400, 404,
 * 405 or 501 without one of the Hub's own error codes for a repository or revision. The callers
 * then try another route of the API, so that a server with only some of them still works. */
bool hub_route_missing(const hub_headers *hd);

/* ---- hub_download.c ---- */
/* One file to download into a content-addressed place. */
typedef struct hub_blob {
    hub_site site;
    const char *url;        /* where it is asked for (may redirect) */
    const char *what;       /* for messages */
    const char *name;       /* for progress */
    const char *final_path; /* appears only complete and verified */
    const char *lock_path;
    const char *digest;     /* 64 hex: SHA-256; 40 hex: git blob SHA-1 */
    uint64_t size;
    int file, n_files;
} hub_blob;

/* Download b (resuming its partial file, over up to h->connections ranges), verify size and digest,
 * and rename it to its final path. Under the lock: if another process finished it meanwhile, done.
 * *cached: the final file was there already. */
mf_status hub_download(mf_hub *h, const hub_blob *b, bool *cached);
/* The partial file beside a final path: caller frees. */
char *hub_partial_path(const char *final_path);
/* The state file of a partial download (s: len bytes, modified): "minfer-partial 1", size, digest,
 * chunk size, then the bytes on disk of each chunk. False unless it is for this size and digest and
 * every number fits; then *chunk, done[0..*n_chunks) (room for 4096) are set. */
bool hub_parse_state(char *s, size_t len, uint64_t size, const char *digest, uint64_t *chunk, uint64_t *done,
                     uint32_t *n_chunks);
/* "bytes A-B/TOTAL" with A <= B < TOTAL, decimal digits only. */
bool hub_parse_content_range(const char *v, uint64_t *a, uint64_t *b, uint64_t *total);

/* ---- hub_ref.c ---- */
/* A reference taken apart. */
typedef enum hub_ref_kind { HUB_REF_PATH, HUB_REF_HF, HUB_REF_OLLAMA } hub_ref_kind;
typedef struct hub_ref {
    hub_ref_kind kind;
    char repo[260];   /* hf: ORG/REPO */
    char sel[1100];   /* hf: QUANT or FILE, "" when none */
    char rev[256];    /* hf: the revision after '@' (branch, tag, commit, refs/pr/N); "main" by default */
    bool rev_given;   /* hf: '@REV' was written */
    char host[256];   /* ollama: registry host (registry.ollama.ai) */
    char ns[128];     /* ollama: namespace (library) */
    char model[128];  /* ollama: model */
    char tag[130];    /* ollama: tag (latest) */
    char scheme[8];   /* ollama: "https", or "http" when the name says http:// */
} hub_ref;
/* Parse hf:ORG/REPO[@REV][:SEL] and ollama:[SCHEME://][HOST/][NS/]MODEL[:TAG]; anything else is
 * HUB_REF_PATH. MF_ERR_ARG names the bad part. */
mf_status hub_ref_parse(const char *s, hub_ref *r);
/* huggingface_hub's rule for a repository id (validate_repo_id): ORG/NAME of [A-Za-z0-9_.-], each
 * part starting and ending with a letter, digit or '_', no "--" or "..", at most 96 bytes a part,
 * not ending in ".git". */
bool hub_valid_repo_id(const char *s);

/* A GGUF file of a listing (a repository's tree, or a snapshot on disk). */
typedef struct hub_file {
    char *path;      /* relative to the repository root */
    char *oid;       /* its digest: sha256 (LFS) or git sha1; NULL on disk */
    uint64_t size;
    uint32_t part, n_parts; /* from -NNNNN-of-MMMMM.gguf; 1 and 1 for a single file */
    bool known;      /* digest and size came with the listing (else a HEAD of the file tells them) */
    bool dir;        /* a folder of the tree listing, not a file */
} hub_file;
/* The files of one model chosen by sel from files (all parts, in order). *idx: a new array of
 * indexes into files (caller frees), *n its length. MF_ERR_NOT_FOUND lists the choices; what names
 * the repository in messages (and the hf: references it suggests). */
mf_status hub_select(const hub_file *files, size_t n_files, const char *sel, const char *what, size_t **idx,
                     size_t *n);
/* The quantization in a file name ("Q4_K_M" of "x-q4_k_m-00001-of-00002.gguf"), "" if none. */
void hub_quant_of_name(const char *name, char *out, size_t size);
/* Parse the split suffix of a path; false when it has none (then part = n_parts = 1). */
bool hub_split_part(const char *path, uint32_t *part, uint32_t *n_parts, size_t *base_len);
void hub_files_free(hub_file *f, size_t n);

/* ---- hub_hf.c, hub_ollama.c ---- */
/* One page of the tree API's answer appended to *files, folders included (each path and digest
 * checked: a path that would leave the snapshot folder, or a malformed digest, is MF_ERR_FORMAT; a
 * file without digest or size is kept with known false). */
mf_status hub_hf_parse_tree(const char *body, size_t len, const char *what, hub_file **files, size_t *n, size_t *cap);
/* A layer of an Ollama manifest. */
#define HUB_MAX_LAYERS 64
typedef struct hub_layer {
    char digest[72]; /* sha256:HEX, lowercase */
    char kind[40];   /* the media type's last word: model, template, params, license; config */
    uint64_t size;
} hub_layer;
/* The config ([0]) and layers of a manifest (schema 2, at most 63 layers), each digest and size
 * checked; *model: the index of the model layer (there must be one). ls: room for HUB_MAX_LAYERS. */
mf_status hub_ollama_parse_manifest(const char *body, size_t len, const char *what, hub_layer *ls, int *n, int *model);
mf_status hub_hf_resolve(mf_hub *h, const hub_ref *r, unsigned flags, char **path);
mf_status hub_hf_list(mf_hub *h, mf_hub_model **models, size_t *n, size_t *cap);
mf_status hub_hf_remove(mf_hub *h, const mf_hub_model *m, uint64_t *freed);
mf_status hub_ollama_resolve(mf_hub *h, const hub_ref *r, unsigned flags, char **path);
mf_status hub_ollama_list(mf_hub *h, mf_hub_model **models, size_t *n, size_t *cap);
mf_status hub_ollama_remove(mf_hub *h, const mf_hub_model *m, uint64_t *freed);
/* Append a model to a growing list (copies the strings). */
mf_status hub_models_push(mf_hub_model **models, size_t *n, size_t *cap, const char *name, const char *ref,
                          const char *source, const char *path, uint32_t n_parts, uint64_t size);

#endif /* MF_HUB_INTERNAL_H */
