/* API-key check: "Authorization: Bearer KEY" compared with the configured key
 * in time that does not depend on where the two differ. */
#ifndef CLLM_SERVER_AUTH_H
#define CLLM_SERVER_AUTH_H

#include <stdbool.h>
#include <stddef.h>

/* Compares a and b (lengths an, bn) in time that depends only on bn. */
bool auth_equal_ct(const char *a, size_t an, const char *b, size_t bn);
/* Whether an Authorization header value (may be NULL) carries `key`. */
bool auth_check(const char *header, const char *key);
/* Whether requests to this path need the key: /v1/..., /tokenize and
 * /detokenize do; /health and /metrics stay open (as in vLLM). */
bool auth_path_protected(const char *path);

#endif
