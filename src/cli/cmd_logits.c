/* cmd_logits.c: `minfer logits MODEL --ids FILE -o OUT.f32 [--all]`: evaluate a whitespace-separated
 * list of token ids in one sequence and write the logits as raw little-endian float32, n_vocab per
 * row: the last position, or every position with --all (row-major, the layout of the reference
 * logits in the test fixtures). The KV cache is F32 by default here, as the references use. */
#include "cli.h"

#include <errno.h>

#include <stdlib.h>

static void usage(FILE *f) {
    fprintf(f, "usage: minfer logits MODEL --ids FILE -o OUT.f32 [--all] [--ctx N] [-t N] [--kv-type f32|f16]\n"
               "  --ids FILE   token ids separated by spaces or commas, [ ] allowed (`minfer tokenize\n"
               "               --ids` output as it is); - reads standard input\n"
               "  -o FILE      output: float32 little-endian, n_vocab values per row\n"
               "  --all        logits of every position (default: the last one)\n"
               "  --ctx N      context size (default: the number of ids)\n"
               "  -t N         threads (default: all CPUs)\n"
               "  --kv-type T  KV cache type (default f32)\n");
}

/* Read token ids separated by whitespace or commas, optionally inside [ ] (the output of
 * `minfer tokenize --ids` as it is); path "-" is standard input. *ids is malloc'd. */
static bool read_ids(const char *path, int32_t **ids, int32_t *n) {
    const bool std_in = !strcmp(path, "-");
    FILE *f = std_in ? stdin : fopen(path, "r");
    if (!f) {
        cli_error("cannot open '%s': %s", path, strerror(errno));
        return false;
    }
    int32_t cap = 256, k = 0;
    int32_t *v = malloc((size_t)cap * sizeof *v);
    long long x = -1; /* the number being read, -1 between numbers */
    bool bad = false;
    for (int c; v && !bad && (c = fgetc(f)) != EOF;) {
        if (c >= '0' && c <= '9') {
            x = (x < 0 ? 0 : x) * 10 + (c - '0');
            if (x > INT32_MAX) {
                cli_error("%s: token id %lld... out of range", path, x);
                bad = true;
            }
            continue;
        }
        if (!strchr(" \t\r\n,[]", c)) {
            cli_error("%s: not a list of integers: '%c' (give token ids separated by spaces or commas)", path, c);
            bad = true;
            break;
        }
        if (x < 0) continue;
        if (k == cap) {
            int32_t *nv = realloc(v, (size_t)(cap *= 2) * sizeof *v);
            if (!nv) free(v);
            v = nv;
            if (!v) break;
        }
        v[k++] = (int32_t)x;
        x = -1;
    }
    if (v && !bad && x >= 0) { /* the last number, without a separator after it */
        int32_t *nv = k == cap ? realloc(v, (size_t)(cap + 1) * sizeof *v) : v;
        if (!nv) free(v);
        v = nv;
        if (v) v[k++] = (int32_t)x;
    }
    const bool read_error = ferror(f);
    if (!std_in) fclose(f);
    if (!v) {
        cli_error("out of memory reading '%s'", path);
        return false;
    }
    if (bad || read_error || k == 0) {
        if (!bad) cli_error("%s: %s", path, read_error ? "read error" : "no token ids");
        free(v);
        return false;
    }
    *ids = v;
    *n = k;
    return true;
}

int cmd_logits(int argc, char **argv) {
    const char *model_path = NULL, *ids_path = NULL, *out_path = NULL, *val;
    bool all = false;
    long long n_ctx = 0, threads = 0;
    bool kv_f32 = true;
    for (int i = 1; i < argc; i++) {
        int r;
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--all")) {
            all = true;
        } else if ((r = cli_take_value(argc, argv, &i, "--ids", &val))) {
            if (r < 0) return 2;
            ids_path = val;
        } else if ((r = cli_take_value(argc, argv, &i, "-o", &val))) {
            if (r < 0) return 2;
            out_path = val;
        } else if ((r = cli_take_value(argc, argv, &i, "--ctx", &val))) {
            if (r < 0 || !cli_parse_int("--ctx", val, 1, 1 << 24, &n_ctx)) return 2;
        } else if ((r = cli_take_value(argc, argv, &i, "-t", &val))) {
            if (r < 0 || !cli_parse_int("-t", val, 1, 1024, &threads)) return 2;
        } else if ((r = cli_take_value(argc, argv, &i, "--kv-type", &val))) {
            if (r < 0) return 2;
            if (strcmp(val, "f32") && strcmp(val, "f16")) {
                cli_error("--kv-type: '%s' is not f32 or f16", val);
                return 2;
            }
            kv_f32 = !strcmp(val, "f32");
        } else if (argv[i][0] == '-' && argv[i][1]) {
            cli_error("logits: unknown option '%s'", argv[i]);
            return 2;
        } else if (!model_path) {
            model_path = argv[i];
        } else {
            cli_error("logits: unexpected argument '%s'", argv[i]);
            return 2;
        }
    }
    if (!model_path || !ids_path || !out_path) {
        usage(stderr);
        return 2;
    }
    int32_t *ids = NULL, n = 0;
    if (!read_ids(ids_path, &ids, &n)) return 1;
    mf_model *m = NULL;
    mf_context *c = NULL;
    int rc = 1;
    int8_t *want = NULL;
    FILE *f = NULL;
    if (!(model_path = cli_model(model_path))) return 1;
    const mf_model_load_params lp = cli_load_params(false, false);
    mf_status st = mf_model_load_ex(model_path, &lp, &m);
    if (st) {
        cli_error_status(st, "logits");
        goto done;
    }
    mf_context_params p = mf_context_default_params();
    cli_context_env(&p);
    p.n_ctx = n_ctx ? (int32_t)n_ctx : n;
    p.n_threads = (int32_t)threads;
    p.kv_f32 = kv_f32;
    if ((st = mf_context_create(m, &p, &c))) {
        cli_error_status(st, "logits");
        goto done;
    }
    want = calloc((size_t)n, 1);
    if (!want) goto done;
    for (int32_t i = 0; i < n; i++) want[i] = (int8_t)(all || i == n - 1);
    mf_batch b = {.n_tokens = n, .tokens = ids, .logits = want};
    if ((st = mf_context_decode(c, &b))) {
        cli_error_status(st, "logits");
        goto done;
    }
    f = fopen(out_path, "wb");
    if (!f) {
        cli_error("cannot create '%s'", out_path);
        goto done;
    }
    int32_t V = mf_model_n_vocab(m);
    for (int32_t r = 0; r < mf_context_n_outputs(c); r++) {
        if (fwrite(mf_context_logits(c, r), sizeof(float), (size_t)V, f) != (size_t)V) {
            cli_error("writing '%s' failed", out_path);
            goto done;
        }
    }
    if (fclose(f) != 0) {
        f = NULL;
        cli_error("writing '%s' failed", out_path);
        goto done;
    }
    f = NULL;
    fprintf(stderr, "minfer: wrote %d x %d logits to %s\n", mf_context_n_outputs(c), V, out_path);
    rc = 0;
done:
    if (f) fclose(f);
    free(want);
    free(ids);
    mf_context_free(c);
    mf_model_free(m);
    return rc;
}
