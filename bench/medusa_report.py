#!/usr/bin/env python3
"""Medusa heads and the frequency-ranked layer_skip draft against plain
decoding on ordinary chat, as ratios from one sitting (a fresh process per
run, the methods' order reversed every other round):

  1. single stream: the 50 varied instructions of bench/data/chat_prompts_50.txt,
     one after another (`cllm generate --prompts-file F --max-num-seqs 1`),
     at 1 and 2 threads, temperature 0 and 0.7 (a seed per prompt, the same
     for every method). Methods: plain; Medusa (the heads file, K = --k);
     layer_skip with the first --draft-layers layers, K = --skip-k (2: the
     best of K = 1-4 on gemma-3-270m, bench/RESULTS.md), scoring the
     whole vocabulary and scoring only the heads' draft vocabulary (FR-Spec)
     (--no-layer-skip leaves them out); with --exit-adapter FILE, layer_skip
     drafting through that exit adapter (`cllm medusa train --kind exit`,
     its own layer and draft vocabulary) for each K of --exit-k (default 2
     and 3); with --trees N [N ...], Medusa over
     a tree of N nodes chosen from the heads' accuracies
     ("speculative_token_tree": "auto") for each N; with --lookup N, n-gram
     lookup alone (K = N) and each Medusa chain and exit-adapter layer_skip
     with lookup tried first (prompt_lookup_num_tokens N): the test model's
     continuations of these raw prompts go round in circles, which lookup
     drafts for free.
     Output tok/s over the 50, the acceptance rate and mean accepted length
     cllm prints, the acceptance at each draft position (for Medusa, each
     head's, given the ones before it were accepted), and whether every
     output equals plain decoding's.
  2. serving at concurrency 32 (`cllm bench serve`, random prompts, the same
     seed for both sides of a round, a fresh server each run, so no prefix
     cache answers): `cllm serve` plain against `cllm serve
     --speculative-config '{"method": "medusa", ...}'` (disable_by_batch_size
     8 keeps speculation out of large batches).

No prompt repeats within a run, and the heads never saw these prompts
(they train on data/medusa_train_prompts.txt).

usage: bench/medusa_report.py --heads HEADS.gguf [--model GGUF] [--cllm build/cllm]
           [--tokens 128] [--k 3 [K ...]] [--trees N ...] [--no-layer-skip] [--draft-layers 12] [--skip-k 2]
           [--exit-adapter ADAPTER.gguf [--exit-k 2 3]] [--reps 1] [--compare-heads OTHER.gguf] [--draft-vocab-size N] [--serve-prompts 64] [--serve-tree N]
           [--no-serve] [--only NAME ...] [--temperatures 0.0 0.7] [--threads 1 2] [--serve-spec JSON]
(--only: just the methods whose names contain one of the strings, beside plain; --serve-spec: the served
speculative config instead of the first Medusa chain;
--k: a chain of each length; --compare-heads: another heads file's chain of the first K beside
them, in the same sitting; --draft-vocab-size: the heads draft from the first N of their vocabulary; --serve-tree N: the served Medusa config is the N-node tree instead of
the first chain.)
Prints a Markdown table (CPU model and flags first) for bench/RESULTS.md.
"""
from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import tempfile
import urllib.request
from pathlib import Path

from spec_report import cpu_line, serve_throughput

REPO = Path(__file__).resolve().parents[1]
PROMPTS = REPO / "bench" / "data" / "chat_prompts_50.txt"


def prompts_file(tmp: Path, temperature: float, tokens: int) -> Path:
    path = tmp / f"prompts-{temperature}.jsonl"
    lines = []
    for i, p in enumerate(PROMPTS.read_text().splitlines()):
        lines.append(json.dumps({"prompt": p, "max_tokens": tokens, "temperature": temperature, "seed": 100 + i,
                                 "ignore_eos": True}))
    path.write_text("\n".join(lines) + "\n")
    return path


def run(cllm, model, prompts: Path, threads: int, extra: list[str]):
    out = subprocess.run([cllm, "generate", "-m", model, "--prompts-file", str(prompts), "--max-num-seqs", "1",
                          "-t", str(threads), *extra], capture_output=True, text=True, timeout=3600)
    if out.returncode:
        raise SystemExit(f"cllm generate failed: {out.stderr}")
    speed = float(re.search(r"generated tokens in [\d.]+ s: ([\d.]+) output tok/s", out.stderr).group(1))
    acc = re.search(r"(\d+) draft tokens, (\d+) accepted: acceptance rate ([\d.]+)%, mean accepted length ([\d.]+)",
                    out.stderr)
    texts = [json.loads(line)["text"] for line in out.stdout.splitlines() if line.startswith("{")]
    per_pos = re.findall(r"(\d+): ([\d.]+)% of \d+;", out.stderr)
    return speed, (acc, ", ".join(f"{p}%" for _, p in per_pos)) if acc else None, texts


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=(REPO / "build-model-path.txt").read_text().strip()
                    if (REPO / "build-model-path.txt").exists() else None)
    ap.add_argument("--heads", required=True)
    ap.add_argument("--cllm", default=str(REPO / "build" / "cllm"))
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--k", type=int, nargs="+", default=[3])
    ap.add_argument("--compare-heads")
    ap.add_argument("--draft-vocab-size", type=int, default=0)
    ap.add_argument("--draft-layers", type=int, default=12)
    ap.add_argument("--skip-k", type=int, default=2)
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--serve-prompts", type=int, default=64)
    ap.add_argument("--no-serve", action="store_true")
    ap.add_argument("--trees", type=int, nargs="*", default=[])
    ap.add_argument("--no-layer-skip", action="store_true")
    ap.add_argument("--serve-tree", type=int, default=0)
    ap.add_argument("--exit-adapter")
    ap.add_argument("--exit-k", type=int, nargs="+", default=[2, 3])
    ap.add_argument("--only", nargs="+", default=[],
                    help="run only the methods whose names contain one of these strings (plain always runs)")
    ap.add_argument("--temperatures", type=float, nargs="*", default=[0.0, 0.7])
    ap.add_argument("--threads", type=int, nargs="*", default=[1, 2])
    ap.add_argument("--serve-spec", help="the served config, a JSON string (default: the first Medusa chain)")
    ap.add_argument("--lookup", type=int, default=0,
                    help="also n-gram lookup alone with K=N, and each Medusa chain and exit-adapter layer_skip with "
                         "n-gram lookup tried first (prompt_lookup_num_tokens N)")
    a = ap.parse_args()
    if not a.model:
        raise SystemExit("--model GGUF is needed (or build-model-path.txt from `make setup`)")
    vocab = {"draft_vocab_size": a.draft_vocab_size} if a.draft_vocab_size else {}
    def chain(heads, k, **extra):
        return json.dumps({"method": "medusa", "model": heads, "num_speculative_tokens": k, **extra})
    spec = chain(a.heads, a.k[0], **vocab)
    skip = {"method": "layer_skip", "draft_layers": a.draft_layers, "num_speculative_tokens": a.skip_k}
    def tree(n):
        return json.dumps({"method": "medusa", "model": a.heads, "num_speculative_tokens": n,
                           "speculative_token_tree": "auto", **vocab})
    methods = {"plain": []}
    for k in a.k:
        methods[f"Medusa K={k}"] = ["--speculative-config", chain(a.heads, k, **vocab)]
    if a.compare_heads:
        methods[f"Medusa K={a.k[0]}, {Path(a.compare_heads).name}"] = [
            "--speculative-config", chain(a.compare_heads, a.k[0])]
    for n in a.trees:
        methods[f"Medusa tree of {n}"] = ["--speculative-config", tree(n)]
    if not a.no_layer_skip:
        methods[f"layer_skip {a.draft_layers} layers, K={a.skip_k}"] = ["--speculative-config", json.dumps(skip)]
        methods[f"layer_skip {a.draft_layers} layers, K={a.skip_k}, draft vocab"] = [
            "--speculative-config", json.dumps(dict(skip, draft_vocab=a.heads))]
    for k in a.exit_k if a.exit_adapter else []:
        methods[f"layer_skip through the exit adapter, K={k}"] = ["--speculative-config", json.dumps(
            {"method": "layer_skip", "model": a.exit_adapter, "num_speculative_tokens": k})]
    if a.lookup:
        methods[f"n-gram lookup, K={a.lookup}"] = ["--speculative-config", json.dumps(
            {"method": "ngram", "num_speculative_tokens": a.lookup})]
        for k in a.k:
            methods[f"Medusa K={k}, lookup first (up to {a.lookup})"] = [
                "--speculative-config", chain(a.heads, k, prompt_lookup_num_tokens=a.lookup, **vocab)]
        for k in a.exit_k if a.exit_adapter else []:
            methods[f"layer_skip through the exit adapter, K={k}, lookup first (up to {a.lookup})"] = [
                "--speculative-config", json.dumps({"method": "layer_skip", "model": a.exit_adapter,
                                                    "num_speculative_tokens": k, "prompt_lookup_num_tokens": a.lookup})]
    if a.only:
        methods = {m: f for m, f in methods.items() if m == "plain" or any(o in m for o in a.only)}
    print(f"CPU: {cpu_line()}\n")
    print(f"`{a.cllm} generate -m {Path(a.model).name} --prompts-file PROMPTS --max-num-seqs 1 -t T "
          f"[--speculative-config ...]`, PROMPTS = the 50 lines of bench/data/chat_prompts_50.txt, "
          f"{a.tokens} tokens each (ignore_eos), seed 100 + line; median of {a.reps}. Configs: "
          + "; ".join(f"{m}: `{f[1]}`" for m, f in methods.items() if f) + ".\n")
    print("| threads | temperature | method | output tok/s | vs plain | acceptance | mean accepted length | "
          "accepted by draft position | same outputs |")
    print("|---:|---:|---|---:|---:|---:|---:|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for temperature in a.temperatures:
            prompts = prompts_file(Path(tmp), temperature, a.tokens)
            for threads in a.threads:
                speeds = {m: [] for m in methods}
                accs, texts = {}, {}
                for r in range(a.reps):
                    order = list(methods.items())
                    for name, extra in order if r % 2 == 0 else order[::-1]:
                        speed, accs[name], texts[name] = run(a.cllm, a.model, prompts, threads, extra)
                        speeds[name].append(speed)
                p = statistics.median(speeds["plain"])
                for name in methods:
                    m, acc = statistics.median(speeds[name]), accs[name]
                    rate, per_pos = acc if acc else (None, "-")
                    print(f"| {threads} | {temperature} | {name} | {m:.1f} | {m / p:.2f}x | "
                          f"{rate.group(3) + '%' if rate else '-'} | {rate.group(4) if rate else '-'} | "
                          f"{per_pos or '-'} | {'yes' if texts[name] == texts['plain'] else 'NO'} |", flush=True)
    if a.no_serve:
        return
    served = a.serve_spec or (tree(a.serve_tree) if a.serve_tree else spec)
    extra = ["--speculative-config", served]
    plain, medusa = [], []
    for r in range(a.reps):
        seed = 2000 + r
        runs = [(plain, []), (medusa, extra)]
        for results, flags in runs if r % 2 == 0 else runs[::-1]:
            results.append(serve_throughput(a.cllm, a.model, flags, a.serve_prompts, seed))
    p, m = statistics.median(plain), statistics.median(medusa)
    print(f"\nServing, concurrency 32, {a.serve_prompts} requests of 256 random tokens in / 64 out, the same prompts "
          f"for both (seed 2000 + round), median of {a.reps}: plain {p:.1f} output tok/s, `{served}` "
          f"{m:.1f}: {m / p:.2f}x (rounds: plain {', '.join(f'{x:.1f}' for x in plain)}; "
          f"speculative {', '.join(f'{x:.1f}' for x in medusa)}).")


if __name__ == "__main__":
    main()
