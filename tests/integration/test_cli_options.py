"""One command-line vocabulary: every command's options come from one table
(src/cli/cli_options.h) that drives parsing, --help and --print-config.

Checked through the binary: every command, and every flag and alias a --help
lists, is named in the hand-written documentation (README.md and docs/*.md,
not the generated docs/cli.md, which copies --help and so proves nothing);
every alias gives the same parsed settings (--print-config's JSON) as
its canonical name, and a spelling means one set of spellings in every
command that takes it; unknown options and bad values are refused with a
message naming them; generate takes --kv-cache-memory sizes as serve does."""

from __future__ import annotations

import json
import re

import pytest

COMMANDS = ["generate", "chat", "serve", "info", "tokenize", "logits", "quantize", "perplexity", "eval-compare",
            "bench offline", "bench serve", "bench plot", "medusa train"]

# A value each metavar accepts in every command that uses it, and that is no command's default.
SAMPLE_VALUES = {"N": "48", "K": "48", "S": "12345", "T": "0.5", "P": "0.5", "R": "0.5", "X": "0.5", "Y": "0.5",
                 "Z": "0.5", "SECONDS": "30", "SIZE": "3GiB", "8|16|32": "32",
                 "auto|f16|bf16|f32|fp8|fp8_e4m3|fp8_e5m2|int8": "int8",
                 "8|4|3|2": "3", "32|64|128|-1": "64", "R|inf": "2.5", "JSON": '{"a": 1}', "TYPE": "f16"}


def args_of(command):
    return command.split()


def parse_help(text):
    """[(flags, metavar)] for each option listed: flags[0] is the canonical
    name (the first long one), the rest its aliases."""
    options = []
    heading = None
    for line in text.splitlines():
        if re.match(r"^\S.*:$", line):
            heading = line[:-1]
        if heading == "common options":  # -h/--help and --print-config, the same in every command
            continue
        if line.startswith("  -"):
            left = re.split(r"\s{2,}", line.strip())[0]
            parts = left.split(", ")
            last = parts[-1].split(" ", 1)
            parts[-1] = last[0]
            metavar = last[1] if len(last) > 1 else None
            long_names = [p for p in parts if p.startswith("--")]
            short_names = [p for p in parts if not p.startswith("--")]
            options.append(([long_names[0]] + long_names[1:] + short_names, metavar))
        m = re.match(r"^\s+\(also (.*)\)$", line)
        if m and options:
            options[-1][0].extend(m.group(1).split(", "))
    return options


@pytest.fixture(scope="module")
def helps(run_cllm):
    out = {}
    for command in COMMANDS:
        p = run_cllm(*args_of(command), "--help")
        assert p.returncode == 0 and p.stdout.startswith(f"usage: cllm {command} "), (command, p.stdout, p.stderr)
        out[command] = parse_help(p.stdout)
    return out


def config(run_cllm, command, *args):
    p = run_cllm(*args_of(command), *args, "--print-config")
    assert p.returncode == 0, (command, args, p.stderr)
    doc = json.loads(p.stdout)
    assert doc.pop("command") == command
    return doc


def option_args(flag, metavar):
    if metavar is None:
        return [flag]
    return [flag, SAMPLE_VALUES.get(metavar, "some-value")]


# The generated CLI reference: made from --help, so it must not count as documenting a flag.
GENERATED_DOCS = {"docs/cli.md"}


def hand_written_docs(repo_root):
    """{relative path: text} of README.md and every docs/*.md page written by hand."""
    paths = [repo_root / "README.md", *sorted((repo_root / "docs").glob("*.md"))]
    docs = {str(p.relative_to(repo_root)): p.read_text() for p in paths}
    return {name: text for name, text in docs.items() if name not in GENERATED_DOCS}


def test_every_flag_in_help_is_in_the_readme(helps, repo_root):
    """Every flag is named somewhere in README.md or a hand-written docs/ page."""
    docs = hand_written_docs(repo_root)
    missing = {}
    for command, options in helps.items():
        flags = {f for fl, _ in options for f in fl} | {"-h", "--help", "--print-config"}
        for flag in sorted(flags):
            pattern = rf"(?<![\w-]){re.escape(flag)}(?![\w-])"
            if not any(re.search(pattern, text) for text in docs.values()):
                missing.setdefault(command, []).append(flag)
    assert not missing, (f"flags in --help but in none of {sorted(docs)} "
                         f"(the generated {sorted(GENERATED_DOCS)} does not count): {missing}")


def test_every_command_is_in_the_readme(repo_root):
    """Every command is named (`cllm COMMAND`) in README.md or a hand-written docs/ page."""
    docs = hand_written_docs(repo_root)
    missing = [c for c in COMMANDS if not any(f"cllm {c}" in text for text in docs.values())]
    assert not missing, (f"commands in none of {sorted(docs)} "
                         f"(the generated {sorted(GENERATED_DOCS)} does not count): {missing}")


def test_help_lists_each_spelling_once(helps):
    for command, options in helps.items():
        flags = [f for fl, _ in options for f in fl]
        assert len(flags) == len(set(flags)), (command, sorted(f for f in flags if flags.count(f) > 1))


def test_aliases_parse_to_the_same_setting(helps, run_cllm):
    checked = 0
    for command, options in helps.items():
        default = config(run_cllm, command)
        for flags, metavar in options:
            canonical, aliases = flags[0], flags[1:]
            if canonical.startswith("--no-") or any(a == "--no-" + canonical[2:] for a in aliases):
                aliases = [a for a in aliases if a != "--no-" + canonical[2:]]
            if not aliases:
                continue
            want = config(run_cllm, command, *option_args(canonical, metavar))
            assert want != default, f"cllm {command} {canonical}: --print-config shows no change"
            for alias in aliases:
                got = config(run_cllm, command, *option_args(alias, metavar))
                assert got == want, f"cllm {command}: {alias} parses differently from {canonical}"
                checked += 1
    assert checked >= 20


def test_a_spelling_means_the_same_option_everywhere(helps):
    """Where two commands take a spelling, it belongs to the same set of spellings."""
    seen = {}
    for command, options in helps.items():
        for flags, _ in options:
            spellings = frozenset(flags)
            for flag in flags:
                if flag in seen:
                    other_command, other = seen[flag]
                    assert other == spellings, (f"{flag}: cllm {other_command} spells it {sorted(other)}, "
                                                f"cllm {command} {sorted(spellings)}")
                else:
                    seen[flag] = (command, spellings)


def test_old_spellings_stay_aliases(helps):
    """vLLM's spellings are canonical; the older ones still parse."""
    canonical = {flags[0]: set(flags[1:]) for options in helps.values() for flags, _ in options}
    assert {"-c", "--ctx-size", "--ctx"} <= canonical["--max-model-len"]
    assert "--kv-type" in canonical["--kv-cache-dtype"]
    assert {"-n", "--n-predict"} <= canonical["--max-tokens"]
    assert "--temp" in canonical["--temperature"]
    assert "--repeat-penalty" in canonical["--repetition-penalty"]
    assert "-t" in canonical["--threads"]
    for flag in ("--kv-cache-memory", "--max-num-seqs", "--max-num-batched-tokens", "--block-size"):
        assert flag in canonical


def test_engine_options_are_the_same_in_generate_serve_and_bench(run_cllm):
    args = ["-c", "96", "--kv-type", "f32", "--kv-cache-memory", "64MiB", "--max-num-seqs", "3",
            "--max-num-batched-tokens", "128", "--block-size", "8", "--no-enable-prefix-caching", "-t", "2"]
    keys = ["max-model-len", "kv-cache-dtype", "kv-cache-memory", "max-num-seqs", "max-num-batched-tokens",
            "block-size", "enable-prefix-caching", "threads"]
    seen = [config(run_cllm, command, *args) for command in ("generate", "serve", "bench offline")]
    for doc in seen:
        assert {k: doc[k] for k in keys} == {k: seen[0][k] for k in keys}
    assert seen[0]["max-model-len"] == 96 and seen[0]["kv-cache-memory"] == 64 << 20
    assert seen[0]["enable-prefix-caching"] is False and seen[0]["kv-cache-dtype"] == "f32"


def test_name_equals_value(run_cllm):
    assert config(run_cllm, "serve", "--max-model-len=77") == config(run_cllm, "serve", "--max-model-len", "77")
    p = run_cllm("generate", "--ignore-eos=yes")
    assert p.returncode == 1 and "--ignore-eos takes no value" in p.stderr


@pytest.mark.parametrize("command", COMMANDS)
def test_unknown_option_is_named(run_cllm, command):
    p = run_cllm(*args_of(command), "--frobnicate", "3")
    assert p.returncode == 1 and p.stdout == ""
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and f"cllm {command}: unknown option '--frobnicate'" in lines[0], p.stderr


@pytest.mark.parametrize("command,args,needles", [
    ("generate", ["--max-model-len", "abc"], ["--max-model-len", "'abc'"]),
    ("generate", ["-c", "0"], ["-c", "'0'", "[1, "]),
    ("chat", ["--ctx-size", "8"], ["--ctx-size", "[16, ", "'8'"]),
    ("perplexity", ["--ctx", "2"], ["--ctx", "'2'"]),
    ("info", ["--kv-type", "q4"], ["--kv-type", "'q4'"]),
    ("serve", ["--kv-cache-dtype", "int3"], ["--kv-cache-dtype", "'int3'"]),
    ("serve", ["--block-size", "12"], ["--block-size", "8, 16 or 32", "'12'"]),
    ("generate", ["--block-size", "12"], ["--block-size", "8, 16 or 32", "'12'"]),
    ("generate", ["--temperature", "500"], ["--temperature", "'500'"]),
    ("chat", ["--top-p", "2"], ["--top-p", "'2'"]),
    ("generate", ["--kv-cache-memory", "lots"], ["--kv-cache-memory", "'lots'"]),
    ("serve", ["--max-body-size", "8GiB"], ["--max-body-size", "at most 4GiB", "'8GiB'"]),
    ("quantize", ["--method", "spqr"], ["--method", "rtn, gptq or awq", "'spqr'"]),
    ("bench serve", ["--request-rate", "-3"], ["--request-rate", "'-3'"]),
    ("bench serve", ["--extra-body", "[1]"], ["--extra-body", "JSON object", "'[1]'"]),
    ("eval-compare", ["-n", "0"], ["-n", "'0'"]),
    ("logits", ["--threads"], ["--threads", "needs a value"]),
])
def test_bad_value_is_named(run_cllm, command, args, needles):
    p = run_cllm(*args_of(command), *args)
    assert p.returncode == 1 and p.stdout == ""
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"cllm {command}: "), p.stderr
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])


def test_missing_required_says_what_and_how(run_cllm):
    p = run_cllm("perplexity", "model.gguf")
    assert p.returncode == 1
    assert "missing --file" in p.stderr and "usage: cllm perplexity MODEL --file TEXT" in p.stderr
    p = run_cllm("eval-compare", "a.gguf", "b.gguf")
    assert p.returncode == 1 and "missing --prompts-file" in p.stderr


def test_generate_kv_cache_memory_takes_sizes_as_serve_does(run_cllm, model_factory):
    for size, expected in (("1gib", 1 << 30), ("512MiB", 512 << 20), ("2g", 2 << 30), ("1GB", 10 ** 9)):
        for command in ("generate", "serve", "bench offline"):
            assert config(run_cllm, command, "--kv-cache-memory", size)["kv-cache-memory"] == expected, (command, size)
    model = model_factory("llama")
    run = ["generate", "-m", model, "-p", "hello", "-n", 6, "--temperature", 0]
    small = run_cllm(*run, "--kv-cache-memory", "1gib")
    assert small.returncode == 0, small.stderr
    assert small.stdout == run_cllm(*run).stdout


def test_print_config_shows_defaults_and_positionals(run_cllm):
    doc = config(run_cllm, "quantize", "in.gguf", "out.gguf", "--keep", "a", "--keep", "b", "-q")
    assert doc["in"] == "in.gguf" and doc["out.gguf"] == "out.gguf"
    assert doc["keep"] == ["a", "b"] and doc["quiet"] is True and doc["bits"] == 4 and doc["method"] == "rtn"
    doc = config(run_cllm, "serve", "model.gguf", "--api-key", "secret")
    assert doc["model"] == ["model.gguf"] and doc["port"] == 8000 and doc["max-model-len"] is None
    assert "secret" not in json.dumps(doc)
