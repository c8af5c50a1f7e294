"""Architecture rules the code must keep (docs/architecture.md):

- imports point down the layers only;
- no module past 600 lines;
- nothing reads the environment except the CLI entry point;
- every package re-exports a curated surface with ``__all__``.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "onecluster"

# Lower number = lower layer.  A module may import only from its own layer or below.
LAYER = {
    "errors": 0,
    "clock": 0,
    "process": 0,
    "model": 1,
    "fabric": 2,
    "topology": 2,
    "scheduler": 2,
    "workload": 2,
    "reports": 2,
    "simulate": 3,
    "schema": 3,
    "store": 4,
    "backends": 4,
    "network": 4,
    "telemetry": 4,
    "client": 5,
    "server": 6,
    "agent": 6,
    "gateway": 6,
    "launch": 6,
    "up": 7,
    "lab": 7,
    "cli": 8,
}


def _area(module_path: Path) -> str:
    rel = module_path.relative_to(SRC)
    return rel.parts[0].removesuffix(".py")


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    found: set[str] = set()
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.ImportFrom)
            and node.module
            and node.module.startswith("onecluster.")
        ):
            found.add(node.module.split(".")[1])
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("onecluster."):
                    found.add(alias.name.split(".")[1])
    return found


SOURCES = sorted(p for p in SRC.rglob("*.py") if "migrations" not in p.parts)


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(SRC)))
def test_imports_point_down(path: Path) -> None:
    area = _area(path)
    if area == "__init__":
        return
    mine = LAYER[area]
    for dep in _imports(path):
        assert dep in LAYER, f"{path.name} imports unknown area {dep}"
        assert LAYER[dep] <= mine, (
            f"{area} (layer {mine}) must not import {dep} (layer {LAYER[dep]})"
        )


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(SRC)))
def test_modules_stay_small(path: Path) -> None:
    assert len(path.read_text().splitlines()) <= 600


# Configuration comes from the environment only at the edges.  The local backend passes
# the agent's environment on to the job processes it starts (it reads no setting from it),
# and so does the Slurm backend to the jobs it submits (sbatch --export=ALL).
ENV_ALLOWED = {"cli", "up"}
ENV_PASS_THROUGH = {"backends/_local.py", "backends/_slurm.py"}


def test_only_the_cli_reads_the_environment() -> None:
    offenders = [
        str(p.relative_to(SRC))
        for p in SOURCES
        if ("os.environ" in p.read_text() or "os.getenv" in p.read_text())
        and _area(p) not in ENV_ALLOWED
        and str(p.relative_to(SRC)) not in ENV_PASS_THROUGH
    ]
    assert offenders == []


@pytest.mark.parametrize("area", sorted(a for a in LAYER if (SRC / a).is_dir()))
def test_packages_curate_their_surface(area: str) -> None:
    module = importlib.import_module(f"onecluster.{area}")
    exported = getattr(module, "__all__", None)
    assert exported, f"onecluster.{area} must declare __all__"
    for name in exported:
        assert hasattr(module, name), f"onecluster.{area}.__all__ names missing {name}"
