"""Cross-checks ref_forward.py against llama.cpp (through llama-cpp-python).

For each synthetic family variant: write the model, run llama.cpp with an
f32 KV cache and logits for every position, run the numpy reference, and print
the worst per-position error max|llama - ref| / max|ref|. Not part of the test
suite (llama-cpp-python is not a project dependency); run it by hand after
changing make_model.py or ref_forward.py and record the numbers in README.md:

  python3 tests/ref/check_llamacpp.py [--kv f16] [--wtype f16]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_model  # noqa: E402
import ref_forward  # noqa: E402

def _ggml_gelu_f16_table(x):
    """ggml-cpu's GELU when built with GGML_GELU_FP16 (the default): the input
    is rounded to f16 and looked up in a table of f16 tanh-GELU values."""
    x16 = x.astype(np.float32).astype(np.float16).astype(np.float64)
    y = _exact_gelu(x16).astype(np.float16).astype(np.float64)
    return np.where(x <= -10, 0.0, np.where(x >= 10, x, y))


_exact_gelu = ref_forward.gelu_tanh


def _zero_ffn_down(spec):
    """make_tensors with every ffn_down zeroed: the FFN (and its GELU) drops out."""
    return [(n, np.zeros_like(t) if n.endswith("ffn_down.weight") else t)
            for n, t in _make_tensors(spec)]


_make_tensors = make_model.make_tensors

# (family, options, how): how is "" (plain), "gelu-table" (the reference uses
# ggml's f16 GELU table) or "no-ffn" (ffn_down zeroed in the model).
VARIANTS = [
    ("llama", {}),
    ("llama", {"rope_freqs": True}),
    ("llama", {"rope_scale": 2.0}),
    ("mistral", {}),
    ("qwen2", {}),
    ("qwen2", {"tied": True}),
    ("gemma3", {}),
    ("gemma3", {}, "gelu-table"),
    ("gemma3", {}, "no-ffn"),
    ("gemma3", {"sliding_window": 4, "n_layer": 12, "seed": 5}, "no-ffn"),
]


def test_tokens(n_vocab: int, n: int = 64, seed: int = 1234):
    rng = np.random.default_rng(seed)
    return [make_model.BOS_ID] + [int(t) for t in rng.integers(make_model.N_SPECIAL, n_vocab, n - 1)]


def main() -> int:
    import llama_cpp

    ap = argparse.ArgumentParser()
    ap.add_argument("--kv", default="f32", choices=("f32", "f16"))
    ap.add_argument("--wtype", default="f32", choices=make_model.WTYPES)
    a = ap.parse_args()
    ggml_type = {"f32": 0, "f16": 1}[a.kv]
    worst = 0.0
    with tempfile.TemporaryDirectory() as d:
        for arch, opts, *how in VARIANTS:
            how = how[0] if how else ""
            make_model.make_tensors = _zero_ffn_down if how == "no-ffn" else _make_tensors
            ref_forward.gelu_tanh = _ggml_gelu_f16_table if how == "gelu-table" else _exact_gelu
            spec = make_model.default_spec(arch, wtype=a.wtype, **opts)
            path = make_model.write_model(os.path.join(d, "m.gguf"), spec)
            toks = test_tokens(spec.n_vocab)
            llm = llama_cpp.Llama(model_path=path, n_ctx=256, n_batch=64, n_ubatch=64, logits_all=True,
                                  type_k=ggml_type, type_v=ggml_type, flash_attn=False, n_threads=2,
                                  verbose=False)
            llm.eval(toks)
            got = np.array(llm.scores[: len(toks)], dtype=np.float64)
            del llm
            ref = ref_forward.ref_logits(path, toks, kv_type=a.kv)
            ref_forward._CACHE.clear()
            err = np.abs(got - ref).max(axis=1) / np.abs(ref).max(axis=1)
            worst = max(worst, err.max())
            print(f"{arch:8s} {how:10s} {str(opts):48s} wtype={a.wtype} kv={a.kv}: max rel err {err.max():.2e} "
                  f"(median {np.median(err):.2e}), argmax agree {np.mean(got.argmax(1) == ref.argmax(1)):.3f}")
    print(f"worst {worst:.2e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
