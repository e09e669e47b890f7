/* Unit-test helper: paged K/V caches for the attention kernels
 * (test_attention.c, test_attn_mass.c): n_pos positions of random rows over
 * shuffled physical blocks, in any KV dtype, and the same pages dequantized
 * to f32. */
#ifndef CLLM_TESTS_UNIT_ATTN_PAGES_H
#define CLLM_TESTS_UNIT_ATTN_PAGES_H

#include "kernels/attention.h"

#include <stdint.h>
#include <stdlib.h>

static uint64_t g_rng = 88172645463325252ull;
static inline float frand(void) {
    g_rng ^= g_rng << 13, g_rng ^= g_rng >> 7, g_rng ^= g_rng << 17;
    return (float)((g_rng >> 11) * 0x1.0p-53) * 2.0f - 1.0f;
}

typedef struct {
    paged_kv kv;
    int32_t table[64];
    uint8_t *k, *v;
} pages;

/* n_pos positions of n_kv_heads heads spread over shuffled physical blocks,
 * each row written by kv_row_store as forward.c writes the cache. */
static inline pages make_pages(kv_dtype dt, int bs, int n_kv_heads, int dk, int dv, int n_pos) {
    pages p = {0};
    const int n_logical = (n_pos + bs - 1) / bs, n_phys = n_logical + 3;
    const size_t k_row = kv_row_bytes(dt, dk), v_row = kv_row_bytes(dt, dv);
    const size_t n_rows = (size_t)n_phys * n_kv_heads * bs;
    p.k = calloc(n_rows, k_row);
    p.v = calloc(n_rows, v_row);
    /* Scattered and distinct: a stride coprime to n_phys (7 is not, for n_phys 7 or 14). */
    int stride = 7;
    while (n_phys % stride == 0) stride -= 2;
    for (int i = 0; i < n_logical; i++) p.table[i] = (i * stride + 2) % n_phys;
    float *x = malloc(sizeof(float) * (size_t)(dk > dv ? dk : dv));
    for (size_t r = 0; r < n_rows; r++) {
        /* Rows of different magnitudes, so the 8-bit scales differ. */
        const float mag = 0.5f + 0.5f * (float)(r % 5);
        for (int d = 0; d < dk; d++) x[d] = frand() * mag;
        kv_row_store(dt, x, p.k + r * k_row, dk);
        for (int d = 0; d < dv; d++) x[d] = frand();
        kv_row_store(dt, x, p.v + r * v_row, dv);
    }
    free(x);
    p.kv = (paged_kv){.k = p.k, .v = p.v, .dtype = dt, .block_size = bs, .n_kv_heads = n_kv_heads,
                      .head_dim_k = dk, .head_dim_v = dv,
                      .k_block_stride = (size_t)n_kv_heads * bs * k_row,
                      .v_block_stride = (size_t)n_kv_heads * bs * v_row};
    return p;
}

/* The same pages in f32, each value the decoded one: what attention over an
 * 8-bit cache must equal, bit for bit, in each kernel. */
static inline pages dequantized(const pages *q, int n_pos) {
    const paged_kv *kv = &q->kv;
    const int n_phys = (n_pos + kv->block_size - 1) / kv->block_size + 3;
    const size_t n_rows = (size_t)n_phys * kv->n_kv_heads * kv->block_size;
    const size_t k_row = kv_row_bytes(kv->dtype, kv->head_dim_k), v_row = kv_row_bytes(kv->dtype, kv->head_dim_v);
    pages p = *q;
    p.k = malloc(n_rows * kv->head_dim_k * sizeof(float));
    p.v = malloc(n_rows * kv->head_dim_v * sizeof(float));
    for (size_t r = 0; r < n_rows; r++) {
        for (int d = 0; d < kv->head_dim_k; d++)
            ((float *)p.k)[r * kv->head_dim_k + d] = kv_row_value(kv->dtype, q->k + r * k_row, d);
        for (int d = 0; d < kv->head_dim_v; d++)
            ((float *)p.v)[r * kv->head_dim_v + d] = kv_row_value(kv->dtype, q->v + r * v_row, d);
    }
    p.kv.k = p.k, p.kv.v = p.v, p.kv.dtype = KV_F32;
    p.kv.k_block_stride = (size_t)kv->n_kv_heads * kv->block_size * kv->head_dim_k * sizeof(float);
    p.kv.v_block_stride = (size_t)kv->n_kv_heads * kv->block_size * kv->head_dim_v * sizeof(float);
    return p;
}

static inline void pages_free(pages *p) { free(p->k), free(p->v); }

#endif
