/* Speculative decoding's parts that need no model: the n-gram proposer finds
 * the longest earlier match and proposes what followed it; the config parser
 * takes vLLM's JSON and names every bad input; the K adaptation rule; and
 * the acceptance rule is speculative rejection sampling. The engine samples
 * each row as without drafts and accepts a draft equal to the sampled token;
 * over 100,000 draws per case, chi-square tests find (p > 0.01) its tokens
 * distributed as the target (the distribution sampler_sample draws from,
 * with temperature, top-k and penalties), the draft accepted with
 * probability p(draft), and a rejected draft replaced by a token from
 * max(0, p - q) normalized; the textbook rule written out passes the same
 * tests and a deliberately biased rule fails them. Fixed seeds: the test is
 * deterministic. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "engine/ngram.h"
#include "engine/sampler.h"
#include "engine/spec.h"
#include "engine/spec_tree.h"
#include "util/error.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---- n-gram proposer ---- */

static void test_ngram_no_match_proposes_nothing(void **state) {
    (void)state;
    const int32_t t[] = {1, 2, 3, 4, 5, 6};
    int32_t out[8];
    assert_int_equal(ngram_propose(t, 6, 1, 4, 4, out), 0);
    const int32_t one[] = {7};
    assert_int_equal(ngram_propose(one, 1, 1, 4, 4, out), 0);
}

static void test_ngram_proposes_what_followed(void **state) {
    (void)state;
    /* "3 4 5" occurred at 2; 6 7 8 3 followed it. */
    const int32_t t[] = {1, 2, 3, 4, 5, 6, 7, 8, 3, 4, 5};
    int32_t out[8];
    assert_int_equal(ngram_propose(t, 11, 1, 3, 4, out), 4);
    assert_int_equal(out[0], 6);
    assert_int_equal(out[1], 7);
    assert_int_equal(out[2], 8);
    assert_int_equal(out[3], 3);
    assert_int_equal(ngram_propose(t, 11, 1, 3, 2, out), 2);
    assert_int_equal(out[1], 7);
}

static void test_ngram_longest_match_wins_over_recent_shorter(void **state) {
    (void)state;
    /* Suffix "10 11 12": the 3-gram occurred first (followed by 50); the
     * 2-gram "11 12" occurred more recently (followed by 60). */
    const int32_t t[] = {10, 11, 12, 50, 1, 2, 11, 12, 60, 3, 10, 11, 12};
    int32_t out[4];
    assert_int_equal(ngram_propose(t, 13, 1, 3, 1, out), 1);
    assert_int_equal(out[0], 50);
    /* With prompt_lookup_max 2 the more recent 2-gram wins. */
    assert_int_equal(ngram_propose(t, 13, 1, 2, 1, out), 1);
    assert_int_equal(out[0], 60);
}

static void test_ngram_min_length_is_respected(void **state) {
    (void)state;
    /* Only the 1-gram "12" recurs. */
    const int32_t t[] = {12, 40, 41, 42, 12};
    int32_t out[4];
    assert_int_equal(ngram_propose(t, 5, 2, 4, 3, out), 0);
    assert_int_equal(ngram_propose(t, 5, 1, 4, 3, out), 3);
    assert_int_equal(out[0], 40);
    assert_int_equal(out[2], 42);
}

static void test_ngram_most_recent_with_room_then_repetition(void **state) {
    (void)state;
    /* "7 8" occurs at 0 (followed by 1 2 3) and at 4 (followed by 9 7 8):
     * the most recent with k = 3 following tokens is at 4. */
    const int32_t t[] = {7, 8, 1, 2, 7, 8, 9, 7, 8};
    int32_t out[8];
    assert_int_equal(ngram_propose(t, 9, 2, 2, 3, out), 3);
    assert_int_equal(out[0], 9);
    assert_int_equal(out[1], 7);
    assert_int_equal(out[2], 8);
    /* A loop: "5 6 5 6 5 6" proposes the loop on, beyond the known tokens. */
    const int32_t loop[] = {1, 5, 6, 5, 6, 5, 6};
    assert_int_equal(ngram_propose(loop, 7, 2, 2, 5, out), 5);
    const int32_t want[] = {5, 6, 5, 6, 5};
    assert_memory_equal(out, want, sizeof want);
}

/* ---- config ---- */

static void expect_parse_error(const char *json, const char *needle) {
    spec_config c = spec_config_defaults();
    const spec_config before = c;
    if (spec_config_parse_json(json, &c) == 0) fail_msg("accepted %s", json);
    if (!strstr(err_get(), needle))
        fail_msg("%s: message '%s' lacks '%s'", json, err_get(), needle);
    assert_memory_equal(&c, &before, sizeof c); /* nothing half-applied */
}

static void test_config_parses_vllm_json(void **state) {
    (void)state;
    spec_config c = spec_config_defaults();
    assert_int_equal(c.method, SPEC_NONE);
    assert_int_equal(
        spec_config_parse_json("{\"method\": \"ngram\", \"num_speculative_tokens\": 7, "
                               "\"prompt_lookup_min\": 3, \"prompt_lookup_max\": 6, "
                               "\"disable_by_batch_size\": 2}",
                               &c),
        0);
    assert_int_equal(c.method, SPEC_NGRAM);
    assert_int_equal(c.num_speculative_tokens, 7);
    assert_int_equal(c.prompt_lookup_min, 3);
    assert_int_equal(c.prompt_lookup_max, 6);
    assert_int_equal(c.disable_by_batch_size, 2);
    c = spec_config_defaults();
    assert_int_equal(
        spec_config_parse_json("{\"model\": \"small.gguf\", \"num_speculative_tokens\": 3}", &c),
        0);
    assert_int_equal(c.method, SPEC_DRAFT_MODEL); /* the model implies the method, as in vLLM */
    assert_string_equal(c.model, "small.gguf");
    /* A draft runner's drafts are forward passes: off beside more than 2 others unless told */
    assert_int_equal(c.disable_by_batch_size, SPEC_DRAFT_RUNNER_BATCH);
    assert_float_equal(c.draft_p_min, SPEC_DRAFT_RUNNER_P_MIN, 0);
    c = spec_config_defaults();
    assert_int_equal(
        spec_config_parse_json("{\"method\": \"layer_skip\", \"draft_layers\": 6}", &c), 0);
    assert_int_equal(c.method, SPEC_LAYER_SKIP);
    assert_int_equal(c.draft_layers, 6);
    assert_int_equal(c.disable_by_batch_size, SPEC_DRAFT_RUNNER_BATCH);
    c = spec_config_defaults();
    assert_int_equal(spec_config_parse_json(
                         "{\"method\": \"layer_skip\", \"disable_by_batch_size\": 16}", &c), 0);
    assert_int_equal(c.disable_by_batch_size, 16);
    assert_float_equal(c.draft_p_min, SPEC_DRAFT_RUNNER_P_MIN, 0);
    c = spec_config_defaults();
    assert_int_equal(spec_config_parse_json("{\"method\": \"layer_skip\", \"draft_p_min\": 0.5}", &c), 0);
    assert_float_equal(c.draft_p_min, 0.5, 0); /* a given value wins */
    assert_int_equal(spec_config_parse_json("{\"method\": \"layer_skip\", \"draft_p_min\": 0}", &c), 0);
    assert_float_equal(c.draft_p_min, 0, 0); /* off */
    c = spec_config_defaults();
    assert_int_equal(spec_config_parse_json("{\"method\": \"ngram\"}", &c), 0);
    assert_int_equal(c.disable_by_batch_size, 8);
    assert_float_equal(c.draft_p_min, 0, 0); /* n-gram drafts have no probabilities */
    c = spec_config_defaults();
    assert_int_equal(spec_config_parse_json(
                         "{\"method\": \"medusa\", \"model\": \"h.gguf\", \"num_speculative_tokens\": 3}", &c), 0);
    assert_int_equal(c.method, SPEC_MEDUSA);
    assert_string_equal(c.model, "h.gguf");
    assert_int_equal(c.num_speculative_tokens, 3);
    assert_float_equal(c.draft_p_min, SPEC_MEDUSA_P_MIN, 0);
    c = spec_config_defaults();
    assert_int_equal(spec_config_parse_json("{\"method\": \"medusa\", \"model\": \"h.gguf\", "
                                            "\"speculative_token_tree\": \"auto\"}", &c), 0);
    assert_float_equal(c.draft_p_min, 0, 0); /* a tree's nodes are fixed */
    c = spec_config_defaults();
    assert_int_equal(spec_config_parse_json("{\"method\": \"layer_skip\", \"draft_vocab\": \"h.gguf\", "
                                            "\"draft_vocab_size\": 4096}",
                                            &c),
                     0);
    assert_string_equal(c.draft_vocab, "h.gguf");
    assert_int_equal(c.draft_vocab_size, 4096);
    c = spec_config_defaults();
    assert_int_equal(
        spec_config_parse_json("{\"method\": \"ngram\", \"prompt_lookup_min\": 9}", &c), 0);
    assert_int_equal(c.prompt_lookup_max, 9); /* moved up with min */
}

/* N-gram lookup before another method's drafts: on when a lookup key comes with that method, with a K of its own. */
static void test_config_lookup_first(void **state) {
    (void)state;
    spec_config c = spec_config_defaults();
    assert_int_equal(spec_config_parse_json("{\"method\": \"ngram\", \"prompt_lookup_max\": 4}", &c), 0);
    assert_false(c.lookup_first); /* lookup is the method itself */
    assert_int_equal(spec_max_draft(&c), 4);
    c = spec_config_defaults();
    assert_int_equal(spec_config_parse_json("{\"method\": \"medusa\", \"model\": \"h.gguf\", "
                                            "\"num_speculative_tokens\": 3}", &c), 0);
    assert_false(c.lookup_first);
    assert_int_equal(spec_max_draft(&c), 3);
    c = spec_config_defaults();
    assert_int_equal(spec_config_parse_json("{\"method\": \"medusa\", \"model\": \"h.gguf\", "
                                            "\"num_speculative_tokens\": 3, \"prompt_lookup_max\": 4}", &c), 0);
    assert_true(c.lookup_first);
    assert_int_equal(c.prompt_lookup_max, 4);
    assert_int_equal(c.prompt_lookup_min, 2);
    assert_int_equal(spec_lookup_max(&c), 3); /* lookup drafts as many as the method unless told */
    assert_int_equal(spec_max_draft(&c), 3);
    c = spec_config_defaults();
    assert_int_equal(spec_config_parse_json("{\"method\": \"layer_skip\", \"num_speculative_tokens\": 3, "
                                            "\"prompt_lookup_num_tokens\": 8}", &c), 0);
    assert_true(c.lookup_first);
    assert_int_equal(spec_lookup_max(&c), 8);
    assert_int_equal(spec_max_draft(&c), 8); /* the verification rows a sequence may need */
    assert_int_equal(c.num_speculative_tokens, 3);
    assert_float_equal(c.draft_p_min, SPEC_DRAFT_RUNNER_P_MIN, 0); /* the method's own defaults stay */
    assert_int_equal(c.disable_by_batch_size, SPEC_DRAFT_RUNNER_BATCH);
    c = spec_config_defaults();
    assert_int_equal(spec_config_parse_json("{\"model\": \"d.gguf\", \"num_speculative_tokens\": 5, "
                                            "\"prompt_lookup_min\": 3, \"prompt_lookup_num_tokens\": 2}", &c), 0);
    assert_true(c.lookup_first);
    assert_int_equal(c.method, SPEC_DRAFT_MODEL);
    assert_int_equal(spec_lookup_max(&c), 2);
    assert_int_equal(spec_max_draft(&c), 5);
    expect_parse_error("{\"method\": \"ngram\", \"prompt_lookup_num_tokens\": 6}", "drafts num_speculative_tokens");
    expect_parse_error("{\"method\": \"medusa\", \"model\": \"h.gguf\", \"prompt_lookup_num_tokens\": 17}", "1..16");
    expect_parse_error("{\"method\": \"medusa\", \"model\": \"h.gguf\", \"prompt_lookup_num_tokens\": -1}", "1..16");
}

static void test_config_rejects_bad_input(void **state) {
    (void)state;
    expect_parse_error("{\"method\": \"ngram\",", "malformed JSON");
    expect_parse_error("[1]", "JSON object");
    expect_parse_error("{\"method\": \"eagle\"}", "unknown method");
    expect_parse_error("{\"method\": \"draft_model\", \"num_speculative_tokens\": 3}",
                       "needs \"model\"");
    expect_parse_error("{\"method\": \"ngram\", \"model\": \"d.gguf\"}", "not \"ngram\"");
    expect_parse_error("{\"method\": \"draft_model\", \"model\": 3}", "\"model\" must be a path");
    expect_parse_error("{\"method\": \"layer_skip\", \"draft_layers\": -1}", "draft_layers");
    expect_parse_error("{\"method\": \"ngram\", \"draft_layers\": 3}", "for method \"layer_skip\"");
    expect_parse_error("{\"method\": \"medusa\"}", "cllm medusa train");
    expect_parse_error("{\"method\": \"medusa\", \"model\": \"h.gguf\", \"draft_layers\": 2}", "layer_skip");
    expect_parse_error("{\"method\": \"medusa2\"}", "\"medusa\"");
    expect_parse_error("{\"method\": \"ngram\", \"draft_vocab\": \"h.gguf\"}", "is for methods");
    expect_parse_error("{\"method\": \"layer_skip\", \"draft_vocab_size\": 8}", "needs \"draft_vocab\"");
    expect_parse_error("{\"method\": \"ngram\", \"draft_vocab_size\": 8}", "is for methods");
    expect_parse_error("{\"method\": \"medusa\", \"model\": \"h.gguf\", \"draft_vocab\": \"h.gguf\"}",
                       "carry their own");
    expect_parse_error("{\"method\": \"layer_skip\", \"draft_vocab\": \"h\", \"draft_vocab_size\": -1}",
                       "draft_vocab_size");
    expect_parse_error("{\"method\": \"layer_skip\", \"draft_vocab\": 7}", "must be a path");
    expect_parse_error("{\"num_speculative_tokens\": 3}", "\"method\" is required");
    expect_parse_error("{\"method\": \"ngram\", \"num_speculative_tokens\": 0}", "1..16");
    expect_parse_error("{\"method\": \"ngram\", \"num_speculative_tokens\": 17}", "1..16");
    expect_parse_error("{\"method\": \"ngram\", \"num_speculative_tokens\": \"4\"}", "integer");
    expect_parse_error(
        "{\"method\": \"ngram\", \"prompt_lookup_min\": 4, \"prompt_lookup_max\": 2}",
        "must not exceed");
    expect_parse_error("{\"method\": \"ngram\", \"disable_by_batch_size\": 0}",
                       "disable_by_batch_size");
    expect_parse_error("{\"method\": \"ngram\", \"speed\": 2}", "unknown key \"speed\"");
    expect_parse_error("{\"method\": \"layer_skip\", \"draft_p_min\": 1.5}", "draft_p_min must be in [0, 1]");
    expect_parse_error("{\"method\": \"layer_skip\", \"draft_p_min\": -0.1}", "draft_p_min must be in [0, 1]");
    expect_parse_error("{\"method\": \"layer_skip\", \"draft_p_min\": \"0.9\"}", "must be a number");
    expect_parse_error("{\"method\": \"ngram\", \"draft_p_min\": 0.9}", "drafts with probabilities");
    expect_parse_error("{\"method\": \"medusa\", \"model\": \"h.gguf\", \"speculative_token_tree\": \"auto\", "
                       "\"draft_p_min\": 0.9}",
                       "without a speculative_token_tree");
}

static void test_adaptive_k_rule(void **state) {
    (void)state;
    assert_int_equal(spec_backoff_steps(0), 0);
    assert_int_equal(spec_backoff_steps(1), 1);
    assert_int_equal(spec_backoff_steps(3), 7);
    assert_int_equal(spec_backoff_steps(6), 63);
    assert_int_equal(spec_backoff_steps(40), 63);
    assert_int_equal(spec_next_k(4, 8, 4, 4), 8); /* all accepted: doubles */
    assert_int_equal(spec_next_k(8, 8, 8, 8), 8); /* at most k_max */
    assert_int_equal(spec_next_k(8, 8, 8, 2), 3); /* rejected after 2: 2 + 1 */
    assert_int_equal(spec_next_k(8, 8, 8, 0), 1); /* never below 1 */
    assert_int_equal(spec_next_k(1, 16, 1, 1), 2);
}

/* ---- the acceptance rule ---- */

#define NV 8
#define N_DRAWS 100000

/* Regularized upper incomplete gamma Q(a, x) (Numerical Recipes' gser/gcf). */
static double gamma_q(double a, double x) {
    if (x <= 0) return 1.0;
    const double gln = lgamma(a);
    if (x < a + 1) {
        double ap = a, sum = 1.0 / a, del = sum;
        for (int n = 0; n < 1000; n++) {
            del *= x / ++ap;
            sum += del;
            if (fabs(del) < fabs(sum) * 1e-15) break;
        }
        return 1.0 - sum * exp(-x + a * log(x) - gln);
    }
    double b = x + 1 - a, c = 1e300, d = 1 / b, h = d;
    for (int i = 1; i < 1000; i++) {
        const double an = -i * (i - a);
        b += 2;
        d = an * d + b;
        if (fabs(d) < 1e-300) d = 1e-300;
        c = b + an / c;
        if (fabs(c) < 1e-300) c = 1e-300;
        d = 1 / d;
        const double del = d * c;
        h *= del;
        if (fabs(del - 1) < 1e-15) break;
    }
    return exp(-x + a * log(x) - gln) * h;
}

/* p-value of the counts of n_cat categories against their probabilities; a
 * count where the probability is 0 gives p-value 0. */
static double chi_square_p_n(const long *count, const double *prob, int n_cat, long n) {
    double x2 = 0;
    int df = -1;
    for (int i = 0; i < n_cat; i++) {
        if (prob[i] <= 0) {
            if (count[i] > 0) return 0;
            continue;
        }
        const double e = prob[i] * (double)n;
        x2 += (count[i] - e) * (count[i] - e) / e;
        df++;
    }
    return df > 0 ? gamma_q(df / 2.0, x2 / 2.0) : 1.0;
}

static double chi_square_p(const long *count, const double *prob, long n) {
    return chi_square_p_n(count, prob, NV, n);
}

static const float k_logits[NV] = {1.2f, 0.3f, 2.0f, -0.5f, 0.9f, 1.9f, -1.4f, 0.0f};
static const int32_t k_history[] = {4, 4}; /* output so far: token 4 twice */

typedef struct {
    const char *name;
    sampling_params p;
} sampling_case;

static sampling_case make_case(int which) {
    sampling_params p = sampling_defaults();
    if (which == 0) return (sampling_case){"temperature 1", p};
    p.temperature = 0.7f;
    p.top_k = 5;
    p.frequency_penalty = 0.4f;
    p.presence_penalty = 0.3f;
    return (sampling_case){"temperature 0.7, top-k 5, penalties", p};
}

/* The target, computed here independently of the sampler: penalties on the
 * history, softmax at the temperature, the top k kept, renormalized. */
static void target_probs(const sampling_params *p, double *prob) {
    double l[NV];
    for (int i = 0; i < NV; i++)
        l[i] = k_logits[i];
    int count[NV] = {0};
    for (size_t i = 0; i < sizeof k_history / sizeof *k_history; i++)
        count[k_history[i]]++;
    for (int i = 0; i < NV; i++)
        if (count[i]) l[i] -= p->frequency_penalty * count[i] + p->presence_penalty;
    double sum = 0;
    for (int i = 0; i < NV; i++) {
        int rank = 0;
        for (int j = 0; j < NV; j++)
            rank += l[j] > l[i] || (l[j] == l[i] && j < i);
        prob[i] = p->top_k > 0 && rank >= p->top_k ? 0 : exp(l[i] / p->temperature);
        sum += prob[i];
    }
    for (int i = 0; i < NV; i++)
        prob[i] /= sum;
}

/* A verification rule: the token emitted at a position whose draft is
 * `draft`, and whether the draft was accepted. */
typedef int32_t (*rule_fn)(sampler *s, const sampling_params *p, rng_state *rng, int32_t draft,
                           const double *prob, bool *accepted);

static int32_t sample_row(sampler *s, const sampling_params *p, rng_state *rng) {
    float l[NV];
    memcpy(l, k_logits, sizeof l);
    return sampler_sample(s, p, rng, l, NULL, 0, k_history, 2);
}

/* The engine's rule (engine.c, verify_drafts): the row's token is sampled
 * as without drafts; the draft is accepted when it equals that token. */
static int32_t engine_rule(sampler *s, const sampling_params *p, rng_state *rng, int32_t draft,
                           const double *prob, bool *accepted) {
    (void)prob;
    const int32_t t = sample_row(s, p, rng);
    *accepted = t == draft;
    return t;
}

static int32_t draw_from(const double *prob, double u) {
    double acc = 0, total = 0;
    for (int i = 0; i < NV; i++)
        total += prob[i];
    for (int i = 0; i < NV; i++) {
        acc += prob[i];
        if (u * total < acc) return i;
    }
    return NV - 1;
}

/* The textbook rule, written out: accept with min(1, p(x)/q(x)) = p(x),
 * else draw from max(0, p - q) normalized. */
static int32_t textbook_rule(sampler *s, const sampling_params *p, rng_state *rng, int32_t draft,
                             const double *prob, bool *accepted) {
    (void)s, (void)p;
    *accepted = rng_uniform(rng) < prob[draft];
    if (*accepted) return draft;
    double residual[NV];
    for (int i = 0; i < NV; i++)
        residual[i] = i == draft ? 0 : prob[i];
    return draw_from(residual, rng_uniform(rng));
}

/* A plausible mistake: on rejection, sample the row again from p itself
 * instead of from p without the draft (the draft then comes out too often). */
static int32_t biased_rule(sampler *s, const sampling_params *p, rng_state *rng, int32_t draft,
                           const double *prob, bool *accepted) {
    (void)prob;
    const int32_t t = sample_row(s, p, rng);
    *accepted = t == draft;
    return *accepted ? t : sample_row(s, p, rng);
}

/* Worst p-value, over drafts that are likely, unlikely and (with top-k)
 * outside the candidates, of three chi-square tests: the tokens emitted
 * against p; acceptances against p(draft); the tokens emitted on rejection
 * against max(0, p - q) normalized. */
static double worst_p_value(int which, rule_fn rule, uint64_t seed) {
    const sampling_case c = make_case(which);
    double prob[NV];
    target_probs(&c.p, prob);
    sampler *s = sampler_create(NV);
    rng_state rng;
    rng_seed(&rng, seed);
    double worst = 1;
    const int32_t drafts[] = {2, 5, 0, 3, 6};
    for (size_t d = 0; d < sizeof drafts / sizeof *drafts; d++) {
        const int32_t x = drafts[d];
        long emitted[NV] = {0}, on_reject[NV] = {0}, accept[NV] = {0}, n_reject = 0;
        for (long i = 0; i < N_DRAWS; i++) {
            bool ok;
            const int32_t t = rule(s, &c.p, &rng, x, prob, &ok);
            assert_true(t >= 0 && t < NV);
            emitted[t]++;
            accept[ok ? 0 : 1]++;
            if (!ok) on_reject[t]++, n_reject++;
        }
        double residual[NV], sum = 0;
        for (int i = 0; i < NV; i++)
            sum += residual[i] = i == x ? 0 : prob[i];
        for (int i = 0; i < NV; i++)
            residual[i] /= sum;
        double acc_prob[NV] = {prob[x], 1 - prob[x]};
        const double pv[3] = {chi_square_p(emitted, prob, N_DRAWS),
                              chi_square_p(accept, acc_prob, N_DRAWS),
                              chi_square_p(on_reject, residual, n_reject)};
        for (int k = 0; k < 3; k++)
            if (pv[k] < worst) worst = pv[k];
    }
    sampler_free(s);
    return worst;
}

static void test_engine_rule_is_speculative_rejection_sampling(void **state) {
    (void)state;
    for (int which = 0; which < 2; which++) {
        const double pv = worst_p_value(which, engine_rule, 1234 + which);
        if (pv <= 0.01) fail_msg("%s: chi-square p = %g", make_case(which).name, pv);
    }
}

static void test_textbook_rule_passes_the_same_test(void **state) {
    (void)state;
    for (int which = 0; which < 2; which++) {
        const double pv = worst_p_value(which, textbook_rule, 99 + which);
        if (pv <= 0.01) fail_msg("%s: chi-square p = %g", make_case(which).name, pv);
    }
}

static void test_biased_rule_fails_the_same_test(void **state) {
    (void)state;
    for (int which = 0; which < 2; which++) {
        const double pv = worst_p_value(which, biased_rule, 1234 + which);
        if (pv > 0.01) fail_msg("%s: the biased rule passed (p = %g)", make_case(which).name, pv);
    }
}

/* ---- the tree walk: spec_walk, which the engine's verify_drafts runs ---- */

/* Drafts after the last token: 2 and 5 (nodes 0, 1), then 0 and 2 after
 * the first, 5 after the second. Each row (the last token's, then each
 * node's) has logits of its own. */
#define TREE_NODES 5
static const int32_t k_tree_tok[TREE_NODES] = {2, 5, 0, 2, 5};
static const int8_t k_tree_parent[TREE_NODES] = {-1, -1, 0, 0, 1};
static const float k_tree_logits[TREE_NODES + 1][NV] = {
    {1.2f, 0.3f, 2.0f, -0.5f, 0.9f, 1.9f, -1.4f, 0.0f},  {0.5f, -0.2f, 0.1f, 1.5f, 0.4f, -1.0f, 0.8f, 0.2f},
    {-0.3f, 1.1f, 0.6f, 0.0f, 1.3f, 0.7f, -0.6f, 0.9f},  {2.2f, 0.0f, -0.4f, 0.3f, 0.1f, 0.5f, 1.0f, -1.2f},
    {0.0f, 0.2f, 0.4f, 0.6f, 0.8f, 1.0f, 1.2f, 1.4f},     {1.0f, 1.0f, -2.0f, 0.5f, 0.5f, 0.0f, 0.3f, 2.1f},
};

typedef struct {
    sampler *s;
    sampling_params p;
    rng_state rng;
    int32_t last; /* the last token drawn */
} walk_case;

static int32_t walk_sample(void *user, int row, bool *stop) {
    walk_case *c = user;
    float l[NV];
    memcpy(l, k_tree_logits[row], sizeof l);
    *stop = false;
    return c->last = sampler_sample(c->s, &c->p, &c->rng, l, NULL, 0, NULL, 0);
}

typedef int (*walk_fn)(int n, const int32_t *tok, const int8_t *parent, spec_row_sampler sample, void *user,
                       int *path);

/* A walk that also takes the first child, one time in ten, when the row's
 * token is none of them: it keeps drafts the target did not draw. */
static int biased_walk(int n, const int32_t *tok, const int8_t *parent, spec_row_sampler sample, void *user,
                       int *path) {
    walk_case *c = user;
    int accepted = 0, at = -1;
    for (;;) {
        bool stop;
        const int32_t x = sample(user, at + 1, &stop);
        int next = -1, first = -1;
        for (int j = 0; j < n; j++)
            if (parent[j] == at) {
                if (first < 0) first = j;
                if (tok[j] == x) next = j;
            }
        if (next < 0 && first >= 0 && rng_uniform(&c->rng) < 0.1) next = first;
        if (next < 0) return accepted;
        path[accepted++] = at = next;
    }
}

/* Over N_DRAWS walks, the outcome (the node the walk ended at, the token
 * drawn there) against the target's chance of it: the product of the
 * rows' softmax probabilities (computed here, in double) along the path,
 * times the last row's of its token, for a token none of that node's
 * children holds. */
static double tree_walk_p_value(walk_fn walk, uint64_t seed) {
    double p[TREE_NODES + 1][NV], reach[TREE_NODES + 1] = {1.0};
    for (int r = 0; r <= TREE_NODES; r++) {
        double sum = 0;
        for (int x = 0; x < NV; x++) sum += p[r][x] = exp(k_tree_logits[r][x]);
        for (int x = 0; x < NV; x++) p[r][x] /= sum;
    }
    for (int j = 0; j < TREE_NODES; j++) reach[j + 1] = reach[k_tree_parent[j] + 1] * p[k_tree_parent[j] + 1][k_tree_tok[j]];
    double want[(TREE_NODES + 1) * NV];
    for (int r = 0; r <= TREE_NODES; r++)
        for (int x = 0; x < NV; x++) {
            bool child = false;
            for (int j = 0; j < TREE_NODES; j++) child |= k_tree_parent[j] == r - 1 && k_tree_tok[j] == x;
            want[r * NV + x] = child ? 0 : reach[r] * p[r][x];
        }
    walk_case c = {.s = sampler_create(NV), .p = sampling_defaults()};
    rng_seed(&c.rng, seed);
    long count[(TREE_NODES + 1) * NV] = {0};
    for (long i = 0; i < N_DRAWS; i++) {
        int path[TREE_NODES];
        const int n = walk(TREE_NODES, k_tree_tok, k_tree_parent, walk_sample, &c, path);
        count[(n ? path[n - 1] + 1 : 0) * NV + c.last]++;
    }
    sampler_free(c.s);
    return chi_square_p_n(count, want, (TREE_NODES + 1) * NV, N_DRAWS);
}

static void test_tree_walk_emits_the_targets_distribution(void **state) {
    (void)state;
    for (uint64_t seed = 1; seed <= 2; seed++) {
        const double pv = tree_walk_p_value(spec_walk, seed);
        if (pv <= 0.01) fail_msg("spec_walk over a tree: chi-square p = %g", pv);
    }
    const double pv = tree_walk_p_value(biased_walk, 1);
    if (pv > 0.01) fail_msg("the biased walk passed (p = %g)", pv);
}

static void test_chi_square_p_value_is_calibrated(void **state) {
    (void)state;
    /* Known values: chi-square with 7 degrees of freedom at 18.475 is p = 0.01,
     * at 6.346 p = 0.5. */
    assert_true(fabs(gamma_q(3.5, 18.475 / 2) - 0.01) < 1e-4);
    assert_true(fabs(gamma_q(3.5, 6.346 / 2) - 0.5) < 1e-3);
}

static void test_greedy_draft_accepted_only_when_argmax(void **state) {
    (void)state;
    sampler *s = sampler_create(NV);
    sampling_params p = sampling_defaults();
    p.temperature = 0;
    p.presence_penalty = p.frequency_penalty = 0;
    rng_state rng;
    rng_seed(&rng, 5);
    for (int32_t d = 0; d < NV; d++) {
        bool ok;
        assert_int_equal(engine_rule(s, &p, &rng, d, NULL, &ok), 2);
        assert_int_equal(ok, d == 2);
    }
    sampler_free(s);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ngram_no_match_proposes_nothing),
        cmocka_unit_test(test_ngram_proposes_what_followed),
        cmocka_unit_test(test_ngram_longest_match_wins_over_recent_shorter),
        cmocka_unit_test(test_ngram_min_length_is_respected),
        cmocka_unit_test(test_ngram_most_recent_with_room_then_repetition),
        cmocka_unit_test(test_config_parses_vllm_json),
        cmocka_unit_test(test_config_rejects_bad_input),
        cmocka_unit_test(test_config_lookup_first),
        cmocka_unit_test(test_adaptive_k_rule),
        cmocka_unit_test(test_chi_square_p_value_is_calibrated),
        cmocka_unit_test(test_greedy_draft_accepted_only_when_argmax),
        cmocka_unit_test(test_engine_rule_is_speculative_rejection_sampling),
        cmocka_unit_test(test_textbook_rule_passes_the_same_test),
        cmocka_unit_test(test_biased_rule_fails_the_same_test),
        cmocka_unit_test(test_tree_walk_emits_the_targets_distribution),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
