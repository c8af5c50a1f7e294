"""The README's training walk-through, run as written: two "sites" on loopback train the
example char-GPT with DiLoCo and end with one model."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
BLOCK = re.compile(
    r"<!-- training-walk-through -->\n```sh\n(.*?)```\n<!-- /training-walk-through -->", re.S
)


def test_the_readme_training_walk_through_works_as_written(tmp_path: Path) -> None:
    found = BLOCK.search((ROOT / "README.md").read_text(encoding="utf-8"))
    assert found, "README.md has no training walk-through block between its markers"
    venv = Path(sys.prefix)
    if not (venv / "bin" / "activate").exists():
        pytest.skip(f"the tests do not run from a virtualenv ({sys.prefix})")
    (tmp_path / ".venv").symlink_to(venv)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ONECLUSTER_", "VIRTUAL_ENV"))}
    env.update(PATH="/usr/bin:/bin")
    done = subprocess.run(
        ["bash", "-c", "set -euo pipefail\n" + found.group(1)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    ends = []
    for r in (0, 1):
        lines = (tmp_path / f"train-{r}.jsonl").read_text().splitlines()
        ends.append(json.loads(lines[-1]))
    assert [e["event"] for e in ends] == ["end", "end"], (tmp_path / "train-1.log").read_text()
    assert ends[0]["val_loss"] == ends[1]["val_loss"]
    assert ends[0]["rounds"] == 4
