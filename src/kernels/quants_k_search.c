/* Scale searches for the K-quant quantizers (see quants_k_search.h). Sums are
 * in f32 like ggml's so the chosen scales are comparable; these run once per
 * weight at conversion time, never in inference. */
#include "kernels/quants_k_search.h"

#include "kernels/quants_blocks.h"

#include <math.h>

#define GROUP_MAX_EPS 1e-15f

static inline int clamp_int(int v, int lo, int hi) {
    return v < lo ? lo : v > hi ? hi : v;
}

/* Weighted error of x ~ scale * L + min. */
static float affine_error(int n, const float *x, const float *w, const uint8_t *L, float scale,
                          float min, bool use_mad) {
    float err = 0;
    for (int i = 0; i < n; i++) {
        float diff = scale * L[i] + min - x[i];
        err += w[i] * (use_mad ? fabsf(diff) : diff * diff);
    }
    return err;
}

float qk_search_scale_min(int n, int nmax, const float *x, const float *w, uint8_t *L,
                          float *min_out, float rmin, float rdelta, int nstep, bool use_mad) {
    float min = x[0], max = x[0], sum_w = 0, sum_x = 0;
    for (int i = 0; i < n; i++) {
        if (x[i] < min) min = x[i];
        if (x[i] > max) max = x[i];
        sum_w += w[i];
        sum_x += w[i] * x[i];
    }
    if (min > 0) min = 0;
    if (max == min) {
        for (int i = 0; i < n; i++)
            L[i] = 0;
        *min_out = -min;
        return 0.f;
    }
    /* Start from the plain range split; `min` here is the (negative) offset. */
    float iscale = nmax / (max - min);
    float scale = 1 / iscale;
    for (int i = 0; i < n; i++)
        L[i] = (uint8_t)clamp_int(quant_nearest_int(iscale * (x[i] - min)), 0, nmax);
    float best = affine_error(n, x, w, L, scale, min, use_mad);

    uint8_t trial[QK_K];
    for (int k = 0; k <= nstep; k++) {
        iscale = (rmin + rdelta * k + nmax) / (max - min);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; i++) {
            int l = clamp_int(quant_nearest_int(iscale * (x[i] - min)), 0, nmax);
            trial[i] = (uint8_t)l;
            sum_l += w[i] * l;
            sum_l2 += w[i] * l * l;
            sum_xl += w[i] * l * x[i];
        }
        /* Least squares for x ~ a * l + b over the weights. */
        float det = sum_w * sum_l2 - sum_l * sum_l;
        if (det <= 0) continue;
        float a = (sum_w * sum_xl - sum_x * sum_l) / det;
        float b = (sum_l2 * sum_x - sum_l * sum_xl) / det;
        if (b > 0) { /* the offset may only lower values: refit the scale alone */
            b = 0;
            a = sum_xl / sum_l2;
        }
        float err = affine_error(n, x, w, trial, a, b, use_mad);
        if (err < best) {
            memcpy(L, trial, (size_t)n);
            best = err;
            scale = a;
            min = b;
        }
    }
    *min_out = -min;
    return scale;
}

/* max|x| with its sign; 0 when every |x| is below GROUP_MAX_EPS. */
static float signed_max(int n, const float *x) {
    const float max = quant_signed_absmax(x, n);
    return fabsf(max) < GROUP_MAX_EPS ? 0 : max;
}

float qk_search_scale_sym(int n, int nmax, const float *x, int8_t *L) {
    const float max = signed_max(n, x);
    if (max == 0) {
        for (int i = 0; i < n; i++)
            L[i] = 0;
        return 0.f;
    }
    float scale = 0, best = 0;
    /* k = 0 is the plain nmax / max; then +-0.1 .. +-0.9 levels around it. The
     * scale that best fits levels l is sum(w x l) / sum(w l^2), whose error
     * drop is sum(w x l)^2 / sum(w l^2): keep the trial maximizing that. */
    for (int k = 0; k <= 18; k++) {
        int off = k == 0 ? 0 : k <= 9 ? k - 10 : k - 9;
        float iscale = -(nmax + 0.1f * off) / max;
        float sum_lx = 0, sum_l2 = 0;
        for (int i = 0; i < n; i++) {
            int l = clamp_int(quant_nearest_int(iscale * x[i]), -nmax, nmax - 1);
            float w = x[i] * x[i];
            sum_lx += w * x[i] * l;
            sum_l2 += w * l * l;
        }
        if (k == 0 || (sum_l2 > 0 && sum_lx * sum_lx > best * sum_l2)) {
            for (int i = 0; i < n; i++)
                L[i] =
                    (int8_t)(nmax + clamp_int(quant_nearest_int(iscale * x[i]), -nmax, nmax - 1));
            scale = sum_l2 ? sum_lx / sum_l2 : 0.0f;
            best = scale * sum_lx;
        }
    }
    return scale;
}

float qk_search_scale_q3(int n, int nmax, const float *x, int8_t *L) {
    const float max = signed_max(n, x);
    if (max == 0) {
        for (int i = 0; i < n; i++)
            L[i] = 0;
        return 0.f;
    }
    const float iscale = -nmax / max;
    float sum_lx = 0, sum_l2 = 0;
    for (int i = 0; i < n; i++) {
        int l = clamp_int(quant_nearest_int(iscale * x[i]), -nmax, nmax - 1);
        L[i] = (int8_t)l;
        float w = x[i] * x[i];
        sum_lx += w * x[i] * l;
        sum_l2 += w * l * l;
    }
    /* Coordinate descent: re-round one value at a time against the best scale
     * of the others, keeping the change when sum_lx^2 / sum_l2 grows. */
    for (int pass = 0; pass < 5; pass++) {
        int changed = 0;
        for (int i = 0; i < n; i++) {
            float w = x[i] * x[i];
            float slx = sum_lx - w * x[i] * L[i];
            if (slx <= 0) continue;
            float sl2 = sum_l2 - w * L[i] * L[i];
            int l = clamp_int(quant_nearest_int(x[i] * sl2 / slx), -nmax, nmax - 1);
            if (l == L[i]) continue;
            slx += w * x[i] * l;
            sl2 += w * l * l;
            if (sl2 > 0 && slx * slx * sum_l2 > sum_lx * sum_lx * sl2) {
                L[i] = (int8_t)l;
                sum_lx = slx;
                sum_l2 = sl2;
                changed++;
            }
        }
        if (!changed) break;
    }
    for (int i = 0; i < n; i++)
        L[i] = (int8_t)(L[i] + nmax);
    return sum_l2 > 0 ? sum_lx / sum_l2 : 0.0f;
}
