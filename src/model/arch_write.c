/* The hyper-parameters as GGUF metadata: the {arch}.* keys hparams_from_gguf
 * reads, written so that reading them back gives the same model_hparams.
 * Used when a model that did not come from a GGUF file (a Hugging Face
 * folder) is written as one. Keys llama.cpp knows are used where they exist;
 * where a value is what the reader would assume anyway it is still written
 * (explicit beats implicit for other readers), except the attention scale,
 * which only a file that departs from 1/sqrt(head_dim) carries. */
#include "model/arch.h"

#include "format/gguf_write.h"
#include "util/error.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>

static int put_u32(gguf_writer *w, const char *arch, const char *suffix, int v) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    return gguf_writer_set_u32(w, key, (uint32_t)v);
}

static int put_f32(gguf_writer *w, const char *arch, const char *suffix, float v) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    return gguf_writer_set_f32(w, key, v);
}

int hparams_to_gguf(const model_hparams *hp, gguf_writer *w) {
    const char *a = hp->traits->name;
    if (gguf_writer_set_str(w, "general.architecture", a) || put_u32(w, a, "context_length", hp->n_ctx_train) ||
        put_u32(w, a, "embedding_length", hp->n_embd) || put_u32(w, a, "block_count", hp->n_layer) ||
        put_u32(w, a, "feed_forward_length", hp->n_ff) || put_u32(w, a, "attention.head_count", hp->n_head) ||
        put_u32(w, a, "attention.head_count_kv", hp->n_head_kv) ||
        put_u32(w, a, "attention.key_length", hp->head_dim_k) ||
        put_u32(w, a, "attention.value_length", hp->head_dim_v) ||
        put_u32(w, a, "rope.dimension_count", hp->rope_dim) ||
        put_f32(w, a, "attention.layer_norm_rms_epsilon", hp->norm_eps) ||
        put_f32(w, a, "rope.freq_base", hp->rope_base))
        return -1;
    if (hp->rope_pos_scale != 1.0f) {
        char key[128];
        snprintf(key, sizeof key, "%s.rope.scaling.type", a);
        if (gguf_writer_set_str(w, key, "linear") || put_f32(w, a, "rope.scaling.factor", 1.0f / hp->rope_pos_scale))
            return -1;
    }
    if (hp->rope_yarn_factor > 0) {
        char key[128];
        snprintf(key, sizeof key, "%s.rope.scaling.type", a);
        const float attn = hp->rope_attn_factor / rope_yarn_mscale(hp->rope_yarn_factor); /* the reader multiplies */
        if (gguf_writer_set_str(w, key, "yarn") || put_f32(w, a, "rope.scaling.factor", hp->rope_yarn_factor) ||
            put_u32(w, a, "rope.scaling.original_context_length", hp->rope_yarn_orig_ctx) ||
            put_f32(w, a, "rope.scaling.yarn_beta_fast", hp->rope_yarn_beta_fast) ||
            put_f32(w, a, "rope.scaling.yarn_beta_slow", hp->rope_yarn_beta_slow) ||
            (attn != 1.0f && !hp->traits->mla && put_f32(w, a, "rope.scaling.yarn_attn_factor", attn)) ||
            (hp->rope_yarn_log_mul > 0 && put_f32(w, a, "rope.scaling.yarn_log_multiplier", hp->rope_yarn_log_mul)))
            return -1;
        snprintf(key, sizeof key, "%s.rope.scaling.yarn_truncate", a);
        if (!hp->rope_yarn_truncate && gguf_writer_set_bool(w, key, false)) return -1;
    }
    if (hp->traits->act == ACT_SWIGLU_OAI &&
        (put_f32(w, a, "swiglu_alpha", hp->swiglu_alpha) || put_f32(w, a, "swiglu_limit", hp->swiglu_limit)))
        return -1;
    if (!hp->traits->mla && hp->attn_scale != 1.0f / sqrtf((float)hp->head_dim_k) &&
        put_f32(w, a, "attention.scale", hp->attn_scale))
        return -1;
    if (hp->traits->mla) { /* the reader computes the q.k scale from these */
        int dense = 0;
        while (dense < hp->n_layer && hp->dense_ffn[dense]) dense++;
        if (put_u32(w, a, "attention.kv_lora_rank", hp->mla_kv_rank) ||
            (hp->mla_q_rank > 0 && put_u32(w, a, "attention.q_lora_rank", hp->mla_q_rank)) ||
            put_u32(w, a, "attention.key_length_mla", hp->mla_nope_dim + hp->rope_dim) ||
            put_u32(w, a, "attention.value_length_mla", hp->mla_v_dim) ||
            put_u32(w, a, "leading_dense_block_count", dense) ||
            (hp->n_ff_shexp > 0 && put_u32(w, a, "expert_shared_count", hp->n_ff_shexp / hp->n_ff_exp)) ||
            (hp->n_expert_groups > 1 && (put_u32(w, a, "expert_group_count", hp->n_expert_groups) ||
                                         put_u32(w, a, "expert_group_used_count", hp->n_group_used))))
            return -1;
    }
    if (hp->traits->multipliers &&
        (put_f32(w, a, "embedding_scale", hp->embd_scale) || put_f32(w, a, "residual_scale", hp->residual_scale) ||
         put_f32(w, a, "logit_scale", 1.0f / hp->logit_scale)))
        return -1;
    if (hp->traits->longrope && hp->rope_orig_ctx > 0 &&
        (put_u32(w, a, "rope.scaling.original_context_length", hp->rope_orig_ctx) ||
         put_f32(w, a, "rope.scaling.attn_factor", hp->rope_attn_factor)))
        return -1;
    if (hp->traits->softcaps && (put_f32(w, a, "attn_logit_softcapping", hp->attn_softcap) ||
                                 put_f32(w, a, "final_logit_softcapping", hp->final_softcap)))
        return -1;
    /* NoPE layers have no key of their own: readers (llama.cpp too) take the family's period. */
    for (int il = 0; il < hp->n_layer; il++) {
        const int p = hp->traits->nope_period;
        if (hp->no_rope[il] != (p > 0 && (il + 1) % p == 0))
            return err_set("layer %d's NoPE setting differs from %s's every-%d-th-layer pattern, which GGUF cannot "
                           "state", il, a, p);
    }
    if (hp->n_expert > 0) {
        char key[128];
        snprintf(key, sizeof key, "%s.expert_weights_norm", a);
        if (put_u32(w, a, "expert_count", hp->n_expert) || put_u32(w, a, "expert_used_count", hp->n_expert_used) ||
            put_u32(w, a, "expert_feed_forward_length", hp->n_ff_exp) ||
            (hp->n_ff_shexp > 0 && put_u32(w, a, "expert_shared_feed_forward_length", hp->n_ff_shexp)) ||
            put_u32(w, a, "expert_gating_func", (int)hp->gating) ||
            put_f32(w, a, "expert_weights_scale", hp->expert_scale) ||
            gguf_writer_set_bool(w, key, hp->expert_norm))
            return -1;
    }
    if (hp->traits->swa_pattern == 0 && hp->n_swa > 0 && put_u32(w, a, "attention.sliding_window", hp->n_swa))
        return -1;
    if (hp->traits->swa_pattern > 0) {
        uint8_t pattern[CLLM_MAX_LAYERS]; /* GGUF bools are one byte */
        for (int il = 0; il < hp->n_layer; il++) pattern[il] = hp->is_swa[il];
        char key[128];
        snprintf(key, sizeof key, "%s.attention.sliding_window_pattern", a);
        if (put_u32(w, a, "attention.sliding_window", hp->n_swa) ||
            put_f32(w, a, "rope.freq_base_swa", hp->rope_base_swa) ||
            gguf_writer_set_arr(w, key, GGUF_TYPE_BOOL, pattern, (uint64_t)hp->n_layer))
            return -1;
    }
    return 0;
}
