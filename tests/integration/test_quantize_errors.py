"""`cllm quantize` refuses bad input with a clear message and leaves nothing
behind: neither the output file nor its temporary OUT.tmp, and an existing
file at the output path is untouched."""

from __future__ import annotations

import pytest

CALIB = "tests/data/calib.txt"


@pytest.fixture(scope="module")
def model(model_factory):
    return model_factory("llama")  # rows of 64 and 128


def check_refused(run_cllm, tmp_path, args, message, out_name="out.gguf"):
    out = tmp_path / out_name
    out.write_bytes(b"an older file that must survive")
    p = run_cllm("quantize", *args[:1], out, *args[1:], timeout=120)
    assert p.returncode != 0
    assert message in p.stderr, p.stderr
    assert p.stderr.startswith("cllm quantize: ") or "usage" in p.stderr, p.stderr
    assert out.read_bytes() == b"an older file that must survive"
    assert not (tmp_path / (out_name + ".tmp")).exists()


@pytest.mark.parametrize("opts,message", [
    (["--bits", 5], "unsupported --bits 5 (supported: 8, 4, 3, 2"),
    (["--bits", 1], "unsupported --bits 1"),
    (["--group-size", 48], "unsupported --group-size 48 (supported: 32, 64, 128, -1"),
    (["--group-size", 0], "unsupported --group-size 0"),
    (["--group-size", 128], "blk.0.attn_q.weight: group size 128 does not divide its rows of 64 elements"),
    (["--scheme", "zero"], "--scheme expects sym or asym"),
    (["--method", "spqr"], "--method expects rtn, gptq or awq"),
    (["--method", "gptq"], "--method gptq needs a calibration text (--calib FILE)"),
    (["--method", "awq"], "--method awq needs a calibration text"),
    (["--desc-act"], "--desc-act applies to --method gptq only"),
    (["--keep-type", "q9_9"], "--keep-type 'q9_9' is not a weight type"),
    (["--bits", 16, "--method", "gptq", "--calib", CALIB], "--bits 16 writes floats: it takes no --method"),
])
def test_bad_options(run_cllm, model, repo_root, tmp_path, opts, message):
    opts = [repo_root / o if o == CALIB else o for o in opts]
    check_refused(run_cllm, tmp_path, [model, *opts], message)


def test_missing_calibration_file(run_cllm, model, tmp_path):
    check_refused(run_cllm, tmp_path, [model, "--group-size", 32, "--method", "gptq", "--calib", tmp_path / "nope.txt"],
                  "nope.txt: cannot open: No such file or directory")


@pytest.mark.parametrize("content", ["", "   \n\n\t \n"])
def test_empty_calibration_file(run_cllm, model, tmp_path, content):
    calib = tmp_path / "empty.txt"
    calib.write_text(content)
    check_refused(run_cllm, tmp_path, [model, "--group-size", 32, "--method", "awq", "--calib", calib],
                  "calibration file " + str(calib) + " is empty")


def test_too_short_calibration_file(run_cllm, model, tmp_path):
    calib = tmp_path / "short.txt"
    calib.write_text("hello world")
    check_refused(run_cllm, tmp_path, [model, "--group-size", 32, "--method", "gptq", "--calib", calib], "tokens (at least 16")


@pytest.mark.parametrize("dropped", ["blk.1.ffn_up.weight", "output_norm.weight", "token_embd.weight"])
def test_model_with_missing_tensors(run_cllm, model_factory, tmp_path, dropped):
    broken = model_factory("llama", drop_tensors=(dropped,))
    check_refused(run_cllm, tmp_path, [broken, "--bits", 8, "--group-size", 32], f"'{dropped}'")


def test_not_a_model(run_cllm, tmp_path):
    bogus = tmp_path / "bogus.gguf"
    bogus.write_bytes(b"this is not a gguf file at all, not even close")
    check_refused(run_cllm, tmp_path, [bogus], "not a GGUF file")
    check_refused(run_cllm, tmp_path, [tmp_path / "missing.gguf"], "cannot open")


def test_output_folder_missing(run_cllm, model, tmp_path):
    out = tmp_path / "no" / "such" / "dir" / "out.gguf"
    p = run_cllm("quantize", model, out, "--bits", 8, "--group-size", 32)
    assert p.returncode != 0
    assert "cannot create" in p.stderr, p.stderr
    assert not out.parent.exists()


def test_usage_errors(run_cllm, model, tmp_path):
    p = run_cllm("quantize", model)
    assert p.returncode != 0 and "usage: cllm quantize" in p.stderr
    p = run_cllm("quantize", model, tmp_path / "a", tmp_path / "b")
    assert p.returncode != 0 and "unexpected argument" in p.stderr
    p = run_cllm("quantize", model, tmp_path / "a", "--frobnicate")
    assert p.returncode != 0 and "unknown option '--frobnicate'" in p.stderr
    p = run_cllm("quantize", "--help")
    assert p.returncode == 0 and "--method rtn|gptq|awq" in p.stdout
    assert not list(tmp_path.iterdir())

