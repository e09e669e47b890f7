#!/usr/bin/env python3
"""Validity of structured output over real-world JSON schemas (issue 15).

The corpus is read from installed PyPI packages, never copied into the
repository: check-jsonschema vendors SchemaStore schemas (GitHub workflows,
Azure pipelines, Renovate, ...), and jsonschema-specifications ships the JSON
Schema metaschemas. Each whole schema is one entry, and so is each of its
definitions (#/definitions/NAME or #/$defs/NAME, asked for through a $ref
with the same root, so its own references resolve).

Every entry goes to `cllm serve` as guided_json. A refused schema must be a
400 that names an unsupported keyword or feature (counted by reason). Every
output that finishes ("stop") must parse as JSON and validate against the
schema with `jsonschema`; an output cut by max_tokens is counted apart.

    python3 bench/structured_corpus.py --model MODEL.gguf [--limit N] [--max-tokens 200]
        [--concurrency 8] [--sample N --seed S]   (CI runs a small sample)

Prints a Markdown summary; exits 1 if any finished output is invalid or any
refusal is not a 400.
"""

from __future__ import annotations

import argparse
import collections
import concurrent.futures
import glob
import json
import os
import random
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "integration"))

import jsonschema  # noqa: E402

from server_util import CllmServer  # noqa: E402


def corpus_files() -> list[tuple[str, str]]:
    out = []
    import check_jsonschema
    import jsonschema_specifications

    for pkg in (check_jsonschema, jsonschema_specifications):
        root = os.path.dirname(pkg.__file__)
        for path in sorted(glob.glob(root + "/**/*", recursive=True)):
            if os.path.isfile(path) and (path.endswith(".json") or os.path.basename(path) == "metaschema.json"
                                         or "/schemas/" in path):
                out.append((pkg.__name__, path))
    return list(dict.fromkeys(out))


def reachable_defs(root: dict, start) -> dict:
    """The definitions a schema reaches through local $refs (so a request
    carries only what it uses, not a whole 1 MB schema)."""
    keep = {"definitions": {}, "$defs": {}}
    todo = [start]
    while todo:
        node = todo.pop()
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/"):
                parts = ref[2:].split("/")
                if parts[0] in keep and len(parts) >= 2 and parts[1] not in keep[parts[0]]:
                    target = root.get(parts[0], {}).get(parts[1])
                    if target is not None:
                        keep[parts[0]][parts[1]] = target
                        todo.append(target)
            todo.extend(node.values())
        elif isinstance(node, list):
            todo.extend(node)
    return {k: v for k, v in keep.items() if v}


def entries() -> list[tuple[str, dict]]:
    seen, out = set(), []
    for pkg, path in corpus_files():
        try:
            root = json.loads(Path(path).read_text())
        except (ValueError, UnicodeDecodeError):
            continue
        if not isinstance(root, dict):
            continue
        name = f"{pkg}:{os.path.relpath(path, os.path.dirname(path) + '/..')}"
        items = [(name, root)]
        for key in ("definitions", "$defs"):
            defs = root.get(key)
            if isinstance(defs, dict):
                for d in defs:
                    if "/" in d or "~" in d:
                        continue
                    sub = {k: v for k, v in root.items() if k == "$schema"}
                    sub["$ref"] = f"#/{key}/{d}"
                    sub.update(reachable_defs(root, sub))
                    items.append((f"{name}#/{key}/{d}", sub))
        for n, s in items:
            k = json.dumps(s, sort_keys=True)
            if k not in seen:
                seen.add(k)
                out.append((n, s))
    return out


def refusal_reason(message: str) -> str:
    m = re.search(r"unsupported JSON Schema keyword '([^']+)'", message)
    if m:
        return f"keyword {m.group(1)}"
    for needle in ("cannot resolve $ref", "unsupported string format", "non-integer", "allOf", "too large",
                   "items' as an array", "beside $ref", "left-recursive", "too ambiguous", "pattern"):
        if needle in message:
            return needle
    return message[:60]


def run_one(srv, name, schema, max_tokens, seed):
    t0 = time.time()
    r = srv.post("/v1/completions", {"prompt": "A JSON document:\n", "max_tokens": max_tokens, "temperature": 0.7,
                                     "seed": seed, "guided_json": schema}, timeout=1800)
    dt = time.time() - t0
    if r.status_code == 400:
        return name, "refused", refusal_reason(r.json()["error"]["message"]), dt
    if r.status_code != 200:
        return name, "error", f"HTTP {r.status_code}: {r.text[:200]}", dt
    c = r.json()["choices"][0]
    if c["finish_reason"] != "stop":
        return name, "length", c["text"][-40:], dt
    try:
        doc = json.loads(c["text"])
    except ValueError as e:
        return name, "invalid", f"not JSON: {e}: {c['text'][:200]!r}", dt
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    errors = list(cls(schema).iter_errors(doc))
    if errors:
        return name, "invalid", f"{errors[0].message[:200]} in {c['text'][:200]!r}", dt
    return name, "valid", "", dt


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--cllm", default=str(Path(__file__).resolve().parents[1] / "build" / "cllm"))
    ap.add_argument("--max-tokens", type=int, default=200)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--sample", type=int, default=0, help="run a random sample of this many entries")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    items = entries()
    if args.sample:
        items = random.Random(args.seed).sample(items, min(args.sample, len(items)))
    print(f"corpus: {len(items)} schemas from check-jsonschema (SchemaStore) and jsonschema-specifications",
          file=sys.stderr)
    results = []
    with CllmServer(args.cllm, args.model, "--max-model-len", 2048, "--max-num-seqs", max(args.concurrency, 1),
                    "--max-body-size", "8MiB",
                    threads=args.threads) as srv:
        with concurrent.futures.ThreadPoolExecutor(args.concurrency) as ex:
            futs = [ex.submit(run_one, srv, n, s, args.max_tokens, args.seed + i) for i, (n, s) in enumerate(items)]
            for f in concurrent.futures.as_completed(futs):
                results.append(f.result())
                name, kind, detail, dt = results[-1]
                print(f"{kind:8} {dt:6.1f}s {name} {detail[:100]}", file=sys.stderr)
        assert srv.get("/health").status_code == 200
    counts = collections.Counter(k for _, k, _, _ in results)
    reasons = collections.Counter(d for _, k, d, _ in results if k == "refused")
    print(f"| schemas | compiled | refused (400) | finished | valid of finished | cut by max_tokens | errors |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    finished = counts["valid"] + counts["invalid"]
    print(f"| {len(results)} | {len(results) - counts['refused'] - counts['error']} | {counts['refused']} | "
          f"{finished} | {counts['valid']}/{finished} | {counts['length']} | {counts['error']} |")
    print("\nRefusals by reason: " + ", ".join(f"{r} {n}" for r, n in reasons.most_common()))
    for name, kind, detail, _ in results:
        if kind in ("invalid", "error"):
            print(f"- {kind}: {name}: {detail}")
    return 1 if counts["invalid"] or counts["error"] else 0


if __name__ == "__main__":
    sys.exit(main())
