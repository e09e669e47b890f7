#!/usr/bin/env python3
"""Serving with long prompts, the KV cache in f16 against 8 bits in one
`--kv-cache-memory` (issue 12's throughput target: more sequences fit, so
more run at once): for each dtype one `cllm serve --kv-cache-dtype X`, loaded
by `cllm bench serve` at concurrency 32 with prompts of --input-len tokens of
the King James Bible (Debian's bible-kjv-text through tests/ref/long_text.py,
each prompt starting at its own place in the text, so no prefix is shared),
while /metrics is sampled for the sequences running at once and the blocks in
use; preemptions are the counter's growth over the run.

usage: bench/kv_dtype_serving.py [--model PATH] [--cllm build/cllm] [--dtypes f16 int8 fp8]
                                 [--kv-cache-memory 256MiB] [--concurrency 32] [--num-prompts 64]
                                 [--input-len 2000] [--output-len 128] [--threads 2] [--repeats 1]
                                 [--append bench/RESULTS.md]
The dtypes take turns (A B C A B C ... with --repeats), so a change in the
machine's load falls on all of them; each run is a row. Prints a Markdown
section (and appends it to --append FILE when given)."""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import requests

from replicas import ROOT, cpu_model

sys.path.insert(0, str(ROOT / "tests" / "integration"))
sys.path.insert(0, str(ROOT / "tests" / "ref"))
from long_text import long_text  # noqa: E402
from server_util import CllmServer  # noqa: E402

CAPACITY_RE = re.compile(r"KV cache .*: (\d+) tokens")


def long_prompts(cllm: Path, model: Path, n: int, input_len: int) -> list[str]:
    """n texts of input_len tokens each (as the model's tokenizer counts, by
    `cllm tokenize`), starting at n evenly spread places of Genesis to
    Deuteronomy."""
    text = long_text(("Genesis", "Exodus", "Leviticus", "Numbers", "Deuteronomy"))
    tok = [str(cllm), "tokenize", "-m", str(model)]
    tokens = json.loads(subprocess.run(tok + ["--no-special", "--json"], input=text, capture_output=True, text=True,
                                       check=True).stdout)
    if len(tokens) < input_len + n:
        raise SystemExit(f"the text holds {len(tokens)} tokens: too few for {n} prompts of {input_len}")
    stride = (len(tokens) - input_len) // n
    slices = "".join(json.dumps(tokens[i * stride:i * stride + input_len]) + "\n" for i in range(n))
    out = subprocess.run(tok + ["--decode", "--jsonl"], input=slices, capture_output=True, text=True, check=True)
    return [json.loads(line) for line in out.stdout.splitlines()]


class MetricsSampler:
    """The largest vllm:num_requests_running and cllm:kv_cache_blocks_used
    seen while running, sampled every `every` seconds."""

    def __init__(self, srv: CllmServer, every: float = 0.2):
        self.srv, self.every = srv, every
        self.max_running = self.max_blocks = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.is_set():
            try:
                m = self.srv.metrics()
                self.max_running = max(self.max_running, int(m.get("vllm:num_requests_running", 0)))
                self.max_blocks = max(self.max_blocks, int(m.get("cllm:kv_cache_blocks_used", 0)))
            except requests.RequestException:
                pass
            self._stop.wait(self.every)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


def run_dtype(cllm: Path, model: Path, dtype: str, dataset: Path, args, work: Path) -> dict:
    serve = ["--served-model-name", "m", "--kv-cache-dtype", dtype, "--kv-cache-memory", args.kv_cache_memory,
             "--max-num-seqs", args.concurrency, "--max-model-len", args.input_len + args.output_len + 64]
    with CllmServer(cllm, model, *serve, threads=args.threads, startup_timeout=600) as srv:
        capacity = CAPACITY_RE.search(srv.log())
        before = srv.metrics()
        out = work / f"{dtype}.json"
        cmd = [str(cllm), "bench", "serve", "--base-url", srv.base_url, "--model", "m", "--dataset-name", "jsonl",
               "--dataset-path", str(dataset), "--num-prompts", str(args.num_prompts), "--max-concurrency",
               str(args.concurrency), "--request-rate", "inf", "--seed", "0", "--save-result", str(out),
               "--no-progress"]
        with MetricsSampler(srv) as sampler:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=7200)
        if r.returncode != 0:
            raise SystemExit(f"bench serve failed:\n{r.stdout}\n{r.stderr}")
        after = srv.metrics()
    res = json.loads(out.read_text())
    preempted = "vllm:num_preemptions_total"
    res.update(dtype=dtype, capacity=int(capacity.group(1)) if capacity else None,
               max_running=sampler.max_running, max_blocks=sampler.max_blocks,
               preemptions=int(after.get(preempted, 0) - before.get(preempted, 0)))
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", type=Path, default=None, help="default: the gemma-3-270m GGUF (build-model-path.txt)")
    ap.add_argument("--cllm", type=Path, default=ROOT / "build" / "cllm")
    ap.add_argument("--dtypes", nargs="+", default=["f16", "int8", "fp8"])
    ap.add_argument("--kv-cache-memory", default="256MiB",
                    help="the same for every dtype (256MiB: part 1's capacity table; f16 holds 14,562 tokens)")
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--num-prompts", type=int, default=64)
    ap.add_argument("--input-len", type=int, default=2000)
    ap.add_argument("--output-len", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--append", type=Path)
    args = ap.parse_args()
    model = args.model or Path((ROOT / "build-model-path.txt").read_text().strip())
    cllm = args.cllm.resolve()
    load_before = os.getloadavg()
    started = datetime.datetime.now(datetime.timezone.utc)
    rows = []
    with tempfile.TemporaryDirectory(prefix="cllm-kvdtype-") as tmp:
        dataset = Path(tmp) / "prompts.jsonl"
        with open(dataset, "w", encoding="utf-8") as f:
            for p in long_prompts(cllm, model, args.num_prompts, args.input_len):
                f.write(json.dumps({"prompt": p, "max_tokens": args.output_len}) + "\n")
        for _ in range(args.repeats):
            for dtype in args.dtypes:
                res = run_dtype(cllm, model, dtype, dataset, args, Path(tmp))
                rows.append(res)
                print(f"{dtype}: {res['output_throughput']:.1f} output tok/s, max running {res['max_running']}",
                      file=sys.stderr)
    load_after = os.getloadavg()
    base = next((r for r in rows if r["dtype"] == args.dtypes[0]), rows[0])
    lines = [
        f"## KV dtype under serving load, {started:%Y-%m-%d %H:%M} UTC (bench/kv_dtype_serving.py)",
        "",
        f"Machine: {cpu_model()}; load average {load_before[0]:.1f} before, {load_after[0]:.1f} after. "
        f"Model: {model.name}, {args.threads} threads, `--kv-cache-memory {args.kv_cache_memory} "
        f"--max-num-seqs {args.concurrency}`. Load: `cllm bench serve --max-concurrency {args.concurrency}`, "
        f"{args.num_prompts} prompts of {args.input_len} tokens of the KJV (each from its own place in the text), "
        f"{args.output_len} output tokens each, EOS ignored, all sent at once.",
        "",
        "| dtype | KV tokens | output tok/s | vs " + base["dtype"] + " | mean TTFT (ms) | median TTFT (ms) "
        "| mean TPOT (ms) | max running | max blocks used | preemptions |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(f"| {r['dtype']} | {r['capacity']} | {r['output_throughput']:.1f} | "
                     f"{r['output_throughput'] / base['output_throughput']:.2f}x | {r['mean_ttft_ms']:.0f} | "
                     f"{r['median_ttft_ms']:.0f} | {r['mean_tpot_ms']:.1f} | {r['max_running']} | "
                     f"{r['max_blocks']} | {r['preemptions']} |")
    lines += ["", "KV tokens: what the server's startup line says fits; max running and max blocks used: the "
              "largest of /metrics' `vllm:num_requests_running` and `cllm:kv_cache_blocks_used`, sampled every "
              "0.2 s; preemptions: the growth of `vllm:num_preemptions_total` over the run.", ""]
    text = "\n".join(lines)
    print(text)
    if args.append:
        with open(args.append, "a", encoding="utf-8") as f:
            f.write("\n" + text)


if __name__ == "__main__":
    main()
