"""Tool calls on a model whose chat template shows no tool-call format: the
generic format (docs/tools-and-structured-output.md), on the real
gemma-3-270m with the official `openai` client.

  - the start-up log says which format the model's calls use;
  - tool_choice required and a named function: 100 seeded sampled replies
    each (20 of them streamed too, the same as whole), every one a call of
    an allowed tool whose arguments validate against its parameters schema
    (jsonschema);
  - auto: every reply is either a call (valid as above) or an answer as plain
    content, never the JSON the model wrote; streamed as whole;
  - tool_choice none: plain text, the prompt without the tools;
  - a tool-using history renders in the template's turns: the server's prompt
    has the tokens of jinja2's rendering of the rewritten conversation
    (Gemma 3's real template, tests/data/templates/gemma3.jinja);
  - tools with response_format: a 400 naming tools."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import openai
import pytest

from server_util import CllmServer
from test_chat_template import ENV, render_jinja

GEMMA3_TEMPLATE = Path(__file__).resolve().parents[2] / "tests" / "data" / "templates" / "gemma3.jinja"
PARAMS = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 24},
                                           "unit": {"type": "string", "enum": ["C", "F"]},
                                           "days": {"type": "integer", "minimum": 1, "maximum": 7}},
          "required": ["city", "unit"], "additionalProperties": False}
TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "The weather in a city",
                                           "parameters": PARAMS}},
         {"type": "function", "function": {"name": "get_time", "description": "The time now in a city",
                                           "parameters": {"type": "object",
                                                          "properties": {"city": {"type": "string", "maxLength": 24}},
                                                          "required": ["city"]}}}]
SCHEMAS = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]


@pytest.fixture(scope="module")
def gemma(cllm_bin, real_model_path):
    with CllmServer(cllm_bin, real_model_path, "--chat-template", GEMMA3_TEMPLATE, "--max-model-len", 2048,
                    "--kv-cache-memory", "256MiB") as srv:
        yield srv


def client_of(srv):
    return openai.OpenAI(base_url=srv.url("/v1"), api_key="none", max_retries=0, timeout=300)


def check_calls(calls, allowed):
    assert calls, "no call"
    for c in calls:
        name, args = c
        assert name in allowed, c
        jsonschema.validate(json.loads(args), SCHEMAS[name])


def streamed(client, model, **kw):
    """(content, [(name, arguments)], finish) of each choice of a streamed request."""
    out = {}
    for chunk in client.chat.completions.create(model=model, stream=True, **kw):
        for ch in chunk.choices:
            content, calls, finish = out.setdefault(ch.index, ["", {}, None])
            out[ch.index][0] = content + (ch.delta.content or "")
            for tc in ch.delta.tool_calls or []:
                name, args = calls.get(tc.index, ("", ""))
                calls[tc.index] = (tc.function.name or name, args + (tc.function.arguments or ""))
            out[ch.index][2] = ch.finish_reason or finish
    return [(c, [calls[i] for i in sorted(calls)], f) for c, calls, f in (out[i] for i in sorted(out))]


def same_as_streamed(streamed_replies, whole_replies):
    """A stream gives what the whole reply gives; where max_tokens cut a list of
    calls, the stream has also sent the start of the call that was cut."""
    assert len(streamed_replies) == len(whole_replies)
    for (sc, scalls, sf), (wc, wcalls, wf) in zip(streamed_replies, whole_replies):
        assert sc == (wc or "") and sf == wf, (sc, wc, sf, wf)
        cut = scalls[len(wcalls):] if wf == "length" else []
        assert scalls[:len(wcalls)] == wcalls and len(cut) <= 1, (scalls, wcalls)


def whole(client, model, **kw):
    r = client.chat.completions.create(model=model, **kw)
    return [(ch.message.content, [(t.function.name, t.function.arguments) for t in ch.message.tool_calls or []],
             ch.finish_reason) for ch in sorted(r.choices, key=lambda ch: ch.index)]


def test_the_log_names_the_generic_format(gemma):
    assert "shows no tool-call format: tools are offered in a system message" in gemma.log()


@pytest.mark.parametrize("choice", ["required", "named"])
def test_forced_calls_validate_in_100_seeded_runs(gemma, choice):
    client = client_of(gemma)
    model = client.models.list().data[0].id
    tool_choice = "required" if choice == "required" else {"type": "function", "function": {"name": "get_time"}}
    allowed = {"get_weather", "get_time"} if choice == "required" else {"get_time"}
    replies = []
    for seed in range(10):
        # Half of them one call at most (parallel_tool_calls false): the base
        # model, left to it, lists calls until max_tokens.
        kw = dict(messages=ASK, tools=TOOLS, tool_choice=tool_choice, n=10, seed=seed, temperature=1.0,
                  max_tokens=64, parallel_tool_calls=seed >= 5)
        got = whole(client, model, **kw)
        if seed in (0, 5):  # streamed as well (20 of the runs)
            same_as_streamed(streamed(client, model, **kw), got)
        if seed < 5:
            assert all(len(calls) == 1 and f == "tool_calls" for _, calls, f in got), got
        replies += got
    assert len(replies) == 100
    for content, calls, finish in replies:
        assert content is None and finish in ("tool_calls", "length"), (content, finish)
        check_calls(calls, allowed)


def test_auto_is_a_call_or_an_answer(gemma):
    client = client_of(gemma)
    model = client.models.list().data[0].id
    kinds = {"call": 0, "answer": 0}
    for seed in range(4):
        kw = dict(messages=ASK, tools=TOOLS, n=10, seed=seed, temperature=1.0, max_tokens=48)
        got = whole(client, model, **kw)
        same_as_streamed(streamed(client, model, **kw), got)
        for content, calls, finish in got:
            if calls:
                kinds["call"] += 1
                assert content is None
                check_calls(calls, {"get_weather", "get_time"})
            else:
                kinds["answer"] += 1
                # The answer is the decoded string, not the JSON around it.
                assert isinstance(content, str) and not content.lstrip().startswith('{"content"'), content
    assert sum(kinds.values()) == 40, kinds


def test_tool_choice_none_is_plain_text(gemma):
    plain = gemma.post("/tokenize", {"messages": ASK}).json()["count"]
    r = gemma.post("/v1/chat/completions", {"messages": ASK, "tools": TOOLS, "tool_choice": "none",
                                            "max_tokens": 8, "temperature": 0})
    assert r.status_code == 200, r.text
    assert r.json()["choices"][0]["message"].get("tool_calls") is None
    assert r.json()["usage"]["prompt_tokens"] == plain


def generic_system_text(tools, choice):
    """The system message the docs describe for the generic format."""
    lines = ["You can call these tools (each a JSON object: its name, what it does, and the JSON schema of its "
             "arguments):"]
    lines += [json.dumps(t["function"], separators=(",", ":")) for t in tools]
    head = "\n".join(lines) + "\n\nReply with one JSON object and nothing else. "
    assert choice == "auto"
    return head + ('To call tools:\n{"tool_calls": [{"name": "<tool name>", "arguments": {<its arguments>}}]}\n'
                   'To answer without calling a tool:\n{"content": "<your answer>"}')


def test_history_renders_in_the_templates_turns(gemma):
    """A conversation with a call, two results and an answer: the server's
    prompt is jinja2's rendering of it rewritten as the docs say."""
    args = {"city": "Paris", "unit": "C"}
    history = [{"role": "system", "content": "You are a weather bot."}, *ASK,
               {"role": "assistant", "content": None, "tool_calls": [
                   {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": json.dumps(args)}},
                   {"id": "call_2", "type": "function", "function": {"name": "get_time",
                                                                     "arguments": '{"city": "Paris"}'}}]},
               {"role": "tool", "tool_call_id": "call_1", "content": "21 C, sunny"},
               {"role": "tool", "tool_call_id": "call_2", "content": "14:05"},
               {"role": "assistant", "content": "It is sunny and 21 C in Paris at 14:05."},
               {"role": "user", "content": "And tomorrow?"}]
    calls = {"tool_calls": [{"name": "get_weather", "arguments": args}, {"name": "get_time",
                                                                          "arguments": {"city": "Paris"}}]}
    results = [{"tool_response": {"tool_call_id": "call_1", "content": "21 C, sunny"}},
               {"tool_response": {"tool_call_id": "call_2", "content": "14:05"}}]
    rewritten = [{"role": "system", "content": "You are a weather bot.\n\n" + generic_system_text(TOOLS, "auto")},
                 *ASK,
                 {"role": "assistant", "content": json.dumps(calls, separators=(",", ":"))},
                 {"role": "user", "content": "\n".join(json.dumps(r, separators=(",", ":")) for r in results)},
                 history[5], history[6]]
    kind, text = render_jinja(ENV.from_string(GEMMA3_TEMPLATE.read_text(encoding="utf-8")),
                              {"messages": rewritten, "add_generation_prompt": True, "bos_token": "<bos>",
                               "eos_token": "<eos>"})
    assert kind == "ok", text
    ours = gemma.post("/tokenize", {"messages": history, "tools": TOOLS})
    assert ours.status_code == 200, ours.text
    want = gemma.post("/tokenize", {"prompt": text, "add_special_tokens": False})
    if ours.json()["tokens"] != want.json()["tokens"]:
        got = gemma.post("/detokenize", {"tokens": ours.json()["tokens"]}).json()["prompt"]
        assert got == text
    assert ours.json()["tokens"] == want.json()["tokens"]
    r = gemma.post("/v1/chat/completions", {"messages": history, "tools": TOOLS, "max_tokens": 8})
    assert r.status_code == 200, r.text


def test_tools_with_structured_output_are_refused(gemma):
    r = gemma.post("/v1/chat/completions", {"messages": ASK, "tools": TOOLS, "max_tokens": 8,
                                            "response_format": {"type": "json_object"}})
    assert r.status_code == 400 and r.json()["error"]["param"] == "tools", r.text
    assert "generic JSON" in r.json()["error"]["message"]
