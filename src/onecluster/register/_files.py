"""The files of a register directory and of its lines: names, splitting, checkpoint lines.

``entries.jsonl`` holds one canonical JSON entry per line (line ``n + 1`` is entry ``n``);
``checkpoints.jsonl`` one line per batch::

    {"leaves":[hex…],"origin":"…","root":hex,"signature":base64,"size":n,"timestamp":"…Z"}

``leaves`` are the leaf hashes of the entries that batch added (entries ``[size −
len(leaves), size)``), which lets a verifier name the first entry whose bytes changed.  The
signature covers the checkpoint note (origin, size, root, timestamp) only.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
from dataclasses import dataclass
from pathlib import Path

from onecluster.errors import StorageError
from onecluster.register._head import SignedHead

__all__ = [
    "CHECKPOINTS",
    "ENTRIES",
    "PENDING",
    "PUBLIC_KEY",
    "SIGNING_KEY",
    "Checkpoint",
    "Lines",
    "checkpoint_line",
    "fsync_directory",
    "parse_checkpoint",
    "parse_pending",
    "pending_record",
    "read_lines",
    "split_lines",
    "write_all",
]

ENTRIES = "entries.jsonl"
#: The batch being written: its first seq and leaf hashes on the file's first line, set (and
#: fsync'd) before its entries are written, emptied (an empty first line) once its
#: checkpoint is durable; bytes after the first line are leftovers of larger batches.  After
#: a crash it tells the entries of that batch — which may be dropped, their append never
#: returned — from entries added by hand, or covered by a checkpoint someone deleted, which
#: are refused.
PENDING = "pending.json"
CHECKPOINTS = "checkpoints.jsonl"
PUBLIC_KEY = "public.key"
SIGNING_KEY = "signing.key"


@dataclass(frozen=True, slots=True)
class Lines:
    """A file split into its complete lines (without their ``\\n``) and the bytes after the
    last ``\\n`` (``torn``, empty when the file ends with one)."""

    lines: list[bytes]
    torn: bytes

    def offset(self, count: int) -> int:
        """The byte offset where line ``count + 1`` starts (the length of the first ``count``)."""
        return sum(len(line) + 1 for line in self.lines[:count])


def split_lines(data: bytes) -> Lines:
    """``data`` as :class:`Lines`."""
    parts = data.split(b"\n")
    return Lines(parts[:-1], parts[-1])


def read_lines(path: Path) -> Lines:
    """The lines of ``path`` (none when it does not exist)."""
    try:
        return split_lines(path.read_bytes())
    except FileNotFoundError:
        return Lines([], b"")
    except OSError as exc:
        msg = f"cannot read {path}: {exc.strerror or exc}"
        raise StorageError(msg) from exc


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """One stored checkpoint: the signed head and the leaf hashes its batch added."""

    head: SignedHead
    leaves: tuple[bytes, ...]

    @property
    def first(self) -> int:
        """The first entry this batch added (``size`` when it added none)."""
        return self.head.size - len(self.leaves)


def checkpoint_line(head: SignedHead, leaves: list[bytes]) -> bytes:
    """The stored line (with its ``\\n``) of ``head`` and its batch's leaf hashes."""
    record = {
        "leaves": [leaf.hex() for leaf in leaves],
        "origin": head.origin,
        "root": head.root.hex(),
        "signature": base64.b64encode(head.signature).decode("ascii"),
        "size": head.size,
        "timestamp": head.timestamp,
    }
    return json.dumps(record, sort_keys=True, separators=(",", ":")).encode() + b"\n"


def parse_checkpoint(line: bytes) -> Checkpoint | None:
    """The checkpoint on one stored line (without its ``\\n``), or ``None`` when it is not
    a well-formed one written exactly as :func:`checkpoint_line` writes it."""
    try:
        record = json.loads(line.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None
    if not isinstance(record, dict) or set(record) != {
        "leaves",
        "origin",
        "root",
        "signature",
        "size",
        "timestamp",
    }:
        return None
    size, leaves = record["size"], record["leaves"]
    if not isinstance(size, int) or isinstance(size, bool) or not isinstance(leaves, list):
        return None
    if not isinstance(record["origin"], str) or not isinstance(record["timestamp"], str):
        return None
    try:
        hashes = tuple(bytes.fromhex(leaf) for leaf in leaves)
        head = SignedHead(
            record["origin"],
            size,
            bytes.fromhex(record["root"]),
            base64.b64decode(record["signature"], validate=True),
            record["timestamp"],
        )
    except (TypeError, ValueError, binascii.Error):
        return None
    if len(hashes) > size or any(len(leaf) != 32 for leaf in hashes):
        return None
    # Only the canonical spelling is accepted: an upper-case hex digit or another base64
    # padding would decode to the same values, and every byte of the file must count.
    if checkpoint_line(head, list(hashes)) != line + b"\n":
        return None
    return Checkpoint(head, hashes)


def fsync_directory(directory: Path) -> None:
    """fsync ``directory`` itself, so that files created or renamed in it survive a crash."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_all(fd: int, data: bytes) -> None:
    """Write all of ``data`` to ``fd`` (``os.write`` may write less than it was given)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def pending_record(first: int, leaves: list[bytes]) -> bytes:
    """The contents of ``pending.json`` for a batch starting at ``first``."""
    record = {"first": first, "leaves": [leaf.hex() for leaf in leaves]}
    return json.dumps(record, sort_keys=True, separators=(",", ":")).encode() + b"\n"


def parse_pending(data: bytes) -> tuple[int, list[bytes]] | None:
    """(first seq, leaf hashes) of the batch ``pending.json`` names (on its first line), or
    ``None``."""
    try:
        record = json.loads(data.split(b"\n", 1)[0].decode("utf-8"))
        first, leaves = record["first"], [bytes.fromhex(h) for h in record["leaves"]]
    except (UnicodeDecodeError, ValueError, TypeError, KeyError):
        return None
    return (first, leaves) if isinstance(first, int) else None
