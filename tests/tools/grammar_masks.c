/* Drives a constraint token by token for the mask tests (test_grammar_masks.py
 * compares every mask with XGrammar's). Usage:
 *   grammar_masks KIND SPEC_FILE (MODEL.gguf | VOCAB.json) [--any-whitespace] [--uncached]
 * KIND: json_schema, json_object, regex, choice, gbnf. SPEC_FILE holds the
 * schema (JSON), the regex or grammar text, or the choices (a JSON array).
 * VOCAB.json: {"tokens": ["..."], "eog": [ids]}, each token's bytes as code
 * points 0..255. Then reads commands on stdin, one per line:
 *   vocab        prints each token's bytes as hex, one line per token ("-" for none)
 *   mask         prints the allowed-token bitmask as hex 32-bit words, low word first
 *   accept ID    prints 1 (accepted) or 0
 *   end          prints whether the output may end here
 * A compile error prints "error: MESSAGE" and exits 2. */
#include "format/gguf.h"
#include "grammar/constraint.h"
#include "grammar/token_mask.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"
#include "util/file.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static token_vocab *vocab_from_json(const char *path) {
    json_error_t je;
    json_t *root = json_load_file(path, JSON_ALLOW_NUL, &je);
    if (!root) return NULL;
    json_t *toks = json_object_get(root, "tokens"), *eogs = json_object_get(root, "eog");
    const int n = (int)json_array_size(toks);
    char **bytes = calloc((size_t)n, sizeof *bytes);
    int *lens = calloc((size_t)n, sizeof *lens);
    bool *eog = calloc((size_t)n, sizeof *eog);
    for (int i = 0; i < n; i++) {
        const char *s = json_string_value(json_array_get(toks, (size_t)i));
        const size_t sl = json_string_length(json_array_get(toks, (size_t)i));
        bytes[i] = malloc(sl + 1);
        int k = 0;
        for (size_t j = 0; j < sl;) { /* UTF-8 code points 0..255 back to bytes */
            const unsigned char c = (unsigned char)s[j];
            if (c < 0x80) bytes[i][k++] = (char)c, j++;
            else bytes[i][k++] = (char)(((c & 0x1F) << 6) | (s[j + 1] & 0x3F)), j += 2;
        }
        lens[i] = k;
    }
    size_t j;
    json_t *v;
    json_array_foreach(eogs, j, v) eog[json_integer_value(v)] = true;
    token_vocab *tv = token_vocab_create(n, (const char *const *)bytes, lens, eog);
    for (int i = 0; i < n; i++) free(bytes[i]);
    free(bytes), free(lens), free(eog);
    json_decref(root);
    return tv;
}

static token_vocab *vocab_from_gguf(const char *path) {
    gguf_ctx *g = gguf_open(path);
    if (!g) return NULL;
    tokenizer *t = tokenizer_from_gguf(g);
    token_vocab *v = t ? token_vocab_from_tokenizer(t) : NULL;
    tokenizer_free(t);
    gguf_close(g);
    return v;
}

static int parse_kind(const char *s, constraint_kind *k) {
    static const char *names[] = {"json_schema", "json_object", "regex", "choice", "gbnf"};
    for (int i = 0; i < 5; i++)
        if (!strcmp(s, names[i])) return *k = (constraint_kind)i, 0;
    return -1;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: grammar_masks KIND SPEC_FILE MODEL.gguf|VOCAB.json [--any-whitespace] [--uncached]\n");
        return 1;
    }
    constraint_kind kind;
    if (parse_kind(argv[1], &kind)) return fprintf(stderr, "unknown kind %s\n", argv[1]), 1;
    json_schema_options opt = {0};
    bool uncached = false;
    for (int i = 4; i < argc; i++) {
        if (!strcmp(argv[i], "--any-whitespace")) opt.any_whitespace = true;
        if (!strcmp(argv[i], "--uncached")) uncached = true;
    }
    const size_t n = strlen(argv[3]);
    token_vocab *v = n > 5 && !strcmp(argv[3] + n - 5, ".gguf") ? vocab_from_gguf(argv[3]) : vocab_from_json(argv[3]);
    if (!v) return fprintf(stderr, "vocabulary: %s\n", err_get()), 1;
    size_t text_len = 0;
    char *text = file_read_all(argv[2], &text_len);
    if (!text) return fprintf(stderr, "%s\n", err_get()), 1;
    json_t *spec = NULL;
    if (kind == CONSTRAINT_REGEX || kind == CONSTRAINT_GBNF) spec = json_stringn(text, text_len);
    else if (kind != CONSTRAINT_JSON_OBJECT) {
        json_error_t je;
        spec = json_loadb(text, text_len, JSON_DECODE_ANY, &je);
        if (!spec) return fprintf(stderr, "spec: %s\n", je.text), 1;
    }
    constraint *c = constraint_compile(kind, spec, &opt);
    if (!c) {
        printf("error: %s\n", err_get());
        return 2;
    }
    constraint_state st;
    if (constraint_state_init(&st, c)) return printf("error: %s\n", err_get()), 2;
    const size_t words = (size_t)(v->n_vocab + 31) / 32;
    uint32_t *mask = malloc(words * sizeof *mask);
    char line[256];
    printf("ready\n");
    fflush(stdout);
    while (fgets(line, sizeof line, stdin)) {
        if (!strncmp(line, "mask", 4)) {
            const int rc = uncached ? token_mask_walk(constraint_grammar(c), v, &st.st, mask)
                                    : constraint_mask(&st, v, mask);
            if (rc) {
                printf("error: %s\n", err_get());
            } else {
                for (size_t w = 0; w < words; w++) printf("%08x", mask[w]);
                printf("\n");
            }
        } else if (!strncmp(line, "accept ", 7)) {
            printf("%d\n", constraint_accept(&st, v, (int32_t)atoi(line + 7)));
        } else if (!strncmp(line, "end", 3)) {
            printf("%d\n", constraint_can_end(&st));
        } else if (!strncmp(line, "vocab", 5)) {
            for (int i = 0; i < v->n_vocab; i++) {
                int len;
                const char *p = token_vocab_bytes(v, i, &len);
                if (!len) printf("-");
                for (int k = 0; k < len; k++) printf("%02x", (unsigned char)p[k]);
                printf(v->is_eog[i] ? " eog\n" : "\n");
            }
        }
        fflush(stdout);
    }
    free(mask);
    constraint_state_free(&st);
    constraint_release(c);
    json_decref(spec);
    free(text);
    token_vocab_free(v);
    return 0;
}
