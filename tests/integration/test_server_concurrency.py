"""Many clients at once on a tiny synthetic model: 64 concurrent streaming
chats give exactly what the same requests give one at a time (greedy), and
clients that disconnect mid-generation have their requests aborted and their
KV blocks returned (seen in /metrics)."""

from __future__ import annotations

import json
import socket
import threading
import time

import pytest
import requests

from server_util import CllmServer, sse_events, tiny_model

N_CONCURRENT = 64


@pytest.fixture(scope="module")
def srv(cllm_bin, model_factory):
    model = tiny_model(model_factory, n_ctx=8192)
    with CllmServer(cllm_bin, model, "--max-model-len", 8192, "--max-num-seqs", 64, "--kv-cache-memory", "256MiB",
                    "--served-model-name", "tiny") as s:
        yield s


def chat_body(i: int, stream: bool) -> dict:
    words = "the of and to in is that it for was on are as with his they at be this from".split()
    text = " ".join(words[(i * 7 + k) % len(words)] for k in range(3 + i % 11))
    body = {"model": "tiny", "messages": [{"role": "user", "content": f"request {i}: {text}"}],
            "max_tokens": 24, "temperature": 0, "ignore_eos": True}
    if stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    return body


def run_stream(srv, i: int, out: dict, barrier: threading.Barrier):
    try:
        barrier.wait()
        t0 = time.time()
        with requests.post(srv.url("/v1/chat/completions"), json=chat_body(i, True), stream=True,
                           timeout=300) as r:
            assert r.status_code == 200, r.text
            assert r.headers["Content-Type"].startswith("text/event-stream")
            events = sse_events(r)
        out[i] = (events, time.time() - t0)
    except Exception as exc:  # reported by the test thread
        out[i] = exc


def test_64_concurrent_streams_match_sequential(srv):
    expected = {}
    t0 = time.time()
    for i in range(N_CONCURRENT):
        r = srv.post("/v1/chat/completions", chat_body(i, False))
        assert r.status_code == 200, r.text
        c = r.json()["choices"][0]
        expected[i] = (c["message"]["content"], c["finish_reason"], r.json()["usage"])
    t_seq = time.time() - t0

    results: dict = {}
    barrier = threading.Barrier(N_CONCURRENT)
    threads = [threading.Thread(target=run_stream, args=(srv, i, results, barrier)) for i in range(N_CONCURRENT)]
    t0 = time.time()
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    t_conc = time.time() - t0
    print(f"\n64 chats: one at a time {t_seq:.2f} s, 64 concurrent streams {t_conc:.2f} s")

    for i in range(N_CONCURRENT):
        res = results.get(i)
        assert not isinstance(res, Exception) and res is not None, f"request {i}: {res!r}"
        events, _ = res
        assert events[-1] == "[DONE]"
        chunks = events[:-1]
        assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
        assert all(c["object"] == "chat.completion.chunk" for c in chunks)
        assert len({c["id"] for c in chunks}) == 1
        usage = chunks[-1]["usage"]
        assert chunks[-1]["choices"] == [] and usage is not None
        text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks[:-1])
        finish = [c["choices"][0]["finish_reason"] for c in chunks[:-1] if c["choices"][0]["finish_reason"]]
        want_text, want_finish, want_usage = expected[i]
        assert text == want_text, f"request {i} differs when run concurrently"
        assert finish == [want_finish] == ["length"]
        assert usage["completion_tokens"] == want_usage["completion_tokens"] == 24
        assert usage["prompt_tokens"] == want_usage["prompt_tokens"]


def metric(m: dict, name: str) -> float:
    return m[name]


def open_stream(port: int, body: dict) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port))
    data = json.dumps(body).encode()
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
              b"Content-Length: %d\r\n\r\n" % len(data) + data)
    return s


def read_until(s: socket.socket, marker: bytes, timeout: float = 60) -> bytes:
    s.settimeout(timeout)
    got = b""
    while marker not in got:
        chunk = s.recv(65536)
        if not chunk:
            raise AssertionError(f"connection closed before {marker!r}: {got[:300]!r}")
        got += chunk
    return got


def wait_kv_free(srv, timeout: float = 10) -> float:
    t0 = time.time()
    while time.time() - t0 < timeout:
        m = srv.metrics()
        if (m["cllm:kv_cache_blocks_used"] == 0 and m["vllm:kv_cache_usage_perc"] == 0
                and m["vllm:num_requests_running"] == 0 and m["vllm:num_requests_waiting"] == 0):
            return time.time() - t0
        time.sleep(0.02)
    raise AssertionError(f"KV cache still in use {timeout} s after the clients left: {srv.metrics()}")


def aborted(srv) -> float:
    return srv.metrics()['vllm:request_success_total{model_name="tiny",finished_reason="abort"}']


def test_20_disconnected_streams_free_their_kv(srv):
    before = aborted(srv)
    socks = []
    for i in range(20):
        s = open_stream(srv.port, {"model": "tiny", "prompt": f"hello world {i} " * (1 + i % 4), "max_tokens": 7500,
                                   "temperature": 0, "ignore_eos": True, "stream": True})
        socks.append(s)
    for s in socks:
        head = read_until(s, b"data: {")  # generation has started for this one
        assert head.startswith(b"HTTP/1.1 200 "), head[:300]
    m = srv.metrics()
    assert m["cllm:kv_cache_blocks_used"] > 0 and m["vllm:kv_cache_usage_perc"] > 0
    for s in socks:
        s.close()
    elapsed = wait_kv_free(srv)
    print(f"\nKV cache back to zero {elapsed * 1000:.0f} ms after 20 clients disconnected")
    assert aborted(srv) - before == 20
    r = srv.post("/v1/completions", {"prompt": "still alive", "max_tokens": 3, "temperature": 0})
    assert r.status_code == 200


def test_disconnect_while_waiting_for_a_whole_response(srv):
    before = aborted(srv)
    s = open_stream(srv.port, {"model": "tiny", "prompt": "hello", "max_tokens": 8000, "temperature": 0,
                               "ignore_eos": True})
    deadline = time.time() + 10
    while srv.metrics()["vllm:num_requests_running"] == 0 and time.time() < deadline:
        time.sleep(0.01)
    s.close()
    wait_kv_free(srv)
    assert aborted(srv) - before == 1


def test_keep_alive_connection_serves_many_requests(srv):
    with requests.Session() as sess:
        for i in range(20):
            r = sess.post(srv.url("/v1/completions"), json={"prompt": f"hi {i}", "max_tokens": 2}, timeout=60)
            assert r.status_code == 200
        r = sess.post(srv.url("/v1/completions"), json={"prompt": "x", "max_tokens": 2, "stream": True},
                      stream=True, timeout=60)
        assert sse_events(r)[-1] == "[DONE]"
        assert sess.get(srv.url("/health")).status_code == 200


def test_300_connections_at_once(srv):
    """More than 256 clients connected at the same time are all served."""
    n = 300
    socks = [open_stream(srv.port, {"prompt": f"client {i}", "max_tokens": 2, "temperature": 0})
             for i in range(n)]
    ok = 0
    for s in socks:
        got = read_until(s, b"}}", timeout=120)  # the body ends with the usage object
        ok += got.startswith(b"HTTP/1.1 200 ")
        s.close()
    assert ok == n
