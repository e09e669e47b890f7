"""Start-up, readiness and shutdown of `cllm serve`: 503 while the model
loads, refusing to start (with the numbers) when one max-len request cannot
fit, what start-up prints, a full waiting queue (503), and SIGTERM/SIGINT
(stop accepting, let running requests finish within --shutdown-timeout,
abort the rest, exit 0)."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import threading
import time

import pytest
import requests

from server_util import CllmServer, sse_events, tiny_model


def test_health_is_503_while_loading(cllm_bin, tmp_path):
    # A FIFO as the model: opening it for loading blocks until we write to it,
    # so the server is observably "loading" for as long as we like.
    fifo = tmp_path / "model.gguf"
    os.mkfifo(fifo)
    srv = CllmServer(cllm_bin, fifo, wait_ready=False)
    try:
        srv.wait_port()
        r = requests.get(srv.url("/health"), timeout=10)
        assert r.status_code == 503 and r.json()["error"]["code"] == "loading"
        r = requests.post(srv.url("/v1/completions"), json={"prompt": "x"}, timeout=10)
        assert r.status_code == 503
        assert "cllm:server_ready" in requests.get(srv.url("/metrics"), timeout=10).text
        try:
            with open(fifo, "w") as f:  # unblocks the loader, which refuses a FIFO
                f.write("not a model")
        except BrokenPipeError:
            pass
        assert srv.proc.wait(30) == 1  # loading fails: exit 1
    finally:
        srv.kill()


def test_startup_prints_capacity_and_how_to_call(cllm_bin, model_factory):
    with CllmServer(cllm_bin, tiny_model(model_factory), "--max-model-len", 2048, "--kv-cache-memory", "4MiB",
                    "--block-size", 32) as srv:
        log = srv.log()
        m = re.search(r"KV cache .*: (\d+) tokens; maximum concurrency at 2048 tokens per request: (\d+)", log)
        assert m, log
        assert int(m.group(1)) > 2048 and int(m.group(2)) >= 1
        assert f"http://127.0.0.1:{srv.port}/v1" in log and "curl " in log


def test_refuses_a_kv_budget_too_small_for_one_request(run_cllm, model_factory):
    r = run_cllm("serve", tiny_model(model_factory), "--port", "0", "--max-model-len", 4096, "--kv-cache-memory",
                 "64KiB", timeout=60)
    assert r.returncode == 1
    assert "cannot hold one request" in r.stderr and "4096" in r.stderr and "blocks" in r.stderr, r.stderr


@pytest.mark.parametrize("args,needle", [
    (["--max-model-len", "100000"], "trained context"),
    (["--kv-cache-memory", "lots"], "kv-cache-memory"),
    (["--block-size", "12"], "block-size"),
    (["--port", "70000"], "--port"),
    (["--bogus"], "unknown option"),
])
def test_bad_options(run_cllm, model_factory, args, needle):
    r = run_cllm("serve", tiny_model(model_factory), "--port", "0", *args, timeout=60)
    assert r.returncode == 1 and needle in r.stderr, r.stderr


def test_port_in_use(cllm_bin, run_cllm, model_factory):
    with CllmServer(cllm_bin, tiny_model(model_factory), "--kv-cache-memory", "16MiB") as srv:
        r = run_cllm("serve", tiny_model(model_factory), "--port", srv.port, timeout=60)
        assert r.returncode == 1 and "cannot listen" in r.stderr, r.stderr


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_when_idle_exits_0(cllm_bin, model_factory, sig):
    srv = CllmServer(cllm_bin, tiny_model(model_factory), "--kv-cache-memory", "16MiB")
    assert srv.post("/v1/completions", {"prompt": "hi", "max_tokens": 2}).status_code == 200
    t0 = time.time()
    assert srv.stop(sig) == 0
    assert time.time() - t0 < 5
    assert "stopped" in srv.log()


def test_queue_full_is_503(cllm_bin, model_factory):
    with CllmServer(cllm_bin, tiny_model(model_factory, n_ctx=8192), "--max-model-len", 8192, "--max-num-seqs", 1,
                    "--max-waiting", 1, "--kv-cache-memory", "64MiB") as srv:
        body = {"prompt": "hello", "max_tokens": 8000, "ignore_eos": True, "temperature": 0, "stream": True}
        held = []
        for _ in range(2):  # one running, one waiting
            r = requests.post(srv.url("/v1/completions"), json=body, stream=True, timeout=60)
            assert r.status_code == 200
            held.append(r)
        r = srv.post("/v1/completions", {"prompt": "x", "max_tokens": 2})
        assert r.status_code == 503 and r.json()["error"]["code"] == "queue_full", r.text
        for h in held:
            h.close()
        deadline = time.time() + 10
        while time.time() < deadline:
            r = srv.post("/v1/completions", {"prompt": "x", "max_tokens": 2})
            if r.status_code == 200:
                break
            time.sleep(0.05)
        assert r.status_code == 200


def test_sigterm_lets_short_requests_finish_and_aborts_long_ones(cllm_bin, real_model_path):
    srv = CllmServer(cllm_bin, real_model_path, "--max-model-len", 1024, "--kv-cache-memory", "128MiB",
                     "--shutdown-timeout", 3)
    try:
        results = {}
        long_started = threading.Event()

        def long_stream():
            body = {"prompt": "Write a long story.", "max_tokens": 900, "ignore_eos": True, "temperature": 0,
                    "stream": True}
            with requests.post(srv.url("/v1/completions"), json=body, stream=True, timeout=120) as r:
                events = []
                for raw in r.iter_lines():
                    if raw:
                        events.append(raw.decode())
                        long_started.set()
                results["long_stream"] = events

        def long_whole():
            body = {"prompt": "Write another long story.", "max_tokens": 900, "ignore_eos": True,
                    "temperature": 0}
            results["long_whole"] = requests.post(srv.url("/v1/completions"), json=body, timeout=120)

        threads = [threading.Thread(target=long_stream), threading.Thread(target=long_whole)]
        for t in threads:
            t.start()
        assert long_started.wait(60)
        with requests.Session() as keep_alive:
            assert keep_alive.get(srv.url("/health")).status_code == 200
            short = threading.Thread(target=lambda: results.setdefault(
                "short", requests.post(srv.url("/v1/completions"), json={"prompt": "Hi", "max_tokens": 3,
                                                                         "temperature": 0}, timeout=60)))
            short.start()
            time.sleep(0.3)
            t0 = time.time()
            srv.send_signal(signal.SIGTERM)
            time.sleep(0.3)
            # Draining: no new connections; an open keep-alive connection gets 503.
            with pytest.raises(requests.ConnectionError):
                requests.get(srv.url("/health"), timeout=5)
            assert keep_alive.get(srv.url("/health"), timeout=5).status_code == 503
            short.join(60)
        rc = srv.wait_exit(60)
        elapsed = time.time() - t0
        for t in threads:
            t.join(60)
        assert rc == 0, srv.log()
        assert 2.5 < elapsed < 20, elapsed
        assert results["short"].status_code == 200
        assert results["short"].json()["choices"][0]["finish_reason"] == "length"
        whole = results["long_whole"]
        assert whole.status_code == 503 and whole.json()["error"]["code"] == "aborted"
        events = results["long_stream"]
        assert events[-1] == "data: [DONE]"
        assert '"code":"aborted"' in events[-2]
        assert re.search(r"aborting [23] requests", srv.log()), srv.log()
    finally:
        srv.kill()


TEMPLATE = ("{{ bos_token }}{% for m in messages %}"
            "{% if m['role'] == 'system' and not loop.first %}{{ raise_exception('system must come first') }}{% endif %}"
            "[{{ m['role'] }}] {{ m['content'] | trim }}\n{% endfor %}"
            "{% if add_generation_prompt %}[assistant] {% endif %}")


def test_chat_template_file(cllm_bin, model_factory, tmp_path):
    path = tmp_path / "tmpl.jinja"
    path.write_text(TEMPLATE)
    # Gemma's vocabulary: no SentencePiece space prefix after the BOS.
    model = model_factory("gemma3", n_ctx=1024)
    with CllmServer(cllm_bin, model, "--kv-cache-memory", "16MiB", "--chat-template", path) as srv:
        msgs = [{"role": "developer", "content": " be brief "},
                {"role": "user", "content": [{"type": "text", "text": "hi"}, {"type": "text", "text": "there"}]}]
        ids = srv.tokenize(messages=msgs)
        text = srv.post("/detokenize", {"tokens": ids}).json()["prompt"]
        assert text == "<bos>[system] be brief\n[user] hi\nthere\n[assistant] "
        ids_no_gen = srv.tokenize(messages=msgs, add_generation_prompt=False)
        assert srv.post("/detokenize", {"tokens": ids_no_gen}).json()["prompt"].endswith("there\n")
        r = srv.post("/v1/chat/completions", {"messages": msgs, "max_tokens": 2})
        assert r.status_code == 200 and r.json()["usage"]["prompt_tokens"] == len(ids)
        # raise_exception in the template is the client's mistake: 400 with its message
        r = srv.post("/v1/chat/completions", {"messages": msgs[::-1], "max_tokens": 2})
        assert r.status_code == 400 and "system must come first" in r.json()["error"]["message"]


def test_broken_chat_template_refuses_to_start(run_cllm, model_factory, tmp_path):
    path = tmp_path / "bad.jinja"
    path.write_text("{% for m in messages %}{{ m.content }")
    r = run_cllm("serve", tiny_model(model_factory), "--port", "0", "--chat-template", path, timeout=60)
    assert r.returncode == 1 and "--chat-template" in r.stderr, r.stderr
    r = run_cllm("serve", tiny_model(model_factory), "--port", "0", "--chat-template", tmp_path / "none", timeout=60)
    assert r.returncode == 1 and "cannot open" in r.stderr, r.stderr
