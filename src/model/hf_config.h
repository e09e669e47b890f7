/* A Hugging Face model folder's config.json: the hyper-parameters (into the
 * same model_hparams a GGUF file fills) and what the loader must know about
 * the checkpoint's own conventions: tensor name prefix, tied output, Gemma's
 * (1 + w) norms, Llama 3 rope factors, and GPTQ/AWQ quantization. */
#ifndef CLLM_MODEL_HF_CONFIG_H
#define CLLM_MODEL_HF_CONFIG_H

#include "model/arch.h"

#include <stdbool.h>

#define HF_ROPE_FACTORS_MAX 2048 /* half of head_dim's limit (model/arch.c) */

typedef enum { HF_QUANT_NONE, HF_QUANT_GPTQ, HF_QUANT_AWQ } hf_quant_method;

typedef struct {
    hf_quant_method method;
    int bits;       /* 4 or 8 (GPTQ), 4 (AWQ) */
    int group_size; /* -1: one group per row */
    bool sym;
    bool desc_act;
    bool zeros_plus_one; /* GPTQ v1 ("gptq" checkpoint format): the real zero is stored + 1 */
} hf_quant;

typedef struct {
    char model_type[32];
    bool tie_word_embeddings;
    bool norm_plus_one; /* Gemma: HF norms compute x * (1 + w) */
    /* Llama 3 rope scaling: factors computed at load as llama.cpp's converter does. */
    bool llama3_rope;
    float rope_factor, rope_low_freq, rope_high_freq;
    int rope_orig_ctx;
    /* Phi-3's LongRoPE: factors [rope_dim / 2] (hparams hold the original context and attention factor). */
    bool longrope;
    float rope_short[HF_ROPE_FACTORS_MAX], rope_long[HF_ROPE_FACTORS_MAX];
    hf_quant quant;
} hf_config;

/* Reads DIR/config.json (and DIR/quantize_config.json for older GPTQ
 * checkpoints). n_vocab is set from vocab_size; the loader checks it against
 * the embedding. Returns 0, or -1 with err_get(). */
int hf_config_load(const char *dir, model_hparams *hp, hf_config *cfg);

/* Llama 3 frequency factors [rope_dim / 2], as convert_hf_to_gguf.py writes
 * rope_freqs.weight. */
void hf_llama3_rope_factors(const model_hparams *hp, const hf_config *cfg, float *out);

#endif
