"""`cllm quantize` on synthetic models (tests/ref/make_model.py): every method
and storage choice writes a GGUF that cllm loads, whose next-token
distributions stay close to the float model's; the standard-type outputs load
in llama.cpp and agree with cllm on the same file; metadata, tokenizer and
the tensors that are not quantized are carried over; kept tensors, float
copies and act-order permutations are what the options say.

Synthetic models have random weights, so their logits are flat and top-1
agreement is a poor signal; the tests use the mean KL divergence from the
float model's distribution over random tokens. Measured (4-bit, groups of
128): 0.05-0.08 for RTN, GPTQ and AWQ; 8-bit per channel: < 0.003; a
2-bit model is far off (> 0.3). Bounds leave room for that spread."""

from __future__ import annotations

import numpy as np
import pytest

from quant_util import GGML_ID, GGUF, cllm_logits, gq_type, mean_kl, random_tokens

CALIB = "tests/data/calib.txt"
# Rows of 128 and 256: every group size divides them.
SHAPES = {
    "llama": dict(n_embd=128, head_dim=32, n_ff=256),
    "gemma3": dict(n_embd=128, head_dim=32, n_ff=256),
    "qwen2": dict(n_ff=256),
}
VOCAB = {"llama": 320, "gemma3": 512, "qwen2": 400}
FAST_CALIB = ["--calib-samples", 6, "--calib-ctx", 96]


def quantize(run_cllm, src, dst, *opts, ok=True):
    p = run_cllm("quantize", src, dst, "--quiet", *opts, timeout=300)
    if ok:
        assert p.returncode == 0, p.stderr
    return p


@pytest.fixture(scope="module")
def models(model_factory):
    return {arch: model_factory(arch, **shape) for arch, shape in SHAPES.items()}


def kl_to_float(run_cllm, src, dst, arch, tmp_path, n=40):
    toks = random_tokens(VOCAB[arch], n)
    ref = cllm_logits(run_cllm, src, toks, tmp_path / "ref.f32")
    return mean_kl(ref, cllm_logits(run_cllm, dst, toks, tmp_path / "q.f32"))


@pytest.mark.parametrize("arch", sorted(SHAPES))
@pytest.mark.parametrize("method", ["rtn", "gptq", "awq"])
def test_method_output_close_to_float(run_cllm, models, repo_root, tmp_path, arch, method):
    src = models[arch]
    dst = tmp_path / f"{arch}-{method}.gguf"
    quantize(run_cllm, src, dst, "--bits", 4, "--group-size", 128, "--method", method,
             "--calib", repo_root / CALIB, *FAST_CALIB)
    types = GGUF(dst).types()
    assert types["blk.0.attn_q.weight"] == gq_type(4, 128)
    assert types["blk.0.ffn_down.weight"] == gq_type(4, 128)
    key = "output.weight" if arch == "qwen2" else "token_embd.weight"
    assert types[key] == GGML_ID["Q8_0"]  # kept in higher precision
    kl = kl_to_float(run_cllm, src, dst, arch, tmp_path)
    assert kl < 0.15, f"mean KL {kl:.4f}"


def test_int8_per_channel_is_nearly_exact_and_2bit_is_not(run_cllm, models, tmp_path):
    src = models["llama"]
    q8 = tmp_path / "q8.gguf"
    quantize(run_cllm, src, q8, "--bits", 8, "--group-size", -1, "--scheme", "sym")
    assert GGUF(q8).types()["blk.1.attn_v.weight"] == gq_type(8, -1)
    kl8 = kl_to_float(run_cllm, src, q8, "llama", tmp_path)
    q2 = tmp_path / "q2.gguf"
    quantize(run_cllm, src, q2, "--bits", 2, "--group-size", -1)
    kl2 = kl_to_float(run_cllm, src, q2, "llama", tmp_path)
    assert kl8 < 0.005, f"8-bit mean KL {kl8:.5f}"
    assert kl2 > 10 * kl8, f"2-bit mean KL {kl2:.4f} vs 8-bit {kl8:.5f}"


def test_float_copy(run_cllm, models, tmp_path):
    src = models["gemma3"]
    dst = tmp_path / "f16.gguf"
    quantize(run_cllm, src, dst, "--bits", 16)
    g = GGUF(dst)
    for name, t in g.tensors.items():
        assert t.type == (GGML_ID["F16"] if len(t.ne) == 2 else GGML_ID["F32"]), name
    assert g.kv["general.file_type"] == 1
    assert kl_to_float(run_cllm, src, dst, "gemma3", tmp_path) < 1e-4


def test_act_order_writes_permutations(run_cllm, models, repo_root, tmp_path):
    src = models["llama"]
    dst = tmp_path / "da.gguf"
    quantize(run_cllm, src, dst, "--bits", 4, "--group-size", 32, "--scheme", "sym", "--method", "gptq",
             "--desc-act", "--calib", repo_root / CALIB, *FAST_CALIB)
    g = GGUF(dst)
    # Act-order output is cllm's own: GQ types even where Q4_0 would fit.
    assert g.tensors["blk.0.attn_q.weight"].type == gq_type(4, 32)
    perm = np.frombuffer(g.tensors["blk.0.ffn_down.weight.perm"].raw, dtype=np.int32)
    assert g.tensors["blk.0.ffn_down.weight.perm"].type == GGML_ID["I32"]
    assert sorted(perm.tolist()) == list(range(256))
    assert perm.tolist() != list(range(256))
    assert g.kv["cllm.quantize.desc_act"] is True
    assert kl_to_float(run_cllm, src, dst, "llama", tmp_path) < 0.15


def test_metadata_tokenizer_and_vectors_carried_over(run_cllm, models, tmp_path):
    src = models["qwen2"]
    dst = tmp_path / "q.gguf"
    quantize(run_cllm, src, dst, "--bits", 3, "--group-size", 128)
    a, b = GGUF(src), GGUF(dst)
    for key, value in a.kv.items():
        if key == "general.file_type":
            continue
        assert b.kv.get(key) == value, key
        assert b.kv_types[key] == a.kv_types[key], key
    assert b.kv["cllm.quantize.method"] == "rtn"
    assert b.kv["cllm.quantize.bits"] == 3
    assert b.kv["cllm.quantize.type"] == "GQ3_G128"
    assert "general.file_type" not in b.kv  # GQ output: no llama.cpp file type
    assert set(a.tensors) == set(b.tensors)
    for name in ("blk.0.attn_q.bias", "blk.1.ffn_norm.weight", "output_norm.weight"):
        assert a.tensors[name].raw == b.tensors[name].raw, name
    assert b.tensors["blk.2.ffn_up.weight"].type == gq_type(3, 128)
    assert b.tensors["output.weight"].type == GGML_ID["Q8_0"]
    assert b.tensors["token_embd.weight"].type == GGML_ID["Q8_0"]
    p = run_cllm("generate", "-m", dst, "-p", "hello world", "-n", 8, "--temperature", 0)
    assert p.returncode == 0, p.stderr


def test_keep_options(run_cllm, models, tmp_path):
    src = models["llama"]
    dst = tmp_path / "k.gguf"
    quantize(run_cllm, src, dst, "--bits", 4, "--group-size", 64, "--keep", "blk.1.ffn_down.weight",
             "--keep-type", "f16")
    types = GGUF(dst).types()
    assert types["blk.1.ffn_down.weight"] == GGML_ID["F16"]
    assert types["token_embd.weight"] == GGML_ID["F16"]
    assert types["output.weight"] == GGML_ID["F16"]
    assert types["blk.0.ffn_down.weight"] == gq_type(4, 64)
    dst2 = tmp_path / "nk.gguf"
    quantize(run_cllm, src, dst2, "--bits", 8, "--group-size", 128, "--no-keep")
    types = GGUF(dst2).types()
    assert types["token_embd.weight"] == GGML_ID["F32"]  # copied as it is
    assert types["blk.0.attn_k.weight"] == gq_type(8, 128)
    assert kl_to_float(run_cllm, src, dst2, "llama", tmp_path) < 0.005


def test_quantized_input_is_dequantized_with_a_warning(run_cllm, model_factory, tmp_path):
    src = model_factory("llama", wtype="q8_0", **SHAPES["llama"])
    dst = tmp_path / "q.gguf"
    p = run_cllm("quantize", src, dst, "--bits", 4, "--group-size", 128)
    assert p.returncode == 0, p.stderr
    assert "warning" in p.stderr and "Q8_0" in p.stderr and "dequantized" in p.stderr
    assert "2/2 layers" in p.stderr  # the progress bar
    # Kept tensors already in Q8_0 are copied bit for bit.
    assert GGUF(src).tensors["token_embd.weight"].raw == GGUF(dst).tensors["token_embd.weight"].raw


def test_per_tensor_scale(run_cllm, models, tmp_path):
    src = models["llama"]
    dst = tmp_path / "pt.gguf"
    quantize(run_cllm, src, dst, "--bits", 8, "--per-tensor", "--scheme", "sym")
    t = GGUF(dst).tensors["blk.0.ffn_up.weight"]
    assert t.type == gq_type(8, -1)
    rows = t.rows()
    assert rows.shape == (256, 4 + 128)
    assert np.all(rows[:, 0] == rows[0, 0]) and np.all(rows[:, 1] == rows[0, 1])  # one f16 scale
    assert np.all(rows[:, 2] == 128)  # symmetric zero point
    assert kl_to_float(run_cllm, src, dst, "llama", tmp_path) < 0.02


# --- standard GGUF types: llama.cpp reads them ------------------------------------------------


@pytest.mark.parametrize("bits,scheme,method,expect", [
    (8, "sym", "rtn", "Q8_0"),
    (4, "sym", "gptq", "Q4_0"),
    (4, "asym", "awq", "Q4_1"),
])
def test_standard_types_load_in_llama_cpp(run_cllm, models, repo_root, tmp_path, bits, scheme, method, expect):
    import llama_cpp
    src = models["llama"]
    dst = tmp_path / f"{expect}.gguf"
    quantize(run_cllm, src, dst, "--bits", bits, "--group-size", 32, "--scheme", scheme, "--method", method,
             "--calib", repo_root / CALIB, *FAST_CALIB)
    g = GGUF(dst)
    assert g.tensors["blk.0.attn_output.weight"].type == GGML_ID[expect]
    assert all(t.type < 100 for t in g.tensors.values())  # nothing of cllm's own
    assert g.kv["general.file_type"] == {"Q8_0": 7, "Q4_0": 2, "Q4_1": 3}[expect]
    toks = random_tokens(320, 32)
    llm = llama_cpp.Llama(model_path=str(dst), n_ctx=64, n_threads=2, logits_all=True, verbose=False)
    llm.eval(toks)
    theirs = np.array(llm.scores[: len(toks)], dtype=np.float64)
    ours = cllm_logits(run_cllm, dst, toks, tmp_path / "ours.f32")
    kl = mean_kl(theirs, ours)
    assert kl < 0.01, f"cllm vs llama.cpp on the same {expect} file: mean KL {kl:.5f}"


# --- info --plan ------------------------------------------------------------------------------


def test_info_plan_predicts_quantized_sizes(run_cllm, model_factory, tmp_path):
    src = model_factory("llama", n_embd=512, head_dim=128, n_ff=1024, n_head_kv=1)
    p = run_cllm("info", src, "--plan", "--ctx", 1024, "--concurrency", 4)
    assert p.returncode == 0, p.stderr
    rows = {}
    for line in p.stdout.splitlines():
        parts = line.split()
        if len(parts) >= 7 and parts[-2] == "MiB" and parts[-4] == "MiB":
            label = " ".join(parts[: len(parts) - 6 - (1 if parts[-1] in ("yes", "no") else 0)])
            rows[label] = [float(parts[i]) for i in range(len(parts)) if i + 1 < len(parts) and parts[i + 1] == "MiB"]
    assert set(rows) == {"file as is", "F16", "INT8 per channel", "INT4 g128", "INT3 g128"}, p.stdout
    kv = rows["F16"][1]
    assert all(r[1] == kv for r in rows.values())  # the same KV cache on every row
    assert "4 sequences of 1024 tokens" in p.stdout
    for label, opts in (("INT8 per channel", ["--bits", 8, "--group-size", -1, "--scheme", "sym"]),
                        ("INT4 g128", ["--bits", 4, "--group-size", 128]),
                        ("F16", ["--bits", 16])):
        dst = tmp_path / "q.gguf"
        quantize(run_cllm, src, dst, *opts)
        actual = sum(len(t.raw) for t in GGUF(dst).tensors.values()) / 2**20
        assert rows[label][0] == pytest.approx(actual, abs=0.06), label
    assert rows["INT4 g128"][0] < rows["INT8 per channel"][0] < rows["F16"][0]
