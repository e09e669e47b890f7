"""Tensor parallelism over MPI: `mpirun -np 2 cllm ... --tensor-parallel-size 2`
against the same command in one process.

Each rank holds half of the attention heads and FFN columns and the ranks add
their halves of the attention output and FFN down projections (MPI_Allreduce).
That sum rounds differently from one process's single matmul, in the last bit
of f32, and nowhere else:

- f32 and f16 weights with an f32 KV cache: logits agree to 1e-5 of each
  position's largest logit (measured: under 1e-6), and greedy output is equal
  token for token on every synthetic family;
- quantized weights (Q8_0, the real Q4_K_M GGUF): each matmul quantizes its
  input to 8 bits, so a last-bit difference can move one input a whole
  quantization step; from that position the logits differ by as much as they
  do between an f16 and an f32 KV cache in one process (a few percent of the
  largest logit; greedy tokens can then part where the top two are close).
  The test bounds the TP difference by that one-process yardstick.

Skipped only where mpirun is missing. CI installs OpenMPI (scripts/setup.sh),
so where mpirun is there a build without MPI (CLLM_MPI off in the build's
CMakeCache.txt) fails the tests instead of skipping them.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
from pathlib import Path

import numpy as np
import openai
import pytest

from server_util import CllmServer

MPIRUN = shutil.which("mpirun")
# Root may run mpirun only when told (CI runs as root); two ranks on two cores
# need --oversubscribe, and --bind-to none leaves the scheduler free.
MPI_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
MPI_FLAGS = ("--oversubscribe", "--bind-to", "none")
LSAN_OPENMPI = Path(__file__).resolve().parents[1] / "sanitizer" / "lsan_openmpi.supp"
ARCHES = ["llama", "qwen2", "mistral", "gemma3"]
TOKENS = [2, 100, 200, 300, 50, 60, 70, 80, 90, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24]
PROMPTS = ["hello world", "the model and the cache", "one two three four five six seven"]


# CMake's false constants (if(<variable>) is true for any other value).
CMAKE_FALSE = {"", "0", "OFF", "NO", "FALSE", "N", "IGNORE", "NOTFOUND"}


def _cmake_cached_bool(build_dir: Path, name: str) -> bool:
    """`name` in the build's CMakeCache.txt (a line NAME:TYPE=VALUE), read as
    CMake's if() reads it; fails the test where the cache or the entry is
    missing, since then nothing says how cllm was built."""
    cache = build_dir / "CMakeCache.txt"
    if not cache.is_file():
        pytest.fail(f"mpirun is installed ({MPIRUN}) but {cache} is missing: cannot tell whether cllm was built "
                    f"with MPI; point CLLM_BUILD_DIR at a CMake build folder", pytrace=False)
    m = re.search(rf"^{name}:[A-Z]+=(.*)$", cache.read_text(), re.MULTILINE)
    if not m:
        pytest.fail(f"{cache} has no {name} entry: reconfigure (cmake -S . -B {build_dir})", pytrace=False)
    value = m.group(1).strip().upper()
    return value not in CMAKE_FALSE and not value.endswith("-NOTFOUND")


@pytest.fixture(scope="module")
def mpi(build_dir):
    if not MPIRUN:
        pytest.skip("mpirun not found: apt-get install openmpi-bin libopenmpi-dev (scripts/setup.sh does)")
    if not _cmake_cached_bool(build_dir, "CLLM_MPI"):
        # option() keeps a cached OFF: a build configured before OpenMPI was
        # installed stays without MPI until told otherwise.
        pytest.fail(f"mpirun is installed ({MPIRUN}) but cllm in {build_dir} was built without MPI (CLLM_MPI is "
                    f"off in its CMakeCache.txt), so the tensor-parallel tests cannot run: install libopenmpi-dev "
                    f"(scripts/setup.sh does) and reconfigure with cmake -S . -B {build_dir} -DCLLM_MPI=ON",
                    pytrace=False)
    env = dict(os.environ)
    env.update(MPI_ENV)
    # Under the sanitizers: Open MPI's own leaks are suppressed, by library
    # (see the file), and only those. use_tls=0: on an Intel Xeon (AVX-512,
    # 2026-12-02) LeakSanitizer's tracer died scanning a thread's TLS in these
    # MPI processes when pytest started them ("Tracer caught signal 11:
    # addr=0x3be8", every time; never from a shell). Without TLS as roots, a
    # block only a TLS slot points to is reported, not hidden: no leak of
    # cllm's can pass unseen for it.
    lsan = f"suppressions={LSAN_OPENMPI}:fast_unwind_on_malloc=0:use_tls=0"
    env["LSAN_OPTIONS"] = f"{env['LSAN_OPTIONS']}:{lsan}" if env.get("LSAN_OPTIONS") else lsan
    return env


def _run(cmd, env, timeout=120) -> subprocess.CompletedProcess:
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=timeout, env=env)


def _mpirun(n: int, cllm_bin, *args) -> list:
    return [MPIRUN, *MPI_FLAGS, "-np", str(n), cllm_bin, *args]


def _logits(cmd, env, out: Path) -> np.ndarray:
    r = _run(cmd + ["--out", out], env)
    assert r.returncode == 0, f"{' '.join(map(str, cmd))} exited {r.returncode}:\n{r.stderr[-3000:]}"
    return np.fromfile(out, dtype="<f4").reshape(len(TOKENS), -1).astype(np.float64)


def _rel_err(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Per position: the largest difference over the largest |logit| (test_forward_ref's measure)."""
    return np.abs(a - b).max(axis=1) / np.abs(a).max(axis=1)


def _logits_pair(cllm_bin, model, env, tmp_path, kv_type="f32", n=2):
    args = ["logits", "-m", model, "--tokens", ",".join(map(str, TOKENS)), "--kv-type", kv_type, "--threads", "1"]
    one = _logits([cllm_bin, *args], env, tmp_path / "one.bin")
    many = _logits(_mpirun(n, cllm_bin, *args, "--tensor-parallel-size", str(n)), env, tmp_path / "tp.bin")
    return one, many


def _generate(cmd, env) -> list:
    r = _run(cmd, env)
    assert r.returncode == 0, f"{' '.join(map(str, cmd))} exited {r.returncode}:\n{r.stderr[-3000:]}"
    return [json.loads(line) for line in r.stdout.splitlines()]


@pytest.mark.parametrize("arch", ARCHES)
def test_logits_agree_to_1e5(mpi, cllm_bin, model_factory, tmp_path, arch):
    one, tp = _logits_pair(cllm_bin, model_factory(arch), mpi, tmp_path)
    err = _rel_err(one, tp)
    assert err.max() <= 1e-5, f"{arch}: TP 2 vs 1 differ by {err.max():.3g} of the largest logit (position {err.argmax()})"


@pytest.mark.parametrize("arch", ARCHES)
def test_greedy_output_matches_one_process(mpi, cllm_bin, model_factory, tmp_path, arch):
    """Several prompts batched together, one of them with n=2 (forked samples
    share the prompt's KV blocks and copy on write: the copies go to rank 1
    too), the f16 weights and default f16 KV cache that users run."""
    model = model_factory(arch, wtype="f16")
    prompts = tmp_path / "prompts.jsonl"
    lines = [{"prompt": p, "max_tokens": 24, "temperature": 0} for p in PROMPTS]
    lines.append({"prompt": PROMPTS[0], "max_tokens": 24, "temperature": 0.8, "seed": 7, "n": 2})
    prompts.write_text("".join(json.dumps(x) + "\n" for x in lines))
    args = ["generate", "-m", model, "--prompts-file", prompts, "--threads", "1", "--ignore-eos"]
    one = _generate([cllm_bin, *args], mpi)
    tp = _generate(_mpirun(2, cllm_bin, *args, "--tensor-parallel-size", "2"), mpi)
    assert len(one) == len(lines)
    for a, b in zip(one, tp):
        assert a["completion_tokens"] == b["completion_tokens"] == 24 * len(a.get("texts", [0]))
        assert a.get("texts", a["text"]) == b.get("texts", b["text"]), f"{arch}: prompt {a['index']} differs"


@pytest.mark.parametrize("max_model_len", [60, 200])
def test_longrope_factors_follow_rank_0s_context(mpi, cllm_bin, tmp_path, max_model_len):
    """Phi-3's LongRoPE picks its short or long factors by the context served
    (short within its 64 original positions): every rank rotates with rank
    0's choice, so a short context (60) and a long one (200) both give the
    one-process output. (Rank 1 once took the trained context's factors.)"""
    import hf_families

    folder = tmp_path / "phi3"
    hf_families.write("phi3", str(folder))
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text(json.dumps({"prompt": PROMPTS[0], "max_tokens": 20, "temperature": 0}) + "\n")
    args = ["generate", "-m", folder, "--prompts-file", prompts, "-c", max_model_len, "--threads", "1", "--ignore-eos"]
    one = _generate([cllm_bin, *args], mpi)
    tp = _generate(_mpirun(2, cllm_bin, *args, "--tensor-parallel-size", "2"), mpi)
    assert one[0]["completion_tokens"] == 20 and one[0]["text"] == tp[0]["text"], (one, tp)


@pytest.mark.parametrize("extra", [("--num-speculative-tokens", "4"), ("--beam-width", "3")],
                         ids=["ngram-speculation", "beam-search"])
def test_speculation_and_beam_search_match_one_process(mpi, cllm_bin, model_factory, extra):
    """Drafts verified in the same forward, and beams that fork and copy
    blocks on write, run on every rank as on one."""
    args = ["generate", "-m", model_factory("llama", wtype="f16"), "-p", "one two three one two three one two",
            "--max-tokens", "24", "--temperature", "0", "--threads", "1", "--ignore-eos", *extra]
    one = _run([cllm_bin, *args], mpi)
    tp = _run(_mpirun(2, cllm_bin, *args, "--tensor-parallel-size", "2"), mpi)
    assert one.returncode == 0 and tp.returncode == 0, tp.stderr[-3000:]
    assert tp.stdout == one.stdout


def test_replicated_kv_head_on_four_ranks(mpi, cllm_bin, model_factory, tmp_path):
    """Gemma 3's one KV head over 4 ranks (each with one query head): every
    rank holds the KV head its query reads."""
    one, tp = _logits_pair(cllm_bin, model_factory("gemma3"), mpi, tmp_path, n=4)
    assert _rel_err(one, tp).max() <= 1e-5


# Mixtures of experts, and OLMo 2's whole-projection q/k norm, made by transformers' own classes
# (tests/ref/hf_families.py), float32 folders.
HF_FAMILIES = ["mixtral", "qwen2_moe", "qwen3_moe", "qwen3_moe_dense", "deepseek_v2", "deepseek_v3", "gpt_oss",
               "olmoe", "olmo2"]


@pytest.fixture(scope="module")
def moe_checkpoint(tmp_path_factory):
    import hf_families

    root = tmp_path_factory.mktemp("tp_moe")

    def get(family):
        folder = root / family
        if not folder.exists():
            hf_families.write(family, str(folder))
        return folder

    return get


@pytest.mark.parametrize("family", HF_FAMILIES)
def test_hf_families_split_across_ranks(mpi, cllm_bin, moe_checkpoint, tmp_path, family):
    """Each rank holds half of every expert's hidden columns (and of the
    shared experts', Qwen2-MoE and DeepSeek; the dense layers' FFN,
    qwen3_moe_dense and DeepSeek's first layer) and the whole router; with
    latent attention (DeepSeek) half of the heads and the whole latent, which
    each rank caches; gpt-oss's sinks and q/k/v biases by head, its experts'
    gate and up biases by column, its output and down biases on rank 0
    alone; OLMoE's and OLMo 2's q/k norm, which spans every head, with the
    ranks' sums of squares added: the same logits as one process, to 1e-5."""
    one, tp = _logits_pair(cllm_bin, moe_checkpoint(family), mpi, tmp_path)
    err = _rel_err(one, tp)
    assert err.max() <= 1e-5, f"{family}: TP 2 vs 1 differ by {err.max():.3g} (position {err.argmax()})"


def test_refuses_a_whole_projection_norm_over_more_ranks_than_kv_heads(mpi, cllm_bin, moe_checkpoint):
    r = _run(_mpirun(4, cllm_bin, "generate", "-m", moe_checkpoint("olmo2"), "-p", "hi", "--threads", "1",
                     "--tensor-parallel-size", "4"), mpi)
    assert r.returncode != 0
    assert ("cannot split OLMo 2's q/k norm, which spans every head of the projection, over 4 ranks: they must "
            "divide its 2 KV heads") in r.stderr


def _within_quantization_noise(cllm_bin, model, env, tmp_path, what):
    one, tp = _logits_pair(cllm_bin, model, env, tmp_path)
    f16 = _logits([cllm_bin, "logits", "-m", model, "--tokens", ",".join(map(str, TOKENS)), "--kv-type", "f16",
                   "--threads", "1"], env, tmp_path / "f16.bin")
    tp_err, kv_err = _rel_err(one, tp), _rel_err(one, f16)
    assert tp_err.max() <= 1.5 * kv_err.max(), (
        f"{what}: TP 2 vs 1 differ by up to {tp_err.max():.3g} of the largest logit, more than an f16 KV cache "
        f"does in one process ({kv_err.max():.3g})")
    agree = np.mean(one.argmax(1) == tp.argmax(1))
    assert agree >= 0.9, f"{what}: TP 2 and 1 pick the same top token at only {agree:.0%} of positions"


def test_q8_0_within_quantization_noise(mpi, cllm_bin, model_factory, tmp_path):
    _within_quantization_noise(cllm_bin, model_factory("gemma3", wtype="q8_0"), mpi, tmp_path, "gemma3 q8_0")


def test_real_model(mpi, cllm_bin, real_model_path, tmp_path):
    """Gemma 3 270M Q4_K_M: Q4_K/Q6_K rows split on their 256-element blocks.
    Logits within the model's own quantization noise, and the first greedy
    tokens of a prompt equal (they part later, where the top two are close)."""
    _within_quantization_noise(cllm_bin, real_model_path, mpi, tmp_path, "gemma-3-270m")
    args = ["generate", "-m", real_model_path, "-p", "The capital of France is", "--max-tokens", "8",
            "--temperature", "0", "--threads", "1"]
    one = _run([cllm_bin, *args], mpi)
    tp = _run(_mpirun(2, cllm_bin, *args, "--tensor-parallel-size", "2"), mpi)
    assert one.returncode == 0 and tp.returncode == 0, tp.stderr[-3000:]
    assert tp.stdout == one.stdout and "capital" in one.stdout


def test_refuses_a_size_that_does_not_divide(mpi, cllm_bin, model_factory):
    r = _run(_mpirun(3, cllm_bin, "generate", "-m", model_factory("llama"), "-p", "hi", "--threads", "1",
                     "--tensor-parallel-size", "3"), mpi)
    assert r.returncode != 0
    assert "a tensor-parallel size of 3 does not divide the model's 4 attention heads" in r.stderr


def test_refuses_kv_eviction(mpi, cllm_bin, model_factory):
    """Eviction moves KV rows on rank 0 alone; the other ranks could not follow."""
    r = _run(_mpirun(2, cllm_bin, "generate", "-m", model_factory("llama"), "-p", "hi", "--threads", "1",
                     "--kv-eviction", "streaming", "--kv-budget", "64", "--tensor-parallel-size", "2"), mpi)
    assert r.returncode != 0
    assert "tensor parallelism does not combine with KV eviction" in r.stderr


def test_refuses_a_job_of_another_size(mpi, cllm_bin, model_factory):
    """One process (an MPI singleton) asked for 2 ranks says how to start them."""
    r = _run([cllm_bin, "generate", "-m", model_factory("llama"), "-p", "hi", "--tensor-parallel-size", "2"], mpi)
    assert r.returncode == 1
    assert "--tensor-parallel-size 2 needs 2 processes (mpirun -np 2), this job has 1" in r.stderr


def _rank0_pid(mpirun_pid: int) -> int:
    """The child of mpirun whose MPI rank is 0."""
    for child in Path(f"/proc/{mpirun_pid}/task/{mpirun_pid}/children").read_text().split():
        env = Path(f"/proc/{child}/environ").read_bytes().split(b"\0")
        if b"OMPI_COMM_WORLD_RANK=0" in env:
            return int(child)
    raise AssertionError("no rank 0 under mpirun")


def _kv_tokens(log: str) -> int:
    m = re.search(r"KV cache [\d.]+ MiB \([^)]*\): (\d+) tokens", log)
    assert m, log
    return int(m.group(1))


def test_serve_with_openai_client(mpi, cllm_bin, model_factory):
    """`mpirun -np 2 cllm serve --tensor-parallel-size 2` answers the official
    client as one process does (greedy, streamed and not, logprobs, n=2),
    and a SIGTERM to rank 0 stops the whole job cleanly."""
    model = model_factory("qwen2", wtype="f16")
    common = ("--max-model-len", "256", "--kv-cache-memory", "16MiB", "--served-model-name", "tiny")
    requests = [dict(prompt="hello world", max_tokens=16, temperature=0, logprobs=2),
                dict(prompt="the cache", max_tokens=12, temperature=0.9, seed=3, n=2)]

    def ask(srv):
        client = openai.OpenAI(base_url=srv.url("/v1"), api_key="none", max_retries=0, timeout=120)
        out = []
        for req in requests:
            r = client.completions.create(model="tiny", **req)
            out.append([(c.text, c.logprobs.tokens if c.logprobs else None) for c in r.choices])
        stream = client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "hi"}],
                                                max_tokens=10, temperature=0, stream=True)
        out.append("".join(ch.choices[0].delta.content or "" for ch in stream if ch.choices))
        return out

    with CllmServer(cllm_bin, model, *common, threads=1) as srv:
        want = ask(srv)
        whole_kv = _kv_tokens(srv.log())
    srv = CllmServer(cllm_bin, model, *common, "--tensor-parallel-size", "2", threads=1, env=mpi,
                     launcher=(MPIRUN, *MPI_FLAGS, "-np", "2"))
    try:
        assert ask(srv) == want
        assert "tensor parallel rank 0 of 2" in srv.log()
        # qwen2's 2 KV heads, one per rank: the same memory holds twice the tokens
        assert _kv_tokens(srv.log()) == 2 * whole_kv
        os.kill(_rank0_pid(srv.proc.pid), signal.SIGTERM)
        assert srv.wait_exit(30) == 0, srv.log()[-3000:]
        assert "cllm serve: stopped" in srv.log()
    finally:
        srv.kill()
