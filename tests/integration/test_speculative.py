"""Speculative decoding (n-gram prompt lookup) is lossless: greedy output is
token-identical with and without it, on synthetic models of every family and
on the real Gemma 3 270m, at K = 1, 4 and 8, alone and in a batch where only
some requests speculate, under preemption, with stop strings, max_tokens and
logprobs; seeded sampling is token-identical too (each row is sampled as
without drafts; the distribution of the rule is tested in
tests/unit/test_speculative.c); no KV block is left held. Drafts are really accepted on repetitive
prompts (the counters say so), /metrics exports them, and bad flags fail at
start with a message.

Engine scenarios run through build/engine_harness (see test_engine.py); the
server and the CLI are started as the user would."""

from __future__ import annotations

import json
import random
import subprocess

import make_model
import pytest
import requests

from server_util import CllmServer

FAMILIES = ["llama", "mistral", "qwen2", "gemma3"]


@pytest.fixture(scope="module")
def harness(build_dir):
    path = build_dir / "engine_harness"
    if not path.exists():
        pytest.fail(f"{path} is missing: build the project first", pytrace=False)

    def run(model, requests, spec=None, **config):
        config.setdefault("threads", 2)
        if spec is not None:
            config["speculative_config"] = spec
        p = subprocess.run([str(path), str(model)], input=json.dumps({"config": config, "requests": requests}),
                           capture_output=True, text=True, timeout=600)
        assert p.returncode == 0, p.stderr
        return json.loads(p.stdout)

    return run


def ngram(k, **extra):
    return dict({"method": "ngram", "num_speculative_tokens": k}, **extra)


def draft(k, model, **extra):
    return dict({"method": "draft_model", "model": str(model), "num_speculative_tokens": k}, **extra)


def tokens(res, i, sample=0):
    return res["requests"][i]["samples"][sample]["tokens"]


def repetitive_prompt(rng, n_vocab, snippet_len=40):
    """A 'snippet', then the snippet again, then its start: the continuation
    the model has seen before is what n-gram lookup proposes."""
    snip = [rng.randrange(4, n_vocab) for _ in range(snippet_len)]
    return [2] + snip + snip + snip[: snippet_len // 2]


def mixed_requests(n_vocab, seed, count=10):
    """Repetitive and random prompts arriving over a few steps: the random ones
    rarely find an n-gram, so only some requests speculate in a step."""
    rng = random.Random(seed)
    reqs = []
    for i in range(count):
        if i % 2 == 0:
            prompt = repetitive_prompt(rng, n_vocab, snippet_len=rng.randint(8, 40))
        else:
            prompt = [2] + [rng.randrange(4, n_vocab) for _ in range(rng.randint(1, 60))]
        reqs.append({"prompt": prompt, "max_tokens": rng.randint(5, 40), "ignore_eos": True,
                     "arrive": rng.randrange(0, 6)})
    return reqs


@pytest.fixture(scope="module", params=FAMILIES)
def synthetic(request, model_factory):
    return request.param, model_factory(request.param)


@pytest.mark.parametrize("k", [1, 4, 8])
def test_greedy_alone_is_token_identical(harness, synthetic, k):
    arch, model = synthetic
    req = {"prompt": repetitive_prompt(random.Random(1), 300), "max_tokens": 60, "ignore_eos": True}
    plain = harness(model, [req])
    spec = harness(model, [req], spec=ngram(k))
    assert tokens(spec, 0) == tokens(plain, 0)
    assert len(tokens(spec, 0)) == 60
    assert spec["spec"]["draft_tokens"] > 0
    assert spec["spec"]["accepted_tokens"] > 0, "a repetitive prompt should get drafts accepted"
    assert spec["spec"]["accepted_tokens"] <= spec["spec"]["draft_tokens"]
    assert sum(spec["spec"]["accepted_per_pos"]) == spec["spec"]["accepted_tokens"]
    assert max(i for i, n in enumerate(spec["spec"]["accepted_per_pos"]) if n or i == 0) < k
    assert spec["steps"] < plain["steps"], "accepted drafts should save steps"
    assert plain["spec"]["drafts"] == 0
    assert spec["blocks_in_use"] == 0


@pytest.mark.parametrize("k", [1, 4, 8])
def test_greedy_batch_with_some_speculating_is_token_identical(harness, synthetic, k):
    arch, model = synthetic
    reqs = mixed_requests(300, seed=10 + k)
    plain = harness(model, reqs, max_num_seqs=16)
    spec = harness(model, reqs, spec=ngram(k), max_num_seqs=16)
    for i in range(len(reqs)):
        assert tokens(spec, i) == tokens(plain, i), f"request {i} differs with speculation"
    assert spec["spec"]["accepted_tokens"] > 0
    assert spec["blocks_in_use"] == 0


@pytest.mark.parametrize("k", [1, 4, 8])
def test_greedy_batch_of_16_all_speculating_is_token_identical(harness, synthetic, k):
    """Sixteen at once, half of them repetitive: with disable_by_batch_size 16
    every step speculates for whoever has a draft."""
    arch, model = synthetic
    reqs = mixed_requests(300, seed=20 + k, count=16)
    plain = harness(model, reqs, max_num_seqs=16)
    spec = harness(model, reqs, spec=ngram(k, disable_by_batch_size=16), max_num_seqs=16)
    for i in range(len(reqs)):
        assert tokens(spec, i) == tokens(plain, i), f"request {i} differs with speculation"
    assert spec["spec"]["accepted_tokens"] > 0
    assert spec["blocks_in_use"] == 0


def preemption_scenario(arch):
    """Twelve requests at once in a pool that holds one of max_model_len and
    far from twelve (gemma3's 7 layers make 7 groups, each with its table)."""
    reqs = mixed_requests(300, seed=3, count=12)
    for r in reqs:
        r["arrive"] = 0
    blocks = {"llama": 40, "mistral": 40, "qwen2": 40, "gemma3": 130}[arch]
    return reqs, dict(kv_cache_blocks=blocks, max_model_len=128, block_size=8, max_num_seqs=12)


def test_preemption_with_speculation(harness, synthetic):
    arch, model = synthetic
    reqs, cfg = preemption_scenario(arch)
    plain = harness(model, reqs, **cfg)
    spec = harness(model, reqs, spec=ngram(4, disable_by_batch_size=16), **cfg)
    assert spec["preemptions"] > 0
    assert [tokens(spec, i) for i in range(len(reqs))] == [tokens(plain, i) for i in range(len(reqs))]
    assert spec["spec"]["accepted_tokens"] > 0
    assert spec["blocks_in_use"] == 0


def test_prefix_cache_shared_blocks_stay_correct(harness, model_factory):
    """Two requests share a cached prompt; the second speculates into the
    block after the shared ones. Its tokens match, and a third request on the
    same prefix (reusing the cached blocks) still matches too."""
    model = model_factory("llama")
    rng = random.Random(5)
    prompt = repetitive_prompt(rng, 300, snippet_len=36)
    reqs = [{"prompt": prompt, "max_tokens": 30, "ignore_eos": True, "arrive": a} for a in (0, 40, 80)]
    plain = harness(model, reqs, block_size=8)
    spec = harness(model, reqs, spec=ngram(8), block_size=8)
    assert spec["prefix_hits"] > 0
    for i in range(3):
        assert tokens(spec, i) == tokens(plain, i) == tokens(plain, 0)
    assert spec["spec"]["accepted_tokens"] > 0
    assert spec["blocks_in_use"] == 0


def test_stop_strings_max_tokens_and_logprobs_unchanged(harness, model_factory):
    model = model_factory("gemma3")  # repeats one token: long accepted runs
    rng = random.Random(7)
    prompt = repetitive_prompt(rng, 300)
    base = harness(model, [{"prompt": prompt, "max_tokens": 40, "ignore_eos": True}])
    text = base["requests"][0]["samples"][0]["text"]
    reqs = [{"prompt": prompt, "max_tokens": n, "ignore_eos": True, "logprobs": 2} for n in (1, 2, 7, 13)]
    if len(text) > 12:
        reqs.append({"prompt": prompt, "max_tokens": 40, "ignore_eos": True, "stop": [text[9:12]]})
    reqs.append({"prompt": prompt, "max_tokens": 25, "ignore_eos": True, "min_tokens": 20, "temperature": 0})
    plain = harness(model, reqs)
    spec = harness(model, reqs, spec=ngram(8))
    for i in range(len(reqs)):
        a, b = plain["requests"][i]["samples"][0], spec["requests"][i]["samples"][0]
        assert (b["tokens"], b["text"], b["finish"]) == (a["tokens"], a["text"], a["finish"]), f"request {i}"
        assert b["logprobs"] == pytest.approx(a["logprobs"], abs=1e-6)
    assert spec["spec"]["accepted_tokens"] > 0
    assert spec["blocks_in_use"] == 0


def test_disable_by_batch_size_turns_speculation_off(harness, model_factory):
    model = model_factory("gemma3")
    rng = random.Random(8)
    reqs = [{"prompt": repetitive_prompt(rng, 300), "max_tokens": 20, "ignore_eos": True} for _ in range(4)]
    off = harness(model, reqs, spec=ngram(4, disable_by_batch_size=3))
    assert off["spec"]["drafts"] == 0
    on = harness(model, reqs, spec=ngram(4, disable_by_batch_size=4))
    assert on["spec"]["drafts"] > 0
    assert [tokens(on, i) for i in range(4)] == [tokens(off, i) for i in range(4)]


def test_sampled_requests_and_beams_beside_speculation(harness, model_factory):
    """Seeded sampling (n = 2, penalties, top-k) gives the same tokens with
    and without speculation, and beam search (never speculated) the same
    beams."""
    model = model_factory("llama")
    rng = random.Random(9)
    prompt = repetitive_prompt(rng, 300)
    reqs = [{"prompt": prompt, "max_tokens": 30, "ignore_eos": True, "temperature": 0.5, "seed": 3, "n": 2},
            {"prompt": prompt, "max_tokens": 30, "ignore_eos": True, "temperature": 0.8, "seed": 4, "top_k": 5,
             "repetition_penalty": 1.1, "frequency_penalty": 0.2, "logprobs": 1},
            {"prompt": prompt, "max_tokens": 12, "beam_width": 3, "n": 2, "ignore_eos": True}]
    a = harness(model, reqs, spec=ngram(4, prompt_lookup_min=1))
    plain = harness(model, reqs)
    for i, n in ((0, 2), (1, 1), (2, 2)):
        assert [tokens(a, i, k) for k in range(n)] == [tokens(plain, i, k) for k in range(n)], f"request {i}"
    assert a["requests"][1]["samples"][0]["logprobs"] == pytest.approx(plain["requests"][1]["samples"][0]["logprobs"],
                                                                       abs=1e-6)
    assert a["spec"]["drafts"] > 0
    assert a["blocks_in_use"] == 0


def test_seeded_sampling_is_token_identical_through_the_engine(harness, model_factory):
    """4000 seeded requests of 4 sampled tokens (temperature 0.3), with and
    without speculation, give the same tokens: each row is sampled as without
    drafts, with one draw per emitted token, and a draft is kept when it
    equals the sampled token (the rejection rule for a one-hot draft; its
    distribution is checked in tests/unit/test_speculative.c). Drafts were
    both accepted and rejected."""
    model = model_factory("gemma3")
    rng = random.Random(1)
    snip = [rng.randrange(4, 300) for _ in range(30)]
    prompt = [2] + snip + snip + snip[:14]
    reqs = [{"prompt": prompt, "max_tokens": 4, "ignore_eos": True, "temperature": 0.3, "seed": i,
             "arrive": i // 2} for i in range(4000)]
    plain = harness(model, reqs, max_num_seqs=8)
    spec = harness(model, reqs, spec=ngram(3, prompt_lookup_min=1), max_num_seqs=8)
    st = spec["spec"]
    assert 100 < st["accepted_tokens"] < st["draft_tokens"] - 100, st
    assert [tokens(spec, i) for i in range(len(reqs))] == [tokens(plain, i) for i in range(len(reqs))]
    assert len({tuple(tokens(plain, i)) for i in range(len(reqs))}) > 100, "seeds should give varied samples"


# ---- a draft model ----

@pytest.mark.parametrize("k", [1, 4, 8])
def test_draft_model_greedy_batch_is_token_identical(harness, synthetic, model_factory, k):
    """A draft model of the same family: the target itself (its greedy drafts
    are nearly all accepted) and one with other weights (nearly all
    rejected); either way every request's tokens are the plain ones."""
    arch, model = synthetic
    other = model_factory(arch, seed=7)
    reqs = mixed_requests(300, seed=30 + k, count=12)
    plain = harness(model, reqs, max_num_seqs=16)
    same = harness(model, reqs, spec=draft(k, model, disable_by_batch_size=16), max_num_seqs=16)
    diff = harness(model, reqs, spec=draft(k, other, disable_by_batch_size=16), max_num_seqs=16)
    for i in range(len(reqs)):
        assert tokens(same, i) == tokens(plain, i), f"request {i} differs with the model as its own draft"
        assert tokens(diff, i) == tokens(plain, i), f"request {i} differs with another draft"
    st = same["spec"]
    assert st["draft_tokens"] > 0 and st["accepted_tokens"] >= 0.95 * st["draft_tokens"], st
    assert same["steps"] < plain["steps"]
    assert diff["spec"]["draft_tokens"] > 0
    assert same["blocks_in_use"] == 0 and diff["blocks_in_use"] == 0


def test_draft_model_alone_preempted_and_sampled(harness, synthetic):
    arch, model = synthetic
    req = {"prompt": repetitive_prompt(random.Random(4), 300), "max_tokens": 50, "ignore_eos": True}
    assert tokens(harness(model, [req], spec=draft(4, model)), 0) == tokens(harness(model, [req]), 0)
    reqs, cfg = preemption_scenario(arch)
    plain = harness(model, reqs, **cfg)
    spec = harness(model, reqs, spec=draft(4, model, disable_by_batch_size=16), **cfg)
    assert spec["preemptions"] > 0
    assert [tokens(spec, i) for i in range(len(reqs))] == [tokens(plain, i) for i in range(len(reqs))]
    sampled = [{"prompt": repetitive_prompt(random.Random(6), 300), "max_tokens": 30, "ignore_eos": True,
                "temperature": 0.8, "seed": s, "n": 2} for s in range(4)]
    plain = harness(model, sampled)
    spec = harness(model, sampled, spec=draft(4, model, disable_by_batch_size=8))
    assert spec["spec"]["accepted_tokens"] > 0
    for i in range(len(sampled)):
        assert [tokens(spec, i, k) for k in range(2)] == [tokens(plain, i, k) for k in range(2)]
    assert spec["blocks_in_use"] == 0


def test_draft_model_with_another_vocabulary_is_refused(run_cllm, model_factory):
    model = model_factory("llama")
    other = model_factory("llama", n_vocab=400)
    p = run_cllm("generate", "-m", model, "-p", "hi", "-n", 4, "--speculative-model", other)
    assert p.returncode != 0
    assert "vocabulary" in p.stderr and "400" in p.stderr and "320" in p.stderr, p.stderr
    p = run_cllm("generate", "-m", model, "-p", "hi", "-n", 4, "--speculative-model", "/nonexistent.gguf")
    assert p.returncode != 0 and "draft model" in p.stderr and "nonexistent" in p.stderr, p.stderr


@pytest.mark.parametrize("k", [1, 4, 8])
def test_layer_skip_greedy_batch_is_token_identical(harness, synthetic, k):
    """Self-speculation: the target's first layer, or all of its layers (then
    the drafts are the target's own greedy tokens), as the draft."""
    arch, model = synthetic
    reqs = mixed_requests(300, seed=40 + k, count=10)
    plain = harness(model, reqs, max_num_seqs=16)
    for layers in (1, 0):
        spec = {"method": "layer_skip", "num_speculative_tokens": k, "disable_by_batch_size": 16}
        if layers:
            spec["draft_layers"] = layers
        else:
            spec["draft_layers"] = make_model.default_spec(arch).n_layer
        res = harness(model, reqs, spec=spec, max_num_seqs=16)
        for i in range(len(reqs)):
            assert tokens(res, i) == tokens(plain, i), f"request {i} differs with {layers or 'all'} draft layers"
        assert res["spec"]["draft_tokens"] > 0 and res["blocks_in_use"] == 0
        if not layers:
            st = res["spec"]
            assert st["accepted_tokens"] >= 0.95 * st["draft_tokens"], st


def test_layer_skip_with_too_many_layers_is_refused(run_cllm, model_factory):
    model = model_factory("llama")
    n = make_model.default_spec("llama").n_layer
    p = run_cllm("generate", "-m", model, "-p", "hi", "-n", 4, "--speculative-config",
                 json.dumps({"method": "layer_skip", "draft_layers": n + 1}))
    assert p.returncode != 0 and f"more than the model's {n} layers" in p.stderr, p.stderr


def test_real_model_as_its_own_draft(run_cllm, real_model_path):
    args = ["generate", "-m", real_model_path, "-p", REWRITE_PROMPT, "-n", 32, "--temperature", 0, "-t", 2]
    plain = run_cllm(*args, timeout=300)
    spec = run_cllm(*args, "--speculative-model", real_model_path, "--num-speculative-tokens", 4, timeout=300)
    assert plain.returncode == 0 and spec.returncode == 0, plain.stderr + spec.stderr
    assert spec.stdout == plain.stdout
    line = next(l for l in spec.stderr.splitlines() if l.startswith("speculative decoding:"))
    assert "acceptance rate" in line


# ---- the real model ----

CODE = '''def moving_average(values, window):
    if window <= 0:
        raise ValueError("window must be positive")
    out = []
    total = 0.0
    for i, v in enumerate(values):
        total += v
        if i >= window:
            total -= values[i - window]
        if i >= window - 1:
            out.append(total / window)
    return out
'''

REWRITE_PROMPT = ("Rewrite this Python function, renaming `values` to `xs` and changing nothing else.\n\n"
                  f"```python\n{CODE}```\n\nRewritten:\n```python\n")


@pytest.fixture(scope="module")
def real_prompt_ids(run_cllm, real_model_path):
    p = run_cllm("tokenize", "-m", real_model_path, "--json", input=REWRITE_PROMPT)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


@pytest.mark.parametrize("k", [1, 4, 8])
def test_real_model_greedy_identical(harness, real_model_path, real_prompt_ids, k):
    other = [2, 818, 5279, 529, 7001, 563]  # short plain prompts beside it
    reqs = [{"prompt": real_prompt_ids, "max_tokens": 48}, {"prompt": other, "max_tokens": 24, "arrive": 1},
            {"prompt": real_prompt_ids[:-9], "max_tokens": 30, "arrive": 3},
            {"prompt": other[:4], "max_tokens": 30, "arrive": 5, "logprobs": 1}]
    plain = harness(real_model_path, reqs)
    spec = harness(real_model_path, reqs, spec=ngram(k))
    for i in range(len(reqs)):
        assert tokens(spec, i) == tokens(plain, i), f"request {i}"
    assert spec["spec"]["accepted_tokens"] > 0, "rewriting a quoted function should accept drafts"
    assert spec["blocks_in_use"] == 0


# ---- server, CLI ----

def metric_values(text, name):
    out = {}
    for line in text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            key, _, value = line.rpartition(" ")
            out[key] = float(value)
    return out


def test_server_metrics_count_speculation(cllm_bin, real_model_path):
    with CllmServer(cllm_bin, real_model_path, "--max-model-len", "1024", "--served-model-name", "m",
                    "--speculative-config",
                    '{"method": "ngram", "num_speculative_tokens": 4}') as srv:
        body = {"model": "m", "prompt": REWRITE_PROMPT, "max_tokens": 40, "temperature": 0}
        r = requests.post(srv.url("/v1/completions"), json=body, timeout=300)
        assert r.status_code == 200, r.text
        m = requests.get(srv.url("/metrics"), timeout=30).text
    drafts = metric_values(m, "vllm:spec_decode_num_drafts_total")
    draft_tokens = metric_values(m, "vllm:spec_decode_num_draft_tokens_total")
    accepted = metric_values(m, "vllm:spec_decode_num_accepted_tokens_total")
    per_pos = metric_values(m, "vllm:spec_decode_num_accepted_tokens_per_pos")
    assert sum(drafts.values()) > 0 and sum(draft_tokens.values()) >= sum(drafts.values())
    assert 0 < sum(accepted.values()) <= sum(draft_tokens.values())
    assert sum(per_pos.values()) == sum(accepted.values())
    assert any('position="0"' in k for k in per_pos)


def completion_text(srv, stream, **extra):
    body = dict({"model": "m", "prompt": REWRITE_PROMPT, "max_tokens": 48, "temperature": 0, "stream": stream},
                **extra)
    r = requests.post(srv.url("/v1/completions"), json=body, timeout=300, stream=stream)
    assert r.status_code == 200, r.text
    if not stream:
        return r.json()["choices"][0]["text"]
    text = ""
    for line in r.iter_lines():
        if line.startswith(b"data: ") and line != b"data: [DONE]":
            for choice in json.loads(line[6:])["choices"]:
                text += choice.get("text") or ""
    return text


def test_server_streams_the_same_text_with_speculation(cllm_bin, real_model_path):
    with CllmServer(cllm_bin, real_model_path, "--max-model-len", "1024", "--served-model-name", "m") as srv:
        want = completion_text(srv, False)
        want_stop = completion_text(srv, False, stop=["window"])
    with CllmServer(cllm_bin, real_model_path, "--max-model-len", "1024", "--served-model-name", "m",
                    "--num-speculative-tokens", "8") as srv:
        assert completion_text(srv, True) == want
        assert completion_text(srv, False) == want
        assert completion_text(srv, True, stop=["window"]) == want_stop
        m = requests.get(srv.url("/metrics"), timeout=30).text
    assert sum(metric_values(m, "vllm:spec_decode_num_accepted_tokens_total").values()) > 0
    assert want_stop and len(want_stop) < len(want)


def test_bench_serve_reports_acceptance(cllm_bin, run_cllm, real_model_path, tmp_path):
    dataset = tmp_path / "rewrite.jsonl"
    dataset.write_text(json.dumps({"prompt": REWRITE_PROMPT, "max_tokens": 32}) + "\n")
    with CllmServer(cllm_bin, real_model_path, "--max-model-len", "1024", "--num-speculative-tokens", "4") as srv:
        out = tmp_path / "spec.json"
        p = run_cllm("bench", "serve", "--base-url", srv.url(""), "--no-progress", "--dataset-name", "jsonl",
                     "--dataset-path", dataset, "--num-prompts", "2", "--temperature", "0", "--save-result", out,
                     timeout=300)
        assert p.returncode == 0, p.stderr
    res = json.loads(out.read_text())
    assert 0 < res["spec_decode_acceptance_rate"] <= 1
    assert res["spec_decode_mean_accepted_length"] > 1
    assert "Spec acceptance rate (%):" in p.stdout and "Spec mean accepted length:" in p.stdout
    with CllmServer(cllm_bin, real_model_path, "--max-model-len", "1024") as srv:
        out = tmp_path / "plain.json"
        p = run_cllm("bench", "serve", "--base-url", srv.url(""), "--no-progress", "--dataset-name", "jsonl",
                     "--dataset-path", dataset, "--num-prompts", "1", "--save-result", out, timeout=300)
        assert p.returncode == 0, p.stderr
    assert "spec_decode_acceptance_rate" not in json.loads(out.read_text())
    assert "Spec acceptance" not in p.stdout


def test_generate_short_flags_match_plain(run_cllm, real_model_path):
    args = ["generate", "-m", real_model_path, "-p", REWRITE_PROMPT, "-n", 32, "--temperature", 0, "-t", 2]
    plain = run_cllm(*args, timeout=300)
    spec = run_cllm(*args, "--num-speculative-tokens", 4, "--prompt-lookup-min", 2, "--prompt-lookup-max", 4,
                    timeout=300)
    assert plain.returncode == 0 and spec.returncode == 0, plain.stderr + spec.stderr
    assert spec.stdout == plain.stdout
    assert "acceptance" in spec.stderr


def test_chat_with_speculation_replies_the_same(run_cllm, model_factory):
    model = model_factory("gemma3")
    turns = "repeat after me: one two three one two three\nagain please\n"
    plain = run_cllm("chat", "-m", model, "--temperature", 0, "-n", 24, input=turns)
    spec = run_cllm("chat", "-m", model, "--temperature", 0, "-n", 24, "--num-speculative-tokens", 4, input=turns)
    assert plain.returncode == 0 and spec.returncode == 0, plain.stderr + spec.stderr
    assert spec.stdout == plain.stdout


BAD = [
    (["--speculative-config", '{"method": "eagle"}'], "unknown method"),
    (["--speculative-config", '{"method": "medusa"}'], "cllm medusa train"),
    (["--speculative-config", '{"method": "ngram", "num_speculative_tokens": 17}'], "1..16"),
    (["--speculative-config", '{"method": "ngram", "num_speculative_tokens": 0}'], "1..16"),
    (["--num-speculative-tokens", "0"], "--num-speculative-tokens"),
    (["--num-speculative-tokens", "40"], "--num-speculative-tokens"),
    (["--speculative-config", '{"method": "ngram",'], "malformed JSON"),
    (["--speculative-config", '{"method": "draft_model", "num_speculative_tokens": 4}'], 'needs "model"'),
    (["--speculative-model", "x.gguf", "--speculative-config", '{"method": "ngram"}'], "not \"ngram\""),
    (["--speculative-config", '{"method": "ngram", "model": "x.gguf"}'], "not \"ngram\""),
    (["--speculative-config", '{"method": "ngram", "draft_layers": 2}'], "for method \"layer_skip\""),
    (["--speculative-config", '{"method": "ngram", "prompt_lookup_min": 5, "prompt_lookup_max": 2}'],
     "prompt_lookup_min"),
    (["--speculative-config", '{"method": "ngram", "colour": 1}'], "unknown key"),
]


@pytest.mark.parametrize("command", [["serve"], ["generate", "-p", "hi"], ["bench", "offline"], ["chat"]])
@pytest.mark.parametrize("flags,message", BAD)
def test_bad_speculative_flags_fail_at_start(run_cllm, model_factory, command, flags, message):
    model = model_factory("llama")
    args = [*command[:1], *command[1:]]
    if command[0] == "bench":
        args = ["bench", "offline", "--model", model]
    elif command[0] == "generate":
        args = ["generate", "-m", model, "-p", "hi"]
    elif command[0] == "chat":
        args = ["chat", "-m", model]
    else:
        args = ["serve", model, "--port", "0"]
    p = run_cllm(*args, *flags, timeout=60)
    assert p.returncode != 0
    assert message in p.stderr, p.stderr
    assert "listening" not in p.stderr
