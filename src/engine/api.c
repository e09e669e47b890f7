/* The public API of include/cllm.h over the internal engine: outputs reported
 * by the engine's callback are queued (with copies of their text) until the
 * caller polls them. */
#include "cllm.h"

#include "engine/engine.h"
#include "engine/spec.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"
#include "util/array.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct cllm_model {
    model *m;
};

typedef struct {
    cllm_output out;
    char *text;
} queued_output;

struct cllm_engine {
    engine *e;
    pthread_mutex_t mu;
    queued_output *q;
    int n_q;
    size_t cap_q;
    char **polled; /* texts handed out by the last poll, freed by the next */
    int n_polled;
};

static void set_err(char *err, size_t len) {
    if (err && len) snprintf(err, len, "%s", err_get());
}

cllm_model *cllm_model_load(const char *path, char *err, size_t err_len) {
    model *m = model_load(path);
    if (!m) {
        set_err(err, err_len);
        return NULL;
    }
    cllm_model *cm = malloc(sizeof *cm);
    if (!cm) {
        model_free(m);
        return NULL;
    }
    cm->m = m;
    return cm;
}

void cllm_model_free(cllm_model *m) {
    if (!m) return;
    model_free(m->m);
    free(m);
}

int cllm_n_vocab(const cllm_model *m) { return m->m->hp.n_vocab; }

int cllm_tokenize(const cllm_model *m, const char *text, size_t len, bool add_special, int32_t *out, int cap) {
    int32_t *toks;
    int n = tokenizer_encode(m->m->tok, text, len, add_special, false, &toks);
    if (n < 0) return -1;
    memcpy(out, toks, (size_t)(n < cap ? n : cap) * sizeof *toks);
    free(toks);
    return n;
}

int cllm_token_to_piece(const cllm_model *m, int32_t token, char *buf, int cap) {
    return tokenizer_token_to_piece(m->m->tok, token, false, buf, cap);
}

cllm_engine_params cllm_engine_defaults(void) {
    engine_config c = engine_config_defaults();
    return (cllm_engine_params){.max_num_seqs = c.max_num_seqs, .max_num_batched_tokens = c.max_num_batched_tokens,
                                .max_model_len = c.max_model_len, .block_size = c.block_size,
                                .kv_cache_bytes = c.kv_cache_bytes, .prefix_caching = c.prefix_caching,
                                .n_threads = c.n_threads};
}

cllm_engine *cllm_engine_create(cllm_model *m, const cllm_engine_params *params, char *err, size_t err_len) {
    cllm_engine_params p = params ? *params : cllm_engine_defaults();
    engine_config c = engine_config_defaults();
    c.max_num_seqs = p.max_num_seqs;
    c.max_num_batched_tokens = p.max_num_batched_tokens;
    c.max_model_len = p.max_model_len;
    c.block_size = p.block_size;
    c.kv_cache_bytes = p.kv_cache_bytes;
    c.prefix_caching = p.prefix_caching;
    c.n_threads = p.n_threads;
    if (p.speculative_config && spec_config_parse_json(p.speculative_config, &c.spec)) {
        err_prefix("speculative_config: ");
        set_err(err, err_len);
        return NULL;
    }
    cllm_engine *ce = calloc(1, sizeof *ce);
    if (!ce) return NULL;
    ce->e = engine_create(m->m, &c);
    if (!ce->e) {
        set_err(err, err_len);
        free(ce);
        return NULL;
    }
    pthread_mutex_init(&ce->mu, NULL);
    return ce;
}

static void free_polled(cllm_engine *ce) {
    for (int i = 0; i < ce->n_polled; i++) free(ce->polled[i]);
    free(ce->polled);
    ce->polled = NULL;
    ce->n_polled = 0;
}

void cllm_engine_free(cllm_engine *ce) {
    if (!ce) return;
    engine_free(ce->e);
    for (int i = 0; i < ce->n_q; i++) free(ce->q[i].text);
    free(ce->q);
    free_polled(ce);
    pthread_mutex_destroy(&ce->mu);
    free(ce);
}

cllm_request_params cllm_request_defaults(void) {
    request_params r = request_params_defaults();
    return (cllm_request_params){.max_tokens = r.max_tokens, .temperature = r.sampling.temperature,
                                 .top_p = r.sampling.top_p, .repetition_penalty = r.sampling.repetition_penalty,
                                 .n = 1};
}

static void on_output(void *user, const engine_output *o) {
    cllm_engine *ce = user;
    char *text = malloc(o->text_len + 1);
    if (!text) return;
    memcpy(text, o->text, o->text_len);
    text[o->text_len] = 0;
    pthread_mutex_lock(&ce->mu);
    if (array_reserve((void **)&ce->q, &ce->cap_q, (size_t)ce->n_q + 1, sizeof *ce->q)) {
        pthread_mutex_unlock(&ce->mu);
        free(text);
        return;
    }
    ce->q[ce->n_q++] = (queued_output){
        .out = {.request_id = o->request_id, .index = o->index, .token = o->n_new_tokens ? o->new_tokens[0] : -1,
                .text_len = o->text_len, .finished = o->finished,
                .finish_reason = o->finished ? finish_reason_name(o->reason) : NULL},
        .text = text};
    pthread_mutex_unlock(&ce->mu);
}

uint64_t cllm_submit(cllm_engine *ce, const int32_t *prompt, int n_prompt, const cllm_request_params *p,
                     char *err, size_t err_len) {
    request_params r = request_params_defaults();
    r.max_tokens = p->max_tokens;
    r.sampling.temperature = p->temperature;
    r.sampling.top_k = p->top_k;
    r.sampling.top_p = p->top_p;
    r.sampling.min_p = p->min_p;
    r.sampling.repetition_penalty = p->repetition_penalty;
    r.sampling.presence_penalty = p->presence_penalty;
    r.sampling.frequency_penalty = p->frequency_penalty;
    r.sampling.seed = p->seed;
    r.n = p->n;
    r.ignore_eos = p->ignore_eos;
    r.stop = p->stop;
    r.n_stop = p->n_stop;
    uint64_t id = 0;
    if (engine_submit(ce->e, prompt, n_prompt, &r, on_output, ce, &id)) {
        set_err(err, err_len);
        return 0;
    }
    return id;
}

void cllm_abort(cllm_engine *ce, uint64_t id) { engine_abort(ce->e, id); }
int cllm_step(cllm_engine *ce) { return engine_step(ce->e); }

int cllm_engine_start(cllm_engine *ce) { return engine_start(ce->e); }
void cllm_engine_stop(cllm_engine *ce) { engine_stop(ce->e); }

int cllm_poll(cllm_engine *ce, cllm_output *out, int max) {
    pthread_mutex_lock(&ce->mu);
    free_polled(ce);
    int n = ce->n_q < max ? ce->n_q : max;
    ce->polled = malloc((size_t)(n ? n : 1) * sizeof *ce->polled);
    if (!ce->polled) n = 0;
    for (int i = 0; i < n; i++) {
        out[i] = ce->q[i].out;
        out[i].text = ce->q[i].text;
        ce->polled[i] = ce->q[i].text;
    }
    ce->n_polled = n;
    memmove(ce->q, ce->q + n, (size_t)(ce->n_q - n) * sizeof *ce->q);
    ce->n_q -= n;
    pthread_mutex_unlock(&ce->mu);
    return n;
}

int cllm_pending_outputs(cllm_engine *ce) {
    pthread_mutex_lock(&ce->mu);
    int n = ce->n_q;
    pthread_mutex_unlock(&ce->mu);
    return n;
}
