"""The numpy reference of KV eviction's StreamingLLM (and plain truncation):
a sequence fed chunk by chunk, whose cache keeps the first `sink` tokens and
the most recent ones once it would pass `budget`, with every position
re-indexed inside the cache as the paper does. Keys are kept before rope and
rotated at their current slot for every chunk, the paper's own definition;
cllm stores them rotated and re-rotates the moved ones (src/kv/kv_evict.h),
which must give the same attention.

The sizes mirror src/kv/kv_evict.c: a step adds at most what fits up to the
budget; a full cache is cut to n_keep slots (the budget less a margin)."""
from __future__ import annotations

import math
from typing import List, Sequence

import numpy as np

import ref_forward as rf


def margin(budget: int, sink: int) -> int:
    return max(1, (budget - sink) // 8)


def room(budget: int, sink: int, n_cached: int) -> int:
    """Tokens the next step may add."""
    return budget - n_cached if n_cached < budget else margin(budget, sink)


def kept_slots(budget: int, sink: int, n_cached: int) -> List[int]:
    """The slots StreamingLLM keeps of a full cache: the sinks and the most recent ones."""
    keep = budget - margin(budget, sink)
    s = min(sink, keep - 1)
    return list(range(s)) + list(range(n_cached - (keep - s), n_cached))


class StreamingRef:
    def __init__(self, path: str, budget: int, sink: int, policy: str = "streaming", kv_type: str = "f32",
                 reindex: bool = True):
        """reindex=False keeps each token at its place in the text instead of
        its slot (what eviction without re-indexing would compute)."""
        self.m = rf.load_cached(path)
        self.reindex = reindex
        self.text_pos = np.zeros(0, dtype=np.int64)  # each slot's place in the text
        self.budget, self.kv_type = budget, kv_type
        self.sink = 0 if policy == "truncate" else sink
        self.k: List[np.ndarray] = [None] * self.m.n_layer  # before rope, [n_cached, Hkv, D]
        self.v: List[np.ndarray] = [None] * self.m.n_layer
        self.n_cached = 0
        self.evicted = 0

    def _make_room(self, n_new: int) -> None:
        if self.n_cached + n_new <= self.budget:
            return
        assert n_new <= room(self.budget, self.sink, self.n_cached)
        keep = kept_slots(self.budget, self.sink, self.n_cached)
        for il in range(self.m.n_layer):
            self.k[il], self.v[il] = self.k[il][keep], self.v[il][keep]
        self.text_pos = self.text_pos[keep]
        self.evicted += self.n_cached - len(keep)
        self.n_cached = len(keep)

    def feed(self, tokens: Sequence[int]) -> np.ndarray:
        """Logits [len(tokens), n_vocab] of one step that computes `tokens`."""
        m = self.m
        tokens = rf.check_tokens(m, tokens)
        self._make_room(len(tokens))
        at = self.n_cached + self.evicted  # the first new token's place in the text
        self.text_pos = np.concatenate([self.text_pos, np.arange(at, at + len(tokens))])
        k_pos = np.arange(self.n_cached + len(tokens)) if self.reindex else self.text_pos
        q_pos = k_pos[self.n_cached:]
        x = rf.embed(m, tokens)
        for il in range(m.n_layer):
            q, k, v = rf.layer_qkv(m, il, x)
            # The cache rounds what it stores; rope of a rounded f32 key equals
            # cllm's rounding of the rotated key only for f32, the test's type.
            k, v = rf.kv_round(k, v, self.kv_type)
            if self.k[il] is not None:
                k, v = np.concatenate([self.k[il], k]), np.concatenate([self.v[il], v])
            self.k[il], self.v[il] = k, v
            a = rf.attention_at(rf.layer_rope(m, il, q, q_pos), rf.layer_rope(m, il, k, k_pos), v, q_pos, k_pos,
                                1.0 / math.sqrt(m.head_dim), m.n_swa if rf.is_local(m, il) else 0)
            x = rf.layer_rest(m, il, x, a)
        self.n_cached += len(tokens)
        return rf.output_logits(m, x)


def log_softmax(row: np.ndarray) -> np.ndarray:
    z = row - row.max()
    return z - math.log(np.exp(z).sum())


def engine_logprobs(path: str, prompt: Sequence[int], output: Sequence[int], budget: int, sink: int,
                    policy: str = "streaming", step_tokens: int = 512, reindex: bool = True) -> np.ndarray:
    """The logprob of each output token as the engine computes them: the
    prompt in chunks of what fits up to the budget (and at most step_tokens,
    the engine's --max-num-batched-tokens), then one token per step."""
    ref = StreamingRef(path, budget, sink, policy, reindex=reindex)
    logits, at = None, 0
    while at < len(prompt):
        chunk = min(len(prompt) - at, step_tokens, room(budget, ref.sink, ref.n_cached))
        logits = ref.feed(prompt[at:at + chunk])[-1]
        at += chunk
    out = []
    for i, tok in enumerate(output):
        out.append(log_softmax(logits)[tok])
        if i + 1 < len(output):
            logits = ref.feed([tok])[-1]
    return np.array(out)
