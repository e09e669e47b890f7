"""Token masks against XGrammar: for each grammar (JSON schemas in both
whitespace modes, 60 generated object schemas over patternProperties,
propertyNames, additionalProperties, unevaluatedProperties and
minProperties/maxProperties, GBNF grammars, regexes, choices), random valid documents
are walked token by token and at every step cllm's allowed-token set must
equal XGrammar's over the same vocabulary: a synthetic byte-level vocabulary
(all bytes plus JSON-ish pieces and multi-byte characters) and the real
262k-token gemma-3 vocabulary. The walk picks among the tokens XGrammar
allows, so the documents come from the reference.

Schemas XGrammar does not merge (allOf of several, keywords beside $ref,
if/then/else, not) or formats it writes differently (uri without digits in
the scheme, IPv6 with an IPv4 tail only after ::ffff: or (h16:){1,4}:,
lowercase hostnames; cllm follows RFC 3986 and RFC 1123) are checked in tests/unit/
test_schema_keywords.c and against jsonschema by bench/structured_corpus.py.

Two deliberate differences are left out of the walk: XGrammar lets a string
with minLength/maxLength hold raw control characters and no escapes (invalid
JSON; cllm keeps the JSON string grammar and counts an escape as one
character), and XGrammar accepts UTF-8-encoded surrogates after a lone 0xED
byte (cllm allows only valid UTF-8), so the walk never stops on 0xED."""

from __future__ import annotations

import random

import numpy as np
import pytest
import xgrammar as xgr

from grammar_util import CllmMasks, mask_ids, write_vocab_json

SCHEMAS = [
    {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
     "required": ["name", "age"]},
    {"type": "object", "properties": {"a": {"type": "boolean"}, "b": {"type": "null"}, "c": {"type": "number"}}},
    {"type": "object", "properties": {"id": {"type": "integer", "minimum": 0, "maximum": 120},
                                      "t": {"type": "integer", "minimum": -15, "maximum": 7}},
     "required": ["id"]},
    {"type": "object", "properties": {"tags": {"type": "array", "items": {"type": "string"}, "minItems": 1,
                                               "maxItems": 3}}, "required": ["tags"]},
    {"type": "object", "properties": {"color": {"enum": ["red", "green", "blue"]}, "k": {"const": 42}},
     "required": ["color", "k"]},
    {"type": "object", "properties": {"v": {"anyOf": [{"type": "string"}, {"type": "integer"}]}},
     "required": ["v"]},
    {"type": "object", "properties": {"code": {"type": "string", "pattern": "^[A-Z]{2}-[0-9]{3}$"}},
     "required": ["code"]},
    {"$defs": {"pt": {"type": "object", "properties": {"x": {"type": "number"}, "y": {"type": "number"}},
                      "required": ["x", "y"]}},
     "type": "object", "properties": {"p": {"$ref": "#/$defs/pt"}, "q": {"$ref": "#/$defs/pt"}},
     "required": ["p"]},
    {"type": "array", "items": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
     "maxItems": 4},
    {"type": "object", "properties": {"d": {"type": "string", "format": "date"}}, "required": ["d"]},
    {"type": "object", "properties": {"u": {"type": "string", "format": "uuid"}}, "required": ["u"]},
    {"type": "object", "properties": {"o": {"type": "object", "properties": {"i": {"type": "integer"}},
                                            "required": ["i"]}, "z": {"type": ["string", "null"]}},
     "required": ["o", "z"]},
    {"type": "object", "additionalProperties": True},
    {"type": "object", "properties": {"m": {"type": "integer", "minimum": 100}}, "required": ["m"]},
    # Keywords of no JSON Schema vocabulary (SchemaStore's, a vendor's): annotations, ignored as XGrammar does.
    {"type": "object", "tsType": "Config", "fileMatch": ["*.cfg"],
     "properties": {"s": {"type": "string", "x-order": 1, "markdownDescription": "a name", "tsType": "Name"},
                    "r": {"$ref": "#/$defs/n", "defaultSnippets": [{"body": 1}]}},
     "required": ["s", "r"], "$defs": {"n": {"type": "integer", "minimum": 0, "doNotSuggest": True}}},
    # Keys of additional properties, property counts, and the RFC formats XGrammar shares.
    {"type": "object", "patternProperties": {"^x-[a-z]+$": {"type": "integer"}}},
    {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"],
     "patternProperties": {"^[0-9]+$": {"type": "boolean"}}},
    {"type": "object", "additionalProperties": {"type": "integer"}, "propertyNames": {"pattern": "^[a-z]{1,4}$"}},
    {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}}, "minProperties": 1},
    {"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": True, "maxProperties": 2},
    {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "minProperties": 1,
     "maxProperties": 1},
    {"type": "object", "properties": {"a": {"type": "integer"}}, "unevaluatedProperties": {"type": "string"}},
    {"type": "object", "properties": {"d": {"type": "string", "format": "duration"},
                                      "r": {"type": "string", "format": "uri-reference"}}, "required": ["d", "r"]},
    # Assertions neither enforces (uniqueItems, dependentRequired): the grammar without them.
    {"type": "array", "items": {"type": "integer"}, "uniqueItems": True, "maxItems": 3},
    {"type": "object", "properties": {"a": {"type": "integer"}}, "dependentRequired": {"a": ["b"]}},
]

def object_schemas(n: int, seed: int = 0) -> list[dict]:
    """Random object schemas over the keywords that shape an object's keys
    and counts: properties of assorted types, some required;
    patternProperties, or additionalProperties (true or a schema) with or
    without propertyNames, or unevaluatedProperties; minProperties and
    maxProperties. Patterns are anchored at both ends: XGrammar matches a
    key pattern whole, where JSON Schema searches (cllm follows the spec)."""
    r = random.Random(seed)
    types = [{"type": "string"}, {"type": "integer"}, {"type": "boolean"}, {"enum": ["red", "blue"]},
             {"type": "integer", "minimum": 0, "maximum": 9}, {"type": "array", "items": {"type": "integer"},
                                                             "maxItems": 2}]
    out = []
    for _ in range(n):
        props = {name: r.choice(types) for name in r.sample(["a", "name", "age", "x1", "color"], r.randint(1, 3))}
        s = {"type": "object", "properties": props}
        required = [name for name in props if r.random() < 0.4]
        if required:
            s["required"] = required
        k = r.random()
        if k < 0.3:
            s["patternProperties"] = {r.choice(["^x[0-9]$", "^[a-c]+$", "^z[0-9]?$"]): r.choice(types)}
        elif k < 0.5:
            s["additionalProperties"] = r.choice([True, {"type": "integer"}])
            if r.random() < 0.5:
                s["propertyNames"] = {"pattern": r.choice(["^[a-z]{1,3}$", "^q[a-z]?$"])}
        elif k < 0.6:
            s["unevaluatedProperties"] = r.choice([{"type": "string"}, False])
        open_keys = "patternProperties" in s or "additionalProperties" in s or s.get("unevaluatedProperties")
        if r.random() < 0.5:
            s["minProperties"] = r.randint(0, min(2, len(props) + (3 if open_keys else 0)))
        if r.random() < 0.4:
            floor = max(s.get("minProperties", 0), len(required))
            s["maxProperties"] = r.randint(floor, max(floor, 3))
        out.append(s)
    return out


GRAMMARS = [
    'root ::= "yes" | "no" | "maybe" [0-9]*',
    'root ::= "(" expr ")"\nexpr ::= term ("+" term)*\nterm ::= [0-9]+ | "(" expr ")"',
    'root ::= [a-z]+ ("-" [a-z]+){0,3} "."',
    'root ::= "name: " [^\\n]{1,10} "\\n"',
    'root ::= ("é" | "ü" | "日本")+ "!"',
    'root ::= item{2,4}\nitem ::= "[" [0-9a-f]{1,2} "]"',
]

REGEXES = [r"\d{3}-\d{4}", r"(cat|dog)s?( and (cat|dog)s?)*", r"[A-Z][a-z]+ [A-Z]\.", r"0x[0-9a-fA-F]{2,8}"]

CHOICES = [["Paris", "London", "Parma", "Lyon"], ["yes", "no"]]


def cases():
    out = []
    for i, s in enumerate(SCHEMAS):
        out.append(pytest.param("json_schema", s, False, id=f"schema{i}"))
        out.append(pytest.param("json_schema", s, True, id=f"schema{i}-anyws"))
    for i, g in enumerate(GRAMMARS):
        out.append(pytest.param("gbnf", g, False, id=f"gbnf{i}"))
    for i, r in enumerate(REGEXES):
        out.append(pytest.param("regex", r, False, id=f"regex{i}"))
    for i, c in enumerate(CHOICES):
        out.append(pytest.param("choice", c, False, id=f"choice{i}"))
    return out


def xgr_compiled(compiler, kind, spec, any_ws):
    if kind == "json_schema":
        return compiler.compile_json_schema(spec, any_whitespace=any_ws)
    if kind == "gbnf":
        return compiler.compile_grammar(spec)
    if kind == "regex":
        return compiler.compile_regex(spec)
    if kind == "choice":
        return compiler.compile_regex("|".join(__import__("re").escape(c) for c in spec))
    raise AssertionError(kind)


def synthetic_tokens(rng: random.Random) -> list[bytes]:
    toks = [bytes([b]) for b in range(256)]
    pieces = ['{"', '"}', '":', '",', '": ', '", "', "true", "false", "null", "name", "age", "color", "red",
              "green", "blue", " ", "  ", "\n", "\n ", "[", "]", "[{", "}]", "12", "42", "-1", "0.", "1e", "yes",
              "no", "maybe", "cat", "dog", "s and", " and ", "Paris", "Par", "is", "Lon", "don", "0x", "ab", "ff",
              "é", "ü", "日", "本", "日本", "é!", "2024-", "01-", "31", "\\n", "\\u00", '\\"', "(1", "+2)", "AB",
              "-123", "Zz", "Ab", " C.", "\"tags\"", "\"s\":", ":\"", "code", "XY-", "uuid", "abcd-"]
    toks += [p.encode() for p in pieces]
    alphabet = '{}[]":, abcdefxyz0123456789-.\\n'
    for _ in range(300):
        toks.append("".join(rng.choice(alphabet) for _ in range(rng.randint(2, 6))).encode())
    toks.append("é".encode()[:1])  # half a character
    return list(dict.fromkeys(toks))


@pytest.fixture(scope="module")
def synthetic_vocab(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("vocab")
    toks = synthetic_tokens(random.Random(7))
    toks.append(b"")  # a special token: never allowed
    eos = len(toks)
    toks.append(b"")
    path = tmp / "vocab.json"
    write_vocab_json(path, toks, [eos])
    return path, toks, eos


@pytest.fixture(scope="module")
def gemma_vocab(real_model_path, build_dir, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("gemma")
    probe = CllmMasks(build_dir / "grammar_masks", "regex", "a", real_model_path, tmp)
    toks = probe.vocab(262144)
    probe.close()
    eog = [i for i, (_, e) in enumerate(toks) if e]
    return real_model_path, [b for b, _ in toks], eog


def walk_and_compare(tool, tmp, kind, spec, any_ws, vocab_path, tokens, eog, walks, max_steps, seed):
    info = xgr.TokenizerInfo(tokens, xgr.VocabType.RAW, vocab_size=len(tokens), stop_token_ids=eog)
    compiler = xgr.GrammarCompiler(info)
    compiled = xgr_compiled(compiler, kind, spec, any_ws)
    rng = random.Random(seed)
    n = len(tokens)
    steps_checked = 0
    for w in range(walks):
        cl = CllmMasks(tool, kind, spec, vocab_path, tmp, any_whitespace=any_ws)
        m = xgr.GrammarMatcher(compiled)
        bitmask = xgr.allocate_token_bitmask(1, n)
        for step in range(max_steps):
            xgr.fill_next_token_bitmask(m, bitmask) if hasattr(xgr, "fill_next_token_bitmask") else \
                m.fill_next_token_bitmask(bitmask)
            ref = mask_ids(bitmask.numpy()[0].astype(np.uint32), n)
            got = mask_ids(cl.mask(), n)
            if got != ref:
                extra = sorted(got - ref)[:8]
                missing = sorted(ref - got)[:8]
                pytest.fail(f"{kind} walk {w} step {step}: cllm allows {len(got)}, XGrammar {len(ref)}; "
                            f"extra {[tokens[i] for i in extra]} missing {[tokens[i] for i in missing]}")
            steps_checked += 1
            if not ref:
                break
            ends = [t for t in ref if t in eog]
            if ends and rng.random() < 0.4:
                break
            short = [t for t in ref if len(tokens[t]) == 1 and t not in eog]
            pool = short if short and rng.random() < 0.6 else [t for t in ref if t not in eog] or ends
            pool = [t for t in pool if not tokens[t].endswith(b"\xed")] or pool
            tok = rng.choice(sorted(pool))
            assert m.accept_token(tok)
            assert cl.accept(tok), f"cllm refused token {tokens[tok]!r} that XGrammar accepted"
            if tok in eog:
                break
        cl.close()
    return steps_checked


@pytest.mark.parametrize("kind,spec,any_ws", cases())
def test_masks_equal_xgrammar_synthetic_vocab(kind, spec, any_ws, synthetic_vocab, build_dir, tmp_path):
    path, toks, eos = synthetic_vocab
    checked = walk_and_compare(build_dir / "grammar_masks", tmp_path, kind, spec, any_ws, path, toks, [eos],
                               walks=6, max_steps=40, seed=hash((kind, str(spec), any_ws)) & 0xFFFF)
    assert checked > 0


@pytest.mark.parametrize("any_ws", [False, True])
@pytest.mark.parametrize("index", range(60))
def test_masks_equal_xgrammar_generated_object_schemas(index, any_ws, synthetic_vocab, build_dir, tmp_path):
    path, toks, eos = synthetic_vocab
    spec = object_schemas(60)[index]
    checked = walk_and_compare(build_dir / "grammar_masks", tmp_path, "json_schema", spec, any_ws, path, toks, [eos],
                               walks=4, max_steps=40, seed=index)
    assert checked > 0


@pytest.mark.parametrize("kind,spec,any_ws", [c for i, c in enumerate(cases()) if i % 3 == 0])
def test_masks_equal_xgrammar_gemma_vocab(kind, spec, any_ws, gemma_vocab, build_dir, tmp_path):
    path, toks, eog = gemma_vocab
    checked = walk_and_compare(build_dir / "grammar_masks", tmp_path, kind, spec, any_ws, path, toks, eog,
                               walks=2, max_steps=25, seed=11)
    assert checked > 0
