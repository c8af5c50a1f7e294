"""A register kept in one directory: ``entries.jsonl`` and ``checkpoints.jsonl``, appended
with fsync (``docs/export.md``, "The directory").

One process writes a directory (an exclusive ``flock``, taken before anything is read or
repaired), so nobody else appends and :meth:`FileLog.tail` is always empty.  A batch is
written as: ``pending.json`` names it (fdatasync), its entries (fdatasync), its checkpoint
(fdatasync), ``pending.json`` emptied — so that opening after a crash tells the entries of a
batch cut short from entries added by hand (``_recover``).
"""

from __future__ import annotations

import os
import threading
from array import array
from pathlib import Path

from onecluster.errors import StorageError
from onecluster.register._files import (
    CHECKPOINTS,
    ENTRIES,
    PENDING,
    PUBLIC_KEY,
    pending_record,
    read_lines,
    write_all,
)
from onecluster.register._keys import read_public_key
from onecluster.register._recover import Recovered, lock_directory, recover
from onecluster.register._storage import Build, Tail

__all__ = ["FileLog"]

_sync = getattr(os, "fdatasync", os.fsync)


class FileLog:
    """The files of one register directory, locked while open (a :class:`LogStorage`)."""

    def __init__(self, directory: Path, lock_fd: int, entries: list[bytes]) -> None:
        """Use :meth:`open`."""
        self._directory = directory
        self._lock_fd = lock_fd
        self._offsets = array("Q", [0])
        for line in entries:
            self._offsets.append(self._offsets[-1] + len(line) + 1)
        self._offsets_lock = threading.Lock()
        flags = os.O_WRONLY | os.O_APPEND
        try:
            self._entries_fd = os.open(directory / ENTRIES, flags)
            self._checkpoints_fd = os.open(directory / CHECKPOINTS, flags)
            self._read_fd = os.open(directory / ENTRIES, os.O_RDONLY)
            self._pending_fd = os.open(directory / PENDING, os.O_WRONLY)
        except OSError as exc:
            self.close()
            msg = f"cannot open the register's files in {directory}: {exc.strerror or exc}"
            raise StorageError(msg) from exc

    @classmethod
    def open(cls, directory: Path, origin: str) -> tuple[FileLog, Recovered]:
        """Lock ``directory`` (creating it), check and repair it (``_recover.recover``), and
        open its files; the storage and what the check found."""
        lock_fd = lock_directory(directory)  # before anything is read or repaired
        try:
            recovered = recover(directory, origin)
        except BaseException:
            os.close(lock_fd)
            raise
        return cls(directory, lock_fd, recovered.entries), recovered

    @property
    def where(self) -> str:
        """``the register in DIR``."""
        return f"the register in {self._directory}"

    @property
    def shared(self) -> bool:
        """No: the directory's lock keeps every other writer out."""
        return False

    def load(self) -> Tail:
        """Every entry and checkpoint line, as the files hold them (repaired at open).  The
        checkpoints are read first: a checkpoint is written after the entries it covers are
        durable, so every one read covers entries already there when they are read."""
        checkpoints = read_lines(self._directory / CHECKPOINTS).lines
        return read_lines(self._directory / ENTRIES).lines, checkpoints

    def public_key(self) -> bytes | None:
        """The key in ``public.key``."""
        return read_public_key(self._directory / PUBLIC_KEY)

    def tail(self, entries: int, checkpoints: int) -> Tail:
        """Nothing: nobody else writes a locked directory."""
        return [], []

    def write(self, entries: int, checkpoints: int, build: Build) -> None:
        """Write the batch durably (see the module docstring)."""
        first, lines, leaves, checkpoint = build([], [])
        if lines:
            # Written in place, never truncated: the file's size changes only for a batch
            # larger than any before, so its fdatasync rarely has metadata to write.
            os.pwrite(self._pending_fd, pending_record(first, leaves), 0)
            _sync(self._pending_fd)
            write_all(self._entries_fd, b"".join(line + b"\n" for line in lines))
            _sync(self._entries_fd)
        write_all(self._checkpoints_fd, checkpoint + b"\n")
        _sync(self._checkpoints_fd)
        if lines:
            # No batch in flight.  No fsync: a stale record names entries that a durable
            # checkpoint covers, which opening ignores.
            os.pwrite(self._pending_fd, b"\n", 0)
        with self._offsets_lock:
            for line in lines:
                self._offsets.append(self._offsets[-1] + len(line) + 1)

    def read(self, first: int, last: int) -> list[bytes]:
        """Entries ``[first, last)`` from ``entries.jsonl`` (one read)."""
        if first >= last:
            return []
        with self._offsets_lock:
            start, end = self._offsets[first], self._offsets[last]
        return os.pread(self._read_fd, end - start, start).split(b"\n")[:-1]

    def close(self) -> None:
        """Close the files and release the directory's lock."""
        for name in ("_entries_fd", "_checkpoints_fd", "_read_fd", "_pending_fd", "_lock_fd"):
            fd = getattr(self, name, None)
            if fd is None:
                continue
            setattr(self, name, None)
            try:
                os.close(fd)
            except OSError:
                continue
