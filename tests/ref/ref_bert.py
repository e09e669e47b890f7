"""A tiny BERT embedding model folder for tests, and its numpy forward pass.

make_bert(folder, ...) writes what sentence-transformers saves: config.json
(model_type "bert"), model.safetensors with BertModel's names (random
weights from a seed), tokenizer.json (a WordPiece vocabulary over the words of
a few sentences, BertNormalizer, BertPreTokenizer, [CLS] ... [SEP]),
tokenizer_config.json, and modules.json / 1_Pooling/config.json for the
pooling asked (mean or cls, normalized or not).

embed(folder, ids_list) is the reference: the BERT encoder written from the
definition (transformers' BertModel: post-LayerNorm blocks, erf GELU, every
token attending to every token of its own input), then the pooling and the
L2 normalization of sentence-transformers, in float64."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import numpy as np

from make_hf import Tensor, write_safetensors

WORDS = ("the a cat dog sat on mat rug quick brown fox jumps over lazy embedding vector text model "
         "hello world test sentence un ##able ##ly ##s ##ing ##ed run walk small big").split()


def make_bert(folder, *, seed=0, n_embd=32, n_layer=2, n_head=4, n_ff=64, n_pos=48, pooling="mean",
              normalize=True, matryoshka=None, dtype="F32", max_seq_length=None):
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    vocab = ["[PAD]"] + [f"[unused{i}]" for i in range(3)] + ["[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    vocab += list("abcdefghijklmnopqrstuvwxyz0123456789.,!?'") + ["##" + c for c in "abcdefghijklmnopqrstuvwxyz"]
    vocab += [w for w in WORDS if w not in vocab]
    n_vocab = len(vocab)
    rng = np.random.default_rng(seed)

    def mat(*shape, scale=0.2):
        return rng.standard_normal(shape).astype(np.float32) * scale

    t = {
        "embeddings.word_embeddings.weight": mat(n_vocab, n_embd, scale=1.0),
        "embeddings.position_embeddings.weight": mat(n_pos, n_embd, scale=0.5),
        "embeddings.token_type_embeddings.weight": mat(2, n_embd, scale=0.5),
        "embeddings.LayerNorm.weight": 1 + mat(n_embd, scale=0.1),
        "embeddings.LayerNorm.bias": mat(n_embd, scale=0.1),
    }
    for il in range(n_layer):
        p = f"encoder.layer.{il}."
        for name, (o, i) in {"attention.self.query": (n_embd, n_embd), "attention.self.key": (n_embd, n_embd),
                             "attention.self.value": (n_embd, n_embd), "attention.output.dense": (n_embd, n_embd),
                             "intermediate.dense": (n_ff, n_embd), "output.dense": (n_embd, n_ff)}.items():
            t[p + name + ".weight"] = mat(o, i, scale=1 / math.sqrt(i))
            t[p + name + ".bias"] = mat(o, scale=0.1)
        for name in ("attention.output.LayerNorm", "output.LayerNorm"):
            t[p + name + ".weight"] = 1 + mat(n_embd, scale=0.1)
            t[p + name + ".bias"] = mat(n_embd, scale=0.1)
    conv = {"F32": lambda a: a, "F16": lambda a: a.astype(np.float16)}[dtype]
    write_safetensors(folder / "model.safetensors", {k: Tensor(dtype, conv(v)) for k, v in t.items()})

    config = {"architectures": ["BertModel"], "model_type": "bert", "hidden_act": "gelu", "hidden_size": n_embd,
              "intermediate_size": n_ff, "layer_norm_eps": 1e-12, "max_position_embeddings": n_pos,
              "num_attention_heads": n_head, "num_hidden_layers": n_layer, "position_embedding_type": "absolute",
              "type_vocab_size": 2, "vocab_size": n_vocab, "pad_token_id": 0}
    if matryoshka is not None:
        config["matryoshka_dimensions"] = matryoshka
    (folder / "config.json").write_text(json.dumps(config))
    tokenizer = {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [{"id": vocab.index(s), "content": s, "single_word": False, "lstrip": False,
                          "rstrip": False, "normalized": False, "special": True}
                         for s in ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")],
        "normalizer": {"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": True,
                       "strip_accents": None, "lowercase": True},
        "pre_tokenizer": {"type": "BertPreTokenizer"},
        "post_processor": {"type": "TemplateProcessing",
                           "single": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}},
                                      {"Sequence": {"id": "A", "type_id": 0}},
                                      {"SpecialToken": {"id": "[SEP]", "type_id": 0}}],
                           "pair": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}},
                                    {"Sequence": {"id": "A", "type_id": 0}},
                                    {"SpecialToken": {"id": "[SEP]", "type_id": 0}},
                                    {"Sequence": {"id": "B", "type_id": 1}},
                                    {"SpecialToken": {"id": "[SEP]", "type_id": 1}}],
                           "special_tokens": {s: {"id": s, "ids": [vocab.index(s)], "tokens": [s]}
                                              for s in ("[CLS]", "[SEP]")}},
        "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": True},
        "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
                  "max_input_chars_per_word": 100, "vocab": {w: i for i, w in enumerate(vocab)}},
    }
    (folder / "tokenizer.json").write_text(json.dumps(tokenizer))
    (folder / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": True, "model_max_length": n_pos}))
    modules = [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
               {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]
    if normalize:
        modules.append({"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"})
    (folder / "modules.json").write_text(json.dumps(modules))
    (folder / "1_Pooling").mkdir(exist_ok=True)
    (folder / "1_Pooling" / "config.json").write_text(json.dumps(
        {"word_embedding_dimension": n_embd, "pooling_mode_cls_token": pooling == "cls",
         "pooling_mode_mean_tokens": pooling == "mean"}))
    if max_seq_length:
        (folder / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": max_seq_length}))
    return folder


def _read_safetensors(path):
    raw = Path(path).read_bytes()
    n = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8:8 + n])
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        lo, hi = info["data_offsets"]
        dt = {"F32": np.float32, "F16": np.float16}[info["dtype"]]
        out[name] = np.frombuffer(raw[8 + n + lo:8 + n + hi], dtype=dt).reshape(info["shape"]).astype(np.float64)
    return out


def _layernorm(x, w, b, eps=1e-12):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


def _gelu(x):
    from math import erf
    return 0.5 * x * (1 + np.vectorize(erf)(x / math.sqrt(2)))


def embed(folder, ids_list):
    folder = Path(folder)
    cfg = json.loads((folder / "config.json").read_text())
    pool = json.loads((folder / "1_Pooling" / "config.json").read_text())
    normalize = any("Normalize" in m["type"] for m in json.loads((folder / "modules.json").read_text()))
    w = _read_safetensors(folder / "model.safetensors")
    h, dh = cfg["num_attention_heads"], cfg["hidden_size"] // cfg["num_attention_heads"]
    out = []
    for ids in ids_list:
        n = len(ids)
        x = (w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][:n]
             + w["embeddings.token_type_embeddings.weight"][0])
        x = _layernorm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        for il in range(cfg["num_hidden_layers"]):
            p = f"encoder.layer.{il}."
            lin = lambda a, name: a @ w[p + name + ".weight"].T + w[p + name + ".bias"]  # noqa: E731
            q = lin(x, "attention.self.query").reshape(n, h, dh).transpose(1, 0, 2)
            k = lin(x, "attention.self.key").reshape(n, h, dh).transpose(1, 0, 2)
            v = lin(x, "attention.self.value").reshape(n, h, dh).transpose(1, 0, 2)
            s = q @ k.transpose(0, 2, 1) / math.sqrt(dh)
            s = np.exp(s - s.max(-1, keepdims=True))
            a = (s / s.sum(-1, keepdims=True)) @ v
            a = a.transpose(1, 0, 2).reshape(n, h * dh)
            x = _layernorm(x + lin(a, "attention.output.dense"), w[p + "attention.output.LayerNorm.weight"],
                           w[p + "attention.output.LayerNorm.bias"])
            f = lin(_gelu(lin(x, "intermediate.dense")), "output.dense")
            x = _layernorm(x + f, w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"])
        e = x[0] if pool["pooling_mode_cls_token"] else x.mean(0)
        if normalize:
            e = e / max(np.linalg.norm(e), 1e-12)
        out.append(e)
    return np.array(out)
