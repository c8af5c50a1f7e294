"""Opening a register directory: create what is missing, check what is stored, and drop
what a crash left half written — and nothing else.

A crash can leave, after the last signed checkpoint, entries of the batch whose checkpoint
was never written (their append never returned: ``pending.json`` lists their leaf hashes),
a partial last line in either file, or a last entry line that does not parse.  Those are
moved to ``dropped.jsonl`` (kept for the record, never signed) and cut off.  Everything a
signed checkpoint covers must check out (``_check.check_log``), and any other entry past the
last checkpoint — added by hand, or left uncovered by a deleted checkpoint — is refused
with :class:`IntegrityError`, so that a server on top of it refuses every export.
"""

from __future__ import annotations

import fcntl
import os
from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from onecluster.errors import ConflictError, IntegrityError, StorageError, ValidationError
from onecluster.export import merkle
from onecluster.register._canonical import parse_entry
from onecluster.register._check import Checked, check_log, entry_name
from onecluster.register._files import (
    CHECKPOINTS,
    ENTRIES,
    PENDING,
    PUBLIC_KEY,
    SIGNING_KEY,
    Lines,
    fsync_directory,
    parse_checkpoint,
    parse_pending,
    read_lines,
)
from onecluster.register._keys import (
    create_key_pair,
    load_signing_key,
    parse_public_key,
    public_bytes,
)

__all__ = ["DROPPED", "MAX_BATCH", "Recovered", "lock_directory", "recover"]

#: Where entries cut off at open (never covered by a signed checkpoint) are kept.
DROPPED = "dropped.jsonl"

#: The most entries one batch (one checkpoint) holds.
MAX_BATCH = 4096


@dataclass(slots=True)
class Recovered:
    """A register directory that checked out: its key, and its covered entries and heads."""

    key: Ed25519PrivateKey
    public_key: bytes
    checked: Checked
    entries: list[bytes]


def lock_directory(directory: Path) -> int:
    """Create ``directory`` if missing and take its exclusive lock (``flock`` on the
    directory itself, released when the returned descriptor is closed or the process
    dies); :class:`ConflictError` when another :class:`Register` holds it."""
    _ensure_directory(directory)
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    except OSError as exc:
        msg = f"cannot open the register directory {directory}: {exc.strerror or exc}"
        raise StorageError(msg) from exc
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError as exc:
        os.close(fd)
        msg = f"the register in {directory} is open in another process (or object)"
        raise ConflictError(msg, hint="one server owns a register; close the other") from exc
    return fd


def _ensure_directory(directory: Path) -> None:
    if directory.is_dir():
        return
    try:
        directory.mkdir(parents=True)
        fsync_directory(directory.parent)
    except OSError as exc:
        msg = f"cannot create the register directory {directory}: {exc.strerror or exc}"
        raise StorageError(msg) from exc


def _keys(directory: Path, has_log: bool) -> tuple[Ed25519PrivateKey, bytes]:
    signing = directory / SIGNING_KEY
    if not signing.exists():
        if has_log:
            msg = f"the register in {directory} has checkpoints but no {SIGNING_KEY}"
            raise IntegrityError(msg, hint="restore the signing key; a new key would fork the log")
        create_key_pair(directory)
        fsync_directory(directory)
    elif not (directory / PUBLIC_KEY).exists():
        create_key_pair(directory)
        fsync_directory(directory)
    key = load_signing_key(signing)
    public = public_bytes(key)
    stored = parse_public_key((directory / PUBLIC_KEY).read_bytes(), str(directory / PUBLIC_KEY))
    if stored != public:
        msg = f"{directory / PUBLIC_KEY} is not the public key of {SIGNING_KEY}"
        raise IntegrityError(msg, hint="restore public.key from a copy auditors pinned")
    return key, public


def _checkpoint_lines(stored: Lines, public_key: bytes) -> tuple[list[bytes], bool]:
    """The complete checkpoint lines, and whether a torn last line was dropped.  A last line
    missing only its newline, that parses and verifies, is kept (the newline is restored)."""
    lines = list(stored.lines)
    if not stored.torn:
        return lines, False
    if _signed(stored.torn, public_key):
        lines.append(stored.torn)
    elif _signed(stored.torn[:-1], public_key):
        # A crash leaves a prefix of "line\n"; a whole line followed by another byte than
        # the newline was edited.
        lines.append(stored.torn)  # refused by the check, naming this line
    return lines, True


def _signed(line: bytes, public_key: bytes) -> bool:
    checkpoint = parse_checkpoint(line)
    if checkpoint is None:
        return False
    try:
        checkpoint.head.verify(public_key)
    except IntegrityError:
        return False
    return True


def _rewrite_tail(path: Path, keep: int, tail: bytes) -> None:
    """Cut ``path`` to ``keep`` bytes, then append ``tail``; fsync."""
    fd = os.open(path, os.O_WRONLY)
    try:
        os.ftruncate(fd, keep)
        if tail:
            os.pwrite(fd, tail, keep)
        os.fsync(fd)
    finally:
        os.close(fd)


def _drop(directory: Path, data: bytes) -> None:
    """Keep ``data`` (entries cut off) in ``dropped.jsonl``, durably."""
    path = directory / DROPPED
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        os.write(fd, data if data.endswith(b"\n") else data + b"\n")
        os.fsync(fd)
    finally:
        os.close(fd)
    fsync_directory(directory)


def _check_uncovered(uncovered: list[bytes], covered: int, pending: bytes) -> None:
    """Entries past the last checkpoint must be the batch ``pending.json`` names (a prefix
    of it); the last of them may also be a line that does not parse (torn by a crash)."""
    batch = parse_pending(pending)
    first, leaves = batch if batch is not None else (-1, [])
    for offset, line in enumerate(uncovered):
        if first == covered and offset < len(leaves) and merkle.leaf_hash(line) == leaves[offset]:
            continue
        if offset == len(uncovered) - 1 and parse_entry(line) is None:
            continue
        msg = (
            f"{entry_name(covered + offset)} is not covered by any signed tree head, nor is it "
            f"in the batch the register was writing when it stopped ({PENDING}): it was added "
            "by hand, or the checkpoint that covered it was deleted"
        )
        raise IntegrityError(msg, hint=f"restore {CHECKPOINTS} and {ENTRIES} from a copy")


def recover(directory: Path, origin: str) -> Recovered:
    """Open (or create) the register in ``directory``, which the caller has locked; see the
    module's docstring."""
    entries_path, checkpoints_path = directory / ENTRIES, directory / CHECKPOINTS
    stored_checkpoints = read_lines(checkpoints_path)
    stored_entries = read_lines(entries_path)
    has_log = bool(stored_checkpoints.lines or stored_checkpoints.torn)
    key, public = _keys(directory, has_log)
    lines, torn_checkpoint = _checkpoint_lines(stored_checkpoints, public)
    checked = check_log(stored_entries.lines, lines, public)
    for head in checked.heads:
        if head.origin != origin:
            msg = f"the register in {directory} is the log {head.origin!r}, not {origin!r}"
            raise ValidationError(msg, hint="open it with the origin it was created with")
    covered = checked.covered
    uncovered = stored_entries.lines[covered:]
    if uncovered and not checked.checkpoints:
        msg = f"{entry_name(0)} is not covered by any signed tree head: {CHECKPOINTS} is empty"
        raise IntegrityError(msg, hint=f"restore {CHECKPOINTS} from a copy")
    _check_uncovered(
        uncovered,
        covered,
        (directory / PENDING).read_bytes() if (directory / PENDING).exists() else b"",
    )
    try:
        if uncovered or stored_entries.torn:
            keep = stored_entries.offset(covered)
            _drop(directory, b"".join(line + b"\n" for line in uncovered) + stored_entries.torn)
            _rewrite_tail(entries_path, keep, b"")
        if torn_checkpoint:
            keep = stored_checkpoints.offset(len(stored_checkpoints.lines))
            kept = lines[len(stored_checkpoints.lines) :]
            _rewrite_tail(checkpoints_path, keep, b"".join(line + b"\n" for line in kept))
        for path in (entries_path, checkpoints_path):
            if not path.exists():
                path.touch(mode=0o644)
        (directory / PENDING).write_bytes(b"")
        fsync_directory(directory)
    except OSError as exc:
        msg = f"cannot repair the register in {directory}: {exc.strerror or exc}"
        raise StorageError(msg) from exc
    return Recovered(key, public, checked, stored_entries.lines[:covered])
