"""vLLM's extra request fields through the official `openai` client
(extra_body), on the real Gemma 3 270M model, each checked for what it does:

  allowed_token_ids and bad_words constrain the sampled tokens (vLLM's rule
  for bad words: the word alone and after a space, its last token banned
  after the others); skip_special_tokens=false shows control tokens;
  include_stop_str_in_output keeps the stop string; truncate_prompt_tokens
  keeps the prompt's last N tokens (the answer equals that of those tokens
  sent as the prompt); add_generation_prompt, continue_final_message,
  chat_template, chat_template_kwargs and documents render the prompt as
  transformers does (jinja2 and transformers' continue_final_message cut as
  the reference: the chat answer equals the completion of the reference
  text). Fields that cannot be served are a 400 naming them."""

from __future__ import annotations

from pathlib import Path

import openai
import pytest

from server_util import CllmServer
from test_chat_template import hf_environment

KEY = "sk-vllm-fields"
NAME = "gemma"
REPO = Path(__file__).resolve().parents[2]
GEMMA_TEMPLATE = REPO / "tests" / "data" / "templates" / "gemma3.jinja"
PROMPT = "one, two, three, four,"


@pytest.fixture(scope="module")
def srv(cllm_bin, real_model_path):
    with CllmServer(cllm_bin, real_model_path, "--max-model-len", 1024, "--kv-cache-memory", "256MiB",
                    "--served-model-name", NAME, "--chat-template", GEMMA_TEMPLATE, api_key=KEY) as s:
        yield s


@pytest.fixture(scope="module")
def client(srv):
    return openai.OpenAI(base_url=srv.url("/v1"), api_key=KEY, max_retries=0, timeout=300)


def complete(client, prompt=PROMPT, max_tokens=10, **extra):
    return client.completions.create(model=NAME, prompt=prompt, max_tokens=max_tokens, temperature=0,
                                     extra_body=extra or None)


def chat(client, messages, max_tokens=10, **extra):
    return client.chat.completions.create(model=NAME, messages=messages, max_tokens=max_tokens, temperature=0,
                                          extra_body=extra or None)


def ids_of(srv, text):
    return srv.tokenize(prompt=text, add_special_tokens=False)


def piece(srv, token_id):
    return srv.post("/detokenize", {"tokens": [token_id]}).json()["content"]


def bad_request(fn, param):
    with pytest.raises(openai.BadRequestError) as ei:
        fn()
    assert ei.value.body["param"] == param, ei.value.body
    return ei.value.body["message"]


# ---- sampling fields ----

def test_allowed_token_ids_only_those_tokens_come_out(client, srv):
    allowed = sorted(set(ids_of(srv, " red green blue, yellow")))
    pieces = {piece(srv, t) for t in allowed}
    r = client.completions.create(model=NAME, prompt="My favourite colours are", max_tokens=12, temperature=1.5,
                                  n=4, seed=7, logprobs=0, extra_body={"allowed_token_ids": allowed})
    for ch in r.choices:
        assert ch.logprobs.tokens and set(ch.logprobs.tokens) <= pieces, ch.logprobs.tokens
    # Without the field the same sampling leaves the set.
    free = client.completions.create(model=NAME, prompt="My favourite colours are", max_tokens=12, temperature=1.5,
                                     n=4, seed=7, logprobs=0)
    assert any(not set(ch.logprobs.tokens) <= pieces for ch in free.choices)


def test_skip_special_tokens_false_shows_control_tokens(client, srv):
    start_of_turn = ids_of(srv, "<start_of_turn>")
    assert len(start_of_turn) == 1
    hidden = complete(client, max_tokens=3, allowed_token_ids=start_of_turn, ignore_eos=True)
    assert hidden.choices[0].text == "" and hidden.usage.completion_tokens == 3
    shown = complete(client, max_tokens=3, allowed_token_ids=start_of_turn, skip_special_tokens=False)
    assert shown.choices[0].text == "<start_of_turn>" * 3
    assert complete(client, max_tokens=3, allowed_token_ids=start_of_turn,
                    spaces_between_special_tokens=True, skip_special_tokens=False).choices[0].text == \
        shown.choices[0].text


def test_bad_words_are_never_generated(client, srv):
    base = complete(client, max_tokens=12).choices[0].text
    assert base.startswith(" five, six, seven"), base  # what the constraint must change
    one = complete(client, max_tokens=12, bad_words=["five"]).choices[0].text
    assert "five" not in one and one != base
    # A word of several tokens: its last token is banned only after the others.
    two = complete(client, max_tokens=12, bad_words=["six, seven"]).choices[0].text
    assert two.startswith(" five, six,") and "six, seven" not in two, two
    # Streamed, the same.
    chunks = client.completions.create(model=NAME, prompt=PROMPT, max_tokens=12, temperature=0, stream=True,
                                       extra_body={"bad_words": ["six, seven"]})
    assert "".join(c.choices[0].text for c in chunks) == two


def test_include_stop_str_in_output(client):
    base = complete(client, max_tokens=12).choices[0].text
    cut = base.index("six")
    without = complete(client, max_tokens=12, stop=["six"])
    assert without.choices[0].text == base[:cut] and without.choices[0].finish_reason == "stop"
    with_it = complete(client, max_tokens=12, stop=["six"], include_stop_str_in_output=True)
    assert with_it.choices[0].text == base[:cut + 3] and with_it.choices[0].finish_reason == "stop"
    chunks = client.completions.create(model=NAME, prompt=PROMPT, max_tokens=12, temperature=0, stop=["six"],
                                       stream=True, extra_body={"include_stop_str_in_output": True})
    assert "".join(c.choices[0].text for c in chunks) == base[:cut + 3]


def test_truncate_prompt_tokens_keeps_the_last_tokens(client, srv):
    text = "The quick brown fox jumps over the lazy dog. " * 4 + PROMPT
    ids = srv.tokenize(prompt=text)
    r = complete(client, prompt=text, truncate_prompt_tokens=7)
    assert r.usage.prompt_tokens == 7
    assert r.choices[0].text == complete(client, prompt=ids[-7:]).choices[0].text
    assert complete(client, prompt=text, truncate_prompt_tokens=-1).usage.prompt_tokens == len(ids)
    # A prompt longer than the context is served when truncated.
    long_text = "word " * 1500
    assert len(srv.tokenize(prompt=long_text)) > 1024
    assert complete(client, prompt=long_text, max_tokens=2, truncate_prompt_tokens=100).usage.prompt_tokens == 100
    msgs = [{"role": "user", "content": text}]
    assert chat(client, msgs, truncate_prompt_tokens=9).usage.prompt_tokens == 9
    bad_request(lambda: complete(client, truncate_prompt_tokens=2000), "truncate_prompt_tokens")
    bad_request(lambda: complete(client, truncate_prompt_tokens=0), "truncate_prompt_tokens")


# ---- chat rendering, against jinja2 and transformers' rule ----

def render(template: str, messages, add_generation_prompt=True, **variables) -> str:
    return hf_environment().from_string(template).render(messages=messages, add_generation_prompt=add_generation_prompt,
                                                         bos_token="<bos>", eos_token="<eos>", **variables)


def continue_final_message(rendered: str, final_message: str) -> str:
    """transformers' apply_chat_template(continue_final_message=True) cut."""
    loc = rendered.rindex(final_message.strip())
    if rendered[loc:loc + len(final_message.lstrip())] == final_message:
        return rendered[:loc + len(final_message.lstrip())]
    return rendered[:loc + len(final_message.strip())]


def same_as_completion(client, chat_resp, reference_text, max_tokens=10):
    """The chat answer is the completion of the reference rendering."""
    ref = complete(client, prompt=reference_text, max_tokens=max_tokens)
    assert chat_resp.usage.prompt_tokens == ref.usage.prompt_tokens
    assert chat_resp.choices[0].message.content == ref.choices[0].text


@pytest.mark.parametrize("last", ["one, two,", "  one, two, ", "One: 1\n"])
def test_continue_final_message_continues_the_assistant(client, last):
    gemma = GEMMA_TEMPLATE.read_text()
    msgs = [{"role": "user", "content": "Count to ten."}, {"role": "assistant", "content": last}]
    reference = continue_final_message(render(gemma, msgs, False), last)
    assert reference.endswith("<start_of_turn>model\n" + last.strip())  # the turn left open
    r = chat(client, msgs, continue_final_message=True, add_generation_prompt=False)
    same_as_completion(client, r, reference)


def test_add_generation_prompt_false(client):
    msgs = [{"role": "user", "content": "Count to ten."}]
    r = chat(client, msgs, add_generation_prompt=False)
    same_as_completion(client, r, render(GEMMA_TEMPLATE.read_text(), msgs, False))


TEMPLATE = ("{{ bos_token }}{% for d in documents %}[doc {{ loop.index }}: {{ d.title }}] {{ d.text }}\n{% endfor %}"
            "{% for m in messages %}{{ m.role | upper }}: {{ m.content }}\n{% endfor %}"
            "{% if style %}Answer in a {{ style }} way.\n{% endif %}"
            "{% if add_generation_prompt %}ASSISTANT:{% endif %}")


def test_chat_template_kwargs_and_documents(client):
    msgs = [{"role": "user", "content": "What is the capital of France?"}]
    docs = [{"title": "France", "text": "Paris is the capital of France."}, {"title": "Spain", "text": "Madrid."}]
    r = chat(client, msgs, chat_template=TEMPLATE, documents=docs, chat_template_kwargs={"style": "short"})
    same_as_completion(client, r, render(TEMPLATE, msgs, documents=docs, style="short"))
    # kwargs set add_generation_prompt as vLLM merges them over its own arguments
    r = chat(client, msgs, chat_template=TEMPLATE, chat_template_kwargs={"add_generation_prompt": False,
                                                                         "documents": []})
    same_as_completion(client, r, render(TEMPLATE, msgs, False, documents=[]))


def test_chat_fields_refused_clearly(client, srv):
    msgs = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}]
    msg = bad_request(lambda: chat(client, msgs, continue_final_message=True), "continue_final_message")
    assert "add_generation_prompt" in msg
    bad_request(lambda: chat(client, msgs, chat_template="{% for %}"), "chat_template")
    bad_request(lambda: chat(client, msgs, chat_template_kwargs={"messages": []}), "chat_template_kwargs")
    bad_request(lambda: chat(client, msgs, documents=["text"]), "documents")
    bad_request(lambda: chat(client, [{"role": "user", "content": "Hi"}], continue_final_message=True,
                             add_generation_prompt=False, chat_template="{{ 'no content here' }}"), "messages")
    # chat-only fields are unknown to completions
    bad_request(lambda: complete(client, add_generation_prompt=False), "add_generation_prompt")
    assert srv.get("/health").status_code == 200


def test_sampling_fields_refused_clearly(client, srv):
    bad_request(lambda: complete(client, prompt_logprobs=21), "prompt_logprobs")
    bad_request(lambda: complete(client, allowed_token_ids=[10 ** 7]), "allowed_token_ids")
    bad_request(lambda: complete(client, allowed_token_ids=[]), "allowed_token_ids")
    bad_request(lambda: complete(client, bad_words="five"), "bad_words")
    bad_request(lambda: complete(client, skip_special_tokens="no"), "skip_special_tokens")
    bad_request(lambda: complete(client, include_stop_str_in_output=1), "include_stop_str_in_output")
    bad_request(lambda: complete(client, use_beam_search=True, n=2, bad_words=["x"]), "bad_words")
    # masks that leave nothing to sample are the client's contradiction, not a server error
    eos = srv.tokenize(prompt="<eos>", add_special_tokens=False)
    five = ids_of(srv, "five")
    assert len(eos) == 1 and len(five) == 1
    bad_request(lambda: complete(client, allowed_token_ids=eos, min_tokens=2), "allowed_token_ids")
    bad_request(lambda: complete(client, allowed_token_ids=five, bad_words=["five"]), "allowed_token_ids")
    assert complete(client, allowed_token_ids=five + eos, bad_words=["five"], max_tokens=2).choices[0].text == ""
    # null means "not given", as everywhere
    assert complete(client, prompt_logprobs=None, bad_words=None, allowed_token_ids=None).choices[0].text


def test_tokenize_takes_the_chat_fields(client, srv):
    """vLLM's /tokenize renders messages with the same chat fields, so its
    count is the chat request's usage.prompt_tokens."""
    msgs = [{"role": "user", "content": "Count to ten."}, {"role": "assistant", "content": "one, two,"}]
    for fields in ({"continue_final_message": True, "add_generation_prompt": False},
                   {"add_generation_prompt": False},
                   {"chat_template": TEMPLATE, "documents": [{"title": "t", "text": "x"}],
                    "chat_template_kwargs": {"style": "terse"}}):
        r = chat(client, msgs, max_tokens=1, **fields)
        t = srv.post("/tokenize", {"messages": msgs, **fields})
        assert t.status_code == 200, t.text
        assert t.json()["count"] == r.usage.prompt_tokens, fields
    r = srv.post("/tokenize", {"prompt": "x", "chat_template": TEMPLATE})
    assert r.status_code == 400 and r.json()["error"]["param"] == "chat_template"
    r = srv.post("/tokenize", {"messages": msgs, "continue_final_message": True})
    assert r.status_code == 400 and r.json()["error"]["param"] == "continue_final_message"
