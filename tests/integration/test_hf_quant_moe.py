"""GPTQ and AWQ mixtures of experts, as GPTQModel/AutoGPTQ and AutoAWQ ship
them: every expert's gate/up/down projection (and the attention) quantized
as its own linear layer, mlp.experts.E.gate_proj.qweight and so on, the
router and the norms left in float.

The checkpoints start from transformers' own Qwen3-MoE and Mixtral
(tests/ref/hf_families.py); every linear layer but the router is quantized
by make_hf's GPTQ (act-order, asymmetric v1 zeros) or AWQ packers. The
reference is transformers' float32 forward of the same checkpoint with each
quantized layer replaced by its dequantization scale * (q - zero), loaded
from a float folder by from_pretrained: transformers' MoE classes, not ours.

cllm repacks each expert into a GQ format at load and quantizes activations
to 8 bits per 32 (as for dense GPTQ layers, test_hf_quant.py), so the bound
is that of int8 activations: the same 8e-2 max / 3e-2 mean relative error as
the dense layers, and the same top token at 85% of positions or more. That
noise also moves the router's scores a little, and where a token's k-th and
(k+1)-th experts were nearly tied in the reference, cllm may run the other
one, which moves that token's logits by far more than the rounding (measured
when written: 0.10-0.34 at 5 positions of 96, every one with a margin under
0.04 between the two experts' router logits at some layer; elsewhere the
largest error was 0.03). So positions whose smallest margin over the layers
(transformers' own router logits) is under TIE are near-ties: they are
counted (they must leave at least half the positions, and every expert of
every layer chosen at one of those), but not held to the bound.
"""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

import hf_families
import make_hf

TOKENS = [2] + [int(x) for x in np.random.default_rng(5).integers(4, hf_families.N_VOCAB, 95)]
MAX_TOL, MEAN_TOL = 8e-2, 3e-2
TIE = 0.05  # router logit margin under which a token's experts may change

# (test id, family, quantization, GQ type cllm makes of every quantized layer)
VARIANTS = [
    ("qwen3_moe-gptq4-asym-g32-act-order", "qwen3_moe",
     dict(quant="gptq", bits=4, group=32, sym=False, desc_act=True), "GQ4_G32"),
    ("qwen3_moe-awq4-g32", "qwen3_moe", dict(quant="awq", bits=4, group=32), "GQ4_G32"),
    ("mixtral-gptq8-sym-g32", "mixtral", dict(quant="gptq", bits=8, group=32, sym=True, desc_act=False),
     "GQ8_G32"),
]
IDS = [v[0] for v in VARIANTS]


def quantized(name: str) -> bool:
    """The layers GPTQ and AWQ quantize: attention and every expert, not the
    router (mlp.gate, block_sparse_moe.gate), embeddings, head or norms."""
    if not name.endswith(".weight") or ".layers." not in name or "norm" in name:
        return False
    return not name.endswith((".mlp.gate.weight", ".block_sparse_moe.gate.weight"))


def write_pair(src, quant_dir, float_dir, options):
    """quant_dir: src with its linear layers GPTQ/AWQ-packed; float_dir: src
    with those layers replaced by their dequantization. Returns the names of
    the quantized layers."""
    from safetensors.numpy import load_file, save_file

    tensors = load_file(str(src / "model.safetensors"))
    rng = np.random.default_rng(7)
    packed, dequant = {}, {}
    for name, w in tensors.items():
        if not quantized(name):
            packed[name] = dequant[name] = w
            continue
        if options["quant"] == "gptq":
            ql = make_hf.quantize_gptq(w, options["bits"], options["group"], options["sym"], options["desc_act"],
                                       False, rng)
        else:
            ql = make_hf.quantize_awq(w, options["group"])
        base = name[: -len(".weight")]
        for suffix, t in ql.tensors.items():  # safetensors' numpy writer stores a strided view's buffer as is
            packed[f"{base}.{suffix}"] = np.ascontiguousarray(t.data)
        dequant[name] = ql.dequant
    for folder, ts in ((quant_dir, packed), (float_dir, dequant)):
        shutil.copytree(src, folder)
        save_file(ts, str(folder / "model.safetensors"), metadata={"format": "pt"})
    cfg = json.loads((src / "config.json").read_text())
    if options["quant"] == "gptq":
        cfg["quantization_config"] = {"quant_method": "gptq", "bits": options["bits"], "group_size": options["group"],
                                      "sym": options["sym"], "desc_act": options["desc_act"],
                                      "checkpoint_format": "gptq"}
    else:
        cfg["quantization_config"] = {"quant_method": "awq", "bits": 4, "group_size": options["group"],
                                      "zero_point": True, "version": "gemm"}
    (quant_dir / "config.json").write_text(json.dumps(cfg, indent=1))
    return sorted(n for n in tensors if quantized(n))


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    """variant id -> (quantized folder, float folder, quantized layer names)."""
    root = tmp_path_factory.mktemp("hfq_moe")
    made = {}

    def get(vid, family, options):
        if vid not in made:
            src = root / family
            if not src.exists():
                hf_families.write(family, str(src))
            made[vid] = (root / vid, root / f"{vid}-float")
            made[vid] += (write_pair(src, made[vid][0], made[vid][1], options),)
        return made[vid]

    return get


def reference(float_dir):
    """transformers' logits [tokens][vocab], each position's smallest margin,
    over the layers, between its k-th and (k+1)-th router logits, and each
    layer's chosen experts [tokens][k]."""
    import torch
    import transformers

    model = transformers.AutoModelForCausalLM.from_pretrained(str(float_dir), dtype="float32").eval()
    with torch.no_grad():
        out = model(torch.tensor([TOKENS], dtype=torch.long), output_router_logits=True)
    k = model.config.num_experts_per_tok
    margins, chosen = [], []
    for rl in out.router_logits:
        top = torch.sort(rl.float(), dim=-1, descending=True)
        margins.append((top.values[:, k - 1] - top.values[:, k]).numpy())
        chosen.append(top.indices[:, :k].numpy())
    assert len(margins) == hf_families.LAYERS
    return out.logits[0].double().numpy(), np.min(np.stack(margins), axis=0), chosen


@pytest.mark.parametrize("vid,family,options,gq", VARIANTS, ids=IDS)
def test_expert_logits_match_transformers_on_dequantized_weights(run_cllm, checkpoints, tmp_path, vid, family,
                                                                  options, gq):
    quant_dir, float_dir, layers = checkpoints(vid, family, options)
    assert sum(".experts." in n for n in layers) == 3 * 8 * hf_families.LAYERS, "every expert is quantized"
    ref, margin, chosen = reference(float_dir)
    out = tmp_path / "logits.bin"
    r = run_cllm("logits", "-m", quant_dir, "--tokens", ",".join(map(str, TOKENS)), "--out", out,
                 "--kv-type", "f32", timeout=120)
    assert r.returncode == 0, r.stderr
    got = np.fromfile(out, dtype="<f4").reshape(len(TOKENS), -1).astype(np.float64)
    err = np.abs(got - ref).max(axis=1) / np.abs(ref).max(axis=1)
    clear = margin >= TIE
    assert clear.mean() >= 0.5, f"{vid}: {np.sum(~clear)} of {len(TOKENS)} positions are near-ties"
    for il, c in enumerate(chosen):
        assert len(np.unique(c[clear])) == 8, f"{vid}: layer {il} runs {np.unique(c[clear])} at the clear positions"
    e = err[clear]
    assert e.max() <= MAX_TOL and e.mean() <= MEAN_TOL, (
        f"{vid}: relative error max {e.max():.3g} (position {np.flatnonzero(clear)[e.argmax()]}), "
        f"mean {e.mean():.3g} over the {clear.sum()} positions without a near-tie in the router")
    assert np.mean(got.argmax(1)[clear] == ref.argmax(1)[clear]) >= 0.85


@pytest.mark.parametrize("vid,family,options,gq", VARIANTS[:1], ids=IDS[:1])
def test_info_counts_the_quantized_experts(run_cllm, checkpoints, vid, family, options, gq):
    quant_dir, _, _ = checkpoints(vid, family, options)
    r = run_cllm("info", quant_dir)
    assert r.returncode == 0, r.stderr
    assert gq in r.stdout, r.stdout
