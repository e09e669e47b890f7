/* A BERT-family encoder for embeddings (sentence-transformers models such as
 * all-MiniLM-L6-v2): learned absolute position and token-type embeddings,
 * post-LayerNorm blocks with biases everywhere and an erf GELU, bidirectional
 * attention, then pooling over the tokens (mean, or the first token) and an
 * optional L2 normalization. Loaded from a Hugging Face folder (config.json
 * model_type "bert", model.safetensors, tokenizer.json with WordPiece, and
 * sentence-transformers' modules.json, 1_Pooling/config.json and
 * sentence_bert_config.json when present), or from a GGUF file of llama.cpp's
 * "bert" architecture (bert.pooling_type; always normalized, as llama.cpp's
 * embeddings are). Tensors are bound under
 * llama.cpp's names for its "bert" architecture (token_embd, position_embd,
 * token_types, token_embd_norm, blk.N.attn_q/attn_k/attn_v/attn_output,
 * attn_output_norm, ffn_up, ffn_down, layer_output_norm). Immutable after
 * loading; encoder_forward may run from several threads at once, each with
 * its own thread pool. */
#ifndef CLLM_MODEL_ENCODER_H
#define CLLM_MODEL_ENCODER_H

#include "kernels/matmul.h"
#include "model/tensors.h"
#include "util/threadpool.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct st_set st_set;
typedef struct gguf_ctx gguf_ctx;
typedef struct tokenizer tokenizer;

#define ENCODER_MAX_LAYERS 128
#define ENCODER_MAX_MATRYOSHKA 16

typedef struct {
    int n_vocab, n_embd, n_layer, n_head, head_dim, n_ff;
    int n_pos;   /* max_position_embeddings */
    int n_types; /* type_vocab_size */
    float norm_eps;
} encoder_hparams;

typedef enum { POOL_MEAN, POOL_CLS } pool_kind;

typedef struct {
    weight wq, wk, wv, wo, w_up, w_down;
    const float *bq, *bk, *bv, *bo, *b_up, *b_down;
    const float *attn_norm_w, *attn_norm_b; /* after attention + residual */
    const float *out_norm_w, *out_norm_b;   /* after the FFN + residual */
} encoder_layer;

typedef struct encoder {
    char *path, *name;
    st_set *st;     /* a Hugging Face folder's weights, or */
    gguf_ctx *gguf; /* a GGUF file */
    tensor_table tensors;
    encoder_hparams hp;
    weight tok_embd, pos_embd, type_embd;
    const float *embd_norm_w, *embd_norm_b;
    encoder_layer layers[ENCODER_MAX_LAYERS];
    tokenizer *tok;
    pool_kind pooling;
    bool normalize;  /* an L2 Normalize module follows the pooling */
    int max_len;     /* tokens per input: sentence-transformers' max_seq_length, else n_pos */
    /* Matryoshka models (config.json "is_matryoshka" or "matryoshka_dimensions"):
     * embeddings may be cut to fewer dimensions and renormalized. */
    bool matryoshka;
    int n_matryoshka_dims; /* 0: any dimension from 1 to n_embd */
    int matryoshka_dims[ENCODER_MAX_MATRYOSHKA];
    int64_t n_params;
} encoder;

/* Whether path is a model this encoder loads (a folder whose config.json says
 * model_type "bert", or a GGUF file whose general.architecture is "bert"),
 * without loading it. */
bool encoder_is_encoder_model(const char *path);
/* NULL with err_get() saying what is wrong. */
encoder *encoder_load(const char *path);
void encoder_free(encoder *enc);

/* The tokens of a text input as the model sees it: [CLS] text [SEP], control
 * tokens spelled in the text parsed (as Hugging Face tokenizers do). With
 * max_tokens > 0, a longer result is cut to its first max_tokens - 1 tokens
 * and the closing [SEP], as the tokenizer's right-side truncation does.
 * Returns the count and a malloc'd array in *out, or -1 with err_get(). */
int encoder_tokenize(const encoder *enc, const char *text, size_t len, int max_tokens, int32_t **out);

/* Embeds n inputs in one forward pass over all their tokens packed together
 * (no padding: each attends over its own tokens only): input i is ids[i]
 * (lens[i] tokens, 1..max_len, every id below n_vocab, token type 0). out
 * receives n rows of hp.n_embd floats, pooled and, when the model says so, of
 * unit length. threads may be NULL (one thread). Returns 0, or -1 with err_get()
 * (out of memory). */
int encoder_forward(const encoder *enc, threadpool *threads, const int32_t *const *ids, const int *lens, int n,
                    float *out);

#endif
