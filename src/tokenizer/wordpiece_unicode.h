/* Unicode tables of the WordPiece (BERT) normalizer and pre-tokenizer,
 * generated into wordpiece_unicode_data.c by scripts/gen_wordpiece_unicode.py.
 * Every table is sorted by code point, for binary search. */
#ifndef CLLM_TOKENIZER_WORDPIECE_UNICODE_H
#define CLLM_TOKENIZER_WORDPIECE_UNICODE_H

#include <stdint.h>

typedef struct {
    uint32_t lo, hi;
} wp_range;

/* A code point and what it maps to (up to 4 code points, 0-terminated). */
typedef struct {
    uint32_t cp;
    uint32_t to[4];
} wp_map;

extern const wp_range wp_other[], wp_punct[], wp_mark_nonspacing[];
extern const int wp_other_count, wp_punct_count, wp_mark_nonspacing_count;
extern const wp_map wp_nfd[], wp_lower[];
extern const int wp_nfd_count, wp_lower_count;

#endif
