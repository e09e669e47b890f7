"""Tokenizers built from a Hugging Face folder's tokenizer.json and
tokenizer_config.json (`cllm tokenize -m FOLDER`) against Hugging Face
`tokenizers` loading the very same tokenizer.json, on every string of
tests/data/tokenizer_strings.jsonl and a few more:

  byte-level BPE   trained here with the pre-tokenizer of Qwen2 (Split regex +
                   ByteLevel), Llama 3 (its regex, ignore_merges, BOS from the
                   post-processor template) and GPT-2 (ByteLevel's own regex);
  SentencePiece-   a BPE trained here with byte fallback and the U+2581 space
  style BPE        marker, in the three layouts real checkpoints use: Llama 2's
                   Prepend + Replace normalizer, Mistral's Metaspace with
                   prepend_scheme "first", Gemma's Replace only.

Both with and without the special tokens (BOS) the post-processor adds, and
with special tokens in the text recognized (HF's default). None of these
tokenizers has a normalizer beyond the U+2581 ones: cllm accepts Qwen2's NFC
normalizer but does not apply it (as llama.cpp does not), so a real Qwen2
tokenizer can differ from HF on text that is not in NFC."""

from __future__ import annotations

import json
import random

import pytest
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

from tokenizer_util import cllm_decode, cllm_encode, first_difference, load_strings

QWEN2_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
               r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
LLAMA3_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
                r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
SPACE = "\u2581"
BYTE_LEVEL_SPECIAL = ["<|endoftext|>", "<|begin_of_text|>", "<|im_start|>", "<|im_end|>"]
SPM_SPECIAL = ["<unk>", "<s>", "</s>"]
USER_DEFINED = "[CUSTOM]"

EXTRA = [
    "It'S HE'LL WE'VE THEY'RE I'M she'd", "1234567890 12 123 1234 12345", "   leading spaces", " x", "  x",
    "trailing   ", "\n\nnew\nlines\n", "tabs\tand\ttabs", "<s>hello</s> <s> world", "a<|im_end|>b",
    "<|im_start|>user\nHi<|im_end|>\n", "x [CUSTOM] y[CUSTOM]z", "<unk>", "emoji \U0001F600 and \u4e2d\u6587",
    "\u00e9t\u00e9 \u00fcber \u00f1", "  ".join(["ab"] * 40), "\u0411\u043e\u0440\u0449", "\u3042\u3044\u3046",
]
STRINGS = load_strings() + EXTRA


def _corpus() -> list[str]:
    rng = random.Random(5)
    words = ("the of and to in is was that for on with as by at from it an be this which or are not have he "
             "she they we you I don't can't it's we're model token tokenizer language learning data value "
             "return print function hello world").split()
    code = ["def f(x):\n    return x * 2\n", "for (int i = 0; i < n; ++i) { s += a[i]; }\n",
            "{\"key\": [1, 2, 3], \"ok\": true}\n", "import os\nprint(os.path.join('a', 'b'))\n"]
    lines = []
    for _ in range(2500):
        r = rng.random()
        if r < 0.55:
            lines.append(" ".join(rng.choice(words) for _ in range(rng.randint(3, 15))) + rng.choice(".!?, "))
        elif r < 0.7:
            lines.append("".join(chr(rng.randint(0x4E00, 0x4E80)) for _ in range(rng.randint(2, 12))))
        elif r < 0.85:
            lines.append(rng.choice(code))
        else:
            lines.append(" ".join(str(rng.randint(0, 10 ** rng.randint(1, 6))) for _ in range(4)))
    return lines


# --- byte-level ---------------------------------------------------------------


def _byte_level(kind: str) -> Tokenizer:
    tok = Tokenizer(models.BPE())
    if kind == "gpt2":
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    else:
        regex = QWEN2_REGEX if kind == "qwen2" else LLAMA3_REGEX
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(regex), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=1200, special_tokens=BYTE_LEVEL_SPECIAL, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(_corpus(), trainer)
    d = json.loads(tok.to_str())
    if kind == "llama3":
        d["model"]["ignore_merges"] = True
        bos = "<|begin_of_text|>"
        d["post_processor"] = {
            "type": "Sequence", "processors": [
                {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True},
                {"type": "TemplateProcessing",
                 "single": [{"SpecialToken": {"id": bos, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
                 "pair": [{"SpecialToken": {"id": bos, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                          {"SpecialToken": {"id": bos, "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
                 "special_tokens": {bos: {"id": bos, "ids": [d["model"]["vocab"][bos]], "tokens": [bos]}}}]}
    tok = Tokenizer.from_str(json.dumps(d))
    tok.add_tokens([AddedToken(USER_DEFINED, special=False, normalized=False)])
    return tok


def _byte_level_config(kind: str) -> dict:
    if kind == "llama3":  # BOS comes from the post-processor: no add_bos_token key
        return {"bos_token": "<|begin_of_text|>", "eos_token": "<|endoftext|>", "chat_template": "{{ x }}"}
    return {"bos_token": None, "eos_token": "<|im_end|>", "add_bos_token": False, "pad_token": "<|endoftext|>"}


# --- SentencePiece-style -----------------------------------------------------------


def _spm(layout: str) -> Tokenizer:
    """BPE with byte fallback, trained on U+2581-marked words; the 256 byte
    tokens are ordinary vocabulary entries, as in Llama 2's tokenizer.json."""
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement=SPACE, prepend_scheme="always", split=True)
    trainer = trainers.BpeTrainer(vocab_size=1500, show_progress=False,
                                  special_tokens=SPM_SPECIAL + [f"<0x{b:02X}>" for b in range(256)])
    tok.train_from_iterator(_corpus(), trainer)
    d = json.loads(tok.to_str())
    d["added_tokens"] = [a for a in d["added_tokens"] if a["content"] in SPM_SPECIAL]
    d["model"].update(byte_fallback=True, fuse_unk=True, unk_token="<unk>")
    replace = {"type": "Replace", "pattern": {"String": " "}, "content": SPACE}
    decoder = [{"type": "Replace", "pattern": {"String": SPACE}, "content": " "}, {"type": "ByteFallback"},
               {"type": "Fuse"}]
    if layout == "llama2":
        d["normalizer"] = {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": SPACE}, replace]}
        d["pre_tokenizer"] = None
        decoder.append({"type": "Strip", "content": " ", "start": 1, "stop": 0})
    elif layout == "mistral":
        d["normalizer"] = None
        d["pre_tokenizer"] = {"type": "Metaspace", "replacement": SPACE, "prepend_scheme": "first", "split": False}
        decoder.append({"type": "Strip", "content": " ", "start": 1, "stop": 0})
    else:  # gemma
        d["normalizer"] = replace
        d["pre_tokenizer"] = {"type": "Split", "pattern": {"String": " "}, "behavior": "MergedWithPrevious",
                              "invert": False}
    d["decoder"] = {"type": "Sequence", "decoders": decoder} if len(decoder) > 1 else decoder[0]
    bos_id = d["model"]["vocab"]["<s>"]
    d["post_processor"] = {
        "type": "TemplateProcessing",
        "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
        "pair": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                 {"SpecialToken": {"id": "<s>", "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
        "special_tokens": {"<s>": {"id": "<s>", "ids": [bos_id], "tokens": ["<s>"]}}}
    tok = Tokenizer.from_str(json.dumps(d))
    tok.add_tokens([AddedToken(USER_DEFINED, special=False, normalized=False)])
    return tok


def _spm_config(layout: str) -> dict:
    cfg = {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "add_eos_token": False,
           "chat_template": [{"name": "default", "template": "{{ bos_token }}default"},
                             {"name": "tool_use", "template": "tools"}]}
    if layout != "mistral":
        cfg["add_bos_token"] = True
    return cfg


VARIANTS = ["qwen2", "llama3", "gpt2", "spm-llama2", "spm-mistral", "spm-gemma"]


@pytest.fixture(scope="module", params=VARIANTS)
def hf_tok(request, tmp_path_factory):
    kind = request.param
    folder = tmp_path_factory.mktemp(f"tok-{kind}")
    if kind.startswith("spm-"):
        layout = kind[4:]
        tok, cfg = _spm(layout), _spm_config(layout)
    else:
        tok, cfg = _byte_level(kind), _byte_level_config(kind)
    tok.save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(json.dumps(cfg))
    return kind, Tokenizer.from_file(str(folder / "tokenizer.json")), folder


def _check(items, ours, want):
    bad = []
    for s, got, exp in zip(items, ours, want):
        if got != exp:
            i = first_difference(got, exp)
            bad.append(f"{s!r}: first difference at {i}: cllm {got[i:i + 8]} reference {exp[i:i + 8]}")
    assert not bad, f"{len(bad)} of {len(items)} differ:\n" + "\n".join(bad[:20])


def test_enough_strings():
    assert len(STRINGS) >= 200


def test_same_ids_as_hf_tokenizers(cllm_bin, hf_tok):
    _, tok, folder = hf_tok
    ours = cllm_encode(cllm_bin, folder, STRINGS, add_special=False, parse_special=True)
    _check(STRINGS, ours, [e.ids for e in tok.encode_batch(STRINGS, add_special_tokens=False)])


def test_special_tokens_added_as_hf_does(cllm_bin, hf_tok):
    """BOS from add_bos_token, or from the post-processor's template when the
    config does not say (Llama 3, Mistral)."""
    kind, tok, folder = hf_tok
    items = STRINGS[:60]
    ours = cllm_encode(cllm_bin, folder, items, add_special=True, parse_special=True)
    want = [e.ids for e in tok.encode_batch(items, add_special_tokens=True)]
    _check(items, ours, want)
    adds_bos = kind in ("llama3",) or kind.startswith("spm-")
    assert all((w[:1] == [tok.token_to_id("<s>" if kind.startswith("spm") else "<|begin_of_text|>")]) == adds_bos
               for w in want if w)


def _random_texts(n: int, seed: int = 17) -> list[str]:
    rng = random.Random(seed)
    pieces = [" ", "  ", "\n", "\t", "'s", "<s>", "</s>", "<|im_end|>", USER_DEFINED, "123", "\u00a0",
              "\u3000", SPACE, "..."]
    out = []
    for _ in range(n):
        parts = []
        for _ in range(rng.randint(1, 25)):
            r = rng.random()
            if r < 0.4:
                parts.append(chr(rng.randint(0x20, 0x7E)))
            elif r < 0.65:
                # Astral code points only from long-assigned blocks (emoji): PCRE2's
                # Unicode tables are older than Oniguruma's in `tokenizers`, and a
                # letter added since (e.g. Egyptian Hieroglyphs Extended-A, Unicode
                # 16) splits differently. That is bpe.c's regex engine, not the
                # tokenizer.json reader this file tests.
                parts.append(chr(rng.choice([rng.randint(0x80, 0x7FF), rng.randint(0x4E00, 0x4E80),
                                             rng.randint(0xE000, 0xFFFD), rng.randint(0x1F300, 0x1F64F)])))
            else:
                parts.append(rng.choice(pieces))
        out.append("".join(parts))
    return out


def test_random_texts_same_ids_as_hf_tokenizers(cllm_bin, hf_tok):
    _, tok, folder = hf_tok
    items = _random_texts(300)
    ours = cllm_encode(cllm_bin, folder, items, add_special=False, parse_special=True)
    _check(items, ours, [e.ids for e in tok.encode_batch(items, add_special_tokens=False)])


def test_decode_gives_the_text_back(cllm_bin, hf_tok):
    kind, tok, folder = hf_tok
    items = [s for s in STRINGS if s and "<" not in s and USER_DEFINED not in s]
    ids = [e.ids for e in tok.encode_batch(items, add_special_tokens=False)]
    texts = cllm_decode(cllm_bin, folder, ids)
    want = [tok.decode(i, skip_special_tokens=False) for i in ids]
    bad = [(s, t, w) for s, t, w in zip(items, texts, want) if t != w]
    assert not bad, f"{len(bad)} decode differently, e.g. {bad[:3]}"
