"""The layering of src/ holds, and the build guard that keeps it holding works.

Each layer is a static library that declares the layers it uses
(CLLM_USES_<layer> in CMakeLists.txt: a DAG), and whose include path holds
only its own folder and those of what it uses, directly or through them.
These tests compile a probe file with a layer's real compile command, taken
from compile_commands.json: an upward include, or one sideways to a lower
layer it does not use (kernels -> chat), must fail to build, while the same
probe including a layer it uses builds. scripts/check_layers.py lists every
include edge and fails on one not declared; it is run here on the tree and on
copies with an upward and an undeclared include.
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys

import pytest


def _compile_command(build_dir, source_suffix):
    db = json.loads((build_dir / "compile_commands.json").read_text())
    for entry in db:
        if entry["file"].endswith(source_suffix):
            return entry
    pytest.fail(f"{source_suffix} is not in {build_dir}/compile_commands.json")


def _compile_probe(build_dir, tmp_path, source_suffix, include):
    """Compiles a one-line probe with the flags of source_suffix's layer."""
    entry = _compile_command(build_dir, source_suffix)
    probe = tmp_path / "probe.c"
    probe.write_text(f'#include "{include}"\nint probe_symbol;\n')
    args = shlex.split(entry["command"]) if "command" in entry else list(entry["arguments"])
    # Replace the source and the object with the probe's.
    src_i = next(i for i, a in enumerate(args) if a.endswith(source_suffix))
    args[src_i] = str(probe)
    out_i = args.index("-o")
    args[out_i + 1] = str(tmp_path / "probe.o")
    return subprocess.run(args, cwd=entry["directory"], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("layer_source, upward, lower", [
    ("src/kv/kv_cache.c", "model/arch.h", "util/error.h"),
    ("src/format/gguf.c", "kernels/wtype.h", "util/fp16.h"),
    ("src/tokenizer/bpe.c", "chat/template.h", "format/gguf.h"),
    ("src/engine/engine.c", "server/server.h", "model/model.h"),
    ("src/kernels/matmul.c", "kv/kv_cache.h", "format/wtype_geom.h"),
])
def test_upward_include_fails_to_build(build_dir, tmp_path, layer_source, upward, lower):
    ok = _compile_probe(build_dir, tmp_path, layer_source, lower)
    assert ok.returncode == 0, f"a probe including {lower} should build with {layer_source}'s flags:\n{ok.stderr}"
    bad = _compile_probe(build_dir, tmp_path, layer_source, upward)
    assert bad.returncode != 0, f"{layer_source}'s layer could include {upward}, a higher layer"
    assert upward in bad.stderr and "No such file" in bad.stderr, bad.stderr


@pytest.mark.parametrize("layer_source, undeclared, used", [
    ("src/kernels/matmul.c", "chat/template.h", "format/wtype_geom.h"),
    ("src/loadgen/serve_data.c", "engine/engine.h", "util/rng.h"),
    ("src/kv/kv_cache.c", "tokenizer/tokenizer.h", "kernels/kv_row.h"),
    ("src/chat/template.c", "grammar/grammar.h", "tokenizer/tokenizer.h"),
])
def test_include_of_a_lower_layer_not_used_fails_to_build(build_dir, tmp_path, layer_source, undeclared, used):
    ok = _compile_probe(build_dir, tmp_path, layer_source, used)
    assert ok.returncode == 0, f"a probe including {used} should build with {layer_source}'s flags:\n{ok.stderr}"
    bad = _compile_probe(build_dir, tmp_path, layer_source, undeclared)
    assert bad.returncode != 0, f"{layer_source}'s layer could include {undeclared}, which it does not declare"
    assert undeclared in bad.stderr and "No such file" in bad.stderr, bad.stderr


def test_check_layers_names_an_undeclared_include(repo_root, tmp_path):
    src = tmp_path / "src"
    shutil.copytree(repo_root / "src", src)
    target = src / "kernels" / "matmul.c"
    target.write_text('#include "chat/template.h"\n' + target.read_text())
    r = subprocess.run([sys.executable, str(repo_root / "scripts" / "check_layers.py"), "--src", str(src)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1
    assert 'matmul.c:1: #include "chat/template.h": kernels does not declare that it uses chat' in r.stderr


def test_check_layers_passes_on_the_tree(repo_root):
    r = subprocess.run([sys.executable, str(repo_root / "scripts" / "check_layers.py"), "--edges"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "follow the declared uses" in r.stdout
    assert "engine -> kv:" in r.stdout and "kv -> model" not in r.stdout


def test_check_layers_names_an_upward_include(repo_root, tmp_path):
    src = tmp_path / "src"
    shutil.copytree(repo_root / "src", src)
    target = src / "kv" / "kv_cache.c"
    target.write_text('#include "model/arch.h"\n' + target.read_text())
    r = subprocess.run([sys.executable, str(repo_root / "scripts" / "check_layers.py"), "--src", str(src)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1
    assert "kv_cache.c:1: #include \"model/arch.h\": kv may not include model" in r.stderr
