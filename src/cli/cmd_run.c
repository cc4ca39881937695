/* cmd_run.c: `minfer run MODEL [PROMPT]` (also `minfer MODEL [PROMPT]`): load a model, format the
 * prompt with its chat template (or send it raw), stream the reply to stdout as tokens are
 * produced, stop at an end-of-generation token, a stop string or -n, and print a summary (load
 * time, prompt and generation speed) to stderr. */
#include "cli.h"
#include "model_args.h"
#include "sample_args.h"
#include "spec_args.h"

#include <stdlib.h>
#include <unistd.h>

static void usage(FILE *f) {
    fprintf(f,
            "usage: minfer run MODEL [PROMPT] [options]     (or: minfer MODEL [PROMPT])\n"
            "  PROMPT                 the user message; read from standard input when absent (and\n"
            "                         standard input is not a terminal: then it is `minfer chat`)\n"
            "  --raw                  send PROMPT to the model as is (no chat template)\n"
            "  -cnv, -i, --conversation  a conversation: the same as `minfer chat MODEL`\n");
    cli_model_usage(f);
    fprintf(f,
            "  --dump-graph-dot FILE  write the scheduled graph as Graphviz DOT\n"
            "  --dump-graph-json FILE write the scheduled graph as JSON (docs/graph-json.md)\n"
            "  --dump-graph-stage S   which graph to write: prefill (default) or decode\n"
            "  MINFER_TRACE=FILE      environment: per-node statistics of the run as JSON\n"
            "sampling (llama.cpp's flags and defaults; --temp 0 is greedy):\n");
    mf_cli_sample_usage(f);
    cli_spec_usage(f);
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
    cli_model_opts mo;
    const char *dot, *json, *stage;
    bool raw;
    const char *chat_only; /* a `minfer chat` option given (fine when this becomes a conversation) */
    cli_spec_opts spec;
} run_opts;

/* -1: go on; else the exit code (after --help: 0, a usage error: 2). */
static int parse(int argc, char **argv, run_opts *o, mf_cli_sample_opts *so) {
    memset(o, 0, sizeof *o);
    cli_model_opts_init(&o->mo);
    cli_spec_opts_init(&o->spec);
    o->stage = "prefill";
    for (int i = 1; i < argc; i++) {
        if (cli_end_of_options(argv[i], &o->mo)) continue;
        if (o->mo.end_of_options || argv[i][0] != '-' || !argv[i][1]) {
            if (!cli_model_positional(&o->mo, "run", argv[i])) return 2;
            continue;
        }
        int r = mf_cli_sample_arg(argc, argv, &i, so);
        if (r == 0) r = cli_model_arg(argc, argv, &i, &o->mo);
        if (r == 0) r = cli_spec_arg(argc, argv, &i, &o->spec);
        if (r < 0) return 2;
        if (r > 0) continue;
        const char *v;
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--raw")) {
            o->raw = true;
        } else if (!strcmp(argv[i], "--color") || !strcmp(argv[i], "-co")) {
            /* accepted as llama-cli does; run prints plain text (its optional value is skipped) */
            if (i + 1 < argc && (!strcmp(argv[i + 1], "on") || !strcmp(argv[i + 1], "off") || !strcmp(argv[i + 1], "auto")))
                i++;
        } else if (!strcmp(argv[i], "--hide-thinking") || !strcmp(argv[i], "--no-history")) {
            o->chat_only = argv[i];
        } else if (!strcmp(argv[i], "--think")) {
            o->chat_only = argv[i];
            i += i + 1 < argc;
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
        } else {
            cli_error("run: unknown option '%s' (see minfer run --help)", argv[i]);
            return 2;
        }
    }
    if (!o->mo.model) {
        usage(stderr);
        return 2;
    }
    if (o->raw && o->mo.system) cli_error("warning: --system is ignored with --raw (no chat template to put it in)");
    if (o->chat_only && (o->mo.prompt || o->mo.prompt_file)) {
        cli_error("run: %s is an option of `minfer chat`", o->chat_only);
        return 2;
    }
    return cli_model_finish(&o->mo, "run") ? -1 : 2;
}

/* `minfer run ... -cnv` (llama-cli's spellings) is `minfer chat ...`. */
static bool wants_conversation(int argc, char **argv) {
    static const char *const flags[] = {"-cnv", "--cnv", "--conversation", "-i", "--interactive", "--interactive-first",
                                        "--session"};
    for (int i = 1; i < argc && strcmp(argv[i], "--"); i++)
        for (size_t k = 0; k < CLI_ARRAY_LEN(flags); k++)
            if (!strcmp(argv[i], flags[k])) return true;
    return false;
}

static const char *reason_text(mf_stop_reason r) {
    switch (r) {
    case MF_STOP_EOG: return "end of generation";
    case MF_STOP_STRING: return "stop string";
    default: return "length";
    }
}

int cmd_run(int argc, char **argv) {
    if (wants_conversation(argc, argv)) return cmd_chat(argc, argv);
    run_opts o;
    mf_cli_sample_opts so;
    mf_cli_sample_opts_init(&so);
    int rc = parse(argc, argv, &o, &so);
    /* no prompt and a person at the terminal: a conversation, as llama-cli and ollama do */
    const bool chat = rc < 0 && !o.mo.prompt && !o.raw && !o.dot && !o.json && isatty(STDIN_FILENO);
    if (rc >= 0 || chat) {
        mf_cli_sample_opts_free(&so);
        cli_model_opts_free(&o.mo);
        return chat ? cmd_chat(argc, argv) : rc;
    }
    rc = 1;
    mf_model *m = NULL;
    mf_context *c = NULL;
    const mf_tokenizer *tok = NULL;
    mf_gen *gen = NULL;
    bool context_full = false, out_failed = false;
    char *stdin_text = NULL, *text = NULL;
    int32_t *ids = NULL;
    size_t n_ids = 0;
    mf_status st;
    const char *what = "run";
    if (!(o.mo.model = cli_model(o.mo.model))) goto done; /* a path, a cached name, hf:..., ollama:... */
    double t0 = mf_time_s();

    const mf_model_load_params lp = cli_load_params(o.mo.no_mmap, o.mo.no_repack);
    if ((st = mf_model_load_ex(o.mo.model, &lp, &m))) goto fail;
    double load_s = mf_time_s() - t0;
    what = "tokenizer";
    if (!(tok = mf_model_tokenizer(m))) {
        st = MF_ERR_FORMAT;
        goto fail;
    }
    const char *prompt = o.mo.prompt;
    if (!prompt) {
        if (!(stdin_text = cli_read_stdin())) goto done;
        if (mf_utf8_valid_len(stdin_text, strlen(stdin_text)) != strlen(stdin_text)) {
            cli_error("run: the prompt (standard input) is not valid UTF-8");
            goto done;
        }
        prompt = stdin_text;
    }
    what = "chat template";
    if (o.raw) {
        text = strdup(prompt);
    } else if ((st = format_prompt(m, o.mo.system, prompt, &text))) {
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

    mf_context_params cp = cli_model_context_params(&o.mo);
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
    if (!cli_spec_create(&o.spec, m, c, 0, &so.params)) goto done;

    what = "prefill";
    double tp = mf_time_s();
    mf_batch b = {.n_tokens = (int32_t)n_ids, .tokens = ids};
    if ((st = mf_context_decode(c, &b))) goto fail;
    if (o.spec.spec && (st = mf_spec_begin(o.spec.spec, gen, n_ctx - 1))) goto fail; /* the draft's prefill */
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
        if (o.spec.spec) { /* speculative: one or more tokens a step, the same text (spec.h) */
            bool full;
            if ((st = mf_spec_next(o.spec.spec, &piece, &len, &reason, &full))) goto fail;
            fwrite(piece, 1, len, stdout);
            if (!cli_stdout_ok()) {
                out_failed = true;
                break;
            }
            if (reason != MF_STOP_NONE) break;
            if (full) {
                if ((st = mf_gen_finish(gen, &piece, &len))) goto fail;
                fwrite(piece, 1, len, stdout);
                reason = MF_STOP_LENGTH;
                context_full = true;
                break;
            }
            continue;
        }
        if ((st = mf_gen_next(gen, mf_context_logits(c, 0), &t, &piece, &len, &reason))) goto fail;
        fwrite(piece, 1, len, stdout);
        if (!cli_stdout_ok()) { /* main reports it; generating on would lose the reply */
            out_failed = true;
            break;
        }
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
    char spec_line[160];
    cli_spec_summary(&o.spec, spec_line, sizeof spec_line);
    fprintf(stderr, "\nminfer: load %.2f s | prompt %zu tokens, %.1f tokens/s | generated %lld tokens, %.1f tokens/s "
                    "(%s) | %d threads%s\n",
            load_s, n_ids, prefill_s > 0 ? (double)n_ids / prefill_s : 0.0, n_gen,
            gen_s > 0 ? (double)n_gen / gen_s : 0.0, out_failed ? "output error" : context_full ? "context full" : reason_text(reason),
            mf_context_n_threads(c), spec_line);
    rc = 0;
    goto done;
fail:
    cli_error_status(st, what);
done:
    cli_spec_opts_free(&o.spec);
    mf_gen_free(gen);
    mf_context_free(c);
    mf_model_free(m);
    mf_cli_sample_opts_free(&so);
    cli_model_opts_free(&o.mo);
    free(ids);
    free(text);
    free(stdin_text);
    return rc;
}
