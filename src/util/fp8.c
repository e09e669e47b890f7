/* OFP8 E4M3 and E5M2 conversions; see fp8.h. One routine per direction,
 * parameterized by the format's mantissa width and bias. */
#include "util/fp8.h"

#include <math.h>

typedef struct {
    int mbits;     /* mantissa bits */
    int bias;      /* exponent bias */
    float max;     /* largest finite magnitude */
    uint8_t nan;   /* the NaN code written (sign added) */
} fp8_format;

static const fp8_format k_e4m3 = {.mbits = 3, .bias = 7, .max = FP8_E4M3_MAX, .nan = 0x7F};
static const fp8_format k_e5m2 = {.mbits = 2, .bias = 15, .max = FP8_E5M2_MAX, .nan = 0x7F};

/* The finite value of a code's magnitude bits (no NaN/inf check). */
static float magnitude(const fp8_format *f, unsigned mag) {
    const unsigned e = mag >> f->mbits, m = mag & ((1u << f->mbits) - 1);
    if (e == 0) return ldexpf((float)m, 1 - f->bias - f->mbits);
    return ldexpf((float)((1u << f->mbits) + m), (int)e - f->bias - f->mbits);
}

static uint8_t encode(const fp8_format *f, float x) {
    const uint8_t sign = signbit(x) ? 0x80 : 0;
    if (isnan(x)) return sign | f->nan;
    float a = fabsf(x);
    if (a > f->max) a = f->max;
    /* The spacing of codes around a is 2^(exponent - mbits), and below the
     * smallest normal the subnormal spacing, that of the first binade. Codes
     * count spacings consecutively across binades, so a's code is the count
     * of spacings below its binade plus a / spacing rounded (exact: a
     * division by a power of two), less the binade's own 2^mbits. */
    int e2;
    frexpf(a, &e2); /* a = f * 2^e2 with 0.5 <= f < 1: a's binade starts at 2^(e2-1) */
    int exp_field = e2 - 1 + f->bias;
    if (a == 0 || exp_field < 1) exp_field = 1;
    const float q = nearbyintf(a / ldexpf(1.0f, exp_field - f->bias - f->mbits)); /* ties to even */
    const int code = ((exp_field - 1) << f->mbits) + (int)q;
    return sign | (uint8_t)code;
}

float fp8_e4m3_to_f32(uint8_t code) {
    const float sign = code & 0x80 ? -1.0f : 1.0f;
    if ((code & 0x7F) == 0x7F) return NAN;
    return sign * magnitude(&k_e4m3, code & 0x7F);
}

float fp8_e5m2_to_f32(uint8_t code) {
    const float sign = code & 0x80 ? -1.0f : 1.0f;
    if ((code & 0x7C) == 0x7C) return (code & 3) ? NAN : sign * INFINITY;
    return sign * magnitude(&k_e5m2, code & 0x7F);
}

uint8_t f32_to_fp8_e4m3(float x) { return encode(&k_e4m3, x); }
uint8_t f32_to_fp8_e5m2(float x) { return encode(&k_e5m2, x); }
