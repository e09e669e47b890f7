/* sampler_bench: what drawing one token costs on a large vocabulary, for
 * each kind of request: greedy, temperature alone, with top-p, top-k or
 * min-p, and with logprobs. Speculative decoding draws one token per verified
 * row, so at temperature > 0 this is paid once per row, not once per step.
 * The logits are synthetic but shaped like a language model's (a normal bulk,
 * a few tokens far above it), drawn fresh from --seed for every call so no
 * cache or branch history repeats; the median of --reps calls is reported.
 * CLLM_NO_AVX2=1 times the scalar reference kernels.
 * usage: sampler_bench [--vocab N] [--reps N] [--seed N] */
#include "engine/logprobs.h"
#include "engine/sampler.h"
#include "util/rng.h"
#include "util/time.h"
#include "util/top_k.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Logits like a trained model's: normal around 0 with deviation 2.5, and a
 * dozen tokens 8-16 above the bulk. */
static void make_logits(float *l, int n, rng_state *r) {
    for (int i = 0; i < n; i += 2) {
        const double u1 = rng_uniform(r) + 1e-12, u2 = rng_uniform(r);
        const double rad = sqrt(-2.0 * log(u1));
        l[i] = (float)(2.5 * rad * cos(6.283185307179586 * u2));
        if (i + 1 < n) l[i + 1] = (float)(2.5 * rad * sin(6.283185307179586 * u2));
    }
    for (int k = 0; k < 12; k++) l[(int)(rng_uniform(r) * n)] += (float)(8 + 8 * rng_uniform(r));
}

typedef struct {
    const char *name;
    float temperature, top_p, min_p;
    int top_k, logprobs;
} bench_case;

int main(int argc, char **argv) {
    int vocab = 262144, reps = 200;
    uint64_t seed = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--vocab") && i + 1 < argc) vocab = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc) seed = strtoull(argv[++i], NULL, 10);
        else {
            fprintf(stderr, "usage: sampler_bench [--vocab N] [--reps N] [--seed N]\n");
            return 2;
        }
    }
    if (vocab < 2 || reps < 1) {
        fprintf(stderr, "sampler_bench: --vocab must be at least 2 and --reps at least 1\n");
        return 2;
    }
    const bench_case cases[] = {
        {"greedy", 0, 1, 0, 0, -1},
        {"temperature 0.7", 0.7f, 1, 0, 0, -1},
        {"temperature 0.7, top_p 0.9", 0.7f, 0.9f, 0, 0, -1},
        {"temperature 0.7, top_k 40", 0.7f, 1, 0, 40, -1},
        {"temperature 1, min_p 0.05", 1, 1, 0.05f, 0, -1},
        {"temperature 0.7, logprobs 5", 0.7f, 1, 0, 0, 5},
    };
    sampler *s = sampler_create(vocab);
    float *logits = malloc((size_t)vocab * sizeof *logits);
    double *ms = malloc((size_t)reps * sizeof *ms);
    if (!s || !logits || !ms) {
        fprintf(stderr, "sampler_bench: out of memory\n");
        return 1;
    }
    printf("vocabulary %d, median of %d draws, each on fresh logits%s\n", vocab, reps,
           getenv("CLLM_NO_AVX2") ? " (CLLM_NO_AVX2: scalar kernels)" : "");
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        sampling_params p = sampling_defaults();
        p.temperature = cases[c].temperature;
        p.top_p = cases[c].top_p;
        p.top_k = cases[c].top_k;
        p.min_p = cases[c].min_p;
        rng_state data, draw;
        rng_seed(&data, seed + c);
        rng_seed(&draw, seed);
        long checksum = 0;
        for (int r = 0; r < reps; r++) {
            make_logits(logits, vocab, &data);
            const double t0 = now_seconds();
            const int32_t tok = sampler_sample(s, &p, &draw, logits, NULL, 0, NULL, 0);
            if (cases[c].logprobs > 0) { /* what a row with logprobs adds (engine/postprocess.c) */
                int32_t top[16];
                const float lse = logprobs_logsumexp(logits, vocab);
                const int k = top_k_indices(logits, vocab, cases[c].logprobs, NULL, NULL, top);
                checksum += (long)(logits[top[k - 1]] - lse);
            }
            ms[r] = (now_seconds() - t0) * 1e3;
            checksum += tok;
        }
        qsort(ms, (size_t)reps, sizeof *ms, cmp_double);
        printf("%-30s %8.3f ms  (p10 %.3f, p90 %.3f; tokens sum %ld)\n", cases[c].name, ms[reps / 2],
               ms[reps / 10], ms[reps * 9 / 10], checksum);
    }
    free(ms);
    free(logits);
    sampler_free(s);
    return 0;
}
