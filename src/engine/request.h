/* A request and its sequences. A request is one prompt with its parameters;
 * it has n sequences (n > 1 gives parallel samples, which share the prompt's
 * KV blocks). A sequence is what the scheduler moves between the waiting and
 * running queues: its tokens (prompt, then output), how many of them are in
 * the KV cache, its block tables, its generator and its text state. */
#ifndef CLLM_ENGINE_REQUEST_H
#define CLLM_ENGINE_REQUEST_H

#include "engine/engine.h"
#include "engine/sampler.h"
#include "engine/spec.h"
#include "kv/kv_manager.h"
#include "tokenizer/detok.h"

#include <stdbool.h>
#include <stdint.h>

typedef enum { SEQ_WAITING, SEQ_RUNNING, SEQ_FINISHED } seq_status;

typedef struct request request;

typedef struct {
    request *req;
    int index;           /* which of the request's n samples */
    seq_status status;
    int32_t *tokens;     /* prompt then output */
    int n_tokens;
    size_t cap_tokens;
    int n_prompt;
    int n_computed;      /* tokens whose K/V are in the cache */
    int n_evicted;       /* of those, evicted (kv/kv_evict.h): token i sits at KV position i - n_evicted */
    int64_t *attn_acc;   /* h2o: accumulated attention of each KV slot [params.evict.budget], ATTN_MASS_ONE units */
    seq_kv kv;
    rng_state rng;
    uint64_t admit_order; /* larger = admitted later; the preemption victim order */
    bool scheduled;       /* in this step's batch */
    int n_scheduled;
    bool preempted;       /* during this step's scheduling */
    bool kv_starved;      /* preempted itself with no other sequence running: the pool can never hold its
                             next step, so the engine ends it with an error instead of recomputing it forever */
    detok_state detok;
    char *held;           /* text not yet released (stop strings) */
    size_t n_held, cap_held;
    finish_reason finish;
    /* Speculative decoding: this step's draft tokens, which follow tokens[]
     * in the batch (positions n_tokens..n_tokens + n_draft - 1), and the
     * number to propose next time (adapted, spec_next_k). */
    struct {
        int32_t draft[SPEC_MAX_TOKENS];
        int n_draft;
        /* A tree of drafts (Medusa with a speculative_token_tree): draft j
         * follows draft parent[j] (-1: the last token), parents first. A
         * chain when tree is false: draft j follows draft j - 1. */
        bool tree;
        int8_t parent[SPEC_MAX_TOKENS];
        int k;
        bool lookup;  /* this step's drafts came from n-gram lookup, not the method's drafter (lookup_first) */
        int lookup_k; /* the next n-gram lookup's most drafts there (lookup_first; 0: not yet set) */
        int misses;   /* verifications in a row that accepted nothing */
        int skip;     /* decode steps left without drafts (spec_backoff_steps) */
        seq_kv kv;    /* the draft model's KV (method draft_model) */
        int computed; /* positions whose draft K/V are in kv; those from base on were computed from draft[] */
        int base;
        int32_t guess[SPEC_MAX_TOKENS]; /* Medusa's guesses for the tokens after tokens[guess_at - 1] */
        /* With draft_p_min: the probability the draft gave each draft (conf)
         * and each Medusa guess (guess_conf) */
        float conf[SPEC_MAX_TOKENS], guess_conf[SPEC_MAX_TOKENS];
        int n_guess, guess_at;
    } spec;
    /* Beam search: the beam's score so far and its best next tokens. */
    struct {
        double cum_logprob;
        bool pending;
        int n_cand;
        int32_t *cand_tok;
        float *cand_lp;
    } beam;
    /* Structured output: where the output is in the request's grammar. */
    constraint_state cons;
    bool prompt_lps_sent; /* its first output carried the request's prompt logprobs */
    char error[200];      /* why it ended with FINISH_ERROR, when the request caused it ("" otherwise) */
} sequence;

/* A finished beam-search hypothesis. */
typedef struct {
    int32_t *tokens; /* output tokens */
    int n;
    double score;    /* length-penalized */
    finish_reason why;
} beam_hyp;

struct request {
    uint64_t id;
    request_params params;  /* owns its arrays (deep copy) */
    engine_output_fn on_output;
    void *user;
    int n_seqs;
    sequence *seqs;
    bool forked;            /* samples 1..n-1 exist (created from sample 0 after its prompt) */
    int n_finished;
    int n_cached_tokens;    /* prompt tokens served from the prefix cache, first admission */
    int n_live_beams;       /* beam search: seqs[0..n_live_beams) are the live beams */
    beam_hyp *hyps;
    int n_hyps;
    /* prompt_logprobs: one entry per prompt position, filled as the prompt's
     * chunks are computed (engine/prompt_logprobs.h); their alternatives in
     * prompt_top_tok/_lp, params.prompt_logprobs per position. */
    token_logprobs *prompt_lps;
    int32_t *prompt_top_tok;
    float *prompt_top_lp;
    bool prompt_lps_done;   /* every position computed */
    double t_arrival, t_scheduled, t_first_token, t_finished;
};

/* Deep-copies params and prompt. NULL with err_get() on failure. */
request *request_create(uint64_t id, const int32_t *prompt, int n_prompt, const request_params *params);
void request_free(request *r);

int seq_append_token(sequence *s, int32_t tok);
int seq_hold_text(sequence *s, const char *text, size_t n);
int seq_n_output(const sequence *s);
/* Whether the sequence's prompt still needs logits at every position (so no
 * prefix-cache lookup for it). */
bool seq_wants_prompt_logits(const sequence *s);
/* Puts the request's prompt logprobs on the sequence's first output. */
void seq_attach_prompt_logprobs(sequence *s, engine_output *out);

#endif
