"""`cllm perplexity` computes what llama.cpp's llama-perplexity computes:
the same chunks (n_ctx tokens, the first replaced by BOS), the same scored
positions (the second half of each chunk), the same running and final
values. Checked against llama.cpp itself (llama-cpp-python evaluating the
same chunks and scoring them the llama-perplexity way) on a synthetic model
and on the real Gemma 3 model."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

EVAL = "tests/data/eval.txt"


def llama_cpp_perplexity(model_path, text, n_ctx, max_chunks):
    """llama-perplexity's algorithm over llama.cpp's logits."""
    import llama_cpp
    llm = llama_cpp.Llama(model_path=str(model_path), n_ctx=n_ctx, n_threads=2, logits_all=True, verbose=False)
    tokens = llm.tokenize(text.encode(), add_bos=True, special=False)
    n_chunks = min(len(tokens) // n_ctx, max_chunks)
    first = n_ctx // 2
    nll = nll2 = 0.0
    count = 0
    running = []
    for c in range(n_chunks):
        chunk = list(tokens[c * n_ctx:(c + 1) * n_ctx])
        chunk[0] = llm.token_bos()
        llm.reset()
        llm.eval(chunk)
        logits = np.array(llm.scores[:n_ctx], dtype=np.float64)
        for j in range(first, n_ctx - 1):
            row = logits[j]
            m = row.max()
            v = -(row[chunk[j + 1]] - m - math.log(np.exp(row - m).sum()))
            nll += v
            nll2 += v * v
        count += n_ctx - first - 1
        running.append(math.exp(nll / count))
    mean = nll / count
    ppl = math.exp(mean)
    err = math.sqrt((nll2 / count - mean * mean) / (count - 1)) * ppl
    return ppl, err, running, len(tokens)


def parse(stdout):
    running = [float(x) for x in re.findall(r"\[\d+\]([0-9.]+),", stdout)]
    m = re.search(r"Final estimate: PPL = ([0-9.]+) \+/- ([0-9.]+)", stdout)
    assert m, stdout
    return float(m.group(1)), float(m.group(2)), running


def test_matches_llama_cpp_on_a_synthetic_model(run_cllm, model_factory, repo_root):
    model = model_factory("llama", n_ctx=512)
    text = (repo_root / EVAL).read_text()
    p = run_cllm("perplexity", model, "--file", repo_root / EVAL, "--ctx", 128, "--chunks", 6, "--kv-type", "f32",
                 "--json", timeout=300)
    assert p.returncode == 0, p.stderr
    ppl, err, running = parse(p.stdout)
    ref_ppl, ref_err, ref_running, n_tok = llama_cpp_perplexity(model, text, 128, 6)
    assert f"{n_tok} tokens, 6 chunks of 128" in p.stderr  # the same tokenization
    assert len(running) == 6
    np.testing.assert_allclose(running, ref_running, rtol=2e-3)
    assert ppl == pytest.approx(ref_ppl, rel=2e-3)
    assert err == pytest.approx(ref_err, rel=2e-2)
    summary = [line for line in p.stdout.splitlines() if line.startswith("{")]
    import json
    doc = json.loads(summary[0])
    assert doc["chunks"] == 6 and doc["scored_tokens"] == 6 * 63 and doc["ppl"] == pytest.approx(ppl, rel=1e-4)


def test_matches_llama_cpp_on_the_real_model(run_cllm, real_model_path, repo_root):
    text = (repo_root / EVAL).read_text()
    p = run_cllm("perplexity", real_model_path, "--file", repo_root / EVAL, "--ctx", 128, "--chunks", 3,
                 timeout=600)
    assert p.returncode == 0, p.stderr
    ppl, _, running = parse(p.stdout)
    ref_ppl, _, ref_running, _ = llama_cpp_perplexity(real_model_path, text, 128, 3)
    # Both quantize activations (differently) against the Q4_K/Q5_0/Q6_K weights. Measured (AVX-512 EPYC,
    # llama-cpp-python 0.3.36; cllm the same at 1, 2 and all threads): running 28.199 / 44.330 / 33.154
    # against 27.884 / 43.993 / 33.178, 1.13% and 0.77% apart after chunks 1 and 2, the final estimate
    # 0.073% (the chunks' differences partly cancel). llama.cpp's own builds differ by more than that:
    # its AVX2 build (which setup.sh makes where the prebuilt one cannot run: an Intel Xeon with AVX-VNNI,
    # 2026-12-03) gives 33.623 on the same file, 1.4% from its AVX-512 build's 33.178, while cllm gives
    # 33.154 on both machines. So the bound is the reference's own spread, 2%, for every chunk.
    np.testing.assert_allclose(running, ref_running, rtol=0.02)
    assert ppl == pytest.approx(ref_ppl, rel=0.02)
    assert 5 < ppl < 100  # a real model on English prose


def test_errors(run_cllm, model_factory, tmp_path):
    model = model_factory("llama")
    short = tmp_path / "short.txt"
    short.write_text("just a few words")
    p = run_cllm("perplexity", model, "--file", short, "--ctx", 128)
    assert p.returncode != 0 and "a chunk needs 128" in p.stderr
    p = run_cllm("perplexity", model, "--file", tmp_path / "missing.txt")
    assert p.returncode != 0 and "cannot open" in p.stderr
    p = run_cllm("perplexity", model)
    assert p.returncode != 0 and "usage" in p.stderr
