"""The server and two real data planes (the agents' ``SiteData``, on loopback): a directory
is registered, scanned in place, pushed, and arrives bit for bit, with every step visible
through the API.  The agents' syncs are driven by the test, one round at a time."""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from onecluster.agent._data import SiteData
from onecluster.schema import DatasetAdd, PushIn

if TYPE_CHECKING:
    from conftest import RunningServer

pytestmark = pytest.mark.integration


@pytest.fixture
def planes(tmp_path: Path) -> Iterator[dict[str, SiteData]]:
    made = {
        site: SiteData(site, tmp_path / site, address="127.0.0.1")
        for site in ("shanghai", "singapore")
    }
    yield made
    for plane in made.values():
        plane.close()


def _round(server: RunningServer, planes: dict[str, SiteData]) -> None:
    """One sync of every site: its data report up, its data orders down."""
    for site, plane in planes.items():
        plane.apply(server.sync(site, data=plane.report()).data)


def _until(server: RunningServer, planes: dict[str, SiteData], done: Callable[[], bool]) -> None:
    """Sync rounds until ``done`` (each round waits a little for the planes' threads)."""
    deadline = time.monotonic() + 60
    while not done():
        assert time.monotonic() < deadline, "the data planes did not get there"
        _round(server, planes)
        time.sleep(0.05)


def _tree(top: Path) -> dict[str, bytes]:
    return {str(p.relative_to(top)): p.read_bytes() for p in sorted(top.rglob("*")) if p.is_file()}


def test_a_directory_is_scanned_pushed_and_arrives_whole(
    server: RunningServer, planes: dict[str, SiteData], tmp_path: Path
) -> None:
    rng = random.Random(7)
    tree = tmp_path / "corpus"
    (tree / "shards").mkdir(parents=True)
    for i in range(4):
        (tree / "shards" / f"{i}.bin").write_bytes(rng.randbytes(1_500_000))
    (tree / "README").write_text("the corpus\n")
    admin = server.admin()

    scan = admin.add_dataset(DatasetAdd(name="corpus", site="shanghai", path=str(tree)))
    _until(server, planes, lambda: admin.scan(scan.id).state in ("done", "failed"))
    scan = admin.scan(scan.id)
    assert (scan.state, scan.new_version, scan.files_total) == ("done", True, 5), scan.error
    assert scan.root is not None

    transfer = admin.push(PushIn.model_validate({"dataset": "corpus", "to": "singapore"}))
    assert (transfer.src, [p.name for p in transfer.paths]) == ("shanghai", ["default"])
    _until(server, planes, lambda: admin.transfer(transfer.id).state in ("done", "failed"))
    _round(server, planes)  # the destination lists its new replica
    done = admin.transfer(transfer.id)
    assert (done.state, done.bytes_done, done.chunks_done) == (
        "done",
        6_000_011,
        done.chunks_total,
    ), done.error
    assert done.bytes_sent > 0
    assert [p.name for p in done.paths] == ["default"]

    [version] = admin.dataset("corpus").versions
    replicas = {r.site: r for r in version.replicas}
    assert {s: r.state for s, r in replicas.items()} == {
        "shanghai": "complete",
        "singapore": "complete",
    }
    assert replicas["shanghai"].path == str(tree)
    received = replicas["singapore"].path
    assert received is not None and _tree(Path(received)) == _tree(tree)
    # Pushing it again sends nothing: singapore holds all of it.
    again = admin.push(PushIn.model_validate({"dataset": "corpus", "to": "singapore"}))
    assert (again.state, again.bytes_sent) == ("done", 0)
