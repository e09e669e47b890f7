"""GPTQ and AWQ checkpoints: fixtures written with numpy following each
format's packing rules exactly (tests/ref/make_hf.py: AutoGPTQ's qweight /
qzeros / scales / g_idx, v1 zeros stored minus one and v2 zeros as they are,
act-order permutations; AutoAWQ's GEMM packing with its [0, 2, 4, 6, 1, 3, 5, 7]
order), loaded by cllm, which repacks them into its GQ formats at load time.

  * Every quantized layer, dequantized by the registry (tests/tools/hf_dequant,
    act-order columns put back in place), equals the fixture's own numpy
    dequantization scale * (q - zero) bit for bit.
  * The logits of the quantized model match ref_forward run on those
    dequantized weights. The GQ matmul quantizes activations to 8 bits per 32
    (Q8_1, as llama.cpp does for its integer formats), so the bound is that of
    int8 activations, not f32 rounding: measured 2-5e-2 max relative error per
    position over these fixtures, median 1.5-2.5e-2; the bound is 8e-2 with a
    mean under 3e-2, while any packing or order mistake gives O(1).
"""

from __future__ import annotations

import subprocess

import numpy as np
import pytest

import make_hf
import make_model
import ref_forward

TOKENS = [2, 55, 254, 52, 187, 101, 135, 30, 303, 7, 49, 297, 150, 61, 193, 155, 174, 178, 253, 239, 235,
          209, 118, 219, 50, 111, 240, 146, 311, 209, 305, 14]
MAX_TOL, MEAN_TOL = 8e-2, 3e-2
BIG = {"n_embd": 128, "n_ff": 256, "head_dim": 32}

# (test id, family, make_model options, make_hf options, GQ type of the layers)
VARIANTS = [
    ("gptq4-sym-g32", "llama", {}, dict(quant="gptq", bits=4, group=32), "GQ4_G32"),
    ("gptq4-asym-g32", "llama", {}, dict(quant="gptq", bits=4, group=32, sym=False), "GQ4_G32"),
    ("gptq4-asym-g64-act-order", "llama", {}, dict(quant="gptq", bits=4, group=64, sym=False, desc_act=True),
     "GQ4_G64"),
    ("gptq4-sym-g128-act-order", "llama", BIG, dict(quant="gptq", bits=4, group=128, desc_act=True), "GQ4_G128"),
    ("gptq4-sym-row-act-order", "mistral", {}, dict(quant="gptq", bits=4, group=-1, desc_act=True), "GQ4_ROW"),
    ("gptq8-sym-g32-act-order", "qwen2", {}, dict(quant="gptq", bits=8, group=32, desc_act=True), "GQ8_G32"),
    ("gptq8-asym-g64", "llama", {}, dict(quant="gptq", bits=8, group=64, sym=False), "GQ8_G64"),
    ("gptq8-asym-row", "gemma3", {}, dict(quant="gptq", bits=8, group=-1, sym=False), "GQ8_ROW"),
    ("gptq4-v2-asym-g32-act-order", "qwen2", {}, dict(quant="gptq", bits=4, group=32, sym=False, desc_act=True,
                                                       gptq_v2=True), "GQ4_G32"),
    ("awq4-g32", "llama", {}, dict(quant="awq", bits=4, group=32), "GQ4_G32"),
    ("awq4-g64", "gemma3", {}, dict(quant="awq", bits=4, group=64), "GQ4_G64"),
    ("awq4-g128", "qwen2", {"n_ff": 256}, dict(quant="awq", bits=4, group=128), "GQ4_G128"),
]
IDS = [v[0] for v in VARIANTS]


@pytest.fixture(scope="module")
def quant_factory(tmp_path_factory):
    root = tmp_path_factory.mktemp("hfq")
    cache: dict = {}

    def make(name, arch, base, options):
        if name not in cache:
            spec = make_hf.default_hf_spec(arch, base, **options)
            hf = make_hf.write_hf_model(root / name, spec)
            gguf = root / f"{name}.gguf"
            make_model.write_model(gguf, spec.base)
            cache[name] = (hf, gguf)
        return cache[name]

    return make


def dequantize(build_dir, folder, out_dir, names) -> dict:
    r = subprocess.run([str(build_dir / "hf_dequant"), str(folder), str(out_dir), *names], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, f"hf_dequant failed: {r.stderr}"
    info = {}
    for line in r.stdout.splitlines():
        name, type_name, n_in, n_out, order = line.split()
        w = np.fromfile(out_dir / f"{name}.f32", dtype="<f4").reshape(int(n_out), int(n_in))
        info[name] = (type_name, order, w)
    return info


@pytest.mark.parametrize("name,arch,base,options,gq", VARIANTS, ids=IDS)
def test_layers_equal_numpy_dequantization(build_dir, quant_factory, tmp_path, name, arch, base, options, gq):
    hf, _ = quant_factory(name, arch, base, options)
    assert len(hf.dequant) == 7 * hf.spec.base.n_layer
    got = dequantize(build_dir, hf.path, tmp_path, sorted(hf.dequant))
    for layer, want in hf.dequant.items():
        type_name, order, w = got[layer]
        assert type_name == gq, f"{layer}: loaded as {type_name}, expected {gq}"
        assert w.shape == want.shape, f"{layer}: shape {w.shape}, expected {want.shape}"
        diff = np.flatnonzero(w.view(np.uint32) != want.view(np.uint32))
        assert diff.size == 0, (f"{layer}: {diff.size} of {w.size} weights differ, first at "
                                f"{np.unravel_index(diff[0], w.shape)}: {w.flat[diff[0]]} vs {want.flat[diff[0]]}")
        # act-order layers with more than one group must come back permuted
        permuted_expected = options.get("desc_act") and options["group"] != -1 and w.shape[1] > options["group"]
        assert (order == "permuted") == bool(permuted_expected), f"{layer}: {order}"


@pytest.mark.parametrize("name,arch,base,options,gq", VARIANTS, ids=IDS)
def test_logits_match_reference_on_dequantized_weights(run_cllm, quant_factory, tmp_path, name, arch, base,
                                                       options, gq):
    hf, gguf = quant_factory(name, arch, base, options)
    ref = ref_forward.forward(make_hf.reference_model(hf, str(gguf)), TOKENS)
    out = tmp_path / "logits.bin"
    r = run_cllm("logits", "-m", hf.path, "--tokens", ",".join(map(str, TOKENS)), "--out", out,
                 "--kv-type", "f32", timeout=120)
    assert r.returncode == 0, r.stderr
    got = np.fromfile(out, dtype="<f4").reshape(len(TOKENS), -1).astype(np.float64)
    err = np.abs(got - ref).max(axis=1) / np.abs(ref).max(axis=1)
    assert err.max() <= MAX_TOL and err.mean() <= MEAN_TOL, (
        f"{name}: relative error max {err.max():.3g} (position {err.argmax()}), mean {err.mean():.3g}")
    assert np.mean(got.argmax(1) == ref.argmax(1)) >= 0.85


def test_v1_zero_of_2_to_the_bits_is_kept(quant_factory):
    """AutoGPTQ's v1 kernels read a stored 15 as zero 16 for 4 bits; the
    fixture stores a few and the exact-dequantization test covers them."""
    hf, _ = quant_factory(*[v for v in VARIANTS if v[0] == "gptq4-asym-g32"][0][:4])
    qz = hf.tensors["model.layers.0.self_attn.q_proj.qzeros"].data.view(np.uint32)
    assert (qz[0, 0] & 0xF) == 15
