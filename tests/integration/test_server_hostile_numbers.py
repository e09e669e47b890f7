"""Hostile numbers in every numeric field of a request: integers at and past
the 32- and 64-bit limits, floats past the double range, NaN and Infinity
(not JSON, but some clients send them), negative zero, denormals and values
of the wrong type. Each request gets 200 or a 400 naming the field (or no
field, for a body that is not JSON), never a 5xx or a crash, and the server
keeps serving. The same file runs against the sanitizer build (make
test-sanitize-server), where an overflow ends the process."""

from __future__ import annotations

import pytest
import requests

from server_util import CllmServer, tiny_model

MAX_LEN = 256
C, CH = "/v1/completions", "/v1/chat/completions"

HOSTILE = ["9223372036854775807", "-9223372036854775808", "9223372036854775808", "18446744073709551616",
           "-18446744073709551617", "2147483647", "2147483648", "-2147483649", "4294967296", "1e308", "-1e308",
           "1e400", "-1e400", "NaN", "Infinity", "-Infinity", "-0.0", "4.9e-324", "0.5", "-1", "0", "1",
           '"5"', "true", "[]", "{}"]

# field -> the endpoints that take it
FIELDS = {
    "max_tokens": (C, CH), "max_completion_tokens": (CH,), "n": (C, CH), "best_of": (C,), "logprobs": (C, CH),
    "top_logprobs": (CH,), "top_k": (C, CH), "seed": (C, CH), "min_tokens": (C, CH), "temperature": (C, CH),
    "top_p": (C, CH), "min_p": (C, CH), "presence_penalty": (C, CH), "frequency_penalty": (C, CH),
    "repetition_penalty": (C, CH),
}


@pytest.fixture(scope="module")
def srv(cllm_bin, model_factory):
    with CllmServer(cllm_bin, tiny_model(model_factory), "--max-model-len", MAX_LEN, "--kv-cache-memory",
                    "16MiB") as s:
        s.fives_at_start = s.metrics()[fives_key(s)]  # /health said 503 while the model loaded
        yield s


def fives_key(srv) -> str:
    return 'cllm:http_responses_total{code="5xx"}'  # server-wide: no model_name


def body(path: str, extra: str) -> bytes:
    base = '"messages": [{"role": "user", "content": "hi"}]' if path == CH else '"prompt": "hi"'
    limit = '"max_tokens": 2, ' if "max_tokens" not in extra and "max_completion_tokens" not in extra else ""
    return ("{" + base + ", " + limit + extra + "}").encode()


def send(srv, path, data):
    return requests.post(srv.url(path), data=data, headers={"Content-Type": "application/json"}, timeout=120)


def check(r, field, path, what):
    assert r.status_code in (200, 400), f"{what}: {r.status_code} {r.text[:300]}"
    if r.status_code == 400:
        err = r.json()["error"]
        context = "messages" if path == CH else "prompt"
        assert err["param"] in (field, None, context), f"{what}: {err}"
        assert err["message"]


@pytest.mark.parametrize("field", list(FIELDS))
def test_hostile_values_per_field(srv, field):
    for path in FIELDS[field]:
        for v in HOSTILE:
            extra = f'"{field}": {v}'
            if field == "top_logprobs":
                extra += ', "logprobs": true'
            if field == "min_tokens":
                extra += ', "max_tokens": 2'
            check(send(srv, path, body(path, extra)), field, path, f"{path} {extra}")


def test_hostile_token_ids_and_bias(srv):
    keys = ["9223372036854775807", "-9223372036854775808", "99999999999999999999", "-1", "1e3", "0x10", " 5",
            "+5", "5 ", "", "2147483648", "4294967301", "-0"]
    for k in keys:
        check(send(srv, C, body(C, f'"logit_bias": {{"{k}": 1}}')), "logit_bias", C, f"logit_bias key {k!r}")
    for v in HOSTILE:
        check(send(srv, C, body(C, f'"logit_bias": {{"5": {v}}}')), "logit_bias", C, f"logit_bias value {v}")
        check(send(srv, C, body(C, f'"stop_token_ids": [{v}]')), "stop_token_ids", C, f"stop_token_ids {v}")
        r = send(srv, C, f'{{"prompt": [1, {v}], "max_tokens": 2}}'.encode())
        check(r, "prompt", C, f"prompt ids {v}")
        r = send(srv, "/detokenize", f'{{"tokens": [1, {v}]}}'.encode())
        check(r, "tokens", "/detokenize", f"detokenize {v}")


def test_extremes_that_are_valid(srv):
    """Seeds are any 64-bit integer; top_k -1 is off; the largest max_tokens
    is a context error naming the prompt, with the sum printed, not wrapped."""
    for seed in ("9223372036854775807", "-9223372036854775808", "0"):
        r = send(srv, C, body(C, f'"seed": {seed}, "temperature": 1'))
        assert r.status_code == 200, r.text
    assert send(srv, C, body(C, '"top_k": -1')).status_code == 200
    r = send(srv, C, body(C, '"max_tokens": 9223372036854775807'))
    assert r.status_code == 400 and r.json()["error"]["param"] == "prompt"
    assert r.json()["error"]["code"] == "context_length_exceeded"
    assert "-" not in r.json()["error"]["message"].split("requested")[1].split("tokens")[0]


def test_still_serving(srv):
    r = send(srv, C, body(C, '"temperature": 0'))
    assert r.status_code == 200 and r.json()["usage"]["completion_tokens"] >= 1
    assert srv.proc.poll() is None
    assert srv.metrics()[fives_key(srv)] == srv.fives_at_start
