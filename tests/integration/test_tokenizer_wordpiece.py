"""WordPiece (BERT) tokenizers from tokenizer.json (`cllm tokenize -m
FOLDER`) against Hugging Face `tokenizers` loading the same file, on every
string of tests/data/tokenizer_strings.jsonl and text that exercises the
BertNormalizer (accents, CJK, Hangul, case mappings, control and zero-width
characters, long words, special tokens spelled in the text): all-MiniLM-L6-v2's
own tokenizer, and the same vocabulary with the normalizer's switches turned
off one by one."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest
import tokenizers

from tokenizer_util import cllm_encode, first_difference, load_strings

EXTRA = [
    "Héllo Wörld! Ça va? Crème brûlée, piña colada, naïve façade",
    "你好世界，这是一个测试。東京タワー 한국어 텍스트입니다",
    "İstanbul ΣΊΣΥΦΟΣ ǅemal ﬁnance Straße ÅNGSTRÖM",
    "unaffable [SEP] x[CLS]y [MASK][UNK] [PAD]",
    "a" * 150 + " " + "b" * 100,
    "don't stop-believing... 3.14 $100 #1 @you (yes) [no] {maybe} ~tilde~",
    "\u00a0tab\there\x0bvt\u200bzero\u200dwidth\ufeffbom\x00nul\ufffdrep",
    "emoji 😀🎉 and symbols ™ © ® ° ± × ÷ € £ ¥",
    "mixed\r\nline\nbreaks\u2028and\u2029separators",
    "   ",
    "",
    "\u0301combining at start, e\u0301 decomposed, ﻿arabic ٱلسَّلَامُ עִבְרִית",
]


@pytest.fixture(scope="module")
def minilm_dir() -> Path:
    with contextlib.redirect_stdout(io.StringIO()):  # the package prints a line on import
        import all_minilm_l6_v2
        return Path(all_minilm_l6_v2.get_model_path())


def variant(src: Path, dst: Path, **normalizer) -> Path:
    dst.mkdir(parents=True, exist_ok=True)
    tj = json.loads((src / "tokenizer.json").read_text(encoding="utf-8"))
    tj["normalizer"].update(normalizer)
    tj["truncation"] = tj["padding"] = None
    (dst / "tokenizer.json").write_text(json.dumps(tj), encoding="utf-8")
    (dst / "tokenizer_config.json").write_bytes((src / "tokenizer_config.json").read_bytes())
    return dst


@pytest.mark.parametrize("switches", [
    {},
    {"lowercase": False},
    {"lowercase": False, "strip_accents": False},
    {"strip_accents": False},
    {"handle_chinese_chars": False, "clean_text": False},
], ids=["as-shipped", "cased", "cased-accents", "accents", "no-cjk-no-clean"])
def test_matches_hf_tokenizers(cllm_bin, minilm_dir, tmp_path, switches):
    folder = variant(minilm_dir, tmp_path / "tok", **switches)
    hf = tokenizers.Tokenizer.from_file(str(folder / "tokenizer.json"))
    strings = load_strings() + EXTRA
    for add_special in (True, False):
        ours = cllm_encode(cllm_bin, folder, strings, add_special=add_special, parse_special=True)
        for s, got in zip(strings, ours):
            want = hf.encode(s, add_special_tokens=add_special).ids
            if got != want:
                i = first_difference(got, want)
                pytest.fail(f"{switches} {s[:60]!r}: first difference at {i}: ours {got[i:i + 8]}, "
                            f"tokenizers {want[i:i + 8]}")
