"""Scanning a directory in place into a manifest: content-defined chunks, BLAKE3 digests.

The scan walks the tree in the manifest's order (by UTF-8 bytes of the path), cuts every
regular file with FastCDC (format 1's parameters) and digests every chunk.  It reads each
file once, in its place: nothing is copied.

What it refuses, by name, changing nothing: a path that is not a directory, a name that is
not UTF-8, a special file (device, FIFO, socket), a symbolic link that points outside the
tree (absolute, or through ``..`` past the top) — a dataset that silently lacked a file or
leaked one from elsewhere would be worse than no dataset.  A file that changes while it is
read (its size, modification time or inode differ before and after) is read again, up to
three times, then the scan fails naming it.
"""

from __future__ import annotations

import os
import posixpath
import stat
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pyfastcdc import FastCDC

from onecluster.errors import IntegrityError, PlatformError, ValidationError
from onecluster.transfer import (
    CHUNK_AVG,
    CHUNK_MAX,
    CHUNK_MIN,
    ChunkRef,
    Entry,
    EntryKind,
    Manifest,
    check_relative_path,
    digest,
)

__all__ = ["ScanCancelledError", "ScanProgress", "scan_tree"]

#: Files up to this size are read whole and cut in memory; larger ones are streamed.
_WHOLE = 16 * 1024 * 1024
_READS = 3


class ScanCancelledError(PlatformError):
    """The scan was asked to stop before it finished."""


@dataclass(frozen=True, slots=True)
class ScanProgress:
    """How far a scan is: files and bytes read of the totals the first walk found."""

    files_done: int
    bytes_done: int
    files_total: int
    bytes_total: int


@dataclass(frozen=True, slots=True)
class _Found:
    path: str
    kind: EntryKind
    st: os.stat_result
    target: str = ""


def scan_tree(
    top: Path,
    *,
    progress: Callable[[ScanProgress], None] | None = None,
    stop: threading.Event | None = None,
) -> Manifest:
    """The manifest of the tree under ``top``.

    ``progress`` is called after every file (and once at the start, with the totals);
    ``stop`` set makes the scan raise :class:`ScanCancelledError`.  Raises
    :class:`ValidationError` for a tree that cannot be a dataset (see the module) and
    :class:`IntegrityError` for a file that kept changing while it was read.
    """
    if not top.is_dir():
        what = "does not exist" if not top.exists() else "is not a directory"
        msg = f"the dataset's path {top} {what} at this site"
        raise ValidationError(msg)
    found = _walk(top)
    files_total = sum(1 for f in found if f.kind is EntryKind.FILE)
    bytes_total = sum(f.st.st_size for f in found if f.kind is EntryKind.FILE)
    done_files = done_bytes = 0
    if progress is not None:
        progress(ScanProgress(0, 0, files_total, bytes_total))
    cdc = FastCDC(CHUNK_AVG, min_size=CHUNK_MIN, max_size=CHUNK_MAX)
    entries = []
    for item in found:
        if stop is not None and stop.is_set():
            raise ScanCancelledError(f"the scan of {top} was stopped")
        mode = stat.S_IMODE(item.st.st_mode)
        if item.kind is EntryKind.FILE:
            entry = _read_file(cdc, top, item.path, mode)
            entries.append(entry)
            done_files += 1
            done_bytes += entry.size
            if progress is not None:
                progress(ScanProgress(done_files, done_bytes, files_total, bytes_total))
        else:
            entries.append(Entry(item.path, item.kind, mode=mode, target=item.target))
    return Manifest(tuple(entries))


def _walk(top: Path) -> list[_Found]:
    """Every entry under ``top``, sorted by the bytes of its path."""
    out: list[_Found] = []
    pending = [""]
    while pending:
        relative = pending.pop()
        where = top / relative if relative else top
        try:
            with os.scandir(where) as listing:
                children = list(listing)
        except OSError as exc:
            msg = f"cannot read the directory {where}: {exc.strerror}"
            raise ValidationError(msg) from exc
        for child in children:
            path = f"{relative}/{child.name}" if relative else child.name
            try:
                check_relative_path(path)
            except ValidationError as exc:
                msg = f"{top / path!s} has a name that is not UTF-8 text; rename it to add the tree"
                raise ValidationError(msg) from exc
            st = child.stat(follow_symlinks=False)
            if stat.S_ISDIR(st.st_mode):
                out.append(_Found(path, EntryKind.DIRECTORY, st))
                pending.append(path)
            elif stat.S_ISREG(st.st_mode):
                out.append(_Found(path, EntryKind.FILE, st))
            elif stat.S_ISLNK(st.st_mode):
                out.append(_Found(path, EntryKind.SYMLINK, st, _link_target(top, path)))
            else:
                msg = f"{top / path} is not a file, directory or link (a device, FIFO or socket)"
                raise ValidationError(msg, hint="move it out of the dataset's directory")
    out.sort(key=lambda f: f.path.encode())
    return out


def _link_target(top: Path, path: str) -> str:
    """The target of the link at ``path``; :class:`ValidationError` if it leaves the tree."""
    target = str((top / path).readlink())
    inside = posixpath.normpath(posixpath.join(posixpath.dirname(path), target))
    if target.startswith("/") or inside == ".." or inside.startswith("../"):
        msg = f"the link {top / path} points outside the dataset's directory (to {target})"
        raise ValidationError(msg, hint="replace it by the file itself, or remove it")
    return target


def _read_file(cdc: FastCDC, top: Path, path: str, mode: int) -> Entry:
    """The file's entry, read until two stats around one read agree."""
    full = top / path
    for _ in range(_READS):
        try:
            with full.open("rb", buffering=0) as f:
                before = os.fstat(f.fileno())
                if before.st_size <= _WHOLE:
                    data = f.read()
                    chunks = [ChunkRef(digest(c.data), c.length) for c in cdc.cut_buf(data)]
                else:
                    chunks = [ChunkRef(digest(c.data), c.length) for c in cdc.cut_stream(f)]
                after = os.fstat(f.fileno())
                now = full.lstat()
        except OSError as exc:
            msg = f"cannot read {full}: {exc.strerror}"
            raise ValidationError(msg) from exc
        size = sum(c.size for c in chunks)
        if _same(before, after) and _same(after, now) and size == after.st_size:
            return Entry(path, EntryKind.FILE, size=size, mode=mode, chunks=tuple(chunks))
    msg = f"{full} kept changing while it was read ({_READS} times)"
    raise IntegrityError(msg, hint="add the dataset once its files are no longer written")


def _same(a: os.stat_result, b: os.stat_result) -> bool:
    return (a.st_size, a.st_mtime_ns, a.st_ino, a.st_dev) == (
        b.st_size,
        b.st_mtime_ns,
        b.st_ino,
        b.st_dev,
    )
