/* A draft model for speculative decoding ("method": "draft_model"): a
 * smaller model with the target's vocabulary, run in the same process on the
 * engine's threads, with its own small paged KV pool. Each step it proposes
 * greedy drafts for the speculating sequences: one batched forward to catch
 * each sequence up with the tokens the target accepted since its last turn,
 * then one batched forward per further draft token. After the target's
 * verification, the sequence's draft KV is cut back to the verified tokens.
 * Greedy drafts are one-hot, so the engine's acceptance rule (sample the row,
 * keep a draft equal to it) stays exact. */
#ifndef CLLM_ENGINE_DRAFT_H
#define CLLM_ENGINE_DRAFT_H

#include "engine/request.h"
#include "model/medusa.h"
#include "model/model.h"
#include "util/threadpool.h"

typedef struct draft_runner draft_runner;

/* NULL with err_get() when the draft's vocabulary differs from the target's
 * (size or any token's text) or on allocation failure. The pool holds
 * `n_seqs` sequences of max_model_len tokens; forwards take at most
 * max_tokens tokens. With vocab (n_vocab > 0 ids), the draft scores only
 * those tokens (model/head_slice.h: it reads only their rows of its output
 * matrix), so its drafts are always among them. */
draft_runner *draft_create(const model *draft, const model *target, int n_seqs, int max_model_len,
                           int max_tokens, int block_size, threadpool *threads, const int32_t *vocab,
                           int n_vocab);
void draft_free(draft_runner *d);

/* An exit adapter for a layer_skip draft (model/medusa.h; `cllm medusa train
 * --kind exit`): the draft's rows go from its last layer's final-normed
 * state through the adapter's block to the adapter's own draft vocabulary,
 * instead of straight to the output head. Takes *p (zeroed on success; the
 * first vocab_size tokens of its vocabulary when 0 < vocab_size); its
 * exit_layer must be the draft's layer count, and the draft made without a
 * vocab of its own. 0, or -1 with err_get(). */
int draft_set_exit(draft_runner *d, medusa_params *p, int vocab_size);

/* For each of the n sequences, up to want[i] greedy draft tokens into
 * seqs[i]->spec.draft and seqs[i]->spec.n_draft (0 when the sequence is still being
 * caught up, or the pool is full). With p_min > 0, a draft the draft model
 * gave a probability under p_min (spec.conf) is the sequence's last: its
 * further drafts would likely be rejected, and each costs a forward pass. */
void draft_propose(draft_runner *d, sequence **seqs, const int *want, int n, float p_min);
/* After verification: the draft KV keeps only positions < s->n_computed. */
void draft_rollback(draft_runner *d, sequence *s);
/* The sequence is done (finished, freed): its draft blocks go back. */
void draft_release(draft_runner *d, sequence *s);

#endif
