/* conv.h: a conversation with a model, for `minfer chat` and any other program on the public API.
 * The messages are the source of truth. Each turn renders them with the chat template, keeps the
 * longest prefix of those tokens that the KV cache already holds, cuts the cache back to it and
 * prefills only the rest, so the first token of turn N costs what the new message costs, not the
 * history (a template that rewrites an earlier turn just moves the cut). A turn that does not fit
 * drops the oldest exchanges (the system prompt stays); a message that cannot fit at all is refused
 * and the conversation goes on. Replies stream through a callback. Session files (session.c; the
 * format is in docs/chat.md) save the messages, settings, token ids, KV cells and sampler state, so
 * a resumed conversation continues with exactly the bytes the uninterrupted one would have.
 * Needs only include/ (minfer.h); one conversation belongs to one thread. */
#ifndef MF_CONV_H
#define MF_CONV_H

#include "minfer.h"

#include <signal.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mf_conv mf_conv;

typedef struct mf_conv_message {
    const char *role;    /* "system" (only first), "user", "assistant" */
    const char *content; /* UTF-8 */
    bool interrupted;    /* an assistant reply that did not end by itself (Ctrl-C, context full, output error) */
} mf_conv_message;

typedef struct mf_conv_params {
    int32_t seq;         /* the context's sequence the conversation uses (default 0) */
    int32_t reserve;     /* room a turn keeps for its reply when deciding whether it fits; 0 (default):
                            n_predict when set, else 256, at most a quarter of the context */
    int enable_thinking; /* the template's enable_thinking (Qwen3): -1 undefined (default), 0 or 1 */
    /* When *cancel becomes nonzero the reply being generated stops; it is kept, marked interrupted.
     * May be NULL. A signal handler sets it. */
    const volatile sig_atomic_t *cancel;
} mf_conv_params;

mf_conv_params mf_conv_default_params(void);

/* What the last turn did (mf_conv_say, mf_conv_regen). */
typedef struct mf_conv_stats {
    int32_t n_prompt;    /* tokens of the rendered conversation, up to the reply */
    int32_t n_reused;    /* of which the cache held already */
    int32_t n_prefilled; /* of which were computed this turn */
    int32_t n_generated; /* reply tokens */
    int32_t n_dropped;   /* exchanges dropped to make the turn fit */
    int32_t n_context;   /* cells of the conversation's sequence after the turn */
    double prefill_s, gen_s;
    mf_stop_reason reason; /* EOG, STRING, LENGTH (-n reached, or the context full) */
    bool interrupted, context_full;
} mf_conv_stats;

/* Receives the reply as it is generated: text safe to show (whole UTF-8 characters, no stop string).
 * A non-OK return stops the reply (kept, marked interrupted) and the turn returns that status. */
typedef mf_status (*mf_conv_emit_fn)(void *user, const char *text, size_t len);

/* A conversation on context c (sequence p->seq, which it owns from now on) with template t and the
 * sampling settings s (copied; a random seed is resolved now and kept, so a saved session repeats
 * it). m, c and t must outlive the conversation. p may be NULL (defaults). */
mf_status mf_conv_create(const mf_model *m, mf_context *c, const mf_chat_template *t, const mf_sample_settings *s,
                         const mf_conv_params *p, mf_conv **out);
void mf_conv_free(mf_conv *cv);

size_t mf_conv_n_messages(const mf_conv *cv);
/* NULL when i is out of range; valid until the messages change. */
const mf_conv_message *mf_conv_message_at(const mf_conv *cv, size_t i);
/* The system prompt, or NULL. */
const char *mf_conv_system(const mf_conv *cv);
/* Set (text not NULL or empty) or remove the system prompt. MF_ERR_ARG for text that is not UTF-8. */
mf_status mf_conv_set_system(mf_conv *cv, const char *text);
/* Append a message without generating anything (a conversation given whole, as a server receives
 * it): role "user" or "assistant" (the system prompt: mf_conv_set_system). MF_ERR_ARG for another
 * role or text that is not UTF-8. */
mf_status mf_conv_add(mf_conv *cv, const char *role, const char *content);
/* Drop every message but the system prompt. */
void mf_conv_clear(mf_conv *cv);
/* Drop the last exchange (the last user message and the replies after it); false when there is none. */
bool mf_conv_undo(mf_conv *cv);

/* A user turn: add text (UTF-8, else MF_ERR_ARG) and generate the reply through emit. Errors:
 * MF_ERR_RANGE when the message cannot fit in the context even alone with the system prompt (the
 * message names both sizes; the conversation is as before), the template's errors, decode errors.
 * On an error before the reply starts the message is not added. stats may be NULL. */
/* Generate the replies with speculative decoding (minfer/spec.h; the same text as without), or
 * plainly for NULL. spec must be made for the conversation's context and sequence and outlive its
 * use; a turn whose settings it cannot take (Mirostat) is generated plainly. */
void mf_conv_set_spec(mf_conv *cv, mf_spec *spec);

mf_status mf_conv_say(mf_conv *cv, const char *text, mf_conv_emit_fn emit, void *user, mf_conv_stats *stats);
/* Drop the last reply and generate it again (the random stream goes on, so it differs).
 * MF_ERR_ARG when the conversation does not end with a user message and its reply. */
mf_status mf_conv_regen(mf_conv *cv, mf_conv_emit_fn emit, void *user, mf_conv_stats *stats);
/* The last turn's numbers (zeros before the first). */
const mf_conv_stats *mf_conv_last_stats(const mf_conv *cv);
/* Tokens of the conversation in the cache now. */
int32_t mf_conv_n_cached(const mf_conv *cv);

const mf_sample_settings *mf_conv_settings(const mf_conv *cv);
/* Replace the sampling settings (copied). The random stream goes on where it was unless the seed
 * changed. Errors as mf_gen_create; then the old settings stay. */
mf_status mf_conv_set_settings(mf_conv *cv, const mf_sample_settings *s);
/* The template's enable_thinking from now on: -1 undefined, 0 or 1 (a session stores it). */
void mf_conv_set_thinking(mf_conv *cv, int enable_thinking);
/* The current sampler (for mf_sampler_describe). */
const mf_sampler *mf_conv_sampler(const mf_conv *cv);

/* ==== Session files ====
 * mf_conv_save writes the conversation atomically (a temporary file, fsync, rename: a failed save
 * leaves the old file as it was). Reading is two steps, because the context's size comes from the
 * file: mf_conv_session_read parses and checks a file (no model needed), mf_conv_load applies it. */
typedef struct mf_conv_session mf_conv_session;

mf_status mf_conv_save(mf_conv *cv, const char *path);

/* Parse a session image. Succeeds when the messages are readable, even if other sections are
 * damaged (mf_conv_load then rebuilds from the messages and says why). Errors (MF_ERR_FORMAT: not a
 * session file, truncated or corrupted so that the messages cannot be read; MF_ERR_UNSUPPORTED)
 * name the problem. The image is copied. */
mf_status mf_conv_session_parse(const void *data, size_t size, mf_conv_session **out);
/* The same for a file (MF_ERR_IO when it cannot be read, MF_ERR_NOT_FOUND when it does not exist). */
mf_status mf_conv_session_read(const char *path, mf_conv_session **out);
void mf_conv_session_free(mf_conv_session *s);
/* The context size the session was saved with (0 when unknown). */
int32_t mf_conv_session_n_ctx(const mf_conv_session *s);
size_t mf_conv_session_n_messages(const mf_conv_session *s);
/* Problems found while parsing (damaged sections, another format version), "" when none. */
const char *mf_conv_session_problems(const mf_conv_session *s);

/* How a load went. note: one line saying what was rebuilt and why ("" when the saved cache was used
 * as is). */
typedef struct mf_conv_load_report {
    bool cache_restored;   /* the KV cells were restored: the next turn prefills only its new tokens */
    bool sampler_restored; /* the random stream and penalty windows continue where they were */
    int32_t n_recomputed;  /* tokens prefilled during the load (from the saved token ids) */
    char note[512];
} mf_conv_load_report;

/* Replace the conversation with the session's: messages and settings always; the cache and the
 * sampler state when the file was written for this model file (mf_model_fingerprint), template
 * and KV type by this version of minfer and its sections are intact; otherwise the cache is
 * recomputed from the saved token ids, or left to the next turn to rebuild from the messages. */
mf_status mf_conv_load(mf_conv *cv, const mf_conv_session *s, mf_conv_load_report *rep);

#ifdef __cplusplus
}
#endif
#endif /* MF_CONV_H */
