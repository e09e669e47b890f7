/* libFuzzer harness: the structured-output compilers on outside text. The
 * first byte picks the frontend (GBNF, regex, JSON Schema as JSON text,
 * choice list); the rest is the grammar, pattern or schema. What compiles is
 * then driven over its own source bytes (the recognizer and a token mask
 * over a small vocabulary). Bad input must be refused with a message, never
 * crash, hang past the limits or leak. */
#include "grammar/constraint.h"
#include "grammar/token_mask.h"

#include <stdint.h>
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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1 || size > 4096) return 0;
    static token_vocab *vocab;
    if (!vocab) vocab = small_vocab();
    const constraint_kind kinds[] = {CONSTRAINT_GBNF, CONSTRAINT_REGEX, CONSTRAINT_JSON_SCHEMA, CONSTRAINT_CHOICE};
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
    constraint_release(c);
    return 0;
}
