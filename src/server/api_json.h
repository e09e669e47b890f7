/* Small JSON helpers shared across the server's request and response code:
 * the name of a value's type for error messages, typed getters that check a
 * field's type and range and fail with a 400 naming it, and a JSON string
 * made from bytes that may not be valid UTF-8. They know no request or
 * response shape: tools.c and tool_output.c take them from here rather than
 * from params.h and responses.h, which include tools.h and tool_output.h. */
#ifndef CLLM_SERVER_API_JSON_H
#define CLLM_SERVER_API_JSON_H

#include "server/errors.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* A JSON type name for messages ("a string", "an integer", ...); "nothing"
 * for a missing value (NULL). */
const char *api_json_type_name(const json_t *v);

/* A 400 "invalid_type": "'field' must be <want>, got <type of v>". Returns -1. */
int api_type_error(api_error *e, const char *field, const char *want, const json_t *v);

/* Field checks: 0 with *out set, or -1 with a 400 naming `field`. */
int api_get_bool(const json_t *v, const char *field, bool *out, api_error *e);
/* An integer in [lo, hi] (hi LLONG_MAX: "at least lo"). */
int api_get_int(const json_t *v, const char *field, long long lo, long long hi, long long *out, api_error *e);
/* A finite number in [lo, hi], either end open when lo_open / hi_open. */
int api_get_number(const json_t *v, const char *field, double lo, double hi, bool lo_open, bool hi_open,
                   double *out, api_error *e);

/* A JSON string from bytes that may not be valid UTF-8 (ill-formed bytes become U+FFFD). */
json_t *resp_string(const char *p, size_t n);

#endif
