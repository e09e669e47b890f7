/* Sampling; see sampler.h. Candidate selection avoids sorting the whole
 * vocabulary (262k entries for Gemma): top-k uses a partial quickselect, and
 * top-p grows a quickselected prefix until it provably holds the nucleus. */
#include "engine/sampler.h"

#include "kernels/ops.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

struct sampler {
    int n_vocab;
    int32_t *counts; /* per-token occurrence counts, kept all-zero between calls */
    uint8_t *in_prompt;
    int32_t *idx;    /* candidate token ids */
    float *prob;     /* candidate probabilities (unnormalized) */
    float *weight;   /* every token's exp((logit - max) / temperature) */
};

sampling_params sampling_defaults(void) {
    return (sampling_params){.temperature = 1.0f, .top_p = 1.0f, .repetition_penalty = 1.0f};
}

sampler *sampler_create(int n_vocab) {
    sampler *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->n_vocab = n_vocab;
    s->counts = calloc((size_t)n_vocab, sizeof *s->counts);
    s->in_prompt = calloc((size_t)n_vocab, 1);
    s->idx = malloc((size_t)n_vocab * sizeof *s->idx);
    s->prob = malloc((size_t)n_vocab * sizeof *s->prob);
    s->weight = malloc((size_t)n_vocab * sizeof *s->weight);
    if (!s->counts || !s->in_prompt || !s->idx || !s->prob || !s->weight) {
        sampler_free(s);
        return NULL;
    }
    return s;
}

void sampler_free(sampler *s) {
    if (!s) return;
    free(s->counts);
    free(s->in_prompt);
    free(s->idx);
    free(s->prob);
    free(s->weight);
    free(s);
}

int32_t sampler_argmax(const float *logits, int n) { return row_argmax(logits, n); }

/* Whether a logit leaves its token any chance: NaN and -inf do not. */
static bool possible(float logit) { return logit > -INFINITY; }

static bool valid_token(const sampler *s, int32_t t) { return t >= 0 && t < s->n_vocab; }

static void apply_penalties(sampler *s, const sampling_params *p, float *logits, const int32_t *prompt,
                            int n_prompt, const int32_t *output, int n_output) {
    const bool rep = p->repetition_penalty != 1.0f && p->repetition_penalty > 0;
    const bool pres_freq = p->presence_penalty != 0 || p->frequency_penalty != 0;
    if (!rep && !pres_freq) return;
    for (int i = 0; i < n_output; i++)
        if (valid_token(s, output[i])) s->counts[output[i]]++;
    if (rep)
        for (int i = 0; i < n_prompt; i++)
            if (valid_token(s, prompt[i])) s->in_prompt[prompt[i]] = 1;
    /* Visit each distinct token once: the first occurrence applies, then marks done. */
    for (int pass = 0; pass < 2; pass++) {
        const int32_t *toks = pass == 0 ? output : prompt;
        const int n = pass == 0 ? n_output : n_prompt;
        for (int i = 0; i < n; i++) {
            const int32_t t = toks[i];
            if (!valid_token(s, t)) continue;
            const int c = s->counts[t];
            const bool seen = c > 0 || s->in_prompt[t];
            if (!seen || c < 0) continue; /* c < 0: already handled */
            if (rep) logits[t] = logits[t] > 0 ? logits[t] / p->repetition_penalty : logits[t] * p->repetition_penalty;
            if (pres_freq && c > 0) logits[t] -= p->frequency_penalty * c + p->presence_penalty;
            s->counts[t] = -1;
            s->in_prompt[t] = 0;
        }
    }
    for (int i = 0; i < n_output; i++)
        if (valid_token(s, output[i])) s->counts[output[i]] = 0;
    for (int i = 0; i < n_prompt; i++)
        if (valid_token(s, prompt[i])) s->counts[prompt[i]] = 0, s->in_prompt[prompt[i]] = 0;
}

static inline bool cand_before(const sampler *s, int a, int b) {
    /* Higher probability first; lower token id on ties, for determinism. */
    return s->prob[a] > s->prob[b] || (s->prob[a] == s->prob[b] && s->idx[a] < s->idx[b]);
}

static void cand_swap(sampler *s, int a, int b) {
    int32_t ti = s->idx[a];
    s->idx[a] = s->idx[b];
    s->idx[b] = ti;
    float tp = s->prob[a];
    s->prob[a] = s->prob[b];
    s->prob[b] = tp;
}

/* Moves the k best candidates of [0, n) to the front (unordered). */
static void select_top(sampler *s, int n, int k) {
    int lo = 0, hi = n - 1;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        cand_swap(s, mid, hi);
        int store = lo;
        for (int i = lo; i < hi; i++)
            if (cand_before(s, i, hi)) cand_swap(s, i, store++);
        cand_swap(s, store, hi);
        if (store == k - 1 || store == k) return;
        if (store < k) lo = store + 1;
        else hi = store - 1;
    }
}

/* Insertion/heap-free sort of a short prefix: a simple merge sort via qsort
 * needs a global comparator context, so sort indices locally. */
static void sort_prefix(sampler *s, int k) {
    for (int i = 1; i < k; i++) {
        int j = i;
        while (j > 0 && cand_before(s, j, j - 1)) {
            cand_swap(s, j, j - 1);
            j--;
        }
    }
}

static int cmp_desc_ctx_idx(const void *a, const void *b, void *ctx) {
    const sampler *s = ctx;
    int x = *(const int *)a, y = *(const int *)b;
    if (s->prob[x] > s->prob[y]) return -1;
    if (s->prob[x] < s->prob[y]) return 1;
    return s->idx[x] < s->idx[y] ? -1 : s->idx[x] > s->idx[y];
}

/* Sorts the first k candidates best-first. */
static void sort_candidates(sampler *s, int k) {
    if (k <= 64) {
        sort_prefix(s, k);
        return;
    }
    int *order = malloc((size_t)k * sizeof *order);
    int32_t *ti = malloc((size_t)k * sizeof *ti);
    float *tp = malloc((size_t)k * sizeof *tp);
    if (!order || !ti || !tp) {
        free(order), free(ti), free(tp);
        sort_prefix(s, k);
        return;
    }
    for (int i = 0; i < k; i++) order[i] = i;
    qsort_r(order, (size_t)k, sizeof *order, cmp_desc_ctx_idx, s);
    for (int i = 0; i < k; i++) ti[i] = s->idx[order[i]], tp[i] = s->prob[order[i]];
    memcpy(s->idx, ti, (size_t)k * sizeof *ti);
    memcpy(s->prob, tp, (size_t)k * sizeof *tp);
    free(order), free(ti), free(tp);
}

/* Moves the tokens whose weight is at least tau into the candidate arrays;
 * returns how many, and their total weight in *mass. */
static int gather(sampler *s, float tau, double *mass) {
    int m = 0;
    double sum = 0;
    for (int i = 0; i < s->n_vocab; i++)
        if (s->weight[i] >= tau) {
            s->idx[m] = i;
            s->prob[m++] = s->weight[i];
            sum += s->weight[i];
        }
    *mass = sum;
    return m;
}

/* A draw from every token at once: no filter, so no candidate list. The
 * running sum skips whole blocks first (four independent sums each, so the
 * additions pipeline), then walks the block where u falls token by token. */
static int32_t draw_all(const sampler *s, rng_state *rng, double total, int32_t best) {
    enum { BLOCK = 64 };
    const float *w = s->weight;
    const int n = s->n_vocab;
    const double u = rng_uniform(rng) * total;
    double acc = 0;
    int i = 0;
    for (; i + BLOCK <= n; i += BLOCK) {
        double b[4] = {0, 0, 0, 0};
        for (int j = 0; j < BLOCK; j += 4)
            for (int l = 0; l < 4; l++) b[l] += w[i + j + l];
        const double next = acc + ((b[0] + b[1]) + (b[2] + b[3]));
        if (u < next) break;
        acc = next;
    }
    for (; i < n; i++) { /* a block's sum rounded differently: the walk may go on past it */
        acc += w[i];
        if (u < acc && w[i] > 0) return i;
    }
    for (i = n - 1; i >= 0; i--) /* rounding left u at the very end: the last possible token */
        if (w[i] > 0) return i;
    return best;
}

int32_t sampler_sample(sampler *s, const sampling_params *p, rng_state *rng, float *logits,
                       const int32_t *prompt, int n_prompt, const int32_t *output, int n_output) {
    const int n = s->n_vocab;
    for (int i = 0; i < p->n_logit_bias; i++)
        if (valid_token(s, p->logit_bias[i].token)) logits[p->logit_bias[i].token] += p->logit_bias[i].bias;
    apply_penalties(s, p, logits, prompt, n_prompt, output, n_output);
    const int32_t best = sampler_argmax(logits, n);
    if (!possible(logits[best])) return -1; /* every logit NaN or -inf: no distribution to draw from */
    if (!(p->temperature > 0)) return best;

    /* Weights relative to the best token, which gets exactly 1. With +inf
     * logits only the +inf tokens stay possible, equally likely; a NaN logit
     * is weight 0 (kernels/ops.h's exp_weights, vectorized: this runs over
     * the whole vocabulary for every drawn row). */
    const float max = logits[best];
    double total = 0;
    if (isinf(max))
        for (int i = 0; i < n; i++) total += s->weight[i] = logits[i] == max ? 1.0f : 0.0f;
    else total = exp_weights(s->weight, logits, n, max, p->temperature);
    const bool by_k = p->top_k > 0 && p->top_k < n, by_p = p->top_p < 1.0f, by_min_p = p->min_p > 0;
    if (!by_k && !by_p && !by_min_p) return draw_all(s, rng, total, best);

    /* The filters keep only tokens near the best, so gather candidates above a
     * threshold first and lower it until they provably hold what the filters
     * keep: k tokens for top-k, top_p of the mass for top-p alone, every
     * token of weight min_p for min-p alone (the best weighs 1). */
    float tau = !by_k && !by_p ? p->min_p : 1.0f / 256;
    double kept = 0;
    int n_cand;
    for (;;) {
        n_cand = gather(s, tau, &kept);
        const bool enough = by_k ? n_cand >= p->top_k : !by_p || kept >= p->top_p * total;
        if (enough || tau <= FLT_TRUE_MIN) break;
        tau = tau > 0x1p-120f ? tau * 0x1p-8f : FLT_TRUE_MIN; /* finally every token of positive weight */
    }
    if (by_k) {
        if (p->top_k < n_cand) {
            select_top(s, n_cand, p->top_k);
            n_cand = p->top_k;
            sort_candidates(s, n_cand);
        }
        total = 0;
        for (int i = 0; i < n_cand; i++) total += s->prob[i];
    }
    if (by_p) {
        /* Find a sorted prefix whose mass reaches top_p; it then holds the nucleus. */
        int k = n_cand < 256 ? n_cand : 256;
        for (;;) {
            if (k < n_cand) select_top(s, n_cand, k);
            sort_candidates(s, k);
            double mass = 0;
            int cut = -1;
            for (int i = 0; i < k; i++) {
                mass += s->prob[i];
                if (mass >= p->top_p * total) {
                    cut = i + 1;
                    break;
                }
            }
            if (cut > 0 || k == n_cand) {
                n_cand = cut > 0 ? cut : k;
                break;
            }
            k = k * 4 < n_cand ? k * 4 : n_cand;
        }
    }
    if (by_min_p) {
        float pmax = 0;
        for (int i = 0; i < n_cand; i++)
            if (s->prob[i] > pmax) pmax = s->prob[i];
        int w = 0;
        for (int i = 0; i < n_cand; i++)
            if (s->prob[i] >= p->min_p * pmax) {
                s->idx[w] = s->idx[i];
                s->prob[w++] = s->prob[i];
            }
        n_cand = w;
    }
    double sum = 0;
    for (int i = 0; i < n_cand; i++) sum += s->prob[i];
    /* Nothing left to draw from (min_p above 1, or a temperature that made
     * every probability 0): the best token is the only sensible answer. */
    if (n_cand == 0 || !(sum > 0)) return best;
    double u = rng_uniform(rng) * sum, acc = 0;
    int32_t last = best;
    for (int i = 0; i < n_cand; i++) {
        if (s->prob[i] <= 0) continue;
        acc += s->prob[i];
        last = s->idx[i];
        if (u < acc) return last;
    }
    return last;
}
