/* See prompt.h. */
#include "chat/prompt.h"

#include "tokenizer/detok.h"
#include "util/error.h"

#include <stdlib.h>
#include <string.h>

int prompt_encode_text(const tokenizer *t, const char *text, size_t len, bool add_special, int32_t **out) {
    int n = tokenizer_encode(t, text, len, add_special, true, out);
    if (n < 0) {
        err_prefix("cannot tokenize the prompt: ");
        return PROMPT_BAD_INPUT;
    }
    const int32_t bos = tokenizer_bos(t);
    /* "<bos>hello" with BOS added by the model's flag would start with two. */
    if (add_special && tokenizer_add_bos(t) && bos >= 0 && n >= 2 && (*out)[0] == bos && (*out)[1] == bos) {
        memmove(*out, *out + 1, (size_t)(n - 1) * sizeof **out);
        n--;
    }
    return n;
}

static json_t *token_string(const tokenizer *t, int32_t id) {
    const char *s = id >= 0 ? tokenizer_token_text(t, id) : NULL;
    json_t *j = s ? json_string(s) : NULL;
    return j ? j : json_string("");
}

static json_t *chat_context(const tokenizer *t, json_t *messages, const chat_render_opts *o) {
    json_t *ctx = json_object();
    const char *key;
    json_t *val;
    if (o->vars)
        json_object_foreach(o->vars, key, val) json_object_set(ctx, key, val);
    json_object_set(ctx, "messages", messages);
    if (o->tools) json_object_set(ctx, "tools", o->tools);
    json_object_set_new(ctx, "add_generation_prompt", json_boolean(o->add_generation_prompt));
    json_object_set_new(ctx, "bos_token", token_string(t, tokenizer_bos(t)));
    json_object_set_new(ctx, "eos_token", token_string(t, tokenizer_eos(t)));
    return ctx;
}

static bool is_space(char ch) { return ch && strchr(" \t\n\r\f\v\x1c\x1d\x1e\x1f", ch); }

/* continue_final_message, as transformers does it: the rendering ends right
 * after the last occurrence of the final message's content stripped of
 * surrounding whitespace, or after the whole content when the rendering has
 * it there with its trailing whitespace (and it has no leading one).
 * Returns the new length, or -1 with err_get() when the content does not
 * appear in the rendering. */
static long cut_after_final_message(json_t *messages, const char *text, size_t len) {
    const json_t *content = json_object_get(json_array_get(messages, json_array_size(messages) - 1), "content");
    const char *c = json_is_string(content) ? json_string_value(content) : "";
    const size_t n = json_is_string(content) ? json_string_length(content) : 0;
    size_t lead = 0, trail = 0;
    while (lead < n && is_space(c[lead])) lead++;
    while (trail < n - lead && is_space(c[n - 1 - trail])) trail++;
    const size_t core_len = n - lead - trail;
    const char *at = NULL;
    for (const char *p = text; core_len <= len && p <= text + len - core_len; p++)
        if (!memcmp(p, c + lead, core_len)) at = p;
    if (!at)
        return err_set("continue_final_message: the final message's content does not appear in the chat as the "
                       "template renders it");
    const size_t off = (size_t)(at - text);
    if (lead == 0 && off + n <= len && !memcmp(at, c, n)) return (long)(off + n);
    return (long)(off + core_len);
}

/* Renders with the options; a malloc'd string, or NULL with err_get().
 * spans/nspans as chat_template_render_marked when spans is not NULL. */
static char *render(const tokenizer *t, const chat_template *tmpl, json_t *messages, const chat_render_opts *o,
                    chat_span **spans, size_t *nspans);

char *prompt_render_chat(const tokenizer *t, const chat_template *tmpl, json_t *messages,
                         const chat_render_opts *opts) {
    char *text = render(t, tmpl, messages, opts, NULL, NULL);
    if (!text) err_prefix("cannot apply the chat template: ");
    return text;
}

/* The values of the context that are the model's, not the request's. */
static const char *const k_trusted_context[] = {"bos_token", "eos_token", NULL};

static char *render(const tokenizer *t, const chat_template *tmpl, json_t *messages, const chat_render_opts *o,
                    chat_span **spans, size_t *nspans) {
    json_t *ctx = chat_context(t, messages, o);
    char *text = spans ? chat_template_render_marked(tmpl, ctx, k_trusted_context, spans, nspans)
                       : chat_template_render(tmpl, ctx);
    json_decref(ctx);
    if (!text || !o->continue_final_message) return text;
    const long cut = cut_after_final_message(messages, text, strlen(text));
    if (cut < 0) {
        free(text);
        if (spans) free(*spans);
        return NULL;
    }
    text[cut] = 0;
    /* Spans past the cut go; one across it ends there. */
    while (spans && *nspans && (*spans)[*nspans - 1].off >= (size_t)cut) --*nspans;
    if (spans && *nspans && (*spans)[*nspans - 1].off + (*spans)[*nspans - 1].len > (size_t)cut)
        (*spans)[*nspans - 1].len = (size_t)cut - (*spans)[*nspans - 1].off;
    return text;
}

/* Renders and tokenizes: control tokens parsed in the template's text only,
 * not in what came from the request (unless the template trusts content). */
static int render_and_encode(const tokenizer *t, const chat_template *tmpl, json_t *messages,
                             const chat_render_opts *o, int32_t **out) {
    const bool trust = chat_template_trusts_content(tmpl);
    chat_span *spans = NULL;
    size_t nspans = 0;
    char *text = render(t, tmpl, messages, o, trust ? NULL : &spans, &nspans);
    if (!text) {
        err_prefix("cannot apply the chat template: ");
        return PROMPT_BAD_INPUT;
    }
    tok_range *plain = nspans ? malloc(nspans * sizeof *plain) : NULL;
    if (nspans && !plain) {
        free(spans);
        free(text);
        err_oom("out of memory");
        return PROMPT_NO_MEMORY;
    }
    for (size_t i = 0; i < nspans; i++)
        plain[i] = (tok_range){spans[i].off, spans[i].len};
    int n = tokenizer_encode_guarded(t, text, strlen(text), false, true, plain, nspans, out);
    free(plain);
    free(spans);
    free(text);
    if (n < 0) {
        err_prefix("cannot tokenize the chat: ");
        return PROMPT_BAD_INPUT;
    }
    return n;
}

int prompt_encode_chat(const tokenizer *t, const chat_template *tmpl, json_t *messages, const chat_render_opts *opts,
                       int32_t **out) {
    *out = NULL;
    int32_t *ids = NULL;
    int n = render_and_encode(t, tmpl, messages, opts, &ids);
    if (n < 0) return n;
    const int32_t bos = tokenizer_bos(t);
    if (tokenizer_add_bos(t) && bos >= 0 && (n == 0 || ids[0] != bos)) {
        int32_t *p = realloc(ids, (size_t)(n + 1) * sizeof *p);
        if (!p) {
            free(ids);
            err_oom("out of memory");
            return PROMPT_NO_MEMORY;
        }
        memmove(p + 1, p, (size_t)n * sizeof *p);
        p[0] = bos;
        ids = p;
        n++;
    }
    *out = ids;
    return n;
}

void prompt_decode(const tokenizer *t, const int32_t *ids, int n, bool special, buf *out) {
    detok_state st = {0};
    char small[256];
    for (int i = 0; i < n; i++) {
        const int len = tokenizer_token_to_piece(t, ids[i], special, NULL, 0);
        if (len < 0) continue;
        const size_t cap = DETOK_MAX_OUT(len);
        char *tmp = cap <= sizeof small ? small : malloc(cap);
        if (!tmp) {
            out->oom = true;
            return;
        }
        const size_t w = detok_push(t, &st, ids[i], special, tmp, cap);
        buf_append(out, tmp, w);
        if (tmp != small) free(tmp);
    }
    const size_t w = detok_flush(&st, small, sizeof small);
    buf_append(out, small, w);
}

void token_bytes(const tokenizer *t, int32_t id, buf *out) {
    char small[256];
    const int len = tokenizer_token_to_piece(t, id, true, small, (int)sizeof small);
    if (len <= 0) return;
    if ((size_t)len <= sizeof small) {
        buf_append(out, small, (size_t)len);
        return;
    }
    char *big = malloc((size_t)len);
    if (!big) {
        out->oom = true;
        return;
    }
    tokenizer_token_to_piece(t, id, true, big, len);
    buf_append(out, big, (size_t)len);
    free(big);
}
