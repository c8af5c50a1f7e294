"""Group commit for the store: every quota operation submitted during one turn of the event
loop goes to the database in one transaction.

At one call at a time a batch holds one operation (one short SQLite transaction on the
loop); at 64 concurrent calls one transaction carries dozens, which is what keeps admission
exact (every decision inside the write lock) and cheap.  Operations keep their submission
order, so two calls racing for the last unit of a limit are decided first come, first served.

On PostgreSQL (a transaction is several network round trips) batches run in one worker
thread instead, one at a time; what arrives meanwhile forms the next batch.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from concurrent.futures import ThreadPoolExecutor

from onecluster.errors import UnavailableError
from onecluster.gateway._store import GatewayStore, OpResult, ReserveOp, SettleOp

__all__ = ["Batcher"]

_log = logging.getLogger(__name__)


class Batcher:
    """Queues operations for :class:`GatewayStore` and flushes them once per loop turn."""

    def __init__(self, store: GatewayStore) -> None:
        self._store = store
        self._pending: list[tuple[ReserveOp | SettleOp, asyncio.Future[OpResult]]] = []
        self._scheduled = False
        self._worker = ThreadPoolExecutor(1, "gateway-db") if store.blocking else None
        self._drainer: asyncio.Task[None] | None = None

    def submit(self, op: ReserveOp | SettleOp) -> asyncio.Future[OpResult]:
        """The future result of ``op`` (see :meth:`GatewayStore.apply`)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[OpResult] = loop.create_future()
        self._pending.append((op, future))
        if self._worker is not None:
            if self._drainer is None or self._drainer.done():
                self._drainer = loop.create_task(self._drain(), name="gateway-db-batches")
        elif not self._scheduled:
            self._scheduled = True
            loop.call_soon(self._flush)
        return future

    async def close(self) -> None:
        """Finish what is queued (PostgreSQL: let the worker drain), then stop the worker."""
        if self._drainer is not None:
            with contextlib.suppress(Exception):
                await self._drainer
        if self._worker is not None:
            self._worker.shutdown(wait=True)

    def record(self, op: SettleOp) -> None:
        """Write ``op`` without waiting (refusals' audit rows); failures are logged."""
        self.submit(op).add_done_callback(_log_failure)

    async def _drain(self) -> None:
        loop = asyncio.get_running_loop()
        while self._pending:
            batch, self._pending = self._pending, []
            try:
                results = await loop.run_in_executor(
                    self._worker, self._store.apply, [op for op, _ in batch]
                )
            except Exception as exc:  # noqa: BLE001  (a failed batch fails its calls, not the loop)
                self._fail(batch, exc)
            else:
                self._resolve(batch, results)

    def _flush(self) -> None:
        self._scheduled = False
        batch, self._pending = self._pending, []
        if not batch:
            return
        try:
            results = self._store.apply([op for op, _ in batch])
        except Exception as exc:  # noqa: BLE001  (any database failure fails the batch's calls, not the loop)
            self._fail(batch, exc)
        else:
            self._resolve(batch, results)

    def _fail(
        self, batch: list[tuple[ReserveOp | SettleOp, asyncio.Future[OpResult]]], exc: Exception
    ) -> None:
        _log.error("the gateway's database refused a batch of %d operations: %s", len(batch), exc)
        error = UnavailableError(
            f"the gateway's database failed ({type(exc).__name__}); nothing was charged"
        )
        for _, future in batch:
            if not future.done():
                future.set_exception(error)

    def _resolve(
        self,
        batch: list[tuple[ReserveOp | SettleOp, asyncio.Future[OpResult]]],
        results: list[OpResult],
    ) -> None:
        for (_, future), result in zip(batch, results, strict=True):
            if not future.done():
                future.set_result(result)


def _log_failure(future: asyncio.Future[OpResult]) -> None:
    if future.cancelled():
        return
    failure = future.exception() or future.result()
    if isinstance(failure, Exception):
        _log.error("an audit row could not be written: %s", failure)
