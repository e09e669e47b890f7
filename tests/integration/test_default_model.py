"""`make run`'s default chat model answers plain questions.

The model `make run` serves (scripts/default_model.py: Qwen2.5-Coder-1.5B-Instruct
in Q4_K_M, assembled by scripts/setup.sh) is served as `make run` serves it and
asked the 20 questions of tests/data/chat_questions.json through the official
`openai` client, greedy: at least 15 answers must hold the expected keyword
(docs/first-run.md records all 20). The chat page's part of this is in
test_webui_browser.py."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from server_util import CllmServer, default_chat_model

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))

import chat_answers  # noqa: E402 - bench/ is not a package

MIN_HITS = 15


@pytest.fixture(scope="module")
def chat_server(cllm_bin):
    with CllmServer(cllm_bin, default_chat_model()) as srv:
        yield srv


def test_the_default_model_answers_plain_questions(chat_server):
    from openai import OpenAI

    client = OpenAI(base_url=chat_server.url("/v1"), api_key="none")
    model = client.models.list().data[0].id
    assert model == "qwen2.5-coder-1.5b-instruct-q4_k_m"
    rows = chat_answers.ask_all(client, model)
    print(chat_answers.markdown([model], [rows]))
    hits = sum(r["hit"] for r in rows)
    assert len(rows) == 20 and hits >= MIN_HITS, \
        f"{hits}/20 answers hold their keyword:\n" + chat_answers.markdown([model], [rows])
    # Each answer ends because the model ended it: no runaway repetition up to the limit.
    finished = [client.chat.completions.create(model=model, max_tokens=64, temperature=0, messages=[
        {"role": "user", "content": "How many legs does a spider have?"}]).choices[0].finish_reason]
    assert finished == ["stop"], finished
