/* Speculative decoding settings, in vLLM's --speculative-config shape, and
 * the per-sequence rule that adapts the number of draft tokens.
 *
 * Implemented: method "ngram" (prompt lookup, engine/ngram.h), method
 * "draft_model" (a smaller model with the same vocabulary, engine/draft.h,
 * drafting greedily) and method "layer_skip" (self-speculation: the target's
 * first draft_layers layers and its output head are the draft model, run by
 * the same engine/draft.h with its own KV; either may score only a
 * frequency-ranked slice of the vocabulary, "draft_vocab"; layer_skip's
 * last state may go through a trained exit adapter first, "model") and method "medusa" (heads on the
 * target's last hidden state, model/medusa.h: each sequence's drafts for the
 * next step come from the hidden state of the row it was just sampled
 * from, at the cost of a matmul over the heads' draft vocabulary). The drafts of
 * every speculating sequence are verified in the engine's batched forward
 * pass (engine.c): each row's token is sampled as without drafts and a draft
 * is kept while it equals that token, which for a one-hot draft is the
 * standard rejection rule (accept x with p(x), else a token from p without
 * x), so the output is the same as without speculation. */
#ifndef CLLM_ENGINE_SPEC_H
#define CLLM_ENGINE_SPEC_H

#include <stdbool.h>

#define SPEC_MAX_TOKENS 16

typedef enum { SPEC_NONE = 0, SPEC_NGRAM, SPEC_DRAFT_MODEL, SPEC_LAYER_SKIP, SPEC_MEDUSA } spec_method;

#define SPEC_MODEL_PATH_MAX 4096
#define SPEC_TREE_TEXT_MAX 1024

typedef struct {
    spec_method method;
    int num_speculative_tokens; /* K: drafts per sequence and step, 1..16 */
    int prompt_lookup_min;      /* shortest n-gram matched */
    int prompt_lookup_max;      /* longest n-gram matched (tried first) */
    /* draft_model, layer_skip, medusa: n-gram prompt lookup is tried first
     * each step, and the method drafts only where it finds nothing (set by
     * giving prompt_lookup_min, prompt_lookup_max or prompt_lookup_num_tokens
     * with those methods). Its drafts cost no forward pass of their own, so
     * they may run longer than the method's: up to prompt_lookup_num_tokens
     * (transformers' name; 0: num_speculative_tokens), adapted per sequence
     * as ngram's K is. */
    bool lookup_first;
    int prompt_lookup_num_tokens;
    int disable_by_batch_size;  /* no speculation in a step with more running sequences */
    bool batch_given;           /* disable_by_batch_size was set; else it follows the method (spec_config_finish) */
    /* draft_model: the draft's GGUF file or HF folder; medusa: the heads;
     * layer_skip: an exit adapter (model/medusa.h), which also sets draft_layers */
    char model[SPEC_MODEL_PATH_MAX];
    int draft_layers;           /* layer_skip: the target's first layers the draft runs; 0: the adapter's, else half */
    /* draft_model and layer_skip: the draft scores only the most frequent
     * tokens, read from this file (FR-Spec; model/head_slice.h); "": all */
    char draft_vocab[SPEC_MODEL_PATH_MAX];
    int draft_vocab_size;       /* of those (medusa: of the heads'), the first N; 0: every one the file has */
    /* medusa: "" drafts a chain of num_speculative_tokens guesses; a tree
     * (engine/spec_tree.h) of num_speculative_tokens nodes is either "auto"
     * (chosen from the heads' recorded accuracies) or vLLM's list of paths,
     * "[(0,), (1,), (0, 0)]" (its first num_speculative_tokens nodes). */
    char token_tree[SPEC_TREE_TEXT_MAX];
    /* draft_model, layer_skip and a Medusa chain: a draft the draft gave a
     * probability under this is a sequence's last of the step (llama.cpp's
     * --draft-p-min), and K does not adapt; 0: every sequence drafts its
     * K, which adapts (spec_next_k) */
    float draft_p_min;
    bool p_min_given; /* draft_p_min was set; else it follows the method (spec_config_finish) */
} spec_config;

/* Off; the ngram defaults (K 4, n-grams 2..5, off above 8 running; above
 * SPEC_DRAFT_RUNNER_BATCH for draft_model and layer_skip, spec_config_finish)
 * apply once a method is set. */
spec_config spec_config_defaults(void);

/* Parses vLLM's JSON, e.g. {"method": "ngram", "num_speculative_tokens": 4,
 * "prompt_lookup_min": 2, "prompt_lookup_max": 5} or {"model": "draft.gguf",
 * "num_speculative_tokens": 4} (method draft_model, implied by "model"),
 * over *c (keys absent keep their values) and checks the result. -1 with
 * err_get() naming the problem: malformed JSON, an unknown key or method, a
 * value out of range, a key of another method (a draft model for ngram). */
int spec_config_parse_json(const char *json, spec_config *c);
/* disable_by_batch_size's default for methods with a draft runner
 * (draft_model, layer_skip): each of their drafts is a forward pass over
 * the batch, so beside a few other sequences they cost more than they save
 * (gemma-3-270m's layer_skip through its exit adapter, always on, served
 * random prompts at 0.98x plain at concurrency 2, 0.75x at 4, 0.64x at 8;
 * bench/RESULTS.md). Medusa's heads and n-gram lookup keep 8. */
#define SPEC_DRAFT_RUNNER_BATCH 2
/* draft_p_min's defaults. gemma-3-270m's layer_skip through its exit
 * adapter accepted 86-95% of the drafts it gave over 0.9 and 3-25% of those
 * under 0.5; with 0.9, K = 3 ran 1.57x plain against 1.50x at temperature
 * 0 and 1.38x against 1.31x at 0.7 on 1 thread, within noise of 0 or
 * slightly ahead on 2; with K then held, 1.57-1.59x and 1.32-1.38x
 * (bench/RESULTS.md, 2026-12-07). A Medusa
 * chain's guesses come from one pass, so an unsure one saves only its row
 * of the verification: off (+1% in a replay of its acceptances). */
#define SPEC_DRAFT_RUNNER_P_MIN 0.9f
#define SPEC_MEDUSA_P_MIN 0.0f
/* Gives disable_by_batch_size and draft_p_min their method's defaults unless they were set. */
void spec_config_finish(spec_config *c);
/* Checks ranges: K in 1..16, 1 <= min <= max <= 64, disable_by_batch_size
 * >= 1. A config with method SPEC_NONE passes. */
int spec_config_check(const spec_config *c);
/* lookup_first's most drafts from n-gram lookup: prompt_lookup_num_tokens, else K. */
int spec_lookup_max(const spec_config *c);
/* The most draft tokens one sequence proposes in a step: K, or the n-gram lookup's when it goes first. */
int spec_max_draft(const spec_config *c);

/* The rule that adapts a sequence's K: after a verification of n_draft
 * drafts of which n_accepted were accepted, the next K is twice the current
 * one (at most k_max) when all were accepted, else n_accepted + 1. A
 * sequence whose drafts keep failing thus drafts one token at a time, and one
 * that keeps hitting grows back to k_max in a few steps. */
int spec_next_k(int k_cur, int k_max, int n_draft, int n_accepted);

/* The draft model's back-off after verifications that accepted nothing:
 * after m of them in a row, the sequence decodes the next 2^m - 1 steps (at
 * most 63) without drafts, so a draft model that never agrees with the
 * target costs little. (N-gram drafts need none: they cost no forward pass
 * of their own, and the adaptive K keeps failed ones at one token.) Returns
 * those steps. */
int spec_backoff_steps(int n_misses);

#endif
