"""Several models behind one server (`cllm serve --model a --model b
--served-model-name A --served-model-name B`), as llama-server's router mode:

  - /v1/models lists both; each request goes to the model its "model" field
    names, and one without it to the first.
  - Requests to both, interleaved from threads through the official `openai`
    client (completions, chat, streamed chat, responses), get at temperature 0
    the very tokens a server of that model alone gives.
  - /tokenize and /detokenize use the named model's tokenizer and template.
  - An unknown model is a 404 "model_not_found" whose message names both.
  - /metrics has one sample per model (label model_name) for the engine's
    metrics, counting only that model's requests.
  - The response cache keys on the model that answers.
  - The KV budget is split in proportion to each model's KV bytes per token,
    computed here from the models' shapes.
The two models are synthetic ones of different families (llama, qwen2), with
different vocabularies and chat templates, so a request answered by the
wrong model shows."""

from __future__ import annotations

import random
import re
from concurrent.futures import ThreadPoolExecutor

import make_model
import openai
import pytest
import requests

from server_util import CllmServer

NAMES = ("llama", "qwen")
FAMILY = {"llama": "llama", "qwen": "qwen2"}
KV = "64MiB"
PROMPTS = ["the quick brown fox", "one two three four", "hello there, model", "a b c d e f g"]
MAX_TOKENS = 6


@pytest.fixture(scope="module")
def paths(model_factory):
    return {name: model_factory(FAMILY[name], n_ctx=2048) for name in NAMES}


def multi_args(paths, *extra):
    args = []
    for name in NAMES:
        args += ["--model", paths[name]]
    for name in NAMES:
        args += ["--served-model-name", name]
    return [*args, "--kv-cache-memory", KV, *extra]


class MultiServer(CllmServer):
    """CllmServer puts its model first; here every model comes from --model."""

    def __init__(self, cllm_bin, paths, *extra, **kw):
        first, *rest = multi_args(paths, *extra)[1:]  # the first path stands where MODEL goes
        super().__init__(cllm_bin, first, *rest, **kw)


@pytest.fixture(scope="module")
def multi(cllm_bin, paths):
    with MultiServer(cllm_bin, paths) as s:
        yield s


def client_of(srv) -> openai.OpenAI:
    return openai.OpenAI(base_url=srv.url("/v1"), api_key="none", max_retries=0, timeout=120)


# ---- one request of each kind, as a comparable result ----

def completion(c, model, prompt):
    r = c.completions.create(model=model, prompt=prompt, max_tokens=MAX_TOKENS, temperature=0, logprobs=1)
    ch = r.choices[0]
    return r.model, ch.text, tuple(ch.logprobs.tokens), r.usage.completion_tokens


def chat(c, model, prompt):
    r = c.chat.completions.create(model=model, messages=[{"role": "user", "content": prompt}],
                                  max_tokens=MAX_TOKENS, temperature=0, logprobs=True)
    ch = r.choices[0]
    return r.model, ch.message.content, tuple(t.token for t in ch.logprobs.content), r.usage.completion_tokens


def chat_stream(c, model, prompt):
    text, served = "", None
    for chunk in c.chat.completions.create(model=model, messages=[{"role": "user", "content": prompt}],
                                           max_tokens=MAX_TOKENS, temperature=0, stream=True):
        served = chunk.model
        if chunk.choices and chunk.choices[0].delta.content:
            text += chunk.choices[0].delta.content
    return served, text


def response(c, model, prompt):
    r = c.responses.create(model=model, input=prompt, max_output_tokens=MAX_TOKENS, temperature=0)
    return r.model, r.output_text, r.usage.output_tokens


KINDS = {"completion": completion, "chat": chat, "chat_stream": chat_stream, "response": response}


@pytest.fixture(scope="module")
def reference(cllm_bin, paths):
    """{(model, kind, prompt): result} from a server of that model alone."""
    out = {}
    for name in NAMES:
        with CllmServer(cllm_bin, paths[name], "--served-model-name", name, "--kv-cache-memory", KV) as single:
            c = client_of(single)
            for kind, ask in KINDS.items():
                for prompt in PROMPTS:
                    out[(name, kind, prompt)] = ask(c, name, prompt)
    # The two models differ, so a misrouted request cannot pass.
    for kind in KINDS:
        for prompt in PROMPTS:
            assert out[("llama", kind, prompt)][1:] != out[("qwen", kind, prompt)][1:], (kind, prompt)
    return out


def test_models_lists_every_model(multi, paths):
    data = multi.get("/v1/models").json()["data"]
    assert [m["id"] for m in data] == list(NAMES)
    assert [m["root"] for m in data] == [str(paths[n]) for n in NAMES]
    for name in NAMES:
        assert multi.get(f"/v1/models/{name}").json()["id"] == name
        # the file name is an alias of its model
        assert multi.get(f"/v1/models/{paths[name].name}").json()["id"] == name
    assert [m.id for m in client_of(multi).models.list()] == list(NAMES)


def test_interleaved_requests_under_load_are_answered_by_their_model(multi, reference):
    jobs = [(name, kind, prompt) for name in NAMES for kind in KINDS for prompt in PROMPTS] * 2
    random.Random(7).shuffle(jobs)
    c = client_of(multi)

    def run(job):
        name, kind, prompt = job
        return job, KINDS[kind](c, name, prompt)

    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(run, jobs))
    for job, got in results:
        assert got == reference[job], job


def test_a_request_without_model_goes_to_the_first(multi, reference):
    prompt = PROMPTS[0]
    r = multi.post("/v1/completions", {"prompt": prompt, "max_tokens": MAX_TOKENS, "temperature": 0})
    assert r.status_code == 200, r.text
    assert (r.json()["model"], r.json()["choices"][0]["text"]) == reference[("llama", "completion", prompt)][:2]
    r = multi.post("/v1/chat/completions", {"messages": [{"role": "user", "content": prompt}],
                                            "max_tokens": MAX_TOKENS, "temperature": 0, "model": None})
    assert r.status_code == 200, r.text
    assert r.json()["choices"][0]["message"]["content"] == reference[("llama", "chat", prompt)][1]


def test_tokenize_and_detokenize_use_the_named_model(cllm_bin, paths, multi):
    bodies = [{"prompt": "hello there"}, {"messages": [{"role": "user", "content": "hello there"}]},
              {"content": "hello there", "with_pieces": True}]
    expected = {}
    for name in NAMES:
        with CllmServer(cllm_bin, paths[name], "--served-model-name", name, "--kv-cache-memory", KV) as single:
            for i, body in enumerate(bodies):
                expected[(name, i)] = single.post("/tokenize", body).json()
            ids = expected[(name, 1)]["tokens"]
            expected[(name, "detok")] = single.post("/detokenize", {"tokens": ids}).json()
    # the chat templates differ, so the rendered prompts do
    assert expected[("llama", 1)]["tokens"] != expected[("qwen", 1)]["tokens"]
    for name in NAMES:
        for i, body in enumerate(bodies):
            assert multi.post("/tokenize", {**body, "model": name}).json() == expected[(name, i)], (name, body)
        ids = expected[(name, 1)]["tokens"]
        assert multi.post("/detokenize", {"tokens": ids, "model": name}).json() == expected[(name, "detok")]
    assert multi.post("/tokenize", bodies[1]).json() == expected[("llama", 1)]


def assert_not_found(err: dict, name: str):
    assert err["code"] == "model_not_found" and err["param"] == "model", err
    assert f"'{name}'" in err["message"] and "'llama'" in err["message"] and "'qwen'" in err["message"], err


def test_an_unknown_model_is_a_404_naming_the_models_served(multi):
    c = client_of(multi)
    calls = [lambda: c.completions.create(model="gpt-4", prompt="hi", max_tokens=2),
             lambda: c.chat.completions.create(model="gpt-4", messages=[{"role": "user", "content": "hi"}]),
             lambda: c.responses.create(model="gpt-4", input="hi"),
             lambda: c.models.retrieve("gpt-4")]
    for call in calls:
        with pytest.raises(openai.NotFoundError) as exc:
            call()
        assert_not_found(exc.value.body if "code" in exc.value.body else exc.value.body["error"], "gpt-4")
    for path, body in (("/tokenize", {"prompt": "hi"}), ("/detokenize", {"tokens": [1]})):
        r = multi.post(path, {**body, "model": "gpt-4"})
        assert r.status_code == 404
        assert_not_found(r.json()["error"], "gpt-4")
    # a model field of the wrong type is still the endpoint's 400
    r = multi.post("/v1/completions", {"model": 3, "prompt": "hi"})
    assert r.status_code == 400 and r.json()["error"]["param"] == "model"


def sample(metrics: dict, family: str, model: str, extra: str = "") -> float:
    return metrics.get(f'{family}{{model_name="{model}"{extra}}}', 0.0)


def test_metrics_count_each_model_apart(multi):
    sent = {"llama": 3, "qwen": 2}
    before = multi.metrics()
    for name, n in sent.items():
        for i in range(n):
            r = multi.post("/v1/completions", {"model": name, "prompt": f"count me {i}", "max_tokens": 4,
                                               "ignore_eos": True, "temperature": 0})
            assert r.status_code == 200, r.text
    after = multi.metrics()
    length = ',finished_reason="length"'
    for name, n in sent.items():
        assert sample(after, "vllm:request_success_total", name, length) - \
            sample(before, "vllm:request_success_total", name, length) == n
        assert sample(after, "vllm:generation_tokens_total", name) - \
            sample(before, "vllm:generation_tokens_total", name) == 4 * n
        assert sample(after, "vllm:e2e_request_latency_seconds_count", name) - \
            sample(before, "vllm:e2e_request_latency_seconds_count", name) == n
        assert sample(after, "cllm:server_ready", name) == 1
        assert sample(after, "cllm:kv_cache_blocks_total", name) > 0
    assert 'cllm:http_responses_total{code="2xx"}' in after


def kv_bytes_per_token(name) -> int:
    """f16 K and V of every layer, from the model's own shape."""
    spec = make_model.default_spec(FAMILY[name], n_ctx=2048)
    return spec.n_layer * spec.n_head_kv * spec.head_dim * 2 * 2


def test_the_kv_budget_is_split_by_kv_bytes_per_token(multi):
    log = multi.log()
    per_token = {n: kv_bytes_per_token(n) for n in NAMES}
    assert per_token["llama"] != per_token["qwen"]
    total = 64 * 2**20
    for name in NAMES:
        m = re.search(rf"{name}: (\d+) bytes per token, ([\d.]+) MiB", log)
        assert m, log
        assert int(m.group(1)) == per_token[name]
        share = total * per_token[name] / sum(per_token.values())
        assert abs(float(m.group(2)) * 2**20 - share) < 0.06 * 2**20
    # so both pools hold the same number of tokens
    tokens = {n: int(re.search(rf"{n}: KV cache .*: (\d+) tokens", log).group(1)) for n in NAMES}
    assert tokens["llama"] == tokens["qwen"] > 0
    for name in NAMES:
        blocks = sample(multi.metrics(), "cllm:kv_cache_blocks_total", name)
        assert blocks * 16 == tokens[name]


def test_the_response_cache_keys_on_the_model(cllm_bin, paths, reference):
    with MultiServer(cllm_bin, paths, "--response-cache-size", 16) as srv:
        prompt = PROMPTS[1]
        body = {"prompt": prompt, "max_tokens": MAX_TOKENS, "temperature": 0}
        seen = []
        for model in ("llama", "qwen", "qwen", paths["qwen"].name, "llama"):
            r = srv.post("/v1/completions", {**body, "model": model})
            assert r.status_code == 200, r.text
            seen.append((r.headers["x-cllm-cache"], r.json()["model"], r.json()["choices"][0]["text"]))
        llama = reference[("llama", "completion", prompt)][1]
        qwen = reference[("qwen", "completion", prompt)][1]
        assert seen == [("miss", "llama", llama), ("miss", "qwen", qwen), ("hit", "qwen", qwen),
                        ("hit", "qwen", qwen), ("hit", "llama", llama)]
        m = srv.metrics()
        assert sample(m, "cllm:response_cache_hits_total", "qwen") == 2
        assert sample(m, "cllm:response_cache_misses_total", "qwen") == 1
        assert sample(m, "cllm:response_cache_hits_total", "llama") == 1
        assert m["cllm:response_cache_entries"] == 2


def test_models_and_names_must_pair(run_cllm, paths):
    a, b = paths["llama"], paths["qwen"]
    p = run_cllm("serve", a, "--model", b, "--served-model-name", "x", "--served-model-name", "y",
                 "--served-model-name", "z", "--port", 0)
    assert p.returncode == 1 and "3 --served-model-name for 2 models" in p.stderr, p.stderr
    p = run_cllm("serve", a, "--model", a, "--port", 0)
    assert p.returncode == 1 and "both served as" in p.stderr, p.stderr
    p = run_cllm("serve", a, "--model", b, "--served-model-name", "same", "--served-model-name", "same",
                 "--port", 0)
    assert p.returncode == 1 and "both served as 'same'" in p.stderr, p.stderr
    p = run_cllm("serve", "--port", 0)
    assert p.returncode == 1 and "missing MODEL" in p.stderr, p.stderr


def test_max_loaded_models_loads_on_demand_and_unloads_the_least_recently_used(cllm_bin, paths, reference):
    with MultiServer(cllm_bin, paths, "--max-loaded-models", 1) as srv:
        def loaded():
            m = srv.metrics()
            return {n: sample(m, "cllm:server_ready", n) for n in NAMES}

        assert loaded() == {"llama": 1, "qwen": 0}
        assert "64.0 MiB for each model in memory" in srv.log()
        assert "max_model_len" not in srv.get("/v1/models/qwen").json()  # not known before its first load
        c = client_of(srv)
        prompt = PROMPTS[0]
        assert completion(c, "qwen", prompt) == reference[("qwen", "completion", prompt)]
        assert loaded() == {"llama": 0, "qwen": 1}
        assert "unloading llama" in srv.log()
        assert srv.get("/v1/models/qwen").json()["max_model_len"] == 2048
        # /tokenize needs the model in memory too
        assert srv.post("/tokenize", {"model": "llama", "prompt": "hi"}).status_code == 200
        assert loaded() == {"llama": 1, "qwen": 0}
        # interleaved from threads: each request waits for its model, and a
        # model reloaded answers as before
        jobs = [(name, kind, p) for name in NAMES for kind in ("completion", "chat_stream") for p in PROMPTS[:2]]
        random.Random(3).shuffle(jobs)
        with ThreadPoolExecutor(max_workers=4) as pool:
            results = list(pool.map(lambda job: (job, KINDS[job[1]](c, job[0], job[2])), jobs))
        for job, got in results:
            assert got == reference[job], job
        assert sum(loaded().values()) == 1


def test_a_model_that_fails_to_load_on_demand_is_a_503(cllm_bin, paths, tmp_path):
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"GGUF" + bytes(60))
    with CllmServer(cllm_bin, paths["llama"], "--model", broken, "--max-loaded-models", 1,
                    "--served-model-name", "llama", "--kv-cache-memory", KV) as srv:
        for _ in range(2):  # each request tries again
            r = srv.post("/v1/completions", {"model": "broken", "prompt": "hi", "max_tokens": 2})
            assert r.status_code == 503, r.text
            err = r.json()["error"]
            assert err["code"] == "model_load_failed" and "'broken'" in err["message"], err
        r = srv.post("/v1/completions", {"prompt": "hi", "max_tokens": 2})
        assert r.status_code == 200 and r.json()["model"] == "llama", r.text
        assert srv.get("/health").status_code == 200
