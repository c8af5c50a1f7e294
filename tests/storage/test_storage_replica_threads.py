"""Receiving with many streams at once: every stream writes and commits while the others
write, and none of them dies of it."""

from __future__ import annotations

import os
import random
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from onecluster.storage import DataStore, _replica, scan_tree


@pytest.fixture
def busy_switching() -> Iterator[None]:
    """Threads take turns every 10 µs: a race shows within a second."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    yield
    sys.setswitchinterval(before)


@pytest.mark.usefixtures("busy_switching")
def test_streams_that_commit_while_others_write_all_finish(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 1,500 small files (one chunk each) written by 8 streams, each write committing (as
    # happens every 0.5 s): a commit counts the bytes present while other streams add chunks.
    monkeypatch.setattr(_replica, "_COMMIT_S", 0.0)
    monkeypatch.setattr(os, "fdatasync", lambda _fd: None)  # the disk is not what is tested
    rng = random.Random(3)
    top = tmp_path / "images"
    top.mkdir()
    for i in range(1500):
        (top / f"{i:04}.jpg").write_bytes(rng.randbytes(rng.randint(100, 400)))
    manifest = scan_tree(top)
    replica = DataStore(tmp_path / "dst").receive("ds", manifest)
    needed = replica.open()
    data = {p.name: p.read_bytes() for p in top.iterdir()}
    by_digest = {c.digest: data[path] for c, path in zip(needed, sorted(data), strict=True)}
    failures: list[BaseException] = []

    def stream(part: list[bytes]) -> None:
        try:
            for chunk in part:
                replica.write(chunk, by_digest[chunk])
        except BaseException as exc:  # noqa: BLE001 - collected and reported below
            failures.append(exc)

    digests = list(by_digest)
    threads = [threading.Thread(target=stream, args=(digests[k::8],)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []
    assert replica.needed() == []
    final = replica.finish()
    assert {p.name: p.read_bytes() for p in final.iterdir()} == data
