/* See chat_request.h. */
#include "server/chat_request.h"

#include "chat/tool_generic.h"

/* The messages for a template without a tool-call format of its own: the
 * generic format's, when tools are offered or the history has tool parts. */
static int generic_messages(chat_setup *c, const api_request *r, api_error *e) {
    const bool offered = c->opts.tools != NULL;
    if (!offered && !tool_generic_history_has_tools(r->messages)) return 0;
    const tool_generic_choice choice = r->tools.choice == TOOL_CHOICE_REQUIRED ? TOOL_GENERIC_CHOICE_REQUIRED
                                       : r->tools.choice == TOOL_CHOICE_NAMED  ? TOOL_GENERIC_CHOICE_NAMED
                                                                               : TOOL_GENERIC_CHOICE_AUTO;
    json_t *m = tool_generic_messages(r->messages, offered ? r->tools.tools : NULL, choice, r->tools.named);
    if (!m) return api_fail(e, 500, "out_of_memory", NULL, "out of memory");
    json_decref(c->messages);
    c->messages = m;
    c->opts.tools = NULL; /* they are in the system message now */
    return 0;
}

int chat_setup_init(chat_setup *c, const api_request *r, const chat_template *server_tmpl, api_error *e) {
    *c = (chat_setup){.tmpl = server_tmpl,
                      .opts = {.add_generation_prompt = r->add_generation_prompt,
                               .continue_final_message = r->continue_final_message,
                               .vars = r->template_vars,
                               .tools = api_tools_offered(&r->tools) ? r->tools.tools : NULL},
                      .messages = json_incref(r->messages)};
    if (r->chat_template) {
        if (!(c->own = chat_template_parse(r->chat_template)))
            return api_fail(e, 400, "invalid_value", "chat_template", "'chat_template' cannot be parsed: %s",
                            err_get());
        chat_template_set_trust_content(c->own, chat_template_trusts_content(server_tmpl));
        c->tmpl = c->own;
    }
    if (c->tmpl && chat_template_tool_format(c->tmpl) == TOOL_FORMAT_NONE) return generic_messages(c, r, e);
    return 0;
}

void chat_setup_free(chat_setup *c) {
    if (c->own) chat_template_free(c->own);
    json_decref(c->messages);
    *c = (chat_setup){0};
}
