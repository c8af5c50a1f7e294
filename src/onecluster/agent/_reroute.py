"""Fast reroute: a thread of its own that reads the site's probe replies and moves its routes
off a circuit the moment its probes fall silent — with the server up, down or unreachable.

The sync loop cannot do this: a sync waits on the server (seconds when the server hangs, for
ever when it is gone), and even a healthy server decides a circuit is down only when both
ends' reports have reached it.  So this thread takes the replies the prober read
(:meth:`~onecluster.telemetry.Prober.liveness`) — when a circuit's silence would be due, and
at least every 0.1 s — judges each circuit
(:class:`~onecluster.topology.SilenceWatch`: silent after ``silence_s`` without a reply, back
after 5 s of replies, flap damping as on the server) and hands the silent set to
:class:`~onecluster.agent._routing.SiteRoutes`, which routes around it until the server's
table does; it also re-applies the routes every ``reapply_s`` while no sync does.

The far end of a silent circuit switches on its own too (round-trip probes fall silent at
both ends whichever direction failed), and a site in between forwards on its table: the
detour is chosen so that it need not know (:func:`~onecluster.topology.local_hops`).
"""

from __future__ import annotations

import logging
import threading

from onecluster.agent._routing import SiteRoutes
from onecluster.telemetry import Prober
from onecluster.topology import Hysteresis, SilenceWatch

__all__ = ["FAST_PROBE_INTERVAL_S", "SILENT_AFTER_PROBES", "FastReroute", "fast_probe_interval"]

_log = logging.getLogger("onecluster.agent")

#: How often an agent that programs routes probes each circuit: 50 times a second (its cost,
#: measured by ``benchmarks/bench_probe_cost.py``, is in ``benchmarks/RESULTS.md``).
FAST_PROBE_INTERVAL_S = 0.02
#: A circuit is silent after this many probe intervals without a reply: 0.16 s at 50 probes
#: a second, eight replies missing in a row: by chance, at 1 % loss each way, 0.02⁸ × 50/s —
#: about once in 25,000 years; a cut is seen within 0.16 s plus half an RTT.
SILENT_AFTER_PROBES = 8


#: The longest rest between two looks (the way back and the periodic re-apply need no more).
_MAX_REST_S = 0.1


def fast_probe_interval(configured_s: float) -> float:
    """The probe interval of an agent that programs routes: the configured one, or
    :data:`FAST_PROBE_INTERVAL_S` if that is shorter."""
    return min(configured_s, FAST_PROBE_INTERVAL_S)


class FastReroute:
    """Watches ``prober``'s replies and tells ``routes`` which circuits are silent (see the
    module docstring).  ``silence_s`` defaults to :data:`SILENT_AFTER_PROBES` probe
    intervals; ``hysteresis`` to the server's way back and damping."""

    def __init__(
        self,
        prober: Prober,
        routes: SiteRoutes,
        *,
        silence_s: float | None = None,
        hysteresis: Hysteresis | None = None,
    ) -> None:
        self._prober = prober
        self._routes = routes
        self.silence_s = silence_s or SILENT_AFTER_PROBES * prober.interval_s
        self.watch = SilenceWatch(self.silence_s, hysteresis)
        self._min_rest_s = prober.interval_s / 2
        self._rest_s = self._min_rest_s
        self._silent: frozenset[str] = frozenset()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def step(self, *, wait_s: float = 0.0) -> frozenset[str]:
        """One look at the replies (after up to ``wait_s`` for the prober's next turn): judge
        every circuit, route around the silent ones; the silent circuits."""
        live = self._prober.liveness(wait_s=wait_s)
        for circuit, replies in live.heard.items():
            for h in replies:
                self.watch.heard(circuit, h.at, quiet_s=h.quiet_s, rtt_ms=h.rtt_s * 1000)
        silent = self.watch.settle(live.until, probing=live.probing)
        if silent != self._silent:
            for name in sorted(silent - self._silent):
                _log.warning(
                    "circuit %s is silent: no probe reply for %.2f s", name, self.silence_s
                )
            for name in sorted(self._silent - silent):
                _log.warning("circuit %s answers again (steadily, and past its flap damping)", name)
            self._silent = silent
            self._routes.avoid(silent)
        else:
            self._routes.refresh()
        # Rest until a working circuit's silence would be due — a look every few probe
        # intervals rather than every half one: a fifth of the thread's cost (RESULTS.md) —
        # but at least half a probe interval and at most _MAX_REST_S.
        deadline = self.watch.deadline()
        rest = _MAX_REST_S if deadline is None else deadline - self._prober.clock()
        self._rest_s = min(max(rest, self._min_rest_s), _MAX_REST_S)
        return silent

    def start(self) -> None:
        """Run :meth:`step` in a daemon thread (idempotent): when a circuit's silence would be
        due, and at least every 0.1 s."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="fast-reroute", daemon=True)
            self._thread.start()

    def close(self) -> None:
        """Stop the thread (the routes stay as they are); idempotent."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stop.wait(self._rest_s):
            try:
                self.step()
            except Exception:  # noqa: BLE001 - rerouting must outlive a bug in one look
                _log.exception("a fast-reroute step failed; continuing")
