/* See bad_words.h; the rule is vLLM's SamplingParams.update_from_tokenizer. */
#include "server/bad_words.h"

#include "chat/prompt.h"
#include "util/buf.h"

#include <stdlib.h>
#include <string.h>

static int add_seq(bad_word_seqs *b, const int32_t *ids, int n, int *total) {
    int32_t *grown_ids = realloc(b->ids, (size_t)(*total + n) * sizeof *grown_ids);
    if (!grown_ids) return -1;
    b->ids = grown_ids;
    int *grown_lens = realloc(b->lens, (size_t)(b->n + 1) * sizeof *grown_lens);
    if (!grown_lens) return -1;
    b->lens = grown_lens;
    memcpy(b->ids + *total, ids, (size_t)n * sizeof *ids);
    b->lens[b->n++] = n;
    *total += n;
    return 0;
}

int bad_words_tokenize(const tokenizer *t, const json_t *words, bad_word_seqs *out, api_error *e) {
    *out = (bad_word_seqs){0};
    int total = 0;
    size_t i;
    const json_t *w;
    json_array_foreach(words, i, w) {
        const char *s = json_string_value(w);
        while (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r' || *s == '\f' || *s == '\v') s++;
        if (!*s) continue;
        int32_t *plain = NULL, *spaced = NULL;
        buf with_space = {0};
        buf_puts(&with_space, " ");
        buf_puts(&with_space, s);
        const int n_plain = with_space.oom ? PROMPT_NO_MEMORY : prompt_encode_text(t, s, strlen(s), false, &plain);
        const int n_spaced =
            n_plain < 0 ? n_plain : prompt_encode_text(t, with_space.data, with_space.len, false, &spaced);
        int rc = n_plain < 0 ? n_plain : n_spaced;
        if (rc >= 0 && n_plain > 0) rc = add_seq(out, plain, n_plain, &total) ? PROMPT_NO_MEMORY : 0;
        /* The spaced form counts when it is a word of its own, not the same
         * tokens behind a separate space. */
        if (rc >= 0 && n_plain > 0 && n_spaced == n_plain && spaced[0] != plain[0])
            rc = add_seq(out, spaced, n_spaced, &total) ? PROMPT_NO_MEMORY : 0;
        free(plain);
        free(spaced);
        buf_free(&with_space);
        if (rc < 0) {
            bad_words_free(out);
            if (rc == PROMPT_NO_MEMORY) return api_fail(e, 500, "out_of_memory", NULL, "out of memory");
            return api_fail(e, 400, "invalid_value", "bad_words", "bad word %zu cannot be tokenized", i);
        }
    }
    return 0;
}

void bad_words_free(bad_word_seqs *b) {
    free(b->ids);
    free(b->lens);
    *b = (bad_word_seqs){0};
}
