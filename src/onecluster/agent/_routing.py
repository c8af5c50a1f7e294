"""The site's kernel routes to the other sites: the server's route table, except around the
circuits this site's own probes find silent (fast reroute: :func:`onecluster.topology.local_hops`
decides, this module programs).

Two callers share one lock: the sync loop hands over every table the server sends
(:meth:`SiteRoutes.follow`), and the fast-reroute thread the circuits its probes find silent
(:meth:`SiteRoutes.avoid`) and the periodic refresh (:meth:`SiteRoutes.refresh`).  So the
routes move off a silent circuit without waiting for a sync — with the server up, down or
unreachable — and the server's next table confirms or corrects them.  Each call programs one
host route per peer site's service address, via the peer's address on the next circuit, when
the routes should change, and every ``reapply_s`` anyway (a device that came back has lost its
routes).  A destination whose address or next hop's address is not known just then keeps the
route it had over the same circuit.  A route that cannot be applied is logged and retried on
the next call; nothing here raises.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from onecluster.errors import PlatformError
from onecluster.model import Fabric
from onecluster.network import KernelRoute, RouteSink
from onecluster.schema import RouteTableOut
from onecluster.topology import LocalHop, TableRoute, local_hops

__all__ = ["RouteStats", "SiteRoutes"]

_log = logging.getLogger("onecluster.agent")


@dataclass(frozen=True, slots=True, kw_only=True)
class RouteStats:
    """A snapshot of the site's routes.

    ``overrides``: destinations routed away from the server's table, and their next circuit
    now (``None``: unreachable); ``local_switches``: how often the silence of a circuit
    changed the programmed routes before any table did.
    """

    table_version: int | None
    silent: frozenset[str]
    overrides: dict[str, str | None]
    local_switches: int
    applied_at: float | None


class SiteRoutes:
    """The routes of one site (see the module docstring).  ``fabric`` lets a silent next hop
    be routed around on a loop-free path of the site's choosing; without it the table's
    precomputed backup is taken."""

    def __init__(
        self,
        sink: RouteSink,
        *,
        service_address: str | None = None,
        fabric: Fabric | None = None,
        reapply_s: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._sink = sink
        self._service_address = service_address
        self._fabric = fabric
        self._reapply_s = reapply_s
        self._clock = clock
        self._lock = threading.Lock()
        self._table: RouteTableOut | None = None
        self._peers: dict[str, str] = {}  # circuit → the far end's address on it
        self._silent: frozenset[str] = frozenset()
        self._overrides: dict[str, LocalHop] = {}
        self._applied: list[KernelRoute] | None = None
        self._applied_at = float("-inf")
        self._applied_version: int | None = None
        self._switches = 0
        self._stale_fabric = False
        # per destination site: the next circuit and the route last wanted for it
        self._last: dict[str, tuple[str | None, KernelRoute]] = {}

    def follow(self, table: RouteTableOut, peers: Mapping[str, str]) -> None:
        """The server's table for this site and its circuits' far-end addresses (from a sync
        reply): program the routes it leads to, around any silent next circuit."""
        with self._lock:
            self._table = table
            self._peers = dict(peers)
            self._program()

    def avoid(self, silent: frozenset[str]) -> None:
        """The circuits this site's probes find silent now: route around them at once."""
        with self._lock:
            if silent == self._silent:
                return
            self._silent = silent
            before = self._applied
            self._program()
            if self._applied is not None and self._applied != before:
                self._switches += 1

    def refresh(self) -> None:
        """Re-program the routes when ``reapply_s`` has passed since they were last applied
        (or applying them failed)."""
        with self._lock:
            if self._table is None:
                return
            if self._applied is None or self._clock() - self._applied_at >= self._reapply_s:
                self._program()

    def statistics(self) -> RouteStats:
        """What the site's routes are now."""
        with self._lock:
            return RouteStats(
                table_version=self._table.version if self._table else None,
                silent=self._silent,
                overrides={dst: hop.circuit for dst, hop in self._overrides.items()},
                local_switches=self._switches,
                applied_at=None if self._applied is None else self._applied_at,
            )

    # -- under the lock ---------------------------------------------------------------------

    def _program(self) -> None:
        table = self._table
        if table is None:
            return
        hops = self._hops(table)
        wanted = self._routes(table, hops)
        self._note_overrides(table, hops)
        now = self._clock()
        if wanted == self._applied and now - self._applied_at < self._reapply_s:
            return
        try:
            self._sink.apply(wanted)
        except PlatformError as exc:
            _log.warning("cannot program the routes (retrying): %s", exc.message)
            self._applied = None
            return
        if wanted != self._applied or table.version != self._applied_version:
            _log.info(
                "routes (table version %d): %s",
                table.version,
                "; ".join(
                    f"{h.dst}→{h.site or 'unreachable'}"
                    + ("" if h.source == "table" else f" ({h.source})")
                    for h in hops
                ),
            )
        self._applied, self._applied_at = wanted, now
        self._applied_version = table.version

    def _hops(self, table: RouteTableOut) -> list[LocalHop]:
        entries = [
            TableRoute(
                dst=r.dst,
                next_circuit=r.next_circuit,
                next_site=r.next_site,
                backup_circuit=r.backup_circuits[0] if r.backup_circuits else None,
                backup_site=r.backup_sites[1] if len(r.backup_sites) > 1 else None,
            )
            for r in table.routes
        ]
        site = table.routes[0].src if table.routes else ""
        fabric = self._fabric
        if fabric is not None and not _agrees(fabric, table):
            # The server applied another fabric (docs/fabric.md): this copy may lead a
            # detour over circuits that changed.  The table's backup is the server's word.
            if not self._stale_fabric:
                _log.warning(
                    "the route table names sites or circuits this agent's --fabric lacks; "
                    "fast reroute takes the table's backups until the agent restarts with "
                    "the fabric in force (onecluster fabric show)"
                )
            self._stale_fabric = True
            fabric = None
        return local_hops(
            site,
            entries,
            silent=self._silent,
            table_down=table.down,
            fabric=fabric,
            reachable=self._peers.keys(),
        )

    def _routes(self, table: RouteTableOut, hops: list[LocalHop]) -> list[KernelRoute]:
        wanted = []
        for r, hop in zip(table.routes, hops, strict=True):
            known = self._last.get(r.dst)
            if hop.circuit is None and r.dst_address is not None:
                route = KernelRoute(dst=r.dst_address, via=None)
            elif (
                hop.circuit is not None and r.dst_address is not None and hop.circuit in self._peers
            ):
                route = KernelRoute(
                    dst=r.dst_address, via=self._peers[hop.circuit], src=self._service_address
                )
            elif known is not None and known[0] == hop.circuit:
                # The destination's address or the next hop's is not known just now (a server
                # that restarted, an agent that has not announced yet): keep the route there
                # was over the same circuit rather than none.
                route = known[1]
            else:
                continue
            self._last[r.dst] = (hop.circuit, route)
            wanted.append(route)
        return wanted

    def _note_overrides(self, table: RouteTableOut, hops: list[LocalHop]) -> None:
        """Log where the site now departs from the table, or follows it again."""
        overrides = {h.dst: h for h in hops if h.source != "table"}
        if overrides == self._overrides:
            return
        for dst, hop in overrides.items():
            if self._overrides.get(dst) != hop:
                nxt = _table_next(table, dst)
                _log.warning(
                    "fast reroute: %s is silent to this site's probes; traffic to %s goes %s "
                    "until the server's table routes around it",
                    nxt or "its next circuit",
                    dst,
                    f"via {hop.site} ({hop.circuit}, {hop.source})" if hop.circuit else "nowhere",
                )
        for dst in self._overrides.keys() - overrides.keys():
            _log.warning(
                "fast reroute: traffic to %s follows the server's table again (via %s)",
                dst,
                _table_next(table, dst) or "nowhere",
            )
        self._overrides = overrides


def _agrees(fabric: Fabric, table: RouteTableOut) -> bool:
    """Whether every site and circuit ``table`` names is in ``fabric``."""
    sites = set(fabric.site_names)
    circuits = {c.name for c in fabric.circuits}
    named = set(table.down)
    for r in table.routes:
        if r.src not in sites or r.dst not in sites:
            return False
        named.update(r.circuits, r.backup_circuits)
    return named <= circuits


def _table_next(table: RouteTableOut, dst: str) -> str | None:
    """The table's next circuit toward ``dst``."""
    return next((r.next_circuit for r in table.routes if r.dst == dst), None)
