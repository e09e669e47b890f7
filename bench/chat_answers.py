"""Asks a model 20 plain questions through `cllm serve` and the official
`openai` client, as a new user would after `make run`, and prints the answers
as a Markdown table with whether each holds the expected keyword
(docs/first-run.md records them): how the default model is chosen.

    python3 bench/chat_answers.py MODEL [MODEL ...] [--max-tokens 64]

The questions and their keywords (regular expressions, case-insensitive) are
tests/data/chat_questions.json, which tests/integration/test_default_model.py
asks `make run`'s model too. Greedy (temperature 0), one conversation per
question, the model's own chat template; the time is the whole answer's, on
this machine's threads.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
QUESTIONS = ROOT / "tests" / "data" / "chat_questions.json"


def load_questions() -> list[dict]:
    """[{question, expect}]"""
    return json.loads(QUESTIONS.read_text())


def ask_all(client, model: str, max_tokens: int = 64) -> list[dict]:
    """One greedy chat completion per question: [{question, expect, answer, hit, seconds}]."""
    out = []
    for q in load_questions():
        t0 = time.time()
        r = client.chat.completions.create(model=model, messages=[{"role": "user", "content": q["question"]}],
                                           temperature=0, max_tokens=max_tokens)
        answer = r.choices[0].message.content or ""
        out.append(dict(q, answer=answer, hit=bool(re.search(q["expect"], answer, re.IGNORECASE)),
                        seconds=time.time() - t0))
    return out


def cell(text: str, cut: int = 0) -> str:
    text = " ".join(text.split())
    if cut and len(text) > cut:
        text = text[:cut].rstrip() + " …"
    return text.replace("|", "\\|") or "(empty)"


def default_cllm() -> Path:
    """$CLLM_BUILD_DIR's, else the one on PATH, else build/cllm."""
    if os.environ.get("CLLM_BUILD_DIR"):
        return Path(os.environ["CLLM_BUILD_DIR"]) / "cllm"
    found = shutil.which("cllm")
    return Path(found) if found else ROOT / "build" / "cllm"


def ask_served(cllm: Path, model: str, max_tokens: int) -> list[dict]:
    import openai

    sys.path.insert(0, str(ROOT / "tests" / "integration"))
    from server_util import CllmServer

    with CllmServer(cllm, model, "--max-model-len", "1024") as srv:
        client = openai.OpenAI(base_url=srv.url("/v1"), api_key="none", max_retries=0, timeout=300)
        return ask_all(client, client.models.list().data[0].id, max_tokens)


def markdown(models: list[str], answers: list[list[dict]], cut: int = 0) -> str:
    lines = ["| # | question | " + " | ".join(Path(m).name for m in models) + " |",
             "|---|---|" + "---|" * len(models)]
    for i, q in enumerate(answers[0]):
        marks = [cell(a[i]["answer"], cut) + ("" if a[i]["hit"] else " **(no)**") for a in answers]
        lines.append(f"| {i + 1} | {cell(q['question'])} | " + " | ".join(marks) + " |")
    lines.append("| | keyword found | " + " | ".join(f"{sum(r['hit'] for r in a)}/{len(a)}" for a in answers) + " |")
    lines.append("| | seconds, all 20 | " + " | ".join(f"{sum(r['seconds'] for r in a):.1f}" for a in answers) + " |")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", nargs="+")
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--cut", type=int, default=0, help="cut answers longer than this many characters (0: never)")
    ap.add_argument("--cllm", type=Path, default=default_cllm(), help="the binary (default: %(default)s)")
    args = ap.parse_args()
    answers = [ask_served(args.cllm, m, args.max_tokens) for m in args.models]
    print(markdown(args.models, answers, args.cut))
    return 0


if __name__ == "__main__":
    sys.exit(main())
