"""The export register: an append-only, signed RFC 9162 log of canonical JSON entries.

:meth:`Register.append` returns only once the entry is durable — written and fsync'd in
``entries.jsonl``, and covered by a signed checkpoint written and fsync'd in
``checkpoints.jsonl`` — so a crash after it returns can lose nothing acknowledged.

**Group commit.**  Appenders that arrive together share one write, one fsync per file and
one signature.  Entries join the open *batch*; the appender that opened a batch is its
*leader*: it waits for the batch before it to be written, closes its own (whoever joined
meanwhile is in), writes it, and hands over to the next batch's leader.  Under load a batch
gathers everyone who arrived during the previous batch's fsyncs; after an idle spell the
leader first waits ``group_wait_s`` for company.  One writer at a time, so entries are
written in ``seq`` order and every checkpoint extends the one before it.

Before signing, the writer checks that the new head is consistent with the last signed one
(the tree of the old size has the old root, and the RFC 9162 consistency proof between them
verifies): the log never signs two inconsistent checkpoints.  A write that fails leaves the
register failed: every later append raises :class:`StorageError` until it is reopened (which
drops the batch that was not covered).
"""

from __future__ import annotations

import os
import threading
import time
from array import array
from collections import deque
from collections.abc import Mapping
from pathlib import Path
from typing import Any

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
from onecluster.register._files import (
    CHECKPOINTS,
    ENTRIES,
    PENDING,
    checkpoint_line,
    pending_record,
    write_all,
)
from onecluster.register._head import Receipt, SignedHead, parse_utc, utc_iso
from onecluster.register._recover import MAX_BATCH, lock_directory, recover

__all__ = ["DEFAULT_ORIGIN", "Register"]

#: The origin line of the register's checkpoints unless another is given.
DEFAULT_ORIGIN = "onecluster export register"

_sync = getattr(os, "fdatasync", os.fsync)


class _Batch:
    """Entries written together under one checkpoint."""

    __slots__ = ("done", "error", "first", "head", "leaves", "lines", "turn")

    def __init__(self, first: int) -> None:
        self.first = first
        self.lines: list[bytes] = []
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
    """The export register in one directory; see the module docstring.  Thread-safe."""

    def __init__(
        self,
        directory: Path,
        origin: str,
        clock: Clock,
        group_wait_s: float,
    ) -> None:
        """Use :meth:`open`."""
        self._directory = directory
        self._origin = origin
        self._clock = clock
        self._group_wait_s = group_wait_s
        self._lock_fd = lock_directory(directory)  # before anything is read or repaired
        try:
            recovered = recover(directory, origin)
        except BaseException:
            os.close(self._lock_fd)
            raise
        self._key = recovered.key
        self._public_key = recovered.public_key
        self._tree = recovered.checked.tree
        self._heads: list[SignedHead] = recovered.checked.heads
        self._offsets = array("Q", [0])
        for line in recovered.entries:
            self._offsets.append(self._offsets[-1] + len(line) + 1)
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._tree_lock = threading.Lock()
        self._pending: deque[_Batch] = deque()
        self._open_batch: _Batch | None = None
        self._writing = False
        self._failure: PlatformError | None = None
        self._closed = False
        self._size = self._tree.size
        self._next_seq = self._size
        self._last_now = parse_utc(self._heads[-1].timestamp) if self._heads else 0.0
        flags = os.O_WRONLY | os.O_APPEND
        try:
            self._entries_fd = os.open(directory / ENTRIES, flags)
            self._checkpoints_fd = os.open(directory / CHECKPOINTS, flags)
            self._read_fd = os.open(directory / ENTRIES, os.O_RDONLY)
            self._pending_fd = os.open(directory / PENDING, os.O_WRONLY)
        except OSError as exc:
            self._close_files()
            msg = f"cannot open the register's files in {directory}: {exc.strerror or exc}"
            raise StorageError(msg) from exc
        if not self._heads:  # a new register: sign the head of the empty tree
            try:
                self._commit(_Batch(0))
            except OSError as exc:
                self._close_files()
                msg = f"cannot write the register in {directory}: {exc.strerror or exc}"
                raise StorageError(msg) from exc

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
        if group_wait_s < 0:
            msg = f"group_wait_s must not be negative ({group_wait_s})"
            raise ValidationError(msg)
        return cls(Path(directory), origin, clock or SystemClock(), group_wait_s)

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
                batch = self._open_batch = _Batch(self._next_seq)
                self._pending.append(batch)
            seq = self._next_seq
            self._next_seq += 1
            self._last_now = max(self._clock.now(), self._last_now)
            body["seq"], body["at"] = seq, utc_iso(self._last_now)
            batch.lines.append(canonical(body))
            if len(batch.lines) >= MAX_BATCH:
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
            msg = f"the register in {self._directory} could not record entry {seq}"
            raise StorageError(msg, hint="reopen the register") from batch.error
        return Receipt(seq, batch.leaves[seq - batch.first], batch.head)

    def _check_usable(self) -> None:
        if self._closed:
            msg = f"the register in {self._directory} is closed"
            raise StorageError(msg)
        if self._failure is not None:
            msg = f"the register in {self._directory} failed to write and refuses entries"
            raise StorageError(msg, hint="reopen the register") from self._failure

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
            failure = StorageError(
                f"cannot write the register in {self._directory}: {exc.strerror or exc}"
            )
            failure.__cause__ = exc
        except PlatformError as exc:
            failure = exc
        finally:
            if failure is None and batch.head is None:  # anything else went wrong
                failure = StorageError(f"the register in {self._directory} failed to write")
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
        """Write, fsync, sign and record one batch (the only writer at a time)."""
        leaves = [merkle.leaf_hash(line) for line in batch.lines]
        if batch.lines:
            # Written in place, never truncated: the file's size changes only for a batch
            # larger than any before, so its fdatasync rarely has metadata to write.
            os.pwrite(self._pending_fd, pending_record(batch.first, leaves), 0)
            _sync(self._pending_fd)
            write_all(self._entries_fd, b"".join(line + b"\n" for line in batch.lines))
            _sync(self._entries_fd)
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
        write_all(self._checkpoints_fd, checkpoint_line(head, leaves))
        _sync(self._checkpoints_fd)
        if batch.lines:
            # No batch in flight.  No fsync: a stale record names entries that a durable
            # checkpoint covers, which opening ignores.
            os.pwrite(self._pending_fd, b"\n", 0)
        with self._lock:
            for line in batch.lines:
                self._offsets.append(self._offsets[-1] + len(line) + 1)
            self._heads.append(head)
            self._size = size
        batch.leaves, batch.head = leaves, head

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
    def directory(self) -> Path:
        """The directory the register keeps its files in."""
        return self._directory

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

    def _span(self, first: int, last: int) -> tuple[int, int]:
        with self._lock:
            return self._offsets[first], self._offsets[last]

    def entry_bytes(self, seq: int) -> bytes:
        """The exact canonical bytes of entry ``seq`` (its leaf data, no newline);
        :class:`NotFoundError` when there is no such entry."""
        if not 0 <= seq < self._size:
            msg = f"the register has no entry {seq} (it holds {self._size})"
            raise NotFoundError(msg)
        start, end = self._span(seq, seq + 1)
        return os.pread(self._read_fd, end - start - 1, start)

    def entries(self, first: int = 0, last: int | None = None) -> list[dict[str, Any]]:
        """The parsed entries ``[first, last)`` by seq (``last`` defaults to :attr:`size`);
        :class:`ValidationError` for a range outside the register."""
        size = self._size
        last = size if last is None else last
        if not 0 <= first <= last <= size:
            msg = f"no entries [{first}, {last}) in a register of {size}"
            raise ValidationError(msg)
        if first == last:
            return []
        start, end = self._span(first, last)
        data = os.pread(self._read_fd, end - start, start)
        out: list[dict[str, Any]] = []
        for line in data.split(b"\n")[:-1]:
            entry = parse_entry(line)
            if entry is None:  # the file changed under us since it was checked
                msg = f"entry {first + len(out)} in {self._directory} no longer parses"
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
        self._close_files()

    def _close_files(self) -> None:
        for name in ("_entries_fd", "_checkpoints_fd", "_read_fd", "_pending_fd", "_lock_fd"):
            fd = getattr(self, name, None)
            if fd is None:
                continue
            try:
                os.close(fd)
            except OSError:
                continue

    def __enter__(self) -> Register:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Register({str(self._directory)!r}, size={self._size})"
