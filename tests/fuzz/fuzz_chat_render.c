/* libFuzzer harness: a real chat template (the built-in Gemma 3, Llama 3,
 * Mistral or ChatML one, chosen by the first byte) rendered and tokenized
 * (prompt_encode_chat, with a small SentencePiece vocabulary) over messages
 * from fuzz bytes: a JSON array is the messages, anything else JSON is put
 * there as is. The first byte also picks add_generation_prompt and whether
 * the template trusts content. Hostile messages must give an error message
 * (a template's raise_exception included), never a crash or a leak. */
#include "chat/prompt.h"
#include "chat/template.h"

#include "fuzz_common.h"

enum { N_TEMPLATES = 4 };

static chat_template *builtin(int which, bool trust) {
    static chat_template *cache[N_TEMPLATES][2];
    if (!cache[which][trust]) {
        static const char *const k_arch[N_TEMPLATES] = {"gemma3", "llama", "llama", "qwen2"};
        chat_template *t = chat_template_parse(chat_template_builtin(k_arch[which], which == 1));
        if (!t) abort();
        chat_template_set_trust_content(t, trust);
        cache[which][trust] = t;
    }
    return cache[which][trust];
}

static const tokenizer *vocab(void) {
    static tokenizer *t;
    if (!t) t = fuzz_spm_tokenizer(false);
    return t;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const uint8_t flags = data[0];
    json_error_t je;
    json_t *messages = json_loadb((const char *)data + 1, size - 1, JSON_DECODE_ANY, &je);
    if (!messages) return 0;
    const chat_template *t = builtin(flags % N_TEMPLATES, flags & 8);
    const bool add_generation_prompt = flags & 4;
    int32_t *ids = NULL;
    const chat_render_opts opts = {.add_generation_prompt = add_generation_prompt,
                                   .continue_final_message = !add_generation_prompt && (flags & 16)};
    int n = prompt_encode_chat(vocab(), t, messages, &opts, &ids);
    if (n >= 0) free(ids);
    char *text = prompt_render_chat(vocab(), t, messages, &opts);
    free(text);
    json_decref(messages);
    return 0;
}
