"""Running `cllm serve` for the server tests.

    with CllmServer(cllm_bin, model_path, "--max-model-len", "512") as srv:
        requests.get(srv.url("/health"))

The server is started with --port 0 on 127.0.0.1 (the kernel picks a free
port; the server prints it), and the constructor returns once /health answers
200. `stop()` sends SIGTERM and returns the exit code; `log()` is everything
the server wrote to stderr.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Optional

import requests

LISTEN_RE = re.compile(r"listening on http://([^:\s]+):(\d+)")
METRIC_RE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)$")


class CllmServer:
    def __init__(self, cllm_bin, model, *args: str, api_key: Optional[str] = None, threads: int = 2,
                 startup_timeout: float = 120, wait_ready: bool = True, env: Optional[dict] = None,
                 launcher: tuple = ()):
        """`launcher` goes before the binary (e.g. mpirun and its flags)."""
        self.api_key = api_key
        cmd = [*launcher, str(cllm_bin), "serve", str(model), "--host", "127.0.0.1", "--port", "0",
               "--threads", str(threads), *map(str, args)]
        if api_key:
            cmd += ["--api-key", api_key]
        run_env = dict(os.environ)
        run_env.pop("CLLM_API_KEY", None)
        run_env.pop("VLLM_API_KEY", None)
        if env:
            run_env.update(env)
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                     env=run_env)
        self._lines: list[str] = []
        self._port_found = threading.Event()
        self._ready_line = threading.Event()
        self.port: Optional[int] = None
        self._reader = threading.Thread(target=self._read_stderr, daemon=True)
        self._reader.start()
        if wait_ready:
            self.wait_ready(startup_timeout)

    def _read_stderr(self):
        for line in self.proc.stderr:
            self._lines.append(line)
            m = LISTEN_RE.search(line)
            if m and self.port is None:
                self.port = int(m.group(2))
                self._port_found.set()
            if "cllm serve: ready." in line:
                self._ready_line.set()
        self._port_found.set()
        self._ready_line.set()

    def log(self) -> str:
        return "".join(self._lines)

    def wait_port(self, timeout: float = 60) -> int:
        if not self._port_found.wait(timeout) or self.port is None:
            self.kill()
            raise RuntimeError(f"cllm serve did not start listening:\n{self.log()}")
        return self.port

    def wait_ready(self, timeout: float = 120):
        self.wait_port(timeout)
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"cllm serve exited with {self.proc.returncode}:\n{self.log()}")
            try:
                if requests.get(self.url("/health"), timeout=5).status_code == 200:
                    # The server prints "ready." just after /health turns 200; once this
                    # thread has read it, log() holds everything the server wrote while
                    # loading (the reader thread may lag on a loaded machine).
                    self._ready_line.wait(max(1.0, deadline - time.time()))
                    return
            except requests.ConnectionError:
                pass
            time.sleep(0.05)
        self.kill()
        raise RuntimeError(f"cllm serve was not ready in {timeout} s:\n{self.log()}")

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def url(self, path: str) -> str:
        return self.base_url + path

    def headers(self, key: Optional[str] = "default") -> dict:
        k = self.api_key if key == "default" else key
        return {"Authorization": f"Bearer {k}"} if k else {}

    def post(self, path: str, body=None, timeout: float = 120, **kw) -> requests.Response:
        headers = kw.pop("headers", None) or self.headers()
        return requests.post(self.url(path), json=body, headers=headers, timeout=timeout, **kw)

    def get(self, path: str, timeout: float = 30, **kw) -> requests.Response:
        headers = kw.pop("headers", None) or self.headers()
        return requests.get(self.url(path), headers=headers, timeout=timeout, **kw)

    def metrics(self) -> dict:
        """{name or name{labels}: value}; unlabeled-but-for-model_name samples
        are also stored under the bare name."""
        text = requests.get(self.url("/metrics"), timeout=30).text
        out = {}
        for line in text.splitlines():
            if line.startswith("#") or not line.strip():
                continue
            m = METRIC_RE.match(line)
            if not m:
                raise AssertionError(f"bad metrics line: {line!r}")
            name, labels, value = m.group(1), m.group(2) or "", float(m.group(3))
            out[name + labels] = value
            if labels.count("=") <= 1:
                out[name] = value
        return out

    def wait_idle(self, timeout: float = 10) -> dict:
        """The metrics once no request runs or waits and no KV block is in use
        (a finished request's sequence is freed by the engine's next step,
        just after its answer went out); AssertionError after timeout."""
        deadline = time.time() + timeout
        while True:
            m = self.metrics()
            if (m["vllm:num_requests_running"] == 0 and m["vllm:num_requests_waiting"] == 0
                    and m["cllm:kv_cache_blocks_used"] == 0):
                return m
            if time.time() > deadline:
                raise AssertionError(f"not idle {timeout} s after the requests ended: {m}")
            time.sleep(0.02)

    def tokenize(self, **body) -> list[int]:
        r = self.post("/tokenize", body)
        assert r.status_code == 200, r.text
        return r.json()["tokens"]

    def send_signal(self, sig=signal.SIGTERM):
        self.proc.send_signal(sig)

    def wait_exit(self, timeout: float = 60) -> int:
        """The exit code, once the process has ended and log() holds all it wrote."""
        rc = self.proc.wait(timeout)
        self._reader.join(5)
        return rc

    def stop(self, sig=signal.SIGTERM, timeout: float = 60) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
                raise RuntimeError(f"cllm serve did not exit {timeout} s after signal {sig}:\n{self.log()}")
        self._reader.join(5)
        return self.proc.returncode

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        try:
            rc = self.stop()
        finally:
            self.kill()
        # A clean shutdown exits 0; under the sanitizers a leak or an error
        # found at exit makes it non-zero.
        if rc != 0 and exc[0] is None:
            raise AssertionError(f"cllm serve exited with {rc} after SIGTERM:\n{self.log()[-5000:]}")


def sse_events(resp: requests.Response) -> list:
    """The `data:` payloads of a streamed response, in order ("[DONE]" kept as
    the string)."""
    import json

    events = []
    for raw in resp.iter_lines():
        if not raw:
            continue
        line = raw.decode("utf-8")
        assert line.startswith("data: "), f"not an SSE data line: {line!r}"
        payload = line[len("data: "):]
        events.append(payload if payload == "[DONE]" else json.loads(payload))
    return events


def default_chat_model() -> Path:
    """`make run`'s model (scripts/default_model.py), or a failure that says to run the set-up."""
    import pytest

    script = Path(__file__).resolve().parents[2] / "scripts" / "default_model.py"
    p = subprocess.run([sys.executable, str(script), "--check"], capture_output=True, text=True)
    if p.returncode != 0:
        pytest.fail(p.stderr.strip() or "scripts/default_model.py --check failed", pytrace=False)
    return Path(p.stdout.strip())


def tiny_model(model_factory, **options):
    """A fast synthetic Llama with a longer context than the default."""
    options.setdefault("n_ctx", 4096)
    return model_factory("llama", **options)
