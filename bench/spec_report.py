#!/usr/bin/env python3
"""Speculative decoding against plain decoding on one model, as ratios from
one sitting (rounds interleaved, a fresh process per run):

  1. single stream, `cllm generate` at 1 and 2 threads, greedy, on two
     workloads: a code rewrite (n-gram lookup's case) and an ordinary chat
     prompt; methods plain, n-gram K=4 and K=8, layer_skip. Tokens/s of the
     generation, the acceptance rate and the mean accepted length that
     `cllm generate` prints.
  2. serving at concurrency 32 (`cllm bench serve`, random prompts with a new
     seed per run so no prefix cache answers): `cllm serve` plain against
     `cllm serve --speculative-config '{"method": "ngram", ...}'`, whose
     disable_by_batch_size must keep speculation from costing under load.

usage: bench/spec_report.py [--model GGUF] [--cllm build/cllm] [--reps 3]
           [--tokens 256] [--serve-prompts 64] [--no-serve]
Prints a Markdown table (CPU model and flags first) to paste into
bench/RESULTS.md.
"""
from __future__ import annotations

import argparse
import json
import re
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "integration"))
sys.path.insert(0, str(REPO / "tests" / "ref"))
from test_speculative import REWRITE_PROMPT  # noqa: E402  the prompt the identity tests use

WORKLOADS = {
    "rewrite": REWRITE_PROMPT,
    "chat": "Explain in a few paragraphs why the sky is blue and why sunsets are red.",
}
METHODS = {
    "plain": [],
    "ngram K=4": ["--speculative-config", '{"method": "ngram", "num_speculative_tokens": 4}'],
    "ngram K=8": ["--speculative-config", '{"method": "ngram", "num_speculative_tokens": 8}'],
    "layer_skip 12/18": ["--speculative-config",
                         '{"method": "layer_skip", "num_speculative_tokens": 4, "draft_layers": 12}'],
}


def cpu_line() -> str:
    info = Path("/proc/cpuinfo").read_text()
    model = re.search(r"model name\s*:\s*(.*)", info).group(1).strip()
    flags = set(re.search(r"flags\s*:\s*(.*)", info).group(1).split())
    have = [f for f in ("avx2", "fma", "f16c", "avx_vnni", "avx512f", "avx512_vnni") if f in flags]
    return f"{model}; flags: {', '.join(have)}; {subprocess.getoutput('nproc')} CPUs"


def generate(cllm, model, prompt, tokens, threads, extra):
    out = subprocess.run([cllm, "generate", "-m", model, "-p", prompt, "-n", str(tokens), "--temperature", "0",
                          "-t", str(threads), "--ignore-eos", *extra], capture_output=True, text=True, timeout=900)
    if out.returncode:
        raise SystemExit(f"cllm generate failed: {out.stderr}")
    speed = float(re.search(r"generation: \d+ tokens in [\d.]+ s \(([\d.]+) tok/s\)", out.stderr).group(1))
    acc = re.search(r"acceptance rate ([\d.]+)%, mean accepted length ([\d.]+)", out.stderr)
    return speed, (float(acc.group(1)), float(acc.group(2))) if acc else None, out.stdout


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve_throughput(cllm, model, extra, prompts, seed):
    port = free_port()
    srv = subprocess.Popen([cllm, "serve", model, "--port", str(port), "--max-num-seqs", "64", *extra],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(600):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1)
                break
            except OSError:
                time.sleep(0.1)
        res = REPO / "build" / f"spec-serve-{port}.json"
        out = subprocess.run([cllm, "bench", "serve", "--base-url", f"http://127.0.0.1:{port}", "--num-prompts",
                              str(prompts), "--max-concurrency", "32", "--random-input-len", "256",
                              "--random-output-len", "64", "--seed", str(seed), "--no-progress",
                              "--save-result", str(res)], capture_output=True, text=True, timeout=1800)
        if out.returncode:
            raise SystemExit(f"cllm bench serve failed: {out.stderr}")
        data = json.loads(res.read_text())
        res.unlink()
        return data["output_throughput"]
    finally:
        srv.terminate()
        srv.wait(timeout=60)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=(REPO / "build-model-path.txt").read_text().strip()
                    if (REPO / "build-model-path.txt").exists() else None)
    ap.add_argument("--cllm", default=str(REPO / "build" / "cllm"))
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--tokens", type=int, default=256)
    ap.add_argument("--serve-prompts", type=int, default=64)
    ap.add_argument("--no-serve", action="store_true")
    a = ap.parse_args()
    if not a.model:
        raise SystemExit("--model GGUF is needed (or build-model-path.txt from `make setup`)")
    print(f"CPU: {cpu_line()}\n")
    print(f"`{a.cllm} generate -m {Path(a.model).name} -p PROMPT -n {a.tokens} --temperature 0 --ignore-eos -t T "
          f"[--speculative-config ...]`, median of {a.reps} interleaved rounds.\n")
    print("| workload | threads | method | tok/s | vs plain | acceptance | mean accepted length | same text |")
    print("|---|---:|---|---:|---:|---:|---:|---|")
    for wl, prompt in WORKLOADS.items():
        for threads in (1, 2):
            speeds = {m: [] for m in METHODS}
            accs, texts = {}, {}
            for _ in range(a.reps):
                for m, extra in METHODS.items():
                    s, acc, text = generate(a.cllm, a.model, prompt, a.tokens, threads, extra)
                    speeds[m].append(s)
                    accs[m], texts[m] = acc, text
            plain = statistics.median(speeds["plain"])
            for m in METHODS:
                med = statistics.median(speeds[m])
                acc = accs[m]
                print(f"| {wl} | {threads} | {m} | {med:.1f} | {med / plain:.2f} | "
                      f"{f'{acc[0]:.1f}%' if acc else '-'} | {f'{acc[1]:.2f}' if acc else '-'} | "
                      f"{'yes' if texts[m] == texts['plain'] else 'NO'} |", flush=True)
    if a.no_serve:
        return
    spec = ["--speculative-config", '{"method": "ngram", "num_speculative_tokens": 4}']
    plain, ngram = [], []
    for r in range(a.reps):
        plain.append(serve_throughput(a.cllm, a.model, [], a.serve_prompts, 1000 + 2 * r))
        ngram.append(serve_throughput(a.cllm, a.model, spec, a.serve_prompts, 1001 + 2 * r))
    p, n = statistics.median(plain), statistics.median(ngram)
    print(f"\nServing, concurrency 32, {a.serve_prompts} requests of 256 random tokens in / 64 out, a new seed per "
          f"run: plain {p:.1f} output tok/s, n-gram K=4 (disable_by_batch_size 8) {n:.1f}: {n / p:.2f}x "
          f"(runs: plain {', '.join(f'{x:.1f}' for x in plain)}; n-gram {', '.join(f'{x:.1f}' for x in ngram)}).")


if __name__ == "__main__":
    main()
