"""The engine (continuous batching, paged KV, prefix caching, chunked prefill,
preemption, n > 1) gives every request exactly the tokens it gets alone, and
holds no KV block once every request has finished or been aborted.

Scenarios run through build/engine_harness, which steps the engine with
requests arriving (and optionally aborted) at chosen steps."""

from __future__ import annotations

import json
import random
import subprocess

import pytest

from beam_ref import reference_beam_search


@pytest.fixture(scope="module")
def harness(build_dir):
    path = build_dir / "engine_harness"
    if not path.exists():
        pytest.fail(f"{path} is missing: build the project first", pytrace=False)

    def run(model, requests, **config):
        config.setdefault("threads", 2)
        scenario = {"config": config, "requests": requests}
        p = subprocess.run([str(path), str(model)], input=json.dumps(scenario), capture_output=True,
                           text=True, timeout=600)
        assert p.returncode == 0, p.stderr
        return json.loads(p.stdout)

    return run


def tokens_of(result, i, sample=0):
    return result["requests"][i]["samples"][sample]["tokens"]


def varied_requests(n_vocab, count, seed, max_prompt=90, max_new=24, spread=12):
    rng = random.Random(seed)
    reqs = []
    for i in range(count):
        n = rng.randint(1, max_prompt)
        reqs.append({"prompt": [2] + [rng.randrange(4, n_vocab) for _ in range(n)],
                     "max_tokens": rng.randint(1, max_new), "ignore_eos": True,
                     "arrive": rng.randrange(0, spread)})
    return reqs


def alone(harness, model, reqs, **config):
    """Each request by itself, in its own engine."""
    out = []
    for r in reqs:
        res = harness(model, [dict(r, arrive=0)], **config)
        out.append(tokens_of(res, 0))
    return out


@pytest.fixture(scope="module", params=["llama", "gemma3"])
def synthetic(request, model_factory):
    # gemma3: sliding window 16 on 6 of 7 layers, so prompts exceed the window.
    return request.param, model_factory(request.param)


def test_batch_of_32_matches_alone(harness, synthetic):
    arch, model = synthetic
    reqs = varied_requests(300, 32, seed=1)
    want = alone(harness, model, reqs)
    res = harness(model, reqs, max_num_seqs=16)
    for i in range(len(reqs)):
        assert tokens_of(res, i) == want[i], f"request {i} differs in a batch"
        assert len(want[i]) == reqs[i]["max_tokens"]
    assert res["blocks_in_use"] == 0


def test_chunked_prefill_odd_chunk(harness, synthetic):
    arch, model = synthetic
    reqs = varied_requests(300, 8, seed=2, max_prompt=60)
    want = alone(harness, model, reqs)
    res = harness(model, reqs, max_num_batched_tokens=7, max_num_seqs=7)
    assert [tokens_of(res, i) for i in range(len(reqs))] == want
    assert res["blocks_in_use"] == 0


def test_preemption_with_small_pool(harness, synthetic):
    arch, model = synthetic
    reqs = varied_requests(300, 16, seed=3, max_prompt=80, max_new=40, spread=2)
    want = alone(harness, model, reqs)
    # Enough blocks for one request of max_model_len, far too few for sixteen
    # (gemma3's 7 layers make 7 groups of one layer, each with its own table).
    blocks = {"llama": 40, "gemma3": 130}[arch]
    res = harness(model, reqs, kv_cache_blocks=blocks, max_model_len=128, block_size=8, max_num_seqs=16)
    assert res["preemptions"] > 0
    assert [tokens_of(res, i) for i in range(len(reqs))] == want
    assert res["blocks_in_use"] == 0


def test_prefix_cache_hit_gives_same_tokens(harness, synthetic):
    arch, model = synthetic
    rng = random.Random(4)
    prefix = [2] + [rng.randrange(4, 300) for _ in range(70)]
    first = {"prompt": prefix + [11, 12], "max_tokens": 10, "ignore_eos": True, "arrive": 0}
    second = {"prompt": prefix + [13], "max_tokens": 10, "ignore_eos": True, "arrive": 30}
    want = alone(harness, model, [second])[0]
    res = harness(model, [first, second])
    assert res["requests"][1]["cached_tokens"] >= 64
    assert tokens_of(res, 1) == want
    cold = harness(model, [first, second], prefix_caching=False)
    assert cold["requests"][1]["cached_tokens"] == 0
    assert tokens_of(cold, 1) == want


def test_aborts_return_every_block(harness, synthetic):
    arch, model = synthetic
    reqs = varied_requests(300, 12, seed=5, max_new=60, spread=4)
    for i, r in enumerate(reqs):
        if i % 3 == 0:
            r["abort"] = r["arrive"] + 1 + i % 5
    res = harness(model, reqs)
    finishes = [res["requests"][i]["samples"][0]["finish"] for i in range(len(reqs))]
    assert "abort" in finishes
    assert res["blocks_in_use"] == 0


def test_parallel_samples_share_prompt(harness, model_factory):
    model = model_factory("llama")
    prompt = [2] + list(range(40, 90))
    greedy = harness(model, [{"prompt": prompt, "max_tokens": 12, "n": 3, "ignore_eos": True}])
    samples = [tokens_of(greedy, 0, k) for k in range(3)]
    assert samples[0] == samples[1] == samples[2] == alone(
        harness, model, [{"prompt": prompt, "max_tokens": 12, "ignore_eos": True}])[0]
    req = {"prompt": prompt, "max_tokens": 12, "n": 4, "ignore_eos": True, "temperature": 1.0, "seed": 7}
    a = harness(model, [req])
    b = harness(model, [req, dict(req, arrive=2, seed=8)])
    got = [tokens_of(a, 0, k) for k in range(4)]
    assert got == [tokens_of(b, 0, k) for k in range(4)], "seeded samples depend on the batch"
    assert len({tuple(t) for t in got}) > 1, "samples of one request should differ"
    assert a["blocks_in_use"] == 0 and b["blocks_in_use"] == 0


def test_real_model_batch_matches_alone(harness, real_model_path):
    rng = random.Random(6)
    reqs = varied_requests(20000, 6, seed=6, max_prompt=40, max_new=8, spread=3)
    want = alone(harness, real_model_path, reqs)
    res = harness(real_model_path, reqs)
    assert [tokens_of(res, i) for i in range(len(reqs))] == want
    assert res["blocks_in_use"] == 0


def test_request_that_can_never_fit_is_rejected(harness, model_factory):
    model = model_factory("llama")
    res = harness(model, [{"prompt": [2] * 100, "max_tokens": 100}], max_model_len=150)
    sample = res["requests"][0]["samples"][0]
    assert sample["finish"] == "rejected"
    assert "150" in sample["error"] and "200" in sample["error"]


def test_public_api_example_matches_generate(build_dir, run_cllm, real_model_path):
    """tests/tools/api_example.c uses only include/cllm.h."""
    prompt = "The capital of France is"
    api = subprocess.run([str(build_dir / "api_example"), str(real_model_path), prompt, "12"],
                         capture_output=True, text=True, timeout=120)
    assert api.returncode == 0, api.stderr
    cli = run_cllm("generate", "-m", real_model_path, "-p", prompt, "-n", 12, "--temperature", 0)
    assert cli.returncode == 0, cli.stderr
    assert api.stdout == cli.stdout
    assert "Paris" in cli.stdout or "capital" in cli.stdout


@pytest.mark.parametrize("width,n,penalty", [(2, 2, 1.0), (4, 3, 0.6)])
def test_beam_search_matches_reference(harness, model_factory, width, n, penalty):
    model = model_factory("llama")
    prompt = [2, 17, 45, 99, 120, 7, 250, 33, 61, 88, 140, 201, 5, 77, 160, 19, 230]
    want = reference_beam_search(model, prompt, width, n, max_tokens=6, length_penalty=penalty)
    req = {"prompt": prompt, "max_tokens": 6, "beam_width": width, "n": n, "length_penalty": penalty}
    res = harness(model, [req], kv_f32=1, block_size=8)
    got = [tokens_of(res, 0, k) for k in range(n)]
    assert got == want
    # Beams share blocks while they run and give all of them back.
    assert res["blocks_in_use"] == 0
    # The same search inside a busy batch gives the same hypotheses.
    others = varied_requests(300, 6, seed=9, spread=3)
    res2 = harness(model, [dict(req, arrive=1)] + others, kv_f32=1, block_size=8)
    assert [tokens_of(res2, 0, k) for k in range(n)] == want
