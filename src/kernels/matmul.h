/* Matrix multiplication of f32 activations by a weight matrix in any
 * registered format: Y[t][r] = sum_k X[t][k] * W[r][k]. Activations are
 * converted once to the weight's vec_dot_type, then the weight rows are split
 * over threads, and a batch of tokens reads each weight once: each chunk of
 * rows meets the activation rows through the type's register-blocked gemm
 * tiles (a few rows by a few activation rows), or, for larger batches and
 * the types that have them, through packed panels (8 rows unpacked once,
 * then run past every activation row); types without tiles take one vec_dot
 * per output. A token's outputs are the same bits in any batch. */
#ifndef CLLM_KERNELS_MATMUL_H
#define CLLM_KERNELS_MATMUL_H

#include "kernels/wtype.h"
#include "util/threadpool.h"

#include <stddef.h>
#include <stdint.h>

/* A 2-D weight matrix: n_out rows of n_in elements, row-major in `type`. */
typedef struct {
    const char *name;
    const void *data;
    wtype type;
    int64_t n_in;
    int64_t n_out;
    size_t row_bytes;
    /* NULL, or act-order: stored column k multiplies input element perm[k]
     * (GQ tensors with a "<name>.perm", format/qgroup.h). matmul gathers the
     * activations through it; weight_row_to_float does not (row k of a
     * permuted weight comes back in stored order). */
    const int32_t *perm;
    /* NULL, or the same matrix in the type's x8 layout (weight_repack):
     * matmul then reads only this, and `data` serves weight_row_to_float. */
    const void *x8;
} weight;

/* Bytes of scratch matmul needs for n_tok activation rows of this weight. */
size_t matmul_scratch_size(const weight *w, int n_tok);

/* Y is [n_tok][w->n_out]; X is [n_tok][w->n_in]; scratch holds
 * matmul_scratch_size bytes. */
void matmul(threadpool *threads, const weight *w, const float *x, int n_tok, float *y, void *scratch);

/* One of several matmuls run together: y [n_tok][w->n_out] = x [n_tok][w->n_in] . w. */
typedef struct {
    const weight *w;
    const float *x;
    int n_tok;
    float *y;
} matmul_task;

/* Bytes of scratch matmul_multi needs for these tasks. */
size_t matmul_multi_scratch_size(const matmul_task *t, int n);

/* The most matmul_multi_scratch_size can be for n_tasks tasks whose weights
 * have w's type and shape and whose n_tok add up to n_tok. */
size_t matmul_multi_scratch_bound(const weight *w, int n_tasks, int n_tok);

/* Runs the n tasks with the bits matmul gives each, in two passes over the
 * thread pool for all of them (every task's activations, then every task's
 * weight rows) instead of two per task: a mixture of experts' chosen
 * experts, many small matmuls, then cost one dispatch each way. An
 * act-order weight's (w->perm) activations are gathered in the first pass. */
void matmul_multi(threadpool *threads, const matmul_task *t, int n, void *scratch);

/* Bytes weight_repack needs for w: 0 where w stays as it is (the active
 * kernels have no x8 layout for its type, its rows are permuted, its row
 * count is not a multiple of 8, or it is repacked already). */
size_t weight_repack_size(const weight *w);

/* Lays w out in the x8 layout into buf (weight_repack_size bytes, 32-byte
 * aligned, owned by the caller and kept while w is used); matmul uses it
 * from then on, with the same bits. */
void weight_repack(weight *w, void *buf, threadpool *threads);

/* Dequantizes row `r` of w into out[n_in] (embedding lookup). */
void weight_row_to_float(const weight *w, int64_t r, float *out);

#endif
