/* cmd_bench.c: `minfer bench`, llama-bench's measurements for minfer: prompt processing (ppN: N
 * random tokens from an empty cache, one decode call that runs in ubatch chunks) and generation (tgN:
 * N one-token decodes from an empty cache; with -d D, "ppN @ dD" and "tgN @ dD": the same after D
 * random tokens of context, filled once per test and not timed; with -np P, "ppN x P" and "tgN x P":
 * P sequences at once, as llama-batched-bench does, a prompt of N tokens each in one call, or N
 * decode steps of one token per sequence; t/s counts every sequence's tokens), r repetitions after an untimed
 * warm-up, as mean and
 * sample standard deviation of tokens/s. Each test also reports what it achieved against the
 * machine's limits: weight bytes read per token x tokens/s (GB/s, the decode bound) and weight MACs
 * per token x tokens/s (GMAC/s, the prefill bound), and the process's peak resident memory. */
#include "bench_probe.h"
#include "cli.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/resource.h>

#define MAX_LIST 64

typedef struct {
    long long v[MAX_LIST];
    int n;
    bool set; /* the first value given replaces the defaults */
} int_list;

typedef struct {
    const char *paths[MAX_LIST];
    int n_models;
    int_list pp, tg, threads, ubatch, depth, par;
    long long reps;
    bool json, warmup, kv_f32, no_mmap, no_repack;
    double mem_bw, peak_gmacs; /* 0: probe */
} bench_opts;

/* Machine limits for one thread count, and where they came from. */
typedef struct {
    int32_t n_threads;
    double mem_bw, gmacs;
    const char *bw_src, *gmacs_src, *isa;
} bench_limits;

/* What a model costs per token: weights read by one decode step (every weight except the embedding
 * table, of which one row is read, unless it is also the output projection) and the MACs of the
 * 2-D weights in the same set (attention's own MACs are left out, as they depend on the context). */
typedef struct {
    char type[96];
    uint64_t size, n_params, bytes_per_token, macs_per_token;
    uint64_t macs_output; /* the output projection's share of macs_per_token */
    double load_s;
    const char *pages; /* how the page cache held the weights: mf_gguf_pages_name, or "read" (-mmp 0) */
    uint64_t packed_bytes; /* matrices copied into the kernels' layout at load (-nr: none) */
} model_info;

typedef struct {
    model_info mi;
    const char *path;
    int32_t n_threads, n_ubatch, n_prompt, n_gen, n_depth;
    int32_t n_par;         /* sequences run together (-np) */
    int32_t n_cells_start; /* cells in the cache when the timed runs began (the depth's context) */
    const char *isa;       /* the kernels the context ran (mf_isa_kernels_name) */
    double *samples_ns; /* reps */
    int32_t n_samples;
    double avg_ts, stddev_ts, avg_ns, stddev_ns;
    double gbps, gmacs; /* achieved, from avg_ts */
    bench_limits lim;
    uint64_t peak_rss;
} bench_result;

static void usage(FILE *f) {
    fprintf(f,
            "usage: minfer bench [options] MODEL [MODEL ...]\n\n"
            "Measures prompt processing (ppN) and generation (tgN) speed, as llama-bench does. Lists take\n"
            "comma-separated values or repeated flags; every combination is run.\n\n"
            "  -m, --model FILE      model (also as plain arguments)\n"
            "  -p, --n-prompt N,..   prompt lengths (default 512; 0: none)\n"
            "  -n, --n-gen N,..      generated tokens (default 128; 0: none)\n"
            "  -t, --threads N,..    threads (default: all CPUs)\n"
            "  -ub, --ubatch N,..    prefill chunk (default 512)\n"
            "  -d, --n-depth N,..    tokens of context already in the cache when a test starts (default 0;\n"
            "                        filled with random tokens once per test, not timed)\n"
            "  -np, --parallel N,..  sequences run together (default 1): N prompts in one call, or decode\n"
            "                        steps of one token per sequence (t/s counts them all)\n"
            "  -r, --repetitions N   timed runs per test (default 5)\n"
            "  -o, --output md|json  output format (default md); --json is -o json\n"
            "  --kv-type f16|f32     KV cache type (default f16)\n"
            "  -mmp, --mmap 0|1      1: map the model file (default); 0: read it into memory (huge pages)\n"
            "  -nr, --no-repack      keep the weights in the file's layout only (no packed copies)\n"
            "  --no-warmup           skip the untimed warm-up run\n"
            "  --mem-bw GBS          memory bandwidth limit in GB/s (env MINFER_MEM_BW; default: probe)\n"
            "  --peak-gmacs G        int8 MAC peak in GMAC/s (env MINFER_PEAK_GMACS; default: probe)\n");
}

/* Append "a,b,c" to l (the first call replaces the defaults). */
static bool parse_list(const char *flag, const char *s, long long lo, long long hi, int_list *l) {
    if (!l->set) l->n = 0, l->set = true;
    char buf[256];
    if (strlen(s) >= sizeof buf) {
        cli_error("%s: list '%s' is too long", flag, s);
        return false;
    }
    strcpy(buf, s);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (l->n == MAX_LIST) {
            cli_error("%s: more than %d values", flag, MAX_LIST);
            return false;
        }
        if (!cli_parse_int(flag, tok, lo, hi, &l->v[l->n])) return false;
        l->n++;
    }
    return true;
}

/* llama.cpp's general.file_type values (LLAMA_FTYPE_*), for the model column. */
static const char *ftype_name(uint32_t ft) {
    static const struct { uint32_t id; const char *name; } names[] = {
        {0, "F32"},  {1, "F16"},  {2, "Q4_0"},  {3, "Q4_1"},   {7, "Q8_0"},   {8, "Q5_0"},   {9, "Q5_1"},
        {10, "Q2_K"}, {11, "Q3_K_S"}, {12, "Q3_K_M"}, {13, "Q3_K_L"}, {14, "Q4_K_S"}, {15, "Q4_K_M"},
        {16, "Q5_K_S"}, {17, "Q5_K_M"}, {18, "Q6_K"}, {32, "BF16"},
    };
    for (size_t i = 0; i < CLI_ARRAY_LEN(names); i++)
        if (names[i].id == ft) return names[i].name;
    return NULL;
}

static void describe_model(const mf_model *m, double load_s, model_info *mi) {
    mf_model_info info;
    mf_model_get_info(m, &info);
    mi->size = info.weight_bytes;
    mi->n_params = info.n_params;
    mi->bytes_per_token = info.decode_bytes;
    mi->macs_per_token = info.macs_per_token;
    mi->macs_output = info.macs_output;
    mi->load_s = load_s;
    mi->pages = info.pages;
    mi->packed_bytes = info.packed_bytes;
    /* The file type as written by the quantizer, else the type holding most matrix bytes. */
    uint32_t ft;
    const char *tname = NULL;
    if (mf_gguf_get_u32(mf_model_gguf(m), "general.file_type", &ft) == MF_OK) tname = ftype_name(ft);
    if (!tname) tname = mf_type_name(info.main_type);
    const uint64_t params = info.n_params;
    double p = (double)params;
    if (p >= 1e9)
        snprintf(mi->type, sizeof mi->type, "%s %.1fB %s", mf_model_arch(m), p / 1e9, tname);
    else
        snprintf(mi->type, sizeof mi->type, p >= 1e7 ? "%s %.0fM %s" : "%s %.1fM %s", mf_model_arch(m), p / 1e6,
                 tname);
}

static uint64_t peak_rss_bytes(void) {
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0) return 0;
    return (uint64_t)ru.ru_maxrss * 1024; /* Linux reports KiB */
}

static const bench_limits *get_limits(const bench_opts *o, int32_t n_threads, bench_limits *cache, int *n_cache) {
    for (int i = 0; i < *n_cache; i++)
        if (cache[i].n_threads == n_threads) return &cache[i];
    bench_limits *l = &cache[(*n_cache)++];
    *l = (bench_limits){.n_threads = n_threads, .isa = ""};
    const char *env_bw = getenv("MINFER_MEM_BW"), *env_g = getenv("MINFER_PEAK_GMACS");
    double probe_bw, probe_g;
    bool want_bw = false, want_g = false;
    if (o->mem_bw > 0) {
        l->mem_bw = o->mem_bw, l->bw_src = "flag";
    } else if (env_bw && atof(env_bw) > 0) {
        l->mem_bw = atof(env_bw), l->bw_src = "env";
    } else {
        want_bw = true, l->bw_src = "probe";
    }
    if (o->peak_gmacs > 0) {
        l->gmacs = o->peak_gmacs, l->gmacs_src = "flag";
    } else if (env_g && atof(env_g) > 0) {
        l->gmacs = atof(env_g), l->gmacs_src = "env";
    } else {
        want_g = true, l->gmacs_src = "probe";
    }
    if (want_bw || want_g) {
        cli_bench_probe_limits(n_threads, want_bw, want_g, &probe_bw, &probe_g, &l->isa);
        if (want_bw) l->mem_bw = probe_bw;
        if (want_g) l->gmacs = probe_g;
    }
    return l;
}

/* xorshift64*: the benchmark's token ids (uniform over the vocabulary, as llama-bench uses). */
static int32_t next_token(uint64_t *s, int32_t n_vocab) {
    *s ^= *s >> 12, *s ^= *s << 25, *s ^= *s >> 27;
    return (int32_t)(((*s * 0x2545F4914F6CDD1DULL) >> 33) % (uint64_t)n_vocab);
}

/* One timed (or warm-up) run on n_par sequences: drop everything past the depth's context (the
 * cache then holds positions 0..n_depth-1 of each sequence, or nothing), then the prompts in one call
 * (sequence s's tokens at s * n_prompt), or n_gen decode steps of one token per sequence (every
 * token's logits, as a server's slots ask for them). tokens, seq and logits hold n_par *
 * max(n_prompt, 1) entries. Returns nanoseconds, or a negative value on failure (error printed). */
static double run_once(mf_context *c, int32_t n_vocab, int32_t n_par, int32_t n_depth, int32_t n_prompt,
                       int32_t n_gen, int32_t *tokens, int32_t *seq, int8_t *logits, uint64_t *rng,
                       int32_t *n_cells) {
    mf_context_seq_rm(c, -1, n_depth, -1);
    if (n_cells) *n_cells = mf_context_n_used(c);
    for (int32_t i = 0; i < n_par * n_prompt; i++) {
        tokens[i] = next_token(rng, n_vocab);
        seq[i] = i / n_prompt;
        logits[i] = (i + 1) % n_prompt == 0; /* each sequence's last token */
    }
    double t0 = mf_time_s();
    mf_status st = MF_OK;
    if (n_prompt > 0) {
        mf_batch b = {.n_tokens = n_par * n_prompt, .tokens = tokens, .seq = seq, .logits = logits};
        st = mf_context_decode(c, &b);
    }
    for (int32_t i = 0; st == MF_OK && i < n_gen; i++) {
        for (int32_t s = 0; s < n_par; s++) tokens[s] = next_token(rng, n_vocab), seq[s] = s, logits[s] = 1;
        mf_batch b = {.n_tokens = n_par, .tokens = tokens, .seq = seq, .logits = logits};
        st = mf_context_decode(c, &b);
    }
    double dt = mf_time_s() - t0;
    if (st) {
        cli_error_status(st, "bench");
        return -1;
    }
    return dt * 1e9;
}

static bool run_test(const mf_model *m, const bench_opts *o, bench_result *r) {
    mf_context_params p = mf_context_default_params();
    cli_context_env(&p);
    p.n_ctx = r->n_par * (r->n_depth + r->n_prompt + r->n_gen);
    p.n_threads = r->n_threads;
    p.n_ubatch = r->n_ubatch;
    p.kv_f32 = o->kv_f32;
    mf_context *c = NULL;
    mf_status st = mf_context_create(m, &p, &c);
    if (st) {
        cli_error_status(st, "bench");
        return false;
    }
    r->n_threads = mf_context_n_threads(c);
    r->isa = mf_isa_kernels_name(mf_context_isa(c));
    int32_t n_vocab = mf_model_n_vocab(m);
    const size_t n_buf = (size_t)r->n_par * (size_t)CLI_MAX(CLI_MAX(r->n_prompt, r->n_depth), 1);
    int32_t *tokens = malloc(n_buf * sizeof *tokens), *seq = malloc(n_buf * sizeof *seq);
    int8_t *logits = malloc(n_buf);
    r->samples_ns = calloc((size_t)o->reps, sizeof *r->samples_ns);
    bool ok = tokens && seq && logits && r->samples_ns;
    if (!ok) cli_error("bench: out of memory");
    uint64_t rng = 0x9E3779B97F4A7C15ULL;
    /* The depth's context: random tokens, once; every run keeps it and drops what came after. */
    if (ok && r->n_depth > 0) ok = run_once(c, n_vocab, r->n_par, 0, r->n_depth, 0, tokens, seq, logits, &rng, NULL) >= 0;
    /* Warm-up: builds and plans the graph, faults the weights in. A generation test warms up with one
     * token, as llama-bench does. */
    if (ok && o->warmup)
        ok = run_once(c, n_vocab, r->n_par, r->n_depth, r->n_prompt, r->n_prompt ? 0 : 1, tokens, seq, logits, &rng,
                      NULL) >= 0;
    for (int32_t k = 0; ok && k < o->reps; k++) {
        double ns = run_once(c, n_vocab, r->n_par, r->n_depth, r->n_prompt, r->n_gen, tokens, seq, logits, &rng,
                             &r->n_cells_start);
        ok = ns >= 0;
        if (ok) r->samples_ns[r->n_samples++] = CLI_MAX(ns, 1.0);
    }
    free(tokens), free(seq), free(logits);
    mf_context_free(c);
    if (!ok) return false;
    /* llama-bench's statistics: tokens/s per repetition, then mean and sample standard deviation. */
    double n_tok = (double)r->n_par * (r->n_prompt + r->n_gen), s_ts = 0, s_ns = 0, q_ts = 0, q_ns = 0;
    for (int32_t k = 0; k < r->n_samples; k++) s_ts += n_tok * 1e9 / r->samples_ns[k], s_ns += r->samples_ns[k];
    r->avg_ts = s_ts / r->n_samples, r->avg_ns = s_ns / r->n_samples;
    for (int32_t k = 0; k < r->n_samples; k++) {
        double ts = n_tok * 1e9 / r->samples_ns[k] - r->avg_ts, ns = r->samples_ns[k] - r->avg_ns;
        q_ts += ts * ts, q_ns += ns * ns;
    }
    r->stddev_ts = r->n_samples > 1 ? sqrt(q_ts / (r->n_samples - 1)) : 0;
    r->stddev_ns = r->n_samples > 1 ? sqrt(q_ns / (r->n_samples - 1)) : 0;
    /* the sequences of a step share its weight reads */
    r->gbps = (double)r->mi.bytes_per_token * r->avg_ts / r->n_par / 1e9;
    /* A prompt computes the output projection for its last token only. */
    const double macs = r->n_prompt ? (double)(r->mi.macs_per_token - r->mi.macs_output) +
                                          (double)r->mi.macs_output / (double)r->n_prompt
                                    : (double)r->mi.macs_per_token;
    r->gmacs = macs * r->avg_ts / 1e9;
    r->peak_rss = peak_rss_bytes();
    return true;
}

/* llama-bench's test name: "pp512", "tg128", " x4" after it for four sequences, and " @ d4096" at a depth. */
static void test_name(const bench_result *r, char *buf, size_t n) {
    int k = snprintf(buf, n, r->n_prompt ? "pp%d" : "tg%d", r->n_prompt ? r->n_prompt : r->n_gen);
    if (r->n_par > 1 && k > 0 && (size_t)k < n) k += snprintf(buf + k, n - (size_t)k, " x%d", r->n_par);
    if (r->n_depth > 0 && k > 0 && (size_t)k < n) snprintf(buf + k, n - (size_t)k, " @ d%d", r->n_depth);
}

static void fmt_size(char *buf, size_t n, uint64_t bytes) {
    if (bytes >= (1ull << 30))
        snprintf(buf, n, "%.2f GiB", (double)bytes / (1ull << 30));
    else
        snprintf(buf, n, "%.2f MiB", (double)bytes / (1ull << 20));
}

static void print_md_header(bool show_ub) {
    printf("| model | size | params | backend | threads |%s test | t/s | achieved | peak RSS |\n",
           show_ub ? " n_ubatch |" : "");
    printf("| --- | ---: | ---: | --- | ---: |%s ---: | ---: | ---: | ---: |\n", show_ub ? " ---: |" : "");
}

static void print_md_row(const bench_result *r, bool show_ub) {
    char size[32], rss[32], test[48], ub[32] = "", ach[64];
    fmt_size(size, sizeof size, r->mi.size);
    fmt_size(rss, sizeof rss, r->peak_rss);
    test_name(r, test, sizeof test);
    if (show_ub) snprintf(ub, sizeof ub, " %d |", r->n_ubatch);
    /* Prefill is bound by arithmetic, decode by reading the weights. */
    double v = r->n_prompt ? r->gmacs : r->gbps, lim = r->n_prompt ? r->lim.gmacs : r->lim.mem_bw;
    const char *unit = r->n_prompt ? "GMAC/s" : "GB/s";
    if (lim > 0)
        snprintf(ach, sizeof ach, "%.1f %s (%.0f%%)", v, unit, 100 * v / lim);
    else
        snprintf(ach, sizeof ach, "%.1f %s", v, unit);
    double p = (double)r->mi.n_params;
    printf("| %s | %s | %.2f %s | CPU | %d |%s %s | %.2f ± %.2f | %s | %s |\n", r->mi.type, size,
           p >= 1e9 ? p / 1e9 : p / 1e6, p >= 1e9 ? "B" : "M", r->n_threads, ub, test, r->avg_ts, r->stddev_ts,
           ach, rss);
    fflush(stdout);
}

static json_t *result_json(const bench_result *r) {
    json_t *ns = json_array(), *ts = json_array();
    double n_tok = (double)r->n_par * (r->n_prompt + r->n_gen);
    for (int32_t k = 0; k < r->n_samples; k++) {
        json_array_append_new(ns, json_integer((json_int_t)r->samples_ns[k]));
        json_array_append_new(ts, json_real(n_tok * 1e9 / r->samples_ns[k]));
    }
    char test[48];
    test_name(r, test, sizeof test);
    return json_pack("{s:s, s:s, s:I, s:I, s:s, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:s, s:f, s:I, s:I, s:f, s:f, s:o, s:o,"
                     " s:I, s:I, s:I, s:f, s:f, s:f, s:s, s:f, s:s, s:s, s:I, s:s, s:I, s:s, s:s}",
                     "model_filename", r->path, "model_type", r->mi.type, "model_size", (json_int_t)r->mi.size,
                     "model_n_params", (json_int_t)r->mi.n_params, "backends", "CPU", "n_threads", r->n_threads,
                     "n_ubatch", r->n_ubatch, "n_prompt", r->n_prompt, "n_gen", r->n_gen, "n_depth", r->n_depth, "n_par", r->n_par, "n_cells_start", r->n_cells_start, "test", test,
                     "load_s", r->mi.load_s, "avg_ns", (json_int_t)r->avg_ns, "stddev_ns", (json_int_t)r->stddev_ns,
                     "avg_ts", r->avg_ts, "stddev_ts", r->stddev_ts, "samples_ns", ns, "samples_ts", ts,
                     "bytes_per_token", (json_int_t)r->mi.bytes_per_token, "macs_per_token",
                     (json_int_t)r->mi.macs_per_token, "macs_output", (json_int_t)r->mi.macs_output, "achieved_gbs", r->gbps, "achieved_gmacs", r->gmacs,
                     "mem_bw_gbs", r->lim.mem_bw, "mem_bw_source", r->lim.bw_src, "peak_gmacs", r->lim.gmacs,
                     "peak_gmacs_source", r->lim.gmacs_src, "peak_gmacs_isa", r->lim.isa, "peak_rss_bytes",
                     (json_int_t)r->peak_rss, "pages", r->mi.pages, "packed_bytes", (json_int_t)r->mi.packed_bytes, "isa", r->isa, "cpu_info", mf_cpu_name());
}

/* Commas separate models, as in llama-bench's -m; the path strings stay in argv, cut in place. */
static bool add_models(bench_opts *o, const char *list) {
    for (char *s = (char *)list, *comma; s; s = comma ? comma + 1 : NULL) {
        comma = strchr(s, ',');
        if (comma) *comma = '\0';
        if (o->n_models == MAX_LIST) {
            cli_error("bench: more than %d models", MAX_LIST);
            return false;
        }
        if (*s) o->paths[o->n_models++] = s;
    }
    return true;
}

static int parse_args(int argc, char **argv, bench_opts *o) {
    const char *val;
    for (int i = 1; i < argc; i++) {
        int r;
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--json")) {
            o->json = true;
        } else if (!strcmp(a, "--no-warmup")) {
            o->warmup = false;
        } else if ((r = cli_take_value(argc, argv, &i, "-m", &val)) ||
                   (r = cli_take_value(argc, argv, &i, "--model", &val))) {
            if (r < 0 || !add_models(o, val)) return 2;
        } else if ((r = cli_take_value(argc, argv, &i, "-p", &val)) ||
                   (r = cli_take_value(argc, argv, &i, "--n-prompt", &val))) {
            if (r < 0 || !parse_list("-p", val, 0, 1 << 20, &o->pp)) return 2;
        } else if ((r = cli_take_value(argc, argv, &i, "-n", &val)) ||
                   (r = cli_take_value(argc, argv, &i, "--n-gen", &val))) {
            if (r < 0 || !parse_list("-n", val, 0, 1 << 20, &o->tg)) return 2;
        } else if ((r = cli_take_value(argc, argv, &i, "-t", &val)) ||
                   (r = cli_take_value(argc, argv, &i, "--threads", &val))) {
            if (r < 0 || !parse_list("-t", val, 1, 1024, &o->threads)) return 2;
        } else if ((r = cli_take_value(argc, argv, &i, "-ub", &val)) ||
                   (r = cli_take_value(argc, argv, &i, "--ubatch", &val))) {
            if (r < 0 || !parse_list("-ub", val, 1, 8192, &o->ubatch)) return 2;
        } else if ((r = cli_take_value(argc, argv, &i, "-d", &val)) ||
                   (r = cli_take_value(argc, argv, &i, "--n-depth", &val))) {
            if (r < 0 || !parse_list("-d", val, 0, 1 << 20, &o->depth)) return 2;
        } else if ((r = cli_take_value(argc, argv, &i, "-np", &val)) ||
                   (r = cli_take_value(argc, argv, &i, "--parallel", &val))) {
            if (r < 0 || !parse_list("-np", val, 1, MF_MAX_SEQ, &o->par)) return 2;
        } else if ((r = cli_take_value(argc, argv, &i, "-r", &val)) ||
                   (r = cli_take_value(argc, argv, &i, "--repetitions", &val))) {
            if (r < 0 || !cli_parse_int("-r", val, 1, 100000, &o->reps)) return 2;
        } else if ((r = cli_take_value(argc, argv, &i, "-o", &val)) ||
                   (r = cli_take_value(argc, argv, &i, "--output", &val))) {
            if (r < 0) return 2;
            if (strcmp(val, "md") && strcmp(val, "json")) {
                cli_error("-o: '%s' is not md or json", val);
                return 2;
            }
            o->json = !strcmp(val, "json");
        } else if ((r = cli_take_value(argc, argv, &i, "--kv-type", &val))) {
            if (r < 0) return 2;
            if (strcmp(val, "f16") && strcmp(val, "f32")) {
                cli_error("--kv-type: '%s' is not f16 or f32", val);
                return 2;
            }
            o->kv_f32 = !strcmp(val, "f32");
        } else if ((r = cli_take_value(argc, argv, &i, "-mmp", &val)) ||
                   (r = cli_take_value(argc, argv, &i, "--mmap", &val))) {
            if (r < 0) return 2;
            if (strcmp(val, "0") && strcmp(val, "1")) {
                cli_error("--mmap: '%s' is not 0 or 1", val);
                return 2;
            }
            o->no_mmap = !strcmp(val, "0");
        } else if (!strcmp(a, "-nr") || !strcmp(a, "--no-repack")) {
            o->no_repack = true;
        } else if ((r = cli_take_value(argc, argv, &i, "--mem-bw", &val))) {
            if (r < 0 || !cli_parse_float("--mem-bw", val, 0.001, 1e6, &o->mem_bw)) return 2;
        } else if ((r = cli_take_value(argc, argv, &i, "--peak-gmacs", &val))) {
            if (r < 0 || !cli_parse_float("--peak-gmacs", val, 0.001, 1e9, &o->peak_gmacs)) return 2;
        } else if (a[0] == '-' && a[1]) {
            cli_error("bench: unknown option '%s'", a);
            return 2;
        } else if (!add_models(o, a)) {
            return 2;
        }
    }
    if (o->n_models == 0) {
        usage(stderr);
        return 2;
    }
    return -1;
}

int cmd_bench(int argc, char **argv) {
    bench_opts o = {.pp = {{512}, 1, false}, .tg = {{128}, 1, false}, .threads = {{0}, 1, false},
                    .ubatch = {{512}, 1, false}, .depth = {{0}, 1, false}, .par = {{1}, 1, false}, .reps = 5,
                    .warmup = true};
    int rc = parse_args(argc, argv, &o);
    if (rc >= 0) return rc;
    bool show_ub = o.ubatch.n > 1 || o.ubatch.v[0] != 512;
    bench_limits limits[MAX_LIST];
    int n_limits = 0;
    json_t *all = o.json ? json_array() : NULL;
    bool header_done = false;
    rc = 0;
    /* the limits first: the bandwidth probe's buffer then comes and goes before any model is in
     * memory, so that it is not in the peak resident size the tables report */
    for (int ti = 0; ti < o.threads.n; ti++) {
        const long cpus = sysconf(_SC_NPROCESSORS_ONLN); /* -t 0: one thread per online CPU */
        get_limits(&o, (int32_t)(o.threads.v[ti] > 0 ? o.threads.v[ti] : cpus > 0 ? cpus : 1), limits, &n_limits);
    }
    for (int mi = 0; mi < o.n_models && rc == 0; mi++) {
        mf_model *m = NULL;
        if (!(o.paths[mi] = cli_model(o.paths[mi]))) {
            rc = 1;
            break;
        }
        double t0 = mf_time_s();
        const mf_model_load_params lp = cli_load_params(o.no_mmap, o.no_repack);
        mf_status st = mf_model_load_ex(o.paths[mi], &lp, &m);
        if (st) {
            cli_error_status(st, "bench");
            rc = 1;
            break;
        }
        model_info info;
        describe_model(m, mf_time_s() - t0, &info);
        if (o.no_mmap) info.pages = "read";
        for (int ti = 0; ti < o.threads.n && rc == 0; ti++) {
            for (int ui = 0; ui < o.ubatch.n && rc == 0; ui++) {
                /* Every prompt length, then every generation length, each at every depth, as
                 * llama-bench orders them. */
                for (int k = 0; k < o.pp.n + o.tg.n && rc == 0; k++) {
                    for (int dp = 0; dp < o.depth.n * o.par.n && rc == 0; dp++) {
                        const int di = dp / o.par.n, pi = dp % o.par.n;
                        bool is_pp = k < o.pp.n;
                        long long len = is_pp ? o.pp.v[k] : o.tg.v[k - o.pp.n];
                        if (len == 0) continue;
                        bench_result r = {.mi = info, .path = o.paths[mi], .n_threads = (int32_t)o.threads.v[ti],
                                          .n_ubatch = (int32_t)o.ubatch.v[ui], .n_prompt = is_pp ? (int32_t)len : 0,
                                          .n_gen = is_pp ? 0 : (int32_t)len, .n_depth = (int32_t)o.depth.v[di],
                                          .n_par = (int32_t)o.par.v[pi]};
                        if (!run_test(m, &o, &r)) {
                            rc = 1;
                        } else {
                            r.lim = *get_limits(&o, r.n_threads, limits, &n_limits);
                            if (o.json) {
                                json_array_append_new(all, result_json(&r));
                            } else {
                                if (!header_done) print_md_header(show_ub), header_done = true;
                                print_md_row(&r, show_ub);
                            }
                        }
                        free(r.samples_ns);
                    }
                }
            }
        }
        mf_model_free(m);
    }
    if (o.json) {
        if (rc == 0) {
            char *s = json_dumps(all, JSON_INDENT(2) | JSON_REAL_PRECISION(10));
            if (s) printf("%s\n", s);
            free(s);
        }
        json_decref(all);
    } else if (rc == 0) {
        /* The limits behind the "achieved" column, one line per thread count. */
        printf("\n");
        for (int i = 0; i < n_limits; i++) {
            const bench_limits *l = &limits[i];
            printf("limits, %d thread%s: memory read %.1f GB/s (%s), int8 %.0f GMAC/s (%s%s%s)\n", l->n_threads,
                   l->n_threads == 1 ? "" : "s", l->mem_bw, l->bw_src, l->gmacs, l->gmacs_src, *l->isa ? ", " : "",
                   l->isa);
        }
    }
    return rc;
}
