"""docs/cli.md, the command-line reference, is what the binary's --help prints
today: scripts/gen_cli_doc.py --check regenerates it and fails on a difference."""

from __future__ import annotations

import subprocess
import sys


def test_cli_reference_is_not_stale(repo_root, cllm_bin):
    p = subprocess.run([sys.executable, str(repo_root / "scripts" / "gen_cli_doc.py"), "--cllm", str(cllm_bin),
                        "--check"], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout[-6000:] + p.stderr


def test_cli_reference_names_every_command(repo_root, run_cllm):
    top = run_cllm("--help").stdout + run_cllm("--help").stderr
    listed = [line.split()[0] for line in top.split("commands:")[1].splitlines() if line.startswith("  ")]
    page = (repo_root / "docs" / "cli.md").read_text()
    missing = [c for c in listed if c not in ("bench", "medusa") and f"## cllm {c}\n" not in page]
    missing += [f"bench {b}" for b in ("offline", "serve", "plot") if f"## cllm bench {b}\n" not in page]
    missing += [] if "## cllm medusa train\n" in page else ["medusa train"]
    assert len(listed) >= 10 and not missing, (listed, missing)
