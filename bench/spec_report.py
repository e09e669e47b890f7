#!/usr/bin/env python3
"""Speculative decoding against plain decoding on one model, as ratios from
one sitting (rounds interleaved, a fresh process per run):

  1. single stream, `cllm generate` at 1 and 2 threads, greedy, on two
     workloads: a code rewrite (n-gram lookup's case) and an ordinary chat
     prompt; methods plain, n-gram K=4 and K=8, draft_model (--draft-model,
     by default the target itself: no smaller model shares gemma-3's
     vocabulary) and layer_skip. Tokens/s of the generation, the acceptance
     rate and the mean accepted length that `cllm generate` prints.
  2. serving at concurrency 32 (`cllm bench serve`, random prompts from a new
     seed per round, the same seed for both runs of a round; each run is a
     fresh server, so no prefix cache answers): `cllm serve` plain against
     `cllm serve --speculative-config '{"method": "ngram", ...,
     "disable_by_batch_size": 8}'`, which must keep speculation from costing
     under load. The order of the two alternates between rounds.

usage: bench/spec_report.py [--model GGUF] [--cllm build/cllm] [--reps 3]
           [--tokens 256] [--draft-model GGUF] [--serve-prompts 64] [--no-serve]
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
DRAFT_LAYERS = 12
SERVE_SPEC = {"method": "ngram", "num_speculative_tokens": 4, "disable_by_batch_size": 8}


def methods(draft: str, draft_label: str, layers: str) -> dict[str, list[str]]:
    """The label of each row and the flags that run it: the label says what the flags ask for."""
    return {
        "plain": [],
        "ngram K=4": ["--speculative-config", json.dumps({"method": "ngram", "num_speculative_tokens": 4})],
        "ngram K=8": ["--speculative-config", json.dumps({"method": "ngram", "num_speculative_tokens": 8})],
        f"draft_model {draft_label} K=4": ["--speculative-config", json.dumps(
            {"method": "draft_model", "model": draft, "num_speculative_tokens": 4})],
        f"layer_skip {DRAFT_LAYERS}/{layers} K=4": ["--speculative-config", json.dumps(
            {"method": "layer_skip", "num_speculative_tokens": 4, "draft_layers": DRAFT_LAYERS})],
    }


def n_layers(cllm, model) -> str:
    out = subprocess.run([cllm, "info", model], capture_output=True, text=True, timeout=300)
    m = re.search(r"^shape\s+(\d+) layers", out.stdout, re.M)  # `cllm info`: "shape  18 layers, ..."
    return m.group(1) if m else "?"


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
    ap.add_argument("--draft-model", help="the draft for method draft_model (default: the target itself)")
    ap.add_argument("--serve-prompts", type=int, default=64)
    ap.add_argument("--no-serve", action="store_true")
    a = ap.parse_args()
    if not a.model:
        raise SystemExit("--model GGUF is needed (or build-model-path.txt from `make setup`)")
    draft = a.draft_model or a.model
    draft_label = "(the target itself)" if Path(draft).resolve() == Path(a.model).resolve() else Path(draft).name
    method_flags = methods(draft, draft_label, n_layers(a.cllm, a.model))
    print(f"CPU: {cpu_line()}\n")
    print(f"`{a.cllm} generate -m {Path(a.model).name} -p PROMPT -n {a.tokens} --temperature 0 --ignore-eos -t T "
          f"[--speculative-config ...]`, median of {a.reps} interleaved rounds. Configs: "
          + "; ".join(f"{m}: `{f[1]}`" for m, f in method_flags.items() if f) + ".\n")
    print("| workload | threads | method | tok/s | vs plain | acceptance | mean accepted length | same text |")
    print("|---|---:|---|---:|---:|---:|---:|---|")
    for wl, prompt in WORKLOADS.items():
        for threads in (1, 2):
            speeds = {m: [] for m in method_flags}
            accs, texts = {}, {}
            for _ in range(a.reps):
                for m, extra in method_flags.items():
                    s, acc, text = generate(a.cllm, a.model, prompt, a.tokens, threads, extra)
                    speeds[m].append(s)
                    accs[m], texts[m] = acc, text
            plain = statistics.median(speeds["plain"])
            for m in method_flags:
                med = statistics.median(speeds[m])
                acc = accs[m]
                print(f"| {wl} | {threads} | {m} | {med:.1f} | {med / plain:.2f} | "
                      f"{f'{acc[0]:.1f}%' if acc else '-'} | {f'{acc[1]:.2f}' if acc else '-'} | "
                      f"{'yes' if texts[m] == texts['plain'] else 'NO'} |", flush=True)
    if a.no_serve:
        return
    spec = ["--speculative-config", json.dumps(SERVE_SPEC)]
    plain, ngram = [], []
    for r in range(a.reps):
        # Both runs of a round get the same prompts (one seed); each run is a
        # fresh server, so the second one's prefix cache is empty too.
        seed = 1000 + r
        runs = [(plain, []), (ngram, spec)]
        for results, extra in runs if r % 2 == 0 else runs[::-1]:
            results.append(serve_throughput(a.cllm, a.model, extra, a.serve_prompts, seed))
    p, n = statistics.median(plain), statistics.median(ngram)
    print(f"\nServing, concurrency 32, {a.serve_prompts} requests of 256 random tokens in / 64 out, the same prompts "
          f"for both in a round (seed 1000 + round), a new seed per round, order alternating: plain {p:.1f} output "
          f"tok/s, `--speculative-config '{spec[1]}'` {n:.1f}: {n / p:.2f}x "
          f"(runs: plain {', '.join(f'{x:.1f}' for x in plain)}; n-gram {', '.join(f'{x:.1f}' for x in ngram)}).")


if __name__ == "__main__":
    main()
