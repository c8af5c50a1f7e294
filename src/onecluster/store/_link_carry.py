"""The link board the leader hands to the next one, kept with the alerts it caused (mixed
into :class:`~onecluster.store.Store`).

One row (id 1; its body empty until a leader writes one) holds the leader's latest carry as
JSON (:class:`onecluster.topology.LinkCarry` reads and writes it; the store keeps text) and
when it was written, by the database's clock, the one every replica shares.  It is written
in the transaction that records the link alerts it follows from, so that a new leader
neither loses an alert nor sends it again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import Double, Text, select, update
from sqlalchemy.orm import Mapped, Session, mapped_column

from onecluster.store._fence import db_now
from onecluster.store._tables import Base
from onecluster.store._transactions import Transactions
from onecluster.store._transitions import event

__all__ = ["KeptLinks", "LinkCarries"]

_ROW = 1


class LinkCarryRow(Base):
    """The leader's latest carry of its link board (one row, id 1)."""

    __tablename__ = "link_carry"

    id: Mapped[int] = mapped_column(primary_key=True, autoincrement=False)
    body: Mapped[str] = mapped_column(Text)
    written_at: Mapped[float] = mapped_column(Double)


@dataclass(frozen=True, slots=True, kw_only=True)
class KeptLinks:
    """The carry as the database keeps it, and how long ago it was written (its clock)."""

    body: str
    age_s: float


class LinkCarries(Transactions):
    """The link board's carry, written with its alerts and read by a new leader."""

    def keep_links(
        self, events: Sequence[tuple[str, str]], carry: str | None, *, now: float
    ) -> None:
        """Record the link alerts ``events`` (``(kind, message)``) and, when given, replace the
        carry with ``carry`` — in one transaction (fenced, like every write of the leader)."""
        if not events and carry is None:
            return

        def work(s: Session) -> None:
            for kind, message in events:
                event(s, now, kind, message)
            if carry is not None:
                row = update(LinkCarryRow).where(LinkCarryRow.id == _ROW)
                s.execute(row.values(body=carry, written_at=db_now(s)))

        self._run(work)

    def kept_links(self) -> KeptLinks | None:
        """The carry the last leader wrote, if any."""

        def work(s: Session) -> KeptLinks | None:
            query = select(LinkCarryRow).where(LinkCarryRow.id == _ROW)
            row = s.execute(query).scalar_one_or_none()
            if row is None or not row.body:
                return None
            return KeptLinks(body=row.body, age_s=max(db_now(s) - row.written_at, 0.0))

        return self._read(work)
