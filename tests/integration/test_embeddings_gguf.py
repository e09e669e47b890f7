"""GGUF BERT (llama.cpp's "bert" architecture), written from the Hugging
Face folders by tests/ref/bert_gguf.py as convert_hf_to_gguf.py writes it:
all-MiniLM-L6-v2 against llama-cpp-python's embeddings of the same file and
against sentence-transformers' (tests/data/minilm_reference.json); a
synthetic BERT with mean and CLS pooling against its folder and the numpy
forward pass; the GGUF's "phantom space" WordPiece vocabulary against Hugging
Face `tokenizers` on the folder's tokenizer.json."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import numpy as np
import pytest

import ref_bert
from bert_gguf import write_bert_gguf
from server_util import CllmServer
from tokenizer_util import cllm_encode, load_strings

REFERENCE = Path(__file__).resolve().parents[1] / "data" / "minilm_reference.json"


def embed(srv, inputs):
    r = srv.post("/v1/embeddings", {"input": inputs})
    assert r.status_code == 200, r.text
    return np.array([d["embedding"] for d in r.json()["data"]])


@pytest.fixture(scope="module")
def minilm_gguf(tmp_path_factory):
    with contextlib.redirect_stdout(io.StringIO()):  # the package prints a line on import
        import all_minilm_l6_v2
        folder = Path(all_minilm_l6_v2.get_model_path())
    return folder, write_bert_gguf(folder, tmp_path_factory.mktemp("gguf") / "all-MiniLM-L6-v2.gguf")


def test_minilm_gguf_matches_llama_cpp_and_sentence_transformers(cllm_bin, minilm_gguf):
    import llama_cpp
    _, path = minilm_gguf
    data = json.loads(REFERENCE.read_text(encoding="utf-8"))
    sentences, ref = data["sentences"], np.array(data["embeddings"])
    with CllmServer(cllm_bin, path) as srv:
        assert srv.get("/v1/models").json()["data"][0]["id"] == "all-MiniLM-L6-v2"
        got = embed(srv, sentences)
    cos = (got * ref).sum(1) / np.linalg.norm(ref, axis=1)
    assert cos.min() >= 0.999, f"sentence {int(cos.argmin())}: {cos.min()}"
    llm = llama_cpp.Llama(model_path=str(path), embedding=True, n_ctx=512, n_threads=2, verbose=False)
    theirs = np.array(llm.embed(sentences[:8]))
    theirs /= np.linalg.norm(theirs, axis=1, keepdims=True)
    assert ((got[:8] * theirs).sum(1)).min() >= 0.9999


def test_gguf_vocabulary_tokenizes_as_hf(cllm_bin, minilm_gguf):
    import tokenizers
    folder, path = minilm_gguf
    hf = tokenizers.Tokenizer.from_file(str(folder / "tokenizer.json"))
    hf.no_padding()
    hf.no_truncation()
    strings = load_strings() + ["Héllo Wörld! 你好 unaffable [SEP] x", "a" * 150]
    ours = cllm_encode(cllm_bin, path, strings, add_special=True, parse_special=True)
    for s, got in zip(strings, ours):
        assert got == hf.encode(s).ids, s[:60]


@pytest.mark.parametrize("pooling", ["mean", "cls"])
def test_synthetic_gguf_equals_its_folder(cllm_bin, tmp_path, pooling):
    folder = ref_bert.make_bert(tmp_path / "hf", pooling=pooling, seed=7)
    path = write_bert_gguf(folder, tmp_path / "bert.gguf", pooling=pooling)
    texts = ["the cat sat on the mat", "hello world!", "unable running walked quickly"]
    with CllmServer(cllm_bin, folder) as a, CllmServer(cllm_bin, path) as b:
        from_folder, from_gguf = embed(a, texts), embed(b, texts)
    assert np.abs(from_folder - from_gguf).max() < 1e-6
    # The GGUF is always normalized (llama.cpp's embeddings are); the folder here too.
    import tokenizers
    tok = tokenizers.Tokenizer.from_file(str(folder / "tokenizer.json"))
    want = ref_bert.embed(folder, [tok.encode(t).ids for t in texts])
    assert np.abs(from_gguf - want).max() < 2e-5
