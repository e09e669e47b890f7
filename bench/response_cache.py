#!/usr/bin/env python3
"""Latency of a response-cache hit against the miss that filled it: one
`cllm serve --response-cache-size N`, distinct greedy prompts each sent twice
in a row (the first a miss, computed by the engine; the second a hit, replayed
from memory), whole and streamed, one request at a time. Checks the
X-Cllm-Cache header and that hit and miss carry the same text.

usage: bench/response_cache.py [--model PATH] [--cllm build/cllm] [--prompts 20] [--max-tokens 64]
                               [--threads 2] [--append bench/RESULTS.md]
Prints a Markdown section (and appends it to --append FILE when given)."""

from __future__ import annotations

import argparse
import datetime
import json
import os
import random
import statistics
import tempfile
import time
from pathlib import Path

import requests

from replicas import ROOT, cpu_model, deploy_test


def timed(url: str, body: dict) -> tuple[float, float, str, str]:
    """(seconds to the first byte of content, seconds to the end, X-Cllm-Cache, text)."""
    t0 = time.perf_counter()
    first = None
    text = ""
    with requests.post(url + "/v1/completions", json=body, stream=True, timeout=600) as r:
        assert r.status_code == 200, r.text
        if body.get("stream"):
            for raw in r.iter_lines():
                if not raw or raw == b"data: [DONE]":
                    continue
                ev = json.loads(raw[len(b"data: "):])
                if first is None and ev["choices"] and ev["choices"][0]["text"]:
                    first = time.perf_counter() - t0
                text += "".join(c["text"] for c in ev["choices"])
        else:
            text = r.json()["choices"][0]["text"]
            first = time.perf_counter() - t0
        return first, time.perf_counter() - t0, r.headers.get("X-Cllm-Cache", ""), text


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", type=Path, default=None, help="default: the gemma-3-270m GGUF (build-model-path.txt)")
    ap.add_argument("--cllm", type=Path, default=ROOT / "build" / "cllm")
    ap.add_argument("--prompts", type=int, default=20)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--append", type=Path)
    args = ap.parse_args()
    model = args.model or Path((ROOT / "build-model-path.txt").read_text().strip())
    dt = deploy_test()
    rng = random.Random(0)
    words = dt.WORDS
    results = {(stream, kind): ([], []) for stream in (False, True) for kind in ("miss", "hit")}
    with tempfile.TemporaryDirectory(prefix="cllm-rcache-") as tmp:
        rep = dt.Replica(args.cllm.resolve(), model, "cache", Path(tmp),
                         ["--threads", args.threads, "--max-model-len", 1024, "--kv-cache-memory", "256MiB",
                          "--response-cache-size", 1024])
        try:
            rep.wait_ready(300)
            load_before = os.getloadavg()
            for stream in (False, True):
                for i in range(args.prompts):
                    body = {"prompt": " ".join(rng.choice(words) for _ in range(32)) + f" {i} {stream}",
                            "max_tokens": args.max_tokens, "temperature": 0, "ignore_eos": True, "stream": stream}
                    miss = timed(rep.url, body)
                    hit = timed(rep.url, body)
                    assert (miss[2], hit[2]) == ("miss", "hit"), (miss[2], hit[2])
                    assert miss[3] == hit[3]
                    for kind, (first, total, _, _) in (("miss", miss), ("hit", hit)):
                        results[(stream, kind)][0].append(first)
                        results[(stream, kind)][1].append(total)
            load_after = os.getloadavg()
            m = rep.metrics()
        finally:
            rep.stop()
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = [f"## Response cache: hit against miss, {now} (bench/response_cache.py)", "",
             f"`bench/response_cache.py --prompts {args.prompts} --max-tokens {args.max_tokens} --threads "
             f"{args.threads}` against `cllm serve {model.name} --response-cache-size 1024`: {args.prompts} distinct "
             f"greedy prompts of 32 words, each sent twice in a row, one request at a time, whole and then streamed "
             f"({args.max_tokens} tokens, `ignore_eos`). Every first request was a miss and every second a hit with "
             f"the same text (`cllm:response_cache_hits_total` {int(m['cllm:response_cache_hits_total#sum'])}, "
             f"misses {int(m['cllm:response_cache_misses_total#sum'])}). CPU: {cpu_model()}; load average "
             f"(1 min) {load_before[0]:.2f} before, {load_after[0]:.2f} after.", "",
             "| request | median ms, miss | median ms, hit | p90 ms, miss | p90 ms, hit | miss / hit (median) |",
             "|---|---:|---:|---:|---:|---:|"]
    for stream, what, idx in ((False, "whole answer, end to end", 1), (True, "streamed, first token", 0),
                              (True, "streamed, end to end", 1)):
        miss, hit = results[(stream, "miss")][idx], results[(stream, "hit")][idx]
        mm, mh = statistics.median(miss) * 1e3, statistics.median(hit) * 1e3
        lines.append(f"| {what} | {mm:.1f} | {mh:.2f} | {pct(miss, 0.9) * 1e3:.1f} | {pct(hit, 0.9) * 1e3:.2f} | "
                     f"{mm / mh:.0f}x |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.append:
        with open(args.append, "a") as f:
            f.write("\n" + text)


if __name__ == "__main__":
    main()
