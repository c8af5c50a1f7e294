"""Tampering with a stored register: ``verify`` names the entry at fault, and
``Register.open`` refuses the register (and leaves its files as it found them)."""

from __future__ import annotations

import base64
import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from onecluster.clock import ManualClock
from onecluster.errors import IntegrityError
from onecluster.register import Register, SignedHead, verify
from onecluster.register._files import checkpoint_line, parse_checkpoint
from onecluster.register._keys import fingerprint

from .conftest import history

ENTRIES, CHECKPOINTS = "entries.jsonl", "checkpoints.jsonl"
TARGET = 12  # appended concurrently, in a batch of several (most likely)


@pytest.fixture(scope="module")
def original(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("history") / "register"
    history(directory, ManualClock(1_795_000_000.0))
    return directory


@pytest.fixture
def copy(original: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(original, tmp_path / "register"))


def _lines(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines(keepends=True)


def _batch(directory: Path, seq: int) -> tuple[int, int]:
    """(index of the checkpoint line whose batch holds ``seq``, the batch's first entry)."""
    for index, line in enumerate(_lines(directory / CHECKPOINTS)):
        record = json.loads(line)
        first = record["size"] - len(record["leaves"])
        if first <= seq < record["size"]:
            return index, first
    raise AssertionError(seq)


def _edit_checkpoint(directory: Path, index: int, edit: Callable[[dict], None]) -> None:
    lines = _lines(directory / CHECKPOINTS)
    record = json.loads(lines[index])
    edit(record)
    lines[index] = json.dumps(record, sort_keys=True, separators=(",", ":")).encode() + b"\n"
    (directory / CHECKPOINTS).write_bytes(b"".join(lines))


def _flip_hex(text: str, at: int = 5) -> str:
    return text[:at] + ("0" if text[at] != "0" else "1") + text[at + 1 :]


def _resign(directory: Path, index: int, key: Ed25519PrivateKey) -> None:
    lines = _lines(directory / CHECKPOINTS)
    stored = parse_checkpoint(lines[index].rstrip(b"\n"))
    assert stored is not None
    head = stored.head
    signature = key.sign(head.note().encode())
    forged = SignedHead(head.origin, head.size, head.root, signature, head.timestamp)
    lines[index] = checkpoint_line(forged, list(stored.leaves))
    (directory / CHECKPOINTS).write_bytes(b"".join(lines))


# Each case tampers with a copy of the history and returns the entry the error must name.


def edit_entry_content(d: Path) -> int:
    lines = _lines(d / ENTRIES)
    lines[TARGET] = lines[TARGET].replace(b"clinical-notes", b"clinical-notez")
    (d / ENTRIES).write_bytes(b"".join(lines))
    return TARGET


def edit_entry_seq(d: Path) -> int:
    lines = _lines(d / ENTRIES)
    lines[TARGET] = lines[TARGET].replace(b'"seq":12', b'"seq":13')
    (d / ENTRIES).write_bytes(b"".join(lines))
    return TARGET


def edit_checkpoint_root(d: Path) -> int:
    index, first = _batch(d, TARGET)
    _edit_checkpoint(d, index, lambda r: r.update(root=_flip_hex(r["root"])))
    return first


def edit_checkpoint_leaf(d: Path) -> int:
    index, first = _batch(d, TARGET)

    def edit(record: dict) -> None:
        record["leaves"][TARGET - first] = _flip_hex(record["leaves"][TARGET - first])

    _edit_checkpoint(d, index, edit)
    return TARGET


def edit_signature(d: Path) -> int:
    index, first = _batch(d, TARGET)

    def edit(record: dict) -> None:
        raw = bytearray(base64.b64decode(record["signature"]))
        raw[20] ^= 0x01
        record["signature"] = base64.b64encode(bytes(raw)).decode()

    _edit_checkpoint(d, index, edit)
    return first


def edit_entry_and_its_leaf(d: Path) -> int:
    from onecluster.export.merkle import leaf_hash

    lines = _lines(d / ENTRIES)
    lines[TARGET] = lines[TARGET].replace(b"clinical-notes", b"clinical-notez")
    (d / ENTRIES).write_bytes(b"".join(lines))
    index, first = _batch(d, TARGET)
    leaf = leaf_hash(lines[TARGET].rstrip(b"\n")).hex()
    _edit_checkpoint(d, index, lambda r: r["leaves"].__setitem__(TARGET - first, leaf))
    return first


def delete_entry(d: Path) -> int:
    lines = _lines(d / ENTRIES)
    del lines[TARGET]
    (d / ENTRIES).write_bytes(b"".join(lines))
    return TARGET


def insert_entry(d: Path) -> int:
    lines = _lines(d / ENTRIES)
    lines.insert(TARGET, lines[5])
    (d / ENTRIES).write_bytes(b"".join(lines))
    return TARGET


def reorder_entries(d: Path) -> int:
    lines = _lines(d / ENTRIES)
    lines[TARGET], lines[TARGET + 1] = lines[TARGET + 1], lines[TARGET]
    (d / ENTRIES).write_bytes(b"".join(lines))
    return TARGET


def truncate_entries(d: Path) -> int:
    (d / ENTRIES).write_bytes(b"".join(_lines(d / ENTRIES)[:15]))
    return 15


def truncate_entries_mid_line(d: Path) -> int:
    lines = _lines(d / ENTRIES)
    (d / ENTRIES).write_bytes(b"".join(lines[:15]) + lines[15][:30])
    return 15


def delete_checkpoint(d: Path) -> int:
    index, first = _batch(d, TARGET)
    lines = _lines(d / CHECKPOINTS)
    del lines[index]
    (d / CHECKPOINTS).write_bytes(b"".join(lines))
    return first


def duplicate_checkpoint(d: Path) -> int:
    index, _ = _batch(d, 7)
    lines = _lines(d / CHECKPOINTS)
    lines.insert(index + 1, lines[index])
    (d / CHECKPOINTS).write_bytes(b"".join(lines))
    return 8  # the entry after the duplicated batch is no longer where the next head starts


def resign_with_another_key(d: Path) -> int:
    index, first = _batch(d, TARGET)
    _resign(d, index, Ed25519PrivateKey.generate())
    return first


CASES = [
    edit_entry_content,
    edit_entry_seq,
    edit_checkpoint_root,
    edit_checkpoint_leaf,
    edit_signature,
    edit_entry_and_its_leaf,
    delete_entry,
    insert_entry,
    reorder_entries,
    truncate_entries,
    truncate_entries_mid_line,
    delete_checkpoint,
    duplicate_checkpoint,
    resign_with_another_key,
]


def test_the_history_verifies(original: Path) -> None:
    report = verify(original)
    assert (report.kind, report.size, report.entries_checked) == ("register", 20, 20)
    lines = _lines(original / CHECKPOINTS)
    assert len(lines) < 21  # the concurrent appends shared batches


@pytest.mark.parametrize("tamper", CASES, ids=lambda f: f.__name__)
def test_tampering_is_named_by_verify_and_refused_by_open(
    copy: Path, tamper: Callable[[Path], int]
) -> None:
    seq = tamper(copy)
    name = f"entry {seq} (line {seq + 1} of entries.jsonl)"
    with pytest.raises(IntegrityError) as verified:
        verify(copy)
    assert verified.value.message.startswith(name), verified.value.message
    before = {p.name: p.read_bytes() for p in copy.iterdir()}
    with pytest.raises(IntegrityError) as opened:
        Register.open(copy)
    assert opened.value.message.startswith(name), opened.value.message
    assert {p.name: p.read_bytes() for p in copy.iterdir()} == before


def test_a_register_re_signed_with_another_key_fails_against_the_pinned_key(
    copy: Path, original: Path
) -> None:
    with Register.open(original) as reg:
        pinned = reg.public_key()  # the auditor's copy of the key
    other = Ed25519PrivateKey.generate()
    for index in range(len(_lines(copy / CHECKPOINTS))):
        _resign(copy, index, other)
    # with public.key unchanged, the directory's own key catches it
    with pytest.raises(IntegrityError, match=r"checkpoint line 1 .* bad signature"):
        verify(copy)
    # with public.key replaced too, only a pinned key (or its fingerprint) catches it
    raw = other.public_key().public_bytes_raw()
    (copy / "public.key").write_text(raw.hex())
    report = verify(copy)
    assert report.key_fingerprint == fingerprint(raw) != fingerprint(pinned)
    with pytest.raises(IntegrityError, match="bad signature"):
        verify(copy, public_key=pinned)
    with pytest.raises(IntegrityError, match=r"not the public key of signing\.key"):
        Register.open(copy)


def test_an_entry_added_after_the_last_head_is_named_and_refused(copy: Path) -> None:
    forged = b'{"at":"2027-01-01T00:00:00.000000Z","export":"forged","seq":20}\n'
    with (copy / ENTRIES).open("ab") as f:
        f.write(forged)
    name = r"^entry 20 \(line 21 of entries\.jsonl\) is not covered"
    with pytest.raises(IntegrityError, match=name):
        verify(copy)
    with pytest.raises(IntegrityError, match=name):
        Register.open(copy)


def test_every_single_byte_edit_is_detected(tmp_path: Path, clock: ManualClock) -> None:
    directory = tmp_path / "small"
    with Register.open(directory, clock=clock, group_wait_s=0) as reg:
        for n in range(3):
            reg.append({"export": f"e{n}", "type": "intent", "bytes": n})
    for name in (ENTRIES, CHECKPOINTS):
        path = directory / name
        data = path.read_bytes()
        for position in range(len(data)):
            edited = bytearray(data)
            edited[position] ^= 0x01
            path.write_bytes(bytes(edited))
            with pytest.raises(IntegrityError):
                verify(directory)
            with pytest.raises(IntegrityError):
                Register.open(directory).close()
            assert path.read_bytes() == bytes(edited), f"{name}[{position}] was repaired"
        path.write_bytes(data)
    assert verify(directory).entries_checked == 3
