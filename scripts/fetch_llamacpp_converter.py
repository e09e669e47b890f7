"""Fetches llama.cpp's own Hugging Face -> GGUF converter, as
llama-cpp-python's source distribution on PyPI carries it
(vendor/llama.cpp/convert_hf_to_gguf.py, its conversion/ package and the
gguf-py it imports), into a cache folder outside the repository.
tests/integration/test_families.py converts transformers' checkpoints with it
and compares cllm with llama.cpp on the files it writes.

    python3 scripts/fetch_llamacpp_converter.py   # prints the folder

The version is the installed llama-cpp-python's, so the converter and the
llama.cpp that reads its files agree. The folder is
$CLLM_CACHE (default ~/.cache/cllm)/llama-cpp-python-<version>/converter; run
convert_hf_to_gguf.py from there. Safe to run again.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fetch_chat_templates as sdist  # noqa: E402


def _converter(path: str):
    keep = path == "convert_hf_to_gguf.py" or path.startswith(("conversion/", "gguf-py/gguf/"))
    return path if keep and not path.endswith((".pyc", ".md")) else None


def converter_dir(version: str | None = None) -> Path:
    return sdist.cache_root() / f"{sdist.PACKAGE}-{version or sdist.package_version()}" / "converter"


def fetch(version: str | None = None) -> Path:
    return sdist.extract(version or sdist.package_version(), "converter", _converter)


if __name__ == "__main__":
    print(fetch())
