/* cmd_quantize.c: `minfer quantize [options] IN OUT TYPE`: convert an F32/F16/BF16 GGUF model to a
 * quantized one by llama-quantize's per-tensor rules (src/quant/qmodel.h has them; --pure,
 * --output-tensor-type and --token-embedding-type as in llama-quantize), with a progress line on
 * stderr. The output appears under OUT only when complete; Ctrl-C (SIGINT) or SIGTERM stops the work
 * and removes the temporary file. */
#include "cli.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t interrupted;

/* Stop cooperatively (the workers poll the flag between chunks of rows and the writer's temporary
 * file is removed on the way out), unlink the temporary file right away in case that takes a while,
 * and let a second signal kill the process outright. Only async-signal-safe calls here. */
static void on_signal(int sig) {
    interrupted = sig;
    mf_remove_temp_files();
    signal(sig, SIG_DFL);
}

static void quantize_usage(FILE *f) {
    fprintf(f,
            "usage: minfer quantize [options] IN OUT TYPE\n\n"
            "Converts the F32/F16/BF16 model IN to TYPE and writes OUT (atomically: OUT appears only\n"
            "when complete), choosing each tensor's type as llama-quantize does.\n"
            "TYPE: %s\n"
            "  every weight matrix gets TYPE's base type except where llama.cpp's rules give more bits:\n"
            "  output.weight (or tied token embeddings) Q6_K unless the base is Q8_0; for Q2_K and the\n"
            "  K mixtures also some attn_v, ffn_down and attn_output weights. Q3_K, Q4_K and Q5_K mean\n"
            "  Q3_K_M, Q4_K_M and Q5_K_M, as in llama-quantize. Norms and biases stay as they are; rows\n"
            "  that a block size does not divide fall back to a smaller block (Q4_K -> Q5_0, ...).\n\n"
            "  --pure                      every weight matrix in TYPE's base type (no per-tensor rules)\n"
            "  --output-tensor-type T      output.weight in type T (F32 F16 BF16 Q4_0 Q4_1 Q5_0 Q5_1 Q8_0\n"
            "                              Q2_K Q3_K Q4_K Q5_K Q6_K), also with --pure\n"
            "  --token-embedding-type T    token_embd.weight in type T, also with --pure\n"
            "  -t, --threads N             worker threads (default: all cores)\n"
            "  --dry-run                   print each tensor's type change and write nothing\n",
            mf_quant_ftype_names());
}

typedef struct {
    bool tty;
} progress_state;

static void print_shape(const int64_t *ne) {
    int dims = 1;
    for (int d = 1; d < MF_GGUF_MAX_DIMS; d++)
        if (ne[d] > 1) dims = d + 1;
    fputc('[', stderr);
    for (int d = 0; d < dims; d++) fprintf(stderr, "%s%lld", d ? ", " : "", (long long)ne[d]);
    fputc(']', stderr);
}

static void on_progress(void *user, const mf_quant_progress *p) {
    progress_state *ps = user;
    if (ps->tty ? p->done : !p->done) return; /* a terminal shows work in progress; a log, one line each */
    int width = 1;
    for (int64_t c = p->count; c >= 10; c /= 10) width++;
    fprintf(stderr, "%s[%*lld/%lld] %-34s %-5s -> %-5s ", ps->tty ? "\r\033[K" : "", width,
            (long long)p->index + 1, (long long)p->count, p->name, mf_type_name(p->from), mf_type_name(p->to));
    print_shape(p->ne);
    if (!ps->tty) fputc('\n', stderr);
    fflush(stderr);
}

static int dry_run(const char *in, const mf_quant_ftype *ft, const mf_quant_rules *rules) {
    mf_gguf *g = NULL;
    mf_status s = mf_gguf_open(in, &g);
    if (s != MF_OK) {
        cli_error_status(s, in);
        return 1;
    }
    const int64_t n = mf_gguf_n_tensors(g);
    mf_type *types = malloc((size_t)(n > 0 ? n : 1) * sizeof *types);
    int64_t *order = malloc((size_t)(n > 0 ? n : 1) * sizeof *order);
    if (!types || !order) {
        free(types);
        free(order);
        mf_gguf_free(g);
        cli_error("out of memory");
        return 1;
    }
    s = mf_quant_plan(g, ft, rules, types, order);
    if (s == MF_OK) {
        uint64_t before = 0, after = 0;
        for (int64_t k = 0; k < n; k++) {
            const int64_t i = order[k];
            const mf_gguf_tensor *t = mf_gguf_tensor_at(g, i);
            const uint64_t bytes = mf_row_size(types[i], t->ne[0]) * (uint64_t)(t->ne[1] * t->ne[2] * t->ne[3]);
            printf("%-40s %-5s -> %-5s\n", t->name, mf_type_name(t->type), mf_type_name(types[i]));
            before += t->nbytes;
            after += bytes;
        }
        printf("%.2f MiB -> %.2f MiB\n", before / 1048576.0, after / 1048576.0);
    } else {
        cli_error_status(s, in);
    }
    free(types);
    free(order);
    mf_gguf_free(g);
    return s == MF_OK ? 0 : 1;
}

/* A tensor type for an override option: one minfer can write (file types like Q4_K_M are not types). */
static bool parse_tensor_type(const char *opt, const char *arg, mf_type *out) {
    if (mf_type_from_name(arg, out) && mf_quant_type_writable(*out)) return true;
    cli_error("quantize: %s: '%s' is not a type minfer can write (one of: F32 F16 BF16 Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 "
              "Q2_K Q3_K Q4_K Q5_K Q6_K)", opt, arg);
    return false;
}

int cmd_quantize(int argc, char **argv) {
    const char *pos[3] = {0}, *threads = NULL, *output_type = NULL, *embd_type = NULL;
    int npos = 0;
    bool dry = false;
    mf_quant_rules rules = {0};
    for (int i = 1; i < argc; i++) {
        int r;
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            quantize_usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--dry-run")) {
            dry = true;
        } else if (!strcmp(argv[i], "--pure")) {
            rules.pure = true;
        } else if ((r = cli_take_value(argc, argv, &i, "-t", &threads)) != 0 ||
                   (r = cli_take_value(argc, argv, &i, "--threads", &threads)) != 0 ||
                   (r = cli_take_value(argc, argv, &i, "--output-tensor-type", &output_type)) != 0 ||
                   (r = cli_take_value(argc, argv, &i, "--token-embedding-type", &embd_type)) != 0) {
            if (r < 0) return 2;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            cli_error("quantize: unknown option '%s' (see minfer quantize --help)", argv[i]);
            return 2;
        } else if (npos < 3) {
            pos[npos++] = argv[i];
        } else {
            cli_error("quantize: unexpected argument '%s'", argv[i]);
            return 2;
        }
    }
    if (npos != 3) {
        quantize_usage(stderr);
        return 2;
    }
    const mf_quant_ftype *ft = mf_quant_ftype_find(pos[2]);
    if (!ft) {
        cli_error("quantize: unknown type '%s' (one of: %s)", pos[2], mf_quant_ftype_names());
        return 2;
    }
    if ((output_type && !parse_tensor_type("--output-tensor-type", output_type, &rules.output_type)) ||
        (embd_type && !parse_tensor_type("--token-embedding-type", embd_type, &rules.token_embd_type)))
        return 2;
    rules.set_output_type = output_type != NULL;
    rules.set_token_embd_type = embd_type != NULL;
    long long nt = 0;
    if (threads && !cli_parse_int("--threads", threads, 1, 512, &nt)) return 2;
    if (!(pos[0] = cli_model(pos[0]))) return 1;
    if (dry) return dry_run(pos[0], ft, &rules);

    struct sigaction sa = {0}, old_int, old_term;
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);

    progress_state ps = {.tty = isatty(STDERR_FILENO) != 0};
    mf_quant_params p = {.ftype = ft,
                         .rules = rules,
                         .n_threads = (int)nt,
                         .cancel = &interrupted,
                         .progress = on_progress,
                         .user = &ps};
    mf_quant_stats st;
    const mf_status s = mf_quant_model(pos[0], pos[1], &p, &st);
    if (ps.tty) fputs("\r\033[K", stderr);

    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    if (interrupted) {
        cli_error("quantize: interrupted; %s was not written", pos[1]);
        return 128 + interrupted;
    }
    if (s != MF_OK) {
        cli_error_status(s, "quantize");
        return 1;
    }
    fprintf(stderr,
            "minfer: %s: %lld tensors converted to %s, %lld copied; %.2f MiB -> %.2f MiB in %.2f s "
            "(%.1f M weights/s, %d thread%s)\n",
            pos[1], (long long)st.n_quantized, ft->name, (long long)st.n_copied, st.bytes_in / 1048576.0,
            st.bytes_out / 1048576.0, st.seconds, st.seconds > 0 ? st.values_converted / st.seconds / 1e6 : 0.0,
            st.n_threads, st.n_threads == 1 ? "" : "s");
    return 0;
}
