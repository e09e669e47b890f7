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

    python3 bench/structured_corpus.py --model MODEL.gguf [--max-tokens 200]
        [--concurrency 8] [--sample N --seed S] [--compare]   (CI runs a small sample)

--compare also compiles every entry with XGrammar's and llguidance's JSON
Schema compilers (compile only) and prints their counts beside cllm's.
--save-outputs FILE keeps every compiled entry's schema and output, so that
`grammar_bench MODEL --replay FILE` can time the first mask of each state
along real outputs.

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
import referencing.exceptions  # noqa: E402  (jsonschema's own dependency)

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
                    # The root's identity and anchors come along, so "#anchor" references resolve.
                    sub = {k: v for k, v in root.items()
                           if k in ("$schema", "$id", "$anchor", "$dynamicAnchor", "$recursiveAnchor")}
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
    for needle in ("cannot resolve $ref", "non-integer", "too large", "left-recursive", "too ambiguous"):
        if needle in message:
            return needle
    # The reason without where it was: "'guided_json': JSON schema at #/a/b: " goes.
    message = re.sub(r"^'[a-z_.]+': ", "", message)
    message = re.sub(r"JSON schema at [^ ]*: ", "", message)
    return re.sub(r" at #[^ ]*", "", message)[:70]


def run_one(srv, name, schema, max_tokens, seed):
    t0 = time.time()
    r = srv.post("/v1/completions", {"prompt": "A JSON document:\n", "max_tokens": max_tokens, "temperature": 0.7,
                                     "seed": seed, "guided_json": schema}, timeout=1800)
    dt = time.time() - t0
    if r.status_code == 400:
        return name, "refused", refusal_reason(r.json()["error"]["message"]), dt, ""
    if r.status_code != 200:
        return name, "error", f"HTTP {r.status_code}: {r.text[:200]}", dt, ""
    c = r.json()["choices"][0]
    text = c["text"]
    if c["finish_reason"] != "stop":
        return name, "length", text[-40:], dt, text
    try:
        doc = json.loads(text)
    except ValueError as e:
        return name, "invalid", f"not JSON: {e}: {text[:200]!r}", dt, text
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        errors = list(cls(schema).iter_errors(doc))
    except RecursionError:  # a $ref cycle with no instance step between (renovate's "#" -> manager -> "#")
        return name, "unchecked", "jsonschema recursed without end on this schema", dt, text
    except referencing.exceptions.Unresolvable as e:  # a reference to another document: not fetched by either
        return name, "unchecked", f"jsonschema cannot resolve {e}", dt, text
    if errors:
        return name, "invalid", f"{errors[0].message[:200]} in {text[:200]!r}", dt, text
    return name, "valid", "", dt, text


def other_compilers(items) -> dict[str, set[int]]:
    """The entries XGrammar's and llguidance's JSON Schema compilers accept
    (compile only, no vocabulary: the grammar is built or refused), each
    compiler's indices of the accepted entries. A compiler that is not
    installed is left out."""
    out: dict[str, set[int]] = {}
    try:
        import xgrammar as xgr
        ok = set()
        for i, (_, schema) in enumerate(items):
            try:
                xgr.Grammar.from_json_schema(json.dumps(schema), any_whitespace=False, strict_mode=True)
                ok.add(i)
            except Exception:  # noqa: BLE001 (any refusal counts as not compiled)
                pass
        out["XGrammar"] = ok
    except ImportError:
        pass
    try:
        from llguidance import LLMatcher
        ok = set()
        for i, (_, schema) in enumerate(items):
            try:
                if not LLMatcher.validate_grammar(LLMatcher.grammar_from_json_schema(schema)):
                    ok.add(i)
            except Exception:  # noqa: BLE001
                pass
        out["llguidance"] = ok
    except ImportError:
        pass
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--cllm", default=str(Path(__file__).resolve().parents[1] / "build" / "cllm"))
    ap.add_argument("--max-tokens", type=int, default=200)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--sample", type=int, default=0, help="run a random sample of this many entries")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--save-outputs", metavar="FILE",
                    help="write each compiled entry's schema and output (finished or cut) as JSON lines, "
                         "for grammar_bench --replay")
    ap.add_argument("--compare", action="store_true",
                    help="also compile every entry with XGrammar and llguidance and report their rates")
    args = ap.parse_args()
    items = entries()
    if args.sample:
        items = random.Random(args.seed).sample(items, min(args.sample, len(items)))
    print(f"corpus: {len(items)} schemas from check-jsonschema (SchemaStore) and jsonschema-specifications",
          file=sys.stderr)
    results = []
    index_of: dict[int, int] = {}  # a result's entry (names repeat: a definition reached from two schemas)
    with CllmServer(args.cllm, args.model, "--max-model-len", 2048, "--max-num-seqs", max(args.concurrency, 1),
                    "--max-body-size", "8MiB",
                    threads=args.threads) as srv:
        with concurrent.futures.ThreadPoolExecutor(args.concurrency) as ex:
            futs = {ex.submit(run_one, srv, n, s, args.max_tokens, args.seed + i): i for i, (n, s) in enumerate(items)}
            for f in concurrent.futures.as_completed(futs):
                results.append(f.result())
                index_of[id(results[-1])] = futs[f]
                name, kind, detail, dt, _ = results[-1]
                print(f"{kind:8} {dt:6.1f}s {name} {detail[:100]}", file=sys.stderr)
        assert srv.get("/health").status_code == 200
    counts = collections.Counter(k for _, k, *_ in results)
    reasons = collections.Counter(d for _, k, d, *_ in results if k == "refused")
    print("| schemas | compiled | refused (400) | finished | valid of finished | jsonschema could not check "
          "| cut by max_tokens | errors |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    finished = counts["valid"] + counts["invalid"]
    print(f"| {len(results)} | {len(results) - counts['refused'] - counts['error']} | {counts['refused']} | "
          f"{finished + counts['unchecked']} | {counts['valid']}/{finished} | {counts['unchecked']} | "
          f"{counts['length']} | {counts['error']} |")
    print("\nRefusals by reason: " + ", ".join(f"{r} {n}" for r, n in reasons.most_common()))
    if args.save_outputs:
        with open(args.save_outputs, "w") as f:
            for r in results:
                if r[4]:
                    f.write(json.dumps({"name": r[0], "schema": items[index_of[id(r)]][1], "text": r[4]}) + "\n")
    if args.compare:
        cllm_ok = {index_of[id(r)] for r in results if r[1] not in ("refused", "error")}
        print("\n| compiler | compiled | of entries | compiled where cllm refused | refused where cllm compiled |")
        print("|---|---:|---:|---:|---:|")
        print(f"| cllm | {len(cllm_ok)} | {len(results)} | - | - |")
        for other, ok in other_compilers(items).items():
            print(f"| {other} | {len(ok)} | {len(results)} | {len(ok - cllm_ok)} | {len(cllm_ok - ok)} |")
    for name, kind, detail, *_ in results:
        if kind in ("invalid", "error"):
            print(f"- {kind}: {name}: {detail}")
    return 1 if counts["invalid"] or counts["error"] else 0


if __name__ == "__main__":
    sys.exit(main())
