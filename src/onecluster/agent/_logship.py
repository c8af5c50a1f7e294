"""Shipping attempt logs to the server in bounded chunks, each byte exactly once.

The backend reads logs by *byte* offset; the wire format (``LogChunkIn.offset``) counts
*characters* of the attempt's log.  A chunk never splits a character, so the character offset
is the running sum of the lengths of the chunks shipped.  Cursors move only after the server
accepted a sync (:meth:`LogShipper.commit`), so a failed sync resends the same chunk.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from onecluster.backends import AttemptStatus, ClusterBackend
from onecluster.errors import PlatformError
from onecluster.model import AttemptState
from onecluster.schema import LogChunkIn

__all__ = ["LogBatch", "LogShipper"]


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
    """Per-attempt cursors over a backend's logs; at most ``chunk_bytes`` per attempt per sync."""

    def __init__(self, backend: ClusterBackend, chunk_bytes: int = 65536) -> None:
        self._backend = backend
        self._chunk_bytes = chunk_bytes
        self._cursors: dict[str, _Cursor] = {}
        self._drained: set[str] = set()

    @property
    def drained(self) -> frozenset[str]:
        """Finished attempts whose whole log the server has accepted."""
        return frozenset(self._drained)

    def collect(self, statuses: Iterable[AttemptStatus]) -> LogBatch:
        """New log text of every attempt in ``statuses`` (nothing is committed yet).

        An attempt whose log cannot be read is skipped this round and tried again next time.
        """
        chunks: list[LogChunkIn] = []
        cursors: dict[str, _Cursor] = {}
        drained: set[str] = set()
        for status in statuses:
            cursor = self._cursors.get(status.attempt_id, _Cursor())
            try:
                chunk = self._backend.read_logs(
                    status.attempt_id, cursor.byte_offset, self._chunk_bytes
                )
            except (PlatformError, OSError):
                continue
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

    def forget(self, attempt_id: str) -> None:
        """Drop the cursor of an attempt the backend no longer holds."""
        self._cursors.pop(attempt_id, None)
        self._drained.discard(attempt_id)
