"""A dataset version's manifest: every entry of its tree, and every file's chunks.

An entry is a directory, a regular file (its size, mode and chunk list) or a symbolic link
that stays inside the tree.  Paths are relative, ``/``-separated, normalised (no ``.``,
``..`` or empty component, no NUL, not absolute), and entries are sorted by their UTF-8
bytes, so that one tree has one manifest.  The version's **root** is the Merkle root
(:mod:`onecluster.transfer._merkle`) over the encoded entries: the same bytes, paths, modes
and chunk boundaries give the same root, on any site.

The encoding (:func:`encode_manifest`) is versioned and binary, because a manifest lists
every chunk: a terabyte of 1 MiB chunks is a million of them, 36 bytes each.  Decoding
checks every length against what is left of the input, so a corrupt or hostile manifest
raises :class:`~onecluster.errors.IntegrityError` and never allocates more than its size.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass
from enum import IntEnum
from functools import cached_property

from onecluster.errors import IntegrityError, ValidationError
from onecluster.transfer._merkle import DIGEST_SIZE, leaf_hash, merkle_root

__all__ = [
    "FORMAT_VERSION",
    "ChunkRef",
    "Entry",
    "EntryKind",
    "Manifest",
    "check_relative_path",
    "decode_manifest",
    "encode_manifest",
]

#: The manifest format this code writes and reads (with its chunking parameters, part of a
#: version's identity: ``docs/data.md``).
FORMAT_VERSION = 1
_MAGIC = b"OCMF"
_HEAD = struct.Struct(">4sHI")  # magic, format version, entry count
_ENTRY = struct.Struct(">BHQII")  # kind, path length, size, mode, chunk (or target) count
_CHUNK = struct.Struct(f">{DIGEST_SIZE}sI")  # digest, size
#: Longest path in a manifest, in UTF-8 bytes (Linux's PATH_MAX).
MAX_PATH_BYTES = 4096


class EntryKind(IntEnum):
    """What an entry of the tree is."""

    DIRECTORY = 0
    FILE = 1
    SYMLINK = 2


@dataclass(frozen=True, slots=True)
class ChunkRef:
    """A chunk: its BLAKE3 digest and its size in bytes."""

    digest: bytes
    size: int


@dataclass(frozen=True, slots=True)
class Entry:
    """One entry of the tree; ``chunks`` for a file (in order), ``target`` for a link."""

    path: str
    kind: EntryKind
    size: int = 0
    mode: int = 0o644
    chunks: tuple[ChunkRef, ...] = ()
    target: str = ""

    def encoded(self) -> bytes:
        """This entry's bytes in the manifest (and in its Merkle leaf)."""
        path = self.path.encode()
        if self.kind is EntryKind.SYMLINK:
            target = self.target.encode()
            return _ENTRY.pack(self.kind, len(path), 0, self.mode, len(target)) + path + target
        head = _ENTRY.pack(self.kind, len(path), self.size, self.mode, len(self.chunks))
        return head + path + b"".join(_CHUNK.pack(c.digest, c.size) for c in self.chunks)


def check_relative_path(path: str) -> None:
    """:class:`ValidationError` unless ``path`` is a normalised relative path inside a tree."""
    try:
        size = len(path.encode())
    except UnicodeEncodeError:  # a name the file system gave as undecodable bytes
        size = MAX_PATH_BYTES + 1
    if (
        not path
        or "\x00" in path
        or path.startswith("/")
        or any(p in ("", ".", "..") for p in path.split("/"))
        or size > MAX_PATH_BYTES
    ):
        msg = f"path {path!r} is not a plain relative path inside the dataset"
        raise ValidationError(msg)


@dataclass(frozen=True)
class Manifest:
    """The entries of one version of a dataset, sorted by path."""

    entries: tuple[Entry, ...]

    def __post_init__(self) -> None:
        previous = b""
        for entry in self.entries:
            check_relative_path(entry.path)
            key = entry.path.encode()
            if previous and key <= previous:
                msg = f"manifest entries are not sorted and unique at {entry.path!r}"
                raise ValidationError(msg)
            previous = key
            if entry.kind is EntryKind.FILE and sum(c.size for c in entry.chunks) != entry.size:
                msg = f"the chunks of {entry.path!r} do not add up to its size"
                raise ValidationError(msg)

    @cached_property
    def root(self) -> bytes:
        """The version's identity: the Merkle root over the encoded entries."""
        return merkle_root([leaf_hash(e.encoded()) for e in self.entries])

    @property
    def root_hex(self) -> str:
        return self.root.hex()

    @cached_property
    def bytes_total(self) -> int:
        return sum(e.size for e in self.entries if e.kind is EntryKind.FILE)

    @cached_property
    def files(self) -> int:
        return sum(1 for e in self.entries if e.kind is EntryKind.FILE)

    @cached_property
    def chunks(self) -> dict[bytes, int]:
        """Every distinct chunk and its size (a chunk found twice is sent once)."""
        return {c.digest: c.size for e in self.entries for c in e.chunks}

    def places(self) -> Iterator[tuple[bytes, str, int, int]]:
        """Where every chunk goes: ``(digest, path, offset, size)``, in manifest order."""
        for entry in self.entries:
            offset = 0
            for chunk in entry.chunks:
                yield chunk.digest, entry.path, offset, chunk.size
                offset += chunk.size


def encode_manifest(manifest: Manifest) -> bytes:
    """The manifest's versioned binary form."""
    head = _HEAD.pack(_MAGIC, FORMAT_VERSION, len(manifest.entries))
    return head + b"".join(e.encoded() for e in manifest.entries)


def decode_manifest(data: bytes, *, root: bytes | None = None) -> Manifest:
    """Read a manifest; with ``root``, check that it is that version's.

    Raises :class:`IntegrityError` for bytes that are not a manifest of this format, or whose
    root is not ``root``.
    """
    view = memoryview(data)
    if len(view) < _HEAD.size:
        raise IntegrityError("the manifest is truncated (no header)")
    magic, version, count = _HEAD.unpack_from(view)
    if magic != _MAGIC:
        raise IntegrityError("the data is not a onecluster manifest")
    if version != FORMAT_VERSION:
        msg = (
            f"manifest format {version} is not readable here (this version reads {FORMAT_VERSION})"
        )
        raise IntegrityError(msg, hint="upgrade the agent that reads it")
    at = _HEAD.size
    if count > (len(view) - at) // _ENTRY.size:
        raise IntegrityError(f"the manifest claims {count} entries, more than its bytes hold")
    entries = []
    for _ in range(count):
        entry, at = _decode_entry(view, at)
        entries.append(entry)
    if at != len(view):
        raise IntegrityError("the manifest has bytes after its last entry")
    try:
        manifest = Manifest(tuple(entries))
    except ValidationError as exc:
        raise IntegrityError(f"the manifest is not valid: {exc.message}") from exc
    if root is not None and manifest.root != root:
        msg = (
            f"the manifest's root is {manifest.root_hex}, not the version asked for ({root.hex()})"
        )
        raise IntegrityError(msg)
    return manifest


def _decode_entry(view: memoryview, at: int) -> tuple[Entry, int]:
    if len(view) - at < _ENTRY.size:
        raise IntegrityError("the manifest is truncated inside an entry")
    raw_kind, path_len, size, mode, count = _ENTRY.unpack_from(view, at)
    at += _ENTRY.size
    try:
        kind = EntryKind(raw_kind)
    except ValueError as exc:
        raise IntegrityError(f"the manifest holds an entry of unknown kind {raw_kind}") from exc
    if kind is not EntryKind.FILE and (size or (count and kind is EntryKind.DIRECTORY)):
        raise IntegrityError("the manifest gives a size or chunks to an entry that is no file")
    item = 1 if kind is EntryKind.SYMLINK else _CHUNK.size
    if path_len > len(view) - at or count > (len(view) - at - path_len) // item:
        raise IntegrityError("the manifest is truncated inside an entry")
    try:
        path = bytes(view[at : at + path_len]).decode()
        at += path_len
        if kind is EntryKind.SYMLINK:
            target = bytes(view[at : at + count]).decode()
            return Entry(path, kind, mode=mode, target=target), at + count
    except UnicodeDecodeError as exc:
        raise IntegrityError("the manifest holds a name that is not UTF-8") from exc
    chunks = tuple(ChunkRef(*_CHUNK.unpack_from(view, at + i * _CHUNK.size)) for i in range(count))
    return Entry(path, kind, size=size, mode=mode, chunks=chunks), at + count * _CHUNK.size
