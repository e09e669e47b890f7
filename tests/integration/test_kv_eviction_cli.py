"""The terminal commands past their KV budget, on the real gemma-3-270m.

`cllm generate ... --kv-eviction POLICY --kv-budget 256 -n 300` used to hang
once the sequence reached its budget: generate sizes its KV pool for one
sequence, every full block of which is in the prefix cache, and compaction
asked for a free block per block it copies (though each original goes back to
the pool as it is copied), failed, preempted the sequence and recomputed it,
forever. These tests run each command past the budget under a timeout, check
that generate writes the same tokens as the server (whose larger pool never
hit the defect), that a pool sized for the budget (not for max_model_len) is
accepted, and that perplexity and chat finish where their budget or context
runs out."""

from __future__ import annotations

import re

import pytest

import long_text
from server_util import CllmServer

POLICIES = ["streaming", "h2o", "truncate"]
PROMPT = "Once upon a time"
TIMEOUT = 120  # 300 tokens take about 3 s here; a hang is killed, not waited for


def generate(run_cllm, model, *args):
    p = run_cllm("generate", "-m", model, "-p", PROMPT, "--ignore-eos", "--temperature", "0", "-t", "2", *args,
                 timeout=TIMEOUT)
    assert p.returncode == 0, p.stderr
    return p


def n_generated(stderr: str) -> int:
    m = re.search(r"^generation: (\d+) tokens", stderr, re.M)
    assert m, stderr
    return int(m.group(1))


@pytest.fixture(scope="module")
def served_texts(cllm_bin, real_model_path):
    """What the server answers for the same request with each policy."""
    texts = {}
    with CllmServer(cllm_bin, real_model_path, "--max-model-len", "1024") as s:
        for policy in POLICIES:
            r = s.post("/v1/completions", {"prompt": PROMPT, "max_tokens": 300, "temperature": 0,
                                           "ignore_eos": True, "kv_eviction": policy, "kv_budget": 256})
            assert r.status_code == 200, r.text
            body = r.json()
            assert body["usage"]["completion_tokens"] == 300 and body["usage"]["kv_evicted_tokens"] > 0
            texts[policy] = body["choices"][0]["text"]
    return texts


@pytest.mark.parametrize("policy", POLICIES)
def test_generate_runs_past_its_budget_as_the_server_does(run_cllm, real_model_path, served_texts, policy):
    p = generate(run_cllm, real_model_path, "-n", "300", "--kv-eviction", policy, "--kv-budget", "256")
    assert n_generated(p.stderr) == 300
    assert p.stdout.rstrip("\n") == served_texts[policy]


@pytest.mark.parametrize("policy", POLICIES)
def test_generate_runs_twice_past_a_larger_budget(run_cllm, real_model_path, policy):
    p = generate(run_cllm, real_model_path, "-n", "1100", "--kv-eviction", policy, "--kv-budget", "512")
    assert n_generated(p.stderr) == 1100


def test_a_pool_sized_for_the_budget_is_enough(run_cllm, real_model_path):
    # 8 MiB holds one sequence of 256 tokens, not one of max_model_len 705: with eviction that is all it needs.
    p = generate(run_cllm, real_model_path, "-n", "700", "--kv-eviction", "streaming", "--kv-budget", "256",
                 "--kv-cache-memory", "8MiB")
    assert n_generated(p.stderr) == 700
    # A pool smaller than the budget is refused at start, naming the budget.
    p = run_cllm("generate", "-m", real_model_path, "-p", PROMPT, "-n", "700", "--kv-eviction", "streaming",
                 "--kv-budget", "256", "--kv-cache-memory", "1MiB", timeout=TIMEOUT)
    assert p.returncode == 1
    assert "cannot hold one sequence of --kv-budget 256 tokens" in p.stderr, p.stderr


@pytest.mark.parametrize("policy", POLICIES)
def test_perplexity_scores_past_its_budget(run_cllm, real_model_path, tmp_path, policy):
    assert long_text.available(), "scripts/setup.sh installs bible-kjv bible-kjv-text"
    path = tmp_path / "genesis.txt"
    path.write_text(long_text.long_text())
    p = run_cllm("perplexity", real_model_path, "--file", path, "--tokens", "700", "--kv-eviction", policy,
                 "--kv-budget", "256", "-t", "2", timeout=TIMEOUT)
    assert p.returncode == 0, p.stderr
    assert re.search(r"Past the budget: PPL = [0-9.]+ .* over 444 tokens", p.stdout + p.stderr), p.stdout + p.stderr


def test_chat_past_its_context_says_so_and_ends(run_cllm, real_model_path):
    turns = "Tell me a very long story about a dragon.\nGo on.\nAnd then?\nMore, please.\n"
    p = run_cllm("chat", "-m", real_model_path, "-n", "120", "--temperature", "0", "-c", "256", "-t", "2",
                 input=turns, timeout=TIMEOUT)
    assert p.returncode == 0, p.stderr
    assert "the conversation fills the context; type /reset" in p.stderr, p.stderr
    assert len(p.stdout.strip()) > 100  # the first turns were answered
