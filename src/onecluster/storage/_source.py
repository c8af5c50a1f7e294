"""Reading a version's chunks where the site holds it, each checked against its digest."""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from pathlib import Path

from onecluster.errors import IntegrityError, NotFoundError, StorageError
from onecluster.transfer import Manifest, digest

__all__ = ["SourceReader"]

#: Open files kept per reader.
_OPEN_FILES = 64


class SourceReader:
    """Serves the chunks of ``manifest`` from the replica in ``directory`` (thread-safe).

    Every chunk is checked before it is handed out: a file edited after its version was
    scanned raises :class:`IntegrityError` naming it, instead of sending bytes that the
    receiver would refuse again and again.
    """

    def __init__(self, directory: Path, manifest: Manifest, *, site: str = "this site") -> None:
        self._dir = directory
        self._site = site
        self._root = manifest.root
        self._first: dict[bytes, tuple[str, int, int]] = {}
        for chunk, path, offset, size in manifest.places():
            self._first.setdefault(chunk, (path, offset, size))
        self._lock = threading.Lock()
        #: Open files by path, least recently used first, and how many reads use each now:
        #: a file evicted while a read uses it is closed by that read (``_retired``), never
        #: under it — its number would be reused by the next open, and the read would get
        #: another file's bytes.
        self._fds: OrderedDict[str, int] = OrderedDict()
        self._users: dict[int, int] = {}
        self._retired: set[int] = set()

    def __contains__(self, chunk: bytes) -> bool:
        return chunk in self._first

    def read(self, chunk: bytes) -> bytes:
        """The chunk's bytes.  :class:`NotFoundError` for a chunk not in the version,
        :class:`IntegrityError` when the file no longer holds it."""
        place = self._first.get(chunk)
        if place is None:
            msg = f"chunk {chunk.hex()[:16]} is not part of version {self._root.hex()[:16]}"
            raise NotFoundError(msg)
        path, offset, size = place
        try:
            fd = self._acquire(path)
            try:
                data = os.pread(fd, size, offset)
            finally:
                self._release(fd)
        except OSError as exc:
            if isinstance(exc, FileNotFoundError):
                data = b""
            else:
                msg = f"cannot read {self._dir / path}: {exc.strerror or exc}"
                raise StorageError(msg) from exc
        if len(data) != size or digest(data) != chunk:
            msg = (
                f"{self._dir / path} changed at {self._site} after version "
                f"{self._root.hex()[:16]} was scanned"
            )
            raise IntegrityError(
                msg, hint="run `onecluster dataset add` again, then push the new version"
            )
        return data

    def _acquire(self, path: str) -> int:
        """An open descriptor of ``path``, kept open until :meth:`_release`."""
        with self._lock:
            fd = self._fds.pop(path, None)
            if fd is None:
                fd = os.open(self._dir / path, os.O_RDONLY)
                if len(self._fds) >= _OPEN_FILES:
                    _, oldest = self._fds.popitem(last=False)
                    self._retire(oldest)
            self._fds[path] = fd
            self._users[fd] = self._users.get(fd, 0) + 1
            return fd

    def _release(self, fd: int) -> None:
        with self._lock:
            self._users[fd] -= 1
            if self._users[fd] == 0:
                del self._users[fd]
                if fd in self._retired:
                    self._retired.discard(fd)
                    os.close(fd)

    def _retire(self, fd: int) -> None:
        """Close ``fd`` now, or when its last read ends (the lock is held)."""
        if self._users.get(fd):
            self._retired.add(fd)
        else:
            os.close(fd)

    def close(self) -> None:
        """Close every file (those that reads use as they end); a later read opens again."""
        with self._lock:
            fds, self._fds = list(self._fds.values()), OrderedDict()
            for fd in fds:
                self._retire(fd)
