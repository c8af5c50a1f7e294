"""Fast reroute (pure): where a site sends traffic for each destination when its own probes
find circuits silent that the server's route table still uses.

The server's table stays authoritative: a destination whose next circuit is not silent here
goes where the table says — which is how the server *confirms* a local switch (its next table
routes the same way) or *corrects* it (it routes elsewhere, and the site follows).  Only a
next circuit this site's own probes find silent is overridden, never by a stale table:

1. with the fabric, the lowest-RTT path with the table's down circuits and the silent ones
   left out — what the server will compute once it hears — whose next site forwards on its
   own table without coming back through this site or its silent circuits (a *loop-free
   alternate*, as IP fast reroute calls it: the next site does not know of the silence yet);
2. without the fabric, the table's precomputed disjoint backup, if its first circuit is not
   silent (the next site's own route is not known here, so this is exact only where the
   backup's next site forwards along it, as in a triangle);
3. else nowhere: ``unreachable``, so senders fail fast rather than blackhole into silence.

A detour starts only on a circuit in ``reachable`` (when given: those whose far end's address
is known, without which no route can be programmed over it).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Literal

from onecluster.model import Fabric
from onecluster.topology._paths import paths_between, route

__all__ = ["LocalHop", "TableRoute", "local_hops"]


@dataclass(frozen=True, slots=True, kw_only=True)
class TableRoute:
    """The server's route from this site to ``dst``: its next hop (``None``: unreachable)
    and the first hop of its disjoint backup (``None``: none)."""

    dst: str
    next_circuit: str | None
    next_site: str | None
    backup_circuit: str | None = None
    backup_site: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class LocalHop:
    """Where this site sends traffic for ``dst``: over ``circuit`` to ``site`` (both ``None``:
    unreachable), and on whose word — the server's ``table``, a local ``detour`` from the
    fabric, the table's ``backup``, or ``none`` left."""

    dst: str
    circuit: str | None
    site: str | None
    source: Literal["table", "detour", "backup", "none"]


def local_hops(
    site: str,
    table: Sequence[TableRoute],
    *,
    silent: Collection[str],
    table_down: Collection[str] = (),
    fabric: Fabric | None = None,
    reachable: Collection[str] | None = None,
) -> list[LocalHop]:
    """The next hop from ``site`` for every destination of ``table`` (in its order), given the
    circuits its own probes find ``silent``, those the table routes around (``table_down``)
    and those a route can be programmed over (``reachable``; default all).  See the module
    docstring for the rules."""
    quiet = frozenset(silent)
    down = frozenset(table_down)
    if reachable is not None and fabric is not None:
        # circuits of this site the fabric has but nobody probes are as good as down
        down |= {c.name for c in fabric.circuits if site in (c.a, c.b) and c.name not in reachable}
    hops = []
    for r in table:
        if r.next_circuit is None or r.next_circuit not in quiet:
            hops.append(
                LocalHop(dst=r.dst, circuit=r.next_circuit, site=r.next_site, source="table")
            )
            continue
        hop = _detour(fabric, site, r.dst, quiet, down) if fabric else None
        usable = r.backup_circuit is not None and (
            reachable is None or r.backup_circuit in reachable
        )
        if hop is None and fabric is None and usable and r.backup_circuit not in quiet:
            hop = LocalHop(dst=r.dst, circuit=r.backup_circuit, site=r.backup_site, source="backup")
        hops.append(hop or LocalHop(dst=r.dst, circuit=None, site=None, source="none"))
    return hops


def _detour(
    fabric: Fabric, site: str, dst: str, silent: frozenset[str], table_down: frozenset[str]
) -> LocalHop | None:
    """The first hop of the lowest-RTT loop-free path around ``silent``, if any."""
    if site not in fabric.site_names or dst not in fabric.site_names:
        return None
    for path in paths_between(fabric, site, dst, down=table_down | silent):
        neighbour = path.sites[1]
        if neighbour != dst:
            # The neighbour forwards by the table it has, which does not know of the silence.
            onward = route(fabric, neighbour, dst, down=table_down).primary
            if onward is None or site in onward.sites:
                continue
        return LocalHop(dst=dst, circuit=path.circuits[0], site=neighbour, source="detour")
    return None
