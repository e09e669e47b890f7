/* Server-Sent Events framing for streamed completions: each event is one
 * line `data: <compact JSON>` followed by a blank line, and the stream ends
 * with `data: [DONE]`. JSON never contains a raw newline, so one data line
 * always suffices. */
#ifndef CLLM_SERVER_SSE_H
#define CLLM_SERVER_SSE_H

#include "util/buf.h"

#include <jansson.h>

/* Appends `data: {json}\n\n`. Returns -1 if the value cannot be serialized. */
int sse_append_json(buf *b, const json_t *j);
void sse_append_done(buf *b);
/* Appends `event: NAME\ndata: {json}\n\n` (the Responses API's typed events). */
int sse_append_event(buf *b, const char *name, const json_t *j);

/* The JSON dump flags used for every response body (compact, reals short). */
#define SERVER_JSON_FLAGS (JSON_COMPACT | JSON_REAL_PRECISION(9))

#endif
