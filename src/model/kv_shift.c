/* See kv_shift.h. RoPE's angle for pair i is pos * c_i (c_i from the base,
 * the linear scale and the frequency factors), so rotating by the angles of
 * `delta` moves a key from p to p + delta: R(p + delta) = R(delta) R(p). The
 * layer's rope is the one forward.c uses for it (Gemma 3's sliding layers
 * have their own base, unscaled; NoPE layers have none). */
#include "model/kv_shift.h"

#include "kernels/ops.h"

#define SHIFT_ROPE_MAX 4096 /* rope_dim <= head_dim <= 4096 (model/arch.c) */

void model_shift_keys(void *user, int layer, float *rows, int n_rows, int delta) {
    const kv_shift_ctx *c = user;
    const model_hparams *hp = &c->m->hp;
    float cs[SHIFT_ROPE_MAX];
    if (hp->no_rope[layer]) return; /* NoPE layers keep no position in their keys */
    /* (LongRoPE's attention factor is in the stored keys already: R(delta) alone.) */
    if (hp->is_swa[layer] && hparams_swa_own_rope(hp)) /* Gemma 3's own rope for sliding layers (forward.c) */
        rope_angles(cs, delta, hp->rope_dim, hp->rope_base_swa, 1.0f, NULL);
    else rope_angles(cs, delta, hp->rope_dim, hp->rope_base, hp->rope_pos_scale, c->rope_factors);
    if (hp->mla_kv_rank > 0) /* latent attention: the rope key follows the latent, pairs adjacent (mla.c) */
        rope_apply(rows + hp->mla_kv_rank, n_rows, hp->head_dim_k, hp->rope_dim, cs, ROPE_PAIRS_ADJACENT);
    else rope_apply(rows, n_rows, hp->head_dim_k, hp->rope_dim, cs, ROPE_PAIRS_HALVES);
}
