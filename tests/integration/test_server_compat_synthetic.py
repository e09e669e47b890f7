"""The compatibility paths of issue 13 on a fast synthetic model, so they also
run against the sanitizer build (make test-sanitize-server): vLLM's token
masks with token-id prompts (every sampled token inside allowed_token_ids;
a banned bad word's token never right after its prefix), the chat fields,
/v1/responses plain and streamed, and their refusals, with the server up
and clean at the end (a sanitizer report fails the shutdown)."""

from __future__ import annotations

import json

import pytest

from server_util import CllmServer, sse_events, tiny_model

PROMPT = [2, 17, 45, 99, 120, 7, 250, 33]


@pytest.fixture(scope="module")
def srv(cllm_bin, model_factory):
    with CllmServer(cllm_bin, tiny_model(model_factory), "--kv-cache-memory", "64MiB",
                    "--allowed-origins", '["http://x.example"]') as s:
        yield s


def completion(srv, **body):
    r = srv.post("/v1/completions", {"prompt": PROMPT, "max_tokens": 12, **body})
    assert r.status_code == 200, r.text
    return r.json()


def test_allowed_token_ids_with_sampling(srv):
    allowed = [40, 41, 42, 43]
    body = completion(srv, temperature=1.5, n=4, seed=3, allowed_token_ids=allowed, ignore_eos=True,
                      logprobs=0, skip_special_tokens=False)
    pieces = {srv.post("/detokenize", {"tokens": [t]}).json()["content"] for t in allowed}
    for ch in body["choices"]:
        assert set(ch["logprobs"]["tokens"]) <= pieces and len(ch["logprobs"]["tokens"]) == 12


def test_bad_words_run_to_length(srv):
    """Memory-safety coverage of the bad-word path (several words, one and
    more tokens, streamed and not); what it bans is checked on the real
    model in test_server_vllm_fields.py."""
    base = completion(srv, temperature=0, ignore_eos=True)["choices"][0]["text"]
    words = [w for w in base.split() if w][:3] + ["  ", "zz yy xx"]
    body = completion(srv, temperature=0, ignore_eos=True, bad_words=words)
    assert body["usage"]["completion_tokens"] == 12
    with srv.post("/v1/completions", {"prompt": PROMPT, "max_tokens": 12, "temperature": 0, "ignore_eos": True,
                                      "bad_words": words, "stream": True}, stream=True) as r:
        text = "".join(e["choices"][0]["text"] for e in sse_events(r) if e != "[DONE]")
    assert text == body["choices"][0]["text"]


def test_chat_fields_and_refusals(srv):
    msgs = [{"role": "user", "content": "abc"}, {"role": "assistant", "content": "def"}]
    for fields in ({"continue_final_message": True, "add_generation_prompt": False},
                   {"chat_template": "{% for m in messages %}{{ m.content }}{{ d }}{% endfor %}",
                    "chat_template_kwargs": {"d": "|"}, "documents": [{"t": "x"}]},
                   {"include_stop_str_in_output": True, "stop": ["a"], "truncate_prompt_tokens": 3}):
        r = srv.post("/v1/chat/completions", {"messages": msgs, "max_tokens": 4, **fields})
        assert r.status_code == 200, (fields, r.text)
        t = srv.post("/tokenize", {"messages": msgs, **{k: v for k, v in fields.items()
                                                         if k in ("continue_final_message", "add_generation_prompt",
                                                                  "chat_template", "chat_template_kwargs",
                                                                  "documents")}})
        if "truncate_prompt_tokens" not in fields:
            assert t.json()["count"] == r.json()["usage"]["prompt_tokens"]
    for fields, param in (({"chat_template": "{% if %}"}, "chat_template"),
                          ({"prompt_logprobs": 21}, "prompt_logprobs"),
                          ({"bad_words": [1]}, "bad_words"),
                          ({"continue_final_message": True}, "continue_final_message")):
        r = srv.post("/v1/chat/completions", {"messages": msgs, **fields})
        assert r.status_code == 400 and r.json()["error"]["param"] == param


def test_responses_plain_and_streamed(srv):
    body = {"input": [{"role": "user", "content": [{"type": "input_text", "text": "abc"}]}],
            "instructions": "x", "max_output_tokens": 5, "temperature": 0}
    r = srv.post("/v1/responses", body, headers={**srv.headers(), "Origin": "http://x.example"})
    assert r.status_code == 200 and r.headers["Access-Control-Allow-Origin"] == "http://x.example"
    whole = r.json()
    assert whole["object"] == "response" and whole["usage"]["output_tokens"] <= 5
    with srv.post("/v1/responses", {**body, "stream": True}, stream=True) as s:
        lines = [ln.decode() for ln in s.iter_lines() if ln]
    events = [json.loads(ln[6:]) for ln in lines if ln.startswith("data: ")]
    assert events[0]["type"] == "response.created"
    want = whole["output"][0]["content"][0]["text"]
    assert events[-1]["response"]["output"][0]["content"][0]["text"] == want
    assert "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta") == want
    # A client that leaves mid-stream, and refusals; the server stays up.
    with srv.post("/v1/responses", {**body, "max_output_tokens": 200, "stream": True}, stream=True) as s:
        next(s.iter_lines())
    for extra, param in (({"store": True}, "store"), ({"previous_response_id": "r"}, "previous_response_id")):
        assert srv.post("/v1/responses", {**body, **extra}).json()["error"]["param"] == param
    assert srv.get("/health").status_code == 200
