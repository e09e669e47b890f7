/* One KV memory budget shared by several models (`cllm serve --model a
 * --model b --kv-cache-memory M`): each model gets a share in proportion to
 * its KV bytes per token, so every model's pool holds about the same number
 * of tokens (an even split would give a model with twice the bytes per token
 * half the tokens, so half the concurrency at one context length). */
#ifndef CLLM_KV_KV_SHARE_H
#define CLLM_KV_KV_SHARE_H

#include <stddef.h>

/* out[i] = total * bytes_per_token[i] / sum(bytes_per_token), rounded down,
 * so the shares never add up to more than total; an even split when every
 * bytes_per_token is 0. n >= 1. */
void kv_share_split(size_t total, const size_t *bytes_per_token, int n, size_t *out);

#endif
