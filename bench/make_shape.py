"""A GGUF file in the shape of a real model, with random weights: speed does
not depend on the weights' values, so cllm and llama.cpp race fairly on it
(bench/compare-llamacpp.sh --shape NAME). Written with gguf-py in F16 (norms
F32), with llama.cpp's tensor names and metadata for the family, and a
tokenizer of the real vocabulary's size (SentencePiece-style pieces that
both engines load; the races feed random token ids).

    python3 bench/make_shape.py NAME OUT.gguf      # NAME: one of SHAPES
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "ref"))
import make_hf  # noqa: E402  (convert_hf_to_gguf.py's llama3 factors, as the tests compute them)

# name -> (architecture, hyper-parameters). From the models' config.json files.
SHAPES = {
    "llama-3.2-1b": ("llama", dict(n_embd=2048, n_layer=16, n_head=32, n_head_kv=8, head_dim=64, n_ff=8192,
                                   n_vocab=128256, rope_base=500000.0, ctx=131072, llama3_rope=True)),
    "qwen3-1.7b": ("qwen3", dict(n_embd=2048, n_layer=28, n_head=16, n_head_kv=8, head_dim=128, n_ff=6144,
                                 n_vocab=151936, rope_base=1000000.0, ctx=40960, qk_norm=True)),
    "qwen3-4b": ("qwen3", dict(n_embd=2560, n_layer=36, n_head=32, n_head_kv=8, head_dim=128, n_ff=9728,
                               n_vocab=151936, rope_base=1000000.0, ctx=40960, qk_norm=True)),
    # Mixtures of experts: OLMoE-1B-7B as it is (q/k norm over the whole projection), and Qwen3-30B-A3B's
    # layer cut to 16 layers of 64 experts (of its 48 of 128), so that it fits this machine's memory.
    "olmoe-1b-7b": ("olmoe", dict(n_embd=2048, n_layer=16, n_head=16, n_head_kv=16, head_dim=128, n_ff=1024,
                                  n_vocab=50304, rope_base=10000.0, ctx=4096, qk_norm_all=True, n_expert=64,
                                  n_expert_used=8, untied=True)),
    "qwen3-moe-16l": ("qwen3moe", dict(n_embd=2048, n_layer=16, n_head=32, n_head_kv=4, head_dim=128, n_ff=6144,
                                       n_vocab=151936, rope_base=1000000.0, ctx=40960, qk_norm=True, n_expert=64,
                                       n_expert_used=8, n_ff_exp=768)),
}


# Llama 3.2's llama3 rope scaling, as its config.json states it.
LLAMA32_ROPE = {"factor": 32.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                "original_max_position_embeddings": 8192}


def write(name: str, path: str, seed: int = 0) -> None:
    import gguf

    arch, h = SHAPES[name]
    rng = np.random.default_rng(seed)
    w = gguf.GGUFWriter(path, arch)
    w.add_name(f"{name} (random weights)")
    w.add_context_length(h["ctx"])
    w.add_embedding_length(h["n_embd"])
    w.add_block_count(h["n_layer"])
    w.add_feed_forward_length(h["n_ff"])
    w.add_head_count(h["n_head"])
    w.add_head_count_kv(h["n_head_kv"])
    w.add_key_length(h["head_dim"])
    w.add_value_length(h["head_dim"])
    w.add_rope_dimension_count(h["head_dim"])
    w.add_rope_freq_base(h["rope_base"])
    w.add_layer_norm_rms_eps(1e-6)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    n_exp = h.get("n_expert", 0)
    if n_exp:
        w.add_expert_count(n_exp)
        w.add_expert_used_count(h["n_expert_used"])
        if "n_ff_exp" in h:
            w.add_expert_feed_forward_length(h["n_ff_exp"])

    n_vocab = h["n_vocab"]
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    types = [gguf.TokenType.UNKNOWN, gguf.TokenType.CONTROL, gguf.TokenType.CONTROL] + [gguf.TokenType.BYTE] * 256
    tokens += [f"\u2581t{i}" for i in range(n_vocab - len(tokens))]
    types += [gguf.TokenType.NORMAL] * (n_vocab - len(types))
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores([-float(i) for i in range(n_vocab)])
    w.add_token_types(types)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)

    def mat(rows, cols):
        return (rng.standard_normal((rows, cols), dtype=np.float32) * 0.02).astype(np.float16)

    def ones(n):
        return (1.0 + 0.01 * rng.standard_normal(n, dtype=np.float32)).astype(np.float32)

    e, hd = h["n_embd"], h["head_dim"]
    q, kv = h["n_head"] * hd, h["n_head_kv"] * hd
    w.add_tensor("token_embd.weight", mat(n_vocab, e))  # tied: no output.weight, as the real 1B/1.7B/4B
    if h.get("untied"):  # OLMoE has its own output matrix (and llama.cpp requires it)
        w.add_tensor("output.weight", mat(n_vocab, e))
    w.add_tensor("output_norm.weight", ones(e))
    if h.get("llama3_rope"):
        w.add_tensor("rope_freqs.weight", make_hf.llama3_factors(hd, h["rope_base"], LLAMA32_ROPE))
    experts = None
    for il in range(h["n_layer"]):
        p = f"blk.{il}."
        w.add_tensor(p + "attn_norm.weight", ones(e))
        w.add_tensor(p + "attn_q.weight", mat(q, e))
        w.add_tensor(p + "attn_k.weight", mat(kv, e))
        w.add_tensor(p + "attn_v.weight", mat(kv, e))
        w.add_tensor(p + "attn_output.weight", mat(e, q))
        if h.get("qk_norm"):
            w.add_tensor(p + "attn_q_norm.weight", ones(hd))
            w.add_tensor(p + "attn_k_norm.weight", ones(hd))
        if h.get("qk_norm_all"):
            w.add_tensor(p + "attn_q_norm.weight", ones(q))
            w.add_tensor(p + "attn_k_norm.weight", ones(kv))
        w.add_tensor(p + "ffn_norm.weight", ones(e))
        if n_exp:
            # Every layer's experts are the same random values (one set in memory, not 16): speed does not
            # depend on them, and the file still holds each layer's own bytes.
            if experts is None:
                ff = h.get("n_ff_exp", h["n_ff"])
                experts = [np.stack([mat(ff, e) for _ in range(n_exp)]) for _ in range(2)]
                experts.append(np.stack([mat(e, ff) for _ in range(n_exp)]))
            w.add_tensor(p + "ffn_gate_inp.weight", mat(n_exp, e).astype(np.float32))
            w.add_tensor(p + "ffn_gate_exps.weight", experts[0])
            w.add_tensor(p + "ffn_up_exps.weight", experts[1])
            w.add_tensor(p + "ffn_down_exps.weight", experts[2])
            continue
        w.add_tensor(p + "ffn_gate.weight", mat(h["n_ff"], e))
        w.add_tensor(p + "ffn_up.weight", mat(h["n_ff"], e))
        w.add_tensor(p + "ffn_down.weight", mat(e, h["n_ff"]))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2 or argv[0] not in SHAPES:
        print(f"usage: make_shape.py {{{','.join(SHAPES)}}} OUT.gguf", file=sys.stderr)
        return 2
    write(argv[0], argv[1])
    return 0


if __name__ == "__main__":
    sys.exit(main())
