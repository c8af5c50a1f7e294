"""What changes from one fabric to the next (pure): sites, pools, circuits, teams, quotas,
datasets and latency objectives added, removed or changed, with old → new values.

:func:`fabric_diff` is what ``onecluster fabric apply`` shows before it applies, and what
the server records as one event per change (kind ``fabric_<what>_<action>``, e.g.
``fabric_site_added``, ``fabric_pool_changed``).  The pools of a site added or removed are
listed as pools added or removed too: each is capacity that comes or goes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Literal, Protocol, TypeVar

from onecluster.model import Circuit, Dataset, Fabric, GpuPool, LatencyObjective, Site, Team

__all__ = ["Change", "ChangeKind", "FabricDiff", "FieldChange", "fabric_diff"]

#: What a change is about, in the order a diff lists them.
ChangeKind = Literal["fabric", "site", "pool", "circuit", "team", "quota", "dataset", "objective"]
Action = Literal["added", "removed", "changed"]

_ORDER: tuple[ChangeKind, ...] = (
    "fabric",
    "site",
    "pool",
    "circuit",
    "team",
    "quota",
    "dataset",
    "objective",
)

T = TypeVar("T")
N = TypeVar("N", bound="_Named")


class _Named(Protocol):
    @property
    def name(self) -> str: ...


@dataclass(frozen=True, slots=True)
class FieldChange:
    """One field of a changed thing: its old and new value as the fabric file writes them
    (``None``: absent on that side)."""

    field: str
    old: str | None
    new: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class Change:
    """One thing added, removed or changed.

    ``name`` names it as the CLI shows it: ``name`` for the fabric's own name, a site,
    ``site/GPU type`` for a pool, a circuit, a team, ``team/GPU type`` for a quota, a
    dataset, ``a-b`` for a latency objective.
    ``fields``: for ``changed``, each field that changed; for ``added`` and ``removed``, the
    thing's fields (new or old values) so that a reader sees what comes or goes.
    """

    kind: ChangeKind
    action: Action
    name: str
    fields: tuple[FieldChange, ...] = ()

    @property
    def event_kind(self) -> str:
        """The event recorded for it: ``fabric_<kind>_<action>``."""
        return f"fabric_{self.kind}_{self.action}"

    def describe(self) -> str:
        """One line: ``pool tokyo/H100 changed: count 192 → 256``."""
        what = f"{self.kind} {self.name}" if self.kind != "fabric" else "the fabric"
        if self.action != "changed":
            values = ", ".join(
                f"{f.field} {f.new if self.action == 'added' else f.old}" for f in self.fields
            )
            return f"{what} {self.action}" + (f" ({values})" if values else "")
        parts = "; ".join(f"{f.field} {f.old or '-'} → {f.new or '-'}" for f in self.fields)
        return f"{what} changed: {parts}"


@dataclass(frozen=True, slots=True)
class FabricDiff:
    """Every change from one fabric to another, in a stable order: by kind (fabric name,
    sites, pools, circuits, teams, quotas, datasets, objectives), then in the new fabric's
    order, removed things last in the old fabric's order."""

    changes: tuple[Change, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.changes)

    def __len__(self) -> int:
        return len(self.changes)

    def of(self, kind: ChangeKind, action: Action | None = None) -> tuple[Change, ...]:
        """The changes of ``kind`` (and ``action``, if given)."""
        return tuple(
            c for c in self.changes if c.kind == kind and (action is None or c.action == action)
        )

    def summary(self) -> str:
        """``2 added, 1 changed, 0 removed`` (or ``no change``)."""
        if not self.changes:
            return "no change"
        counts = {a: sum(1 for c in self.changes if c.action == a) for a in _ACTIONS}
        return ", ".join(f"{counts[a]} {a}" for a in _ACTIONS)


_ACTIONS: tuple[Action, ...] = ("added", "changed", "removed")


def fabric_diff(old: Fabric, new: Fabric) -> FabricDiff:
    """Every change that turns ``old`` into ``new`` (empty when they are equal)."""
    changes: list[Change] = []
    if old.name != new.name:
        changes.append(
            Change(
                kind="fabric",
                action="changed",
                name="name",
                fields=(FieldChange("name", old.name, new.name),),
            )
        )
    changes += _keyed("site", _by_name(old.sites), _by_name(new.sites), _site_fields)
    changes += _keyed("pool", _pools(old), _pools(new), _pool_fields)
    changes += _keyed("circuit", _by_name(old.circuits), _by_name(new.circuits), _circuit_fields)
    changes += _keyed("team", _by_name(old.teams), _by_name(new.teams), _team_fields)
    changes += _keyed("quota", _quotas(old), _quotas(new), _quota_fields)
    changes += _keyed("dataset", _by_name(old.datasets), _by_name(new.datasets), _dataset_fields)
    changes += _keyed("objective", _objectives(old), _objectives(new), _objective_fields)
    order = {k: i for i, k in enumerate(_ORDER)}
    return FabricDiff(tuple(sorted(changes, key=lambda c: order[c.kind])))


def _keyed(
    kind: ChangeKind,
    old: Mapping[str, T],
    new: Mapping[str, T],
    fields: Callable[[T], dict[str, str]],
) -> list[Change]:
    """Added and changed things in ``new``'s order, then removed ones in ``old``'s."""
    out: list[Change] = []
    for name, thing in new.items():
        if name not in old:
            out.append(Change(kind=kind, action="added", name=name, fields=_all(fields(thing))))
            continue
        before, after = fields(old[name]), fields(thing)
        moved = tuple(
            FieldChange(f, before.get(f), after.get(f))
            for f in {**before, **after}
            if before.get(f) != after.get(f)
        )
        if moved:
            out.append(Change(kind=kind, action="changed", name=name, fields=moved))
    for name, thing in old.items():
        if name not in new:
            values = fields(thing)
            out.append(
                Change(
                    kind=kind,
                    action="removed",
                    name=name,
                    fields=tuple(FieldChange(f, v, None) for f, v in values.items()),
                )
            )
    return out


def _all(values: dict[str, str]) -> tuple[FieldChange, ...]:
    return tuple(FieldChange(f, None, v) for f, v in values.items())


def _by_name(things: Iterable[N]) -> dict[str, N]:
    return {t.name: t for t in things}


def _pools(fabric: Fabric) -> dict[str, tuple[Site, GpuPool]]:
    return {f"{s.name}/{p.gpu_type}": (s, p) for s in fabric.sites for p in s.pools}


def _quotas(fabric: Fabric) -> dict[str, tuple[Team, int]]:
    """Each declared quota, per team and GPU type (those of a team added or removed are
    added or removed with it)."""
    return {
        f"{t.name}/{gpu_type}": (t, n)
        for t in fabric.teams
        for gpu_type, n in (t.quota or {}).items()
    }


def _objectives(fabric: Fabric) -> dict[str, LatencyObjective]:
    return {f"{o.a}-{o.b}": o for o in fabric.objectives}


def _number(value: float) -> str:
    """A number as the fabric file writes it: ``2``, ``0.0001``, ``1.6``."""
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def _site_fields(s: Site) -> dict[str, str]:
    return {
        "region": s.region,
        "jurisdiction": s.jurisdiction,
        "backend": s.backend,
        "controls_export": "true" if s.controls_export else "false",
    }


def _pool_fields(pair: tuple[Site, GpuPool]) -> dict[str, str]:
    p = pair[1]
    return {"count": str(p.count), "cost_per_gpu_hour": _number(p.cost_per_gpu_hour)}


def _circuit_fields(c: Circuit) -> dict[str, str]:
    return {
        "between": f"{c.a}–{c.b}",
        "capacity_gbps": _number(c.capacity_gbps),
        "parallel": str(c.parallel),
        "rtt_ms": _number(c.rtt_ms),
        "loss": _number(c.loss),
        "distance_km": _number(c.distance_km),
        "risk_group": c.risk_group or c.name,
    }


def _team_fields(t: Team) -> dict[str, str]:
    # The quotas' values are changes of their own (kind ``quota``); here only whether the
    # team declares them or gets a derived guarantee (no ``quota`` key).
    quota = "derived" if t.quota is None else "declared"
    return {"home_site": t.home_site, "weight": _number(t.weight), "quota": quota}


def _quota_fields(pair: tuple[Team, int]) -> dict[str, str]:
    return {"gpus": str(pair[1])}


def _dataset_fields(d: Dataset) -> dict[str, str]:
    return {"size_gb": _number(d.size_bytes / 1e9), "sites": ", ".join(sorted(d.sites))}


def _objective_fields(o: LatencyObjective) -> dict[str, str]:
    return {"max_rtt_ms": _number(o.max_rtt_ms), "reason": o.reason or "-"}
