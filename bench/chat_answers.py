"""Asks a model 20 plain questions through `cllm serve` and the official
`openai` client, as a new user would after `make run`, and prints the answers
as a Markdown table (docs/default-model.md records them): how the default
model is chosen.

    python3 bench/chat_answers.py MODEL [MODEL ...] [--max-tokens 64]

Greedy (temperature 0), one conversation per question, the model's own chat
template; the time is the whole answer's, on this machine's threads.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "integration"))

QUESTIONS = [
    "What is the capital of France?",
    "What is the capital of Japan?",
    "How many legs does a spider have?",
    "What is 7 times 8?",
    "What is 15 plus 27?",
    "What is the largest planet in the solar system?",
    "Who wrote Romeo and Juliet?",
    "What is the boiling point of water in degrees Celsius?",
    "Write a haiku about the sea.",
    "Name three primary colors.",
    "What language is spoken in Brazil?",
    "What is the chemical symbol for gold?",
    "How many days are in a leap year?",
    "Translate 'thank you' into Spanish.",
    "What is the opposite of 'cold'?",
    "Summarize in one sentence: The cat sat on the mat all afternoon, watching birds through the window "
    "until it fell asleep in the sun.",
    "What color is the sky on a clear day?",
    "Which animal is known as the king of the jungle?",
    "What is the square root of 81?",
    "Give one tip for staying healthy.",
]


def ask_all(cllm: Path, model: str, max_tokens: int):
    import openai
    from server_util import CllmServer

    with CllmServer(cllm, model, "--max-model-len", "1024") as srv:
        client = openai.OpenAI(base_url=srv.url("/v1"), api_key="none", max_retries=0, timeout=300)
        name = client.models.list().data[0].id
        for q in QUESTIONS:
            t0 = time.time()
            r = client.chat.completions.create(model=name, messages=[{"role": "user", "content": q}],
                                               temperature=0, max_tokens=max_tokens)
            yield q, r.choices[0].message.content or "", time.time() - t0


def cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|") or "(empty)"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", nargs="+")
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--cllm", type=Path, default=ROOT / "build" / "cllm")
    args = ap.parse_args()
    answers = [list(ask_all(args.cllm, m, args.max_tokens)) for m in args.models]
    print("| # | question | " + " | ".join(Path(m).name for m in args.models) + " |")
    print("|---|---|" + "---|" * len(args.models))
    for i, q in enumerate(QUESTIONS):
        print(f"| {i + 1} | {cell(q)} | " + " | ".join(cell(a[i][1]) for a in answers) + " |")
    for m, a in zip(args.models, answers):
        print(f"\n{Path(m).name}: {sum(t for _, _, t in a):.1f} s for the 20 answers", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
