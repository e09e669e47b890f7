/* Chat templates: the public entry points (template.h). A parsed template is
 * immutable - its tree lives in its own arena - so one template can be
 * rendered from many threads at once; each render has a private arena. */
#include "chat/template.h"

#include "chat/template_internal.h"

#include <stdlib.h>
#include <string.h>

struct chat_template {
    tpl_arena *ar;
    nodelist body;
    bool trust_content; /* see chat_template_set_trust_content */
    tool_format tools;  /* the tool-call format its markers show */
    reasoning_format reasoning; /* how replies mark their reasoning: detected, or set */
};

chat_template *chat_template_parse(const char *source) {
    if (!source) {
        err_set("chat template: no source");
        return NULL;
    }
    chat_template *t = calloc(1, sizeof *t);
    if (!t) {
        err_oom("chat template: out of memory");
        return NULL;
    }
    t->ar = tpl_ar_new(TPL_PARSE_BUDGET);
    token *toks;
    size_t ntoks;
    if (!t->ar || tpl_lex(t->ar, source, strlen(source), &toks, &ntoks) ||
        tpl_parse(t->ar, toks, ntoks, &t->body)) {
        chat_template_free(t);
        return NULL;
    }
    t->tools = tool_format_detect(source);
    t->reasoning = reasoning_format_detect(source);
    return t;
}

tool_format chat_template_tool_format(const chat_template *t) { return t->tools; }
reasoning_format chat_template_reasoning(const chat_template *t) { return t->reasoning; }
void chat_template_set_reasoning(chat_template *t, reasoning_format f) { t->reasoning = f; }

void chat_template_free(chat_template *t) {
    if (!t) return;
    tpl_ar_free(t->ar);
    free(t);
}

static bool can_render(const chat_template *t, json_t *context) {
    if (!t) {
        err_set("chat template: no template");
        return false;
    }
    if (!json_is_object(context)) {
        err_set("chat template: the context must be a JSON object");
        return false;
    }
    return true;
}

char *chat_template_render(const chat_template *t, json_t *context) {
    return can_render(t, context) ? tpl_render(&t->body, context, NULL, NULL, NULL) : NULL;
}

char *chat_template_render_marked(const chat_template *t, json_t *context, const char *const *trusted,
                                  chat_span **spans, size_t *nspans) {
    *spans = NULL;
    *nspans = 0;
    return can_render(t, context) ? tpl_render(&t->body, context, trusted, spans, nspans) : NULL;
}

void chat_template_set_trust_content(chat_template *t, bool trust) {
    t->trust_content = trust;
}

bool chat_template_trusts_content(const chat_template *t) {
    return t && t->trust_content;
}
