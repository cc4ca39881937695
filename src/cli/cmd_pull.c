/* cmd_pull.c: `minfer pull REF` (also `minfer download`): fetch a model from Hugging Face or an
 * Ollama registry into the shared caches, or bring a cached copy up to date; prints its path. */
#include "cli.h"

static void pull_usage(FILE *f) {
    fprintf(f,
            "usage: minfer pull REF [-c N] [-q]     (also: minfer download REF)\n"
            "  REF: hf:ORG/REPO[@REV][:QUANT|:FILE] or ollama:[HOST/][NAMESPACE/]NAME[:TAG] (or a cached model's name)\n"
            "       REV: a branch, tag, commit or refs/pr/N (default main)\n"
            "  -c, --connections N   parallel range requests per file, 1..16 (default 4; MINFER_PULL_CONNECTIONS)\n"
            "  -q, --quiet           no progress, only errors and the path\n"
            "Prints the model's path (the first part of a split model). Files go to the Hugging Face cache\n"
            "($HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub) or Ollama's models folder\n"
            "($OLLAMA_MODELS, else ~/.ollama/models), where huggingface_hub and Ollama find them too.\n"
            "HF_ENDPOINT, HF_TOKEN (or the token file), HF_HUB_OFFLINE=1 and MINFER_OLLAMA_REGISTRY as documented.\n");
}

int cmd_pull(int argc, char **argv) {
    const char *ref = NULL, *val;
    long long conn = 0;
    bool quiet = false;
    for (int i = 1; i < argc; i++) {
        int r;
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            pull_usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "-q") || !strcmp(argv[i], "--quiet")) {
            quiet = true;
        } else if ((r = cli_take_value(argc, argv, &i, "-c", &val)) || (r = cli_take_value(argc, argv, &i, "--connections", &val))) {
            if (r < 0 || !cli_parse_int("--connections", val, 1, 16, &conn)) return 2;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            cli_error("%s: unknown option '%s' (see minfer pull --help)", argv[0], argv[i]);
            return 2;
        } else if (ref) {
            cli_error("%s: one reference at a time ('%s' and '%s')", argv[0], ref, argv[i]);
            return 2;
        } else {
            ref = argv[i];
        }
    }
    if (!ref) {
        pull_usage(stderr);
        return 2;
    }
    const bool remote = !strncmp(ref, "hf:", 3) || !strncmp(ref, "ollama:", 7);
    mf_hub *h = cli_hub_open((int)conn, quiet);
    if (!h) return 1;
    char *path = NULL;
    mf_status s = mf_hub_resolve(h, ref, remote ? MF_HUB_UPDATE : MF_HUB_NO_DOWNLOAD, &path);
    mf_hub_free(h);
    if (s != MF_OK) {
        cli_error("%s", mf_last_error()[0] ? mf_last_error() : mf_status_str(s));
        return 1;
    }
    printf("%s\n", path);
    free(path);
    return 0;
}
