"""Events written in commit order, so that the feed ``id > cursor`` never skips one.

A follower pages the events table by id (``GET /api/v1/events?after=ID``).  That is only
gap-free if an event becomes visible no later than every event with a smaller id.  On
PostgreSQL ids come from a sequence when the row is inserted, while transactions commit in
their own order: without care, a follower that has read id 12 misses id 11, committed later
by a slower transaction.  So the events a transaction records are kept aside
(:func:`record_events`) and inserted when it commits (a ``before_commit`` hook), after all
its other writes: the hook flushes those, takes one transaction-scoped advisory lock
(:data:`EVENTS_LOCK_KEY`), inserts the events and lets the commit proceed.  The lock is held
from the first id drawn to the commit, so event-writing transactions draw ids and commit one
after the other: ids are committed in id order.  Nothing else is locked after it (the events
table has no foreign keys; the insert waits on no row), so it adds no deadlock.

SQLite needs no lock: its writers run one at a time from ``BEGIN IMMEDIATE`` to ``COMMIT``
(see :mod:`onecluster.store._engine`), and events are never deleted, so a new rowid is
always above every committed one.  The events are still inserted at commit, the same way.

Events recorded inside a savepoint (``Session.begin_nested``) are written when the outer
transaction commits, even if that savepoint was rolled back: record none inside one.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TypedDict

from sqlalchemy import Table, insert, text
from sqlalchemy import event as sa_event
from sqlalchemy.orm import Session, SessionTransaction

from onecluster.store._tables import Base

__all__ = ["EVENTS_LOCK_KEY", "EventValues", "record_events"]

#: The PostgreSQL advisory lock (``pg_advisory_xact_lock``) that event-writing transactions
#: hold from their first event id to their commit.  The gateway's store uses 7_460_001.
EVENTS_LOCK_KEY = 7_460_162

_EVENTS: Table = Base.metadata.tables["events"]

#: Key in ``Session.info``: the events the session's transaction will insert at commit.
_PENDING = "onecluster.events.pending"

_LOCK = text("SELECT pg_advisory_xact_lock(:key)").bindparams(key=EVENTS_LOCK_KEY)


class EventValues(TypedDict):
    """One event row as :func:`record_events` takes it (the id is drawn at commit)."""

    time: float
    kind: str
    job_id: str | None
    message: str


def record_events(session: Session, events: Iterable[EventValues]) -> None:
    """Record events in ``session``'s transaction: they are inserted when it commits, after
    every other write, in the order recorded, with ids above every event committed before
    (see the module docstring).  They are not visible to queries of the same transaction."""
    pending: list[EventValues] | None = session.info.get(_PENDING)
    if pending is None:
        pending = session.info[_PENDING] = []
        sa_event.listen(session, "before_commit", _insert_pending)
        sa_event.listen(session, "after_transaction_end", _forget_pending)
    pending.extend(events)


def _insert_pending(session: Session) -> None:
    if session.in_nested_transaction():
        return  # a savepoint is released: the outer transaction's commit inserts them
    pending: list[EventValues] = session.info.get(_PENDING, [])
    if not pending:
        return
    rows = list(pending)
    pending.clear()
    # Every other write goes first, so that nothing is locked after the events lock.
    session.flush()
    if session.get_bind().dialect.name == "postgresql":
        session.execute(_LOCK)
    session.connection().execute(insert(_EVENTS), rows)


def _forget_pending(session: Session, transaction: SessionTransaction) -> None:
    # A rolled-back transaction's events die with it, should the session run another.
    if transaction.parent is None:
        session.info.get(_PENDING, []).clear()
