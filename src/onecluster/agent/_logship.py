"""Shipping attempt logs to the server in bounded chunks, each byte exactly once.

The backend reads logs by *byte* offset; the wire format (``LogChunkIn.offset``) counts
*characters* of the attempt's log.  A chunk never splits a character, so the character offset
is the running sum of the lengths of the chunks shipped.  Cursors move only after the server
accepted a sync (:meth:`LogShipper.commit`), so a failed sync resends the same chunk.

One sync carries at most :data:`LOG_BYTES_PER_SYNC` of log, all attempts together, so its
body stays far inside the server's limit however many attempts write at once; what does not
fit waits for the next sync, and the attempts that waited longest go first.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from onecluster.backends import AttemptStatus, ClusterBackend
from onecluster.errors import PlatformError
from onecluster.model import AttemptState
from onecluster.schema import MAX_LOG_CHARS, LogChunkIn

__all__ = ["LOG_BYTES_PER_SYNC", "LogBatch", "LogShipper"]

#: The most bytes of log one sync carries, all attempts together (1 MiB: 1 MiB/s per site
#: at the default heartbeat; JSON escaping makes it at most 6 MiB on the wire).
LOG_BYTES_PER_SYNC = 1 << 20
#: The smallest read worth making: one whole UTF-8 character always fits in 4 bytes.
_MIN_READ = 4


@dataclass(frozen=True, slots=True)
class _Cursor:
    byte_offset: int = 0
    char_offset: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class LogBatch:
    """The chunks of one sync and where each attempt's cursor moves if the sync succeeds."""

    chunks: tuple[LogChunkIn, ...] = ()
    cursors: Mapping[str, _Cursor] = field(default_factory=dict)
    drained: frozenset[str] = frozenset()


class LogShipper:
    """Per-attempt cursors over a backend's logs; at most ``chunk_bytes`` per attempt (never
    more than the wire's 64 KiB chunk) and ``sync_bytes`` in all per sync."""

    def __init__(
        self,
        backend: ClusterBackend,
        chunk_bytes: int = 65536,
        sync_bytes: int = LOG_BYTES_PER_SYNC,
    ) -> None:
        self._backend = backend
        # A byte decodes to at most one character: the server's bound on a chunk holds.
        self._chunk_bytes = min(chunk_bytes, MAX_LOG_CHARS)
        self._sync_bytes = sync_bytes
        self._cursors: dict[str, _Cursor] = {}
        self._drained: set[str] = set()
        #: The commit at which each attempt last had log text accepted (fair order).
        self._served: dict[str, int] = {}
        self._commits = 0

    @property
    def drained(self) -> frozenset[str]:
        """Finished attempts whose whole log the server has accepted."""
        return frozenset(self._drained)

    def collect(self, statuses: Iterable[AttemptStatus]) -> LogBatch:
        """New log text of every attempt in ``statuses`` (nothing is committed yet).

        An attempt whose log cannot be read is skipped this round and tried again next time;
        so is every attempt past the sync's byte budget, and those that waited longest are
        read first.
        """
        chunks: list[LogChunkIn] = []
        cursors: dict[str, _Cursor] = {}
        drained: set[str] = set()
        budget = self._sync_bytes
        for status in sorted(statuses, key=lambda s: self._served.get(s.attempt_id, -1)):
            if budget < _MIN_READ:
                break
            cursor = self._cursors.get(status.attempt_id, _Cursor())
            try:
                chunk = self._backend.read_logs(
                    status.attempt_id, cursor.byte_offset, min(self._chunk_bytes, budget)
                )
            except (PlatformError, OSError):
                continue
            budget -= max(0, chunk.next_offset - cursor.byte_offset)
            if chunk.data:
                chunks.append(
                    LogChunkIn(
                        attempt_id=status.attempt_id, offset=cursor.char_offset, data=chunk.data
                    )
                )
            if chunk.next_offset != cursor.byte_offset:
                cursors[status.attempt_id] = _Cursor(
                    chunk.next_offset, cursor.char_offset + len(chunk.data)
                )
            elif status.state is not AttemptState.RUNNING:
                drained.add(status.attempt_id)
        return LogBatch(chunks=tuple(chunks), cursors=cursors, drained=frozenset(drained))

    def commit(self, batch: LogBatch) -> None:
        """The server accepted ``batch``: move the cursors past it."""
        self._cursors.update(batch.cursors)
        self._drained.update(batch.drained)
        self._commits += 1
        for attempt_id in batch.cursors:
            self._served[attempt_id] = self._commits

    def forget(self, attempt_id: str) -> None:
        """Drop the cursor of an attempt the backend no longer holds."""
        self._cursors.pop(attempt_id, None)
        self._drained.discard(attempt_id)
        self._served.pop(attempt_id, None)
