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
        self._fds: OrderedDict[str, int] = OrderedDict()

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
            data = os.pread(self._fd(path), size, offset)
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

    def _fd(self, path: str) -> int:
        with self._lock:
            fd = self._fds.pop(path, None)
            if fd is None:
                fd = os.open(self._dir / path, os.O_RDONLY)
                if len(self._fds) >= _OPEN_FILES:
                    _, oldest = self._fds.popitem(last=False)
                    os.close(oldest)
            self._fds[path] = fd
            return fd

    def close(self) -> None:
        with self._lock:
            fds, self._fds = list(self._fds.values()), OrderedDict()
        for fd in fds:
            os.close(fd)
