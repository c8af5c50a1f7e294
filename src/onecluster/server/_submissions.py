"""Group commit for submissions: many concurrent submits, one database transaction.

Each submission is admitted on the event loop (pure, microseconds), then queued; one writer
task takes everything queued so far (up to ``max_batch``), stores it in one transaction in a
worker thread, and answers every waiting request.  Under load this turns hundreds of small
transactions (and thread hand-offs) per second into a few dozen; alone, a submission waits
for nothing but its own transaction.  If the transaction fails, every request in the batch
gets the error and nothing of the batch is stored.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

from onecluster.errors import UnavailableError
from onecluster.model import JobRecord, JobSpec

__all__ = ["SubmissionWriter"]

_Waiting = tuple[JobSpec, "asyncio.Future[JobRecord]"]


class SubmissionWriter:
    """Batches submissions into one transaction each; owned by the app's lifespan."""

    def __init__(
        self, record: Callable[[Sequence[JobSpec]], list[JobRecord]], *, max_batch: int = 256
    ) -> None:
        self._record = record
        self._max_batch = max_batch
        self._queue: asyncio.Queue[_Waiting] = asyncio.Queue()
        self._running = False

    async def submit(self, spec: JobSpec) -> JobRecord:
        """Store ``spec`` as a pending job (with others queued at the same time)."""
        if not self._running:
            msg = "the server is shutting down or not started; the job was not stored"
            raise UnavailableError(msg, hint="retry in a moment")
        future: asyncio.Future[JobRecord] = asyncio.get_running_loop().create_future()
        await self._queue.put((spec, future))
        return await future

    async def run(self) -> None:
        """Write batches until cancelled; what is queued at cancellation is refused."""
        self._running = True
        try:
            while True:
                batch = [await self._queue.get()]
                while len(batch) < self._max_batch and not self._queue.empty():
                    batch.append(self._queue.get_nowait())
                await self._write(batch)
        finally:
            self._running = False
            while not self._queue.empty():
                _, future = self._queue.get_nowait()
                if not future.done():
                    future.set_exception(
                        UnavailableError("the server stopped before the job was stored")
                    )

    async def _write(self, batch: list[_Waiting]) -> None:
        try:
            records = await asyncio.to_thread(self._record, [spec for spec, _ in batch])
        except Exception as exc:  # noqa: BLE001 -- every waiting request gets the error
            for _, future in batch:
                if not future.done():
                    future.set_exception(exc)
            return
        for (_, future), record in zip(batch, records, strict=True):
            if not future.done():
                future.set_result(record)
