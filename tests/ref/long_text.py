#!/usr/bin/env python3
"""A long public-domain text for long-context tests and benchmarks (KV
eviction): books of the King James Bible from Debian's bible-kjv-text, read
through its `bible` program (package bible-kjv; scripts/setup.sh installs
both), so nothing is fetched at run time. Each chapter is a heading line and
one paragraph of its verses, without verse numbers.

    python3 tests/ref/long_text.py OUT.txt [--books Genesis Exodus]
"""
from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys

# Chapters per book, for the verse specification `bible` takes.
CHAPTERS = {"Genesis": 50, "Exodus": 40, "Leviticus": 27, "Numbers": 36, "Deuteronomy": 34}


def available() -> bool:
    return shutil.which("bible") is not None


def book_text(book: str) -> str:
    out = subprocess.run(["bible", f"{book} 1:1-{CHAPTERS[book]}:999"], capture_output=True, text=True,
                         check=True, timeout=120).stdout
    chapters, verses = [], []
    for line in out.splitlines():
        if re.fullmatch(rf"{book} \d+", line.strip()):
            if verses:
                chapters.append(" ".join(verses))
            chapters.append(line.strip())
            verses = []
        elif line.strip():
            verses.append(re.sub(r"^\s+\d+\s+", "", line).strip())
    if verses:
        chapters.append(" ".join(verses))
    # Headings and paragraphs alternate: "Genesis 1", its verses, "Genesis 2", ...
    return "\n\n".join(chapters) + "\n"


def long_text(books=("Genesis",)) -> str:
    return "".join(book_text(b) for b in books)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--books", nargs="+", default=["Genesis"], choices=sorted(CHAPTERS))
    a = ap.parse_args()
    if not available():
        print("long_text.py: the `bible` program is missing (apt-get install bible-kjv bible-kjv-text)",
              file=sys.stderr)
        return 1
    with open(a.out, "w", encoding="utf-8") as f:
        f.write(long_text(a.books))
    return 0


if __name__ == "__main__":
    sys.exit(main())
