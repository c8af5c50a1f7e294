"""The README's walk-through, run as written: a server and the agents of all three sites on
this machine, a job placed, followed to its end and billed, then everything stopped.

The block between the README's ``walk-through`` markers runs in bash, in a folder laid out
like a checkout (the project's ``examples`` and ``.venv``), with a home of its own (the
agents' default work directories).  Real processes throughout.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.integration]

ROOT = Path(__file__).resolve().parents[2]
BLOCK = re.compile(
    r"<!-- walk-through: begin -->\n```bash\n(.*?)```\n<!-- walk-through: end -->", re.S
)


def walk_through() -> str:
    found = BLOCK.search((ROOT / "README.md").read_text(encoding="utf-8"))
    assert found, "README.md has no walk-through block between its markers"
    return found.group(1)


def checkout_like(tmp: Path) -> Path:
    """A folder with what the walk-through uses of a checkout, and nothing else."""
    folder = tmp / "checkout"
    folder.mkdir()
    (folder / "examples").symlink_to(ROOT / "examples")
    venv = Path(sys.prefix)
    if not (venv / "bin" / "activate").exists():
        pytest.skip(f"the tests do not run from a virtualenv ({sys.prefix})")
    (folder / ".venv").symlink_to(venv)
    return folder


def test_the_readme_walk_through_works_as_written(tmp_path: Path) -> None:
    folder = checkout_like(tmp_path)
    script = "set -euo pipefail\n" + walk_through()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ONECLUSTER_", "VIRTUAL_ENV"))}
    env.update(HOME=str(tmp_path / "home"), COLUMNS="120", PATH="/usr/bin:/bin")
    began = time.monotonic()
    proc = subprocess.Popen(
        ["bash", "-c", script],
        cwd=folder,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        out, _ = proc.communicate(timeout=240)
    finally:
        # whatever the walk-through left behind (it should have stopped it all itself)
        leftovers = _session_members(proc.pid)
        for pid in leftovers:
            os.kill(pid, signal.SIGKILL)
    logs = "".join(
        f"\n--- {p.name} ---\n{p.read_text(errors='replace')[-2000:]}"
        for p in sorted(folder.glob("*.log"))
    )
    assert proc.returncode == 0, f"exit {proc.returncode}\n{out}{logs}"
    assert leftovers == [], f"processes left running: {leftovers}"
    assert "step 20/20" in out, out
    assert "checkpoint saved in" in out, out
    assert re.search(r"completed", out), out
    assert "shanghai" in out and "singapore" in out and "tokyo" in out, out
    assert time.monotonic() - began < 240


def _session_members(sid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[3]) == sid and fields[0] not in ("Z", "X"):
            found.append(int(entry.name))
    return found
