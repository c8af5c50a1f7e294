"""The agent's side of link measurement and routing.

:class:`SiteLinks` owns the site's prober (and its ``/metrics`` endpoint, if any).  Each sync
carries, per circuit, the window figures and the probe outcomes not yet acknowledged; the
outcomes are acknowledged only once the server has answered, so a failed sync loses none.
From each reply it learns the peers' probe endpoints and the site's route table; with a
:class:`~onecluster.network.RouteSink` it programs one host route per peer site's service
address — via the peer's address on the route's next circuit — whenever the computed routes
differ from those last applied, and again every ``reapply_s`` (a device that came back
empties its routes).  A destination whose address or next hop's address is not known just
then keeps the route it had over the same circuit.  A route that cannot be applied is logged
and retried; it never stops the sync loop.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from onecluster.errors import PlatformError
from onecluster.network import KernelRoute, RouteSink
from onecluster.schema import AgentSyncReply, LinkReport, ProbeSample
from onecluster.telemetry import MetricsServer, PeerEndpoint, Prober

__all__ = ["SiteLinks"]

_log = logging.getLogger("onecluster.agent")


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else seconds * 1000


class SiteLinks:
    """Probes, metrics and routes of one site (see the module docstring)."""

    def __init__(
        self,
        prober: Prober,
        *,
        service_address: str | None = None,
        routes: RouteSink | None = None,
        metrics: MetricsServer | None = None,
        reapply_s: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.prober = prober
        self.service_address = service_address
        self._routes = routes
        self._metrics = metrics
        self._reapply_s = reapply_s
        self._clock = clock
        self._applied: list[KernelRoute] | None = None
        self._applied_at = float("-inf")
        self._route_version: int | None = None
        self._in_flight: dict[str, int] = {}
        self._refusals: set[str] = set()
        # per destination site: the next circuit and the route last wanted for it
        self._last: dict[str, tuple[str | None, KernelRoute]] = {}

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
        if reply.routes is None or self._routes is None:
            return
        wanted = []
        for r in reply.routes.routes:
            known = self._last.get(r.dst)
            if r.next_circuit is None and r.dst_address is not None:
                route = KernelRoute(dst=r.dst_address, via=None)
            elif (
                r.next_circuit is not None and r.dst_address is not None and r.next_circuit in peers
            ):
                route = KernelRoute(
                    dst=r.dst_address, via=peers[r.next_circuit].host, src=self.service_address
                )
            elif known is not None and known[0] == r.next_circuit:
                # The destination's address or the next hop's is not known just now (a server
                # that restarted, an agent that has not announced yet): keep the route there
                # was over the same circuit rather than none.
                route = known[1]
            else:
                continue
            self._last[r.dst] = (r.next_circuit, route)
            wanted.append(route)
        now = self._clock()
        if wanted == self._applied and now - self._applied_at < self._reapply_s:
            return
        try:
            self._routes.apply(wanted)
        except PlatformError as exc:
            _log.warning("cannot program the routes (retrying on the next sync): %s", exc.message)
            self._applied = None
            return
        if wanted != self._applied or reply.routes.version != self._route_version:
            _log.info(
                "routes (table version %d): %s",
                reply.routes.version,
                "; ".join(f"{r.dst}→{r.next_site or 'unreachable'}" for r in reply.routes.routes),
            )
        self._applied, self._applied_at = wanted, now
        self._route_version = reply.routes.version

    def attention(self) -> bool:
        """Whether a circuit just fell silent or recovered (sync early)."""
        return self.prober.attention()

    def close(self) -> None:
        """Stop the metrics endpoint and the probes."""
        if self._metrics is not None:
            self._metrics.close()
        self.prober.close()
