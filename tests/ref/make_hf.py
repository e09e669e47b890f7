"""Tiny Hugging Face model folders for tests, written with numpy only.

A folder holds what transformers' save_pretrained writes: config.json,
model.safetensors (or shards plus model.safetensors.index.json),
tokenizer.json and tokenizer_config.json. The weights are those of the GGUF
model tests/ref/make_model.py writes for the same spec, put back into Hugging
Face's conventions, i.e. the inverse of llama.cpp's convert_hf_to_gguf.py:

  * names: token_embd -> model.embed_tokens, blk.N.attn_q -> model.layers.N.
    self_attn.q_proj, ffn_norm -> post_attention_layernorm (Llama, Qwen2) or
    pre_feedforward_layernorm (Gemma 3, whose post_attention_layernorm is
    GGUF's post_attention_norm), output -> lm_head, ...;
  * Llama/Mistral q_proj/k_proj rows un-permuted (the converter's permute()
    makes HF's rotate_half pairs adjacent for GGUF's normal rope);
  * Gemma 3 norm weights minus 1 (HF's Gemma3RMSNorm computes x * (1 + w),
    the converter adds the 1);
  * a Gemma3ForConditionalGeneration layout ("language_model.model." prefix,
    config with text_config) on request.

So `cllm logits` on the folder must equal it on the GGUF (or ref_forward).
`reference_model()` builds the ref_forward.RefModel of a folder's tensors
(decoded from their stored dtype, converted back to GGUF conventions) for the
cases a GGUF cannot express (BF16, llama3 rope, quantized weights).

GPTQ and AWQ checkpoints follow each format's packing exactly (see
format/hf_quant.h in the C sources, and AutoGPTQ's / AutoAWQ's pack code):

  GPTQ  qweight int32 [in*bits/32, out] packed along the input, LSB first;
        qzeros int32 [groups, out*bits/32] packed along the output; v1
        ("gptq") stores zero - 1, v2 ("gptq_v2") the zero; scales f16
        [groups, out]; g_idx int32 [in] (act-order: a permutation of the
        columns, column perm[k] in group k // group_size).
  AWQ   qweight int32 [in, out/8] packed along the output with nibble p
        holding output column 8c + [0, 2, 4, 6, 1, 3, 5, 7][p]; qzeros
        [groups, out/8] likewise; scales f16 [groups, out].

Each quantized layer also returns its dequantization scale * (q - zero) as
float32 [out, in], the value every kernel of that format computes.

Command line:
  python3 tests/ref/make_hf.py --arch llama --out DIR [--dtype f32|f16|bf16]
      [--shards 2] [--quant gptq|awq] [--bits 4] [--group 32] [--asym]
      [--desc-act] [--conditional] [--set n_layer=3 ...]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import struct
import sys
from dataclasses import dataclass, field
from typing import Dict, Optional, Sequence

import numpy as np

import make_model

# ---------------------------------------------------------------------------
# safetensors


def bf16_bits(a: np.ndarray) -> np.ndarray:
    """float32 -> bfloat16 bit patterns (uint16), round to nearest even."""
    u = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    r = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    return r.astype(np.uint16)


def bf16_to_f32(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32)


@dataclass
class Tensor:
    """A tensor as stored: dtype name of safetensors and the raw array."""
    dtype: str  # F32, F16, BF16, I32
    data: np.ndarray  # float32/float16/uint16 (BF16 bits)/int32

    def to_f32(self) -> np.ndarray:
        if self.dtype == "BF16":
            return bf16_to_f32(self.data)
        return self.data.astype(np.float32)


_ALIGN = {"F32": 4, "I32": 4, "F16": 2, "BF16": 2, "F64": 8, "I64": 8, "U8": 1, "I8": 1}


def write_safetensors(path, tensors: Dict[str, Tensor], metadata: Optional[dict] = None):
    """A safetensors file, tensors ordered as the safetensors library orders
    them (larger alignment first, then by name), written one by one."""
    order = sorted(tensors, key=lambda n: (-_ALIGN[tensors[n].dtype], n))
    header: dict = {"__metadata__": metadata or {"format": "pt"}}
    off = 0
    for name in order:
        t = tensors[name]
        header[name] = {"dtype": t.dtype, "shape": list(t.data.shape), "data_offsets": [off, off + t.data.nbytes]}
        off += t.data.nbytes
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        for name in order:
            a = tensors[name].data
            f.write(memoryview(np.ascontiguousarray(a.astype(a.dtype.newbyteorder("<"), copy=False))).cast("B"))


def write_weights(folder, tensors: Dict[str, Tensor], shards: int = 1):
    """model.safetensors, or `shards` files plus model.safetensors.index.json."""
    if shards <= 1:
        write_safetensors(os.path.join(folder, "model.safetensors"), tensors)
        return
    names = sorted(tensors)
    weight_map = {}
    for s in range(shards):
        part = names[s::shards]
        fname = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
        write_safetensors(os.path.join(folder, fname), {n: tensors[n] for n in part})
        weight_map.update({n: fname for n in part})
    total = sum(t.data.nbytes for t in tensors.values())
    with open(os.path.join(folder, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2)


# ---------------------------------------------------------------------------
# GGUF <-> HF conventions


def permute(w: np.ndarray, n_head: int) -> np.ndarray:
    """convert_hf_to_gguf.py's LlamaModel.permute (HF rows -> GGUF rows)."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def unpermute(w: np.ndarray, n_head: int) -> np.ndarray:
    """The inverse of permute (GGUF rows -> HF rows)."""
    return w.reshape(n_head, w.shape[0] // n_head // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


_LAYER_NAMES = {
    "attn_norm.weight": "input_layernorm.weight",
    "attn_q.weight": "self_attn.q_proj.weight",
    "attn_k.weight": "self_attn.k_proj.weight",
    "attn_v.weight": "self_attn.v_proj.weight",
    "attn_output.weight": "self_attn.o_proj.weight",
    "attn_q.bias": "self_attn.q_proj.bias",
    "attn_k.bias": "self_attn.k_proj.bias",
    "attn_v.bias": "self_attn.v_proj.bias",
    "attn_q_norm.weight": "self_attn.q_norm.weight",
    "attn_k_norm.weight": "self_attn.k_norm.weight",
    "ffn_gate.weight": "mlp.gate_proj.weight",
    "ffn_up.weight": "mlp.up_proj.weight",
    "ffn_down.weight": "mlp.down_proj.weight",
}
_LLAMA_NAMES = {"ffn_norm.weight": "post_attention_layernorm.weight"}
_GEMMA_NAMES = {
    "post_attention_norm.weight": "post_attention_layernorm.weight",
    "ffn_norm.weight": "pre_feedforward_layernorm.weight",
    "post_ffw_norm.weight": "post_feedforward_layernorm.weight",
}


def prefix_of(spec: "HFSpec") -> str:
    return "language_model.model." if spec.conditional else "model."


def hf_name(spec: "HFSpec", gguf_name: str) -> str:
    p = prefix_of(spec)
    if gguf_name == "token_embd.weight":
        return p + "embed_tokens.weight"
    if gguf_name == "output_norm.weight":
        return p + "norm.weight"
    if gguf_name == "output.weight":
        return "language_model.lm_head.weight" if spec.conditional else "lm_head.weight"
    parts = gguf_name.split(".", 2)
    assert parts[0] == "blk", gguf_name
    rest = parts[2]
    table = dict(_LAYER_NAMES, **(_GEMMA_NAMES if spec.base.arch == "gemma3" else _LLAMA_NAMES))
    return f"{p}layers.{parts[1]}.{table[rest]}"


def to_hf(spec: "HFSpec", name: str, w: np.ndarray) -> np.ndarray:
    """A make_model tensor (GGUF conventions, float32) in HF's conventions."""
    b = spec.base
    if b.arch in ("llama", "mistral") and name.endswith("attn_q.weight"):
        return unpermute(w, b.n_head)
    if b.arch in ("llama", "mistral") and name.endswith("attn_k.weight"):
        return unpermute(w, b.n_head_kv)
    if b.arch == "gemma3" and name.endswith("norm.weight"):
        return (w - np.float32(1)).astype(np.float32)
    return w


def to_gguf(spec: "HFSpec", name: str, w: np.ndarray) -> np.ndarray:
    """The inverse of to_hf, as the C loader computes it (norm + 1 in f32)."""
    b = spec.base
    if b.arch in ("llama", "mistral") and name.endswith("attn_q.weight"):
        return permute(w, b.n_head)
    if b.arch in ("llama", "mistral") and name.endswith("attn_k.weight"):
        return permute(w, b.n_head_kv)
    if b.arch == "gemma3" and name.endswith("norm.weight"):
        return (w.astype(np.float32) + np.float32(1)).astype(np.float32)
    return w


# ---------------------------------------------------------------------------
# GPTQ / AWQ


def _pack_along(q: np.ndarray, bits: int, axis: int) -> np.ndarray:
    """Packs 32/bits consecutive values along `axis` into uint32, lowest bits first."""
    pack = 32 // bits
    q = np.moveaxis(q.astype(np.uint32), axis, 0)
    q = q.reshape(q.shape[0] // pack, pack, *q.shape[1:])
    out = np.zeros((q.shape[0], *q.shape[2:]), dtype=np.uint32)
    for k in range(pack):
        out |= q[:, k] << np.uint32(bits * k)
    return np.moveaxis(out, 0, axis)


AWQ_ORDER = [0, 2, 4, 6, 1, 3, 5, 7]


def _awq_pack(q: np.ndarray) -> np.ndarray:
    """[rows, out] 4-bit values -> [rows, out/8] uint32, AutoAWQ's GEMM order."""
    rows, cols = q.shape
    q = q.astype(np.uint32).reshape(rows, cols // 8, 8)
    out = np.zeros((rows, cols // 8), dtype=np.uint32)
    for p in range(8):
        out |= q[:, :, AWQ_ORDER[p]] << np.uint32(4 * p)
    return out


def _rtn_params(x: np.ndarray, bits: int, sym: bool, zero_range):
    """Scale (f16) and integer zero per row of x [rows, n]: round to nearest
    over [min(x, 0), max(x, 0)], as GPTQ's and AWQ's quantizers initialize."""
    maxq = 2 ** bits - 1
    if sym:
        amax = np.maximum(np.abs(x).max(axis=1), 1e-8)
        scale = (2 * amax / maxq).astype(np.float16)
        zero = np.full(x.shape[0], (maxq + 1) // 2, dtype=np.int64)
    else:
        lo, hi = np.minimum(x.min(axis=1), 0), np.maximum(x.max(axis=1), 0)
        scale = np.maximum((hi - lo) / maxq, 1e-8).astype(np.float16)
        zero = np.round(-lo / scale.astype(np.float32)).astype(np.int64)
    zero = np.clip(zero, *zero_range)
    return scale, zero


@dataclass
class QuantLayer:
    tensors: Dict[str, Tensor]  # suffix (qweight, qzeros, scales, g_idx) -> tensor
    dequant: np.ndarray  # float32 [out, in]: scale * (q - zero)


def quantize_gptq(w: np.ndarray, bits: int, group: int, sym: bool, desc_act: bool, v2: bool,
                  rng: np.random.Generator) -> QuantLayer:
    """w: float32 [out, in] (HF's nn.Linear layout)."""
    n_out, n_in = w.shape
    maxq = 2 ** bits - 1
    g = n_in if group == -1 else group
    n_groups = n_in // g
    perm = rng.permutation(n_in) if desc_act else np.arange(n_in)
    g_idx = np.empty(n_in, dtype=np.int32)
    g_idx[perm] = np.arange(n_in) // g
    # v1 stores zero - 1 in `bits` bits, and kernels read (stored & maxq) + 1:
    # zeros run from 1 to 2^bits; v2 stores the zero itself, 0..maxq.
    zero_range = (0, maxq) if v2 else (1, maxq + 1)
    scales = np.zeros((n_groups, n_out), dtype=np.float16)
    zeros = np.zeros((n_groups, n_out), dtype=np.int64)
    for gi in range(n_groups):
        cols = np.where(g_idx == gi)[0]
        scales[gi], zeros[gi] = _rtn_params(w[:, cols], bits, sym, zero_range)
    if not sym and not v2 and bits == 4:
        # Exercise the extreme v1 zero (stored 15, read as 16).
        zeros[0, : min(4, n_out)] = maxq + 1
    s = scales.astype(np.float32)[g_idx].T  # [out, in]
    z = zeros[g_idx].T
    q = np.clip(np.round(w / s) + z, 0, maxq).astype(np.int64)  # [out, in]
    dequant = (s * (q - z).astype(np.float32)).astype(np.float32)
    stored_zeros = zeros if v2 else zeros - 1
    t = {
        "qweight": Tensor("I32", _pack_along(q.T, bits, 0).view(np.int32)),
        "qzeros": Tensor("I32", _pack_along((stored_zeros & maxq).astype(np.uint32), bits, 1).view(np.int32)),
        "scales": Tensor("F16", scales),
        "g_idx": Tensor("I32", g_idx),
    }
    return QuantLayer(t, dequant)


def quantize_awq(w: np.ndarray, group: int) -> QuantLayer:
    n_out, n_in = w.shape
    g = n_in if group == -1 else group
    n_groups = n_in // g
    scales = np.zeros((n_groups, n_out), dtype=np.float16)
    zeros = np.zeros((n_groups, n_out), dtype=np.int64)
    for gi in range(n_groups):
        scales[gi], zeros[gi] = _rtn_params(w[:, gi * g:(gi + 1) * g], 4, False, (0, 15))
    gidx = np.arange(n_in) // g
    s = scales.astype(np.float32)[gidx].T
    z = zeros[gidx].T
    q = np.clip(np.round(w / s) + z, 0, 15).astype(np.int64)
    dequant = (s * (q - z).astype(np.float32)).astype(np.float32)
    t = {
        "qweight": Tensor("I32", _awq_pack(q.T).view(np.int32)),
        "qzeros": Tensor("I32", _awq_pack(zeros).view(np.int32)),
        "scales": Tensor("F16", scales),
    }
    return QuantLayer(t, dequant)


# ---------------------------------------------------------------------------
# A folder


@dataclass(frozen=True)
class HFSpec:
    base: make_model.ModelSpec
    dtype: str = "f32"  # f32, f16, bf16: matrices and vectors alike
    shards: int = 1
    conditional: bool = False  # gemma3: Gemma3ForConditionalGeneration layout
    layer_types: bool = False  # gemma3: write layer_types instead of sliding_window_pattern
    llama3_rope: bool = False  # llama: rope_scaling {"rope_type": "llama3", ...}
    quant: Optional[str] = None  # gptq, awq
    bits: int = 4
    group: int = 32
    sym: bool = True
    desc_act: bool = False
    gptq_v2: bool = False
    tokenizer: str = "spm"  # spm (Llama 2 style), none
    drop_tensors: tuple = ()  # HF names not to write
    config_override: tuple = ()  # (key, value) pairs patched into config.json


_QUANT_LAYERS = ("attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down")

LLAMA3_ROPE = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
               "original_max_position_embeddings": 64}


def llama3_factors(head_dim: int, base: float, rs: dict) -> np.ndarray:
    """convert_hf_to_gguf.py's rope_freqs.weight for llama3 rope scaling."""
    freqs = 1.0 / (np.float32(base) ** (np.arange(0, head_dim, 2, dtype=np.float32) / np.float32(head_dim)))
    factor, lo, hi = rs["factor"], rs["low_freq_factor"], rs["high_freq_factor"]
    old = rs["original_max_position_embeddings"]
    out = []
    for f in freqs.astype(np.float32):
        wavelen = 2 * math.pi / float(f)
        if wavelen < old / hi:
            out.append(1.0)
        elif wavelen > old / lo:
            out.append(factor)
        else:
            smooth = (old / wavelen - lo) / (hi - lo)
            out.append(1 / ((1 - smooth) / factor + smooth))
    return np.array(out, dtype=np.float32)


@dataclass
class HFModel:
    spec: HFSpec
    path: str
    tensors: Dict[str, Tensor] = field(default_factory=dict)  # HF name -> stored tensor
    dequant: Dict[str, np.ndarray] = field(default_factory=dict)  # GGUF name -> [out, in] of quantized layers
    config: dict = field(default_factory=dict)


def _store(a: np.ndarray, dtype: str) -> Tensor:
    if dtype == "f32":
        return Tensor("F32", a.astype(np.float32))
    if dtype == "f16":
        return Tensor("F16", a.astype(np.float16))
    if dtype == "bf16":
        return Tensor("BF16", bf16_bits(a))
    raise ValueError(dtype)


def build_tensors(spec: HFSpec):
    """(HF tensors, GGUF name -> dequantized [out, in] for quantized layers)."""
    b = spec.base
    rng = np.random.default_rng(b.seed + 1000)
    out: Dict[str, Tensor] = {}
    dequant: Dict[str, np.ndarray] = {}
    for name, w in make_model.make_tensors(b):
        if name == "rope_freqs.weight":
            continue  # HF has no such tensor: llama3 rope is in config.json
        hw = to_hf(spec, name, w)
        hn = hf_name(spec, name)
        layer = name.split(".")[2] if name.startswith("blk.") else None
        if spec.quant and layer in _QUANT_LAYERS and name.endswith(".weight"):
            if spec.quant == "gptq":
                ql = quantize_gptq(hw, spec.bits, spec.group, spec.sym, spec.desc_act, spec.gptq_v2, rng)
            else:
                ql = quantize_awq(hw, spec.group)
            base = hn[: -len(".weight")]
            for suffix, t in ql.tensors.items():
                out[f"{base}.{suffix}"] = t
            dequant[name] = ql.dequant
            continue
        # GPTQ/AWQ checkpoints keep the rest in f16.
        out[hn] = _store(hw, "f16" if spec.quant else spec.dtype)
    for n in spec.drop_tensors:
        out.pop(n, None)
    return out, dequant


def make_config(spec: HFSpec) -> dict:
    b = spec.base
    text = {
        "hidden_size": b.n_embd,
        "intermediate_size": b.n_ff,
        "num_hidden_layers": b.n_layer,
        "num_attention_heads": b.n_head,
        "num_key_value_heads": b.n_head_kv,
        "head_dim": b.head_dim,
        "rms_norm_eps": b.eps,
        "rope_theta": b.rope_base,
        "max_position_embeddings": b.n_ctx,
        "vocab_size": b.n_vocab,
        "bos_token_id": make_model.BOS_ID,
        "eos_token_id": make_model.EOS_ID,
        "pad_token_id": make_model.PAD_ID,
        "torch_dtype": {"f32": "float32", "f16": "float16", "bf16": "bfloat16"}[spec.dtype],
    }
    tied = b.tied or b.arch == "gemma3"
    if b.arch == "gemma3":
        text.update(model_type="gemma3_text", architectures=["Gemma3ForCausalLM"],
                    hidden_activation="gelu_pytorch_tanh", query_pre_attn_scalar=b.head_dim,
                    sliding_window=b.sliding_window, rope_local_base_freq=b.rope_base_swa or 10000.0,
                    final_logit_softcapping=None, attn_logit_softcapping=None, rope_scaling=None,
                    tie_word_embeddings=True)
        pattern = b.sliding_window_pattern or 6
        if spec.layer_types:
            text["layer_types"] = ["full_attention" if (il + 1) % pattern == 0 else "sliding_attention"
                                   for il in range(b.n_layer)]
        else:
            text["sliding_window_pattern"] = pattern
        if b.rope_scale:
            text["rope_scaling"] = {"rope_type": "linear", "factor": b.rope_scale}
    else:
        model_type = {"llama": "llama", "mistral": "mistral", "qwen2": "qwen2"}[b.arch]
        arch = {"llama": "LlamaForCausalLM", "mistral": "MistralForCausalLM", "qwen2": "Qwen2ForCausalLM"}[b.arch]
        text.update(model_type=model_type, architectures=[arch], hidden_act="silu", tie_word_embeddings=tied)
        if b.arch == "qwen2":
            text.update(use_sliding_window=False, sliding_window=4096)
        if b.arch == "mistral":
            text["sliding_window"] = None
        if b.rope_scale:
            text["rope_scaling"] = {"type": "linear", "factor": b.rope_scale}
        if spec.llama3_rope:
            text["rope_scaling"] = dict(LLAMA3_ROPE)
    if spec.conditional:
        cfg = {"model_type": "gemma3", "architectures": ["Gemma3ForConditionalGeneration"],
               "text_config": dict(text, model_type="gemma3_text"),
               "vision_config": {"model_type": "siglip_vision_model"}}
    else:
        cfg = text
    if spec.quant == "gptq":
        cfg["quantization_config"] = {
            "quant_method": "gptq", "bits": spec.bits, "group_size": spec.group, "sym": spec.sym,
            "desc_act": spec.desc_act, "damp_percent": 0.01, "true_sequential": True, "static_groups": False,
            "checkpoint_format": "gptq_v2" if spec.gptq_v2 else "gptq"}
    elif spec.quant == "awq":
        cfg["quantization_config"] = {"quant_method": "awq", "bits": spec.bits, "group_size": spec.group,
                                      "zero_point": True, "version": "gemm", "modules_to_not_convert": None}
    for k, v in spec.config_override:
        cfg[k] = v
    return cfg


# --- tokenizer: Llama-2-style (SentencePiece BPE with byte fallback) ---------

SPACE = "\u2581"


def spm_merges(tokens, types) -> list:
    """Merges that build every normal piece, ranked by the piece's score (its
    id here), as tokenizers' SentencePieceExtractor derives them."""
    vocab = {t: i for i, t in enumerate(tokens)}
    merges = []
    for piece, ty in zip(tokens, types):
        if ty != make_model.TokenType.NORMAL or len(piece) < 2:
            continue
        for k in range(1, len(piece)):
            left, right = piece[:k], piece[k:]
            if left in vocab and right in vocab:
                merges.append((vocab[piece], vocab[left], vocab[right], left, right))
    merges.sort()
    return [[m[3], m[4]] for m in merges]


def spm_tokenizer_json(n_vocab: int, prefix: str = "prepend") -> dict:
    """prefix: "prepend" (Llama 2 legacy normalizer), "first" (Metaspace with
    prepend_scheme first), "none" (Gemma)."""
    tokens, _scores, types = make_model.build_vocab(n_vocab)
    added = [{"id": i, "content": tokens[i], "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True} for i in range(make_model.N_SPECIAL)]
    replace = {"type": "Replace", "pattern": {"String": " "}, "content": SPACE}
    if prefix == "prepend":
        normalizer = {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": SPACE}, replace]}
        pre = None
    elif prefix == "first":
        normalizer = None
        pre = {"type": "Metaspace", "replacement": SPACE, "prepend_scheme": "first", "split": False}
    else:
        normalizer = replace
        pre = None
    bos = tokens[make_model.BOS_ID]
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": normalizer,
        "pre_tokenizer": pre,
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": bos, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [{"SpecialToken": {"id": bos, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                     {"SpecialToken": {"id": bos, "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {bos: {"id": bos, "ids": [make_model.BOS_ID], "tokens": [bos]}},
        },
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": SPACE}, "content": " "},
            {"type": "ByteFallback"}, {"type": "Fuse"}]
            + ([{"type": "Strip", "content": " ", "start": 1, "stop": 0}] if prefix != "none" else [])},
        "model": {
            "type": "BPE", "dropout": None, "unk_token": tokens[make_model.UNK_ID],
            "continuing_subword_prefix": None, "end_of_word_suffix": None, "fuse_unk": True,
            "byte_fallback": True, "ignore_merges": False,
            "vocab": {t: i for i, t in enumerate(tokens)},
            "merges": spm_merges(tokens, types),
        },
    }


CHAT_TEMPLATE = ("{{ bos_token }}{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}\n{% endfor %}"
                 "{% if add_generation_prompt %}<assistant>{% endif %}")


def tokenizer_config(tokens, chat_template=CHAT_TEMPLATE, add_bos=True) -> dict:
    return {"add_bos_token": add_bos, "add_eos_token": False,
            "bos_token": tokens[make_model.BOS_ID], "eos_token": tokens[make_model.EOS_ID],
            "unk_token": tokens[make_model.UNK_ID], "pad_token": tokens[make_model.PAD_ID],
            "chat_template": chat_template, "model_max_length": 256,
            "tokenizer_class": "LlamaTokenizerFast"}


def write_tokenizer(folder, spec: HFSpec):
    b = spec.base
    prefix = "none" if b.arch == "gemma3" else "prepend"
    with open(os.path.join(folder, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(spm_tokenizer_json(b.n_vocab, prefix), f, ensure_ascii=False)
    tokens, _, _ = make_model.build_vocab(b.n_vocab)
    with open(os.path.join(folder, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(tokenizer_config(tokens), f, ensure_ascii=False, indent=1)


def write_hf_model(folder, spec: HFSpec) -> HFModel:
    os.makedirs(folder, exist_ok=True)
    tensors, dequant = build_tensors(spec)
    cfg = make_config(spec)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    write_weights(folder, tensors, spec.shards)
    if spec.tokenizer == "spm":
        write_tokenizer(folder, spec)
    return HFModel(spec, os.fspath(folder), tensors, dequant, cfg)


def default_hf_spec(arch: str, base_options: Optional[dict] = None, **options) -> HFSpec:
    base = make_model.default_spec(arch, **(base_options or {}))
    for k in ("drop_tensors", "config_override"):
        if k in options:
            options[k] = tuple(options[k])
    return HFSpec(base=base, **options)


# ---------------------------------------------------------------------------
# The numpy reference of a folder


def reference_model(hf: HFModel, gguf_path: str):
    """ref_forward.RefModel of the folder's weights as the C loader reads them:
    hyper-parameters from the GGUF make_model wrote for the same base spec,
    tensors decoded from the folder (quantized layers: their dequantization),
    converted to GGUF conventions."""
    import ref_forward

    spec, b = hf.spec, hf.spec.base
    m = ref_forward.load(gguf_path)
    tensors = {}
    for name, _w in make_model.make_tensors(b):
        if name == "rope_freqs.weight":
            continue
        if name in hf.dequant:
            w = hf.dequant[name]
        else:
            hn = hf_name(spec, name)
            if hn not in hf.tensors:
                continue
            w = hf.tensors[hn].to_f32()
        tensors[name] = to_gguf(spec, name, w).astype(np.float64)
    if spec.llama3_rope:
        tensors["rope_freqs.weight"] = llama3_factors(b.head_dim, b.rope_base, LLAMA3_ROPE).astype(np.float64)
    m.tensors = tensors
    return m


# ---------------------------------------------------------------------------
# A real GGUF back into a folder


def folder_from_gguf(gguf_path: str, folder, shards: int = 2):
    """Writes a gemma3 GGUF (e.g. the real gemma-3-270m) as the Hugging Face
    folder it was converted from, as far as the GGUF can say: every tensor
    dequantized to F32 under its HF name (norms minus the 1 the converter
    added), config.json from the metadata, and a tokenizer.json whose merges
    come from the SentencePiece vocabulary the way tokenizers'
    SentencePieceExtractor derives them (every split of a piece into two
    pieces, pieces in score order). Returns the ref_forward.RefModel of the
    GGUF (its float64 reference, built from the same single read, since
    reading a 262144-token GGUF in Python takes most of a minute)."""
    from gguf import GGMLQuantizationType, GGUFReader
    import gguf.quants
    import ref_forward

    r = GGUFReader(gguf_path)
    fields = r.fields

    def meta(key, default=None):
        f = fields.get(key)
        return f.contents() if f is not None else default

    arch = meta("general.architecture")
    if arch != "gemma3":
        raise ValueError(f"folder_from_gguf: {arch!r} (only gemma3)")
    base = make_model.default_spec("gemma3")
    spec = HFSpec(base=base)
    os.makedirs(folder, exist_ok=True)
    tensors = {}
    gguf_weights = {}
    for t in r.tensors:
        shape = tuple(int(d) for d in reversed(t.shape))
        if t.tensor_type == GGMLQuantizationType.F32:
            a = np.asarray(t.data, dtype=np.float32)
        else:
            a = gguf.quants.dequantize(np.asarray(t.data), t.tensor_type).astype(np.float32)
        gguf_weights[t.name] = a.reshape(shape)
        tensors[hf_name(spec, t.name)] = Tensor("F32", to_hf(spec, t.name, gguf_weights[t.name]))
    write_weights(folder, tensors, shards)
    del tensors
    n_layer = int(meta("gemma3.block_count"))
    pattern = 6
    cfg = {
        "model_type": "gemma3_text", "architectures": ["Gemma3ForCausalLM"],
        "hidden_size": int(meta("gemma3.embedding_length")), "intermediate_size": int(meta("gemma3.feed_forward_length")),
        "num_hidden_layers": n_layer, "num_attention_heads": int(meta("gemma3.attention.head_count")),
        "num_key_value_heads": int(meta("gemma3.attention.head_count_kv")),
        "head_dim": int(meta("gemma3.attention.key_length")),
        "rms_norm_eps": float(meta("gemma3.attention.layer_norm_rms_epsilon")),
        "rope_theta": float(meta("gemma3.rope.freq_base")), "rope_local_base_freq": 10000.0,
        "sliding_window": int(meta("gemma3.attention.sliding_window")),
        "layer_types": ["full_attention" if (il + 1) % pattern == 0 else "sliding_attention" for il in range(n_layer)],
        "query_pre_attn_scalar": int(meta("gemma3.attention.key_length")),
        "max_position_embeddings": int(meta("gemma3.context_length")),
        "vocab_size": int(gguf_weights["token_embd.weight"].shape[0]),
        "hidden_activation": "gelu_pytorch_tanh", "tie_word_embeddings": True, "rope_scaling": None,
        "final_logit_softcapping": None, "attn_logit_softcapping": None,
    }
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(cfg, f, indent=1)

    tf = fields["tokenizer.ggml.tokens"]
    tokens = [bytes(tf.parts[i]).decode("utf-8") for i in tf.data]
    scores = meta("tokenizer.ggml.scores")
    types = meta("tokenizer.ggml.token_type")
    vocab, added = {}, []
    for i, (tok, ty) in enumerate(zip(tokens, types)):
        vocab.setdefault(tok, i)
        if ty in (make_model.TokenType.CONTROL, make_model.TokenType.USER_DEFINED):
            added.append({"id": i, "content": tok, "single_word": False, "lstrip": False, "rstrip": False,
                          "normalized": False, "special": ty == make_model.TokenType.CONTROL})
    merges = []
    for i in sorted(range(len(tokens)), key=lambda i: (-scores[i], i)):
        piece = tokens[i]
        if types[i] == make_model.TokenType.NORMAL and len(piece) > 1:
            merges += [[piece[:k], piece[k:]] for k in range(1, len(piece))
                       if piece[:k] in vocab and piece[k:] in vocab]
    tj = spm_tokenizer_json(make_model.N_SPECIAL + 256, "none")
    bos, eos = tokens[int(meta("tokenizer.ggml.bos_token_id"))], tokens[int(meta("tokenizer.ggml.eos_token_id"))]
    tj["added_tokens"] = added
    tj["post_processor"]["single"][0]["SpecialToken"]["id"] = bos
    tj["post_processor"]["special_tokens"] = {bos: {"id": bos, "ids": [vocab[bos]], "tokens": [bos]}}
    tj["model"].update(vocab=vocab, merges=merges, unk_token=tokens[int(meta("tokenizer.ggml.unknown_token_id"))])
    with open(os.path.join(folder, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tj, f, ensure_ascii=False)
    with open(os.path.join(folder, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump({"add_bos_token": bool(meta("tokenizer.ggml.add_bos_token", True)), "add_eos_token": False,
                   "bos_token": bos, "eos_token": eos, "chat_template": meta("tokenizer.chat_template")}, f,
                  ensure_ascii=False)
    # The GGUF's own reference (ref_forward.load's reading of these keys).
    return ref_forward.RefModel(
        arch="gemma3", n_vocab=cfg["vocab_size"], n_embd=cfg["hidden_size"], n_layer=n_layer,
        n_head=cfg["num_attention_heads"], n_head_kv=cfg["num_key_value_heads"], head_dim=cfg["head_dim"],
        n_rot=cfg["head_dim"], eps=cfg["rms_norm_eps"], rope_base=cfg["rope_theta"], freq_scale=1.0, neox=True,
        n_swa=cfg["sliding_window"], swa_layers=tuple(il % pattern < pattern - 1 for il in range(n_layer)),
        rope_base_swa=10000.0, tensors={k: v.astype(np.float64) for k, v in gguf_weights.items()})


# ---------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--arch", required=True, choices=make_model.ARCHES)
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--dtype", default="f32", choices=("f32", "f16", "bf16"))
    ap.add_argument("--shards", type=int, default=1)
    ap.add_argument("--conditional", action="store_true")
    ap.add_argument("--llama3-rope", action="store_true")
    ap.add_argument("--quant", choices=("gptq", "awq"))
    ap.add_argument("--bits", type=int, default=4)
    ap.add_argument("--group", type=int, default=32)
    ap.add_argument("--asym", action="store_true")
    ap.add_argument("--desc-act", action="store_true")
    ap.add_argument("--gptq-v2", action="store_true")
    ap.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE",
                    help="override a make_model.ModelSpec field (e.g. n_layer=3)")
    a = ap.parse_args(argv)
    base = {"seed": a.seed}
    fields = {f.name: f.type for f in dataclasses.fields(make_model.ModelSpec)}
    for s in a.set:
        k, _, v = s.partition("=")
        if k not in fields:
            ap.error(f"unknown field {k!r}")
        base[k] = make_model._parse_value(fields[k], v)
    spec = default_hf_spec(a.arch, base, dtype=a.dtype, shards=a.shards, conditional=a.conditional,
                           llama3_rope=a.llama3_rope, quant=a.quant, bits=a.bits, group=a.group, sym=not a.asym,
                           desc_act=a.desc_act, gptq_v2=a.gptq_v2)
    write_hf_model(a.out, spec)
    print(f"wrote {a.out}: {spec}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    sys.exit(main())
