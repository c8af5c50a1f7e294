"""The server's periodic verification of the export register it writes to.

A register that no longer verifies (an entry edited on disk, a checkpoint removed, the key
replaced) must be seen by the NOC before a regulator sees it.  :class:`RegisterWatch`
verifies the open register (:func:`~onecluster.register.verify_open`) at most once per
``every_s`` on the control plane's clock, whenever it is asked — the ``/metrics`` scrape
asks — and keeps the last outcome for the ``onecluster_register_*`` metrics.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass

from onecluster.clock import Clock
from onecluster.errors import PlatformError
from onecluster.register import verify_open
from onecluster.server._exports import ExportControl

__all__ = ["RegisterCheck", "RegisterWatch"]

_log = logging.getLogger("onecluster.register")

#: How often the register is verified at most: it is read whole each time.
VERIFY_EVERY_S = 60.0


@dataclass(frozen=True, slots=True, kw_only=True)
class RegisterCheck:
    """The last verification: when it ran (``at``), whether it succeeded (``ok``), the
    entries its latest signed head covers, when one last succeeded, and why it failed."""

    at: float
    ok: bool
    size: int
    last_ok_at: float | None
    error: str | None = None


class RegisterWatch:
    """Verifies ``exports``' register when asked and due (thread-safe)."""

    def __init__(
        self, exports: ExportControl, clock: Clock, every_s: float = VERIFY_EVERY_S
    ) -> None:
        self._exports = exports
        self._clock = clock
        self._every_s = every_s
        self._lock = threading.Lock()
        self._last: RegisterCheck | None = None

    def check(self) -> RegisterCheck:
        """The last verification, run again first if ``every_s`` has passed since it."""
        with self._lock:
            now = self._clock.now()
            last = self._last
            if last is not None and now - last.at < self._every_s:
                return last
            self._last = self._verify(now, last)
            return self._last

    def _verify(self, now: float, last: RegisterCheck | None) -> RegisterCheck:
        last_ok_at = None if last is None else last.last_ok_at
        register = self._exports.register
        if register is None:
            error = self._exports.register_error or "the export register is not open"
            return RegisterCheck(at=now, ok=False, size=0, last_ok_at=last_ok_at, error=error)
        try:
            report = verify_open(register)
        except PlatformError as exc:
            if last is None or last.ok:
                _log.error("the export register does not verify: %s", exc.message)
            return RegisterCheck(
                at=now, ok=False, size=register.size, last_ok_at=last_ok_at, error=exc.message
            )
        return RegisterCheck(at=now, ok=True, size=report.size, last_ok_at=now)
