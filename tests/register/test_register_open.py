"""``verify_open``: the register a server holds open verifies while it appends, and any
tampering with its files — an entry, the key, the latest checkpoint — is named."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from onecluster.errors import IntegrityError
from onecluster.register import Register, verify_open
from onecluster.register._keys import create_key_pair

from .conftest import intent

ENTRIES, CHECKPOINTS, PUBLIC_KEY = "entries.jsonl", "checkpoints.jsonl", "public.key"


def test_an_open_register_verifies_as_it_grows(register: Register) -> None:
    assert verify_open(register).entries_checked == 0
    for n in range(3):
        register.append(intent(n))
    report = verify_open(register)
    assert (report.kind, report.size, report.entries_checked) == ("register", 3, 3)
    assert report.root == register.head().root.hex()


def test_it_verifies_while_batches_are_being_written(tmp_path: Path) -> None:
    """Entries past the last head (a batch being written) are not a failure here."""
    with Register.open(tmp_path / "register", group_wait_s=0.001) as register:
        done = threading.Event()

        def append() -> None:
            for n in range(200):
                register.append(intent(n))
            done.set()

        writer = threading.Thread(target=append)
        writer.start()
        sizes = [verify_open(register).size]
        while not done.is_set():
            sizes.append(verify_open(register).size)  # never an IntegrityError
        writer.join()
        assert sizes == sorted(sizes)
        assert verify_open(register).entries_checked == 200


def test_an_edited_entry_is_named(register: Register, tmp_path: Path) -> None:
    for n in range(3):
        register.append(intent(n))
    path = tmp_path / "register" / ENTRIES
    path.write_bytes(path.read_bytes().replace(b"exp-1", b"exp-9"))
    with pytest.raises(IntegrityError, match="entry 1"):
        verify_open(register)


def test_a_replaced_public_key_is_named(register: Register, tmp_path: Path) -> None:
    (tmp_path / "other").mkdir()
    create_key_pair(tmp_path / "other")
    (tmp_path / "register" / PUBLIC_KEY).write_bytes((tmp_path / "other" / PUBLIC_KEY).read_bytes())
    with pytest.raises(IntegrityError, match=r"public\.key"):
        verify_open(register)


def test_a_checkpoints_file_cut_short_is_named(register: Register, tmp_path: Path) -> None:
    register.append(intent(0))
    register.append(intent(1))
    path = tmp_path / "register" / CHECKPOINTS
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(lines[:-1]))
    with pytest.raises(IntegrityError, match="latest signed tree head"):
        verify_open(register)
