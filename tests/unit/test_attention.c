/* Paged attention: the AVX2 kernel agrees with the scalar reference, and the
 * reference agrees with a direct softmax over a contiguous copy of the keys,
 * for f32 and f16 pages, scattered block tables, partial blocks and windows,
 * and value heads up to the 4096 dims model/arch.c accepts. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "kernels/attention.h"
#include "kernels/wtype.h"
#include "util/fp16.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static uint64_t g_rng = 88172645463325252ull;
static float frand(void) {
    g_rng ^= g_rng << 13, g_rng ^= g_rng >> 7, g_rng ^= g_rng << 17;
    return (float)((g_rng >> 11) * 0x1.0p-53) * 2.0f - 1.0f;
}

typedef struct {
    paged_kv kv;
    int32_t table[64];
    uint8_t *k, *v;
} pages;

/* n_pos positions of n_kv_heads heads spread over shuffled physical blocks. */
static pages make_pages(bool f16, int bs, int n_kv_heads, int dk, int dv, int n_pos) {
    pages p = {0};
    const int n_logical = (n_pos + bs - 1) / bs, n_phys = n_logical + 3;
    const size_t esz = f16 ? 2 : 4;
    p.k = calloc((size_t)n_phys * n_kv_heads * bs * dk, esz);
    p.v = calloc((size_t)n_phys * n_kv_heads * bs * dv, esz);
    for (int i = 0; i < n_logical; i++) p.table[i] = (i * 7 + 2) % n_phys; /* distinct for n_phys coprime-ish */
    for (size_t i = 0; i < (size_t)n_phys * n_kv_heads * bs * dk; i++) {
        float x = frand() * 2;
        if (f16) ((f16_t *)p.k)[i] = f32_to_f16(x);
        else ((float *)p.k)[i] = x;
    }
    for (size_t i = 0; i < (size_t)n_phys * n_kv_heads * bs * dv; i++) {
        float x = frand();
        if (f16) ((f16_t *)p.v)[i] = f32_to_f16(x);
        else ((float *)p.v)[i] = x;
    }
    p.kv = (paged_kv){.k = p.k, .v = p.v, .f16 = f16, .block_size = bs, .n_kv_heads = n_kv_heads,
                      .head_dim_k = dk, .head_dim_v = dv,
                      .k_block_stride = (size_t)n_kv_heads * bs * dk * esz,
                      .v_block_stride = (size_t)n_kv_heads * bs * dv * esz};
    return p;
}

static float elem(const pages *p, const uint8_t *base, int dim, int head, int j, int d) {
    const int bs = p->kv.block_size;
    size_t i = (((size_t)p->table[j / bs] * p->kv.n_kv_heads + head) * bs + j % bs) * dim + d;
    return p->kv.f16 ? f16_to_f32(((const f16_t *)base)[i]) : ((const float *)base)[i];
}

/* Direct two-pass softmax in double. */
static void naive(const pages *p, int head, const float *q, int lo, int hi, float scale, float *out) {
    const int dk = p->kv.head_dim_k, dv = p->kv.head_dim_v;
    double s[1024], m = -INFINITY, l = 0;
    for (int j = lo; j <= hi; j++) {
        double x = 0;
        for (int d = 0; d < dk; d++) x += (double)q[d] * elem(p, p->k, dk, head, j, d);
        s[j] = x * scale;
        if (s[j] > m) m = s[j];
    }
    for (int j = lo; j <= hi; j++) l += exp(s[j] - m);
    for (int d = 0; d < dv; d++) {
        double acc = 0;
        for (int j = lo; j <= hi; j++) acc += exp(s[j] - m) / l * elem(p, p->v, dv, head, j, d);
        out[d] = (float)acc;
    }
}

static void check_case(bool f16, int bs, int dk, int dv, int n_pos, int window) {
    pages p = make_pages(f16, bs, 2, dk, dv, n_pos);
    float *q = malloc(sizeof(float) * dk), *want = malloc(sizeof(float) * dv);
    float *ref = malloc(sizeof(float) * dv), *fast = malloc(sizeof(float) * dv);
    for (int d = 0; d < dk; d++) q[d] = frand();
    const float scale = 1.0f / sqrtf((float)dk);
    for (int pos = 0; pos < n_pos; pos += 1 + pos / 5) {
        const int lo = window && pos - window + 1 > 0 ? pos - window + 1 : 0;
        for (int head = 0; head < 2; head++) {
            naive(&p, head, q, lo, pos, scale, want);
            attn_paged_ref(&p.kv, p.table, head, q, lo, pos, scale, ref);
            for (int d = 0; d < dv; d++) assert_true(fabsf(ref[d] - want[d]) <= 1e-5f);
            if (wtype_using_avx2()) {
                attn_paged_avx2(&p.kv, p.table, head, q, lo, pos, scale, fast);
                for (int d = 0; d < dv; d++)
                    if (fabsf(fast[d] - ref[d]) > 2e-5f)
                        fail_msg("f16=%d bs=%d pos=%d d=%d: avx2 %g ref %g", f16, bs, pos, d, fast[d], ref[d]);
            }
        }
    }
    free(p.k);
    free(p.v);
    free(q), free(want), free(ref), free(fast);
}

static void test_f32_pages(void **state) {
    (void)state;
    check_case(false, 16, 64, 64, 100, 0);
    check_case(false, 8, 36, 20, 61, 0);  /* dims not multiples of 8 */
    check_case(false, 32, 128, 128, 200, 0);
}

static void test_f16_pages(void **state) {
    (void)state;
    check_case(true, 16, 64, 64, 100, 0);
    check_case(true, 16, 256, 256, 70, 0);
    check_case(true, 8, 40, 24, 33, 0);
}

static void test_sliding_window(void **state) {
    (void)state;
    check_case(false, 16, 32, 32, 120, 16);
    check_case(true, 8, 32, 32, 120, 13);
}

/* Value heads wider than the reference's one pass of 1024 dims (it once kept
 * them in a double[1024] on the stack: a stack overflow from 1025 on). */
static void test_wide_value_heads(void **state) {
    (void)state;
    check_case(false, 16, 64, 4096, 40, 0);
    check_case(true, 16, 128, 4096, 37, 0);
    check_case(false, 8, 32, 1025, 20, 0);
    check_case(true, 8, 40, 2500, 30, 9);
}

int main(void) {
    wtype_init();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_f32_pages),
        cmocka_unit_test(test_f16_pages),
        cmocka_unit_test(test_sliding_window),
        cmocka_unit_test(test_wide_value_heads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
