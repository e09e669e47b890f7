/* GPTQ and AWQ checkpoint tensors repacked into cllm's group-quantized
 * format (GQ, format/qgroup.h) at load time, exactly: the same integers, the
 * same zero points and the same f16 scales, so every weight dequantizes to
 * the value the checkpoint's own kernels compute, scale * (q - zero).
 *
 * Both formats store a linear layer transposed (input-major, [n_in][n_out]);
 * GQ stores one row per output channel, its input columns in groups.
 *
 * GPTQ (AutoGPTQ / transformers / GPTQModel):
 *   qweight int32 [n_in * bits / 32][n_out]  packed along the input, 32/bits
 *                                            values per word, lowest bits first
 *   qzeros  int32 [n_groups][n_out * bits / 32]  packed along the output, same order
 *   scales  f16   [n_groups][n_out]
 *   g_idx   int32 [n_in]  group of each input column (with act-order, groups
 *                         are not contiguous: columns are sorted by group and
 *                         the permutation is returned)
 *   The "gptq" (v1) checkpoint format stores zero - 1: AutoGPTQ's kernels
 *   compute zero = (stored & (2^bits - 1)) + 1; "gptq_v2" stores the zero.
 *
 * AWQ, GEMM version (AutoAWQ WQLinear_GEMM):
 *   qweight int32 [n_in][n_out / 8]   packed along the output: word c holds
 *                                     outputs 8c..8c+7, nibble p holding
 *                                     output 8c + {0,2,4,6,1,3,5,7}[p]
 *   qzeros  int32 [n_groups][n_out / 8]  same packing; zeros as stored
 *   scales  f16   [n_groups][n_out] */
#ifndef CLLM_FORMAT_HF_QUANT_H
#define CLLM_FORMAT_HF_QUANT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
    int bits;       /* 4 or 8 (AWQ: 4) */
    int group_size; /* input columns per group; -1: the whole row */
    int64_t n_in, n_out;
} gq_layer;

/* Input columns per GQ block (group_size, or n_in for -1). */
int64_t gq_layer_group(const gq_layer *l);
/* The GQ type id for the layer (format/qgroup.h), -1 if unsupported. */
int gq_layer_type(const gq_layer *l);
/* Bytes of one output row of GQ blocks; 0 if the geometry is invalid. */
size_t gq_layer_row_bytes(const gq_layer *l);
/* Number of groups in the checkpoint's tensors. */
int64_t gq_layer_n_groups(const gq_layer *l);

/* Checks the geometry (bits, group size dividing n_in, packing dividing the
 * dimensions); 0 or -1 with err_get(). `what` names the layer in messages. */
int gq_layer_check(const gq_layer *l, bool awq, const char *what);

/* Tensor data are raw little-endian bytes (alignment not required). out holds
 * n_out * gq_layer_row_bytes bytes. g_idx may be NULL (column i in group
 * i / group_size). perm has room for n_in entries; returns 1 when the columns
 * were reordered (perm[k] = original column of stored column k), 0 when not
 * (perm untouched), -1 with err_get() on inconsistent data. */
int gptq_to_gq(const gq_layer *l, bool zeros_plus_one, const void *qweight, const void *qzeros,
               const void *scales, const void *g_idx, void *out, int32_t *perm, const char *what);
int awq_to_gq(const gq_layer *l, const void *qweight, const void *qzeros, const void *scales, void *out,
              const char *what);

#endif
