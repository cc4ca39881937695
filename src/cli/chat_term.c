/* chat_term.c: reading messages and writing replies for `minfer chat` (see chat_term.h). On a
 * terminal, lines come from libedit (emacs keys, history), through our own character reader so that
 * a Ctrl-C or SIGTERM at the prompt ends el_gets at once; from a pipe they are plain lines. */
#include "chat_term.h"

#include <errno.h>
#include <histedit.h>
#include <locale.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <wchar.h>

volatile sig_atomic_t chat_cancel, chat_quit;
static volatile sig_atomic_t replying, winch;

struct chat_term {
    chat_term_params p;
    EditLine *el;
    History *hist;
    char *hist_path;
    const char *prompt; /* libedit's prompt now (with \1-delimited colour escapes) */
    struct sigaction old_int, old_term, old_hup, old_winch;
    /* the <think> filter: a tag may arrive split across pieces, so a possible tag prefix is held */
    bool in_think, dim;
    char hold[16];
    size_t n_hold;
};

static void on_signal(int sig) {
    if (sig == SIGWINCH) {
        winch = 1;
        return;
    }
    if (sig == SIGINT && replying && !chat_cancel) { /* the first Ctrl-C stops the reply */
        chat_cancel = 1;
        return;
    }
    chat_cancel = 1;
    chat_quit = 1;
}

static const char *prompt_fn(EditLine *el) {
    chat_term *t = NULL;
    el_get(el, EL_CLIENTDATA, &t);
    return t ? t->prompt : "> ";
}

/* libedit's character reader, ours so that a signal ends the line at once (libedit's own retries
 * an interrupted read). One UTF-8 character at a time, decoded with the locale. */
static int getc_fn(EditLine *el, wchar_t *wc) {
    mbstate_t mbs;
    memset(&mbs, 0, sizeof mbs);
    for (;;) {
        if (chat_quit) return -1;
        char b;
        const ssize_t r = read(STDIN_FILENO, &b, 1);
        if (r < 0 && errno == EINTR) {
            if (winch) {
                winch = 0;
                el_resize(el);
            }
            continue;
        }
        if (r <= 0) return r == 0 ? 0 : -1;
        const size_t k = mbrtowc(wc, &b, 1, &mbs);
        if (k == (size_t)-2) continue; /* more bytes of this character */
        if (k == (size_t)-1) {         /* not valid here: pass the byte on */
            *wc = (unsigned char)b;
            memset(&mbs, 0, sizeof mbs);
        }
        return 1;
    }
}

/* $XDG_STATE_HOME/minfer/chat_history, else ~/.local/state/minfer/chat_history (directories
 * made); NULL without a home. */
static char *history_path(void) {
    const char *xdg = getenv("XDG_STATE_HOME"), *home = getenv("HOME");
    char dir[4096];
    if (xdg && xdg[0] == '/') snprintf(dir, sizeof dir, "%s/minfer", xdg);
    else if (home && home[0]) snprintf(dir, sizeof dir, "%s/.local/state/minfer", home);
    else return NULL;
    for (char *s = dir + 1; *s; s++) /* mkdir -p */
        if (*s == '/') {
            *s = 0;
            mkdir(dir, 0700);
            *s = '/';
        }
    if (mkdir(dir, 0700) != 0 && errno != EEXIST) return NULL;
    const size_t n = strlen(dir) + 16;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/chat_history", dir);
    return p;
}

/* Install the handlers. While a line is read, a signal must interrupt the read (no SA_RESTART), so
 * that Ctrl-C at the prompt ends it at once; at any other time interrupted system calls restart, so
 * a Ctrl-C that stops a reply never fails the write that was showing it. */
static void handlers(bool restart, chat_term *save) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = restart ? SA_RESTART : 0;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, save ? &save->old_int : NULL);
    sigaction(SIGTERM, &sa, save ? &save->old_term : NULL);
    sigaction(SIGHUP, &sa, save ? &save->old_hup : NULL);
    sigaction(SIGWINCH, &sa, save ? &save->old_winch : NULL);
}

chat_term *chat_term_open(const chat_term_params *p) {
    chat_term *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    t->p = *p;
    t->prompt = "> ";
    handlers(true, t);
    if (!p->interactive) return t;
    /* libedit works in wide characters: it needs a UTF-8 locale to edit non-ASCII text */
    const char *loc = setlocale(LC_CTYPE, "");
    if (!loc || !strstr(loc, "UTF-8")) setlocale(LC_CTYPE, "C.UTF-8");
    t->el = el_init("minfer", stdin, stdout, stderr);
    if (!t->el) return t;
    el_set(t->el, EL_CLIENTDATA, t);
    el_set(t->el, EL_EDITOR, "emacs");
    el_set(t->el, EL_SIGNAL, 0);
    el_set(t->el, EL_PROMPT_ESC, prompt_fn, '\1');
    el_set(t->el, EL_GETCFN, getc_fn);
    t->hist = history_init();
    if (t->hist) {
        HistEvent ev;
        history(t->hist, &ev, H_SETSIZE, 1000);
        history(t->hist, &ev, H_SETUNIQUE, 1);
        if (p->history && (t->hist_path = history_path())) history(t->hist, &ev, H_LOAD, t->hist_path);
        el_set(t->el, EL_HIST, history, t->hist);
    }
    el_source(t->el, NULL); /* ~/.editrc, as every libedit program reads it */
    return t;
}

void chat_term_close(chat_term *t) {
    if (!t) return;
    if (t->dim || t->p.color) fputs("\033[0m", stdout);
    if (t->hist) {
        HistEvent ev;
        if (t->hist_path) history(t->hist, &ev, H_SAVE, t->hist_path);
        history_end(t->hist);
    }
    if (t->el) el_end(t->el); /* restores the terminal's modes */
    sigaction(SIGINT, &t->old_int, NULL);
    sigaction(SIGTERM, &t->old_term, NULL);
    sigaction(SIGHUP, &t->old_hup, NULL);
    sigaction(SIGWINCH, &t->old_winch, NULL);
    free(t->hist_path);
    free(t);
}

bool chat_term_interactive(const chat_term *t) { return t->p.interactive; }
bool chat_term_color(const chat_term *t) { return t->p.color; }
FILE *chat_term_info(const chat_term *t) { return t->p.interactive ? stdout : stderr; }

static char *read_line_now(chat_term *t, bool continuation);

/* One line without its newline (malloc'd), or NULL at the end of input or when quitting. */
static char *read_line(chat_term *t, bool continuation) {
    handlers(false, NULL);
    char *s = read_line_now(t, continuation);
    handlers(true, NULL);
    return s;
}

static char *read_line_now(chat_term *t, bool continuation) {
    if (chat_quit) return NULL;
    if (t->el) {
        t->prompt = continuation ? (t->p.color ? "\1\033[2m\1... \1\033[0m\1" : "... ")
                                 : (t->p.color ? "\1\033[1;32m\1> \1\033[0m\1" : "> ");
        int n = 0;
        const char *line = el_gets(t->el, &n);
        if (!line || n <= 0 || chat_quit) {
            fputc('\n', stdout); /* Ctrl-D or Ctrl-C: end the prompt's line */
            return NULL;
        }
        char *s = strdup(line);
        if (s && n > 0 && s[strlen(s) - 1] == '\n') s[strlen(s) - 1] = 0;
        if (s && s[0] && t->hist) {
            HistEvent ev;
            history(t->hist, &ev, H_ENTER, s);
        }
        return s;
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    do {
        errno = 0;
        n = getline(&line, &cap, stdin);
    } while (n < 0 && errno == EINTR && !chat_quit);
    if (n < 0) {
        free(line);
        return NULL;
    }
    if (n > 0 && line[n - 1] == '\n') line[--n] = 0;
    if (n > 0 && line[n - 1] == '\r') line[--n] = 0;
    return line;
}

static bool append(char **buf, size_t *len, const char *s, bool newline) {
    const size_t n = strlen(s);
    char *nb = realloc(*buf, *len + n + 2);
    if (!nb) return false;
    if (newline) nb[(*len)++] = '\n';
    memcpy(nb + *len, s, n + 1);
    *len += n;
    *buf = nb;
    return true;
}

static bool ends_with(const char *s, const char *tail) {
    const size_t n = strlen(s), m = strlen(tail);
    return n >= m && !memcmp(s + n - m, tail, m);
}

char *chat_term_read(chat_term *t) {
    char *line = read_line(t, false);
    if (!line) return NULL;
    char *msg = NULL;
    size_t len = 0;
    bool ok = true;
    if (!strncmp(line, "\"\"\"", 3)) {
        /* a block: everything up to a line that ends with """ (Ollama's form) */
        const char *first = line + 3;
        if (strlen(first) >= 3 && ends_with(first, "\"\"\"")) {
            ok = append(&msg, &len, first, false);
            msg[len - 3] = 0;
        } else {
            bool started = first[0] != 0;
            ok = append(&msg, &len, first, false);
            for (char *l; ok && (l = read_line(t, true));) {
                const bool end = ends_with(l, "\"\"\"");
                if (end) l[strlen(l) - 3] = 0;
                if (!end || l[0]) ok = append(&msg, &len, l, started), started = true;
                free(l);
                if (end) break;
            }
        }
    } else {
        /* a trailing backslash continues the message on the next line */
        ok = append(&msg, &len, line, false);
        while (ok && len && msg[len - 1] == '\\') {
            msg[--len] = 0;
            char *l = read_line(t, true);
            if (!l) break;
            ok = append(&msg, &len, l, true);
            free(l);
        }
    }
    free(line);
    if (!ok) {
        free(msg);
        cli_error("chat: out of memory reading the message");
        return NULL;
    }
    return msg;
}

void chat_term_reply_begin(chat_term *t) {
    t->in_think = t->dim = false;
    t->n_hold = 0;
    chat_cancel = 0;
    replying = 1;
}

static void out_text(chat_term *t, const char *s, size_t n, bool think) {
    if (!n || (think && t->p.hide_thinking)) return;
    if (t->p.color && think != t->dim) {
        fputs(think ? "\033[2m" : "\033[0m", stdout);
        t->dim = think;
    }
    fwrite(s, 1, n, stdout);
}

mf_status chat_term_emit(void *term, const char *text, size_t len) {
    chat_term *t = term;
    for (size_t i = 0; i < len; i++) {
        t->hold[t->n_hold++] = text[i];
        while (t->n_hold) {
            const char *tag = t->in_think ? "</think>" : "<think>";
            const size_t tl = strlen(tag), m = t->n_hold < tl ? t->n_hold : tl;
            if (!memcmp(t->hold, tag, m)) { /* held bytes may still become the tag */
                if (t->n_hold == tl) {
                    out_text(t, tag, tl, true);
                    t->in_think = !t->in_think;
                    t->n_hold = 0;
                }
                break;
            }
            out_text(t, t->hold, 1, t->in_think);
            memmove(t->hold, t->hold + 1, --t->n_hold);
        }
    }
    return cli_stdout_ok() ? MF_OK : mf_set_error(MF_ERR_IO, "cannot write to standard output: %s", cli_stdout_error());
}

mf_status chat_term_reply_end(chat_term *t, bool replied) {
    replying = 0;
    out_text(t, t->hold, t->n_hold, t->in_think);
    t->n_hold = 0;
    if (t->dim) fputs("\033[0m", stdout);
    t->dim = t->in_think = false;
    if (replied) fputc('\n', stdout);
    return cli_stdout_ok() ? MF_OK : mf_set_error(MF_ERR_IO, "cannot write to standard output: %s", cli_stdout_error());
}

void chat_term_note(chat_term *t, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    const bool c = t->p.color && isatty(STDERR_FILENO);
    fputs(c ? "\033[2;33m" : "minfer: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputs(c ? "\033[0m\n" : "\n", stderr);
    va_end(ap);
}
