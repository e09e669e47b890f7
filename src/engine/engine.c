/* The engine loop; see engine.h. One step (engine_step): take new requests
 * and aborts from the inbox, propose speculative drafts, schedule a batch
 * (scheduler.c: who runs, and the KV block copies and compactions, only
 * recorded), have the model runner apply those and run the batch laid out
 * flat (tokens, positions, sequence of each token, block tables, rows that
 * need logits), then postprocess (postprocess.c): sample, verify drafts,
 * fork, detokenize, apply stop conditions, report. Beam requests go to
 * beam.c instead of the sampler. The calls run one way, from here down:
 * beam.c gets what it needs as a beam_env, and both end sequences through
 * finish.c.
 *
 * Speculative decoding: before scheduling, each decoding sequence may get
 * draft tokens (ngram.c, or the draft model of draft.c); the scheduler puts
 * them after its token in the batch, each with a logits row. After the
 * forward, verify_drafts walks the rows in order and emits tokens through
 * the same sample_and_report as ordinary decoding: each row's token is
 * sampled exactly as without drafts and the draft is accepted when it equals
 * that token. For a one-hot draft this is standard speculative rejection
 * sampling: the draft x is accepted with probability p(x), and a rejected
 * one is replaced by a token drawn from p without x, renormalized
 * (max(0, p - q)). Sampling each row as usual realizes that rule with one
 * draw per emitted token, as plain decoding makes, so a seeded request gives
 * the same tokens with or without speculation, not only the same
 * distribution. The walk stops at the first replaced token or stop
 * condition; after all drafts are accepted the last row gives one more
 * (bonus) token. Then the sequence's computed length drops to its verified
 * tokens and its block table is truncated (kvm_truncate), so rejected drafts
 * leave no trace. Medusa's drafts may form a tree (spec_tree.h): the nodes
 * sit in the batch in breadth-first order with ancestry masks, the walk goes
 * from a row to the child holding its sampled token (spec_walk), and the
 * accepted path's K/V rows move to the slots after the last token. */
#include "engine/engine.h"

#include "engine/engine_internal.h"

#include "engine/beam.h"
#include "engine/seq_constraint.h"
#include "engine/draft.h"
#include "model/head_slice.h"
#include "engine/finish.h"
#include "engine/ngram.h"
#include "engine/prompt_logprobs.h"
#include "engine/request.h"
#include "engine/scheduler.h"
#include "kv/kv_manager.h"
#include "model/forward.h"
#include "model/runner.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"
#include "util/threadpool.h"
#include "util/time.h"
#include "util/array.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* A request's draft-model blocks go back before it is freed. */
static void release_drafts(engine *e, request *r) {
    if (!e->draft) return;
    for (int i = 0; i < r->n_seqs; i++) draft_release(e->draft, &r->seqs[i]);
}

engine_config engine_config_defaults(void) {
    return (engine_config){.max_num_seqs = 64, .max_num_batched_tokens = 512, .max_model_len = 4096,
                           .block_size = 16, .kv_cache_bytes = (size_t)1 << 30, .kv_type = KV_F16,
                           .prefix_caching = true, .max_waiting = 1024, .spec = spec_config_defaults(),
                           .evict = {.policy = KV_EVICT_NONE, .sink = KV_EVICT_DEFAULT_SINK}};
}

request_params request_params_defaults(void) {
    return (request_params){.sampling = sampling_defaults(), .max_tokens = 16, .n = 1, .logprobs = -1, .prompt_logprobs = -1,
                            .length_penalty = 1.0f, .evict = {.policy = KV_EVICT_NONE, .sink = KV_EVICT_DEFAULT_SINK}};
}

const char *finish_reason_name(finish_reason r) {
    switch (r) {
    case FINISH_STOP: return "stop";
    case FINISH_LENGTH: return "length";
    case FINISH_ABORT: return "abort";
    case FINISH_ERROR: return "error";
    default: return "none";
    }
}

/* ---- creation ---- */

static int alloc_buffers(engine *e) {
    const int T = e->cfg.max_num_batched_tokens, S = e->cfg.max_num_seqs, V = e->m->hp.n_vocab, R = e->max_out;
    e->batch.seqs = calloc((size_t)S, sizeof *e->batch.seqs);
    e->b_tokens = malloc((size_t)T * sizeof *e->b_tokens);
    e->b_pos = malloc((size_t)T * sizeof *e->b_pos);
    e->b_seq = malloc((size_t)T * sizeof *e->b_seq);
    e->b_rope = malloc((size_t)T * sizeof *e->b_rope);
    e->b_tree = malloc((size_t)T * sizeof *e->b_tree);
    e->b_rows = malloc((size_t)R * sizeof *e->b_rows);
    e->b_seqs = calloc((size_t)S, sizeof *e->b_seqs);
    e->b_row_seq = calloc((size_t)R, sizeof *e->b_row_seq);
    e->logits = malloc((size_t)R * V * sizeof *e->logits);
    e->scratch = malloc((size_t)V * sizeof *e->scratch);
    e->raw = malloc((size_t)V * sizeof *e->raw);
    e->spec_seqs = calloc((size_t)S, sizeof *e->spec_seqs);
    e->spec_want = calloc((size_t)S, sizeof *e->spec_want);
    e->text_cap = 4096;
    e->text = malloc(e->text_cap);
    if (!e->batch.seqs || !e->b_tokens || !e->b_pos || !e->b_seq || !e->b_rope || !e->b_tree || !e->b_rows || !e->b_seqs ||
        !e->b_row_seq || !e->logits || !e->scratch || !e->raw || !e->text || !e->spec_seqs || !e->spec_want)
        return err_oom("out of memory allocating engine buffers");
    return 0;
}

static int collect_eog(engine *e) {
    const int nv = tokenizer_n_vocab(e->m->tok);
    int n = 0;
    for (int t = 0; t < nv; t++) n += tokenizer_is_eog(e->m->tok, t);
    e->eog_ids = malloc((size_t)(n ? n : 1) * sizeof *e->eog_ids);
    if (!e->eog_ids) return err_oom("out of memory");
    for (int t = 0; t < nv; t++)
        if (tokenizer_is_eog(e->m->tok, t)) e->eog_ids[e->n_eog_ids++] = t;
    return 0;
}

static int check_config(const engine_config *c) {
    if (c->max_num_seqs < 1 || c->max_num_seqs > 4096) return err_set("max_num_seqs must be in [1, 4096]");
    if (c->max_num_batched_tokens < 1) return err_set("max_num_batched_tokens must be at least 1");
    if (c->block_size != 8 && c->block_size != 16 && c->block_size != 32)
        return err_set("block size must be 8, 16 or 32 (got %d)", c->block_size);
    if (c->max_model_len < 1) return err_set("max_model_len must be at least 1");
    if (spec_config_check(&c->spec)) return err_prefix("speculative config: ");
    return 0;
}

/* layer_skip's "model": an exit adapter (model/medusa.h), not Medusa heads. */
static int load_exit_adapter(medusa_params *p, const model *m, const char *path) {
    if (medusa_load(p, m, path)) return err_prefix("speculative decoding: ");
    if (p->exit_layer) return 0;
    medusa_params_free(p);
    return err_set("speculative decoding: %s holds Medusa heads, not an exit adapter: use it with method \"medusa\" "
                   "(`cllm medusa train --kind exit` makes an adapter for layer_skip)",
                   path);
}

engine *engine_create(model *m, const engine_config *cfg) {
    if (check_config(cfg)) return NULL;
    medusa_params adapter = {0}; /* layer_skip's exit adapter until the draft takes it */
    engine *e = calloc(1, sizeof *e);
    if (!e) {
        err_oom("out of memory");
        return NULL;
    }
    e->m = m;
    e->cfg = *cfg;
    if (e->cfg.max_model_len > m->hp.n_ctx_train) e->cfg.max_model_len = m->hp.n_ctx_train;
    pthread_mutex_init(&e->mu, NULL);
    pthread_cond_init(&e->cv, NULL);
    pthread_mutex_init(&e->stats_mu, NULL);
    hist_init_seconds(&e->stats.ttft);
    hist_init_seconds(&e->stats.tpot);
    hist_init_seconds(&e->stats.e2e);
    hist_init_seconds(&e->stats.queue);

    if (kv_evict_check(&cfg->evict)) goto fail;
    if (m->tp.size > 1 && (cfg->evict.policy != KV_EVICT_NONE || cfg->spec.method == SPEC_LAYER_SKIP)) {
        /* Eviction moves KV rows and layer_skip runs a view of the sharded
         * model, neither of which the other ranks follow. */
        err_set("tensor parallelism does not combine with %s",
                cfg->evict.policy != KV_EVICT_NONE ? "KV eviction" : "layer_skip speculative decoding");
        goto fail;
    }
    if (cfg->evict.policy != KV_EVICT_NONE && cfg->evict.budget > e->cfg.max_model_len) {
        err_set("--kv-budget %d is more than the maximum context length of %d", cfg->evict.budget,
                e->cfg.max_model_len);
        goto fail;
    }
    kv_cache layout;
    kv_cache_layout(&m->kv, cfg->kv_type, cfg->block_size, &layout);
    const size_t block_bytes = kv_block_bytes(&layout);
    kv_manager probe = {.cache = &layout, .n_groups = layout.n_groups, .block_size = cfg->block_size};
    int need = kvm_blocks_needed(&probe, e->cfg.max_model_len, cfg->max_num_batched_tokens);
    /* With eviction a sequence holds no more than its budget, whatever max_model_len is. */
    if (cfg->evict.policy != KV_EVICT_NONE) {
        const int by_budget = kvm_blocks_needed_budget(&probe, cfg->evict.budget);
        if (by_budget < need) need = by_budget;
    }
    long n_blocks = cfg->kv_cache_blocks > 0 ? cfg->kv_cache_blocks : (long)(cfg->kv_cache_bytes / block_bytes);
    if (cfg->kv_cache_blocks <= 0 && cfg->kv_cache_bytes == 0) n_blocks = (long)need * cfg->max_num_seqs;
    if (n_blocks > (1L << 30)) n_blocks = 1L << 30;
    if (n_blocks < need) {
        if (cfg->evict.policy != KV_EVICT_NONE)
            err_set("the KV cache budget (%ld blocks of %zu bytes = %.1f MiB) cannot hold one sequence of "
                    "--kv-budget %d tokens, which needs %d blocks (%.1f MiB); raise the KV cache memory or "
                    "lower the budget",
                    n_blocks, block_bytes, n_blocks * (double)block_bytes / 1048576.0, cfg->evict.budget, need,
                    need * (double)block_bytes / 1048576.0);
        else
            err_set("the KV cache budget (%ld blocks of %zu bytes = %.1f MiB) cannot hold one request of "
                    "max_model_len %d tokens, which needs %d blocks (%.1f MiB); raise the KV cache memory or "
                    "lower max_model_len",
                    n_blocks, block_bytes, n_blocks * (double)block_bytes / 1048576.0, e->cfg.max_model_len,
                    need, need * (double)block_bytes / 1048576.0);
        goto fail;
    }
    /* The most sequences a speculating step holds. */
    const int n_spec = cfg->spec.disable_by_batch_size < cfg->max_num_seqs ? cfg->spec.disable_by_batch_size
                                                                            : cfg->max_num_seqs;
    if (cfg->spec.method != SPEC_NONE) { /* rows for the drafts of every one of them */
        const long rows = (long)n_spec * spec_max_draft(&cfg->spec);
        e->max_draft_rows = rows < cfg->max_num_batched_tokens ? (int)rows : cfg->max_num_batched_tokens;
    }
    e->max_out = cfg->max_num_seqs + e->max_draft_rows;
    const runner_config rc = {.kv_type = cfg->kv_type, .block_size = cfg->block_size, .n_blocks = (int)n_blocks,
                              .block_manager = true, .prefix_caching = cfg->prefix_caching,
                              .max_tokens = cfg->max_num_batched_tokens, .max_out = e->max_out,
                              .n_threads = cfg->n_threads, .n_ctx = e->cfg.max_model_len};
    if (runner_init(&e->run, m, &rc)) goto fail;
    e->run.kv->on_copy = m->tp.on_kv_copy; /* copy on write, on every rank */
    e->run.kv->on_copy_user = m->tp.user;
    if (sched_init(&e->sched, &e->run.kvm, cfg->max_num_seqs, cfg->max_num_batched_tokens)) goto fail;
    if (cfg->spec.method == SPEC_DRAFT_MODEL) {
        e->draft_model = model_load(cfg->spec.model);
        if (!e->draft_model) {
            err_prefix("speculative decoding: the draft model: ");
            goto fail;
        }
    } else if (cfg->spec.method == SPEC_LAYER_SKIP) {
        if (cfg->spec.model[0] && load_exit_adapter(&adapter, m, cfg->spec.model)) goto fail;
        const int n = cfg->spec.draft_layers ? cfg->spec.draft_layers
                      : adapter.exit_layer   ? adapter.exit_layer
                                             : (m->hp.n_layer + 1) / 2;
        if (n > m->hp.n_layer) {
            err_set("speculative config: draft_layers %d is more than the model's %d layers", n, m->hp.n_layer);
            goto fail;
        }
        if (adapter.exit_layer && n != adapter.exit_layer) {
            err_set("speculative config: draft_layers %d, but %s is an exit adapter after layer %d", n,
                    cfg->spec.model, adapter.exit_layer);
            goto fail;
        }
        e->draft_view = malloc(sizeof *e->draft_view);
        if (!e->draft_view) {
            err_oom("out of memory");
            goto fail;
        }
        *e->draft_view = *m; /* the first n layers, then the final norm and the output head */
        e->draft_view->hp.n_layer = n;
        e->draft_view->kv.n_layers = n;
    }
    if (cfg->spec.method == SPEC_MEDUSA) {
        e->medusa = medusa_drafter_create(m, cfg->spec.model, n_spec, cfg->spec.num_speculative_tokens,
                                          cfg->spec.token_tree, cfg->spec.draft_vocab_size);
        if (!e->medusa) {
            err_prefix("speculative decoding: ");
            goto fail;
        }
        e->medusa->p_min = cfg->spec.draft_p_min;
    }
    if (e->draft_model || e->draft_view) {
        const int n_draft_seqs = e->max_draft_rows / spec_max_draft(&cfg->spec);
        int32_t *vocab = NULL;
        const int n_vocab =
            cfg->spec.draft_vocab[0] ? head_slice_read_vocab(cfg->spec.draft_vocab, m, cfg->spec.draft_vocab_size, &vocab)
                                     : 0;
        e->draft = n_vocab < 0 ? NULL
                               : draft_create(e->draft_model ? e->draft_model : e->draft_view, m, n_draft_seqs > 0 ? n_draft_seqs : 1,
                                              e->cfg.max_model_len, cfg->max_num_batched_tokens, cfg->block_size,
                                              e->run.threads, vocab, n_vocab);
        free(vocab);
        if (e->draft && adapter.n_heads && draft_set_exit(e->draft, &adapter, cfg->spec.draft_vocab_size)) {
            err_prefix("speculative decoding: %s: ", cfg->spec.model);
            goto fail;
        }
        if (!e->draft) {
            err_prefix("speculative decoding: ");
            goto fail;
        }
    }
    e->smp = sampler_create(m->hp.n_vocab);
    e->cons.tok = m->tok;
    if (!e->smp || alloc_buffers(e) || collect_eog(e)) {
        if (!e->smp) err_oom("out of memory");
        goto fail;
    }
    e->beam = (beam_env){.tok = m->tok, .n_vocab = m->hp.n_vocab, .max_model_len = e->cfg.max_model_len,
                         .kvm = &e->run.kvm, .sched = &e->sched, .text = e->text, .text_cap = e->text_cap};
    e->stats.kv_blocks_total = (int)n_blocks;
    e->stats.spec_k = cfg->spec.method != SPEC_NONE ? spec_max_draft(&cfg->spec) : 0;
    return e;
fail:
    medusa_params_free(&adapter);
    engine_free(e);
    return NULL;
}

void engine_free(engine *e) {
    if (!e) return;
    engine_stop(e);
    for (int i = 0; i < e->n_live; i++) {
        release_drafts(e, e->live[i]);
        request_free(e->live[i]);
    }
    for (int i = 0; i < e->n_inbox; i++) request_free(e->inbox[i]);
    free(e->live);
    free(e->inbox);
    free(e->aborts);
    sched_destroy(&e->sched);
    sampler_free(e->smp);
    constrainer_free(&e->cons);
    draft_free(e->draft); /* before the runner: it runs on the runner's threads */
    medusa_drafter_free(e->medusa);
    runner_destroy(&e->run);
    model_free(e->draft_model);
    free(e->draft_view);
    free(e->eog_ids);
    free(e->batch.seqs);
    free(e->b_tokens);
    free(e->b_pos);
    free(e->b_seq);
    free(e->b_rope);
    free(e->b_tree);
    free(e->b_rows);
    free(e->b_seqs);
    free(e->b_row_seq);
    free(e->logits);
    free(e->scratch);
    free(e->raw);
    prompt_lp_free(&e->prompt_lp);
    free(e->spec_seqs);
    free(e->spec_want);
    free(e->text);
    pthread_mutex_destroy(&e->mu);
    pthread_cond_destroy(&e->cv);
    pthread_mutex_destroy(&e->stats_mu);
    free(e);
}

const engine_config *engine_get_config(const engine *e) { return &e->cfg; }

int engine_max_concurrency(const engine *e) {
    return e->run.kv->n_blocks / kvm_blocks_needed(&e->run.kvm, e->cfg.max_model_len, e->cfg.max_num_batched_tokens);
}

int engine_kv_capacity_tokens(const engine *e) {
    /* Tokens the cache holds when every group needs a block per block_size tokens
     * (sequences within the sliding window); longer ones fit more. */
    return (int)((long)e->run.kv->n_blocks * e->run.kv->block_size / e->run.kv->n_groups);
}

/* ---- submission (any thread) ---- */

static int check_request(const engine *e, const int32_t *prompt, int n_prompt, const request_params *p) {
    if (n_prompt < 1) return err_set("the prompt is empty");
    if (p->n < 1 || p->n > MAX_SAMPLES) return err_set("n must be in [1, %d]", MAX_SAMPLES);
    if (p->beam_width > MAX_SAMPLES) return err_set("beam_width must be at most %d", MAX_SAMPLES);
    if (p->beam_width > 1 && p->n > p->beam_width)
        return err_set("n (%d) must not exceed beam_width (%d)", p->n, p->beam_width);
    if (p->max_tokens < 0) return err_set("max_tokens must not be negative");
    if (p->constraint && p->beam_width > 1) return err_set("structured output does not combine with beam search");
    if (p->logprobs > MAX_LOGPROBS) return err_set("logprobs must be at most %d", MAX_LOGPROBS);
    if (p->prompt_logprobs > MAX_LOGPROBS) return err_set("prompt_logprobs must be at most %d", MAX_LOGPROBS);
    if (kv_evict_check(&p->evict)) return -1;
    const bool evicts = p->evict.policy != KV_EVICT_NONE;
    if (evicts && p->evict.budget > e->cfg.max_model_len)
        return err_set("kv_budget %d is more than the maximum context length of %d (KV positions stay below the "
                       "budget)",
                       p->evict.budget, e->cfg.max_model_len);
    if (evicts && p->beam_width > 1) return err_set("KV eviction does not combine with beam search");
    if (evicts && e->m->tp.size > 1) return err_set("KV eviction does not combine with tensor parallelism");
    if (!evicts && (long)n_prompt + p->max_tokens > e->cfg.max_model_len)
        return err_set("the prompt (%d tokens) plus max_tokens (%d) is %ld tokens, more than the maximum "
                       "context length of %d",
                       n_prompt, p->max_tokens, (long)n_prompt + p->max_tokens, e->cfg.max_model_len);
    const int nv = e->m->hp.n_vocab;
    for (int i = 0; i < n_prompt; i++)
        if (prompt[i] < 0 || prompt[i] >= nv) return err_set("token id %d is out of range [0, %d)", prompt[i], nv);
    const int need = evicts ? kvm_blocks_needed_budget(&e->run.kvm, p->evict.budget)
                            : kvm_blocks_needed(&e->run.kvm, n_prompt + p->max_tokens, e->cfg.max_num_batched_tokens);
    if (need > e->run.kv->n_blocks)
        return err_set("the request needs %d KV blocks but the whole cache has %d", need, e->run.kv->n_blocks);
    return 0;
}

int engine_submit(engine *e, const int32_t *prompt, int n_prompt, const request_params *p,
                  engine_output_fn on_output, void *user, uint64_t *id) {
    if (check_request(e, prompt, n_prompt, p)) return -1;
    pthread_mutex_lock(&e->mu);
    if (e->cfg.max_waiting > 0 && e->n_unfinished >= e->cfg.max_waiting + e->cfg.max_num_seqs) {
        pthread_mutex_unlock(&e->mu);
        return err_set("queue full: %d requests are waiting or running", e->n_unfinished);
    }
    const uint64_t rid = ++e->next_id;
    pthread_mutex_unlock(&e->mu);
    request *r = request_create(rid, prompt, n_prompt, p);
    if (!r) return -1;
    r->on_output = on_output;
    r->user = user;
    r->t_arrival = now_seconds();
    pthread_mutex_lock(&e->mu);
    if (array_reserve((void **)&e->inbox, &e->cap_inbox, (size_t)e->n_inbox + 1, sizeof *e->inbox)) {
        pthread_mutex_unlock(&e->mu);
        request_free(r);
        return -1;
    }
    e->inbox[e->n_inbox++] = r;
    e->n_unfinished++;
    pthread_cond_signal(&e->cv);
    pthread_mutex_unlock(&e->mu);
    if (id) *id = rid;
    return 0;
}

void engine_abort(engine *e, uint64_t id) {
    pthread_mutex_lock(&e->mu);
    if (!array_reserve((void **)&e->aborts, &e->cap_aborts, (size_t)e->n_aborts + 1, sizeof *e->aborts))
        e->aborts[e->n_aborts++] = id;
    pthread_cond_signal(&e->cv);
    pthread_mutex_unlock(&e->mu);
}

void engine_abort_all(engine *e) {
    pthread_mutex_lock(&e->mu);
    e->abort_all = true;
    pthread_cond_signal(&e->cv);
    pthread_mutex_unlock(&e->mu);
}

bool engine_has_work(engine *e) {
    pthread_mutex_lock(&e->mu);
    bool w = e->n_unfinished > 0 || e->n_aborts > 0;
    pthread_mutex_unlock(&e->mu);
    return w;
}

/* ---- outputs ---- */

static void observe_finished(engine *e, request *r) {
    int max_out = 0;
    for (int i = 0; i < r->n_seqs; i++) {
        int n = seq_n_output(&r->seqs[i]);
        if (n > max_out) max_out = n;
    }
    pthread_mutex_lock(&e->stats_mu);
    e->stats.requests_finished++;
    hist_observe(&e->stats.e2e, r->t_finished - r->t_arrival);
    if (r->t_scheduled > 0) hist_observe(&e->stats.queue, r->t_scheduled - r->t_arrival);
    if (r->t_first_token > 0) hist_observe(&e->stats.ttft, r->t_first_token - r->t_arrival);
    if (max_out > 1) hist_observe(&e->stats.tpot, (r->t_finished - r->t_first_token) / (max_out - 1));
    pthread_mutex_unlock(&e->stats_mu);
}

void engine_finish_seq(engine *e, sequence *s, finish_reason why, const int32_t *tok, const token_logprobs *lp,
                       const char *text, size_t text_len) {
    finish_sequence(&e->sched, s, why, tok, tok ? 1 : 0, lp, text, text_len, true);
}

/* Ends every sample of a request, those not yet forked too: a request with
 * max_tokens 0 that computed its prompt (for prompt_logprobs) ends with the
 * prompt's logprobs and no tokens. */
void engine_finish_request(engine *e, request *r, finish_reason why) {
    for (int k = 0; k < r->n_seqs; k++)
        finish_sequence(&e->sched, &r->seqs[k], why, NULL, 0, NULL, "", 0, k < r->params.n);
}

static void remove_live(engine *e, request *r) {
    for (int i = 0; i < e->n_live; i++)
        if (e->live[i] == r) {
            e->live[i] = e->live[--e->n_live];
            break;
        }
    pthread_mutex_lock(&e->mu);
    e->n_unfinished--;
    pthread_mutex_unlock(&e->mu);
}

/* Frees requests whose every sequence has finished. */
static void reap(engine *e) {
    for (int i = e->n_live - 1; i >= 0; i--) {
        request *r = e->live[i];
        if (r->n_finished < r->n_seqs) continue;
        r->t_finished = now_seconds();
        observe_finished(e, r);
        remove_live(e, r);
        release_drafts(e, r);
        request_free(r);
    }
}

static void abort_request(engine *e, request *r) {
    for (int i = 0; i < r->n_seqs; i++)
        if (r->seqs[i].status != SEQ_FINISHED)
            finish_sequence(&e->sched, &r->seqs[i], FINISH_ABORT, NULL, 0, NULL, "", 0, i < r->params.n);
}

/* ---- inbox ---- */

static void take_inbox(engine *e) {
    pthread_mutex_lock(&e->mu);
    request **in = e->inbox;
    int n_in = e->n_inbox;
    uint64_t *ab = e->aborts;
    int n_ab = e->n_aborts;
    bool all = e->abort_all;
    e->inbox = NULL, e->n_inbox = 0, e->cap_inbox = 0;
    e->aborts = NULL, e->n_aborts = 0, e->cap_aborts = 0;
    e->abort_all = false;
    pthread_mutex_unlock(&e->mu);

    for (int i = 0; i < n_in; i++) {
        request *r = in[i];
        if (array_reserve((void **)&e->live, &e->cap_live, (size_t)e->n_live + 1, sizeof *e->live) ||
            sched_add_waiting(&e->sched, &r->seqs[0])) {
            engine_finish_request(e, r, FINISH_ERROR);
            pthread_mutex_lock(&e->mu);
            e->n_unfinished--;
            pthread_mutex_unlock(&e->mu);
            request_free(r);
            continue;
        }
        e->live[e->n_live++] = r;
        if (r->params.max_tokens == 0 && r->params.prompt_logprobs < 0) /* nothing to generate or score */
            engine_finish_request(e, r, FINISH_LENGTH);
    }
    for (int i = 0; i < e->n_live; i++) {
        bool hit = all;
        for (int k = 0; k < n_ab && !hit; k++) hit = ab[k] == e->live[i]->id;
        if (hit) abort_request(e, e->live[i]);
    }
    free(in);
    free(ab);
}

/* ---- speculative decoding ---- */

/* Gives each decoding sequence its drafts for this step (n-gram lookup's,
 * the Medusa heads' guesses, or the draft model's, run for all of them at
 * the end; with lookup_first, lookup's where it finds any), unless more
 * sequences run than disable_by_batch_size (then a step is compute-bound
 * and drafts no longer pay). */
static void propose_drafts(engine *e) {
    const spec_config *c = &e->cfg.spec;
    for (int i = 0; i < e->sched.running.n; i++) {
        e->sched.running.items[i]->spec.n_draft = 0;
        e->sched.running.items[i]->spec.tree = false;
    }
    if (c->method == SPEC_NONE || e->sched.running.n > c->disable_by_batch_size) return;
    int rows_left = e->max_draft_rows, n_model = 0;
    for (int i = 0; i < e->sched.running.n && rows_left > 0; i++) {
        sequence *s = e->sched.running.items[i];
        const request_params *p = &s->req->params;
        if (p->beam_width > 1 || seq_evicts(s) || s->n_tokens - s->n_computed != 1) continue;
        if (s->spec.k == 0) s->spec.k = c->num_speculative_tokens;
        if (s->spec.lookup_k == 0) s->spec.lookup_k = spec_lookup_max(c);
        /* Every draft accepted plus the bonus token must stay within max_tokens
         * and max_model_len, so the drafts' positions have blocks reserved. */
        int room = p->max_tokens - seq_n_output(s) - 1;
        if (room > e->cfg.max_model_len - s->n_tokens - 1) room = e->cfg.max_model_len - s->n_tokens - 1;
        if (room > rows_left) room = rows_left;
        const int k = s->spec.k < room ? s->spec.k : room;
        s->spec.lookup = false;
        if (room > 0 && (c->method == SPEC_NGRAM || c->lookup_first)) {
            /* Text that repeats is drafted from itself for free; the method's drafts cover the rest. */
            int32_t found[SPEC_MAX_TOKENS];
            const int want = c->method == SPEC_NGRAM ? k : s->spec.lookup_k < room ? s->spec.lookup_k : room;
            const int n =
                ngram_propose(s->tokens, s->n_tokens, c->prompt_lookup_min, c->prompt_lookup_max, want, found);
            if (n > 0 || c->method == SPEC_NGRAM) {
                /* The draft model's K/V are first checked against its own last drafts, which these replace. */
                if (e->draft) draft_rollback(e->draft, s);
                memcpy(s->spec.draft, found, (size_t)n * sizeof *found);
                s->spec.n_draft = n;
                s->spec.lookup = c->method != SPEC_NGRAM;
                s->spec.base = s->n_tokens;
                rows_left -= n;
                if (s->spec.skip > 0) s->spec.skip--;
                continue;
            }
        }
        if (s->spec.skip > 0) { /* backing off after drafts that all failed */
            s->spec.skip--;
            continue;
        }
        if (k <= 0) continue;
        if (e->draft) { /* the draft model proposes for all of them below */
            e->spec_seqs[n_model] = s;
            e->spec_want[n_model++] = k;
            rows_left -= k;
            continue;
        }
        if (e->medusa) {
            s->spec.n_draft = medusa_drafter_take(e->medusa, s, k);
            rows_left -= s->spec.n_draft;
        }
    }
    if (n_model > 0) draft_propose(e->draft, e->spec_seqs, e->spec_want, n_model, c->draft_p_min);
}

/* ---- the step ---- */

static void update_gauges(engine *e) {
    /* Token slots holding K/V: per live block, the computed positions it covers. */
    int tokens_used = 0;
    const int bs = e->run.kv->block_size;
    for (int i = 0; i < e->sched.running.n; i++) {
        const sequence *s = e->sched.running.items[i];
        for (int g = 0; g < e->run.kvm.n_groups; g++) {
            const block_list *l = &s->kv.lists[g];
            for (int b = 0; b < l->n; b++) {
                const int filled = seq_kv_len(s) - b * bs;
                if (l->ids[b] >= 0 && filled > 0) tokens_used += filled < bs ? filled : bs;
            }
        }
    }
    pthread_mutex_lock(&e->stats_mu);
    e->stats.n_running = e->sched.running.n;
    e->stats.n_waiting = e->sched.waiting.n;
    e->stats.kv_blocks_used = pool_n_in_use(e->run.kvm.pool);
    e->stats.kv_tokens_used = tokens_used;
    e->stats.prefix_queries = e->run.kvm.prefix_queries;
    e->stats.prefix_hits = e->run.kvm.prefix_hits;
    e->stats.preemptions = e->sched.n_preemptions;
    e->stats.kv_evictions = e->sched.evict.n_evictions;
    e->stats.kv_evicted_tokens = e->sched.evict.n_evicted_tokens;
    forward_moe_counts(e->run.fwd, &e->stats.moe_layer_steps, &e->stats.moe_experts_read);
    pthread_mutex_unlock(&e->stats_mu);
}

/* A draft tree's masks and rotary positions for sequence s, whose tokens
 * start at batch token t0: its last token is the root (bit 0, at KV
 * position base), draft j is node j + 1 at base + 1 + j, rotated at base +
 * its depth. */
static void layout_tree(engine *e, const sequence *s, int t0, fwd_seq *fs) {
    const int base = s->n_tokens - 1 - s->n_evicted, root = t0 + s->n_scheduled - 1 - s->spec.n_draft;
    fs->tree_base = base;
    e->b_tree[root] = 1u, e->b_rope[root] = base;
    for (int j = 0; j < s->spec.n_draft; j++) {
        const int up = s->spec.parent[j] < 0 ? root : root + 1 + s->spec.parent[j];
        e->b_tree[root + 1 + j] = e->b_tree[up] | 1u << (j + 1);
        e->b_rope[root + 1 + j] = e->b_rope[up] + 1;
    }
}

static int layout_batch(engine *e, fwd_batch *fb) {
    const sched_batch *b = &e->batch;
    int t = 0, n_rows = 0;
    bool trees = false;
    for (int i = 0; i < b->n_seqs; i++) {
        sequence *s = b->seqs[i];
        const int t0 = t;
        e->b_seqs[i].tree_base = 0;
        for (int k = 0; k < s->n_scheduled; k++, t++) {
            const int at = s->n_computed + k; /* past n_tokens: a draft */
            e->b_tokens[t] = at < s->n_tokens ? s->tokens[at] : s->spec.draft[at - s->n_tokens];
            e->b_pos[t] = at - s->n_evicted;
            e->b_rope[t] = e->b_pos[t];
            e->b_tree[t] = 0;
            e->b_seq[t] = i;
            if (at >= s->n_tokens - 1) { /* the last known token and each draft: logits */
                e->b_rows[n_rows] = t;
                e->b_row_seq[n_rows++] = s;
            }
        }
        if (s->spec.tree && s->spec.n_draft > 0) {
            layout_tree(e, s, t0, &e->b_seqs[i]);
            trees = true;
        }
        for (int g = 0; g < e->run.kvm.n_groups; g++) e->b_seqs[i].block_table[g] = kvm_table(&s->kv, g);
        e->b_seqs[i].attn_acc = s->attn_acc;
        if (s->req->t_scheduled == 0) {
            s->req->t_scheduled = now_seconds();
            pthread_mutex_lock(&e->stats_mu);
            e->stats.prompt_tokens += (uint64_t)s->n_prompt;
            pthread_mutex_unlock(&e->stats_mu);
        }
    }
    *fb = (fwd_batch){.n_tokens = t, .tokens = e->b_tokens, .pos = e->b_pos, .seq = e->b_seq,
                      .n_seqs = b->n_seqs, .seqs = e->b_seqs, .n_out = n_rows, .out_rows = e->b_rows,
                      .tree = trees ? e->b_tree : NULL, .rope_pos = trees ? e->b_rope : NULL};
    return n_rows;
}

/* A sequence the whole pool cannot hold ends with an error rather than being
 * recomputed and preempted forever (check_request sizes requests so that
 * this should not happen; it is the guard that keeps the loop live). */
static void end_starved(engine *e) {
    for (int i = e->sched.waiting.n - 1; i >= 0; i--) {
        sequence *s = e->sched.waiting.items[i];
        if (!s->kv_starved) continue;
        engine_finish_seq(e, s, FINISH_ERROR, NULL, NULL, "", 0);
    }
}

int engine_step(engine *e) {
    take_inbox(e);
    reap(e);
    propose_drafts(e);
    sched_schedule(&e->sched, &e->batch);
    end_starved(e);
    /* The block copies and compactions the schedule decided, before anything reads the cache. */
    const int applied = runner_apply(&e->run);
    if (e->batch.n_seqs > 0) {
        fwd_batch fb;
        const int n_rows = layout_batch(e, &fb);
        if (applied || runner_run(&e->run, &fb, e->logits)) {
            for (int i = 0; i < e->batch.n_seqs; i++)
                engine_finish_seq(e, e->batch.seqs[i], FINISH_ERROR, NULL, NULL, "", 0);
        } else {
            postprocess(e, n_rows);
        }
    }
    reap(e);
    update_gauges(e);
    pthread_mutex_lock(&e->mu);
    int n = e->n_unfinished;
    pthread_mutex_unlock(&e->mu);
    return n;
}

/* ---- loop thread ---- */

static void *loop_main(void *p) {
    engine *e = p;
    for (;;) {
        pthread_mutex_lock(&e->mu);
        while (!e->loop_stop && e->n_unfinished == 0 && e->n_aborts == 0 && !e->abort_all)
            pthread_cond_wait(&e->cv, &e->mu);
        bool stop = e->loop_stop;
        pthread_mutex_unlock(&e->mu);
        if (stop) return NULL;
        engine_step(e);
    }
}

int engine_start(engine *e) {
    if (e->loop_running) return 0;
    e->loop_stop = false;
    if (pthread_create(&e->loop, NULL, loop_main, e)) return err_set("cannot start the engine thread");
    e->loop_running = true;
    return 0;
}

void engine_stop(engine *e) {
    if (!e->loop_running) return;
    pthread_mutex_lock(&e->mu);
    e->loop_stop = true;
    pthread_cond_signal(&e->cv);
    pthread_mutex_unlock(&e->mu);
    pthread_join(e->loop, NULL);
    e->loop_running = false;
}

void engine_get_stats(engine *e, engine_stats *out) {
    pthread_mutex_lock(&e->stats_mu);
    *out = e->stats;
    pthread_mutex_unlock(&e->stats_mu);
}
