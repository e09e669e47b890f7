"""`make run`'s default chat model answers plain questions.

The model `make run` serves (scripts/default_model.py: Qwen2.5-Coder-1.5B-Instruct
in Q4_K_M, assembled by scripts/setup.sh) is served as `make run` serves it and
asked the 20 questions of tests/data/chat_questions.json through the official
`openai` client, greedy: at least 15 answers must hold the expected keyword
(docs/first-run.md records all 20). The chat page's part of this is in
test_webui_browser.py."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from server_util import CllmServer, default_chat_model

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))

import chat_answers  # noqa: E402 - bench/ is not a package

MIN_HITS = 15


@pytest.fixture(scope="module")
def chat_server(cllm_bin):
    with CllmServer(cllm_bin, default_chat_model()) as srv:
        yield srv


def test_the_default_model_answers_plain_questions(chat_server):
    from openai import OpenAI

    client = OpenAI(base_url=chat_server.url("/v1"), api_key="none")
    model = client.models.list().data[0].id
    assert model == "qwen2.5-coder-1.5b-instruct-q4_k_m"
    rows = chat_answers.ask_all(client, model)
    print(chat_answers.markdown([model], [rows]))
    hits = sum(r["hit"] for r in rows)
    assert len(rows) == 20 and hits >= MIN_HITS, \
        f"{hits}/20 answers hold their keyword:\n" + chat_answers.markdown([model], [rows])
    # Each answer ends because the model ended it: no runaway repetition up to the limit.
    finished = [client.chat.completions.create(model=model, max_tokens=64, temperature=0, messages=[
        {"role": "user", "content": "How many legs does a spider have?"}]).choices[0].finish_reason]
    assert finished == ["stop"], finished


WEATHER_TOOL = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["C", "F"]}},
                   "required": ["city"]}}}


def reply_of(client, model, question, stream):
    """(content, [(name, arguments)], finish_reason) of a greedy reply with the weather tool offered."""
    kw = dict(model=model, messages=[{"role": "user", "content": question}], tools=[WEATHER_TOOL], temperature=0,
              max_tokens=96)
    if not stream:
        r = client.chat.completions.create(**kw).choices[0]
        calls = [(t.function.name, t.function.arguments) for t in r.message.tool_calls or []]
        return r.message.content or "", calls, r.finish_reason
    content, calls, finish = "", {}, None
    for chunk in client.chat.completions.create(stream=True, **kw):
        d = chunk.choices[0].delta
        content += d.content or ""
        for tc in d.tool_calls or []:
            name, args = calls.get(tc.index, ("", ""))
            calls[tc.index] = (tc.function.name or name, args + (tc.function.arguments or ""))
        finish = chunk.choices[0].finish_reason or finish
    return content, [calls[i] for i in sorted(calls)], finish


def test_the_default_model_calls_tools_whole_and_streamed(chat_server):
    """Qwen2.5-Coder writes its calls as bare JSON, without the <tool_call> tags its
    template shows; they are calls all the same (an offered tool, an object of
    arguments), while a JSON reply that names no offered tool stays content."""
    import json

    from openai import OpenAI

    client = OpenAI(base_url=chat_server.url("/v1"), api_key="none")
    model = client.models.list().data[0].id
    for stream in (False, True):
        content, calls, finish = reply_of(client, model, "What is the weather in Paris in Fahrenheit?", stream)
        assert finish == "tool_calls" and content == "" and len(calls) == 1, (stream, content, calls, finish)
        name, args = calls[0]
        assert name == "get_weather" and json.loads(args) == {"city": "Paris", "unit": "F"}, (stream, calls)
    whole = reply_of(client, model, "Tell me a joke about cats.", False)
    streamed = reply_of(client, model, "Tell me a joke about cats.", True)
    assert whole[1] == [] and whole[2] == "stop" and whole[0], whole
    assert streamed == whole, (streamed, whole)
