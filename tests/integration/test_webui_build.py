"""The chat page's libraries come from Debian packages at build time: where
one is missing, CMake stops at configure time and names the package to
install (and the file it looked for), rather than building a page that
cannot render."""

from __future__ import annotations

import shutil
import subprocess

import pytest


@pytest.mark.parametrize("missing,package", [
    ("marked/marked.min.js", "libjs-marked"),
    ("highlight.js/highlight.min.js", "libjs-highlight.js"),
])
def test_configure_names_the_missing_package(repo_root, tmp_path, missing, package):
    js_dir = tmp_path / "javascript"
    shutil.copytree("/usr/share/javascript/marked", js_dir / "marked")
    shutil.copytree("/usr/share/javascript/highlight.js", js_dir / "highlight.js")
    (js_dir / missing).unlink()
    r = subprocess.run(["cmake", "-S", str(repo_root), "-B", str(tmp_path / "build"), f"-DCLLM_JS_DIR={js_dir}"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode != 0
    message = " ".join(r.stderr.split())
    assert f"install the Debian package '{package}'" in message, r.stderr
    assert str(js_dir / missing) in message, r.stderr


def test_configure_takes_the_packages_files(repo_root, tmp_path):
    r = subprocess.run(["cmake", "-S", str(repo_root), "-B", str(tmp_path / "build"),
                        "-DCLLM_JS_DIR=/usr/share/javascript"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    generated = (tmp_path / "build" / "webui_assets.c").read_text()
    assert '{"/webui/marked.min.js", "text/javascript; charset=utf-8", "public, max-age=86400"' in generated
