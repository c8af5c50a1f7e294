"""Real Slurm for the backend tests: ``scripts/slurm.sh`` installs Debian's Slurm (as root)
and starts three small clusters side by side; they are stopped, by PID, after the session.
Where Slurm cannot be had (not root and not installed) the Slurm tests are skipped, saying so.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def slurm_clusters(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Path]]:
    """``{site: SLURM_CONF}`` of the three running clusters."""
    if os.geteuid() != 0 and shutil.which("slurmctld") is None:
        pytest.skip("Slurm is not installed and this is not root (scripts/slurm.sh installs it)")
    base = tmp_path_factory.mktemp("slurm")
    env = {**os.environ, "ONECLUSTER_SLURM_DIR": str(base)}
    script = str(ROOT / "scripts" / "slurm.sh")
    done = subprocess.run(
        [script, "start"], capture_output=True, text=True, env=env, timeout=300, check=False
    )
    if done.returncode != 0:
        subprocess.run([script, "stop"], env=env, timeout=60, check=False)
        pytest.fail(f"scripts/slurm.sh start failed:\n{done.stderr}")
    confs = {line.split()[0]: Path(line.split()[1]) for line in done.stdout.splitlines()}
    pids = set(_daemon_pids(base))
    yield confs
    pids |= set(_daemon_pids(base))  # a test may have restarted one
    subprocess.run([script, "stop"], env=env, timeout=60, check=True)
    alive = sorted(pid for pid in pids if _alive(pid))
    assert not alive, f"Slurm daemons still running after scripts/slurm.sh stop: {alive}"
    assert not base.exists() or not any(base.iterdir()), f"{base} left behind"


def _daemon_pids(base: Path) -> list[int]:
    """The PIDs of every slurmctld and slurmd the clusters under ``base`` run."""
    return [int(p.read_text()) for p in sorted(base.glob("*/slurm*.pid"))]


def _alive(pid: int) -> bool:
    """Running: a zombie waiting for its parent to reap it counts as gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"
