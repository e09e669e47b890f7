/* The embedding cache (`cllm serve --embedding-cache-size N`): the embedding
 * of a text input, keyed on the text and the truncation it was asked with,
 * kept for the next request that sends the same text. Least recently used
 * entries go first at N entries. The whole key is stored and compared, so a
 * hash collision cannot answer with another text's vector. Thread-safe. */
#ifndef CLLM_SERVER_EMBED_CACHE_H
#define CLLM_SERVER_EMBED_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct embed_cache embed_cache;

typedef struct {
    uint64_t hits, misses;
    size_t entries, capacity;
} embed_cache_stats;

/* capacity entries of dim floats; NULL with err_get() on out of memory. */
embed_cache *embed_cache_create(size_t capacity, int dim);
void embed_cache_free(embed_cache *c);
/* Copies the cached vector to out and its token count to *n_tokens and
 * returns true, or counts a miss and returns false. */
bool embed_cache_get(embed_cache *c, const char *text, size_t len, int truncate, float *out, int *n_tokens);
/* Stores (or refreshes) the vector of text; evicts the least recently used. */
void embed_cache_put(embed_cache *c, const char *text, size_t len, int truncate, const float *vec, int n_tokens);
void embed_cache_get_stats(embed_cache *c, embed_cache_stats *st);

#endif
