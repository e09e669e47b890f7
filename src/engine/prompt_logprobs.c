/* See prompt_logprobs.h. */
#include "engine/prompt_logprobs.h"

#include "engine/logprobs.h"
#include "util/error.h"
#include "util/top_k.h"

#include <stdlib.h>

/* Logits rows per output-head call: each call streams the whole output
 * matrix, so more rows read it fewer times; 32 rows of a 262k vocabulary
 * are 32 MiB. */
#define PROMPT_LP_ROWS 32

static int ensure_scratch(prompt_lp_scratch *sc, int max_out, int n_vocab) {
    if (sc->logits) return 0;
    sc->max_rows = max_out < PROMPT_LP_ROWS ? max_out : PROMPT_LP_ROWS;
    sc->logits = malloc((size_t)sc->max_rows * n_vocab * sizeof *sc->logits);
    sc->rows = malloc((size_t)sc->max_rows * sizeof *sc->rows);
    sc->row_seq = malloc((size_t)sc->max_rows * sizeof *sc->row_seq);
    sc->row_pos = malloc((size_t)sc->max_rows * sizeof *sc->row_pos);
    if (!sc->logits || !sc->rows || !sc->row_seq || !sc->row_pos) {
        prompt_lp_free(sc);
        return err_oom("out of memory for prompt logprobs (%d rows of %d logits)", PROMPT_LP_ROWS, n_vocab);
    }
    return 0;
}

/* Entry `pos` of the request's prompt logprobs from the logits that predict it. */
static void fill_position(request *r, int pos, const float *logits, int n_vocab) {
    const int k = r->params.prompt_logprobs, stride = k ? k : 1;
    const int32_t tok = r->seqs[0].tokens[pos];
    int32_t *top_tok = r->prompt_top_tok + (size_t)pos * stride;
    float *top_lp = r->prompt_top_lp + (size_t)pos * stride;
    const float lse = logprobs_logsumexp(logits, n_vocab);
    const int n_top = top_k_indices(logits, n_vocab, k, NULL, NULL, top_tok);
    int rank = 0;
    for (int i = 0; i < n_top; i++) {
        top_lp[i] = logits[top_tok[i]] - lse;
        if (top_tok[i] == tok && !rank) rank = i + 1; /* as vLLM, whose top-k entry wins for the same id */
    }
    if (!rank) rank = logprobs_rank(logits, n_vocab, tok);
    r->prompt_lps[pos] = (token_logprobs){.token = tok, .logprob = logits[tok] - lse, .rank = rank, .n_top = n_top,
                                          .top_tokens = top_tok, .top_logprobs = top_lp};
}

typedef struct {
    const prompt_lp_scratch *sc;
    int n_vocab;
} fill_job;

static void fill_rows(void *p, long lo, long hi) {
    const fill_job *j = p;
    for (long i = lo; i < hi; i++)
        fill_position(j->sc->row_seq[i]->req, j->sc->row_pos[i], j->sc->logits + (size_t)i * j->n_vocab, j->n_vocab);
}

/* The output head over this group's rows, then their entries, a row per thread. */
static int flush(prompt_lp_scratch *sc, forward_ctx *f, threadpool *threads, int n_vocab, int n) {
    if (n == 0) return 0;
    if (forward_logits(f, sc->rows, n, sc->logits)) return -1;
    fill_job j = {sc, n_vocab};
    threadpool_for(threads, n, 1, fill_rows, &j);
    return 0;
}

int prompt_lp_collect(prompt_lp_scratch *sc, forward_ctx *f, threadpool *threads, int max_out, int n_vocab,
                      sequence *const *seqs, int n_seqs) {
    int t = 0, n = 0;
    for (int i = 0; i < n_seqs; i++) {
        sequence *s = seqs[i];
        const int first = t;
        t += s->n_scheduled;
        if (!seq_wants_prompt_logits(s)) continue;
        if (ensure_scratch(sc, max_out, n_vocab)) return -1;
        /* Position `at` predicts prompt token at + 1; the last prompt token's row is the sampler's. */
        for (int k = 0; k < s->n_scheduled; k++) {
            const int at = s->n_computed + k;
            if (at + 1 >= s->n_prompt) break;
            if (n == sc->max_rows) {
                if (flush(sc, f, threads, n_vocab, n)) return -1;
                n = 0;
            }
            sc->rows[n] = first + k;
            sc->row_seq[n] = s;
            sc->row_pos[n++] = at + 1;
        }
    }
    if (flush(sc, f, threads, n_vocab, n)) return -1;
    for (int i = 0; i < n_seqs; i++)
        if (seq_wants_prompt_logits(seqs[i]) && seqs[i]->n_computed + seqs[i]->n_scheduled >= seqs[i]->n_prompt)
            seqs[i]->req->prompt_lps_done = true;
    return 0;
}

void prompt_lp_free(prompt_lp_scratch *sc) {
    free(sc->logits);
    free(sc->rows);
    free(sc->row_seq);
    free(sc->row_pos);
    *sc = (prompt_lp_scratch){0};
}
