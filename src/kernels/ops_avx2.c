/* AVX2 versions of the hot row operations. exp is evaluated as 2^k * p(r)
 * with a degree-6 polynomial on r in [-ln2/2, ln2/2] (relative error ~2e-7),
 * which also gives the sigmoid (and tanh through it). Inputs are
 * clamped so exp never overflows to inf or underflows to a denormal. */
#include "kernels/ops.h"

#include <immintrin.h>
#include <math.h>

static inline __m256 exp256(__m256 x) {
    const __m256 lo = _mm256_set1_ps(-87.0f), hi = _mm256_set1_ps(88.0f);
    x = _mm256_max_ps(_mm256_min_ps(x, hi), lo);
    const __m256 log2e = _mm256_set1_ps(1.44269504088896341f);
    const __m256 ln2_hi = _mm256_set1_ps(0.693359375f), ln2_lo = _mm256_set1_ps(-2.12194440e-4f);
    __m256 k = _mm256_round_ps(_mm256_mul_ps(x, log2e), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(k, ln2_hi, x);
    r = _mm256_fnmadd_ps(k, ln2_lo, r);
    /* exp(r) ~ 1 + r + r^2/2 + ... + r^6/720 (Horner) */
    __m256 p = _mm256_set1_ps(1.0f / 720);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(k), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

void silu_mul_avx2(float *g, const float *u, int n) {
    const __m256 one = _mm256_set1_ps(1.0f);
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 x = _mm256_loadu_ps(g + i);
        const __m256 e = exp256(_mm256_sub_ps(_mm256_setzero_ps(), x));
        const __m256 s = _mm256_div_ps(x, _mm256_add_ps(one, e));
        _mm256_storeu_ps(g + i, _mm256_mul_ps(s, _mm256_loadu_ps(u + i)));
    }
    for (; i < n; i++) g[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

double exp_weights_avx2(float *p, const float *x, int n, float max, float t) {
    const __m256 vmax = _mm256_set1_ps(max), vt = _mm256_set1_ps(t);
    const __m256 ninf = _mm256_set1_ps(-INFINITY), lo = _mm256_set1_ps(EXP_WEIGHT_MIN_ARG);
    __m256d acc0 = _mm256_setzero_pd(), acc1 = _mm256_setzero_pd();
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 v = _mm256_loadu_ps(x + i);
        const __m256 a = _mm256_div_ps(_mm256_sub_ps(v, vmax), vt);
        /* Ordered compares: a NaN logit (or a NaN exponent) keeps nothing. */
        const __m256 keep = _mm256_and_ps(_mm256_cmp_ps(v, ninf, _CMP_GT_OQ), _mm256_cmp_ps(a, lo, _CMP_GE_OQ));
        const __m256 w = _mm256_and_ps(exp256(a), keep);
        if (p) _mm256_storeu_ps(p + i, w);
        acc0 = _mm256_add_pd(acc0, _mm256_cvtps_pd(_mm256_castps256_ps128(w)));
        acc1 = _mm256_add_pd(acc1, _mm256_cvtps_pd(_mm256_extractf128_ps(w, 1)));
    }
    double lanes[4];
    _mm256_storeu_pd(lanes, _mm256_add_pd(acc0, acc1));
    const double tail = exp_weights_ref(p ? p + i : NULL, x + i, n - i, max, t);
    return lanes[0] + lanes[1] + lanes[2] + lanes[3] + tail;
}

int row_argmax_avx2(const float *x, int n) {
    /* The maximum first: max_ps(v, m) is v > m ? v : m, so a NaN in v leaves
     * m as it was (four accumulators: the loop is bound by the max's latency
     * otherwise); then the first element equal to it. */
    __m256 m0 = _mm256_set1_ps(-INFINITY), m1 = m0, m2 = m0, m3 = m0;
    int i = 0;
    for (; i + 32 <= n; i += 32) {
        m0 = _mm256_max_ps(_mm256_loadu_ps(x + i), m0);
        m1 = _mm256_max_ps(_mm256_loadu_ps(x + i + 8), m1);
        m2 = _mm256_max_ps(_mm256_loadu_ps(x + i + 16), m2);
        m3 = _mm256_max_ps(_mm256_loadu_ps(x + i + 24), m3);
    }
    for (; i + 8 <= n; i += 8) m0 = _mm256_max_ps(_mm256_loadu_ps(x + i), m0);
    float lanes[8];
    _mm256_storeu_ps(lanes, _mm256_max_ps(_mm256_max_ps(m0, m1), _mm256_max_ps(m2, m3)));
    float m = -INFINITY;
    for (int l = 0; l < 8; l++)
        if (lanes[l] > m) m = lanes[l];
    for (int j = i; j < n; j++)
        if (x[j] > m) m = x[j];
    const __m256 vm = _mm256_set1_ps(m);
    int j = 0;
    for (; j + 8 <= n; j += 8) {
        const int hit = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(x + j), vm, _CMP_EQ_OQ));
        if (hit) return j + __builtin_ctz((unsigned)hit);
    }
    for (; j < n; j++)
        if (x[j] == m) return j;
    return 0; /* every element NaN */
}

void gelu_tanh_mul_avx2(float *g, const float *u, int n) {
    const __m256 k = _mm256_set1_ps(0.7978845608028654f), c = _mm256_set1_ps(0.044715f);
    const __m256 one = _mm256_set1_ps(1.0f);
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 x = _mm256_loadu_ps(g + i);
        const __m256 inner = _mm256_mul_ps(k, _mm256_fmadd_ps(_mm256_mul_ps(c, x), _mm256_mul_ps(x, x), x));
        /* 0.5 x (1 + tanh(y)) = x / (1 + exp(-2y)): no cancellation in the negative tail. */
        const __m256 e = exp256(_mm256_mul_ps(_mm256_set1_ps(-2.0f), inner));
        const __m256 y = _mm256_div_ps(x, _mm256_add_ps(one, e));
        _mm256_storeu_ps(g + i, _mm256_mul_ps(y, _mm256_loadu_ps(u + i)));
    }
    for (; i < n; i++) {
        const float x = g[i];
        g[i] = 0.5f * x * (1.0f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x))) * u[i];
    }
}

void swiglu_oai_mul_avx2(float *g, const float *u, int n, float alpha, float limit) {
    const __m256 one = _mm256_set1_ps(1.0f), lim = _mm256_set1_ps(limit), nlim = _mm256_set1_ps(-limit);
    const __m256 na = _mm256_set1_ps(-alpha);
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 x = _mm256_min_ps(_mm256_loadu_ps(g + i), lim);
        const __m256 y = _mm256_max_ps(_mm256_min_ps(_mm256_loadu_ps(u + i), lim), nlim);
        const __m256 s = _mm256_div_ps(x, _mm256_add_ps(one, exp256(_mm256_mul_ps(na, x))));
        _mm256_storeu_ps(g + i, _mm256_mul_ps(s, _mm256_add_ps(y, one)));
    }
    swiglu_oai_mul_ref(g + i, u + i, n - i, alpha, limit);
}

void rmsnorm_avx2(float *out, const float *x, const float *w, int n, float eps) {
    /* Sum of squares in double lanes, as the reference does. */
    __m256d acc0 = _mm256_setzero_pd(), acc1 = _mm256_setzero_pd();
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 v = _mm256_loadu_ps(x + i);
        const __m256d a = _mm256_cvtps_pd(_mm256_castps256_ps128(v)), b = _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1));
        acc0 = _mm256_fmadd_pd(a, a, acc0);
        acc1 = _mm256_fmadd_pd(b, b, acc1);
    }
    double lanes[4];
    _mm256_storeu_pd(lanes, _mm256_add_pd(acc0, acc1));
    double ss = lanes[0] + lanes[1] + lanes[2] + lanes[3];
    for (; i < n; i++) ss += (double)x[i] * x[i];
    const float r = (float)(1.0 / sqrt(ss / n + eps));
    const __m256 rv = _mm256_set1_ps(r);
    i = 0;
    if (w)
        for (; i + 8 <= n; i += 8)
            _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), rv), _mm256_loadu_ps(w + i)));
    else
        for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), rv));
    for (; i < n; i++) out[i] = x[i] * r * (w ? w[i] : 1.0f);
}

/* Sums of a row in double lanes, as the references accumulate. */
static double sum_pd(const float *x, int n, int *done) {
    __m256d acc0 = _mm256_setzero_pd(), acc1 = _mm256_setzero_pd();
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 v = _mm256_loadu_ps(x + i);
        acc0 = _mm256_add_pd(acc0, _mm256_cvtps_pd(_mm256_castps256_ps128(v)));
        acc1 = _mm256_add_pd(acc1, _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
    }
    double lanes[4];
    _mm256_storeu_pd(lanes, _mm256_add_pd(acc0, acc1));
    *done = i;
    return lanes[0] + lanes[1] + lanes[2] + lanes[3];
}

void layernorm_avx2(float *out, const float *x, const float *w, const float *b, int n, float eps) {
    int i;
    double sum = sum_pd(x, n, &i);
    for (; i < n; i++) sum += x[i];
    const double mean = sum / n;
    const __m256d mv = _mm256_set1_pd(mean);
    __m256d acc0 = _mm256_setzero_pd(), acc1 = _mm256_setzero_pd();
    for (i = 0; i + 8 <= n; i += 8) {
        const __m256 v = _mm256_loadu_ps(x + i);
        const __m256d a = _mm256_sub_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(v)), mv);
        const __m256d c = _mm256_sub_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)), mv);
        acc0 = _mm256_fmadd_pd(a, a, acc0);
        acc1 = _mm256_fmadd_pd(c, c, acc1);
    }
    double lanes[4];
    _mm256_storeu_pd(lanes, _mm256_add_pd(acc0, acc1));
    double ss = lanes[0] + lanes[1] + lanes[2] + lanes[3];
    for (; i < n; i++) ss += (x[i] - mean) * (x[i] - mean);
    const float m = (float)mean, r = (float)(1.0 / sqrt(ss / n + eps));
    const __m256 mm = _mm256_set1_ps(m), rv = _mm256_set1_ps(r);
    for (i = 0; i + 8 <= n; i += 8) {
        const __m256 y = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), mm), rv);
        _mm256_storeu_ps(out + i, _mm256_fmadd_ps(y, _mm256_loadu_ps(w + i), _mm256_loadu_ps(b + i)));
    }
    for (; i < n; i++) out[i] = (x[i] - m) * r * w[i] + b[i];
}

/* erf by Abramowitz and Stegun 7.1.26 (absolute error below 1.5e-7):
 * erf(a) = 1 - t (a1 + t (a2 + ... + t a5)) exp(-a^2), t = 1 / (1 + p a),
 * for a = |x|, the sign put back after. */
void gelu_erf_avx2(float *x, int n) {
    const __m256 sign = _mm256_set1_ps(-0.0f), one = _mm256_set1_ps(1.0f), half = _mm256_set1_ps(0.5f);
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 v = _mm256_loadu_ps(x + i);
        const __m256 z = _mm256_mul_ps(v, _mm256_set1_ps(0.70710678118654752f));
        const __m256 a = _mm256_andnot_ps(sign, z);
        const __m256 t = _mm256_div_ps(one, _mm256_fmadd_ps(_mm256_set1_ps(0.3275911f), a, one));
        __m256 p = _mm256_set1_ps(1.061405429f);
        p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(-1.453152027f));
        p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(1.421413741f));
        p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(-0.284496736f));
        p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(0.254829592f));
        p = _mm256_mul_ps(p, t);
        const __m256 e = exp256(_mm256_sub_ps(_mm256_setzero_ps(), _mm256_mul_ps(a, a)));
        const __m256 erf_a = _mm256_fnmadd_ps(p, e, one);
        const __m256 erf_z = _mm256_or_ps(erf_a, _mm256_and_ps(sign, z));
        _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_mul_ps(half, v), _mm256_add_ps(one, erf_z)));
    }
    for (; i < n; i++) x[i] = 0.5f * x[i] * (1.0f + erff(x[i] * 0.70710678118654752f));
}
