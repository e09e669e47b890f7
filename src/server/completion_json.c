/* See responses.h. */
#include "server/completion_json.h"

#include "chat/prompt.h"
#include "util/utf8.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

const char *resp_finish_name(finish_reason r) { return r == FINISH_NONE ? NULL : finish_reason_name(r); }

const char *resp_finish_name_tools(finish_reason r, bool called) {
    return called && r == FINISH_STOP ? "tool_calls" : resp_finish_name(r);
}

static json_t *lp_real(float v) { return json_real(isfinite(v) ? (double)v : -9999.0); }

json_t *resp_usage(const gen *g) {
    long prompt = 0, cached = 0, completion = 0, evicted = 0;
    for (int i = 0; i < g->n_prompts; i++) {
        prompt += g->prompt_tokens[i];
        cached += g->cached_tokens[i];
    }
    for (int i = 0; i < g->n_prompts * g->n; i++) {
        completion += g->choices[i].n_tokens;
        evicted += g->choices[i].n_evicted;
    }
    json_t *u = json_pack("{s:I,s:I,s:I,s:{s:I}}", "prompt_tokens", (json_int_t)prompt, "completion_tokens",
                          (json_int_t)completion, "total_tokens", (json_int_t)(prompt + completion),
                          "prompt_tokens_details", "cached_tokens", (json_int_t)cached);
    /* Tokens dropped from the KV cache by the request's eviction policy, summed over its choices. */
    if (u && g->evicting) json_object_set_new(u, "kv_evicted_tokens", json_integer((json_int_t)evicted));
    return u;
}

static json_t *bytes_array(const char *p, size_t n) {
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++) json_array_append_new(a, json_integer((unsigned char)p[i]));
    return a;
}

/* {"token", "logprob", "bytes"} for chat. */
static json_t *chat_entry(const resp_ctx *c, int32_t tok, float lp, buf *tmp) {
    buf_reset(tmp);
    token_bytes(c->tok, tok, tmp);
    json_t *o = json_object();
    json_object_set_new(o, "token", resp_string(tmp->data ? tmp->data : "", tmp->len));
    json_object_set_new(o, "logprob", lp_real(lp));
    json_object_set_new(o, "bytes", bytes_array(tmp->data, tmp->len));
    return o;
}

/* The four parallel arrays of completions' logprobs. */
typedef struct {
    json_t *tokens, *token_lps, *tops, *offsets;
} compl_lps;

static compl_lps compl_lps_new(void) {
    return (compl_lps){json_array(), json_array(), json_array(), json_array()};
}

static json_t *compl_lps_json(compl_lps *o) {
    return json_pack("{s:o,s:o,s:o,s:o}", "tokens", o->tokens, "token_logprobs", o->token_lps, "top_logprobs", o->tops,
                     "text_offset", o->offsets);
}

/* One token of completions' logprobs with its first n_top alternatives;
 * no_context (an echoed prompt's first token): null logprob and alternatives. */
static void compl_entry(const resp_ctx *c, compl_lps *o, const gen_logprob *l, int n_top, bool no_context,
                        long *text_offset, buf *tmp) {
    buf_reset(tmp);
    token_bytes(c->tok, l->token, tmp);
    json_t *ts = resp_string(tmp->data ? tmp->data : "", tmp->len);
    json_array_append_new(o->offsets, json_integer(*text_offset));
    *text_offset += (long)utf8_count(json_string_value(ts), json_string_length(ts));
    json_array_append(o->tokens, ts);
    if (no_context) {
        json_array_append_new(o->token_lps, json_null());
        json_array_append_new(o->tops, json_null());
        json_decref(ts);
        return;
    }
    json_array_append_new(o->token_lps, lp_real(l->logprob));
    json_t *top = json_object();
    for (int k = 0; k < n_top && k < l->n_top; k++) {
        buf_reset(tmp);
        token_bytes(c->tok, l->top_tok[k], tmp);
        json_t *s = resp_string(tmp->data ? tmp->data : "", tmp->len);
        if (!json_object_get(top, json_string_value(s)))
            json_object_set_new(top, json_string_value(s), lp_real(l->top_lp[k]));
        json_decref(s);
    }
    /* OpenAI: the sampled token is always among the alternatives. */
    if (!json_object_get(top, json_string_value(ts))) json_object_set_new(top, json_string_value(ts), lp_real(l->logprob));
    json_array_append_new(o->tops, top);
    json_decref(ts);
}

json_t *resp_echo_logprobs(const resp_ctx *c, const gen_prompt_lps *p, int n_top, const gen_choice *ch) {
    buf tmp = {0};
    compl_lps o = compl_lps_new();
    long off = 0;
    for (int i = 0; i < p->n; i++) compl_entry(c, &o, &p->items[i], n_top, i == 0, &off, &tmp);
    for (int i = 0; i < ch->n_lps; i++) compl_entry(c, &o, &ch->lps[i], ch->lps[i].n_top, false, &off, &tmp);
    buf_free(&tmp);
    return compl_lps_json(&o);
}

json_t *resp_logprobs(const resp_ctx *c, const gen_logprob *lps, int from, int to, long *text_offset) {
    buf tmp = {0};
    json_t *out;
    if (c->kind == API_CHAT) {
        json_t *content = json_array();
        for (int i = from; i < to; i++) {
            const gen_logprob *l = &lps[i];
            json_t *e = chat_entry(c, l->token, l->logprob, &tmp);
            json_t *top = json_array();
            for (int k = 0; k < l->n_top; k++) json_array_append_new(top, chat_entry(c, l->top_tok[k], l->top_lp[k], &tmp));
            json_object_set_new(e, "top_logprobs", top);
            json_array_append_new(content, e);
        }
        out = json_pack("{s:o,s:n}", "content", content, "refusal");
    } else {
        compl_lps o = compl_lps_new();
        for (int i = from; i < to; i++) compl_entry(c, &o, &lps[i], lps[i].n_top, false, text_offset, &tmp);
        out = compl_lps_json(&o);
    }
    buf_free(&tmp);
    return out;
}

/* {"logprob", "rank", "decoded_token"}, one entry of vLLM's prompt logprobs. */
static json_t *prompt_entry(const resp_ctx *c, int32_t tok, float lp, int rank, buf *tmp) {
    buf_reset(tmp);
    token_bytes(c->tok, tok, tmp);
    json_t *o = json_object();
    json_object_set_new(o, "logprob", lp_real(lp));
    json_object_set_new(o, "rank", json_integer(rank));
    json_object_set_new(o, "decoded_token", resp_string(tmp->data ? tmp->data : "", tmp->len));
    return o;
}

json_t *resp_prompt_logprobs(const resp_ctx *c, const gen_prompt_lps *p) {
    if (!p->items) return json_null();
    json_t *out = json_array();
    json_array_append_new(out, json_null()); /* the first token has no context */
    buf tmp = {0};
    char key[16];
    for (int i = 1; i < p->n; i++) {
        const gen_logprob *l = &p->items[i];
        json_t *d = json_object();
        snprintf(key, sizeof key, "%d", (int)l->token);
        json_object_set_new(d, key, prompt_entry(c, l->token, l->logprob, l->rank, &tmp));
        for (int k = 0; k < l->n_top; k++) {
            if (l->top_tok[k] == l->token) continue;
            snprintf(key, sizeof key, "%d", (int)l->top_tok[k]);
            json_object_set_new(d, key, prompt_entry(c, l->top_tok[k], l->top_lp[k], k + 1, &tmp));
        }
        json_array_append_new(out, d);
    }
    buf_free(&tmp);
    return out;
}

json_t *resp_choice(const resp_ctx *c, const gen_choice *ch, int index, const char *echo, size_t echo_len,
                    long text_offset0) {
    json_t *o = json_object();
    json_object_set_new(o, "index", json_integer(index));
    const char *text = ch->text.data ? ch->text.data : "";
    bool called = false;
    if (c->kind == API_CHAT) {
        json_t *msg = json_object();
        json_object_set_new(msg, "role", json_string("assistant"));
        /* The reply past its reasoning: the content, and where tools are read. */
        const char *reply = text;
        size_t reply_len = ch->text.len;
        reasoning_split sp = {0};
        if (c->reasoning != REASONING_NONE) {
            reasoning_split_text(c->reasoning, text, ch->text.len, c->reasoning_opened, true, &sp);
            if (sp.reasoned)
                json_object_set_new(msg, "reasoning_content",
                                    resp_string(text + sp.reasoning_from, sp.reasoning_to - sp.reasoning_from));
            reply = text + sp.content_from, reply_len = sp.content_to - sp.content_from;
        }
        if (c->tool_fmt != TOOL_FORMAT_NONE) /* tools read past the reasoning, their markup included */
            called = tool_output_message(c->tool_fmt, c->tool_parallel, c->tools, text + sp.rest_from,
                                         ch->text.len - sp.rest_from, msg);
        else if (sp.reasoned && !reply_len)
            json_object_set_new(msg, "content", json_null()); /* it only reasoned (cut by max_tokens) */
        else
            json_object_set_new(msg, "content", resp_string(reply, reply_len));
        json_object_set_new(msg, "refusal", json_null());
        json_object_set_new(o, "message", msg);
    } else if (echo_len) {
        buf b = {0};
        buf_append(&b, echo, echo_len);
        buf_append(&b, text, ch->text.len);
        json_object_set_new(o, "text", resp_string(b.data, b.len));
        buf_free(&b);
    } else {
        json_object_set_new(o, "text", resp_string(text, ch->text.len));
    }
    long off = text_offset0;
    json_object_set_new(o, "logprobs", ch->lps ? resp_logprobs(c, ch->lps, 0, ch->n_lps, &off) : json_null());
    const char *fin = resp_finish_name_tools(ch->reason, called);
    json_object_set_new(o, "finish_reason", fin ? json_string(fin) : json_null());
    return o;
}

static json_t *envelope(const resp_ctx *c, const char *object) {
    json_t *o = json_object();
    json_object_set_new(o, "id", json_string(c->id));
    json_object_set_new(o, "object", json_string(object));
    json_object_set_new(o, "created", json_integer((json_int_t)c->created));
    json_object_set_new(o, "model", resp_string(c->model, strlen(c->model)));
    return o;
}

json_t *resp_body(const resp_ctx *c, json_t *choices, json_t *usage) {
    json_t *o = envelope(c, c->kind == API_CHAT ? "chat.completion" : "text_completion");
    json_object_set_new(o, "choices", choices);
    json_object_set_new(o, "usage", usage);
    return o;
}

json_t *resp_chunk_choice(const resp_ctx *c, int index, const char *text, size_t len, bool role, json_t *logprobs,
                          const char *finish) {
    json_t *o = json_object();
    json_object_set_new(o, "index", json_integer(index));
    if (c->kind == API_CHAT) {
        json_t *delta = json_object();
        if (role) json_object_set_new(delta, "role", json_string("assistant"));
        if (role || len) json_object_set_new(delta, "content", resp_string(text, len));
        json_object_set_new(o, "delta", delta);
    } else {
        json_object_set_new(o, "text", resp_string(text, len));
    }
    json_object_set_new(o, "logprobs", logprobs ? logprobs : json_null());
    json_object_set_new(o, "finish_reason", finish ? json_string(finish) : json_null());
    return o;
}

json_t *resp_chunk(const resp_ctx *c, json_t *choices, bool usage_null) {
    json_t *o = envelope(c, c->kind == API_CHAT ? "chat.completion.chunk" : "text_completion");
    json_object_set_new(o, "choices", choices);
    if (usage_null) json_object_set_new(o, "usage", json_null());
    return o;
}
