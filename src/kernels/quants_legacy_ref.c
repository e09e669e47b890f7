/* Scalar reference kernels for ggml's 32-element formats: Q4_0, Q4_1, Q5_0,
 * Q5_1, Q8_0 (weights) and Q8_0, Q8_1 (activations).
 *
 * The dequantizers evaluate d * q (+ m) in f32 in ggml's order, so they match
 * ggml and the Python gguf package bit for bit. The quantizers are ggml's
 * reference ones: symmetric types scale by the signed value of largest
 * magnitude (so it lands exactly on the most negative level), min types span
 * [min, max], and Q8_0/Q8_1 round x / d half away from zero. The dot products
 * sum each block's integer products exactly and accumulate in double: the
 * value every fast path is checked against.
 *
 * Q4_x and Q5_x differ only in how the levels are packed, so each type's
 * functions are a pack or unpack around the shared per-block code below. */
#include "kernels/quants_kernels.h"

#include "kernels/quants_blocks.h"

#include <float.h>
#include <math.h>

/* ---- packing ---- */

/* The 32 levels of a 4-bit block as 0..15 (element j < 16 in the low nibble
 * of qs[j], element j + 16 in the high nibble). */
static void unpack_nibbles(const uint8_t *qs, int out[32]) {
    for (int j = 0; j < 16; j++) {
        out[j] = qs[j] & 0xF;
        out[j + 16] = qs[j] >> 4;
    }
}

/* As unpack_nibbles, plus the fifth bits from the little-endian u32 qh. */
static void unpack_5bit(const uint8_t *qs, const uint8_t *qh, int out[32]) {
    uint32_t h = load_u32_le(qh);
    unpack_nibbles(qs, out);
    for (int j = 0; j < 32; j++)
        out[j] |= (int)((h >> j) & 1) << 4;
}

static void pack_nibbles(const int q[32], uint8_t *qs) {
    for (int j = 0; j < 16; j++)
        qs[j] = (uint8_t)((q[j] & 0xF) | ((q[j + 16] & 0xF) << 4));
}

static void pack_5bit(const int q[32], uint8_t *qs, uint8_t *qh) {
    uint32_t h = 0;
    pack_nibbles(q, qs);
    for (int j = 0; j < 32; j++)
        h |= (uint32_t)(q[j] >> 4) << j;
    memcpy(qh, &h, sizeof h);
}

/* ---- per-block arithmetic shared by the 4- and 5-bit types ---- */

/* Symmetric (Q4_0, Q5_0): x = d * (q - off), q in 0..2 off - 1. */
static void sym_to_float(const int q[32], int off, f16_t d16, float *y) {
    const float d = f16_to_f32(d16);
    for (int j = 0; j < 32; j++)
        y[j] = (float)(q[j] - off) * d;
}

/* The largest magnitude maps to level 0 (-off * d); truncating x / d + off +
 * 0.5 rounds, and the clamp catches the one value that reaches 2 off. */
static f16_t sym_quantize(const float *x, int off, int q[32]) {
    const float d = quant_signed_absmax(x, 32) / (float)-off;
    const float id = d ? 1.0f / d : 0.0f;
    for (int j = 0; j < 32; j++) {
        int v = (int)(x[j] * id + ((float)off + 0.5f));
        q[j] = v > 2 * off - 1 ? 2 * off - 1 : v;
    }
    return f32_to_f16(d);
}

static double sym_dot(const int q[32], int off, f16_t d, const block_q8_0 *y) {
    int isum = 0;
    for (int j = 0; j < 32; j++)
        isum += (q[j] - off) * y->qs[j];
    return (double)f16_to_f32(d) * f16_to_f32(y->d) * isum;
}

/* With a min (Q4_1, Q5_1): x = d * q + m, q in 0..nmax. */
static void min_to_float(const int q[32], f16_t d16, f16_t m16, float *y) {
    const float d = f16_to_f32(d16), m = f16_to_f32(m16);
    for (int j = 0; j < 32; j++)
        y[j] = (float)q[j] * d + m;
}

static void min_quantize(const float *x, int nmax, int q[32], f16_t *d_out, f16_t *m_out) {
    float min = FLT_MAX, max = -FLT_MAX;
    for (int j = 0; j < 32; j++) {
        if (x[j] < min) min = x[j];
        if (x[j] > max) max = x[j];
    }
    const float d = (max - min) / (float)nmax;
    const float id = d ? 1.0f / d : 0.0f;
    for (int j = 0; j < 32; j++) {
        int v = (int)((x[j] - min) * id + 0.5f);
        q[j] = v > nmax ? nmax : v;
    }
    *d_out = f32_to_f16(d);
    *m_out = f32_to_f16(min);
}

/* The min term uses the activation's stored s = d_a * sum(q_a), as the format
 * defines it (not the exact sum, which would need the quants again). */
static double min_dot(const int q[32], f16_t d, f16_t m, const block_q8_1 *y) {
    int isum = 0;
    for (int j = 0; j < 32; j++)
        isum += q[j] * y->qs[j];
    return (double)f16_to_f32(d) * f16_to_f32(y->d) * isum +
           (double)f16_to_f32(m) * f16_to_f32(y->s);
}

/* ---- Q4_0, Q5_0 ---- */

void q4_0_to_float_ref(const void *restrict vx, float *restrict y, int64_t n) {
    const block_q4_0 *x = vx;
    for (int64_t i = 0; i < n / QK4_0; i++) {
        int q[32];
        unpack_nibbles(x[i].qs, q);
        sym_to_float(q, 8, x[i].d, y + i * QK4_0);
    }
}

void q4_0_from_float_ref(const float *restrict x, void *restrict vy, int64_t n) {
    block_q4_0 *y = vy;
    for (int64_t i = 0; i < n / QK4_0; i++) {
        int q[32];
        y[i].d = sym_quantize(x + i * QK4_0, 8, q);
        pack_nibbles(q, y[i].qs);
    }
}

void vec_dot_q4_0_q8_0_ref(int n, float *restrict s, const void *restrict vx,
                           const void *restrict vy) {
    const block_q4_0 *x = vx;
    const block_q8_0 *y = vy;
    double acc = 0;
    for (int i = 0; i < n / QK4_0; i++) {
        int q[32];
        unpack_nibbles(x[i].qs, q);
        acc += sym_dot(q, 8, x[i].d, &y[i]);
    }
    *s = (float)acc;
}

void q5_0_to_float_ref(const void *restrict vx, float *restrict y, int64_t n) {
    const block_q5_0 *x = vx;
    for (int64_t i = 0; i < n / QK5_0; i++) {
        int q[32];
        unpack_5bit(x[i].qs, x[i].qh, q);
        sym_to_float(q, 16, x[i].d, y + i * QK5_0);
    }
}

void q5_0_from_float_ref(const float *restrict x, void *restrict vy, int64_t n) {
    block_q5_0 *y = vy;
    for (int64_t i = 0; i < n / QK5_0; i++) {
        int q[32];
        y[i].d = sym_quantize(x + i * QK5_0, 16, q);
        pack_5bit(q, y[i].qs, y[i].qh);
    }
}

void vec_dot_q5_0_q8_0_ref(int n, float *restrict s, const void *restrict vx,
                           const void *restrict vy) {
    const block_q5_0 *x = vx;
    const block_q8_0 *y = vy;
    double acc = 0;
    for (int i = 0; i < n / QK5_0; i++) {
        int q[32];
        unpack_5bit(x[i].qs, x[i].qh, q);
        acc += sym_dot(q, 16, x[i].d, &y[i]);
    }
    *s = (float)acc;
}

/* ---- Q4_1, Q5_1 ---- */

void q4_1_to_float_ref(const void *restrict vx, float *restrict y, int64_t n) {
    const block_q4_1 *x = vx;
    for (int64_t i = 0; i < n / QK4_1; i++) {
        int q[32];
        unpack_nibbles(x[i].qs, q);
        min_to_float(q, x[i].d, x[i].m, y + i * QK4_1);
    }
}

void q4_1_from_float_ref(const float *restrict x, void *restrict vy, int64_t n) {
    block_q4_1 *y = vy;
    for (int64_t i = 0; i < n / QK4_1; i++) {
        int q[32];
        min_quantize(x + i * QK4_1, 15, q, &y[i].d, &y[i].m);
        pack_nibbles(q, y[i].qs);
    }
}

void vec_dot_q4_1_q8_1_ref(int n, float *restrict s, const void *restrict vx,
                           const void *restrict vy) {
    const block_q4_1 *x = vx;
    const block_q8_1 *y = vy;
    double acc = 0;
    for (int i = 0; i < n / QK4_1; i++) {
        int q[32];
        unpack_nibbles(x[i].qs, q);
        acc += min_dot(q, x[i].d, x[i].m, &y[i]);
    }
    *s = (float)acc;
}

void q5_1_to_float_ref(const void *restrict vx, float *restrict y, int64_t n) {
    const block_q5_1 *x = vx;
    for (int64_t i = 0; i < n / QK5_1; i++) {
        int q[32];
        unpack_5bit(x[i].qs, x[i].qh, q);
        min_to_float(q, x[i].d, x[i].m, y + i * QK5_1);
    }
}

void q5_1_from_float_ref(const float *restrict x, void *restrict vy, int64_t n) {
    block_q5_1 *y = vy;
    for (int64_t i = 0; i < n / QK5_1; i++) {
        int q[32];
        min_quantize(x + i * QK5_1, 31, q, &y[i].d, &y[i].m);
        pack_5bit(q, y[i].qs, y[i].qh);
    }
}

void vec_dot_q5_1_q8_1_ref(int n, float *restrict s, const void *restrict vx,
                           const void *restrict vy) {
    const block_q5_1 *x = vx;
    const block_q8_1 *y = vy;
    double acc = 0;
    for (int i = 0; i < n / QK5_1; i++) {
        int q[32];
        unpack_5bit(x[i].qs, x[i].qh, q);
        acc += min_dot(q, x[i].d, x[i].m, &y[i]);
    }
    *s = (float)acc;
}

/* ---- Q8_0 and Q8_1 ---- */

/* d = amax / 127 and q = round(x / d), half away from zero, into q[32];
 * returns d (before its rounding to f16). */
static float quantize_q8_block(const float *x, int8_t *q) {
    float amax = 0;
    for (int j = 0; j < 32; j++)
        amax = fmaxf(amax, fabsf(x[j]));
    const float d = amax / 127;
    const float id = d ? 1.0f / d : 0.0f;
    for (int j = 0; j < 32; j++)
        q[j] = (int8_t)roundf(x[j] * id);
    return d;
}

static void q8_to_float(const int8_t *q, f16_t d16, float *y) {
    const float d = f16_to_f32(d16);
    for (int j = 0; j < 32; j++)
        y[j] = (float)q[j] * d;
}

void q8_0_to_float_ref(const void *restrict vx, float *restrict y, int64_t n) {
    const block_q8_0 *x = vx;
    for (int64_t i = 0; i < n / QK8_0; i++)
        q8_to_float(x[i].qs, x[i].d, y + i * QK8_0);
}

void q8_0_from_float_ref(const float *restrict x, void *restrict vy, int64_t n) {
    block_q8_0 *y = vy;
    for (int64_t i = 0; i < n / QK8_0; i++)
        y[i].d = f32_to_f16(quantize_q8_block(x + i * QK8_0, y[i].qs));
}

void vec_dot_q8_0_q8_0_ref(int n, float *restrict s, const void *restrict vx,
                           const void *restrict vy) {
    const block_q8_0 *x = vx;
    const block_q8_0 *y = vy;
    double acc = 0;
    for (int i = 0; i < n / QK8_0; i++) {
        int isum = 0;
        for (int j = 0; j < 32; j++)
            isum += x[i].qs[j] * y[i].qs[j];
        acc += (double)f16_to_f32(x[i].d) * f16_to_f32(y[i].d) * isum;
    }
    *s = (float)acc;
}

void q8_1_to_float_ref(const void *restrict vx, float *restrict y, int64_t n) {
    const block_q8_1 *x = vx;
    for (int64_t i = 0; i < n / QK8_1; i++)
        q8_to_float(x[i].qs, x[i].d, y + i * QK8_1);
}

void q8_1_from_float_ref(const float *restrict x, void *restrict vy, int64_t n) {
    block_q8_1 *y = vy;
    for (int64_t i = 0; i < n / QK8_1; i++) {
        const float d = quantize_q8_block(x + i * QK8_1, y[i].qs);
        int sum = 0;
        for (int j = 0; j < 32; j++)
            sum += y[i].qs[j];
        y[i].d = f32_to_f16(d);
        y[i].s = f32_to_f16((float)sum * d);
    }
}
