/* chat.h: chat templates: compile a model's Jinja chat template once and render conversations with
 * it, byte-identical to Hugging Face transformers' apply_chat_template (jinja2 sandbox,
 * trim_blocks, lstrip_blocks, loopcontrols, tojson without ASCII escaping, raise_exception,
 * strftime_now).
 *
 * A compiled template is read-only and may be rendered from several threads at once. Rendering is
 * bounded (output size, memory, evaluation steps, nesting depth), so a hostile template or
 * conversation yields an error, never a crash or a hang. */
#ifndef MF_CHAT_H
#define MF_CHAT_H

#include "core/core.h"
#include "gguf/gguf.h"

#include <jansson.h>

typedef struct mf_chat_template mf_chat_template;

/* The template minfer uses when a model has none (ChatML, as Qwen models write it). */
extern const char mf_chat_template_chatml[];

/* Compile NUL-terminated UTF-8 template source. Errors name the line and the construct:
 * MF_ERR_FORMAT for syntax errors ("line 3: expected '%}', got ..."), MF_ERR_UNSUPPORTED for
 * valid Jinja minfer does not implement ("line 7: unknown filter 'wordwrap'"). */
mf_status mf_chat_template_create(const char *source, mf_chat_template **out);
void mf_chat_template_free(mf_chat_template *t);

/* Load a model's chat template and the texts of its BOS/EOS tokens from GGUF metadata
 * (tokenizer.chat_template, tokenizer.ggml.tokens[tokenizer.ggml.bos_token_id / eos_token_id]).
 * override_source (may be NULL) replaces the model's template. A model without a template gets
 * mf_chat_template_chatml, with a warning logged and mf_chat_template_is_fallback() true. */
mf_status mf_chat_template_from_gguf(const mf_gguf *g, const char *override_source, mf_chat_template **out);

/* Set the texts bos_token/eos_token render as (NULL = ""); copied. from_gguf sets them. */
mf_status mf_chat_template_set_tokens(mf_chat_template *t, const char *bos, const char *eos);
const char *mf_chat_template_bos(const mf_chat_template *t); /* "" when unset */
const char *mf_chat_template_eos(const mf_chat_template *t);
const char *mf_chat_template_source(const mf_chat_template *t);
bool mf_chat_template_is_fallback(const mf_chat_template *t);

typedef struct mf_chat_render_params {
    int64_t now;       /* strftime_now's clock in seconds since the epoch, read as UTC; 0 = local time now */
    size_t max_output; /* limit on the rendered text and any string built on the way, bytes */
    size_t max_memory; /* limit on the interpreter's working memory, bytes */
    uint64_t max_steps; /* limit on evaluation steps (statements, loop iterations, calls) */
} mf_chat_render_params;

/* now 0, max_output 64 MiB, max_memory 1 GiB, max_steps 50 million. */
mf_chat_render_params mf_chat_render_default_params(void);

/* Render with a context object: every key becomes a template variable, typically
 *   messages (array of {role, content, tool_calls, reasoning_content, ...}), tools,
 *   add_generation_prompt, enable_thinking, plus any extra variables;
 * bos_token/eos_token come from the template object unless the context sets them. Keys absent from
 * the context are undefined in the template (not false). params may be NULL (defaults).
 * On success *out is a malloc'd NUL-terminated string (caller frees) and *out_len (may be NULL)
 * its length. Errors: MF_ERR_ARG when the template rejects the conversation via raise_exception
 * (its message is in mf_last_error()), MF_ERR_FORMAT for template runtime errors (undefined
 * variable used, type errors), MF_ERR_RANGE for exceeded limits; all messages name the line. */
mf_status mf_chat_template_render(const mf_chat_template *t, const json_t *context, const mf_chat_render_params *params,
                                  char **out, size_t *out_len);

#endif /* MF_CHAT_H */
