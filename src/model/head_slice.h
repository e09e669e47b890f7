/* The rows of a model's output matrix for a subset of its tokens, gathered
 * into a weight of their own (the matrix's type, in the x8 layout where the
 * kernels have one): a draft that scores only those tokens reads only those
 * rows (FR-Spec, Zhao et al., 2025: the most frequent 16k of a 262k
 * vocabulary cover nearly all of what a model says, for a sixteenth of the
 * bytes). Medusa heads and the layer_skip and draft_model drafts use it. */
#ifndef CLLM_MODEL_HEAD_SLICE_H
#define CLLM_MODEL_HEAD_SLICE_H

#include "kernels/matmul.h"
#include "model/model.h"

typedef struct {
    weight w;       /* n rows of m's output matrix */
    int32_t *ids;   /* [n] the token of each row */
    int n;
    void *data, *x8;
} head_slice;

/* Rows ids[0..n) of m's output matrix (each a token of m). 0, or -1 with
 * err_get(). */
int head_slice_init(head_slice *h, const model *m, const int32_t *ids, int n);
void head_slice_free(head_slice *h);

/* The token ids of a frequency-ranked draft vocabulary in `path` (a GGUF with
 * medusa.draft_vocab, which `cllm medusa train` writes), at most max_n of
 * them (0: all), each checked against m's vocabulary. Returns the count
 * (ids in *out, malloc'd), or -1 with err_get(). */
int head_slice_read_vocab(const char *path, const model *m, int max_n, int32_t **out);

#endif
