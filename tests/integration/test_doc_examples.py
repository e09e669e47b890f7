"""Every `sh` block of README.md and docs/*.md, run as a user would run it.

Each logical line of a block (backslash continuations joined, a synopsis's
indented `[...]` lines joined to the line they continue) is one of:

- an example: a concrete command. The placeholders below are replaced by
  real files (the test model, a second copy of it where an example serves
  two models or drafts with a small one, a long public-domain text), and the
  command runs in the repository's root with the build's `cllm` first on
  PATH. A `cllm serve` (or `make run`, or one under `mpirun`) must answer
  /health and /v1/models and then stop on SIGTERM; anything else must exit 0
  within its timeout. A hang, a crash or a non-zero exit fails.
- a synopsis: a line with `[optional]` parts, `a|b` choices, `...` or an
  unfilled placeholder (N, FILE, ...). It cannot run as written, so every
  option it names must be one its command's `--help` lists (the help is
  printed from the table that parses the command line), and that help must
  exit 0.
- marked in the file, visibly, with a comment `# not run here: WHY` (for
  example `make test`, which is the command running this test). Counted and
  listed, never run.

The module prints one line per command with its result."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
import requests

import long_text
from conftest import DOC_EXAMPLE_ROWS
from server_util import LISTEN_RE

REPO = Path(__file__).resolve().parents[2]
DOC_FILES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
FENCE_OPEN = re.compile(r"^```(sh|bash|shell)\s*$")
NOT_RUN = re.compile(r"#\s*not run here:\s*(.+)$")
QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"")
# A placeholder left unfilled: a word in capitals (N, K, FILE, DIR, OUT.gguf, RESULT.json...).
PLACEHOLDER = re.compile(r"(?<![\w./~=-])[A-Z][A-Z0-9_]*(\.[a-z0-9]+)*(?![\w/-])")
OPTION = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")
RUN_TIMEOUT = 300
SERVE_TIMEOUT = 120


def commands_of(path: Path):
    """(line number, command text, comment) for every logical line of every sh block."""
    lines = path.read_text().splitlines()
    out, i = [], 0
    while i < len(lines):
        if not FENCE_OPEN.match(lines[i]):
            i += 1
            continue
        i += 1
        cur = None  # [line number, text, comment]
        while i < len(lines) and not lines[i].startswith("```"):
            raw = lines[i]
            code, comment = split_comment(raw)
            continues = cur is not None and (cur[1].endswith("\\") or re.match(r"^\s+\[", raw))
            if continues:
                cur[1] = cur[1].rstrip("\\").rstrip() + " " + code.strip()
                cur[2] = (cur[2] + " " + comment).strip()
            elif code.strip():
                if cur:
                    out.append(tuple(cur))
                cur = [i + 1, code.strip(), comment]
            i += 1
        if cur:
            out.append(tuple(cur))
        i += 1
    return out


def split_comment(line: str):
    """The code of a shell line and its trailing comment (a # outside quotes, after a space or at the start)."""
    quote = None
    for k, ch in enumerate(line):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (k == 0 or line[k - 1].isspace()):
            return line[:k].rstrip(), line[k + 1:].strip()
    return line.rstrip(), ""


def all_commands():
    found = []
    for path in DOC_FILES:
        for lineno, code, comment in commands_of(path):
            found.append((f"{path.relative_to(REPO)}:{lineno}", code, comment))
    return found


COMMANDS = all_commands()


@pytest.fixture(scope="module")
def files(tmp_path_factory, real_model_path, cllm_bin):
    """What each placeholder of an example stands for."""
    d = tmp_path_factory.mktemp("doc_examples")
    heads = d / "heads.gguf"  # Medusa heads for the test model, trained small
    p = subprocess.run([str(cllm_bin), "medusa", "train", str(real_model_path), "--data",
                        str(REPO / "data" / "medusa_train_prompts.txt"), "--max-prompts", "8", "--gen-tokens", "16",
                        "--out", str(heads)], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    second = d / "qwen.gguf"  # a second model to serve beside the first: the same weights under another name
    shutil.copyfile(real_model_path, second)
    assert long_text.available(), "scripts/setup.sh installs bible-kjv bible-kjv-text"
    text = d / "genesis.txt"
    text.write_text(long_text.long_text())
    return {"MODEL": str(real_model_path), "gemma.gguf": str(real_model_path),
            "gemma-3-270m.gguf": str(real_model_path), "qwen.gguf": str(second), "SMALL.gguf": str(second),
            "HEADS.gguf": str(heads), "TEXT": str(text), "PROMPT": "Once upon a time"}


def substitute(code: str, files: dict) -> str:
    for name, value in files.items():
        code = re.sub(r"(?<![\w./-])" + re.escape(name) + r"(?![\w-])", lambda _: shlex.quote(value), code)
    return code


def synopsis_reason(code: str):
    """Why a line cannot run as written, or None for a concrete command."""
    bare = QUOTED.sub("''", code)
    if "[" in bare or "]" in bare:
        return "optional parts"
    if "..." in bare:
        return "an ellipsis"
    if "|" in bare:
        return "choices"
    m = PLACEHOLDER.search(bare)
    if m:
        return f"placeholder {m.group(0)}"
    return None


def help_of(code: str, env: dict):
    """The --help text of the command a synopsis line shows, or None when it is not a cllm command."""
    words = QUOTED.sub("''", code).split()
    if "cllm" not in words:
        return None
    words = words[words.index("cllm") + 1:]
    cmd = words[:1]
    if cmd in (["bench"], ["medusa"]):  # commands with subcommands
        cmd = words[:2]
    p = subprocess.run(["cllm", *cmd, "--help"], capture_output=True, text=True, env=env, timeout=60)
    assert p.returncode == 0, f"cllm {' '.join(cmd)} --help: exit {p.returncode}\n{p.stderr}"
    return p.stdout + p.stderr


def is_server(code: str) -> bool:
    words = code.split()
    return code.startswith("make run") or ("cllm" in words and words[words.index("cllm") + 1:][:1] == ["serve"])


def run_server(code: str, env: dict) -> str:
    cmd = code.replace("make run", "make run PORT=0", 1) if code.startswith("make run") else code + " --port 0"
    proc = subprocess.Popen(cmd, shell=True, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    log, port = [], None
    try:
        deadline = time.time() + SERVE_TIMEOUT
        while port is None:
            line = proc.stderr.readline()
            if not line:
                pytest.fail(f"{cmd}: exited ({proc.wait()}) before listening:\n{''.join(log)}")
            log.append(line)
            m = LISTEN_RE.search(line)
            if m:
                port = int(m.group(2))
            if time.time() > deadline:
                pytest.fail(f"{cmd}: not listening in {SERVE_TIMEOUT} s:\n{''.join(log)}")
        base = f"http://127.0.0.1:{port}"
        while True:
            try:
                if requests.get(base + "/health", timeout=5).status_code == 200:
                    break
            except requests.ConnectionError:
                pass
            if proc.poll() is not None or time.time() > deadline:
                pytest.fail(f"{cmd}: /health never answered 200:\n{''.join(log)}")
            time.sleep(0.1)
        models = requests.get(base + "/v1/models", timeout=30)
        assert models.status_code == 200 and models.json()["data"], models.text
        return f"served {', '.join(m['id'] for m in models.json()['data'])}"
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                pytest.fail(f"{cmd}: did not stop within 60 s of SIGTERM")


@pytest.fixture(scope="module")
def env(build_dir):
    e = dict(os.environ)
    e["PATH"] = f"{build_dir}{os.pathsep}{e['PATH']}"
    # OpenMPI refuses root unless told (docs/tensor-parallelism.md's first block says so).
    e.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    for k in ("CLLM_API_KEY", "VLLM_API_KEY"):
        e.pop(k, None)
    return e


@pytest.fixture(scope="module")
def report(request):
    """Rows (where, result, detail) that conftest's pytest_terminal_summary prints."""
    rows = request.config.stash.setdefault(DOC_EXAMPLE_ROWS, [])
    return rows


def test_the_docs_have_examples():
    assert len(COMMANDS) > 50, COMMANDS  # the parser found the blocks


@pytest.mark.parametrize("where,code,comment", COMMANDS, ids=[c[0] for c in COMMANDS])
def test_example(where, code, comment, files, env, report):
    marked = NOT_RUN.search("# " + comment) if comment else None
    if marked:
        report.append((where, "not run here", f"{code}  ({marked.group(1)})"))
        return
    shown, code = code, substitute(code, files)
    why = synopsis_reason(code)
    if why:
        help_text = help_of(code, env)
        assert help_text is not None, f"{where}: `{code}` is neither runnable ({why}) nor a cllm synopsis; " \
                                      f"mark it `# not run here: WHY` if it cannot run"
        named = sorted(set(OPTION.findall(QUOTED.sub("''", code))))
        unknown = [o for o in named if not re.search(r"(?<![\w-])" + re.escape(o) + r"(?![\w-])", help_text)]
        assert not unknown, f"{where}: `{code}` names options its --help does not list: {unknown}"
        report.append((where, "synopsis checked", f"{len(named)} options ({why}): {shown[:70]}"))
        return
    t0 = time.time()
    if is_server(code):
        detail = run_server(code, env)
    else:
        p = subprocess.run(code, shell=True, cwd=REPO, env=env, capture_output=True, text=True,
                           stdin=subprocess.DEVNULL, timeout=RUN_TIMEOUT)
        assert p.returncode == 0, f"{where}: `{code}` exited {p.returncode}\n{p.stdout[-2000:]}\n{p.stderr[-4000:]}"
        detail = "exit 0"
    report.append((where, "ran", f"{detail} in {time.time() - t0:.1f} s: {shown[:70]}"))


def test_readme_is_short_and_links_every_docs_page():
    """The README is the first five minutes (at most 200 lines); the manual is in
    docs/, and the README links every page of it."""
    readme = (REPO / "README.md").read_text()
    assert len(readme.splitlines()) <= 200, f"README.md has {len(readme.splitlines())} lines, more than 200"
    unlinked = [p.name for p in sorted((REPO / "docs").glob("*.md")) if f"](docs/{p.name}" not in readme]
    assert not unlinked, f"docs pages the README does not link: {unlinked}"
    assert readme.startswith("# cllm\n\n```sh\nmake run ") and "\nmake test " in readme.split("```")[1], \
        "the README starts with its two commands: make run, then make test"
