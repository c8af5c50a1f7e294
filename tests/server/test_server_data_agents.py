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
from onecluster.schema import DatasetAdd, DesiredAttempt, JobSubmit, PushIn

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

    scan = admin.add_dataset(DatasetAdd(name="corpus", site="singapore", path=str(tree)))
    _until(server, planes, lambda: admin.scan(scan.id).state in ("done", "failed"))
    scan = admin.scan(scan.id)
    assert (scan.state, scan.new_version, scan.files_total) == ("done", True, 5), scan.error
    assert scan.root is not None

    transfer = admin.push(PushIn.model_validate({"dataset": "corpus", "to": "shanghai"}))
    assert (transfer.src, [p.name for p in transfer.paths]) == ("singapore", ["default"])
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
        "singapore": "complete",
        "shanghai": "complete",
    }
    assert replicas["singapore"].path == str(tree)
    received = replicas["shanghai"].path
    assert received is not None and _tree(Path(received)) == _tree(tree)
    # Pushing it again sends nothing: shanghai holds all of it.
    again = admin.push(PushIn.model_validate({"dataset": "corpus", "to": "shanghai"}))
    assert (again.state, again.bytes_sent) == ("done", 0)


@pytest.fixture
def three(tmp_path: Path) -> Iterator[dict[str, SiteData]]:
    made = {
        site: SiteData(site, tmp_path / "planes" / site, address="127.0.0.1")
        for site in ("shanghai", "singapore", "tokyo")
    }
    yield made
    for plane in made.values():
        plane.close()


def test_a_job_placed_away_from_its_data_waits_for_it_then_gets_it(
    server: RunningServer, three: dict[str, SiteData], tmp_path: Path
) -> None:
    """The prefetch: the attempt is not handed to its agent until the replica is complete at
    its site; then it is, with ``$ONECLUSTER_DATASET_DIR`` pointing at it."""
    tree = tmp_path / "corpus"
    tree.mkdir()
    (tree / "a.bin").write_bytes(random.Random(3).randbytes(3_000_000))
    admin = server.admin()
    scan = admin.add_dataset(DatasetAdd(name="corpus", site="singapore", path=str(tree)))
    _until(server, three, lambda: admin.scan(scan.id).state == "done")
    # H800s are at Shanghai only: the job must run away from its data, which comes in.
    job = admin.submit(
        JobSubmit(
            team="llm",
            gpus=8,
            duration_s=60.0,
            gpu_types=["H800"],
            dataset="corpus",
            command=["sh", "-c", "ls $ONECLUSTER_DATASET_DIR"],
        )
    )
    assert job.dataset_bytes == 3_000_000
    server.step()
    placed = admin.job(job.id)
    [part] = placed.parts
    site = part.site
    assert placed.state == "running" and site == "shanghai"
    assert placed.reason is not None and placed.reason.startswith("waiting for data")
    stats = admin.stats()
    assert (stats.running, stats.waiting_for_data) == (1, 1)

    def orders() -> list[DesiredAttempt]:
        plane = three[site]
        reply = server.sync(site, data=plane.report())
        plane.apply(reply.data)
        return [a for a in reply.attempts if a.job_id == job.id]

    assert orders() == []  # not handed out while the data is not there
    [prefetch] = [t for t in admin.transfers() if t.job_id == job.id]
    assert (prefetch.reason, prefetch.src, prefetch.dst) == ("prefetch", "singapore", site)

    handed: list[DesiredAttempt] = []

    def ready() -> bool:
        server.step()
        handed[:] = orders()
        _round(server, {s: p for s, p in three.items() if s != site})
        return bool(handed)

    deadline = time.monotonic() + 60
    while not ready():
        assert time.monotonic() < deadline, admin.job(job.id).reason
        time.sleep(0.05)
    [attempt] = handed
    assert attempt.action == "run"
    where = Path(attempt.env["ONECLUSTER_DATASET_DIR"])
    assert _tree(where) == _tree(tree) and where != tree
    assert admin.job(job.id).reason is None
    assert admin.transfer(prefetch.id).state == "done"
    assert admin.stats().waiting_for_data == 0


def test_a_job_whose_data_is_already_there_gets_its_directory_at_once(
    server: RunningServer, three: dict[str, SiteData], tmp_path: Path
) -> None:
    tree = tmp_path / "local"
    tree.mkdir()
    (tree / "x").write_text("x\n")
    admin = server.admin()
    scan = admin.add_dataset(DatasetAdd(name="local", site="singapore", path=str(tree)))
    _until(server, three, lambda: admin.scan(scan.id).state == "done")
    job = admin.submit(
        JobSubmit(
            team="vision", gpus=8, duration_s=60.0, gpu_types=["H100"], dataset="local",
            command=["true"],
        )
    )  # fmt: skip
    server.step()  # places it at Singapore (the data is there), stages it at once
    assert [p.site for p in admin.job(job.id).parts] == ["singapore"]
    reply = server.sync("singapore", data=three["singapore"].report())
    [attempt] = [a for a in reply.attempts if a.job_id == job.id]
    assert attempt.env["ONECLUSTER_DATASET_DIR"] == str(tree)
    assert not [t for t in admin.transfers() if t.job_id == job.id]


def test_a_prefetch_that_fails_fails_the_job_with_its_reason(
    server: RunningServer, three: dict[str, SiteData], tmp_path: Path
) -> None:
    tree = tmp_path / "fragile"
    tree.mkdir()
    (tree / "f.bin").write_bytes(random.Random(5).randbytes(2_000_000))
    admin = server.admin()
    scan = admin.add_dataset(DatasetAdd(name="fragile", site="singapore", path=str(tree)))
    _until(server, three, lambda: admin.scan(scan.id).state == "done")
    (tree / "f.bin").write_bytes(random.Random(6).randbytes(2_000_000))  # edited after the scan
    job = admin.submit(
        JobSubmit(
            team="llm", gpus=8, duration_s=60.0, gpu_types=["H800"], dataset="fragile",
            command=["true"],
        )
    )  # fmt: skip

    def failed() -> bool:
        server.step()
        _round(server, three)
        return admin.job(job.id).state == "failed"

    deadline = time.monotonic() + 60
    while not failed():
        assert time.monotonic() < deadline, admin.job(job.id).reason
        time.sleep(0.05)
    reason = admin.job(job.id).reason or ""
    assert "its dataset fragile could not reach" in reason
    assert "f.bin changed at singapore" in reason
