"""Check a register's stored entries against its stored signed checkpoints.

One function, shared by :meth:`Register.open` (which refuses a register that fails it) and
the offline :func:`verify`.  It walks the checkpoints in order and keeps a tree of leaf
hashes that are *authenticated*: every checkpoint's signature is checked with the public
key, its root must be the head of the authenticated leaves plus the ones it lists, and each
entry's bytes must hash to its listed leaf.  So the first entry whose bytes differ from what
a signed head covers is named exactly, whichever file was edited.

Errors name the entry as ``entry N (line N+1 of entries.jsonl)`` wherever one is at fault,
and the checkpoint by its line otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass

from onecluster.errors import IntegrityError
from onecluster.export import merkle
from onecluster.register._canonical import canonical, parse_entry
from onecluster.register._files import CHECKPOINTS, ENTRIES, Checkpoint, parse_checkpoint
from onecluster.register._head import SignedHead

__all__ = ["Checked", "check_log", "entry_name", "extend_log"]

_HINT = (
    "the register's files were altered or damaged after they were written: restore them "
    "from a copy, and compare with the last tree head published (a monthly bundle, a receipt)"
)


def entry_name(seq: int) -> str:
    """How messages name entry ``seq``."""
    return f"entry {seq} (line {seq + 1} of {ENTRIES})"


def _checkpoint_name(index: int) -> str:
    return f"checkpoint line {index + 1} of {CHECKPOINTS}"


def _fail(message: str) -> IntegrityError:
    return IntegrityError(message, hint=_HINT)


@dataclass(slots=True)
class Checked:
    """What a successful check found: the tree over the covered entries, the heads in
    order, and ``covered`` — the size of the last head (entries past it are not covered)."""

    tree: merkle.Tree
    checkpoints: list[Checkpoint]

    @property
    def covered(self) -> int:
        """How many entries the last signed head covers."""
        return self.checkpoints[-1].head.size if self.checkpoints else 0

    @property
    def heads(self) -> list[SignedHead]:
        """The signed heads, oldest first."""
        return [c.head for c in self.checkpoints]


def check_log(entries: list[bytes], checkpoint_lines: list[bytes], public_key: bytes) -> Checked:
    """Check ``entries`` (each entry's stored bytes) against ``checkpoint_lines`` (each
    stored line, without newlines) under ``public_key``.

    Entries past the last head are left to the caller (``Checked.covered`` says where they
    start).  Raises :class:`IntegrityError` naming the first bad entry or checkpoint.
    """
    checked = Checked(merkle.Tree(), [])
    extend_log(checked, entries, checkpoint_lines, public_key)
    return checked


def extend_log(
    checked: Checked, more: list[bytes], checkpoint_lines: list[bytes], public_key: bytes
) -> None:
    """Check the checkpoint lines that follow ``checked``'s and the entries from seq
    ``checked.covered`` on (``more``), as :func:`check_log` does, and add them to
    ``checked``; nothing is added when one fails (:class:`IntegrityError`)."""
    base, known = checked.covered, len(checked.checkpoints)
    entries = _From(base, more)
    tree = checked.tree.copy() if checked.checkpoints else checked.tree
    checkpoints: list[Checkpoint] = []
    last = checked.checkpoints[-1].head if checked.checkpoints else None
    origin, last_time = (last.origin, last.timestamp) if last is not None else ("", "")
    for offset, line in enumerate(checkpoint_lines):
        index = known + offset
        done = tree.size
        checkpoint = parse_checkpoint(line)
        if checkpoint is None:
            if done < len(entries):
                msg = (
                    f"{entry_name(done)}: the checkpoint that should cover it, "
                    f"{_checkpoint_name(index)}, is malformed"
                )
            else:
                msg = f"{_checkpoint_name(index)} is malformed"
            raise _fail(msg)
        head = checkpoint.head
        covers = (
            f"{entry_name(done)}: the signed tree head of size {head.size} that covers it"
            if head.size > done
            else f"{_checkpoint_name(index)}: the signed tree head of size {head.size}"
        )
        if checkpoint.first != done:
            where = f"{entry_name(done)}: " if done < len(entries) else ""
            msg = (
                f"{where}{_checkpoint_name(index)}, the signed tree head of size {head.size}, "
                f"starts its batch at entry {checkpoint.first}, not at entry {done} where the "
                "heads before it end: a checkpoint was deleted, inserted or moved"
            )
            raise _fail(msg)
        try:
            head.verify(public_key)
        except IntegrityError as exc:
            msg = f"{covers} has a bad signature ({_checkpoint_name(index)})"
            raise _fail(msg) from exc
        if origin and head.origin != origin:
            msg = f"{covers} names the log {head.origin!r}, not {origin!r}"
            raise _fail(msg)
        if head.timestamp < last_time:
            msg = f"{covers} is dated {head.timestamp}, before the head before it"
            raise _fail(msg)
        origin, last_time = head.origin, head.timestamp
        _add_batch(tree, entries, checkpoint, index)
        checkpoints.append(checkpoint)
    checked.tree = tree
    checked.checkpoints.extend(checkpoints)


class _From:
    """Entries from seq ``base`` on, indexed by seq."""

    __slots__ = ("base", "items")

    def __init__(self, base: int, items: list[bytes]) -> None:
        self.base, self.items = base, items

    def __len__(self) -> int:
        return self.base + len(self.items)

    def span(self, first: int, last: int) -> list[bytes]:
        """Entries ``[first, last)`` that are present (none before ``base``)."""
        return self.items[max(first - self.base, 0) : max(last - self.base, 0)]


def _add_batch(tree: merkle.Tree, entries: _From, checkpoint: Checkpoint, index: int) -> None:
    """Add one verified-signature checkpoint's batch to ``tree``, checking every entry."""
    head, listed, first = checkpoint.head, checkpoint.leaves, checkpoint.first
    present = entries.span(first, head.size)
    actual = [merkle.leaf_hash(data) for data in present]
    if actual == list(listed):
        for leaf in listed:
            tree.append_hash(leaf)
        if tree.root() != head.root:
            if first < head.size:
                which = entry_name(first)
                if head.size - first > 1:
                    which += f" or one after it up to entry {head.size - 1}"
                msg = (
                    f"{which}: with these entries (and their hashes in "
                    f"{_checkpoint_name(index)}) the tree's head is not the signed tree head "
                    f"of size {head.size}: an entry and its listed hash were both altered"
                )
            else:
                msg = (
                    f"{_checkpoint_name(index)}: the signed tree head of size {head.size} is "
                    "not the head of the entries before it: the log forked"
                )
            raise _fail(msg)
        _check_entries(present, first)
        return
    # The entries and the list differ: find out which one the signed root vouches for.
    if _root_with(tree, actual) == head.root and len(actual) == len(listed):
        seq = first + next(i for i, (a, b) in enumerate(zip(actual, listed, strict=True)) if a != b)
        msg = (
            f"{entry_name(seq)}: its hash in {_checkpoint_name(index)} was altered "
            f"(the entry matches the signed tree head of size {head.size}, the list does not)"
        )
        raise _fail(msg)
    for offset, leaf in enumerate(listed):
        seq = first + offset
        if offset >= len(actual):
            msg = (
                f"{entry_name(seq)} is missing: {ENTRIES} ends after {len(entries)} entries "
                f"but the signed tree head of size {head.size} covers it"
            )
            raise _fail(msg)
        if actual[offset] != leaf:
            msg = (
                f"{entry_name(seq)}: its hash is not the one the signed tree head of size "
                f"{head.size} covers"
            )
            raise _fail(msg)
    raise AssertionError("unreachable: the lists differ")  # pragma: no cover


def _root_with(authenticated: merkle.Tree, more: list[bytes]) -> bytes:
    """The head of the authenticated leaves followed by ``more`` (the slow path of errors)."""
    tree = authenticated.copy()
    for leaf in more:
        tree.append_hash(leaf)
    return tree.root()


def _check_entries(present: list[bytes], first: int) -> None:
    """Every covered entry is a canonical JSON object whose ``seq`` is its index."""
    for offset, data in enumerate(present):
        seq = first + offset
        entry = parse_entry(data)
        if entry is None or canonical(entry) != data:
            msg = f"{entry_name(seq)} is not a canonical JSON object, though signed"
            raise _fail(msg)
        if entry.get("seq") != seq:
            msg = f"{entry_name(seq)} says it is entry {entry.get('seq')!r}, though signed"
            raise _fail(msg)
