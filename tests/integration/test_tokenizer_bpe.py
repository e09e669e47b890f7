"""cllm's byte-level BPE against Hugging Face `tokenizers`: a small BPE is
trained here on a generated corpus (English, Chinese, code, digits) with the
pre-tokenizer of each family — Qwen2 (tokenizer.ggml.pre = "qwen2"), Llama 3
("llama-bpe", which also matches whole words before merging), GPT-4o's o200k
("gpt-4o", gpt-oss's) and GPT-2 ("gpt-2") — written out as a vocab-only GGUF, and both must give the same ids
for every string of tests/data/tokenizer_strings.jsonl and a few more. Where
llama-cpp-python can load such a GGUF, llama.cpp is compared as well."""

from __future__ import annotations

import json
import random
import unicodedata

import gguf
import llama_cpp
import pytest
import tokenizers
from tokenizers import AddedToken, Regex, decoders, models, pre_tokenizers, trainers

from tokenizer_util import cllm_decode, cllm_encode, first_difference, load_strings

QWEN2_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
               r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
LLAMA3_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
                r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

# o200k_base's pattern (GPT-4o, gpt-oss: tokenizer.ggml.pre "gpt-4o")
GPT4O_REGEX = (r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"
               r"(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
               r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*"
               r"(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
               r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")

# pre-tokenizer name in GGUF -> (split regex or None for GPT-2's own, ignore_merges)
VARIANTS = {
    "qwen2": (QWEN2_REGEX, False),
    "gpt-4o": (GPT4O_REGEX, False),
    "llama-bpe": (LLAMA3_REGEX, True),
    "gpt-2": (None, False),
}
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
USER_DEFINED = "[CUSTOM]"

EXTRA = [
    "It'S HE'LL WE'VE THEY'RE I'M she'd", "'s 's' 'S", "1234567890 12 123 1234 12345",
    "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n",
    "<|endoftext|><|endoftext|>", "a<|im_end|>b", "<|im_start", "x [CUSTOM] y[CUSTOM]z",
    "HTTPServer camelCaseWord ÉCOLE Écoles naïve ALLCAPS'S don'T", "path/to/file\n/x", "a1234b 12345",
    "   \n\n   x", "x   \n", "\r\n\r\n", "word!!!\n\n", "漢字漢字漢字" * 20, "  ".join(["ab"] * 50),
]


def _corpus(strings: list[str]) -> list[str]:
    rng = random.Random(7)
    words = ("the of and to in is was that for on with as by at from it an be this which or are "
             "not have he she they we you I don't can't won't it's we're you've model token "
             "tokenizer language learning data value return print function").split()
    code = ["def f(x):\n    return x * 2\n", "for (int i = 0; i < n; ++i) { s += a[i]; }\n",
            "{\"key\": [1, 2, 3], \"ok\": true}\n", "if (x == NULL) return -1;\n",
            "import os\nprint(os.path.join('a', 'b'))\n"]
    lines = []
    for _ in range(3000):
        kind = rng.random()
        if kind < 0.5:
            lines.append(" ".join(rng.choice(words) for _ in range(rng.randint(3, 15)))
                         + rng.choice([".", "!", "?", ",", ""]))
        elif kind < 0.65:
            lines.append("".join(chr(rng.randint(0x4E00, 0x4FFF)) for _ in range(rng.randint(2, 20))))
        elif kind < 0.85:
            lines.append(rng.choice(code))
        else:
            lines.append(" ".join(str(rng.randint(0, 10 ** rng.randint(1, 8))) for _ in range(5)))
    return lines + strings


def _train(pre: str, strings: list[str]):
    regex, ignore_merges = VARIANTS[pre]
    tok = tokenizers.Tokenizer(models.BPE())
    if regex is None:
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    else:
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(regex), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=1500, special_tokens=SPECIAL, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(_corpus(strings), trainer)
    model = json.loads(tok.to_str())["model"]
    merges = [m if isinstance(m, str) else " ".join(m) for m in model["merges"]]
    if ignore_merges:  # rebuild the trained model with Llama 3's option
        pairs = [tuple(m.split(" ", 1)) for m in merges]
        tok.model = models.BPE(vocab=model["vocab"], merges=pairs, ignore_merges=True)
    tok.add_tokens([AddedToken(USER_DEFINED, special=False, normalized=False)])
    return tok, merges


def _write_gguf(path, pre: str, tok, merges: list[str], add_bos: bool):
    vocab = tok.get_vocab(with_added_tokens=True)
    tokens = [None] * len(vocab)
    for text, i in vocab.items():
        tokens[i] = text
    assert None not in tokens
    types = [gguf.TokenType.CONTROL if t in SPECIAL else
             gguf.TokenType.USER_DEFINED if t == USER_DEFINED else gguf.TokenType.NORMAL
             for t in tokens]
    w = gguf.GGUFWriter(str(path), "llama")
    # hyper-parameters only so that llama.cpp agrees to load the vocabulary
    w.add_context_length(2048)
    w.add_embedding_length(64)
    w.add_block_count(1)
    w.add_feed_forward_length(128)
    w.add_head_count(4)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(pre)
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(vocab["<|endoftext|>"])
    w.add_eos_token_id(vocab["<|im_end|>"])
    w.add_add_bos_token(add_bos)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


STRINGS = load_strings() + EXTRA


@pytest.fixture(scope="module", params=list(VARIANTS))
def bpe(request, tmp_path_factory):
    pre = request.param
    tok, merges = _train(pre, STRINGS)
    path = tmp_path_factory.mktemp("bpe") / f"bpe-{pre}.gguf"
    _write_gguf(path, pre, tok, merges, add_bos=False)
    return pre, tok, path


def _check(items, ours, want):
    bad = []
    for s, got, exp in zip(items, ours, want):
        if got != exp:
            i = first_difference(got, exp)
            bad.append(f"{s!r}: first difference at {i}: cllm {got[i:i + 8]} reference {exp[i:i + 8]}")
    assert not bad, f"{len(bad)} of {len(items)} differ:\n" + "\n".join(bad[:20])


def test_vocabulary_is_the_expected_size(bpe):
    _, tok, _ = bpe
    assert 1000 <= tok.get_vocab_size() <= 1600


def test_same_ids_as_hf_tokenizers(cllm_bin, bpe):
    pre, tok, path = bpe
    ours = cllm_encode(cllm_bin, path, STRINGS, add_special=False, parse_special=True)
    want = [e.ids for e in tok.encode_batch(STRINGS, add_special_tokens=False)]
    _check(STRINGS, ours, want)


def test_same_ids_as_hf_tokenizers_without_parsing_special_tokens(cllm_bin, bpe):
    pre, tok, path = bpe
    ours = cllm_encode(cllm_bin, path, STRINGS, add_special=False, parse_special=False)
    tok.encode_special_tokens = True  # control tokens in the text are plain text
    try:
        want = [e.ids for e in tok.encode_batch(STRINGS, add_special_tokens=False)]
    finally:
        tok.encode_special_tokens = False
    _check(STRINGS, ours, want)


def _llamacpp_comparable(pre: str, items: list) -> list:
    """The strings llama.cpp splits as the pre-tokenizer's regex does. Its
    GPT-4o split treats combining marks (\\p{M}: Devanagari and Tamil vowel
    signs) otherwise than the regex, where Hugging Face's tokenizers (and
    cllm, which test_same_ids_as_hf_tokenizers holds to it) follow the regex:
    measured 7 of 338 strings, each with such marks, so those are left out."""
    if pre != "gpt-4o":
        return items
    return [s for s in items if not any(unicodedata.category(c).startswith("M") for c in s)]


def test_same_ids_as_llamacpp(cllm_bin, bpe):
    pre, tok, path = bpe
    try:
        llm = llama_cpp.Llama(model_path=str(path), vocab_only=True, verbose=False)
    except Exception as e:  # an older llama.cpp may not know the pre-tokenizer
        pytest.skip(f"llama.cpp cannot load the vocabulary: {e}")
    strings = _llamacpp_comparable(pre, STRINGS)
    for special in (False, True):
        ours = cllm_encode(cllm_bin, path, strings, add_special=False, parse_special=special)
        want = [llm.tokenize(s.encode(), add_bos=False, special=special) for s in strings]
        _check(strings, ours, want)


def _random_texts(n: int, seed: int = 99) -> list[str]:
    rng = random.Random(seed)
    pieces = [" ", "  ", "\n", "\r\n", "\t", "'s", "'LL", "<|im_start|>", "<|endoftext|>", USER_DEFINED,
              "12345", "\u00a0", "\u3000", "\u2028", "\u0085", "!!", "..."]
    out = []
    for _ in range(n):
        parts = []
        for _ in range(rng.randint(1, 30)):
            r = rng.random()
            if r < 0.35:
                parts.append(chr(rng.randint(0x20, 0x7E)))
            elif r < 0.65:
                parts.append(chr(rng.choice([rng.randint(0x80, 0x7FF), rng.randint(0x800, 0xD7FF),
                                             rng.randint(0xE000, 0xFFFD), rng.randint(0x10000, 0x2FFFF)])))
            else:
                parts.append(rng.choice(pieces))
        out.append("".join(parts))
    return out


def test_random_texts_same_ids_as_hf_and_llamacpp(cllm_bin, bpe):
    pre, tok, path = bpe
    items = _random_texts(300)
    if pre == "gpt-4o":
        # GPT-4o's split tells marks (\\p{M}) from letters: a code point this machine's Unicode tables (PCRE2's,
        # Python's 14.0) do not assign yet is no mark to cllm, while tokenizers' newer tables may make it one
        # (measured: 1 of 300, U+113BE, assigned in Unicode 16).
        items = [s for s in items if not any(unicodedata.category(c) == "Cn" for c in s)]
    ours = cllm_encode(cllm_bin, path, items, add_special=False, parse_special=True)
    _check(items, ours, [e.ids for e in tok.encode_batch(items, add_special_tokens=False)])
    llm = llama_cpp.Llama(model_path=str(path), vocab_only=True, verbose=False)
    keep = set(_llamacpp_comparable(pre, items))
    ours, items = [o for o, s in zip(ours, items) if s in keep], [s for s in items if s in keep]
    _check(items, ours, [llm.tokenize(s.encode(), add_bos=False, special=True) for s in items])


def test_default_pre_tokenizer_same_ids_as_llamacpp(cllm_bin, bpe, tmp_path):
    """A GGUF without a known pre-tokenizer gets llama.cpp's "default" chain of
    four regexes (punctuation runs, GPT-2, digit runs, digit triples)."""
    pre, tok, _ = bpe
    if pre != "gpt-2":
        pytest.skip("one vocabulary is enough")
    model = json.loads(tok.to_str())["model"]
    merges = [m if isinstance(m, str) else " ".join(m) for m in model["merges"]]
    path = tmp_path / "default.gguf"
    _write_gguf(path, "default", tok, merges, add_bos=False)
    llm = llama_cpp.Llama(model_path=str(path), vocab_only=True, verbose=False)
    ours = cllm_encode(cllm_bin, path, STRINGS, add_special=False)
    want = [llm.tokenize(s.encode(), add_bos=False, special=False) for s in STRINGS]
    _check(STRINGS, ours, want)


def test_round_trip(cllm_bin, bpe):
    pre, tok, path = bpe
    ids = cllm_encode(cllm_bin, path, STRINGS, add_special=False, parse_special=True)
    texts = cllm_decode(cllm_bin, path, ids, special=True)
    bad = [f"{s!r} -> {t!r}" for s, t in zip(STRINGS, texts) if s != t]
    assert not bad, f"{len(bad)} strings do not round-trip:\n" + "\n".join(bad[:20])
    assert [tok.decode(i, skip_special_tokens=False) for i in ids[:50]] == texts[:50]


def test_invalid_utf8_becomes_replacement_characters(cllm_bin, bpe):
    """llama.cpp reads each byte that does not start a well-formed sequence as
    U+FFFD (one per byte, so an unfinished 2-of-3 sequence gives two) before
    the byte-level mapping."""
    pre, tok, path = bpe
    raw = [b"\xe4\xbd abc \xff", b"\x80\x80", b"ok\xc3", b"\xed\xa0\x80x"]
    as_text = ["\ufffd\ufffd abc \ufffd", "\ufffd\ufffd", "ok\ufffd"]
    ours = cllm_encode(cllm_bin, path, raw, add_special=False)
    want = [tok.encode(t, add_special_tokens=False).ids for t in as_text]
    _check(raw[:3], ours[:3], want)
    assert cllm_decode(cllm_bin, path, ours[:3]) == as_text


def test_bos_added_when_the_model_asks(cllm_bin, bpe, tmp_path):
    pre, tok, _ = bpe
    path = tmp_path / "bos.gguf"
    model = json.loads(tok.to_str())["model"]
    merges = [m if isinstance(m, str) else " ".join(m) for m in model["merges"]]
    _write_gguf(path, pre, tok, merges, add_bos=True)
    [with_bos], [without] = (cllm_encode(cllm_bin, path, ["hello"], add_special=a) for a in (True, False))
    assert with_bos == [tok.token_to_id("<|endoftext|>")] + without


def test_unknown_pre_tokenizer_is_an_error(cllm_bin, bpe, tmp_path, run_cllm):
    pre, tok, _ = bpe
    model = json.loads(tok.to_str())["model"]
    merges = [m if isinstance(m, str) else " ".join(m) for m in model["merges"]]
    path = tmp_path / "bad-pre.gguf"
    _write_gguf(path, "no-such-pre", tok, merges, add_bos=False)
    r = run_cllm("tokenize", "-m", path, input="hello")
    assert r.returncode == 1
    assert "no-such-pre" in r.stderr and len(r.stderr.strip().splitlines()) == 1
