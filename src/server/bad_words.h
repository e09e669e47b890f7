/* vLLM's bad_words as token sequences: each word (its leading whitespace
 * dropped) is tokenized alone and, when that gives a different first token
 * and as many tokens, after a space too, so the word is banned at the start
 * of the text and inside it. The engine bans a sequence's last token after
 * the rest (token_bans.h). */
#ifndef CLLM_SERVER_BAD_WORDS_H
#define CLLM_SERVER_BAD_WORDS_H

#include "server/errors.h"
#include "tokenizer/tokenizer.h"

#include <jansson.h>
#include <stdint.h>

typedef struct {
    int32_t *ids; /* the sequences back to back */
    int *lens;    /* tokens in each */
    int n;        /* sequences */
} bad_word_seqs;

/* words: a list of strings. Returns 0, or -1 with *e filled. */
int bad_words_tokenize(const tokenizer *t, const json_t *words, bad_word_seqs *out, api_error *e);
void bad_words_free(bad_word_seqs *b);

#endif
