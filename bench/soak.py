#!/usr/bin/env python3
"""Load-and-abort soak: many streaming clients, a share of them leaving
mid-stream, for a fixed time; then is every KV block back and is the server
still answering?

Starts `cllm serve` on a free port (or uses --base-url), runs --clients
threads for --seconds, each sending streaming completions one after another
(random words as the prompt, a new one each time, so no prefix cache helps)
and, with probability --abort, closing its socket after a random number of
streamed chunks. Counts completed streams, deliberate aborts and errors (any
non-200 status, a stream that ends without [DONE], a connection the server
broke). Afterwards it waits for the running-request gauge to reach 0 and
reads cllm:kv_cache_blocks_used from /metrics (it must be 0: every block of
every aborted and finished request returned), and the server's resident
memory before and after.

usage: bench/soak.py [--model PATH] [--cllm build/cllm] [--clients 200] [--seconds 180]
                     [--abort 0.3] [--max-tokens 48] [--append bench/RESULTS.md]
Prints a Markdown section (and appends it to --append FILE when given)."""

from __future__ import annotations

import argparse
import datetime
import http.client
import json
import os
import random
import re
import socket
import subprocess
import threading
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
WORDS = ("time person year way day thing man world life hand part child eye woman place work week case point "
         "government company number group problem fact river stone light music garden letter").split()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def metrics(port: int) -> dict[str, float]:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    out = {}
    for line in text.splitlines():
        m = re.match(r"^([a-zA-Z_:]+)(?:\{[^}]*\})? ([0-9.eE+-]+)$", line)
        if m:
            out[m.group(1)] = float(m.group(2))
    return out


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        kb = next(int(l.split()[1]) for l in f if l.startswith("VmRSS:"))
    return kb / 1024


class Tally:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.completed = self.aborted = 0
        self.errors: list[str] = []

    def add(self, what: str, detail: str = "") -> None:
        with self.lock:
            if what == "completed":
                self.completed += 1
            elif what == "aborted":
                self.aborted += 1
            else:
                self.errors.append(detail)


def one_request(port: int, rng: random.Random, a: argparse.Namespace, tally: Tally) -> None:
    prompt = " ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 64)))
    body = json.dumps({"prompt": prompt, "max_tokens": a.max_tokens, "stream": True, "temperature": 0.8,
                       "seed": rng.randrange(1 << 30)})
    abort_after = rng.randint(1, a.max_tokens) if rng.random() < a.abort else None
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        conn.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
        resp = conn.getresponse()
        if resp.status != 200:
            tally.add("error", f"status {resp.status}: {resp.read()[:200]!r}")
            return
        chunks = 0
        while True:
            line = resp.readline()
            if not line:
                tally.add("error", "the stream ended without [DONE]")
                return
            if not line.startswith(b"data: "):
                continue
            if line.strip() == b"data: [DONE]":
                tally.add("completed")
                return
            chunks += 1
            if abort_after is not None and chunks >= abort_after:
                conn.sock.shutdown(socket.SHUT_RDWR)
                tally.add("aborted")
                return
    except (OSError, http.client.HTTPException) as e:
        tally.add("error", f"{type(e).__name__}: {e}")
    finally:
        conn.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model")
    ap.add_argument("--cllm", default=os.path.join(ROOT, "build", "cllm"))
    ap.add_argument("--clients", type=int, default=200)
    ap.add_argument("--seconds", type=float, default=180)
    ap.add_argument("--abort", type=float, default=0.3)
    ap.add_argument("--max-tokens", type=int, default=48)
    ap.add_argument("--append")
    a = ap.parse_args()
    model = a.model or open(os.path.join(ROOT, "build-model-path.txt")).read().strip()
    port = free_port()
    srv = subprocess.Popen([a.cllm, "serve", model, "--port", str(port), "--max-num-seqs", "64",
                            "--max-waiting", str(4 * a.clients)], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
    try:
        for _ in range(600):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1)
                break
            except OSError:
                time.sleep(0.1)
        rss_before = rss_mib(srv.pid)
        tally, stop_at = Tally(), time.time() + a.seconds

        def client(i: int) -> None:
            rng = random.Random(i * 7919 + int(time.time()))
            while time.time() < stop_at:
                one_request(port, rng, a, tally)

        threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(a.clients)]
        t0 = time.time()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall = time.time() - t0
        for _ in range(300):  # the engine notices the last aborts at its next step
            m = metrics(port)
            if m.get("vllm:num_requests_running", 1) == 0 and m.get("vllm:num_requests_waiting", 1) == 0:
                break
            time.sleep(0.1)
        m = metrics(port)
        health = urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5).status
        rss_after = rss_mib(srv.pid)
        alive = srv.poll() is None
    finally:
        srv.terminate()
        rc = srv.wait(timeout=60)
    cpu = re.search(r"model name\s*:\s*(.*)", open("/proc/cpuinfo").read()).group(1).strip()
    kinds: dict[str, int] = {}
    for e in tally.errors:
        kinds[e[:60]] = kinds.get(e[:60], 0) + 1
    lines = [
        f"### Load-and-abort soak, {datetime.datetime.utcnow():%Y-%m-%d %H:%M} UTC",
        "",
        f"`bench/soak.py --clients {a.clients} --seconds {a.seconds:g} --abort {a.abort:g} --max-tokens "
        f"{a.max_tokens}` against `cllm serve {os.path.basename(model)}`; CPU: {cpu}, {os.cpu_count()} CPUs.",
        "",
        "| measure | value |",
        "|---|---:|",
        f"| streaming requests completed | {tally.completed} |",
        f"| aborted mid-stream by the client | {tally.aborted} |",
        f"| errors | {len(tally.errors)} |",
        f"| wall time (s) | {wall:.0f} |",
        f"| KV blocks in use after the run (of {m.get('cllm:kv_cache_blocks_total', 0):.0f}) | "
        f"{m.get('cllm:kv_cache_blocks_used', -1):.0f} |",
        f"| requests running / waiting after the run | {m.get('vllm:num_requests_running', -1):.0f} / "
        f"{m.get('vllm:num_requests_waiting', -1):.0f} |",
        f"| /health after the run | {health} |",
        f"| resident memory before / after (MiB) | {rss_before:.0f} / {rss_after:.0f} |",
        f"| server alive at the end, exit status on SIGTERM | {'yes' if alive else 'NO'}, {rc} |",
    ]
    if kinds:
        lines += ["", "Errors: " + "; ".join(f"{n} x {k}" for k, n in kinds.items())]
    text = "\n".join(lines) + "\n"
    print(text)
    if a.append:
        with open(a.append, "a") as f:
            f.write("\n" + text)
    ok = not tally.errors and m.get("cllm:kv_cache_blocks_used", -1) == 0 and alive and rc == 0
    raise SystemExit(0 if ok else 1)


if __name__ == "__main__":
    main()
