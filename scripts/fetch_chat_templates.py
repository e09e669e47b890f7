"""Fetches the real chat templates llama.cpp keeps under models/templates, as
llama-cpp-python's source distribution on PyPI carries them, into a cache
folder outside the repository. tests/integration/test_chat_template.py renders
each one with jinja2 and with cllm and requires the same bytes.

    python3 scripts/fetch_chat_templates.py      # prints the folder

The version is the installed llama-cpp-python's (tests/requirements.txt), so
the templates and the package agree. The folder is
$CLLM_CACHE (default $XDG_CACHE_HOME/cllm, i.e. ~/.cache/cllm)
/llama-cpp-python-<version>/templates. Safe to run again: a complete folder
is left alone.
"""
from __future__ import annotations

import importlib.metadata
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

PACKAGE = "llama-cpp-python"
MEMBER_DIR = "vendor/llama.cpp/models/templates/"
DONE = ".complete"  # written last: a folder without it is an interrupted fetch


def cache_root() -> Path:
    if os.environ.get("CLLM_CACHE"):
        return Path(os.environ["CLLM_CACHE"])
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "cllm"


def package_version() -> str:
    return importlib.metadata.version(PACKAGE)


def templates_dir(version: str | None = None) -> Path:
    return cache_root() / f"{PACKAGE}-{version or package_version()}" / "templates"


def is_complete(folder: Path) -> bool:
    return (folder / DONE).is_file()


def fetch(version: str) -> Path:
    dest = templates_dir(version)
    if is_complete(dest):
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=dest.parent) as tmp:
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--disable-pip-version-check",
                        "--no-deps", "--no-binary", ":all:", f"{PACKAGE}=={version}", "-d", tmp],
                       check=True)
        sdists = list(Path(tmp).glob("*.tar.gz"))
        if len(sdists) != 1:
            sys.exit(f"fetch_chat_templates: expected one sdist in {tmp}, found {sdists}")
        out = Path(tmp) / "templates"
        out.mkdir()
        n = 0
        with tarfile.open(sdists[0]) as tar:
            for m in tar:
                # <name>-<version>/vendor/llama.cpp/models/templates/<file>.jinja
                _, _, rest = m.name.partition("/")
                if not (m.isfile() and rest.startswith(MEMBER_DIR) and rest.endswith(".jinja")):
                    continue
                name = rest[len(MEMBER_DIR):]
                if "/" in name:
                    continue
                (out / name).write_bytes(tar.extractfile(m).read())
                n += 1
        if n == 0:
            sys.exit(f"fetch_chat_templates: no {MEMBER_DIR}*.jinja in {sdists[0].name}")
        (out / DONE).write_text(f"{PACKAGE} {version}: {n} templates\n")
        if dest.exists():
            shutil.rmtree(dest)
        out.rename(dest)
    return dest


def main() -> None:
    print(fetch(package_version()))


if __name__ == "__main__":
    main()
