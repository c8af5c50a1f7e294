"""The leadership lease of the server replicas, and what they tell each other through the
database (mixed into :class:`~onecluster.store.Store`).

Every ``onecluster server`` on one database competes for one lease row
(:mod:`onecluster.store._fence` says how its term fences the leader's writes).  A renewal
locks the row ``FOR NO KEY UPDATE``, which does not wait for the leader's own fenced
transactions (``FOR KEY SHARE``); a takeover locks it ``FOR UPDATE``, which waits until every
fenced transaction of the old term is over, so none of them can commit after the new leader
starts.  Lease times are the database's clock, the one clock every replica shares.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import BigInteger, Double, String, select
from sqlalchemy.orm import Mapped, Session, mapped_column

from onecluster.model import JobRecord, JobState
from onecluster.store._convert import job_record
from onecluster.store._fence import LEADER_ROW, LeaderRow, db_now
from onecluster.store._tables import Base, EventRow, JobRow
from onecluster.store._transactions import Transactions
from onecluster.store._transitions import event

__all__ = [
    "LeaderRecord",
    "Leadership",
    "QueueNews",
    "ServerRecord",
    "new_holder_id",
]


class ServerRow(Base):
    """A server process (a replica of the control plane) and when it last said so."""

    __tablename__ = "servers"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    url: Mapped[str | None] = mapped_column(String(2048))
    version: Mapped[str] = mapped_column(String(32))
    started_at: Mapped[float] = mapped_column(Double)
    seen_at: Mapped[float] = mapped_column(Double)


class QueueEpochRow(Base):
    """One counter (id 1) that grows with every transaction that requeued or cancelled jobs."""

    __tablename__ = "queue_epoch"

    id: Mapped[int] = mapped_column(primary_key=True, autoincrement=False)
    epoch: Mapped[int] = mapped_column(BigInteger)


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaderRecord:
    """The lease as one transaction read it; ``now`` is the database's clock then."""

    term: int
    holder: str | None
    url: str | None
    since: float
    expires_at: float
    now: float

    @property
    def vacant(self) -> bool:
        """Nobody holds an unexpired lease."""
        return self.holder is None or self.expires_at <= self.now

    def held_by(self, holder: str) -> bool:
        """``holder`` leads, with :attr:`term`."""
        return not self.vacant and self.holder == holder


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerRecord:
    """A server process seen lately."""

    id: str
    url: str | None
    version: str
    started_at: float
    seen_at: float


@dataclass(frozen=True, slots=True, kw_only=True)
class QueueNews:
    """What changed in the pending queue since a cursor (:meth:`Leadership.queue_news`).

    ``cursor``: the last event id read; ``submitted``: ids of jobs submitted since, in order;
    ``epoch``: the shared queue epoch (it moved: something was requeued or cancelled).
    """

    cursor: int
    submitted: tuple[str, ...]
    epoch: int


def new_holder_id() -> str:
    """A fresh id for one server process (it is new at every start)."""
    return uuid.uuid4().hex


class Leadership(Transactions):
    """The leadership lease, the servers seen, and the queue's news for the leader."""

    def lead(self, holder: str, *, url: str | None, lease_s: float, now: float) -> LeaderRecord:
        """Renew ``holder``'s lease for ``lease_s``, or take the lease with a new term if it
        is vacant; the lease as it is afterwards (another holder's, when it was not vacant).

        A takeover records a ``leader_elected`` event (at ``now``, the server's clock) in the
        same transaction, so each term is announced exactly once.
        """

        def work(s: Session) -> LeaderRecord:
            light = select(LeaderRow).where(LeaderRow.id == LEADER_ROW)
            row = s.scalars(light.with_for_update(key_share=True)).one()
            clock = db_now(s)
            if row.holder == holder and row.expires_at > clock:
                row.expires_at = clock + lease_s
                return _leader_record(row, clock)
            if row.holder is not None and row.expires_at > clock:
                return _leader_record(row, clock)
            # Vacant: wait for the old term's fenced transactions, then look again.
            row = s.scalars(light.with_for_update().execution_options(populate_existing=True)).one()
            clock = db_now(s)
            if row.holder is not None and row.expires_at > clock and row.holder != holder:
                return _leader_record(row, clock)
            before = row.term
            row.term = before + 1
            row.holder = holder
            row.url = url
            row.since = clock
            row.expires_at = clock + lease_s
            where = url or f"server {holder[:8]}"
            event(s, now, "leader_elected", f"{where} leads the control plane (term {row.term})")
            return _leader_record(row, clock)

        return self._run(work)

    def resign(self, holder: str, term: int, *, now: float) -> bool:
        """Give the lease up at once (a clean shutdown), if ``holder`` still holds ``term``;
        whether it did.  A ``leader_resigned`` event says so."""

        def work(s: Session) -> bool:
            row = s.scalars(
                select(LeaderRow).where(LeaderRow.id == LEADER_ROW).with_for_update()
            ).one()
            if row.holder != holder or row.term != term:
                return False
            row.expires_at = 0.0
            where = row.url or f"server {holder[:8]}"
            event(s, now, "leader_resigned", f"{where} stopped leading (term {term})")
            return True

        return self._run(work)

    def leader(self) -> LeaderRecord:
        """The lease as it is now."""

        def work(s: Session) -> LeaderRecord:
            row = s.scalars(select(LeaderRow).where(LeaderRow.id == LEADER_ROW)).one()
            return _leader_record(row, db_now(s))

        return self._read(work)

    def note_server(self, server: ServerRecord) -> None:
        """Record that ``server`` is alive (insert or update its row)."""

        def work(s: Session) -> None:
            row = s.get(ServerRow, server.id)
            if row is None:
                s.add(
                    ServerRow(
                        id=server.id,
                        url=server.url,
                        version=server.version,
                        started_at=server.started_at,
                        seen_at=server.seen_at,
                    )
                )
            else:
                row.url = server.url
                row.seen_at = server.seen_at

        self._run(work)

    def forget_server(self, server_id: str) -> None:
        """Remove a server that stopped cleanly."""
        self._run(lambda s: s.query(ServerRow).filter(ServerRow.id == server_id).delete() and None)

    def servers(self, *, seen_since: float) -> list[ServerRecord]:
        """Servers seen at or after ``seen_since``, oldest start first."""
        query = (
            select(ServerRow).where(ServerRow.seen_at >= seen_since).order_by(ServerRow.started_at)
        )
        return self._read(
            lambda s: [
                ServerRecord(
                    id=r.id,
                    url=r.url,
                    version=r.version,
                    started_at=r.started_at,
                    seen_at=r.seen_at,
                )
                for r in s.scalars(query)
            ]
        )

    def queue_news(self, after: int | None) -> QueueNews:
        """The jobs submitted since event ``after`` (every replica takes submissions; the
        leader queues them from here) and the shared queue epoch.  ``after`` None: no cursor
        yet — only the newest event id and the epoch are read."""

        def work(s: Session) -> QueueNews:
            epoch = s.scalars(
                select(QueueEpochRow.epoch).where(QueueEpochRow.id == LEADER_ROW)
            ).one()
            # The newest id first, then the submissions up to it, never past it: one
            # committed between the two statements has a greater id (events commit in id
            # order, decision 162) and is in the next news, not skipped by the cursor.
            last = s.scalar(select(EventRow.id).order_by(EventRow.id.desc()).limit(1)) or 0
            if after is None:
                return QueueNews(cursor=last, submitted=(), epoch=epoch)
            rows: Sequence[tuple[int, str | None]] = s.execute(
                select(EventRow.id, EventRow.job_id)
                .where(EventRow.id > after, EventRow.id <= last, EventRow.kind == "submitted")
                .order_by(EventRow.id)
            ).all()
            return QueueNews(
                cursor=max(last, after),
                submitted=tuple(job for _, job in rows if job is not None),
                epoch=epoch,
            )

        return self._read(work)

    def pending_of(self, job_ids: Sequence[str]) -> list[JobRecord]:
        """Those of ``job_ids`` that are still pending, in submission order."""
        if not job_ids:
            return []
        query = (
            select(JobRow)
            .where(JobRow.id.in_(list(job_ids)), JobRow.state == JobState.PENDING)
            .order_by(JobRow.submitted_at, JobRow.id)
        )
        return self._read(lambda s: [job_record(r) for r in s.scalars(query)])


def _leader_record(row: LeaderRow, now: float) -> LeaderRecord:
    return LeaderRecord(
        term=row.term,
        holder=row.holder,
        url=row.url,
        since=row.since,
        expires_at=row.expires_at,
        now=now,
    )
