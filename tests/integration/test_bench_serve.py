"""`cllm bench serve` and `cllm bench plot` (issue 6).

Most tests run the load generator against StubServer, a small OpenAI-compatible
server written here: a whitespace tokenizer (one word, one token; /tokenize and
/detokenize in vLLM's shape, BOS added for completions), streaming completions
and chat completions that produce exactly max_tokens chunks of one token each,
usage in a last chunk, and switches for misbehaviour: HTTP 500 for every k-th
request, an error event in the middle of a stream, a connection dropped in the
middle of a stream, no usage, CRLF line ends, bytes written in small random
pieces (SSE events split anywhere), a required API key. Because its token
counts are exact, the report's counts can be checked exactly.

The last tests run against `cllm serve` on a tiny synthetic model, when the
server is built (they are skipped while `cllm serve` is a placeholder).
"""

from __future__ import annotations

import json
import random
import shutil
import socket
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

VOCAB = [f"w{i}" for i in range(5000)]
BOS = 1


class StubServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128  # the default of 5 drops bursts of connections (1 s SYN retries)

    def __init__(self, **opts):
        super().__init__(("127.0.0.1", 0), StubHandler)
        self.fail_every = opts.get("fail_every", 0)        # HTTP 500 for request k, 2k, ...
        self.error_event_every = opts.get("error_event_every", 0)  # error event after 2 chunks
        self.drop_every = opts.get("drop_every", 0)        # connection closed after 2 chunks
        self.usage = opts.get("usage", True)
        self.crlf = opts.get("crlf", False)
        self.split = opts.get("split", True)
        self.tokenizer = opts.get("tokenizer", True)
        self.api_key = opts.get("api_key")
        self.delay = opts.get("delay", 0.0)                # seconds between tokens
        self.lock = threading.Lock()
        self.gen_count = 0
        self.bodies: list[dict] = []
        self.active = 0
        self.peak_active = 0
        self.rng = random.Random(7)
        self.thread = threading.Thread(target=self.serve_forever, daemon=True)
        self.thread.start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.shutdown()
        self.server_close()


def tokenize(text: str) -> list[int]:
    return [VOCAB.index(w) if w in VOCAB else 2 + (sum(map(ord, w)) % (len(VOCAB) - 2)) for w in text.split()]


class StubHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    wbufsize = 1 << 16  # a reply leaves in one write unless flushed (no Nagle/delayed-ACK stalls)
    server: StubServer

    def setup(self):
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, *args):
        pass

    def reply_json(self, status: int, obj):
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def authorized(self) -> bool:
        if not self.server.api_key:
            return True
        if self.headers.get("Authorization") == f"Bearer {self.server.api_key}":
            return True
        self.reply_json(401, {"error": {"message": "Incorrect API key", "type": "invalid_request_error"}})
        return False

    def do_GET(self):
        if not self.authorized():
            return
        if self.path == "/v1/models":
            self.reply_json(200, {"object": "list", "data": [{"id": "stub-model", "object": "model"}]})
        else:
            self.reply_json(404, {"error": {"message": "not found"}})

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
        if not self.authorized():
            return
        if self.path in ("/tokenize", "/detokenize"):
            if not self.server.tokenizer:
                return self.reply_json(404, {"error": {"message": "not found"}})
            if self.path == "/tokenize":
                ids = tokenize(body["prompt"])
                if body.get("add_special_tokens", True):
                    ids = [BOS] + ids
                return self.reply_json(200, {"tokens": ids, "count": len(ids)})
            ids = body["tokens"]
            if any(not 0 <= t < len(VOCAB) for t in ids):
                return self.reply_json(400, {"error": {"message": "token id out of range"}})
            return self.reply_json(200, {"prompt": " ".join(VOCAB[t] for t in ids if t != BOS)})
        if self.path not in ("/v1/completions", "/v1/chat/completions"):
            return self.reply_json(404, {"error": {"message": "not found"}})
        srv = self.server
        with srv.lock:
            srv.gen_count += 1
            k = srv.gen_count
            srv.bodies.append(body)
            srv.active += 1
            srv.peak_active = max(srv.peak_active, srv.active)
        try:
            self.generate(body, k)
        finally:
            with srv.lock:
                srv.active -= 1

    def generate(self, body: dict, k: int):
        srv = self.server
        if srv.fail_every and k % srv.fail_every == 0:
            return self.reply_json(500, {"error": {"message": f"stub failure {k}", "type": "server_error"}})
        chat = self.path == "/v1/chat/completions"
        if chat:
            prompt_tokens = 3 + sum(len(tokenize(m["content"])) for m in body["messages"])
        else:
            prompt_tokens = 1 + len(tokenize(body["prompt"]))
        n = body["max_tokens"]
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        nl = "\r\n" if srv.crlf else "\n"

        def event(obj) -> str:
            return "data: " + (obj if isinstance(obj, str) else json.dumps(obj)) + nl + nl

        def chunk(text, finish=None):
            if chat:
                choice = {"index": 0, "delta": {"content": text}, "finish_reason": finish}
            else:
                choice = {"index": 0, "text": text, "finish_reason": finish}
            return event({"id": f"cmpl-{k}", "object": "chunk", "model": "stub-model", "choices": [choice]})

        out = ""
        if chat:
            out += event({"id": f"cmpl-{k}", "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""},
                                                         "finish_reason": None}]})
            out += ": keep-alive comment" + nl + nl
        self.send_pieces(out)
        for i in range(n):
            if srv.delay:
                time.sleep(srv.delay)
            if i == 2 and srv.error_event_every and k % srv.error_event_every == 0:
                self.send_pieces(event({"error": {"message": f"stub error event {k}", "code": 500}}))
                self.send_pieces(event("[DONE]"))
                return self.end_chunks()
            if i == 2 and srv.drop_every and k % srv.drop_every == 0:
                self.wfile.flush()
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)
                return
            self.send_pieces(chunk(f" t{i}", "length" if i == n - 1 else None))
        if srv.usage and body.get("stream_options", {}).get("include_usage"):
            self.send_pieces(event({"id": f"cmpl-{k}", "choices": [],
                                    "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": n,
                                              "total_tokens": prompt_tokens + n}}))
        self.send_pieces(event("[DONE]"))
        self.end_chunks()

    def send_pieces(self, s: str):
        data = s.encode()
        srv = self.server
        pos = 0
        while pos < len(data):
            step = srv.rng.randint(1, 23) if srv.split else len(data)
            piece = data[pos:pos + step]
            pos += step
            self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            if srv.split:
                self.wfile.flush()
        self.wfile.flush()

    def end_chunks(self):
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


def bench(run_cllm, base_url: str, *args, timeout: float = 120) -> subprocess.CompletedProcess:
    return run_cllm("bench", "serve", "--base-url", base_url, "--no-progress", *args, timeout=timeout)


def run_json(run_cllm, tmp_path, base_url, *args, expect_rc=0, timeout=120) -> tuple[dict, subprocess.CompletedProcess]:
    out = tmp_path / f"result-{time.monotonic_ns()}.json"
    p = bench(run_cllm, base_url, "--save-result", out, *args, timeout=timeout)
    assert p.returncode == expect_rc, p.stdout + p.stderr
    return json.loads(out.read_text()), p


SUMMARY_FIELDS = ["date", "backend", "label", "base_url", "endpoint", "model_id", "num_prompts", "request_rate",
                  "max_concurrency", "seed", "duration", "completed", "failed", "total_input_tokens",
                  "total_output_tokens", "request_throughput", "output_throughput", "total_token_throughput",
                  "max_output_tokens_per_s", "max_concurrent_requests"]
PER_REQUEST = ["input_lens", "output_lens", "ttfts", "itls", "e2els", "start_times", "errors"]


def test_counts_and_fields_random_dataset(run_cllm, tmp_path):
    with StubServer() as srv:
        res, p = run_json(run_cllm, tmp_path, srv.base_url, "--num-prompts", "12", "--random-input-len", "20",
                          "--random-output-len", "7", "--max-concurrency", "4", "--seed", "3")
        bodies = srv.bodies
        peak = srv.peak_active
    for key in SUMMARY_FIELDS + PER_REQUEST:
        assert key in res, key
    for m in ("ttft", "tpot", "itl", "e2el"):
        for s in ("mean", "median", "std", "p90", "p99"):
            assert isinstance(res[f"{s}_{m}_ms"], float), (s, m)
    assert res["completed"] == 12 and res["failed"] == 0
    assert res["num_prompts"] == 12 and res["max_concurrency"] == 4 and res["model_id"] == "stub-model"
    assert res["total_input_tokens"] == 12 * 20          # the stub's usage: BOS + 19 words
    assert res["total_output_tokens"] == 12 * 7
    assert res["input_lens"] == [20] * 12 and res["output_lens"] == [7] * 12
    assert all(len(g) == 6 for g in res["itls"])          # 7 chunks of text, 6 gaps
    assert res["errors"] == [""] * 12
    assert all(t > 0 for t in res["ttfts"]) and all(e >= t for e, t in zip(res["e2els"], res["ttfts"]))
    assert res["max_concurrent_requests"] <= 4 and peak <= 4
    assert res["output_throughput"] == pytest.approx(84 / res["duration"], rel=1e-6)
    assert res["request_throughput"] == pytest.approx(12 / res["duration"], rel=1e-6)
    assert res["total_token_throughput"] == pytest.approx((240 + 84) / res["duration"], rel=1e-6)
    assert len(bodies) == 12
    for b in bodies:
        assert b["model"] == "stub-model" and b["stream"] is True and b["ignore_eos"] is True
        assert b["max_tokens"] == 7 and b["stream_options"] == {"include_usage": True}
        assert len(b["prompt"].split()) == 19
    assert "Successful requests:                     12" in p.stdout
    assert "Total generated tokens:                  84" in p.stdout
    for line in ("Mean TTFT (ms):", "P90 TPOT (ms):", "P99 ITL (ms):", "Median E2EL (ms):"):
        assert line in p.stdout


def test_failures_are_counted_not_fatal(run_cllm, tmp_path):
    """HTTP 500s, error events inside a 200 stream and dropped connections are failures with a reason."""
    with StubServer(fail_every=3, error_event_every=5, drop_every=7) as srv:
        res, p = run_json(run_cllm, tmp_path, srv.base_url, "--num-prompts", "21", "--random-input-len", "8",
                          "--random-output-len", "5", "--max-concurrency", "1")
    # sequential, so request k (1-based) is the stub's k-th: 3,6,9,12,15,18,21 -> 500;
    # 5,10,20 -> error event; 7,14 -> dropped (21 is already a 500, 15 too)
    failed = {3, 6, 9, 12, 15, 18, 21, 5, 10, 20, 7, 14}
    assert res["failed"] == len(failed) and res["completed"] == 21 - len(failed)
    assert res["total_output_tokens"] == 5 * (21 - len(failed))
    for k in range(1, 22):
        err = res["errors"][k - 1]
        if k in failed:
            assert err, k
            assert res["output_lens"][k - 1] == 0
        else:
            assert err == "", (k, err)
    assert "stub failure 3" in res["errors"][2] and "HTTP 500" in res["errors"][2]
    assert "stub error event 5" in res["errors"][4]
    assert res["errors"][6]  # the dropped connection: a transport error or an unfinished stream
    assert "Failed requests:                         12" in p.stdout


def test_all_requests_failing_exits_nonzero(run_cllm, tmp_path):
    with StubServer(api_key="sekrit") as srv:
        res, p = run_json(run_cllm, tmp_path, srv.base_url, "--num-prompts", "3", "--random-input-len", "4",
                          "--random-output-len", "2", "--model", "stub-model", expect_rc=1)
        assert res["failed"] == 3 and all("HTTP 401" in e for e in res["errors"])
        res, _ = run_json(run_cllm, tmp_path, srv.base_url, "--num-prompts", "3", "--random-input-len", "4",
                          "--random-output-len", "2", "--api-key", "sekrit")
        assert res["completed"] == 3 and res["total_input_tokens"] == 12


@pytest.mark.parametrize("crlf,split", [(True, True), (False, False)])
def test_sse_framing_variants(run_cllm, tmp_path, crlf, split):
    with StubServer(crlf=crlf, split=split) as srv:
        res, _ = run_json(run_cllm, tmp_path, srv.base_url, "--num-prompts", "6", "--random-input-len", "10",
                          "--random-output-len", "9")
    assert res["completed"] == 6 and res["total_output_tokens"] == 54
    assert all(len(g) == 8 for g in res["itls"])


def test_chat_endpoint_role_chunk_is_not_the_first_token(run_cllm, tmp_path):
    with StubServer() as srv:
        res, _ = run_json(run_cllm, tmp_path, srv.base_url, "--endpoint", "/v1/chat/completions",
                          "--num-prompts", "4", "--random-input-len", "10", "--random-output-len", "6")
        bodies = srv.bodies
    assert res["completed"] == 4 and res["total_output_tokens"] == 24
    assert all(len(g) == 5 for g in res["itls"])
    # chat: no BOS subtracted; the stub counts 3 template tokens + the words
    assert res["input_lens"] == [13] * 4
    assert all(b["messages"][0]["role"] == "user" and len(b["messages"][0]["content"].split()) == 10
               for b in bodies)


def test_without_usage_chunks_are_counted(run_cllm, tmp_path):
    with StubServer(usage=False) as srv:
        res, _ = run_json(run_cllm, tmp_path, srv.base_url, "--num-prompts", "3", "--random-input-len", "10",
                          "--random-output-len", "4")
    assert res["completed"] == 3 and res["output_lens"] == [4] * 3
    assert res["input_lens"] == [10] * 3  # from the dataset's own tokenizer round trips


def test_word_list_without_tokenizer(run_cllm, tmp_path):
    with StubServer(tokenizer=False) as srv:
        res, p = run_json(run_cllm, tmp_path, srv.base_url, "--num-prompts", "3", "--random-input-len", "12",
                          "--random-output-len", "2")
        bodies = srv.bodies
    assert "word list" in p.stderr and res["prompt_source"].startswith("word list")
    assert all(len(b["prompt"].split()) == 12 for b in bodies)
    assert res["input_lens"] == [13] * 3  # the server's usage (BOS + 12 words)


def test_seed_makes_the_same_prompts_and_lengths(run_cllm, tmp_path):
    def prompts(seed):
        with StubServer() as srv:
            run_json(run_cllm, tmp_path, srv.base_url, "--num-prompts", "5", "--random-input-len", "16",
                     "--random-output-len", "6", "--random-range-ratio", "0.5", "--seed", str(seed),
                     "--max-concurrency", "1")
            return [(b["prompt"], b["max_tokens"]) for b in srv.bodies]

    a, b, c = prompts(1), prompts(1), prompts(2)
    assert a == b and a != c
    assert all(8 <= len(p.split()) + 1 <= 24 and 3 <= m <= 9 for p, m in a)
    assert len({m for _, m in a + c}) > 1


def test_prefix_repetition(run_cllm, tmp_path):
    with StubServer() as srv:
        res, _ = run_json(run_cllm, tmp_path, srv.base_url, "--dataset-name", "prefix-repetition",
                          "--num-prompts", "6", "--num-prefixes", "2", "--prefix-len", "10", "--suffix-len", "5",
                          "--random-output-len", "3")
        words = [b["prompt"].split() for b in srv.bodies]
    assert res["completed"] == 6 and res["input_lens"] == [15] * 6
    prefixes = {tuple(w[:9]) for w in words}
    assert len(prefixes) == 2 and all(len(w) == 14 for w in words)
    assert len({tuple(w[9:]) for w in words}) == 6


def test_jsonl_dataset_and_save_dataset_roundtrip(run_cllm, tmp_path):
    ds = tmp_path / "prompts.jsonl"
    ds.write_text(json.dumps({"prompt": "w5 w6 w7", "max_tokens": 4}) + "\n\n" +
                  json.dumps({"prompt": "w8 w9"}) + "\n")
    with StubServer() as srv:
        res, _ = run_json(run_cllm, tmp_path, srv.base_url, "--dataset-name", "jsonl", "--dataset-path", ds,
                          "--random-output-len", "2")
        assert sorted(b["prompt"] for b in srv.bodies) == ["w5 w6 w7", "w8 w9"]
    assert res["completed"] == 2 and res["output_lens"] == [4, 2] and res["input_lens"] == [4, 3]

    chat = tmp_path / "chat.jsonl"
    chat.write_text(json.dumps({"messages": [{"role": "system", "content": "w1 w2"},
                                             {"role": "user", "content": "w3"}], "max_tokens": 3}) + "\n")
    with StubServer() as srv:
        res, _ = run_json(run_cllm, tmp_path, srv.base_url, "--dataset-name", "jsonl", "--dataset-path", chat,
                          "--endpoint", "/v1/chat/completions", "--num-prompts", "3")
        assert all(len(b["messages"]) == 2 for b in srv.bodies)
    assert res["completed"] == 3 and res["total_output_tokens"] == 9
    p = bench(run_cllm, "http://127.0.0.1:9", "--dataset-name", "jsonl", "--dataset-path", chat)
    assert p.returncode == 1 and "needs --endpoint /v1/chat/completions" in p.stderr

    saved = tmp_path / "saved.jsonl"
    with StubServer() as srv:
        run_json(run_cllm, tmp_path, srv.base_url, "--num-prompts", "4", "--random-input-len", "9",
                 "--random-output-len", "3", "--save-dataset", saved, "--max-concurrency", "1")
        first = [b["prompt"] for b in srv.bodies]
    with StubServer(tokenizer=False) as srv:
        res, _ = run_json(run_cllm, tmp_path, srv.base_url, "--dataset-name", "jsonl", "--dataset-path", saved,
                          "--max-concurrency", "1")
        assert [b["prompt"] for b in srv.bodies] == first
    assert res["input_lens"] == [9] * 4 and res["output_lens"] == [3] * 4


def test_request_rate_spreads_arrivals(run_cllm, tmp_path):
    with StubServer() as srv:
        res, _ = run_json(run_cllm, tmp_path, srv.base_url, "--num-prompts", "10", "--random-input-len", "4",
                          "--random-output-len", "2", "--request-rate", "20", "--seed", "1")
        burst, _ = run_json(run_cllm, tmp_path, srv.base_url, "--num-prompts", "10", "--random-input-len", "4",
                            "--random-output-len", "2")
    starts = res["start_times"]
    assert starts == sorted(starts) and starts[-1] - starts[0] > 0.1  # mean gap 50 ms
    assert res["request_rate"] == 20.0 and burst["request_rate"] == "inf"
    assert max(burst["start_times"]) < 0.1


def test_bad_options(run_cllm):
    p = run_cllm("bench", "serve", "--endpoint", "/v1/embeddings")
    assert p.returncode == 1 and "--endpoint must be" in p.stderr
    p = run_cllm("bench", "serve", "--request-rate", "-3")
    assert p.returncode == 1 and "--request-rate" in p.stderr
    p = run_cllm("bench", "serve", "--dataset-name", "sharegpt", "--base-url", "http://127.0.0.1:9")
    assert p.returncode == 1 and "unknown dataset" in p.stderr
    p = run_cllm("bench", "plot", "/tmp/nowhere")
    assert p.returncode == 1 and "usage" in p.stderr


def test_plot(run_cllm, tmp_path):
    assert shutil.which("gnuplot"), "gnuplot is not installed (scripts/setup.sh installs gnuplot-nox)"
    results = []
    with StubServer(delay=0.002) as srv:
        for c in (1, 2, 4):
            out = tmp_path / f"c{c}.json"
            p = bench(run_cllm, srv.base_url, "--num-prompts", "6", "--random-input-len", "6",
                      "--random-output-len", "5", "--max-concurrency", str(c), "--label", "stub",
                      "--save-result", out, *(["--plot", tmp_path / "one"] if c == 1 else []))
            assert p.returncode == 0, p.stderr
            results.append(out)
    assert (tmp_path / "one" / "latency.png").stat().st_size > 1000
    p = run_cllm("bench", "plot", tmp_path / "many", *results)
    assert p.returncode == 0, p.stderr
    for name in ("latency.png", "throughput.png", "plot.gp", "throughput_0.dat"):
        assert (tmp_path / "many" / name).is_file(), name
    rows = [l.split() for l in (tmp_path / "many" / "throughput_0.dat").read_text().splitlines()[1:]]
    assert [r[0] for r in rows] == ["1", "2", "4"]


# ---- against cllm serve ----

def cllm_server(cllm_bin, model, *args):
    from server_util import CllmServer

    return CllmServer(cllm_bin, model, *args)


def test_against_cllm_serve(cllm_bin, run_cllm, model_factory, tmp_path):
    model = model_factory("llama")
    srv = cllm_server(cllm_bin, model, "--max-model-len", "256")
    try:
        base = f"http://127.0.0.1:{srv.port}"
        res, p = run_json(run_cllm, tmp_path, base, "--num-prompts", "8", "--random-input-len", "24",
                          "--random-output-len", "10", "--max-concurrency", "4", "--seed", "5", timeout=300)
        assert res["completed"] == 8 and res["failed"] == 0, res["errors"]
        assert res["output_lens"] == [10] * 8 and res["total_output_tokens"] == 80
        assert "random token ids" in res["prompt_source"]
        # the longest text of at most 24 tokens; on this byte-level toy vocabulary one
        # character (U+FFFD for a stray byte) can be 3 tokens, so it may fall short by 2
        assert all(22 <= n <= 24 for n in res["input_lens"]), res["input_lens"]
        chat, _ = run_json(run_cllm, tmp_path, base, "--endpoint", "/v1/chat/completions", "--num-prompts", "4",
                           "--random-input-len", "12", "--random-output-len", "6", timeout=300)
        assert chat["completed"] == 4 and chat["total_output_tokens"] == 24
        # a request past the context is refused by the server: a failure, not a crash
        bad, _ = run_json(run_cllm, tmp_path, base, "--num-prompts", "2", "--random-input-len", "16",
                          "--random-output-len", "400", expect_rc=1)
        assert bad["failed"] == 2 and all("HTTP 400" in e for e in bad["errors"])
    finally:
        srv.stop()



def test_dry_run_and_warmups(run_cllm, tmp_path):
    saved = tmp_path / "d.jsonl"
    with StubServer() as srv:
        p = bench(run_cllm, srv.base_url, "--num-prompts", "5", "--random-input-len", "6", "--dry-run",
                  "--save-dataset", saved)
        assert p.returncode == 0, p.stderr
        assert srv.gen_count == 0 and len(saved.read_text().splitlines()) == 5
        res, _ = run_json(run_cllm, tmp_path, srv.base_url, "--dataset-name", "jsonl", "--dataset-path", saved,
                          "--random-output-len", "3", "--num-warmups", "2")
        assert srv.gen_count == 7  # 2 warm-ups + 5 measured
    assert res["completed"] == 5 and len(res["ttfts"]) == 5
