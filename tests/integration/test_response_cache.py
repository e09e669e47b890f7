"""The response cache (`cllm serve --response-cache-size N`): exact repeats of
deterministic requests are answered from memory.

  - Every request field the server accepts (the FIELDS table of
    src/server/params.c, read from the source so a new field fails this test
    until it is walked here) changes the key, except the accepted-and-ignored
    fields (IGNORED) and the delivery fields (model, stream, stream_options).
  - Hits and misses through the official `openai` client: the X-Cllm-Cache
    header, the same output, a fresh id, the counters in /metrics, and an
    engine that sees nothing of a hit.
  - A stream replayed from the cache carries what the live stream carried
    (text, logprobs, finish reasons, usage) in chunks of the same shapes.
  - Sampled requests without a seed are never cached; with a seed they are.
  - Failed or abandoned requests are not cached; the least recently used
    entry goes first."""

from __future__ import annotations

import json
import re

import openai
import pytest
import requests

from server_util import CllmServer, sse_events, tiny_model

NAME = "tiny"
CACHE = "x-cllm-cache"


@pytest.fixture(scope="module")
def srv(cllm_bin, model_factory):
    with CllmServer(cllm_bin, tiny_model(model_factory), "--served-model-name", NAME, "--kv-cache-memory", "64MiB",
                    "--response-cache-size", 512) as s:
        yield s


@pytest.fixture(scope="module")
def client(srv):
    return openai.OpenAI(base_url=srv.url("/v1"), api_key="none", max_retries=0, timeout=120)


def source_table(repo_root, name: str) -> str:
    text = (repo_root / "src" / "server" / "params.c").read_text()
    m = re.search(r"\b" + name + r"\[\] = \{(.*?)\n\};", text, re.S)
    assert m, f"no table {name} in params.c"
    return m.group(1)


def accepted_fields(repo_root) -> dict:
    """{field: set of endpoints} from FIELDS (F_UNSUPPORTED ones are 400s, not fields)."""
    out = {}
    for name, where in re.findall(r'\{"(\w+)", (F_\w+)\}', source_table(repo_root, "FIELDS")):
        if where != "F_UNSUPPORTED":
            out[name] = {"F_COMMON": {"completions", "chat"}, "F_COMPL": {"completions"},
                         "F_CHAT": {"chat"}}[where]
    assert len(out) > 20
    # Chat fields completions take as null only (tools, tool_choice, ...).
    for name in re.findall(r'\{"(\w+)", F_CHAT \| F_COMPL_NULL\}', source_table(repo_root, "FIELDS")):
        out[name] = {"chat"}
    # vLLM's extra fields (params_vllm.c) and the structured-output fields
    # (structured.c) are read outside that table.
    vllm = (repo_root / "src" / "server" / "params_vllm.c").read_text()
    for name, where in re.findall(r'\{"(\w+)", V_(BOTH|CHAT)\}', vllm):
        if name not in NOT_CACHED:
            out[name] = {"completions", "chat"} if where == "BOTH" else {"chat"}
    structured = (repo_root / "src" / "server" / "structured.c").read_text()
    m = re.search(r"FIELDS\[\] = \{(.*?)\};", structured, re.S)
    assert m, "no FIELDS table in structured.c"
    for name in re.findall(r'"(\w+)"', m.group(1)):
        out[name] = {"completions", "chat"}
    return out


def ignored_fields(repo_root) -> set:
    return set(re.findall(r'\{"(\w+)", check_\w+\}', source_table(repo_root, "IGNORED")))


# vLLM fields in params_vllm.c's table whose requests are never cached (X-Cllm-Cache: bypass,
# test_prompt_logprobs_bypass_the_cache): not fields to walk.
NOT_CACHED = {"prompt_logprobs"}
TOOL = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}

# field -> (extra fields in the base request, the change). The base request is
# greedy (temperature 0) with a seed, so a change of temperature stays cacheable.
CHANGES = {
    "model": ({}, {"model": NAME}),
    "max_tokens": ({}, {"max_tokens": 7}),
    "temperature": ({}, {"temperature": 0.7}),
    "top_p": ({}, {"top_p": 0.9}),
    "top_k": ({}, {"top_k": 5}),
    "min_p": ({}, {"min_p": 0.1}),
    "n": ({}, {"n": 2}),
    "stop": ({}, {"stop": ["zzz"]}),
    "stop_token_ids": ({}, {"stop_token_ids": [7]}),
    "seed": ({}, {"seed": 2}),
    "presence_penalty": ({}, {"presence_penalty": 0.5}),
    "frequency_penalty": ({}, {"frequency_penalty": 0.5}),
    "repetition_penalty": ({}, {"repetition_penalty": 1.1}),
    "logit_bias": ({}, {"logit_bias": {"7": 2}}),
    "logprobs": ({}, {"logprobs": 1}),  # chat: a boolean, below
    "ignore_eos": ({}, {"ignore_eos": True}),
    "min_tokens": ({}, {"min_tokens": 2}),
    "use_beam_search": ({}, {"use_beam_search": True}),
    "best_of": ({}, {"best_of": 1}),
    "length_penalty": ({}, {"length_penalty": 0.5}),
    "stream": ({}, {"stream": True}),
    "stream_options": ({"stream": True}, {"stream_options": {"include_usage": True}}),
    "prompt": ({}, {"prompt": "a different prompt"}),
    "echo": ({}, {"echo": True}),
    "messages": ({}, {"messages": [{"role": "user", "content": "a different message"}]}),
    "max_completion_tokens": ({}, {"max_completion_tokens": 7}),
    "top_logprobs": ({"logprobs": True}, {"top_logprobs": 2}),
    "response_format": ({}, {"response_format": {"type": "json_object"}}),
    "kv_eviction": ({}, {"kv_eviction": "streaming", "kv_budget": 256}),
    "kv_budget": ({}, {"kv_budget": 256}),
    "kv_sink_tokens": ({}, {"kv_sink_tokens": 2}),
    "tools": ({}, {"tools": [TOOL], "tool_choice": "none"}),
    "tool_choice": ({"tools": [TOOL]}, {"tool_choice": "auto"}),
    "parallel_tool_calls": ({}, {"parallel_tool_calls": False}),
    "skip_special_tokens": ({}, {"skip_special_tokens": False}),
    "spaces_between_special_tokens": ({}, {"spaces_between_special_tokens": False}),
    "include_stop_str_in_output": ({}, {"include_stop_str_in_output": True}),
    "truncate_prompt_tokens": ({}, {"truncate_prompt_tokens": 2}),
    "allowed_token_ids": ({}, {"allowed_token_ids": [5, 6, 7]}),
    "bad_words": ({}, {"bad_words": ["zzz"]}),
    "add_generation_prompt": ({}, {"add_generation_prompt": False}),
    "continue_final_message": ({"add_generation_prompt": False}, {"continue_final_message": True}),
    "chat_template": ({}, {"chat_template": "{% for m in messages %}{{ m.content }}{% endfor %}"}),
    "chat_template_kwargs": ({}, {"chat_template_kwargs": {"x": 1}}),
    "documents": ({}, {"documents": [{"text": "a document"}]}),
    "structured_outputs": ({}, {"structured_outputs": {"choice": ["a", "b"]}}),
    "guided_json": ({}, {"guided_json": {"type": "object"}}),
    "guided_regex": ({}, {"guided_regex": "[a-z]+"}),
    "guided_choice": ({}, {"guided_choice": ["a", "b"]}),
    "guided_grammar": ({}, {"guided_grammar": 'root ::= "a"+'}),
    "guided_decoding_backend": ({"guided_regex": "[a-z]+"}, {"guided_decoding_backend": "xgrammar"}),
    "grammar": ({}, {"grammar": 'root ::= "a"+'}),
    "json_schema": ({}, {"json_schema": {"type": "object"}}),
}
CHAT_CHANGES = {"logprobs": ({}, {"logprobs": True})}
DELIVERY = {"model", "stream", "stream_options"}
IGNORED_VALUES = {"user": "u-1", "safety_identifier": "s-1", "prompt_cache_key": "k-1", "store": True,
                  "metadata": {"a": "b"}, "service_tier": "auto",
                  "modalities": ["text"], "prediction": {"type": "content", "content": "x"}}


def base_request(endpoint: str, tag: str) -> dict:
    """A cacheable request no other case sends (tag makes it unique)."""
    body = {"max_tokens": 6, "temperature": 0, "seed": 1}
    if endpoint == "chat":
        body["messages"] = [{"role": "user", "content": f"case {tag}"}]
    else:
        body["prompt"] = f"case {tag}"
    return body


def send(srv, endpoint: str, body: dict) -> requests.Response:
    path = "/v1/chat/completions" if endpoint == "chat" else "/v1/completions"
    r = srv.post(path, body)
    assert r.status_code == 200, (body, r.text)
    if body.get("stream"):
        events = sse_events(r)
        assert events[-1] == "[DONE]" and not any("error" in e for e in events[:-1]), events
    return r


@pytest.mark.parametrize("endpoint", ["completions", "chat"])
def test_every_field_changes_the_key_or_is_documented_not_to(srv, repo_root, endpoint):
    fields = {f for f, where in accepted_fields(repo_root).items() if endpoint in where}
    walked = set()
    for field in sorted(fields):
        assert field in CHANGES, f"'{field}' is a request field this test does not walk: add it to CHANGES"
        extra, change = (CHAT_CHANGES if endpoint == "chat" else {}).get(field, CHANGES[field])
        a = {**base_request(endpoint, f"{endpoint}-{field}"), **extra}
        send(srv, endpoint, a)
        assert send(srv, endpoint, a).headers[CACHE] == "hit", f"{field}: the base request was not cached"
        b = {**a, **change}
        assert b != a
        want = "hit" if field in DELIVERY else "miss"
        assert send(srv, endpoint, b).headers[CACHE] == want, f"changing '{field}' should give a {want}"
        walked.add(field)
    assert walked == fields
    # The fields documented as changing no output are left out of the key.
    ignored = ignored_fields(repo_root)
    assert ignored == set(IGNORED_VALUES), "IGNORED changed: give each new field a value here"
    a = base_request(endpoint, f"{endpoint}-ignored")
    send(srv, endpoint, a)
    for field, value in IGNORED_VALUES.items():
        assert send(srv, endpoint, {**a, field: value}).headers[CACHE] == "hit", field
    # null means "not given", and the order of the keys does not matter.
    assert send(srv, endpoint, {**a, "top_k": None, "stop": None}).headers[CACHE] == "hit"
    assert send(srv, endpoint, dict(reversed(list(a.items())))).headers[CACHE] == "hit"


def cache_counts(srv) -> tuple:
    """(cache hits, cache misses, prompt tokens the engine took, requests it finished)."""
    m = srv.metrics()
    finished = sum(v for k, v in m.items() if k.startswith("vllm:request_success_total{"))
    return (m["cllm:response_cache_hits_total"], m["cllm:response_cache_misses_total"],
            m["vllm:prompt_tokens_total"], finished)


def test_hit_and_miss_with_the_openai_client(srv, client):
    h0, m0, p0, s0 = cache_counts(srv)
    kw = dict(model=NAME, prompt="the openai client asks", max_tokens=12, temperature=0, logprobs=2)
    first = client.completions.with_raw_response.create(**kw)
    assert first.headers[CACHE] == "miss"
    h1, m1, p1, s1 = cache_counts(srv)
    assert (h1 - h0, m1 - m0, s1 - s0) == (0, 1, 1) and p1 > p0
    second = client.completions.with_raw_response.create(**kw)
    assert second.headers[CACHE] == "hit"
    h2, m2, p2, s2 = cache_counts(srv)
    # The engine saw nothing of the hit: no prompt tokens, no finished request.
    assert (h2 - h1, m2 - m1, p2 - p1, s2 - s1) == (1, 0, 0, 0)
    a, b = first.parse(), second.parse()
    assert a.id != b.id
    assert a.choices == b.choices and a.usage == b.usage and a.model == b.model == NAME
    # Chat, with the client's own types.
    chat = dict(model=NAME, messages=[{"role": "user", "content": "hello cache"}], max_tokens=10, temperature=0)
    c1 = client.chat.completions.with_raw_response.create(**chat)
    c2 = client.chat.completions.with_raw_response.create(**chat)
    assert (c1.headers[CACHE], c2.headers[CACHE]) == ("miss", "hit")
    assert c1.parse().choices == c2.parse().choices


def chunk_shape(ev: dict):
    """A chunk's keys at every depth, without its values: what must be the same
    between a live and a replayed chunk (a live stream whose reader lags merges
    several outputs into one chunk, so chunk by chunk the values differ)."""
    def strip(v):
        if isinstance(v, dict) and v and all(isinstance(x, float) for x in v.values()):
            return "{token: logprob}"  # completions' top_logprobs: the keys are data
        if isinstance(v, dict):
            return {k: strip(x) for k, x in v.items()}
        if isinstance(v, list):
            return sorted({json.dumps(strip(x), sort_keys=True) for x in v})
        return "value"

    ev = json.loads(json.dumps(ev))
    for c in ev["choices"]:
        # A token that completes no character has a delta without text; a live
        # stream whose reader lags merges it into the next chunk.
        if c.get("delta") == {}:
            c["delta"] = {"content": ""}
    return json.dumps(strip(ev), sort_keys=True)


def joined(events, endpoint: str) -> dict:
    """Per choice: text, logprob tokens and values, finish reason; and the usage."""
    out: dict = {}
    usage = None
    for ev in events[:-1]:
        if ev.get("usage"):
            usage = ev["usage"]
        for c in ev["choices"]:
            d = out.setdefault(c["index"], {"text": "", "lps": [], "finish": None})
            d["text"] += c["delta"].get("content", "") if endpoint == "chat" else c["text"]
            lp = c.get("logprobs")
            if lp and endpoint == "chat":
                d["lps"] += [(t["token"], t["logprob"], json.dumps(t["top_logprobs"])) for t in lp["content"]]
            elif lp:
                d["lps"] += list(zip(lp["tokens"], lp["token_logprobs"], map(json.dumps, lp["top_logprobs"])))
            if c.get("finish_reason"):
                d["finish"] = c["finish_reason"]
    return {"choices": out, "usage": usage}


@pytest.mark.parametrize("endpoint", ["completions", "chat"])
def test_stream_replay_carries_what_the_live_stream_did(srv, endpoint):
    body = {**base_request(endpoint, f"stream-{endpoint}"), "max_tokens": 24, "n": 2, "stream": True,
            "stream_options": {"include_usage": True}}
    body.update({"logprobs": True, "top_logprobs": 2} if endpoint == "chat" else {"logprobs": 2})
    path = "/v1/chat/completions" if endpoint == "chat" else "/v1/completions"
    live = srv.post(path, body)
    assert live.headers[CACHE] == "miss"
    live_events = sse_events(live)
    replay = srv.post(path, body)
    assert replay.headers[CACHE] == "hit" and replay.headers["content-type"].startswith("text/event-stream")
    replay_events = sse_events(replay)
    assert replay_events[-1] == live_events[-1] == "[DONE]"
    assert joined(replay_events, endpoint) == joined(live_events, endpoint)
    assert {chunk_shape(e) for e in replay_events[:-1]} == {chunk_shape(e) for e in live_events[:-1]}
    ids = {e["id"] for e in replay_events[:-1]}
    assert len(ids) == 1 and ids != {e["id"] for e in live_events[:-1]}
    # One chunk per engine output: each replayed text chunk holds one token's logprobs.
    for e in replay_events[:-1]:
        for c in e["choices"]:
            lp = c.get("logprobs")
            if lp:
                assert len(lp["content"] if endpoint == "chat" else lp["tokens"]) == 1
    # The same entry answers the request unstreamed, with the same output.
    whole = srv.post(path, {k: v for k, v in body.items() if k not in ("stream", "stream_options")})
    assert whole.headers[CACHE] == "hit"
    got = whole.json()
    for c in got["choices"]:
        want = joined(live_events, endpoint)["choices"][c["index"]]
        text = c["message"]["content"] if endpoint == "chat" else c["text"]
        assert text == want["text"] and c["finish_reason"] == want["finish"]
    assert got["usage"] == joined(live_events, endpoint)["usage"]


def test_sampled_requests_without_a_seed_are_not_cached(srv):
    body = {"prompt": "sampled", "max_tokens": 16, "temperature": 0.9}
    h0, m0, _, _ = cache_counts(srv)
    for _ in range(3):
        assert srv.post("/v1/completions", body).headers[CACHE] == "bypass"
    h1, m1, _, _ = cache_counts(srv)
    assert (h1, m1) == (h0, m0)
    seeded = {**body, "seed": 1234}
    r1, r2 = srv.post("/v1/completions", seeded), srv.post("/v1/completions", seeded)
    assert (r1.headers[CACHE], r2.headers[CACHE]) == ("miss", "hit")
    assert r1.json()["choices"] == r2.json()["choices"]
    # Beam search is deterministic too.
    beams = {"prompt": "beams", "max_tokens": 4, "use_beam_search": True, "best_of": 3, "n": 2, "temperature": 0.9}
    b1, b2 = srv.post("/v1/completions", beams), srv.post("/v1/completions", beams)
    assert (b1.headers[CACHE], b2.headers[CACHE]) == ("miss", "hit")
    assert b1.json()["choices"] == b2.json()["choices"]


def test_failed_and_abandoned_requests_are_not_cached(srv):
    bad = {"prompt": "bad", "max_tokens": -1, "temperature": 0}
    assert srv.post("/v1/completions", bad).status_code == 400
    assert srv.post("/v1/completions", bad).status_code == 400
    # A stream the client leaves after its first chunk is aborted, not kept.
    body = {"prompt": "left early", "max_tokens": 3000, "ignore_eos": True, "temperature": 0, "stream": True}
    with requests.post(srv.url("/v1/completions"), json=body, stream=True, timeout=60) as r:
        assert r.headers[CACHE] == "miss"
        next(r.iter_lines())
    again = srv.post("/v1/completions", {**body, "max_tokens": 3000})
    assert again.headers[CACHE] == "miss"
    sse_events(again)


def test_least_recently_used_goes_first(cllm_bin, model_factory):
    with CllmServer(cllm_bin, tiny_model(model_factory), "--kv-cache-memory", "64MiB",
                    "--response-cache-size", 2) as s:
        def ask(p):
            return s.post("/v1/completions", {"prompt": p, "max_tokens": 3, "temperature": 0}).headers[CACHE]

        assert [ask("a"), ask("b"), ask("a"), ask("c")] == ["miss", "miss", "hit", "miss"]
        # c pushed out b (a was used after b), so b misses and a still hits.
        assert ask("a") == "hit"
        assert ask("b") == "miss"
        m = s.metrics()
        assert m["cllm:response_cache_entries"] == 2


def test_off_by_default(cllm_bin, model_factory):
    with CllmServer(cllm_bin, tiny_model(model_factory), "--kv-cache-memory", "64MiB") as s:
        r = s.post("/v1/completions", {"prompt": "a", "max_tokens": 2, "temperature": 0})
        assert r.status_code == 200 and CACHE not in r.headers
        assert "response_cache" not in s.get("/metrics").text


def test_prompt_logprobs_bypass_the_cache(srv):
    """The engine reports prompt logprobs once per prompt, beside the outputs a recording keeps."""
    body = {**base_request("completions", "prompt-logprobs"), "prompt_logprobs": 1}
    for _ in range(2):
        r = send(srv, "completions", body)
        assert r.headers[CACHE] == "bypass" and r.json()["choices"][0]["prompt_logprobs"][0] is None
