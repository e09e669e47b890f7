/* OpenAI's error object, {"error": {"message", "type", "param", "code"}},
 * with the HTTP status that goes with it. Every way a request can fail ends
 * in one of these; a client's mistake is a 4xx, never a 500. */
#ifndef CLLM_SERVER_ERRORS_H
#define CLLM_SERVER_ERRORS_H

#include "util/error.h"

#include <jansson.h>

typedef struct {
    int status;
    const char *type;  /* "invalid_request_error", "authentication_error", "server_error" */
    const char *code;  /* short machine-readable reason, e.g. "invalid_type"; NULL for none */
    char param[128];   /* the offending field ("" for none) */
    char message[1024];
} api_error;

/* Fills *e; status picks the type. Returns -1 so `return api_fail(...)` reads well. */
int api_fail(api_error *e, int status, const char *code, const char *param, const char *fmt, ...)
    CLLM_PRINTF(5, 6);
/* A failed chat/prompt.h call (PROMPT_BAD_INPUT: 400 with code and param;
 * PROMPT_NO_MEMORY, or any failure err_oom marked: 500), with err_get() as
 * the message. Returns -1. */
int api_fail_prompt(api_error *e, int prompt_rc, const char *code, const char *param);
/* The error object as JSON (a new reference). */
json_t *api_error_json(const api_error *e);
/* The OpenAI type for a status: 401 authentication_error, 5xx server_error, else
 * invalid_request_error. */
const char *api_error_type(int status);

#endif
