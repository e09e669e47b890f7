"""`cllm tokenize` as a command: its output formats on the real Gemma 3
vocabulary, --decode, and one clear error line (exit status 1) for each kind
of bad input."""

from __future__ import annotations

import gguf


def test_plain_json_and_no_special(run_cllm, real_model_path):
    r = run_cllm("tokenize", "-m", real_model_path, input="Hello world")
    assert (r.returncode, r.stdout, r.stderr) == (0, "2 9259 1902\n", "")
    r = run_cllm("tokenize", "-m", real_model_path, "--json", input="Hello world")
    assert r.stdout == "[2,9259,1902]\n"
    r = run_cllm("tokenize", "-m", real_model_path, "--no-special", input="Hello world")
    assert r.stdout == "9259 1902\n"
    r = run_cllm("tokenize", "-m", real_model_path, input="")
    assert r.stdout == "2\n"


def test_parse_special(run_cllm, real_model_path):
    text = "<start_of_turn>user\nHi<end_of_turn>"
    r = run_cllm("tokenize", "-m", real_model_path, "--parse-special", input=text)
    assert r.stdout == "2 105 2364 107 10979 106\n"


def test_decode(run_cllm, real_model_path):
    r = run_cllm("tokenize", "-m", real_model_path, "--decode", input="2 9259 1902\n")
    assert (r.returncode, r.stdout) == (0, "Hello world")
    r = run_cllm("tokenize", "-m", real_model_path, "--decode", input="[2, 105, 2364]")
    assert r.stdout == "user"
    r = run_cllm("tokenize", "-m", real_model_path, "--decode", "--parse-special", input="2 105 2364")
    assert r.stdout == "<bos><start_of_turn>user"


def _one_error_line(r, *needles, stdout=""):
    assert r.returncode == 1
    assert r.stdout == stdout
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    for n in needles:
        assert n in lines[0], lines[0]


def test_missing_file(run_cllm, tmp_path):
    path = tmp_path / "nope.gguf"
    _one_error_line(run_cllm("tokenize", "-m", path, input="x"), str(path))


def test_not_a_gguf(run_cllm, tmp_path):
    path = tmp_path / "text.gguf"
    path.write_text("this is not a GGUF file at all, just some text\n" * 10)
    _one_error_line(run_cllm("tokenize", "-m", path, input="x"), "cllm tokenize")


def test_gguf_without_tokenizer(run_cllm, tmp_path):
    path = tmp_path / "notok.gguf"
    w = gguf.GGUFWriter(str(path), "llama")
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    _one_error_line(run_cllm("tokenize", "-m", path, input="x"), "tokenizer.ggml.model", str(path))


def test_usage_errors(run_cllm, real_model_path):
    _one_error_line(run_cllm("tokenize", input="x"), "-m")
    r = run_cllm("tokenize", "-m", real_model_path, "--bogus", input="x")
    assert r.returncode == 1 and "--bogus" in r.stderr


def test_bad_input_lines(run_cllm, real_model_path):
    _one_error_line(run_cllm("tokenize", "-m", real_model_path, "--jsonl", input='"ok"\n[1, 2]\n'),
                    "line 2", stdout="[2,680]\n")  # lines before the bad one are answered
    _one_error_line(run_cllm("tokenize", "-m", real_model_path, "--jsonl", input='{"hex": "abc"}\n'),
                    "line 1")
    _one_error_line(run_cllm("tokenize", "-m", real_model_path, "--decode", input="2 999999999"),
                    "999999999")
    _one_error_line(run_cllm("tokenize", "-m", real_model_path, "--decode", "--jsonl",
                             input="[2, -1]\n"), "line 1")
