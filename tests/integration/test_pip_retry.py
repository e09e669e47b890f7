"""scripts/pip_retry.py: the set-up's downloads from PyPI survive a
registry that answers once with an empty index page ("from versions: none"),
and still fail, with pip's error, when every attempt fails."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "pip_retry.py"


@pytest.fixture
def module(monkeypatch):
    spec = importlib.util.spec_from_file_location("pip_retry", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    monkeypatch.setattr(mod, "PAUSE_S", 0)
    return mod


def failing_run(failures: int, calls: list):
    def run(cmd, check):
        calls.append(cmd)
        assert check
        if len(calls) <= failures:
            raise subprocess.CalledProcessError(1, cmd)
        return subprocess.CompletedProcess(cmd, 0)
    return run


def test_a_failed_download_is_tried_again(module, monkeypatch):
    calls = []
    monkeypatch.setattr(module.subprocess, "run", failing_run(2, calls))
    module.pip_download(["--no-deps", "llama-cpp-python==0.3.36", "-d", "/tmp/x"])
    assert len(calls) == 3
    assert calls[0][1:5] == ["-m", "pip", "download", "-q"]
    assert calls[0][-3:] == ["llama-cpp-python==0.3.36", "-d", "/tmp/x"]
    assert calls[0] == calls[2]


def test_a_download_that_never_succeeds_fails(module, monkeypatch):
    calls = []
    monkeypatch.setattr(module.subprocess, "run", failing_run(100, calls))
    with pytest.raises(subprocess.CalledProcessError):
        module.pip_download(["x==1"])
    assert len(calls) == module.ATTEMPTS


def test_the_command_line_runs_pip_with_its_arguments():
    out = subprocess.run([sys.executable, str(SCRIPT), "--version"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.startswith("pip ")
