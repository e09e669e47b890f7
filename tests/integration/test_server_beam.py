"""Beam search over the HTTP API (vLLM's use_beam_search, best_of,
length_penalty) and `cllm generate --beam-width`, on a synthetic Llama with
an f32 KV cache: the best beam equals an exhaustive search over every
two-token continuation, and the n best beams equal the reference beam search
(beam_ref.py over the numpy forward pass)."""

from __future__ import annotations

import numpy as np
import pytest
import ref_forward

from beam_ref import reference_beam_search
from server_util import CllmServer

PROMPT = [2, 17, 45, 99, 120, 7, 250, 33]


@pytest.fixture(scope="module")
def model(model_factory):
    return model_factory("llama")


@pytest.fixture(scope="module")
def srv(cllm_bin, model):
    with CllmServer(cllm_bin, model, "--kv-cache-dtype", "f32", "--kv-cache-memory", "64MiB",
                    "--no-enable-prefix-caching") as s:
        yield s


def logprobs(model, tokens):
    x = np.asarray(ref_forward.ref_logits(str(model), tokens, kv_type="f32"))[-1].astype(np.float64)
    x = x - x.max()
    return x - np.log(np.exp(x).sum())


def text_of(srv, ids):
    r = srv.post("/detokenize", {"tokens": ids})
    assert r.status_code == 200, r.text
    return r.json()["content"]


def beam_texts(srv, **body):
    r = srv.post("/v1/completions", {"prompt": PROMPT, "use_beam_search": True, **body})
    assert r.status_code == 200, r.text
    return [c["text"] for c in sorted(r.json()["choices"], key=lambda c: c["index"])]


# A prompt whose likeliest pair does not start with the likeliest token, so
# greedy decoding misses what the beams must find.
PROMPT_GREEDY_MISSES = [2, 72, 295, 36, 134, 64, 257, 234]


def test_best_beam_is_the_exhaustive_best(srv, model):
    """64 beams over two tokens: every first token within the 64 likeliest is
    kept, and each keeps its 128 likeliest seconds, so when the exhaustive
    best pair starts within the 64 likeliest first tokens, the best beam must
    be that pair."""
    prompt = PROMPT_GREEDY_MISSES
    lp1 = logprobs(model, prompt)
    n_vocab = len(lp1)
    scores = np.array([lp1[a] + logprobs(model, prompt + [a]) for a in range(n_vocab)])  # [first, second]
    a, b = (int(i) for i in np.unravel_index(int(np.argmax(scores)), scores.shape))
    assert int((lp1 > lp1[a]).sum()) < 64, "the exhaustive best is out of a 64-beam search's reach"
    g = int(np.argmax(lp1))
    assert g != a, "greedy finds the best pair here: the test would prove less"
    r = srv.post("/v1/completions", {"prompt": prompt, "use_beam_search": True, "max_tokens": 2, "ignore_eos": True,
                                     "best_of": 64})
    assert r.status_code == 200, r.text
    assert [c["text"] for c in r.json()["choices"]] == [text_of(srv, [a, b])]
    greedy = srv.post("/v1/completions", {"prompt": prompt, "max_tokens": 2, "temperature": 0,
                                          "ignore_eos": True}).json()["choices"][0]["text"]
    assert greedy == text_of(srv, [g, int(np.argmax(logprobs(model, prompt + [g])))]) != r.json()["choices"][0]["text"]


@pytest.mark.parametrize("width,n,penalty", [(2, 2, 1.0), (4, 3, 0.6)])
def test_beams_match_reference(srv, model, width, n, penalty):
    want = reference_beam_search(model, PROMPT, width, n, max_tokens=5, length_penalty=penalty)
    got = beam_texts(srv, max_tokens=5, n=n, best_of=width, length_penalty=penalty)
    assert got == [text_of(srv, ids) for ids in want]
    chat = srv.post("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 3,
                                             "use_beam_search": True, "n": 2})
    assert chat.status_code == 200 and len(chat.json()["choices"]) == 2


def test_beam_refusals(srv):
    for body, param in [({"use_beam_search": True, "stream": True}, "use_beam_search"),
                        ({"use_beam_search": True, "logprobs": 2}, "use_beam_search"),
                        ({"use_beam_search": True, "n": 3, "best_of": 2}, "best_of"),
                        ({"best_of": 3}, "best_of"),
                        ({"use_beam_search": True, "best_of": 65}, "best_of"),
                        ({"use_beam_search": "yes"}, "use_beam_search"),
                        ({"length_penalty": "x"}, "length_penalty")]:
        r = srv.post("/v1/completions", {"prompt": PROMPT, "max_tokens": 2, **body})
        assert r.status_code == 400 and r.json()["error"]["param"] == param, (body, r.text)
    assert srv.get("/health").status_code == 200


def test_cli_beam_width(run_cllm, srv, model):
    """`cllm generate --beam-width` prints the API's best beam."""
    text = text_of(srv, PROMPT[1:])  # the CLI adds the BOS itself
    want = srv.post("/v1/completions", {"prompt": text, "max_tokens": 4, "use_beam_search": True,
                                        "best_of": 3}).json()["choices"][0]["text"]
    cli = run_cllm("generate", "-m", model, "-p", text, "-n", 4, "--beam-width", 3, "--kv-cache-dtype", "f32")
    assert cli.returncode == 0, cli.stderr
    assert cli.stdout == want + "\n"
