"""The export register: an append-only, signed RFC 9162 log of canonical JSON entries.

:meth:`Register.append` returns only once the entry is durable — written, and covered by a
signed checkpoint written too, by its storage (:mod:`onecluster.register._storage`): the
files of one directory, fsync'd (:meth:`Register.open`), or the database every server
replica shares (:meth:`Register.open_on`) — so a crash after it returns can lose nothing
acknowledged.

**Group commit.**  Appenders that arrive together share one write and one signature.
Entries join the open *batch*; the appender that opened a batch is its *leader*: it waits
for the batch before it to be written, closes its own (whoever joined meanwhile is in),
writes it, and hands over to the next batch's leader.  Under load a batch gathers everyone
who arrived during the previous batch's write; after an idle spell the leader first waits
``group_wait_s`` for company.  One writer at a time, so entries are written in ``seq``
order and every checkpoint extends the one before it.

**Shared storage.**  Where other processes append too (the database), each batch takes in
first what they wrote since — checked exactly as opening checks, signatures and roots — and
only then numbers its entries: ``seq`` is given when the batch is written, not when
:meth:`append` is called.  The storage makes one writer at a time of every process, and
refuses an index written twice.

Before signing, the writer checks that the new head is consistent with the last signed one
(the tree of the old size has the old root, and the RFC 9162 consistency proof between them
verifies): the log never signs two inconsistent checkpoints.  A write that fails leaves the
register failed: every later append raises :class:`StorageError` until it is reopened (which
drops the batch that was not covered) — or, on a shared storage, until :meth:`refresh`
reloads it.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from onecluster.clock import Clock, SystemClock
from onecluster.errors import (
    IntegrityError,
    NotFoundError,
    PlatformError,
    StorageError,
    ValidationError,
)
from onecluster.export import merkle
from onecluster.register._canonical import canonical, check_entry, parse_entry
from onecluster.register._check import Checked, check_log, entry_name, extend_log
from onecluster.register._file_log import FileLog
from onecluster.register._files import Checkpoint, checkpoint_line
from onecluster.register._head import Receipt, SignedHead, parse_utc, utc_iso
from onecluster.register._keys import public_bytes
from onecluster.register._recover import MAX_BATCH
from onecluster.register._storage import Batch, LogStorage

__all__ = ["DEFAULT_ORIGIN", "Register"]

#: The origin line of the register's checkpoints unless another is given.
DEFAULT_ORIGIN = "onecluster export register"


class _Batch:
    """Entries written together under one checkpoint."""

    __slots__ = ("bodies", "done", "error", "first", "head", "leaves", "turn")

    def __init__(self) -> None:
        self.first = -1  # given when the batch is written
        self.bodies: list[tuple[dict[str, Any], float]] = []  # (entry, when it was appended)
        self.leaves: list[bytes] = []
        # Latches: locks taken now and released by another thread.  A plain lock costs less
        # than an Event (a Condition and a lock per waiter) and wakes its waiters in turn,
        # each passing it on — what hundreds of appenders waiting on one batch need.
        self.turn = threading.Lock()  # released when the leader may write
        self.turn.acquire()
        self.done = threading.Lock()  # released when the batch is durable, or failed
        self.done.acquire()
        self.head: SignedHead | None = None
        self.error: BaseException | None = None


class Register:
    """The export register on one storage; see the module docstring.  Thread-safe."""

    def __init__(  # noqa: PLR0917 -- what open and open_on found
        self,
        storage: LogStorage,
        key: Ed25519PrivateKey,
        checked: Checked,
        origin: str,
        clock: Clock,
        group_wait_s: float,
    ) -> None:
        """Use :meth:`open` or :meth:`open_on`."""
        self._storage = storage
        self._where = storage.where
        self._origin = origin
        self._clock = clock
        self._group_wait_s = group_wait_s
        self._key = key
        self._public_key = public_bytes(key)
        self._checked = checked
        self._tree = checked.tree
        self._heads: list[SignedHead] = checked.heads
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._tree_lock = threading.Lock()
        #: Held by whoever changes what the register knows of its storage (a batch's write,
        #: a refresh); taken before ``_lock``, never while holding it.
        self._write_lock = threading.Lock()
        self._pending: deque[_Batch] = deque()
        self._open_batch: _Batch | None = None
        self._writing = False
        self._failure: PlatformError | None = None
        self._closed = False
        self._size = self._tree.size
        self._last_now = parse_utc(self._heads[-1].timestamp) if self._heads else 0.0
        if not self._heads:  # a new register: sign the head of the empty tree
            try:
                self._commit(_Batch())
            except OSError as exc:
                storage.close()
                msg = f"cannot write {self._where}: {exc.strerror or exc}"
                raise StorageError(msg) from exc
            except BaseException:
                storage.close()
                raise

    @classmethod
    def open(
        cls,
        directory: Path,
        *,
        origin: str = DEFAULT_ORIGIN,
        clock: Clock | None = None,
        group_wait_s: float = 0.002,
    ) -> Register:
        """Open the register in ``directory``, creating it (and its Ed25519 key) if missing.

        A partial tail left by a crash is cut off (kept in ``dropped.jsonl``).  Raises
        :class:`IntegrityError` naming the first bad entry when the stored entries do not
        match the stored signed checkpoints, :class:`ConflictError` when another
        :class:`Register` holds it, :class:`StorageError` when its files cannot be written.
        """
        _check_wait(group_wait_s)
        storage, recovered = FileLog.open(Path(directory), origin)
        return cls(
            storage, recovered.key, recovered.checked, origin, clock or SystemClock(), group_wait_s
        )

    @classmethod
    def open_on(
        cls,
        storage: LogStorage,
        key: Ed25519PrivateKey,
        *,
        origin: str = DEFAULT_ORIGIN,
        clock: Clock | None = None,
        group_wait_s: float = 0.002,
    ) -> Register:
        """Open the register ``storage`` holds, signed with ``key`` (signing the head of the
        empty tree if it holds nothing yet).

        Every entry and checkpoint is checked with ``key``'s public key, as :func:`verify`
        checks a directory: :class:`IntegrityError` names the first that does not check out
        (an entry past the last checkpoint included — a shared storage writes a batch and
        its checkpoint at once); :class:`ValidationError` when the log has another origin.
        """
        _check_wait(group_wait_s)
        entries, lines = storage.load()
        checked = _checked(storage.where, entries, lines, public_bytes(key), origin)
        return cls(storage, key, checked, origin, clock or SystemClock(), group_wait_s)

    # -- appending -----------------------------------------------------------------------

    def append(self, entry: Mapping[str, Any]) -> Receipt:
        """Add ``entry`` (with ``seq`` and ``at`` added) and return once it is durable and
        covered by a signed checkpoint.

        Raises :class:`ValidationError` for an entry that is not a JSON object of JSON
        values or that carries ``seq`` or ``at``; :class:`StorageError` when the register
        cannot be written (or failed before, or is closed).
        """
        body = check_entry(entry)
        with self._lock:
            self._check_usable()
            batch = self._open_batch
            owner = batch is None
            if batch is None:
                batch = self._open_batch = _Batch()
                self._pending.append(batch)
            position = len(batch.bodies)
            batch.bodies.append((body, self._clock.now()))
            if len(batch.bodies) >= MAX_BATCH:
                self._open_batch = None
            idle = owner and not self._writing
            if idle:
                self._writing = True
        if owner:
            if not idle:
                batch.turn.acquire()
            self._lead(batch, idle=idle)
        else:
            with batch.done:  # wait for the leader's release, then pass it on
                pass
        if batch.error is not None or batch.head is None:
            msg = f"{self._where} could not record the entry"
            hint = "refresh it" if self._storage.shared else "reopen the register"
            raise StorageError(msg, hint=hint) from batch.error
        return Receipt(batch.first + position, batch.leaves[position], batch.head)

    def _check_usable(self) -> None:
        if self._closed:
            msg = f"{self._where} is closed"
            raise StorageError(msg)
        if self._failure is not None:
            msg = f"{self._where} failed to write and refuses entries"
            hint = "refresh it" if self._storage.shared else "reopen the register"
            raise StorageError(msg, hint=hint) from self._failure

    def _lead(self, batch: _Batch, *, idle: bool) -> None:
        """Write ``batch`` as its leader, then hand over to the next batch's leader."""
        if idle and self._group_wait_s > 0:
            time.sleep(self._group_wait_s)  # let concurrent appenders join this batch
        with self._lock:
            self._pending.popleft()
            if self._open_batch is batch:
                self._open_batch = None
            failure = self._failure
        try:
            if failure is None:
                self._commit(batch)
        except OSError as exc:
            failure = StorageError(f"cannot write {self._where}: {exc.strerror or exc}")
            failure.__cause__ = exc
        except PlatformError as exc:
            failure = exc
        finally:
            if failure is None and batch.head is None:  # anything else went wrong
                failure = StorageError(f"{self._where} failed to write")
            batch.error = failure
            with self._lock:
                if failure is not None:
                    self._failure = failure
                if self._pending:
                    self._pending[0].turn.release()
                else:
                    self._writing = False
                    self._idle.notify_all()
            batch.done.release()

    def _commit(self, batch: _Batch) -> None:
        """Take in what other writers added, then number, sign and write one batch (the
        only writer at a time in this process; the storage makes it the only one at all)."""

        def build(more: list[bytes], more_lines: list[bytes]) -> Batch:
            if more or more_lines:
                self._take_in(more, more_lines)
            first = self._tree.size
            lines = []
            with self._lock:
                for offset, (body, when) in enumerate(batch.bodies):
                    self._last_now = max(when, self._last_now)
                    body["seq"], body["at"] = first + offset, utc_iso(self._last_now)
                    lines.append(canonical(body))
            leaves = [merkle.leaf_hash(line) for line in lines]
            with self._tree_lock:
                for leaf in leaves:
                    self._tree.append_hash(leaf)
                size, root = self._tree.size, self._tree.root()
                if self._heads:
                    self._check_extends(self._heads[-1], size, root)
            with self._lock:
                self._last_now = max(self._clock.now(), self._last_now)
                timestamp = utc_iso(self._last_now)
            unsigned = SignedHead(self._origin, size, root, b"", timestamp)
            signature = self._key.sign(unsigned.note().encode("utf-8"))
            head = SignedHead(self._origin, size, root, signature, timestamp)
            batch.first, batch.leaves, batch.head = first, leaves, head
            return first, lines, leaves, checkpoint_line(head, leaves)[:-1]

        with self._write_lock:
            self._storage.write(self._size, len(self._heads), build)
            head = batch.head
            assert head is not None
            with self._lock:
                self._heads.append(head)
                self._checked.checkpoints.append(_as_checkpoint(head, batch.leaves))
                self._size = head.size

    def _take_in(self, more: list[bytes], more_lines: list[bytes]) -> None:
        """Check what other writers added past what this register knows, and add it."""
        with self._tree_lock:
            extend_log(self._checked, more, more_lines, self._public_key)
            self._tree = self._checked.tree
        with self._lock:
            self._heads = self._checked.heads
            self._size = self._tree.size
            self._last_now = max(parse_utc(self._heads[-1].timestamp), self._last_now)

    def refresh(self) -> int:
        """Take in what other writers added to a shared storage since (checked as opening
        checks), or reload it whole after a failed write; how many entries were new.

        Nothing to do for a directory.  Raises :class:`IntegrityError` when what was added
        does not check out (the register refuses appends from then on), and what the
        storage raises when it cannot be read.
        """
        if not self._storage.shared:
            return 0
        with self._write_lock:
            before = self._size
            with self._lock:
                failed = self._failure is not None
            try:
                if failed:
                    self._reload()
                else:
                    more, more_lines = self._storage.tail(self._size, len(self._heads))
                    if more or more_lines:
                        self._take_in(more, more_lines)
            except IntegrityError as exc:
                with self._lock:
                    self._failure = exc
                raise
            return self._size - before

    def _reload(self) -> None:
        entries, lines = self._storage.load()
        checked = _checked(self._where, entries, lines, self._public_key, self._origin)
        with self._tree_lock:
            self._checked, self._tree = checked, checked.tree
        with self._lock:
            self._heads = checked.heads
            self._size = self._tree.size
            if self._heads:
                self._last_now = max(parse_utc(self._heads[-1].timestamp), self._last_now)
            self._failure = None

    def _check_extends(self, previous: SignedHead, size: int, root: bytes) -> None:
        """Refuse to sign a head that the last signed head is not a prefix of."""
        if self._tree.root(previous.size) != previous.root:
            msg = f"the register's tree no longer has the signed head of size {previous.size}"
            raise IntegrityError(msg, hint="reopen the register; it refuses to fork the log")
        if 0 < previous.size < size:
            proof = self._tree.consistency_proof(previous.size, size)
            merkle.verify_consistency(previous.size, size, proof, previous.root, root)

    # -- reading -------------------------------------------------------------------------

    @property
    def where(self) -> str:
        """Where it is kept, as messages name it (``the register in DIR``)."""
        return self._where

    def stored(self) -> tuple[list[bytes], list[bytes], bytes | None]:
        """What the storage holds now: every entry, every checkpoint line (read in that
        storage's consistent order: no checkpoint covers an entry not read) and the public
        key it records (None where it records none)."""
        entries, checkpoints = self._storage.load()
        return entries, checkpoints, self._storage.public_key()

    @property
    def size(self) -> int:
        """How many entries are durable and covered by a signed checkpoint."""
        return self._size

    def head(self) -> SignedHead:
        """The latest signed checkpoint."""
        with self._lock:
            return self._heads[-1]

    def public_key(self) -> bytes:
        """The raw 32-byte Ed25519 public key that signs the checkpoints."""
        return self._public_key

    def entry_bytes(self, seq: int) -> bytes:
        """The exact canonical bytes of entry ``seq`` (its leaf data, no newline);
        :class:`NotFoundError` when there is no such entry."""
        if not 0 <= seq < self._size:
            msg = f"the register has no entry {seq} (it holds {self._size})"
            raise NotFoundError(msg)
        found = self._storage.read(seq, seq + 1)
        if len(found) != 1:  # the storage changed under us since it was checked
            msg = f"entry {seq} is gone from {self._where}"
            raise IntegrityError(msg, hint="verify the register")
        return found[0]

    def entries(self, first: int = 0, last: int | None = None) -> list[dict[str, Any]]:
        """The parsed entries ``[first, last)`` by seq (``last`` defaults to :attr:`size`);
        :class:`ValidationError` for a range outside the register."""
        size = self._size
        last = size if last is None else last
        if not 0 <= first <= last <= size:
            msg = f"no entries [{first}, {last}) in a register of {size}"
            raise ValidationError(msg)
        out: list[dict[str, Any]] = []
        lines = self._storage.read(first, last)
        if len(lines) != last - first:
            msg = f"entries [{first}, {last}) are not all in {self._where} any more"
            raise IntegrityError(msg, hint="verify the register")
        for line in lines:
            entry = parse_entry(line)
            if entry is None:  # the storage changed under us since it was checked
                msg = f"entry {first + len(out)} in {self._where} no longer parses"
                raise IntegrityError(msg, hint="verify the register")
            out.append(entry)
        return out

    def root(self, size: int | None = None) -> bytes:
        """The tree head of the first ``size`` entries (default: :attr:`size`), from the
        stored subtrees: O(log n), no entry read again."""
        size = self._size if size is None else size
        if not 0 <= size <= self._size:
            msg = f"no tree of {size} entries (the register holds {self._size})"
            raise ValidationError(msg)
        with self._tree_lock:
            return self._tree.root(size)

    def inclusion_proof(self, seq: int, size: int | None = None) -> list[bytes]:
        """The RFC 9162 inclusion proof of entry ``seq`` in the tree of ``size`` entries
        (default: :attr:`size`); check it against a signed head of that size."""
        size = self._size if size is None else size
        if not 0 <= seq < size <= self._size:
            msg = f"no entry {seq} in a tree of {size} (the register holds {self._size})"
            raise NotFoundError(msg) if 0 <= size <= self._size else ValidationError(msg)
        with self._tree_lock:
            return self._tree.inclusion_proof(seq, size)

    def consistency_proof(self, size1: int, size2: int | None = None) -> list[bytes]:
        """The RFC 9162 proof that the tree of ``size1`` is a prefix of the tree of
        ``size2`` (default: :attr:`size`); empty when the sizes are equal or ``size1`` is 0."""
        size2 = self._size if size2 is None else size2
        if not 0 <= size1 <= size2 <= self._size:
            msg = f"no consistency proof from {size1} to {size2} (the register holds {self._size})"
            raise ValidationError(msg)
        with self._tree_lock:
            return self._tree.consistency_proof(size1, size2)

    # -- for the bundle ------------------------------------------------------------------

    def _signed_heads(self) -> list[SignedHead]:
        """Every signed head, oldest first (a copy)."""
        with self._lock:
            return list(self._heads)

    def _sign(self, message: bytes) -> bytes:
        """The register key's Ed25519 signature of ``message``."""
        return self._key.sign(message)

    # -- closing -------------------------------------------------------------------------

    def close(self) -> None:
        """Refuse new appends, wait for the batches in flight, release the files."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            while self._writing:
                self._idle.wait()
        self._storage.close()

    def __enter__(self) -> Register:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Register({self._where!r}, size={self._size})"


def _check_wait(group_wait_s: float) -> None:
    if group_wait_s < 0:
        msg = f"group_wait_s must not be negative ({group_wait_s})"
        raise ValidationError(msg)


def _checked(
    where: str, entries: list[bytes], lines: list[bytes], key: bytes, origin: str
) -> Checked:
    """The log a shared storage holds, checked whole; nothing may follow the last head."""
    checked = check_log(entries, lines, key)
    for head in checked.heads:
        if head.origin != origin:
            msg = f"{where} is the log {head.origin!r}, not {origin!r}"
            raise ValidationError(msg, hint="open it with the origin it was created with")
    if len(entries) > checked.covered:
        msg = (
            f"{entry_name(checked.covered)} is not covered by any signed tree head: in {where} "
            "an entry is written with its checkpoint, so it was added by hand"
        )
        raise IntegrityError(msg, hint="remove it, or restore the register from a backup")
    return checked


def _as_checkpoint(head: SignedHead, leaves: list[bytes]) -> Checkpoint:
    return Checkpoint(head, tuple(leaves))
