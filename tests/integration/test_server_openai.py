"""The official `openai` Python client against `cllm serve` on the real
Gemma 3 270M model: completions and chat, streamed and not, n > 1, stop
strings, logprobs, logit_bias, seeds, usage against /tokenize, prefix-cache
hits, and the errors the client maps to its exception types."""

from __future__ import annotations

import openai
import pytest
import requests

from server_util import CllmServer, sse_events

KEY = "sk-cllm-test"
NAME = "gemma-test"
MAX_TOKENS = 8


@pytest.fixture(scope="module")
def srv(cllm_bin, real_model_path):
    with CllmServer(cllm_bin, real_model_path, "--max-model-len", 1024, "--kv-cache-memory", "256MiB",
                    "--served-model-name", NAME, api_key=KEY) as s:
        yield s


@pytest.fixture(scope="module")
def client(srv):
    return openai.OpenAI(base_url=srv.url("/v1"), api_key=KEY, max_retries=0, timeout=300)


PROMPT = "The capital of France is"
MESSAGES = [{"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": "Name three colors."}]


def greedy_completion(client, prompt=PROMPT, **kw):
    kw.setdefault("max_tokens", MAX_TOKENS)
    return client.completions.create(model=NAME, prompt=prompt, temperature=0, **kw)


def greedy_chat(client, messages=MESSAGES, **kw):
    kw.setdefault("max_tokens", MAX_TOKENS)
    return client.chat.completions.create(model=NAME, messages=messages, temperature=0, **kw)


def test_models(client, srv, real_model_path):
    models = client.models.list().data
    assert [m.id for m in models] == [NAME]
    assert client.models.retrieve(NAME).id == NAME
    # The file name and the path also name the model.
    r = srv.post("/v1/completions", {"model": real_model_path.name, "prompt": "a", "max_tokens": 1})
    assert r.status_code == 200


def test_completion_shape_and_usage(client, srv):
    r = greedy_completion(client)
    assert r.object == "text_completion" and r.id.startswith("cmpl-") and r.model == NAME
    assert r.created > 1_600_000_000
    (c,) = r.choices
    assert c.index == 0 and c.text and c.finish_reason in ("stop", "length")
    n_prompt = len(srv.tokenize(prompt=PROMPT))
    assert r.usage.prompt_tokens == n_prompt
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens
    if c.finish_reason == "length":
        assert r.usage.completion_tokens == MAX_TOKENS
    assert r.usage.prompt_tokens_details.cached_tokens >= 0


def test_chat_shape_and_usage(client, srv):
    r = greedy_chat(client)
    assert r.object == "chat.completion" and r.id.startswith("chatcmpl-")
    (c,) = r.choices
    assert c.message.role == "assistant" and isinstance(c.message.content, str) and c.message.content
    assert c.finish_reason in ("stop", "length")
    tokens = srv.tokenize(messages=MESSAGES)
    assert r.usage.prompt_tokens == len(tokens)
    # The rendered chat starts with exactly one BOS.
    bos = srv.tokenize(prompt="")
    assert tokens[:1] == bos and tokens[1:2] != bos


def test_gemma_chat_format(srv):
    """The model file has no template: the built-in Gemma 3 one renders the chat."""
    text = srv.post("/detokenize", {"tokens": srv.tokenize(messages=MESSAGES)}).json()["prompt"]
    assert text == ("<bos><start_of_turn>user\nYou are a helpful assistant.\n\nName three colors.<end_of_turn>\n"
                    "<start_of_turn>model\n")


def test_completion_stream_equals_whole(client):
    whole = greedy_completion(client)
    chunks = list(greedy_completion(client, stream=True, stream_options={"include_usage": True}))
    assert all(ch.object == "text_completion" for ch in chunks)
    text = "".join(ch.choices[0].text for ch in chunks if ch.choices)
    assert text == whole.choices[0].text
    finishes = [ch.choices[0].finish_reason for ch in chunks if ch.choices and ch.choices[0].finish_reason]
    assert finishes == [whole.choices[0].finish_reason]
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == whole.usage.completion_tokens
    assert all(ch.usage is None for ch in chunks[:-1])


def test_chat_stream_equals_whole(client):
    whole = greedy_chat(client)
    chunks = list(greedy_chat(client, stream=True))
    assert chunks[0].choices[0].delta.role == "assistant"
    assert all(ch.object == "chat.completion.chunk" for ch in chunks)
    assert len({ch.id for ch in chunks}) == 1
    text = "".join(ch.choices[0].delta.content or "" for ch in chunks)
    assert text == whole.choices[0].message.content
    assert chunks[-1].choices[0].finish_reason == whole.choices[0].finish_reason


def test_raw_sse_framing(srv):
    with srv.post("/v1/chat/completions", {"messages": MESSAGES, "max_tokens": 3, "temperature": 0,
                                           "stream": True}, stream=True) as r:
        assert r.status_code == 200 and r.headers["Content-Type"].startswith("text/event-stream")
        raw = r.content
    assert raw.startswith(b"data: {") and raw.endswith(b"data: [DONE]\n\n")
    assert all(ev.startswith(b"data: ") for ev in raw.split(b"\n\n") if ev)


def test_n3(client):
    r = client.chat.completions.create(model=NAME, messages=MESSAGES, n=3, temperature=1.0, seed=7,
                                       max_tokens=MAX_TOKENS)
    assert sorted(c.index for c in r.choices) == [0, 1, 2]
    assert all(c.message.content for c in r.choices)
    assert len({c.message.content for c in r.choices}) > 1  # three samples, not three copies
    chunks = list(client.chat.completions.create(model=NAME, messages=MESSAGES, n=3, temperature=1.0, seed=7,
                                                 max_tokens=MAX_TOKENS, stream=True))
    texts = {0: "", 1: "", 2: ""}
    roles = set()
    for ch in chunks:
        for c in ch.choices:
            texts[c.index] += c.delta.content or ""
            if c.delta.role:
                roles.add(c.index)
    assert roles == {0, 1, 2}
    assert texts == {c.index: c.message.content for c in r.choices}  # same seed, same samples


def test_multiple_prompts(client):
    r = client.completions.create(model=NAME, prompt=[PROMPT, "One, two, three,"], n=2, temperature=0,
                                  max_tokens=4)
    assert [c.index for c in r.choices] == [0, 1, 2, 3]
    single = greedy_completion(client, max_tokens=4).choices[0].text
    assert r.choices[0].text == r.choices[1].text == single


def test_token_prompt_equals_text_prompt(client, srv):
    ids = srv.tokenize(prompt=PROMPT)
    r = client.completions.create(model=NAME, prompt=ids, temperature=0, max_tokens=MAX_TOKENS)
    assert r.choices[0].text == greedy_completion(client).choices[0].text
    assert r.usage.prompt_tokens == len(ids)


def test_echo(client):
    r = greedy_completion(client, echo=True, max_tokens=3)
    plain = greedy_completion(client, max_tokens=3)
    assert r.choices[0].text == PROMPT + plain.choices[0].text


def test_stop_strings(client):
    full = greedy_completion(client, max_tokens=16).choices[0].text
    # A stop string from the middle of the greedy continuation.
    k = len(full) // 2
    stop = full[k:k + 3]
    assert stop.strip(), full
    cut = full[:full.index(stop)]
    r = greedy_completion(client, max_tokens=16, stop=[stop, "never-appears-xyz"])
    assert r.choices[0].text == cut and r.choices[0].finish_reason == "stop"
    streamed = "".join(ch.choices[0].text for ch in greedy_completion(client, max_tokens=16, stop=stop,
                                                                     stream=True))
    assert streamed == cut and stop not in streamed


def test_completion_logprobs(client):
    r = greedy_completion(client, logprobs=3)
    lp = r.choices[0].logprobs
    n = r.usage.completion_tokens
    assert len(lp.tokens) == len(lp.token_logprobs) == len(lp.top_logprobs) == len(lp.text_offset) == n
    for tok, val, top in zip(lp.tokens, lp.token_logprobs, lp.top_logprobs):
        assert val <= 0 and 1 <= len(top) <= 4 and tok in top
        assert abs(max(top.values()) - val) < 1e-4  # greedy picks the most likely token
    assert lp.text_offset == sorted(lp.text_offset) and lp.text_offset[0] == 0
    assert "".join(lp.tokens) == r.choices[0].text


def test_chat_logprobs(client):
    r = greedy_chat(client, logprobs=True, top_logprobs=2)
    content = r.choices[0].logprobs.content
    assert len(content) == r.usage.completion_tokens
    for e in content:
        assert e.logprob <= 0 and len(e.top_logprobs) == 2
        assert e.top_logprobs[0].logprob >= e.top_logprobs[1].logprob
        assert bytes(e.bytes).decode("utf-8", "replace") == e.token or "\ufffd" in e.token
    r = greedy_chat(client, logprobs=True)
    assert all(e.top_logprobs == [] for e in r.choices[0].logprobs.content)
    chunks = list(greedy_chat(client, logprobs=True, top_logprobs=1, stream=True))
    streamed = [e for ch in chunks for c in ch.choices if c.logprobs for e in c.logprobs.content]
    assert [e.token for e in streamed] == [e.token for e in content]


def test_logit_bias(client, srv):
    (paris,) = srv.tokenize(prompt=" Paris", add_special_tokens=False)
    r = greedy_completion(client, prompt="Hello", max_tokens=3, logit_bias={str(paris): 100})
    assert r.choices[0].text == " Paris" * 3
    first = srv.tokenize(prompt=greedy_completion(client, max_tokens=1).choices[0].text, add_special_tokens=False)
    r = greedy_completion(client, max_tokens=1, logprobs=1, logit_bias={str(first[0]): -100})
    assert srv.tokenize(prompt=r.choices[0].text, add_special_tokens=False) != first


def test_seed_determinism(client):
    def sample(seed):
        return client.completions.create(model=NAME, prompt="Once upon a time", temperature=1.0, top_p=0.95,
                                         seed=seed, max_tokens=12).choices[0].text
    a, b = sample(1234), sample(1234)
    assert a == b
    assert len({sample(s) for s in (1, 2, 3, 4)}) > 1


def test_chat_seed_determinism(client):
    def sample():
        return client.chat.completions.create(model=NAME, messages=MESSAGES, temperature=0.9, seed=99,
                                              max_tokens=10).choices[0].message.content
    assert sample() == sample()


def test_cached_tokens_on_repeated_prompt(client, srv):
    long_prompt = " ".join(f"Item {i} is a word about the number {i}." for i in range(30))
    n = len(srv.tokenize(prompt=long_prompt))
    assert n > 100
    first = client.completions.create(model=NAME, prompt=long_prompt, max_tokens=2, temperature=0)
    second = client.completions.create(model=NAME, prompt=long_prompt, max_tokens=2, temperature=0)
    assert first.usage.prompt_tokens == second.usage.prompt_tokens == n
    cached = second.usage.prompt_tokens_details.cached_tokens
    assert 0 < cached < n
    assert second.choices[0].text == first.choices[0].text


def test_min_tokens_and_stop_token_ids(client, srv):
    r = client.completions.create(model=NAME, prompt=PROMPT, temperature=0, max_tokens=6,
                                  extra_body={"min_tokens": 6, "ignore_eos": True})
    assert r.usage.completion_tokens == 6
    first = srv.tokenize(prompt=greedy_completion(client, max_tokens=1).choices[0].text, add_special_tokens=False)
    r = client.completions.create(model=NAME, prompt=PROMPT, temperature=0, max_tokens=6,
                                  extra_body={"stop_token_ids": [first[0]]})
    assert r.choices[0].finish_reason == "stop" and r.choices[0].text == ""


def test_detokenize_round_trip(srv):
    text = "Grüße, 世界! 🙂"
    ids = srv.tokenize(prompt=text, add_special_tokens=False)
    r = srv.post("/detokenize", {"tokens": ids})
    assert r.status_code == 200 and r.json() == {"prompt": text, "content": text}


def test_llama_server_tokenize_shapes(srv):
    """llama-server's /tokenize ({"content", "add_special", "with_pieces"})
    beside vLLM's, and vLLM's return_token_strs."""
    text = "Hello world, \U000F0000 and 🙂"  # a private-use character: byte tokens
    ids = srv.tokenize(prompt=text, add_special_tokens=False)
    r = srv.post("/tokenize", {"content": text})
    assert r.status_code == 200 and r.json() == {"tokens": ids}
    with_bos = srv.post("/tokenize", {"content": text, "add_special": True}).json()["tokens"]
    assert with_bos == srv.tokenize(prompt=text)
    assert len(with_bos) == len(ids) + 1
    pieces = srv.post("/tokenize", {"content": text, "with_pieces": True}).json()["tokens"]
    assert [p["id"] for p in pieces] == ids
    raw = b"".join(bytes(p["piece"]) if isinstance(p["piece"], list) else p["piece"].encode() for p in pieces)
    assert raw.decode() == text
    # A character the vocabulary spells in byte tokens comes back as bytes.
    assert any(isinstance(p["piece"], list) and all(0 <= b < 256 for b in p["piece"]) for p in pieces)
    r = srv.post("/tokenize", {"content": text, "parse_special": False})
    assert r.status_code == 400 and r.json()["error"]["param"] == "parse_special"
    r = srv.post("/tokenize", {"content": 5})
    assert r.status_code == 400 and r.json()["error"]["param"] == "content"
    r = srv.post("/tokenize", {"content": text, "add_special_tokens": True})
    assert r.status_code == 400 and r.json()["error"]["param"] == "add_special_tokens"
    strs = srv.post("/tokenize", {"prompt": "Hello world", "add_special_tokens": False,
                                  "return_token_strs": True}).json()
    assert len(strs["token_strs"]) == len(strs["tokens"])
    assert "".join(strs["token_strs"]).replace("\u2581", " ") == "Hello world"
    assert "token_strs" not in srv.post("/tokenize", {"prompt": "Hello"}).json()


def test_ignored_openai_fields_change_nothing(client, srv):
    """Fields OpenAI documents but that do not change the text are accepted
    and the output is the same as without them; fields that would change it
    are refused naming the field."""
    plain = greedy_chat(client).choices[0].message.content
    extra = greedy_chat(client, store=True, metadata={"run": "t1"}, user="u-1", service_tier="auto",
                        parallel_tool_calls=False, modalities=["text"], audio=None, reasoning_effort=None,
                        prediction={"type": "content", "content": "Red, green, blue."},
                        extra_body={"safety_identifier": "s", "prompt_cache_key": "k"})
    assert extra.choices[0].message.content == plain
    chunks = greedy_chat(client, stream=True, store=False,
                         stream_options={"include_usage": True, "include_obfuscation": False})
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == plain
    r = greedy_completion(client, user="u", extra_body={"metadata": {"a": "b"}, "service_tier": "default"})
    assert r.choices[0].text == greedy_completion(client).choices[0].text
    for kw, param in [({"reasoning_effort": "high"}, "reasoning_effort"),
                      ({"modalities": ["text", "audio"]}, "modalities"),
                      ({"metadata": {"a": 1}}, "metadata"),
                      ({"audio": {"voice": "alloy", "format": "wav"}}, "audio")]:
        with pytest.raises(openai.BadRequestError) as ei:
            greedy_chat(client, **kw)
        assert ei.value.body["param"] == param, kw


def test_client_errors(client, srv):
    with pytest.raises(openai.NotFoundError):
        client.completions.create(model="gpt-4o", prompt="x", max_tokens=1)
    with pytest.raises(openai.BadRequestError) as e:
        client.completions.create(model=NAME, prompt="x", max_tokens=1, temperature=-1)
    assert e.value.body["param"] == "temperature"
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model=NAME, messages=MESSAGES, max_tokens=5000)
    assert "1024" in e.value.message
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=srv.url("/v1"), api_key="wrong", max_retries=0).models.list()


def test_metrics_after_requests(srv):
    m = srv.metrics()
    assert m["vllm:prompt_tokens_total"] > 0 and m["vllm:generation_tokens_total"] > 0
    assert m["vllm:prefix_cache_queries_total"] >= m["vllm:prefix_cache_hits_total"] > 0
    assert m["vllm:time_to_first_token_seconds_count"] > 0
    assert m["vllm:e2e_request_latency_seconds_count"] >= m["vllm:time_to_first_token_seconds_count"]
    assert 0 <= m["vllm:kv_cache_usage_perc"] <= 1
    assert m["vllm:num_requests_running"] == 0
    text = requests.get(srv.url("/metrics")).text
    assert '# TYPE vllm:time_to_first_token_seconds histogram' in text
    assert 'vllm:e2e_request_latency_seconds_bucket{model_name="gemma-test",le="+Inf"}' in text


def test_concurrent_real_model_streams(srv):
    """A few concurrent greedy chats on the real model equal their solo runs."""
    import threading

    bodies = [{"messages": [{"role": "user", "content": f"Say the number {i}."}], "max_tokens": 6,
               "temperature": 0} for i in range(6)]
    solo = [srv.post("/v1/chat/completions", b).json()["choices"][0]["message"]["content"] for b in bodies]
    out = {}

    def run(i):
        with srv.post("/v1/chat/completions", {**bodies[i], "stream": True}, stream=True) as r:
            ev = sse_events(r)
        out[i] = "".join(e["choices"][0]["delta"].get("content") or "" for e in ev[:-1] if e["choices"])

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(bodies))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert [out.get(i) for i in range(len(bodies))] == solo
