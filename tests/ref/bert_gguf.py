"""A Hugging Face BERT embedding folder as a GGUF file of llama.cpp's "bert"
architecture, written with gguf-py the way convert_hf_to_gguf.py's BertModel
writes it: bert.* hyper-parameters and pooling type, the tensors under
llama.cpp's names (a [out, in] matrix is GGUF's ne = [in, out], the same
bytes), and the WordPiece vocabulary in llama.cpp's "phantom space" form:
a word's first piece marked with U+2581, "##" dropped from continuations,
[BRACKETED] tokens kept as they are, the bracketed specials as control
tokens."""

from __future__ import annotations

import json
from pathlib import Path

import gguf
import numpy as np

NAMES = {
    "embeddings.word_embeddings.weight": "token_embd.weight",
    "embeddings.position_embeddings.weight": "position_embd.weight",
    "embeddings.token_type_embeddings.weight": "token_types.weight",
    "embeddings.LayerNorm.weight": "token_embd_norm.weight",
    "embeddings.LayerNorm.bias": "token_embd_norm.bias",
}
LAYER = {
    "attention.self.query": "attn_q", "attention.self.key": "attn_k", "attention.self.value": "attn_v",
    "attention.output.dense": "attn_output", "attention.output.LayerNorm": "attn_output_norm",
    "intermediate.dense": "ffn_up", "output.dense": "ffn_down", "output.LayerNorm": "layer_output_norm",
}


def _read_safetensors(path):
    raw = Path(path).read_bytes()
    n = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8:8 + n])
    for name, info in header.items():
        if name == "__metadata__" or info["dtype"] not in ("F32", "F16"):
            continue
        lo, hi = info["data_offsets"]
        dt = np.float32 if info["dtype"] == "F32" else np.float16
        yield name, np.frombuffer(raw[8 + n + lo:8 + n + hi], dtype=dt).reshape(info["shape"])


def gguf_name(hf: str) -> str | None:
    if hf in NAMES:
        return NAMES[hf]
    parts = hf.split(".")
    if parts[:2] != ["encoder", "layer"]:
        return None
    il, rest, kind = parts[2], ".".join(parts[3:-1]), parts[-1]
    return f"blk.{il}.{LAYER[rest]}.{kind}" if rest in LAYER else None


def write_bert_gguf(folder, out, pooling: str = "mean") -> Path:
    folder, out = Path(folder), Path(out)
    cfg = json.loads((folder / "config.json").read_text())
    tj = json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))
    vocab = sorted(tj["model"]["vocab"].items(), key=lambda kv: kv[1])
    special = {t["content"] for t in tj["added_tokens"] if t.get("special")}
    tokens, types = [], []
    for text, _ in vocab:
        if text.startswith("[") and text.endswith("]"):
            tokens.append(text)
        elif text.startswith("##"):
            tokens.append(text[2:])
        else:
            tokens.append("\u2581" + text)
        types.append(gguf.TokenType.CONTROL if text in special else gguf.TokenType.NORMAL)
    ids = dict(vocab)
    w = gguf.GGUFWriter(str(out), "bert")
    w.add_name(folder.name)
    w.add_context_length(cfg["max_position_embeddings"])
    w.add_embedding_length(cfg["hidden_size"])
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_block_count(cfg["num_hidden_layers"])
    w.add_head_count(cfg["num_attention_heads"])
    w.add_layer_norm_eps(cfg.get("layer_norm_eps", 1e-12))
    w.add_causal_attention(False)
    w.add_pooling_type(gguf.PoolingType.CLS if pooling == "cls" else gguf.PoolingType.MEAN)
    w.add_tokenizer_model("bert")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_type_count(cfg.get("type_vocab_size", 2))
    w.add_bos_token_id(ids["[CLS]"])
    w.add_sep_token_id(ids["[SEP]"])
    w.add_unk_token_id(ids["[UNK]"])
    w.add_pad_token_id(ids["[PAD]"])
    w.add_mask_token_id(ids["[MASK]"])
    w.add_add_bos_token(True)
    w.add_bool(gguf.Keys.Tokenizer.ADD_SEP, True)
    for name, a in _read_safetensors(folder / "model.safetensors"):
        g = gguf_name(name)
        if g:
            w.add_tensor(g, np.ascontiguousarray(a))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return out
