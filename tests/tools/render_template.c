/* Test helper for tests/integration/test_chat_template.py, which compares its
 * output with Python jinja2 configured as Hugging Face transformers does:
 *
 *   render_template TEMPLATE_FILE < CONTEXT.json
 *       Renders the template with the JSON object on stdin as its context
 *       and writes the result to stdout, byte for byte. On a parse or render
 *       error (raise_exception included) prints the message to stderr and
 *       exits 1.
 *
 *   render_template --each TEMPLATE_FILE < CONTEXTS.json
 *       Parses the template once and renders it with each context of the
 *       JSON array on stdin; writes a JSON array with, for each, {"output":
 *       text} or {"error": message}, and exits 0 (1 when the template does
 *       not parse, with the message on stderr).
 *
 *   render_template --each --marked TEMPLATE_FILE < CONTEXTS.json
 *       As --each, and each output also has "spans": [[offset, length], ...],
 *       the byte ranges of the output that came from the context (all of it
 *       but bos_token and eos_token), as prompt.c tokenizes them. */
#include "chat/template.h"
#include "util/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *read_all(FILE *f, size_t *n) {
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap + 1);
    if (!buf) return NULL;
    for (;;) {
        size_t got = fread(buf + len, 1, cap - len, f);
        len += got;
        if (len < cap) break;
        char *bigger = realloc(buf, cap * 2 + 1);
        if (!bigger) {
            free(buf);
            return NULL;
        }
        buf = bigger;
        cap *= 2;
    }
    buf[len] = 0;
    *n = len;
    return buf;
}

/* One result of --each: {"output": text} or {"error": message}, with
 * "spans" when `marked`. */
static json_t *render_one(const chat_template *t, json_t *ctx, bool marked) {
    static const char *const trusted[] = {"bos_token", "eos_token", NULL};
    chat_span *spans = NULL;
    size_t nspans = 0;
    char *out = marked ? chat_template_render_marked(t, ctx, trusted, &spans, &nspans) : chat_template_render(t, ctx);
    if (!out) return json_pack("{ss}", "error", err_get());
    json_t *text = json_string(out);
    free(out);
    json_t *list = json_array();
    for (size_t i = 0; i < nspans; i++)
        json_array_append_new(list, json_pack("[II]", (json_int_t)spans[i].off, (json_int_t)spans[i].len));
    free(spans);
    if (!text) {
        json_decref(list);
        return json_pack("{ss}", "error", "rendered text is not valid UTF-8");
    }
    json_t *result = json_pack("{so}", "output", text);
    if (marked) json_object_set(result, "spans", list);
    json_decref(list);
    return result;
}

static int render_each(const chat_template *t, json_t *contexts, bool marked) {
    if (!json_is_array(contexts)) {
        fprintf(stderr, "--each: stdin must be a JSON array of contexts\n");
        return 2;
    }
    json_t *results = json_array();
    size_t i;
    json_t *ctx;
    json_array_foreach(contexts, i, ctx) {
        json_array_append_new(results, render_one(t, ctx, marked));
    }
    int rc = json_dumpf(results, stdout, JSON_COMPACT) == 0 ? 0 : 2;
    json_decref(results);
    return rc;
}

int main(int argc, char **argv) {
    bool each = argc >= 3 && strcmp(argv[1], "--each") == 0;
    bool marked = each && argc == 4 && strcmp(argv[2], "--marked") == 0;
    if ((argc != 2 && !each) || (each && argc != 3 && !marked)) {
        fprintf(stderr, "usage: %s [--each [--marked]] TEMPLATE_FILE < CONTEXT.json\n", argv[0]);
        return 2;
    }
    const char *path = argv[argc - 1];
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "cannot open '%s'\n", path);
        return 2;
    }
    size_t n;
    char *source = read_all(f, &n);
    fclose(f);
    if (!source) {
        fprintf(stderr, "out of memory\n");
        return 2;
    }
    if (strlen(source) != n) {
        fprintf(stderr, "template file contains a NUL byte\n");
        free(source);
        return 1;
    }
    json_error_t jerr;
    json_t *ctx = json_loadf(stdin, 0, &jerr);
    if (!ctx) {
        fprintf(stderr, "context JSON: %s (line %d)\n", jerr.text, jerr.line);
        free(source);
        return 2;
    }
    int rc = 1;
    chat_template *t = chat_template_parse(source);
    if (t && each) {
        rc = render_each(t, ctx, marked);
    } else if (t) {
        char *out = chat_template_render(t, ctx);
        if (out) {
            fwrite(out, 1, strlen(out), stdout);
            free(out);
            rc = 0;
        }
    }
    if (rc == 1) fprintf(stderr, "%s\n", err_get());
    chat_template_free(t);
    json_decref(ctx);
    free(source);
    return rc;
}
