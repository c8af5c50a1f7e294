"""Link alerts and the outbox they wait in until the control plane stores them (pure)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from onecluster.model import Fabric
from onecluster.topology._paths import Path
from onecluster.topology._table import RouteTable

__all__ = ["AlertKind", "LinkAlert", "Outbox", "route_alerts"]

#: The kinds of link alerts (``GET /api/v1/events?kind=link``; ``docs/links.md``, Alerts).
AlertKind = Literal[
    "link_up",
    "link_down",
    "link_degraded",
    "link_recovered",
    "link_unknown",
    "link_rtt_shift",
    "route_changed",
]


@dataclass(frozen=True, slots=True)
class LinkAlert:
    """An alert: an API event (``kind``) and a log line (``message``)."""

    kind: AlertKind
    message: str
    warning: bool = True


class Outbox:
    """Alerts not yet stored, oldest first.

    The caller takes them all, tries to store them and, if that fails, puts them back ahead
    of any newer ones; so every alert is stored once, in the order it happened, provided one
    caller at a time takes and puts back (the server's control plane holds a lock for that).
    """

    def __init__(self) -> None:
        self._alerts: list[LinkAlert] = []

    def __len__(self) -> int:
        return len(self._alerts)

    def add(self, alerts: Iterable[LinkAlert]) -> None:
        """Queue ``alerts`` behind those waiting."""
        self._alerts += alerts

    def take(self) -> list[LinkAlert]:
        """Every waiting alert, oldest first; the outbox is then empty."""
        alerts, self._alerts = self._alerts, []
        return alerts

    def put_back(self, alerts: Sequence[LinkAlert]) -> None:
        """Return alerts that could not be stored, ahead of newer ones."""
        self._alerts[:0] = alerts


def route_alerts(fabric: Fabric, old: RouteTable, new: RouteTable) -> list[LinkAlert]:
    """One ``route_changed`` per site pair whose primary path differs between the tables."""
    alerts = []
    names = fabric.site_names
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            before, after = old.route(a, b).primary, new.route(a, b).primary
            if _circuits(before) == _circuits(after):
                continue
            alerts.append(
                LinkAlert(
                    "route_changed",
                    f"route {a}→{b} now {_describe(after)} (was {_describe(before)})",
                )
            )
    return alerts


def _circuits(path: Path | None) -> tuple[str, ...] | None:
    return path.circuits if path is not None else None


def _describe(path: Path | None) -> str:
    if path is None:
        return "unreachable"
    via = f" via {', '.join(path.sites[1:-1])}" if path.relayed else ""
    return f"{' + '.join(path.circuits)}{via}, {path.rtt_ms:g} ms"
