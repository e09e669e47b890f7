"""Medusa heads: `cllm medusa train` makes them (Hydra's chained kind by
default, Medusa's independent one with --kind medusa, and an exit adapter for
layer_skip's draft with --kind exit), and speculative
decoding with them ("method": "medusa") is lossless: greedy output is
token-identical to plain decoding on synthetic models of three families, alone, in batches
where every sequence speculates, under preemption, with prefix-cache hits
and seeded sampling, and no KV block is left held. Bad heads files and configs fail at start with
a message (the real model's checks: test_medusa_real.py).

The engine scenarios run through build/engine_harness (test_speculative.py's
harness); the CLI and the server are started as the user would."""

from __future__ import annotations

import json
import random

import pytest

from test_speculative import harness, mixed_requests, preemption_scenario, repetitive_prompt, tokens  # noqa: F401

FAMILIES = ["llama", "qwen2", "gemma3"]
WORDS = ("the cat sat on a mat and then it ran to the old red barn where a dog slept in the warm sun while "
         "birds sang songs of rain and wind over green hills near a quiet river").split()


def data_file(tmp_path, n=24, seed=0):
    rng = random.Random(seed)
    path = tmp_path / "prompts.txt"
    path.write_text("\n".join(" ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 12))) for _ in range(n)) + "\n")
    return path


def train(run_cllm, model, data, out, *extra, timeout=600):
    p = run_cllm("medusa", "train", model, "--data", data, "--out", out, "--threads", 2, *extra, timeout=timeout)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout.strip().splitlines()[-1])


# Hydra's chained heads (the default kind) on each family, and Medusa's own
# independent heads (--kind medusa) on one.
KINDS = [(arch, "hydra") for arch in FAMILIES] + [("llama", "medusa")]


@pytest.fixture(scope="module", params=KINDS, ids=lambda p: "-".join(p))
def trained(request, model_factory, run_cllm, tmp_path_factory):
    arch, kind = request.param
    model = model_factory(arch)
    tmp = tmp_path_factory.mktemp(f"medusa-{arch}-{kind}")
    heads = tmp / f"{arch}-{kind}.gguf"
    summary = train(run_cllm, model, data_file(tmp), heads, "--kind", kind, "--gen-tokens", 40, "--epochs", 4,
                    "--lr", "3e-3")
    assert summary["kind"] == kind, summary
    return arch, model, heads, summary


def medusa(heads, k, **extra):
    return dict({"method": "medusa", "model": str(heads), "num_speculative_tokens": k}, **extra)


def drafter(method, model, heads, k):
    """K drafts a step from the heads, a one-layer layer_skip over their draft
    vocabulary, or the model as its own draft (sure of most drafts, and
    right), speculating in batches of up to 16."""
    if method == "medusa":
        return medusa(heads, k, disable_by_batch_size=16)
    if method == "layer_skip":
        return {"method": "layer_skip", "draft_layers": 1, "draft_vocab": str(heads), "num_speculative_tokens": k,
                "disable_by_batch_size": 16}
    return {"method": "draft_model", "model": str(model), "num_speculative_tokens": k, "disable_by_batch_size": 16}


def test_training_reports_each_heads_accuracy(trained):
    arch, model, heads, s = trained
    assert s["heads"] == 4 and len(s["top1"]) == 4 and len(s["top5"]) == 4
    assert s["prompts"] == 24 and s["generated_tokens"] > 0
    assert 8 <= s["draft_vocab"] <= 320 and s["draft_vocab"] % 8 == 0
    assert s["train_positions"] > 0 and s["holdout_positions"] > 0
    for t1, t5 in zip(s["top1"], s["top5"]):
        assert 0 <= t1 <= t5 <= 1
    n_in = 128 if s["kind"] == "hydra" else 64  # chained blocks read [h; e(token)]
    assert heads.stat().st_size > 4 * 64 * n_in * 2  # four F16 blocks at least


# A draft tree (speculative_token_tree): the heads' top candidates at each
# depth, verified in one pass with a tree mask; a branch off the first
# candidate (1, 0) and one off the second (0, 1) make accepted paths that are
# not the chain's, whose KV rows move into place.
TREE = "[(0,), (1,), (2,), (0, 0), (1, 0), (0, 1), (0, 0, 0), (1, 0, 0)]"


# (the first 16 tokens of the heads' draft vocabulary only: "draft_vocab_size")
@pytest.mark.parametrize("k,tree,vocab", [(1, None, 0), (4, None, 0), (4, None, 16), (8, TREE, 0), (6, "auto", 0)])
def test_greedy_batch_is_token_identical(harness, trained, k, tree, vocab):  # noqa: F811
    arch, model, heads, _ = trained
    extra = {"speculative_token_tree": tree} if tree else {}
    if vocab:
        extra["draft_vocab_size"] = vocab
    reqs = mixed_requests(300, seed=50 + k, count=12)
    plain = harness(model, reqs, max_num_seqs=16)
    spec = harness(model, reqs, spec=medusa(heads, k, disable_by_batch_size=16, **extra), max_num_seqs=16)
    for i in range(len(reqs)):
        assert tokens(spec, i) == tokens(plain, i), f"request {i} differs with Medusa drafts"
    st = spec["spec"]
    assert st["draft_tokens"] > 0 and 0 <= st["accepted_tokens"] <= st["draft_tokens"]
    assert sum(st["accepted_per_pos"]) == st["accepted_tokens"]
    if tree == TREE:  # some accepted paths left the nodes' first slots: their KV rows moved
        assert st["paths_moved"] > 0, st
    assert spec["blocks_in_use"] == 0


@pytest.mark.parametrize("tree", [None, TREE])
def test_alone_preempted_prefix_cached_and_sampled(harness, trained, tree):  # noqa: F811
    arch, model, heads, _ = trained
    k, extra = (8, {"speculative_token_tree": tree}) if tree else (4, {})
    req = {"prompt": [2] + list(range(10, 40)), "max_tokens": 50, "ignore_eos": True}
    assert tokens(harness(model, [req], spec=medusa(heads, k, **extra)), 0) == tokens(harness(model, [req]), 0)
    # Six short prompts admitted at once, each growing by 100 tokens in a pool
    # that holds far less than six of max_model_len: sequences must be
    # preempted whatever share of the drafts is accepted.
    _, cfg = preemption_scenario(arch)
    rng = random.Random(5)
    reqs = [{"prompt": [2] + [rng.randrange(4, 300) for _ in range(7)], "max_tokens": 100, "ignore_eos": True,
             "arrive": 0} for _ in range(6)]
    plain = harness(model, reqs, **cfg)
    spec = harness(model, reqs, spec=medusa(heads, k, disable_by_batch_size=16, **extra), **cfg)
    assert spec["preemptions"] > 0
    assert [tokens(spec, i) for i in range(len(reqs))] == [tokens(plain, i) for i in range(len(reqs))]
    # The same prompt again, later: its blocks come from the prefix cache.
    shared = [2] + [random.Random(8).randrange(4, 300) for _ in range(70)]
    again = [{"prompt": shared, "max_tokens": 30, "ignore_eos": True, "arrive": a} for a in (0, 40)]
    plain = harness(model, again, block_size=16)
    spec = harness(model, again, spec=medusa(heads, k, **extra), block_size=16)
    assert spec["requests"][1]["cached_tokens"] > 0
    assert [tokens(spec, i) for i in range(2)] == [tokens(plain, i) for i in range(2)]
    sampled = [{"prompt": [2] + list(range(50, 80)), "max_tokens": 30, "ignore_eos": True, "temperature": 0.8,
                "seed": s, "n": 2} for s in range(4)]
    plain = harness(model, sampled)
    spec = harness(model, sampled, spec=medusa(heads, k, **extra))
    assert spec["spec"]["draft_tokens"] > 0
    for i in range(len(sampled)):
        assert [tokens(spec, i, j) for j in range(2)] == [tokens(plain, i, j) for j in range(2)]
    assert spec["blocks_in_use"] == 0


@pytest.mark.parametrize("method", ["layer_skip", "draft_model"])
def test_drafts_from_a_slice_of_the_vocabulary_are_token_identical(harness, trained, method):  # noqa: F811
    """FR-Spec: a layer_skip or draft_model draft scoring only the heads'
    frequency-ranked tokens (the first 16 of them, then all) changes no
    token; the model as its own draft over all its layers still gets drafts
    accepted whenever its next token is in the slice."""
    arch, model, heads, _ = trained
    reqs = mixed_requests(300, seed=70, count=10)
    plain = harness(model, reqs, max_num_seqs=16)
    for size in (16, 0):
        spec = {"method": method, "num_speculative_tokens": 4, "disable_by_batch_size": 16,
                "draft_vocab": str(heads)}
        if size:
            spec["draft_vocab_size"] = size
        if method == "layer_skip":
            spec["draft_layers"] = 1
        else:
            spec["model"] = str(model)
        res = harness(model, reqs, spec=spec, max_num_seqs=16)
        for i in range(len(reqs)):
            assert tokens(res, i) == tokens(plain, i), f"request {i} differs with {spec}"
        st = res["spec"]
        assert st["draft_tokens"] > 0 and res["blocks_in_use"] == 0
        if method == "draft_model" and not size:
            assert st["accepted_tokens"] > 0, st


@pytest.mark.parametrize("method", ["medusa", "layer_skip", "draft_model"])
def test_draft_p_min_ends_a_chain_at_an_unsure_draft(harness, trained, method):  # noqa: F811
    """draft_p_min: a draft its drafter gave less than p_min is the last of its
    step. At 1 every verification checks one draft (a probability of exactly 1
    aside); above 0 K stays put (the probabilities end chains, not the last
    rejection); at 0 K adapts; either way, and in between, greedy and seeded
    sampled output is plain decoding's and every block comes back."""
    arch, model, heads, _ = trained
    base = drafter(method, model, heads, 4)
    reqs = mixed_requests(300, seed=60, count=10)
    plain = harness(model, reqs, max_num_seqs=16)
    stats = {}
    for p_min in (0, 1e-9, 0.3, 1):
        res = harness(model, reqs, spec=dict(base, draft_p_min=p_min), max_num_seqs=16)
        for i in range(len(reqs)):
            assert tokens(res, i) == tokens(plain, i), f"request {i} differs with draft_p_min {p_min}"
        assert res["blocks_in_use"] == 0
        stats[p_min] = st = res["spec"]
        assert st["drafts"] > 0 and st["accepted_tokens"] <= st["draft_tokens"], st
    per_step = {p: st["draft_tokens"] / st["drafts"] for p, st in stats.items()}
    assert per_step[1] <= 1.05 and per_step[1] <= per_step[0.3] <= per_step[1e-9], stats
    # With draft_p_min on, K does not adapt: a p_min that cuts no chain
    # drafts K (fewer only where a request is nearly done); at 0 K drops
    # after each rejection, which these weak drafts meet often.
    assert per_step[1e-9] > 3.3, stats
    if method == "draft_model":  # its own draft, always right: chains of K at 0 too
        assert per_step[0] > 2.5, stats
    else:
        assert per_step[0] < per_step[1e-9] - 0.3, stats
    sampled = [{"prompt": [2] + list(range(50, 80)), "max_tokens": 30, "ignore_eos": True, "temperature": 0.8,
                "seed": s, "n": 2} for s in range(3)]
    plain, res = harness(model, sampled), harness(model, sampled, spec=dict(base, draft_p_min=0.3))
    for i in range(len(sampled)):
        assert [tokens(res, i, j) for j in range(2)] == [tokens(plain, i, j) for j in range(2)]
    assert res["blocks_in_use"] == 0


@pytest.mark.parametrize("method", ["medusa", "layer_skip", "draft_model"])
def test_lookup_first_drafts_repeated_text_and_changes_no_token(harness, trained, method):  # noqa: F811
    """A lookup key given with another method (prompt_lookup_num_tokens 6
    beside the method's K of 3): each step a sequence whose text recurs gets
    n-gram lookup's drafts, up to 6 of them, and the others the method's. The
    repetitive prompts get lookup drafts past the method's K, the random ones
    the method's; greedy and seeded sampled output is plain decoding's, and
    every block (the draft model's too) comes back."""
    arch, model, heads, _ = trained
    base = drafter(method, model, heads, 3)
    reqs = mixed_requests(300, seed=80, count=10)
    plain = harness(model, reqs, max_num_seqs=16)
    alone = harness(model, reqs, spec=base, max_num_seqs=16)["spec"]
    assert alone["lookup_tokens"] == 0 and alone["drafted_per_pos"][3] == 0, alone
    res = harness(model, reqs, spec=dict(base, prompt_lookup_num_tokens=6), max_num_seqs=16)
    for i in range(len(reqs)):
        assert tokens(res, i) == tokens(plain, i), f"request {i} differs with lookup first"
    assert res["blocks_in_use"] == 0
    st = res["spec"]
    assert st["lookup_tokens"] > 0 and st["lookup_accepted"] <= st["lookup_tokens"], st
    assert st["draft_tokens"] > st["lookup_tokens"], st  # the method drafted where lookup found nothing
    assert st["drafted_per_pos"][3] > 0, st  # lookup drafts beyond the method's K
    assert st["drafted_per_pos"][6] == 0, st
    sampled = [{"prompt": repetitive_prompt(random.Random(s), 300), "max_tokens": 30, "ignore_eos": True,
                "temperature": 0.5, "top_k": 5, "seed": s, "n": 2} for s in range(3)]
    plain, res = harness(model, sampled), harness(model, sampled, spec=dict(base, prompt_lookup_min=1))
    for i in range(len(sampled)):
        assert [tokens(res, i, j) for j in range(2)] == [tokens(plain, i, j) for j in range(2)]
    assert res["blocks_in_use"] == 0 and res["spec"]["lookup_tokens"] > 0, res["spec"]


@pytest.mark.parametrize("arch", FAMILIES)
def test_an_exit_adapter_beats_the_raw_exit_and_changes_no_token(harness, model_factory, run_cllm, tmp_path, arch):  # noqa: F811
    """--kind exit: one block on the state after the first layer, trained on
    the model's own next tokens, agrees with the full model more often on
    held-out text than that state put straight through the output head (the
    zero block it starts from); layer_skip drafting through it keeps every
    token of plain decoding, alone, batched, with a smaller draft vocabulary
    and sampled, and gives back its KV blocks."""
    model = model_factory(arch)
    adapter = tmp_path / f"{arch}-exit.gguf"
    s = train(run_cllm, model, data_file(tmp_path), adapter, "--kind", "exit", "--exit-layer", 1, "--gen-tokens", 40,
              "--epochs", 4, "--lr", "3e-3")
    assert s["kind"] == "exit" and s["heads"] == 1 and s["exit_layer"] == 1, s
    assert s["top1"][0] > s["raw_exit_top1"], s
    reqs = mixed_requests(300, seed=90, count=10)
    plain = harness(model, reqs, max_num_seqs=16)
    for extra in ({}, {"draft_vocab_size": 16}):
        spec = dict({"method": "layer_skip", "model": str(adapter), "num_speculative_tokens": 3,
                     "disable_by_batch_size": 16}, **extra)
        res = harness(model, reqs, spec=spec, max_num_seqs=16)
        for i in range(len(reqs)):
            assert tokens(res, i) == tokens(plain, i), f"request {i} differs with {spec}"
        st = res["spec"]
        assert st["draft_tokens"] > 0 and st["accepted_tokens"] > 0 and res["blocks_in_use"] == 0, st
    sampled = [{"prompt": [2] + list(range(50, 80)), "max_tokens": 30, "ignore_eos": True, "temperature": 0.8,
                "seed": s, "n": 2} for s in range(3)]
    spec = {"method": "layer_skip", "model": str(adapter), "num_speculative_tokens": 3}
    plain, res = harness(model, sampled), harness(model, sampled, spec=spec)
    for i in range(len(sampled)):
        assert [tokens(res, i, j) for j in range(2)] == [tokens(plain, i, j) for j in range(2)]
    # Each file is for its own method and layer; the options that do not fit are refused.
    heads = tmp_path / "heads.gguf"
    train(run_cllm, model, data_file(tmp_path), heads, "--kind", "medusa", "--heads", 1, "--gen-tokens", 8)
    for cfg, says in (({"method": "medusa", "model": str(adapter)}, "is an exit adapter"),
                      ({"method": "layer_skip", "model": str(heads)}, "not an exit adapter"),
                      ({"method": "layer_skip", "model": str(adapter), "draft_layers": 2}, "after layer 1"),
                      ({"method": "layer_skip", "model": str(adapter), "draft_vocab": str(heads)},
                       "its own draft vocabulary"),
                      ({"method": "layer_skip", "model": str(tmp_path / "missing.gguf")}, "missing.gguf")):
        p = run_cllm("generate", "-m", model, "-p", "hi", "-n", 4, "--speculative-config", json.dumps(cfg))
        assert p.returncode != 0 and says in p.stderr, (cfg, p.stderr)
    for args, says in ((["--kind", "exit", "--heads", 2], "one block"), (["--exit-layer", 1], "--kind exit")):
        p = run_cllm("medusa", "train", model, "--data", data_file(tmp_path), "--out", tmp_path / "x.gguf", *args)
        assert p.returncode != 0 and says in p.stderr, (args, p.stderr)
    assert not (tmp_path / "x.gguf").exists()


def test_heads_of_another_model_and_bad_configs_are_refused(run_cllm, model_factory, trained, tmp_path):
    arch, model, heads, _ = trained
    if arch != "llama":
        pytest.skip("once is enough")
    wide = model_factory("llama", n_embd=128, n_head=8, n_ff=256)
    p = run_cllm("generate", "-m", wide, "-p", "hi", "-n", 4, "--speculative-config", json.dumps(medusa(heads, 4)))
    assert p.returncode != 0
    assert "hidden size 64" in p.stderr and "cllm medusa train" in p.stderr, p.stderr
    p = run_cllm("generate", "-m", model, "-p", "hi", "-n", 4, "--speculative-config", json.dumps(medusa(model, 4)))
    assert p.returncode != 0 and "not a Medusa heads file" in p.stderr, p.stderr
    p = run_cllm("generate", "-m", model, "-p", "hi", "-n", 4, "--speculative-config", '{"method": "medusa"}')
    assert p.returncode != 0 and "needs \"model\"" in p.stderr, p.stderr
    bad_vocab = {"method": "layer_skip", "draft_layers": 1, "draft_vocab": str(model)}
    p = run_cllm("generate", "-m", model, "-p", "hi", "-n", 4, "--speculative-config", json.dumps(bad_vocab))
    assert p.returncode != 0 and "has no medusa.draft_vocab" in p.stderr, p.stderr
    p = run_cllm("generate", "-m", model, "-p", "hi", "-n", 4, "--speculative-config",
                 json.dumps({"method": "ngram", "draft_vocab": str(heads)}))
    assert p.returncode != 0 and "\"draft_vocab\" is for methods" in p.stderr, p.stderr
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n")
    p = run_cllm("medusa", "train", model, "--data", empty, "--out", tmp_path / "h.gguf")
    assert p.returncode != 0 and "no prompts" in p.stderr, p.stderr
    p = run_cllm("medusa", "train", model, "--data", tmp_path / "missing.txt", "--out", tmp_path / "h.gguf")
    assert p.returncode != 0 and "missing.txt" in p.stderr, p.stderr
    p = run_cllm("medusa", "train", model, "--data", data_file(tmp_path), "--out", tmp_path / "h.gguf", "--heads", 9)
    assert p.returncode != 0 and "--heads" in p.stderr, p.stderr
    assert not (tmp_path / "h.gguf").exists()
    p = run_cllm("medusa", "fly")
    assert p.returncode != 0 and "train" in p.stderr


def test_heads_stored_as_q8_0_are_half_the_file_and_accepted_alike(harness, run_cllm, model_factory, tmp_path):  # noqa: F811
    # The same training (same seed) written as F16 and as Q8_0: the engine
    # runs both as Q8_0, so the files differ in bytes, not in what is drafted
    # beyond an F16 rounding's near ties; greedy output stays the model's own.
    model = model_factory("llama")
    data = data_file(tmp_path)
    files = {}
    for type_ in ("f16", "q8_0"):
        files[type_] = tmp_path / f"heads-{type_}.gguf"
        train(run_cllm, model, data, files[type_], "--type", type_, "--gen-tokens", 40, "--epochs", 4, "--lr", "3e-3")
    blocks_f16 = 4 * 64 * 128 * 2  # four chained blocks of [64][128]
    saved = files["f16"].stat().st_size - files["q8_0"].stat().st_size
    assert saved == blocks_f16 - blocks_f16 * 34 // 64, saved  # Q8_0: 34 bytes per 32 weights
    reqs = mixed_requests(300, seed=77, count=8)
    plain = harness(model, reqs, max_num_seqs=16)
    runs = {t: harness(model, reqs, spec=medusa(f, 4, disable_by_batch_size=16), max_num_seqs=16) for t, f in files.items()}
    for t, run in runs.items():
        assert [tokens(run, i) for i in range(len(reqs))] == [tokens(plain, i) for i in range(len(reqs))], t
    acc = {t: run["spec"]["accepted_tokens"] for t, run in runs.items()}
    assert acc["f16"] > 0 and abs(acc["q8_0"] - acc["f16"]) <= 0.1 * acc["f16"] + 2, acc
