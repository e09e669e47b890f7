"""Malformed and refused requests: each gets its exact status and OpenAI's
error object, and the server keeps serving (/health is 200 after all of
them). Runs on a tiny synthetic model with an API key and a 512-token context."""

from __future__ import annotations

import json
import socket

import pytest
import requests

from server_util import CllmServer, tiny_model

KEY = "sk-test-key"
AUTH = {"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"}
MAX_LEN = 512


@pytest.fixture(scope="module")
def srv(cllm_bin, model_factory):
    with CllmServer(cllm_bin, tiny_model(model_factory), "--max-model-len", MAX_LEN, "--kv-cache-memory",
                    "64MiB", "--served-model-name", "tiny", api_key=KEY) as s:
        yield s


def chat(**kw):
    body = {"model": "tiny", "messages": [{"role": "user", "content": "hello"}], "max_tokens": 4}
    body.update(kw)
    return body


def compl(**kw):
    body = {"model": "tiny", "prompt": "hello", "max_tokens": 4}
    body.update(kw)
    return body


C, CH = "/v1/completions", "/v1/chat/completions"

# (name, method, path, body: dict -> JSON | bytes -> raw, headers or None for AUTH, status, param or None)
CASES = [
    ("bad json", "POST", CH, b'{"model": "tiny", "messages": [', None, 400, None),
    ("truncated body", "POST", C, b'{"prompt": "hello", "max_tok', None, 400, None),
    ("trailing garbage", "POST", C, b'{"prompt": "hello"} x', None, 400, None),
    ("empty body", "POST", C, b"", None, 400, None),
    ("body is a list", "POST", C, b"[1, 2, 3]", None, 400, None),
    ("invalid utf-8", "POST", C, b'{"prompt": "caf\xe9 \xff\xfe", "max_tokens": 2}', None, 400, None),
    ("max_tokens as string", "POST", C, compl(max_tokens="5"), None, 400, "max_tokens"),
    ("max_tokens float", "POST", C, compl(max_tokens=5.5), None, 400, "max_tokens"),
    ("negative max_tokens", "POST", C, compl(max_tokens=-1), None, 400, "max_tokens"),
    ("huge max_tokens", "POST", C, compl(max_tokens=10**12), None, 400, "prompt"),
    ("max_tokens over context", "POST", CH, chat(max_tokens=MAX_LEN), None, 400, "messages"),
    ("zero max_completion_tokens", "POST", CH, chat(max_completion_tokens=0), None, 400, "max_completion_tokens"),
    ("temperature -1", "POST", C, compl(temperature=-1), None, 400, "temperature"),
    ("temperature 2.5", "POST", CH, chat(temperature=2.5), None, 400, "temperature"),
    ("temperature string", "POST", CH, chat(temperature="hot"), None, 400, "temperature"),
    ("top_p 0", "POST", C, compl(top_p=0), None, 400, "top_p"),
    ("top_p 1.5", "POST", C, compl(top_p=1.5), None, 400, "top_p"),
    ("top_k -2", "POST", C, compl(top_k=-2), None, 400, "top_k"),
    ("min_p 2", "POST", C, compl(min_p=2), None, 400, "min_p"),
    ("n 0", "POST", CH, chat(n=0), None, 400, "n"),
    ("n 65", "POST", CH, chat(n=65), None, 400, "n"),
    ("n boolean", "POST", CH, chat(n=True), None, 400, "n"),
    ("presence_penalty 3", "POST", C, compl(presence_penalty=3), None, 400, "presence_penalty"),
    ("repetition_penalty 0", "POST", C, compl(repetition_penalty=0), None, 400, "repetition_penalty"),
    ("seed string", "POST", C, compl(seed="42"), None, 400, "seed"),
    ("stream string", "POST", C, compl(stream="yes"), None, 400, "stream"),
    ("stream_options without stream", "POST", CH, chat(stream_options={"include_usage": True}), None, 400,
     "stream_options"),
    ("stream_options unknown key", "POST", CH, chat(stream=True, stream_options={"foo": 1}), None, 400,
     "stream_options.foo"),
    ("empty messages", "POST", CH, chat(messages=[]), None, 400, "messages"),
    ("messages not a list", "POST", CH, chat(messages="hello"), None, 400, "messages"),
    ("missing messages", "POST", CH, {"model": "tiny"}, None, 400, "messages"),
    ("missing prompt", "POST", C, {"model": "tiny", "max_tokens": 3}, None, 400, "prompt"),
    ("unknown role", "POST", CH, chat(messages=[{"role": "wizard", "content": "hi"}]), None, 400,
     "messages[0].role"),
    ("tool message without tool_call_id", "POST", CH, chat(messages=[{"role": "tool", "content": "hi"}]), None, 400,
     "messages[0].tool_call_id"),
    ("content number", "POST", CH, chat(messages=[{"role": "user", "content": 5}]), None, 400,
     "messages[0].content"),
    ("image content part", "POST", CH,
     chat(messages=[{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]), None, 400,
     "messages[0].content[0]"),
    ("unknown message field", "POST", CH, chat(messages=[{"role": "user", "content": "hi", "mood": "ok"}]), None,
     400, "messages[0].mood"),
    ("empty stop string", "POST", C, compl(stop=""), None, 400, "stop"),
    ("too many stop strings", "POST", C, compl(stop=[f"s{i}" for i in range(17)]), None, 400, "stop"),
    ("stop not strings", "POST", C, compl(stop=[1, 2]), None, 400, "stop"),
    ("stop_token_ids out of range", "POST", C, compl(stop_token_ids=[10**6]), None, 400, "stop_token_ids"),
    ("logit_bias bad key", "POST", C, compl(logit_bias={"abc": 1}), None, 400, "logit_bias"),
    ("logit_bias out of range value", "POST", C, compl(logit_bias={"5": 1000}), None, 400, "logit_bias"),
    ("logit_bias token out of vocab", "POST", C, compl(logit_bias={"999999": 1}), None, 400, "logit_bias"),
    ("logprobs 21", "POST", C, compl(logprobs=21), None, 400, "logprobs"),
    ("chat logprobs int", "POST", CH, chat(logprobs=3), None, 400, "logprobs"),
    ("top_logprobs without logprobs", "POST", CH, chat(top_logprobs=2), None, 400, "top_logprobs"),
    ("echo with logprobs, streamed", "POST", C, compl(echo=True, logprobs=1, stream=True), None, 400, "echo"),
    ("min_tokens over max_tokens", "POST", C, compl(min_tokens=10, max_tokens=2), None, 400, "min_tokens"),
    ("empty prompt list", "POST", C, compl(prompt=[]), None, 400, "prompt"),
    ("mixed prompt list", "POST", C, compl(prompt=["a", 1]), None, 400, "prompt"),
    ("token id out of vocab", "POST", C, compl(prompt=[1, 2, 10**6]), None, 400, "prompt"),
    ("prompt over the context", "POST", C, compl(prompt=" the" * 2000, max_tokens=None), None, 400, "prompt"),
    ("tool_choice naming no tool", "POST", CH,
     chat(tools=[{"type": "function", "function": {"name": "f"}}],
          tool_choice={"type": "function", "function": {"name": "g"}}), None, 400, "tool_choice"),
    ("unsupported best_of", "POST", C, compl(best_of=2), None, 400, "best_of"),
    ("unknown response_format type", "POST", CH, chat(response_format={"type": "xml"}), None, 400,
     "response_format"),
    ("unknown field", "POST", C, compl(foo=1), None, 400, "foo"),
    ("chat field on completions", "POST", C, compl(messages=[]), None, 400, "messages"),
    ("deeply nested json", "POST", C, b'{"prompt": ' + b"[" * 100000 + b"]" * 100000 + b"}", None, 400, None),
    ("unknown model", "POST", CH, chat(model="gpt-4"), None, 404, "model"),
    ("unknown model card", "GET", "/v1/models/gpt-4", None, None, 404, "model"),
    ("wrong api key", "POST", CH, chat(), {"Authorization": "Bearer sk-wrong"}, 401, None),
    ("missing api key", "POST", CH, chat(), {}, 401, None),
    ("api key prefix only", "POST", CH, chat(), {"Authorization": f"Bearer {KEY[:-1]}"}, 401, None),
    ("unknown route", "GET", "/v1/nothing", None, None, 404, None),
    ("unknown top-level route", "POST", "/generate", compl(), None, 404, None),
    ("wrong method", "GET", C, None, None, 405, None),
    ("wrong method on health", "POST", "/health", {}, None, 405, None),
    ("20 MB body", "POST", C, b'{"prompt": "' + b"a" * (20 << 20) + b'"}', None, 413, None),
    ("tokenize unknown field", "POST", "/tokenize", {"prompt": "hi", "x": 1}, None, 400, "x"),
    ("tokenize both prompt and messages", "POST", "/tokenize",
     {"prompt": "hi", "messages": [{"role": "user", "content": "x"}]}, None, 400, "prompt"),
    ("detokenize out of range", "POST", "/detokenize", {"tokens": [1, -5]}, None, 400, "tokens"),
    ("detokenize wrong type", "POST", "/detokenize", {"tokens": "abc"}, None, 400, "tokens"),
]


def send(srv, method, path, body, headers):
    h = dict(AUTH) if headers is None else {"Content-Type": "application/json", **headers}
    if isinstance(body, dict):
        body = {k: v for k, v in body.items() if v is not None}
        data = json.dumps(body).encode()
    else:
        data = body
    return requests.request(method, srv.url(path), data=data, headers=h, timeout=120)


@pytest.mark.parametrize("name,method,path,body,headers,status,param", CASES, ids=[c[0] for c in CASES])
def test_bad_request(srv, name, method, path, body, headers, status, param):
    r = send(srv, method, path, body, headers)
    assert r.status_code == status, f"{name}: {r.status_code} {r.text[:500]}"
    assert r.headers["Content-Type"].startswith("application/json")
    err = r.json()["error"]
    assert set(err) == {"message", "type", "param", "code"}
    assert isinstance(err["message"], str) and err["message"]
    assert err["type"] == {401: "authentication_error"}.get(status, "invalid_request_error")
    if param is not None:
        assert err["param"] == param, err
    if status == 401:
        assert r.headers.get("WWW-Authenticate") == "Bearer"
    if status == 405:
        assert "Allow" in r.headers


def test_context_error_gives_the_numbers(srv):
    r = send(srv, "POST", C, compl(max_tokens=MAX_LEN), None)
    assert r.status_code == 400
    msg = r.json()["error"]["message"]
    n_prompt = len(srv.tokenize(prompt="hello"))
    assert str(MAX_LEN) in msg and str(n_prompt) in msg and str(n_prompt + MAX_LEN) in msg
    assert r.json()["error"]["code"] == "context_length_exceeded"


def test_unknown_field_is_named(srv):
    r = send(srv, "POST", CH, chat(frobnicate=True), None)
    assert r.status_code == 400 and "frobnicate" in r.json()["error"]["message"]


def test_health_and_metrics_need_no_key(srv):
    assert requests.get(srv.url("/health")).status_code == 200
    assert requests.get(srv.url("/metrics")).status_code == 200
    assert requests.get(srv.url("/v1/models")).status_code == 401


def test_null_means_default(srv):
    r = send(srv, "POST", C, {"model": "tiny", "prompt": "hello", "max_tokens": 2, "temperature": None,
                              "stop": None, "tools": None, "user": "someone"}, None)
    assert r.status_code == 200, r.text


def test_nul_in_a_string_reads_as_the_replacement_character(srv):
    """JSON strings may hold U+0000, and a client that echoes back a reply
    holding a byte-0 token sends one (the web UI did): it reads as U+FFFD,
    neither refused nor cutting the rest of the text off."""
    assert srv.tokenize(prompt="a\u0000b c") == srv.tokenize(prompt="a\ufffdb c")
    turns = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "x\u0000y"},
             {"role": "user", "content": "more"}]
    r = send(srv, "POST", CH, chat(messages=turns), None)
    assert r.status_code == 200, r.text
    r = send(srv, "POST", "/tokenize", {"messages": turns}, None)
    assert r.status_code == 200 and r.json()["tokens"] == srv.tokenize(
        messages=[dict(t, content=t["content"].replace("\u0000", "\ufffd")) for t in turns])


def test_raw_garbage_on_the_socket(srv):
    """Non-HTTP bytes and a half-sent request must not disturb the server."""
    for payload in (b"\x00\xff garbage\r\n\r\n", b"POST /v1/completions HTTP/1.1\r\nContent-Length: 100\r\n\r\n{"):
        s = socket.create_connection(("127.0.0.1", srv.port))
        s.sendall(payload)
        s.close()
    assert requests.get(srv.url("/health")).status_code == 200


def test_health_after_all_bad_requests(srv):
    fives = 'cllm:http_responses_total{code="5xx"}'  # server-wide: no model_name
    before = srv.metrics()[fives]  # /health may have said 503 while loading
    for name, method, path, body, headers, status, param in CASES:
        send(srv, method, path, body, headers)
    assert requests.get(srv.url("/health")).status_code == 200
    r = send(srv, "POST", C, compl(max_tokens=3, temperature=0), None)
    assert r.status_code == 200 and r.json()["usage"]["completion_tokens"] >= 1
    assert srv.proc.poll() is None
    m = srv.metrics()
    assert m[fives] == before  # no client mistake was a 5xx


def mutations(rng, seed_bodies, n):
    """Random damage to valid bodies: byte flips, cuts, insertions, type swaps."""
    values = [None, True, -1, 0, 1, 2**63, -2**63, 1e308, -0.5, "", "x" * 300, [], {}, [1, "a"], {"1": 2},
              "\ud83d\ude42", [[1], []], "\u0000"]
    for i in range(n):
        body = json.loads(json.dumps(rng.choice(seed_bodies)))
        kind = i % 4
        if kind == 0:  # replace a field's value
            k = rng.choice(list(body))
            body[k] = rng.choice(values)
            yield json.dumps(body).encode()
        elif kind == 1:  # add a field
            body[rng.choice(list(body) + ["stop", "logit_bias", "n", "stream", "x"])] = rng.choice(values)
            yield json.dumps(body).encode()
        else:
            raw = bytearray(json.dumps(body).encode())
            for _ in range(rng.randint(1, 4)):
                op = rng.randint(0, 2)
                pos = rng.randrange(len(raw) + 1)
                if op == 0 and raw:
                    raw[min(pos, len(raw) - 1)] = rng.randrange(256)
                elif op == 1:
                    del raw[pos:pos + rng.randint(1, 10)]
                else:
                    raw[pos:pos] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 5)))
            yield bytes(raw)


def test_fuzzed_bodies_never_5xx(srv):
    import random

    rng = random.Random(1234)
    seeds = [compl(max_tokens=2, stop=["a"], logprobs=1, n=2), chat(max_tokens=2, stream=True, logprobs=True),
             compl(prompt=[[1, 2], [3]], max_tokens=1, echo=True), chat(max_tokens=1, temperature=0.5, top_k=3)]
    statuses = {}
    for path in (C, CH, "/tokenize"):
        for raw in mutations(rng, seeds, 150):
            r = requests.post(srv.url(path), data=raw, headers=AUTH, timeout=60)
            statuses[r.status_code] = statuses.get(r.status_code, 0) + 1
            assert r.status_code in (200, 400, 404), (raw[:300], r.status_code, r.text[:300])
            if r.status_code != 200:
                assert set(r.json()["error"]) == {"message", "type", "param", "code"}
    assert statuses.get(400, 0) > 100
    assert requests.get(srv.url("/health")).status_code == 200
