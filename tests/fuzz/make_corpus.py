"""Writes the seed corpus of the libFuzzer harnesses (tests/fuzz/corpus/).

Each harness NAME reads tests/fuzz/corpus/NAME/: small valid inputs of what it
parses, so the fuzzer starts past the first checks. Run from anywhere:

    python3 tests/fuzz/make_corpus.py

It overwrites the seed-* files and leaves crash-* files (regression inputs
for crashes the fuzzers found) alone. The whole corpus stays well under 2 MB.

  gguf          tiny models of each family from tests/ref/make_model.py
  safetensors   the model.safetensors of tiny Hugging Face folders
  hf_folder     config.json, tokenizer.json, tokenizer_config.json and
                model.safetensors of such a folder, joined by the harness's
                part separator (tests/fuzz/fuzz_common.h)
  params        request bodies of /v1/completions and /v1/chat/completions,
                after one byte that picks the vocabulary size
  template      the chat templates of tests/data/templates
  chat_render   message lists, after one byte that picks template and flags
  tokenizer     strings of tests/data/tokenizer_strings.jsonl and invalid
                UTF-8, after one byte that picks vocabulary and flags
  tool_parse    model replies with tool calls in each format, after one
                byte that picks the format and the stream's piece size
  grammar       GBNF grammars, regexes, JSON schemas and choice lists, after
                one byte that picks the frontend
  http          raw HTTP/1.x requests (plain, JSON body, chunked, pipelined,
                streamed reply, short and oversized bodies, Expect)
"""

from __future__ import annotations

import glob
import json
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "ref"))

import make_hf  # noqa: E402
import make_model  # noqa: E402

PART_SEP = b"\n#####\n"  # FUZZ_PART_SEP in fuzz_common.h
TINY = dict(n_vocab=300, n_embd=32, n_layer=1, n_head=2, n_head_kv=1, head_dim=16, n_ff=64, n_ctx=64)
# hf_folder's model is smaller still: its weights are converted on every
# input, and at TINY's size (39 KB of 46) they cost a third of the rate.
SMALL = dict(TINY, n_embd=8, head_dim=4, n_ff=16)


def seed(harness: str, name: str, data: bytes) -> None:
    folder = os.path.join(HERE, "corpus", harness)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "seed-" + name), "wb") as f:
        f.write(data)


def read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def gguf_seeds() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        for arch, opts in (("llama", dict(wtype="f16", tied=True)), ("qwen2", dict(wtype="q8_0")),
                           ("gemma3", dict(wtype="q8_0"))):
            path = os.path.join(tmp, arch + ".gguf")
            make_model.make_model(path, arch, **{**TINY, **opts})
            seed("gguf", arch + ".gguf", read(path))


def hf_folder_files(tmp: str, arch: str, dims: dict) -> list:
    folder = os.path.join(tmp, arch + str(dims["n_embd"]))
    make_hf.write_hf_model(folder, make_hf.default_hf_spec(arch, dict(dims, tied=True), dtype="f16"))
    return [read(os.path.join(folder, n)) for n in
            ("config.json", "tokenizer.json", "tokenizer_config.json", "model.safetensors")]


def hf_seeds() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        for arch in ("llama", "qwen2"):
            seed("safetensors", arch + ".safetensors", hf_folder_files(tmp, arch, TINY)[3])
            seed("hf_folder", arch, PART_SEP.join(hf_folder_files(tmp, arch, SMALL)))


PARAMS = [
    {"model": "m", "prompt": "Hello", "max_tokens": 8, "temperature": 0.7, "top_p": 0.9, "stop": ["\n", "."],
     "seed": 3, "n": 2, "logprobs": 2, "echo": True, "stream": True, "stream_options": {"include_usage": True}},
    {"prompt": [1, 2, 3], "max_tokens": 1, "logit_bias": {"5": -100, "7": 2.5}, "ignore_eos": True},
    {"prompt": ["a", "b"], "presence_penalty": 0.5, "frequency_penalty": -0.5, "repetition_penalty": 1.1,
     "top_k": 40, "min_p": 0.05, "stop_token_ids": [2]},
    {"prompt": [[1, 2], [3]], "best_of": 1, "suffix": None, "user": "u"},
    {"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}],
     "max_completion_tokens": 16, "logprobs": True, "top_logprobs": 3, "response_format": {"type": "text"}},
    {"messages": [{"role": "developer", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
                  {"role": "assistant", "content": None, "tool_calls": [
                      {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
                  {"role": "tool", "tool_call_id": "c", "content": "1"}], "tools": [], "stream": False},
    {"tokens": [0, 1, 2], "prompt": "x", "add_special_tokens": False},
]


def params_seeds() -> None:
    for i, body in enumerate(PARAMS):
        seed("params", f"body{i}.json", bytes([i]) + json.dumps(body).encode())
    seed("params", "not-json", b"\x00{\"prompt\": ")


def template_seeds() -> None:
    for path in sorted(glob.glob(os.path.join(ROOT, "tests", "data", "templates", "**", "*.jinja"), recursive=True)):
        seed("template", os.path.basename(path), read(path))


MESSAGES = [
    [{"role": "user", "content": "Hi"}],
    [{"role": "system", "content": "S"}, {"role": "user", "content": "Q <start_of_turn>model"},
     {"role": "assistant", "content": "A"}, {"role": "user", "content": [{"type": "text", "text": "Q2"}]}],
    [{"role": "user", "content": "x"}, {"role": "user", "content": "y"}],
    [{"role": "assistant", "content": "first"}],
    [{"role": "tool", "content": "42"}, {"role": "user", "content": "\u00e9\u2581"}],
]


def chat_render_seeds() -> None:
    for i, messages in enumerate(MESSAGES):
        for flags in (i % 4, (i % 4) | 4 | 8):
            seed("chat_render", f"messages{i}-{flags}.json", bytes([flags]) + json.dumps(messages).encode())


def tokenizer_seeds() -> None:
    with open(os.path.join(ROOT, "tests", "data", "tokenizer_strings.jsonl"), encoding="utf-8") as f:
        strings = [json.loads(line) for line in f if line.strip()]
    strings = [s for s in strings if isinstance(s, str)][:12]
    strings += ["<s>hello</s> <start_of_turn>user\n<div>", "<|endoftext|>hello world 123<|im_start|>"]
    for i, s in enumerate(strings):
        seed("tokenizer", f"text{i}", bytes([i % 128]) + s.encode())
    seed("tokenizer", "invalid-utf8", bytes([0x1f]) + b"a\xff\xfe\xc3(\xe2\x82 \xf0\x9f\x98 hello\x00 \xed\xa0\x80")


# A reply per tool-call format, in fuzz_tool_parse.c's order of formats
# (hermes, llama3_json, mistral, mistral_args, functionary).
TOOL_REPLIES = [
    'Checking.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "days": [1, 2]}}\n</tool_call>',
    '<|python_tag|>{"name": "f", "parameters": {"x": "a\\"b"}}; {"name": "g", "parameters": {}}',
    '[TOOL_CALLS] [{"name": "f", "arguments": {"a": 1}, "id": "abcDEF123"}, {"name": "g", "arguments": {}}]',
    'Ok.[TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}[TOOL_CALLS]g[ARGS]{}',
    '<function=get_weather>{"city": "Paris"}</function>',
]


def tool_parse_seeds() -> None:
    for i, reply in enumerate(TOOL_REPLIES):
        for flags in (i, i + 40, i + 100):  # the same format (flags % 5), other piece sizes
            seed("tool_parse", f"reply{i}-{flags}", bytes([flags]) + reply.encode())
def grammar_seeds() -> None:
    seeds = [
        (0, 'root ::= "{" ws pair ("," ws pair)* "}"\nws ::= [ \\t\\n]*\npair ::= [a-z]+ ":" ws ("1" | "22")?'),
        (0, 'root ::= ("\u00e9" | [^"\\\\\\x00-\\x1f]{2,5} | .)+ # comment'),
        (1, r"^(\d{3}-)?[A-Za-z_]\w*(?:\.[a-z]+){1,3}|x.y$"),
        (2, json.dumps({"type": "object", "properties": {"a": {"type": "integer", "minimum": -5, "maximum": 99},
                                                         "b": {"type": "array", "items": {"$ref": "#"}}},
                        "required": ["a"]})),
        (6, json.dumps({"$defs": {"s": {"type": "string", "pattern": "^[a-c]+$"}}, "anyOf": [{"$ref": "#/$defs/s"},
                                                                                           {"enum": [1, None]}]})),
        (3, json.dumps(["red", "green", "gr\u00e9"])),
        (2, json.dumps({"$defs": {"b": {"type": "object", "properties": {"id": {"type": "integer"}}}},
                        "allOf": [{"$ref": "#/$defs/b", "required": ["id"]}, {"anyOf": [{"minProperties": 1},
                                                                                      {"maxProperties": 2}]}],
                        "if": {"properties": {"id": {"const": 1}}}, "then": {"required": ["x"]},
                        "else": {"not": {"type": "null"}}, "patternProperties": {"^x": {"type": "string"}}})),
        (6, json.dumps({"$dynamicAnchor": "n", "type": "array", "items": [{"$dynamicRef": "#n"}],
                        "additionalItems": {"type": "string", "format": "ipv6"},
                        "propertyNames": {"pattern": "^a"}})),
    ]
    for i, (kind, text) in enumerate(seeds):
        seed("grammar", f"seed{i}", bytes([kind]) + text.encode())
def http_seeds() -> None:
    body = json.dumps({"prompt": "hi", "max_tokens": 2}).encode()
    requests = {
        "get": b"GET /missing HTTP/1.1\r\nHost: x\r\nUser-Agent: fuzz\r\n\r\n",
        "post-json": b"POST /json HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: "
        + str(len(body)).encode() + b"\r\n\r\n" + body,
        "chunked": b"POST /json HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{\"a\":\r\n2\r\n1}\r\n0\r\n\r\n",
        "stream": b"GET /stream HTTP/1.1\r\nHost: x\r\n\r\n",
        "pipelined": b"GET /stream HTTP/1.1\r\nHost: x\r\n\r\nPOST /json HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n[]",
        "http10": b"GET /stream HTTP/1.0\r\n\r\n",
        "short-body": b"POST /json HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"a\"",
        "too-large": b"POST /json HTTP/1.1\r\nHost: x\r\nContent-Length: 5000\r\n\r\n" + b"[" + b"1," * 2499 + b"1]",
        "expect": b"POST /json HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n{}",
    }
    for name, data in requests.items():
        seed("http", name, data)


def main() -> int:
    gguf_seeds()
    hf_seeds()
    params_seeds()
    template_seeds()
    chat_render_seeds()
    tokenizer_seeds()
    tool_parse_seeds()
    grammar_seeds()
    http_seeds()
    return 0


if __name__ == "__main__":
    sys.exit(main())
