"""Cross-origin access (CORS) as vLLM configures it: --allowed-origins,
--allowed-methods, --allowed-headers. A preflight needs no API key and gets
the Access-Control-Allow-* headers from an allowed origin, a 400 naming what
is not allowed otherwise; every answer to an allowed origin (JSON, errors,
SSE streams) carries Access-Control-Allow-Origin and Vary: Origin; without
the flags no cross-origin access is granted. Checked with plain HTTP as a
browser sends it, on a synthetic model."""

from __future__ import annotations

import pytest
import requests

from server_util import CllmServer, sse_events, tiny_model

KEY = "sk-cors"
OK = "http://app.example:3000"


@pytest.fixture(scope="module")
def model(model_factory):
    return tiny_model(model_factory)


@pytest.fixture(scope="module")
def srv(cllm_bin, model):
    with CllmServer(cllm_bin, model, "--kv-cache-memory", "64MiB", "--allowed-origins", f'["{OK}"]',
                    "--allowed-methods", '["GET", "POST"]', "--allowed-headers", '["Authorization", "X-Trace"]',
                    api_key=KEY) as s:
        yield s


def preflight(srv, path, origin=OK, method="POST", headers="authorization, content-type"):
    h = {"Origin": origin, "Access-Control-Request-Method": method}
    if headers:
        h["Access-Control-Request-Headers"] = headers
    return requests.options(srv.url(path), headers=h, timeout=30)


def test_preflight_needs_no_key_and_lists_what_is_allowed(srv):
    r = preflight(srv, "/v1/chat/completions")
    assert r.status_code == 200, r.text
    assert r.headers["Access-Control-Allow-Origin"] == OK
    assert r.headers["Vary"] == "Origin"
    assert r.headers["Access-Control-Allow-Methods"] == "GET, POST"
    assert r.headers["Access-Control-Allow-Headers"] == "Authorization, X-Trace"
    assert int(r.headers["Access-Control-Max-Age"]) > 0
    # Any path, known or not: the browser asks before it knows.
    assert preflight(srv, "/v1/models", method="GET", headers=None).status_code == 200


@pytest.mark.parametrize("kw, what", [({"origin": "http://evil.example"}, "origin"),
                                      ({"origin": OK + "/"}, "origin"),
                                      ({"method": "DELETE"}, "method"),
                                      ({"headers": "authorization, x-other"}, "header")])
def test_preflight_refusals_name_what_is_not_allowed(srv, kw, what):
    r = preflight(srv, "/v1/completions", **kw)
    assert r.status_code == 400
    err = r.json()["error"]
    assert err["code"] == f"cors_{what}_not_allowed" and f"Disallowed CORS {what}" in err["message"]
    if what == "origin":
        assert "Access-Control-Allow-Origin" not in r.headers
    assert "Access-Control-Allow-Methods" not in r.headers
    assert srv.get("/health").status_code == 200


def test_answers_to_an_allowed_origin_carry_the_header(srv):
    body = {"prompt": [1, 2, 3], "max_tokens": 3}
    ok = srv.post("/v1/completions", body, headers={**srv.headers(), "Origin": OK})
    assert ok.status_code == 200
    assert ok.headers["Access-Control-Allow-Origin"] == OK and ok.headers["Vary"] == "Origin"
    # Errors too: a missing key, a bad field, an unknown path.
    for r in (requests.post(srv.url("/v1/completions"), json=body, headers={"Origin": OK}, timeout=30),
              srv.post("/v1/completions", {**body, "max_tokens": "x"}, headers={**srv.headers(), "Origin": OK}),
              srv.get("/nope", headers={**srv.headers(), "Origin": OK})):
        assert r.status_code in (400, 401, 404)
        assert r.headers["Access-Control-Allow-Origin"] == OK, r.status_code
    # And a stream.
    with srv.post("/v1/completions", {**body, "stream": True}, headers={**srv.headers(), "Origin": OK},
                  stream=True) as r:
        assert r.headers["Access-Control-Allow-Origin"] == OK
        assert sse_events(r)[-1] == "[DONE]"


def test_other_origins_get_no_header(srv):
    r = srv.post("/v1/completions", {"prompt": [1, 2], "max_tokens": 1},
                 headers={**srv.headers(), "Origin": "http://evil.example"})
    assert r.status_code == 200 and "Access-Control-Allow-Origin" not in r.headers
    r = srv.post("/v1/completions", {"prompt": [1, 2], "max_tokens": 1})
    assert r.status_code == 200 and "Access-Control-Allow-Origin" not in r.headers


def test_default_is_no_cross_origin_access(cllm_bin, model):
    with CllmServer(cllm_bin, model, "--kv-cache-memory", "64MiB") as s:
        r = preflight(s, "/v1/completions")
        assert r.status_code == 400 and "Access-Control-Allow-Origin" not in r.headers
        r = s.get("/v1/models", headers={"Origin": OK})
        assert r.status_code == 200 and "Access-Control-Allow-Origin" not in r.headers
        # OPTIONS that is not a preflight is still just a method the path lacks.
        assert requests.options(s.url("/v1/completions"), timeout=30).status_code == 405


def test_star_allows_any_origin_and_echoes_requested_headers(cllm_bin, model):
    with CllmServer(cllm_bin, model, "--kv-cache-memory", "64MiB", "--allowed-origins", '["*"]') as s:
        r = preflight(s, "/v1/completions", origin="http://any.example", headers="x-a, x-b")
        assert r.status_code == 200
        assert r.headers["Access-Control-Allow-Origin"] == "http://any.example"
        assert r.headers["Access-Control-Allow-Headers"] == "x-a, x-b"
        assert "POST" in r.headers["Access-Control-Allow-Methods"]


@pytest.mark.parametrize("flag, value, says", [("--allowed-origins", "http://a", "not JSON"),
                                               ("--allowed-methods", '{"a": 1}', "JSON list"),
                                               ("--allowed-headers", '["a", 3]', "item 1")])
def test_bad_flags_are_usage_errors(run_cllm, model, flag, value, says):
    r = run_cllm("serve", model, "--port", "0", flag, value)
    assert r.returncode != 0 and flag in r.stderr and says in r.stderr, r.stderr
