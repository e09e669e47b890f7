/* What a chat request renders with, from vLLM's chat fields: the request's
 * own chat_template (parsed here, trusting message content exactly as the
 * server's template does) or the server's, the rendering options
 * (add_generation_prompt, continue_final_message, template variables, the
 * tools offered), and the messages: the request's own, or, for a template
 * that shows no tool-call format, with the tools offered and the history's
 * tool parts written for the generic format (chat/tool_generic.h).
 * Shared by generation and /tokenize, so both count the same tokens. */
#ifndef CLLM_SERVER_CHAT_REQUEST_H
#define CLLM_SERVER_CHAT_REQUEST_H

#include "chat/prompt.h"
#include "chat/template.h"
#include "server/params.h"

typedef struct {
    chat_template *own;        /* the request's template, parsed; NULL: none */
    const chat_template *tmpl; /* the one to render with */
    chat_render_opts opts;     /* its vars point into the request */
    json_t *messages;          /* what is rendered (a reference held) */
} chat_setup;

/* Returns 0, or -1 with a 400 naming chat_template when it does not parse.
 * Free with chat_setup_free (also after -1). */
int chat_setup_init(chat_setup *c, const api_request *r, const chat_template *server_tmpl, api_error *e);
void chat_setup_free(chat_setup *c);

#endif
