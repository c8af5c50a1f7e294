"""The export register in the database (mixed into :class:`~onecluster.store.Store`): one
register per cluster, which every replica's leader appends to (``docs/export.md``, "The
register in the database").

Three tables, bytes only — the store never parses an entry or checks a signature; the
register (``onecluster.register``) checks everything it reads:

* ``register_entries``: ``seq`` (primary key: the database refuses index N twice) and the
  entry's canonical JSON bytes;
* ``register_checkpoints``: ``position`` (primary key) and the signed checkpoint line, byte
  for byte as a register directory's ``checkpoints.jsonl`` holds it;
* ``register_head``: one row (id 1) with the register's public key (fixed by the first
  replica to write; the private key is never stored here), how many entries and checkpoints
  there are — and the row every writer locks ``FOR UPDATE`` first, so that writers of every
  replica take turns, and each sees what the one before it wrote.

A batch and its checkpoint are written in one transaction: an entry is never in the database
without the signed head that covers it.  A write by a thread fenced with the leader's term
(the reconcile loop) is refused once that term is over, as every fenced write is.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy import BigInteger, LargeBinary, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Mapped, Session, mapped_column

from onecluster.errors import ConflictError, StorageError
from onecluster.store._tables import Base
from onecluster.store._transactions import Transactions

__all__ = ["RegisterLog", "RegisterRows"]

_ROW = 1

#: Entries and checkpoint lines past given counts (``register._storage.Tail``).
Tail = tuple[list[bytes], list[bytes]]
#: First seq, entries, their leaf hashes, checkpoint line (``register._storage.Batch``).
Batch = tuple[int, list[bytes], list[bytes], bytes]


class RegisterHeadRow(Base):
    """The register's public key and counts (one row, id 1), locked by every writer."""

    __tablename__ = "register_head"

    id: Mapped[int] = mapped_column(primary_key=True, autoincrement=False)
    public_key: Mapped[bytes | None] = mapped_column(LargeBinary)
    size: Mapped[int] = mapped_column(BigInteger)
    checkpoints: Mapped[int] = mapped_column(BigInteger)


class RegisterEntryRow(Base):
    """One entry: its index and canonical JSON bytes."""

    __tablename__ = "register_entries"

    seq: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    data: Mapped[bytes] = mapped_column(LargeBinary)


class RegisterCheckpointRow(Base):
    """One signed checkpoint line, in order."""

    __tablename__ = "register_checkpoints"

    position: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    line: Mapped[bytes] = mapped_column(LargeBinary)


#: Reads of the log that may find it grown meanwhile before one is taken as consistent.
_READS = 8


def _tail(s: Session, entries: int, checkpoints: int) -> Tail:
    """Every entry from ``entries`` and checkpoint line from ``checkpoints``, as one log.

    Under READ COMMITTED each statement sees what was committed when it began, so a batch
    (its entries, checkpoint and the head row's counts, committed together) may land between
    the two reads; the read is taken once the counts were the same before and after it.
    Rows no count covers (added by hand) are returned too, for the register's check to name.
    """
    counts = select(RegisterHeadRow.size, RegisterHeadRow.checkpoints).where(
        RegisterHeadRow.id == _ROW
    )
    for _ in range(_READS):
        before = s.execute(counts).one()
        lines = s.scalars(
            select(RegisterCheckpointRow.line)
            .where(RegisterCheckpointRow.position >= checkpoints)
            .order_by(RegisterCheckpointRow.position)
        ).all()
        more = s.scalars(
            select(RegisterEntryRow.data)
            .where(RegisterEntryRow.seq >= entries)
            .order_by(RegisterEntryRow.seq)
        ).all()
        if s.execute(counts).one() == before:
            return [bytes(d) for d in more], [bytes(line) for line in lines]
    msg = f"the export register grew during each of {_READS} reads of it"
    raise StorageError(msg, hint="retry; a reader normally needs one")


def _head(s: Session, *, lock: bool) -> RegisterHeadRow:
    query = select(RegisterHeadRow).where(RegisterHeadRow.id == _ROW)
    return s.scalars(query.with_for_update() if lock else query).one()


class RegisterRows(Transactions):
    """The register's rows; :meth:`register_log` is the register's storage on them."""

    def register_log(self) -> RegisterLog:
        """The register's storage in this database (a ``register.LogStorage``)."""
        return RegisterLog(self)

    def register_key(self) -> bytes | None:
        """The register's raw public key, or ``None`` before any replica claimed one."""
        return self._read(lambda s: _head(s, lock=False).public_key)

    def claim_register_key(self, public_key: bytes) -> bytes:
        """Make ``public_key`` the register's key unless it has one; the key it has after."""

        def work(s: Session) -> bytes:
            head = _head(s, lock=True)
            if head.public_key is None:
                head.public_key = public_key
            return bytes(head.public_key)

        return self._run(work)

    def import_register(self, public_key: bytes, entries: list[bytes], lines: list[bytes]) -> None:
        """Put a whole register (checked by the caller) into an empty database register,
        with its key, in one transaction; :class:`ConflictError` when the database's
        register holds anything already."""

        def work(s: Session) -> None:
            head = _head(s, lock=True)
            if head.checkpoints or head.size:
                msg = (
                    f"the database's export register already holds {head.size} entries: "
                    "a register is imported only into an empty one"
                )
                raise ConflictError(msg)
            s.add_all(RegisterEntryRow(seq=n, data=d) for n, d in enumerate(entries))
            s.add_all(RegisterCheckpointRow(position=n, line=c) for n, c in enumerate(lines))
            head.public_key, head.size, head.checkpoints = public_key, len(entries), len(lines)

        self._run(work)


class RegisterLog:
    """The register's storage in the database: see the module docstring."""

    def __init__(self, rows: RegisterRows) -> None:
        self._rows = rows

    @property
    def where(self) -> str:
        """How messages name it."""
        return "the export register in the database"

    @property
    def shared(self) -> bool:
        """Yes: every replica's leader appends to it."""
        return True

    def load(self) -> Tail:
        """Every entry and checkpoint line, in one transaction."""
        return self._rows._read(lambda s: _tail(s, 0, 0))

    def tail(self, entries: int, checkpoints: int) -> Tail:
        """What other writers added past ``entries`` and ``checkpoints``."""
        return self._rows._read(lambda s: _tail(s, entries, checkpoints))

    def write(
        self, entries: int, checkpoints: int, build: Callable[[list[bytes], list[bytes]], Batch]
    ) -> None:
        """Lock the head row, hand ``build`` what was added since, write its batch and
        checkpoint; all in one transaction, never run twice (``build`` changes the
        register's memory: a retried transaction would number a batch twice)."""
        built = False

        def work(s: Session) -> None:
            nonlocal built
            if built:
                msg = "the database asked to run a register write again; it was not"
                raise StorageError(msg, hint="the register reloads itself at its next refresh")
            head = _head(s, lock=True)
            more, more_lines = _tail(s, entries, checkpoints)
            built = True
            first, lines, _leaves, line = build(more, more_lines)
            if first != head.size or first != entries + len(more):
                msg = f"a register batch numbered from {first}, but it holds {head.size} entries"
                raise StorageError(msg, hint="the register reloads itself at its next refresh")
            position = checkpoints + len(more_lines)
            s.add_all(RegisterEntryRow(seq=first + n, data=d) for n, d in enumerate(lines))
            s.add(RegisterCheckpointRow(position=position, line=line))
            head.size, head.checkpoints = first + len(lines), position + 1

        try:
            self._rows._run(work)
        except IntegrityError as exc:
            msg = f"another writer wrote the register's entry {entries} at the same time"
            raise ConflictError(
                msg, hint="the register reloads itself at its next refresh"
            ) from exc

    def read(self, first: int, last: int) -> list[bytes]:
        """Entries ``[first, last)``."""
        if first >= last:
            return []
        query = (
            select(RegisterEntryRow.data)
            .where(RegisterEntryRow.seq >= first, RegisterEntryRow.seq < last)
            .order_by(RegisterEntryRow.seq)
        )
        return self._rows._read(lambda s: [bytes(d) for d in s.scalars(query)])

    def public_key(self) -> bytes | None:
        """The key the database claimed for the register (None before the first claim)."""
        return self._rows.register_key()

    def close(self) -> None:
        """Nothing to release: the store's connections belong to the store."""
