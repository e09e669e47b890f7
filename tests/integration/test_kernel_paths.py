"""The kernel path a CPU takes does not change the result.

matmul reaches the same weights through several paths: the x8 layout the
weights are repacked into at load (`CLLM_NO_REPACK=1` keeps the file's rows),
the AVX2, AVX-VNNI and AVX512-VNNI builds (`CLLM_NO_VNNI=1`,
`CLLM_NO_AVX512=1`), one or two threads, and per batch size the one-token
tiles, the x8 tiles or the packed panels. All of them compute each block's
exact integer sum and the same float steps, so the logits must be the same
bits whichever path runs; and greedy decoding must give the same tokens.
Checked on the real gemma-3-270m GGUF (Q8_0, Q5_0, Q4_K, Q6_K matrices) and on
a synthetic Q8_0 model of every family.

Where the CPU has no VNNI, "best" is the AVX2 table too: a path that would
run the same kernels with the same threads as one before it is left out
rather than compared with itself, and each test prints the paths it ran
(each against the scalar reference: tests/unit/test_quants.c, test_gemm.c).
"""
import hashlib
import re

import numpy as np
import pytest

# (name, environment, threads): the paths to compare; unset variables take the CPU's best.
_AVX2 = {"CLLM_NO_VNNI": "1", "CLLM_NO_AVX512": "1"}
PATHS = [
    ("best", {}, 1),
    ("best", {}, 2),
    ("stored rows", {"CLLM_NO_REPACK": "1"}, 2),
    ("plain AVX2", _AVX2, 1),
    ("plain AVX2, stored rows", {**_AVX2, "CLLM_NO_REPACK": "1"}, 2),
]

# Real token ids of the gemma vocabulary (a sentence, repeated to 70 tokens).
GEMMA_TOKENS = ([2, 818, 3925, 529, 506, 20311, 3265, 12462, 528, 506, 137549, 7394, 236764, 1056, 72227,
                 101545, 11739, 8569, 2940, 530, 6350, 1694] * 4)[:70]


def _env(extra):
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith("CLLM_NO_")}
    env.update(extra)
    return env


def _kernels(run_cllm, model, env) -> str:
    """The kernel table a path gets here (`cllm info`): vnni, vnni512, avx2 or ref."""
    p = run_cllm("info", model, env=_env(env))
    assert p.returncode == 0, p.stderr
    m = re.search(r"^kernels\s+(\w+);", p.stdout, re.MULTILINE)
    assert m, p.stdout
    return m.group(1)


def _distinct(run_cllm, model, paths):
    """The paths that run distinct kernels here, named with their table:
    one that gets the table, layout and threads of an earlier one (plain
    AVX2 where "best" is AVX2 already) is left out and said so."""
    seen, out, dropped = {}, [], []
    for name, env, threads in paths:
        kernels = _kernels(run_cllm, model, env)
        key = (kernels, "CLLM_NO_REPACK" in env, threads)
        label = f"{name} ({kernels})"
        where = f"{label} at {threads} thread{'s' if threads > 1 else ''}"
        if key in seen:
            dropped.append(f"{where} is {seen[key]}")
            continue
        seen[key] = where
        out.append((label, env, threads))
    print(f"kernel paths compared: {'; '.join(seen.values())}"
          + (f" (left out: {'; '.join(dropped)})" if dropped else ""))
    return out


def _logits(run_cllm, model, tokens, tmp_path, env, threads, chunk):
    out = tmp_path / f"logits-{hashlib.md5(repr((env, threads, chunk)).encode()).hexdigest()}.f32"
    p = run_cllm("logits", "-m", model, "--tokens", ",".join(map(str, tokens)), "--out", out,
                 "--threads", threads, "--chunk", chunk, env=_env(env), timeout=300)
    assert p.returncode == 0, p.stderr
    return np.fromfile(out, dtype=np.float32).reshape(len(tokens), -1)


def _check_paths(run_cllm, model, tokens, tmp_path, chunks, paths=PATHS):
    paths = _distinct(run_cllm, model, paths)
    by_chunk = {}
    for chunk in chunks:
        first = None
        for name, env, threads in paths:
            got = _logits(run_cllm, model, tokens, tmp_path, env, threads, chunk)
            if first is None:
                first = (name, threads, got)
                continue
            same = np.array_equal(got.view(np.uint32), first[2].view(np.uint32))
            assert same, (f"chunk {chunk}: {name} at {threads} threads differs from {first[0]} at "
                          f"{first[1]} threads (max |d| {np.abs(got - first[2]).max():.3g})")
        by_chunk[chunk] = first[2]
    # Across batch sizes the matmuls give the same bits; attention may round
    # differently between a prompt's tile and one token, so: close, same argmax.
    base = by_chunk[chunks[0]]
    for chunk, got in by_chunk.items():
        np.testing.assert_allclose(got, base, rtol=1e-3, atol=1e-3 * np.abs(base).max())
        assert (got.argmax(axis=1) == base.argmax(axis=1)).all(), f"chunk {chunk}: greedy choice differs"


def test_real_model_logits_do_not_depend_on_the_kernel_path(run_cllm, real_model_path, tmp_path):
    # chunk 1: one-token tiles; 7: x8 tiles of several columns; 64: packed panels
    _check_paths(run_cllm, real_model_path, GEMMA_TOKENS, tmp_path, chunks=(1, 7, 64))


@pytest.mark.parametrize("arch", ["llama", "qwen2", "mistral", "gemma3"])
def test_synthetic_q8_0_logits_do_not_depend_on_the_kernel_path(run_cllm, model_factory, arch, tmp_path):
    model = model_factory(arch, wtype="q8_0")
    tokens = [(7 * i + 3) % 97 + 1 for i in range(60)]
    _check_paths(run_cllm, model, tokens, tmp_path, chunks=(1, 60), paths=PATHS[1:4])


def test_greedy_text_does_not_depend_on_the_kernel_path(run_cllm, real_model_path):
    texts = {}
    for name, env, threads in _distinct(run_cllm, real_model_path, PATHS):
        p = run_cllm("generate", "-m", real_model_path, "-p", "The three primary colours are",
                     "-n", 32, "--temperature", 0, "--threads", threads, env=_env(env), timeout=300)
        assert p.returncode == 0, p.stderr
        texts[(name, threads)] = p.stdout
    assert len(set(texts.values())) == 1, texts
