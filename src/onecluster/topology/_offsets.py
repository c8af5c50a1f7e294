"""Agents' clocks mapped onto the server's (pure, injected time).

An agent stamps its probes with its own monotonic clock and sends that clock's reading with
each sync.  The *offset* of a sync is (server time when it arrived − the agent's reading),
which is the true offset plus the sync's time in transit.  The agent's offset is the
smallest over the last ``window_s``: the least delayed sync.  So one slow request never moves
probe times, and a clock that steps or drifts is followed within the window.  It is never
more than the latest sync's own offset, so a probe sent before that sync was built is never
placed after the server received it: no report comes from the future.
"""

from __future__ import annotations

from collections import deque

__all__ = ["ClockOffsets"]


class ClockOffsets:
    """Each site's agent clock offset (a new agent of a site starts afresh)."""

    def __init__(self, window_s: float = 60.0) -> None:
        self.window_s = window_s
        # site → (agent id, (server time, server time − agent clock) of its recent syncs)
        self._history: dict[str, tuple[str, deque[tuple[float, float]]]] = {}

    def offset(self, site: str, agent_id: str, clock_s: float, now: float) -> float:
        """Take one sync of ``site``'s agent (its clock read ``clock_s`` when the server's read
        ``now``); the offset to add to that agent's times to place them in server time."""
        known = self._history.get(site)
        history = known[1] if known is not None and known[0] == agent_id else deque()
        history.append((now, now - clock_s))
        while history and history[0][0] < now - self.window_s:
            history.popleft()
        self._history[site] = (agent_id, history)
        return min(offset for _, offset in history)
