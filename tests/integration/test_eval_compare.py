"""`cllm eval-compare BASE CANDIDATE --prompts FILE.jsonl`: a model compared
with itself agrees perfectly; a degraded candidate (2-bit, one group per row)
agrees less, and the thresholds turn that into a failing exit status; the
report counts JSON validity for prompts that ask for JSON; the real model
writes JSON for the repository's few-shot JSON prompts."""

from __future__ import annotations

import json
import re

import pytest

PROMPTS = "tests/data/eval_prompts.jsonl"


def metric(stdout, name):
    m = re.search(rf"^{name}\s+([0-9.]+)", stdout, re.M)
    assert m, stdout
    return float(m.group(1))


@pytest.fixture(scope="module")
def synthetic(model_factory, run_cllm, tmp_path_factory):
    base = model_factory("llama")
    bad = tmp_path_factory.mktemp("evalcmp") / "q2.gguf"
    p = run_cllm("quantize", base, bad, "--bits", 2, "--group-size", -1, "--quiet")
    assert p.returncode == 0, p.stderr
    return base, bad


def write_prompts(path, items):
    path.write_text("".join(json.dumps(x) + "\n" for x in items))
    return path


def test_model_against_itself(run_cllm, synthetic, tmp_path):
    base, _ = synthetic
    prompts = write_prompts(tmp_path / "p.jsonl", [
        {"prompt": "hello world"}, {"prompt": "the model", "max_tokens": 5},
        {"prompt": "emit json", "expect_json": True}, {"prompt": "more json", "expect_json": True, "json_prefix": "{"},
    ])
    report = tmp_path / "r.json"
    p = run_cllm("eval-compare", base, base, "--prompts", prompts, "--max-tokens", 12, "--min-exact-match", 1,
                 "--min-token-agreement", 1, "--json-out", report)
    assert p.returncode == 0, p.stdout + p.stderr
    assert metric(p.stdout, "exact match") == 1.0
    assert metric(p.stdout, "token agreement") == 1.0
    assert "PASS" in p.stdout
    doc = json.loads(report.read_text())
    assert doc["pass"] is True and doc["prompts"] == 4 and doc["json_prompts"] == 2
    assert doc["json_valid_base"] == doc["json_valid_candidate"]  # the same text either way
    per = doc["per_prompt"]
    assert [x["exact"] for x in per] == [True] * 4
    assert per[1]["base_tokens"] <= 5
    assert "json_base" in per[2] and "json_base" not in per[0]


def test_degraded_candidate_fails_the_gate(run_cllm, synthetic, tmp_path):
    base, bad = synthetic
    prompts = write_prompts(tmp_path / "p.jsonl", [{"prompt": p} for p in
                                                  ("hello world", "the model was", "a request to the server",
                                                   "once upon a time", "write the cache")])
    p = run_cllm("eval-compare", base, bad, "--prompts", prompts, "--max-tokens", 16)
    assert p.returncode == 0, p.stdout + p.stderr  # no thresholds: report only
    agree = metric(p.stdout, "token agreement")
    exact = metric(p.stdout, "exact match")
    prefix = metric(p.stdout, "prefix agreement")
    assert agree < 0.9 and exact < 1 and prefix <= agree + 1e-9
    p = run_cllm("eval-compare", base, bad, "--prompts", prompts, "--max-tokens", 16, "--min-token-agreement", 0.95)
    assert p.returncode == 1
    assert "FAIL: token agreement" in p.stdout


def test_bad_prompt_files(run_cllm, synthetic, tmp_path):
    base, _ = synthetic
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": "ok"}\n{"text": "no prompt key"}\n')
    p = run_cllm("eval-compare", base, base, "--prompts", bad)
    assert p.returncode == 1 and "bad.jsonl:2: expected an object with a string \"prompt\"" in p.stderr
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n\n")
    p = run_cllm("eval-compare", base, base, "--prompts", empty)
    assert p.returncode == 1 and "holds no prompts" in p.stderr
    p = run_cllm("eval-compare", base, base, "--prompts", tmp_path / "missing.jsonl")
    assert p.returncode == 1 and "cannot open" in p.stderr


def test_real_model_writes_json(run_cllm, real_model_path, repo_root, tmp_path):
    lines = (repo_root / PROMPTS).read_text().splitlines()
    prompts = tmp_path / "json.jsonl"
    prompts.write_text("".join(line + "\n" for line in lines if '"expect_json": true' in line))
    report = tmp_path / "r.json"
    p = run_cllm("eval-compare", real_model_path, real_model_path, "--prompts", prompts, "--max-tokens", 24,
                 "--json-out", report, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    doc = json.loads(report.read_text())
    assert doc["exact_match"] == 1.0 and doc["json_prompts"] == 3
    assert doc["json_valid_base"] >= 2, [x["base"] for x in doc["per_prompt"] if "json_base" in x]
