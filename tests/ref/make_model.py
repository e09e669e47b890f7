"""Tiny random-weight GGUF models of every supported family, for tests.

A model is described by a `ModelSpec` (family defaults from `default_spec`,
overridden by keyword options) and written with gguf.GGUFWriter exactly the
way llama.cpp's convert_hf_to_gguf.py lays a real model out: the same metadata
keys, tensor names and GGUF shapes (a numpy weight of shape (out, in) is
stored with ne = [in, out]), 1-D tensors (norms, biases, rope factors) kept in
F32 whatever the weight type.

Families:
  llama    GGUF arch "llama", normal (adjacent-pair) RoPE, GQA, SiLU MLP.
  mistral  also GGUF arch "llama" (that is how the converter writes Mistral):
           a different shape (one kv head, rope base 1e6), same forward.
  qwen2    GGUF arch "qwen2": q/k/v biases, NEOX RoPE; `tied=True` drops
           output.weight so the logits reuse token_embd.
  gemma3   GGUF arch "gemma3": always tied, q/k norms, post-attention and
           post-FFN norms, GELU MLP, sliding-window layers (il % 6 < 5) with
           a window shorter than the test sequences, head_dim != n_embd/n_head.

Norm weights are written around 1 for every family, gemma3 included: HF's
Gemma3RMSNorm computes x * (1 + w), and convert_hf_to_gguf.py's Gemma3Model
adds the 1 to every "*norm.weight" tensor when converting, so a GGUF gemma3
norm multiplies by the stored weight directly (see ref_forward.py).

Command line:
  python3 tests/ref/make_model.py --arch gemma3 --out /tmp/g.gguf [--seed 1]
      [--wtype f32|f16|q8_0] [--tied] [--rope-freqs] [--rope-scale 2.0]
      [--set n_layer=3 --set drop_tensors=blk.0.attn_q.weight ...]
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import sys
from dataclasses import dataclass, field
from typing import Optional, Sequence

import numpy as np

import gguf
from gguf import GGMLQuantizationType, GGUFWriter, TokenType

# Token ids shared by every synthetic vocabulary (Gemma's layout).
PAD_ID, EOS_ID, BOS_ID, UNK_ID = 0, 1, 2, 3
N_SPECIAL = 4
BYTE_BASE = N_SPECIAL  # "<0x00>" is id 4, "<0xFF>" is id 259

ARCHES = ("llama", "mistral", "qwen2", "gemma3")
WTYPES = ("f32", "f16", "q8_0")


@dataclass(frozen=True)
class ModelSpec:
    arch: str = "llama"  # family: llama, mistral, qwen2, gemma3
    seed: int = 0
    n_vocab: int = 320
    n_embd: int = 64
    n_layer: int = 2
    n_head: int = 4
    n_head_kv: int = 2
    head_dim: int = 16
    n_ff: int = 128
    n_ctx: int = 256
    eps: float = 1e-5
    rope_base: float = 10000.0
    wtype: str = "f32"
    tied: bool = False  # omit output.weight
    rope_freqs: bool = False  # llama-3.1 style rope_freqs.weight tensor
    rope_scale: Optional[float] = None  # linear rope scaling factor
    sliding_window: int = 0  # gemma3 only
    sliding_window_pattern: Optional[int] = None  # gemma3: write the optional key
    rope_base_swa: Optional[float] = None  # gemma3: write {arch}.rope.freq_base_swa
    # Fault injection for the malformed-model tests.
    gguf_arch: Optional[str] = None  # general.architecture override (e.g. "mamba9")
    drop_keys: tuple = ()  # metadata keys (with "{arch}" expanded) not to write
    drop_tensors: tuple = ()  # tensor names not to write

    @property
    def file_arch(self) -> str:
        """The architecture name written to general.architecture."""
        if self.gguf_arch:
            return self.gguf_arch
        return "llama" if self.arch == "mistral" else self.arch


def default_spec(arch: str, **options) -> ModelSpec:
    """Family defaults, overridden by `options` (any ModelSpec field)."""
    if arch not in ARCHES:
        raise ValueError(f"unknown family {arch!r} (known: {', '.join(ARCHES)})")
    base = dict(arch=arch)
    if arch == "llama":
        base.update(n_vocab=320, n_embd=64, n_layer=2, n_head=4, n_head_kv=2, head_dim=16,
                    n_ff=128, eps=1e-5, rope_base=10000.0)
    elif arch == "mistral":
        base.update(n_vocab=352, n_embd=128, n_layer=2, n_head=4, n_head_kv=1, head_dim=32,
                    n_ff=192, eps=1e-5, rope_base=1000000.0)
    elif arch == "qwen2":
        base.update(n_vocab=400, n_embd=128, n_layer=3, n_head=4, n_head_kv=2, head_dim=32,
                    n_ff=160, eps=1e-6, rope_base=1000000.0)
    elif arch == "gemma3":
        # head_dim * n_head (128) != n_embd (64), as in the real gemma-3-270m
        # (640 vs 4 x 256); 7 layers: local 0-4, global 5, local 6.
        base.update(n_vocab=512, n_embd=64, n_layer=7, n_head=4, n_head_kv=1, head_dim=32,
                    n_ff=128, eps=1e-6, rope_base=1000000.0, tied=True, sliding_window=16)
    base.update(options)
    for k in ("drop_keys", "drop_tensors"):
        if k in base:
            base[k] = tuple(base[k])
    spec = ModelSpec(**base)
    if spec.wtype not in WTYPES:
        raise ValueError(f"unknown weight type {spec.wtype!r} (known: {', '.join(WTYPES)})")
    if spec.arch != "gemma3" and spec.head_dim * spec.n_head != spec.n_embd:
        raise ValueError("llama/qwen2 families need head_dim * n_head == n_embd")
    if spec.n_head % spec.n_head_kv:
        raise ValueError("n_head must be a multiple of n_head_kv")
    return spec


# ---------------------------------------------------------------------------
# Vocabulary: a SentencePiece ("llama") vocab with the 256 byte tokens.

_WORDS = (
    "the of and to in is that it for was on are as with his they at be this from have or by "
    "one had not but what all were when we there can an your which their said if do will each "
    "about how up out them then she many some so these would other into has more her two like "
    "him see time could no make than first been its who now people my made over did down only "
    "way find use may water long little very after words called just where most know get "
    "through back much before go good new write our used me man too any day same right look "
    "think also around another came come work three word must because does part even place "
    "well such here take why things help put years different away again off went old number "
    "hello world model token cache engine server request batch"
).split()


def build_vocab(n_vocab: int):
    """Returns (tokens, scores, token_types) with exactly n_vocab entries."""
    tokens = ["<pad>", "<eos>", "<bos>", "<unk>"]
    types = [TokenType.CONTROL, TokenType.CONTROL, TokenType.CONTROL, TokenType.UNKNOWN]
    scores = [0.0, 0.0, 0.0, 0.0]
    for b in range(256):
        tokens.append(f"<0x{b:02X}>")
        types.append(TokenType.BYTE)
        scores.append(0.0)
    pieces = ["\u2581"]
    pieces += [chr(c) for c in range(ord("a"), ord("z") + 1)]
    pieces += ["\u2581" + chr(c) for c in range(ord("a"), ord("z") + 1)]
    pieces += ["\u2581" + w for w in _WORDS if len(w) > 1]
    pieces += [w for w in _WORDS if len(w) > 2]
    # Letter pairs fill whatever room is left.
    letters = "etaoinshrdlucmfwypvbgkqjxz"
    pieces += [a + b for a in letters for b in letters]
    seen = set()
    uniq = []
    for p in pieces:
        if p not in seen:
            seen.add(p)
            uniq.append(p)
    room = n_vocab - len(tokens)
    if room < 0 or room > len(uniq):
        raise ValueError(f"n_vocab {n_vocab} out of range [{len(tokens)}, {len(tokens) + len(uniq)}]")
    for i, p in enumerate(uniq[:room]):
        tokens.append(p)
        types.append(TokenType.NORMAL)
        scores.append(-float(i + 1))
    return tokens, scores, types


# ---------------------------------------------------------------------------
# Weights.


def _rope_freq_factors(n_rot: int) -> np.ndarray:
    """Llama-3.1-like factors: 1 for the fast dimensions, 8 for the slow ones,
    a smooth ramp in between (one factor per rotated pair)."""
    n = n_rot // 2
    i = np.arange(n, dtype=np.float64)
    t = np.clip((i - n / 3) / (n / 3), 0.0, 1.0)
    return (1.0 + 7.0 * t).astype(np.float32)


def make_tensors(spec: ModelSpec):
    """Returns an ordered list of (name, float32 numpy array in (out, in) layout)."""
    rng = np.random.default_rng(spec.seed)
    E, F, D = spec.n_embd, spec.n_ff, spec.head_dim
    q_dim, kv_dim = spec.n_head * D, spec.n_head_kv * D

    def lin(n_out, n_in):
        return (rng.standard_normal((n_out, n_in)) / math.sqrt(n_in)).astype(np.float32)

    def norm(n):
        return (1.0 + 0.1 * rng.standard_normal(n)).astype(np.float32)

    def bias(n):
        return (0.1 * rng.standard_normal(n)).astype(np.float32)

    out = []
    # Embedding rows of norm ~0.25*sqrt(E): O(1) logits when tied; for gemma3
    # the sqrt(n_embd) input scale makes the residual stream O(1)-ish too.
    emb_std = 0.25 if spec.arch != "gemma3" else 1.0 / math.sqrt(E)
    out.append(("token_embd.weight", (emb_std * rng.standard_normal((spec.n_vocab, E))).astype(np.float32)))
    if spec.rope_freqs:
        out.append(("rope_freqs.weight", _rope_freq_factors(D)))
    for il in range(spec.n_layer):
        p = f"blk.{il}."
        out.append((p + "attn_norm.weight", norm(E)))
        out.append((p + "attn_q.weight", lin(q_dim, E)))
        out.append((p + "attn_k.weight", lin(kv_dim, E)))
        out.append((p + "attn_v.weight", lin(kv_dim, E)))
        if spec.arch == "qwen2":
            out.append((p + "attn_q.bias", bias(q_dim)))
            out.append((p + "attn_k.bias", bias(kv_dim)))
            out.append((p + "attn_v.bias", bias(kv_dim)))
        if spec.arch == "gemma3":
            out.append((p + "attn_q_norm.weight", norm(D)))
            out.append((p + "attn_k_norm.weight", norm(D)))
        out.append((p + "attn_output.weight", lin(E, q_dim)))
        if spec.arch == "gemma3":
            out.append((p + "post_attention_norm.weight", norm(E)))
        out.append((p + "ffn_norm.weight", norm(E)))
        out.append((p + "ffn_gate.weight", lin(F, E)))
        out.append((p + "ffn_up.weight", lin(F, E)))
        out.append((p + "ffn_down.weight", lin(E, F)))
        if spec.arch == "gemma3":
            out.append((p + "post_ffw_norm.weight", norm(E)))
    out.append(("output_norm.weight", norm(E)))
    if not spec.tied and spec.arch != "gemma3":
        out.append(("output.weight", lin(spec.n_vocab, E)))
    return out


# ---------------------------------------------------------------------------
# Writer.

_FILE_TYPE = {"f32": gguf.LlamaFileType.ALL_F32, "f16": gguf.LlamaFileType.MOSTLY_F16,
              "q8_0": gguf.LlamaFileType.MOSTLY_Q8_0}


def _encode(name: str, w: np.ndarray, wtype: str):
    """(array, raw_dtype) to hand to GGUFWriter.add_tensor; 1-D stays F32."""
    if w.ndim == 1 or wtype == "f32":
        return w.astype(np.float32), None
    if wtype == "f16":
        return w.astype(np.float16), None
    if wtype == "q8_0":
        return gguf.quants.quantize(w.astype(np.float32), GGMLQuantizationType.Q8_0), GGMLQuantizationType.Q8_0
    raise ValueError(wtype)


def write_model(path: str | os.PathLike, spec: ModelSpec, vocab=None, tensors=None) -> str:
    """Writes `spec` to `path` as GGUF; returns the path as a string. `vocab`
    ((tokens, scores, types) with n_vocab entries) and `tensors` (as
    make_tensors returns) replace the generated ones, for models built by
    hand (tests/integration/tool_model.py)."""
    path = os.fspath(path)
    arch = spec.file_arch
    w = GGUFWriter(path, arch)
    drop = {k.replace("{arch}", arch) for k in spec.drop_keys}

    def kv(key: str, fn, *args):
        if key.replace("{arch}", arch) not in drop:
            fn(*args)

    A = "{arch}"
    # general.architecture is written by GGUFWriter itself.
    kv("general.name", w.add_name, f"synthetic-{spec.arch}")
    kv("general.file_type", w.add_file_type, int(_FILE_TYPE[spec.wtype]))
    if spec.wtype == "q8_0":
        kv("general.quantization_version", w.add_quantization_version, gguf.GGML_QUANT_VERSION)
    kv(f"{A}.context_length", w.add_context_length, spec.n_ctx)
    kv(f"{A}.embedding_length", w.add_embedding_length, spec.n_embd)
    kv(f"{A}.block_count", w.add_block_count, spec.n_layer)
    kv(f"{A}.feed_forward_length", w.add_feed_forward_length, spec.n_ff)
    kv(f"{A}.attention.head_count", w.add_head_count, spec.n_head)
    kv(f"{A}.attention.head_count_kv", w.add_head_count_kv, spec.n_head_kv)
    kv(f"{A}.attention.layer_norm_rms_epsilon", w.add_layer_norm_rms_eps, spec.eps)
    kv(f"{A}.rope.freq_base", w.add_rope_freq_base, spec.rope_base)
    if spec.arch in ("llama", "mistral"):
        # LlamaModel.set_gguf_parameters writes the rotary dimension count.
        kv(f"{A}.rope.dimension_count", w.add_rope_dimension_count, spec.head_dim)
        kv(f"{A}.vocab_size", w.add_vocab_size, spec.n_vocab)
    if spec.arch == "gemma3":
        kv(f"{A}.attention.key_length", w.add_key_length, spec.head_dim)
        kv(f"{A}.attention.value_length", w.add_value_length, spec.head_dim)
        kv(f"{A}.attention.sliding_window", w.add_sliding_window, spec.sliding_window)
        if spec.sliding_window_pattern is not None:
            kv(f"{A}.attention.sliding_window_pattern", w.add_sliding_window_pattern,
               spec.sliding_window_pattern)
        if spec.rope_base_swa is not None:
            kv(f"{A}.rope.freq_base_swa", w.add_rope_freq_base_swa, spec.rope_base_swa)
    if spec.rope_scale is not None:
        kv(f"{A}.rope.scaling.type", w.add_rope_scaling_type, gguf.RopeScalingType.LINEAR)
        kv(f"{A}.rope.scaling.factor", w.add_rope_scaling_factor, spec.rope_scale)

    tokens, scores, types = vocab if vocab is not None else build_vocab(spec.n_vocab)
    kv("tokenizer.ggml.model", w.add_tokenizer_model, "llama")
    kv("tokenizer.ggml.tokens", w.add_token_list, tokens)
    kv("tokenizer.ggml.scores", w.add_token_scores, scores)
    kv("tokenizer.ggml.token_type", w.add_token_types, [int(t) for t in types])
    kv("tokenizer.ggml.bos_token_id", w.add_bos_token_id, BOS_ID)
    kv("tokenizer.ggml.eos_token_id", w.add_eos_token_id, EOS_ID)
    kv("tokenizer.ggml.unknown_token_id", w.add_unk_token_id, UNK_ID)
    kv("tokenizer.ggml.padding_token_id", w.add_pad_token_id, PAD_ID)
    kv("tokenizer.ggml.add_bos_token", w.add_add_bos_token, True)
    kv("tokenizer.ggml.add_eos_token", w.add_add_eos_token, False)
    # SentencePiece's add_dummy_prefix: on for Llama/Mistral, off for Gemma.
    kv("tokenizer.ggml.add_space_prefix", w.add_add_space_prefix, spec.arch != "gemma3")

    for name, t in (tensors if tensors is not None else make_tensors(spec)):
        if name in spec.drop_tensors:
            continue
        data, raw_dtype = _encode(name, t, spec.wtype)
        w.add_tensor(name, data, raw_dtype=raw_dtype)

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def make_model(path: str | os.PathLike, arch: str = "llama", **options) -> str:
    """Writes a family's default tiny model (with `options` overrides) to `path`."""
    return write_model(path, default_spec(arch, **options))


# ---------------------------------------------------------------------------


def _parse_value(field_type, text: str):
    if text.lower() in ("none", "null"):
        return None
    if field_type in (bool, "bool"):
        return text.lower() in ("1", "true", "yes", "on")
    for conv in (int, float):
        try:
            return conv(text)
        except ValueError:
            pass
    return text


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--arch", required=True, choices=ARCHES)
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--wtype", default="f32", choices=WTYPES)
    ap.add_argument("--tied", action="store_true")
    ap.add_argument("--rope-freqs", action="store_true")
    ap.add_argument("--rope-scale", type=float)
    ap.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE",
                    help="override any ModelSpec field (e.g. n_layer=3, sliding_window=8)")
    a = ap.parse_args(argv)
    opts = dict(seed=a.seed, wtype=a.wtype)
    if a.tied:
        opts["tied"] = True
    if a.rope_freqs:
        opts["rope_freqs"] = True
    if a.rope_scale is not None:
        opts["rope_scale"] = a.rope_scale
    fields = {f.name: f.type for f in dataclasses.fields(ModelSpec)}
    for s in a.set:
        k, _, v = s.partition("=")
        if k not in fields:
            ap.error(f"unknown field {k!r}")
        if k in ("drop_keys", "drop_tensors"):
            opts[k] = tuple(x for x in v.split(",") if x)
        else:
            opts[k] = _parse_value(fields[k], v)
    spec = default_spec(a.arch, **opts)
    write_model(a.out, spec)
    print(f"wrote {a.out}: {spec}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
