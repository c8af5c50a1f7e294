"""The route table: for every ordered pair of sites, the primary and backup route under the
circuits that are down now, and the next hop each site's traffic takes.

Routing is hop by hop (each site forwards by its own entry for the destination), which is
consistent because a sub-path of a lowest-RTT path is itself lowest-RTT: when Shanghai sends
to Singapore through Tokyo, Tokyo's own entry for Singapore is the direct circuit.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from onecluster.model import Fabric
from onecluster.topology._paths import Route, route

__all__ = ["NextHop", "RouteTable", "route_table"]


@dataclass(frozen=True, slots=True, kw_only=True)
class NextHop:
    """Where ``src`` sends traffic for ``dst``: over ``circuit`` to the neighbour ``site``."""

    circuit: str
    site: str


@dataclass(frozen=True, slots=True, kw_only=True)
class RouteTable:
    """Routes of every ordered site pair, computed with ``down`` circuits cut."""

    down: frozenset[str]
    routes: Mapping[tuple[str, str], Route]

    def route(self, src: str, dst: str) -> Route:
        """The route from ``src`` to ``dst`` (``KeyError`` for an unknown pair)."""
        return self.routes[(src, dst)]

    def next_hop(self, src: str, dst: str) -> NextHop | None:
        """The first hop of the primary route; ``None`` when ``dst`` cannot be reached."""
        primary = self.routes[(src, dst)].primary
        if primary is None:
            return None
        return NextHop(circuit=primary.circuits[0], site=primary.sites[1])

    def of_site(self, src: str) -> list[Route]:
        """Every route from ``src``, in the fabric's site order."""
        return [r for (a, _), r in self.routes.items() if a == src]

    def same_paths(self, other: RouteTable) -> bool:
        """Whether every pair's primary and backup follow the same circuits in both tables."""

        def shape(t: RouteTable) -> dict[tuple[str, str], tuple[object, object]]:
            return {
                k: (
                    r.primary.circuits if r.primary else None,
                    r.backup.circuits if r.backup else None,
                )
                for k, r in t.routes.items()
            }

        return shape(self) == shape(other)


def route_table(
    fabric: Fabric, *, down: Iterable[str] = (), rtt_ms: Mapping[str, float] | None = None
) -> RouteTable:
    """Routes between every ordered pair of distinct sites with ``down`` circuits cut.

    ``rtt_ms`` replaces the fabric's RTT of the circuits it names (measured minimum RTTs).
    """
    cut = frozenset(down)
    names = fabric.site_names
    routes = {
        (a, b): route(fabric, a, b, down=cut, rtt_ms=rtt_ms) for a in names for b in names if a != b
    }
    return RouteTable(down=cut, routes=routes)
