/* YaRN rope scaling (Peng et al. 2023, "YaRN: Efficient Context Window
 * Extension of Large Language Models"), as frequency factors. Pair i of the
 * rotated dims turns at base^(-2i/d) radians per position. The pairs that
 * turn more than beta_fast times over the original context keep their
 * frequency (extrapolation); those that turn fewer than beta_slow times are
 * interpolated (divided by the factor); between the two a linear ramp mixes
 * them. Expressed as a divisor of the angle, pair i's factor is
 * 1 / (ramp_i / factor + 1 - ramp_i), which forward.c applies as it applies
 * Llama 3's rope_freqs.weight. */
#include "model/arch.h"

#include <math.h>

/* The pair index at which a frequency turns `rotations` times over ctx
 * positions (transformers' find_correction_dim, llama.cpp's
 * ggml_rope_yarn_corr_dim). */
static double correction_dim(double rotations, int dim, double base, int ctx) {
    return dim * log(ctx / (rotations * 2 * M_PI)) / (2 * log(base));
}

void rope_yarn_factors(const model_hparams *hp, float *out) {
    const int dim = hp->rope_dim, half = dim / 2;
    double low = correction_dim(hp->rope_yarn_beta_fast, dim, hp->rope_base, hp->rope_yarn_orig_ctx);
    double high = correction_dim(hp->rope_yarn_beta_slow, dim, hp->rope_base, hp->rope_yarn_orig_ctx);
    if (hp->rope_yarn_truncate) low = floor(low), high = ceil(high);
    if (low < 0) low = 0;
    if (high > dim - 1) high = dim - 1;
    if (high == low) high += 0.001; /* transformers' guard against a zero-width ramp */
    for (int i = 0; i < half; i++) {
        double ramp = (i - low) / (high - low); /* 0: extrapolate, 1: interpolate */
        ramp = ramp < 0 ? 0 : ramp > 1 ? 1 : ramp;
        out[i] = (float)(1.0 / (ramp / hp->rope_yarn_factor + 1.0 - ramp));
    }
}

float rope_yarn_mscale(float s) { return s <= 1.0f ? 1.0f : 1.0f + 0.1f * logf(s); }
