/* fuzz_chat.c: libFuzzer target for chat templates: the input is template source, compiled and,
 * when it compiles, rendered against a conversation with a system prompt, tool calls, tool results,
 * content parts and tools, under small limits. Any input must end in MF_OK or an error status with
 * a message, never a crash, a hang or a leak. Seeds: the *.jinja files in fixtures/templates. */
#include "chat/chat.h"

#include <stdlib.h>

static const char conversation[] =
    "{\"messages\": [{\"role\": \"system\", \"content\": \"Be brief.\"},"
    " {\"role\": \"user\", \"content\": \"Weather in Paris?\"},"
    " {\"role\": \"assistant\", \"content\": null, \"tool_calls\": [{\"type\": \"function\", \"id\": \"call12345\","
    "   \"function\": {\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"n\": [1, 2.5, true, null]}}}]},"
    " {\"role\": \"tool\", \"tool_call_id\": \"call12345\", \"content\": \"{\\\"temp\\\": 21}\"},"
    " {\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": \"th\\u00e4nks\"}, {\"type\": \"image\"}]}],"
    " \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"parameters\": {\"type\": \"object\","
    "   \"properties\": {\"city\": {\"type\": \"string\"}}, \"required\": [\"city\"]}}}],"
    " \"add_generation_prompt\": true, \"enable_thinking\": false}";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static json_t *ctx;
    if (!ctx) ctx = json_loads(conversation, 0, NULL);
    char *src = malloc(size + 1);
    if (!src) return 0;
    memcpy(src, data, size);
    src[size] = 0;
    mf_chat_template *t = NULL;
    if (mf_chat_template_create(src, &t) == MF_OK) {
        MF_ASSERT(mf_chat_template_set_tokens(t, "<s>", "</s>") == MF_OK);
        mf_chat_render_params p = mf_chat_render_default_params();
        p.now = 1795953600;
        p.max_output = 1 << 20;
        p.max_memory = 64 << 20;
        p.max_steps = 200000;
        char *out = NULL;
        size_t len = 0;
        mf_status st = mf_chat_template_render(t, ctx, &p, &out, &len);
        MF_ASSERT(st == MF_OK ? out != NULL && strlen(out) <= len : out == NULL && mf_last_error()[0]);
        free(out);
    } else {
        MF_ASSERT(t == NULL && mf_last_error()[0]);
    }
    mf_chat_template_free(t);
    free(src);
    return 0;
}
