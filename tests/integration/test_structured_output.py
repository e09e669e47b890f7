"""Structured output over the API and the CLI on the real gemma-3 270M model:
every request field (OpenAI response_format, vLLM structured_outputs and
guided_*, llama-server grammar and json_schema) gives output that parses and
validates (`jsonschema`, `re.fullmatch`), the official `openai` client's
`beta.chat.completions.parse` gets a Pydantic object, and the constraint
holds with n > 1, streaming, logprobs, concurrent requests, prefix caching
and speculative decoding. Each bad input is a 400 naming the field and the
position or keyword, and the server keeps serving with every KV block back."""

from __future__ import annotations

import concurrent.futures
import json
import re

import jsonschema
import openai
import pydantic
import pytest

from server_util import CllmServer, sse_events

PERSON = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 24},
                                           "age": {"type": "integer", "minimum": 0, "maximum": 120},
                                           "email": {"type": "string", "format": "email"}},
          "required": ["name", "age"]}
CHAT = [{"role": "user", "content": "Describe a person as JSON with name and age."}]


@pytest.fixture(scope="module")
def srv(cllm_bin, real_model_path):
    with CllmServer(cllm_bin, real_model_path, "--max-model-len", 1024, "--kv-cache-memory", "256MiB",
                    "--served-model-name", "m") as s:
        yield s


@pytest.fixture(scope="module")
def spec_srv(cllm_bin, real_model_path):
    with CllmServer(cllm_bin, real_model_path, "--max-model-len", 1024, "--kv-cache-memory", "256MiB",
                    "--speculative-config", '{"method": "ngram", "num_speculative_tokens": 4}') as s:
        yield s


@pytest.fixture(scope="module")
def client(srv):
    return openai.OpenAI(base_url=srv.url("/v1"), api_key="x", max_retries=0, timeout=300)


def chat(srv, **kw):
    body = {"messages": CHAT, "max_tokens": 60, "temperature": 0, **kw}
    r = srv.post("/v1/chat/completions", body)
    assert r.status_code == 200, r.text
    return r.json()


def complete(srv, prompt, **kw):
    r = srv.post("/v1/completions", {"prompt": prompt, "max_tokens": 40, "temperature": 0, **kw})
    assert r.status_code == 200, r.text
    return r.json()


def valid_json(text, schema):
    doc = json.loads(text)
    jsonschema.validate(doc, schema)
    return doc


def test_response_format_json_schema(srv):
    out = chat(srv, response_format={"type": "json_schema", "json_schema": {"name": "p", "schema": PERSON,
                                                                           "strict": True}})
    choice = out["choices"][0]
    assert choice["finish_reason"] == "stop"
    valid_json(choice["message"]["content"], PERSON)


def test_response_format_json_object(srv):
    out = chat(srv, response_format={"type": "json_object"}, max_tokens=120)
    choice = out["choices"][0]
    if choice["finish_reason"] == "stop":
        assert isinstance(json.loads(choice["message"]["content"]), dict)
    else:  # the model may not close the object in time: the text so far is an object's prefix
        assert choice["finish_reason"] == "length" and choice["message"]["content"].startswith("{")


@pytest.mark.parametrize("field", ["structured_outputs", "guided_json", "json_schema", "guided_json_text"])
def test_json_schema_fields(srv, field):
    body = {"structured_outputs": {"json": PERSON}} if field == "structured_outputs" else \
        {"guided_json": json.dumps(PERSON)} if field == "guided_json_text" else {field: PERSON}
    out = complete(srv, "A person as JSON:", max_tokens=60, **body)
    assert out["choices"][0]["finish_reason"] == "stop"
    valid_json(out["choices"][0]["text"], PERSON)


@pytest.mark.parametrize("field", ["guided_regex", "structured_outputs"])
def test_regex(srv, field):
    pattern = r"\(\d{3}\) \d{3}-\d{4}"
    body = {"structured_outputs": {"regex": pattern}} if field == "structured_outputs" else {field: pattern}
    out = complete(srv, "Call me at", **body)
    assert re.fullmatch(pattern, out["choices"][0]["text"]), out["choices"][0]["text"]
    assert out["choices"][0]["finish_reason"] == "stop"


@pytest.mark.parametrize("field", ["guided_choice", "structured_outputs"])
def test_choice(srv, field):
    choices = ["Paris", "London", "Berlin", "Rome"]
    body = {"structured_outputs": {"choice": choices}} if field == "structured_outputs" else {field: choices}
    out = complete(srv, "The capital of France is", **body)
    assert out["choices"][0]["text"] in choices


@pytest.mark.parametrize("field", ["grammar", "guided_grammar", "structured_outputs"])
def test_gbnf(srv, field):
    g = 'root ::= "Answer: " ("yes" | "no") ", because " [a-z ]{3,30} "."'
    body = {"structured_outputs": {"grammar": g}} if field == "structured_outputs" else {field: g}
    out = complete(srv, "Is the sky blue?", max_tokens=60, **body)
    text = out["choices"][0]["text"]
    if out["choices"][0]["finish_reason"] == "stop":
        assert re.fullmatch(r"Answer: (yes|no), because [a-z ]{3,30}\.", text), text
    else:
        assert re.match(r"Answer: (yes|no), because [a-z ]*$", text), text


def test_openai_client_parse_pydantic(client):
    class City(pydantic.BaseModel):
        name: str = pydantic.Field(max_length=20)
        country: str = pydantic.Field(max_length=20)
        population: int = pydantic.Field(ge=0, le=99999999)

    done = client.beta.chat.completions.parse(
        model="m", messages=[{"role": "user", "content": "Tell me about Paris as JSON."}], response_format=City,
        max_tokens=80, temperature=0)
    parsed = done.choices[0].message.parsed
    assert isinstance(parsed, City), done.choices[0].message.content
    assert done.choices[0].finish_reason == "stop"


def test_n_samples_each_valid(srv):
    out = chat(srv, n=4, temperature=1.0, seed=5, max_tokens=80,
               response_format={"type": "json_schema", "json_schema": {"name": "p", "schema": PERSON}})
    assert len(out["choices"]) == 4
    texts = set()
    for c in out["choices"]:
        assert c["finish_reason"] in ("stop", "length")
        if c["finish_reason"] == "stop":
            valid_json(c["message"]["content"], PERSON)
        texts.add(c["message"]["content"])
    assert len(texts) > 1  # each sample follows its own state and its own draws


def test_stream_equals_whole_and_valid(srv):
    rf = {"type": "json_schema", "json_schema": {"name": "p", "schema": PERSON}}
    whole = chat(srv, response_format=rf)["choices"][0]["message"]["content"]
    r = srv.post("/v1/chat/completions", {"messages": CHAT, "max_tokens": 60, "temperature": 0, "stream": True,
                                          "response_format": rf}, stream=True)
    assert r.status_code == 200
    events = sse_events(r)
    text = "".join(e["choices"][0]["delta"].get("content") or "" for e in events if isinstance(e, dict)
                   and e.get("choices"))
    assert text == whole
    valid_json(text, PERSON)


def test_logprobs_with_constraint(srv):
    out = complete(srv, "The answer is", guided_choice=["yes", "no"], logprobs=2)
    lp = out["choices"][0]["logprobs"]
    assert out["choices"][0]["text"] in ("yes", "no")
    assert "".join(lp["tokens"]).startswith(out["choices"][0]["text"])
    assert all(x <= 0 for x in lp["token_logprobs"])


def test_length_ends_with_text_so_far(srv):
    out = complete(srv, "A person as JSON:", guided_json=PERSON, max_tokens=5)
    c = out["choices"][0]
    assert c["finish_reason"] == "length"
    assert c["text"].startswith('{"name": "') and out["usage"]["completion_tokens"] == 5


def test_concurrent_requests_different_constraints(srv):
    schemas = [PERSON, {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]},
               {"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 3},
               {"type": "object", "properties": {"color": {"enum": ["red", "green"]}}, "required": ["color"]}]

    def one(i):
        s = schemas[i % len(schemas)]
        return s, complete(srv, f"JSON number {i}:", guided_json=s, max_tokens=60, temperature=0.8, seed=i)

    with concurrent.futures.ThreadPoolExecutor(8) as ex:
        results = list(ex.map(one, range(16)))
    for s, out in results:
        c = out["choices"][0]
        if c["finish_reason"] == "stop":
            valid_json(c["text"], s)
        else:
            assert c["finish_reason"] == "length"
    assert sum(out["choices"][0]["finish_reason"] == "stop" for _, out in results) >= 12


def test_prefix_cached_request_same_output(srv):
    prompt = "Here is a long shared prefix for caching. " * 8 + "Person:"
    a = complete(srv, prompt, guided_json=PERSON, max_tokens=60)
    b = complete(srv, prompt, guided_json=PERSON, max_tokens=60)
    assert b["usage"]["prompt_tokens_details"]["cached_tokens"] > 0
    assert a["choices"][0]["text"] == b["choices"][0]["text"]
    valid_json(b["choices"][0]["text"], PERSON)


def test_speculative_decoding_same_output(srv, spec_srv):
    """Greedy output is the same with n-gram drafts (drafts the grammar forbids are rejected)."""
    prompt = 'Repeat: {"name": "Ann", "age": 3} {"name": "Ann", "age": 3} {"name": "Ann", "age": 3}'
    for kw in ({"guided_json": PERSON}, {"guided_regex": r"[a-z ]{5,40}\."}):
        plain = complete(srv, prompt, max_tokens=40, **kw)["choices"][0]["text"]
        spec = complete(spec_srv, prompt, max_tokens=40, **kw)["choices"][0]["text"]
        assert spec == plain
    m = spec_srv.metrics()
    assert "vllm:spec_decode_num_draft_tokens_total" in m, "the speculative server exports no draft counter"
    assert m["vllm:spec_decode_num_draft_tokens_total"] > 0, "no draft was verified: nothing was speculated"


def test_same_constraint_twice(srv):
    # A schema no other test sends, so the first request compiles it.
    schema = {"type": "object", "properties": {"twice": {"type": "integer", "minimum": 0, "maximum": 997}},
              "required": ["twice"]}
    texts, counts = [], []
    for _ in range(2):
        before = srv.metrics()
        out = complete(srv, "twice as JSON:", guided_json=schema, max_tokens=20)
        assert out["choices"][0]["finish_reason"] == "stop", out["choices"][0]
        valid_json(out["choices"][0]["text"], schema)
        texts.append(out["choices"][0]["text"])
        after = srv.metrics()
        counts.append((after["cllm:constraint_cache_misses_total"] - before["cllm:constraint_cache_misses_total"],
                       after["cllm:constraint_cache_hits_total"] - before["cllm:constraint_cache_hits_total"]))
    # The first compiles (a miss); the second gets the first one's compiled constraint and its mask cache
    # (a hit, nothing compiled): greedy, the same text.
    assert counts == [(1, 0), (0, 1)], counts
    assert texts[0] == texts[1]


BAD = [
    ("malformed schema text", {"guided_json": '{"type": "object",'}, "guided_json", "position"),
    ("allOf with no common type", {"guided_json": {"type": "object", "properties": {"a": {"allOf": [
        {"type": "string"}, {"type": "integer"}]}}, "required": ["a"]}}, "guided_json", "'a' may hold no value"),
    ("counts no object meets", {"json_schema": {"type": "object", "properties": {"a": {}}, "minProperties": 2}},
     "json_schema", "minProperties"),
    ("unresolvable ref", {"guided_json": {"$ref": "#/$defs/nope"}}, "guided_json", "#/$defs/nope"),
    ("malformed regex", {"guided_regex": "ab(c"}, "guided_regex", "position 2"),
    ("backreference", {"guided_regex": r"(a)\1"}, "guided_regex", "position 3"),
    ("grammar syntax", {"grammar": 'root ::= "a" |\nb ::= [a-'}, "grammar", "line 2 column"),
    ("undefined rule", {"grammar": "root ::= item"}, "grammar", "undefined rule 'item'"),
    ("left recursion", {"grammar": 'root ::= root "a" | "a"'}, "grammar", "left-recursive"),
    ("no root", {"grammar": 'item ::= "a"'}, "grammar", "root"),
    ("grammar too large", {"grammar": "root ::= " + " ".join(f'"{i}"{{3000}}' for i in range(1000))}, "grammar",
     "too large"),
    ("two constraints", {"guided_regex": "a", "grammar": 'root ::= "a"'}, "grammar", "only one"),
    ("empty choice", {"guided_choice": []}, "guided_choice", "non-empty"),
    ("bad response_format type", {"response_format": {"type": "xml"}}, "response_format", "xml"),
    ("json_schema without schema", {"response_format": {"type": "json_schema", "json_schema": {"name": "x"}}},
     "response_format.json_schema.schema", "schema"),
    ("unknown structured_outputs key", {"structured_outputs": {"xml": "a"}}, "structured_outputs.xml", "xml"),
    ("beam search", {"guided_regex": "a+", "use_beam_search": True, "best_of": 2, "n": 2}, "use_beam_search",
     "structured output"),
]


@pytest.mark.parametrize("name,fields,param,needle", BAD, ids=[b[0] for b in BAD])
def test_bad_constraints_are_400(srv, name, fields, param, needle):
    r = srv.post("/v1/completions", {"prompt": "x", "max_tokens": 4, **fields})
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["param"] == param, err
    assert needle in err["message"], err["message"]


def test_server_keeps_serving_and_frees_blocks(srv):
    for _, fields, _, _ in BAD[:5]:
        assert srv.post("/v1/completions", {"prompt": "x", "max_tokens": 4, **fields}).status_code == 400
    out = complete(srv, "ok", guided_choice=["fine"])
    assert out["choices"][0]["text"] == "fine"
    srv.wait_idle()  # every block back once the sequence is freed


def test_cli_generate_constraints(run_cllm, real_model_path, tmp_path):
    schema = tmp_path / "s.json"
    schema.write_text(json.dumps(PERSON))
    r = run_cllm("generate", "-m", real_model_path, "-p", "A person:", "--json-schema", schema, "--max-tokens", 60,
                 "--temperature", 0, "--threads", 2, timeout=300)
    assert r.returncode == 0, r.stderr
    valid_json(r.stdout.strip(), PERSON)
    r = run_cllm("generate", "-m", real_model_path, "-p", "Call", "--regex", r"\d{3}-\d{4}", "--max-tokens", 20,
                 "--threads", 2, timeout=300)
    assert r.returncode == 0 and re.fullmatch(r"\d{3}-\d{4}", r.stdout.strip()), r.stdout
    g = tmp_path / "g.gbnf"
    g.write_text('root ::= "x" [0-9]{2}\n')
    r = run_cllm("generate", "-m", real_model_path, "-p", "n", "--grammar", g, "--max-tokens", 20, "--threads", 2,
                 timeout=300)
    assert r.returncode == 0 and re.fullmatch(r"x[0-9]{2}", r.stdout.strip()), r.stdout
    r = run_cllm("generate", "-m", real_model_path, "-p", "n", "--regex", "a(", timeout=300)
    assert r.returncode != 0 and "position" in r.stderr
    r = run_cllm("generate", "-m", real_model_path, "-p", "n", "--regex", "a", "--grammar", g, timeout=300)
    assert r.returncode != 0 and "at most one" in r.stderr


def test_real_schema_corpus_sample(srv, repo_root):
    """A small sample of bench/structured_corpus.py (SchemaStore schemas from
    check-jsonschema, the JSON Schema metaschemas): a refusal is a 400 naming
    what is unsupported, and every finished output validates."""
    import check_jsonschema  # noqa: F401 (the corpus below ships with it)
    import random
    import sys

    sys.path.insert(0, str(repo_root / "bench"))
    import structured_corpus

    items = random.Random(4).sample(structured_corpus.entries(), 8)
    results = [structured_corpus.run_one(srv, name, schema, 120, i) for i, (name, schema) in enumerate(items)]
    for name, kind, detail, *_ in results:
        assert kind in ("valid", "refused", "length", "unchecked"), (name, kind, detail)
    assert any(kind == "valid" for _, kind, *_ in results)


@pytest.mark.parametrize("stream", [False, True])
def test_grammar_past_its_limits_while_generating_is_a_400(srv, stream):
    """A grammar whose parses double with every "a" (each may close with "b"
    or "c") passes 2,048 parses after a dozen: generation stops there with a
    400 naming the limit (streamed: an error event), not a 500, and the
    server keeps serving."""
    a = srv.tokenize(prompt="a", add_special_tokens=False)
    assert len(a) == 1
    body = {"prompt": "Letters:", "max_tokens": 40, "temperature": 0, "logit_bias": {str(a[0]): 100},
            "grammar": 'root ::= "a" root "b" | "a" root "c" | "d"', "stream": stream}
    r = srv.post("/v1/completions", body, stream=stream)
    if not stream:
        assert r.status_code == 400, r.text
        assert "structured output: grammar too ambiguous" in r.json()["error"]["message"]
    else:
        events = list(sse_events(r))
        errors = [e for e in events if isinstance(e, dict) and "error" in e]
        assert errors and "structured output: grammar too ambiguous" in errors[0]["error"]["message"], events[-3:]
    ok = srv.post("/v1/completions", {"prompt": "Hi", "max_tokens": 2})
    assert ok.status_code == 200
    srv.wait_idle()
