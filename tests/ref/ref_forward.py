"""Numpy reference forward pass for GGUF models (llama, mistral, qwen2, gemma3).

It reads the GGUF file itself (gguf.GGUFReader; non-F32 tensors dequantized
with gguf.quants.dequantize), computes in float64 and returns the logits of
every position, following llama.cpp's semantics for GGUF files. It shares no
code with the C engine; each convention below names where it comes from.

Conventions (llama.cpp = ggml-org/llama.cpp src/llama-model.cpp,
src/models/*.cpp, ggml/src/ggml-cpu/ops.cpp; HF = transformers'
modeling_llama.py / modeling_qwen2.py / modeling_gemma3.py):

* RMSNorm: x / sqrt(mean(x^2) + eps) * w  (llama.cpp build_norm LLM_NORM_RMS:
  ggml_rms_norm then ggml_mul by the weight). eps is
  {arch}.attention.layer_norm_rms_epsilon.
  Gemma 3: HF's Gemma3RMSNorm computes x_normed * (1 + w), but
  convert_hf_to_gguf.py's Gemma3Model.modify_tensors adds 1 to every
  "*norm.weight" ("ref code in Gemma3RMSNorm ... data_torch + 1"), q/k norms
  included, so GGUF gemma3 norms multiply by the stored weight directly.
* RoPE (llama.cpp llama_model_rope_type): LLM_ARCH_LLAMA -> LLAMA_ROPE_TYPE_NORM
  ("normal": rotates adjacent pairs (x[2i], x[2i+1]); the converter permutes
  HF's q/k rows so this matches HF's rotate_half); QWEN2 and GEMMA3 ->
  LLAMA_ROPE_TYPE_NEOX (pairs (x[i], x[i + n_rot/2])). Angle for pair i at
  position p: theta = p * freq_scale * base^(-2i/n_rot) / ff[i]  (ggml
  rope_yarn with ext_factor 0: theta_interp = freq_scale * theta_extrap;
  freq factors divide theta_extrap). freq_scale = 1/{arch}.rope.scaling.factor
  for rope.scaling.type "linear" (llama_model_loader: rope_freq_scale_train =
  1/ropescale), ff = rope_freqs.weight when present (llama 3.1), else 1.
  n_rot = {arch}.rope.dimension_count, default head_dim; dims past n_rot pass
  through unrotated.
* Attention: causal; GQA: query head h reads kv head h // (n_head/n_head_kv)
  (ggml broadcasting in build_attn_mha); scale 1/sqrt(head_dim)
  (build_attn kq_scale = 1/sqrt(n_embd_head_k) in llm_build_llama/qwen2;
  gemma3 scales Q by f_attention_scale = 1/sqrt(n_embd_head_k) except for the
  62-layer 27B, then kq_scale 1.0); softmax over the visible keys.
* Gemma 3 (src/models/gemma3.cpp and its hparams in llama-model.cpp):
  input embeddings scaled by sqrt(n_embd); per layer
      h = x + post_attention_norm(attn(attn_norm(x)))
      x = h + post_ffw_norm(ffn(ffn_norm(h)))
  q_norm / k_norm are RMSNorms over head_dim, per head, applied BEFORE RoPE;
  ffn = down(gelu_tanh(gate(x)) * up(x)) (LLM_FFN_GELU + LLM_FFN_PAR; ggml_gelu
  is the tanh approximation). Sliding window: hparams.set_swa_pattern(6), i.e.
  layer il is local iff il % 6 < 5, unless {arch}.attention.sliding_window_pattern
  is present (uint32 n: local iff il % n < n - 1; array: per-layer flags).
  Local layers use rope base rope_freq_base_train_swa = 10000 (or
  {arch}.rope.freq_base_swa when present) with freq_scale 1, and query p sees
  key j iff 0 <= p - j < n_swa (llama_hparams::is_masked_swa,
  LLAMA_SWA_TYPE_STANDARD masks p - j >= n_swa); global layers use
  {arch}.rope.freq_base, the rope scaling, and full causal attention.
  No final logit soft-capping (only the non-iswa gemma2-style graph has it).
* Qwen2 (src/models/qwen2.cpp): bq/bk/bv added after the projections; SiLU
  gated MLP down(silu(gate(x)) * up(x)) (LLM_FFN_SILU + LLM_FFN_PAR), same as
  llama/mistral, which have no biases.
* Final: output_norm, then logits = h @ output.weight^T, or token_embd^T when
  output.weight is absent (llama-model.cpp loads tok_embd as the output with
  TENSOR_DUPLICATED).
* KV cache type: kv_type="int8" | "fp8_e4m3" | "fp8_e5m2" rounds each row of
  K (after RoPE) and V to 8 bits with a scale per row (kv_rows_8bit);
  kv_type="f16" rounds K (after RoPE) and V to float16 before
  attention, mimicking an f16 KV cache.

Usage: ref_logits(path, tokens, kv_type="f32") -> np.ndarray [n_tokens, n_vocab].
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass, field
from typing import Dict, Optional, Sequence

import numpy as np

from gguf import GGMLQuantizationType, GGUFReader
import gguf.quants

SUPPORTED_ARCHES = ("llama", "qwen2", "gemma3")


@dataclass
class RefModel:
    arch: str
    n_vocab: int
    n_embd: int
    n_layer: int
    n_head: int
    n_head_kv: int
    head_dim: int
    n_rot: int
    eps: float
    rope_base: float
    freq_scale: float
    neox: bool
    n_swa: int = 0
    swa_layers: tuple = ()
    rope_base_swa: float = 10000.0
    tensors: Dict[str, np.ndarray] = field(default_factory=dict)

    def t(self, name: str) -> np.ndarray:
        return self.tensors[name]

    def opt(self, name: str) -> Optional[np.ndarray]:
        return self.tensors.get(name)


def _field_value(reader: GGUFReader, key: str, default=None):
    f = reader.fields.get(key)
    if f is None:
        return default
    return f.contents()


def _tensor_to_f64(t) -> np.ndarray:
    """A GGUF tensor as float64 with numpy shape reversed(ne), i.e. (out, in)."""
    shape = tuple(int(d) for d in reversed(t.shape))
    if t.tensor_type == GGMLQuantizationType.F32:
        a = np.asarray(t.data, dtype=np.float32)
    elif t.tensor_type == GGMLQuantizationType.F16:
        a = np.asarray(t.data, dtype=np.float16)
    else:
        a = gguf.quants.dequantize(np.asarray(t.data), t.tensor_type)
    return a.astype(np.float64).reshape(shape)


def load(path: str) -> RefModel:
    r = GGUFReader(path)
    arch = _field_value(r, "general.architecture")
    if arch not in SUPPORTED_ARCHES:
        raise ValueError(f"ref_forward: unsupported architecture {arch!r}")
    tensors = {t.name: _tensor_to_f64(t) for t in r.tensors}

    def key(k, default=None):
        v = _field_value(r, f"{arch}.{k}", default)
        if v is None:
            raise KeyError(f"missing key {arch}.{k}")
        return v

    n_embd = int(key("embedding_length"))
    n_head = int(key("attention.head_count"))
    n_head_kv = int(key("attention.head_count_kv", n_head))
    head_dim = int(key("attention.key_length", n_embd // n_head))
    n_layer = int(key("block_count"))
    scaling = _field_value(r, f"{arch}.rope.scaling.type", "none")
    freq_scale = 1.0
    if scaling == "linear":
        freq_scale = 1.0 / float(key("rope.scaling.factor"))
    elif scaling not in ("none", None):
        raise ValueError(f"ref_forward: rope scaling {scaling!r} not implemented")
    m = RefModel(
        arch=arch,
        n_vocab=tensors["token_embd.weight"].shape[0],
        n_embd=n_embd,
        n_layer=n_layer,
        n_head=n_head,
        n_head_kv=n_head_kv,
        head_dim=head_dim,
        n_rot=int(key("rope.dimension_count", head_dim)),
        eps=float(key("attention.layer_norm_rms_epsilon")),
        rope_base=float(key("rope.freq_base", 10000.0)),
        freq_scale=freq_scale,
        neox=arch != "llama",
        tensors=tensors,
    )
    if arch == "gemma3":
        m.n_swa = int(key("attention.sliding_window"))
        pattern = _field_value(r, f"{arch}.attention.sliding_window_pattern")
        if pattern is None:
            pattern = 6
        if isinstance(pattern, (list, tuple)):
            m.swa_layers = tuple(bool(x) for x in pattern)
        else:
            n = int(pattern)
            m.swa_layers = tuple(n == 0 or il % n < n - 1 for il in range(n_layer)) if n > 0 else ()
        m.rope_base_swa = float(key("rope.freq_base_swa", 10000.0))
    return m


# ---------------------------------------------------------------------------
# Kernels (float64).


def rms_norm(x: np.ndarray, w: np.ndarray, eps: float) -> np.ndarray:
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def silu(x):
    return x / (1.0 + np.exp(-x))


def gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def rope(x: np.ndarray, pos: np.ndarray, n_rot: int, base: float, freq_scale: float,
         freq_factors: Optional[np.ndarray], neox: bool) -> np.ndarray:
    """x: [n_tokens, n_heads, head_dim]; rotates the first n_rot dims of each head."""
    half = n_rot // 2
    inv = base ** (-2.0 * np.arange(half) / n_rot)  # base^(-2i/n_rot)
    if freq_factors is not None:
        inv = inv / freq_factors[:half]
    theta = (pos.astype(np.float64) * freq_scale)[:, None] * inv[None, :]  # [T, half]
    cos = np.cos(theta)[:, None, :]
    sin = np.sin(theta)[:, None, :]
    out = x.copy()
    if neox:
        a, b = x[..., :half], x[..., half:n_rot]
        out[..., :half] = a * cos - b * sin
        out[..., half:n_rot] = a * sin + b * cos
    else:
        a, b = x[..., 0:n_rot:2], x[..., 1:n_rot:2]
        out[..., 0:n_rot:2] = a * cos - b * sin
        out[..., 1:n_rot:2] = a * sin + b * cos
    return out


def attention(q, k, v, pos, scale: float, n_swa: int = 0) -> np.ndarray:
    """q: [T, H, D]; k, v: [T, Hkv, D]; causal (and windowed when n_swa > 0)."""
    return attention_at(q, k, v, pos, pos, scale, n_swa)


def attention_at(q, k, v, q_pos, k_pos, scale: float, n_swa: int = 0) -> np.ndarray:
    """q: [Tq, H, D] at positions q_pos; k, v: [Tk, Hkv, D] at k_pos; a query
    sees the keys at or before its position (and within n_swa when > 0)."""
    T, H, D = q.shape
    group = H // k.shape[1]
    diff = q_pos[:, None] - k_pos[None, :]  # query p minus key j
    visible = diff >= 0
    if n_swa > 0:
        visible &= diff < n_swa
    out = np.empty((T, H, v.shape[2]))
    for h in range(H):
        kh, vh = k[:, h // group, :], v[:, h // group, :]
        s = (q[:, h, :] @ kh.T) * scale
        s = np.where(visible, s, -np.inf)
        s -= s.max(axis=1, keepdims=True)
        p = np.exp(s)
        p /= p.sum(axis=1, keepdims=True)
        out[:, h, :] = p @ vh
    return out


# ---------------------------------------------------------------------------


# 8-bit KV rows: each token's K (or V) of one kv head gets an f32 scale,
# max|x| / the format's largest magnitude, and is rounded to the format's grid
# (to nearest, ties to even): int8 the integers up to 127; fp8 the values with
# (mantissa bits) after the leading one down to the smallest normal exponent,
# subnormal spacing below it (E4M3: 3 bits, exponents >= -6, max 448; E5M2:
# 2 bits, >= -14, max 57344).
ROW_CODE_MAX = {"int8": 127.0, "fp8_e4m3": 448.0, "fp8_e5m2": 57344.0}
_FP8_GRID = {"fp8_e4m3": (3, -6), "fp8_e5m2": (2, -14)}


def kv_rows_8bit(x: np.ndarray, kind: str) -> np.ndarray:
    x32 = x.astype(np.float32)
    scale = (np.abs(x32).max(axis=-1, keepdims=True) / np.float32(ROW_CODE_MAX[kind])).astype(np.float32)
    safe = np.where(scale > 0, scale, np.float32(1))
    y = (x32 / safe).astype(np.float64)
    if kind == "int8":
        codes = np.clip(np.rint(y), -127, 127)
    else:
        mbits, emin = _FP8_GRID[kind]
        _, e = np.frexp(np.abs(y))  # |y| = f * 2^e, 0.5 <= f < 1: the binade 2^(e-1)
        step = np.ldexp(1.0, np.maximum(e - 1, emin) - mbits)
        codes = np.clip(np.rint(y / step) * step, -ROW_CODE_MAX[kind], ROW_CODE_MAX[kind])
    codes = np.where(scale > 0, codes, 0.0)
    return (codes.astype(np.float32) * scale).astype(np.float64)


def check_tokens(m: RefModel, tokens: Sequence[int]) -> np.ndarray:
    tokens = np.asarray(tokens, dtype=np.int64)
    if tokens.ndim != 1 or len(tokens) == 0:
        raise ValueError("tokens must be a non-empty 1-D sequence")
    if tokens.min() < 0 or tokens.max() >= m.n_vocab:
        raise ValueError("token id out of range")
    return tokens


def embed(m: RefModel, tokens: np.ndarray) -> np.ndarray:
    x = m.t("token_embd.weight")[tokens]
    return x * math.sqrt(m.n_embd) if m.arch == "gemma3" else x


def is_local(m: RefModel, il: int) -> bool:
    """A sliding-window layer (gemma3's local layers)."""
    return m.arch == "gemma3" and il < len(m.swa_layers) and bool(m.swa_layers[il])


def layer_qkv(m: RefModel, il: int, x: np.ndarray):
    """Layer il's Q [T, H, D], K [T, Hkv, D], V [T, Hkv, Dv] before rope."""
    T, D = x.shape[0], m.head_dim
    p = f"blk.{il}."
    h = rms_norm(x, m.t(p + "attn_norm.weight"), m.eps)
    q = h @ m.t(p + "attn_q.weight").T
    k = h @ m.t(p + "attn_k.weight").T
    v = h @ m.t(p + "attn_v.weight").T
    for name, y in (("attn_q.bias", q), ("attn_k.bias", k), ("attn_v.bias", v)):
        b = m.opt(p + name)
        if b is not None:
            y += b
    q = q.reshape(T, m.n_head, D)
    k = k.reshape(T, m.n_head_kv, D)
    v = v.reshape(T, m.n_head_kv, v.shape[1] // m.n_head_kv)
    if m.arch == "gemma3":
        q = rms_norm(q, m.t(p + "attn_q_norm.weight"), m.eps)
        k = rms_norm(k, m.t(p + "attn_k_norm.weight"), m.eps)
    return q, k, v


def layer_rope(m: RefModel, il: int, x: np.ndarray, pos: np.ndarray) -> np.ndarray:
    """Rope of layer il (its base: sliding layers have their own) at positions pos."""
    base, fscale = (m.rope_base_swa, 1.0) if is_local(m, il) else (m.rope_base, m.freq_scale)
    return rope(x, pos, m.n_rot, base, fscale, m.opt("rope_freqs.weight"), m.neox)


def layer_rest(m: RefModel, il: int, x: np.ndarray, a: np.ndarray) -> np.ndarray:
    """The residual stream after layer il, given its attention output a [T, H, Dv]."""
    gemma = m.arch == "gemma3"
    p = f"blk.{il}."
    a = a.reshape(x.shape[0], -1) @ m.t(p + "attn_output.weight").T
    if gemma:
        a = rms_norm(a, m.t(p + "post_attention_norm.weight"), m.eps)
    x = x + a
    h = rms_norm(x, m.t(p + "ffn_norm.weight"), m.eps)
    g = h @ m.t(p + "ffn_gate.weight").T
    u = h @ m.t(p + "ffn_up.weight").T
    f = ((gelu_tanh(g) if gemma else silu(g)) * u) @ m.t(p + "ffn_down.weight").T
    if gemma:
        f = rms_norm(f, m.t(p + "post_ffw_norm.weight"), m.eps)
    return x + f


def output_logits(m: RefModel, x: np.ndarray) -> np.ndarray:
    x = rms_norm(x, m.t("output_norm.weight"), m.eps)
    out_w = m.opt("output.weight")
    if out_w is None:
        out_w = m.t("token_embd.weight")
    return x @ out_w.T


def kv_round(k: np.ndarray, v: np.ndarray, kv_type: str):
    """K and V as the cache stores them."""
    if kv_type == "f16":
        return k.astype(np.float16).astype(np.float64), v.astype(np.float16).astype(np.float64)
    if kv_type in ROW_CODE_MAX:
        return kv_rows_8bit(k, kv_type), kv_rows_8bit(v, kv_type)
    if kv_type != "f32":
        raise ValueError(f"kv_type {kv_type!r}")
    return k, v


def forward(m: RefModel, tokens: Sequence[int], kv_type: str = "f32") -> np.ndarray:
    tokens = check_tokens(m, tokens)
    T, D = len(tokens), m.head_dim
    pos = np.arange(T)
    x = embed(m, tokens)
    for il in range(m.n_layer):
        q, k, v = layer_qkv(m, il, x)
        q, k = layer_rope(m, il, q, pos), layer_rope(m, il, k, pos)
        k, v = kv_round(k, v, kv_type)
        a = attention(q, k, v, pos, 1.0 / math.sqrt(D), m.n_swa if is_local(m, il) else 0)
        x = layer_rest(m, il, x, a)
    return output_logits(m, x)


def load_cached(path: str) -> RefModel:
    m = _CACHE.get(path)
    if m is None:
        m = _CACHE[path] = load(path)
    return m


_CACHE: Dict[str, RefModel] = {}


def ref_logits(path: str, tokens: Sequence[int], kv_type: str = "f32") -> np.ndarray:
    """Logits [n_tokens, n_vocab] (float64) of `tokens` fed from position 0."""
    return forward(load_cached(path), tokens, kv_type)


if __name__ == "__main__":
    if len(sys.argv) < 3:
        print("usage: ref_forward.py MODEL.gguf TOKEN[,TOKEN...]", file=sys.stderr)
        sys.exit(1)
    toks = [int(t) for t in sys.argv[2].split(",")]
    np.set_printoptions(precision=5, suppress=True, linewidth=120)
    print(ref_logits(sys.argv[1], toks))
