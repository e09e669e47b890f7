/* Incremental detokenization for streaming: tokens arrive one at a time and
 * only whole UTF-8 characters leave; the bytes of a character split across
 * tokens wait until it is complete. */
#ifndef CLLM_TOKENIZER_DETOK_H
#define CLLM_TOKENIZER_DETOK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tokenizer/tokenizer.h"

typedef struct {
    char pending[8]; /* start of an incomplete UTF-8 sequence */
    int n_pending;
} detok_state;

/* A stream starts from a zeroed state: `detok_state st = {0};`. */

/* Room in `out` that always suffices for a piece of n bytes: each byte may
 * become a 3-byte U+FFFD, and up to 3 pending bytes may join it. For valid
 * UTF-8 pieces, n + 8 is enough. */
#define DETOK_MAX_OUT(n) (3 * (size_t)(n) + 12)

/* Appends the text of token `id` to `out` (room for DETOK_MAX_OUT of the
 * token's piece length; a smaller cap stops at a character boundary) and
 * returns how many complete-character bytes were written. An id out of range
 * writes nothing. */
size_t detok_push(const tokenizer *t, detok_state *st, int32_t id, bool special, char *out,
                  size_t cap);
/* At the end of a stream: whatever is still pending cannot complete; it is
 * emitted as U+FFFD per invalid sequence. Returns bytes written. */
size_t detok_flush(detok_state *st, char *out, size_t cap);

#endif
