#!/usr/bin/env python3
"""Slow-client soak: does `cllm serve` keep answering while thousands of
sockets sit on it with half a request?

Starts `cllm serve` on a free port with timeouts long enough that the slow
sockets stay for the whole measurement, opens --sockets connections that each
send a request line and one header (a third of them also a body shorter than
their Content-Length, a third nothing at all), then, with all of them open,
times --probes GET /health and --probes small completions from a normal
client. Then it restarts the server with the default timeouts, opens the same
sockets again and times how long until the server has closed them all.

usage: bench/slow_clients.py [--model PATH] [--cllm build/cllm] [--sockets 2000] [--probes 20]
                             [--append bench/RESULTS.md]
Prints a Markdown section (and appends it to --append FILE when given)."""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import resource
import select
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def default_model() -> str:
    with open(os.path.join(ROOT, "build-model-path.txt")) as f:
        return f.read().strip()


def cpu_model() -> str:
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return "unknown"


class Server:
    def __init__(self, cllm: str, model: str, *args: str):
        cmd = [cllm, "serve", model, "--host", "127.0.0.1", "--port", "0", "--max-model-len", "512",
               "--kv-cache-memory", "64MiB", *args]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.port = None
        self.lines: list[str] = []
        found = threading.Event()

        def read():
            for line in self.proc.stderr:
                self.lines.append(line)
                m = re.search(r"listening on http://[^:\s]+:(\d+)", line)
                if m and self.port is None:
                    self.port = int(m.group(1))
                    found.set()
            found.set()

        threading.Thread(target=read, daemon=True).start()
        if not found.wait(60) or self.port is None:
            raise SystemExit("cllm serve did not start:\n" + "".join(self.lines))
        deadline = time.time() + 120
        while time.time() < deadline:
            try:
                if self.get("/health")[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.1)
        raise SystemExit("cllm serve was not ready:\n" + "".join(self.lines))

    def get(self, path: str, timeout: float = 30):
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=timeout) as r:
            return r.status, r.read()

    def complete(self, timeout: float = 60):
        body = json.dumps({"prompt": "The capital of France is", "max_tokens": 8, "temperature": 0}).encode()
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}/v1/completions", data=body,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, json.loads(r.read())

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def open_slow(port: int, n: int) -> list[socket.socket]:
    socks = []
    for i in range(n):
        s = socket.create_connection(("127.0.0.1", port))
        kind = i % 3
        if kind == 0:
            s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: localhost\r\n")
        elif kind == 1:
            s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: localhost\r\nContent-Length: 100\r\n\r\n{\"pro")
        socks.append(s)
    return socks


def time_until_closed(socks: list[socket.socket], limit: float) -> float:
    """Seconds until the server closed every socket (or limit)."""
    t0 = time.time()
    open_ = {s.fileno(): s for s in socks}
    poller = select.poll()
    for fd in open_:
        poller.register(fd, select.POLLIN | select.POLLHUP | select.POLLERR)
    while open_ and time.time() - t0 < limit:
        for fd, _ in poller.poll(200):
            try:
                data = open_[fd].recv(4096)
            except OSError:
                data = b""
            if not data:
                poller.unregister(fd)
                del open_[fd]
    return time.time() - t0 if not open_ else float("inf")


def ms(xs):
    return f"{statistics.median(xs) * 1000:.1f} / {max(xs) * 1000:.1f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=None)
    ap.add_argument("--cllm", default=os.path.join(ROOT, "build", "cllm"))
    ap.add_argument("--sockets", type=int, default=2000)
    ap.add_argument("--probes", type=int, default=20)
    ap.add_argument("--append", default=None)
    a = ap.parse_args()
    model = a.model or default_model()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = a.sockets + 512
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(want, hard) if hard != resource.RLIM_INFINITY else want,
                                                    hard))

    srv = Server(a.cllm, model, "--timeout-keep-alive", "600", "--request-header-timeout", "600",
                 "--request-body-timeout", "600")
    try:
        t0 = time.time()
        socks = open_slow(srv.port, a.sockets)
        open_s = time.time() - t0
        time.sleep(1)
        health, completion, failures = [], [], 0
        for _ in range(a.probes):
            t0 = time.time()
            ok = srv.get("/health", timeout=30)[0] == 200
            health.append(time.time() - t0)
            t0 = time.time()
            status, body = srv.complete()
            completion.append(time.time() - t0)
            failures += (not ok) + (status != 200 or body["usage"]["completion_tokens"] != 8)
        for s in socks:
            s.close()
    finally:
        srv.stop()

    srv = Server(a.cllm, model)  # the default timeouts
    try:
        socks = open_slow(srv.port, a.sockets)
        closed_s = time_until_closed(socks, 120)
        for s in socks:
            s.close()
        status, _ = srv.get("/health")
    finally:
        srv.stop()

    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    out = [f"## Reliability: slow clients, {when} (bench/slow_clients.py)", "",
           f"`bench/slow_clients.py --sockets {a.sockets} --probes {a.probes}` on {cpu_model()} "
           f"({os.cpu_count()} CPUs), model {os.path.basename(model)}. {a.sockets} sockets opened in "
           f"{open_s:.2f} s, each sending a request line and a header (a third also a short body, a third "
           "nothing), held open; meanwhile a normal client:", "",
           "| probe (with all slow sockets open) | median / max ms | failed |", "|---|---|---|",
           f"| GET /health, {a.probes}x | {ms(health)} | {failures} of {2 * a.probes} probes |",
           f"| POST /v1/completions, 8 tokens, {a.probes}x | {ms(completion)} | |", "",
           f"With the default timeouts (`--timeout-keep-alive 5`, `--request-header-timeout 10`, "
           f"`--request-body-timeout 60`), the server had closed all {a.sockets} slow sockets "
           f"{closed_s:.1f} s after they were opened, and /health then answered {status}.", ""]
    text = "\n".join(out)
    print(text)
    if a.append:
        with open(a.append, "a") as f:
            f.write("\n" + text)
    return 0 if failures == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
