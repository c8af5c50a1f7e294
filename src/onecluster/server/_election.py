"""This server's part in choosing the leader among the replicas on one database.

Every replica runs :meth:`Election.run`: every ``lease_s / 4`` it renews the leadership
lease if it holds it, or takes it if it is vacant (``Store.lead``), and notes itself in the
``servers`` table.  Only the leader runs the reconcile loop, link state and routing; every
replica serves the API.

A replica believes it leads only until its lease would end by its *own* monotonic clock,
counted from the moment it *sent* the renewal, less a tenth of the lease: the database's end
of the lease always comes later.  So a replica frozen for longer than its lease (SIGSTOP, a
stalled VM) wakes up knowing it no longer leads, before it asks anyone; and should it act
on a stale belief all the same, the database refuses its fenced writes (``store.fenced``).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from onecluster import __version__
from onecluster.clock import Clock
from onecluster.errors import PlatformError
from onecluster.store import LeaderRecord, ServerRecord, Store

__all__ = ["Election", "ElectionStats"]

_log = logging.getLogger("onecluster.server")

#: Kept between this replica's end of its lease and the database's.
_MARGIN_SHARE = 0.1
#: How often a replica notes itself in ``servers``.
_NOTE_EVERY_S = 2.0


@dataclass(frozen=True, slots=True, kw_only=True)
class ElectionStats:
    """A snapshot: whether this replica leads, the term it leads in (or last saw), who
    leads (``leader_url``, None while the lease is vacant or its holder gave no URL), and how
    often this replica took or lost the lease."""

    holder: str
    url: str | None
    leading: bool
    term: int
    leader_url: str | None
    leader_holder: str | None
    elected: int
    deposed: int


class Election:
    """Competes for the lease and says whether this replica leads (thread-safe reads)."""

    def __init__(
        self,
        store: Store,
        clock: Clock,
        *,
        holder: str,
        url: str | None,
        lease_s: float,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._store = store
        self._clock = clock
        self.holder = holder
        self.url = url
        self.lease_s = lease_s
        self._monotonic = monotonic
        self._started_at = clock.now()
        self._noted_at = float("-inf")
        self._term = 0
        self._leading_until = float("-inf")
        self._seen: LeaderRecord | None = None
        self._elected = 0
        self._deposed = 0
        self._was_leading = False
        # ``_term`` and ``_leading_until`` change together, under this lock: a pass must never
        # pair "leading" read before a deposition with a term read after it.
        self._lock = threading.Lock()
        # Its own thread: a renewal never waits behind API work on the default pool.
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="election")

    # -- state ----------------------------------------------------------------------------

    @property
    def leading(self) -> bool:
        """This replica leads now (its own, earlier, end of the lease has not come)."""
        return self._monotonic() < self._leading_until

    @property
    def term(self) -> int:
        """The term this replica leads in, or the last term it saw."""
        return self._term

    def mandate(self) -> int | None:
        """The term this replica leads in now, or None: one consistent reading of both, for
        work to be fenced with (``store.fenced(term, holder)``)."""
        with self._lock:
            return self._term if self._monotonic() < self._leading_until else None

    @property
    def leader_url(self) -> str | None:
        """Where the leader serves, as last seen (None: nobody leads, or unknown)."""
        seen = self._seen
        if seen is None or seen.vacant:
            return None
        return seen.url

    def statistics(self) -> ElectionStats:
        """The snapshot the API and the dashboard read."""
        seen = self._seen
        return ElectionStats(
            holder=self.holder,
            url=self.url,
            leading=self.leading,
            term=self._term,
            leader_url=self.leader_url,
            leader_holder=None if seen is None or seen.vacant else seen.holder,
            elected=self._elected,
            deposed=self._deposed,
        )

    # -- work -----------------------------------------------------------------------------

    def tick(self) -> bool:
        """Renew or take the lease once (blocking); whether this replica leads afterwards.

        :class:`~onecluster.errors.UnavailableError` when the database cannot be reached —
        and then this replica stops believing it leads once its own end of the lease comes.
        """
        sent = self._monotonic()
        record = self._store.lead(
            self.holder, url=self.url, lease_s=self.lease_s, now=self._clock.now()
        )
        self._seen = record
        with self._lock:
            if record.held_by(self.holder):
                if record.term != self._term or not self._was_leading:
                    self._elected += 1
                    _log.warning("this server leads the control plane now (term %d)", record.term)
                self._term = record.term
                self._leading_until = sent + self.lease_s * (1 - _MARGIN_SHARE)
                self._was_leading = True
            else:
                self._stop_leading(record.term)
        self._note()
        return self.leading

    def step_down(self, term: int) -> None:
        """The database refused a fenced write of ``term``: stop leading at once."""
        with self._lock:
            if term == self._term:
                self._stop_leading(term)

    def resign(self) -> None:
        """Give the lease up (a clean shutdown), so another replica takes it at once."""
        with self._lock:
            was = self._term if self._monotonic() < self._leading_until else None
            self._leading_until = float("-inf")
            self._was_leading = False
        try:
            if was is not None:
                self._store.resign(self.holder, was, now=self._clock.now())
            self._store.forget_server(self.holder)
        except PlatformError as exc:
            _log.warning("could not give the leadership up cleanly: %s", exc.message)

    async def run(self) -> None:
        """Renew or compete every quarter lease, forever (until cancelled), on a thread of
        its own."""
        every = self.lease_s / 4
        loop = asyncio.get_running_loop()
        try:
            while True:
                began = self._monotonic()
                try:
                    await loop.run_in_executor(self._executor, self.tick)
                except PlatformError as exc:
                    _log.warning("cannot renew or take the leadership lease: %s", exc.message)
                await asyncio.sleep(max(0.0, every - (self._monotonic() - began)))
        finally:
            self._executor.shutdown(wait=False)

    def _stop_leading(self, term: int) -> None:
        # Under ``_lock``.
        if self._was_leading:
            self._deposed += 1
            _log.warning("this server no longer leads (term %d)", max(term, self._term))
        self._was_leading = False
        self._leading_until = float("-inf")
        self._term = max(self._term, term)

    def _note(self) -> None:
        now = self._clock.now()
        if now - self._noted_at < _NOTE_EVERY_S:
            return
        self._noted_at = now
        self._store.note_server(
            ServerRecord(
                id=self.holder,
                url=self.url,
                version=__version__,
                started_at=self._started_at,
                seen_at=now,
            )
        )
