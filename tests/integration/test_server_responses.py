"""POST /v1/responses (OpenAI's Responses API) through the official `openai`
client's client.responses.create, plain and streamed, on the real Gemma 3
270M model. The answer must be the chat endpoint's for the same messages
(instructions as the system message, input items as turns): the same text,
the same token counts in usage. The stream's typed events come in OpenAI's
order with consecutive sequence numbers, and their deltas add up to the
text. What needs stored state or tools is refused with a 400 naming the
field."""

from __future__ import annotations

import json

import openai
import pytest
import requests

from server_util import CllmServer, tiny_model

KEY = "sk-responses"
NAME = "gemma"
INSTRUCTIONS = "Answer in one short sentence."
QUESTION = "What colour is the sky on a clear day?"


@pytest.fixture(scope="module")
def srv(cllm_bin, real_model_path):
    with CllmServer(cllm_bin, real_model_path, "--max-model-len", 1024, "--kv-cache-memory", "256MiB",
                    "--served-model-name", NAME, api_key=KEY) as s:
        yield s


@pytest.fixture(scope="module")
def client(srv):
    return openai.OpenAI(base_url=srv.url("/v1"), api_key=KEY, max_retries=0, timeout=300)


def chat_reference(client, messages, max_tokens):
    return client.chat.completions.create(model=NAME, messages=messages, max_tokens=max_tokens, temperature=0)


def test_plain_string_input(client):
    r = client.responses.create(model=NAME, input=QUESTION, instructions=INSTRUCTIONS, max_output_tokens=12,
                                temperature=0, top_p=1)
    ref = chat_reference(client, [{"role": "system", "content": INSTRUCTIONS}, {"role": "user", "content": QUESTION}],
                         12)
    assert r.object == "response" and r.id.startswith("resp_") and r.model == NAME and r.created_at > 0
    assert r.output_text == ref.choices[0].message.content
    assert len(r.output) == 1
    item = r.output[0]
    assert item.type == "message" and item.role == "assistant" and item.id.startswith("msg_")
    assert [c.type for c in item.content] == ["output_text"]
    assert r.usage.input_tokens == ref.usage.prompt_tokens
    assert r.usage.output_tokens == ref.usage.completion_tokens
    assert r.usage.total_tokens == r.usage.input_tokens + r.usage.output_tokens
    finished = ref.choices[0].finish_reason
    assert r.status == ("incomplete" if finished == "length" else "completed")
    if r.status == "incomplete":
        assert r.incomplete_details.reason == "max_output_tokens"
    assert r.instructions == INSTRUCTIONS and r.max_output_tokens == 12 and r.temperature == 0


def test_message_items_input(client):
    items = [{"role": "developer", "content": "Be brief."},
             {"role": "user", "content": [{"type": "input_text", "text": "Name a fruit."}]},
             {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Apple."}]},
             {"role": "user", "content": [{"type": "input_text", "text": "Another"},
                                          {"type": "input_text", "text": "one, please."}]}]
    r = client.responses.create(model=NAME, input=items, max_output_tokens=8, temperature=0)
    ref = chat_reference(client, [{"role": "system", "content": "Be brief."},
                                  {"role": "user", "content": "Name a fruit."},
                                  {"role": "assistant", "content": "Apple."},
                                  {"role": "user", "content": "Another\none, please."}], 8)
    assert r.output_text == ref.choices[0].message.content
    assert r.usage.input_tokens == ref.usage.prompt_tokens


def test_an_answer_that_ends_is_completed(cllm_bin, model_factory):
    """Gemma 3 270M (a base model) rarely ends a turn, so a synthetic model
    whose greedy answer to some input reaches its end-of-sequence token: the
    response is "completed", plain and streamed, where the chat answer's
    finish_reason is "stop"."""
    with CllmServer(cllm_bin, tiny_model(model_factory), "--kv-cache-memory", "64MiB") as s:
        c = openai.OpenAI(base_url=s.url("/v1"), api_key="none", max_retries=0, timeout=300)
        name = c.models.list().data[0].id
        ending = None
        for i in range(60):
            q = f"item {i} " + "abc" * (i % 5)
            ref = c.chat.completions.create(model=name, messages=[{"role": "user", "content": q}], max_tokens=60,
                                            temperature=0)
            if ref.choices[0].finish_reason == "stop":
                ending = q
                break
        assert ending, "no input of 60 made the synthetic model end its answer"
        r = c.responses.create(model=name, input=ending, max_output_tokens=60, temperature=0)
        assert r.status == "completed" and r.incomplete_details is None and r.output[0].status == "completed"
        assert r.output_text == ref.choices[0].message.content
        assert r.usage.output_tokens == ref.usage.completion_tokens
        events = list(c.responses.create(model=name, input=ending, max_output_tokens=60, temperature=0,
                                         stream=True))
        assert events[-1].type == "response.completed" and events[-1].response.status == "completed"
        assert events[-1].response.output_text == r.output_text


EXPECTED_ORDER = ["response.created", "response.in_progress", "response.output_item.added",
                  "response.content_part.added"]
EXPECTED_END = ["response.output_text.done", "response.content_part.done", "response.output_item.done"]


@pytest.mark.parametrize("max_output_tokens", [6, 200])
def test_streaming_events(client, max_output_tokens):
    whole = client.responses.create(model=NAME, input=QUESTION, instructions=INSTRUCTIONS,
                                    max_output_tokens=max_output_tokens, temperature=0)
    events = list(client.responses.create(model=NAME, input=QUESTION, instructions=INSTRUCTIONS,
                                          max_output_tokens=max_output_tokens, temperature=0, stream=True))
    types = [e.type for e in events]
    deltas = [e for e in events if e.type == "response.output_text.delta"]
    assert types[:4] == EXPECTED_ORDER
    assert types[4:4 + len(deltas)] == ["response.output_text.delta"] * len(deltas) and deltas
    last = "response.incomplete" if whole.status == "incomplete" else "response.completed"
    assert types[4 + len(deltas):] == EXPECTED_END + [last]
    assert [e.sequence_number for e in events] == list(range(len(events)))
    text = "".join(d.delta for d in deltas)
    assert text == whole.output_text
    assert events[-4].text == text and events[-3].part.text == text
    assert events[-2].item.content[0].text == text
    final = events[-1].response
    assert final.output_text == text and final.status == whole.status
    assert final.usage.output_tokens == whole.usage.output_tokens
    assert events[0].response.status == "in_progress" and events[0].response.output == []
    item_id = events[2].item.id
    assert all(d.item_id == item_id and d.output_index == 0 and d.content_index == 0 for d in deltas)


def test_raw_stream_framing(srv):
    """Each event is `event: TYPE` then `data: {...,"type": TYPE}`; no [DONE]."""
    with srv.post("/v1/responses", {"model": NAME, "input": "Hi", "max_output_tokens": 3, "stream": True},
                  stream=True) as r:
        assert r.status_code == 200 and r.headers["Content-Type"].startswith("text/event-stream")
        lines = [ln.decode() for ln in r.iter_lines() if ln]
    assert len(lines) % 2 == 0
    for ev, data in zip(lines[::2], lines[1::2]):
        assert ev.startswith("event: ") and data.startswith("data: ")
        assert json.loads(data[6:])["type"] == ev[7:]
    assert lines[-2] in ("event: response.completed", "event: response.incomplete")


@pytest.mark.parametrize("body, param", [
    ({"previous_response_id": "resp_123"}, "previous_response_id"),
    ({"store": True}, "store"),
    ({"tools": [{"type": "web_search"}]}, "tools"),
    ({"conversation": "conv_1"}, "conversation"),
    ({"reasoning": {"effort": "high"}}, "reasoning"),
    ({"background": True}, "background"),
    ({"text": {"format": {"type": "json_object"}}}, "text"),
    ({"truncation": "auto"}, "truncation"),
    ({"input": [{"type": "function_call_output", "call_id": "c", "output": "x"}]}, "input[0]"),
    ({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "http://x"}]}]},
     "input[0].content[0]"),
    ({"input": 5}, "input"),
    ({"input": None}, "input"),
    ({"input": []}, "input"),
    ({"max_output_tokens": 0}, "max_output_tokens"),
    ({"temperature": 3}, "temperature"),
    ({"instructions": 1}, "instructions"),
    ({"frobnicate": 1}, "frobnicate"),
])
def test_refused_clearly(srv, body, param):
    r = srv.post("/v1/responses", {"model": NAME, "input": "Hi", **body})
    assert r.status_code == 400, r.text
    assert r.json()["error"]["param"] == param, r.json()
    assert srv.get("/health").status_code == 200


def test_refused_through_the_client(client):
    with pytest.raises(openai.BadRequestError) as ei:
        client.responses.create(model=NAME, input="Hi", previous_response_id="resp_1")
    assert "previous_response_id" in str(ei.value)


def test_accepted_fields_change_nothing(client):
    plain = client.responses.create(model=NAME, input=QUESTION, max_output_tokens=8, temperature=0)
    extra = client.responses.create(model=NAME, input=QUESTION, max_output_tokens=8, temperature=0, store=False,
                                    metadata={"run": "1"}, user="u", parallel_tool_calls=True, tools=[],
                                    tool_choice="auto", truncation="disabled", text={"format": {"type": "text"}})
    assert extra.output_text == plain.output_text and extra.metadata == {"run": "1"}


def test_needs_the_key_and_a_known_model(srv):
    r = requests.post(srv.url("/v1/responses"), json={"input": "Hi"}, timeout=30)
    assert r.status_code == 401
    r = srv.post("/v1/responses", {"model": "nope", "input": "Hi"})
    assert r.status_code == 404
