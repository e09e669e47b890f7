/* Strict UTF-8 (RFC 3629, Unicode's table 3-7): the one place that decides
 * whether bytes are a character. Overlong forms, surrogates (U+D800..DFFF)
 * and anything past U+10FFFF are ill-formed. The text layers (tokenizer,
 * detokenizer, chat templates, JSON responses) all check through here, so
 * they agree on what is valid. */
#ifndef CLLM_UTIL_UTF8_H
#define CLLM_UTIL_UTF8_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* How the bytes p[0..n) start: the length (1..4) of a complete, well-formed
 * character; 0 when they are a valid but unfinished prefix (or n is 0); or -k
 * when the first k bytes are a maximal invalid subpart (what one U+FFFD
 * replaces under Unicode's recommended practice, as Python's
 * bytes.decode(errors="replace") does). */
int utf8_scan(const char *p, size_t n);
/* Length (1..4) of the well-formed character at p[0..n), 0 if ill-formed or
 * cut short. */
int utf8_seq_len(const char *p, size_t n);
/* Decodes the well-formed character at p[0..n) into *cp and returns its
 * length (1..4); 0 (and *cp untouched) if ill-formed or cut short. */
int utf8_decode(const char *p, size_t n, uint32_t *cp);
/* Whether all of p[0..n) is well-formed. */
bool utf8_valid(const char *p, size_t n);
/* Code points in well-formed text (counts the bytes that start one). */
size_t utf8_count(const char *p, size_t n);
/* Writes cp (at most 0x1FFFFF; a surrogate is written as is) to out (room
 * for its encoding: 4 bytes for any cp) and returns the byte count (1..4). */
int utf8_encode(char *out, uint32_t cp);

#endif
