"""The fencing check, and the leadership row it reads.

Every ``onecluster server`` on one database competes for one lease row (see
:mod:`onecluster.store._leadership`).  Its ``term`` is the fencing token: it grows by one
whenever the lease changes hands, or lapses and is taken again.  A transaction run under a
fence (:func:`~onecluster.store.fenced`) first checks, in the database and under a lock on
that row, that its term still holds an unexpired lease, so that a deposed leader's writes are
refused by the database itself, not by the deposed leader's good manners.
"""

from __future__ import annotations

from sqlalchemy import BigInteger, ColumnElement, Double, String, literal_column, select
from sqlalchemy.orm import Mapped, Session, mapped_column

from onecluster.errors import NotLeaderError
from onecluster.store._tables import Base

__all__ = ["LEADER_ROW", "LeaderRow", "check_fence", "db_now"]

#: The id of the one leadership row.
LEADER_ROW = 1


class LeaderRow(Base):
    """The one leadership lease (id 1); ``holder`` None and ``expires_at`` 0 while vacant."""

    __tablename__ = "leadership"

    id: Mapped[int] = mapped_column(primary_key=True, autoincrement=False)
    term: Mapped[int] = mapped_column(BigInteger)
    holder: Mapped[str | None] = mapped_column(String(64))
    url: Mapped[str | None] = mapped_column(String(2048))
    since: Mapped[float] = mapped_column(Double)
    expires_at: Mapped[float] = mapped_column(Double)


def db_now(session: Session) -> float:
    """The database's clock, in seconds since the epoch."""
    return float(session.execute(select(_now_expression(session))).scalar_one())


def _now_expression(session: Session) -> ColumnElement[float]:
    if session.get_bind().dialect.name == "postgresql":
        return literal_column("extract(epoch from clock_timestamp())", Double)
    # SQLite: julianday('now') has millisecond precision; 2440587.5 is the Unix epoch.
    return literal_column("((julianday('now') - 2440587.5) * 86400.0)", Double)


def check_fence(session: Session, term: int, holder: str) -> None:
    """:class:`NotLeaderError` unless ``holder`` holds an unexpired lease in ``term`` now; run
    first in every fenced transaction, it holds the row (``FOR KEY SHARE``) until the
    transaction ends, so no takeover can commit in between."""
    row = session.scalars(
        select(LeaderRow)
        .where(LeaderRow.id == LEADER_ROW)
        .with_for_update(read=True, key_share=True)
    ).one()
    if row.term != term or row.holder != holder:
        msg = f"this server's leadership (term {term}) was taken over (term {row.term} now)"
        raise NotLeaderError(msg, hint="another replica leads; this one follows from now on")
    if row.expires_at <= db_now(session):
        msg = f"this server's leadership (term {term}) lapsed before it was renewed"
        raise NotLeaderError(msg, hint="it leads again only after it renews the lease")
