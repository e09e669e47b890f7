"""Files cllm cannot run are refused at load with one line that says why
and what to do, never a crash or a wrong model:

  * gpt-oss as it ships on the Hugging Face hub, its experts in MXFP4
    (*_blocks, *_scales): loads from GGUF, not from the folder;
  * a DeepSeek-V2 GGUF from an older converter (one attn_kv_b per layer,
    not attn_k_b and attn_v_b);
  * YaRN keys out of their range in a GGUF (an ext_factor other than 1, a
    factor below 1, an original context of 0);
  * a DeepSeek folder whose router cllm does not implement: a topk_method
    or scoring_func other than V3's noaux_tc over sigmoid scores (V2:
    greedy or group_limited_greedy over softmax).

The files are the tiny checkpoints of tests/ref/hf_families.py, converted by
llama.cpp's own convert_hf_to_gguf.py and then edited with its gguf-py."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import hf_families


@pytest.fixture(scope="module")
def converter():
    sys.path.insert(0, str(hf_families.REPO / "scripts"))
    import fetch_llamacpp_converter

    folder = fetch_llamacpp_converter.fetch()
    sys.path.insert(0, str(folder / "gguf-py"))
    return folder


def converted(converter, family, tmp_path):
    folder = tmp_path / family
    hf_families.write(family, str(folder))
    out = tmp_path / f"{family}.gguf"
    r = subprocess.run([sys.executable, str(hf_families.REPO / "tests" / "ref" / "convert_gguf.py"), str(converter),
                        str(folder), "--outfile", str(out), "--outtype", "f32", "--model-name", "tiny-family"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    return folder, out


def rewrite(src, dst, set_kv=None, rename=None, drop=()):
    """A copy of a GGUF with keys set (name -> value, of the type they had;
    a key the file lacks is added, a uint32 or a float32), tensors renamed
    (old -> new) and tensors dropped, as gguf-py's gguf_new_metadata.py
    copies one."""
    import gguf

    set_kv, rename = dict(set_kv or {}), dict(rename or {})
    reader = gguf.GGUFReader(str(src))
    writer = gguf.GGUFWriter(str(dst), arch=reader.fields["general.architecture"].contents())
    for field in reader.fields.values():
        if field.name == "general.architecture" or field.name.startswith("GGUF."):
            continue
        kind = field.types[0]
        sub = field.types[-1] if kind == gguf.GGUFValueType.ARRAY else None
        value = set_kv.pop(field.name, field.contents())
        writer.add_key_value(field.name, value, kind, sub_type=sub)
    for key, value in set_kv.items():
        writer.add_uint32(key, value) if isinstance(value, int) else writer.add_float32(key, value)
    kept = [t for t in reader.tensors if t.name not in drop]
    for t in kept:
        writer.add_tensor_info(rename.get(t.name, t.name), t.data.shape, t.data.dtype, t.data.nbytes, t.tensor_type)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    for t in kept:
        writer.write_tensor_data(t.data, tensor_endianess=reader.endianess)
    writer.close()


def refused(run_cllm, path, *needles):
    r = run_cllm("info", path, timeout=120)
    assert r.returncode != 0, f"cllm info {path} loaded it:\n{r.stdout}"
    err = r.stderr.strip()
    assert "Traceback" not in err and "Sanitizer" not in err, err
    for n in needles:
        assert n in err, f"{n!r} not in: {err}"


def test_gpt_oss_mxfp4_folder_points_to_gguf(run_cllm, tmp_path):
    folder = tmp_path / "gpt_oss"
    hf_families.write("gpt_oss", str(folder))
    mx = tmp_path / "gpt_oss_mxfp4"
    hf_families.write_mxfp4(str(folder), str(mx))
    refused(run_cllm, mx, "MXFP4", "load from GGUF", "convert_hf_to_gguf.py")


def test_deepseek_gguf_from_an_older_converter(run_cllm, converter, tmp_path):
    _, gguf_path = converted(converter, "deepseek_v2", tmp_path)
    r = run_cllm("info", gguf_path, timeout=120)
    assert r.returncode == 0, r.stderr  # the file as converted today loads
    old = tmp_path / "deepseek_v2-old.gguf"
    n_layers = hf_families.LAYERS
    rewrite(gguf_path, old, rename={f"blk.{i}.attn_k_b.weight": f"blk.{i}.attn_kv_b.weight" for i in range(n_layers)},
            drop={f"blk.{i}.attn_v_b.weight" for i in range(n_layers)})
    refused(run_cllm, old, "older converter", "attn_kv_b", "convert it again")


@pytest.mark.parametrize("key,value,message", [
    ("rope.scaling.yarn_ext_factor", 0.5, "yarn_ext_factor 0.5 is not supported"),
    ("rope.scaling.factor", 0.5, "must be at least 1"),
    ("rope.scaling.original_context_length", 0, "original_context_length"),
])
def test_yarn_keys_out_of_range(run_cllm, converter, tmp_path, key, value, message):
    _, gguf_path = converted(converter, "qwen3", tmp_path)
    import gguf

    fields = gguf.GGUFReader(str(gguf_path)).fields
    assert fields["qwen3.rope.scaling.type"].contents() == "yarn"
    bad = tmp_path / "bad.gguf"
    rewrite(gguf_path, bad, set_kv={f"qwen3.{key}": value})  # added where the converter leaves it out
    refused(run_cllm, bad, message)


@pytest.mark.parametrize("family,key,value,needle", [
    ("deepseek_v3", "topk_method", "greedy", "topk_method 'greedy' is not supported (noaux_tc)"),
    ("deepseek_v3", "scoring_func", "softmax", "scoring_func 'softmax' is not supported for deepseek_v3 (sigmoid)"),
    ("deepseek_v2", "topk_method", "noaux_tc", "topk_method 'noaux_tc' is not supported (greedy, group_limited_greedy)"),
    ("deepseek_v2", "scoring_func", "sigmoid", "scoring_func 'sigmoid' is not supported for deepseek_v2 (softmax)"),
])
def test_deepseek_router_cllm_does_not_implement(run_cllm, tmp_path, family, key, value, needle):
    folder = tmp_path / family
    hf_families.write(family, str(folder))
    r = run_cllm("info", folder, timeout=120)
    assert r.returncode == 0, r.stderr  # as written, it loads
    cfg = json.loads((folder / "config.json").read_text())
    cfg[key] = value
    (folder / "config.json").write_text(json.dumps(cfg))
    refused(run_cllm, folder, needle, "config.json")
