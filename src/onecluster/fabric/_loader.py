"""Load and validate a fabric file (YAML).  Every error names the file, the line and the field.

The format is documented in ``docs/fabric.md``; ``examples/fabrics/`` holds two complete files.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from onecluster.errors import FabricError, ValidationError
from onecluster.fabric._nodes import MapNode, compose, line_of
from onecluster.model import (
    Circuit,
    Dataset,
    Fabric,
    GpuPool,
    LatencyObjective,
    Site,
    Team,
)

__all__ = ["load_fabric", "parse_fabric"]

_GB = 1_000_000_000


def load_fabric(path: str | Path) -> Fabric:
    """Read the fabric file at ``path``; :class:`FabricError` if it is missing or invalid."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        msg = f"fabric file {p} does not exist"
        raise FabricError(msg, hint="see examples/fabrics/ for complete fabric files") from None
    except (OSError, UnicodeDecodeError) as exc:
        msg = f"fabric file {p} cannot be read: {exc}"
        raise FabricError(msg) from exc
    return parse_fabric(text, source=str(p))


def parse_fabric(text: str, *, source: str = "<fabric>") -> Fabric:
    """Parse fabric YAML ``text``; ``source`` is used in error messages."""
    root = MapNode(compose(text, source), source, "the fabric file")
    root.check_keys({"fabric", "sites", "circuits", "teams", "datasets", "objectives"})
    lines: dict[str, int] = {}
    sites = [_site(n, source, lines) for n in root.seq("sites", required=True)]
    circuits = [_circuit(n, source, lines) for n in root.seq("circuits")]
    teams = [_team(n, source, lines) for n in root.seq("teams")]
    datasets = [_dataset(n, source, lines) for n in root.seq("datasets")]
    objectives = [_objective(n, source, lines) for n in root.seq("objectives")]
    try:
        return Fabric(
            name=root.text("fabric", "fabric"),
            sites=tuple(sites),
            circuits=tuple(circuits),
            teams=tuple(teams),
            datasets=tuple(datasets),
            objectives=tuple(objectives),
        )
    except FabricError as exc:
        line = lines.get(exc.subject or "", root.line)
        raise FabricError(f"{source}:{line}: {exc.message}", hint=exc.hint) from exc


def _guard(m: MapNode, build: type, **kwargs: object) -> object:
    """Construct a domain object; its own validation errors get ``m``'s line."""
    try:
        return build(**kwargs)
    except ValidationError as exc:
        raise FabricError(f"{m.source}:{m.line}: {exc.message}", hint=exc.hint) from exc


def _site(node: yaml.Node, source: str, lines: dict[str, int]) -> Site:
    m = MapNode(node, source, "a site")
    name = m.text("name")
    m.what = f"site {name}"
    m.check_keys({"name", "region", "jurisdiction", "backend", "controls_export", "pools"})
    pools = []
    for p in m.seq("pools", required=True):
        pm = MapNode(p, source, f"a GPU pool of site {name}")
        pm.check_keys({"gpu_type", "count", "cost_per_gpu_hour"})
        pool = _guard(
            pm,
            GpuPool,
            gpu_type=pm.text("gpu_type"),
            count=pm.integer("count"),
            cost_per_gpu_hour=pm.number("cost_per_gpu_hour", 0.0),
        )
        pools.append(pool)
    lines[f"site:{name}"] = m.line
    site = _guard(
        m,
        Site,
        name=name,
        region=m.text("region"),
        jurisdiction=m.text("jurisdiction"),
        backend=m.text("backend", "local"),
        controls_export=m.boolean("controls_export", default=False),
        pools=tuple(pools),
    )
    assert isinstance(site, Site)
    return site


def _circuit(node: yaml.Node, source: str, lines: dict[str, int]) -> Circuit:
    m = MapNode(node, source, "a circuit")
    name = m.text("name")
    m.what = f"circuit {name}"
    m.check_keys(
        {
            "name",
            "between",
            "capacity_gbps",
            "rtt_ms",
            "loss",
            "distance_km",
            "parallel",
            "risk_group",
        }
    )
    ends = m.str_list("between", required=True)
    if len(ends) != 2:
        m.fail(m.node, f"field 'between' of circuit {name} must name exactly two sites")
    lines[f"circuit:{name}"] = m.line
    circuit = _guard(
        m,
        Circuit,
        name=name,
        a=ends[0],
        b=ends[1],
        capacity_gbps=m.number("capacity_gbps"),
        rtt_ms=m.number("rtt_ms"),
        loss=m.number("loss", 0.0),
        distance_km=m.number("distance_km", 0.0),
        parallel=m.integer("parallel", 1),
        risk_group=m.text("risk_group", name),
    )
    assert isinstance(circuit, Circuit)
    return circuit


def _team(node: yaml.Node, source: str, lines: dict[str, int]) -> Team:
    m = MapNode(node, source, "a team")
    name = m.text("name")
    m.what = f"team {name}"
    m.check_keys({"name", "home_site", "weight", "quota"})
    # No ``quota`` key: the team gets a derived guarantee (its home site shared by weight,
    # onecluster.scheduler.guarantees); ``quota: {}`` guarantees it nothing.
    quota: dict[str, int] | None = None
    qm = m.mapping("quota", f"the quota of team {name}")
    if qm is not None:
        quota = {}
        for gpu_type, value in qm.items():
            if not isinstance(value, yaml.ScalarNode):
                qm.fail(value, f"quota of team {name} for {gpu_type} must be a number of GPUs")
            try:
                quota[gpu_type] = int(value.value)
            except ValueError:
                qm.fail(value, f"quota of team {name} for {gpu_type} must be a whole number")
    lines[f"team:{name}"] = m.line
    team = _guard(
        m,
        Team,
        name=name,
        home_site=m.text("home_site"),
        weight=m.number("weight", 1.0),
        quota=quota,
    )
    assert isinstance(team, Team)
    return team


def _dataset(node: yaml.Node, source: str, lines: dict[str, int]) -> Dataset:
    m = MapNode(node, source, "a dataset")
    name = m.text("name")
    m.what = f"dataset {name}"
    m.check_keys({"name", "size_gb", "sites"})
    lines[f"dataset:{name}"] = m.line
    ds = _guard(
        m,
        Dataset,
        name=name,
        size_bytes=round(m.number("size_gb") * _GB),
        sites=frozenset(m.str_list("sites", required=True)),
    )
    assert isinstance(ds, Dataset)
    return ds


def _objective(node: yaml.Node, source: str, lines: dict[str, int]) -> LatencyObjective:
    m = MapNode(node, source, "a latency objective")
    m.check_keys({"between", "max_rtt_ms", "reason"})
    ends = m.str_list("between", required=True)
    if len(ends) != 2:
        m.fail(node, "field 'between' of a latency objective must name exactly two sites")
    lines[f"objective:{ends[0]}-{ends[1]}"] = line_of(node)
    obj = _guard(
        m,
        LatencyObjective,
        a=ends[0],
        b=ends[1],
        max_rtt_ms=m.number("max_rtt_ms"),
        reason=m.text("reason", "-"),
    )
    assert isinstance(obj, LatencyObjective)
    return obj
