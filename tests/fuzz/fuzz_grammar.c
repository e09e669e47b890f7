/* libFuzzer harness: the structured-output compilers on outside text. The
 * first byte picks the frontend (GBNF, regex, JSON Schema as JSON text,
 * choice list); the rest is the grammar, pattern or schema. What compiles is
 * then driven over its own source bytes (the recognizer and a token mask
 * over a small vocabulary), and its first states' masks over a vocabulary
 * large enough for the token classes (token_mask_class.h) must equal the
 * walk of the whole vocabulary. Bad input must be refused with a message,
 * never crash, hang past the limits or leak. */
#include "grammar/constraint.h"
#include "grammar/token_mask.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static token_vocab *small_vocab(void) {
    static const char *toks[] = {"{", "}", "\"", "a", "ab", "1", ":", ", ", "[", "]", "\xc3", "\xa9", "x y", ""};
    int lens[14];
    bool eog[14] = {0};
    for (int i = 0; i < 14; i++) lens[i] = (int)strlen(toks[i]);
    eog[13] = true;
    return token_vocab_create(14, toks, lens, eog);
}

/* Every printable ASCII byte and pair, and a few longer tokens. */
static token_vocab *large_vocab(void) {
    static const char *extra[] = {"\",",  "\"}", "\": \"", "\\n",     "\xc3\xa9",
                                  "\xc3", "\n",  "((((",   "abcdefgh"};
    const int n = 95 + 95 * 95 + 9;
    char **toks = malloc((size_t)n * sizeof *toks);
    int *lens = malloc((size_t)n * sizeof *lens);
    int k = 0;
    for (int a = 32; a < 127; a++) {
        toks[k] = malloc(2), toks[k][0] = (char)a, lens[k++] = 1;
        for (int b = 32; b < 127; b++)
            toks[k] = malloc(2), toks[k][0] = (char)a, toks[k][1] = (char)b, lens[k++] = 2;
    }
    for (int i = 0; i < 9; i++)
        toks[k] = (char *)extra[i], lens[k++] = (int)strlen(extra[i]);
    token_vocab *v = token_vocab_create(n, (const char *const *)toks, lens, NULL);
    for (int i = 0; i < 95 * 96; i++)
        free(toks[i]);
    free(toks), free(lens);
    return v;
}

/* The masks of the first few states along the input's own bytes. */
static void check_classes(constraint *c, const token_vocab *v, const uint8_t *data, size_t size) {
    constraint_state st;
    if (constraint_state_init(&st, c)) return;
    static uint32_t got[(95 + 95 * 95 + 9 + 31) / 32], want[(95 + 95 * 95 + 9 + 31) / 32];
    for (size_t i = 1; i < size && i < 8; i++) {
        if (constraint_mask(&st, v, got) || token_mask_walk(constraint_grammar(c), v, &st.st, want))
            break;
        if (memcmp(got, want, sizeof got)) {
            fprintf(stderr, "token classes and the whole walk disagree at step %zu\n", i);
            abort();
        }
        int32_t tok = -1;
        for (int t = data[i] % v->n_vocab, n = 0; n < v->n_vocab && tok < 0;
             n++, t = (t + 97) % v->n_vocab)
            if (got[t / 32] >> (t % 32) & 1) tok = t;
        if (tok < 0 || constraint_accept(&st, v, tok) != 1) break;
    }
    constraint_state_free(&st);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1 || size > 4096) return 0;
    static token_vocab *vocab, *large;
    if (!vocab) vocab = small_vocab(), large = large_vocab();
    const constraint_kind kinds[] = {CONSTRAINT_GBNF, CONSTRAINT_REGEX, CONSTRAINT_JSON_SCHEMA,
                                     CONSTRAINT_CHOICE};
    const constraint_kind kind = kinds[data[0] % 4];
    const json_schema_options opt = {.any_whitespace = (data[0] >> 2) & 1};
    json_t *spec;
    if (kind == CONSTRAINT_GBNF || kind == CONSTRAINT_REGEX) {
        char *text = malloc(size);
        memcpy(text, data + 1, size - 1);
        text[size - 1] = 0;
        spec = json_string(text);
        free(text);
    } else {
        spec = json_loadb((const char *)data + 1, size - 1, JSON_DECODE_ANY, NULL);
    }
    if (!spec) return 0;
    constraint *c = constraint_compile(kind, spec, &opt);
    json_decref(spec);
    if (!c) return 0;
    constraint_state st;
    if (constraint_state_init(&st, c) == 0) {
        uint32_t mask[1];
        for (size_t i = 1; i < size && i < 64; i++) {
            if (constraint_mask(&st, vocab, mask)) break;
            int32_t tok = -1;
            for (int t = 0; t < vocab->n_vocab; t++)
                if ((mask[0] >> t & 1) && (tok < 0 || (data[i] % 14) == t)) tok = t;
            if (tok < 0 || constraint_accept(&st, vocab, tok) != 1) break;
        }
        constraint_state_free(&st);
    }
    check_classes(c, large, data, size);
    constraint_release(c);
    return 0;
}
