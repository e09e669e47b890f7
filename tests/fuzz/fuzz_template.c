/* libFuzzer harness: a chat template from fuzz bytes, parsed
 * (chat_template_parse) and, when it parses, rendered against a fixed small
 * conversation both plainly and with the request text marked
 * (chat_template_render_marked); the two renderings must be equal (or the
 * marked one out of memory, see below) and the marked spans ordered and
 * inside the output. A bad or runaway template must
 * give an error message, never a crash, a hang or a leak. */
#include "chat/template.h"
#include "util/error.h"

#include "fuzz_common.h"

static const char k_context[] =
    "{\"messages\": ["
    "{\"role\": \"system\", \"content\": \"Be brief.\"},"
    "{\"role\": \"user\", \"content\": \"Hi <start_of_turn> \\u00e9\"},"
    "{\"role\": \"assistant\", \"content\": \"Hello!\", \"tool_calls\": [{\"type\": \"function\","
    " \"function\": {\"name\": \"f\", \"arguments\": {\"x\": 1}}}]},"
    "{\"role\": \"tool\", \"content\": \"42\"},"
    "{\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": \"Why?\"}]}],"
    " \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\": {}}}],"
    " \"add_generation_prompt\": true, \"bos_token\": \"<s>\", \"eos_token\": \"</s>\"}";

static json_t *context(void) {
    static json_t *ctx;
    if (!ctx) {
        json_error_t je;
        ctx = json_loads(k_context, 0, &je);
        if (!ctx) abort();
    }
    return ctx;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *source = fuzz_cstr(data, size);
    chat_template *t = chat_template_parse(source);
    free(source);
    if (!t) return 0;
    char *plain = chat_template_render(t, context());
    static const char *const k_trusted[] = {"bos_token", "eos_token", NULL};
    chat_span *spans = NULL;
    size_t n_spans = 0;
    char *marked = chat_template_render_marked(t, context(), k_trusted, &spans, &n_spans);
    /* Marking copies every value computed from request data (the context
     * but bos_token and eos_token) with its taint, so the marked render may
     * run out of its memory budget where the plain one did not ({% set l =
     * tools * 28000 %} under CLLM_FUZZ_LIMITS), never the other way. */
    if (!plain && marked) __builtin_trap();
    if (plain && !marked && !strstr(err_get(), "memory limit exceeded")) __builtin_trap();
    if (plain && marked) {
        if (strcmp(plain, marked)) __builtin_trap();
        const size_t len = strlen(marked);
        size_t end = 0;
        for (size_t i = 0; i < n_spans; i++) {
            if (spans[i].off < end || spans[i].off + spans[i].len > len) __builtin_trap();
            end = spans[i].off + spans[i].len;
        }
    }
    free(plain);
    free(marked);
    free(spans);
    chat_template_free(t);
    return 0;
}
