/* See prompt_limit.h. */
#include "server/prompt_limit.h"

#include "chat/prompt.h"

#include <stdlib.h>
#include <string.h>

int prompt_context_error(api_error *e, const char *param, int max_len, long long n_prompt, long long max_tokens) {
    if (max_tokens < 0)
        return api_fail(e, 400, "context_length_exceeded", param,
                        "This model's maximum context length is %d tokens. However, your %s has %lld tokens, which "
                        "leaves no room for a completion. Please reduce the length of the %s.",
                        max_len, param, n_prompt, param);
    /* max_tokens may be anything up to LLONG_MAX: the total is added
     * unsigned, where two values below 2^63 cannot overflow. */
    return api_fail(e, 400, "context_length_exceeded", param,
                    "This model's maximum context length is %d tokens. However, you requested %llu tokens (%lld in "
                    "the %s, %lld in the completion). Please reduce the length of the %s or the completion.",
                    max_len, (unsigned long long)n_prompt + (unsigned long long)max_tokens, n_prompt, param,
                    max_tokens, param);
}

/* Refuses a text of len bytes that has more tokens than the budget allows
 * for certain. */
static int check_bytes(const tokenizer *t, size_t len, const prompt_budget *b, const char *param, api_error *e) {
    const size_t per_token = tokenizer_max_token_bytes(t);
    const size_t at_least = per_token == SIZE_MAX ? 0 : (len + per_token - 1) / per_token;
    if (at_least + (size_t)b->room <= (size_t)b->max_len) return 0;
    return api_fail(e, 400, "context_length_exceeded", param,
                    "This model's maximum context length is %d tokens. However, your %s has at least %zu tokens "
                    "(%zu bytes, and no token of this model covers more than %zu bytes)%s. Please reduce the length "
                    "of the %s.",
                    b->max_len, param, at_least, len, per_token,
                    b->room ? ", which leaves no room for a completion" : "", param);
}

int prompt_limit_text(const tokenizer *t, const char *text, size_t len, bool add_special, const prompt_budget *b,
                      const char *param, int32_t **out, api_error *e) {
    *out = NULL;
    if (check_bytes(t, len, b, param, e)) return -1;
    const int n = prompt_encode_text(t, text, len, add_special, out);
    return n < 0 ? api_fail_prompt(e, n, "invalid_prompt", param) : n;
}

int prompt_limit_chat(const tokenizer *t, const chat_template *tmpl, json_t *messages, const chat_render_opts *opts,
                      const prompt_budget *b, const char *param, int32_t **out, api_error *e) {
    *out = NULL;
    /* Rendered twice when it fits (here and in prompt_encode_chat): the
     * second rendering is of a text the bound has kept small. */
    char *text = prompt_render_chat(t, tmpl, messages, opts);
    if (!text) return api_fail_prompt(e, PROMPT_BAD_INPUT, "invalid_messages", param);
    const size_t len = strlen(text);
    free(text);
    if (check_bytes(t, len, b, param, e)) return -1;
    const int n = prompt_encode_chat(t, tmpl, messages, opts, out);
    return n < 0 ? api_fail_prompt(e, n, "invalid_messages", param) : n;
}
