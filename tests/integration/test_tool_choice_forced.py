"""tool_choice "required" and a named function through `cllm serve`, with
the official `openai` client: the constraint engine forces the reply to the
template's tool-call markup around one call whose arguments are valid under
the tool's schema. On the real model (gemma-3-270m) with a Hermes-style
template: the model was never trained on that markup and, unforced, writes
prose, so a well-formed call can only come from the constraint. Streamed,
the deltas reassemble into the same call. (Kept apart from
test_server_tools.py, which also runs against the sanitizer build, where the
real model is too slow.)
"""
from __future__ import annotations

import json

import jsonschema
import openai
import pytest
from openai.lib.streaming.chat import ChatCompletionStreamState

from server_util import CllmServer
from test_server_tools import QUESTION, TEMPLATES, client_of


UNITS = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "The weather in a city",
        "parameters": {"type": "object", "properties": {"unit": {"enum": ["celsius", "fahrenheit"]},
                                                         "days": {"type": "integer", "minimum": 1, "maximum": 7}},
                       "required": ["unit", "days"]}}},
    {"type": "function", "function": {
        "name": "get_time", "description": "The time of day",
        "parameters": {"type": "object", "properties": {"zone": {"enum": ["UTC", "CET"]}}, "required": ["zone"]}}},
]


@pytest.fixture(scope="module")
def forced_server(cllm_bin, real_model_path):
    """The real model with a Hermes-style template: gemma-3-270m was never
    trained on its markup, so only the constraint makes it write a call."""
    with CllmServer(cllm_bin, real_model_path, "--chat-template", TEMPLATES / "tools" / "hermes.jinja",
                    "--served-model-name", "m", "--max-model-len", 1024, "--kv-cache-memory", "128MiB") as s:
        yield s


@pytest.mark.parametrize("choice", ["required", {"type": "function", "function": {"name": "get_time"}}])
def test_required_and_named_force_a_well_formed_call(forced_server, choice):
    client = client_of(forced_server)
    auto = client.chat.completions.create(model="m", messages=QUESTION, tools=UNITS, temperature=0, max_tokens=48)
    assert auto.choices[0].message.tool_calls is None  # unforced, this model writes prose
    for seed in (1, 2, 3):
        r = client.chat.completions.create(model="m", messages=QUESTION, tools=UNITS, tool_choice=choice,
                                           temperature=1.0, seed=seed, max_tokens=96)
        (c,) = r.choices
        assert c.finish_reason == "tool_calls", c.message.content
        (call,) = c.message.tool_calls
        names = {t["function"]["name"]: t["function"]["parameters"] for t in UNITS}
        if isinstance(choice, dict):
            assert call.function.name == "get_time"
        assert call.function.name in names
        jsonschema.validate(json.loads(call.function.arguments), names[call.function.name])
        assert call.id.startswith("call_") and c.message.content is None
        # streamed, the deltas reassemble into the same call
        state = ChatCompletionStreamState()
        for chunk in client.chat.completions.create(model="m", messages=QUESTION, tools=UNITS, tool_choice=choice,
                                                    temperature=1.0, seed=seed, max_tokens=96, stream=True):
            state.handle_chunk(chunk)
        (streamed,) = state.get_final_completion().choices[0].message.tool_calls
        assert (streamed.function.name, json.loads(streamed.function.arguments)) == \
            (call.function.name, json.loads(call.function.arguments))


def test_forced_call_with_structured_output_is_refused(forced_server):
    client = client_of(forced_server)
    with pytest.raises(openai.BadRequestError) as ei:
        client.chat.completions.create(model="m", messages=QUESTION, tools=UNITS, tool_choice="required",
                                       response_format={"type": "json_object"})
    assert ei.value.body["param"] == "tool_choice"
