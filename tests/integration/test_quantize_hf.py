"""`cllm quantize` with a Hugging Face model folder as its input.

The folder (tests/ref/make_hf.py) holds the weights of the GGUF that
tests/ref/make_model.py writes for the same spec, in HF's conventions. So:

  * `--bits 32` must give back that GGUF's tensors (Llama q/k rows permuted
    back to GGUF's order, Gemma norms with their 1 added) and hyper-parameters,
    and logits equal to the folder's;
  * quantizing the folder and quantizing that F32 export must give the same
    bytes with round to nearest (rows are quantized independently, so
    permuting after quantizing is exact), and GPTQ must work from a folder;
  * the tokenizer written into the GGUF must tokenize as the folder's
    tokenizer.json does, in cllm and in llama.cpp, for byte-level BPE
    (GPT-2, Llama 3, Qwen2) and SentencePiece-style vocabularies.
"""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

import make_hf
import make_model
import test_hf_tokenizer as hft
from quant_util import GGUF, cllm_logits, mean_kl
from test_hf_model import TOKENS
from tokenizer_util import cllm_decode, cllm_encode

CALIB = "tests/data/calib.txt"

# (test id, family, make_model options, make_hf options)
FAMILIES = [
    ("llama", "llama", {}, {}),
    ("llama3-rope-bf16", "llama", {}, {"llama3_rope": True, "dtype": "bf16"}),
    ("mistral-linear-rope", "mistral", {"rope_scale": 2.0}, {}),
    ("qwen2-bias-tied", "qwen2", {"tied": True}, {"shards": 2}),
    ("gemma3", "gemma3", {}, {}),
    ("gemma3-conditional-layer-types", "gemma3", {"sliding_window_pattern": 3},
     {"conditional": True, "layer_types": True}),
]


@pytest.fixture(scope="module")
def exported(tmp_path_factory, run_cllm, request):
    """exported(family id) -> (folder, GGUF of the same spec, F32 export of the folder)."""
    root = tmp_path_factory.mktemp("quantize-hf")
    cache = {}

    def make(test_id):
        if test_id not in cache:
            _, arch, base, options = next(f for f in FAMILIES if f[0] == test_id)
            spec = make_hf.default_hf_spec(arch, base, **options)
            folder = root / test_id
            make_hf.write_hf_model(folder, spec)
            gguf = root / f"{test_id}.gguf"
            make_model.write_model(gguf, spec.base)
            out = root / f"{test_id}-f32.gguf"
            p = run_cllm("quantize", folder, out, "--bits", "32", "--quiet", timeout=120)
            assert p.returncode == 0, p.stderr
            cache[test_id] = (folder, gguf, out)
        return cache[test_id]

    return make


def as_f32(t) -> np.ndarray:
    if t.type == 0:
        return np.frombuffer(t.raw, dtype=np.float32)
    if t.type == 1:
        return np.frombuffer(t.raw, dtype=np.float16).astype(np.float32)
    assert t.type == 30, f"{t.name}: type {t.type}"  # BF16: the folder's vectors, copied
    return (np.frombuffer(t.raw, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


HPARAM_KEYS = ("block_count", "embedding_length", "feed_forward_length", "attention.head_count",
               "attention.head_count_kv", "attention.key_length", "rope.freq_base",
               "attention.layer_norm_rms_epsilon", "attention.sliding_window", "rope.scaling.factor")


@pytest.mark.parametrize("test_id", [f[0] for f in FAMILIES])
def test_f32_export_is_the_gguf_of_the_folder(exported, run_cllm, tmp_path, test_id):
    folder, gguf, out = exported(test_id)
    want, got = GGUF(gguf), GGUF(out)
    arch = want.kv["general.architecture"]
    assert got.kv["general.architecture"] == arch
    for key in HPARAM_KEYS:
        if f"{arch}.{key}" in want.kv:
            assert got.kv[f"{arch}.{key}"] == pytest.approx(want.kv[f"{arch}.{key}"], rel=1e-6), key
    if f"{arch}.attention.sliding_window_pattern" in want.kv:  # a period there, one flag per layer here
        n = want.kv[f"{arch}.attention.sliding_window_pattern"]
        flags = got.kv[f"{arch}.attention.sliding_window_pattern"]
        assert flags == [il % n < n - 1 for il in range(len(flags))]
    # Llama 3 rope scaling is in the folder's config only; the export carries it as rope_freqs.
    extra = {"rope_freqs.weight"} if "llama3" in test_id else set()
    assert set(got.tensors) == set(want.tensors) | extra
    for name, t in want.tensors.items():
        a = as_f32(got.tensors[name])
        b = as_f32(t)
        # Exact but for BF16 rounding and Gemma's norms (HF's w, plus 1 in f32).
        tol = 1e-2 if "bf16" in test_id else 1e-6 if "norm" in name else 0
        assert got.tensors[name].ne == t.ne, name
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol, err_msg=name)

    l_folder = cllm_logits(run_cllm, folder, TOKENS, tmp_path / "folder.bin")
    l_out = cllm_logits(run_cllm, out, TOKENS, tmp_path / "out.bin")
    err = np.abs(l_out - l_folder).max(axis=1) / np.abs(l_folder).max(axis=1)
    assert err.max() <= 1e-4, f"logits of the export differ from the folder's by {err.max():.3g}"


METHODS = {
    "rtn": ["--bits", "4", "--group-size", "32", "--scheme", "asym", "--keep-type", "f32"],
    "gptq": ["--bits", "4", "--group-size", "32", "--method", "gptq", "--calib", CALIB, "--calib-samples", "8"],
    "awq": ["--bits", "4", "--group-size", "32", "--method", "awq", "--calib", CALIB, "--calib-samples", "8"],
}


@pytest.mark.parametrize("test_id,method", [("llama", "rtn"), ("qwen2-bias-tied", "rtn"), ("gemma3", "rtn"),
                                            ("llama", "gptq"), ("gemma3", "gptq"), ("mistral-linear-rope", "awq")])
def test_quantizing_the_folder_equals_quantizing_its_export(exported, run_cllm, tmp_path, repo_root, test_id,
                                                             method):
    """Quantization runs in the folder's row order and permutes q/k rows on the
    way out; calibration runs the folder's model (rotate-half rope on HF rows)
    where the export runs adjacent-pair rope on permuted rows: the same
    numbers, so the same bytes."""
    folder, _, f32 = exported(test_id)
    opts = [str(repo_root / o) if o == CALIB else o for o in METHODS[method]]
    for src, name in ((folder, "from-folder.gguf"), (f32, "from-export.gguf")):
        p = run_cllm("quantize", src, tmp_path / name, *opts, "--quiet", timeout=300)
        assert p.returncode == 0, p.stderr
    a, b = GGUF(tmp_path / "from-folder.gguf"), GGUF(tmp_path / "from-export.gguf")
    assert a.kv["cllm.quantize.method"] == method
    assert a.types() == b.types()
    differ = [name for name, t in b.tensors.items() if a.tensors[name].raw != t.raw]
    if method != "awq":
        assert not differ, f"tensors differ: {differ}"
        return
    # AWQ's grid and clip searches are arg-mins: rounding-level differences of
    # the two rope layouts may tip one (scaled rope here), so compare outputs.
    la = cllm_logits(run_cllm, tmp_path / "from-folder.gguf", TOKENS, tmp_path / "a.bin")
    lb = cllm_logits(run_cllm, tmp_path / "from-export.gguf", TOKENS, tmp_path / "b.bin")
    ref = cllm_logits(run_cllm, f32, TOKENS, tmp_path / "ref.bin")
    print(f"{len(differ)} tensors differ; KL folder/export {mean_kl(lb, la):.3g}, export/f32 {mean_kl(ref, lb):.3g}")
    assert mean_kl(lb, la) < 0.05 * mean_kl(ref, lb)


# --- tokenizers -----------------------------------------------------------------


@pytest.fixture(scope="module", params=hft.VARIANTS)
def tok_export(request, tmp_path_factory, run_cllm):
    """A Llama folder with one of test_hf_tokenizer's tokenizers, and its F16 GGUF export."""
    kind = request.param
    root = tmp_path_factory.mktemp(f"tok-export-{kind}")
    if kind.startswith("spm-"):
        tok, cfg = hft._spm(kind[4:]), hft._spm_config(kind[4:])
    else:
        tok, cfg = hft._byte_level(kind), hft._byte_level_config(kind)
    n_vocab = tok.get_vocab_size(with_added_tokens=True)
    spec = make_hf.default_hf_spec("llama", {"n_vocab": n_vocab + 16}, tokenizer="none")
    folder = root / "model"
    make_hf.write_hf_model(folder, spec)
    tok.save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(json.dumps(cfg))
    out = root / "model.gguf"
    p = run_cllm("quantize", folder, out, "--bits", "16", "--quiet", timeout=120)
    assert p.returncode == 0, p.stderr
    return kind, hft.Tokenizer.from_file(str(folder / "tokenizer.json")), folder, out


def test_exported_tokenizer_tokenizes_as_tokenizer_json(cllm_bin, tok_export):
    kind, tok, folder, out = tok_export
    items = hft.STRINGS + hft._random_texts(200)
    want = [e.ids for e in tok.encode_batch(items, add_special_tokens=False)]
    hft._check(items, cllm_encode(cllm_bin, out, items, add_special=False, parse_special=True), want)
    items = hft.STRINGS[:60]
    want = [e.ids for e in tok.encode_batch(items, add_special_tokens=True)]
    hft._check(items, cllm_encode(cllm_bin, out, items, add_special=True, parse_special=True), want)
    texts = [s for s in hft.STRINGS if s and "<" not in s and hft.USER_DEFINED not in s]
    ids = [e.ids for e in tok.encode_batch(texts, add_special_tokens=False)]
    assert cllm_decode(cllm_bin, out, ids) == cllm_decode(cllm_bin, folder, ids)
    g = GGUF(out)
    assert g.kv["tokenizer.ggml.model"] == ("llama" if kind.startswith("spm-") else "gpt2")
    assert len(g.kv["tokenizer.ggml.tokens"]) == tok.get_vocab_size(with_added_tokens=True)


def test_llama_cpp_reads_the_exported_tokenizer(tok_export):
    """llama.cpp, an independent reader, tokenizes the export as tokenizer.json
    does. Not for Metaspace's "first" scheme (Mistral's tokenizer.json): GGUF
    has no key for it, llama.cpp prefixes a space as SentencePiece does, and
    only cllm reads its own key for it (checked above)."""
    import llama_cpp
    kind, tok, _, out = tok_export
    if kind == "spm-mistral":
        pytest.skip("Metaspace prepend_scheme=first has no GGUF key llama.cpp reads")
    llm = llama_cpp.Llama(model_path=str(out), vocab_only=True, verbose=False)
    items = [s for s in hft.STRINGS if s]
    want = [e.ids for e in tok.encode_batch(items, add_special_tokens=False)]
    got = [llm.tokenize(s.encode(), add_bos=False, special=True) for s in items]
    hft._check(items, got, want)


@pytest.mark.parametrize("quant", ["gptq", "awq"])
def test_a_quantized_checkpoint_is_dequantized_first(run_cllm, tmp_path, quant):
    """A GPTQ (act-order) or AWQ folder: --bits 32 holds its dequantized
    weights (numpy's decoding of the packing, in GGUF's row order), and a
    warning says the input was quantized."""
    options = {"quant": quant, "desc_act": True} if quant == "gptq" else {"quant": quant}
    spec = make_hf.default_hf_spec("llama", {}, **options)
    folder = tmp_path / "model"
    hf = make_hf.write_hf_model(folder, spec)
    out = tmp_path / "f32.gguf"
    p = run_cllm("quantize", folder, out, "--bits", "32", timeout=120)
    assert p.returncode == 0, p.stderr
    assert "dequantized first" in p.stderr
    g = GGUF(out)
    assert hf.dequant
    for name, w in hf.dequant.items():
        want = make_hf.to_gguf(spec, name, np.asarray(w, dtype=np.float64))
        got = as_f32(g.tensors[name]).reshape(want.shape)
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6 * np.abs(want).max(), err_msg=name)


def test_a_broken_folder_is_a_clear_error_and_no_output(run_cllm, tmp_path):
    folder = tmp_path / "model"
    make_hf.write_hf_model(folder, make_hf.default_hf_spec("llama", {}))
    (folder / "config.json").unlink()
    out = tmp_path / "out.gguf"
    p = run_cllm("quantize", folder, out, "--bits", "8", timeout=60)
    assert p.returncode == 1
    assert "config.json" in p.stderr and "missing" in p.stderr
    assert not out.exists() and not (tmp_path / "out.gguf.tmp").exists()
