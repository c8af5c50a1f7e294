"""Write a :class:`~onecluster.model.Fabric` back as fabric-file YAML.

The text is canonical: every field spelled out (defaults too), in the order
``docs/fabric.md`` gives, so that ``parse_fabric(dump_fabric(f)) == f`` for every fabric
``parse_fabric`` returns (tested with Hypothesis).  A server that starts on a database
holding no fabric yet stores its ``--fabric`` file this way as version 1.
"""

from __future__ import annotations

from typing import Any

import yaml

from onecluster.model import Circuit, Dataset, Fabric, LatencyObjective, Site, Team

__all__ = ["dump_fabric"]

_GB = 1_000_000_000


def dump_fabric(fabric: Fabric, *, comment: str | None = None) -> str:
    """``fabric`` as fabric-file YAML that :func:`~onecluster.fabric.parse_fabric` reads back
    equal; ``comment`` (one line or several) goes on top, each line after ``# ``."""
    doc: dict[str, Any] = {"fabric": fabric.name, "sites": [_site(s) for s in fabric.sites]}
    if fabric.circuits:
        doc["circuits"] = [_circuit(c) for c in fabric.circuits]
    if fabric.teams:
        doc["teams"] = [_team(t) for t in fabric.teams]
    if fabric.datasets:
        doc["datasets"] = [_dataset(d) for d in fabric.datasets]
    if fabric.objectives:
        doc["objectives"] = [_objective(o) for o in fabric.objectives]
    body = yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, width=100)
    if comment is None:
        return body
    head = "".join(f"# {line}\n" for line in comment.splitlines())
    return head + body


def _site(s: Site) -> dict[str, Any]:
    return {
        "name": s.name,
        "region": s.region,
        "jurisdiction": s.jurisdiction,
        "controls_export": s.controls_export,
        "backend": s.backend,
        "pools": [
            {"gpu_type": p.gpu_type, "count": p.count, "cost_per_gpu_hour": p.cost_per_gpu_hour}
            for p in s.pools
        ],
    }


def _circuit(c: Circuit) -> dict[str, Any]:
    return {
        "name": c.name,
        "between": [c.a, c.b],
        "capacity_gbps": c.capacity_gbps,
        "rtt_ms": c.rtt_ms,
        "loss": c.loss,
        "distance_km": c.distance_km,
        "parallel": c.parallel,
        "risk_group": c.risk_group or c.name,
    }


def _team(t: Team) -> dict[str, Any]:
    out: dict[str, Any] = {"name": t.name, "home_site": t.home_site, "weight": t.weight}
    if t.quota is not None:  # no key: a derived guarantee; ``{}``: none at all
        out["quota"] = dict(t.quota)
    return out


def _dataset(d: Dataset) -> dict[str, Any]:
    return {"name": d.name, "size_gb": _gigabytes(d.size_bytes), "sites": sorted(d.sites)}


def _gigabytes(size_bytes: int) -> float:
    """GB as the file gives them: the loader reads a float and rounds ``GB × 10⁹``, and every
    size it makes that way comes back from the nearest float to ``size_bytes ÷ 10⁹``."""
    return size_bytes / _GB


def _objective(o: LatencyObjective) -> dict[str, Any]:
    return {"between": [o.a, o.b], "max_rtt_ms": o.max_rtt_ms, "reason": o.reason or "-"}
