/* Error reporting: a failing function records one line saying what was wrong
 * and where, and returns -1 (or NULL). The caller that can act on it reads it
 * with cllm_last_error(); messages are per thread, so the server's threads and
 * the engine thread never see each other's errors. */
#ifndef CLLM_UTIL_ERROR_H
#define CLLM_UTIL_ERROR_H

#include <stddef.h>

#if defined(__GNUC__)
#define CLLM_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define CLLM_PRINTF(a, b)
#endif

/* Records the message and returns -1, so `return err_set("...")` reads well. */
int err_set(const char *fmt, ...) CLLM_PRINTF(1, 2);
/* Prefixes the current message with more context ("loading X: " + old). */
int err_prefix(const char *fmt, ...) CLLM_PRINTF(1, 2);
const char *err_get(void);
void err_clear(void);

#endif
