"""Which of a site's own circuits its own probes find silent, with hysteresis and flap damping
(pure, injected time): what the site's fast reroute acts on before the server has heard.

Each circuit answers round-trip probes many times a second.  It is *silent* once no reply has
come for ``silence_s`` (a failure in either direction silences the round trip, so both ends
see it), and *working* again only after ``up_after_s`` of replies with no such silence in
them; every silence adds a flap penalty that halves every ``half_life_s``, and above
``suppress_at`` the circuit stays silent — to this judge — until the penalty decays below
``reuse_at``, however well it answers.  These are the rules and the numbers of the server's
:class:`~onecluster.topology.LinkTracker`, which does the judging here too (fed with the
replies and with one lost probe per silence), so a circuit that drops for a second every five
is taken out once and stays out, here as on the server.

Silence is counted from proven facts only: the prober says until when it has read every reply
(:attr:`~onecluster.telemetry.Liveness.until`) and, with each reply, how long the circuit was
proven silent before it — so a probe thread that ran late is never read as a silent circuit,
and a silence that began and ended between two readings still counts.  Isolated lost probes
shorter than ``silence_s`` change nothing: only silence moves traffic.

A circuit is judged from its first reply on (one that never answered is the server's to
judge), and forgotten when it is no longer probed (its far end unknown): its silence then
means nothing.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, replace

from onecluster.topology._link_state import Hysteresis, LinkTracker

__all__ = ["SilenceWatch", "SilenceWatchStats"]

#: A silence is fed to the tracker this much after ``silence_s`` has passed, so that float
#: rounding of ``last + silence_s - last`` never leaves it a hair short of the threshold.
_EPSILON_S = 1e-6
#: The local judge keeps a short window: it only tells silent from working, so the window's
#: loss and RTT figures (for ``degraded``) go unused, and a short one keeps each reply cheap
#: at tens of probes a second.
_WINDOW_S = 1.0


@dataclass(frozen=True, slots=True, kw_only=True)
class SilenceWatchStats:
    """A snapshot of the judge: the silent circuits and how often each fell silent."""

    silent: frozenset[str]
    silences: dict[str, int]


class _Watched:
    def __init__(self, config: Hysteresis, at: float) -> None:
        self.tracker = LinkTracker(config, now=at)
        self.last = at  # when the newest reply was read
        self.counted = False  # whether the silence since ``last`` was fed to the tracker
        self.silences = 0


class SilenceWatch:
    """The silent circuits of one site from its prober's replies (see the module docstring).

    ``hysteresis`` gives the way back (``up_after_s``) and the damping; its ``down_after_s``
    is replaced by ``silence_s``.
    """

    def __init__(self, silence_s: float, hysteresis: Hysteresis | None = None) -> None:
        if not silence_s > 0:
            msg = f"silence_s must be positive (got {silence_s})"
            raise ValueError(msg)
        self.silence_s = silence_s
        self.config = replace(
            hysteresis or Hysteresis(), down_after_s=silence_s, window_s=_WINDOW_S
        )
        self._circuits: dict[str, _Watched] = {}
        self._silent: frozenset[str] = frozenset()

    @property
    def silent(self) -> frozenset[str]:
        """The circuits silent after the last :meth:`settle`."""
        return self._silent

    def heard(self, circuit: str, at: float, *, quiet_s: float = 0.0, rtt_ms: float = 0.0) -> None:
        """A reply on ``circuit`` read at ``at``, after ``quiet_s`` of proven silence.

        Replies of one circuit come in time order.
        """
        w = self._circuits.get(circuit)
        if w is None:
            w = self._circuits[circuit] = _Watched(self.config, at)
        elif quiet_s >= self.silence_s and not w.counted:
            # A silence that ended before anyone settled: it counts all the same.
            self._count_silence(w, w.last + self.silence_s + _EPSILON_S)
        w.tracker.observe(at, rtt_ms)
        w.last = at
        w.counted = False

    def settle(self, until: float, *, probing: Collection[str] | None = None) -> frozenset[str]:
        """Judge every circuit at ``until`` (every reply before it has been :meth:`heard`);
        the silent ones.  Circuits not in ``probing`` (when given) are forgotten."""
        if probing is not None:
            for name in [n for n in self._circuits if n not in probing]:
                del self._circuits[name]
        for w in self._circuits.values():
            if until - w.last >= self.silence_s and not w.counted:
                self._count_silence(w, w.last + self.silence_s + _EPSILON_S)
            w.tracker.tick(until)
        self._silent = frozenset(n for n, w in self._circuits.items() if w.tracker.state == "down")
        return self._silent

    def deadline(self) -> float | None:
        """The earliest moment a circuit judged working now would turn silent if no reply
        came before it (``None``: none is working) — when a look is due next."""
        return min(
            (w.last + self.silence_s for w in self._circuits.values() if w.tracker.state != "down"),
            default=None,
        )

    def statistics(self) -> SilenceWatchStats:
        """What the judge holds now."""
        return SilenceWatchStats(
            silent=self._silent,
            silences={name: w.silences for name, w in self._circuits.items()},
        )

    @staticmethod
    def _count_silence(w: _Watched, at: float) -> None:
        """One lost probe at ``at`` stands for the whole silence: it goes down, or — while
        held down after replies came back — it flapped again (a penalty, and the way back
        starts over)."""
        w.tracker.observe(at, None)
        w.counted = True
        w.silences += 1
