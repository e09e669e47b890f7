/* Unicode character classes and mappings, one code point at a time, as
 * Python's unicodedata and str methods define them (the chat templates were
 * written for jinja2 on Python) and as Hugging Face `tokenizers` applies them
 * (the WordPiece normalizer). Tables generated from one Unicode version (see
 * unicode_data.c). */
#ifndef CLLM_UTIL_UNICODE_H
#define CLLM_UTIL_UNICODE_H

#include <stdbool.h>
#include <stdint.h>

/* The most code points one character maps or decomposes to. */
#define UNICODE_MAX_CASE_MAP 3
#define UNICODE_MAX_DECOMPOSITION 4

/* General category C*: Cc, Cf, Cn (unassigned), Co, Cs. */
bool unicode_is_other(uint32_t cp);
/* General category P*. */
bool unicode_is_punct(uint32_t cp);
/* General category Mn. */
bool unicode_is_nonspacing_mark(uint32_t cp);
/* Python's str.isprintable() of the one character. */
bool unicode_is_printable(uint32_t cp);
/* Python's str.isspace() of the one character. */
bool unicode_is_space(uint32_t cp);
/* Lowercase, uppercase or titlecase (Python's islower/isupper/istitle). */
bool unicode_is_cased(uint32_t cp);
/* The Case_Ignorable property. */
bool unicode_is_case_ignorable(uint32_t cp);
/* The digit value of a decimal digit (Nd), else -1. */
int unicode_decimal_value(uint32_t cp);

/* The full case mapping of the character alone (Python's str.lower() etc.
 * of one character; lower is also Rust's char::to_lowercase): writes 1 to
 * UNICODE_MAX_CASE_MAP code points to out and returns how many. */
int unicode_to_lower(uint32_t cp, uint32_t out[UNICODE_MAX_CASE_MAP]);
int unicode_to_upper(uint32_t cp, uint32_t out[UNICODE_MAX_CASE_MAP]);
int unicode_to_title(uint32_t cp, uint32_t out[UNICODE_MAX_CASE_MAP]);

/* The canonical decomposition (NFD) of the character: writes 1 to
 * UNICODE_MAX_DECOMPOSITION code points (for Hangul syllables, computed) and
 * returns how many; a character that does not decompose is itself. */
int unicode_nfd(uint32_t cp, uint32_t out[UNICODE_MAX_DECOMPOSITION]);

#endif
