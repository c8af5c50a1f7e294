"""Scanning a directory in place: content-defined chunks, refusals by name."""

from __future__ import annotations

import os
import random
import socket
import threading
from pathlib import Path

import pytest

from onecluster.errors import IntegrityError, ValidationError
from onecluster.storage import ScanCancelledError, ScanProgress, scan_tree
from onecluster.storage import _scan as scan_module
from onecluster.transfer import CHUNK_MAX, CHUNK_MIN, EntryKind


def test_a_tree_is_scanned_whole_with_progress(tree: Path) -> None:
    seen: list[ScanProgress] = []
    manifest = scan_tree(tree, progress=seen.append)
    kinds = {e.path: e.kind for e in manifest.entries}
    assert kinds["empty"] is EntryKind.DIRECTORY
    assert kinds["train/latest"] is EntryKind.SYMLINK
    assert manifest.files == 22
    assert manifest.bytes_total == sum(
        p.stat().st_size for p in tree.rglob("*") if p.is_file() and not p.is_symlink()
    )
    assert seen[0] == ScanProgress(0, 0, 22, manifest.bytes_total)
    assert seen[-1] == ScanProgress(22, manifest.bytes_total, 22, manifest.bytes_total)
    big = next(e for e in manifest.entries if e.path == "train/big.bin")
    assert len(big.chunks) > 1
    assert all(CHUNK_MIN <= c.size <= CHUNK_MAX for c in big.chunks[:-1])
    assert {e.path: e.mode for e in manifest.entries}["README"] == 0o640


def test_the_same_content_gives_the_same_root_and_a_change_another(tree: Path) -> None:
    first = scan_tree(tree)
    assert scan_tree(tree).root == first.root
    (tree / "README").write_text("a dataset!\n")
    assert scan_tree(tree).root != first.root


def test_an_insertion_shifts_no_chunk_downstream(tmp_path: Path) -> None:
    data = random.Random(7).randbytes(12_000_000)
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "f").write_bytes(data)
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "f").write_bytes(data[:6_000_000] + b"inserted" + data[6_000_000:])
    before = {c.digest for e in scan_tree(tmp_path / "a").entries for c in e.chunks}
    after = [c for e in scan_tree(tmp_path / "b").entries for c in e.chunks]
    new = [c for c in after if c.digest not in before]
    assert sum(c.size for c in new) < 0.25 * len(data)  # one or two chunks around the insert
    assert len(new) <= 2


def test_a_link_out_of_the_tree_is_refused_by_name(tree: Path) -> None:
    (tree / "train" / "passwords").symlink_to("../../../etc/passwd")
    with pytest.raises(ValidationError, match=r"train/passwords points outside"):
        scan_tree(tree)
    (tree / "train" / "passwords").unlink()
    (tree / "abs").symlink_to("/etc/passwd")
    with pytest.raises(ValidationError, match="abs points outside"):
        scan_tree(tree)


def test_a_special_file_and_a_missing_path_are_refused(tree: Path, tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="does not exist"):
        scan_tree(tmp_path / "nosuch")
    with pytest.raises(ValidationError, match="is not a directory"):
        scan_tree(tree / "README")
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(tree / "control.sock"))
    try:
        with pytest.raises(ValidationError, match=r"control\.sock is not a file"):
            scan_tree(tree)
    finally:
        sock.close()


def test_a_name_that_is_not_utf8_is_refused(tree: Path) -> None:
    os.close(os.open(os.fsencode(tree) + b"/bad\xff", os.O_CREAT | os.O_WRONLY))
    with pytest.raises(ValidationError, match="not UTF-8"):
        scan_tree(tree)


def test_a_file_that_keeps_changing_while_read_fails_the_scan(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = scan_module.digest
    target = tree / "README"

    def writer_meanwhile(data: bytes | bytearray | memoryview) -> bytes:
        if bytes(data).startswith(b"a dataset"):
            target.write_text(target.read_text() + "more\n")  # the file grows as it is read
        return real(data)

    monkeypatch.setattr(scan_module, "digest", writer_meanwhile)
    with pytest.raises(IntegrityError, match="README kept changing while it was read"):
        scan_tree(tree)


def test_a_scan_can_be_stopped(tree: Path) -> None:
    stop = threading.Event()
    stop.set()
    with pytest.raises(ScanCancelledError):
        scan_tree(tree, stop=stop)
