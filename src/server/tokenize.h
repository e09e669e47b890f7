/* POST /tokenize and POST /detokenize (vLLM's extensions):
 *   /tokenize   {"prompt": text} or {"messages": [...]}, optional "model",
 *               "add_special_tokens" (default true for a prompt, false for
 *               messages, as in vLLM) and "add_generation_prompt" (messages,
 *               default true) -> {"tokens": [...], "count": n, "max_model_len": L}
 *   /detokenize {"tokens": [...]} -> {"prompt": text}
 * The token counts are exactly what generation would see, with the tokenizer
 * and chat template of the model "model" names (the default model without
 * it). */
#ifndef CLLM_SERVER_TOKENIZE_H
#define CLLM_SERVER_TOKENIZE_H

#include "server/http.h"
#include "server/server.h"

enum MHD_Result handle_tokenize(server *s, http_req *r);
enum MHD_Result handle_detokenize(server *s, http_req *r);

#endif
