"""The agent's side of link measurement and routing.

:class:`SiteLinks` owns the site's prober (the agent's ``/metrics`` exports it).  Each sync
carries, per circuit, the window figures and the probe outcomes not yet acknowledged; the
outcomes are acknowledged only once the server has answered, so a failed sync loses none.
From each reply it learns the peers' probe endpoints and the site's route table.  With a
:class:`~onecluster.network.RouteSink` it programs the site's routes from that table
(:class:`~onecluster.agent._routing.SiteRoutes`) and runs the fast reroute
(:class:`~onecluster.agent._reroute.FastReroute`): a thread of its own that moves the routes
off a circuit its probes find silent, before — or without — the server.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from onecluster.agent._reroute import FastReroute
from onecluster.agent._routing import RouteStats, SiteRoutes
from onecluster.model import Fabric
from onecluster.network import RouteSink
from onecluster.schema import AgentSyncReply, LinkReport, ProbeSample
from onecluster.telemetry import PeerEndpoint, Prober

__all__ = ["SiteLinks"]

_log = logging.getLogger("onecluster.agent")


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else seconds * 1000


class SiteLinks:
    """Probes and routes of one site (see the module docstring).

    ``fabric`` lets the fast reroute pick a loop-free detour of its own (else it takes the
    table's backup); ``silence_s`` is how long a circuit goes without a reply before it is
    routed around (default: :data:`~onecluster.agent._reroute.SILENT_AFTER_PROBES` probe
    intervals).  :meth:`start` starts the probes and the fast reroute; until then routes
    follow the tables handed to :meth:`delivered` only.
    """

    def __init__(
        self,
        prober: Prober,
        *,
        service_address: str | None = None,
        routes: RouteSink | None = None,
        reapply_s: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
        fabric: Fabric | None = None,
        silence_s: float | None = None,
    ) -> None:
        self.prober = prober
        self.service_address = service_address
        self._in_flight: dict[str, int] = {}
        self._refusals: set[str] = set()
        self.routes: SiteRoutes | None = None
        self.reroute: FastReroute | None = None
        if routes is not None:
            self.routes = SiteRoutes(
                routes,
                service_address=service_address,
                fabric=fabric,
                reapply_s=reapply_s,
                clock=clock,
            )
            self.reroute = FastReroute(prober, self.routes, silence_s=silence_s)

    def start(self) -> None:
        """Start probing and, when routes are programmed, the fast reroute."""
        self.prober.start()
        if self.reroute is not None:
            self.reroute.start()

    def route_statistics(self) -> RouteStats | None:
        """The routes' snapshot (``None`` when this site programs none)."""
        return None if self.routes is None else self.routes.statistics()

    def clock(self) -> float:
        """The prober's clock now (the sync's ``probe_clock_s``)."""
        return self.prober.clock()

    def reports(self) -> list[LinkReport]:
        """One report per circuit: window figures and every outcome not yet acknowledged."""
        pending = self.prober.pending()
        reports = []
        self._in_flight = {}
        for snap in self.prober.snapshot():
            outcomes = pending.get(snap.circuit, [])
            if outcomes:
                self._in_flight[snap.circuit] = outcomes[-1].seq
            f = snap.figures
            reports.append(
                LinkReport(
                    circuit=snap.circuit,
                    endpoint=snap.local,
                    sent=snap.sent,
                    lost=snap.lost,
                    loss=f.loss,
                    rtt_min_ms=_ms(f.rtt_min_s),
                    rtt_p50_ms=_ms(f.rtt_p50_s),
                    rtt_p99_ms=_ms(f.rtt_p99_s),
                    pdv_p50_ms=_ms(f.pdv_p50_s),
                    pdv_p99_ms=_ms(f.pdv_p99_s),
                    jitter_ms=_ms(f.jitter_s),
                    samples=[
                        ProbeSample(seq=o.seq, sent_s=o.sent_at, rtt_ms=_ms(o.rtt_s))
                        for o in outcomes
                    ],
                )
            )
        return reports

    def delivered(self, reply: AgentSyncReply) -> None:
        """The server took the last :meth:`reports`: acknowledge them and follow ``reply``."""
        self.prober.acknowledge(self._in_flight)
        self._in_flight = {}
        for refusal in reply.refused_links:
            if refusal not in self._refusals:
                self._refusals.add(refusal)
                _log.error("the server ignores some probe reports: %s", refusal)
        peers = {}
        for p in reply.peers:  # the schema checked them: IPv4:port, port 1-65535
            host, _, port = p.endpoint.rpartition(":")
            peers[p.circuit] = PeerEndpoint(site=p.site, host=host, port=int(port))
        self.prober.set_peers(peers)
        if reply.routes is not None and self.routes is not None:
            self.routes.follow(reply.routes, {c: p.host for c, p in peers.items()})

    def attention(self) -> bool:
        """Whether a circuit just fell silent or recovered (sync early)."""
        return self.prober.attention()

    def close(self) -> None:
        """Stop the fast reroute and the probes (routes stay)."""
        if self.reroute is not None:
            self.reroute.close()
        self.prober.close()
