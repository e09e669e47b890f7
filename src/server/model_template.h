/* A model's chat template: a file given by the user, else the one the model
 * file carries, else the built-in one for its family (Llama 3's when the
 * vocabulary has <|start_header_id|>). Used by `cllm serve` and `cllm chat`. */
#ifndef CLLM_SERVER_MODEL_TEMPLATE_H
#define CLLM_SERVER_MODEL_TEMPLATE_H

#include "chat/template.h"
#include "model/model.h"

#include <stdbool.h>

/* file: a template file, or NULL. trust_content: control tokens in message
 * content are parsed (--chat-parse-special-in-content). Logs the choice to
 * stderr as "cllm WHO: ...". Returns NULL with err_get(). */
chat_template *model_template_load(const model *m, const char *file, bool trust_content, const char *who);

#endif
