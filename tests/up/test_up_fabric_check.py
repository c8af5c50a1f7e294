"""`up` runs every site on local processes: a fabric whose sites need a cluster is refused."""

from __future__ import annotations

from pathlib import Path

import pytest
from rich.console import Console

from onecluster.errors import FabricError
from onecluster.up import UpConfig, run_up

SLURM_FABRIC = Path(__file__).parents[2] / "examples" / "fabrics" / "three-site-slurm.yaml"


def test_a_fabric_of_slurm_sites_is_refused_before_anything_starts(tmp_path: Path) -> None:
    state = tmp_path / "state"
    config = UpConfig(fabric_path=SLURM_FABRIC, state_dir=state)
    with pytest.raises(FabricError, match=r"shanghai \(slurm\).*need their own cluster"):
        run_up(config, Console(file=None, quiet=True))
    assert not state.exists()  # nothing was started or written
