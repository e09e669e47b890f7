"""KV eviction for long contexts (--kv-eviction none|streaming|h2o|truncate,
--kv-budget N, --kv-sink-tokens S; request fields kv_eviction, kv_budget,
kv_sink_tokens; src/kv/kv_evict.h).

- A sequence generates 4x its budget, past the model's trained context, in a
  constant number of blocks, and reports what it evicted.
- With the budget larger than the sequence the output is token for token the
  same as without eviction, in every family and KV dtype.
- StreamingLLM's attention with positions re-indexed inside the cache matches
  the numpy reference (tests/ref/ref_streaming.py), which keeps keys before
  rope and rotates them at their current slot.
- n > 1 samples, the prefix cache and preemption work beside eviction, and
  every block comes back.
- Bad values are refused at start (with the accepted list) and per request
  (a 400 naming the field, the server stays up); usage and /metrics count
  evictions."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
import requests

import ref_streaming
from make_model import ARCHES
from server_util import CllmServer
from test_engine import harness, tokens_of  # noqa: F401 (harness: a fixture)

POLICIES = ["streaming", "h2o", "truncate"]


def prompt_of(n, seed, n_vocab=300):
    rng = random.Random(seed)
    return [2] + [rng.randrange(4, n_vocab) for _ in range(n - 1)]


def evicting(req, policy, budget, sink=4):
    return dict(req, kv_eviction=policy, kv_budget=budget, kv_sink_tokens=sink)


def n_groups_of(arch):
    return 7 if arch == "gemma3" else 1  # the synthetic gemma3: 1 full + 6 sliding groups of one layer


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("arch,kv_dtype", [("llama", "f16"), ("gemma3", "f16"), ("llama", "int8"),
                                           ("gemma3", "fp8")])
def test_generates_four_times_its_budget_in_constant_blocks(harness, model_factory, arch, kv_dtype, policy):
    # A trained context of 64 tokens; the budget is 40, the output 160 tokens.
    model = model_factory(arch, n_ctx=64)
    budget, bs = 40, 8
    req = evicting({"prompt": prompt_of(12, 1), "max_tokens": 4 * budget, "ignore_eos": True}, policy, budget)
    res = harness(model, [req], block_size=bs, max_model_len=64, kv_dtype=kv_dtype)
    sample = res["requests"][0]["samples"][0]
    assert sample["finish"] == "length" and len(sample["tokens"]) == 4 * budget
    per_seq = n_groups_of(arch) * math.ceil(budget / bs)
    steps = res["blocks_per_step"][:-1]  # the last step finishes and frees
    assert max(steps) <= per_seq, f"{max(steps)} blocks in use, budget allows {per_seq}"
    # Flat once full: the second half of the run holds as many blocks as the first's peak.
    half = steps[len(steps) // 2:]
    assert max(half) - min(half) <= n_groups_of(arch) * 2
    n_total = 12 + 4 * budget - 1  # the last token is never computed
    assert sample["evicted"] >= n_total - budget
    assert res["kv_evicted_tokens"] == sample["evicted"] and res["kv_evictions"] >= 4
    assert res["blocks_in_use"] == 0


@pytest.mark.parametrize("arch", ARCHES)
@pytest.mark.parametrize("kv_dtype", ["f16", "int8"])
def test_budget_larger_than_the_sequence_changes_nothing(harness, model_factory, arch, kv_dtype):
    model = model_factory(arch)
    reqs = [{"prompt": prompt_of(30 + 9 * i, 10 + i), "max_tokens": 20, "ignore_eos": True, "arrive": i}
            for i in range(3)]
    want = harness(model, reqs, kv_dtype=kv_dtype, block_size=8)
    for policy in POLICIES:
        got = harness(model, [evicting(r, policy, 80) for r in reqs], kv_dtype=kv_dtype, block_size=8)
        for i in range(len(reqs)):
            assert tokens_of(got, i) == tokens_of(want, i), f"{arch} {kv_dtype} {policy}: request {i}"
            assert got["requests"][i]["samples"][0]["evicted"] == 0
        assert got["kv_evictions"] == 0 and got["blocks_in_use"] == 0


@pytest.mark.parametrize("policy", ["streaming", "truncate"])
@pytest.mark.parametrize("arch,options", [("llama", {}), ("qwen2", {}), ("llama", {"rope_freqs": True}),
                                          ("llama", {"rope_scale": 2.0}),
                                          ("gemma3", {"sliding_window": 16, "n_layer": 7})],
                         ids=["llama", "qwen2", "llama-rope-freqs", "llama-linear-rope", "gemma3-swa16"])
def test_streaming_matches_the_numpy_reference(harness, model_factory, arch, options, policy):
    """Logprobs of every generated token against the reference fed the same
    tokens: re-indexed positions, re-rotated keys, sinks and window."""
    model = model_factory(arch, **options)
    budget, sink = 36, 4
    prompt = prompt_of(50, 3)
    req = evicting({"prompt": prompt, "max_tokens": 60, "ignore_eos": True, "logprobs": 0}, policy, budget, sink)
    res = harness(model, [req], kv_f32=1, block_size=8)
    sample = res["requests"][0]["samples"][0]
    assert sample["evicted"] > 60  # the prompt alone passes the budget
    want = ref_streaming.engine_logprobs(str(model), prompt, sample["tokens"], budget, sink, policy)
    got = np.array(sample["logprobs"])
    assert np.max(np.abs(got - want)) < 2e-3, np.max(np.abs(got - want))
    if policy == "streaming":
        # Without re-indexing (each token at its place in the text) the gap
        # between the sinks and the window shows: rope is relative, so only a
        # gap can (truncation keeps one run of tokens, the same either way).
        wrong = ref_streaming.engine_logprobs(str(model), prompt, sample["tokens"], budget, sink, policy,
                                              reindex=False)
        assert np.max(np.abs(got - wrong)) > 1e-2


@pytest.mark.parametrize("policy", POLICIES)
def test_samples_prefix_cache_and_preemption_beside_eviction(harness, model_factory, policy):
    model = model_factory("gemma3")
    prefix = prompt_of(70, 5)
    one = evicting({"prompt": prefix + [11], "max_tokens": 50, "ignore_eos": True}, policy, 48)
    alone = tokens_of(harness(model, [one], block_size=8), 0)
    # n = 3 greedy samples share the prompt's (already compacted) blocks.
    shared = harness(model, [dict(one, n=3)], block_size=8)
    assert [tokens_of(shared, 0, k) for k in range(3)] == [alone] * 3
    # A first request caches the prefix; the second starts from it (as much
    # as its budget: what it would hold alone) and copies the shared blocks
    # before compacting them, so the first's stay as they were.
    first = {"prompt": prefix + [12], "max_tokens": 5, "ignore_eos": True, "arrive": 0}
    cached = harness(model, [first, dict(one, arrive=20), dict(first, arrive=40)], block_size=8)
    assert cached["requests"][1]["cached_tokens"] == (0 if policy == "h2o" else 48)
    assert cached["requests"][2]["cached_tokens"] == 64
    assert tokens_of(cached, 2) == tokens_of(cached, 0)
    assert tokens_of(cached, 1) == alone
    assert cached["blocks_in_use"] == 0 and shared["blocks_in_use"] == 0
    # Too few blocks for all of them: sequences admitted with a 16-token chunk grow to their budget and
    # preempt one another, and are recomputed. (A compaction needs one spare block, not one per block it
    # copies, so whole-budget admissions alone would never preempt.)
    reqs = [evicting({"prompt": prompt_of(40, 30 + i), "max_tokens": 60, "ignore_eos": True}, policy, 32)
            for i in range(6)]
    res = harness(model, reqs, block_size=8, kv_cache_blocks=70, max_num_seqs=6, max_model_len=64,
                  max_num_batched_tokens=16)
    assert res["preemptions"] > 0
    for i in range(6):
        assert len(tokens_of(res, i)) == 60
        alone_i = tokens_of(harness(model, [reqs[i]], block_size=8, max_model_len=64), 0)
        assert tokens_of(res, i) == alone_i, f"request {i}"
    assert res["blocks_in_use"] == 0


def test_batched_as_alone(harness, model_factory):
    model = model_factory("llama")
    reqs = [evicting({"prompt": prompt_of(20 + 13 * i, 40 + i), "max_tokens": 50, "ignore_eos": True,
                      "arrive": i}, POLICIES[i % 3], 32) for i in range(6)]
    batched = harness(model, reqs, block_size=8)
    for i, r in enumerate(reqs):
        assert tokens_of(batched, i) == tokens_of(harness(model, [dict(r, arrive=0)], block_size=8), 0)


@pytest.mark.parametrize("args,needles", [
    (["--kv-eviction", "lru"], ["--kv-eviction", "'lru'", "none, streaming, h2o, truncate"]),
    (["--kv-eviction", "streaming"], ["needs a budget", "--kv-budget"]),
    (["--kv-eviction", "h2o", "--kv-budget", "10"], ["kv_budget 10 is too small", "4 sink tokens"]),
    (["--kv-eviction", "streaming", "--kv-budget", "9000"], ["--kv-budget 9000", "maximum context length"]),
    (["--kv-budget", "0"], ["--kv-budget"]),
    (["--kv-sink-tokens", "-1"], ["--kv-sink-tokens"]),
])
@pytest.mark.parametrize("command", ["serve", "generate"])
def test_bad_values_are_refused_at_start(run_cllm, model_factory, command, args, needles):
    model = model_factory("llama")
    extra = ["--prompt", "hi"] if command == "generate" else ["--port", "0"]
    p = run_cllm(command, "-m", str(model), *extra, "--max-model-len", "256", *args, timeout=60)
    assert p.returncode != 0
    for n in needles:
        assert n in p.stderr, (n, p.stderr)


@pytest.fixture(scope="module")
def server(cllm_bin, model_factory):
    model = model_factory("llama", n_ctx=128)
    with CllmServer(cllm_bin, model, "--max-model-len", "128", "--block-size", "8") as s:
        yield s


def test_request_fields_usage_and_metrics(server):
    before = server.metrics()
    body = {"prompt": "hello " * 10, "max_tokens": 300, "temperature": 0, "ignore_eos": True,
            "kv_eviction": "streaming", "kv_budget": 48, "kv_sink_tokens": 2}
    r = server.post("/v1/completions", body)
    assert r.status_code == 200, r.text
    usage = r.json()["usage"]
    # 300 tokens: past the 128-token context, in a 48-token cache.
    assert usage["completion_tokens"] == 300
    assert usage["kv_evicted_tokens"] >= usage["prompt_tokens"] + 300 - 1 - 48
    after = server.metrics()
    assert after["cllm:kv_evicted_tokens_total"] - before["cllm:kv_evicted_tokens_total"] == \
        usage["kv_evicted_tokens"]
    assert after["cllm:kv_evictions_total"] > before["cllm:kv_evictions_total"]
    # Without eviction the field is absent and the context limit stands.
    plain = server.post("/v1/completions", {"prompt": "hello", "max_tokens": 5})
    assert plain.status_code == 200 and "kv_evicted_tokens" not in plain.json()["usage"]
    assert server.post("/v1/completions", {"prompt": "hello", "max_tokens": 300}).status_code == 400


@pytest.mark.parametrize("fields,param,needle", [
    ({"kv_eviction": "fifo"}, "kv_eviction", "none, streaming, h2o, truncate"),
    ({"kv_eviction": 3}, "kv_eviction", "must be a string"),
    ({"kv_eviction": "h2o"}, "kv_budget", "needs a budget"),
    ({"kv_eviction": "streaming", "kv_budget": 6}, "kv_budget", "too small"),
    ({"kv_eviction": "streaming", "kv_budget": 500}, "kv_budget", "maximum context length of 128"),
    ({"kv_budget": 0}, "kv_budget", "must be in [1,"),
    ({"kv_sink_tokens": -2}, "kv_sink_tokens", "must be in [0,"),
    ({"kv_eviction": "streaming", "kv_budget": 40, "use_beam_search": True, "n": 2}, "kv_eviction", "beam"),
])
def test_bad_request_fields_get_400(server, fields, param, needle):
    r = server.post("/v1/completions", {"prompt": "hello", "max_tokens": 5, **fields})
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["param"] == param and needle in err["message"], err
    assert server.get("/health").status_code == 200
    assert server.metrics()["cllm:kv_cache_blocks_used"] == 0


def test_openai_client_passes_the_fields(server):
    import openai
    client = openai.OpenAI(base_url=server.base_url + "/v1", api_key="x")
    out = client.completions.create(model=client.models.list().data[0].id, prompt="a b c", max_tokens=200,
                                    temperature=0, extra_body={"kv_eviction": "h2o", "kv_budget": 32,
                                                               "ignore_eos": True})
    assert out.usage.completion_tokens == 200
    assert out.usage.model_extra["kv_evicted_tokens"] > 0
    with pytest.raises(openai.BadRequestError):
        client.completions.create(model=client.models.list().data[0].id, prompt="a", max_tokens=2,
                                  extra_body={"kv_eviction": "nope"})
    requests.get(server.url("/health"), timeout=10).raise_for_status()


def test_long_text_ships_in_a_debian_package(tmp_path):
    import long_text

    assert long_text.available(), "the `bible` program is missing (scripts/setup.sh installs bible-kjv bible-kjv-text)"
    text = long_text.long_text()
    assert text.startswith("Genesis 1\n\nIn the beginning God created the heaven and the earth.")
    assert len(text.split()) > 38000 and "Genesis 50" in text
    assert not any(ch.isdigit() for ch in text.split("Genesis 2\n")[0].split("\n\n", 1)[1])  # no verse numbers


def test_sinks_keep_the_real_model_close_to_the_full_cache(run_cllm, real_model_path, tmp_path):
    """Genesis (Debian's KJV), 700 tokens as one sequence with a 256-token
    cache: StreamingLLM stays near the full cache, plain truncation of the
    oldest tokens (no sinks) does not (measured past the budget: full 1.93,
    streaming 2.03, h2o 2.22, truncate 5.16)."""
    import json

    import long_text

    assert long_text.available(), "the `bible` program is missing (scripts/setup.sh installs bible-kjv bible-kjv-text)"
    path = tmp_path / "genesis.txt"
    path.write_text(long_text.long_text())
    ppl = {}
    for policy in ["none", "streaming", "h2o", "truncate"]:
        p = run_cllm("perplexity", str(real_model_path), "-f", str(path), "--tokens", "700", "--kv-eviction", policy,
                     "--kv-budget", "256", "--json", timeout=600)
        assert p.returncode == 0, p.stderr
        doc = json.loads(p.stdout.strip().splitlines()[-1])
        assert doc["scored_past_budget"] == 700 - 256
        assert (doc["evicted"] > 0) == (policy != "none")
        ppl[policy] = doc["ppl_past_budget"]
    assert ppl["streaming"] < ppl["none"] * 1.15, ppl
    assert ppl["h2o"] < ppl["none"] * 1.3, ppl
    assert ppl["truncate"] > ppl["streaming"] * 1.5, ppl
