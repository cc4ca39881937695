/* cmd_run.c: `minfer run MODEL [PROMPT]` (also `minfer MODEL [PROMPT]`): load a model, format the
 * prompt with its chat template (or send it raw), stream the reply to stdout as tokens are
 * produced, stop at an end-of-generation token, a stop string or -n, and print a summary (load
 * time, prompt and generation speed) to stderr. */
#include "cli.h"
#include "sample_args.h"

#include <stdlib.h>

static void usage(FILE *f) {
    fprintf(f,
            "usage: minfer run MODEL [PROMPT] [options]     (or: minfer MODEL [PROMPT])\n"
            "  PROMPT                 the user message; read from standard input when absent\n"
            "  --raw                  send PROMPT to the model as is (no chat template)\n"
            "  --system TEXT          system prompt\n"
            "  --ctx N                context size in tokens (default: the model's)\n"
            "  -t, --threads N        CPU threads (default: all)\n"
            "  --ubatch N             prefill chunk size (default 512)\n"
            "  --kv-type f16|f32      KV cache type (default f16)\n"
            "  --no-fuse              disable the graph fusion passes\n"
            "  --no-mmap              read the model into memory (huge pages) instead of mapping it\n"
            "                         (a copy; for systems that give mapped files no huge pages)\n"
            "  --dump-graph-dot FILE  write the scheduled graph as Graphviz DOT\n"
            "  --dump-graph-json FILE write the scheduled graph as JSON (docs/graph-json.md)\n"
            "  --dump-graph-stage S   which graph to write: prefill (default) or decode\n"
            "  MINFER_TRACE=FILE      environment: per-node statistics of the run as JSON\n"
            "sampling (llama.cpp's flags and defaults; --temp 0 is greedy):\n");
    mf_cli_sample_usage(f);
}

static char *read_stdin(void) {
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
    if (buf) buf[n] = 0;
    return buf;
}

/* The prompt text the model sees: the chat template applied to [system], user. */
static mf_status format_prompt(const mf_model *m, const char *system, const char *user, char **out) {
    mf_chat_template *t = NULL;
    mf_status st = mf_chat_template_from_gguf(mf_model_gguf(m), NULL, &t);
    if (st) return st;
    mf_chat_message msgs[2] = {{.role = "system", .content = system}, {.role = "user", .content = user}};
    mf_chat_options opts = mf_chat_default_options();
    st = system ? mf_chat_render(t, msgs, 2, &opts, out, NULL) : mf_chat_render(t, msgs + 1, 1, &opts, out, NULL);
    mf_chat_template_free(t);
    return st;
}

typedef struct {
    const char *model, *prompt, *system, *dot, *json, *stage;
    bool raw, no_fuse, kv_f32, no_mmap;
    long long n_ctx, threads, ubatch;
} run_opts;

static int parse(int argc, char **argv, run_opts *o, mf_cli_sample_opts *so) {
    memset(o, 0, sizeof *o);
    o->stage = "prefill";
    o->ubatch = 512;
    for (int i = 1; i < argc; i++) {
        int r = mf_cli_sample_arg(argc, argv, &i, so);
        if (r < 0) return 2;
        if (r > 0) continue;
        const char *v;
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--raw")) {
            o->raw = true;
        } else if (!strcmp(argv[i], "--no-fuse")) {
            o->no_fuse = true;
        } else if (!strcmp(argv[i], "--no-mmap")) {
            o->no_mmap = true;
        } else if ((r = cli_take_value(argc, argv, &i, "--system", &v))) {
            if (r < 0) return 2;
            o->system = v;
        } else if ((r = cli_take_value(argc, argv, &i, "--ctx", &v))) {
            if (r < 0 || !cli_parse_int("--ctx", v, 1, 1 << 24, &o->n_ctx)) return 2;
        } else if ((r = cli_take_value(argc, argv, &i, "-t", &v)) || (r = cli_take_value(argc, argv, &i, "--threads", &v))) {
            if (r < 0 || !cli_parse_int("--threads", v, 1, 1024, &o->threads)) return 2;
        } else if ((r = cli_take_value(argc, argv, &i, "--ubatch", &v))) {
            if (r < 0 || !cli_parse_int("--ubatch", v, 1, 8192, &o->ubatch)) return 2;
        } else if ((r = cli_take_value(argc, argv, &i, "--kv-type", &v))) {
            if (r < 0) return 2;
            if (strcmp(v, "f16") && strcmp(v, "f32")) {
                cli_error("--kv-type: '%s' is not f16 or f32", v);
                return 2;
            }
            o->kv_f32 = !strcmp(v, "f32");
        } else if ((r = cli_take_value(argc, argv, &i, "--dump-graph-dot", &v))) {
            if (r < 0) return 2;
            o->dot = v;
        } else if ((r = cli_take_value(argc, argv, &i, "--dump-graph-json", &v))) {
            if (r < 0) return 2;
            o->json = v;
        } else if ((r = cli_take_value(argc, argv, &i, "--dump-graph-stage", &v))) {
            if (r < 0) return 2;
            if (strcmp(v, "prefill") && strcmp(v, "decode")) {
                cli_error("--dump-graph-stage: '%s' is not prefill or decode", v);
                return 2;
            }
            o->stage = v;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            cli_error("run: unknown option '%s' (see minfer run --help)", argv[i]);
            return 2;
        } else if (!o->model) {
            o->model = argv[i];
        } else if (!o->prompt) {
            o->prompt = argv[i];
        } else {
            cli_error("run: unexpected argument '%s' (quote the prompt)", argv[i]);
            return 2;
        }
    }
    if (!o->model) {
        usage(stderr);
        return 2;
    }
    return -1;
}

static const char *reason_text(mf_stop_reason r) {
    switch (r) {
    case MF_STOP_EOG: return "end of generation";
    case MF_STOP_STRING: return "stop string";
    default: return "length";
    }
}

int cmd_run(int argc, char **argv) {
    run_opts o;
    mf_cli_sample_opts so;
    mf_cli_sample_opts_init(&so);
    int rc = parse(argc, argv, &o, &so);
    if (rc >= 0) {
        mf_cli_sample_opts_free(&so);
        return rc;
    }
    rc = 1;
    mf_model *m = NULL;
    mf_context *c = NULL;
    const mf_tokenizer *tok = NULL;
    mf_gen *gen = NULL;
    bool context_full = false;
    char *stdin_text = NULL, *text = NULL;
    int32_t *ids = NULL;
    size_t n_ids = 0;
    mf_status st;
    const char *what = "run";
    if (!(o.model = cli_model(o.model))) goto done;
    double t0 = mf_time_s();

    const mf_model_load_params lp = {.no_mmap = o.no_mmap};
    if ((st = mf_model_load_ex(o.model, &lp, &m))) goto fail;
    double load_s = mf_time_s() - t0;
    what = "tokenizer";
    if (!(tok = mf_model_tokenizer(m))) {
        st = MF_ERR_FORMAT;
        goto fail;
    }
    const char *prompt = o.prompt;
    if (!prompt) {
        if (!(stdin_text = read_stdin())) {
            cli_error("run: cannot read the prompt from standard input");
            goto done;
        }
        prompt = stdin_text;
    }
    what = "chat template";
    if (o.raw) {
        text = strdup(prompt);
    } else if ((st = format_prompt(m, o.system, prompt, &text))) {
        goto fail;
    }
    what = "tokenizing the prompt";
    unsigned flags = MF_TOK_PARSE_SPECIAL;
    /* The template writes BOS itself when the model wants it; add it only to raw prompts. */
    if (o.raw) flags |= MF_TOK_ADD_SPECIAL;
    if ((st = mf_tokenizer_encode(tok, text, strlen(text), flags, &ids, &n_ids))) goto fail;
    if (n_ids == 0) {
        cli_error("run: the prompt is empty");
        goto done;
    }

    mf_context_params cp = mf_context_default_params();
    cli_context_env(&cp);
    cp.n_ctx = (int32_t)o.n_ctx;
    cp.n_threads = (int32_t)o.threads;
    cp.n_ubatch = (int32_t)o.ubatch;
    cp.kv_f32 = o.kv_f32;
    cp.fusions = o.no_fuse ? 0 : MF_FUSION_ALL;
    what = "context";
    if ((st = mf_context_create(m, &cp, &c))) goto fail;
    int32_t n_ctx = mf_context_n_ctx(c);
    if ((int64_t)n_ids >= n_ctx) {
        cli_error("run: the prompt is %zu tokens, which does not fit the context of %d tokens (use --ctx)", n_ids,
                  n_ctx);
        goto done;
    }
    what = "graph dump";
    int32_t dump_n = strcmp(o.stage, "decode") ? (int32_t)n_ids : 1;
    if (o.dot && (st = mf_context_dump_graph(c, dump_n, 1, "dot", o.dot))) goto fail;
    if (o.json && (st = mf_context_dump_graph(c, dump_n, 1, "json", o.json))) goto fail;

    what = "sampler";
    mf_sampler_vocab sv = mf_sampler_vocab_from_tokenizer(tok, mf_model_n_vocab(m), n_ctx);
    if ((st = mf_gen_create(&so.params, (const char *const *)so.stop, so.n_stop, so.n_predict, &sv, &gen))) goto fail;
    mf_cli_sample_report(stderr, mf_gen_sampler(gen));
    if ((st = mf_gen_prompt(gen, ids, n_ids))) goto fail;

    what = "prefill";
    double tp = mf_time_s();
    mf_batch b = {.n_tokens = (int32_t)n_ids, .tokens = ids};
    if ((st = mf_context_decode(c, &b))) goto fail;
    double prefill_s = mf_time_s() - tp;

    /* The shared generation loop: sample, stop checks, text safe to show (gen.h). */
    what = "generation";
    double tg = mf_time_s();
    int32_t pos = (int32_t)n_ids;
    mf_stop_reason reason = MF_STOP_NONE;
    const char *piece;
    size_t len;
    for (;;) {
        int32_t t;
        if ((st = mf_gen_next(gen, mf_context_logits(c, 0), &t, &piece, &len, &reason))) goto fail;
        fwrite(piece, 1, len, stdout);
        fflush(stdout);
        if (reason != MF_STOP_NONE) break;
        if (pos + 1 >= n_ctx) {
            if ((st = mf_gen_finish(gen, &piece, &len))) goto fail;
            fwrite(piece, 1, len, stdout);
            reason = MF_STOP_LENGTH;
            context_full = true;
            break;
        }
        b = (mf_batch){.n_tokens = 1, .tokens = &t};
        if ((st = mf_context_decode(c, &b))) goto fail;
        pos++;
    }
    long long n_gen = (long long)mf_gen_n_generated(gen);
    fputc('\n', stdout);
    fflush(stdout);
    double gen_s = mf_time_s() - tg;
    fprintf(stderr, "\nminfer: load %.2f s | prompt %zu tokens, %.1f tokens/s | generated %lld tokens, %.1f tokens/s "
                    "(%s) | %d threads\n",
            load_s, n_ids, prefill_s > 0 ? (double)n_ids / prefill_s : 0.0, n_gen,
            gen_s > 0 ? (double)n_gen / gen_s : 0.0, context_full ? "context full" : reason_text(reason),
            mf_context_n_threads(c));
    rc = 0;
    goto done;
fail:
    cli_error_status(st, what);
done:
    mf_gen_free(gen);
    mf_context_free(c);
    mf_model_free(m);
    mf_cli_sample_opts_free(&so);
    free(ids);
    free(text);
    free(stdin_text);
    return rc;
}
