/* The row operations and attention of each instruction set, in one table
 * per set like the weight types' (wtype_tables.h): kernel_ops_ref
 * (kernels_ref.c) holds the scalar references, kernel_ops_avx2
 * (kernels_avx2.c) the AVX2 versions. wtype_init chooses one with the weight
 * types' table, by the same cpuid checks and CLLM_NO_AVX2 (the VNNI tables
 * run the AVX2 ops: none of these has a VNNI build), and the plain names of
 * ops.h and attn_tile_best() call through it (ops.c). Only wtype.c, ops.c,
 * the table files and the kernel tests include this header. */
#ifndef CLLM_KERNELS_OPS_TABLES_H
#define CLLM_KERNELS_OPS_TABLES_H

#include "kernels/attention.h"
#include "kernels/ops.h"

typedef struct {
    void (*rmsnorm)(float *out, const float *x, const float *w, int n, float eps);
    void (*layernorm)(float *out, const float *x, const float *w, const float *b, int n, float eps);
    void (*gelu_erf)(float *x, int n);
    void (*silu_mul)(float *g, const float *u, int n);
    void (*gelu_tanh_mul)(float *g, const float *u, int n);
    void (*swiglu_oai_mul)(float *g, const float *u, int n, float alpha, float limit);
    double (*exp_weights)(float *p, const float *x, int n, float max, float t);
    int (*row_argmax)(const float *x, int n);
    attn_tile_fn attn_tile;
} kernel_ops;

extern const kernel_ops kernel_ops_ref;
extern const kernel_ops kernel_ops_avx2;

/* The table wtype_init chose (initializing the registry if need be). */
const kernel_ops *kernel_ops_active(void);

#endif
