"""Tool calling through `cllm serve`, with the official `openai` client.

The model is tool_model.py's hand-built bigram model: its greedy reply is a
known text, the markup of one call in the format under test, through the real
engine, detokenizer and server (nothing is faked: the server reads whatever
the model wrote). Per format (Hermes/Qwen2.5 `<tool_call>`, Mistral
`[TOOL_CALLS]` with the built-in Mistral v0.3 template, Llama 3.1 JSON with
the real Llama 3.1 template):
  - a round trip: the call, the tool's result sent back, the final answer
    (the client forbids the call's first piece with logit_bias, the one way
    to steer a bigram model; the history still goes through the template);
  - the request the server renders for that history, tools included, has the
    same tokens as jinja2's rendering (set up as transformers does) of the
    messages as transformers gets them, call arguments as mappings;
  - the stream's deltas, reassembled by the client's own ChatCompletionStreamState,
    give the same call as the whole reply, and no markup leaks as content;
  - tool_choice none (no tools offered, the text is plain content),
    bad tools (tool_choice required/named, forced by the constraint engine:
    test_tool_choice_forced.py).
Then the same history check on more real templates (the corpus fetched at
setup: Qwen2.5, Hermes 3, Llama 3.1/3.2, Mistral Nemo and Small 3.2,
functionary v3.1). Templates without a tool-call format (the real Gemma 3
model's) get the generic format: test_tools_generic.py.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import openai
import pytest
from openai.lib.streaming.chat import ChatCompletionStreamState

from server_util import CllmServer
from test_chat_template import CORPUS_DIR, CORPUS_MISSING, ENV, render_jinja
from tool_model import write_tool_model, piece_id

TEMPLATES = Path(__file__).resolve().parents[2] / "tests" / "data" / "templates"

WEATHER = [{"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
QUESTION = [{"role": "system", "content": "You are a weather bot."},
            {"role": "user", "content": "What is the weather in Paris?"}]
ANSWER = ["It is sunny", " in Paris."]
RESULT = '{"temperature": 21, "sky": "sunny"}'


def corpus_template(name: str) -> Path:
    if CORPUS_MISSING:
        pytest.fail(CORPUS_MISSING, pytrace=False)
    return CORPUS_DIR / name


# format -> (template: a Path, a corpus file name, or None for the built-in one;
#            the call's pieces; the content before the call; the format's name)
FORMATS = {
    "hermes": (TEMPLATES / "tools" / "hermes.jinja",
               ["Checking the weather.", "\n<tool_call>", '\n{"name": "get_weather", ', '"arguments": {"city": ',
                '"Paris"}', "}\n</tool", "_call>"],
               "Checking the weather."),
    "mistral": (None,
                ["[TOOL_CALLS] [", '{"name": "get_weather", ', '"arguments": {"city": ', '"Paris"}', "}]"],
                None),
    "llama3_json": ("meta-llama-Llama-3.1-8B-Instruct.jinja",
                    ['{"name": "get_weather", ', '"parameters": {"city": ', '"Paris"}', "}"],
                    None),
}


@pytest.fixture(scope="module", params=sorted(FORMATS))
def tool_server(request, cllm_bin, tmp_path_factory):
    fmt = request.param
    template, call, _ = FORMATS[fmt]
    model = write_tool_model(tmp_path_factory.mktemp("tool-model") / f"{fmt}.gguf", call, ANSWER)
    args = []
    if template is not None:
        args = ["--chat-template", template if isinstance(template, Path) else corpus_template(template)]
    with CllmServer(cllm_bin, model, "--max-model-len", 4096, "--served-model-name", "m", *args) as s:
        assert f"tool calls are read in the '{fmt}' format" in s.log()
        yield s, fmt


def client_of(srv):
    return openai.OpenAI(base_url=srv.url("/v1"), api_key="none", max_retries=0, timeout=120)


def check_call_id(fmt, call_id):
    if fmt == "mistral":  # Mistral's templates refuse any other id
        assert re.fullmatch(r"[A-Za-z0-9]{9}", call_id), call_id
    else:
        assert re.fullmatch(r"call_[A-Za-z0-9]{24}", call_id), call_id


def as_transformers_gets_it(messages):
    """The messages as vLLM hands them to apply_chat_template: each call's
    arguments JSON string parsed into a mapping."""
    out = json.loads(json.dumps(messages))
    for m in out:
        for c in m.get("tool_calls") or []:
            c["function"]["arguments"] = json.loads(c["function"]["arguments"])
    return out


def check_rendering(srv, messages, tools):
    """The server's prompt for messages + tools has the tokens of jinja2's
    rendering of the same conversation with the same template."""
    template = srv.proc.args[srv.proc.args.index("--chat-template") + 1] \
        if "--chat-template" in srv.proc.args else TEMPLATES / "mistral.jinja"
    context = {"messages": as_transformers_gets_it(messages), "add_generation_prompt": True,
               "bos_token": "<bos>", "eos_token": "<eos>"}
    if tools is not None:
        context["tools"] = tools
    kind, text = render_jinja(ENV.from_string(Path(template).read_text(encoding="utf-8")), context)
    assert kind == "ok", text
    body = {"messages": messages, **({"tools": tools} if tools is not None else {})}
    ours = srv.post("/tokenize", body)
    assert ours.status_code == 200, ours.text
    want = srv.post("/tokenize", {"prompt": text, "add_special_tokens": True})
    assert want.status_code == 200, want.text
    if ours.json()["tokens"] != want.json()["tokens"]:
        detok = srv.post("/detokenize", {"tokens": ours.json()["tokens"]}).json()["prompt"]
        assert detok == text
    assert ours.json()["tokens"] == want.json()["tokens"]
    return ours.json()["count"]


def test_round_trip(tool_server):
    srv, fmt = tool_server
    _, call_pieces, content = FORMATS[fmt]
    client = client_of(srv)
    r = client.chat.completions.create(model="m", messages=QUESTION, tools=WEATHER, temperature=0)
    (choice,) = r.choices
    assert choice.finish_reason == "tool_calls"
    msg = choice.message
    assert msg.content == content
    (tc,) = msg.tool_calls
    assert tc.type == "function" and tc.function.name == "get_weather"
    assert json.loads(tc.function.arguments) == {"city": "Paris"}
    check_call_id(fmt, tc.id)

    # The result goes back; the history renders as transformers would.
    history = QUESTION + [{"role": "assistant", "content": msg.content, "tool_calls": [tc.model_dump()]},
                          {"role": "tool", "tool_call_id": tc.id, "content": RESULT}]
    n_prompt = check_rendering(srv, history, WEATHER)
    r2 = client.chat.completions.create(model="m", messages=history, tools=WEATHER, temperature=0,
                                        logit_bias={str(piece_id(call_pieces, ANSWER, call_pieces[0])): -100})
    (choice2,) = r2.choices
    assert choice2.finish_reason == "stop"
    assert choice2.message.content == "".join(ANSWER)
    assert choice2.message.tool_calls is None
    assert r2.usage.prompt_tokens == n_prompt


def test_stream_reassembles_the_same_call(tool_server):
    srv, fmt = tool_server
    _, call_pieces, content = FORMATS[fmt]
    client = client_of(srv)
    whole = client.chat.completions.create(model="m", messages=QUESTION, tools=WEATHER, temperature=0)
    state = ChatCompletionStreamState()
    streamed_content, firsts, finish = "", [], None
    for chunk in client.chat.completions.create(model="m", messages=QUESTION, tools=WEATHER, temperature=0,
                                                stream=True):
        state.handle_chunk(chunk)
        for ch in chunk.choices:
            streamed_content += ch.delta.content or ""
            for d in ch.delta.tool_calls or []:
                if d.id is not None:  # the first delta of a call: id, type, name
                    firsts.append(d)
                    assert d.type == "function" and d.function.name == "get_weather"
            finish = ch.finish_reason or finish
    assert finish == "tool_calls"
    assert len(firsts) == 1 and firsts[0].index == 0
    check_call_id(fmt, firsts[0].id)
    # No markup as content: the text before the call, or nothing.
    assert streamed_content == (content or "")
    final = state.get_final_completion().choices[0].message
    (tc,), (want,) = final.tool_calls, whole.choices[0].message.tool_calls
    assert tc.function.name == want.function.name
    assert tc.function.arguments == want.function.arguments
    # The role chunk carries content "" (before anything is known), so a reply
    # without text reassembles to "" where the whole one says None.
    assert (final.content or None) == whole.choices[0].message.content


def test_tool_choice_none_is_plain_text(tool_server):
    srv, fmt = tool_server
    _, call_pieces, _ = FORMATS[fmt]
    client = client_of(srv)
    r = client.chat.completions.create(model="m", messages=QUESTION, tools=WEATHER, tool_choice="none",
                                       temperature=0)
    (choice,) = r.choices
    # Not offered, so not read: whatever the model writes is its content.
    assert choice.message.tool_calls is None and choice.finish_reason == "stop"
    assert choice.message.content == "".join(call_pieces)
    assert r.usage.prompt_tokens == check_rendering(srv, QUESTION, None)


BAD = [
    ("tools not a list", {"tools": {"type": "function"}}, "tools"),
    ("empty tools", {"tools": []}, "tools"),
    ("tool type", {"tools": [{"type": "code_interpreter"}]}, "tools[0]"),
    ("no function", {"tools": [{"type": "function"}]}, "tools[0].function"),
    ("no name", {"tools": [{"type": "function", "function": {"description": "x"}}]}, "tools[0].function.name"),
    ("bad name", {"tools": [{"type": "function", "function": {"name": "get weather"}}]},
     "tools[0].function.name"),
    ("duplicate names", {"tools": WEATHER + WEATHER}, "tools[1].function.name"),
    ("parameters not an object", {"tools": [{"type": "function", "function": {"name": "f", "parameters": "x"}}]},
     "tools[0].function.parameters"),
    ("unknown tool_choice", {"tools": WEATHER, "tool_choice": "always"}, "tool_choice"),
    ("named function not among tools",
     {"tools": WEATHER, "tool_choice": {"type": "function", "function": {"name": "get_time"}}}, "tool_choice"),
    ("tool_choice without tools", {"tool_choice": "auto"}, "tool_choice"),
    ("parallel_tool_calls not a boolean", {"tools": WEATHER, "parallel_tool_calls": 1}, "parallel_tool_calls"),
    ("tool message without tool_call_id",
     {"messages": QUESTION + [{"role": "tool", "content": RESULT}]}, "messages[2].tool_call_id"),
    ("call arguments not JSON",
     {"messages": QUESTION + [{"role": "assistant", "content": None, "tool_calls": [
         {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{city: Paris"}}]}]},
     "messages[2].tool_calls[0].function.arguments"),
    ("call without id",
     {"messages": QUESTION + [{"role": "assistant", "tool_calls": [
         {"type": "function", "function": {"name": "get_weather", "arguments": "{}"}}]}]},
     "messages[2].tool_calls[0].id"),
]


@pytest.mark.parametrize("case,extra,param", BAD, ids=[b[0] for b in BAD])
def test_bad_tool_requests(tool_server, case, extra, param):
    srv, _ = tool_server
    body = {"messages": QUESTION, "max_tokens": 4, **extra}
    r = srv.post("/v1/chat/completions", body)
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["param"] == param, err
    assert err["message"]
    # The server keeps serving.
    assert srv.post("/v1/chat/completions", {"messages": QUESTION, "max_tokens": 2}).status_code == 200


# --- real templates: the server's rendering of tool history against jinja2's --------------------

CORPUS_TOOL_TEMPLATES = {
    "Qwen-Qwen2.5-7B-Instruct.jinja": "hermes",
    "NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja": "hermes",
    "meta-llama-Llama-3.1-8B-Instruct.jinja": "llama3_json",
    "meta-llama-Llama-3.2-3B-Instruct.jinja": "llama3_json",
    "mistralai-Mistral-Nemo-Instruct-2407.jinja": "mistral",
    "Mistral-Small-3.2-24B-Instruct-2506.jinja": "mistral_args",
    "meetkai-functionary-medium-v3.1.jinja": "functionary",
}


@pytest.mark.parametrize("name", sorted(CORPUS_TOOL_TEMPLATES))
def test_real_template_renders_tool_history(cllm_bin, tiny_model_path, name):
    path = corpus_template(name)
    history = QUESTION + [
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "abcDEF123", "type": "function",
             "function": {"name": "get_weather", "arguments": '{"city": "Paris", "days": [1, 2]}'}}]},
        {"role": "tool", "tool_call_id": "abcDEF123", "name": "get_weather", "content": RESULT},
        {"role": "assistant", "content": "It is sunny in Paris."},
        {"role": "user", "content": "And tomorrow?"}]
    with CllmServer(cllm_bin, tiny_model_path, "--chat-template", path) as s:
        assert f"tool calls are read in the '{CORPUS_TOOL_TEMPLATES[name]}' format" in s.log()
        check_rendering(s, history, WEATHER)
        check_rendering(s, QUESTION, WEATHER)


@pytest.fixture(scope="module")
def tiny_model_path(model_factory):
    return model_factory("llama", n_ctx=4096)
