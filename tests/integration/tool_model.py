"""A synthetic model whose greedy reply is known in advance, to drive tool
calling end to end through the real engine and server.

It is a bigram model built by hand: every token's embedding is a one-hot
vector (n_embd >= n_vocab), every layer's projections are zero (so attention
and the FFN add nothing and the residual stream is the embedding), and the
output matrix holds the table: after a token of the `call` chain comes the
next piece of the chain (the last one is followed by <eos>); after any other
token - whatever the prompt ends with - the chain's first piece. Every
other token's second choice is the `answer` chain's first piece, so a request
that forbids the call's first piece (logit_bias -100) gets the answer: the
final turn of a round trip. Pieces are whole vocabulary entries, one token
each, so the stream sends the reply in exactly those pieces.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "ref"))
import make_model  # noqa: E402
from gguf import TokenType  # noqa: E402

SPACE = "\u2581"  # SentencePiece's space
N_EMBD = 384
# Logit scale: the final RMSNorm turns a one-hot row into sqrt(n_embd) ~ 19.6.
NEXT, SECOND, OTHER = 2.0, 1.8, 0.0


def _vocab(pieces):
    tokens, scores, types = make_model.build_vocab(make_model.N_SPECIAL + 256)
    for i, p in enumerate(pieces):
        tokens.append(p.replace(" ", SPACE))
        scores.append(-1000.0 - i)  # never chosen when tokenizing prompts
        types.append(TokenType.NORMAL)
    return tokens, scores, types


def write_tool_model(path, call: list[str], answer: list[str]) -> Path:
    """Writes the model to `path`: greedy decoding after any prompt gives
    ''.join(call), then <eos>; with the first piece of `call` forbidden,
    ''.join(answer)."""
    pieces = list(dict.fromkeys(call + answer))
    assert len(pieces) == len(call) + len(answer), "pieces must be distinct"
    tokens, scores, types = _vocab(pieces)
    n_vocab = len(tokens)
    assert n_vocab <= N_EMBD
    ids = {p: make_model.N_SPECIAL + 256 + i for i, p in enumerate(pieces)}
    spec = make_model.default_spec("llama", n_vocab=n_vocab, n_embd=N_EMBD, n_head=4, n_head_kv=4,
                                   head_dim=N_EMBD // 4, n_ff=64, n_layer=1, n_ctx=4096)
    out = np.zeros((n_vocab, N_EMBD), dtype=np.float32)
    chain_ids = set()
    for chain in (call, answer):
        for a, b in zip(chain, chain[1:] + [None]):
            out[ids[b] if b else make_model.EOS_ID, ids[a]] = NEXT
            chain_ids.add(ids[a])
    for t in range(n_vocab):
        if t not in chain_ids:
            out[ids[call[0]], t] = NEXT
            out[ids[answer[0]], t] = SECOND
    tensors = []
    for name, w in make_model.make_tensors(spec):
        if name == "token_embd.weight":
            w = np.eye(n_vocab, N_EMBD, dtype=np.float32)
        elif name == "output.weight":
            w = out
        elif name.endswith("norm.weight"):
            w = np.ones_like(w)
        else:
            w = np.zeros_like(w)
        tensors.append((name, w))
    make_model.write_model(path, spec, vocab=(tokens, scores, types), tensors=tensors)
    return Path(path)


def piece_id(call: list[str], answer: list[str], piece: str) -> int:
    """The token id of one of the pieces."""
    pieces = list(dict.fromkeys(call + answer))
    return make_model.N_SPECIAL + 256 + pieces.index(piece)
