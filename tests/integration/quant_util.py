"""Helpers for the quantization tests: a small GGUF reader that also knows
cllm's GQ types (gguf-py refuses type ids it does not know), the GQ type ids,
and logit comparisons."""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np

# format/qgroup.h: id = 100 + 4 * bits_index + group code; bits 2, 3, 4, 8; groups 32, 64, 128, row.
GQ_BITS = (2, 3, 4, 8)
GQ_GROUPS = (32, 64, 128, -1)


def gq_type(bits: int, group: int) -> int:
    return 100 + 4 * GQ_BITS.index(bits) + GQ_GROUPS.index(group)


# ggml ids and (block size, bytes per block) of the types these tests meet.
GGML = {"F32": (0, 1, 4), "F16": (1, 1, 2), "Q4_0": (2, 32, 18), "Q4_1": (3, 32, 20), "Q8_0": (8, 32, 34),
        "Q6_K": (14, 256, 210), "I32": (26, 1, 4), "BF16": (30, 1, 2)}
GGML_ID = {k: v[0] for k, v in GGML.items()}


def row_bytes(t: int, n: int) -> int:
    if t >= 100:
        bits = GQ_BITS[(t - 100) // 4]
        g = GQ_GROUPS[(t - 100) % 4]
        g = n if g < 0 else g
        return (n // g) * (4 + bits * g // 8)
    for _, (tid, bs, size) in GGML.items():
        if tid == t:
            return n // bs * size
    raise ValueError(f"type {t} unknown to the test reader")


@dataclass
class Tensor:
    name: str
    type: int
    ne: tuple
    raw: bytes

    def rows(self) -> np.ndarray:
        """[rows][row bytes] uint8."""
        rb = row_bytes(self.type, self.ne[0])
        return np.frombuffer(self.raw, dtype=np.uint8).reshape(-1, rb)


class GGUF:
    """Metadata as python values and tensors with their raw bytes."""

    SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}

    def __init__(self, path):
        self.data = open(path, "rb").read()
        self.pos = 0
        assert self._take(4) == b"GGUF"
        (self.version,) = self._unpack("<I")
        n_tensors, n_kv = self._unpack("<QQ")
        self.kv = {}
        self.kv_types = {}
        for _ in range(n_kv):
            key = self._str()
            (t,) = self._unpack("<I")
            self.kv_types[key] = t
            self.kv[key] = self._value(t)
        infos = []
        for _ in range(n_tensors):
            name = self._str()
            (nd,) = self._unpack("<I")
            ne = self._unpack("<" + "Q" * nd)
            t, off = self._unpack("<IQ")
            infos.append((name, t, ne, off))
        align = self.kv.get("general.alignment", 32)
        base = (self.pos + align - 1) // align * align
        self.tensors = {}
        for name, t, ne, off in infos:
            n_rows = int(np.prod(ne[1:])) if len(ne) > 1 else 1
            size = row_bytes(t, ne[0]) * n_rows
            self.tensors[name] = Tensor(name, t, tuple(ne), self.data[base + off: base + off + size])

    def _take(self, n):
        b = self.data[self.pos: self.pos + n]
        self.pos += n
        return b

    def _unpack(self, fmt):
        size = struct.calcsize(fmt)
        return struct.unpack(fmt, self._take(size))

    def _str(self):
        (n,) = self._unpack("<Q")
        return self._take(n).decode("utf-8", errors="replace")

    def _value(self, t):
        if t == 8:
            return self._str()
        if t == 9:
            (et,) = self._unpack("<I")
            (n,) = self._unpack("<Q")
            return [self._value(et) for _ in range(n)]
        return self._unpack(self.SCALARS[t])[0]

    def types(self) -> dict:
        return {n: t.type for n, t in self.tensors.items()}


def log_softmax(x):
    x = x - x.max(axis=1, keepdims=True)
    return x - np.log(np.exp(x).sum(axis=1, keepdims=True))


def mean_kl(ref, x) -> float:
    a, b = log_softmax(ref), log_softmax(x)
    return float((np.exp(a) * (a - b)).sum(axis=1).mean())


def cllm_logits(run_cllm, model, tokens, path):
    p = run_cllm("logits", "-m", model, "--tokens", ",".join(map(str, tokens)), "--out", path, "--kv-type", "f32")
    assert p.returncode == 0, p.stderr
    return np.fromfile(path, dtype=np.float32).reshape(len(tokens), -1).astype(np.float64)


def random_tokens(n_vocab: int, n: int = 40, seed: int = 0) -> list[int]:
    rng = np.random.default_rng(seed)
    return [2] + [int(t) for t in rng.integers(4, n_vocab, n - 1)]
