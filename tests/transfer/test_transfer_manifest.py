"""Manifests: one tree, one encoding, one root; corrupt bytes are refused by name."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from onecluster.errors import IntegrityError, ValidationError
from onecluster.transfer import (
    ChunkRef,
    Entry,
    EntryKind,
    Manifest,
    check_relative_path,
    decode_manifest,
    digest,
    encode_manifest,
)


def _file(path: str, *parts: bytes) -> Entry:
    chunks = tuple(ChunkRef(digest(p), len(p)) for p in parts)
    return Entry(path, EntryKind.FILE, size=sum(len(p) for p in parts), chunks=chunks)


names = st.text(alphabet="abcxyz_-.0", min_size=1, max_size=6).filter(
    lambda s: s not in (".", "..")
)


@st.composite
def manifests(draw: st.DrawFn) -> Manifest:
    paths = sorted(set(draw(st.lists(names, max_size=12))), key=str.encode)
    entries = []
    for path in paths:
        kind = draw(st.sampled_from(list(EntryKind)))
        if kind is EntryKind.FILE:
            entries.append(
                _file(path, *draw(st.lists(st.binary(min_size=1, max_size=9), max_size=4)))
            )
        elif kind is EntryKind.SYMLINK:
            entries.append(Entry(path, kind, mode=0o777, target=draw(names)))
        else:
            entries.append(Entry(path, kind, mode=0o755))
    return Manifest(tuple(entries))


@given(manifests())
def test_a_manifest_survives_its_encoding_with_its_root(manifest: Manifest) -> None:
    back = decode_manifest(encode_manifest(manifest), root=manifest.root)
    assert back == manifest and back.root == manifest.root


@given(manifests(), st.data())
def test_any_truncation_or_flipped_byte_is_refused_or_changes_the_root(
    manifest: Manifest, data: st.DataObject
) -> None:
    raw = bytearray(encode_manifest(manifest))
    cut = data.draw(st.integers(0, len(raw) - 1))
    with pytest.raises(IntegrityError):
        decode_manifest(bytes(raw[:cut]), root=manifest.root)
    at = data.draw(st.integers(0, len(raw) - 1))
    raw[at] ^= 0x5A
    with pytest.raises(IntegrityError):
        decode_manifest(bytes(raw), root=manifest.root)


def test_a_changed_byte_changes_the_root() -> None:
    one = Manifest((_file("a", b"hello"),))
    two = Manifest((_file("a", b"hellp"),))
    moved = Manifest((_file("b", b"hello"),))
    assert len({one.root, two.root, moved.root}) == 3


def test_a_chunk_found_twice_is_counted_once() -> None:
    manifest = Manifest((_file("a", b"x" * 10, b"y"), _file("b", b"x" * 10)))
    assert manifest.bytes_total == 21 and len(manifest.chunks) == 2
    assert [(p, o) for _, p, o, _ in manifest.places()] == [("a", 0), ("a", 10), ("b", 0)]


@pytest.mark.parametrize(
    "path", ["", "/etc/passwd", "a/../b", "../x", "a//b", "./a", "a/", "a\x00b"]
)
def test_paths_that_leave_the_tree_are_refused(path: str) -> None:
    with pytest.raises(ValidationError, match="not a plain relative path"):
        check_relative_path(path)


def test_unsorted_entries_and_sizes_that_do_not_add_up_are_refused() -> None:
    with pytest.raises(ValidationError, match="not sorted"):
        Manifest((_file("b", b"1"), _file("a", b"2")))
    with pytest.raises(ValidationError, match="do not add up"):
        Manifest((Entry("a", EntryKind.FILE, size=5, chunks=(ChunkRef(digest(b"x"), 1),)),))


def test_a_hostile_count_is_refused_before_anything_is_allocated() -> None:
    raw = b"OCMF\x00\x01\xff\xff\xff\xff"
    with pytest.raises(IntegrityError, match="more than its bytes hold"):
        decode_manifest(raw)
    with pytest.raises(IntegrityError, match="format 9"):
        decode_manifest(b"OCMF\x00\x09\x00\x00\x00\x00")
