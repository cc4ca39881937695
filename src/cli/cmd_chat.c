/* cmd_chat.c: `minfer chat MODEL` (also `minfer MODEL` with no prompt on a terminal, and -cnv / -i):
 * a conversation in the terminal or through a pipe. Each message is a turn of a conversation
 * (src/conv: only the new tokens are prefilled), replies stream as they are generated, /commands
 * change the conversation, and --session keeps it in a file that resumes exactly where it was. */
#include "chat_term.h"
#include "cli.h"
#include "conv.h"
#include "model_args.h"
#include "sample_args.h"
#include "spec_args.h"

#include <stdlib.h>
#include <unistd.h>

static void usage(FILE *f) {
    fputs("usage: minfer chat MODEL [PROMPT] [options]     (or: minfer MODEL, on a terminal)\n"
          "  PROMPT                 the first message (then the conversation goes on)\n"
          "  --session FILE         keep the conversation in FILE: resumed from it when it exists, saved\n"
          "                         after every turn (messages, settings, token ids, KV cells, sampler)\n"
          "  --color auto|on|off    colours, on a terminal only by default (auto; -co = on)\n"
          "  --hide-thinking        leave <think> blocks out of the replies (else shown dimmed)\n"
          "  --think on|off         the template's enable_thinking (Qwen3), default: the template's\n"
          "  --no-history           keep no history file ($XDG_STATE_HOME/minfer/chat_history)\n"
          "  -c N                   (below) defaults to the session's context size, else 4096 (at most\n"
          "                         the model's)\n",
          f);
    cli_model_usage(f);
    fputs("Messages: one line; a trailing \\ continues it on the next; \"\"\" starts and ends a block.\n"
          "Ctrl-C stops a reply (it is kept, marked interrupted); Ctrl-C at the prompt or Ctrl-D exits.\n"
          "With standard input not a terminal, each line (or block) is one turn and only the replies go to\n"
          "standard output. Commands: /help in the conversation.\n",
          f);
    mf_cli_sample_usage(f);
    cli_spec_usage(f);
}

typedef struct {
    cli_model_opts mo;
    mf_cli_sample_opts so;
    int *sample_at; /* argv indexes of the sampling flags, applied again over a resumed session's */
    int n_sample_at;
    const char *session;
    int color; /* -1 auto */
    bool hide_thinking, no_history;
    int think;
    cli_spec_opts spec;
} chat_opts;

static int parse(int argc, char **argv, chat_opts *o) {
    cli_model_opts_init(&o->mo);
    cli_spec_opts_init(&o->spec);
    o->color = -1;
    o->think = -1;
    if (!(o->sample_at = malloc((size_t)argc * sizeof *o->sample_at))) return 1;
    static const char *const ignored[] = {"-cnv", "--cnv", "--conversation", "-i", "--interactive",
                                          "--interactive-first", "chat"};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        if (cli_end_of_options(a, &o->mo)) continue;
        if (o->mo.end_of_options || a[0] != '-' || !a[1]) {
            if (!cli_model_positional(&o->mo, "chat", a)) return 2;
            continue;
        }
        const int at = i;
        int r = mf_cli_sample_arg(argc, argv, &i, &o->so);
        if (r > 0) o->sample_at[o->n_sample_at++] = at;
        if (r == 0) r = cli_model_arg(argc, argv, &i, &o->mo);
        if (r == 0) r = cli_spec_arg(argc, argv, &i, &o->spec);
        if (r < 0) return 2;
        if (r > 0) continue;
        bool skip = false;
        for (size_t k = 0; k < CLI_ARRAY_LEN(ignored); k++) skip |= !strcmp(a, ignored[k]);
        if (skip) continue;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--hide-thinking")) {
            o->hide_thinking = true;
        } else if (!strcmp(a, "--no-history")) {
            o->no_history = true;
        } else if ((r = cli_take_value(argc, argv, &i, "--session", &v))) {
            if (r < 0) return 2;
            o->session = v;
        } else if (!strcmp(a, "--color") || !strcmp(a, "-co")) {
            /* llama-cli's --color takes no value; minfer's takes auto|on|off */
            const char *n = i + 1 < argc ? argv[i + 1] : "";
            o->color = 1;
            if (!strcmp(n, "auto") || !strcmp(n, "on") || !strcmp(n, "off"))
                o->color = !strcmp(n, "auto") ? -1 : !strcmp(n, "on"), i++;
        } else if ((r = cli_take_value(argc, argv, &i, "--think", &v))) {
            if (r < 0) return 2;
            if (strcmp(v, "on") && strcmp(v, "off")) {
                cli_error("--think: '%s' is not on or off", v);
                return 2;
            }
            o->think = !strcmp(v, "on");
        } else if (!strcmp(a, "--raw")) {
            cli_error("chat: --raw does not go with a conversation (the chat template makes the turns)");
            return 2;
        } else {
            cli_error("chat: unknown option '%s' (see minfer chat --help)", a);
            return 2;
        }
    }
    if (!o->mo.model) {
        usage(stderr);
        return 2;
    }
    return cli_model_finish(&o->mo, "chat") ? -1 : 2;
}

typedef struct {
    int argc;
    char **argv;
    chat_opts o;
    mf_model *m;
    mf_context *c;
    mf_chat_template *t;
    mf_conv *cv;
    chat_term *term;
    const char *save_to; /* where the conversation is saved after each change; NULL: nowhere */
    bool dirty;
    int turns;
} chat;

/* ---- turns ---- */

static void report_turn(chat *ch, const mf_conv_stats *s) {
    if (s->n_dropped)
        chat_term_note(ch->term, "the conversation did not fit the context of %d tokens: dropped the oldest %d "
                       "exchange%s (the system prompt stays)", mf_context_n_ctx(ch->c), s->n_dropped,
                       s->n_dropped == 1 ? "" : "s");
    if (s->context_full) chat_term_note(ch->term, "the context is full: the reply was cut (it is kept)");
    else if (s->interrupted) chat_term_note(ch->term, "interrupted: the partial reply is kept");
    char spec_line[160];
    cli_spec_summary(&ch->o.spec, spec_line, sizeof spec_line);
    if (!chat_term_interactive(ch->term))
        fprintf(stderr, "minfer: turn %d: prompt %d tokens (%d cached, %d prefilled in %.3f s) | %d tokens in %.2f s "
                        "(%.1f tokens/s) | context %d/%d%s\n",
                ch->turns, s->n_prompt, s->n_reused, s->n_prefilled, s->prefill_s, s->n_generated, s->gen_s,
                s->gen_s > 0 ? s->n_generated / s->gen_s : 0.0, s->n_context, mf_context_n_ctx(ch->c), spec_line);
}

/* A user message (or, with text NULL, /regen). -1 when standard output failed (the program stops;
 * main reports it), else 0: a refused message is reported and the conversation goes on. */
static int turn(chat *ch, const char *text) {
    mf_conv_stats s = {0};
    chat_term_reply_begin(ch->term);
    mf_status st = text ? mf_conv_say(ch->cv, text, chat_term_emit, ch->term, &s)
                        : mf_conv_regen(ch->cv, chat_term_emit, ch->term, &s);
    const bool replied = s.n_generated > 0 || s.interrupted;
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", mf_last_error());
    const mf_status out = chat_term_reply_end(ch->term, replied);
    ch->turns += replied && text;
    ch->dirty |= replied;
    if (st == MF_ERR_IO || out) { /* the reply could not be shown: stop, and say why */
        cli_error("cannot write to standard output: %s", cli_stdout_error());
        return -1;
    }
    if (replied) report_turn(ch, &s);
    if (st) cli_error("%s", msg[0] ? msg : mf_status_str(st));
    return 0;
}

/* ---- commands ---- */

static void print_settings(chat *ch) {
    const mf_sample_settings *s = mf_conv_settings(ch->cv);
    char desc[512];
    mf_sampler_describe(mf_conv_sampler(ch->cv), desc, sizeof desc);
    fprintf(chat_term_info(ch->term), "sampler: %s\nseed %u, n-predict %lld, %zu stop string%s\n", desc,
            (unsigned)s->params.seed, s->n_predict, s->n_stop, s->n_stop == 1 ? "" : "s");
}

static void cmd_set(chat *ch, char *args) {
    if (!*args) {
        print_settings(ch);
        return;
    }
    char *name = args, *value = strchr(args, ' ');
    if (!value) {
        cli_error("/set %s: give a value (e.g. /set temp 0.7)", name);
        return;
    }
    *value++ = 0;
    while (*value == ' ') value++;
    while (name[0] == '-') name++;
    char flag[64];
    snprintf(flag, sizeof flag, "%s%s", strlen(name) == 1 ? "-" : "--", name);
    for (char *p = flag + 2; *p; p++)
        if (*p == '_') *p = '-';
    mf_sample_settings s;
    if (mf_sample_settings_copy(&s, mf_conv_settings(ch->cv))) {
        cli_error("/set: out of memory");
        return;
    }
    char *argv[3] = {"set", flag, value};
    int i = 1, r = mf_cli_sample_arg(3, argv, &i, &s);
    if (r == 0)
        cli_error("/set: unknown setting '%s' (the names are the sampling flags of `minfer chat --help` without "
                  "the dashes: temp, top-k, top-p, min-p, seed, repeat-penalty, n-predict, stop, ...)", name);
    else if (r > 0 && mf_conv_set_settings(ch->cv, &s))
        cli_error("/set: %s", mf_last_error());
    else if (r > 0) {
        ch->dirty = true;
        print_settings(ch);
    }
    mf_sample_settings_free(&s);
}

static void cmd_stats(chat *ch) {
    const mf_conv_stats *s = mf_conv_last_stats(ch->cv);
    FILE *f = chat_term_info(ch->term);
    fprintf(f, "context: %d of %d tokens, %zu messages, %d turns\n", mf_conv_n_cached(ch->cv), mf_context_n_ctx(ch->c),
            mf_conv_n_messages(ch->cv), ch->turns);
    if (!s->n_prompt) return;
    fprintf(f, "last turn: prompt %d tokens, %d from the cache, %d prefilled in %.3f s (%.1f tokens/s)\n",
            s->n_prompt, s->n_reused, s->n_prefilled, s->prefill_s,
            s->prefill_s > 0 ? s->n_prefilled / s->prefill_s : 0.0);
    fprintf(f, "           %d tokens generated in %.2f s (%.1f tokens/s), ended by %s%s\n", s->n_generated, s->gen_s,
            s->gen_s > 0 ? s->n_generated / s->gen_s : 0.0,
            s->interrupted && !s->context_full ? "an interrupt"
            : s->context_full                  ? "a full context"
                                               : mf_stop_reason_str(s->reason),
            s->n_dropped ? ", after dropping old exchanges" : "");
}

/* Apply a session read from path; false (reported) when it cannot be applied. Takes s. */
static bool apply_session(chat *ch, const char *path, mf_conv_session *s) {
    mf_conv_load_report rep;
    mf_status st = mf_conv_load(ch->cv, s, &rep);
    if (st) {
        cli_error("session '%s': %s", path, mf_last_error());
        mf_conv_session_free(s);
        return false;
    }
    const char *problems = mf_conv_session_problems(s);
    if (problems[0]) chat_term_note(ch->term, "session '%s': %s", path, problems);
    if (rep.note[0]) chat_term_note(ch->term, "session '%s': %s", path, rep.note);
    mf_conv_session_free(s);
    ch->turns = 0; /* turns are counted as the conversation's replies */
    for (size_t i = 0; i < mf_conv_n_messages(ch->cv); i++)
        ch->turns += !strcmp(mf_conv_message_at(ch->cv, i)->role, "assistant");
    fprintf(chat_term_info(ch->term), "loaded %zu messages from '%s'%s\n", mf_conv_n_messages(ch->cv), path,
            rep.cache_restored ? " (the context is restored: no prefill)" : "");
    return true;
}

/* /load FILE: read and apply; false (reported) when it cannot be read. */
static bool load_session(chat *ch, const char *path) {
    mf_conv_session *s = NULL;
    if (mf_conv_session_read(path, &s)) {
        cli_error("session: %s (the conversation is as it was)", mf_last_error());
        return false;
    }
    return apply_session(ch, path, s);
}

static bool save(chat *ch, const char *path) {
    if (mf_conv_save(ch->cv, path)) {
        cli_error("cannot save the conversation: %s (the file is as it was)", mf_last_error());
        return false;
    }
    if (ch->save_to && !strcmp(path, ch->save_to)) ch->dirty = false;
    return true;
}

/* Levenshtein distance of two short strings, for "did you mean". */
static int distance(const char *a, const char *b) {
    int row[32], n = (int)strlen(b);
    if (n > 30 || strlen(a) > 30) return 99;
    for (int j = 0; j <= n; j++) row[j] = j;
    for (int i = 1; a[i - 1]; i++) {
        int prev = row[0]++;
        for (int j = 1; j <= n; j++) {
            int cur = row[j], sub = prev + (a[i - 1] != b[j - 1]);
            row[j] = CLI_MIN(CLI_MIN(row[j] + 1, row[j - 1] + 1), sub);
            prev = cur;
        }
    }
    return row[n];
}

static const struct {
    const char *name, *args, *help;
} commands[] = {
    {"help", "", "this list"},
    {"clear", "", "forget the conversation (the system prompt stays)"},
    {"system", "[TEXT]", "set the system prompt (no TEXT: remove it)"},
    {"regen", "", "drop the last reply and generate a new one"},
    {"undo", "", "drop the last exchange (your message and its reply)"},
    {"save", "[FILE]", "save the conversation (no FILE: to --session's file)"},
    {"load", "FILE", "replace the conversation with a saved one"},
    {"stats", "", "tokens in the context, prefill and generation speed of the last turn"},
    {"set", "[NAME VALUE]", "a sampling setting, e.g. /set temp 0.7, /set top-k 20 (none: show them)"},
    {"exit", "", "leave (also /quit, /bye, Ctrl-D)"},
};

/* Run a /command: 0 to go on, 1 to leave, -1 when standard output failed. */
static int command(chat *ch, char *line) {
    char *name = line + 1, *args = name + strcspn(name, " \t\n");
    if (*args) *args++ = 0;
    args += strspn(args, " \t");
    FILE *f = chat_term_info(ch->term);
    if (!strcmp(name, "exit") || !strcmp(name, "quit") || !strcmp(name, "bye")) return 1;
    if (!strcmp(name, "help") || !strcmp(name, "?")) {
        for (size_t i = 0; i < CLI_ARRAY_LEN(commands); i++) {
            char head[64];
            snprintf(head, sizeof head, "/%s %s", commands[i].name, commands[i].args);
            fprintf(f, "  %-22s %s\n", head, commands[i].help);
        }
        fprintf(f, "  a line ending in \\ goes on on the next; \"\"\" starts and ends a block of lines\n");
    } else if (!strcmp(name, "clear")) {
        mf_conv_clear(ch->cv);
        ch->dirty = true;
        fprintf(f, "cleared%s\n", mf_conv_system(ch->cv) ? " (the system prompt stays)" : "");
    } else if (!strcmp(name, "system")) {
        if (mf_conv_set_system(ch->cv, args)) cli_error("/system: %s", mf_last_error());
        else fprintf(f, "%s\n", *args ? "system prompt set" : "system prompt removed");
        ch->dirty = true;
    } else if (!strcmp(name, "regen")) {
        return turn(ch, NULL);
    } else if (!strcmp(name, "undo")) {
        if (mf_conv_undo(ch->cv)) {
            ch->dirty = true;
            fprintf(f, "dropped the last exchange (%zu messages left)\n", mf_conv_n_messages(ch->cv));
        } else {
            cli_error("/undo: there is no exchange to drop");
        }
    } else if (!strcmp(name, "save")) {
        const char *to = *args ? args : ch->save_to;
        if (!to) cli_error("/save: give a file name (no --session file is in use)");
        else if (save(ch, to)) fprintf(f, "saved %zu messages to '%s'\n", mf_conv_n_messages(ch->cv), to);
    } else if (!strcmp(name, "load")) {
        if (!*args) cli_error("/load: give a file name");
        else if (load_session(ch, args)) ch->dirty = true;
    } else if (!strcmp(name, "stats")) {
        cmd_stats(ch);
    } else if (!strcmp(name, "set")) {
        cmd_set(ch, args);
    } else {
        const char *best = NULL;
        int bd = 3;
        for (size_t i = 0; i < CLI_ARRAY_LEN(commands); i++) {
            int d = distance(name, commands[i].name);
            if (d < bd) bd = d, best = commands[i].name;
        }
        if (best) cli_error("unknown command '/%s': did you mean /%s? (/help lists the commands)", name, best);
        else cli_error("unknown command '/%s' (/help lists the commands; a message cannot start with '/', "
                       "begin it with a space)", name);
    }
    return 0;
}

/* ---- setup ---- */

static int setup(chat *ch) {
    chat_opts *o = &ch->o;
    mf_status st;
    if (!(o->mo.model = cli_model(o->mo.model))) return 1; /* a path, a cached name, hf:..., ollama:... */
    const mf_model_load_params lp = cli_load_params(o->mo.no_mmap, o->mo.no_repack);
    if ((st = mf_model_load_ex(o->mo.model, &lp, &ch->m))) return cli_error_status(st, "chat"), 1;
    if (!mf_model_tokenizer(ch->m)) return cli_error_status(MF_ERR_FORMAT, "tokenizer"), 1;
    if ((st = mf_chat_template_from_gguf(mf_model_gguf(ch->m), NULL, &ch->t))) return cli_error_status(st, "chat template"), 1;

    /* A session's context size is the default, so a resumed conversation overflows where it would have */
    mf_conv_session *sess = NULL;
    bool unreadable = false;
    if (o->session) {
        st = mf_conv_session_read(o->session, &sess);
        if (st && st != MF_ERR_NOT_FOUND) {
            cli_error("session: %s", mf_last_error());
            cli_error("starting a new conversation; '%s' is left as it is (save this one with /save FILE)", o->session);
            unreadable = true;
        }
    }
    mf_context_params cp = cli_model_context_params(&o->mo);
    if (!cp.n_ctx) cp.n_ctx = sess && mf_conv_session_n_ctx(sess) ? mf_conv_session_n_ctx(sess) : 4096;
    const int32_t train = mf_model_n_ctx_train(ch->m);
    if (!o->mo.n_ctx && !sess && train > 0 && cp.n_ctx > train) cp.n_ctx = train;
    if ((st = mf_context_create(ch->m, &cp, &ch->c))) {
        mf_conv_session_free(sess);
        return cli_error_status(st, "context"), 1;
    }
    mf_conv_params p = mf_conv_default_params();
    p.enable_thinking = o->think;
    p.cancel = &chat_cancel;
    if ((st = mf_conv_create(ch->m, ch->c, ch->t, &o->so, &p, &ch->cv))) {
        mf_conv_session_free(sess);
        return cli_error_status(st, "chat"), 1;
    }
    if (!cli_spec_create(&ch->o.spec, ch->m, ch->c, p.seq, &mf_conv_settings(ch->cv)->params)) {
        mf_conv_session_free(sess);
        return 1;
    }
    mf_conv_set_spec(ch->cv, ch->o.spec.spec);
    ch->save_to = o->session && !unreadable ? o->session : NULL;
    if (sess) {
        if (!apply_session(ch, o->session, sess)) ch->save_to = NULL;
        /* sampling flags given now apply over the session's settings */
        if (o->n_sample_at) {
            mf_sample_settings s;
            bool ok = !mf_sample_settings_copy(&s, mf_conv_settings(ch->cv));
            for (int k = 0; ok && k < o->n_sample_at; k++) {
                int i = o->sample_at[k];
                ok = mf_cli_sample_arg(ch->argc, ch->argv, &i, &s) > 0;
            }
            if (ok && mf_conv_set_settings(ch->cv, &s)) cli_error("chat: %s", mf_last_error());
            mf_sample_settings_free(&s);
        }
        if (o->think >= 0) mf_conv_set_thinking(ch->cv, o->think); /* given now: over the session's */
        if (o->mo.system && mf_conv_n_messages(ch->cv))
            chat_term_note(ch->term, "-sys is ignored: the session has its conversation (change it with /system)");
    }
    if (o->mo.system && !mf_conv_n_messages(ch->cv) && (st = mf_conv_set_system(ch->cv, o->mo.system)))
        return cli_error_status(st, "chat"), 1;
    return 0;
}

static bool blank(const char *s) { return s[strspn(s, " \t\r\n")] == 0; }

int cmd_chat(int argc, char **argv) {
    chat ch = {.argc = argc, .argv = argv};
    mf_cli_sample_opts_init(&ch.o.so);
    int rc = parse(argc, argv, &ch.o);
    if (rc >= 0) goto out;
    const chat_opts *o = &ch.o;
    const char *term = getenv("TERM");
    const bool color = o->color >= 0 ? o->color
                                     : isatty(STDOUT_FILENO) && !getenv("NO_COLOR") && !(term && !strcmp(term, "dumb"));
    const chat_term_params tp = {.interactive = isatty(STDIN_FILENO) != 0, .color = color,
                                 .hide_thinking = o->hide_thinking, .history = !o->no_history};
    if (!(ch.term = chat_term_open(&tp))) {
        rc = 1;
        goto out;
    }
    if ((rc = setup(&ch))) goto out;
    if (chat_term_interactive(ch.term)) {
        mf_model_info mi;
        mf_model_get_info(ch.m, &mi);
        fprintf(stderr, "minfer chat: %s (%s) | context %d tokens | /help lists the commands, Ctrl-C stops a reply, "
                        "Ctrl-D exits\n", mi.name && mi.name[0] ? mi.name : o->mo.model, mi.arch, mf_context_n_ctx(ch.c));
    }
    int r = o->mo.prompt ? turn(&ch, o->mo.prompt) : 0;
    while (r == 0 && !chat_quit) {
        if (ch.dirty && ch.save_to) save(&ch, ch.save_to);
        char *msg = chat_term_read(ch.term);
        if (!msg) break;
        if (!blank(msg)) r = msg[0] == '/' ? command(&ch, msg) : turn(&ch, msg);
        free(msg);
    }
    if (ch.dirty && ch.save_to) save(&ch, ch.save_to);
    rc = r < 0 ? 1 : 0;
out:
    chat_term_close(ch.term);
    mf_conv_free(ch.cv);
    cli_spec_opts_free(&ch.o.spec);
    mf_chat_template_free(ch.t);
    mf_context_free(ch.c);
    mf_model_free(ch.m);
    mf_cli_sample_opts_free(&ch.o.so);
    cli_model_opts_free(&ch.o.mo);
    free(ch.o.sample_at);
    return rc;
}
