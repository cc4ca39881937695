/* chat_term.h: the terminal side of `minfer chat`: reading messages (libedit line editing and a
 * history file on a terminal, plain lines from a pipe; `"""` blocks and trailing-backslash lines for
 * multi-line input), the signals (Ctrl-C stops a reply, a second one or Ctrl-C at the prompt quits),
 * and writing replies (colours only on a terminal, <think> blocks dimmed or hidden). The terminal's
 * state is libedit's while a line is read and is restored on every way out (chat_term_close). */
#ifndef MF_CLI_CHAT_TERM_H
#define MF_CLI_CHAT_TERM_H

#include "cli.h"

#include <signal.h>
#include <stdbool.h>
#include <stdio.h>

/* Set by the signal handlers: cancel stops the reply being generated (conv params.cancel); quit
 * ends the program at the next prompt (Ctrl-C at the prompt, a second Ctrl-C during a reply,
 * SIGTERM, SIGHUP). */
extern volatile sig_atomic_t chat_cancel, chat_quit;

typedef struct chat_term chat_term;

typedef struct chat_term_params {
    bool interactive;  /* standard input is a terminal: libedit, prompts, history */
    bool color;        /* colours on standard output */
    bool hide_thinking; /* leave out <think>...</think> (else shown dimmed when coloured) */
    bool history;      /* keep a history file (interactive only) */
} chat_term_params;

/* Install the signal handlers and, when interactive, set up libedit and load the history from
 * $XDG_STATE_HOME/minfer/chat_history (~/.local/state/...). Never fails: without libedit's
 * terminal it reads plain lines. */
chat_term *chat_term_open(const chat_term_params *p);
/* Save the history, restore the terminal and the signal handlers. Accepts NULL. */
void chat_term_close(chat_term *t);
bool chat_term_interactive(const chat_term *t);
bool chat_term_color(const chat_term *t);
/* Where command output goes: standard output on a terminal, standard error when piped (standard
 * output then holds only the replies). */
FILE *chat_term_info(const chat_term *t);

/* The next message: one line, a `"""` ... `"""` block, or lines joined by a trailing backslash;
 * malloc'd, without the final newline. NULL at the end of input (Ctrl-D) or when quitting. */
char *chat_term_read(chat_term *t);

/* Around a reply: replying makes Ctrl-C stop the reply instead of quitting. */
void chat_term_reply_begin(chat_term *t);
/* The reply's text as it comes (the emit callback of conv.h); MF_ERR_IO when standard output
 * fails. */
mf_status chat_term_emit(void *term, const char *text, size_t len);
/* End the reply: flush held text, restore the colour, end the line (when there was a reply). */
mf_status chat_term_reply_end(chat_term *t, bool replied);

/* A one-line note (overflow, interruption, session problems): dim yellow on a terminal, to standard
 * error. printf format. */
void chat_term_note(chat_term *t, const char *fmt, ...) CLI_PRINTF(2, 3);

#endif /* MF_CLI_CHAT_TERM_H */
