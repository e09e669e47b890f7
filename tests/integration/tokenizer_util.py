"""Helpers for the tokenizer integration tests: run `cllm tokenize --jsonl`
once over many inputs, and read the shared fixture of test strings."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

DATA_DIR = Path(__file__).resolve().parents[1] / "data"


def load_strings(name: str = "tokenizer_strings.jsonl") -> list[str]:
    """One JSON string per line. Split on '\\n' only: some strings hold
    characters that str.splitlines() would also break on."""
    text = (DATA_DIR / name).read_text(encoding="utf-8")
    return [json.loads(line) for line in text.split("\n") if line]


def _jsonl_line(item: str | bytes) -> str:
    if isinstance(item, bytes):
        return json.dumps({"hex": item.hex()})
    return json.dumps(item)


def _run(cllm_bin, model, args, lines: list[str], timeout: float) -> list:
    proc = subprocess.run(
        [str(cllm_bin), "tokenize", "-m", str(model), "--jsonl", *args],
        input="".join(line + "\n" for line in lines).encode(),
        capture_output=True,
        timeout=timeout,
    )
    if proc.returncode != 0:
        raise AssertionError(f"cllm tokenize {' '.join(args)} failed ({proc.returncode}): "
                             f"{proc.stderr.decode(errors='replace')}")
    out = proc.stdout.decode().split("\n")
    assert out[-1] == "", "output does not end with a newline"
    results = [json.loads(line) for line in out[:-1]]
    assert len(results) == len(lines), f"{len(lines)} inputs gave {len(results)} outputs"
    return results


def cllm_encode(cllm_bin, model, items: list[str | bytes], add_special: bool = True,
                parse_special: bool = False, timeout: float = 120) -> list[list[int]]:
    """Token ids of each string (UTF-8) or bytes, in one cllm process."""
    args = ([] if add_special else ["--no-special"]) + (["--parse-special"] if parse_special else [])
    return _run(cllm_bin, model, args, [_jsonl_line(x) for x in items], timeout)


def cllm_decode(cllm_bin, model, ids_list: list[list[int]], special: bool = False,
                timeout: float = 120) -> list[str]:
    """Text of each id sequence through the streaming detokenizer."""
    args = ["--decode"] + (["--parse-special"] if special else [])
    return _run(cllm_bin, model, args, [json.dumps(ids) for ids in ids_list], timeout)


def first_difference(a: list[int], b: list[int]) -> int:
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return min(len(a), len(b))
