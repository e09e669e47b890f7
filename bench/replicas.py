#!/usr/bin/env python3
"""Throughput of one `cllm serve` against several behind nginx, with
`cllm bench serve` as the load: one replica addressed directly, one behind
nginx, and N behind nginx (deploy/nginx/cllm.conf.template, as deploy/test
runs it). On a machine with few cores the replicas share them, so this shows
what nginx and splitting the batch cost, not a speedup.

usage: bench/replicas.py [--model PATH] [--cllm build/cllm] [--replicas 3] [--threads 2]
                         [--concurrency 32] [--num-prompts 128] [--input-len 128] [--output-len 64]
                         [--repeats 2] [--append bench/RESULTS.md]
The setups take turns (A B C A B C ...), so a change in the machine's load
falls on all of them; each run is a row.
Prints a Markdown section (and appends it to --append FILE when given)."""

from __future__ import annotations

import argparse
import datetime
import importlib.machinery
import importlib.util
import json
import os
import subprocess
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def deploy_test():
    loader = importlib.machinery.SourceFileLoader("deploy_test", str(ROOT / "deploy" / "test"))
    spec = importlib.util.spec_from_loader("deploy_test", loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


def cpu_model() -> str:
    out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    name = next((ln.split(":", 1)[1].strip() for ln in out.splitlines() if ln.startswith("Model name")), "?")
    return f"{name}, {os.cpu_count()} CPUs"


def bench(cllm: Path, url: str, args, work: Path, label: str) -> dict:
    out = work / f"{label}.json"
    cmd = [str(cllm), "bench", "serve", "--base-url", url, "--model", "m", "--num-prompts", str(args.num_prompts),
           "--max-concurrency", str(args.concurrency), "--request-rate", "inf", "--random-input-len",
           str(args.input_len), "--random-output-len", str(args.output_len), "--seed", "0", "--num-warmups", "4",
           "--save-result", str(out), "--no-progress"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
    if r.returncode != 0:
        raise SystemExit(f"bench serve failed:\n{r.stdout}\n{r.stderr}")
    return json.loads(out.read_text())


def run_setup(dt, cllm: Path, model: Path, n: int, behind_nginx: bool, args, work: Path) -> dict:
    work.mkdir(exist_ok=True)
    serve = ["--threads", args.threads, "--served-model-name", "m", "--max-model-len", 1024,
             "--kv-cache-memory", "256MiB", "--max-num-seqs", args.concurrency]
    replicas = [dt.Replica(cllm, model, f"r{n}-{i}", work, serve) for i in range(n)]
    nginx = None
    try:
        for r in replicas:
            r.wait_ready(300)
        url = replicas[0].url
        if behind_nginx:
            listen = f"127.0.0.1:{dt.free_port()}"
            prefix = work / f"nginx{n}"
            prefix.mkdir()
            (prefix / "cllm.conf").write_text(dt.fill_template(listen, [r.addr for r in replicas]))
            (prefix / "nginx.conf").write_text(dt.main_conf(prefix, prefix / "cllm.conf"))
            nginx = dt.Nginx(prefix, prefix / "nginx.conf")
            nginx.start(f"http://{listen}")
            url = f"http://{listen}"
        label = f"{n}-{'nginx' if behind_nginx else 'direct'}"
        res = bench(cllm, url, args, work, label)
        res["served"] = [int(dt.successes(r.metrics())) for r in replicas]
        return res
    finally:
        if nginx:
            nginx.stop()
        for r in replicas:
            r.stop()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", type=Path, default=None, help="default: the gemma-3-270m GGUF (build-model-path.txt)")
    ap.add_argument("--cllm", type=Path, default=ROOT / "build" / "cllm")
    ap.add_argument("--replicas", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2, help="--threads of each replica")
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--num-prompts", type=int, default=128)
    ap.add_argument("--input-len", type=int, default=128)
    ap.add_argument("--output-len", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--append", type=Path)
    args = ap.parse_args()
    model = args.model or Path((ROOT / "build-model-path.txt").read_text().strip())
    dt = deploy_test()
    rows = []
    with tempfile.TemporaryDirectory(prefix="cllm-replicas-") as tmp:
        work = Path(tmp)
        load_before = os.getloadavg()
        for rnd in range(args.repeats):
            for n, behind in ((1, False), (1, True), (args.replicas, True)):
                res = run_setup(dt, args.cllm.resolve(), model, n, behind, args, work / f"{rnd}")
                rows.append((n, behind, res, rnd + 1))
        load_after = os.getloadavg()
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = [f"## Replicas behind nginx, {now} (bench/replicas.py)", "",
             f"`bench/replicas.py --replicas {args.replicas} --threads {args.threads} --concurrency "
             f"{args.concurrency} --num-prompts {args.num_prompts} --input-len {args.input_len} --output-len "
             f"{args.output_len} --repeats {args.repeats}`: `cllm bench serve` (random prompts, streamed, `ignore_eos`) against "
             f"`cllm serve {model.name}` replicas with `--threads {args.threads}` each. CPU: {cpu_model()}; load "
             f"average (1 min) {load_before[0]:.2f} before, {load_after[0]:.2f} after.", "",
             "| setup | completed / failed | requests/s | output tok/s | mean TTFT ms | p99 TTFT ms | mean TPOT ms |"
             " requests per replica |",
             "|---|---:|---:|---:|---:|---:|---:|---|"]
    for n, behind, r, rnd in sorted(rows, key=lambda row: (row[0], row[1], row[3])):
        setup = f"{n} replica{'s' if n > 1 else ''}, {'behind nginx' if behind else 'direct'} (run {rnd})"
        lines.append(f"| {setup} | {r['completed']} / {r['failed']} | {r['request_throughput']:.2f} | "
                     f"{r['output_throughput']:.1f} | {r['mean_ttft_ms']:.0f} | {r['p99_ttft_ms']:.0f} | "
                     f"{r['mean_tpot_ms']:.1f} | {r['served']} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.append:
        with open(args.append, "a") as f:
            f.write("\n" + text)


if __name__ == "__main__":
    main()
