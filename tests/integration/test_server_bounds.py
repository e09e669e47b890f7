"""The work a request costs is bounded by the context, not by what the
client sends: a body over --max-body-size is read and dropped (413), and a
prompt whose byte length alone shows it cannot fit --max-model-len gets its
400 without being tokenized. Time and the server's peak memory (VmHWM,
reset through /proc/PID/clear_refs before each case) are measured."""

from __future__ import annotations

import threading
import time

import pytest
import requests

from server_util import CllmServer, tiny_model

MAX_LEN = 512
MiB = 1 << 20


@pytest.fixture(scope="module")
def srv(cllm_bin, model_factory):
    with CllmServer(cllm_bin, tiny_model(model_factory), "--max-model-len", MAX_LEN, "--kv-cache-memory",
                    "16MiB") as s:
        s.post("/v1/completions", {"prompt": "hello", "max_tokens": 2})  # the first request's buffers
        yield s


def status_kib(pid: int, key: str) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    raise AssertionError(key)


class PeakGrowth:
    """Growth of the server's peak resident memory over a block, in MiB."""

    def __init__(self, pid: int):
        self.pid = pid

    def __enter__(self):
        with open(f"/proc/{self.pid}/clear_refs", "w") as f:
            f.write("5")  # resets VmHWM to the current VmRSS
        self.base = status_kib(self.pid, "VmRSS")
        return self

    def __exit__(self, *exc):
        self.mib = (status_kib(self.pid, "VmHWM") - self.base) / 1024


def post_raw(srv, path: str, body: bytes):
    t = time.monotonic()
    r = requests.post(srv.url(path), data=body, headers={"Content-Type": "application/json"}, timeout=120)
    return r, time.monotonic() - t


def prompt_body(n_bytes: int, chat: bool = False) -> bytes:
    text = b"a b " * (n_bytes // 4)
    if chat:
        return b'{"messages": [{"role": "user", "content": "' + text + b'"}]}'
    return b'{"prompt": "' + text + b'"}'


def test_100mb_body_is_413_without_keeping_it(srv):
    body = prompt_body(100 * MiB)
    with PeakGrowth(srv.proc.pid) as peak:
        r, seconds = post_raw(srv, "/v1/completions", body)
    assert r.status_code == 413, r.text[:300]
    assert r.json()["error"]["code"] == "request_too_large" and "--max-body-size" in r.json()["error"]["message"]
    print(f"100 MB body: {r.status_code} in {seconds:.3f} s, peak RSS growth {peak.mib:.1f} MiB")
    assert seconds < 5
    assert peak.mib < 50


@pytest.mark.parametrize("path,chat", [("/v1/completions", False), ("/v1/chat/completions", True),
                                       ("/tokenize", False)])
def test_prompt_too_long_for_the_context_is_refused_untokenized(srv, path, chat):
    """Just under the body limit (1 MiB): far more bytes than 512 tokens can
    spell, so the 400 comes from the length, before tokenizing."""
    body = prompt_body(MiB - 200, chat=chat)
    with PeakGrowth(srv.proc.pid) as peak:
        r, seconds = post_raw(srv, path, body)
    assert r.status_code == 400, r.text[:300]
    err = r.json()["error"]
    assert err["code"] == "context_length_exceeded" and err["param"] == ("messages" if chat else "prompt")
    assert "at least" in err["message"] and str(MAX_LEN) in err["message"]
    print(f"{path} 1 MiB prompt: 400 in {seconds:.3f} s, peak RSS growth {peak.mib:.1f} MiB")
    assert seconds < 2
    assert peak.mib < 50


def test_a_prompt_near_the_context_gets_exact_numbers(srv):
    """The bound refuses only what cannot fit: a prompt over the context in
    tokens but not provably so by its bytes is tokenized, and /tokenize and
    the 400 give its exact count."""
    text = " the" * 600
    n = len(srv.tokenize(prompt=text))
    assert n > MAX_LEN
    r = srv.post("/v1/completions", {"prompt": text, "max_tokens": 1})
    assert r.status_code == 400
    msg = r.json()["error"]["message"]
    assert "at least" not in msg and f"{n} tokens" in msg


def test_64_concurrent_15mb_prompts(srv):
    body = prompt_body(15 * MiB)
    results = []

    def one():
        results.append(post_raw(srv, "/v1/completions", body))

    threads = [threading.Thread(target=one) for _ in range(64)]
    with PeakGrowth(srv.proc.pid) as peak:
        t = time.monotonic()
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        wall = time.monotonic() - t
    statuses = sorted({r.status_code for r, _ in results})
    slowest = max(s for _, s in results)
    print(f"64 x 15 MB: {statuses} in {wall:.2f} s (slowest {slowest:.2f} s), peak RSS growth {peak.mib:.1f} MiB")
    assert statuses == [413]
    assert peak.mib < 200
    assert wall < 30  # 1 s each on a quiet machine; generous for a loaded CI box
    assert requests.get(srv.url("/health")).status_code == 200
    r = srv.post("/v1/completions", {"prompt": "hello", "max_tokens": 2, "temperature": 0})
    assert r.status_code == 200
