/* A model's vocabulary as the token-mask walk needs it: each token's bytes,
 * the tokens sorted by their bytes (a token trie flattened: neighbours share
 * prefixes, lcp[i] says how many bytes token order[i] shares with
 * order[i-1]), and which tokens end generation. Built once per model. */
#ifndef CLLM_GRAMMAR_TOKEN_VOCAB_H
#define CLLM_GRAMMAR_TOKEN_VOCAB_H

#include <stdbool.h>
#include <stdint.h>

typedef struct tokenizer tokenizer;
typedef struct token_class_cache token_class_cache;

typedef struct {
    int n_vocab;
    char *bytes;        /* all tokens' bytes, back to back */
    uint32_t *offset;   /* [n_vocab + 1] */
    int32_t *order;     /* ids sorted by bytes; tokens without bytes left out */
    uint16_t *lcp;      /* [n_order] */
    char *sorted_bytes; /* the tokens' bytes again in `order`, so the walks read them in sequence */
    uint32_t *sorted_offset; /* [n_order + 1] */
    int n_order;
    int max_len;
    bool *is_eog;       /* [n_vocab] */
    int32_t *eog_ids;
    int n_eog;
    int32_t first_end[257]; /* order[first_end[b - 1] .. first_end[b]) start with byte b (b=-1: 0) */
    token_class_cache *classes; /* what the masks learn about this vocabulary (token_mask_class.h) */
} token_vocab;

/* From explicit byte strings (tests, the XGrammar comparison). NULL with err_get(). */
token_vocab *token_vocab_create(int n_vocab, const char *const *bytes, const int *lens, const bool *is_eog);
/* From a tokenizer: a token's bytes are tokenizer_token_to_piece's (control
 * tokens have none and are never allowed, except end-of-generation tokens,
 * allowed exactly where the grammar may end). */
token_vocab *token_vocab_from_tokenizer(const tokenizer *t);
void token_vocab_free(token_vocab *v);

static inline const char *token_vocab_bytes(const token_vocab *v, int32_t id, int *len) {
    *len = (int)(v->offset[id + 1] - v->offset[id]);
    return v->bytes + v->offset[id];
}

/* The bytes of order[i] (the same as token_vocab_bytes of that id). */
static inline const unsigned char *token_vocab_sorted(const token_vocab *v, int i, int *len) {
    *len = (int)(v->sorted_offset[i + 1] - v->sorted_offset[i]);
    return (const unsigned char *)v->sorted_bytes + v->sorted_offset[i];
}

#endif
