"""The data plane on loopback: a fetch over several paths, relays, corruption, stalls."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from onecluster.dataplane import DataServer, Fetch, Route, Served, fetch_manifest
from onecluster.errors import IntegrityError, UnavailableError
from onecluster.storage import DataStore
from onecluster.transfer import ChunkRef, decode_manifest

from .conftest import Grants, Proxy, Source


def _tree_bytes(top: Path) -> dict[str, bytes]:
    return {str(p.relative_to(top)): p.read_bytes() for p in sorted(top.rglob("*")) if p.is_file()}


def _receive(
    source: Source, tmp_path: Path, routes: list[Route], *, via: int = 0, stall_s: float = 5.0
) -> tuple[Fetch, Path]:
    """Fetch the source's version over ``routes`` (its manifest over ``routes[via]``)."""
    raw = fetch_manifest(routes[via], "t1", "secret")
    manifest = decode_manifest(raw, root=source.manifest.root)
    replica = DataStore(tmp_path / "dst").receive("ds", manifest)
    fetch = Fetch(
        transfer="t1",
        ticket="secret",
        sink=replica,
        chunks=replica.open(),
        routes=routes,
        window_bytes=4 << 20,
        stall_s=stall_s,
    )
    fetch.start()
    assert fetch.wait(60), "the fetch did not finish"
    fetch.stop()
    if fetch.error is not None:
        raise fetch.error
    return fetch, replica.finish()


def test_a_version_crosses_two_paths_at_once_bit_for_bit(source: Source, tmp_path: Path) -> None:
    source.serve(rate_bps=200e6)  # a circuit's pace: each path gets its share
    other = Proxy(("127.0.0.1", source.server.port))
    try:
        routes = [
            Route("a", (("127.0.0.1", source.server.port),)),
            Route("b", (("127.0.0.1", other.port),)),
        ]
        fetch, final = _receive(source, tmp_path, routes)
    finally:
        other.close()
    assert _tree_bytes(final) == _tree_bytes(source.tree)
    used = {p.name: p.chunks for p in fetch.paths()}
    assert used["a"] > 0 and used["b"] > 0
    assert fetch.chunks_wire == len(source.manifest.chunks)
    # the text file went compressed: fewer bytes on the wire than in the tree
    assert fetch.bytes_wire < source.manifest.bytes_total


def test_a_relay_carries_a_fetch_it_is_granted_for(source: Source, tmp_path: Path) -> None:
    source.serve()
    relay_grants = Grants({("t1", "secret"): Served(relay=True)})
    relay = DataServer(relay_grants, host="127.0.0.1")
    try:
        route = Route("via", (("127.0.0.1", relay.port), ("127.0.0.1", source.server.port)))
        _, final = _receive(source, tmp_path, [route])
        assert _tree_bytes(final) == _tree_bytes(source.tree)
        relay_grants.table.clear()
        with pytest.raises(UnavailableError, match="not served here"):
            fetch_manifest(route, "t1", "secret")
    finally:
        relay.close()


def test_a_wrong_ticket_gets_nothing(source: Source) -> None:
    source.serve()
    route = Route("a", (("127.0.0.1", source.server.port),))
    with pytest.raises(UnavailableError, match="refused the transfer"):
        fetch_manifest(route, "t1", "guess")


def test_corrupt_chunks_are_fetched_again_and_never_kept(source: Source, tmp_path: Path) -> None:
    source.serve(rates={"clean": 50e6})  # the noisy path gets a good share of the chunks
    bad = Proxy(("127.0.0.1", source.server.port), flip_every=400_000)
    try:
        routes = [
            Route("clean", (("127.0.0.1", source.server.port),)),
            Route("noisy", (("127.0.0.1", bad.port),)),
        ]
        fetch, final = _receive(source, tmp_path, routes)
        noisy = next(p for p in fetch.paths() if p.name == "noisy")
        assert noisy.corrupt > 0
        assert _tree_bytes(final) == _tree_bytes(source.tree)
    finally:
        bad.close()


def test_a_path_that_goes_silent_hands_its_chunks_to_the_others(
    source: Source, tmp_path: Path
) -> None:
    source.serve(rate_bps=40e6)  # slow enough that the cut lands mid-transfer
    cut = Proxy(("127.0.0.1", source.server.port))
    try:
        routes = [
            Route("cut", (("127.0.0.1", cut.port),)),
            Route("spare", (("127.0.0.1", source.server.port),)),
        ]
        cut.silent.set()
        _, final = _receive(source, tmp_path, routes, via=1, stall_s=1.0)
        assert _tree_bytes(final) == _tree_bytes(source.tree)
    finally:
        cut.close()


def test_a_file_changed_at_the_source_ends_the_fetch_naming_it(
    source: Source, tmp_path: Path
) -> None:
    source.serve()
    target = next(e for e in source.manifest.entries if e.size > 0)
    (source.tree / target.path).write_bytes(os.urandom(target.size))
    route = Route("a", (("127.0.0.1", source.server.port),))
    with pytest.raises(IntegrityError, match=f"{target.path} changed at this site after version"):
        _receive(source, tmp_path, [route])


def test_a_bug_in_a_stream_ends_the_fetch_with_its_reason_instead_of_hanging(
    source: Source,
) -> None:
    source.serve()

    class Broken:
        def write(self, chunk: bytes, data: bytes) -> bool:
            raise RuntimeError("a bug")

    route = Route("a", (("127.0.0.1", source.server.port),))
    chunks = [ChunkRef(d, s) for d, s in source.manifest.chunks.items()]
    fetch = Fetch(
        transfer="t1", ticket="secret", sink=Broken(), chunks=chunks, routes=[route],
        window_bytes=4 << 20,
    )  # fmt: skip
    fetch.start()
    assert fetch.wait(30)
    fetch.stop()
    assert fetch.error is not None and "unexpected RuntimeError in a stream: a bug" in str(
        fetch.error
    )
