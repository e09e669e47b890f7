"""`cllm chat`: each stdin line is a turn, replies stream to stdout (prompts
and notes to stderr), /reset forgets, bad options fail with one clear line."""

from __future__ import annotations


def test_two_turns_and_reset(run_cllm, model_factory):
    model = model_factory("gemma3")
    p = run_cllm("chat", "-m", model, "--temperature", 0, "-n", 8, input="hello there\nand again\n/reset\nhi\n")
    assert p.returncode == 0, p.stderr
    replies = p.stdout.split("\n")
    assert len([r for r in replies if r]) >= 1
    assert p.stdout.count("\n") == 3  # one line per reply
    assert "conversation cleared" in p.stderr
    # Greedy and the same history: the reply to the first turn equals the reply after /reset to the
    # same words only if the words match; here check determinism instead.
    q = run_cllm("chat", "-m", model, "--temperature", 0, "-n", 8, input="hello there\nand again\n/reset\nhi\n")
    assert q.stdout == p.stdout


def test_bad_template_file(run_cllm, model_factory, tmp_path):
    bad = tmp_path / "t.jinja"
    bad.write_text("{% for x in %}")
    p = run_cllm("chat", "-m", model_factory("llama"), "--chat-template", bad, input="hi\n")
    assert p.returncode == 1
    assert p.stdout == ""
    assert "t.jinja" in p.stderr and len(p.stderr.strip().splitlines()) == 1


def test_unknown_option(run_cllm, model_factory):
    p = run_cllm("chat", "-m", model_factory("llama"), "--bogus", 1)
    assert p.returncode == 1 and "--bogus" in p.stderr
