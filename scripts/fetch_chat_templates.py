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
import sys
import tarfile
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # also when a test loads this file by path
from pip_retry import pip_download  # noqa: E402

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


def download_sdist(version: str, into: str) -> Path:
    """The llama-cpp-python sdist of `version`, downloaded from PyPI into `into`."""
    pip_download(["--no-deps", "--no-binary", ":all:", f"{PACKAGE}=={version}", "-d", into])
    sdists = list(Path(into).glob("*.tar.gz"))
    if len(sdists) != 1:
        sys.exit(f"fetch: expected one sdist in {into}, found {sdists}")
    return sdists[0]


def extract(version: str, folder: str, select) -> Path:
    """cache_root()/llama-cpp-python-<version>/<folder>: the sdist's members
    under vendor/llama.cpp/ for which select(path below vendor/llama.cpp/)
    gives the path to write them at (None: skip). A complete folder is left
    alone."""
    dest = cache_root() / f"{PACKAGE}-{version}" / folder
    if is_complete(dest):
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=dest.parent) as tmp:
        sdist = download_sdist(version, tmp)
        out = Path(tmp) / folder
        out.mkdir()
        n = 0
        with tarfile.open(sdist) as tar:
            for m in tar:
                # <name>-<version>/vendor/llama.cpp/<path>
                _, _, rest = m.name.partition("/")
                if not (m.isfile() and rest.startswith("vendor/llama.cpp/")):
                    continue
                name = select(rest[len("vendor/llama.cpp/"):])
                if name is None:
                    continue
                (out / name).parent.mkdir(parents=True, exist_ok=True)
                (out / name).write_bytes(tar.extractfile(m).read())
                n += 1
        if n == 0:
            sys.exit(f"fetch: nothing to extract into {folder} from {sdist.name}")
        (out / DONE).write_text(f"{PACKAGE} {version}: {n} files\n")
        if dest.exists():
            shutil.rmtree(dest)
        out.rename(dest)
    return dest


def _template(path: str):
    """models/templates/<file>.jinja -> <file>.jinja."""
    prefix = MEMBER_DIR[len("vendor/llama.cpp/"):]
    name = path[len(prefix):]
    return name if path.startswith(prefix) and path.endswith(".jinja") and "/" not in name else None


def fetch(version: str) -> Path:
    return extract(version, "templates", _template)


def main() -> None:
    print(fetch(package_version()))


if __name__ == "__main__":
    main()
