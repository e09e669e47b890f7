/* `cllm perplexity --tokens N`: the first N tokens of a text scored as one
 * long sequence (every token after the first, given all before it that the
 * KV cache still holds), with the cache kept to --kv-budget tokens by
 * --kv-eviction (kv/kv_evict.h). Without eviction the cache holds all N: the
 * full-cache baseline the policies are compared with. */
#ifndef CLLM_CLI_PPL_LONG_H
#define CLLM_CLI_PPL_LONG_H

#include "kv/kv_evict.h"
#include "model/model.h"

#include <stdint.h>

typedef struct {
    double nll, nll2;          /* sums over the scored tokens */
    long count;
    double nll_past, nll2_past; /* over the tokens at positions >= --kv-budget (where policies differ; none
                                   with a budget scores the same tokens) */
    long count_past;
    long evicted;               /* tokens evicted in all */
    double seconds;
} ppl_long_result;

/* Scores tokens[1..n) one chunk at a time. 0, or -1 with err_get(). */
int ppl_long_run(model *m, const int32_t *tokens, int n, const kv_evict_params *ev, kv_dtype dtype, int n_threads,
                 ppl_long_result *out);

#endif
