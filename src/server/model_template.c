/* See model_template.h. */
#include "server/model_template.h"

#include "tokenizer/tokenizer.h"
#include "util/error.h"
#include "util/file.h"

#include <stdio.h>
#include <stdlib.h>

static chat_template *find(const model *m, const char *file, const char *who) {
    if (file) {
        char *src = file_read_all(file, NULL);
        if (!src) return NULL;
        chat_template *t = chat_template_parse(src);
        free(src);
        if (!t) err_prefix("--chat-template %s: ", file);
        else fprintf(stderr, "cllm %s: chat template from %s\n", who, file);
        return t;
    }
    if (m->chat_template) {
        chat_template *t = chat_template_parse(m->chat_template);
        if (t) {
            fprintf(stderr, "cllm %s: chat template from the model file\n", who);
            return t;
        }
        fprintf(stderr, "cllm %s: warning: the model's chat template cannot be used (%s); using the built-in one\n",
                who, err_get());
    }
    const bool llama3 = tokenizer_find(m->tok, "<|start_header_id|>", 19) >= 0;
    const char *arch = m->hp.traits ? m->hp.traits->name : "";
    chat_template *t = chat_template_parse(chat_template_builtin(arch, llama3));
    if (t) fprintf(stderr, "cllm %s: the model has no chat template; using the built-in one for '%s'\n", who, arch);
    else err_prefix("the built-in chat template: ");
    return t;
}

chat_template *model_template_load(const model *m, const char *file, bool trust_content, const char *who) {
    chat_template *t = find(m, file, who);
    if (t && trust_content) {
        chat_template_set_trust_content(t, true);
        fprintf(stderr, "cllm %s: --chat-parse-special-in-content: control tokens in message content are parsed\n",
                who);
    }
    return t;
}
