/* minfer/hub.h: models by name. A model reference is a path, the name of a cached model, or
 * hf:ORG/REPO[:QUANT|:FILE] (Hugging Face) or ollama:NAME[:TAG] (an Ollama registry); a reference
 * that is not on disk is downloaded first (resumable, verified, parallel ranges), into the caches
 * that huggingface_hub and Ollama themselves use, so models they fetched are found and the reverse.
 *
 * This part is its own library, libminfer_hub (libcurl, OpenSSL's libcrypto): link it besides
 * libminfer. It is not included by minfer.h. Conventions as in minfer.h (mf_status, mf_last_error).
 * An mf_hub belongs to one thread at a time; two processes (or handles) may work on one cache at
 * once: a download takes a file lock, and the other waits for it, then uses its file. */
#ifndef MINFER_HUB_H
#define MINFER_HUB_H

#include "minfer.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mf_hub mf_hub;

/* What a progress callback is told. */
typedef enum mf_hub_event {
    MF_HUB_NOTE,       /* message: one line for the user ("downloading ...", "waiting for ...", a retry) */
    MF_HUB_FILE_BYTES, /* file `file` of `n_files` advanced: done of total bytes */
    MF_HUB_FILE_DONE,  /* file `file` is complete and verified (cached: it was there already) */
} mf_hub_event;

typedef struct mf_hub_progress {
    mf_hub_event event;
    const char *message;   /* MF_HUB_NOTE; NULL otherwise */
    int file, n_files;     /* index of the file in this pull, and how many it has */
    const char *file_name; /* its name in the repository ("model-Q4_K_M.gguf", "sha256-..." for Ollama) */
    uint64_t done, total;  /* bytes of this file on disk, of its size */
    uint64_t fetched;      /* bytes received for it in this run (what the speed is made of) */
    double seconds;        /* since this run started on the file */
    int connections;       /* transfers in flight now */
    bool cached;           /* MF_HUB_FILE_DONE: nothing was downloaded */
} mf_hub_progress;

/* Called on the thread that downloads, at most ~10 times a second for bytes. Nonzero cancels: the
 * call then fails with MF_ERR_IO "cancelled", the partial download kept for a later resume. */
typedef int (*mf_hub_progress_fn)(const mf_hub_progress *p, void *user);

/* Where models live and how to reach the servers. Strings are copied by mf_hub_open; NULL means the
 * default given. mf_hub_params_from_env fills them as huggingface_hub and Ollama read theirs. */
typedef struct mf_hub_params {
    const char *hf_endpoint;    /* HF_ENDPOINT; default https://huggingface.co */
    const char *hf_token;       /* HF_TOKEN (else HUGGING_FACE_HUB_TOKEN); default: the token file */
    const char *hf_token_path;  /* HF_TOKEN_PATH; default $hf_home/token */
    const char *hf_hub_cache;   /* HF_HUB_CACHE (or HUGGINGFACE_HUB_CACHE); default $hf_home/hub */
    const char *hf_home;        /* HF_HOME; default $XDG_CACHE_HOME/huggingface, else ~/.cache/huggingface */
    const char *xdg_cache_home; /* XDG_CACHE_HOME */
    const char *home;           /* HOME: where ~ is */
    bool offline;               /* HF_HUB_OFFLINE=1: no network at all (Ollama references included) */
    const char *ollama_registry; /* MINFER_OLLAMA_REGISTRY: base URL; default https://registry.ollama.ai */
    const char *ollama_models;  /* OLLAMA_MODELS; default ~/.ollama/models */
    const char *ollama_system_models; /* where the Linux service of Ollama keeps its models, searched
                                       * read-only for ollama: references after ollama_models (only when
                                       * that is unset): MINFER_OLLAMA_SYSTEM_MODELS; default
                                       * /usr/share/ollama/.ollama/models; "" none */
    int connections;            /* parallel range requests per file, 1..16; default 4 */
    double retry_delay_s;       /* first pause before a retry (then doubled); default 1 */
    mf_hub_progress_fn progress; /* optional */
    void *progress_user;
} mf_hub_params;

mf_hub_params mf_hub_default_params(void);
/* Set the fields named above from the environment (pointers into it: keep it unchanged until
 * mf_hub_open). MINFER_PULL_CONNECTIONS sets connections. Bad values are ignored. */
void mf_hub_params_from_env(mf_hub_params *p);

/* MF_ERR_ARG for a bad endpoint or count; nothing is created on disk until a download. */
mf_status mf_hub_open(const mf_hub_params *p, mf_hub **out);
void mf_hub_free(mf_hub *h);
/* The Hugging Face cache (…/hub) and the Ollama models folder this handle uses. */
const char *mf_hub_hf_cache_dir(const mf_hub *h);
const char *mf_hub_ollama_dir(const mf_hub *h);

/* flags of mf_hub_resolve */
#define MF_HUB_NO_DOWNLOAD 1u /* only what is on disk: MF_ERR_NOT_FOUND otherwise */
#define MF_HUB_UPDATE 2u      /* ask the server for the latest revision even when a copy is cached (pull) */

/* The local path of the model a reference names (the first part of a split model; the others lie
 * beside it), downloading it first if it is not cached. In order:
 * - hf:ORG/REPO[@REV][:SEL]: SEL is a file of the repository (all parts of a split model come with
 *   one), else a quantization (case-insensitive: the one model whose name ends in -SEL or .SEL);
 *   without SEL the repository must hold one GGUF model (else MF_ERR_NOT_FOUND lists the choices).
 *   REV: a branch, tag, commit or refs/pr/N (default main; then any cached snapshot will do, the
 *   one refs/main names first). A cached copy is used without asking the server.
 * - ollama:[http(s)://][HOST/][NAMESPACE/]MODEL[:TAG]: a model an Ollama already pulled is used in
 *   place.
 * - an existing file, or a path that names none (a '/' and no ':'): itself, for the caller to open;
 * - the name of a cached model (mf_hub_list): exact, then a unique prefix.
 * *path: caller frees. Errors say what to do (MF_ERR_NOT_FOUND, MF_ERR_IO with the server's answer,
 * MF_ERR_FORMAT for a hostile or broken answer, MF_ERR_ARG for a malformed reference). */
mf_status mf_hub_resolve(mf_hub *h, const char *ref, unsigned flags, char **path);

/* A model in the caches. */
typedef struct mf_hub_model {
    char *name;      /* what a reference may say: the file name (HF), NAME:TAG (Ollama) */
    char *ref;       /* the full reference: hf:ORG/REPO:FILE or ollama:NAME:TAG */
    char *source;    /* "hf" or "ollama" */
    char *path;      /* the file (the first part) */
    char *type;      /* the quantization its name gives ("Q4_K_M"), "" when it gives none */
    uint32_t n_parts;
    uint64_t size;   /* all parts */
} mf_hub_model;

/* Every cached model, Hugging Face ones first (by repository), then Ollama's. Caller frees with
 * mf_hub_models_free. A cache folder that does not exist is an empty list. */
mf_status mf_hub_list(mf_hub *h, mf_hub_model **models, size_t *n);
void mf_hub_models_free(mf_hub_model *models, size_t n);
/* Free the strings of one model and zero it (for mf_hub_remove's *removed). */
void mf_hub_model_clear(mf_hub_model *m);

/* Remove the cached model a reference names (never a plain path): its snapshot entries or manifest,
 * and the blobs nothing else in that cache uses. *removed (optional) describes it (free with
 * mf_hub_model_clear); *freed (optional) is the bytes of blobs deleted. */
mf_status mf_hub_remove(mf_hub *h, const char *ref, mf_hub_model *removed, uint64_t *freed);

#ifdef __cplusplus
}
#endif

#endif /* MINFER_HUB_H */
