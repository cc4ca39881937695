/* chat.h: chat templates (the API is public, include/minfer/chat.h); this header adds rendering
 * from a jansson object for the library's own use. Templates render byte-identical to Hugging Face transformers' apply_chat_template (jinja2 sandbox,
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
#include "minfer/chat.h"

#include <jansson.h>

/* The ChatML template source (mf_chat_template_chatml() returns it). */
extern const char mf_chat_template_chatml_source[];

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
