"""Runs llama.cpp's own convert_hf_to_gguf.py (fetched by
scripts/fetch_llamacpp_converter.py) on a Hugging Face folder, with its own
gguf-py, not the installed gguf package:

    python3 tests/ref/convert_gguf.py CONVERTER_DIR MODEL_DIR --outfile F.gguf --outtype f16

One change to it: where a family's converter would read a byte-level BPE
tokenizer (_set_vocab_gpt2, e.g. OLMo 2's), it reads the folder's SentencePiece
model instead, as Llama's and Qwen3's converters do first. The BPE path only
accepts tokenizers whose pre-tokenizer it recognises by hashing a real
model's token ids, which a synthetic vocabulary cannot give; the tensors and
metadata, which these tests compare, are converted as the converter converts
them."""

from __future__ import annotations

import runpy
import sys
from pathlib import Path


def main() -> None:
    conv = Path(sys.argv[1]).resolve()
    sys.path[:0] = [str(conv / "gguf-py"), str(conv)]
    from conversion import base  # noqa: E402  (after the path: llama.cpp's gguf-py)

    base.TextModel._set_vocab_gpt2 = base.TextModel._set_vocab_sentencepiece
    sys.argv = [str(conv / "convert_hf_to_gguf.py"), *sys.argv[2:]]
    runpy.run_path(sys.argv[0], run_name="__main__")


if __name__ == "__main__":
    main()
