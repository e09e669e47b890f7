/* Test helper for tests/integration/test_chat_template.py, which compares its
 * output with Python jinja2 configured as Hugging Face transformers does:
 *
 *   render_template TEMPLATE_FILE < CONTEXT.json
 *       Renders the template with the JSON object on stdin as its context
 *       and writes the result to stdout, byte for byte. On a parse or render
 *       error (raise_exception included) prints the message to stderr and
 *       exits 1. */
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

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s TEMPLATE_FILE < CONTEXT.json\n", argv[0]);
        return 2;
    }
    FILE *f = fopen(argv[1], "rb");
    if (!f) {
        fprintf(stderr, "cannot open '%s'\n", argv[1]);
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
    if (t) {
        char *out = chat_template_render(t, ctx);
        if (out) {
            fwrite(out, 1, strlen(out), stdout);
            free(out);
            rc = 0;
        }
    }
    if (rc) fprintf(stderr, "%s\n", err_get());
    chat_template_free(t);
    json_decref(ctx);
    free(source);
    return rc;
}
