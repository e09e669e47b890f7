/* See chat_request.h. */
#include "server/chat_request.h"

int chat_setup_init(chat_setup *c, const api_request *r, const chat_template *server_tmpl, api_error *e) {
    *c = (chat_setup){.tmpl = server_tmpl,
                      .opts = {.add_generation_prompt = r->add_generation_prompt,
                               .continue_final_message = r->continue_final_message,
                               .vars = r->template_vars,
                               .tools = api_tools_offered(&r->tools) ? r->tools.tools : NULL}};
    if (!r->chat_template) return 0;
    if (!(c->own = chat_template_parse(r->chat_template)))
        return api_fail(e, 400, "invalid_value", "chat_template", "'chat_template' cannot be parsed: %s", err_get());
    chat_template_set_trust_content(c->own, chat_template_trusts_content(server_tmpl));
    c->tmpl = c->own;
    return 0;
}

void chat_setup_free(chat_setup *c) {
    if (c->own) chat_template_free(c->own);
    *c = (chat_setup){0};
}
