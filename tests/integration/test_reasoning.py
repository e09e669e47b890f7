"""Reasoning apart from the answer: a chat reply's <think> ... </think> goes
to message.reasoning_content (streamed as delta.reasoning_content), the rest
to content, as vLLM's reasoning parsers and llama-server do.

The real gemma-3-270m serves with real reasoning models' chat templates
(Qwen3's, DeepSeek-R1-Distill's: llama.cpp's copies, fetched by
scripts/setup.sh), which the server detects by their <think>; the replies
are held to a regex (structured_outputs) so that they have a known shape
whatever the small model would write:
  - Qwen3: the reply opens <think> itself; whole and streamed give the same
    parts, through the official openai client too;
  - DeepSeek-R1: with enable_thinking the prompt ends in "<think>\\n", so the
    reply holds only "</think>"; without it the prompt closes the
    reasoning and the reply is all content;
  - Qwen3 with enable_thinking false: the prompt closes it: all content;
  - tools (Qwen3's <tool_call> format) read in the reply past its reasoning;
  - gpt-oss's template: harmony's analysis channel is the reasoning, its
    final channel the content;
  - --reasoning-parser none keeps everything in content; an unknown name is
    a usage error."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
from pathlib import Path

import openai
import pytest

from server_util import CllmServer, sse_events

REPO = Path(__file__).resolve().parents[2]
ASK = [{"role": "user", "content": "What is the capital of France?"}]
THINK_RE = r"<think>\n[a-z]{3,8}( [a-z]{3,8}){1,3}\n</think>\n\n[A-Z][a-z]{2,8}\."


def template(name: str) -> Path:
    spec = importlib.util.spec_from_file_location("fetch_chat_templates", REPO / "scripts" / "fetch_chat_templates.py")
    fetcher = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fetcher)
    path = fetcher.templates_dir() / name
    assert path.exists(), f"{path} is missing: run scripts/setup.sh (it fetches llama.cpp's chat templates)"
    return path


def serve(cllm_bin, model, tmpl: str, *extra):
    return CllmServer(cllm_bin, model, "--chat-template", template(tmpl), "--max-model-len", 1024,
                      "--kv-cache-memory", "128MiB", *extra)


@pytest.fixture(scope="module")
def qwen3(cllm_bin, real_model_path):
    with serve(cllm_bin, real_model_path, "Qwen-Qwen3-0.6B.jinja") as srv:
        yield srv


def chat(srv, regex: str, stream: bool = False, **extra):
    body = {"messages": ASK, "max_tokens": 60, "temperature": 0, "structured_outputs": {"regex": regex},
            "stream": stream, **extra}
    r = srv.post("/v1/chat/completions", body, stream=stream)
    assert r.status_code == 200, r.text
    if not stream:
        return r.json()["choices"][0]
    parts = {"reasoning_content": "", "content": "", "tool_calls": [], "finish_reason": None}
    for ev in sse_events(r):
        if not isinstance(ev, dict) or not ev.get("choices"):
            continue
        ch = ev["choices"][0]
        for k in ("reasoning_content", "content"):
            parts[k] += ch["delta"].get(k) or ""
        parts["tool_calls"] += ch["delta"].get("tool_calls") or []
        parts["finish_reason"] = ch["finish_reason"] or parts["finish_reason"]
    return parts


def test_qwen3_reply_reasoning_apart_whole_and_streamed(qwen3):
    whole = chat(qwen3, THINK_RE)
    msg = whole["message"]
    text = "<think>\n" + msg["reasoning_content"] + "\n</think>\n\n" + msg["content"]
    assert re.fullmatch(THINK_RE, text), msg  # the parts rebuild the reply the regex held
    assert msg["reasoning_content"] and "<think>" not in msg["reasoning_content"]
    assert re.fullmatch(r"[A-Z][a-z]{2,8}\.", msg["content"]), msg
    streamed = chat(qwen3, THINK_RE, stream=True)
    assert streamed["reasoning_content"] == msg["reasoning_content"]
    assert streamed["content"] == msg["content"]
    assert streamed["finish_reason"] == whole["finish_reason"] == "stop"
    # The official client reads the extra field.
    client = openai.OpenAI(base_url=qwen3.url("/v1"), api_key="none", max_retries=0, timeout=120)
    model = client.models.list().data[0].id
    r = client.chat.completions.create(model=model, messages=ASK, max_tokens=60, temperature=0,
                                       extra_body={"structured_outputs": {"regex": THINK_RE}})
    assert r.choices[0].message.reasoning_content == msg["reasoning_content"]
    assert r.choices[0].message.content == msg["content"]


def test_qwen3_reply_cut_while_reasoning_has_no_content(qwen3):
    whole = chat(qwen3, r"<think>\n[a-z]{3,8}( [a-z]{3,8}){20,30}", max_tokens=8)
    assert whole["finish_reason"] == "length"
    assert whole["message"]["content"] is None
    assert whole["message"]["reasoning_content"]


def test_qwen3_without_thinking_is_all_content(qwen3):
    whole = chat(qwen3, r"[A-Z][a-z]{2,8}\.", chat_template_kwargs={"enable_thinking": False})
    msg = whole["message"]
    assert "reasoning_content" not in msg
    assert re.fullmatch(r"[A-Z][a-z]{2,8}\.", msg["content"]), msg


def test_qwen3_tool_call_after_reasoning(qwen3):
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
    call = r'<think>\nlook it up\n</think>\n\n<tool_call>\n\{"name": "get_weather", "arguments": \{"city": "Paris"\}\}\n</tool_call>'
    for stream in (False, True):
        got = chat(qwen3, call, stream=stream, tools=tools, tool_choice="auto")
        if stream:
            reasoning, calls, content = got["reasoning_content"], got["tool_calls"], got["content"]
            args = "".join(c["function"].get("arguments") or "" for c in calls)
            name = calls[0]["function"]["name"]
        else:
            msg = got["message"]
            reasoning, content = msg["reasoning_content"], msg["content"] or ""
            name, args = msg["tool_calls"][0]["function"]["name"], msg["tool_calls"][0]["function"]["arguments"]
        assert reasoning == "look it up"
        assert content == ""
        assert name == "get_weather" and json.loads(args) == {"city": "Paris"}
        assert got["finish_reason"] == "tool_calls"


def test_deepseek_r1_prompt_opens_the_reasoning(cllm_bin, real_model_path):
    with serve(cllm_bin, real_model_path, "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja") as srv:
        opened = r"[a-z]{3,8}( [a-z]{3,8}){1,3}\n</think>\n\n[A-Z][a-z]{2,8}\."
        for stream in (False, True):
            got = chat(srv, opened, stream=stream, chat_template_kwargs={"enable_thinking": True})
            parts = got if stream else got["message"]
            assert re.fullmatch(r"[a-z]{3,8}( [a-z]{3,8}){1,3}", parts["reasoning_content"]), parts
            assert re.fullmatch(r"[A-Z][a-z]{2,8}\.", parts["content"]), parts
        # Without enable_thinking this template closes the reasoning in the prompt.
        plain = chat(srv, r"[A-Z][a-z]{2,8}\.")["message"]
        assert "reasoning_content" not in plain and re.fullmatch(r"[A-Z][a-z]{2,8}\.", plain["content"])


def test_reasoning_parser_none_keeps_it_in_content(cllm_bin, real_model_path):
    with serve(cllm_bin, real_model_path, "Qwen-Qwen3-0.6B.jinja", "--reasoning-parser", "none") as srv:
        msg = chat(srv, THINK_RE)["message"]
        assert "reasoning_content" not in msg
        assert re.fullmatch(THINK_RE, msg["content"]), msg
    bad = subprocess.run([str(cllm_bin), "serve", str(real_model_path), "--reasoning-parser", "granite"],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode != 0
    assert "--reasoning-parser 'granite'" in bad.stderr and "deepseek_r1" in bad.stderr


def test_gpt_oss_harmony_channels(cllm_bin, real_model_path):
    """gpt-oss's template (harmony): the analysis channel is the reasoning,
    the final channel the content; markers never reach the client."""
    with serve(cllm_bin, real_model_path, "openai-gpt-oss-120b.jinja") as srv:
        harmony = (r"<\|channel\|>analysis<\|message\|>[a-z]{3,8}( [a-z]{3,8}){1,3}<\|end\|>"
                   r"<\|start\|>assistant<\|channel\|>final<\|message\|>[A-Z][a-z]{2,8}\.")
        whole = chat(srv, harmony)["message"]
        assert re.fullmatch(r"[a-z]{3,8}( [a-z]{3,8}){1,3}", whole["reasoning_content"]), whole
        assert re.fullmatch(r"[A-Z][a-z]{2,8}\.", whole["content"]), whole
        streamed = chat(srv, harmony, stream=True)
        assert (streamed["reasoning_content"], streamed["content"]) == (whole["reasoning_content"], whole["content"])
        # A reply outside the format stays content as written.
        plain = chat(srv, r"[A-Z][a-z]{2,8}\.")["message"]
        assert "reasoning_content" not in plain and re.fullmatch(r"[A-Z][a-z]{2,8}\.", plain["content"])


def test_gpt_oss_tool_calls_on_the_commentary_channel(cllm_bin, real_model_path):
    """gpt-oss's calls: a commentary message to functions.NAME is a tool
    call, its body the arguments, after the analysis message (the
    reasoning); a named tool_choice forces the call's header."""
    params = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    tools = [{"type": "function",
              "function": {"name": "get_weather", "description": "The weather in a city", "parameters": params}}]
    call = (r"<\|channel\|>analysis<\|message\|>need the weather<\|end\|><\|start\|>assistant<\|channel\|>commentary "
            r'to=functions\.get_weather <\|constrain\|>json<\|message\|>\{"city": "Paris"\}')
    with serve(cllm_bin, real_model_path, "openai-gpt-oss-120b.jinja") as srv:
        for stream in (False, True):
            got = chat(srv, call, stream=stream, tools=tools, tool_choice="auto", max_tokens=160)
            if stream:
                calls, reasoning, content = got["tool_calls"], got["reasoning_content"], got["content"]
                name = calls[0]["function"]["name"]
                args = "".join(c["function"].get("arguments") or "" for c in calls)
            else:
                msg = got["message"]
                reasoning, content = msg["reasoning_content"], msg["content"] or ""
                name, args = msg["tool_calls"][0]["function"]["name"], msg["tool_calls"][0]["function"]["arguments"]
            assert reasoning == "need the weather" and content == ""
            assert name == "get_weather" and json.loads(args) == {"city": "Paris"}
            assert got["finish_reason"] == "tool_calls"
        body = {"messages": ASK, "max_tokens": 160, "temperature": 0, "tools": tools,
                "tool_choice": {"type": "function", "function": {"name": "get_weather"}}}
        r = srv.post("/v1/chat/completions", body)
        assert r.status_code == 200, r.text
        msg = r.json()["choices"][0]["message"]
        calls = msg["tool_calls"]
        assert len(calls) == 1 and calls[0]["function"]["name"] == "get_weather", msg
        assert isinstance(json.loads(calls[0]["function"]["arguments"])["city"], str)
