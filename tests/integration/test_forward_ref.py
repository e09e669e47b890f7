"""The C forward pass against the numpy reference (tests/ref/ref_forward.py).

Contract of the command under test:

  cllm logits -m MODEL --tokens 2,17,5,... --out FILE.bin --kv-type f32|f16
              [--threads N] [--chunk K]

feeds the tokens from position 0 (in chunks of K tokens when --chunk is
given) and writes the logits of every position to FILE.bin as little-endian
float32, shape [n_tokens, n_vocab], row-major; exit code 0, nothing required on
stdout.

For every family variant (tiny random-weight models from tests/ref/make_model.py)
and every position, max|c - r| / max|r| over the vocabulary must be <= 1e-4
with F32 weights and an f32 KV cache: the reference is float64 and was checked
against llama.cpp to ~1e-6 (tests/ref/README.md), so 1e-4 leaves room for f32
arithmetic only; any convention error (rope pairing, window, scale) gives O(1e-1).
"""

from __future__ import annotations

import numpy as np
import pytest

import ref_forward

# 64 tokens starting with BOS (id 2), all valid in every synthetic vocabulary
# (the smallest has 320 tokens); the gemma3 window (16) is much shorter.
TOKENS = [2, 55, 254, 52, 187, 101, 135, 30, 303, 7, 49, 297, 150, 61, 193, 155, 174, 178, 253,
          239, 235, 209, 118, 219, 50, 111, 240, 146, 311, 209, 305, 14, 254, 163, 19, 248, 63,
          224, 192, 208, 6, 44, 227, 144, 116, 243, 16, 229, 52, 17, 79, 7, 11, 225, 162, 209,
          201, 231, 33, 81, 52, 281, 296, 197]

# (test id, family, make_model options)
VARIANTS = [
    ("llama-gqa", "llama", {}),
    ("llama-rope-freqs", "llama", {"rope_freqs": True}),
    ("llama-linear-rope", "llama", {"rope_scale": 2.0}),
    ("mistral", "mistral", {}),
    ("qwen2-bias", "qwen2", {}),
    ("qwen2-tied", "qwen2", {"tied": True}),
    ("gemma3-swa16", "gemma3", {"sliding_window": 16, "n_layer": 7}),
]

F32_TOL = 1e-4
# F16 weights with an f16 KV cache. The reference dequantizes the same f16
# weights (so weight rounding is identical on both sides) and rounds K (after
# RoPE) and V to float16 like the cache does. What is left: f32-vs-f64
# arithmetic, and K/V elements whose f32 value lands on the other side of an
# f16 rounding boundary than the f64 one (measured: <= 1e-4 on these models).
# An engine that also rounds Q or the attention probabilities to f16 in its
# attention kernel, as llama.cpp's CPU backend does, moves the logits by up to
# 6e-4 (measured); 1e-3 admits that and still catches any real f16 bug (O(1e-1)).
F16_TOL = 1e-3

_ref_cache: dict = {}


def _reference(path, kv_type: str) -> np.ndarray:
    key = (str(path), kv_type)
    if key not in _ref_cache:
        _ref_cache[key] = ref_forward.ref_logits(str(path), TOKENS, kv_type=kv_type)
    return _ref_cache[key]


def _run_logits(run_cllm, model, out, kv_type: str, extra=()) -> np.ndarray:
    args = ["logits", "-m", model, "--tokens", ",".join(map(str, TOKENS)), "--out", out,
            "--kv-type", kv_type, *extra]
    r = run_cllm(*args, timeout=120)
    assert r.returncode == 0, f"cllm {' '.join(map(str, args))} exited {r.returncode}:\n{r.stderr}"
    data = np.fromfile(out, dtype="<f4")
    assert data.size % len(TOKENS) == 0, f"{out}: {data.size} floats is not a multiple of {len(TOKENS)} tokens"
    return data.reshape(len(TOKENS), -1).astype(np.float64)


def _check(got: np.ndarray, ref: np.ndarray, tol: float, what: str):
    assert got.shape == ref.shape, f"{what}: logits shape {got.shape}, expected {ref.shape}"
    assert np.all(np.isfinite(got)), f"{what}: non-finite logits at positions {np.where(~np.isfinite(got).all(1))[0]}"
    err = np.abs(got - ref).max(axis=1) / np.abs(ref).max(axis=1)
    bad = np.where(err > tol)[0]
    assert bad.size == 0, (
        f"{what}: {bad.size}/{len(err)} positions exceed {tol:g}; first bad position {bad[0]} "
        f"(error {err[bad[0]]:.3g}), worst {err.max():.3g} at {err.argmax()}; "
        f"argmax agreement {np.mean(got.argmax(1) == ref.argmax(1)):.3f}")


MODES = [
    ("threads1", ["--threads", "1"]),
    ("threads2", ["--threads", "2"]),
    ("chunk7", ["--chunk", "7"]),
]


@pytest.mark.parametrize("mode,extra", MODES, ids=[m[0] for m in MODES])
@pytest.mark.parametrize("arch,options", [v[1:] for v in VARIANTS], ids=[v[0] for v in VARIANTS])
def test_f32_logits_match_reference(run_cllm, model_factory, tmp_path, arch, options, mode, extra):
    model = model_factory(arch, **options)
    got = _run_logits(run_cllm, model, tmp_path / "logits.bin", "f32", extra)
    _check(got, _reference(model, "f32"), F32_TOL, f"{arch} {options} {mode}")


@pytest.mark.parametrize("arch,options", [v[1:] for v in VARIANTS], ids=[v[0] for v in VARIANTS])
def test_threads_agree(run_cllm, model_factory, tmp_path, arch, options):
    """One thread and two compute the same logits (to f32 rounding)."""
    model = model_factory(arch, **options)
    one = _run_logits(run_cllm, model, tmp_path / "t1.bin", "f32", ["--threads", "1"])
    two = _run_logits(run_cllm, model, tmp_path / "t2.bin", "f32", ["--threads", "2"])
    _check(two, one, 1e-5, f"{arch} {options} threads 2 vs 1")


@pytest.mark.parametrize("mode,extra", [("default", []), ("chunk7", ["--chunk", "7"])],
                         ids=["default", "chunk7"])
@pytest.mark.parametrize("arch,options", [v[1:] for v in VARIANTS], ids=[v[0] for v in VARIANTS])
def test_f16_weights_f16_cache_match_reference(run_cllm, model_factory, tmp_path, arch, options, mode, extra):
    model = model_factory(arch, wtype="f16", **options)
    got = _run_logits(run_cllm, model, tmp_path / "logits.bin", "f16", extra)
    _check(got, _reference(model, "f16"), F16_TOL, f"{arch} {options} f16 {mode}")
