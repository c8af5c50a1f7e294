"""Paths between sites over circuits, and the primary/backup route of every site pair.

Pure: a function of the fabric and of which circuits are down.  Primary = the lowest-RTT
path; backup = the lowest-RTT path that shares no circuit *and no shared-risk group* with the
primary (two circuits in one duct fail together, so being different circuits is not enough).
Finding SRLG-disjoint pairs is NP-hard in general; fabrics have a handful of sites, so paths
are enumerated up to ``MAX_HOPS`` circuits in RTT order and the first disjoint one is taken,
which is exact within that bound.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

from onecluster.model import Circuit, Fabric

__all__ = ["MAX_HOPS", "Path", "Route", "paths_between", "route"]

#: Longest path (in circuits) considered for a route.
MAX_HOPS = 4


@dataclass(frozen=True, slots=True, kw_only=True)
class Path:
    """A loop-free chain of circuits from ``sites[0]`` to ``sites[-1]``."""

    sites: tuple[str, ...]
    circuits: tuple[str, ...]
    rtt_ms: float
    risk_groups: frozenset[str]
    bottleneck_gbps: float

    @property
    def relayed(self) -> bool:
        """Whether the path goes through a third site."""
        return len(self.sites) > 2

    def disjoint_from(self, other: Path) -> bool:
        """No shared circuit and no shared shared-risk group."""
        return not (set(self.circuits) & set(other.circuits)) and not (
            self.risk_groups & other.risk_groups
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Route:
    """How ``src`` reaches ``dst``: ``primary`` (``None``: unreachable) and a disjoint ``backup``
    (``None``: no disjoint path, so one failure can cut the pair)."""

    src: str
    dst: str
    primary: Path | None
    backup: Path | None


def paths_between(
    fabric: Fabric,
    src: str,
    dst: str,
    *,
    down: Iterable[str] = (),
    rtt_ms: Mapping[str, float] | None = None,
) -> list[Path]:
    """Every loop-free path of at most ``MAX_HOPS`` circuits, lowest RTT first.

    Circuits named in ``down`` are left out; so are sites with no circuit up.  ``rtt_ms``
    replaces the fabric's RTT of the circuits it names (e.g. with measured minimum RTTs).
    """
    cut = frozenset(down)
    usable = [c for c in fabric.circuits if c.name not in cut]
    rtts = {c.name: (rtt_ms or {}).get(c.name, c.rtt_ms) for c in usable}
    return sorted(
        _walk(usable, src, dst, (src,), (), rtts=rtts),
        key=lambda p: (p.rtt_ms, len(p.circuits), p.circuits),
    )


def route(
    fabric: Fabric,
    src: str,
    dst: str,
    *,
    down: Iterable[str] = (),
    rtt_ms: Mapping[str, float] | None = None,
) -> Route:
    """The primary and backup route from ``src`` to ``dst`` with ``down`` circuits cut."""
    paths = paths_between(fabric, src, dst, down=down, rtt_ms=rtt_ms)
    if not paths:
        return Route(src=src, dst=dst, primary=None, backup=None)
    primary = paths[0]
    backup = next((p for p in paths[1:] if p.disjoint_from(primary)), None)
    return Route(src=src, dst=dst, primary=primary, backup=backup)


def _walk(
    circuits: list[Circuit],
    here: str,
    dst: str,
    sites: tuple[str, ...],
    used: tuple[Circuit, ...],
    *,
    rtts: Mapping[str, float],
) -> Iterator[Path]:
    if here == dst and used:
        yield Path(
            sites=sites,
            circuits=tuple(c.name for c in used),
            rtt_ms=sum(rtts[c.name] for c in used),
            risk_groups=frozenset(c.risk_group for c in used),
            bottleneck_gbps=min(c.total_gbps for c in used),
        )
        return
    if len(used) >= MAX_HOPS:
        return
    for c in circuits:
        if here not in (c.a, c.b):
            continue
        nxt = c.other_end(here)
        if nxt in sites:
            continue
        yield from _walk(circuits, nxt, dst, (*sites, nxt), (*used, c), rtts=rtts)
