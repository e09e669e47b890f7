"""Medusa heads on the real Gemma 3 270m: heads trained on a prompt's own
continuation get most of their drafts accepted, which only happens when each
head's guess lands on the position it was trained for, and the output is the
plain one; a server with Medusa answers concurrent requests as a plain one
does and counts the accepted drafts in /metrics."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests

from server_util import CllmServer
from test_medusa import medusa, train

PROMPT = "Explain how a compass works."


@pytest.fixture(scope="module")
def real_heads(run_cllm, real_model_path, tmp_path_factory):
    """Heads trained on eight copies of one prompt continued by the model: what
    they learn is exactly the text the model will say for it."""
    tmp = tmp_path_factory.mktemp("medusa-real")
    data = tmp / "one.txt"
    data.write_text((PROMPT + "\n") * 8)
    heads = tmp / "gemma-3-270m-medusa.gguf"
    s = train(run_cllm, real_model_path, data, heads, "--gen-tokens", 128, "--epochs", 20, "--holdout", 0.25)
    return heads, s


def test_real_model_heads_trained_on_the_text_are_accepted(run_cllm, real_model_path, real_heads):
    heads, s = real_heads
    assert min(s["top1"]) > 0.8, s
    args = ["generate", "-m", real_model_path, "-p", PROMPT, "-n", 128, "--temperature", 0, "--ignore-eos", "-t", 2]
    plain = run_cllm(*args, timeout=300)
    spec = run_cllm(*args, "--speculative-config", json.dumps(medusa(heads, 4)), timeout=300)
    assert plain.returncode == 0 and spec.returncode == 0, plain.stderr + spec.stderr
    assert spec.stdout == plain.stdout
    line = next(l for l in spec.stderr.splitlines() if l.startswith("speculative decoding:"))
    rate = float(line.split("acceptance rate ")[1].split("%")[0])
    mean_len = float(line.split("mean accepted length ")[1])
    # A head guessing the wrong position (one off) would get almost nothing accepted.
    assert rate > 60 and mean_len > 2.8, line


def test_server_with_medusa_answers_as_plain(cllm_bin, real_model_path, real_heads):
    heads, _ = real_heads
    bodies = [{"model": "m", "prompt": p, "max_tokens": 40, "temperature": 0}
              for p in (PROMPT, "Why is the ocean salty?", "Write a haiku about rain.")]
    with CllmServer(cllm_bin, real_model_path, "--max-model-len", "1024", "--served-model-name", "m") as srv:
        want = [requests.post(srv.url("/v1/completions"), json=b, timeout=300).json()["choices"][0]["text"]
                for b in bodies]
    with CllmServer(cllm_bin, real_model_path, "--max-model-len", "1024", "--served-model-name", "m",
                    "--speculative-config", json.dumps(medusa(heads, 4))) as srv:
        with ThreadPoolExecutor(3) as pool:
            got = list(pool.map(lambda b: requests.post(srv.url("/v1/completions"), json=b, timeout=300).json(),
                                bodies))
        m = requests.get(srv.url("/metrics"), timeout=30).text
    assert [g["choices"][0]["text"] for g in got] == want
    accepted = [line for line in m.splitlines() if line.startswith("vllm:spec_decode_num_accepted_tokens_total")]
    assert accepted and float(accepted[0].rsplit(" ", 1)[1]) > 0, accepted


def test_the_shipped_heads_fit_the_test_model_and_get_drafts_accepted(run_cllm, real_model_path, repo_root,
                                                                      tmp_path):
    """data/gemma-3-270m-q4_k_m-medusa.gguf (made by `cllm medusa train` on
    data/medusa_train_prompts.txt) on prompts it never saw: the same text as
    plain decoding, and a share of its drafts accepted."""
    heads = repo_root / "data" / "gemma-3-270m-q4_k_m-medusa.gguf"
    prompts = (repo_root / "bench" / "data" / "chat_prompts_50.txt").read_text().splitlines()[:4]
    lines = tmp_path / "prompts.txt"
    lines.write_text("\n".join(prompts) + "\n")
    args = ["generate", "-m", real_model_path, "--prompts-file", lines, "--max-num-seqs", "1", "-n", 64,
            "--temperature", 0, "--ignore-eos", "-t", 2]
    plain = run_cllm(*args, timeout=300)
    spec = run_cllm(*args, "--speculative-config", json.dumps(medusa(heads, 3)), timeout=300)
    assert plain.returncode == 0 and spec.returncode == 0, plain.stderr + spec.stderr
    assert spec.stdout == plain.stdout
    line = next(l for l in spec.stderr.splitlines() if l.startswith("speculative decoding:"))
    assert float(line.split("acceptance rate ")[1].split("%")[0]) > 20, line
    by_pos = next(l for l in spec.stderr.splitlines() if "accepted by draft position:" in l)
    assert " 1: " in by_pos and " 3: " in by_pos, by_pos
    # A tree of 10 nodes chosen from the heads' accuracies (their top 5
    # candidates at each depth, the first-candidate chain 4 deep among them):
    # the same text, and no fewer tokens per step than the 3-deep chain.
    tree = run_cllm(*args, "--speculative-config",
                    json.dumps(medusa(heads, 10, speculative_token_tree="auto")), timeout=300)
    assert tree.returncode == 0, tree.stderr
    assert tree.stdout == plain.stdout
    mean = {name: float(next(l for l in p.stderr.splitlines() if l.startswith("speculative decoding:"))
                        .split("mean accepted length ")[1]) for name, p in (("chain", spec), ("tree", tree))}
    assert mean["tree"] >= mean["chain"], mean


def test_the_shipped_exit_adapter_drafts_better_than_the_raw_exit(run_cllm, real_model_path, repo_root, tmp_path):
    """data/gemma-3-270m-q4_k_m-exit-adapter.gguf (`cllm medusa train --kind
    exit` on data/medusa_train_prompts.txt) on prompts it never saw: layer_skip
    drafting through it keeps plain decoding's text, and its first drafts are
    accepted more often than those of the same 12 layers put straight
    through the output head, over the same draft vocabulary."""
    adapter = repo_root / "data" / "gemma-3-270m-q4_k_m-exit-adapter.gguf"
    prompts = (repo_root / "bench" / "data" / "chat_prompts_50.txt").read_text().splitlines()[4:8]
    lines = tmp_path / "prompts.txt"
    lines.write_text("\n".join(prompts) + "\n")
    args = ["generate", "-m", real_model_path, "--prompts-file", lines, "--max-num-seqs", "1", "-n", 64,
            "--temperature", 0, "--ignore-eos", "-t", 2]
    plain = run_cllm(*args, timeout=300)
    assert plain.returncode == 0, plain.stderr
    first = {}
    for name, cfg in (("adapter", {"model": str(adapter)}),
                      ("raw", {"draft_layers": 12, "draft_vocab": str(adapter)})):
        spec = run_cllm(*args, "--speculative-config",
                        json.dumps(dict({"method": "layer_skip", "num_speculative_tokens": 2}, **cfg)), timeout=300)
        assert spec.returncode == 0, spec.stderr
        assert spec.stdout == plain.stdout, name
        by_pos = next(l for l in spec.stderr.splitlines() if "accepted by draft position:" in l)
        first[name] = float(by_pos.split(" 1: ")[1].split("%")[0])
    assert first["adapter"] > first["raw"] + 5, first
