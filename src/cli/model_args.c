/* model_args.c: the model, prompt and context flags of `minfer run` and `minfer chat` (see
 * model_args.h). */
#include "model_args.h"
#include "cli.h"

#include <errno.h>
#include <unistd.h>

void cli_model_opts_init(cli_model_opts *o) {
    memset(o, 0, sizeof *o);
    o->ubatch = 512;
}

void cli_model_opts_free(cli_model_opts *o) {
    free(o->prompt_text);
    o->prompt_text = NULL;
}

bool cli_end_of_options(const char *arg, cli_model_opts *o) {
    if (o->end_of_options || strcmp(arg, "--")) return false;
    o->end_of_options = true;
    return true;
}

static bool is_any(const char *a, const char *const *names) {
    for (; *names; names++)
        if (!strcmp(a, *names)) return true;
    return false;
}

int cli_model_arg(int argc, char **argv, int *i, cli_model_opts *o) {
    const char *a = argv[*i];
    if (!strcmp(a, "--no-fuse")) return o->no_fuse = true, 1;
    if (!strcmp(a, "--no-mmap")) return o->no_mmap = true, 1;
    if (!strcmp(a, "-nr") || !strcmp(a, "--no-repack")) return o->no_repack = true, 1;
    static const char *const model[] = {"-m", "--model", NULL}, *const prompt[] = {"-p", "--prompt", NULL},
                             *const file[] = {"-f", "--file", NULL},
                             *const sys[] = {"-sys", "--system", "--system-prompt", NULL},
                             *const ctx[] = {"-c", "--ctx", "--ctx-size", NULL},
                             *const thr[] = {"-t", "--threads", NULL}, *const batch[] = {"-b", "--batch-size", NULL},
                             *const ub[] = {"-ub", "--ubatch", "--ubatch-size", NULL},
                             *const kv[] = {"--kv-type", NULL}, *const ctk[] = {"-ctk", "--cache-type-k", NULL},
                             *const ctv[] = {"-ctv", "--cache-type-v", NULL},
                             *const ngl[] = {"-ngl", "--gpu-layers", "--n-gpu-layers", NULL};
    const char *const *const all[] = {model, prompt, file, sys, ctx, thr, batch, ub, kv, ctk, ctv, ngl};
    bool known = false;
    for (size_t k = 0; k < CLI_ARRAY_LEN(all); k++) known |= is_any(a, all[k]);
    if (!known) return 0;
    if (*i + 1 >= argc) {
        cli_error("%s needs a value", a);
        return -1;
    }
    const char *v = argv[++*i];
    if (is_any(a, model)) o->model = v;
    else if (is_any(a, prompt)) {
        if (o->prompt) {
            cli_error("%s: the prompt is given twice", a);
            return -1;
        }
        o->prompt = v;
    } else if (is_any(a, file)) o->prompt_file = v;
    else if (is_any(a, sys)) o->system = v;
    else if (is_any(a, ctx)) return cli_parse_int(a, v, 1, 1 << 24, &o->n_ctx) ? 1 : -1;
    else if (is_any(a, thr)) return cli_parse_int(a, v, 1, 1 << 20, &o->threads) ? 1 : -1;
    else if (is_any(a, ub)) {
        o->ubatch_set = true;
        return cli_parse_int(a, v, 1, 8192, &o->ubatch) ? 1 : -1;
    } else if (is_any(a, batch)) {
        /* minfer has one prefill chunk size: -b sets it unless -ub does */
        long long b;
        if (!cli_parse_int(a, v, 1, 1 << 20, &b)) return -1;
        if (!o->ubatch_set) o->ubatch = b < 8192 ? b : 8192;
    } else if (is_any(a, ngl)) {
        long long n;
        if (!cli_parse_int(a, v, -1, 1 << 20, &n)) return -1;
        if (n != 0) cli_error("note: %s %s is accepted and ignored: minfer runs the model on the CPU (it has no GPU "
                              "backend to offload layers to)", a, v);
    } else {
        if (strcmp(v, "f16") && strcmp(v, "f32")) {
            cli_error("%s: '%s' is not a KV cache type minfer has (f16 or f32)", a, v);
            return -1;
        }
        if (is_any(a, ctk)) o->ctk = v;
        else if (is_any(a, ctv)) o->ctv = v;
        else o->ctk = o->ctv = v;
    }
    return 1;
}

bool cli_model_positional(cli_model_opts *o, const char *cmd, const char *arg) {
    if (!o->model) {
        o->model = arg;
    } else if (!o->prompt && !o->prompt_file) {
        o->prompt = arg;
    } else {
        cli_error("%s: unexpected argument '%s' (quote the prompt)", cmd, arg);
        return false;
    }
    return true;
}

char *cli_read_stdin(void) {
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        n += fread(buf + n, 1, cap - n - 1, stdin);
        if (n < cap - 1) break;
        char *nb = realloc(buf, cap * 2);
        if (!nb) free(buf);
        buf = nb;
        cap *= 2;
    }
    if (buf && ferror(stdin)) {
        cli_error("cannot read standard input: %s", strerror(errno));
        free(buf);
        return NULL;
    }
    if (buf) buf[n] = 0;
    return buf;
}

static char *read_text_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        cli_error("-f: cannot open '%s': %s", path, strerror(errno));
        return NULL;
    }
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    for (size_t got; buf && (got = fread(buf + n, 1, cap - n - 1, f)) > 0;) {
        n += got;
        if (n + 1 < cap) continue;
        char *nb = realloc(buf, cap *= 2);
        if (!nb) free(buf);
        buf = nb;
    }
    const bool err = ferror(f);
    fclose(f);
    if (!buf || err) {
        cli_error("-f: cannot read '%s'%s", path, buf ? "" : ": out of memory");
        free(buf);
        return NULL;
    }
    buf[n] = 0;
    return buf;
}

/* Text that is not valid UTF-8 would be dropped or mangled on the way to the model: refuse it. */
static bool check_utf8(const char *cmd, const char *what, const char *s) {
    if (!s) return true;
    const size_t n = strlen(s), ok = mf_utf8_valid_len(s, n);
    if (ok == n) return true;
    cli_error("%s: the %s is not valid UTF-8 (byte %zu of %zu is 0x%02x); convert it first, e.g. with iconv", cmd, what,
              ok + 1, n, (unsigned char)s[ok]);
    return false;
}

bool cli_model_finish(cli_model_opts *o, const char *cmd) {
    if (o->prompt && o->prompt_file) {
        cli_error("%s: give the prompt as an argument or with -f, not both", cmd);
        return false;
    }
    const char *src = o->prompt_file ? o->prompt_file : o->prompt && !strcmp(o->prompt, "-") ? "-" : NULL;
    if (src) {
        o->prompt_text = strcmp(src, "-") ? read_text_file(src) : cli_read_stdin();
        if (!o->prompt_text) return false;
        o->prompt = o->prompt_text;
    }
    if (!check_utf8(cmd, "prompt", o->prompt) || !check_utf8(cmd, "system prompt", o->system)) return false;
    if (o->ctk && o->ctv && strcmp(o->ctk, o->ctv)) {
        cli_error("%s: -ctk %s and -ctv %s: minfer keeps K and V in one type; give the same one", cmd, o->ctk, o->ctv);
        return false;
    }
    const char *kv = o->ctk ? o->ctk : o->ctv;
    o->kv_f32 = kv && !strcmp(kv, "f32");
    const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    if (cpus > 0 && o->threads > cpus) {
        cli_error("warning: -t %lld: this machine has %ld CPUs online; using %ld (more threads than CPUs only wait "
                  "on each other)", o->threads, cpus, cpus);
        o->threads = cpus;
    }
    return true;
}

mf_context_params cli_model_context_params(const cli_model_opts *o) {
    mf_context_params cp = mf_context_default_params();
    cli_context_env(&cp);
    cp.n_ctx = (int32_t)o->n_ctx;
    cp.n_threads = (int32_t)o->threads;
    cp.n_ubatch = (int32_t)o->ubatch;
    cp.kv_f32 = o->kv_f32;
    cp.fusions = o->no_fuse ? 0 : MF_FUSION_ALL;
    return cp;
}

void cli_model_usage(FILE *f) {
    fputs("  -m, --model FILE       the GGUF model (or the first argument)\n"
          "  -p, --prompt TEXT      the user message (or the second argument; - reads standard input)\n"
          "  -f, --file FILE        read the user message from FILE (- : standard input)\n"
          "  -sys, --system TEXT    system prompt\n"
          "  -c, --ctx-size N       context size in tokens (also --ctx)\n"
          "  -t, --threads N        CPU threads (default: all; capped at the CPUs online)\n"
          "  -ub, --ubatch-size N   prefill chunk size (default 512; -b N sets it too, minfer has one)\n"
          "  -ctk, -ctv, --kv-type f16|f32  KV cache type (default f16; K and V share it)\n"
          "  -ngl N                 accepted and ignored: minfer runs on the CPU\n"
          "  --no-fuse              disable the graph fusion passes\n"
          "  --no-mmap              read the model into memory (huge pages) instead of mapping it\n"
          "  -nr, --no-repack       keep the weights in the file's layout only (no packed copies for the kernels)\n"
          "  --                     end of options: what follows is the model and the prompt\n",
          f);
}
