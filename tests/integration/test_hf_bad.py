"""Malformed Hugging Face model folders are refused cleanly.

Every case starts from a valid folder written by tests/ref/make_hf.py and
breaks one thing: the safetensors bytes (header length, JSON, dtype, offsets,
overlaps, truncation), the shard index, config.json, the tokenizer files, a
missing or misshapen tensor, or a quantized layer that cannot be loaded. For
each, `cllm info FOLDER` and `cllm generate -m FOLDER` must exit with status 1
(not a signal), print nothing on stdout and exactly one non-empty line on
stderr that names the problem. Random corruptions of the safetensors header
must never crash.
"""

from __future__ import annotations

import json
import random
import shutil
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import pytest

import make_hf

ST = "model.safetensors"


def _header(buf: bytes):
    (n,) = struct.unpack_from("<Q", buf, 0)
    return n, json.loads(buf[8:8 + n])


def _with_header(buf: bytes, header: dict) -> bytes:
    """The same data section under a new JSON header."""
    n, _ = _header(buf)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + buf[8 + n:]


def _edit_st(fn):
    def mutate(folder: Path):
        p = folder / ST
        buf = p.read_bytes()
        out = fn(buf)
        p.write_bytes(out)
    return mutate


def _edit_header(fn):
    def edit(buf):
        _, h = _header(buf)
        fn(h)
        return _with_header(buf, h)
    return _edit_st(edit)


def _edit_json(file: str, fn):
    def mutate(folder: Path):
        p = folder / file
        d = json.loads(p.read_text())
        fn(d)
        p.write_text(json.dumps(d))
    return mutate


def _write(file: str, text: str):
    def mutate(folder: Path):
        (folder / file).write_text(text)
    return mutate


def _remove(file: str):
    def mutate(folder: Path):
        (folder / file).unlink()
    return mutate


Q = "model.layers.0.self_attn.q_proj"


def _set(d: dict, key: str, value):
    d[key] = value


def _offsets(name, delta_begin=0, delta_end=0):
    def f(h):
        o = h[name]["data_offsets"]
        h[name]["data_offsets"] = [o[0] + delta_begin, o[1] + delta_end]
    return f


def _overlap(h):
    a, b = h[Q + ".weight"], h["model.layers.0.self_attn.k_proj.weight"]
    size = b["data_offsets"][1] - b["data_offsets"][0]
    b["data_offsets"] = [a["data_offsets"][0], a["data_offsets"][0] + size]


def _past_end(h):
    o = h[Q + ".weight"]["data_offsets"]
    size = o[1] - o[0]
    h[Q + ".weight"]["data_offsets"] = [10 ** 9, 10 ** 9 + size]


@dataclass
class Case:
    spec: dict  # make_hf.default_hf_spec arguments: arch plus options
    mutate: Callable = None
    any_of: tuple = ()
    required: tuple = ()


LLAMA = {"arch": "llama"}
SHARDED = {"arch": "llama", "shards": 2}
GPTQ = {"arch": "llama", "quant": "gptq", "bits": 4, "group": 32}
TRUNC = ("past the end", "outside the data", "too short", "runs past")

CASES = {
    # safetensors
    "st-empty": Case(LLAMA, _write(ST, ""), ("too short",)),
    "st-header-length-past-eof": Case(LLAMA, _edit_st(lambda b: struct.pack("<Q", len(b)) + b[8:]),
                                      ("header length",)),
    "st-header-not-json": Case(LLAMA, _edit_st(lambda b: b[:8] + b"{" + b"x" * (_header(b)[0] - 1) + b[8 + _header(b)[0]:]),
                               ("not valid json",)),
    "st-header-not-object": Case(LLAMA, _edit_st(lambda b: b[:8] + b"[" + b" " * (_header(b)[0] - 1) + b[8 + _header(b)[0]:]),
                                 ("not a safetensors file", "not a json object")),
    "st-truncated-data": Case(LLAMA, _edit_st(lambda b: b[: len(b) - 1000]), TRUNC),
    "st-unknown-dtype": Case(LLAMA, _edit_header(lambda h: h[Q + ".weight"].update(dtype="F12")), ("dtype",),
                             ("F12",)),
    "st-size-mismatch": Case(LLAMA, _edit_header(_offsets(Q + ".weight", 0, -4)), ("bytes",), (Q + ".weight",)),
    "st-offset-past-end": Case(LLAMA, _edit_header(_past_end), ("outside the data",), (Q + ".weight",)),
    "st-negative-offset": Case(LLAMA, _edit_header(lambda h: h[Q + ".weight"].update(data_offsets=[-4, 0])),
                               ("data_offsets",)),
    "st-bad-shape": Case(LLAMA, _edit_header(lambda h: h[Q + ".weight"].update(shape=[64, "x"])), ("shape",)),
    "st-overlap": Case(LLAMA, _edit_header(_overlap), ("overlap",)),
    # sharded checkpoints
    "index-missing-shard": Case(SHARDED, _remove("model-00002-of-00002.safetensors"),
                                ("cannot open",), ("model-00002-of-00002.safetensors",)),
    "index-wrong-shard": Case(SHARDED, _edit_json("model.safetensors.index.json",
                                                  lambda d: d["weight_map"].update({Q + ".weight": "model-00002-of-00002.safetensors"
                                                                                    if d["weight_map"][Q + ".weight"].startswith("model-00001")
                                                                                    else "model-00001-of-00002.safetensors"})),
                              ("does not hold it",), (Q + ".weight",)),
    "index-path-escape": Case(SHARDED, _edit_json("model.safetensors.index.json",
                                                  lambda d: d["weight_map"].update({Q + ".weight": "../x.safetensors"})),
                              ("not a file name",)),
    "no-weights": Case(LLAMA, _remove(ST), ("no model.safetensors",)),
    # config.json
    "config-missing": Case(LLAMA, _remove("config.json"), ("config.json",), ("missing",)),
    "config-not-json": Case(LLAMA, _write("config.json", "{\"model_type\": \"llama\",,}"), ("not valid json",)),
    "config-no-hidden-size": Case(LLAMA, _edit_json("config.json", lambda d: d.pop("hidden_size")), ("hidden_size",)),
    "config-bad-type": Case(LLAMA, _edit_json("config.json", lambda d: _set(d, "num_attention_heads", "4")),
                            ("num_attention_heads",)),
    "config-unknown-model-type": Case(LLAMA, _edit_json("config.json", lambda d: _set(d, "model_type", "mamba")),
                                      ("model_type",), ("mamba",)),
    "config-heads-mismatch": Case(LLAMA, _edit_json("config.json", lambda d: _set(d, "num_key_value_heads", 3)),
                                  ("num_key_value_heads",)),
    "config-dynamic-rope": Case(LLAMA, _edit_json("config.json", lambda d: _set(d, "rope_scaling", {"rope_type": "dynamic", "factor": 4})),
                                ("rope_scaling",), ("dynamic",)),
    "config-yarn-no-original": Case(LLAMA, _edit_json("config.json", lambda d: _set(d, "rope_scaling", {"rope_type": "yarn", "factor": 4})),
                                    ("original_max_position_embeddings",)),
    "config-yarn-below-one": Case(LLAMA, _edit_json("config.json", lambda d: _set(d, "rope_scaling", {"rope_type": "yarn", "factor": 0.5, "original_max_position_embeddings": 64})),
                                  ("YaRN",), ("factor",)),
    # a family's own keys (the Llama folder read as that family: the config is read before any tensor)
    "config-nope-list": Case(LLAMA, _edit_json("config.json", lambda d: d.update(model_type="smollm3",
                                                                                 no_rope_layers=[1, 0, 1, 1, 0, 1, 1])),
                             ("no_rope_layers",), ("list of",)),
    "config-granite-logits-scaling": Case(LLAMA, _edit_json("config.json", lambda d: d.update(model_type="granite",
                                                                                              logits_scaling=0)),
                                          ("logits_scaling",), ("positive",)),
    "config-softcap-negative": Case(LLAMA, _edit_json("config.json", lambda d: d.update(model_type="gemma2",
                                                                                        attn_logit_softcapping=-1)),
                                    ("soft-capping",), ("negative",)),
    "config-longrope-factors": Case(LLAMA, _edit_json("config.json", lambda d: d.update(
        model_type="phi3", original_max_position_embeddings=64,
        rope_scaling={"type": "longrope", "short_factor": [1.0], "long_factor": [1.0]})),
                                    ("short_factor",), ("half the rotary dims",)),
    "config-partial-rotary": Case(LLAMA, _edit_json("config.json", lambda d: _set(d, "partial_rotary_factor", 0.01)),
                                  ("partial_rotary_factor",),),
    "config-wrong-shape": Case(LLAMA, _edit_json("config.json", lambda d: _set(d, "intermediate_size", 96)),
                               ("shape",), ("mlp",)),
    # tensors
    "missing-tensor": Case({"arch": "llama", "drop_tensors": ("model.layers.1.mlp.down_proj.weight",)}, None,
                           ("missing",), ("model.layers.1.mlp.down_proj.weight",)),
    "missing-lm-head": Case({"arch": "llama", "drop_tensors": ("lm_head.weight",)}, None, ("lm_head.weight",),
                            ("tie_word_embeddings",)),
    "missing-gemma-norm": Case({"arch": "gemma3", "drop_tensors": ("model.layers.2.pre_feedforward_layernorm.weight",)},
                               None, ("missing",), ("model.layers.2.pre_feedforward_layernorm.weight",)),
    "missing-embedding": Case({"arch": "qwen2", "drop_tensors": ("model.embed_tokens.weight",)}, None,
                              ("embed_tokens",)),
    "int-dtype-matrix": Case(LLAMA, _edit_header(lambda h: h[Q + ".weight"].update(dtype="I32")), ("dtype",),
                             (Q + ".weight", "I32")),
    # tokenizer
    "tokenizer-missing": Case(LLAMA, _remove("tokenizer.json"), ("tokenizer.json",), ("missing",)),
    "tokenizer-unigram": Case(LLAMA, _edit_json("tokenizer.json", lambda d: d["model"].update(type="Unigram")),
                              ("unigram",)),
    "tokenizer-config-not-json": Case(LLAMA, _write("tokenizer_config.json", "{"), ("tokenizer_config.json",)),
    "tokenizer-negative-id": Case(LLAMA, _edit_json("tokenizer.json", lambda d: d["model"]["vocab"].update({"bad-id": -1})),
                                  ("invalid id",), ("bad-id",)),
    "tokenizer-id-past-limit": Case(LLAMA, _edit_json("tokenizer.json",
                                                      lambda d: d["model"]["vocab"].update({"bad-id": 1 << 24})),
                                    ("invalid id",), ("bad-id",)),
    "tokenizer-added-id-not-integer": Case(LLAMA, _edit_json("tokenizer.json", lambda d: d["added_tokens"][1].update(id="1")),
                                           ("invalid id",), ("added_tokens[1]",)),
    # quantized checkpoints
    "gptq-missing-qzeros": Case(GPTQ, _edit_header(lambda h: h.pop(Q + ".qzeros")), ("missing",),
                                (Q + ".qzeros",)),
    "gptq-bad-scales-shape": Case(GPTQ, _edit_header(lambda h: h[Q + ".scales"].update(shape=[1, 128],
                                                                                      data_offsets=[h[Q + ".scales"]["data_offsets"][0], h[Q + ".scales"]["data_offsets"][0] + 256]))
                                  , ("shape",), (Q + ".scales",)),
    "gptq-3-bits": Case(GPTQ, _edit_json("config.json", lambda d: d["quantization_config"].update(bits=3)),
                        ("3 bits",)),
    "gptq-group-16": Case(GPTQ, _edit_json("config.json", lambda d: d["quantization_config"].update(group_size=16)),
                          ("group_size",), ("16",)),
    "gptq-marlin": Case(GPTQ, _edit_json("config.json", lambda d: d["quantization_config"].update(checkpoint_format="marlin")),
                        ("marlin",)),
    "gptq-g-idx-out-of-range": Case({**GPTQ, "desc_act": True}, None, ("g_idx",)),  # patched below
    "gptq8-v1-zero-256": Case({"arch": "llama", "quant": "gptq", "bits": 8, "group": 32, "sym": False}, None,
                              ("zero point",), ("256",)),  # patched below
    "awq-gemv": Case({"arch": "llama", "quant": "awq", "bits": 4, "group": 32},
                     _edit_json("config.json", lambda d: d["quantization_config"].update(version="gemv")), ("gemv",)),
    "quantized-without-config": Case(GPTQ, _edit_json("config.json", lambda d: d.pop("quantization_config")),
                                     ("quantization_config",)),
    "bitsandbytes": Case(LLAMA, _edit_json("config.json", lambda d: _set(d, "quantization_config", {"quant_method": "bitsandbytes"})),
                         ("bitsandbytes",)),
}


def _patch_tensor(folder: Path, name: str, fn):
    """Rewrites one I32 tensor's data in place (same size)."""
    p = folder / ST
    buf = bytearray(p.read_bytes())
    n, h = _header(bytes(buf))
    b, e = h[name]["data_offsets"]
    a = np.frombuffer(bytes(buf[8 + n + b: 8 + n + e]), dtype="<i4").copy()
    fn(a)
    buf[8 + n + b: 8 + n + e] = a.tobytes()
    p.write_bytes(bytes(buf))


def _g_idx_out_of_range(folder):
    _patch_tensor(folder, Q + ".g_idx", lambda a: a.__setitem__(0, 99))


def _zero_256(folder):
    # 8-bit v1: stored 255 reads as zero 256, which GQ's u8 cannot hold.
    _patch_tensor(folder, Q + ".qzeros", lambda a: a.__setitem__(0, np.int32(-1)))


CASES["gptq-g-idx-out-of-range"].mutate = _g_idx_out_of_range
CASES["gptq8-v1-zero-256"].mutate = _zero_256

COMMANDS = {
    "info": lambda path: ["info", path],
    "generate": lambda path: ["generate", "-m", path, "-p", "hi", "-n", "1"],
}


@pytest.fixture(scope="module")
def bad_folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("hfbad")
    valid: dict = {}
    paths = {}
    for name, case in CASES.items():
        key = json.dumps(case.spec, sort_keys=True, default=list)
        if key not in valid:
            spec = dict(case.spec)
            arch = spec.pop("arch")
            # folders that drop a tensor are the broken case themselves
            kind = "broken" if spec.get("drop_tensors") else "valid"
            valid[key] = root / f"{kind}-{len(valid)}"
            make_hf.write_hf_model(valid[key], make_hf.default_hf_spec(arch, {}, **spec))
        folder = root / name
        shutil.copytree(valid[key], folder)
        if case.mutate:
            case.mutate(folder)
        paths[name] = folder
    return paths


def _expect_one_error_line(r, what):
    assert r.returncode >= 0, f"{what}: killed by signal {-r.returncode}; stderr:\n{r.stderr}"
    assert r.returncode == 1, f"{what}: exit status {r.returncode}, expected 1; stderr:\n{r.stderr}"
    assert r.stdout == "", f"{what}: printed on stdout:\n{r.stdout}"
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    assert len(lines) == 1, f"{what}: expected one error line on stderr, got {len(lines)}:\n{r.stderr}"
    return lines[0]


@pytest.mark.parametrize("command", list(COMMANDS))
@pytest.mark.parametrize("case", list(CASES))
def test_bad_folder_is_refused(run_cllm, bad_folders, case, command):
    r = run_cllm(*COMMANDS[command](str(bad_folders[case])), timeout=60)
    what = f"cllm {command} on {case}"
    line = _expect_one_error_line(r, what)
    c = CASES[case]
    low = line.lower()
    assert any(k.lower() in low for k in c.any_of), f"{what}: error line names none of {c.any_of}: {line}"
    for k in c.required:
        assert k.lower() in low, f"{what}: error line does not mention {k!r}: {line}"


def test_valid_folders_load(run_cllm, bad_folders):
    """The starting points are fine: the failures above are the mutations'."""
    root = bad_folders["st-empty"].parent
    for folder in sorted(root.glob("valid-*")):
        r = run_cllm("info", folder)
        assert r.returncode == 0, f"{folder}: {r.stderr}"


def test_random_header_corruption_never_crashes(run_cllm, bad_folders, tmp_path):
    """Bytes of the header flipped at random: a clean refusal or a load, never
    a signal (the sanitizer build turns any out-of-bounds read into one)."""
    src = bad_folders["st-empty"].parent / "valid-0"
    folder = tmp_path / "m"
    shutil.copytree(src, folder)
    buf = (src / ST).read_bytes()
    n, _ = _header(buf)
    rng = random.Random(3)
    for i in range(40):
        b = bytearray(buf)
        for _ in range(rng.randint(1, 4)):
            b[rng.randrange(0, 8 + n)] = rng.randrange(256)
        (folder / ST).write_bytes(bytes(b))
        r = run_cllm("info", folder, timeout=60)
        assert r.returncode in (0, 1), f"corruption {i}: exit {r.returncode}\n{r.stderr}"
        if r.returncode == 1:
            assert len([l for l in r.stderr.splitlines() if l.strip()]) == 1, r.stderr
