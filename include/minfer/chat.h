/* minfer/chat.h: chat templates: compile a model's Jinja chat template once and render
 * conversations with it, byte-identical to Hugging Face transformers' apply_chat_template (jinja2
 * sandbox, trim_blocks, lstrip_blocks, loopcontrols, tojson without ASCII escaping, raise_exception,
 * strftime_now). Part of the public API (include minfer.h).
 *
 * A compiled template is read-only and may be rendered from several threads at once. Rendering is
 * bounded (output size, memory, evaluation steps, nesting depth), so a hostile template or
 * conversation yields an error, never a crash or a hang.
 *
 *   mf_chat_template *t;  mf_chat_template_from_gguf(mf_model_gguf(model), NULL, &t);
 *   mf_chat_message msgs[] = {{.role = "system", .content = "Be brief."}, {.role = "user", .content = "Hi"}};
 *   mf_chat_options o = mf_chat_default_options();   // add_generation_prompt = true
 *   char *text;  mf_chat_render(t, msgs, 2, &o, &text, NULL);  ... free(text);
 */
#ifndef MINFER_CHAT_H
#define MINFER_CHAT_H

#include "minfer.h"
#include "minfer/gguf.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mf_chat_template mf_chat_template;

/* The template minfer uses when a model has none (ChatML, as Qwen models write it). */
const char *mf_chat_template_chatml(void);

/* Compile NUL-terminated UTF-8 template source. Errors name the line and the construct:
 * MF_ERR_FORMAT for syntax errors ("line 3: expected '%}', got ..."), MF_ERR_UNSUPPORTED for
 * valid Jinja minfer does not implement ("line 7: unknown filter 'wordwrap'"). */
mf_status mf_chat_template_create(const char *source, mf_chat_template **out);
void mf_chat_template_free(mf_chat_template *t);

/* Load a model's chat template and the texts of its BOS/EOS tokens from GGUF metadata
 * (tokenizer.chat_template, tokenizer.ggml.tokens[tokenizer.ggml.bos_token_id / eos_token_id]).
 * override_source (may be NULL) replaces the model's template. A model without a template gets
 * the ChatML one, with a warning logged and mf_chat_template_is_fallback() true. */
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

/* Render with a context given as JSON text: an object whose keys become template variables,
 * typically messages (array of {role, content, tool_calls, reasoning_content, ...}), tools,
 * add_generation_prompt, enable_thinking, plus any extra variables, rendered exactly as given (as
 * Hugging Face's jinja2 would: a tool call's arguments given as a JSON string stay a string, which
 * mf_chat_render and the server decode, as OpenAI's API sends them); bos_token/eos_token come from
 * the template unless the object sets them. Keys absent from it are undefined in the template (not
 * false). params may be NULL (defaults). On success *out is a malloc'd NUL-terminated string (caller
 * frees) and *out_len (may be NULL) its length. Errors: MF_ERR_FORMAT for JSON that is not an object
 * or for template runtime errors (undefined variable used, type errors), MF_ERR_ARG when the
 * template rejects the conversation via raise_exception (its message is in mf_last_error()),
 * MF_ERR_RANGE for exceeded limits; template messages name the line. */
mf_status mf_chat_template_render_json(const mf_chat_template *t, const char *context_json,
                                       const mf_chat_render_params *params, char **out, size_t *out_len);

/* One message. content may be NULL (a message with only tool calls); the optional fields are
 * rendered only when set: reasoning_content (a reasoning model's thinking), tool_calls_json (a JSON
 * array as OpenAI's API sends it: [{"type":"function","function":{"name":..,"arguments":..}}],
 * arguments as an object or a JSON string), tool_call_id and name (for role "tool"). */
typedef struct mf_chat_message {
    const char *role; /* "system", "developer", "user", "assistant", "tool" */
    const char *content;
    const char *reasoning_content;
    const char *tool_calls_json;
    const char *tool_call_id;
    const char *name;
} mf_chat_message;

typedef struct mf_chat_options {
    bool add_generation_prompt; /* end with the start of the assistant's turn (default true) */
    int enable_thinking;        /* -1: leave undefined (default), 0 or 1: set it */
    const char *tools_json;     /* a JSON array of tool definitions, or NULL */
    const char *extra_json;     /* a JSON object whose keys are added to the context, or NULL */
    const mf_chat_render_params *params; /* NULL: defaults */
} mf_chat_options;

mf_chat_options mf_chat_default_options(void);
/* Render messages[0..n) (n may be 0). Errors as mf_chat_template_render_json; MF_ERR_ARG for a
 * message without a role and MF_ERR_FORMAT for tool_calls_json, tools_json or extra_json that do
 * not parse. */
mf_status mf_chat_render(const mf_chat_template *t, const mf_chat_message *messages, size_t n,
                         const mf_chat_options *opts, char **out, size_t *out_len);

#ifdef __cplusplus
}
#endif
#endif /* MINFER_CHAT_H */
