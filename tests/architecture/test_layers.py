"""Architecture rules the code must keep (docs/architecture.md):

- imports point down the layers only, never sideways into another package of the same
  layer (unless :data:`SIDEWAYS` says why);
- the pure cores import no I/O, no locks, no clocks and no wire types;
- no module past 600 lines;
- nothing reads the environment except the CLI entry point;
- every package re-exports a curated surface with ``__all__``.

An import is any form that names an area: ``import onecluster.X``, ``from onecluster.X
import …``, ``from onecluster import X`` and relative imports that leave the package.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "onecluster"

# Lower number = lower layer.  A module may import from its own package and from lower
# layers; from another package of its own layer only as SIDEWAYS allows.
LAYER = {
    "errors": 0,
    "clock": 0,
    "process": 0,
    "state_dir": 0,
    "logs": 0,
    "deploy": 0,  # the shipped Prometheus rules and Grafana dashboard: files, no imports
    "model": 1,
    "fabric": 2,
    "topology": 2,
    "scheduler": 2,
    "workload": 2,
    "reports": 2,
    "transfer": 2,
    "export": 2,
    "planner": 2,
    "simulate": 3,
    "schema": 3,
    "store": 4,
    "backends": 4,
    "network": 4,
    "telemetry": 4,
    "storage": 4,
    "dataplane": 4,
    "register": 4,
    "training": 4,
    "client": 5,
    "server": 6,
    "agent": 6,
    "gateway": 6,
    "launch": 6,
    "up": 7,
    "lab": 7,
    "cli": 8,
}

# (importer, imported) → why this sideways import is right.  Otherwise each package of a
# layer stands on the layers below, so it can be built, tested and replaced on its own.
SIDEWAYS: dict[tuple[str, str], str] = {
    ("training", "telemetry"): (
        "a training worker serves its /metrics with telemetry's MetricsServer, the project's "
        "one Prometheus endpoint (a copy in training was the alternative; decision 191)"
    ),
}

# The package root's own names (it imports nothing, so naming them is no dependency).
ROOT_NAMES = {"__version__"}

# The pure cores: decisions as functions of state, with injected time.  They may import
# only these standard modules (no I/O, no threads or locks, no clock, no pydantic).
PURE = {"model", "topology", "scheduler", "planner"}
PURE_STDLIB = {
    "__future__",
    "abc",
    "bisect",
    "collections",
    "dataclasses",
    "enum",
    "functools",
    "heapq",
    "itertools",
    "math",
    "operator",
    "re",
    "types",
    "typing",
    "unicodedata",
    "zlib",  # for crc32, a pure checksum (the gang port of model._gang); no I/O
}


def _area(module_path: Path) -> str:
    rel = module_path.relative_to(SRC)
    return rel.parts[0].removesuffix(".py")


def _absolute(node: ast.ImportFrom, package: tuple[str, ...]) -> str:
    """The absolute module of ``from … import``, resolving a relative one from ``package``
    (the importing module's package, e.g. ``("onecluster", "server")``)."""
    if node.level == 0:
        return node.module or ""
    base = package[: len(package) - node.level + 1]
    return ".".join([*base, *([node.module] if node.module else [])])


def imported_areas(source: str, package: tuple[str, ...] = ("onecluster",)) -> set[str]:
    """Every onecluster area ``source`` imports (a name of the root, for ``from onecluster
    import X``; ``onecluster`` itself for a bare ``import onecluster``)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            module = _absolute(node, package).split(".")
            if module[0] != "onecluster":
                continue
            if len(module) > 1:
                found.add(module[1])
            else:
                found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == "onecluster":
                    found.add(parts[1] if len(parts) > 1 else "onecluster")
    return found


def third_party(source: str) -> set[str]:
    """The top-level modules outside onecluster that ``source`` imports."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
        elif isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
    return found - {"onecluster"}


def _package(path: Path) -> tuple[str, ...]:
    rel = path.relative_to(SRC.parent)
    parts = rel.parts if path.name == "__init__.py" else rel.parts[:-1]
    return tuple(p for p in parts if p != "__init__.py")


SOURCES = sorted(p for p in SRC.rglob("*.py") if "migrations" not in p.parts)


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(SRC)))
def test_imports_point_down(path: Path) -> None:
    area = _area(path)
    if area == "__init__":
        return
    mine = LAYER[area]
    for dep in imported_areas(path.read_text(), _package(path)) - ROOT_NAMES - {area}:
        assert dep in LAYER, f"{path.name} imports {dep!r}, which is no area: import the area"
        assert LAYER[dep] <= mine, (
            f"{area} (layer {mine}) must not import {dep} (layer {LAYER[dep]})"
        )
        assert LAYER[dep] < mine or (area, dep) in SIDEWAYS, (
            f"{area} must not import {dep}, beside it in layer {mine}: move what both need "
            "down a layer, or say why in SIDEWAYS"
        )


def test_every_sideways_import_allowed_is_still_made() -> None:
    made = {
        (_area(p), dep)
        for p in SOURCES
        if _area(p) != "__init__"
        for dep in imported_areas(p.read_text(), _package(p))
    }
    assert set(SIDEWAYS) <= made, "drop the SIDEWAYS entries no module needs any more"


@pytest.mark.parametrize(
    "path",
    [p for p in SOURCES if _area(p) in PURE],
    ids=lambda p: str(p.relative_to(SRC)),
)
def test_pure_cores_import_no_io(path: Path) -> None:
    extra = third_party(path.read_text()) - PURE_STDLIB
    assert not extra, f"{path.relative_to(SRC)} is pure and must not import {sorted(extra)}"


@pytest.mark.parametrize(
    ("source", "package", "areas"),
    [
        ("from onecluster import errors, gateway", ("onecluster", "server"), {"errors", "gateway"}),
        ("import onecluster.gateway._app as app", ("onecluster", "server"), {"gateway"}),
        ("import onecluster", ("onecluster", "server"), {"onecluster"}),
        ("from .. import gateway", ("onecluster", "server"), {"gateway"}),
        ("from ..gateway import _app", ("onecluster", "server"), {"gateway"}),
        ("from . import _views", ("onecluster", "server"), {"server"}),
        ("from ._views import job_out", ("onecluster", "server"), {"server"}),
        ("def f():\n    from onecluster.gateway import x\n", ("onecluster",), {"gateway"}),
        ("import os\nfrom httpx import Client", ("onecluster", "server"), set()),
    ],
)
def test_every_form_of_import_is_seen(
    source: str, package: tuple[str, ...], areas: set[str]
) -> None:
    assert imported_areas(source, package) == areas


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(SRC)))
def test_modules_stay_small(path: Path) -> None:
    assert len(path.read_text().splitlines()) <= 600


# Configuration comes from the environment only at the edges.  The local backend passes
# the agent's environment on to the job processes it starts (it reads no setting from it),
# and so does the Slurm backend to the jobs it submits (sbatch --export=ALL).
ENV_ALLOWED = {"cli", "up"}
# The training launcher and the example worker are the entry points of the processes a
# gang's attempt runs: they read the variables the server and the launcher set for them.
ENV_PASS_THROUGH = {
    "backends/_local.py",
    "backends/_slurm.py",
    "training/_launcher.py",
    "training/chargpt/__main__.py",
}


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
