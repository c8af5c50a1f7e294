"""Receiving a version: verified chunks only, resume after a crash, the final rename."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from onecluster.errors import IntegrityError, NotFoundError, StorageError
from onecluster.storage import DataStore, scan_tree


def _same_tree(a: Path, b: Path) -> None:
    def listing(top: Path) -> dict[str, object]:
        out: dict[str, object] = {}
        for p in sorted(top.rglob("*")):
            rel = str(p.relative_to(top))
            if p.is_symlink():
                out[rel] = ("link", str(p.readlink()))
            elif p.is_dir():
                out[rel] = ("dir", p.stat().st_mode & 0o7777)
            else:
                out[rel] = ("file", p.read_bytes(), p.stat().st_mode & 0o7777)
        return out

    assert listing(a) == listing(b)


def test_a_version_received_chunk_by_chunk_is_the_tree_bit_for_bit(
    tree: Path, tmp_path: Path
) -> None:
    manifest = scan_tree(tree)
    source = DataStore(tmp_path / "src")
    source.register("ds", tree, manifest)
    reader = source.reader("ds", manifest.root)
    dest = DataStore(tmp_path / "dst")
    replica = dest.receive("ds", manifest)
    needed = replica.open()
    assert {c.digest for c in needed} == set(manifest.chunks)
    for chunk in needed:
        assert replica.write(chunk.digest, reader.read(chunk.digest))
    final = replica.finish()
    _same_tree(tree, final)
    [record] = dest.replicas()
    assert record.complete and record.dir == final and record.bytes_present == manifest.bytes_total


def test_a_corrupt_chunk_is_refused_and_nothing_is_written(tree: Path, tmp_path: Path) -> None:
    manifest = scan_tree(tree)
    replica = DataStore(tmp_path / "dst").receive("ds", manifest)
    chunk = replica.open()[0]
    with pytest.raises(IntegrityError, match="arrived corrupt"):
        replica.write(chunk.digest, b"\x00" * chunk.size)
    assert chunk in replica.needed()
    with pytest.raises(IntegrityError, match="still missing"):
        replica.finish()


def test_after_a_crash_every_verified_chunk_is_kept(tree: Path, tmp_path: Path) -> None:
    """Chunks recorded in the index and chunks written but not yet recorded both survive:
    only what never reached the disk is needed again."""
    manifest = scan_tree(tree)
    source = DataStore(tmp_path / "src")
    source.register("ds", tree, manifest)
    reader = source.reader("ds", manifest.root)
    first = DataStore(tmp_path / "dst").receive("ds", manifest)
    needed = first.open()
    half = needed[: len(needed) // 2]
    for chunk in half[:3]:
        first.write(chunk.digest, reader.read(chunk.digest))
    first.commit()
    for chunk in half[3:]:  # written, never committed: the process dies here
        first.write(chunk.digest, reader.read(chunk.digest))
    # a new agent process on the same directory
    again = DataStore(tmp_path / "dst").receive("ds", manifest)
    left = again.open()
    assert {c.digest for c in left} == {c.digest for c in needed[len(needed) // 2 :]}
    for chunk in left:
        again.write(chunk.digest, reader.read(chunk.digest))
    _same_tree(tree, again.finish())


def test_a_source_file_changed_after_its_scan_is_named(tree: Path, tmp_path: Path) -> None:
    manifest = scan_tree(tree)
    store = DataStore(tmp_path / "src", site="shanghai")
    store.register("ds", tree, manifest)
    reader = store.reader("ds", manifest.root)
    (tree / "README").write_text("edited\n")
    readme = next(e for e in manifest.entries if e.path == "README")
    with pytest.raises(IntegrityError, match=r"README changed at shanghai after version"):
        reader.read(readme.chunks[0].digest)
    with pytest.raises(NotFoundError, match="holds no complete replica"):
        store.reader("ds", b"\x01" * 32)


def test_a_rescan_of_the_same_directory_forgets_the_old_version(tree: Path, tmp_path: Path) -> None:
    store = DataStore(tmp_path / "src")
    old = scan_tree(tree)
    store.register("ds", tree, old)
    (tree / "README").write_text("v2\n")
    new = scan_tree(tree)
    store.register("ds", tree, new)
    assert [r.root for r in store.replicas()] == [new.root]
    assert store.manifest(old.root) == old  # kept: a partial replica elsewhere may need it


def test_local_copies_are_found_by_digest(tree: Path, tmp_path: Path) -> None:
    store = DataStore(tmp_path / "src")
    manifest = scan_tree(tree)
    store.register("ds", tree, manifest)
    places = store.index.locate(manifest.chunks)
    assert set(places) == set(manifest.chunks)
    digest, path, offset, _ = next(iter(manifest.places()))
    assert places[digest].file == tree / path and places[digest].offset == offset


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a small tmpfs needs root")
def test_a_full_disk_is_named_before_anything_is_fetched(tree: Path, tmp_path: Path) -> None:
    small = tmp_path / "small"
    small.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(small)], check=True)
    try:
        store = DataStore(small / "data")
        replica = store.receive("ds", scan_tree(tree))
        with pytest.raises(StorageError, match=r"needs 0\.\d+ GB more .* only 0\.00 GB are free"):
            replica.open()
        replica.close()
        store.close()
    finally:
        subprocess.run(["umount", str(small)], check=True)


def _open_fds() -> int:
    return sum(1 for _ in Path("/proc/self/fd").iterdir())


def test_a_version_of_more_files_than_a_process_may_open_is_received(tmp_path: Path) -> None:
    """Files are opened as their chunks arrive and closed again: the receiver never holds more
    than a few dozen open, however many files the version has."""
    top = tmp_path / "many"
    top.mkdir()
    for i in range(600):
        (top / f"{i:04}.txt").write_text(f"file {i}\n" * (i % 7))
    manifest = scan_tree(top)
    source = DataStore(tmp_path / "src")
    source.register("ds", top, manifest)
    reader = source.reader("ds", manifest.root)
    replica = DataStore(tmp_path / "dst").receive("ds", manifest)
    before = _open_fds()
    most = before
    for chunk in replica.open():
        replica.write(chunk.digest, reader.read(chunk.digest))
        most = max(most, _open_fds())
    assert most - before <= 64 + 64 + 8  # the reader's files and the receiver's, in one process
    _same_tree(top, replica.finish())
    reader.close()
    assert _open_fds() <= before  # the receiver closed all of its own
