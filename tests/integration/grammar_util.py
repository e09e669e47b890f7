"""Helpers for the grammar tests: drive tests/tools/grammar_masks (cllm's
constraint engine, one token at a time) beside XGrammar's GrammarMatcher over
the same vocabulary, and decode masks into sets of token ids."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np


class CllmMasks:
    """One grammar_masks process: mask(), accept(id), can_end(), vocab()."""

    def __init__(self, tool: Path, kind: str, spec, vocab_path: Path, tmp: Path, any_whitespace=False,
                 uncached=False):
        spec_file = tmp / f"spec-{kind}.txt"
        spec_file.write_text(spec if isinstance(spec, str) else json.dumps(spec))
        args = [str(tool), kind, str(spec_file), str(vocab_path)]
        if any_whitespace:
            args.append("--any-whitespace")
        if uncached:
            args.append("--uncached")
        self.p = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        first = self.p.stdout.readline().strip()
        if first != "ready":
            self.close()
            raise ValueError(first)

    def _ask(self, line: str) -> str:
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()
        return self.p.stdout.readline().strip()

    def mask(self) -> np.ndarray:
        out = self._ask("mask")
        assert not out.startswith("error"), out
        return np.frombuffer(bytes.fromhex(out), dtype=">u4").astype(np.uint32)

    def accept(self, token: int) -> bool:
        return self._ask(f"accept {token}") == "1"

    def can_end(self) -> bool:
        return self._ask("end") == "1"

    def vocab(self, n: int) -> list[tuple[bytes, bool]]:
        self.p.stdin.write("vocab\n")
        self.p.stdin.flush()
        out = []
        for _ in range(n):
            line = self.p.stdout.readline().rstrip("\n")
            hexbytes, _, flag = line.partition(" ")
            out.append((b"" if hexbytes == "-" else bytes.fromhex(hexbytes), flag == "eog"))
        return out

    def close(self):
        self.p.stdin.close()
        self.p.wait(timeout=30)


def compile_error(tool: Path, kind: str, spec, vocab_path: Path, tmp: Path) -> str:
    """The error message grammar_masks prints for a constraint that does not compile."""
    spec_file = tmp / f"bad-{kind}.txt"
    spec_file.write_text(spec if isinstance(spec, str) else json.dumps(spec))
    r = subprocess.run([str(tool), kind, str(spec_file), str(vocab_path)], input="", capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert r.stdout.startswith("error: ")
    return r.stdout[len("error: "):].strip()


def mask_ids(mask: np.ndarray, n_vocab: int) -> set[int]:
    bits = np.unpackbits(mask.astype("<u4").view(np.uint8), bitorder="little")[:n_vocab]
    return set(np.nonzero(bits)[0].tolist())


def write_vocab_json(path: Path, tokens: list[bytes], eog: list[int]):
    path.write_text(json.dumps({"tokens": [t.decode("latin-1") for t in tokens], "eog": eog}))
