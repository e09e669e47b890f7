/* Error reporting: a failing function records one line saying what was wrong
 * and where, and returns -1 (or NULL). The caller that can act on it reads it
 * with cllm_last_error(); messages are per thread, so the server's threads and
 * the engine thread never see each other's errors. */
#ifndef CLLM_UTIL_ERROR_H
#define CLLM_UTIL_ERROR_H

#include <stdbool.h>
#include <stddef.h>

#if defined(__GNUC__)
#define CLLM_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define CLLM_PRINTF(a, b)
#endif

/* Records the message and returns -1, so `return err_set("...")` reads well. */
int err_set(const char *fmt, ...) CLLM_PRINTF(1, 2);
/* The same for an allocation that failed: the message is also marked as
 * running out of memory, so a server can answer 500 (its own failure)
 * rather than 400 (the client's mistake). err_set clears the mark;
 * err_prefix keeps it. */
int err_oom(const char *fmt, ...) CLLM_PRINTF(1, 2);
/* Whether the current message came from err_oom. */
bool err_is_oom(void);
/* Prefixes the current message with more context ("loading X: " + old). */
int err_prefix(const char *fmt, ...) CLLM_PRINTF(1, 2);
const char *err_get(void);
void err_clear(void);

#endif
