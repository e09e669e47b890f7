/* POST /v1/completions and /v1/chat/completions: validate, tokenize, check
 * the context length, submit one engine request per prompt, then either wait
 * for every choice and answer with one JSON body, or stream SSE chunks as the
 * engine reports tokens. The handler runs on a thread of its own; while it
 * waits for a whole answer it also watches the client's socket, and a client
 * that goes away has its engine requests aborted at once. A stream's reader
 * runs on an HTTP I/O thread and never blocks: with nothing new it pauses the
 * connection until the engine's next output resumes it; a client that left
 * is found when a chunk cannot be written (and stream_free aborts). */
#include "server/completions.h"

#include "chat/prompt.h"
#include "server/bad_words.h"
#include "server/chat_request.h"
#include "server/prompt_limit.h"
#include "server/response_cache.h"
#include "server/completion_json.h"
#include "server/sse.h"
#include "util/error.h"
#include "util/utf8.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

/* What a request becomes before it reaches the engine. */
typedef struct {
    api_request req;
    int32_t **tokens; /* per prompt */
    int *n_tokens;
    buf *echo;        /* per prompt, completions with echo */
    int n_prompts;
    tool_format tool_fmt; /* chat with tools offered: how replies write calls */
    bool reasoning_opened; /* chat: the prompt ends inside <think> (reasoning.h) */
    char *cache_key;  /* the response cache's key; NULL: not cacheable, or no cache */
    chat_setup chat;  /* the template and rendering options */
    bad_word_seqs bad_words;
    served_models *models; /* the table sm is held in, until prepared_free */
    served_model *sm;      /* the model answering, held (served_models_acquire) */
} prepared;

static void prepared_free(prepared *p) {
    if (p->sm) served_models_release(p->models, p->sm);
    for (int i = 0; i < p->n_prompts; i++) {
        free(p->tokens ? p->tokens[i] : NULL);
        if (p->echo) buf_free(&p->echo[i]);
    }
    free(p->tokens);
    free(p->n_tokens);
    free(p->echo);
    free(p->cache_key);
    chat_setup_free(&p->chat);
    bad_words_free(&p->bad_words);
    api_request_free(&p->req);
}

/* The request's KV eviction: the server's (--kv-eviction, --kv-budget,
 * --kv-sink-tokens) with the fields the request gives over it. */
static int apply_eviction(const served_model *sm, api_request *q, api_error *e) {
    kv_evict_params *ev = &q->rp.evict;
    *ev = engine_get_config(sm->e)->evict;
    if (q->kv_eviction >= 0) ev->policy = (kv_evict_policy)q->kv_eviction;
    if (q->kv_budget >= 0) ev->budget = (int)q->kv_budget;
    if (q->kv_sink_tokens >= 0) ev->sink = (int)q->kv_sink_tokens;
    if (kv_evict_check(ev)) return api_fail(e, 400, "invalid_value", "kv_budget", "%s", err_get());
    if (ev->policy != KV_EVICT_NONE && ev->budget > sm->max_model_len)
        return api_fail(e, 400, "invalid_value", "kv_budget",
                        "'kv_budget' (%d) must not exceed the maximum context length of %d", ev->budget,
                        sm->max_model_len);
    if (ev->policy != KV_EVICT_NONE && q->use_beam_search)
        return api_fail(e, 400, "unsupported_field", "kv_eviction",
                        "'kv_eviction' together with 'use_beam_search' is not supported by this server");
    return 0;
}

/* vLLM's truncate_prompt_tokens: the last N tokens of the prompt stay
 * (N = -1: max_model_len). Returns the new count, or -1 with *e filled. */
static int truncate_prompt(const api_request *req, int max_model_len, int32_t *tokens, int n, api_error *e) {
    const long long keep = req->truncate_prompt_tokens < 0 ? max_model_len : req->truncate_prompt_tokens;
    if (keep > max_model_len)
        return api_fail(e, 400, "invalid_value", "truncate_prompt_tokens",
                        "'truncate_prompt_tokens' (%lld) is more than the context (max_model_len %d)", keep,
                        max_model_len);
    if (!keep || n <= keep) return n;
    memmove(tokens, tokens + (n - keep), (size_t)keep * sizeof *tokens);
    return (int)keep;
}

/* Whether token t may still be sampled at the first step under the request's
 * masks: not banned by a one-token bad word, nor (before min_tokens) an end
 * of generation or a stop token. */
static bool first_step_possible(const tokenizer *tok, const request_params *rp, int32_t t) {
    const int32_t *word = rp->bad_word_ids;
    for (int i = 0; i < rp->n_bad_words; word += rp->bad_word_lens[i], i++)
        if (rp->bad_word_lens[i] == 1 && word[0] == t) return false;
    if (rp->min_tokens > 0) {
        if (tokenizer_is_eog(tok, t)) return false; /* masked even with ignore_eos */
        for (int i = 0; i < rp->n_stop_token_ids; i++)
            if (rp->stop_token_ids[i] == t) return false;
    }
    return true;
}

/* allowed_token_ids that the other masks leave empty would give the engine
 * no token to sample: the client's contradiction, a 400. */
static int check_allowed_tokens(const tokenizer *tok, const request_params *rp, api_error *e) {
    if (rp->n_allowed_token_ids == 0) return 0;
    for (int i = 0; i < rp->n_allowed_token_ids; i++)
        if (first_step_possible(tok, rp, rp->allowed_token_ids[i])) return 0;
    return api_fail(e, 400, "invalid_value", "allowed_token_ids",
                    "every token in 'allowed_token_ids' is banned by 'bad_words' or ends the text before "
                    "'min_tokens', so nothing could be generated");
}

/* Body -> tokens per prompt for model sm (the one the body names), with
 * every client mistake a 4xx in *e. */
static int prepare(server *s, served_model *sm, json_t *body, api_kind kind, prepared *p, api_error *e) {
    memset(p, 0, sizeof *p);
    p->models = &s->models; /* sm is held; prepared_free lets it go */
    p->sm = sm;
    const tokenizer *tok = sm->m->tok;
    const int max_model_len = sm->max_model_len;
    int rc = api_request_parse(body, kind, tokenizer_n_vocab(tok), &p->req, e);
    if (!rc) rc = apply_eviction(sm, &p->req, e);
    if (!rc) rc = chat_setup_init(&p->chat, &p->req, sm->tmpl, e);
    if (!rc && kind == API_CHAT) {
        constraint *forced = NULL;
        rc = api_tools_resolve(&p->req.tools, chat_template_tool_format(p->chat.tmpl), &p->tool_fmt, &forced, e);
        if (forced && p->req.rp.constraint) {
            constraint_release(forced);
            rc = p->tool_fmt == TOOL_FORMAT_GENERIC
                     ? api_fail(e, 400, "invalid_value", "tools",
                                "tools offered to a model whose chat template has no tool-call format are held to "
                                "the generic JSON reply, which cannot be combined with structured output "
                                "(response_format, structured_outputs, guided_*, grammar, json_schema)")
                     : api_fail(e, 400, "invalid_value", "tool_choice",
                                "a tool_choice that forces a call cannot be combined with structured output "
                                "(response_format, structured_outputs, guided_*, grammar, json_schema)");
        } else if (forced) {
            p->req.rp.constraint = forced;
        }
    }
    if (rc) goto out;
    /* Markers that are control tokens ([TOOL_CALLS], harmony's <|channel|>) must reach the parser. */
    if (tool_format_needs_special_text(p->tool_fmt) ||
        (kind == API_CHAT && chat_template_reasoning(p->chat.tmpl) == REASONING_HARMONY))
        p->req.rp.include_special_text = true;
    p->n_prompts = kind == API_CHAT ? 1 : p->req.n_prompts;
    p->tokens = calloc((size_t)p->n_prompts, sizeof *p->tokens);
    p->n_tokens = calloc((size_t)p->n_prompts, sizeof *p->n_tokens);
    p->echo = calloc((size_t)p->n_prompts, sizeof *p->echo);
    if (!p->tokens || !p->n_tokens || !p->echo) {
        rc = api_fail(e, 500, "out_of_memory", NULL, "out of memory");
        goto out;
    }
    const char *param = kind == API_CHAT ? "messages" : "prompt";
    /* A prompt to be truncated may be longer than the context (the body's
     * size still bounds it). */
    const prompt_budget budget = {.max_len = p->req.truncate_prompt_tokens ? INT_MAX / 2 : max_model_len,
                                  .room = 1};
    for (int i = 0; i < p->n_prompts && !rc; i++) {
        int n;
        if (kind == API_CHAT) {
            n = prompt_limit_chat(tok, p->chat.tmpl, p->chat.messages, &p->chat.opts, &budget, param, &p->tokens[i],
                                  e);
        } else if (p->req.prompts[i].text) {
            n = prompt_limit_text(tok, p->req.prompts[i].text, p->req.prompts[i].len, true, &budget, param,
                                  &p->tokens[i], e);
            if (n >= 0 && p->req.echo) buf_append(&p->echo[i], p->req.prompts[i].text, p->req.prompts[i].len);
        } else {
            n = p->req.prompts[i].n_ids;
            p->tokens[i] = p->req.prompts[i].ids;
            p->req.prompts[i].ids = NULL; /* moved */
            if (p->req.echo) prompt_decode(tok, p->tokens[i], n, true, &p->echo[i]);
        }
        if (n < 0 || (n = truncate_prompt(&p->req, max_model_len, p->tokens[i], n, e)) < 0) {
            rc = -1;
            break;
        }
        p->n_tokens[i] = n;
        if (kind == API_CHAT && n > 0 && chat_template_reasoning(p->chat.tmpl) != REASONING_NONE) {
            buf tail = {0}; /* the prompt's last tokens, as text */
            prompt_decode(tok, p->tokens[i] + (n > 8 ? n - 8 : 0), n > 8 ? 8 : n, true, &tail);
            p->reasoning_opened = reasoning_prompt_opens(tail.data ? tail.data : "", tail.len);
            buf_free(&tail);
        }
        if (n == 0) {
            rc = api_fail(e, 400, "invalid_value", param, "The %s is empty (and the model adds no BOS token)", param);
            break;
        }
        if (n >= max_model_len) {
            rc = prompt_context_error(e, param, max_model_len, n, -1);
        } else if (p->req.max_tokens >= 0 && p->req.max_tokens > max_model_len - n &&
                   p->req.rp.evict.policy == KV_EVICT_NONE) { /* an evicting sequence may run past it */
            rc = prompt_context_error(e, param, max_model_len, n, p->req.max_tokens);
        }
    }
    if (!rc && p->req.bad_words && !(rc = bad_words_tokenize(tok, p->req.bad_words, &p->bad_words, e))) {
        p->req.rp.bad_word_ids = p->bad_words.ids;
        p->req.rp.bad_word_lens = p->bad_words.lens;
        p->req.rp.n_bad_words = p->bad_words.n;
    }
    if (!rc) rc = check_allowed_tokens(tok, &p->req.rp, e);
    if (!rc && s->response_cache && response_cache_cacheable(&p->req))
        p->cache_key = response_cache_key(body, kind, sm->name);
out:
    p->req.bad_words = NULL; /* it lived in the body */
    json_decref(body);
    return rc;
}

/* ---- waiting and streaming ---- */

typedef struct {
    server *srv;
    gen *g;
    resp_ctx ctx;
    prepared p;
    http_req *req;
    /* per choice: how much of it went out */
    size_t *sent_text;
    int *sent_lps;
    long *text_offset;
    bool *finish_sent;
    tool_stream *tool_streams; /* per choice, when tools are offered */
    reasoning_stream *reasoning_streams; /* per choice, when replies reason */
    buf out;
    bool started, ended, include_usage;
    response_replay *replay; /* a response cache hit: outputs come from here, not the engine */
    const gen_shape *shape; /* NULL: OpenAI's chunks (else points at shape_copy) */
    gen_shape shape_copy;
} stream_state;

/* Lets go of what a request's generation holds: g's reference, the server's
 * count of active requests, the prepared prompts. */
static void release_generation(server *s, gen *g, prepared *p) {
    gen_release(g);
    atomic_fetch_sub(&s->n_active, 1);
    prepared_free(p);
}

/* The same, for a generation no one will read: its requests stop now. */
static void abandon_generation(server *s, gen *g, prepared *p) {
    gen_abort(g);
    release_generation(s, g, p);
}

/* Frees st itself, not the generation it streams. */
static void stream_state_free(stream_state *st) {
    free(st->sent_text);
    free(st->sent_lps);
    free(st->text_offset);
    free(st->finish_sent);
    free(st->tool_streams);
    free(st->reasoning_streams);
    buf_free(&st->out);
    free(st);
}

/* The state of a streamed response over g (taking over p); NULL when out of
 * memory, and then g and p are still the caller's. */
static stream_state *stream_state_create(server *s, gen *g, const prepared *p, const resp_ctx *ctx, http_req *r,
                                         const gen_shape *shape) {
    stream_state *st = calloc(1, sizeof *st);
    if (!st) return NULL;
    const size_t nc = (size_t)p->n_prompts * (size_t)p->req.rp.n;
    st->sent_text = calloc(nc, sizeof *st->sent_text);
    st->sent_lps = calloc(nc, sizeof *st->sent_lps);
    st->text_offset = calloc(nc, sizeof *st->text_offset);
    st->finish_sent = calloc(nc, sizeof *st->finish_sent);
    const bool tools = p->tool_fmt != TOOL_FORMAT_NONE;
    st->tool_streams = tools ? calloc(nc, sizeof *st->tool_streams) : NULL;
    const bool reasons = ctx->reasoning != REASONING_NONE;
    st->reasoning_streams = reasons ? calloc(nc, sizeof *st->reasoning_streams) : NULL;
    if (!st->sent_text || !st->sent_lps || !st->text_offset || !st->finish_sent || (tools && !st->tool_streams) ||
        (reasons && !st->reasoning_streams)) {
        stream_state_free(st);
        return NULL;
    }
    st->srv = s;
    st->g = g;
    st->ctx = *ctx;
    st->p = *p;
    st->req = r;
    st->include_usage = p->req.include_usage;
    if (shape) {
        st->shape_copy = *shape;
        st->shape = &st->shape_copy;
    }
    return st;
}

static void stream_free(void *cls) {
    stream_state *st = cls;
    if (!st) return;
    gen_lock(st->g);
    const bool unfinished = st->g->n_unfinished > 0;
    gen_unlock(st->g);
    if (unfinished) gen_abort(st->g); /* the client went away or the connection broke */
    response_replay_free(st->replay);
    release_generation(st->srv, st->g, &st->p);
    if (st->shape) st->shape->free_ctx(st->shape->ctx);
    stream_state_free(st);
}

static void stream_event(stream_state *st, json_t *j) {
    if (sse_append_json(&st->out, j)) st->out.oom = true;
    json_decref(j);
}

static void stream_error_event(stream_state *st, int status, const char *code, const char *msg) {
    api_error e;
    api_fail(&e, status, code, NULL, "%s", msg);
    if (st->shape) st->shape->stream_error(st->shape->ctx, &st->out, &e);
    else stream_event(st, api_error_json(&e));
}

/* First events: chat announces the role of every choice; completions with
 * echo send the prompt text. */
static void stream_start(stream_state *st) {
    gen *g = st->g;
    if (st->shape) {
        st->shape->stream_start(st->shape->ctx, &st->out);
        return;
    }
    for (int i = 0; i < g->n_prompts * g->n; i++) {
        const buf *echo = &st->p.echo[i / g->n];
        if (st->ctx.kind == API_CHAT) {
            json_t *ch = resp_chunk_choice(&st->ctx, i, "", 0, true, NULL, NULL);
            stream_event(st, resp_chunk(&st->ctx, json_pack("[o]", ch), st->include_usage));
        } else if (echo->len) {
            json_t *ch = resp_chunk_choice(&st->ctx, i, echo->data, echo->len, false, NULL, NULL);
            stream_event(st, resp_chunk(&st->ctx, json_pack("[o]", ch), st->include_usage));
            st->text_offset[i] = (long)utf8_count(echo->data, echo->len);
        }
    }
}

/* A chunk's choice when tools are offered or replies reason: the
 * reasoning_content, content and tool_calls deltas from the reply read so
 * far (tools read in the reply past its reasoning); NULL when there is
 * nothing to send yet. */
static json_t *stream_parsed_choice(stream_state *st, int i, const gen_choice *c, json_t *lp) {
    const char *text = c->text.data ? c->text.data : "";
    size_t from = 0;         /* where the reply past the reasoning starts: what the tool parser reads */
    bool from_known = true;
    json_t *ch = resp_chunk_choice(&st->ctx, i, "", 0, false, lp, NULL);
    json_t *delta = json_object_get(ch, "delta");
    if (st->reasoning_streams) {
        reasoning_stream *rs = &st->reasoning_streams[i];
        reasoning_split d;
        reasoning_stream_next(rs, st->ctx.reasoning, text, c->text.len, st->ctx.reasoning_opened, c->finished,
                              &d);
        if (d.reasoning_to > d.reasoning_from)
            json_object_set_new(delta, "reasoning_content",
                                resp_string(text + d.reasoning_from, d.reasoning_to - d.reasoning_from));
        if (!st->tool_streams && d.content_to > d.content_from)
            json_object_set_new(delta, "content", resp_string(text + d.content_from, d.content_to - d.content_from));
        from_known = rs->rest_started;
        from = rs->rest_start;
    }
    tool_stream *ts = st->tool_streams ? &st->tool_streams[i] : NULL;
    if (ts && from_known)
        tool_stream_delta(ts, st->ctx.tool_fmt, st->ctx.tool_parallel, st->ctx.tools, text + from,
                          c->text.len - from, c->finished, delta);
    if (c->finished) {
        json_object_set_new(ch, "finish_reason",
                            json_string(ts ? resp_finish_name_tools(c->reason, ts->n_announced > 0)
                                           : resp_finish_name(c->reason)));
    } else if (!lp && json_object_size(delta) == 0) {
        json_decref(ch);
        return NULL;
    }
    return ch;
}

/* Turns what the engine added since the last call into chunks. Caller holds
 * the gen lock. Returns whether every choice has finished. */
static bool stream_collect(stream_state *st) {
    gen *g = st->g;
    bool failed = false, aborted = false;
    const char *why = NULL; /* the request's own fault, when that is what failed it */
    for (int i = 0; i < g->n_prompts * g->n; i++) {
        gen_choice *c = &g->choices[i];
        if (c->reason == FINISH_ERROR && c->error[0]) why = c->error;
        if (st->finish_sent[i]) continue;
        const size_t new_text = c->text.len - st->sent_text[i];
        const int new_lps = c->n_lps - st->sent_lps[i];
        const bool fin = c->finished;
        if (fin && (c->reason == FINISH_ERROR || c->reason == FINISH_ABORT)) {
            failed |= c->reason == FINISH_ERROR;
            aborted |= c->reason == FINISH_ABORT;
            st->finish_sent[i] = true;
            continue;
        }
        if (!new_text && !new_lps && !fin) continue;
        if (st->shape) {
            if (new_text) st->shape->stream_delta(st->shape->ctx, &st->out, c->text.data + st->sent_text[i], new_text);
            st->sent_text[i] = c->text.len;
            st->finish_sent[i] = fin;
            continue;
        }
        json_t *lp = new_lps > 0 ? resp_logprobs(&st->ctx, c->lps, st->sent_lps[i], c->n_lps, &st->text_offset[i])
                                 : NULL;
        json_t *ch;
        if (st->tool_streams || st->reasoning_streams) {
            ch = stream_parsed_choice(st, i, c, lp);
        } else {
            ch = resp_chunk_choice(&st->ctx, i, c->text.data ? c->text.data + st->sent_text[i] : "", new_text, false,
                                   lp, fin ? resp_finish_name(c->reason) : NULL);
        }
        if (ch) stream_event(st, resp_chunk(&st->ctx, json_pack("[o]", ch), st->include_usage));
        st->sent_text[i] = c->text.len;
        st->sent_lps[i] = c->n_lps;
        if (fin) st->finish_sent[i] = true;
    }
    const bool done = g->n_unfinished == 0;
    if (g->oom) {
        stream_error_event(st, 500, "out_of_memory", "the server ran out of memory for this request");
        return true;
    }
    if (done && failed && why) {
        stream_error_event(st, 400, "invalid_request_error", why);
    } else if (done && failed) {
        stream_error_event(st, 500, "internal_error", "the engine failed while generating this request");
    } else if (done && aborted) {
        stream_error_event(st, 503, "aborted", "the request was aborted because the server is shutting down");
    } else if (done && st->shape) {
        st->shape->stream_end(st->shape->ctx, &st->out, g);
    } else if (done && st->include_usage) {
        json_t *last = resp_chunk(&st->ctx, json_array(), false);
        json_object_set_new(last, "usage", resp_usage(g));
        stream_event(st, last);
    }
    return done;
}

static ssize_t stream_read(void *cls, uint64_t pos, char *dst, size_t max) {
    stream_state *st = cls;
    (void)pos;
    for (;;) {
        if (st->out.len > 0) {
            const size_t n = st->out.len < max ? st->out.len : max;
            memcpy(dst, st->out.data, n);
            buf_consume(&st->out, n);
            return (ssize_t)n;
        }
        if (st->ended) return MHD_CONTENT_READER_END_OF_STREAM;
        if (st->out.oom) return MHD_CONTENT_READER_END_WITH_ERROR;
        gen_lock(st->g);
        if (!st->started) {
            stream_start(st);
            st->started = true;
        }
        const bool done = stream_collect(st);
        if (!done && st->out.len == 0 && st->replay) {
            gen_unlock(st->g);
            if (!response_replay_step(st->replay, st->g)) return MHD_CONTENT_READER_END_WITH_ERROR;
            continue;
        }
        if (!done && st->out.len == 0) {
            /* Paused before the waker is armed, both under the lock: an
             * output in between would otherwise resume a connection not yet
             * paused, and the wake-up would be lost. */
            http_pause(st->req);
            gen_arm_waker(st->g, http_resume, st->req);
            gen_unlock(st->g);
            return 0;
        }
        gen_unlock(st->g);
        if (done) {
            /* Kept before [DONE] goes out: a client may repeat the request
             * as soon as it reads it. */
            response_cache_store(st->srv->response_cache, st->p.cache_key, st->g);
            if (!st->shape) sse_append_done(&st->out);
            st->ended = true;
        }
    }
}

/* ---- the handler ---- */

static enum MHD_Result reply_complete(http_req *r, gen *g, const prepared *p, resp_ctx *ctx, const gen_shape *shape) {
    api_error e;
    gen_lock(g);
    bool failed = g->oom, aborted = false;
    const char *why = NULL; /* the request's own fault, when that is what failed it */
    for (int i = 0; i < g->n_prompts * g->n; i++) {
        failed |= g->choices[i].reason == FINISH_ERROR;
        aborted |= g->choices[i].reason == FINISH_ABORT;
        if (g->choices[i].reason == FINISH_ERROR && g->choices[i].error[0]) why = g->choices[i].error;
    }
    json_t *body = NULL;
    if (!failed && !aborted && shape) {
        body = shape->body(shape->ctx, g);
    } else if (!failed && !aborted) {
        const bool prompt_lps = p->req.rp.prompt_logprobs >= 0;
        json_t *choices = json_array();
        for (int i = 0; i < g->n_prompts * g->n; i++) {
            const buf *echo = &p->echo[i / g->n];
            json_t *ch = resp_choice(ctx, &g->choices[i], i, echo->data, echo->len,
                                     (long)utf8_count(echo->data, echo->len));
            if (prompt_lps && ctx->kind == API_COMPLETIONS)
                json_object_set_new(ch, "prompt_logprobs", resp_prompt_logprobs(ctx, &g->prompt_lps[i / g->n]));
            if (p->req.echo && p->req.logprobs >= 0)
                json_object_set_new(ch, "logprobs",
                                    resp_echo_logprobs(ctx, &g->prompt_lps[i / g->n], p->req.logprobs, &g->choices[i]));
            json_array_append_new(choices, ch);
        }
        body = resp_body(ctx, choices, resp_usage(g));
        if (prompt_lps && ctx->kind == API_CHAT) /* vLLM puts chat's on the body: one prompt */
            json_object_set_new(body, "prompt_logprobs", resp_prompt_logprobs(ctx, &g->prompt_lps[0]));
    }
    gen_unlock(g);
    if (failed && why && !g->oom) {
        api_fail(&e, 400, "invalid_request_error", NULL, "%s", why);
        return http_reply_error(r, &e);
    }
    if (failed) {
        api_fail(&e, 500, "internal_error", NULL, "the engine failed while generating this request");
        return http_reply_error(r, &e);
    }
    if (aborted) {
        api_fail(&e, 503, "aborted", NULL, "the request was aborted because the server is shutting down");
        return http_reply_error(r, &e);
    }
    return http_reply_json(r, 200, body);
}

/* Submits one engine request per prompt; on failure fills *e (503 when the
 * queue is full). */
static int submit_all(const served_model *sm, gen *g, prepared *p, api_error *e) {
    if (!p->req.seed_given) {
        uint64_t seed = 0;
        if (getrandom(&seed, sizeof seed, GRND_NONBLOCK) != (ssize_t)sizeof seed) seed = (uint64_t)time(NULL);
        p->req.rp.sampling.seed = seed;
    }
    for (int i = 0; i < p->n_prompts; i++) {
        request_params rp = p->req.rp;
        const long long max_tokens = p->req.max_tokens >= 0 ? p->req.max_tokens : sm->max_model_len - p->n_tokens[i];
        rp.max_tokens = (int)(max_tokens < INT_MAX - p->n_tokens[i] ? max_tokens : INT_MAX - p->n_tokens[i]);
        if (gen_submit(g, i, p->tokens[i], p->n_tokens[i], &rp)) {
            const char *why = err_get();
            if (!strncmp(why, "queue full", 10))
                return api_fail(e, 503, "queue_full", NULL, "The server is overloaded (%s); retry later", why);
            if (err_is_oom()) return api_fail(e, 500, "out_of_memory", NULL, "the server ran out of memory: %s", why);
            return api_fail(e, 400, "invalid_request", p->req.kind == API_CHAT ? "messages" : "prompt", "%s", why);
        }
    }
    return 0;
}

/* The ctx of a shape no stream took over. */
static void free_shape(const gen_shape *shape) {
    if (shape) shape->free_ctx(shape->ctx);
}

static enum MHD_Result generate(server *s, served_model *sm, http_req *r, api_kind kind, json_t *body,
                                const gen_shape *shape) {
    api_error e;
    prepared p;
    if (served_models_acquire(&s->models, sm, &e)) {
        json_decref(body);
        free_shape(shape);
        return http_reply_error(r, &e);
    }
    if (prepare(s, sm, body, kind, &p, &e)) {
        prepared_free(&p);
        free_shape(shape);
        return http_reply_error(r, &e);
    }
    /* A response cache hit never reaches the engine: its recorded outputs
     * are fed into the gen instead. */
    response_replay *hit = p.cache_key ? response_cache_lookup(s->response_cache, p.cache_key) : NULL;
    if (p.cache_key) atomic_fetch_add(hit ? &sm->cache_hits : &sm->cache_misses, 1);
    if (s->response_cache) http_add_header(r, "X-Cllm-Cache", hit ? "hit" : p.cache_key ? "miss" : "bypass");
    gen *g = hit ? gen_create(NULL, NULL, p.n_prompts, p.req.rp.n)
                 : gen_create(sm->e, &sm->counters, p.n_prompts, p.req.rp.n);
    if (!g) {
        response_replay_free(hit);
        prepared_free(&p);
        free_shape(shape);
        api_fail(&e, 500, "out_of_memory", NULL, "out of memory");
        return http_reply_error(r, &e);
    }
    g->evicting = p.req.rp.evict.policy != KV_EVICT_NONE;
    atomic_fetch_add(&s->n_active, 1);
    if (!hit && p.cache_key) response_cache_record(g);
    if (!hit && submit_all(sm, g, &p, &e)) {
        abandon_generation(s, g, &p);
        free_shape(shape);
        return http_reply_error(r, &e);
    }
    resp_ctx ctx = {.kind = kind,
                    .model = sm->name,
                    .created = time(NULL),
                    .tok = sm->m->tok,
                    .tool_fmt = p.tool_fmt,
                    .tool_parallel = p.req.tools.parallel,
                    .tools = p.req.tools.tools,
                    .reasoning = kind == API_CHAT ? chat_template_reasoning(p.chat.tmpl) : REASONING_NONE,
                    .reasoning_opened = p.reasoning_opened};
    server_new_id(s, kind == API_CHAT ? "chatcmpl-" : "cmpl-", ctx.id, sizeof ctx.id);
    if (p.req.stream) {
        stream_state *st = stream_state_create(s, g, &p, &ctx, r, shape);
        if (!st) {
            response_replay_free(hit);
            abandon_generation(s, g, &p);
            free_shape(shape);
            api_fail(&e, 500, "out_of_memory", NULL, "out of memory");
            return http_reply_error(r, &e);
        }
        st->replay = hit; /* a stream replays one output per read, as the engine would send them */
        return http_reply_stream(r, "text/event-stream; charset=utf-8", stream_read, st, stream_free);
    }
    const bool replayed = hit != NULL; /* then nothing more comes, even when the replay ran out of memory */
    if (hit) {
        response_replay_all(hit, g);
        response_replay_free(hit);
    }

    for (;;) {
        gen_lock(g);
        const bool done = g->n_unfinished == 0 || replayed;
        gen_unlock(g);
        if (done) break;
        if (gen_wait(g, r, 1000) == GEN_DISCONNECTED) {
            abandon_generation(s, g, &p);
            free_shape(shape);
            return MHD_NO; /* nobody to answer; MHD closes the connection */
        }
    }
    enum MHD_Result rc = reply_complete(r, g, &p, &ctx, shape);
    response_cache_store(s->response_cache, p.cache_key, g);
    release_generation(s, g, &p);
    free_shape(shape);
    return rc;
}

enum MHD_Result handle_generation(server *s, http_req *r, api_kind kind) {
    api_error e;
    json_t *body = http_body_json(r, &e);
    if (!body) return http_reply_error(r, &e);
    served_model *sm = served_models_route(&s->models, body, &e);
    if (sm && served_models_check_task(sm, false, kind == API_CHAT ? "Chat Completions" : "Completions", &e))
        sm = NULL;
    if (!sm) {
        json_decref(body);
        return http_reply_error(r, &e);
    }
    return generate(s, sm, r, kind, body, NULL);
}

enum MHD_Result handle_generation_shaped(server *s, served_model *sm, http_req *r, json_t *body,
                                         const gen_shape *shape) {
    return generate(s, sm, r, API_CHAT, body, shape);
}
