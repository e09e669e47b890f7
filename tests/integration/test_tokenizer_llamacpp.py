"""cllm's tokenizer against llama.cpp (through llama-cpp-python) on the real
Gemma 3 vocabulary (SentencePiece with byte fallback, 262144 tokens): the same
ids for every string of tests/data/tokenizer_strings.jsonl with and without
special-token parsing, for raw bytes that are not UTF-8, and text back again
through the streaming detokenizer."""

from __future__ import annotations

import random

import llama_cpp
import pytest

from tokenizer_util import cllm_decode, cllm_encode, first_difference, load_strings

STRINGS = load_strings()

# Bytes that are not UTF-8: truncated sequences, stray continuation bytes,
# overlong forms, surrogates, bytes that never occur in UTF-8, and such bytes
# next to spaces (which SentencePiece turns into the 3-byte U+2581).
RAW_BYTES = [
    b"\xe4\xbd abc \xff", b"\xc3", b"\x80", b"\x80\x80\x80", b"abc\xf0\x9f\x98", b"\xf0\x9f\x98 x",
    b"\xed\xa0\x80", b"\xc0\x80", b"\xc0\xaf", b"\xfe\xff", b"\xe2 x", b"\xc3 x", b"\xf0 x y",
    b"ok \xe2\x82 ok", b"\xe6\x97\xa5\xe6\x9c", b"a\xffb\xfec", b"\xf4\x90\x80\x80", b"\xf8\x88\x80\x80\x80",
    b"<bos>\xff<eos>", b"\xe4\xbd\xa0\xe5\xa5\xbd\xe4",
]


def _random_inputs(n: int, seed: int = 1234) -> list[bytes]:
    """Random mixes of ASCII, spaces and newlines, code points from many
    scripts, spelled special tokens and raw bytes."""
    rng = random.Random(seed)
    pieces = [" ", "  ", "\n", "\t", "<bos>", "<start_of_turn>", "<div>", "\u2581", "'s", "123"]
    out = []
    for _ in range(n):
        b = bytearray()
        for _ in range(rng.randint(1, 40)):
            r = rng.random()
            if r < 0.3:
                b += bytes([rng.randint(0x20, 0x7E)])
            elif r < 0.55:
                cp = rng.choice([rng.randint(0x80, 0x7FF), rng.randint(0x800, 0xD7FF),
                                 rng.randint(0xE000, 0xFFFD), rng.randint(0x10000, 0x10FFFF)])
                b += chr(cp).encode()
            elif r < 0.8:
                b += rng.choice(pieces).encode()
            else:
                b += bytes([rng.randint(0, 255)])
        out.append(bytes(b))
    return out


@pytest.fixture(scope="module")
def llm(real_model_path):
    return llama_cpp.Llama(model_path=str(real_model_path), vocab_only=True, verbose=False)


def _compare(llm, items, ours, add_bos, special):
    bad = []
    for item, got in zip(items, ours):
        raw = item if isinstance(item, bytes) else item.encode("utf-8")
        want = llm.tokenize(raw, add_bos=add_bos, special=special)
        if got != want:
            i = first_difference(got, want)
            bad.append(f"{item!r}: first difference at {i}: cllm {got[i:i + 8]} llama.cpp {want[i:i + 8]}")
    assert not bad, f"{len(bad)} of {len(items)} differ:\n" + "\n".join(bad[:20])


def test_fixture_is_large_and_varied():
    assert len(STRINGS) >= 200
    assert "" in STRINGS
    assert any("<start_of_turn>" in s for s in STRINGS)
    assert any(len(s.encode()) > 2000 for s in STRINGS)


@pytest.mark.parametrize("add_bos", [True, False], ids=["bos", "nobos"])
def test_same_ids_as_llamacpp(cllm_bin, real_model_path, llm, add_bos):
    ours = cllm_encode(cllm_bin, real_model_path, STRINGS, add_special=add_bos)
    _compare(llm, STRINGS, ours, add_bos, special=False)


def test_same_ids_as_llamacpp_parsing_special_tokens(cllm_bin, real_model_path, llm):
    ours = cllm_encode(cllm_bin, real_model_path, STRINGS, parse_special=True)
    _compare(llm, STRINGS, ours, add_bos=True, special=True)


@pytest.mark.parametrize("special", [False, True], ids=["plain", "parse_special"])
def test_same_ids_as_llamacpp_for_invalid_utf8(cllm_bin, real_model_path, llm, special):
    ours = cllm_encode(cllm_bin, real_model_path, RAW_BYTES, parse_special=special)
    _compare(llm, RAW_BYTES, ours, add_bos=True, special=special)


@pytest.mark.parametrize("special", [False, True], ids=["plain", "parse_special"])
def test_same_ids_as_llamacpp_for_random_inputs(cllm_bin, real_model_path, llm, special):
    items = _random_inputs(300)
    ours = cllm_encode(cllm_bin, real_model_path, items, parse_special=special)
    _compare(llm, items, ours, add_bos=True, special=special)


def test_chat_turn_markers_are_single_tokens(cllm_bin, real_model_path):
    text = "<start_of_turn>user\nHi<end_of_turn>\n"
    [plain], [parsed] = (cllm_encode(cllm_bin, real_model_path, [text], parse_special=p)
                         for p in (False, True))
    assert parsed[:3] == [2, 105, 2364] and 106 in parsed
    assert 105 not in plain and 106 not in plain


def _llamacpp_text(llm, ids: list[int]) -> str:
    # llama-cpp-python's detokenize drops a leading space after BOS (a Llama 1
    # hack that is not llama.cpp's); BOS has no text, so leave it out instead.
    if ids and ids[0] == llm.token_bos():
        ids = ids[1:]
    return llm.detokenize(ids).decode("utf-8", "replace")


def _round_trip(s: str) -> str:
    # SentencePiece's space marker U+2581 is a space once decoded (llama.cpp too)
    return s.replace("\u2581", " ")


def test_round_trip_through_streaming_detokenizer(cllm_bin, real_model_path, llm):
    ids = cllm_encode(cllm_bin, real_model_path, STRINGS)
    texts = cllm_decode(cllm_bin, real_model_path, ids)
    bad = [f"{s!r} -> {t!r}" for s, t in zip(STRINGS, texts) if _round_trip(s) != t]
    assert not bad, f"{len(bad)} strings do not round-trip:\n" + "\n".join(bad[:20])
    # and llama.cpp's pieces agree with ours
    bad = [s for s, i, t in zip(STRINGS, ids, texts) if _llamacpp_text(llm, i) != t]
    assert not bad, f"llama.cpp detokenizes differently: {bad[:5]!r}"


def test_round_trip_with_special_tokens(cllm_bin, real_model_path):
    ids = cllm_encode(cllm_bin, real_model_path, STRINGS, add_special=False, parse_special=True)
    texts = cllm_decode(cllm_bin, real_model_path, ids, special=True)
    bad = [f"{s!r} -> {t!r}" for s, t in zip(STRINGS, texts) if _round_trip(s) != t]
    assert not bad, f"{len(bad)} strings do not round-trip:\n" + "\n".join(bad[:20])


def test_invalid_utf8_decodes_to_replacement_characters(cllm_bin, real_model_path, llm):
    """Byte fallback keeps the bytes, so decoding gives them back with U+FFFD
    for each maximal invalid subpart (as Python's errors="replace"). Only the
    spaces can differ: an invalid lead byte before a space swallows part of the
    space's U+2581 in llama.cpp's character split, so those come back as
    U+2581 or U+FFFD."""
    ids = cllm_encode(cllm_bin, real_model_path, RAW_BYTES)
    texts = cllm_decode(cllm_bin, real_model_path, ids)
    for raw, i, text in zip(RAW_BYTES, ids, texts):
        assert text == _llamacpp_text(llm, i), raw
        if b" " not in raw:
            assert text == raw.decode("utf-8", "replace"), raw
