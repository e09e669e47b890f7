"""deploy/test under pytest, so `make test` runs it: three `cllm serve`
replicas behind Debian's nginx on loopback (spread, session affinity, a
replica killed and one drained under load; see the script's docstring). It
prints what it measured; the script itself bounds its time (90 s)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest


def test_deploy_script(repo_root, cllm_bin):
    if not shutil.which("nginx"):
        pytest.fail("nginx is missing: run scripts/setup.sh (apt-get install nginx)", pytrace=False)
    env = dict(os.environ, CLLM_BUILD_DIR=str(cllm_bin.parent))
    r = subprocess.run([sys.executable, str(repo_root / "deploy" / "test"), "--cllm", str(cllm_bin)],
                       capture_output=True, text=True, timeout=180, env=env)
    print(r.stdout)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "every check passed" in r.stdout
