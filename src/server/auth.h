/* API-key check: "Authorization: Bearer KEY" compared with the configured key
 * in time that does not depend on where the two differ; which paths need it;
 * and reading the key from a file (a key on the command line is visible to
 * every local user in /proc/PID/cmdline). */
#ifndef CLLM_SERVER_AUTH_H
#define CLLM_SERVER_AUTH_H

#include <stdbool.h>
#include <stddef.h>

/* Compares a and b (lengths an, bn) in time that depends only on bn. */
bool auth_equal_ct(const char *a, size_t an, const char *b, size_t bn);
/* Whether an Authorization header value (may be NULL) carries `key`. */
bool auth_check(const char *header, const char *key);
/* Whether requests to this path need the key: /v1/..., /tokenize and
 * /detokenize do; /metrics only when `metrics_protected`; /health never (a
 * load balancer's probe carries no key). */
bool auth_path_protected(const char *path, bool metrics_protected);
/* The key in a file: its first line, without the line end and surrounding
 * blanks. A malloc'd string, or NULL with err_get() when the file cannot be
 * read, the key is empty, or it holds control characters. */
char *auth_key_from_file(const char *path);

#endif
