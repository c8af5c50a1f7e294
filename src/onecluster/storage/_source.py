"""Reading a version's chunks where the site holds it, each checked against its digest."""

from __future__ import annotations

import os
from pathlib import Path

from onecluster.errors import IntegrityError, NotFoundError, StorageError
from onecluster.storage._files import OpenFiles
from onecluster.transfer import Manifest, digest

__all__ = ["SourceReader"]


class SourceReader:
    """Serves the chunks of ``manifest`` from the replica in ``directory`` (thread-safe),
    keeping at most ``open_files`` of its files open.

    Every chunk is checked before it is handed out: a file edited after its version was
    scanned raises :class:`IntegrityError` naming it, instead of sending bytes that the
    receiver would refuse again and again.
    """

    def __init__(
        self, directory: Path, manifest: Manifest, *, site: str = "this site", open_files: int = 64
    ) -> None:
        self._dir = directory
        self._site = site
        self._root = manifest.root
        self._first: dict[bytes, tuple[str, int, int]] = {}
        for chunk, path, offset, size in manifest.places():
            self._first.setdefault(chunk, (path, offset, size))
        self._files = OpenFiles(
            lambda path: os.open(self._dir / path, os.O_RDONLY), limit=open_files
        )

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
            with self._files.use(path) as fd:
                data = os.pread(fd, size, offset)
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

    def close(self) -> None:
        """Close every file (those that reads use as they end); a later read opens again."""
        self._files.close()
