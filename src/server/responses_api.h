/* POST /v1/responses: OpenAI's Responses API over the chat machinery. The
 * request (input as a string or as message items, instructions,
 * max_output_tokens, temperature, top_p, stream) becomes a chat request;
 * the answer is a "response" object with one assistant message item, or,
 * streamed, the API's typed events (response.created ... response.completed)
 * with sequence numbers. Nothing is stored: previous_response_id, store:
 * true, conversation, tools and other fields that need state or tools are
 * refused with a 400 naming them. */
#ifndef CLLM_SERVER_RESPONSES_API_H
#define CLLM_SERVER_RESPONSES_API_H

#include "server/http.h"
#include "server/server.h"

enum MHD_Result handle_responses(server *s, http_req *r);

#endif
