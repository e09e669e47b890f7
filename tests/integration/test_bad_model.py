"""Malformed model files are refused cleanly.

Every case starts from a valid synthetic model (tests/ref/make_model.py) and
breaks one thing, either through the generator's fault-injection options
(missing tensor, missing key, unknown architecture) or by patching bytes at
offsets found by walking the GGUF layout below. For each, both `cllm info BAD`
and `cllm generate -m BAD -p hi -n 1` must exit with status 1 (not a signal),
print nothing on stdout and exactly one non-empty line on stderr, and that line
must name the problem.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List

import pytest

# ---------------------------------------------------------------------------
# A minimal GGUF layout walker (independent of the gguf package), giving the
# byte offsets that the corruptions patch.

_SCALAR_SIZE = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
T_STRING, T_ARRAY = 8, 9


@dataclass
class KV:
    key: str
    offset: int  # start of the record (the key's length)
    value_offset: int  # just after the value type: the scalar, the string length, or the array's element type


@dataclass
class TensorInfo:
    name: str
    offset: int  # start of the record
    type_offset: int  # the ggml type (uint32)
    data_offset_offset: int  # the data offset (uint64)
    ne: List[int]
    data_offset: int


@dataclass
class Layout:
    kvs: Dict[str, KV] = field(default_factory=dict)
    tensors: Dict[str, TensorInfo] = field(default_factory=dict)
    tensor_info_start: int = 0
    data_start: int = 0


def walk(buf: bytes) -> Layout:
    lay = Layout()
    pos = 4 + 4
    n_tensors, n_kv = struct.unpack_from("<QQ", buf, pos)
    pos += 16

    def string(p):
        (n,) = struct.unpack_from("<Q", buf, p)
        return buf[p + 8 : p + 8 + n].decode(), p + 8 + n

    def skip_value(t, p):
        if t == T_STRING:
            return string(p)[1]
        if t == T_ARRAY:
            et, n = struct.unpack_from("<IQ", buf, p)
            p += 12
            for _ in range(n):
                p = skip_value(et, p)
            return p
        return p + _SCALAR_SIZE[t]

    alignment = 32
    for _ in range(n_kv):
        start = pos
        key, pos = string(pos)
        (t,) = struct.unpack_from("<I", buf, pos)
        pos += 4
        lay.kvs[key] = KV(key, start, pos)
        if key == "general.alignment":
            (alignment,) = struct.unpack_from("<I", buf, pos)
        pos = skip_value(t, pos)
    lay.tensor_info_start = pos
    for _ in range(n_tensors):
        start = pos
        name, pos = string(pos)
        (n_dims,) = struct.unpack_from("<I", buf, pos)
        ne = list(struct.unpack_from(f"<{n_dims}Q", buf, pos + 4))
        pos += 4 + 8 * n_dims
        (off,) = struct.unpack_from("<Q", buf, pos + 4)
        lay.tensors[name] = TensorInfo(name, start, pos, pos + 4, ne, off)
        pos += 12
    lay.data_start = (pos + alignment - 1) // alignment * alignment
    return lay


def patch(buf: bytearray, offset: int, fmt: str, *values):
    struct.pack_into("<" + fmt, buf, offset, *values)


# ---------------------------------------------------------------------------
# The cases: name -> (how to build the file, keywords of which at least one
# must appear in the error line, case-insensitively; every "required" word must).


@dataclass
class Case:
    build: Callable  # (model_factory, out_path) -> None
    any_of: tuple
    required: tuple = ()


def _from_valid(mutate, **options):
    """A case builder that copies a valid llama model and applies mutate(bytearray, Layout)."""

    def build(model_factory, out: Path):
        buf = bytearray(Path(model_factory("llama", **options)).read_bytes())
        result = mutate(buf, walk(bytes(buf)))
        out.write_bytes(bytes(result if result is not None else buf))

    return build


def _generated(arch="llama", **options):
    def build(model_factory, out: Path):
        out.write_bytes(Path(model_factory(arch, **options)).read_bytes())

    return build


def _bad_version(buf, lay):
    patch(buf, 4, "I", 7)


def _bad_magic(buf, lay):
    buf[0:4] = b"GGML"


def _truncate_header(buf, lay):
    return buf[:12]  # magic, version and half of the tensor count


def _truncate_metadata(buf, lay):
    return buf[: lay.kvs["tokenizer.ggml.tokens"].value_offset + 1000]


def _truncate_data(buf, lay):
    return buf[: lay.data_start + (len(buf) - lay.data_start) // 2]


def _offset_past_end(buf, lay):
    t = lay.tensors["blk.0.attn_q.weight"]
    past = (len(buf) - lay.data_start + 4096 + 31) // 32 * 32
    patch(buf, t.data_offset_offset, "Q", past)


def _huge_array(buf, lay):
    kv = lay.kvs["tokenizer.ggml.tokens"]
    patch(buf, kv.value_offset + 4, "Q", 1 << 62)  # after the element type


def _string_past_eof(buf, lay):
    kv = lay.kvs["general.name"]
    patch(buf, kv.value_offset, "Q", len(buf) * 4)


def _iq2_xxs_tensor(buf, lay):
    # ffn_down has ne0 = n_ff = 256, a whole IQ2_XXS block per row; its
    # IQ2_XXS size (66 bytes per 256) is smaller than the F32 data it replaces,
    # so the file stays consistent and only the type is unsupported.
    t = lay.tensors["blk.0.ffn_down.weight"]
    assert t.ne[0] == 256
    patch(buf, t.type_offset, "I", 16)


def _iq2_xxs_misshapen(buf, lay):
    # attn_q rows are 64 long: not even a whole IQ2_XXS block.
    patch(buf, lay.tensors["blk.0.attn_q.weight"].type_offset, "I", 16)


TRUNCATED = ("truncated", "past end of file", "extends", "end of file", "too short")
CORRUPT = ("truncated", "corrupt", "fit", "too large", "too many", "past end", "end of file")

def _rope_freq_factor_zero(buf, lay):
    t = lay.tensors["rope_freqs.weight"]
    patch(buf, lay.data_start + t.data_offset + 4, "f", 0.0)  # the second factor (F32)


CASES = {
    "empty-file": Case(lambda mf, out: out.write_bytes(b""), ("empty", "too short", "truncated", "magic")),
    "wrong-magic": Case(_from_valid(_bad_magic), ("magic",)),
    "unknown-version": Case(_from_valid(_bad_version), ("version",), ("7",)),
    "truncated-header": Case(_from_valid(_truncate_header), TRUNCATED),
    "truncated-metadata": Case(_from_valid(_truncate_metadata), TRUNCATED),
    "truncated-tensor-data": Case(_from_valid(_truncate_data), TRUNCATED),
    "tensor-offset-past-eof": Case(_from_valid(_offset_past_end), ("past end of file", "extends", "truncated"),
                                   ("blk.0.attn_q.weight",)),
    "huge-array-count": Case(_from_valid(_huge_array), CORRUPT),
    "string-length-past-eof": Case(_from_valid(_string_past_eof), CORRUPT),
    "missing-tensor": Case(_generated(drop_tensors=("blk.0.attn_q.weight",)), ("blk.0.attn_q.weight",)),
    "missing-key": Case(_generated(drop_keys=("{arch}.block_count",)), ("block_count",)),
    "unknown-architecture": Case(_generated(gguf_arch="mamba9"), ("mamba9",)),
    "unsupported-type": Case(_from_valid(_iq2_xxs_tensor, n_ff=256), ("IQ2_XXS",)),
    "unsupported-type-misshapen": Case(_from_valid(_iq2_xxs_misshapen), ("IQ2_XXS",)),
    # Hyper-parameters the forward pass cannot compute with (eps <= 0 made NaN logits).
    "norm-eps-zero": Case(_generated(eps=0.0), ("epsilon",), ("0",)),
    "norm-eps-negative": Case(_generated(eps=-1e-5), ("epsilon",)),
    "norm-eps-nan": Case(_generated(eps=float("nan")), ("epsilon",)),
    "norm-eps-huge": Case(_generated(eps=1e30), ("epsilon",)),
    "rope-base-zero": Case(_generated(rope_base=0.0), ("freq_base",)),
    "rope-base-inf": Case(_generated(rope_base=float("inf")), ("freq_base",)),
    "rope-freq-factor-zero": Case(_from_valid(_rope_freq_factor_zero, rope_freqs=True), ("rope_freqs",)),
}

COMMANDS = {
    "info": lambda path: ["info", path],
    "generate": lambda path: ["generate", "-m", path, "-p", "hi", "-n", "1"],
}


@pytest.fixture(scope="module")
def bad_models(model_factory, tmp_path_factory):
    root = tmp_path_factory.mktemp("bad")
    paths = {}
    for name, case in CASES.items():
        paths[name] = root / f"{name}.gguf"
        case.build(model_factory, paths[name])
    return paths


def test_walker_understands_valid_model(model_factory):
    """The corruptions above rely on walk(); check it on a valid file."""
    buf = Path(model_factory("llama")).read_bytes()
    lay = walk(buf)
    assert "tokenizer.ggml.tokens" in lay.kvs and "blk.0.attn_q.weight" in lay.tensors
    t = lay.tensors["output.weight"]
    assert lay.data_start + t.data_offset + 4 * t.ne[0] * t.ne[1] == len(buf)


@pytest.mark.parametrize("command", list(COMMANDS))
@pytest.mark.parametrize("case", list(CASES))
def test_bad_model_is_refused(run_cllm, bad_models, case, command):
    path = bad_models[case]
    r = run_cllm(*COMMANDS[command](str(path)), timeout=60)
    what = f"cllm {command} on {case}"
    assert r.returncode >= 0, f"{what}: killed by signal {-r.returncode}; stderr:\n{r.stderr}"
    assert r.returncode == 1, f"{what}: exit status {r.returncode}, expected 1; stderr:\n{r.stderr}"
    assert r.stdout == "", f"{what}: printed on stdout:\n{r.stdout}"
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    assert len(lines) == 1, f"{what}: expected one error line on stderr, got {len(lines)}:\n{r.stderr}"
    line = lines[0].lower()
    c = CASES[case]
    assert any(k.lower() in line for k in c.any_of), f"{what}: error line names none of {c.any_of}: {lines[0]}"
    for k in c.required:
        assert k.lower() in line, f"{what}: error line does not mention {k!r}: {lines[0]}"


@pytest.mark.parametrize("case", ["norm-eps-zero", "norm-eps-nan"])
def test_serve_refuses_bad_hparams_at_load(run_cllm, bad_models, case):
    """`cllm serve` stops at load with the message, before taking requests."""
    r = run_cllm("serve", str(bad_models[case]), "--port", "0", "--host", "127.0.0.1", timeout=60)
    assert r.returncode == 1, r.stderr
    assert "epsilon" in r.stderr.lower(), r.stderr
