"""Where a register's entries and checkpoints are kept: the one narrow interface that a
directory of files (:mod:`onecluster.register._file_log`) and the database (the store's
``RegisterRows``, wired in by the server) both satisfy.

Everything crossing it is bytes and counts, so that the store, an adapter beside this one,
implements it without importing the register.  An entry is its canonical JSON bytes (its
leaf data); a checkpoint is its stored line exactly as ``_files.checkpoint_line`` writes it
(without the newline).  The register checks everything it reads — signatures, roots, leaf
hashes — so a storage is trusted for durability and order only, never for integrity.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

__all__ = ["Batch", "Build", "LogStorage", "Tail"]

#: Entries and checkpoint lines a storage holds past the counts the register knows of.
Tail = tuple[list[bytes], list[bytes]]

#: One batch as the register built it: its first seq, its entries, their leaf hashes, and
#: its signed checkpoint line (no newline).
Batch = tuple[int, list[bytes], list[bytes], bytes]

#: Builds a batch from what the storage holds past the counts given (another writer's
#: entries and checkpoints, which the register checks and takes in first).
Build = Callable[[list[bytes], list[bytes]], Batch]


class LogStorage(Protocol):
    """A register's entries and signed checkpoints, in order; see the module docstring."""

    @property
    def where(self) -> str:
        """How messages name it: ``the register in /var/lib/…``."""
        ...

    @property
    def shared(self) -> bool:
        """Whether other writers (other processes) may append to it too; such a storage is
        re-read (:meth:`tail`) before each batch, and reloaded after a failed one."""
        ...

    def load(self) -> Tail:
        """Every entry and every checkpoint line, such that no checkpoint line covers an
        entry that is not among those returned (a writer may be appending meanwhile)."""
        ...

    def tail(self, entries: int, checkpoints: int) -> Tail:
        """The entries from seq ``entries`` on and the checkpoint lines from position
        ``checkpoints`` on."""
        ...

    def write(self, entries: int, checkpoints: int, build: Build) -> None:
        """Append the batch ``build`` returns, durably, as the only writer for the while:
        ``build`` is given the tail past ``entries`` and ``checkpoints``; when this returns,
        the batch's entries and checkpoint survive a crash.  Raises
        :class:`~onecluster.errors.PlatformError` (or ``OSError``) when nothing was written."""
        ...

    def read(self, first: int, last: int) -> list[bytes]:
        """Entries ``[first, last)``, all of them written and covered before."""
        ...

    def public_key(self) -> bytes | None:
        """The public key the storage records beside the log (None where it records none);
        a check compares it with the key the register signs with."""
        ...

    def close(self) -> None:
        """Release what the storage holds open."""
        ...
