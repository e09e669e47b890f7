/* See token_vocab.h. */
#include "grammar/token_vocab.h"

#include "grammar/token_mask_class.h"

#include "tokenizer/tokenizer.h"
#include "util/error.h"

#include <stdlib.h>
#include <string.h>

void token_vocab_free(token_vocab *v) {
    if (!v) return;
    free(v->bytes);
    free(v->offset);
    free(v->order);
    free(v->lcp);
    free(v->sorted_bytes);
    free(v->sorted_offset);
    free(v->is_eog);
    free(v->eog_ids);
    token_class_cache_free(v->classes);
    free(v);
}

static const token_vocab *sort_vocab; /* qsort has no context argument */

static int cmp_tokens(const void *a, const void *b) {
    const int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    int lx, ly;
    const char *px = token_vocab_bytes(sort_vocab, x, &lx), *py = token_vocab_bytes(sort_vocab, y, &ly);
    const int c = memcmp(px, py, (size_t)(lx < ly ? lx : ly));
    if (c) return c;
    if (lx != ly) return lx < ly ? -1 : 1;
    return x < y ? -1 : x > y;
}

token_vocab *token_vocab_create(int n_vocab, const char *const *bytes, const int *lens, const bool *is_eog) {
    token_vocab *v = calloc(1, sizeof *v);
    if (!v) goto oom;
    v->n_vocab = n_vocab;
    size_t total = 0;
    for (int i = 0; i < n_vocab; i++) total += (size_t)lens[i];
    v->bytes = malloc(total ? total : 1);
    v->offset = malloc(((size_t)n_vocab + 1) * sizeof *v->offset);
    v->order = malloc(((size_t)n_vocab + 1) * sizeof *v->order);
    v->lcp = malloc(((size_t)n_vocab + 1) * sizeof *v->lcp);
    v->is_eog = calloc((size_t)n_vocab + 1, sizeof *v->is_eog);
    v->eog_ids = malloc(((size_t)n_vocab + 1) * sizeof *v->eog_ids);
    v->classes = token_class_cache_create();
    if (!v->bytes || !v->offset || !v->order || !v->lcp || !v->is_eog || !v->eog_ids || !v->classes)
        goto oom;
    size_t at = 0;
    for (int i = 0; i < n_vocab; i++) {
        v->offset[i] = (uint32_t)at;
        if (lens[i] > 0) memcpy(v->bytes + at, bytes[i], (size_t)lens[i]); /* an empty token may have no bytes */
        at += (size_t)lens[i];
        if (lens[i] > v->max_len) v->max_len = lens[i];
        if (is_eog && is_eog[i]) v->is_eog[i] = true, v->eog_ids[v->n_eog++] = i;
        else if (lens[i] > 0) v->order[v->n_order++] = i;
    }
    v->offset[n_vocab] = (uint32_t)at;
    sort_vocab = v;
    qsort(v->order, (size_t)v->n_order, sizeof *v->order, cmp_tokens);
    int b = 0;
    for (int i = 0; i < v->n_order; i++) {
        int l0, l1 = 0;
        const char *p0 = token_vocab_bytes(v, v->order[i], &l0);
        const char *p1 = i ? token_vocab_bytes(v, v->order[i - 1], &l1) : NULL;
        int k = 0;
        while (k < l0 && k < l1 && p0[k] == p1[k]) k++;
        v->lcp[i] = (uint16_t)(k < 65535 ? k : 65535);
        for (const int first = (unsigned char)p0[0]; b <= first; b++) v->first_end[b] = i;
    }
    for (; b <= 256; b++) v->first_end[b] = v->n_order;
    v->sorted_bytes = malloc(total ? total : 1);
    v->sorted_offset = malloc(((size_t)v->n_order + 1) * sizeof *v->sorted_offset);
    if (!v->sorted_bytes || !v->sorted_offset) goto oom;
    at = 0;
    for (int i = 0; i < v->n_order; i++) {
        int len;
        const char *p = token_vocab_bytes(v, v->order[i], &len);
        v->sorted_offset[i] = (uint32_t)at;
        memcpy(v->sorted_bytes + at, p, (size_t)len);
        at += (size_t)len;
    }
    v->sorted_offset[v->n_order] = (uint32_t)at;
    /* first_end[b] holds the start of byte b's group; shift so [b] is its end. */
    for (int x = 0; x < 256; x++) v->first_end[x] = v->first_end[x + 1];
    v->first_end[256] = v->n_order;
    return v;
oom:
    err_oom("token vocabulary: out of memory");
    token_vocab_free(v);
    return NULL;
}

token_vocab *token_vocab_from_tokenizer(const tokenizer *t) {
    const int n = tokenizer_n_vocab(t);
    char **bytes = calloc((size_t)n, sizeof *bytes);
    int *lens = calloc((size_t)n, sizeof *lens);
    bool *eog = calloc((size_t)n, sizeof *eog);
    token_vocab *v = NULL;
    if (!bytes || !lens || !eog) {
        err_oom("token vocabulary: out of memory");
        goto done;
    }
    for (int i = 0; i < n; i++) {
        char buf[256];
        const tok_type ty = tokenizer_token_type(t, i);
        eog[i] = tokenizer_is_eog(t, i);
        if (ty == TOK_TYPE_CONTROL || ty == TOK_TYPE_UNUSED || ty == TOK_TYPE_UNKNOWN) continue;
        const int len = tokenizer_token_to_piece(t, i, false, buf, (int)sizeof buf);
        if (len <= 0) continue;
        if (!(bytes[i] = malloc((size_t)len))) {
            err_oom("token vocabulary: out of memory");
            goto done;
        }
        if (len > (int)sizeof buf) tokenizer_token_to_piece(t, i, false, bytes[i], len);
        else memcpy(bytes[i], buf, (size_t)len);
        lens[i] = len;
    }
    v = token_vocab_create(n, (const char *const *)bytes, lens, eog);
done:
    if (bytes)
        for (int i = 0; i < n; i++) free(bytes[i]);
    free(bytes);
    free(lens);
    free(eog);
    return v;
}
