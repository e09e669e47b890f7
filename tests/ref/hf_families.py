"""Tiny seeded checkpoints of each model family, made by transformers' own
classes (LlamaForCausalLM, Qwen3ForCausalLM, ...) and saved with
save_pretrained in float32, with every feature of the family switched on
(llama3 rope past the original context, a sliding window shorter than the
test prompt, soft-caps, NoPE layers, multipliers, tied embeddings). The
reference logits are transformers' own float32 forward pass of the same
model: an implementation cllm shares nothing with.

Each folder also gets a tokenizer: tokenizer.json (Hugging Face `tokenizers`,
which cllm reads) and tokenizer.model (SentencePiece, which llama.cpp's
convert_hf_to_gguf.py reads) for one vocabulary, make_model.build_vocab's.

    python3 tests/ref/hf_families.py FAMILY DIR   # writes DIR (a command-line check)
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from typing import Dict, Optional

from pathlib import Path

import numpy as np

import make_hf
import make_model

REPO = Path(__file__).resolve().parents[2]
N_VOCAB = 400
LAYERS = 4


@dataclass
class Family:
    """What transformers builds: config class and model class names, the
    config's values, and the model_type cllm reads."""
    config_class: str
    model_class: str
    config: dict
    tied: bool = False
    norm_plus_one: bool = False  # Gemma: norm weights are offsets from 1
    weight_scale: Optional[dict] = None  # parameter name suffix -> multiplier of its random weights
    buffer_scale: Optional[dict] = None  # buffer name suffix -> scale of random values it gets (else left as made)


def _common(**extra) -> dict:
    cfg = dict(vocab_size=N_VOCAB, hidden_size=64, intermediate_size=96, num_hidden_layers=LAYERS,
               num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024, rms_norm_eps=1e-5,
               bos_token_id=make_model.BOS_ID, eos_token_id=make_model.EOS_ID, pad_token_id=make_model.PAD_ID)
    cfg.update(extra)
    return cfg


LLAMA3_ROPE = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
               "original_max_position_embeddings": 64, "rope_theta": 10000.0}

DEEPSEEK_V2 = dict(num_key_value_heads=4, kv_lora_rank=32, q_lora_rank=24, qk_nope_head_dim=16, qk_rope_head_dim=8,
                   v_head_dim=16, n_routed_experts=8, num_experts_per_tok=2, n_shared_experts=2,
                   moe_intermediate_size=32, first_k_dense_replace=1, topk_method="greedy",
                   routed_scaling_factor=2.5, norm_topk_prob=False,
                   rope_parameters={"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 256,
                                    "mscale": 0.707, "mscale_all_dim": 0.707, "rope_theta": 10000.0})

FAMILIES: Dict[str, Family] = {
    # Llama 3.2: llama3 rope scaling (the prompt runs past its original 64 positions), tied embeddings.
    "llama3": Family("LlamaConfig", "LlamaForCausalLM",
                     _common(rope_parameters=dict(LLAMA3_ROPE), tie_word_embeddings=True), tied=True),
    # Qwen3: per-head q/k RMSNorm, head_dim (24) not hidden/heads (16), no biases; YaRN x4 over 256 original
    # positions as Qwen3's long-context configs state it (the correction range rounded, as llama.cpp rounds it).
    "qwen3": Family("Qwen3Config", "Qwen3ForCausalLM",
                    _common(head_dim=24, rope_parameters={"rope_type": "yarn", "factor": 4.0,
                                                          "original_max_position_embeddings": 256,
                                                          "rope_theta": 10000.0},
                            tie_word_embeddings=False)),
    # Mistral: a sliding window (48) over every layer, shorter than the long prompt, and linear rope scaling
    # (x2), which its sliding layers use too.
    "mistral": Family("MistralConfig", "MistralForCausalLM",
                      _common(sliding_window=48, head_dim=16,
                              rope_parameters={"rope_type": "linear", "factor": 2.0, "rope_theta": 10000.0})),
    # Granite 3: the four multipliers.
    "granite": Family("GraniteConfig", "GraniteForCausalLM",
                      _common(embedding_multiplier=6.0, residual_multiplier=0.3, attention_multiplier=0.09,
                              logits_scaling=4.0)),
    # SmolLM3: no rope on every 4th layer (layer 3 here), tied embeddings.
    "smollm3": Family("SmolLM3Config", "SmolLM3ForCausalLM",
                      _common(no_rope_layer_interval=4, tie_word_embeddings=True), tied=True),
    # OLMo 2: norms after attention and MLP only, q/k norm over the whole projection.
    "olmo2": Family("Olmo2Config", "Olmo2ForCausalLM", _common()),
    # Gemma 2: soft-caps (small, so they bend the scores), alternating sliding window of 32, post-norms,
    # embedding scale, query_pre_attn_scalar (= head_dim, as the 2B/9B and llama.cpp's reading have it).
    "gemma2": Family("Gemma2Config", "Gemma2ForCausalLM",
                     _common(head_dim=16, query_pre_attn_scalar=16, sliding_window=32,
                             attn_logit_softcapping=2.0, final_logit_softcapping=3.0,
                             hidden_activation="gelu_pytorch_tanh"),
                     tied=True, norm_plus_one=True),
    # Phi-4-mini's shape of Phi-3: fused qkv and gate_up, 12 of 16 head dims rotated, LongRoPE (short
    # factors up to 64 positions, long ones past them, and its attention factor).
    "phi3": Family("Phi3Config", "Phi3ForCausalLM",
                   _common(partial_rotary_factor=0.75, original_max_position_embeddings=64, sliding_window=None,
                           rope_parameters={"rope_type": "longrope", "rope_theta": 10000.0,
                                            "short_factor": [1.0, 1.1, 1.3, 1.6, 2.0, 2.5],
                                            "long_factor": [1.0, 1.5, 2.5, 4.0, 6.0, 9.0]})),
    # Mixtures of experts, 8 experts of 32 hidden units, each token through 2 (llama.cpp fixes whether the two
    # weights are renormalized per family; these take its choice, so the converted GGUF means the same).
    # Mixtral: every layer, renormalized, a sliding window (48) over every layer.
    "mixtral": Family("MixtralConfig", "MixtralForCausalLM",
                      _common(intermediate_size=32, num_local_experts=8, num_experts_per_tok=2, sliding_window=48,
                              head_dim=16)),
    # Qwen2-MoE: q/k/v biases, not renormalized, a shared expert (64 wide) behind a sigmoid gate.
    "qwen2_moe": Family("Qwen2MoeConfig", "Qwen2MoeForCausalLM",
                        _common(num_experts=8, num_experts_per_tok=2, moe_intermediate_size=32,
                                shared_expert_intermediate_size=64, norm_topk_prob=False, qkv_bias=True)),
    # Qwen3-MoE: per-head q/k norm, renormalized.
    "qwen3_moe": Family("Qwen3MoeConfig", "Qwen3MoeForCausalLM",
                        _common(head_dim=24, num_experts=8, num_experts_per_tok=2, moe_intermediate_size=32,
                                norm_topk_prob=True)),
    # OLMoE: q/k norm over the whole projection (as many kv heads as heads, as llama.cpp needs), 3 of 8.
    "olmoe": Family("OlmoeConfig", "OlmoeForCausalLM",
                    _common(num_key_value_heads=4, intermediate_size=32, num_experts=8, num_experts_per_tok=3,
                            norm_topk_prob=False)),
    # Qwen3-MoE as only transformers and cllm run it (llama.cpp loads no dense layer in a Qwen MoE): layers
    # 0 (mlp_only_layers) and 2 (off decoder_sparse_step's period of 2) dense, 96 wide; the chosen weights
    # not renormalized.
    "qwen3_moe_dense": Family("Qwen3MoeConfig", "Qwen3MoeForCausalLM",
                              _common(head_dim=24, num_experts=8, num_experts_per_tok=2, moe_intermediate_size=32,
                                      norm_topk_prob=False, mlp_only_layers=[0], decoder_sparse_step=2)),
    # gpt-oss: 4 of 8 experts with biases and the clamped SwiGLU (gpt-oss's alpha 1.702 and limit 7, which
    # llama.cpp fixes; the experts' gate_up weights are 6x larger, so that both clamps act), router bias, attention sinks and q/k/v/o biases, layers 0 and 2 sliding
    # (a window of 32, shorter than the long prompt), YaRN x4 over 256 original positions, its range not rounded (two pairs on the ramp).
    "gpt_oss": Family("GptOssConfig", "GptOssForCausalLM",
                      _common(head_dim=16, intermediate_size=32, num_local_experts=8, num_experts_per_tok=4,
                              sliding_window=32,
                              rope_parameters={"rope_type": "yarn", "factor": 4.0, "beta_fast": 32.0,
                                               "beta_slow": 1.0, "truncate": False,
                                               "original_max_position_embeddings": 256, "rope_theta": 150000.0}),
                      weight_scale={"gate_up_proj": 6.0}),
    # DeepSeek-V2: latent attention (a 32-dim latent and 8 rope dims cached, absorbed queries; the query through
    # a rank-24 bottleneck, as DeepSeek-V2 has it: llama.cpp takes a file without one for V2-Lite only by its
    # 26 or 27 layers), 2 of 8 experts x 2.5, two shared experts, layer 0 dense, YaRN x4 with mscale_all_dim
    # (DeepSeek's q.k scale).
    "deepseek_v2": Family("DeepseekV2Config", "DeepseekV2ForCausalLM", _common(**DEEPSEEK_V2)),
    # DeepSeek-V2-Lite's attention (no query bottleneck) with DeepSeek-V2's group-limited routing: 2 of 8 experts
    # from the 2 of 4 groups whose best expert scores highest. llama.cpp scores groups otherwise (measured 0.09
    # median from transformers with it, 0.0004 without), so only transformers checks this one.
    "deepseek_v2_groups": Family("DeepseekV2Config", "DeepseekV2ForCausalLM",
                                 _common(**dict(DEEPSEEK_V2, q_lora_rank=None, topk_method="group_limited_greedy",
                                                n_group=4, topk_group=2))),
    # DeepSeek-V3 (Moonlight, Kimi K2, DeepSeek-R1 share it): DeepSeek-V2's attention, routed as noaux_tc:
    # sigmoid scores, a random e_score_correction_bias that chooses the experts but does not weigh them, the
    # 2 of 4 groups whose two best biased scores sum highest, 2 of 8 experts renormalized x 2.5.
    "deepseek_v3": Family("DeepseekV3Config", "DeepseekV3ForCausalLM",
                          _common(**dict({k: v for k, v in DEEPSEEK_V2.items() if k != "topk_method"},
                                         norm_topk_prob=True, n_group=4, topk_group=2)),
                          buffer_scale={"e_score_correction_bias": 0.1}),
}

# Families llama.cpp cannot load (the GGUF comparisons skip them), and the mixtures of experts.
NOT_IN_LLAMACPP = {"qwen3_moe_dense", "deepseek_v2_groups"}
MOE = {"mixtral", "qwen2_moe", "qwen3_moe", "olmoe", "qwen3_moe_dense", "gpt_oss", "deepseek_v2", "deepseek_v2_groups",
       "deepseek_v3"}


def build(family: str, seed: int = 0):
    """The transformers model of `family` with seeded weights, wide enough
    that the logits are far from flat (transformers' own init gives
    near-uniform logits and greedy ties)."""
    import torch
    import transformers

    fam = FAMILIES[family]
    cfg = getattr(transformers, fam.config_class)(**fam.config)
    torch.manual_seed(seed)
    model = getattr(transformers, fam.model_class)(cfg).float().eval()
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                base = 0.0 if fam.norm_plus_one else 1.0
                p.copy_(base + 0.1 * torch.randn(p.shape, generator=gen))
            elif "embed_tokens" in name:
                p.copy_(torch.randn(p.shape, generator=gen))
            else:
                p.copy_(torch.randn(p.shape, generator=gen) / np.sqrt(p.shape[-1]))
            for suffix, mult in (fam.weight_scale or {}).items():
                if name.endswith(suffix):
                    p.mul_(mult)
        for name, b in model.named_buffers():
            for suffix, scale in (fam.buffer_scale or {}).items():
                if name.endswith(suffix):
                    b.copy_(scale * torch.randn(b.shape, generator=gen))
    return model


def sentencepiece_model(n_vocab: int) -> bytes:
    """The SentencePiece (BPE, byte fallback) model of make_model's vocabulary."""
    from sentencepiece import sentencepiece_model_pb2 as pb

    tokens, scores, types = make_model.build_vocab(n_vocab)
    m = pb.ModelProto()
    for tok, score, ty in zip(tokens, scores, types):
        p = m.pieces.add()
        p.piece, p.score, p.type = tok, score, int(ty)
    m.trainer_spec.model_type = pb.TrainerSpec.BPE
    m.trainer_spec.vocab_size = n_vocab
    m.trainer_spec.byte_fallback = True
    m.trainer_spec.unk_id, m.trainer_spec.bos_id = make_model.UNK_ID, make_model.BOS_ID
    m.trainer_spec.eos_id, m.trainer_spec.pad_id = make_model.EOS_ID, make_model.PAD_ID
    m.normalizer_spec.name = "identity"
    m.normalizer_spec.add_dummy_prefix = True
    m.normalizer_spec.remove_extra_whitespaces = False
    return m.SerializeToString()


def write_tokenizer(folder: str, gemma: bool) -> None:
    with open(os.path.join(folder, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(make_hf.spm_tokenizer_json(N_VOCAB, "none" if gemma else "prepend"), f, ensure_ascii=False)
    tokens, _, _ = make_model.build_vocab(N_VOCAB)
    with open(os.path.join(folder, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(make_hf.tokenizer_config(tokens), f, ensure_ascii=False, indent=1)
    with open(os.path.join(folder, "tokenizer.model"), "wb") as f:
        f.write(sentencepiece_model(N_VOCAB))


def write(family: str, folder: str, seed: int = 0):
    """Saves the family's checkpoint and tokenizer in folder; returns the model."""
    model = build(family, seed)
    model.save_pretrained(folder, safe_serialization=True)
    write_tokenizer(folder, FAMILIES[family].norm_plus_one)
    return model


FP4_E2M1 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6], dtype=np.float32)


def mxfp4_blocks(w: np.ndarray):
    """w [..., rows, cols] (cols a multiple of 32) in gpt-oss's MXFP4 layout:
    blocks [..., rows, cols/32, 16] uint8 (element 2i in the low nibble of
    byte i, 2i + 1 in the high one) and scales [..., rows, cols/32] uint8
    (the block's power of two + 127), each value the E2M1 code nearest to
    w / 2^scale."""
    x = w.reshape(*w.shape[:-1], w.shape[-1] // 32, 32).astype(np.float32)
    amax = np.abs(x).max(axis=-1, keepdims=True)
    e = np.where(amax > 0, np.ceil(np.log2(np.maximum(amax, 1e-30) / 6.0)), 0).astype(np.int32)
    codes = np.abs(x[..., None] / np.exp2(e)[..., None] - FP4_E2M1).argmin(axis=-1).astype(np.uint8)
    blocks = codes[..., 0::2] | (codes[..., 1::2] << 4)
    return blocks, (e[..., 0] + 127).astype(np.uint8)


def write_mxfp4(folder: str, out: str) -> None:
    """A copy of the gpt_oss checkpoint in folder whose experts are stored as
    gpt-oss ships them: MXFP4 *_blocks and *_scales ([expert][out][in]) and
    quantization_config {"quant_method": "mxfp4"}, which llama.cpp's
    converter repacks into GGUF's MXFP4."""
    import shutil
    from safetensors.numpy import load_file, save_file

    shutil.copytree(folder, out)
    tensors = load_file(os.path.join(out, "model.safetensors"))
    for name in [n for n in tensors if n.endswith(("experts.gate_up_proj", "experts.down_proj"))]:
        w = tensors.pop(name)  # [E][in][out], multiplied from the left
        blocks, scales = mxfp4_blocks(np.ascontiguousarray(np.swapaxes(w, 1, 2)))
        tensors[name + "_blocks"], tensors[name + "_scales"] = blocks, scales
    save_file(tensors, os.path.join(out, "model.safetensors"), metadata={"format": "pt"})
    with open(os.path.join(out, "config.json"), encoding="utf-8") as f:
        cfg = json.load(f)
    cfg["quantization_config"] = {"quant_method": "mxfp4"}
    with open(os.path.join(out, "config.json"), "w", encoding="utf-8") as f:
        json.dump(cfg, f, indent=1)


def logits(model, tokens) -> np.ndarray:
    """transformers' float32 logits of every position, [len(tokens)][n_vocab]."""
    import torch

    with torch.no_grad():
        out = model(torch.tensor([list(tokens)], dtype=torch.long))
    return out.logits[0].double().numpy()


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2 or argv[0] not in FAMILIES:
        print(f"usage: hf_families.py {{{','.join(FAMILIES)}}} DIR", file=sys.stderr)
        return 2
    write(argv[0], argv[1])
    print(argv[1])
    return 0


if __name__ == "__main__":
    sys.exit(main())
