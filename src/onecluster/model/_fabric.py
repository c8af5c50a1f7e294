"""The fabric: every site, circuit, team and dataset the platform knows, checked as a whole."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from onecluster.errors import FabricError
from onecluster.model._checks import label_problem
from onecluster.model._circuit import Circuit, LatencyObjective
from onecluster.model._dataset import Dataset
from onecluster.model._site import Site
from onecluster.model._team import Team

__all__ = ["Fabric"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Fabric:
    """Sites, circuits between them, teams and datasets; consistent by construction.

    Construction checks cross-references (a circuit's ends, a team's home site and quota
    types, dataset replicas) and raises :class:`FabricError` naming the offender.
    """

    name: str
    sites: tuple[Site, ...]
    circuits: tuple[Circuit, ...] = ()
    teams: tuple[Team, ...] = ()
    datasets: tuple[Dataset, ...] = ()
    objectives: tuple[LatencyObjective, ...] = ()
    _site_index: dict[str, Site] = field(init=False, repr=False, compare=False)
    _team_index: dict[str, Team] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        problem = label_problem("fabric name", self.name)
        if problem is not None:
            raise FabricError(problem)
        if not self.sites:
            msg = f"fabric {self.name} has no sites"
            raise FabricError(msg)
        sites = _unique("site", [s.name for s in self.sites])
        _unique("circuit", [c.name for c in self.circuits])
        _unique("team", [t.name for t in self.teams])
        _unique("dataset", [d.name for d in self.datasets])
        gpu_types = {p.gpu_type for s in self.sites for p in s.pools}
        for c in self.circuits:
            for end in (c.a, c.b):
                if end not in sites:
                    msg = f"circuit {c.name} ends at unknown site {end!r}"
                    raise FabricError(
                        msg,
                        hint=f"known sites: {', '.join(sorted(sites))}",
                        subject=f"circuit:{c.name}",
                    )
        for t in self.teams:
            if t.home_site not in sites:
                msg = f"team {t.name} has unknown home site {t.home_site!r}"
                raise FabricError(
                    msg, hint=f"known sites: {', '.join(sorted(sites))}", subject=f"team:{t.name}"
                )
            for gpu_type in t.quota or {}:
                if gpu_type not in gpu_types:
                    msg = f"team {t.name} has quota for GPU type {gpu_type!r}, which no site has"
                    raise FabricError(
                        msg,
                        hint=f"known GPU types: {', '.join(sorted(gpu_types))}",
                        subject=f"team:{t.name}",
                    )
        for d in self.datasets:
            for s in d.sites:
                if s not in sites:
                    msg = f"dataset {d.name} has a replica at unknown site {s!r}"
                    raise FabricError(msg, subject=f"dataset:{d.name}")
        for o in self.objectives:
            for end in (o.a, o.b):
                if end not in sites:
                    msg = f"latency objective {o.a}-{o.b} names unknown site {end!r}"
                    raise FabricError(msg, subject=f"objective:{o.a}-{o.b}")
        _check_connected(self.sites, self.circuits)
        object.__setattr__(self, "_site_index", {s.name: s for s in self.sites})
        object.__setattr__(self, "_team_index", {t.name: t for t in self.teams})

    # -- look-ups -------------------------------------------------------------------------

    def site(self, name: str) -> Site:
        """The site called ``name``; :class:`KeyError` if there is none."""
        return self._site_index[name]

    def has_site(self, name: str) -> bool:
        """Whether a site called ``name`` exists."""
        return name in self._site_index

    def team(self, name: str) -> Team | None:
        """The team called ``name``, or ``None``."""
        return self._team_index.get(name)

    @property
    def site_names(self) -> tuple[str, ...]:
        """Site names in fabric order."""
        return tuple(s.name for s in self.sites)

    @property
    def gpu_types(self) -> frozenset[str]:
        """Every GPU type any site has."""
        return frozenset(p.gpu_type for s in self.sites for p in s.pools)

    @property
    def total_gpus(self) -> int:
        """GPUs in the whole fabric."""
        return sum(s.total_gpus for s in self.sites)

    def circuits_of(self, site: str) -> Iterator[Circuit]:
        """Circuits with one end at ``site``."""
        return (c for c in self.circuits if site in (c.a, c.b))

    def circuits_between(self, x: str, y: str) -> tuple[Circuit, ...]:
        """Circuits directly joining ``x`` and ``y``."""
        return tuple(c for c in self.circuits if c.joins(x, y))

    def dataset(self, name: str) -> Dataset | None:
        """The dataset declared as ``name`` in the fabric, or ``None``."""
        for d in self.datasets:
            if d.name == name:
                return d
        return None


def _check_connected(sites: tuple[Site, ...], circuits: tuple[Circuit, ...]) -> None:
    """Every site must reach every other over circuits, or data and work cannot follow."""
    if len(sites) < 2:
        return
    neighbours: dict[str, set[str]] = {s.name: set() for s in sites}
    for c in circuits:
        neighbours[c.a].add(c.b)
        neighbours[c.b].add(c.a)
    start = sites[0].name
    seen, todo = {start}, [start]
    while todo:
        for n in neighbours[todo.pop()] - seen:
            seen.add(n)
            todo.append(n)
    cut_off = [s.name for s in sites if s.name not in seen]
    if cut_off:
        msg = f"site {cut_off[0]} cannot be reached from {start} over any circuit"
        raise FabricError(
            msg, hint="add a circuit to it or remove the site", subject=f"site:{cut_off[0]}"
        )


def _unique(kind: str, names: list[str]) -> set[str]:
    seen: set[str] = set()
    for n in names:
        if n in seen:
            msg = f"{kind} {n!r} is declared twice"
            raise FabricError(msg, subject=f"{kind}:{n}")
        seen.add(n)
    return seen
