/* OFP8 E4M3 / E5M2 (util/fp8.h) against tables computed here from the bit
 * formula, on all 256 codes: decoding, NaN and infinity, encoding every
 * finite code back to itself, ties to even at every midpoint, and saturation.
 * Then the 8-bit KV rows (kernels/kv_row.h): a row's bytes depend on that row
 * alone, and decoding is within half a code step of the input. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "kernels/kv_row.h"
#include "util/fp16.h"
#include "util/fp8.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* E4M3 by the definition: S.EEEE.MMM, bias 7, S.1111.111 NaN, no infinity. */
static double e4m3_table(int c) {
    const int s = c >> 7, e = (c >> 3) & 15, m = c & 7;
    if (e == 15 && m == 7) return NAN;
    const double mag = e == 0 ? m / 8.0 * pow(2, -6) : (1 + m / 8.0) * pow(2, e - 7);
    return s ? -mag : mag;
}

/* E5M2 by the definition: S.EEEEE.MM, bias 15, IEEE infinity and NaN. */
static double e5m2_table(int c) {
    const int s = c >> 7, e = (c >> 2) & 31, m = c & 3;
    double mag;
    if (e == 31) mag = m ? NAN : INFINITY;
    else mag = e == 0 ? m / 4.0 * pow(2, -14) : (1 + m / 4.0) * pow(2, e - 15);
    return s ? -mag : mag;
}

typedef struct {
    const char *name;
    double (*table)(int);
    float (*decode)(uint8_t);
    uint8_t (*encode)(float);
    uint8_t max_code; /* largest finite, positive */
} fp8_case;

static const fp8_case k_cases[] = {
    {"e4m3", e4m3_table, fp8_e4m3_to_f32, f32_to_fp8_e4m3, 0x7E},
    {"e5m2", e5m2_table, fp8_e5m2_to_f32, f32_to_fp8_e5m2, 0x7B},
};

static void test_decode_all_codes(void **state) {
    (void)state;
    for (int k = 0; k < 2; k++) {
        const fp8_case *f = &k_cases[k];
        for (int c = 0; c < 256; c++) {
            const double want = f->table(c);
            const float got = f->decode((uint8_t)c);
            if (isnan(want)) {
                if (!isnan(got)) fail_msg("%s code 0x%02x: %g, want NaN", f->name, c, got);
            } else if ((double)got != want || !signbit(got) != !signbit(want)) {
                fail_msg("%s code 0x%02x: %g, want %g", f->name, c, got, want);
            }
        }
    }
    /* E5M2 is the top byte of an f16. */
    for (int c = 0; c < 256; c++) {
        const float h = f16_to_f32((f16_t)(c << 8)), g = fp8_e5m2_to_f32((uint8_t)c);
        assert_true(isnan(h) ? isnan(g) : h == g);
    }
    assert_true(fp8_e4m3_to_f32(0x7E) == 448.0f && fp8_e5m2_to_f32(0x7B) == 57344.0f);
}

static void test_encode_all_codes(void **state) {
    (void)state;
    for (int k = 0; k < 2; k++) {
        const fp8_case *f = &k_cases[k];
        for (int c = 0; c < 256; c++) {
            const double v = f->table(c);
            if (isnan(v) || isinf(v)) continue;
            const uint8_t got = f->encode((float)v);
            if (got != c) fail_msg("%s: %g encodes to 0x%02x, want 0x%02x", f->name, v, got, c);
        }
        /* Between consecutive positive codes c and c+1: the midpoint goes to
         * the even code, anything off the midpoint to the nearer one. */
        for (int c = 0; c < f->max_code; c++) {
            const float lo = (float)f->table(c), hi = (float)f->table(c + 1);
            const float mid = (float)(((double)lo + hi) / 2); /* exact: one more bit than the format */
            const int even = c % 2 == 0 ? c : c + 1;
            if (f->encode(mid) != even)
                fail_msg("%s: tie %g -> 0x%02x, want 0x%02x", f->name, mid, f->encode(mid), even);
            if (f->encode(nextafterf(mid, 0)) != c) fail_msg("%s: below tie %g", f->name, mid);
            if (f->encode(nextafterf(mid, INFINITY)) != c + 1) fail_msg("%s: above tie %g", f->name, mid);
            if (f->encode(-mid) != (0x80 | even)) fail_msg("%s: tie %g negative", f->name, -mid);
        }
        /* Saturation: past the largest finite, infinity included, the largest
         * finite of the same sign; NaN stays NaN. */
        const float max = (float)f->table(f->max_code);
        const float over[] = {max * 1.0625f, max * 1.2f, 1e30f, INFINITY};
        for (int i = 0; i < 4; i++) {
            assert_int_equal(f->encode(over[i]), f->max_code);
            assert_int_equal(f->encode(-over[i]), 0x80 | f->max_code);
        }
        assert_true(isnan(f->decode(f->encode(NAN))));
        assert_int_equal(f->encode(0.0f), 0x00);
        assert_int_equal(f->encode(-0.0f), 0x80);
        const float tiny = (float)f->table(1); /* smallest subnormal */
        assert_int_equal(f->encode(tiny / 2), 0x00);  /* a tie, to even: zero */
        assert_int_equal(f->encode(tiny * 0.51f), 0x01);
        assert_int_equal(f->encode(1e-30f), 0x00);
    }
}

static uint64_t g_rng = 0x9E3779B97F4A7C15ull;
static float frand(void) {
    g_rng ^= g_rng << 13, g_rng ^= g_rng >> 7, g_rng ^= g_rng << 17;
    return (float)((g_rng >> 11) * 0x1.0p-53) * 2.0f - 1.0f;
}

/* A row's bytes are a function of the row alone (what makes tokens the same
 * whatever shares their block or batch), and its values come back within half
 * a step of the row's code grid. */
static void test_rows_8bit(void **state) {
    (void)state;
    const kv_dtype types[] = {KV_INT8, KV_FP8_E4M3, KV_FP8_E5M2};
    for (int ti = 0; ti < 3; ti++) {
        const kv_dtype t = types[ti];
        for (int dim = 1; dim <= 256; dim = dim * 2 + 3) {
            float x[600];
            uint8_t a[600], b[600];
            for (int i = 0; i < dim; i++) x[i] = frand() * 3.0f;
            assert_int_equal(kv_row_bytes(t, dim), dim + KV_ROW_SCALE_BYTES);
            memset(a, 0xAB, sizeof a), memset(b, 0x11, sizeof b);
            kv_row_store(t, x, a, dim);
            kv_row_store(t, x, b, dim);
            assert_memory_equal(a, b, kv_row_bytes(t, dim));
            float amax = 0;
            for (int i = 0; i < dim; i++) amax = fmaxf(amax, fabsf(x[i]));
            for (int i = 0; i < dim; i++) {
                const float y = kv_row_value(t, a, i), err = fabsf(y - x[i]);
                /* int8: half a step of amax/127; fp8: half an ulp of the value
                 * (relative 2^-4 for e4m3, 2^-3 for e5m2), or of the subnormal step. */
                const float bound = t == KV_INT8 ? amax / 127 * 0.5001f
                                    : t == KV_FP8_E4M3 ? fmaxf(fabsf(x[i]) * 0.0626f, amax / 448 * 0x1p-9f)
                                                       : fmaxf(fabsf(x[i]) * 0.1251f, amax / 57344 * 0x1p-16f);
                if (err > bound) fail_msg("%d dim %d [%d]: %g -> %g", t, dim, i, x[i], y);
            }
        }
        /* A row holding a NaN decodes to NaN throughout (its scale is NaN),
         * so no kernel needs to recognize NaN codes. */
        float n[8] = {1, 2, NAN, 4, 5, 6, 7, 8};
        uint8_t rn[16];
        kv_row_store(t, n, rn, 8);
        for (int i = 0; i < 8; i++) assert_true(isnan(kv_row_value(t, rn, i)));
        /* An all-zero row decodes to zeros. */
        float z[8] = {0};
        uint8_t r[16];
        kv_row_store(t, z, r, 8);
        for (int i = 0; i < 8; i++) assert_true(kv_row_value(t, r, i) == 0.0f);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_decode_all_codes),
        cmocka_unit_test(test_encode_all_codes),
        cmocka_unit_test(test_rows_8bit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
