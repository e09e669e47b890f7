/* cllm public C API: load a model, tokenize, create an engine, submit
 * requests, step it (or let its thread run), and poll outputs.
 *
 *   cllm_model *m = cllm_model_load("model.gguf", err, sizeof err);
 *   cllm_engine *e = cllm_engine_create(m, NULL, err, sizeof err);   // defaults
 *   int32_t toks[256];
 *   int n = cllm_tokenize(m, "Hello", 5, true, toks, 256);
 *   cllm_request_params p = cllm_request_defaults();
 *   uint64_t id = cllm_submit(e, toks, n, &p, err, sizeof err);
 *   cllm_output out[16];
 *   while (cllm_step(e) > 0 || cllm_pending_outputs(e))
 *       for (int k = cllm_poll(e, out, 16), i = 0; i < k; i++) fwrite(out[i].text, 1, out[i].text_len, stdout);
 *   cllm_engine_free(e);
 *   cllm_model_free(m);
 *
 * Thread safety: cllm_submit, cllm_abort, cllm_poll and cllm_pending_outputs
 * may be called from any thread; cllm_step from one thread at a time (or call
 * cllm_engine_start to have the engine step on its own thread). */
#ifndef CLLM_H
#define CLLM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cllm_model cllm_model;
typedef struct cllm_engine cllm_engine;

cllm_model *cllm_model_load(const char *path, char *err, size_t err_len);
void cllm_model_free(cllm_model *m);
int cllm_n_vocab(const cllm_model *m);
/* Token ids of `text` into out[cap]; returns the count (may exceed cap: then
 * only cap were written) or -1. add_special adds BOS as the model says. */
int cllm_tokenize(const cllm_model *m, const char *text, size_t len, bool add_special, int32_t *out, int cap);
/* The bytes of one token (control tokens give ""); returns the length. */
int cllm_token_to_piece(const cllm_model *m, int32_t token, char *buf, int cap);

typedef struct {
    int max_num_seqs;           /* default 64 */
    int max_num_batched_tokens; /* default 512 */
    int max_model_len;          /* default 4096 (capped by the model) */
    int block_size;             /* 8, 16 or 32; default 16 */
    size_t kv_cache_bytes;      /* default 1 GiB */
    bool prefix_caching;        /* default true */
    int n_threads;              /* default: all cores */
    /* vLLM's --speculative-config JSON, e.g. {"method": "ngram",
     * "num_speculative_tokens": 4}; NULL (the default): no speculation. A bad
     * one makes cllm_engine_create fail with the reason in err. */
    const char *speculative_config;
} cllm_engine_params;

cllm_engine_params cllm_engine_defaults(void);
/* params may be NULL for the defaults. */
cllm_engine *cllm_engine_create(cllm_model *m, const cllm_engine_params *params, char *err, size_t err_len);
void cllm_engine_free(cllm_engine *e);

typedef struct {
    int max_tokens;           /* default 16 */
    float temperature;        /* default 1; 0 = greedy */
    int top_k;                /* 0 = off */
    float top_p;              /* 1 = off */
    float min_p;              /* 0 = off */
    float repetition_penalty; /* 1 = off */
    float presence_penalty;
    float frequency_penalty;
    uint64_t seed;
    int n;                    /* parallel samples; default 1 */
    bool ignore_eos;
    const char *const *stop;  /* stop strings; copied */
    int n_stop;
} cllm_request_params;

cllm_request_params cllm_request_defaults(void);

/* Returns the request id (> 0), or 0 with the reason in err. */
uint64_t cllm_submit(cllm_engine *e, const int32_t *prompt, int n_prompt, const cllm_request_params *p,
                     char *err, size_t err_len);
void cllm_abort(cllm_engine *e, uint64_t id);

/* Runs one step; returns the number of unfinished requests. */
int cllm_step(cllm_engine *e);
int cllm_engine_start(cllm_engine *e);
void cllm_engine_stop(cllm_engine *e);

typedef struct {
    uint64_t request_id;
    int index;          /* which of the n samples */
    int32_t token;      /* the new token, or -1 */
    const char *text;   /* new text; valid until the next cllm_poll */
    size_t text_len;
    bool finished;
    const char *finish_reason; /* "stop", "length", "abort", "error"; NULL while running */
} cllm_output;

/* Moves up to max queued outputs into out; returns how many. */
int cllm_poll(cllm_engine *e, cllm_output *out, int max);
int cllm_pending_outputs(cllm_engine *e);

#ifdef __cplusplus
}
#endif

#endif
