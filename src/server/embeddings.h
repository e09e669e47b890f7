/* POST /v1/embeddings, OpenAI's shape, for a served model that is an
 * embedding model (model/encoder.h; "model" picks it, as for the other
 * endpoints); a generative model answers it with vLLM's 400.
 *
 * Request: "input" (a string, a list of strings, a list of token ids, or a
 * list of lists of token ids; at most --max-embedding-inputs of them, none
 * empty), "encoding_format" ("float", or "base64": the little-endian float32
 * bytes), "dimensions" (only for a Matryoshka model: the vector cut to that
 * many dimensions and renormalized; any other model gets vLLM's 400),
 * "truncate_prompt_tokens" (vLLM's: -1 or k keeps the input to the model's
 * length or to k tokens, a text's [CLS] ... [SEP] kept, token ids' last k;
 * without it a longer input is a 400), "model", "user" (ignored).
 *
 * Response: {"object": "list", "data": [{"object": "embedding", "index": i,
 * "embedding": [...] or "base64..."}], "model", "usage": {"prompt_tokens",
 * "total_tokens"}}. Text inputs are looked up in the embedding cache first
 * (--embedding-cache-size); the rest go to the embedder together, which
 * batches them with other requests' into shared forward passes. */
#ifndef CLLM_SERVER_EMBEDDINGS_H
#define CLLM_SERVER_EMBEDDINGS_H

#include "server/server.h"

#define SERVER_DEFAULT_MAX_EMBED_INPUTS 2048

enum MHD_Result handle_embeddings(server *s, http_req *r);

#endif
