"""The chunks a fetch still needs, shared by every stream of every path.

Streams take batches, and give back what they could not bring (their path broke).  When
nothing is left to hand out, an idle stream may take chunks that are in flight elsewhere
and have been for a while — at most once each — so that one stalled path never holds up
the end of a transfer (the receiver keeps whichever copy verifies first).
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable

from onecluster.transfer import ChunkRef

__all__ = ["Work"]


class Work:
    """The chunks a fetch needs (thread-safe)."""

    def __init__(self, chunks: Iterable[ChunkRef], *, clock: Callable[[], float] = time.monotonic):
        self._clock = clock
        self._pending: deque[ChunkRef] = deque(chunks)
        self._flight: OrderedDict[bytes, tuple[ChunkRef, float]] = OrderedDict()
        self._doubled: set[bytes] = set()
        self._cond = threading.Condition()
        self.total = len(self._pending)
        self.done_count = 0
        self._pending_bytes = sum(c.size for c in self._pending)

    @property
    def pending_bytes(self) -> int:
        """Bytes of the chunks not handed out yet."""
        with self._cond:
            return self._pending_bytes

    @property
    def finished(self) -> bool:
        with self._cond:
            return not self._pending and not self._flight

    def take(
        self, *, max_bytes: int, max_count: int, steal_after_s: float | None = None
    ) -> list[ChunkRef]:
        """A batch to request: pending chunks; when none is pending, chunks in flight for
        longer than ``steal_after_s`` that no other stream has doubled yet."""
        now = self._clock()
        with self._cond:
            batch: list[ChunkRef] = []
            size = 0
            while self._pending and len(batch) < max_count:
                chunk = self._pending[0]
                if batch and size + chunk.size > max_bytes:
                    break
                self._pending.popleft()
                self._pending_bytes -= chunk.size
                if chunk.digest in self._flight:
                    continue
                self._flight[chunk.digest] = (chunk, now)
                batch.append(chunk)
                size += chunk.size
            if batch or steal_after_s is None:
                return batch
            for key, (chunk, since) in self._flight.items():
                if len(batch) >= max_count or size >= max_bytes:
                    break
                if key not in self._doubled and now - since >= steal_after_s:
                    self._doubled.add(key)
                    batch.append(chunk)
                    size += chunk.size
            return batch

    def done(self, chunk: bytes) -> None:
        """The chunk is written and verified."""
        with self._cond:
            if self._flight.pop(chunk, None) is not None:
                self.done_count += 1
            self._doubled.discard(chunk)
            self._cond.notify_all()

    def give_back(self, chunks: Iterable[ChunkRef]) -> None:
        """Chunks a stream will not bring after all: pending again, first in line."""
        with self._cond:
            for chunk in chunks:
                if self._flight.pop(chunk.digest, None) is not None:
                    self._pending.appendleft(chunk)
                    self._pending_bytes += chunk.size
                self._doubled.discard(chunk.digest)
            self._cond.notify_all()

    def wait(self, timeout_s: float) -> None:
        """Until something changes (a chunk done or given back), at most ``timeout_s``."""
        with self._cond:
            self._cond.wait(timeout_s)
