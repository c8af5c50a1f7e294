"""How long each site pair's transfers have gone without progress, for the
``onecluster_transfer_progress_age_seconds`` metric (pure, but for the memory it keeps).

The store holds each transfer's bytes done, not when they last grew; this remembers, per
transfer in flight, the bytes it last saw and when they grew, from one look to the next (the
scrapes).  A transfer first seen with nothing done has made no progress since it started (or
was created); one first seen part-way is taken to have progressed just now, since nothing
says otherwise — so the age starts again from zero when the server restarts.  Transfers that
ended are forgotten.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

from onecluster.store import TransferRecord

__all__ = ["STALLABLE_STATES", "ProgressAges"]

#: The states in which a transfer should progress: ``running``, and ``waiting`` (no path to
#: its source works).  A ``queued`` transfer waits its turn.
STALLABLE_STATES = frozenset({"running", "waiting"})


class ProgressAges:
    """Each transfer's last progress, kept between looks (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seen: dict[str, tuple[int, float]] = {}  # id → (bytes done, when they grew)

    def look(self, transfers: Sequence[TransferRecord], now: float) -> dict[tuple[str, str], float]:
        """The oldest time without progress, in seconds, per ``(src, dst)`` among the
        ``transfers`` (those in flight) that should progress."""
        ages: dict[tuple[str, str], float] = {}
        with self._lock:
            seen: dict[str, tuple[int, float]] = {}
            for t in transfers:
                if t.state not in STALLABLE_STATES:
                    continue
                before = self._seen.get(t.id)
                if before is not None and t.bytes_done <= before[0]:
                    seen[t.id] = before
                elif before is None and t.bytes_done == 0:
                    seen[t.id] = (0, t.started_at if t.started_at is not None else t.created_at)
                else:
                    seen[t.id] = (t.bytes_done, now)
                age = max(0.0, now - seen[t.id][1])
                pair = (t.src, t.dst)
                ages[pair] = max(ages.get(pair, 0.0), age)
            self._seen = seen
        return ages
