"""Receiving a version into a site's storage, resumably.

A version being received lives in ``<data-dir>/<dataset>/.partial-<root>``: a file is created
at its full size (sparse) when its first chunk arrives, and every chunk is written at each of
its places once its bytes match its digest.  At most 64 of its files are open at once (a
version may hold more files than a process may open).  Written chunks are recorded in the
site's index in batches, after the file system has flushed them (one ``syncfs`` per batch,
however many files it touched), so that the index never lists a chunk the disk could lose.
After a crash, :meth:`PartialReplica.open` re-reads the places that hold data but were not
recorded yet, and keeps every chunk whose bytes verify: **a verified chunk is never fetched
twice**.

:meth:`PartialReplica.finish` checks that every chunk of the manifest is recorded, creates
the links, sets every mode, and renames the directory to ``<data-dir>/<dataset>/<root>``: a
replica is complete only when all of it is verified.  Nothing is written outside the
partial directory: the manifest's paths are relative and normalised, every entry's parent
must be a directory of the manifest, and a link may not point out of the tree.
"""

from __future__ import annotations

import errno
import os
import posixpath
import shutil
import threading
import time
from pathlib import Path

from onecluster.errors import IntegrityError, StorageError
from onecluster.storage._files import OpenFiles, sync_filesystem
from onecluster.storage._index import ChunkIndex
from onecluster.transfer import ChunkRef, EntryKind, Manifest, digest

__all__ = ["PartialReplica", "replica_dir"]

#: Record written chunks at least this often (seconds) or every this many bytes.
_COMMIT_S = 0.5
_COMMIT_BYTES = 64 * 1024 * 1024
#: Files of a version kept open at once.
_OPEN_FILES = 64
#: Free space kept beyond what a transfer needs.
_HEADROOM = 64 * 1024 * 1024


def replica_dir(data_dir: Path, dataset: str, root: bytes, *, partial: bool = False) -> Path:
    """Where a received replica of ``(dataset, root)`` lives (or is being received)."""
    name = root.hex()[:16]
    return data_dir / dataset / (f".partial-{name}" if partial else name)


class PartialReplica:
    """A version of ``dataset`` being received at this site (thread-safe writes)."""

    def __init__(self, index: ChunkIndex, data_dir: Path, dataset: str, manifest: Manifest):
        self._index = index
        self._dataset = dataset
        self._manifest = manifest
        self._root = manifest.root
        self.dir = replica_dir(data_dir, dataset, self._root, partial=True)
        self.final = replica_dir(data_dir, dataset, self._root)
        self._places: dict[bytes, list[tuple[str, int]]] = {}
        for chunk, path, offset, _ in manifest.places():
            self._places.setdefault(chunk, []).append((path, offset))
        self._sizes = {e.path: e.size for e in manifest.entries if e.kind is EntryKind.FILE}
        self._lock = threading.Lock()
        self._files = OpenFiles(self._open_for_writing, limit=_OPEN_FILES)
        #: One writer per file at a time (the kernel's inode lock spins otherwise), striped.
        self._write_locks = [threading.Lock() for _ in range(_OPEN_FILES)]
        self._pending: list[tuple[bytes, str, int, int]] = []
        self._pending_bytes = 0
        self._committed_at = time.monotonic()
        self._present: set[bytes] = set()
        self.bytes_present = 0

    @property
    def chunks_present(self) -> int:
        """Distinct chunks of the version written and verified so far."""
        with self._lock:
            return len(self._present)

    # -- set-up -----------------------------------------------------------------------------

    def open(self) -> list[ChunkRef]:
        """Create (or reopen) the partial directory and return the chunks still needed, in
        manifest order.  Raises :class:`StorageError` when the disk cannot hold them."""
        _check_parents(self._manifest)
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
            for entry in self._manifest.entries:  # parents first: the entries are sorted
                if entry.kind is EntryKind.DIRECTORY:
                    (self.dir / entry.path).mkdir(mode=0o700, exist_ok=True)
        except OSError as exc:
            raise _storage_error(exc, self.dir) from exc
        self._present = self._index.present(self._dataset, self._root)
        self._recover()
        self._record(self.dir, complete=False, bytes_present=self._bytes_of(self._present))
        needed = self.needed()
        _check_space(self.dir, sum(c.size for c in needed))
        return needed

    def needed(self) -> list[ChunkRef]:
        """The manifest's chunks not written and verified yet, in manifest order."""
        with self._lock:
            present = set(self._present) | {p[0] for p in self._pending}
        chunks = self._manifest.chunks
        return [ChunkRef(d, chunks[d]) for d in self._places if d not in present]

    def _recover(self) -> None:
        """Keep chunks written before a crash but not recorded: their places hold data and
        their bytes verify."""
        found: list[tuple[bytes, str, int, int]] = []
        for chunk, places in self._places.items():
            if chunk in self._present:
                continue
            size = self._manifest.chunks[chunk]
            if all(self._verifies(path, offset, size, chunk) for path, offset in places):
                found.extend((chunk, path, offset, size) for path, offset in places)
                self._present.add(chunk)
        if found:
            self._index.add_chunks(self._dataset, self._root, found)

    def _verifies(self, path: str, offset: int, size: int, chunk: bytes) -> bool:
        try:
            fd = os.open(self.dir / path, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError:
            return False
        try:
            if size and os.lseek(fd, offset, os.SEEK_DATA) >= offset + size:
                return False  # a hole: never written
            return digest(os.pread(fd, size, offset)) == chunk
        except OSError:  # ENXIO: no data after the offset at all
            return False
        finally:
            os.close(fd)

    # -- writing ----------------------------------------------------------------------------

    def write(self, chunk: bytes, data: bytes | memoryview) -> bool:
        """Write a chunk at every place it has; ``False`` when it was already there.

        Raises :class:`IntegrityError` when ``data`` is not the chunk (nothing is written)
        and :class:`StorageError` when the disk refuses it.
        """
        places = self._places.get(chunk)
        if places is None:
            msg = f"chunk {chunk.hex()[:16]} is not part of version {self._root.hex()[:16]}"
            raise IntegrityError(msg)
        if digest(data) != chunk:
            msg = f"chunk {chunk.hex()[:16]} arrived corrupt (its bytes do not match its digest)"
            raise IntegrityError(msg)
        with self._lock:
            if chunk in self._present:
                return False
        try:
            for path, offset in places:
                with self._files.use(path) as fd, self._write_locks[hash(path) % _OPEN_FILES]:
                    os.pwrite(fd, data, offset)
        except OSError as exc:
            raise _storage_error(exc, self.dir) from exc
        with self._lock:
            if chunk in self._present:
                return False
            self._present.add(chunk)
            self._pending.extend((chunk, path, offset, len(data)) for path, offset in places)
            self._pending_bytes += len(data)
            due = (
                self._pending_bytes >= _COMMIT_BYTES
                or time.monotonic() - self._committed_at >= _COMMIT_S
            )
        if due:
            self.commit()
        return True

    def commit(self) -> None:
        """Flush the files written since the last commit and record their chunks."""
        with self._lock:
            pending, self._pending, self._pending_bytes = self._pending, [], 0
            self._committed_at = time.monotonic()
        if not pending:
            return
        try:
            fd = os.open(self.dir, os.O_RDONLY)
            try:
                sync_filesystem(fd)
            finally:
                os.close(fd)
        except OSError as exc:
            with self._lock:  # not durable: nothing of this batch counts as present
                self._present.difference_update(p[0] for p in pending)
            raise _storage_error(exc, self.dir) from exc
        self._index.add_chunks(self._dataset, self._root, pending)
        with self._lock:  # other streams add to it as they write
            present = set(self._present)
        self.bytes_present = self._bytes_of(present)
        self._record(self.dir, complete=False, bytes_present=self.bytes_present)

    def _record(self, directory: Path, *, complete: bool, bytes_present: int) -> None:
        self._index.put_replica(
            self._dataset,
            self._root,
            directory,
            complete=complete,
            in_place=False,
            bytes_present=bytes_present,
        )

    def _open_for_writing(self, path: str) -> int:
        """Open (creating it at its full size, sparse, the first time) a file of the version."""
        fd = os.open(self.dir / path, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        try:
            if os.fstat(fd).st_size != self._sizes[path]:
                os.ftruncate(fd, self._sizes[path])
        except BaseException:
            os.close(fd)
            raise
        return fd

    def _bytes_of(self, chunks: set[bytes]) -> int:
        sizes = self._manifest.chunks
        return sum(sizes[c] * len(self._places[c]) for c in chunks if c in sizes)

    # -- the end ----------------------------------------------------------------------------

    def finish(self) -> Path:
        """Make the replica complete and return its directory.

        Raises :class:`IntegrityError` when a chunk is still missing, :class:`StorageError`
        when the final directory exists already or cannot be made.
        """
        self.commit()
        self.close()
        missing = self.needed()
        if missing:
            msg = f"{len(missing)} chunk(s) of version {self._root.hex()[:16]} are still missing"
            raise IntegrityError(msg)
        if self.final.exists():
            msg = f"{self.final} exists already and is not a replica this agent knows"
            raise StorageError(msg, hint=f"move it away; the received copy is kept in {self.dir}")
        try:
            for path, size in self._sizes.items():
                if size == 0:  # no chunk ever created it
                    os.close(self._open_for_writing(path))
            for entry in self._manifest.entries:
                if entry.kind is EntryKind.SYMLINK:
                    link = self.dir / entry.path
                    if not link.is_symlink():
                        link.symlink_to(entry.target)
                elif entry.kind is EntryKind.FILE:
                    (self.dir / entry.path).chmod(entry.mode)
            for entry in reversed(self._manifest.entries):  # children before their parents
                if entry.kind is EntryKind.DIRECTORY:
                    (self.dir / entry.path).chmod(entry.mode)
            fd = os.open(self.dir, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
            self.dir.rename(self.final)
        except OSError as exc:
            raise _storage_error(exc, self.dir) from exc
        self._index.drop_replica(self._dataset, self._root)
        self._record(self.final, complete=True, bytes_present=self._manifest.bytes_total)
        self._index.add_chunks(
            self._dataset,
            self._root,
            ((c, p, o, s) for c, p, o, s in self._manifest.places()),
        )
        self.bytes_present = self._manifest.bytes_total
        with self._lock:
            self._present = set(self._places)
        return self.final

    def close(self) -> None:
        """Close the open files (the partial directory stays, to resume)."""
        self._files.close()

    def discard(self) -> None:
        """Remove the partial directory and forget it."""
        self.close()
        shutil.rmtree(self.dir, ignore_errors=True)
        self._index.drop_replica(self._dataset, self._root)


def _check_parents(manifest: Manifest) -> None:
    """:class:`IntegrityError` unless every entry's parent is a directory of the manifest
    and every link stays inside the tree."""
    kinds = {e.path: e.kind for e in manifest.entries}
    for entry in manifest.entries:
        parent = posixpath.dirname(entry.path)
        if parent and kinds.get(parent) is not EntryKind.DIRECTORY:
            msg = f"the manifest puts {entry.path!r} under {parent!r}, which is no directory of it"
            raise IntegrityError(msg)
        if entry.kind is EntryKind.SYMLINK:
            inside = posixpath.normpath(posixpath.join(parent, entry.target))
            outside = entry.target.startswith("/") or inside == ".." or inside.startswith("../")
            if outside or not entry.target:
                msg = f"the link {entry.path!r} would point outside the dataset ({entry.target})"
                raise IntegrityError(msg)


def _check_space(directory: Path, needed: int) -> None:
    free = shutil.disk_usage(directory).free
    if needed + _HEADROOM > free:
        msg = (
            f"the version needs {needed / 1e9:.2f} GB more at {directory}, and only "
            f"{free / 1e9:.2f} GB are free"
        )
        raise StorageError(msg, hint="free space there; the transfer resumes where it stopped")


def _storage_error(exc: OSError, directory: Path) -> StorageError:
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        msg = f"the disk holding {directory} is full"
        return StorageError(msg, hint="free space there; the transfer resumes where it stopped")
    return StorageError(f"cannot write {directory}: {exc.strerror or exc}")
