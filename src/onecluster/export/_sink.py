"""Where a format writes its output: a file that hashes and counts every byte on the way."""

from __future__ import annotations

import hashlib
from typing import BinaryIO

__all__ = ["HashingSink"]


class HashingSink:
    """A binary file wrapper: every byte written is hashed (SHA-256) and counted, so the
    register's content hash is known once the last byte is written, with no second read.

    It is enough of a file for ``pyarrow.parquet.ParquetWriter``; closing it only flushes
    (the owner of the file closes it).
    """

    def __init__(self, file: BinaryIO) -> None:
        self._file = file
        self.sha256 = hashlib.sha256()
        #: Bytes written so far.
        self.size = 0

    def write(self, data: bytes) -> int:
        """Write ``data``; returns its length."""
        self.sha256.update(data)
        self.size += len(data)
        self._file.write(data)
        return len(data)

    def tell(self) -> int:
        """Bytes written so far (the position in the output)."""
        return self.size

    def flush(self) -> None:
        """Flush the file's buffer."""
        self._file.flush()

    def writable(self) -> bool:
        """Always: a sink is only written."""
        return True

    @property
    def closed(self) -> bool:
        """Whether the underlying file is closed."""
        return self._file.closed

    def close(self) -> None:
        """Flush only: the file belongs to whoever opened it."""
        self.flush()
