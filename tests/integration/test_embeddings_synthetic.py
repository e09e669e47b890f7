"""The BERT encoder on tiny synthetic models (tests/ref/ref_bert.py) against
the numpy forward pass written from the definition: mean and CLS pooling,
with and without normalization, F32 and F16 weights, inputs of every length
up to the model's, in one batch (packed, each attending only over its own
tokens) and alone; Matryoshka dimensions cut and renormalized; the tokens
against Hugging Face `tokenizers` on the same tokenizer.json."""

from __future__ import annotations

import numpy as np
import pytest
import tokenizers

import ref_bert
from server_util import CllmServer

TEXTS = ["the cat sat on the mat", "hello world!", "a quick brown fox jumps over the lazy dog",
         "unable running walked", "Embedding vector TEXT model, test sentence?", "zzz qqq", "x"]


def ids_of(folder, texts):
    tok = tokenizers.Tokenizer.from_file(str(folder / "tokenizer.json"))
    return [tok.encode(t).ids for t in texts]


@pytest.fixture(scope="module", params=[
    {"pooling": "mean", "normalize": True},
    {"pooling": "cls", "normalize": False, "seed": 1},
    {"pooling": "mean", "normalize": True, "dtype": "F16", "seed": 2, "n_layer": 3},
], ids=["mean-normalized", "cls-raw", "f16-3-layers"])
def model(request, tmp_path_factory):
    return ref_bert.make_bert(tmp_path_factory.mktemp("bert"), **request.param)


def test_matches_the_numpy_forward_pass(cllm_bin, model):
    rng = np.random.default_rng(5)
    n_vocab = tokenizers.Tokenizer.from_file(str(model / "tokenizer.json")).get_vocab_size()
    # Texts through the tokenizer, plus random token-id inputs of every length 1..48 (the model's positions).
    ids_inputs = [list(map(int, rng.integers(0, n_vocab, size=n))) for n in (1, 2, 15, 16, 17, 31, 32, 33, 47, 48)]
    with CllmServer(cllm_bin, model) as srv:
        r = srv.post("/v1/embeddings", {"input": TEXTS})
        assert r.status_code == 200, r.text
        got_text = np.array([d["embedding"] for d in r.json()["data"]])
        r = srv.post("/v1/embeddings", {"input": ids_inputs})
        assert r.status_code == 200, r.text
        got_ids = np.array([d["embedding"] for d in r.json()["data"]])
        alone = [srv.post("/v1/embeddings", {"input": [x]}).json()["data"][0]["embedding"] for x in ids_inputs[:4]]
        too_long = srv.post("/v1/embeddings", {"input": [[5] * 49]})
    want_text = ref_bert.embed(model, ids_of(model, TEXTS))
    want_ids = ref_bert.embed(model, ids_inputs)
    scale = np.abs(want_ids).max()
    assert np.abs(got_text - want_text).max() < 2e-5 * max(1.0, scale)
    assert np.abs(got_ids - want_ids).max() < 2e-5 * max(1.0, scale)
    assert np.abs(np.array(alone) - got_ids[:4]).max() < 1e-6  # the same alone as packed with others
    assert too_long.status_code == 400 and "48 tokens" in too_long.json()["error"]["message"]


def test_matryoshka_dimensions(cllm_bin, tmp_path):
    folder = ref_bert.make_bert(tmp_path / "m", matryoshka=[8, 16, 32], seed=3)
    with CllmServer(cllm_bin, folder) as srv:
        full = np.array(srv.post("/v1/embeddings", {"input": TEXTS[:2]}).json()["data"][0]["embedding"])
        r = srv.post("/v1/embeddings", {"input": TEXTS[:2], "dimensions": 8})
        assert r.status_code == 200, r.text
        cut = np.array(r.json()["data"][0]["embedding"])
        bad = srv.post("/v1/embeddings", {"input": "x", "dimensions": 12})
    assert cut.shape == (8,)
    assert np.allclose(cut, full[:8] / np.linalg.norm(full[:8]), atol=1e-6)
    assert bad.status_code == 400 and "matryoshka" in bad.json()["error"]["message"]


def test_sentence_bert_max_seq_length_caps_inputs(cllm_bin, tmp_path):
    folder = ref_bert.make_bert(tmp_path / "m", max_seq_length=10, seed=4)
    with CllmServer(cllm_bin, folder) as srv:
        assert srv.get("/v1/models").json()["data"][0]["max_model_len"] == 10
        assert srv.post("/v1/embeddings", {"input": [[7] * 10]}).status_code == 200
        r = srv.post("/v1/embeddings", {"input": [[7] * 11]})
        assert r.status_code == 400 and "maximum context length is 10 tokens" in r.json()["error"]["message"]
