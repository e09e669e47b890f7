/* One HTTP request's generation: the engine requests it submitted (one per
 * prompt, each with n samples) and what they produced so far, per choice.
 *
 * The engine thread only appends to these buffers under a mutex and signals
 * an eventfd, and calls the waker armed with gen_arm_waker (a paused stream
 * resumes). A handler waiting for a whole answer waits on that eventfd and on
 * the client's socket together, so a client that goes away is noticed at once
 * (then every engine request is aborted). The state is reference-counted: one reference for the
 * HTTP side, one per engine request until its last sample reports finished;
 * whichever drops the last one frees it. */
#ifndef CLLM_SERVER_GENERATION_H
#define CLLM_SERVER_GENERATION_H

#include "engine/engine.h"
#include "server/http.h"
#include "server/params.h"
#include "util/buf.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

typedef struct {
    int32_t token;
    float logprob;
    int rank;              /* prompt logprobs only (vLLM's rank); else 0 */
    int n_top;
    int32_t top_tok[API_MAX_LOGPROBS];
    float top_lp[API_MAX_LOGPROBS];
} gen_logprob;

/* One prompt's prompt_logprobs: an entry per prompt token, the first without
 * context (token only). items NULL until the engine reported them. */
typedef struct {
    gen_logprob *items;
    int n;
} gen_prompt_lps;

/* Copies an engine output's prompt logprobs (n entries) into p unless p
 * already holds them (the samples of a prompt report the same ones); sets
 * *oom when out of memory. Free p->items with free(). */
void gen_keep_prompt_logprobs(gen_prompt_lps *p, const token_logprobs *lps, int n, bool *oom);

typedef struct {
    buf text;              /* released text so far (stop strings never in it) */
    int n_tokens;          /* output tokens so far */
    int n_evicted;         /* of its tokens, evicted from its KV cache (kv/kv_evict.h) */
    gen_logprob *lps;      /* [n_lps] when logprobs were asked for */
    int n_lps;
    size_t cap_lps;
    bool finished;
    finish_reason reason;
    char error[200];       /* with FINISH_ERROR: the request's own fault (engine_output.error), or "" */
} gen_choice;

typedef struct gen gen;

/* Sees every output before gen applies it (under gen's lock): how a response
 * is recorded for the response cache. */
typedef void (*gen_tap_fn)(void *arg, int prompt, const engine_output *o);

typedef struct {
    gen *g;
    int prompt;
    uint64_t id;
    bool submitted;
    int n_finished;        /* samples that reported finished (engine thread) */
} gen_sub;

/* Per finish reason (index = finish_reason), shared by all requests. */
typedef struct {
    _Atomic uint64_t finished[FINISH_ERROR + 1];
} gen_counters;

struct gen {
    pthread_mutex_t mu;
    int refs;
    int efd;
    engine *e;
    gen_counters *counters;
    int n_prompts, n;      /* choices = n_prompts * n, index = prompt * n + sample */
    gen_sub *subs;
    int *prompt_tokens, *cached_tokens; /* per prompt, as the engine reports them */
    gen_prompt_lps *prompt_lps;         /* per prompt, with prompt_logprobs */
    gen_choice *choices;
    int n_unfinished;
    bool oom;
    bool evicting;         /* KV eviction is on: usage reports the evicted tokens */
    /* Called once (engine thread, after the lock is dropped) at the next
     * output, then disarmed; NULL: none. */
    void (*waker)(http_req *);
    http_req *waker_arg;
    /* NULL: none. tap_free(tap_arg) runs when g is freed. */
    gen_tap_fn tap;
    void *tap_arg;
    void (*tap_free)(void *);
};

gen *gen_create(engine *e, gen_counters *counters, int n_prompts, int n);
/* Submits prompt `prompt` with params rp (rp->n must equal n). Returns 0, or -1
 * with err_get() from the engine (queue full, too long, ...). */
int gen_submit(gen *g, int prompt, const int32_t *tokens, int n_tokens, const request_params *rp);
/* Asks the engine to abort every submitted request (their callbacks still come). */
void gen_abort(gen *g);
/* Applies an output that does not come from the engine (a replay from the
 * response cache), as the engine's callback would; e and counters may be NULL
 * for such a gen, and nothing is submitted. */
void gen_feed(gen *g, int prompt, const engine_output *o);
/* Before the first output: every output goes to tap(arg, ...) too. */
void gen_set_tap(gen *g, gen_tap_fn tap, void *arg, void (*free_arg)(void *));
/* Caller holds the lock: removes the tap and hands its arg to the caller. */
void *gen_take_tap(gen *g);
/* Caller holds the lock: every choice finished with "stop" or "length". */
bool gen_succeeded(const gen *g);
/* Drops the HTTP side's reference. */
void gen_release(gen *g);

typedef enum { GEN_WOKEN, GEN_TIMEOUT, GEN_DISCONNECTED } gen_wait_result;
/* Waits until the engine reports something or the client of r goes away (see
 * http_client_gone), or timeout_ms passes. */
gen_wait_result gen_wait(gen *g, http_req *r, int timeout_ms);
/* Caller holds the lock: the next output calls waker(arg). */
void gen_arm_waker(gen *g, void (*waker)(http_req *), http_req *arg);

static inline void gen_lock(gen *g) { pthread_mutex_lock(&g->mu); }
static inline void gen_unlock(gen *g) { pthread_mutex_unlock(&g->mu); }

#endif
