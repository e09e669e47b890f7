"""Hugging Face model folders (config.json + safetensors + tokenizer.json)
against the numpy reference and against the same model as GGUF.

Each folder is written by tests/ref/make_hf.py from the weights
tests/ref/make_model.py gives the GGUF of the same spec, in Hugging Face's
conventions (un-permuted Llama q/k, Gemma norms without the +1, HF names,
the Gemma3ForConditionalGeneration prefix, sharded files). So:

  * `cllm logits` on the folder must match ref_forward on the folder's
    weights (decoded from F32/F16/BF16 and put back in GGUF conventions, see
    make_hf.reference_model) within 1e-4, as test_forward_ref.py asks of GGUF;
  * with F32 weights it must match `cllm logits` on the GGUF within 1e-4 (the
    only difference is NEOX rope on un-permuted rows against normal rope on
    permuted rows: f32 rounding);
  * greedy generation gives the same text from the folder as from the GGUF.
"""

from __future__ import annotations

import json
import subprocess

import numpy as np
import pytest

import make_hf
import make_model
import ref_forward

TOKENS = [2, 55, 254, 52, 187, 101, 135, 30, 303, 7, 49, 297, 150, 61, 193, 155, 174, 178, 253, 239, 235,
          209, 118, 219, 50, 111, 240, 146, 311, 209, 305, 14, 254, 163, 19, 248, 63, 224, 192, 208]
TOL = 1e-4

# (test id, family, make_model options, make_hf options)
VARIANTS = [
    ("llama", "llama", {}, {}),
    ("llama-tied", "llama", {"tied": True}, {}),
    ("llama-linear-rope", "llama", {"rope_scale": 2.0}, {}),
    ("llama3-rope", "llama", {}, {"llama3_rope": True}),
    ("llama-bf16", "llama", {}, {"dtype": "bf16"}),
    ("llama-f16-3-shards", "llama", {}, {"dtype": "f16", "shards": 3}),
    ("mistral", "mistral", {}, {}),
    ("qwen2-bias", "qwen2", {}, {}),
    ("qwen2-tied-2-shards", "qwen2", {"tied": True}, {"shards": 2}),
    ("gemma3", "gemma3", {}, {}),
    ("gemma3-conditional-layer-types", "gemma3", {}, {"conditional": True, "layer_types": True}),
    ("gemma3-bf16-linear-rope", "gemma3", {"rope_scale": 4.0, "sliding_window_pattern": 3}, {"dtype": "bf16"}),
]


@pytest.fixture(scope="session")
def hf_factory(tmp_path_factory):
    """hf_factory(arch, base_options, **hf_options) -> (HFModel, GGUF path of the base spec)."""
    root = tmp_path_factory.mktemp("hf")
    cache: dict = {}

    def make(arch, base=None, **options):
        key = (arch, json.dumps(base or {}, sort_keys=True), json.dumps(options, sort_keys=True, default=str))
        if key not in cache:
            spec = make_hf.default_hf_spec(arch, base or {}, **options)
            folder = root / f"{arch}-{len(cache)}"
            hf = make_hf.write_hf_model(folder, spec)
            gguf = root / f"{arch}-{len(cache)}.gguf"
            make_model.write_model(gguf, spec.base)
            cache[key] = (hf, gguf)
        return cache[key]

    return make


def run_logits(run_cllm, model, out, extra=()) -> np.ndarray:
    r = run_cllm("logits", "-m", model, "--tokens", ",".join(map(str, TOKENS)), "--out", out,
                 "--kv-type", "f32", *extra, timeout=120)
    assert r.returncode == 0, f"cllm logits -m {model} exited {r.returncode}:\n{r.stderr}"
    return np.fromfile(out, dtype="<f4").reshape(len(TOKENS), -1).astype(np.float64)


def check(got, ref, tol, what):
    assert got.shape == ref.shape, f"{what}: shape {got.shape}, expected {ref.shape}"
    err = np.abs(got - ref).max(axis=1) / np.abs(ref).max(axis=1)
    assert err.max() <= tol, f"{what}: max relative error {err.max():.3g} at position {err.argmax()}"


@pytest.mark.parametrize("arch,base,options", [v[1:] for v in VARIANTS], ids=[v[0] for v in VARIANTS])
def test_logits_match_reference(run_cllm, hf_factory, tmp_path, arch, base, options):
    hf, gguf = hf_factory(arch, base, **options)
    ref = ref_forward.forward(make_hf.reference_model(hf, str(gguf)), TOKENS)
    got = run_logits(run_cllm, hf.path, tmp_path / "hf.bin")
    check(got, ref, TOL, f"{arch} {base} {options}")


@pytest.mark.parametrize("arch,base,options", [v[1:] for v in VARIANTS if v[3].get("dtype", "f32") == "f32"
                                                and not v[3].get("llama3_rope")],
                         ids=[v[0] for v in VARIANTS if v[3].get("dtype", "f32") == "f32"
                              and not v[3].get("llama3_rope")])
def test_f32_folder_matches_gguf(run_cllm, hf_factory, tmp_path, arch, base, options):
    hf, gguf = hf_factory(arch, base, **options)
    got = run_logits(run_cllm, hf.path, tmp_path / "hf.bin", ["--chunk", "7"])
    want = run_logits(run_cllm, gguf, tmp_path / "gguf.bin")
    check(got, want, TOL, f"{arch} {options} folder vs GGUF")


@pytest.mark.parametrize("arch", ["llama", "qwen2", "gemma3"])
def test_greedy_generation_same_as_gguf(run_cllm, hf_factory, arch):
    hf, gguf = hf_factory(arch)
    outs = []
    for model in (hf.path, gguf):
        r = run_cllm("generate", "-m", model, "-p", "the model and the world", "-n", "12", "--temperature", "0",
                     "--kv-type", "f32", "--ignore-eos")
        assert r.returncode == 0, r.stderr
        outs.append(r.stdout)
    assert outs[0] == outs[1]


def test_info_describes_the_folder(run_cllm, hf_factory):
    hf, _ = hf_factory("gemma3", None, conditional=True, layer_types=True)
    r = run_cllm("info", hf.path)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "gemma3" in out and "7 layers" in out and "chat template    yes" in out
    assert "sliding window" in out


def test_chat_template_from_tokenizer_config(hf_factory, build_dir, tmp_path):
    hf, _ = hf_factory("llama")
    r = subprocess.run([str(build_dir / "hf_dequant"), "--chat-template", hf.path], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout == make_hf.CHAT_TEMPLATE


def test_chat_template_list_takes_default_and_jinja_file(hf_factory, build_dir, tmp_path):
    """A list of named templates gives the "default" one; without a template in
    tokenizer_config.json, chat_template.jinja beside it is used."""
    import shutil

    hf, _ = hf_factory("llama")
    folder = tmp_path / "m"
    shutil.copytree(hf.path, folder)
    cfg = json.loads((folder / "tokenizer_config.json").read_text())
    cfg["chat_template"] = [{"name": "tool_use", "template": "T"}, {"name": "default", "template": "D{{ x }}"}]
    (folder / "tokenizer_config.json").write_text(json.dumps(cfg))
    tool = str(build_dir / "hf_dequant")
    r = subprocess.run([tool, "--chat-template", str(folder)], capture_output=True, text=True)
    assert (r.returncode, r.stdout) == (0, "D{{ x }}"), r.stderr
    del cfg["chat_template"]
    (folder / "tokenizer_config.json").write_text(json.dumps(cfg))
    (folder / "chat_template.jinja").write_text("J{{ y }}\n")
    r = subprocess.run([tool, "--chat-template", str(folder)], capture_output=True, text=True)
    assert (r.returncode, r.stdout) == (0, "J{{ y }}\n"), r.stderr


def test_same_tokens_as_gguf_vocabulary(cllm_bin, hf_factory):
    """The folder's tokenizer.json (merges derived from the SentencePiece
    vocabulary) tokenizes like the GGUF's scores-based vocabulary."""
    from tokenizer_util import cllm_encode, load_strings

    strings = load_strings()
    for arch in ("llama", "gemma3"):
        hf, gguf = hf_factory(arch)
        assert cllm_encode(cllm_bin, hf.path, strings) == cllm_encode(cllm_bin, gguf, strings), arch


# --- the real Gemma 3 270m, written back as a Hugging Face folder ------------

REAL_TOKENS = [2, 818, 5279, 563, 506, 6722, 529, 6657, 236881, 108, 3689, 563, 7706, 236881, 107, 818, 3364]


def real_logits(run_cllm, model, out) -> np.ndarray:
    r = run_cllm("logits", "-m", model, "--tokens", ",".join(map(str, REAL_TOKENS)), "--out", out,
                 "--kv-type", "f32", timeout=300)
    assert r.returncode == 0, r.stderr
    return np.fromfile(out, dtype="<f4").reshape(len(REAL_TOKENS), -1).astype(np.float64)


@pytest.fixture(scope="module")
def real(real_model_path, tmp_path_factory):
    """The real GGUF's weights dequantized to F32 under HF names, in two shards,
    with config.json and a tokenizer.json of its 262144-token vocabulary; and
    ref_forward's float64 model of the GGUF. (folder, RefModel)"""
    folder = tmp_path_factory.mktemp("real-hf") / "gemma-3-270m"
    ref = make_hf.folder_from_gguf(str(real_model_path), folder)
    return folder, ref


def test_real_model_folder_matches_exact_reference(run_cllm, real, tmp_path):
    """At full scale (18 layers, head dim 256, 262144-row tied embedding, the
    local/global layer pattern from layer_types) the folder's logits equal the
    float64 pass over the same dequantized weights to f32 rounding."""
    real_folder, real_ref = real
    got = real_logits(run_cllm, real_folder, tmp_path / "l.bin")
    ref = ref_forward.forward(real_ref, REAL_TOKENS)
    check(got, ref, TOL, "real gemma-3-270m folder")


def test_real_tokenizer_json_matches_hf_and_gguf(cllm_bin, real_model_path, real):
    """Its tokenizer.json (262144 tokens, ~0.5 M merges) tokenizes like Hugging
    Face `tokenizers` reading the same file, and like the GGUF's vocabulary."""
    import tokenizers
    from tokenizer_util import cllm_encode, load_strings

    real_folder = real[0]
    strings = load_strings()
    tok = tokenizers.Tokenizer.from_file(str(real_folder / "tokenizer.json"))
    ours = cllm_encode(cllm_bin, real_folder, strings, add_special=True, parse_special=True)
    want = [e.ids for e in tok.encode_batch(strings, add_special_tokens=True)]
    bad = [s for s, a, b in zip(strings, ours, want) if a != b]
    assert not bad, f"{len(bad)} strings differ from tokenizers, e.g. {bad[:3]}"
    assert ours == cllm_encode(cllm_bin, real_model_path, strings, add_special=True, parse_special=True)


def test_real_folder_to_gguf_keeps_its_tokenizer_and_outputs(run_cllm, cllm_bin, real, tmp_path):
    """`cllm quantize FOLDER OUT --bits 16` (the folder-to-GGUF path): the
    exported SentencePiece vocabulary, with scores made from the merge ranks,
    tokenizes like tokenizer.json in cllm and in llama.cpp, and the F16 model's
    logits stay those of the folder."""
    import tokenizers
    from tokenizer_util import cllm_encode, load_strings

    real_folder = real[0]
    out = tmp_path / "gemma-3-270m-f16.gguf"
    p = run_cllm("quantize", real_folder, out, "--bits", "16", "--quiet", timeout=600)
    assert p.returncode == 0, p.stderr
    strings = load_strings()
    tok = tokenizers.Tokenizer.from_file(str(real_folder / "tokenizer.json"))
    want = [e.ids for e in tok.encode_batch(strings, add_special_tokens=True)]
    ours = cllm_encode(cllm_bin, out, strings, add_special=True, parse_special=True)
    bad = [s for s, a, b in zip(strings, ours, want) if a != b]
    assert not bad, f"{len(bad)} strings differ from tokenizers, e.g. {bad[:3]}"
    import llama_cpp
    llm = llama_cpp.Llama(model_path=str(out), vocab_only=True, verbose=False)
    theirs = [llm.tokenize(s.encode(), add_bos=True, special=True) for s in strings]
    bad = [s for s, a, b in zip(strings, theirs, want) if a != b]
    assert not bad, f"llama.cpp: {len(bad)} strings differ from tokenizers, e.g. {bad[:3]}"
    got = real_logits(run_cllm, out, tmp_path / "f16.bin")
    ref = ref_forward.forward(real[1], REAL_TOKENS)
    assert (got.argmax(axis=1) == ref.argmax(axis=1)).all()
    err = np.abs(got - ref).max(axis=1) / np.abs(ref).max(axis=1)
    assert err.max() < 2e-2, f"F16 export logits differ from the exact reference by {err.max():.3g}"
