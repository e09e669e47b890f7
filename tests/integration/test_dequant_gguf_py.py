"""Our dequantizers and quantizers against an independent implementation, the
Python `gguf` package (gguf.quants), through build/dequant_tool:

  - a GGUF of random-but-valid blocks of every supported quantized type (random
    bytes, finite f16 scales including subnormals and zeros) dequantizes to
    exactly gguf.quants.dequantize's floats, with the AVX2 and the reference
    kernels;
  - tensors of the real gemma-3-270m Q4_K_M model (Q8_0, Q5_0, Q4_K, Q6_K, F32)
    dequantize to exactly what gguf.quants gives;
  - for the types gguf.quants can quantize (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0,
    MXFP4, all bit-exact ports of ggml's reference quantizers) our quantizer
    writes the same bytes.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import gguf
import numpy as np
import pytest

Q = gguf.GGMLQuantizationType

# Byte offsets of the f16 scale fields in each block (ggml-common.h layouts).
F16_FIELDS = {
    Q.Q4_0: [0],
    Q.Q4_1: [0, 2],
    Q.Q5_0: [0],
    Q.Q5_1: [0, 2],
    Q.Q8_0: [0],
    Q.Q2_K: [80, 82],
    Q.Q3_K: [108],
    Q.Q4_K: [0, 2],
    Q.Q5_K: [0, 2],
    Q.Q6_K: [208],
    Q.MXFP4: [],  # a shared exponent byte: every value of it is a finite scale (2^-128 .. 2^127)
}
QUANTIZABLE = [Q.Q4_0, Q.Q4_1, Q.Q5_0, Q.Q5_1, Q.Q8_0, Q.MXFP4]


@pytest.fixture(scope="module")
def dequant_tool(build_dir) -> Path:
    path = build_dir / "dequant_tool"
    if not (path.is_file() and os.access(path, os.X_OK)):
        pytest.fail(f"{path} is missing: build the project first (it is tests/tools/dequant_tool.c)",
                    pytrace=False)
    return path


def run_tool(tool: Path, *args, ref: bool = False) -> str:
    cmd = [str(tool)] + (["--ref"] if ref else []) + [str(a) for a in args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"{' '.join(cmd)} failed:\n{proc.stderr}"
    return proc.stdout


def random_blocks(qtype, rows: int, cols: int, rng: np.random.Generator) -> np.ndarray:
    """rows x row_bytes uint8: random bytes with finite f16 scales."""
    block, size = gguf.GGML_QUANT_SIZES[qtype]
    n_blocks = rows * cols // block
    data = rng.integers(0, 256, size=(n_blocks, size), dtype=np.uint8)
    for off in F16_FIELDS[qtype]:
        # Normal values of both signs over a wide range, plus zeros and f16
        # subnormals, which a converter must handle too.
        vals = (rng.standard_normal(n_blocks) * np.exp2(rng.integers(-12, 2, n_blocks))).astype(np.float16)
        kind = rng.integers(0, 16, n_blocks)
        vals[kind == 0] = 0
        vals[kind == 1] = np.float16(rng.integers(1, 1024)) * np.float16(2.0**-24)
        data[:, off:off + 2] = vals.view(np.uint8).reshape(n_blocks, 2)
    return data.reshape(rows, cols // block * size)


def read_f32(path: Path) -> np.ndarray:
    return np.fromfile(path, dtype="<f4")


def assert_same_floats(ours: np.ndarray, theirs: np.ndarray, what: str) -> None:
    theirs = np.asarray(theirs, dtype=np.float32).reshape(-1)
    assert ours.shape == theirs.shape, f"{what}: {ours.shape} values, gguf gives {theirs.shape}"
    bad = np.flatnonzero(~((ours == theirs) | (np.isnan(ours) & np.isnan(theirs))))
    assert bad.size == 0, (f"{what}: {bad.size} of {ours.size} values differ, first at {bad[0]}: "
                           f"ours {ours[bad[0]]!r}, gguf {theirs[bad[0]]!r}")


@pytest.fixture(scope="module")
def random_model(tmp_path_factory):
    """A GGUF with one 8 x 1024 tensor of random blocks per type."""
    rng = np.random.default_rng(20240601)
    path = tmp_path_factory.mktemp("dequant") / "random_blocks.gguf"
    writer = gguf.GGUFWriter(str(path), arch="quanttest")
    tensors = {}
    for qtype in F16_FIELDS:
        data = random_blocks(qtype, 8, 1024, rng)
        tensors[qtype.name] = (qtype, data)
        writer.add_tensor(qtype.name, data, raw_dtype=qtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path, tensors


@pytest.mark.parametrize("ref", [False, True], ids=["active", "reference"])
def test_random_blocks_dequantize_like_gguf_py(dequant_tool, random_model, tmp_path, ref):
    path, tensors = random_model
    out = run_tool(dequant_tool, path, tmp_path, ref=ref)
    assert len(out.splitlines()) == len(tensors)
    for name, (qtype, data) in tensors.items():
        theirs = gguf.quants.dequantize(data, qtype)
        assert_same_floats(read_f32(tmp_path / f"{name}.f32"), theirs, f"{name} random blocks")


@pytest.mark.parametrize("qtype", QUANTIZABLE, ids=lambda q: q.name)
@pytest.mark.parametrize("ref", [False, True], ids=["active", "reference"])
def test_quantizer_bytes_match_gguf_py(dequant_tool, tmp_path, qtype, ref):
    rng = np.random.default_rng(7)
    x = rng.standard_normal((16, 512)).astype(np.float32)
    x[3] *= 1e-3
    x[4, :32] = 0  # an all-zero block
    x[5, ::7] *= 30  # outliers
    x[6] = np.round(x[6] * 8) / 8  # many exact ties after scaling
    src = tmp_path / "x.f32"
    x.astype("<f4").tofile(src)
    dst = tmp_path / "q.bin"
    run_tool(dequant_tool, "--quantize", qtype.name, src, dst, ref=ref)
    ours = np.fromfile(dst, dtype=np.uint8)
    theirs = gguf.quants.quantize(x, qtype).reshape(-1)
    assert ours.size == theirs.size
    block_size = gguf.GGML_QUANT_SIZES[qtype][1]
    bad = np.flatnonzero(ours != theirs)
    assert bad.size == 0, (f"{qtype.name}: {bad.size} bytes differ from gguf.quants.quantize, first in "
                           f"block {bad[0] // block_size}")


REAL_TENSORS = [
    "blk.0.attn_k.weight",       # Q5_0
    "blk.0.attn_v.weight",       # Q8_0
    "blk.0.attn_output.weight",  # Q4_K
    "blk.0.ffn_down.weight",     # Q6_K
    "blk.5.ffn_up.weight",       # Q5_0
    "blk.17.attn_output.weight",
    "blk.17.ffn_down.weight",
    "output_norm.weight",        # F32
]


def test_real_model_tensors_dequantize_like_gguf_py(dequant_tool, real_model_path, tmp_path):
    reader = gguf.GGUFReader(str(real_model_path))
    by_name = {t.name: t for t in reader.tensors}
    names = [n for n in REAL_TENSORS if n in by_name]
    assert len(names) >= 6, f"the real model lacks the expected tensors: {sorted(by_name)[:10]}..."
    types = {by_name[n].tensor_type.name for n in names}
    assert {"Q8_0", "Q5_0", "Q4_K", "Q6_K"} <= types, types
    run_tool(dequant_tool, real_model_path, tmp_path, *names)
    for name in names:
        t = by_name[name]
        theirs = gguf.quants.dequantize(t.data, t.tensor_type)
        assert_same_floats(read_f32(tmp_path / f"{name}.f32"), theirs, f"{name} ({t.tensor_type.name})")
