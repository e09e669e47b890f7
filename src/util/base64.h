/* Base64 (RFC 4648, standard alphabet, padded): what OpenAI's
 * encoding_format "base64" sends, the bytes of little-endian float32s. */
#ifndef CLLM_UTIL_BASE64_H
#define CLLM_UTIL_BASE64_H

#include <stddef.h>

/* Characters base64_encode writes for n bytes, without the terminating NUL. */
size_t base64_encoded_len(size_t n);
/* Writes the encoding of src[0..n) and a NUL to out (base64_encoded_len(n) + 1 bytes). */
void base64_encode(const void *src, size_t n, char *out);

#endif
