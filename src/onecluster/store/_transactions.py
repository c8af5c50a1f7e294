"""The transaction machinery every repository of the store shares: one session per call,
writers queued, conflicts retried, outages translated, and leader-only work fenced.

A thread that runs under :func:`fenced` (the leader's reconcile loop) has every write
transaction begin with the fencing check of :mod:`onecluster.store._fence`: the database
refuses it (:class:`NotLeaderError`, nothing written) once the term it was given no longer
holds the lease.  A transaction that requeued or cancelled jobs also bumps the shared queue
epoch, so that a leader in another process notices.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from contextvars import ContextVar
from typing import TypeVar

from sqlalchemy import Engine, text
from sqlalchemy.exc import DBAPIError, OperationalError
from sqlalchemy.orm import Session

from onecluster.errors import UnavailableError
from onecluster.store._engine import READ_ONLY_OPTION
from onecluster.store._fence import check_fence
from onecluster.store._transitions import PENDING_CHANGED

__all__ = ["Transactions", "fenced"]

T = TypeVar("T")

#: The (term, holder) the current thread's writes are fenced with (``None``: not fenced).
_FENCE: ContextVar[tuple[int, str] | None] = ContextVar("onecluster_fence", default=None)


@contextmanager
def fenced(term: int, holder: str) -> Iterator[None]:
    """Fence every write transaction this thread runs inside with ``term`` and ``holder``:
    each one first checks in the database that ``holder`` still holds the leadership lease in
    ``term``, and is refused (:class:`NotLeaderError`) otherwise."""
    token = _FENCE.set((term, holder))
    try:
        yield
    finally:
        _FENCE.reset(token)


#: SQLSTATEs after which PostgreSQL asks the client to run the transaction again.
_RETRY_SQLSTATES = frozenset({"40001", "40P01"})
_TRIES = 5


class Transactions:
    """Runs units of work, each in one transaction of its own (thread-safe).

    A unit that PostgreSQL aborts as a serialisation failure or deadlock is run again (up to
    five times); a database that cannot be used surfaces as :class:`UnavailableError`.
    """

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._reader = engine.execution_options(**{READ_ONLY_OPTION: True})
        self._epoch_lock = threading.Lock()
        self._pending_epoch = 0
        # SQLite admits one writer at a time and makes the others poll with sleeps that grow
        # to 100 ms (its busy handler).  Queueing this process's writers on a lock instead
        # hands the write lock over at once, without those sleeps in the latency.
        self._writer: AbstractContextManager[object] = (
            threading.Lock() if engine.dialect.name == "sqlite" else nullcontext()
        )

    @property
    def pending_epoch(self) -> int:
        """Bumped after every committed transaction that put a job back in the queue or took
        one out other than by starting it (requeue, cancel).  Submissions do not bump it: a
        cache of the pending set adds those itself and reloads only when this moves."""
        return self._pending_epoch

    @property
    def engine(self) -> Engine:
        """The SQLAlchemy engine underneath."""
        return self._engine

    def close(self) -> None:
        """Close every pooled connection."""
        self._engine.dispose()

    def _run(self, work: Callable[[Session], T], *, write: bool = True) -> T:
        bind = self._engine if write else self._reader
        for attempt in range(_TRIES):
            try:
                with Session(bind, expire_on_commit=False) as session:
                    with self._writer if write else nullcontext(), session.begin():
                        fence = _FENCE.get() if write else None
                        if fence is not None:
                            check_fence(session, *fence)
                        result = work(session)
                        if session.info.get(PENDING_CHANGED):
                            session.execute(_BUMP_QUEUE_EPOCH)
                    if session.info.get(PENDING_CHANGED):
                        with self._epoch_lock:
                            self._pending_epoch += 1
                    return result
            except DBAPIError as exc:
                state = getattr(exc.orig, "sqlstate", None)
                if state in _RETRY_SQLSTATES and attempt + 1 < _TRIES:
                    continue
                if isinstance(exc, OperationalError):
                    msg = f"the database cannot be used right now: {exc.orig}"
                    raise UnavailableError(msg, hint="check that the database is up") from exc
                raise
        msg = "a database transaction kept conflicting with others and was given up"
        raise UnavailableError(msg, hint="retry the request")

    def _read(self, work: Callable[[Session], T]) -> T:
        return self._run(work, write=False)


_BUMP_QUEUE_EPOCH = text("UPDATE queue_epoch SET epoch = epoch + 1 WHERE id = 1")
